//! Schedules (entries sharing one zone) and the instants at which they change:
//! the active entry, the next parameter boundary and the next and previous reset
//! edges (docs/semantics.md, "Windows and edges").
//!
//! A *window* is a maximal run of UTC minutes at which a pattern matches; an
//! *edge* is the first minute of a window. Parameter boundaries keep the
//! reference's horizons (docs/semantics.md, "Where we differ") because
//! `next_boundary` is a "look again by" stamp and its capped fallback is part
//! of what is stored; reset edges are found however far away they are (the
//! reference's horizons are too short for `0 0 31 * *` and friends: bug B4),
//! and every scan is bounded, so it returns.

use chrono_tz::Tz;

use crate::civil::{DAY, MAX_MINUTE, MIN_MINUTE};
use crate::cron::CronSpec;
use crate::params::Modifier;
use crate::scan;

const MINUTE_MS: i64 = 60_000;
const DAY_MS: i64 = 86_400_000;

/// How far a plain edge search looks: one Gregorian cycle (400 years, after
/// which every calendar pattern repeats) plus slack for DST gaps.
pub const EDGE_SEARCH_MINUTES: i64 = 450 * 366 * DAY;

/// One schedule entry: a pattern and, for parameter schedules, what it changes.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// The pattern as written (kept for display and encoding).
    pub cron: String,
    pub spec: CronSpec,
    /// None for reset entries.
    pub modifier: Option<Modifier>,
}

/// Entries evaluated in one zone; the first matching entry wins.
#[derive(Debug, Clone, PartialEq)]
pub struct Schedule {
    pub tz: Tz,
    pub entries: Vec<Entry>,
}

impl Schedule {
    /// A schedule with no entries (never active, no edges).
    pub fn empty() -> Schedule {
        Schedule {
            tz: chrono_tz::UTC,
            entries: Vec::new(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Index of the first entry matching the minute containing `now_ms`.
    pub fn active_index(&self, now_ms: i64) -> Option<usize> {
        let u = now_ms.div_euclid(MINUTE_MS);
        self.entries
            .iter()
            .position(|e| scan::matches_at(&e.spec, self.tz, u))
    }

    /// The first entry matching the minute containing `now_ms`.
    pub fn active(&self, now_ms: i64) -> Option<&Entry> {
        self.active_index(now_ms).map(|i| &self.entries[i])
    }

    /// First minute `u` in `(from_u, to_u]` at which the active entry index differs
    /// from its value at `from_u`. Only entries that can change the answer are
    /// searched: with entry k active, earlier entries switching on or k switching off.
    pub fn next_active_change(&self, from_u: i64, to_u: i64) -> Option<i64> {
        let cur = self
            .entries
            .iter()
            .position(|e| scan::matches_at(&e.spec, self.tz, from_u));
        let start = from_u.checked_add(1)?;
        let mut best: Option<i64> = None;
        let searched = match cur {
            Some(k) => k + 1,
            None => self.entries.len(),
        };
        for (i, e) in self.entries.iter().take(searched).enumerate() {
            let want = cur != Some(i);
            let limit = best.map_or(to_u, |b| b.min(to_u));
            if let Some(u) = scan::find_forward(&e.spec, self.tz, want, start, limit) {
                best = Some(best.map_or(u, |b| b.min(u)));
            }
        }
        best
    }

    /// The reference's parameter-change horizon for this schedule
    /// (docs/semantics.md, "Where we differ": horizons).
    pub fn granularity(&self) -> (Unit, i64) {
        granularity(self.entries.iter().map(|e| &e.spec))
    }

    /// `_next_param_change`: the first minute after `fl(now)` and at most
    /// `now + cap` at which the active index changes, else `now + cap`.
    pub fn next_param_change(&self, now_ms: i64) -> i64 {
        let (_, cap) = self.granularity();
        let limit = now_ms.saturating_add(cap);
        let from_u = now_ms.div_euclid(MINUTE_MS);
        match self.next_active_change(from_u, limit.div_euclid(MINUTE_MS)) {
            Some(u) => u * MINUTE_MS,
            None => limit,
        }
    }

    /// The next rising edge of any entry strictly after the minute containing
    /// `now_ms`, however far away (plain definition; fixes B1–B4).
    pub fn next_reset_edge(&self, now_ms: i64) -> Option<i64> {
        let from = now_ms.div_euclid(MINUTE_MS).checked_add(1)?;
        let to = from.saturating_add(EDGE_SEARCH_MINUTES).min(MAX_MINUTE);
        self.edges(scan::next_edge, from, to).min()
    }

    /// The latest rising edge of any entry at or before the minute containing
    /// `now_ms`, however far back (plain definition; fixes B1–B4). None when the
    /// patterns match all the way back or never matched.
    pub fn prev_reset_edge(&self, now_ms: i64) -> Option<i64> {
        let at = now_ms.div_euclid(MINUTE_MS);
        let floor = at.saturating_sub(EDGE_SEARCH_MINUTES).max(MIN_MINUTE);
        self.edges(scan::prev_edge, at, floor).max()
    }

    /// Each entry's edge that `edge` finds between minutes `a` and `b`, in epoch ms.
    fn edges(
        &self,
        edge: fn(&CronSpec, Tz, i64, i64) -> Option<i64>,
        a: i64,
        b: i64,
    ) -> impl Iterator<Item = i64> + '_ {
        self.entries
            .iter()
            .filter_map(move |e| edge(&e.spec, self.tz, a, b))
            .map(|u| u * MINUTE_MS)
    }

    /// `_next_reset_edge`: per entry, its next edge within its own horizon, else
    /// `now + horizon`; the minimum over entries. None for an empty schedule.
    pub fn next_reset_stamp(&self, now_ms: i64) -> Option<i64> {
        let from = now_ms.div_euclid(MINUTE_MS).saturating_add(1);
        self.entries
            .iter()
            .map(|e| {
                let (_, cap) = reset_scan(&e.spec);
                let limit = now_ms.saturating_add(cap);
                match scan::next_edge(&e.spec, self.tz, from, limit.div_euclid(MINUTE_MS)) {
                    Some(u) => u * MINUTE_MS,
                    None => limit,
                }
            })
            .min()
    }
}

/// `next_boundary(sched, reset_sched, now)`: the earliest of the next parameter
/// change (when `sched` has entries) and the next reset stamp (when `resets`
/// has entries); None only when both are empty.
pub fn next_boundary(sched: &Schedule, resets: &Schedule, now_ms: i64) -> Option<i64> {
    let param = (!sched.is_empty()).then(|| sched.next_param_change(now_ms));
    let reset = resets.next_reset_stamp(now_ms);
    match (param, reset) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// The finest unit any entry constrains (docs/semantics.md, "Where we differ": horizons).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    Minute,
    Hour,
    Day,
}

impl Unit {
    /// The name the reference uses: `minute`, `hour`, `day`.
    pub fn name(self) -> &'static str {
        match self {
            Unit::Minute => "minute",
            Unit::Hour => "hour",
            Unit::Day => "day",
        }
    }
}

fn constrained(bits: u64, full: u64) -> bool {
    bits & full != full
}

fn minutes_constrained(s: &CronSpec) -> bool {
    constrained(s.minutes, (1 << 60) - 1)
}

fn hours_constrained(s: &CronSpec) -> bool {
    constrained(u64::from(s.hours), (1 << 24) - 1)
}

/// `_granularity(entries)`: minute (7 days) if any entry constrains minutes,
/// else hour (31 days) if any constrains hours, else day (366 days).
pub fn granularity<'a>(specs: impl IntoIterator<Item = &'a CronSpec>) -> (Unit, i64) {
    let mut unit = Unit::Day;
    for s in specs {
        if minutes_constrained(s) {
            unit = Unit::Minute;
        } else if hours_constrained(s) && unit == Unit::Day {
            unit = Unit::Hour;
        }
    }
    let cap = match unit {
        Unit::Minute => 7 * DAY_MS,
        Unit::Hour => 31 * DAY_MS,
        Unit::Day => 366 * DAY_MS,
    };
    (unit, cap)
}

/// `cycle_seconds(p)`: read from the coarsest constrained field
/// (docs/semantics.md, "Where we differ": horizons).
pub fn cycle_seconds(s: &CronSpec) -> i64 {
    if constrained(u64::from(s.months), 0b1_1111_1111_1110) {
        366 * 86_400
    } else if constrained(u64::from(s.days), 0xFFFF_FFFE) {
        31 * 86_400
    } else if constrained(u64::from(s.weekdays), 0xFE) {
        7 * 86_400
    } else if hours_constrained(s) {
        86_400
    } else if minutes_constrained(s) {
        3600
    } else {
        60
    }
}

/// `_reset_scan(p)`: the reference's per-entry reset horizon.
pub fn reset_scan(s: &CronSpec) -> (Unit, i64) {
    let (unit, cap) = granularity([s]);
    (unit, cap.max(cycle_seconds(s) * 1000))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sched(tz: Tz, crons: &[&str]) -> Schedule {
        Schedule {
            tz,
            entries: crons
                .iter()
                .map(|c| Entry {
                    cron: c.to_string(),
                    spec: CronSpec::parse(c).unwrap(),
                    modifier: None,
                })
                .collect(),
        }
    }

    #[test]
    fn feb_29_edges_years_apart() {
        let s = sched(chrono_tz::UTC, &["0 0 29 2 *"]);
        // 2025-01-01T00:00Z
        let now = 1_735_689_600_000;
        assert_eq!(s.next_reset_edge(now), Some(1_835_395_200_000)); // 2028-02-29
        assert_eq!(s.prev_reset_edge(now), Some(1_709_164_800_000)); // 2024-02-29
    }

    #[test]
    fn horizons_follow_the_constrained_fields() {
        let spec = |c| CronSpec::parse(c).unwrap();
        assert_eq!(
            granularity([&spec("0 0 * * *")]),
            (Unit::Minute, 7 * DAY_MS)
        );
        assert_eq!(
            granularity([&spec("* 9-17 * * *")]),
            (Unit::Hour, 31 * DAY_MS)
        );
        assert_eq!(
            granularity([&spec("0-59 * * * 1-5")]),
            (Unit::Day, 366 * DAY_MS)
        );
        assert_eq!(cycle_seconds(&spec("0 0 1 * *")), 31 * 86_400);
        assert_eq!(cycle_seconds(&spec("* * * * *")), 60);
        assert_eq!(reset_scan(&spec("0 0 1 1 *")), (Unit::Minute, 366 * DAY_MS));
    }

    #[test]
    fn active_change_ignores_entries_shadowed_by_the_active_one() {
        // Entry 0 covers every minute, so entry 1 flipping never changes the answer.
        let s = sched(chrono_tz::UTC, &["* * * * *", "*/2 * * * *"]);
        assert_eq!(s.next_active_change(0, 7 * DAY), None);
        assert_eq!(s.next_param_change(30_000), 30_000 + 7 * DAY_MS);
    }

    #[test]
    fn extreme_instants_do_not_panic() {
        let s = sched(chrono_tz::Pacific::Chatham, &["0 0 29 2 *", "* 2 * * *"]);
        for now in [
            i64::MIN,
            i64::MIN / 2,
            -62_135_596_800_000,
            0,
            253_402_300_799_999,
            i64::MAX / 2,
            i64::MAX,
        ] {
            let _ = s.active_index(now);
            let _ = s.next_param_change(now);
            let _ = s.next_reset_edge(now);
            let _ = s.prev_reset_edge(now);
            let _ = s.next_reset_stamp(now);
            let _ = next_boundary(&s, &s, now);
        }
    }
}
