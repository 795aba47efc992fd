//! A limit's definition and the reference's construction rules (engine spec §10):
//! name, magnitude bounds, "drips or resets, never both", one recovery mechanism
//! per quota, one zone for all entries.

use crate::params::{check_period, check_tokens, BoundsError};
use crate::schedule::Schedule;

/// A validated limit, in whole tokens and seconds as configured.
#[derive(Debug, Clone, PartialEq)]
pub struct Limit {
    pub name: String,
    pub capacity: i128,
    pub refill_amount: i128,
    pub refill_period_seconds: i128,
    pub schedule: Schedule,
    pub reset_schedule: Schedule,
    pub reset_after_seconds: Option<i64>,
    pub soft: bool,
}

/// Why a limit cannot be built.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LimitError {
    #[error("invalid name {0:?}: start with a letter, then letters, digits, `_`, `.` or `-`, at most 64 characters")]
    InvalidName(String),
    #[error("invalid name: 'wcu' is a reserved limit name")]
    ReservedName,
    #[error(transparent)]
    Bounds(#[from] BoundsError),
    #[error("`schedule` takes parameter entries (scale or absolute fields) only")]
    ScheduleEntryWithoutModifier,
    #[error("`reset_schedule` takes reset entries (no modifiers) only")]
    ResetEntryWithModifier,
    #[error("a limit resets on a calendar or after a window, never both")]
    BothResets,
    #[error("refill_amount=0 means the limit does not drip, which is only valid with a reset")]
    NoRecovery,
    #[error("a limit drips or resets, never both")]
    DripsAndResets,
    #[error("all schedule entries on one limit must share a timezone")]
    MixedZones,
    #[error("a quota takes exactly one of `cron` or `reset_after`")]
    QuotaNeedsOneReset,
    #[error("invalid pattern: {0}")]
    InvalidPattern(#[from] crate::cron::CronError),
    #[error("reset_after must be a positive whole number of seconds")]
    ResetAfterNotWholeSeconds,
}

/// Build a schedule from entries that each name their zone; they must agree
/// (the zone is stored once per item).
pub fn one_zone(
    entries: Vec<(chrono_tz::Tz, crate::schedule::Entry)>,
) -> Result<Schedule, LimitError> {
    let tz = entries.first().map_or(chrono_tz::UTC, |(tz, _)| *tz);
    if entries.iter().any(|(z, _)| *z != tz) {
        return Err(LimitError::MixedZones);
    }
    Ok(Schedule {
        tz,
        entries: entries.into_iter().map(|(_, e)| e).collect(),
    })
}

fn check_name(name: &str) -> Result<(), LimitError> {
    let mut chars = name.chars();
    let first_ok = chars.next().is_some_and(|c| c.is_ascii_alphabetic());
    let rest_ok = chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'));
    if !first_ok || !rest_ok || name.len() > 64 {
        return Err(LimitError::InvalidName(name.to_string()));
    }
    if name == "wcu" {
        return Err(LimitError::ReservedName);
    }
    Ok(())
}

impl Limit {
    /// `Limit(name, capacity, refill_amount, refill_period_seconds, schedule,
    /// reset_schedule, reset_after)` with every construction check.
    pub fn new(
        name: &str,
        capacity: i128,
        refill_amount: i128,
        refill_period_seconds: i128,
        schedule: Schedule,
        reset_schedule: Schedule,
        reset_after_seconds: Option<i64>,
    ) -> Result<Limit, LimitError> {
        check_name(name)?;
        check_tokens("capacity", capacity, false)?;
        check_tokens("refill_amount", refill_amount, true)?;
        check_period("refill_period_seconds", refill_period_seconds)?;
        if schedule.entries.iter().any(|e| e.modifier.is_none()) {
            return Err(LimitError::ScheduleEntryWithoutModifier);
        }
        if reset_schedule.entries.iter().any(|e| e.modifier.is_some()) {
            return Err(LimitError::ResetEntryWithModifier);
        }
        if let Some(rsa) = reset_after_seconds {
            check_period("reset_after", i128::from(rsa))?;
        }
        let resets = !reset_schedule.is_empty() || reset_after_seconds.is_some();
        if !reset_schedule.is_empty() && reset_after_seconds.is_some() {
            return Err(LimitError::BothResets);
        }
        if refill_amount == 0 && !resets {
            return Err(LimitError::NoRecovery);
        }
        if refill_amount > 0 && resets {
            return Err(LimitError::DripsAndResets);
        }
        if !schedule.is_empty() && !reset_schedule.is_empty() && schedule.tz != reset_schedule.tz {
            return Err(LimitError::MixedZones);
        }
        Ok(Limit {
            name: name.to_string(),
            capacity,
            refill_amount,
            refill_period_seconds,
            schedule,
            reset_schedule,
            reset_after_seconds,
            soft: false,
        })
    }

    fn rate(
        name: &str,
        rate: i128,
        burst: Option<i128>,
        period: i128,
    ) -> Result<Limit, LimitError> {
        let capacity = burst.unwrap_or(rate);
        Limit::new(
            name,
            capacity,
            rate,
            period,
            Schedule::empty(),
            Schedule::empty(),
            None,
        )
    }

    /// `Limit.per_second(name, rate, burst=None)`.
    pub fn per_second(name: &str, rate: i128, burst: Option<i128>) -> Result<Limit, LimitError> {
        Limit::rate(name, rate, burst, 1)
    }

    /// `Limit.per_minute(name, rate, burst=None)`.
    pub fn per_minute(name: &str, rate: i128, burst: Option<i128>) -> Result<Limit, LimitError> {
        Limit::rate(name, rate, burst, 60)
    }

    /// `Limit.per_hour(name, rate, burst=None)`.
    pub fn per_hour(name: &str, rate: i128, burst: Option<i128>) -> Result<Limit, LimitError> {
        Limit::rate(name, rate, burst, 3600)
    }

    /// `Limit.per_day(name, rate, burst=None)`.
    pub fn per_day(name: &str, rate: i128, burst: Option<i128>) -> Result<Limit, LimitError> {
        Limit::rate(name, rate, burst, 86_400)
    }

    /// `Limit.quota(name, amount, cron=… | reset_after=…)`: no drip, a 1 s
    /// period, and exactly one way to recover. `reset_after_ms` is the
    /// duration as given (it must be whole seconds).
    pub fn quota(
        name: &str,
        amount: i128,
        reset_schedule: Option<Schedule>,
        reset_after_ms: Option<i64>,
    ) -> Result<Limit, LimitError> {
        let rsa = match (reset_schedule.is_some(), reset_after_ms) {
            (true, None) => None,
            (false, Some(ms)) => {
                if ms <= 0 || ms % 1000 != 0 {
                    return Err(LimitError::ResetAfterNotWholeSeconds);
                }
                Some(ms / 1000)
            }
            _ => return Err(LimitError::QuotaNeedsOneReset),
        };
        Limit::new(
            name,
            amount,
            0,
            1,
            Schedule::empty(),
            reset_schedule.unwrap_or_else(Schedule::empty),
            rsa,
        )
    }

    /// A quota resets on a calendar or after a window instead of dripping.
    pub fn is_quota(&self) -> bool {
        !self.reset_schedule.is_empty() || self.reset_after_seconds.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert!(check_name("rpm").is_ok());
        assert!(check_name("a.b-c_1").is_ok());
        assert!(check_name("1a").is_err());
        assert!(check_name("wcu").is_err());
        assert!(check_name(&"a".repeat(65)).is_err());
    }

    #[test]
    fn drips_or_resets() {
        assert_eq!(
            Limit::per_minute("rpm", 0, None),
            Err(LimitError::Bounds(BoundsError::NotPositive {
                what: "capacity"
            }))
        );
        assert_eq!(
            Limit::quota("q", 5, None, None),
            Err(LimitError::QuotaNeedsOneReset)
        );
        assert_eq!(
            Limit::quota("q", 5, None, Some(1500)),
            Err(LimitError::ResetAfterNotWholeSeconds)
        );
        assert!(Limit::quota("q", 5, None, Some(1_000_000_000_000)).is_ok());
        assert!(Limit::quota("q", 5, None, Some(1_000_000_001_000)).is_err());
    }
}
