//! A limit's definition and its rules, the one copy every layer applies (the
//! manifest as located diagnostics, the item codec as an unreadable item, the
//! engine as a refused [`Limit`]): the name rule ([`crate::names::LIMIT_NAME`]),
//! magnitude bounds, "drips or resets, never both", one recovery mechanism per
//! quota, one zone for all entries (docs/semantics.md, "Limits").

use crate::names::{NameError, LIMIT_NAME};
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
    #[error(transparent)]
    Name(#[from] NameError),
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
    /// Ours, stricter than the reference: a quota's parameter windows cannot drip either.
    #[error("a limit drips or resets, never both, inside every scheduled window too")]
    WindowDripsAndResets,
}

/// The fields the construction rules look at, as declared or stored: whole
/// tokens and seconds, and whether the limit resets on a calendar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fields<'a> {
    pub name: &'a str,
    pub capacity: i128,
    pub refill_amount: i128,
    pub refill_period_seconds: i128,
    pub reset_schedule: bool,
    pub reset_after_seconds: Option<i128>,
}

/// The reference's construction rules on a limit's fields: the name, the
/// bounds, then how it recovers ([`recovery_problems`]). The first broken rule.
pub fn check(f: &Fields<'_>) -> Result<(), LimitError> {
    LIMIT_NAME.check(f.name)?;
    check_tokens("capacity", f.capacity, false)?;
    check_tokens("refill_amount", f.refill_amount, true)?;
    check_period("refill_period_seconds", f.refill_period_seconds)?;
    if let Some(rsa) = f.reset_after_seconds {
        check_period("reset_after", rsa)?;
    }
    let recovery = recovery_problems(
        Some(f.refill_amount),
        f.reset_schedule,
        f.reset_after_seconds.is_some(),
    );
    recovery.into_iter().next().map_or(Ok(()), Err)
}

/// Every rule about how a limit gets its tokens back that it breaks, in this
/// order: a calendar reset and a `reset_after` window both ([`LimitError::BothResets`]),
/// no way back at all ([`LimitError::NoRecovery`]), a drip beside a reset
/// ([`LimitError::DripsAndResets`]). `refill_amount` `None` is one not given,
/// which takes the default that fits (the capacity for a drip, 0 for a reset).
pub fn recovery_problems(
    refill_amount: Option<i128>,
    reset_schedule: bool,
    reset_after: bool,
) -> Vec<LimitError> {
    let resets = reset_schedule || reset_after;
    let mut out = Vec::new();
    if reset_schedule && reset_after {
        out.push(LimitError::BothResets);
    }
    match refill_amount {
        Some(0) if !resets => out.push(LimitError::NoRecovery),
        Some(ra) if ra > 0 && resets => out.push(LimitError::DripsAndResets),
        _ => {}
    }
    out
}

/// Our rule beyond the reference's: a limit that resets cannot set a refill
/// amount in a parameter window either, or it would drip while that window is
/// active ([`LimitError::WindowDripsAndResets`]).
pub fn check_window_refill(
    resets: bool,
    window_refill_amount: Option<i128>,
) -> Result<(), LimitError> {
    if resets && window_refill_amount.is_some() {
        return Err(LimitError::WindowDripsAndResets);
    }
    Ok(())
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
        check(&Fields {
            name,
            capacity,
            refill_amount,
            refill_period_seconds,
            reset_schedule: !reset_schedule.is_empty(),
            reset_after_seconds: reset_after_seconds.map(i128::from),
        })?;
        if schedule.entries.iter().any(|e| e.modifier.is_none()) {
            return Err(LimitError::ScheduleEntryWithoutModifier);
        }
        if reset_schedule.entries.iter().any(|e| e.modifier.is_some()) {
            return Err(LimitError::ResetEntryWithModifier);
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
        let named = |n: &str| Limit::per_minute(n, 5, None).map(|_| ());
        assert!(named("rpm").is_ok());
        assert!(named("a.b-c_1").is_ok());
        assert!(named("1a").is_err());
        assert!(named("wcu").is_err());
        assert!(named(&"a".repeat(65)).is_err());
    }

    #[test]
    fn every_recovery_problem_is_listed() {
        use LimitError::*;
        assert_eq!(recovery_problems(Some(5), false, false), vec![]);
        assert_eq!(recovery_problems(Some(0), false, false), vec![NoRecovery]);
        assert_eq!(recovery_problems(None, false, false), vec![]);
        assert_eq!(
            recovery_problems(Some(5), true, true),
            vec![BothResets, DripsAndResets]
        );
        assert_eq!(recovery_problems(None, true, true), vec![BothResets]);
        assert_eq!(recovery_problems(Some(0), false, true), vec![]);
        assert_eq!(
            check_window_refill(true, Some(0)),
            Err(WindowDripsAndResets)
        );
        assert_eq!(check_window_refill(false, Some(5)), Ok(()));
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
