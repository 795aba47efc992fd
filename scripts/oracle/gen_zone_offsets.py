#!/usr/bin/env python3
"""Reference UTC offsets for every zone, to check the engine's zone layer.

For each name in zoneinfo.available_timezones() (the host's tz database 2025b,
what the reference reads), record `utcoffset()` in seconds at a fixed sample of
instants: pre-1900 (Local Mean Time, second-level offsets), the 20th century,
today, the years around 2037 where chrono-tz's tables end, and far future
(2100-2400, where only the zone's POSIX rule answers). Calls zoneinfo only.

Run:  .venv/bin/python scripts/oracle/gen_zone_offsets.py
Writes fixtures/oracle/zone_offsets.json (deterministic).
"""

from __future__ import annotations

import json
import os
import random
from datetime import UTC, datetime
from zoneinfo import ZoneInfo, available_timezones

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "fixtures", "oracle", "zone_offsets.json")


def main() -> None:
    rnd = random.Random(20251202)
    lo, hi = datetime(1850, 1, 1, tzinfo=UTC).timestamp(), datetime(2400, 12, 31, tzinfo=UTC).timestamp()
    fixed = [
        datetime(y, m, 15, 12, tzinfo=UTC).timestamp()
        for y in (1880, 1950, 2026, 2036, 2038, 2039, 2050, 2100, 2150, 2399)
        for m in (1, 7)
    ]
    zones = {}
    for name in sorted(available_timezones()):
        tz = ZoneInfo(name)
        instants = fixed + [rnd.uniform(lo, hi) for _ in range(12)]
        rows = []
        for t in instants:
            t_ms = int(t) // 60 * 60 * 1000
            off = datetime.fromtimestamp(t_ms / 1000, tz).utcoffset()
            rows.append([t_ms, int(off.total_seconds())])
        zones[name] = rows
    meta = {"generator": "gen_zone_offsets.py", "note": "[t_ms, utcoffset seconds east of UTC]"}
    with open(OUT, "w") as f:
        json.dump({"meta": meta, "zones": zones}, f, separators=(",", ":"))
        f.write("\n")


if __name__ == "__main__":
    main()
