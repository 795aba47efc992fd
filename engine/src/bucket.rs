//! Millitoken token buckets and their per-shard shares (docs/semantics.md,
//! "Buckets and shards").
//!
//! Integer arithmetic only, with Python's floor division. Multiplications
//! saturate instead of overflowing: inside the magnitude bounds (docs/semantics.md, "Limits") every
//! product fits in `i128` exactly, and outside them no input may panic.

use crate::params::{effective_params, Params};
use crate::retry::{floor_div, ms_to_seconds, retry_after_with_schedule, RetryInputs};
use crate::schedule::Schedule;

/// `refill_bucket(tk, rf, now, cap, ra, rp) -> (tk', rf')`: credit whole
/// milli-tokens for the elapsed time, carry the unused remainder of the elapsed
/// time forward (drift compensation), and clamp to the ceiling with `min`, so
/// debt is kept and a surplus above a shrunken ceiling is trimmed.
pub fn refill_bucket(
    tokens_milli: i128,
    last_refill_ms: i64,
    now_ms: i64,
    capacity_milli: i128,
    refill_amount_milli: i128,
    refill_period_ms: i128,
) -> (i128, i64) {
    let clamped = tokens_milli.min(capacity_milli);
    let elapsed = i128::from(now_ms) - i128::from(last_refill_ms);
    if elapsed <= 0 || refill_amount_milli == 0 || refill_period_ms == 0 {
        return (clamped, last_refill_ms);
    }
    let add = floor_div(
        elapsed.saturating_mul(refill_amount_milli),
        refill_period_ms,
    );
    if add == 0 {
        return (clamped, last_refill_ms);
    }
    let used = floor_div(add.saturating_mul(refill_period_ms), refill_amount_milli);
    let rf = i128::from(last_refill_ms).saturating_add(used);
    (
        capacity_milli.min(tokens_milli.saturating_add(add)),
        i64::try_from(rf).unwrap_or(if rf < 0 { i64::MIN } else { i64::MAX }),
    )
}

/// One bucket as the limiter holds it: the stored balance plus the limit's
/// undivided base parameters and schedules (docs/semantics.md).
#[derive(Debug, Clone, PartialEq)]
pub struct BucketState {
    pub tokens_milli: i128,
    pub last_refill_ms: i64,
    /// Undivided base capacity (milli-tokens).
    pub capacity_milli: i128,
    /// Undivided base refill amount (milli-tokens).
    pub refill_amount_milli: i128,
    pub refill_period_ms: i128,
    pub total_consumed_milli: Option<i128>,
    pub shard_count: i128,
    pub sched: Schedule,
    pub reset_sched: Schedule,
    pub window_start_ms: Option<i64>,
    pub reset_after_seconds: Option<i64>,
    pub window_applied_ms: Option<i64>,
    pub window_consumed_mark_milli: Option<i128>,
    pub grant_count: Option<i128>,
    pub topped_up_milli: Option<i128>,
    pub soft: bool,
    pub bypass: bool,
}

/// What `try_consume` decided.
#[derive(Debug, Clone, PartialEq)]
pub struct Consume {
    pub success: bool,
    pub new_tokens_milli: i128,
    pub new_last_refill_ms: i64,
    /// Whole tokens available after the refill, before consuming (floor).
    pub available: i128,
    /// 0.0 on success.
    pub retry_after_seconds: f64,
}

impl BucketState {
    /// An empty single-shard bucket of `base`, last refilled at `now_ms`: no
    /// schedules, no window, no consumption count, hard. Callers override
    /// what differs with struct-update syntax (`..BucketState::empty(..)`).
    pub fn empty(base: Params, now_ms: i64) -> BucketState {
        BucketState {
            tokens_milli: 0,
            last_refill_ms: now_ms,
            capacity_milli: base.capacity_milli,
            refill_amount_milli: base.refill_amount_milli,
            refill_period_ms: base.refill_period_ms,
            total_consumed_milli: None,
            shard_count: 1,
            sched: Schedule::empty(),
            reset_sched: Schedule::empty(),
            window_start_ms: None,
            reset_after_seconds: None,
            window_applied_ms: None,
            window_consumed_mark_milli: None,
            grant_count: None,
            topped_up_milli: None,
            soft: false,
            bypass: false,
        }
    }

    fn base(&self) -> Params {
        Params::new(
            self.capacity_milli,
            self.refill_amount_milli,
            self.refill_period_ms,
        )
    }

    fn shards(&self) -> i128 {
        self.shard_count.max(1)
    }

    /// A quota drips nothing and resets on a calendar or after a window.
    pub fn is_quota(&self) -> bool {
        !self.reset_sched.is_empty() || self.reset_after_seconds.is_some()
    }

    /// The undivided parameters in force at `now_ms`.
    pub fn effective(&self, now_ms: i64) -> Params {
        effective_params(self.base(), &self.sched, now_ms)
    }

    /// This shard's ceiling: `cp // gc + tu` for a quota, else `cp // S`.
    pub fn ceiling_milli(&self, now_ms: i64) -> i128 {
        let cp = self.effective(now_ms).capacity_milli;
        if self.is_quota() {
            let gc = self.grant_count.unwrap_or(self.shard_count).max(1);
            floor_div(cp, gc).saturating_add(self.topped_up_milli.unwrap_or(0))
        } else {
            floor_div(cp, self.shards())
        }
    }

    /// This shard's refill amount: `ra // S`.
    pub fn effective_refill_amount_milli(&self, now_ms: i64) -> i128 {
        floor_div(self.effective(now_ms).refill_amount_milli, self.shards())
    }

    /// The refill period, never divided.
    pub fn effective_refill_period_ms(&self, now_ms: i64) -> i128 {
        self.effective(now_ms).refill_period_ms
    }

    /// The balance a reset or a new window sets: `cp // S`.
    pub fn reset_target_milli(&self, now_ms: i64) -> i128 {
        floor_div(self.effective(now_ms).capacity_milli, self.shards())
    }

    /// End of the session window, when one is open.
    pub fn window_end_ms(&self) -> Option<i64> {
        let ws = self.window_start_ms?;
        let rsa = self.reset_after_seconds?;
        Some(ws.saturating_add(rsa.saturating_mul(1000)))
    }

    /// Refill at `now_ms`, then take `requested` whole tokens if the balance
    /// covers them (or the bucket is soft or bypassed).
    pub fn try_consume(&self, requested: i128, now_ms: i64) -> Consume {
        let (tk, rf) = refill_bucket(
            self.tokens_milli,
            self.last_refill_ms,
            now_ms,
            self.ceiling_milli(now_ms),
            self.effective_refill_amount_milli(now_ms),
            self.effective_refill_period_ms(now_ms),
        );
        let need = requested.saturating_mul(1000);
        let available = floor_div(tk, 1000);
        if tk >= need || self.soft || self.bypass {
            return Consume {
                success: true,
                new_tokens_milli: tk.saturating_sub(need),
                new_last_refill_ms: rf,
                available,
                retry_after_seconds: 0.0,
            };
        }
        Consume {
            success: false,
            new_tokens_milli: tk,
            new_last_refill_ms: rf,
            available,
            retry_after_seconds: self.retry_after_for_deficit(need - tk, now_ms),
        }
    }

    /// `retry_after_for_deficit`: a session quota waits for its window end
    /// (no +1 ms), or a whole window when the ended window would still leave it
    /// short; everything else walks the schedule with the undivided base.
    pub fn retry_after_for_deficit(&self, deficit_milli: i128, now_ms: i64) -> f64 {
        if deficit_milli <= 0 {
            return 0.0;
        }
        if self.refill_amount_milli == 0 {
            if let (Some(end), Some(rsa)) = (self.window_end_ms(), self.reset_after_seconds) {
                if end > now_ms {
                    return ms_to_seconds(i128::from(end) - i128::from(now_ms));
                }
                let still_short = deficit_milli
                    .saturating_add(self.tokens_milli)
                    .saturating_sub(self.reset_target_milli(now_ms));
                return if still_short <= 0 { 0.0 } else { rsa as f64 };
            }
        }
        retry_after_with_schedule(
            deficit_milli,
            &RetryInputs {
                base: self.base(),
                sched: &self.sched,
                reset_sched: &self.reset_sched,
                now_ms,
                shard_count: self.shard_count,
                max_windows: 8,
            },
        )
    }
}

/// The limit as one shard reports it (`Limit.per_shard`), in whole tokens/seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShardLimit {
    pub capacity: i128,
    pub refill_amount: i128,
    pub refill_period_seconds: i128,
}

/// `Limit.per_shard(S, now, tu)`: the scheduled parameters divided among
/// `divisor` shards (the grant count for a quota), plus the shard's top-up.
pub fn per_shard(eff: Params, divisor: i128, topped_up_milli: i128, quota: bool) -> ShardLimit {
    let d = divisor.max(1);
    ShardLimit {
        capacity: floor_div(
            floor_div(eff.capacity_milli, d).saturating_add(topped_up_milli),
            1000,
        )
        .max(1),
        refill_amount: if quota {
            0
        } else {
            floor_div(floor_div(eff.refill_amount_milli, d), 1000).max(1)
        },
        refill_period_seconds: floor_div(eff.refill_period_ms, 1000).max(1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refill_carries_the_remainder_forward() {
        // 1 token per 3 s: 4 s give 1333 milli, worth 3999 ms; 1 ms carries over.
        assert_eq!(refill_bucket(0, 0, 4000, 10_000, 1000, 3000), (1333, 3999));
        // Debt is kept, surplus above the ceiling is trimmed even with no time.
        assert_eq!(refill_bucket(-500, 10, 10, 1000, 1000, 1000), (-500, 10));
        assert_eq!(refill_bucket(5000, 10, 5, 1000, 1000, 1000), (1000, 10));
        // Nothing to add yet: the clock does not move.
        assert_eq!(refill_bucket(0, 0, 2, 1000, 1, 1000), (0, 0));
    }

    #[test]
    fn refill_never_panics_on_extremes() {
        let _ = refill_bucket(i128::MAX, i64::MIN, i64::MAX, i128::MAX, i128::MAX, 1);
        let _ = refill_bucket(i128::MIN, 0, i64::MAX, 0, -5, 0);
    }

    #[test]
    fn per_shard_floors_and_keeps_one() {
        let eff = Params::new(1500, 999, 500);
        assert_eq!(
            per_shard(eff, 2, 0, false),
            ShardLimit {
                capacity: 1,
                refill_amount: 1,
                refill_period_seconds: 1
            }
        );
        assert_eq!(
            per_shard(Params::new(10_000, 0, 1000), 4, 500, true).capacity,
            3
        );
    }
}
