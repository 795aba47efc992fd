//! IANA zones and wall-clock matching (docs/semantics.md, "Instants, minutes and zones").
//!
//! A pattern is matched against the local wall time of a UTC instant:
//! convert the instant to the zone's local time and test the fields. Every
//! instant has exactly one wall time, so a spring-forward gap never matches
//! and a fall-back overlap matches twice, exactly as the reference's
//! `fromtimestamp(now_ms/1000, tz)` does. Local Mean Time offsets with
//! seconds (New York −4:56:02) are honoured.
//!
//! Offsets come from chrono-tz (tz database 2025b, pinned to what the
//! reference was measured with). chrono-tz's tables stop at the last
//! transition it generated (around 2037); after that Python follows the
//! zone's POSIX rule, so for instants past the zone's last explicit
//! transition we apply that rule ourselves (`zone_rules`).
//!
//! Names: IANA names and links as chrono-tz 0.10.4 knows them. The reference
//! also accepts host files that are not zones (`localtime`, `posix/...`,
//! `right/...`, `Factory`); we refuse those. Before 1970 about a hundred
//! zones differ from the reference's Debian tzdata, which is built with
//! IANA's `backzone` (see `tests/oracle_cron.rs::zone_offsets_agree`).

use chrono::{DateTime, Datelike, NaiveDateTime, Offset, TimeZone, Timelike};
use chrono_tz::Tz;

/// Why a zone name was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ZoneError {
    /// `""`.
    #[error("unknown timezone '': a zone name is required (e.g. UTC or Europe/Berlin)")]
    Empty,
    /// An absolute path or one that climbs out of the zone tree.
    #[error("unknown timezone '{0}': a zone name must be an IANA name like Europe/Berlin, not a file path")]
    Path(String),
    /// Not an IANA name or link (names are case-sensitive).
    #[error("unknown timezone '{name}'{}", suggestion_text(.suggestion))]
    Unknown {
        name: String,
        /// The correctly spelled name when the input differs only in case or spaces.
        suggestion: Option<String>,
    },
}

fn suggestion_text(s: &Option<String>) -> String {
    match s {
        Some(s) => format!(": did you mean '{s}'? (zone names are case-sensitive)"),
        None => {
            ": not an IANA time zone name (e.g. UTC, Europe/Berlin, America/New_York)".to_string()
        }
    }
}

/// Look up an IANA zone name or link (`US/Eastern`, `NZ-CHAT`), case-sensitively,
/// as Python's `ZoneInfo` does with the tz database.
pub fn zone(name: &str) -> Result<Tz, ZoneError> {
    if name.is_empty() {
        return Err(ZoneError::Empty);
    }
    if name.starts_with('/') || name.split('/').any(|p| p == ".." || p == ".") {
        return Err(ZoneError::Path(name.to_string()));
    }
    if let Ok(tz) = name.parse::<Tz>() {
        return Ok(tz);
    }
    let folded = name.replace(' ', "_").to_ascii_lowercase();
    let suggestion = chrono_tz::TZ_VARIANTS
        .iter()
        .find(|tz| tz.name().to_ascii_lowercase() == folded)
        .map(|tz| tz.name().to_string());
    Err(ZoneError::Unknown {
        name: name.to_string(),
        suggestion,
    })
}

/// A local wall-clock reading of one instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WallTime {
    pub year: i32,
    pub month: u32,
    pub day: u32,
    pub hour: u32,
    pub minute: u32,
    pub second: u32,
    /// ISO weekday, Mon=1 … Sun=7.
    pub iso_weekday: u32,
    /// Offset from UTC in seconds (east positive), as in force at the instant.
    pub offset_seconds: i32,
}

/// The reference's datetime range: years 1..=9999, local and UTC.
const MIN_YEAR: i32 = 1;
const MAX_YEAR: i32 = 9999;

/// UTC offset (seconds, east positive) of `tz` at the UTC instant `t_ms`;
/// None when the instant is outside years 1..=9999.
pub fn utc_offset_seconds(tz: Tz, t_ms: i64) -> Option<i32> {
    let utc = DateTime::from_timestamp_millis(t_ms)?.naive_utc();
    if !(MIN_YEAR..=MAX_YEAR).contains(&utc.year()) {
        return None;
    }
    Some(offset_at(tz, &utc))
}

fn offset_at(tz: Tz, utc: &NaiveDateTime) -> i32 {
    let secs = utc.and_utc().timestamp();
    if let Some(off) = crate::zone_rules::rule_offset(tz.name(), secs) {
        return off;
    }
    tz.offset_from_utc_datetime(utc).fix().local_minus_utc()
}

/// The local wall time at the UTC instant `t_ms` in `tz`.
///
/// Returns None when the UTC or the local date falls outside years 1..=9999,
/// where the reference's `datetime` raises; callers treat that as "no match".
pub fn wall_time(tz: Tz, t_ms: i64) -> Option<WallTime> {
    let utc = DateTime::from_timestamp_millis(t_ms)?.naive_utc();
    if !(MIN_YEAR..=MAX_YEAR).contains(&utc.year()) {
        return None;
    }
    let offset = offset_at(tz, &utc);
    let local = utc.checked_add_signed(chrono::TimeDelta::seconds(offset as i64))?;
    if !(MIN_YEAR..=MAX_YEAR).contains(&local.year()) {
        return None;
    }
    Some(WallTime {
        year: local.year(),
        month: local.month(),
        day: local.day(),
        hour: local.hour(),
        minute: local.minute(),
        second: local.second(),
        iso_weekday: local.weekday().number_from_monday(),
        offset_seconds: offset,
    })
}

/// Whether the minute containing the UTC instant `t_ms` matches `spec` in `tz`
/// (docs/semantics.md, "Instants, minutes and zones"). Seconds are ignored.
/// Instants whose UTC or local date is outside years 1..=9999 never match (the
/// reference raises there); this never panics.
pub fn matches(spec: &crate::cron::CronSpec, tz: Tz, t_ms: i64) -> bool {
    match wall_time(tz, t_ms) {
        Some(w) => spec.matches_fields(w.minute, w.hour, w.day, w.month, w.iso_weekday),
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cron::CronSpec;

    #[test]
    fn names_are_case_sensitive_with_suggestion() {
        assert!(zone("UTC").is_ok());
        assert!(zone("US/Eastern").is_ok());
        assert!(zone("NZ-CHAT").is_ok());
        let e = zone("utc").unwrap_err();
        assert_eq!(
            e,
            ZoneError::Unknown {
                name: "utc".into(),
                suggestion: Some("UTC".into())
            }
        );
        assert!(e.to_string().contains("did you mean 'UTC'"));
        let e = zone("America/New York").unwrap_err();
        assert!(e.to_string().contains("America/New_York"), "{e}");
        assert_eq!(zone(""), Err(ZoneError::Empty));
        assert!(matches!(zone("/UTC"), Err(ZoneError::Path(_))));
        assert!(matches!(zone("../UTC"), Err(ZoneError::Path(_))));
    }

    #[test]
    fn extreme_instants_do_not_match_or_panic() {
        let spec = CronSpec::parse("* * * * *").unwrap();
        let tz = zone("Asia/Tokyo").unwrap();
        for t in [i64::MIN, i64::MAX, -62_135_596_800_001, 253_402_300_800_000] {
            assert!(!matches(&spec, tz, t), "{t}");
        }
        // 0001-01-01T00:00Z is year 1 in UTC, but year 0 at UTC-5: no match.
        let ny = zone("America/New_York").unwrap();
        assert!(!matches(&spec, ny, -62_135_596_800_000));
        assert!(matches(&spec, tz, -62_135_596_800_000));
    }

    proptest::proptest! {
        /// Any instant, any zone: no panic; outside years 1..=9999 no match.
        #[test]
        fn wall_time_total(t in proptest::num::i64::ANY, z in 0usize..chrono_tz::TZ_VARIANTS.len()) {
            let tz = chrono_tz::TZ_VARIANTS[z];
            let spec = CronSpec::parse("* * * * *").unwrap();
            let w = wall_time(tz, t);
            proptest::prop_assert_eq!(matches(&spec, tz, t), w.is_some());
            if let Some(w) = w {
                proptest::prop_assert!((1..=9999).contains(&w.year));
            }
        }
    }
}
