//! Finding the next or previous minute at which one pattern matches (or stops
//! matching) in a zone, by jumping over fields instead of stepping minutes.
//!
//! The reference evaluates a pattern at UTC-minute-aligned instants, converting
//! each to the zone's wall time (docs/semantics.md, "How the engine searches").
//! Between two offset changes the wall clock is the UTC minute plus a constant,
//! so within such a *segment* the search is a plain calendar search on
//! wall-clock minutes: skip to the next month in the set, the next day whose
//! day rule holds, the next hour, the next minute. A search crosses segments
//! one at a time, so DST gaps (wall minutes that never occur) and overlaps
//! (wall minutes that occur twice) follow from the offsets alone, and `0 0 29 2
//! *` four years away costs a few hundred steps.
//!
//! All positions are minute indices (`epoch ms / 60000`); every search is bounded
//! by an explicit limit and by [`MIN_MINUTE`]..=[`MAX_MINUTE`], so it terminates.

use chrono_tz::Tz;

use std::sync::OnceLock;

use crate::civil::{days_from_civil, Fields, DAY, MAX_MINUTE, MIN_MINUTE};
use crate::cron::{next_bit, prev_bit, CronSpec};

const ALL_MINUTES: u64 = (1 << 60) - 1;
const ALL_HOURS: u32 = (1 << 24) - 1;
const ALL_DAYS: u32 = ((1u64 << 32) - 2) as u32;
const ALL_MONTHS: u16 = 0b1_1111_1111_1110;
const ALL_WEEKDAYS: u8 = 0b1111_1110;

/// The zone's offset at UTC minute `u`, in whole minutes rounded down (a wall
/// minute index is `u + offset`; sub-minute LMT offsets round as the reference's
/// seconds-dropping conversion does).
pub fn offset_minutes(tz: Tz, u: i64) -> i64 {
    let u = u.clamp(MIN_MINUTE, MAX_MINUTE);
    crate::zone::utc_offset_seconds(tz, u * 60_000).map_or(0, |s| i64::from(s).div_euclid(60))
}

/// Whether the wall-clock fields match the pattern (minute, hour, month and the
/// day-of-month/day-of-week rule).
pub fn fields_match(spec: &CronSpec, f: &Fields) -> bool {
    spec.months >> f.month & 1 == 1
        && day_ok(spec, f)
        && spec.hours >> f.hour & 1 == 1
        && spec.minutes >> f.minute & 1 == 1
}

fn day_ok(spec: &CronSpec, f: &Fields) -> bool {
    let dom = spec.days >> f.day & 1 == 1;
    let dow = spec.weekdays >> f.weekday & 1 == 1;
    if spec.day_and {
        dom && dow
    } else {
        dom || dow
    }
}

/// True when the day rule holds on every day, so only month changes can end a run.
fn day_rule_always(spec: &CronSpec) -> bool {
    let dom = spec.days & ALL_DAYS == ALL_DAYS;
    let dow = spec.weekdays & ALL_WEEKDAYS == ALL_WEEKDAYS;
    if spec.day_and {
        dom && dow
    } else {
        dom || dow
    }
}

/// True when some field set is empty, so the pattern can never match.
fn never_matches(spec: &CronSpec) -> bool {
    spec.minutes & ALL_MINUTES == 0
        || spec.hours & ALL_HOURS == 0
        || spec.months & ALL_MONTHS == 0
        || (spec.day_and && (spec.days & ALL_DAYS == 0 || spec.weekdays & ALL_WEEKDAYS == 0))
        || (!spec.day_and && spec.days & ALL_DAYS == 0 && spec.weekdays & ALL_WEEKDAYS == 0)
}

/// True when the pattern matches every minute.
fn always_matches(spec: &CronSpec) -> bool {
    spec.minutes & ALL_MINUTES == ALL_MINUTES
        && spec.hours & ALL_HOURS == ALL_HOURS
        && spec.months & ALL_MONTHS == ALL_MONTHS
        && day_rule_always(spec)
}

/// Whether the pattern matches at UTC minute `u` in `tz`.
pub fn matches_at(spec: &CronSpec, tz: Tz, u: i64) -> bool {
    if !(MIN_MINUTE..=MAX_MINUTE).contains(&u) {
        return false;
    }
    fields_match(spec, &Fields::of(u + offset_minutes(tz, u)))
}

/// Which way a wall-clock walk goes. A step skips to the nearest minute that
/// the field ruling the current one out allows: the first minute of what
/// comes after when going forward, the last minute of what came before when
/// going backward.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dir {
    Forward,
    Backward,
}

impl Dir {
    /// The set bit of `bits` nearest `x` in this direction, strictly past it
    /// (forward within the low `width` bits).
    fn bit(self, bits: u64, x: u32, width: u32) -> Option<u32> {
        match self {
            Dir::Forward => next_bit(bits & ((1 << width) - 1), x + 1),
            Dir::Backward => x.checked_sub(1).and_then(|upto| prev_bit(bits, upto)),
        }
    }

    /// The minute of hour `h` of `f`'s day where the walk lands.
    fn in_hour(self, f: &Fields, h: u32) -> i64 {
        let first = f.day_start + i64::from(h) * 60;
        match self {
            Dir::Forward => first,
            Dir::Backward => first + 59,
        }
    }

    /// The minute just past `f`'s hour in this direction.
    fn past_hour(self, f: &Fields) -> i64 {
        match self {
            Dir::Forward => f.hour_start() + 60,
            Dir::Backward => f.hour_start() - 1,
        }
    }

    /// The minute just past `f`'s day in this direction.
    fn past_day(self, f: &Fields) -> i64 {
        match self {
            Dir::Forward => f.day_start + DAY,
            Dir::Backward => f.day_start - 1,
        }
    }

    /// The minute just past `f`'s month in this direction.
    fn past_month(self, f: &Fields) -> i64 {
        match self {
            Dir::Forward => f.next_month_start(),
            Dir::Backward => f.month_start() - 1,
        }
    }
}

/// The wall minute nearest `l` (itself included) in direction `dir` whose
/// match state is `want`: the first in `[l, bound)` forward, the last in
/// `[bound, l]` backward.
fn wall_walk(spec: &CronSpec, want: bool, dir: Dir, mut l: i64, bound: i64) -> Option<i64> {
    if hopeless(spec, want) {
        return None;
    }
    let minutes = spec.minutes & ALL_MINUTES;
    let hours = u64::from(spec.hours & ALL_HOURS);
    let within = |l: i64| match dir {
        Dir::Forward => l < bound,
        Dir::Backward => l >= bound,
    };
    while within(l) {
        let f = Fields::of(l);
        if want {
            if spec.months >> f.month & 1 == 0 {
                l = dir.past_month(&f);
            } else if !day_ok(spec, &f) {
                l = dir.past_day(&f);
            } else if hours >> f.hour & 1 == 0 {
                l = match dir.bit(hours, f.hour, 24) {
                    Some(h) => dir.in_hour(&f, h),
                    None => dir.past_day(&f),
                };
            } else if minutes >> f.minute & 1 == 0 {
                l = match dir.bit(minutes, f.minute, 60) {
                    Some(m) => f.hour_start() + i64::from(m),
                    None => dir.past_hour(&f),
                };
            } else {
                return Some(l);
            }
        } else {
            if !fields_match(spec, &f) {
                return Some(l);
            }
            if let Some(m) = dir.bit(!minutes, f.minute, 60) {
                l = f.hour_start() + i64::from(m);
            } else if minutes != ALL_MINUTES {
                l = dir.past_hour(&f);
            } else if let Some(h) = dir.bit(!hours, f.hour, 24) {
                l = dir.in_hour(&f, h);
            } else if hours != u64::from(ALL_HOURS) {
                l = dir.past_day(&f);
            } else if day_rule_always(spec) {
                l = dir.past_month(&f);
            } else {
                l = dir.past_day(&f);
            }
        }
    }
    None
}

/// Offset changes are at least this far apart in every tzdb zone (checked
/// against the 2025b files: the closest pair is more than a day apart), so
/// segment ends can be probed at this step and then bisected to the minute.
const PROBE: i64 = DAY;

/// Each zone's offset changes between 1850 and 2150 are found once (by
/// probing) and kept, so a search years long is a binary search per segment
/// instead of a probe per day. Outside that range the searches probe.
struct Transitions {
    lo: i64,
    hi: i64,
    /// Minutes `m` in `(lo, hi]` whose offset differs from that of `m − 1`.
    at: Vec<i64>,
}

fn cached_transitions(tz: Tz) -> &'static Transitions {
    static CACHE: OnceLock<Vec<OnceLock<Transitions>>> = OnceLock::new();
    let slots = CACHE.get_or_init(|| {
        (0..chrono_tz::TZ_VARIANTS.len())
            .map(|_| OnceLock::new())
            .collect()
    });
    let build = || {
        let lo = days_from_civil(1850, 1, 1) * DAY;
        let hi = days_from_civil(2150, 1, 1) * DAY;
        let mut at = Vec::new();
        let mut u = lo;
        let mut q = offset_minutes(tz, u);
        while let Some(c) = probe_first_change(tz, u, q, hi) {
            at.push(c);
            u = c;
            q = offset_minutes(tz, c);
        }
        Transitions { lo, hi, at }
    };
    match slots.get(tz as usize) {
        Some(slot) => slot.get_or_init(build),
        // Unreachable for a chrono-tz zone; computed afresh (and leaked once) if it ever happens.
        None => Box::leak(Box::new(build())),
    }
}

/// Narrows `[a, b]`, where `keeps(a)` holds and `keeps(b)` does not, to two
/// adjacent minutes: the last that keeps and the first that does not.
fn bisect(mut a: i64, mut b: i64, keeps: impl Fn(i64) -> bool) -> (i64, i64) {
    while b - a > 1 {
        let mid = a + (b - a) / 2;
        if keeps(mid) {
            a = mid;
        } else {
            b = mid;
        }
    }
    (a, b)
}

/// First UTC minute in `(u, limit]` whose offset differs from `q`, by probing.
fn probe_first_change(tz: Tz, u: i64, q: i64, limit: i64) -> Option<i64> {
    let mut lo = u;
    loop {
        if lo >= limit {
            return None;
        }
        let hi = (lo + PROBE).min(limit);
        if offset_minutes(tz, hi) != q {
            // offset(lo) == q, offset(hi) != q: the first minute that differs.
            return Some(bisect(lo, hi, |m| offset_minutes(tz, m) == q).1);
        }
        lo = hi;
    }
}

/// Last UTC minute in `[limit, u)` whose offset differs from `q`, by probing.
fn probe_last_change(tz: Tz, u: i64, q: i64, limit: i64) -> Option<i64> {
    let mut hi = u;
    loop {
        if hi <= limit {
            return None;
        }
        let lo = (hi - PROBE).max(limit);
        if offset_minutes(tz, lo) != q {
            // offset(lo) != q, offset(hi) == q: the last minute that differs.
            return Some(bisect(lo, hi, |m| offset_minutes(tz, m) != q).0);
        }
        hi = lo;
    }
}

/// First UTC minute in `(u, limit]` whose offset differs from `q` (the offset at `u`).
fn first_change(tz: Tz, u: i64, q: i64, limit: i64) -> Option<i64> {
    let t = cached_transitions(tz);
    let mut u = u;
    if u < t.lo {
        if let Some(c) = probe_first_change(tz, u, q, limit.min(t.lo)) {
            return Some(c);
        }
        if limit <= t.lo {
            return None;
        }
        u = t.lo;
    }
    if u < t.hi {
        let i = t.at.partition_point(|&x| x <= u);
        if let Some(&c) = t.at.get(i) {
            return (c <= limit).then_some(c);
        }
        if limit <= t.hi {
            return None;
        }
        u = t.hi;
    }
    probe_first_change(tz, u, q, limit)
}

/// Last UTC minute in `[limit, u)` whose offset differs from `q` (the offset at `u`).
fn last_change(tz: Tz, u: i64, q: i64, limit: i64) -> Option<i64> {
    let t = cached_transitions(tz);
    let mut u = u;
    if u > t.hi {
        if let Some(c) = probe_last_change(tz, u, q, limit.max(t.hi)) {
            return Some(c);
        }
        if limit >= t.hi {
            return None;
        }
        u = t.hi;
    }
    if u > t.lo {
        let i = t.at.partition_point(|&x| x <= u);
        if i > 0 {
            let c = t.at[i - 1];
            return (c > limit).then_some(c - 1);
        }
        if limit >= t.lo {
            return None;
        }
        u = t.lo;
    }
    probe_last_change(tz, u, q, limit)
}

/// True when no minute can have match state `want` (so no offset needs probing).
fn hopeless(spec: &CronSpec, want: bool) -> bool {
    if want {
        never_matches(spec)
    } else {
        always_matches(spec)
    }
}

/// First UTC minute `u` in `[from, to]` at which the pattern's match state is `want`.
pub fn find_forward(spec: &CronSpec, tz: Tz, want: bool, from: i64, to: i64) -> Option<i64> {
    if hopeless(spec, want) {
        return None;
    }
    let mut u = from.max(MIN_MINUTE);
    let to = to.min(MAX_MINUTE);
    while u <= to {
        let q = offset_minutes(tz, u);
        let cand = wall_walk(spec, want, Dir::Forward, u + q, to + q + 1).map(|l| l - q);
        match first_change(tz, u, q, cand.unwrap_or(to)) {
            None => return cand,
            Some(next) => u = next,
        }
    }
    None
}

/// Last UTC minute `u` in `[from, to]` at which the pattern's match state is `want`
/// (searching down from `to`).
pub fn find_backward(spec: &CronSpec, tz: Tz, want: bool, to: i64, from: i64) -> Option<i64> {
    if hopeless(spec, want) {
        return None;
    }
    let mut u = to.min(MAX_MINUTE);
    let from = from.max(MIN_MINUTE);
    while u >= from {
        let q = offset_minutes(tz, u);
        let cand = wall_walk(spec, want, Dir::Backward, u + q, from + q).map(|l| l - q);
        match last_change(tz, u, q, cand.unwrap_or(from)) {
            None => return cand,
            Some(prev) => u = prev,
        }
    }
    None
}

/// First rising edge `e` in `[from, to]`: matches at `e`, not at `e − 1`.
pub fn next_edge(spec: &CronSpec, tz: Tz, from: i64, to: i64) -> Option<i64> {
    let start = if matches_at(spec, tz, from.saturating_sub(1)) {
        find_forward(spec, tz, false, from, to)?
    } else {
        from
    };
    find_forward(spec, tz, true, start, to)
}

/// Last rising edge `e` with `e ≤ at` and `e − 1 ≥ floor`.
pub fn prev_edge(spec: &CronSpec, tz: Tz, at: i64, floor: i64) -> Option<i64> {
    let on = find_backward(spec, tz, true, at, floor)?;
    let off = find_backward(spec, tz, false, on.checked_sub(1)?, floor)?;
    Some(off + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(min: u64, hour: u32, days: u32, months: u16, wd: u8, day_and: bool) -> CronSpec {
        CronSpec {
            minutes: min,
            hours: hour,
            days,
            months,
            weekdays: wd,
            day_and,
        }
    }

    fn brute_forward(s: &CronSpec, tz: Tz, want: bool, from: i64, to: i64) -> Option<i64> {
        (from..=to).find(|&u| matches_at(s, tz, u) == want)
    }

    fn brute_backward(s: &CronSpec, tz: Tz, want: bool, to: i64, from: i64) -> Option<i64> {
        (from..=to).rev().find(|&u| matches_at(s, tz, u) == want)
    }

    #[test]
    fn feb_29_is_found_years_ahead() {
        // `0 0 29 2 *` in UTC from 2025-03-01.
        let s = spec(1, 1, 1 << 29, 1 << 2, ALL_WEEKDAYS, true);
        let from = days_from_civil(2025, 3, 1) * DAY;
        let got = find_forward(&s, chrono_tz::UTC, true, from, MAX_MINUTE);
        assert_eq!(got, Some(days_from_civil(2028, 2, 29) * DAY));
        let back = find_backward(&s, chrono_tz::UTC, true, from, MIN_MINUTE);
        assert_eq!(back, Some(days_from_civil(2024, 2, 29) * DAY));
    }

    #[test]
    fn new_york_spring_forward_skips_the_gap() {
        // `30 2 * * *` never matches on 2024-03-10 in New York.
        let tz = chrono_tz::America::New_York;
        let s = spec(1 << 30, 1 << 2, ALL_DAYS, ALL_MONTHS, ALL_WEEKDAYS, true);
        let from = days_from_civil(2024, 3, 10) * DAY; // 2024-03-09T19:00 local
        let got = find_forward(&s, tz, true, from, MAX_MINUTE);
        // 2024-03-11T02:30-04:00 = 06:30Z
        assert_eq!(got, Some(days_from_civil(2024, 3, 11) * DAY + 6 * 60 + 30));
    }

    #[test]
    fn agrees_with_a_minute_scan_around_transitions() {
        let zones = [
            chrono_tz::America::New_York,
            chrono_tz::Australia::Lord_Howe,
            chrono_tz::Pacific::Chatham,
            chrono_tz::Asia::Kolkata,
        ];
        let specs = [
            spec(1 << 30, 1 << 1, ALL_DAYS, ALL_MONTHS, ALL_WEEKDAYS, true),
            spec(
                ALL_MINUTES,
                1 << 2,
                ALL_DAYS,
                ALL_MONTHS,
                ALL_WEEKDAYS,
                true,
            ),
            spec(
                ALL_MINUTES,
                1 << 3,
                ALL_DAYS,
                ALL_MONTHS,
                ALL_WEEKDAYS,
                true,
            ),
            spec(
                0x0F0F_0F0F_0F0F_0F0F & ALL_MINUTES,
                0x00F0F0,
                ALL_DAYS,
                ALL_MONTHS,
                0b1000_0110,
                false,
            ),
            spec(1, 1, 1 << 7 | 1 << 20, ALL_MONTHS, 1 << 7, false),
        ];
        // Around 2024 NY spring-forward, Chatham fall-back (2024-04-07) and spring (2024-09-29).
        let starts = [
            days_from_civil(2024, 3, 9) * DAY,
            days_from_civil(2024, 4, 5) * DAY,
            days_from_civil(2024, 9, 27) * DAY,
            days_from_civil(2024, 10, 5) * DAY,
        ];
        for tz in zones {
            for s in &specs {
                for &st in &starts {
                    for k in 0..3 {
                        let from = st + k * 1291;
                        let to = from + 3 * DAY;
                        for want in [true, false] {
                            assert_eq!(
                                find_forward(s, tz, want, from, to),
                                brute_forward(s, tz, want, from, to),
                                "forward {tz} {s:?} {from} {want}"
                            );
                            assert_eq!(
                                find_backward(s, tz, want, to, from),
                                brute_backward(s, tz, want, to, from),
                                "backward {tz} {s:?} {to} {want}"
                            );
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn always_and_never_terminate() {
        let all = spec(
            ALL_MINUTES,
            ALL_HOURS,
            ALL_DAYS,
            ALL_MONTHS,
            ALL_WEEKDAYS,
            true,
        );
        assert_eq!(
            find_forward(&all, chrono_tz::UTC, false, 0, MAX_MINUTE),
            None
        );
        assert_eq!(next_edge(&all, chrono_tz::UTC, 0, MAX_MINUTE), None);
        assert_eq!(prev_edge(&all, chrono_tz::UTC, 0, MIN_MINUTE), None);
        let none = spec(0, ALL_HOURS, ALL_DAYS, ALL_MONTHS, ALL_WEEKDAYS, true);
        assert_eq!(
            find_forward(&none, chrono_tz::UTC, true, 0, MAX_MINUTE),
            None
        );
        assert_eq!(
            find_backward(&none, chrono_tz::UTC, true, 0, MIN_MINUTE),
            None
        );
        assert!(!matches_at(&all, chrono_tz::UTC, i64::MAX));
    }
}
