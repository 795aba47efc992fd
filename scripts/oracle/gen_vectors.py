#!/usr/bin/env python3
"""Differential test vectors for a Rust port of zae-limiter 0.17.0's evaluation engine.

Every ``result`` in the output is computed by CALLING the reference (the
installed ``zae_limiter`` package); nothing here re-implements its logic. The
only non-reference values are the optional ``minute_scan`` fields, produced by
a naive minute-by-minute scan over ``schedule.matches`` and present only to
flag cases where the reference's probing disagrees with that definition.

Run:  python gen_vectors.py [--check]   (in scripts/python-env's virtualenv)
Writes fixtures/oracle/vectors.json in the repository. Deterministic (fixed seed):
with the pinned packages it reproduces the committed file byte for byte.
--check writes nothing: it compares what it would write with the file, names
the sections that differ and exits 1 when any does (docs/development.md).
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import json
import math
import os
import platform
import random
import signal
import sys
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import cronsim
import zae_limiter
from zae_limiter import bucket as B
from zae_limiter import schedule as S
from zae_limiter.exceptions import RateLimitExceeded
from zae_limiter.limiter import RateLimiter
from zae_limiter.models import BucketState, Limit, LimitStatus
from zae_limiter.schedule import (
    ScheduleEntry,
    cycle_seconds,
    decode,
    decode_reset,
    effective_params,
    encode,
    encode_reset,
    entry_params,
    matches,
    next_boundary,
    next_reset_edge,
    parse_cron,
    prev_reset_edge,
    retry_after_with_schedule,
    to_cron,
)

SEED = 222_574
# Writes the repository fixture: <repo>/fixtures/oracle/vectors.json (override with ZAEL_VECTORS_OUT).
OUT = os.environ.get(
    "ZAEL_VECTORS_OUT",
    os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "fixtures", "oracle", "vectors.json"),
)
MIN = 60_000
HOUR = 3_600_000
DAY = 86_400_000

rnd = random.Random(SEED)

FOCUS_ZONES = [
    "America/New_York",
    "Europe/Berlin",
    "Australia/Lord_Howe",
    "Asia/Kolkata",
    "Pacific/Chatham",
]
EXTRA_ZONES = ["UTC", "America/Santiago", "Europe/Dublin", "America/St_Johns", "Asia/Kathmandu"]


# ---------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------


class Hang(Exception):
    pass


@contextlib.contextmanager
def time_limit(seconds: float):
    def handler(signum, frame):  # noqa: ARG001
        raise Hang()

    old = signal.signal(signal.SIGALRM, handler)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def ms(iso: str) -> int:
    return int(datetime.fromisoformat(iso).timestamp() * 1000)


def local(t_ms: int | None, tz: str) -> str | None:
    """Human-readable local rendering, for debugging only (not an input)."""
    if t_ms is None:
        return None
    return datetime.fromtimestamp(t_ms / 1000, ZoneInfo(tz)).isoformat(timespec="milliseconds")


def entry_json(e: ScheduleEntry) -> dict:
    d = {"cron": e.cron, "tz": e.tz}
    for k in ("scale", "capacity", "refill_amount", "refill_period_seconds"):
        v = getattr(e, k)
        if v is not None:
            d[k] = v
    return d


def sched_json(sched) -> list:
    return [entry_json(e) for e in sched]


def err(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def transitions(tz: str, year: int) -> list[int]:
    """UTC ms instants at which ``tz``'s UTC offset changes during ``year``."""
    z = ZoneInfo(tz)
    out = []
    t = ms(f"{year}-01-01T00:00:00+00:00")
    end = ms(f"{year + 1}-01-01T00:00:00+00:00")
    prev = datetime.fromtimestamp(t / 1000, z).utcoffset()
    while t < end:
        t2 = t + HOUR
        o = datetime.fromtimestamp(t2 / 1000, z).utcoffset()
        if o != prev:
            lo = t
            while lo < t2 and datetime.fromtimestamp(lo / 1000, z).utcoffset() == prev:
                lo += MIN
            out.append(lo)
        prev = o
        t = t2
    return out


# --- naive minute-scan definitions (NOT the reference; used only to flag) ---

SCAN_LIMIT = 3 * DAY


def _memo(p):
    cache = {}

    def m(t):
        v = cache.get(t)
        if v is None:
            v = cache[t] = matches(p, t)
        return v

    return m


def scan_next_edge(p, now, cap):
    """First minute t in (floor(now), now+cap] with M(t) and not M(t-1min)."""
    m = _memo(p)
    t = (now // MIN + 1) * MIN
    prev = m(t - MIN)
    end = min(now + cap, now + SCAN_LIMIT)
    while t <= end:
        cur = m(t)
        if cur and not prev:
            return t, True
        prev = cur
        t += MIN
    return None, end == now + cap


def scan_prev_edge(p, now, cap):
    """Latest minute e <= floor(now) with M(e), not M(e-1min), e-1min >= now-cap."""
    m = _memo(p)
    floor = max(now - cap, now - SCAN_LIMIT)
    t = (now // MIN) * MIN
    cur = m(t)
    while t - MIN >= floor:
        pm = m(t - MIN)
        if cur and not pm:
            return t, True
        cur = pm
        t -= MIN
    return None, floor == now - cap


def scan_param_change(ps, now, cap):
    ms_ = [_memo(p) for p in ps]

    def act(x):
        for i, m in enumerate(ms_):
            if m(x):
                return i
        return None

    cur = act(now)
    t = (now // MIN + 1) * MIN
    end = min(now + cap, now + SCAN_LIMIT)
    while t <= end:
        if act(t) != cur:
            return t, True
        t += MIN
    return now + cap, end == now + cap


HANGS: list[dict] = []


def guarded(fn, what: dict, seconds: float = 8.0):
    """Call ``fn``; on an apparent infinite loop record it and return a sentinel."""
    try:
        with time_limit(seconds):
            return fn()
    except Hang:
        HANGS.append({**what, "note": f"reference did not return within {seconds}s (infinite loop)"})
        return Hang


# ---------------------------------------------------------------------------
# (a) cron parse cases
# ---------------------------------------------------------------------------

HAND_CRONS = [
    # plain and wildcards
    "* * * * *", "0 0 * * *", "0 0 1 * *", "0 0 1 1 *", "*/15 * * * *", "0 9-17 * * MON-FRI",
    "* 9-17 * * MON-FRI", "30 2 * * *", "0,30 * * * *", "0-59 * * * *", "*/1 * * * *", "0-23/1 * * * *",
    "59 23 31 12 *", "0 0 29 2 *", "0 0 31 * *", "0 0 30 * *", "0 0 31 4,5 *",
    # names, case-insensitivity
    "0 0 * jan *", "0 0 * JAN-MAR *", "0 0 * Jan,Jul,DEC *", "0 0 * * mon", "0 0 * * Mon-Fri",
    "0 0 * * sun", "0 0 * * SUN", "0 0 * * SAT,SUN", "0 0 * * MON,SUN", "0 0 * SEP-DEC MON",
    "0 0 * 1-DEC *", "0 0 * JAN/3 *", "0 0 * * MON/2", "0 0 * * mon-FRI/2",
    # Sunday spellings
    "0 0 * * 0", "0 0 * * 7", "0 0 * * 0,7", "0 0 * * 0-7", "0 0 * * 1-7", "0 0 * * 0-6", "0 0 * * 5-7",
    "0 0 * * 7-7", "0 0 * * 0-0", "0 0 * * SUN-SUN", "0 0 * * SUN-SAT", "0 0 * * SUN-THU", "0 0 * * 00",
    "0 0 * * 07", "0 0 * * 7/1", "0 0 * * 6/1", "0 0 * * 0/2", "0 0 * * 1/2", "0 0 * * */2", "0 0 * * SUN/2",
    "0 0 * * */1", "0 0 * * */7", "0 0 * * 6-7,0",
    # steps
    "5/15 * * * *", "5-5/10 * * * *", "1/60 * * * *", "0/59 * * * *", "*/59 * * * *", "*/60 * * * *",
    "10-50/20 * * * *", "1-59/2 */3 */5 */2 */3", "0 */7 * * *", "0 0 */10 * *", "0 0 2/10 * *",
    "0 0 L/2 * *", "0 0 3-3/1 * *", "0 0 * 12/1 *",
    # day-of-month / day-of-week OR vs AND
    "0 0 13 * 5", "0 0 13 * FRI", "0 0 1-7 * MON", "0 0 */2 * MON", "0 0 1 * */2", "0 0 * * MON",
    "0 0 1 * *", "0 0 1,15 * SUN", "0 0 ?/2 * MON", "0 0 1-31 * MON", "0 0 */1 * MON", "0 0 1-31/1 * MON",
    "0 0 30 2 1", "0 0 30 2 *", "0 0 31 2,4 *", "0 0 30,31 2 *", "0 0 29,30 2 *", "0 0 31 4 *",
    "0 0 31 4 */1",
    # extended tokens (rejected)
    "0 0 L * *", "0 0 LW * *", "0 0 * * 5L", "0 0 * * FRIL", "0 0 * * 1#2", "0 0 * * MON#1", "0 0 15W * *",
    "0 0 ? * *", "0 0 * * ?", "0 0 L-1 * *", "0 0 1,L * *", "0 0 * * 1#6", "0 0 * * 1#0", "0 0 * * L",
    # range / syntax errors
    "60 * * * *", "0 24 * * *", "0 0 0 * *", "0 0 32 * *", "0 0 * 0 *", "0 0 * 13 *", "0 0 * * 8",
    "*/0 * * * *", "5-1 * * * *", "0 0 * * SAT-SUN", "0 0 * * MON-SUN", "0 0 * * FRI-SUN", "1-2-3 * * * *",
    "-1 * * * *", "1, * * * *", ",1 * * * *", "*/5/2 * * * *", "* /5 * * *", "*/ * * * *", "** * * * *",
    "1.5 * * * *", "+1 * * * *", "0x1 * * * *", "0 0 * * MONDAY", "0 0 * JANUARY *", "0 0 MON * *",
    "JAN * * * *", "0 0 * * * *", "0 0 0 * * *", "@daily", "@hourly", "0 0 * *", "", "   ", "* * * * * * *",
    "0 0 1-2,5-6/2 * *", "0 0 * * 1-5,*", "*,0 * * * *", "0 0 * * */0", "0 0 * * 1/0", "1-60 * * * *",
    # whitespace and unicode
    "0  0  *  *  *", "\t0 0 * * *\n", " 0 0 * * * ", "0\u00a00 * * *", "0\x1f0 * * *", "0\u30000 * * *",
    "0 0 * * \u017fun", "0 0 * \u017fep *", "0 0 * * \u017fun-MON", "\uff10 0 * * *", "\u0663 0 * * *",
    # list containing '*': the AND/OR rule reads only the first character of the raw field
    "0 0 1 * *,0", "0 0 1 * 0,*", "0 0 *,1 * MON", "0 0 1,* * MON",
    # huge numbers (Python ints are unbounded)
    "*/99999999999999999999999 * * * *", "000000000000000000000005 * * * *", "0 0 */10 * 5",
    "1/99999999999999999999 * * * *", "99999999999999999999 * * * *",
]

TZ_FOR_PARSE = ["UTC", "America/New_York", "Europe/Berlin", "Australia/Lord_Howe", "Asia/Kolkata",
                "Pacific/Chatham"]
BAD_TZ = ["Mars/Olympus", "utc", "", "/UTC", "../UTC", "America/New York"]


def rand_field(lo: int, hi: int, names: list[str] | None, bad: bool) -> str:
    def atom():
        k = rnd.random()
        if names and k < 0.25:
            nm = rnd.choice(names)
            return rnd.choice([nm, nm.lower(), nm.capitalize()])
        if bad and k > 0.93:
            return str(rnd.choice([lo - 1, hi + 1, hi + 7, 99]))
        return str(rnd.randint(lo, hi))

    k = rnd.random()
    if bad and k < 0.12:
        return rnd.choice(["L", "5L", "1#2", "LW", "?", "", "-", "a", "1-", "*/", "/2", "1/0", "**", "1.5",
                           "W", "3W", "L-2", "1--2", "1,,2", "+1", "*/2/3", "2-1"])
    if k < 0.3:
        return "*"
    if k < 0.5:
        return atom()
    if k < 0.65:
        a, b = atom(), atom()
        return f"{a}-{b}"
    if k < 0.78:
        return f"*/{rnd.randint(1, max(1, hi - lo + 2))}"
    if k < 0.86:
        return f"{atom()}/{rnd.randint(1, 12)}"
    if k < 0.93:
        return ",".join(atom() for _ in range(rnd.randint(2, 4)))
    return f"{atom()}-{atom()}/{rnd.randint(1, 5)}"


DOW_NAMES = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"]
MON_NAMES = ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"]


def rand_cron(bad: bool) -> str:
    fields = [
        rand_field(0, 59, None, bad),
        rand_field(0, 23, None, bad),
        rand_field(1, 31, None, bad),
        rand_field(1, 12, MON_NAMES, bad),
        rand_field(0, 7, DOW_NAMES, bad),
    ]
    if bad and rnd.random() < 0.08:
        if rnd.random() < 0.5:
            fields.insert(0, "0")
        else:
            fields.pop()
    return " ".join(fields)


def rand_valid_cron() -> tuple[str, str]:
    """A random cron and zone the reference parses (drawn again until it does)."""
    while True:
        c = rand_cron(False)
        tz = rnd.choice(FOCUS_ZONES + EXTRA_ZONES)
        try:
            parse_cron(c, tz)
            return c, tz
        except ValueError:
            continue


def parse_case(cron: str, tz: str) -> dict:
    case: dict = {"cron": cron, "tz": tz}
    try:
        p = parse_cron(cron, tz)
    except ValueError as exc:
        case["ok"] = False
        case["error"] = err(exc)
        return case
    case["ok"] = True
    case["minutes"] = sorted(p.minutes)
    case["hours"] = sorted(p.hours)
    case["days"] = sorted(p.days)
    case["months"] = sorted(p.months)
    case["weekdays"] = sorted(p.weekdays)  # ISO: Mon=1 .. Sun=7
    case["day_and"] = p.day_and
    case["cycle_seconds"] = cycle_seconds(p)
    case["granularity"] = list(S._granularity((p,)))  # [unit, cap_ms] for param scans
    case["reset_scan"] = list(S._reset_scan(p))  # [unit, horizon_ms] for reset-edge scans
    try:
        enc, enc_tz = encode_reset((ScheduleEntry.reset(cron=cron, tz=tz),))
        case["encoded"] = enc
        case["encoded_tz"] = enc_tz
    except ValueError as exc:
        case["encoded"] = None
        case["encode_error"] = err(exc)
        return case
    try:
        enc_s, _ = encode((ScheduleEntry(cron=cron, tz=tz, scale=0.5),))
        case["encoded_entry_scale_0_5"] = enc_s
    except ValueError as exc:
        case["encoded_entry_scale_0_5"] = None
        case["encode_entry_error"] = err(exc)
    try:
        named = to_cron(enc)
        case["named"] = named
        try:
            q = parse_cron(named, tz)
            same = (q.minutes, q.hours, q.days, q.months, q.weekdays, q.day_and) == (
                p.minutes, p.hours, p.days, p.months, p.weekdays, p.day_and)
            case["named_reparse"] = "same" if same else "different"
        except ValueError as exc:
            case["named_reparse"] = "error: " + str(exc)
    except ValueError as exc:
        case["named"] = None
        case["named_error"] = err(exc)
    try:
        dec = decode_reset(enc, tz)
        case["decode_roundtrip"] = [e.cron for e in dec]
    except ValueError as exc:
        case["decode_roundtrip_error"] = err(exc)
    return case


def gen_parse() -> list[dict]:
    out = []
    for c in HAND_CRONS:
        out.append(parse_case(c, "UTC"))
    for c in ["0 0 * * *", "30 2 * * *", "* * * * *"]:
        for tz in BAD_TZ + ["US/Eastern", "NZ-CHAT", "EST5EDT", "Etc/GMT+5", "GMT", "Asia/Calcutta"]:
            out.append(parse_case(c, tz))
    seen = {(c["cron"], c["tz"]) for c in out}
    n_valid = n_invalid = 0
    while n_valid < 160 or n_invalid < 110:
        bad = rnd.random() < 0.45
        c = rand_cron(bad)
        tz = rnd.choice(TZ_FOR_PARSE)
        if (c, tz) in seen:
            continue
        case = parse_case(c, tz)
        if case["ok"] and n_valid >= 160:
            continue
        if not case["ok"] and n_invalid >= 110:
            continue
        seen.add((c, tz))
        out.append(case)
        if case["ok"]:
            n_valid += 1
        else:
            n_invalid += 1
    return out


# ---------------------------------------------------------------------------
# (b) match cases
# ---------------------------------------------------------------------------

DST_PATTERNS = [
    "* 1 * * *", "* 2 * * *", "* 3 * * *", "30 2 * * *", "45 2 * * *", "0 3 * * *", "30 1 * * *",
    "59 1 * * *", "0,30 * * * *", "*/15 * * * *", "0 0 * * *", "* 0-2 * * *", "15 3 * * *", "50 3 * * *",
    "0-29 2 * * *", "30-59 1 * * *", "* 23 * * *", "* * * * SUN", "0 * * * *",
]
OFFSETS_MIN = [-121, -61, -60, -46, -31, -30, -16, -15, -1, 0, 1, 14, 15, 29, 30, 44, 45, 59, 60, 61, 89, 120]


def match_case(cron: str, tz: str, t: int, tag: str) -> dict:
    p = parse_cron(cron, tz)
    return {"cron": cron, "tz": tz, "t_ms": t, "local": local(t, tz), "match": matches(p, t), "tag": tag}


def gen_match() -> list[dict]:
    out = []
    # DST transitions in the focus zones (Kolkata has none after 1945: use fixed instants)
    for tz in FOCUS_ZONES + ["America/Santiago", "Europe/Dublin"]:
        trs = []
        for year in (2024, 2025, 2038):
            trs += transitions(tz, year)
        if not trs:
            trs = [ms("2024-03-10T20:30:00+00:00"), ms("2024-12-31T18:30:00+00:00")]
        for tr in trs:
            for off in OFFSETS_MIN:
                t = tr + off * MIN + rnd.choice([0, 0, 0, 1, 999, 30_000, 59_999])
                k = 2 if tz in FOCUS_ZONES else 1
                for cron in rnd.sample(DST_PATTERNS, k):
                    out.append(match_case(cron, tz, t, "dst"))
    # Kolkata historical / LMT and other sub-minute offsets
    for tz, iso in [("Asia/Kolkata", "1941-09-30T18:00:00+00:00"), ("Asia/Kolkata", "1900-06-01T18:38:50+00:00"),
                    ("America/New_York", "1880-01-01T04:56:00+00:00"), ("Europe/Berlin", "1890-01-01T23:06:00+00:00")]:
        base = ms(iso)
        for d in (-61_000, -2_000, 0, 1_000, 2_000, 3_000, 58_000, 62_000):
            for cron in ("0 0 * * *", "* 0 * * *", "0 * * * *"):
                out.append(match_case(cron, tz, base + d, "lmt"))
    # far past / far future (pre-1970 and post-2038 rule extrapolation)
    for tz in FOCUS_ZONES:
        for iso in ["1901-12-14T00:00:00+00:00", "1969-12-31T23:59:00+00:00", "2038-01-19T03:14:08+00:00",
                    "2099-11-01T06:30:00+00:00", "2150-07-01T12:00:00+00:00", "2399-03-15T00:00:00+00:00"]:
            t = ms(iso)
            for cron in ("* * * * *", "0 0 * * *", "* 12 * * *", "30 * * * *"):
                out.append(match_case(cron, tz, t + rnd.choice([0, 30 * MIN, 90 * MIN]), "far"))
    # month / leap-year edges, in local time
    edges = ["2024-02-28T23:59:00", "2024-02-29T00:00:00", "2024-02-29T23:59:00", "2024-03-01T00:00:00",
             "2023-02-28T23:59:00", "2023-03-01T00:00:00", "2100-02-28T23:59:00", "2100-03-01T00:00:00",
             "2000-02-29T12:00:00", "2024-12-31T23:59:00", "2025-01-01T00:00:00", "2024-04-30T23:59:00",
             "2024-05-01T00:00:00", "2024-06-30T23:59:30", "2024-07-01T00:00:30"]
    edge_crons = ["* * 29 2 *", "* * 28 2 *", "* * 1 3 *", "0 0 1 1 *", "* * 31 12 *", "* * 30 4 *",
                  "* * 31 * *", "* * 1 * *", "59 23 * * *", "0 0 * * *", "* * 29 * *", "* * * 2 *", "* * * 3 *"]
    for tz in ["UTC", "America/New_York", "Asia/Kolkata", "Pacific/Chatham", "Australia/Lord_Howe"]:
        z = ZoneInfo(tz)
        for e in edges:
            t = int(datetime.fromisoformat(e).replace(tzinfo=z).timestamp() * 1000)
            for cron in rnd.sample(edge_crons, 3):
                out.append(match_case(cron, tz, t, "calendar_edge"))
    # dom / dow combinations over a fortnight that straddles a month end
    combo = ["0 0 13 * 5", "0 0 13 * FRI", "0 0 */2 * 5", "0 0 13 * */1", "0 0 1-7 * MON", "0 0 1 * MON",
             "0 0 * * MON", "0 0 1,15 * SUN,7", "0 0 31 * 0", "0 0 1-31 * MON", "0 0 */1 * MON",
             "0 0 1 * */2", "0 0 2/3 * 6"]
    base = ms("2024-09-08T00:00:00+00:00")
    for day in range(0, 40, 1):
        for cron in rnd.sample(combo, 3):
            tz = rnd.choice(["UTC", "America/New_York", "Pacific/Chatham"])
            z = ZoneInfo(tz)
            d = datetime.fromtimestamp((base + day * DAY) / 1000, UTC).replace(tzinfo=None)
            t = int(d.replace(tzinfo=z).timestamp() * 1000)
            out.append(match_case(cron, tz, t, "dom_dow"))
    # random
    for _ in range(150):
        c, tz = rand_valid_cron()
        t = rnd.randint(ms("1971-01-01T00:00:00+00:00"), ms("2099-12-31T00:00:00+00:00"))
        out.append(match_case(c, tz, t, "random"))
    return out


# ---------------------------------------------------------------------------
# (c) boundaries and reset edges
# ---------------------------------------------------------------------------


def boundary_cases_for(sched, reset_sched, now: int, tag: str, scan: bool = True) -> list[dict]:
    """next_boundary / next_reset_edge / prev_reset_edge for one (sched, reset, now)."""
    out = []
    base = {"sched": sched_json(sched), "reset_sched": sched_json(reset_sched), "now_ms": now, "tag": tag}
    tz = (sched or reset_sched)[0].tz
    base["now_local"] = local(now, tz)

    r = guarded(lambda: next_boundary(sched, reset_sched, now_ms=now), {"fn": "next_boundary", **base})
    if r is not Hang:
        case = {"fn": "next_boundary", **base, "result": r, "result_local": local(r, tz)}
        if scan and sched and not reset_sched:
            ps = tuple(parse_cron(e.cron, e.tz) for e in sched)
            _u, cap = S._granularity(ps)
            v, conclusive = scan_param_change(ps, now, cap)
            if conclusive or v < now + SCAN_LIMIT:
                case["minute_scan"] = v
                case["agrees_with_minute_scan"] = v == r
        out.append(case)
    if not reset_sched:
        return out
    # The next and the previous reset edge: the reference's answer, and the
    # minute scan's for a single entry.
    for fn, call, scan_edge in (
        ("next_reset_edge", lambda: next_reset_edge(reset_sched, now_ms=now), scan_next_edge),
        ("prev_reset_edge", lambda: prev_reset_edge(reset_sched, now), scan_prev_edge),
    ):
        r = guarded(call, {"fn": fn, **base})
        if r is Hang:
            continue
        case = {"fn": fn, **base, "result": r, "result_local": local(r, tz)}
        if scan and len(reset_sched) == 1:
            p = parse_cron(reset_sched[0].cron, reset_sched[0].tz)
            v, conclusive = scan_edge(p, now, S._reset_scan(p)[1])
            if v is not None or conclusive:
                case["minute_scan"] = v
                case["agrees_with_minute_scan"] = v == r
        out.append(case)
    return out


def gen_boundaries() -> list[dict]:
    out = []
    dst_crons = ["* 2 * * *", "* 3 * * *", "30 2 * * *", "45 2 * * *", "0 0 * * *", "30 1 * * *", "* 1 * * *",
                 "50 3 * * *", "0 3 * * *", "*/15 1-3 * * *", "0-29 2 * * *", "* 0 * * *"]
    for tz in FOCUS_ZONES:
        trs = transitions(tz, 2024) + transitions(tz, 2025)
        if not trs:
            trs = [ms("2024-06-15T18:29:30+00:00"), ms("2024-12-31T18:00:00+00:00")]
        for tr in trs:
            for cron in rnd.sample(dst_crons, 4):
                for off in rnd.sample([-150, -61, -30, -1, 0, 1, 14, 16, 29, 31, 61, 300, 900], 2):
                    now = tr + off * MIN + rnd.choice([0, 1, 30_000, 59_999])
                    sched = (ScheduleEntry(cron=cron, tz=tz, scale=0.5),)
                    rs = (ScheduleEntry.reset(cron=cron, tz=tz),)
                    out += boundary_cases_for(sched, (), now, "dst_param")
                    out += boundary_cases_for((), rs, now, "dst_reset")
    # long cycles: monthly, quarterly, annual, leap-day, 31st, weekly
    long_crons = ["0 0 1 * *", "0 0 1 */3 *", "0 0 1 1 *", "0 0 29 2 *", "0 0 31 * *", "0 0 30 * *",
                  "0 0 * * MON", "0 0 1 * MON", "0 0 13 * 5", "* * 1 * *", "0 0 15 * *", "* * * * SUN",
                  "0 9 * * MON-FRI", "0 0 L/2 * *", "0 0 */10 * 5", "30 2 * * *", "30 1 * * *"]
    for cron in long_crons:
        try:
            parse_cron(cron, "UTC")
        except ValueError:
            continue
        for now_iso in ["2024-01-15T12:00:00+00:00", "2024-02-29T00:00:00+00:00", "2024-09-15T00:00:00+00:00",
                        "2024-10-15T00:00:00+00:00", "2025-03-15T00:00:00+00:00", "2027-12-31T23:59:59.999+00:00"]:
            tz = rnd.choice(["UTC", "America/New_York", "Australia/Lord_Howe"])
            now = ms(now_iso)
            out += boundary_cases_for((), (ScheduleEntry.reset(cron=cron, tz=tz),), now, "long_cycle")
            if rnd.random() < 0.4:
                out += boundary_cases_for((ScheduleEntry(cron=cron, tz=tz, scale=2.0),), (), now, "long_cycle_param")
    # fall-back double fire and spring-forward skip (New York 2024)
    for cron in ["30 1 * * *", "* 1 * * *", "30 2 * * *", "0 2 * * *"]:
        for now_iso in ["2024-11-03T04:59:00+00:00", "2024-11-03T05:45:00+00:00", "2024-11-03T06:15:00+00:00",
                        "2024-11-03T06:45:00+00:00", "2024-11-03T07:30:00+00:00", "2024-03-10T06:30:00+00:00",
                        "2024-03-10T07:30:00+00:00"]:
            tz = "America/New_York"
            out += boundary_cases_for((), (ScheduleEntry.reset(cron=cron, tz=tz),), ms(now_iso), "dst_double_or_skip")
    # multi-entry schedules, and schedule + reset together
    multi = [
        ("* 9-17 * * MON-FRI", "* * * * SAT,SUN", "0-29 * * * *"),
        ("0-29 * * * *", "* 0-5 * * *"),
        ("* 22-23 * * *", "* 0-6 * * *"),
        ("*/10 * * * *", "5-9 * * * *"),
        ("* * 1 * *", "* * * * MON"),
        ("* 12 * * *", "* 12 * * *"),
    ]
    for group in multi:
        for _ in range(4):
            tz = rnd.choice(FOCUS_ZONES + ["UTC"])
            now = rnd.randint(ms("2024-01-01T00:00:00+00:00"), ms("2026-01-01T00:00:00+00:00"))
            sched = tuple(ScheduleEntry(cron=c, tz=tz, scale=rnd.choice([0.5, 2.0, 0.25])) for c in group)
            out += boundary_cases_for(sched, (), now, "multi_param")
            rs = (ScheduleEntry.reset(cron=rnd.choice(["0 0 * * *", "0 0 1 * *", "30 2 * * *"]), tz=tz),)
            out += boundary_cases_for(sched, rs, now, "param_and_reset", scan=False)
    # multiple reset entries (max/min across entries)
    for _ in range(10):
        tz = rnd.choice(FOCUS_ZONES)
        now = rnd.randint(ms("2024-01-01T00:00:00+00:00"), ms("2026-01-01T00:00:00+00:00"))
        rs = tuple(ScheduleEntry.reset(cron=c, tz=tz) for c in rnd.sample(
            ["0 0 * * *", "0 12 * * *", "0 0 1 * *", "0 0 * * MON", "30 2 * * *", "*/20 * * * *"], 2))
        out += boundary_cases_for((), rs, now, "multi_reset", scan=False)
    # random single entries anywhere
    for _ in range(60):
        c, tz = rand_valid_cron()
        now = rnd.randint(ms("2020-01-01T00:00:00+00:00"), ms("2031-01-01T00:00:00+00:00"))
        if rnd.random() < 0.5:
            out += boundary_cases_for((ScheduleEntry(cron=c, tz=tz, scale=0.5),), (), now, "random_param")
        else:
            out += boundary_cases_for((), (ScheduleEntry.reset(cron=c, tz=tz),), now, "random_reset")
    # empty tuples
    out.append({"fn": "next_boundary", "sched": [], "reset_sched": [], "now_ms": 1_700_000_000_000,
                "tag": "empty", "result": next_boundary((), (), now_ms=1_700_000_000_000)})
    out.append({"fn": "next_reset_edge", "sched": [], "reset_sched": [], "now_ms": 1_700_000_000_000,
                "tag": "empty", "result": next_reset_edge((), now_ms=1_700_000_000_000)})
    out.append({"fn": "prev_reset_edge", "sched": [], "reset_sched": [], "now_ms": 1_700_000_000_000,
                "tag": "empty", "result": prev_reset_edge((), 1_700_000_000_000)})
    return out


# ---------------------------------------------------------------------------
# (d) effective params
# ---------------------------------------------------------------------------

PARAM_CRONS = ["* 9-17 * * MON-FRI", "* * * * SAT,SUN", "0-29 * * * *", "* 0-6 * * *", "* 2 * * *",
               "* * 1 * *", "* * * 12 *", "*/2 * * * *", "* 22-23 * * *", "* * * * *", "30-59 1 * * *"]


def rand_entry(tz: str, cron: str | None = None) -> ScheduleEntry:
    cron = cron or rnd.choice(PARAM_CRONS)
    k = rnd.random()
    if k < 0.55:
        scale = rnd.choice([0.5, 2.0, 0.25, 1.5, 0.1, 0.3, 2.3, 1 / 3, 0.001, 0.0001, 1e-9, 1e6, 0.999, 1.0,
                            3.0, 0.7, rnd.randint(1, 5000) / 1000, rnd.uniform(0.001, 10)])
        return ScheduleEntry(cron=cron, tz=tz, scale=scale)
    kw = {}
    for name, choices in (("capacity", [1, 5, 100, 1000, 10**15]), ("refill_amount", [1, 3, 50, 1000]),
                          ("refill_period_seconds", [1, 60, 3600, 86400, 10**9])):
        if rnd.random() < 0.55:
            kw[name] = rnd.choice(choices)
    if not kw:
        kw["capacity"] = rnd.choice([10, 250])
    return ScheduleEntry(cron=cron, tz=tz, **kw)


def gen_effective() -> list[dict]:
    out = []
    bases = [(1000_000, 1000_000, 60_000), (10_000_000, 10_000_000, 60_000), (100_000, 0, 1000),
             (5_000, 1_000, 1000), (1_000, 1_000, 86_400_000), (999, 7, 1000), (10**18, 10**18, 10**12),
             (2**53 + 1, 2**53 + 1, 1000), (9_007_199_254_740_993_000, 3, 60_000), (1, 1, 1), (3_000, 0, 1000),
             (1_500, 1_500, 1000), (123_456_789, 987_654, 3_600_000)]
    for i in range(230):
        tz = rnd.choice(FOCUS_ZONES + ["UTC"])
        n = rnd.choice([1, 1, 2, 3])
        sched = tuple(rand_entry(tz) for _ in range(n))
        cp, ra, rp = rnd.choice(bases)
        if i % 7 == 0:
            cp, ra, rp = rnd.randint(1, 10**7), rnd.choice([0, rnd.randint(1, 10**7)]), rnd.randint(1, 10**8)
        now = rnd.randint(ms("2024-01-01T00:00:00+00:00"), ms("2026-01-01T00:00:00+00:00"))
        if i % 5 == 0:  # make the first entry match, to exercise the arithmetic often
            for _ in range(200):
                if matches(parse_cron(sched[0].cron, tz), now):
                    break
                now += rnd.choice([HOUR, 7 * HOUR, DAY, 13 * MIN])
        res = effective_params(cp, ra, rp, sched, now)
        active = S._active_index(tuple(parse_cron(e.cron, e.tz) for e in sched), now)
        out.append({"cp_milli": cp, "ra_milli": ra, "rp_ms": rp, "sched": sched_json(sched), "now_ms": now,
                    "now_local": local(now, tz), "active_index": active, "result": list(res)})
    # entry_params directly (no matching), scale arithmetic edge cases
    for cp, ra, rp in bases:
        for scale in [0.5, 0.1, 0.3, 2.3, 1 / 3, 1e-9, 1e6, 1.0, 0.001, 0.0015, 0.9999999999999999]:
            e = ScheduleEntry(cron="* * * * *", scale=scale)
            out.append({"fn": "entry_params", "cp_milli": cp, "ra_milli": ra, "rp_ms": rp, "sched": [entry_json(e)],
                        "result": list(entry_params(cp, ra, rp, e))})
    # an int scale multiplies exactly (Python int * int); a float one goes through f64
    for scale in (2, 2.0, 3, 3.0):
        e = ScheduleEntry(cron="* * * * *", scale=scale)
        for cp in (2**53 + 1, 10**18 + 1):
            out.append({"fn": "entry_params", "tag": "int_vs_float_scale", "scale_is_int": isinstance(scale, int),
                        "cp_milli": cp, "ra_milli": cp, "rp_ms": 1000, "sched": [entry_json(e)],
                        "result": list(entry_params(cp, cp, 1000, e))})
    # scale as it comes back from storage: decode(encode(...)) quantises to per-mille
    for scale in [0.0005, 0.0015, 0.0025, 2.3, 1 / 3, 0.9995, 1.0005, 0.1234]:
        e = ScheduleEntry(cron="* * * * *", scale=scale)
        enc, tz = encode((e,))
        d = decode(enc, tz)[0]
        out.append({"fn": "entry_params", "tag": "decoded_scale", "encoded": enc, "original_scale": scale,
                    "cp_milli": 1_000_000, "ra_milli": 1_000_000, "rp_ms": 60_000, "sched": [entry_json(d)],
                    "result": list(entry_params(1_000_000, 1_000_000, 60_000, d))})
    return out


# ---------------------------------------------------------------------------
# (e) retry-after, bucket math, slow pass
# ---------------------------------------------------------------------------

RETRY_PARAM_CRONS = ["* 9-17 * * MON-FRI", "0-29 * * * *", "* 0-6 * * *", "*/10 * * * *", "* * * * SAT,SUN",
                     "* 12 * * *", "0-4 * * * *"]
RETRY_RESET_CRONS = ["0 0 * * *", "0 0 1 * *", "30 2 * * *", "0 * * * *", "0 0 * * MON", "0 0 1 1 *",
                     "*/30 * * * *", "0 0 31 * *"]


def gen_retry() -> list[dict]:
    out = []
    for i in range(260):
        tz = rnd.choice(FOCUS_ZONES + ["UTC"])
        kind = rnd.random()
        now = rnd.randint(ms("2024-01-01T00:00:00+00:00"), ms("2026-01-01T00:00:00+00:00"))
        sched = ()
        reset = ()
        if kind < 0.35:  # dripping, scheduled
            cp = rnd.choice([60, 1000, 10_000, 5]) * 1000
            ra = rnd.choice([cp, cp // 2 or 1000, 1000, 1, 60_000])
            rp = rnd.choice([1000, 60_000, 3_600_000, 86_400_000])
            sched = tuple(ScheduleEntry(cron=c, tz=tz, scale=rnd.choice([0.5, 2.0, 0.1, 0.001, 3.0]))
                          for c in rnd.sample(RETRY_PARAM_CRONS, rnd.choice([1, 2])))
            if rnd.random() < 0.25:
                sched = sched + (ScheduleEntry(cron=rnd.choice(RETRY_PARAM_CRONS), tz=tz,
                                               refill_amount=rnd.choice([1, 10]),
                                               refill_period_seconds=rnd.choice([60, 3600])),)
        elif kind < 0.7:  # quota: ra == 0 with a reset schedule (maybe with a param schedule)
            cp = rnd.choice([100, 10_000, 1]) * 1000
            ra, rp = 0, 1000
            reset = (ScheduleEntry.reset(cron=rnd.choice(RETRY_RESET_CRONS), tz=tz),)
            if rnd.random() < 0.3:
                sched = (ScheduleEntry(cron=rnd.choice(RETRY_PARAM_CRONS), tz=tz, scale=0.5),)
        elif kind < 0.85:  # dripping, unscheduled (must equal calculate_retry_after)
            cp = rnd.choice([60, 1000]) * 1000
            ra = rnd.choice([1, 7, 1000, 60_000, 1_000_000])
            rp = rnd.choice([1000, 60_000, 86_400_000])
        else:  # drip AND reset (not constructible as a Limit, but the function accepts it) / zero-rate no reset
            cp = 1000_000
            ra = rnd.choice([0, 1, 1000])
            rp = 60_000
            if rnd.random() < 0.6:
                reset = (ScheduleEntry.reset(cron=rnd.choice(RETRY_RESET_CRONS), tz=tz),)
        deficit = rnd.choice([1, 1000, 500_000, cp, cp * 3, rnd.randint(1, 10**7), 0, -5])
        shard = rnd.choice([1, 1, 1, 2, 4, 32, 1024])
        max_windows = rnd.choice([8, 8, 8, 1, 2, 3])
        if i % 9 == 0:
            # put `now` shortly before a boundary so walks cross it
            now = (now // HOUR + 1) * HOUR - rnd.choice([1, 10_000, 59_999, 300_000])
        kw = dict(deficit_milli=deficit, cp_milli=cp, ra_milli=ra, rp_ms=rp, sched=sched, reset_sched=reset,
                  now_ms=now, shard_count=shard, max_windows=max_windows)
        what = {"fn": "retry_after_with_schedule", "deficit_milli": deficit, "cp_milli": cp, "ra_milli": ra,
                "rp_ms": rp, "sched": sched_json(sched), "reset_sched": sched_json(reset), "now_ms": now,
                "shard_count": shard, "max_windows": max_windows}
        r = guarded(lambda: retry_after_with_schedule(**kw), what, 20)
        if r is Hang:
            continue
        case = {**what, "now_local": local(now, tz), "result": r}
        if not sched and not reset:
            case["calculate_retry_after"] = B.calculate_retry_after(deficit, (ra // max(1, shard)) or ra, rp)
        out.append(case)
    # the spec's worked example: 1000/min now, boundary in 10 s to 500/min
    now = ms("2024-06-03T08:59:50+00:00")  # a Monday, 10 s before 09:00
    sched = (ScheduleEntry(cron="* 9-17 * * MON-FRI", tz="UTC", scale=0.5),)
    out.append({"fn": "retry_after_with_schedule", "tag": "spec_example", "deficit_milli": 500_000,
                "cp_milli": 1_000_000, "ra_milli": 1_000_000, "rp_ms": 60_000, "sched": sched_json(sched),
                "reset_sched": [], "now_ms": now, "shard_count": 1, "max_windows": 8,
                "result": retry_after_with_schedule(500_000, 1_000_000, 1_000_000, 60_000, sched, now_ms=now)})
    # calculate_retry_after (the unscheduled definition) directly
    for deficit, ra, rp, nxt, now in [(1000, 1000, 1000, None, None), (1, 3, 1000, None, None),
                                      (1000, 0, 1000, None, None), (1000, 0, 1000, 5000, 1000),
                                      (1000, 0, 1000, 1000, 5000), (0, 1000, 1000, None, None),
                                      (10**24, 1, 10**12, None, None), (7, 1000, 60_000, 99, 0)]:
        out.append({"fn": "calculate_retry_after", "deficit_milli": deficit, "refill_amount_milli": ra,
                    "refill_period_ms": rp, "next_reset_ms": nxt, "now_ms": now,
                    "result": B.calculate_retry_after(deficit, ra, rp, nxt, now_ms=now)})
    return out


def state_json(s: BucketState) -> dict:
    return {
        "tokens_milli": s.tokens_milli,
        "last_refill_ms": s.last_refill_ms,
        "capacity_milli": s.capacity_milli,
        "refill_amount_milli": s.refill_amount_milli,
        "refill_period_ms": s.refill_period_ms,
        "total_consumed_milli": s.total_consumed_milli,
        "shard_count": s.shard_count,
        "sched": sched_json(s.sched),
        "reset_sched": sched_json(s.reset_sched),
        "window_start_ms": s.window_start_ms,
        "reset_after_seconds": s.reset_after_seconds,
        "window_applied_ms": s.window_applied_ms,
        "window_consumed_mark_milli": s.window_consumed_mark_milli,
        "grant_count": s.grant_count,
        "topped_up_milli": s.topped_up_milli,
        "soft": s.soft,
        "bypass": s.bypass,
    }


def limit_json(lim: Limit) -> dict:
    d = lim.to_dict()
    d["is_quota"] = lim.is_quota
    return d


def consume_outcome(s: BucketState, now: int, r) -> dict:
    """A try_consume vector's tail: the state's effective parameters at `now` and the reference's result."""
    return {
        "ceiling_milli": s.ceiling_milli(now),
        "effective_refill_amount_milli": s.effective_refill_amount_milli(now),
        "effective_refill_period_ms": s.effective_refill_period_ms(now),
        "reset_target_milli": s.reset_target_milli(now),
        "result": {"success": r.success, "new_tokens_milli": r.new_tokens_milli,
                   "new_last_refill_ms": r.new_last_refill_ms, "available": r.available,
                   "retry_after_seconds": r.retry_after_seconds},
    }


def rand_limit(tz: str) -> Limit:
    k = rnd.random()
    if k < 0.3:
        f = rnd.choice([Limit.per_second, Limit.per_minute, Limit.per_hour, Limit.per_day])
        rate = rnd.choice([1, 5, 60, 1000, 7])
        burst = rnd.choice([None, None, rate * 2, max(1, rate // 2)])
        lim = f("rpm", rate, burst)
        if rnd.random() < 0.5:
            lim = lim.with_schedule(tuple(ScheduleEntry(cron=c, tz=tz, scale=rnd.choice([0.5, 2.0, 0.1]))
                                          for c in rnd.sample(RETRY_PARAM_CRONS, rnd.choice([1, 2]))))
        return lim
    if k < 0.65:
        lim = Limit.quota("rpd", rnd.choice([1, 10, 1000, 10_000]), cron=rnd.choice(RETRY_RESET_CRONS[:7]), tz=tz)
        if rnd.random() < 0.3:
            lim = lim.with_schedule((ScheduleEntry(cron=rnd.choice(RETRY_PARAM_CRONS), tz=tz, scale=0.5),))
        return lim
    if k < 0.85:
        return Limit.quota("session", rnd.choice([5, 100, 1000]),
                           reset_after=timedelta(seconds=rnd.choice([60, 3600, 18_000, 86_400])))
    return Limit.custom("tpm", capacity=rnd.choice([1000, 50]), refill_amount=rnd.choice([1, 100, 3]),
                        refill_period_seconds=rnd.choice([1, 7, 60]))


def rand_state(lim: Limit, now: int) -> BucketState:
    shard = rnd.choice([1, 1, 1, 2, 3, 8])
    created = now - rnd.choice([0, 1, 999, 30_000, HOUR, DAY + 5, 3 * DAY, 40 * DAY])
    s = BucketState.from_limit("e", "r", lim, created, shard_count=shard)
    cap = s.capacity_milli
    s.tokens_milli = rnd.choice([s.tokens_milli, 0, -1, -1500, cap // 3, 999, 1000, s.tokens_milli * 2, 7])
    s.last_refill_ms = created + rnd.choice([0, 0, 17, (now - created) // 2])
    if lim.reset_after is not None:
        rsa = lim.reset_after_seconds
        s.window_start_ms = rnd.choice([created, now - rsa * 1000, now - rsa * 1000 + 1, now - rsa * 1000 - 1,
                                        now - 10, None])
        s.window_applied_ms = rnd.choice([None, s.window_start_ms, (s.window_start_ms or 0) - 1])
        s.reset_after_seconds = rsa
    if lim.is_quota and rnd.random() < 0.3:
        s.grant_count = rnd.choice([1, shard, shard * 2])
        s.topped_up_milli = rnd.choice([None, 5_000])
    s.soft = rnd.random() < 0.05
    s.total_consumed_milli = rnd.choice([0, 12_000])
    if lim.reset_after is not None and rnd.random() < 0.2:
        s.window_consumed_mark_milli = rnd.choice([0, 5_000])
    return s


def gen_bucket() -> dict:
    refill = []
    for _ in range(120):
        cap = rnd.choice([1000, 60_000, 10**18, 5_000_000, 1])
        tk = rnd.choice([0, cap, cap // 2, -5_000, cap + 7_000, 1])
        rf = rnd.randint(1_600_000_000_000, 1_800_000_000_000)
        now = rf + rnd.choice([-5, 0, 1, 59, 999, 1000, 60_000, rnd.randint(1, 10**9)])
        ra = rnd.choice([0, 1, 7, 1000, 60_000, 1_000_000, 10**18])
        rp = rnd.choice([1, 1000, 7_000, 60_000, 86_400_000, 10**12])
        r = B.refill_bucket(tk, rf, now, cap, ra, rp)
        refill.append({"tokens_milli": tk, "last_refill_ms": rf, "now_ms": now, "capacity_milli": cap,
                       "refill_amount_milli": ra, "refill_period_ms": rp,
                       "result": [r.new_tokens_milli, r.new_last_refill_ms]})

    consume = []
    for i in range(160):
        tz = rnd.choice(FOCUS_ZONES + ["UTC"])
        now = rnd.randint(ms("2024-01-01T00:00:00+00:00"), ms("2026-01-01T00:00:00+00:00"))
        lim = rand_limit(tz)
        s = rand_state(lim, now)
        requested = rnd.choice([0, 1, 2, 5, 10, 1000, 10_001])
        before = state_json(s)
        r = guarded(lambda: B.try_consume(s, requested, now), {"fn": "try_consume", "state": before, "now_ms": now})
        if r is Hang:
            continue
        consume.append({"fn": "try_consume", "limit": limit_json(lim), "state": before, "requested": requested,
                        "now_ms": now, "now_local": local(now, tz), **consume_outcome(s, now, r)})

    # capacity change across a boundary: refill credits the whole elapsed span at the rate in force at `now`
    tz = "UTC"
    lim = Limit.per_minute("rpm", 600).with_schedule((ScheduleEntry(cron="* 9-17 * * *", tz=tz, scale=0.5),))
    for rf_iso, now_iso, tk in [("2024-06-03T08:50:00+00:00", "2024-06-03T09:10:00+00:00", 600_000),
                                ("2024-06-03T08:50:00+00:00", "2024-06-03T09:10:00+00:00", 0),
                                ("2024-06-03T17:50:00+00:00", "2024-06-03T18:05:00+00:00", 0),
                                ("2024-06-03T17:50:00+00:00", "2024-06-03T18:05:00+00:00", 300_000),
                                ("2024-06-03T09:00:00+00:00", "2024-06-03T09:00:00+00:00", 600_000)]:
        s = BucketState.from_limit("e", "r", lim, ms(rf_iso))
        s.tokens_milli = tk
        now = ms(now_iso)
        before = state_json(s)
        r = B.try_consume(s, 1, now)
        consume.append({"fn": "try_consume", "tag": "boundary_crossing", "limit": limit_json(lim), "state": before,
                        "requested": 1, "now_ms": now, **consume_outcome(s, now, r)})

    slow = []
    for i in range(140):
        tz = rnd.choice(FOCUS_ZONES + ["UTC"])
        now = rnd.randint(ms("2024-01-01T00:00:00+00:00"), ms("2026-01-01T00:00:00+00:00"))
        lim = rand_limit(tz)
        if i % 4 == 0 and lim.reset_schedule:
            # land just after a reset edge, with rf before it
            edge = prev_reset_edge(lim.reset_schedule, now)
            if edge is not None:
                now = edge + rnd.choice([0, 1, 30_000, HOUR])
        s = rand_state(lim, now)
        if i % 4 == 0 and lim.reset_schedule:
            edge = prev_reset_edge(lim.reset_schedule, now)
            if edge is not None:
                s.last_refill_ms = edge + rnd.choice([-1, 0, 1, -DAY, -3 * DAY])
        # what `_do_acquire` attaches from config before the pass
        s.sched = lim.schedule
        s.reset_sched = lim.reset_schedule
        s.reset_after_seconds = lim.reset_after_seconds
        requested = rnd.choice([0, 1, 3, 10, 1000])
        before = state_json(s)

        def run():
            new_ws = RateLimiter._open_window_if_elapsed(lim, s, now)
            reset_applied = RateLimiter._apply_reset_edge(lim, s, now)
            roll_applied = RateLimiter._apply_window_roll(lim, s, now, opened=new_ws is not None)
            status, consumed = RateLimiter._admit_limit("e", "r", lim, s, {lim.name: requested}, now)
            vu, reset_edge = RateLimiter._materialisation_stamps(lim, s, now)
            return new_ws, reset_applied, roll_applied, status, consumed, vu, reset_edge

        r = guarded(run, {"fn": "slow_pass", "limit": limit_json(lim), "state": before, "now_ms": now}, 20)
        if r is Hang:
            continue
        new_ws, reset_applied, roll_applied, status, consumed, vu, reset_edge = r
        pl = status.limit
        slow.append({
            "fn": "slow_pass", "limit": limit_json(lim), "state": before, "requested": requested, "now_ms": now,
            "now_local": local(now, tz),
            "result": {
                "opened_window_start_ms": new_ws, "reset_applied": reset_applied, "roll_applied": roll_applied,
                "exceeded": status.exceeded, "available": status.available,
                "retry_after_seconds": status.retry_after_seconds, "resets_at_ms": status.resets_at_ms,
                "reported_limit": {"capacity": pl.capacity, "refill_amount": pl.refill_amount,
                                   "refill_period_seconds": pl.refill_period_seconds},
                "consumed": consumed, "vu_ms": vu, "next_reset_edge_ms": reset_edge,
                "state_after": state_json(s),
            },
        })

    # session (reset_after) retry helper, including the ended-window branch
    sess = []
    for _ in range(40):
        lim = Limit.quota("session", rnd.choice([10, 100]), reset_after=timedelta(seconds=rnd.choice([60, 3600])))
        now = rnd.randint(ms("2024-01-01T00:00:00+00:00"), ms("2026-01-01T00:00:00+00:00"))
        s = rand_state(lim, now)
        deficit = rnd.choice([1, 1000, 50_000, 200_000, 0])
        sess.append({"fn": "retry_after_for_deficit", "limit": limit_json(lim), "state": state_json(s),
                     "deficit_milli": deficit, "now_ms": now, "window_end_ms": s.window_end_ms,
                     "result": B.retry_after_for_deficit(s, deficit, now)})
    return {"refill_bucket": refill, "try_consume": consume, "slow_pass": slow, "retry_after_for_deficit": sess}


# ---------------------------------------------------------------------------
# encoding, limits, entries, exception conversions
# ---------------------------------------------------------------------------


def gen_encoding() -> list[dict]:
    out = []
    scheds = [
        (ScheduleEntry(cron="* 9-17 * * MON-FRI", tz="America/New_York", scale=0.5),
         ScheduleEntry(cron="* 0-6 * * *", tz="America/New_York", capacity=2000)),
        (ScheduleEntry(cron="0 0 * * SUN", scale=2.3),),
        (ScheduleEntry(cron="* * * jan-mar sat,sun", scale=0.0005),),
        (ScheduleEntry(cron="*/5 * * * *", capacity=10, refill_amount=5, refill_period_seconds=60),),
        (ScheduleEntry(cron="* * * * *", scale=1.0),),
        (ScheduleEntry(cron="* * * * 0-7", scale=1.5), ScheduleEntry(cron="* * * * SUN-THU", refill_amount=7)),
        (ScheduleEntry(cron="0 0 * * *", tz="UTC", scale=1 / 3), ScheduleEntry(cron="0 0 * * *", tz="Asia/Kolkata",
                                                                             scale=0.5)),
        (ScheduleEntry(cron="0 0 1 * *", scale=0.0015),),
        (ScheduleEntry(cron="0 0 1 * *", scale=0.0025),),
        (ScheduleEntry(cron="0 0 1 * *", scale=1e6),),
        (ScheduleEntry(cron="0 0 1 * *", capacity=10**15, refill_period_seconds=10**9),),
    ]
    for sched in scheds:
        case = {"fn": "encode", "sched": sched_json(sched)}
        try:
            enc, tz = encode(sched)
            case["result"] = [enc, tz]
            dec = decode(enc, tz)
            case["decoded"] = sched_json(dec)
            case["reencoded"] = list(encode(dec))
            case["to_cron_each"] = [to_cron(f"1{part}") if part else None for part in enc[1:].split(";")]
        except ValueError as exc:
            case["error"] = err(exc)
        out.append(case)
    resets = [("0 0 * * *",), ("0 0 1 * *", "0 12 * * MON-FRI"), ("* * * * *",), ("* * * * *", "0 0 * * *"),
              ("0 0 * * 0",), ("0 0 * * 7",), ("0 0 * * sun",), ("30 2 * * ſat",)]
    for crons in resets:
        sched = tuple(ScheduleEntry.reset(cron=c, tz="Europe/Berlin") for c in crons)
        case = {"fn": "encode_reset", "reset_sched": sched_json(sched)}
        try:
            enc, tz = encode_reset(sched)
            case["result"] = [enc, tz]
            try:
                case["decoded"] = sched_json(decode_reset(enc, tz))
            except ValueError as exc:
                case["decode_error"] = err(exc)
        except ValueError as exc:
            case["error"] = err(exc)
        out.append(case)
    decodes = ["1h9-17w1-5s500;h0-6c2000", "1m0h0", "01m0", "001h1", "0m0", "2m0", "m0", "1", "", "1m0;", "1;",
               "1m0;;h1", "1m0c1_000", "1m0c+5", "1m0c\uff15", "1m0s0", "1m0s1_0", "1m0 s500", "1mm0", "1m0m1",
               "1x5", "1m0s500c10", "1m0h0D1M1w1s1", "1m0Q5", "1m0c-5", "1m0s-5", "1m0c1.5", "1m0s2300",
               "1w0-7s1000", "1wSUNs1000", "1m60s500", "1h0-6a0", "1p0", "1m0c1000000000000001",
               "1m0s1000000001", "1M2D30s500", "1M2D29s500", "99999999999999999999m0s1", "1;m0s1", "1m0s1;;"]
    for compact in decodes:
        for fn, f in (("decode", decode), ("decode_reset", decode_reset)):
            case = {"fn": fn, "compact": compact, "tz": "UTC"}
            try:
                case["result"] = sched_json(f(compact, "UTC"))
            except ValueError as exc:
                case["error"] = err(exc)
            out.append(case)
    for compact in ["1m0h0w1-5", "1w0-7", "1w1-7", "1w5-7", "1w7/1", "1w7-7", "1M1-3w6,7", "1M12/1", "1m*/5",
                    "1", "m0", "1m0;h1", "1w1-5/2", "1M02", "1w8"]:
        case = {"fn": "to_cron", "compact": compact}
        try:
            case["result"] = to_cron(compact)
        except ValueError as exc:
            case["error"] = err(exc)
        out.append(case)
    return out


def gen_validation() -> dict:
    limits = []
    specs = [
        ("per_second", ("rps", 10)), ("per_second", ("rps", 10, 50)), ("per_minute", ("rpm", 100)),
        ("per_minute", ("rpm", 100, 5)), ("per_hour", ("rph", 1)), ("per_day", ("rpd", 10_000)),
        ("per_minute", ("rpm", 0)), ("per_minute", ("rpm", 10, 0)), ("per_minute", ("rpm", 10**15)),
        ("per_minute", ("rpm", 10**15 + 1)), ("per_day", ("rpd", -1)),
    ]
    for fn, args in specs:
        case = {"fn": fn, "args": list(args)}
        try:
            case["result"] = limit_json(getattr(Limit, fn)(*args))
        except Exception as exc:  # noqa: BLE001 (InvalidNameError is not a ValueError)
            case["error"] = err(exc)
        limits.append(case)
    quota_specs = [
        {"name": "rpd", "amount": 10_000, "cron": "0 0 * * *", "tz": "America/New_York"},
        {"name": "session", "amount": 100, "reset_after_seconds": 18_000},
        {"name": "q", "amount": 0, "cron": "0 0 * * *"},
        {"name": "q", "amount": 5},
        {"name": "q", "amount": 5, "cron": "0 0 * * *", "reset_after_seconds": 60},
        {"name": "q", "amount": 5, "reset_after_seconds": 0},
        {"name": "q", "amount": 5, "reset_after_seconds": 1.5},
        {"name": "q", "amount": 5, "reset_after_seconds": 10**9},
        {"name": "q", "amount": 5, "reset_after_seconds": 10**9 + 1},
        {"name": "q", "amount": 5, "cron": "0 0 L * *"},
        {"name": "wcu", "amount": 5, "cron": "0 0 * * *"},
    ]
    for spec in quota_specs:
        kw = {k: v for k, v in spec.items() if k not in ("name", "amount", "reset_after_seconds")}
        if "reset_after_seconds" in spec:
            kw["reset_after"] = timedelta(seconds=spec["reset_after_seconds"])
        case = {"fn": "quota", "args": spec}
        try:
            case["result"] = limit_json(Limit.quota(spec["name"], spec["amount"], **kw))
        except Exception as exc:  # noqa: BLE001 (InvalidNameError is not a ValueError)
            case["error"] = err(exc)
        limits.append(case)
    customs = [
        {"name": "x", "capacity": 10, "refill_amount": 0, "refill_period_seconds": 1},
        {"name": "x", "capacity": 10, "refill_amount": 1, "refill_period_seconds": 0},
        {"name": "x", "capacity": 10, "refill_amount": 1, "refill_period_seconds": 10**9 + 1},
        {"name": "x", "capacity": 10, "refill_amount": 1, "refill_period_seconds": 1,
         "reset_schedule": [{"cron": "0 0 * * *"}]},
        {"name": "x", "capacity": 10, "refill_amount": 1, "refill_period_seconds": 1,
         "schedule": [{"cron": "* 9 * * *", "tz": "UTC", "scale": 2}, {"cron": "* 9 * * *", "tz": "Asia/Kolkata",
                                                                       "scale": 2}]},
    ]
    for spec in customs:
        case = {"fn": "Limit", "args": spec}
        try:
            case["result"] = limit_json(Limit.from_dict(spec))
        except Exception as exc:  # noqa: BLE001 (InvalidNameError is not a ValueError)
            case["error"] = err(exc)
        limits.append(case)

    entries = []
    entry_specs = [
        {"cron": "* * * * *", "scale": 0.5}, {"cron": "* * * * *"}, {"cron": "* * * * *", "scale": 0.5, "capacity": 1},
        {"cron": "* * * * *", "scale": 0}, {"cron": "* * * * *", "scale": -1}, {"cron": "* * * * *", "scale": 1e6},
        {"cron": "* * * * *", "scale": 1e6 + 1}, {"cron": "* * * * *", "scale": 1e-300},
        {"cron": "* * * * *", "scale": float("nan")}, {"cron": "* * * * *", "scale": float("inf")},
        {"cron": "* * * * *", "scale": 2}, {"cron": "* * * * *", "scale": True},
        {"cron": "* * * * *", "capacity": 1.0}, {"cron": "* * * * *", "capacity": True},
        {"cron": "* * * * *", "capacity": 10**15}, {"cron": "* * * * *", "capacity": 10**15 + 1},
        {"cron": "* * * * *", "refill_period_seconds": 10**9}, {"cron": "* * * * *", "refill_period_seconds": 10**9 + 1},
        {"cron": "* * * * *", "refill_amount": 0}, {"cron": "* * * * *", "capacity": -5},
        {"cron": "* * * * *", "capacity": 10**400}, {"cron": "0 0 L * *", "scale": 0.5},
        {"cron": "* * * * *", "tz": "Nowhere/City", "scale": 0.5},
    ]
    for spec in entry_specs:
        case = {"fn": "ScheduleEntry", "args": {k: (repr(v) if isinstance(v, float) and not math.isfinite(v)
                                                     else (str(v) if isinstance(v, int) and abs(v) > 10**30 else v))
                                                 for k, v in spec.items()}}
        try:
            e = ScheduleEntry(**spec)
            case["ok"] = True
            case["scale_type"] = type(e.scale).__name__ if e.scale is not None else None
        except Exception as exc:  # noqa: BLE001 (InvalidNameError is not a ValueError)
            case["ok"] = False
            case["error"] = err(exc)
        entries.append(case)
    for spec in [{"cron": "0 0 * * *"}, {"cron": "0 0 * * *", "tz": "Asia/Kolkata"}]:
        entries.append({"fn": "ScheduleEntry.reset", "args": spec, "ok": True,
                        "_": entry_json(ScheduleEntry.reset(**spec))})
    try:
        ScheduleEntry(cron="0 0 * * *", scale=0.5, _reset=True)
        entries.append({"fn": "ScheduleEntry(_reset=True, scale)", "ok": True})
    except Exception as exc:  # noqa: BLE001 (InvalidNameError is not a ValueError)
        entries.append({"fn": "ScheduleEntry(_reset=True, scale)", "ok": False, "error": err(exc)})

    # RateLimitExceeded: aggregate retry and the derived header / ms fields
    exc_cases = []
    lim = Limit.per_minute("rpm", 10)
    for waits in [[0.001], [4.35], [0.29], [2.0, 2.0], [1.5, 30.001, 0.2], [0.0, 0.0], [59.999], [1e-3, 1.0005],
                  [86400.001], [1.1], [1.001], [2.002], [1.023], [0.25], [0.35]]:
        statuses = [LimitStatus(entity_id="e", resource="r", limit_name=f"l{i}", limit=lim, available=0,
                                requested=1, exceeded=True, retry_after_seconds=w) for i, w in enumerate(waits)]
        e = RateLimitExceeded(statuses)
        d = e.as_dict()
        exc_cases.append({"waits": waits, "retry_after_seconds": e.retry_after_seconds,
                          "primary": e.primary_violation.limit_name, "retry_after_ms": d["retry_after_ms"],
                          "retry_after_header": e.retry_after_header, "message": str(e)})
    return {"limits": limits, "entries": entries, "rate_limit_exceeded": exc_cases}


# ---------------------------------------------------------------------------


def main() -> None:
    sys.setrecursionlimit(10_000)
    data: dict = {}
    data["parse"] = gen_parse()
    data["match"] = gen_match()
    data["boundaries"] = gen_boundaries()
    data["effective_params"] = gen_effective()
    data["retry_after"] = gen_retry()
    bucket = gen_bucket()
    data.update(bucket)
    data["encoding"] = gen_encoding()
    data.update(gen_validation())
    data["known_hangs"] = HANGS

    tzdata_version = None
    for path in ("/usr/share/zoneinfo/tzdata.zi",):
        try:
            with open(path) as fh:
                tzdata_version = fh.readline().strip().removeprefix("# version ")
        except OSError:
            pass
    counts = {k: len(v) for k, v in data.items() if isinstance(v, list)}
    data["meta"] = {
        "generator": "gen_vectors.py",
        "seed": SEED,
        "zae_limiter": zae_limiter.__version__,
        # The installed one: 2.8 and 2.9 read `a-a/step` differently
        # (docs/semantics.md, "One-value ranges with a step").
        "cronsim": importlib.metadata.version("cronsim"),
        "python": platform.python_version(),
        "tzdata_system": tzdata_version,
        "tz_source_note": "zoneinfo searched TZPATH first (/usr/share/zoneinfo); the pip tzdata package "
                          "is only a fallback, so the system version above is what was used",
        "integers": "some integers exceed 2**63 (milli values up to 1e24+, products up to ~1e36): use i128",
        "floats": "floats are Python repr (shortest round-trip); compare as exact f64",
        "counts": counts,
    }
    # One line, as committed: regenerating with the pinned packages gives
    # the same bytes, so `--check` can compare exactly.
    text = json.dumps(data, ensure_ascii=True)
    if "--check" in sys.argv[1:]:
        sys.exit(check(text, data))
    with open(OUT, "w") as fh:
        fh.write(text)
    for k, v in counts.items():
        print(f"{k:28s} {v}")
    agree = [c for c in data["boundaries"] if "agrees_with_minute_scan" in c]
    print("boundary cases checked against minute scan:", len(agree),
          "disagreeing:", sum(1 for c in agree if not c["agrees_with_minute_scan"]))
    print("wrote", OUT)


def check(text: str, data: dict) -> int:
    """0 when OUT holds exactly `text`; else names what differs, returns 1."""
    try:
        with open(OUT) as fh:
            old_text = fh.read()
    except OSError as e:
        print(f"cannot read {OUT}: {e}", file=sys.stderr)
        return 1
    if old_text == text:
        print(f"{OUT}: up to date")
        return 0
    old = json.loads(old_text)
    for section in sorted(set(old) | set(data)):
        a, b = old.get(section), data.get(section)
        if a == b:
            continue
        if isinstance(a, list) and isinstance(b, list):
            changed = sum(1 for x, y in zip(a, b) if x != y) + abs(len(a) - len(b))
            print(f"{section}: {changed} of {len(b)} cases differ (file has {len(a)})")
        else:
            print(f"{section}: differs: file {json.dumps(a)[:300]} / now {json.dumps(b)[:300]}")
    print(f"{OUT} is not what the installed reference gives; regenerate it "
          "(python scripts/oracle/gen_vectors.py) only if the change is meant", file=sys.stderr)
    return 1


if __name__ == "__main__":
    main()
