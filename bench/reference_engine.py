"""Per-call cost of zae-limiter 0.17's evaluation functions on this machine.

Times the same operations, with the same inputs, as the Rust criterion bench
`engine/benches/engine.rs`, so the two can be read side by side:

    .venv/bin/python bench/reference_engine.py
    cargo bench -p zae-limiter-engine --bench engine

`parse_cron` is memoised (LRU 512) in the reference; both the cached call and
the uncached parse (`parse_cron.__wrapped__`) are reported.
"""

import sys
import timeit

from zae_limiter import schedule as S

NOW = 1_772_638_200_000  # 2026-03-04T15:30:00Z, a Wednesday, 10:30 in New York
NY = "America/New_York"


def per_call_us(fn, min_time=0.5):
    """Best-of-5 mean time per call in microseconds, each round >= min_time/5."""
    timer = timeit.Timer(fn)
    number, _ = timer.autorange()
    while number * 5 < 10 and number < 1_000_000:
        number *= 2
    rounds = timer.repeat(repeat=5, number=number)
    return min(rounds) / number * 1e6


def main():
    business = (
        S.ScheduleEntry("* 9-17 * * MON-FRI", tz=NY, scale=2.0),
        S.ScheduleEntry("* 0-5 * * *", tz=NY, scale=0.5),
        S.ScheduleEntry("0-29 12 * * *", tz=NY, capacity=10),
    )
    daily = (S.ScheduleEntry.reset("0 0 * * *", tz=NY),)
    leap = (S.ScheduleEntry.reset("0 0 29 2 *", tz="UTC"),)
    leap_ny = (S.ScheduleEntry.reset("0 0 29 2 *", tz=NY),)
    parsed = S.parse_cron("*/5 9-17 * * MON-FRI", NY)
    uncached = getattr(S.parse_cron, "__wrapped__", None)

    cases = [
        ("parse `* 9-17 * * MON-FRI` (memoised)", lambda: S.parse_cron("* 9-17 * * MON-FRI", NY)),
    ]
    if uncached is not None:
        cases.append(("parse `* 9-17 * * MON-FRI` (uncached)", lambda: uncached("* 9-17 * * MON-FRI", NY)))
    cases += [
        ("match `*/5 9-17 * * MON-FRI` New York", lambda: S.matches(parsed, NOW)),
        ("effective_params (3 entries)", lambda: S.effective_params(1_000_000, 1_000_000, 60_000, business, NOW)),
        ("next_boundary dense (3 entries)", lambda: S.next_boundary(business, now_ms=NOW)),
        ("next_boundary reset `0 0 * * *`", lambda: S.next_boundary((), daily, now_ms=NOW)),
        ("next_boundary reset `0 0 29 2 *` (capped)", lambda: S.next_boundary((), leap, now_ms=NOW)),
        ("next_reset_edge `0 0 29 2 *` (reference: None, B4)", lambda: S.next_reset_edge(leap, now_ms=NOW)),
        ("next_reset_edge `0 0 29 2 *` New York (None, B4)", lambda: S.next_reset_edge(leap_ny, now_ms=NOW)),
        ("prev_reset_edge `0 0 29 2 *` New York (None, B4)", lambda: S.prev_reset_edge(leap_ny, NOW)),
        (
            "retry_after_with_schedule (3 entries)",
            lambda: S.retry_after_with_schedule(5_000_000, 1_000_000, 1_000_000, 60_000, business, now_ms=NOW),
        ),
        (
            "retry_after_with_schedule quota `0 0 * * *`",
            lambda: S.retry_after_with_schedule(5_000, 1_000_000, 0, 1000, (), daily, now_ms=NOW),
        ),
    ]
    width = max(len(name) for name, _ in cases)
    print(f"zae-limiter reference, Python {sys.version.split()[0]}: time per call")
    for name, fn in cases:
        print(f"{name:<{width}}  {per_call_us(fn):>12.2f} us")


if __name__ == "__main__":
    main()
