//! Far-future offsets from each zone's POSIX TZ rule (the TZif footer), for
//! instants at or after the zone's last explicit transition.
//!
//! Python's `zoneinfo` keeps applying a zone's rule forever; chrono-tz's
//! generated tables stop around 2037 and then hold the last offset, which is
//! wrong for every daylight-saving zone in half of each later year (Lord Howe
//! in July 2150, say). The rule table (`zone_rules.txt`) is data generated
//! from the same tz database 2025b files the reference read
//! (`scripts/oracle/gen_zone_rules.py`), parsed once on first use.

use std::str::{FromStr, SplitWhitespace};
use std::sync::LazyLock;

use chrono::{Datelike, NaiveDate};

/// One zone's POSIX rule, offsets east-positive in seconds.
pub(crate) struct Rule {
    pub zone: &'static str,
    /// UTC seconds of the last transition listed in the TZif file.
    pub last_transition: i64,
    pub std: i32,
    pub dst: i32,
    /// `Mm.w.d/time`: month, week (5 = last), weekday (0 = Sunday), local
    /// seconds after midnight (may be negative or above 24 h); the start
    /// time is in standard time, the end time in daylight time.
    pub start: (u32, u32, u32, i64),
    pub end: (u32, u32, u32, i64),
}

/// The UTC offset (seconds) the zone's POSIX rule gives at `utc_secs`, when
/// the instant is at or past the zone's last explicit transition and the
/// zone has a daylight-saving rule; None to use chrono-tz's tables.
pub(crate) fn rule_offset(zone: &str, utc_secs: i64) -> Option<i32> {
    if utc_secs < TABLE.min_last_transition {
        return None;
    }
    let i = TABLE.rules.binary_search_by(|r| r.zone.cmp(zone)).ok()?;
    let r = &TABLE.rules[i];
    if utc_secs < r.last_transition {
        return None;
    }
    apply(r, utc_secs)
}

/// The generated rules, sorted by zone for a binary search.
struct Table {
    rules: Vec<Rule>,
    /// The earliest `last_transition`: before it no rule applies (a fast path).
    min_last_transition: i64,
}

static TABLE: LazyLock<Table> = LazyLock::new(|| Table::parse(include_str!("zone_rules.txt")));

impl Table {
    /// Parses the generator's lines; `#` starts a comment. The text is
    /// compiled in and every row is read by the tests, so a bad row is a
    /// build mistake and panics.
    fn parse(text: &'static str) -> Table {
        let rules: Vec<Rule> = text
            .lines()
            .map(|line| line.split('#').next().unwrap_or_default().trim())
            .filter(|line| !line.is_empty())
            .map(|line| {
                Rule::parse(line).unwrap_or_else(|| panic!("zone_rules.txt: bad row {line:?}"))
            })
            .collect();
        let min_last_transition = rules
            .iter()
            .map(|r| r.last_transition)
            .min()
            .unwrap_or(i64::MAX);
        Table {
            rules,
            min_last_transition,
        }
    }
}

impl Rule {
    /// One row: zone, last transition, std, dst, then start and end as
    /// month, week, weekday, time; None if a field is missing, extra or not a number.
    fn parse(line: &'static str) -> Option<Rule> {
        fn field<T: FromStr>(f: &mut SplitWhitespace) -> Option<T> {
            f.next()?.parse().ok()
        }
        fn when(f: &mut SplitWhitespace) -> Option<(u32, u32, u32, i64)> {
            Some((field(f)?, field(f)?, field(f)?, field(f)?))
        }
        let mut f = line.split_whitespace();
        let rule = Rule {
            zone: f.next()?,
            last_transition: field(&mut f)?,
            std: field(&mut f)?,
            dst: field(&mut f)?,
            start: when(&mut f)?,
            end: when(&mut f)?,
        };
        f.next().is_none().then_some(rule)
    }
}

fn apply(r: &Rule, utc_secs: i64) -> Option<i32> {
    let year = chrono::DateTime::from_timestamp(utc_secs + r.std as i64, 0)?.year();
    let start = transition_utc(year, r.start, r.std)?;
    let end = transition_utc(year, r.end, r.dst)?;
    let in_dst = if start < end {
        start <= utc_secs && utc_secs < end
    } else {
        utc_secs < end || utc_secs >= start
    };
    Some(if in_dst { r.dst } else { r.std })
}

/// UTC seconds of a rule's transition in `year`, given the offset in force before it.
fn transition_utc(
    year: i32,
    (month, week, weekday, time): (u32, u32, u32, i64),
    before: i32,
) -> Option<i64> {
    let first = NaiveDate::from_ymd_opt(year, month, 1)?;
    let first_wd = first.weekday().num_days_from_sunday();
    let mut day = 1 + (weekday + 7 - first_wd) % 7 + (week.saturating_sub(1)) * 7;
    let dim = days_in_month(year, month);
    while day > dim {
        day -= 7;
    }
    let date = NaiveDate::from_ymd_opt(year, month, day)?;
    let midnight = date.and_hms_opt(0, 0, 0)?.and_utc().timestamp();
    Some(midnight + time - before as i64)
}

fn days_in_month(year: i32, month: u32) -> u32 {
    match month {
        2 if NaiveDate::from_ymd_opt(year, 2, 29).is_some() => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Epoch seconds of `y-m-d h:00:00Z`.
    fn utc(y: i32, m: u32, d: u32, h: u32) -> i64 {
        NaiveDate::from_ymd_opt(y, m, d)
            .unwrap()
            .and_hms_opt(h, 0, 0)
            .unwrap()
            .and_utc()
            .timestamp()
    }

    /// The rule, applied where chrono-tz's tables still answer (2030–2036),
    /// must agree with them hour by hour for every zone in the table.
    #[test]
    fn rules_agree_with_tables_before_the_cutoff() {
        use chrono::{Offset, TimeZone};
        let from = utc(2030, 1, 1, 0);
        let to = utc(2036, 12, 31, 0);
        let mut checked = 0;
        for r in &TABLE.rules {
            // Zones with explicit transitions past 2038 (Gaza, Casablanca: Ramadan
            // rules listed to 2086) follow their tables, not the rule, until then.
            if r.last_transition > i32::MAX as i64 {
                continue;
            }
            let Ok(tz) = r.zone.parse::<chrono_tz::Tz>() else {
                continue;
            };
            let mut t = from;
            while t < to {
                let dt = chrono::DateTime::from_timestamp(t, 0).unwrap().naive_utc();
                let want = tz.offset_from_utc_datetime(&dt).fix().local_minus_utc();
                assert_eq!(apply(r, t), Some(want), "{} at {t}", r.zone);
                t += 5 * 3600 + 17 * 60; // not aligned to transitions, to probe both sides
            }
            checked += 1;
        }
        assert!(checked > 150, "{checked} zones checked");
    }

    #[test]
    fn table_is_sorted_for_binary_search() {
        assert!(TABLE.rules.windows(2).all(|w| w[0].zone < w[1].zone));
    }

    #[test]
    fn table_reads_every_row() {
        let rows = include_str!("zone_rules.txt")
            .lines()
            .filter(|l| !l.starts_with('#'))
            .count();
        assert_eq!(TABLE.rules.len(), rows);
        let cairo = TABLE
            .rules
            .iter()
            .find(|r| r.zone == "Africa/Cairo")
            .unwrap();
        assert_eq!(
            (cairo.last_transition, cairo.std, cairo.dst),
            (2140462800, 7200, 10800)
        );
        assert_eq!((cairo.start, cairo.end), ((4, 5, 5, 0), (10, 5, 4, 86400)));
        assert_eq!(TABLE.min_last_transition, 2137586400);
        assert!(
            Rule::parse("Zone/X 1 2 3 4 5 6 7 8 9 10 11 12").is_none(),
            "extra field"
        );
        assert!(
            Rule::parse("Zone/X 1 2 3 4 5 6 7 8 9 10").is_none(),
            "missing field"
        );
        assert!(
            Rule::parse("Zone/X 1 2 3 4 5 6 7 8 9 x 11").is_none(),
            "not a number"
        );
    }

    #[test]
    fn new_york_2150() {
        // 2150-07-01T12:00Z is summer: EDT.
        let july = utc(2150, 7, 1, 12);
        assert_eq!(rule_offset("America/New_York", july), Some(-4 * 3600));
        let jan = utc(2150, 1, 1, 12);
        assert_eq!(rule_offset("America/New_York", jan), Some(-5 * 3600));
        // Before the last listed transition the tables answer.
        assert_eq!(rule_offset("America/New_York", 0), None);
        assert_eq!(rule_offset("UTC", july), None);
    }

    #[test]
    fn dublin_negative_dst_and_lord_howe() {
        let july = utc(2150, 7, 2, 0);
        assert_eq!(rule_offset("Europe/Dublin", july), Some(3600));
        assert_eq!(rule_offset("Australia/Lord_Howe", july), Some(37800));
    }
}
