#!/usr/bin/env python3
"""Extra differential cases for the cron layer (parse, encode, decode, to_cron).

gen_vectors.py covers the documented behaviour; this adds a few thousand
random inputs from a wider grammar (mixed-case and Unicode names, odd
whitespace, zero padding, steps on ranges and single values, lists mixing
Sunday spellings, extended tokens) and random stored strings (version
prefixes, every tag, lenient integers, stray separators). Every result is
what the installed zae-limiter 0.17.0 returns; nothing is re-implemented.

Run:  .venv/bin/python scripts/oracle/gen_cron_extra.py
Writes fixtures/oracle/cron_extra.json (deterministic).
"""

from __future__ import annotations

import json
import os
import random

from zae_limiter.schedule import ScheduleEntry, decode, decode_reset, encode, encode_reset, parse_cron, to_cron

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "fixtures", "oracle", "cron_extra.json")
rnd = random.Random(31337)

MONTHS = ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"]
DAYS = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"]
BOUNDS = [(0, 59), (0, 23), (1, 31), (1, 12), (0, 7)]
SPACES = [" ", " ", " ", "  ", "\t", "\u00a0", "\x1c", "\u3000", " \n "]


def case_mix(name: str) -> str:
    out = "".join(c.lower() if rnd.random() < 0.4 else c for c in name)
    if rnd.random() < 0.05:
        out = out.replace("S", "\u017f").replace("s", "\u017f")  # long s upper-cases to S
    return out


def value(i: int, bad: bool) -> str:
    lo, hi = BOUNDS[i]
    if bad and rnd.random() < 0.1:
        return rnd.choice(["", "L", "W", "?", "-1", "1.5", "+1", "\uff11", "99", str(hi + 1), "MONDAY", "JANUARY", "X"])
    if i == 3 and rnd.random() < 0.35:
        return case_mix(rnd.choice(MONTHS))
    if i == 4 and rnd.random() < 0.45:
        return case_mix(rnd.choice(DAYS))
    v = rnd.randint(lo, hi)
    return "0" * rnd.choice([0, 0, 0, 1, 2]) + str(v)


def num(i: int, v: str) -> int:
    u = v.upper().replace("\u017f", "S")
    if i == 3 and u in MONTHS:
        return MONTHS.index(u) + 1
    if i == 4 and u in DAYS:
        return DAYS.index(u)
    return int(v) if v.isascii() and v.isdigit() else -1


def item(i: int, bad: bool) -> str:
    r = rnd.random()
    if r < 0.15:
        base = "*"
    elif r < 0.5:
        base = value(i, bad)
    else:
        a, b = value(i, bad), value(i, bad)
        if rnd.random() < 0.85 and num(i, b) < num(i, a):
            a, b = b, a  # mostly forwards; backwards ranges are errors
        base = f"{a}-{b}"
    if rnd.random() < 0.3:
        step = rnd.choice(["1", "2", "3", "5", "7", "10", "15", "02", "0", "60", "99999999999999999999"])
        base = f"{base}/{step}"
    if bad and rnd.random() < 0.04:
        base += rnd.choice(["L", "#2", "W", "/", "-", ","])
    return base


def field(i: int, bad: bool) -> str:
    if rnd.random() < 0.35:
        return "*"
    return ",".join(item(i, bad) for _ in range(rnd.choice([1, 1, 1, 2, 3])))


def cron(bad: bool) -> str:
    fields = [field(i, bad) for i in range(5)]
    if bad and rnd.random() < 0.03:
        fields.append("*") if rnd.random() < 0.5 else fields.pop()
    lead = rnd.choice(["", "", "", " ", "\t"])
    return lead + "".join(f + (rnd.choice(SPACES) if k < len(fields) - 1 else "") for k, f in enumerate(fields))


def err(exc: BaseException) -> str:
    # Only whether an error happened is compared; the first words say which kind.
    return f"{type(exc).__name__}: {str(exc)[:60]}"


def parse_case(c: str) -> dict:
    case: dict = {"cron": c}
    try:
        p = parse_cron(c, "UTC")
    except ValueError as exc:
        case["ok"] = False
        case["error"] = err(exc)
        return case
    case["ok"] = True
    # Sets as bitmasks (bit v for value v; weekdays ISO 1..7).
    case["sets"] = [sum(1 << v for v in x) for x in (p.minutes, p.hours, p.days, p.months, p.weekdays)]
    case["day_and"] = p.day_and
    try:
        case["encoded"] = encode_reset((ScheduleEntry.reset(cron=c),))[0]
        case["encoded_scale"] = encode((ScheduleEntry(cron=c, scale=0.5),))[0]
    except ValueError as exc:
        case["encoded"] = None
        case["encode_error"] = err(exc)
        return case
    try:
        case["named"] = to_cron(case["encoded"])
    except ValueError as exc:
        case["named"] = None
        case["named_error"] = err(exc)
    return case


FIELD_VALUES = {
    "m": ["0", "5", "*", "*/5", "0-59", "00", "60", "1,30", "5L", "x", " 0"],
    "h": ["0", "9-17", "*/2", "23", "24", "8-18/2", ""],
    "D": ["1", "15", "29", "30", "31", "*/10", "L", "1-31"],
    "M": ["1", "2", "02", "1,7", "12/1", "Jan", "1-3", "13", "*/3"],
    "w": ["0", "7", "1-5", "0-7", "1-7", "7/2", "SUN", "mon", "5-7", "07", "1-5/2,0", "8", "*/2", "6,7"],
}
TAG_VALUES = ["0", "5", "*", "*/5", "1-5", "1,7", "0-7", "7/2", "SUN", "mon", "Jan", "02", "00", "1_000", "+5", "-5",
              " 5", "\uff15", "1.5", "500", "1000000000", "1000000001", "30", "31", "60", "", "0-59", "12/1", "5L", "x"]


def compact() -> str:
    ver = rnd.choice(["1"] * 12 + ["01", "0", "2", "", "1;", "１"])
    parts = []
    for _ in range(rnd.choice([1, 1, 1, 2, 3])):
        tags = rnd.sample("mhDMw", rnd.randint(0, 3)) + rnd.choice([[], ["s"], ["s"], ["c"], ["a", "p"], ["c", "a", "p"]])
        if rnd.random() < 0.05:
            tags.append(rnd.choice("mhDMwscap"))
        parts.append("".join(
            t + rnd.choice(FIELD_VALUES[t] if t in FIELD_VALUES and rnd.random() < 0.8 else TAG_VALUES) for t in tags))
    return ver + ";".join(parts)


def entry_json(e) -> dict:
    d = {"cron": e.cron}
    for k in ("scale", "capacity", "refill_amount", "refill_period_seconds"):
        v = getattr(e, k)
        if v is not None:
            d[k] = v
    return d


def decode_case(s: str) -> dict:
    case: dict = {"compact": s}
    for name, f in (("decode", decode), ("decode_reset", decode_reset)):
        try:
            case[name] = [entry_json(e) for e in f(s, "UTC")]
        except ValueError as exc:
            case[name] = None
            case[name + "_error"] = err(exc)
    try:
        case["to_cron"] = to_cron(s)
    except ValueError as exc:
        case["to_cron"] = None
        case["to_cron_error"] = err(exc)
    return case


def main() -> None:
    crons = [cron(bad=rnd.random() < 0.2) for _ in range(3000)]
    compacts = [compact() for _ in range(2000)]
    # Stored text the reference renders without normalising letters.
    compacts += ["", "1;", "1m0;", "1w", "1wMON", "1wtue", "1w0,Sun", "1w\u0661-\u0665", "1M\u0661", "1MJun",
                 "1MFeb-4", "1M1-Jun", "1wTue-5", "1wSUN-3/2", "1M2/1", "1M02-04/02", "1wSun-7", "1w1-7/2",
                 "1w0-7/2", "1w6-7", "1w7-7/3", "1w1-5,7/2"]
    out = {
        "meta": {"generator": "gen_cron_extra.py", "seed": 31337},
        "parse": [parse_case(c) for c in crons],
        "decode": [decode_case(s) for s in compacts],
    }
    with open(OUT, "w") as f:
        json.dump(out, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")
    ok = sum(c["ok"] for c in out["parse"])
    print(f"parse: {len(crons)} ({ok} valid); decode: {len(compacts)}")


if __name__ == "__main__":
    main()
