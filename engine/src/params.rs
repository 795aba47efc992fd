//! Effective limit parameters under a schedule (docs/semantics.md, "Effective parameters") and the
//! magnitude bounds every stored value respects (docs/semantics.md, "Limits").
//!
//! Capacity and refill are milli-tokens, the period milliseconds, all `i128`.
//! The one float operation is the scale multiply, done exactly as the reference
//! does it: `trunc(f64(x) * scale)`; an integer scale from a config multiplies
//! exactly in integers, as Python does.

use crate::schedule::Schedule;

/// Largest capacity or refill amount, in tokens (the reference's bound).
pub const MAX_TOKENS: u64 = 1_000_000_000_000_000;
/// Largest period or `reset_after`, in seconds (the reference's bound).
pub const MAX_PERIOD_SECONDS: u64 = 1_000_000_000;
/// Largest scale factor.
pub const MAX_SCALE: f64 = 1_000_000.0;
/// Largest value DynamoDB stores exactly (38 digits).
pub const MAX_STORED_MILLI: i128 = 10i128.pow(38) - 1;

/// A scale factor as the config gave it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Scale {
    /// A float scale (every scale read back from storage is one: `s/1000`).
    Float(f64),
    /// An integer scale from a config (`scale: 2`); multiplies exactly.
    Int(i128),
}

impl Scale {
    /// `max(1, trunc(x * scale))`, the reference's scaled value.
    fn apply(self, x: i128) -> i128 {
        let v = match self {
            // `as` casts round int→f64 to nearest-even and truncate f64→int
            // towards zero (saturating), exactly Python's float()/int().
            Scale::Float(s) => ((x as f64) * s) as i128,
            Scale::Int(s) => x.saturating_mul(s),
        };
        v.max(1)
    }
}

/// What a schedule entry changes while it is active.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Modifier {
    /// Multiply capacity and refill amount; the period is unchanged.
    Scale(Scale),
    /// Replace the fields that are set (whole tokens / seconds); the others keep the base.
    Absolute {
        capacity: Option<i128>,
        refill_amount: Option<i128>,
        refill_period_seconds: Option<i128>,
    },
}

/// Capacity, refill amount (milli-tokens) and refill period (ms).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Params {
    pub capacity_milli: i128,
    pub refill_amount_milli: i128,
    pub refill_period_ms: i128,
}

impl Params {
    pub fn new(capacity_milli: i128, refill_amount_milli: i128, refill_period_ms: i128) -> Params {
        Params {
            capacity_milli,
            refill_amount_milli,
            refill_period_ms,
        }
    }
}

/// `entry_params(cp, ra, rp, entry)`: the parameters while this modifier is
/// active. A scale keeps a zero refill at zero (a quota never gains a drip).
pub fn entry_params(base: Params, modifier: Option<&Modifier>) -> Params {
    match modifier {
        None => base,
        Some(Modifier::Scale(s)) => Params {
            capacity_milli: s.apply(base.capacity_milli),
            refill_amount_milli: if base.refill_amount_milli == 0 {
                0
            } else {
                s.apply(base.refill_amount_milli)
            },
            refill_period_ms: base.refill_period_ms,
        },
        Some(Modifier::Absolute {
            capacity,
            refill_amount,
            refill_period_seconds,
        }) => Params {
            capacity_milli: capacity.map_or(base.capacity_milli, |c| c.saturating_mul(1000)),
            refill_amount_milli: refill_amount
                .map_or(base.refill_amount_milli, |a| a.saturating_mul(1000)),
            refill_period_ms: refill_period_seconds
                .map_or(base.refill_period_ms, |p| p.saturating_mul(1000)),
        },
    }
}

/// `effective_params(base, sched, now)`: the first entry matching the minute of
/// `now_ms` applied to the undivided base; the base itself when none matches.
pub fn effective_params(base: Params, sched: &Schedule, now_ms: i64) -> Params {
    match sched.active(now_ms) {
        Some(e) => entry_params(base, e.modifier.as_ref()),
        None => base,
    }
}

/// Why a value is outside the bounds the reference enforces.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BoundsError {
    #[error("{what} must be positive")]
    NotPositive { what: &'static str },
    #[error("{what} must be at most {max}, got {got}")]
    TooLarge {
        what: &'static str,
        max: i128,
        got: i128,
    },
    #[error("scale must be a finite number")]
    NotFinite,
    #[error("scale must be positive")]
    ScaleNotPositive,
    #[error("scale must be at most 1000000, got {0}")]
    ScaleTooLarge(f64),
}

/// Check a token count (capacity, refill amount) against `0 < v ≤ 10^15`
/// (`allow_zero` for a refill amount, which may be 0 on a quota).
pub fn check_tokens(what: &'static str, v: i128, allow_zero: bool) -> Result<(), BoundsError> {
    check_range(what, v, allow_zero, MAX_TOKENS)
}

/// Check a duration in seconds against `0 < v ≤ 10^9`.
pub fn check_period(what: &'static str, v: i128) -> Result<(), BoundsError> {
    check_range(what, v, false, MAX_PERIOD_SECONDS)
}

fn check_range(what: &'static str, v: i128, allow_zero: bool, max: u64) -> Result<(), BoundsError> {
    if v < 0 || (v == 0 && !allow_zero) {
        return Err(BoundsError::NotPositive { what });
    }
    if v > i128::from(max) {
        return Err(BoundsError::TooLarge {
            what,
            max: max.into(),
            got: v,
        });
    }
    Ok(())
}

/// Check a scale: finite, positive, at most 10^6 (no lower bound).
pub fn check_scale(s: Scale) -> Result<(), BoundsError> {
    let f = match s {
        Scale::Float(f) => f,
        Scale::Int(i) => i as f64,
    };
    if !f.is_finite() {
        return Err(BoundsError::NotFinite);
    }
    if f <= 0.0 {
        return Err(BoundsError::ScaleNotPositive);
    }
    if f > MAX_SCALE {
        return Err(BoundsError::ScaleTooLarge(f));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn float_scale_rounds_through_f64() {
        let base = Params::new((1 << 53) + 1, 0, 1000);
        let p = entry_params(base, Some(&Modifier::Scale(Scale::Float(1.0))));
        assert_eq!(p.capacity_milli, 1 << 53);
        assert_eq!(p.refill_amount_milli, 0, "a quota never gains a drip");
        let p = entry_params(base, Some(&Modifier::Scale(Scale::Int(2))));
        assert_eq!(p.capacity_milli, (1 << 54) + 2);
    }

    #[test]
    fn tiny_scales_floor_to_one_milli() {
        let base = Params::new(1000, 1000, 60_000);
        let p = entry_params(base, Some(&Modifier::Scale(Scale::Float(1e-300))));
        assert_eq!(p, Params::new(1, 1, 60_000));
    }

    #[test]
    fn absolute_fields_fall_back_to_the_base() {
        let base = Params::new(5000, 7000, 60_000);
        let m = Modifier::Absolute {
            capacity: Some(10),
            refill_amount: None,
            refill_period_seconds: Some(2),
        };
        assert_eq!(
            entry_params(base, Some(&m)),
            Params::new(10_000, 7000, 2000)
        );
    }

    #[test]
    fn bounds() {
        let max = i128::from(MAX_TOKENS);
        assert!(check_tokens("capacity", max, false).is_ok());
        assert!(check_tokens("capacity", max + 1, false).is_err());
        assert!(check_tokens("capacity", 0, false).is_err());
        assert!(check_tokens("refill_amount", 0, true).is_ok());
        assert!(check_period("refill_period_seconds", 1_000_000_001).is_err());
        assert!(check_scale(Scale::Float(f64::NAN)).is_err());
        assert!(check_scale(Scale::Float(1e-300)).is_ok());
        assert!(check_scale(Scale::Float(1_000_000.5)).is_err());
    }
}
