//! One engine state per applicable limit, evaluated the way a limiter does:
//! a tentative check, then a commit when every limit admitted the request,
//! or a rollback when any refused (a refused acquire writes nothing).
//!
//! Every decision is the engine's: token buckets and quotas go through
//! `quota::{open_window_if_elapsed, apply_reset_edge, apply_window_roll}` and
//! `BucketState::try_consume` (the limiter's slow pass), rolling windows
//! through `rolling`, concurrency limits through `concurrency`. Schedules are
//! built from the manifest as the Python limiter reads them back from the
//! table: a scale is quantised to per-mille first.

use chrono_tz::Tz;
use zae_limiter_engine::bucket::BucketState;
use zae_limiter_engine::concurrency::{ConcurrencyError, ConcurrencyLimit, Holds};
use zae_limiter_engine::cron::CronSpec;
use zae_limiter_engine::limit::one_zone;
use zae_limiter_engine::params::Modifier;
use zae_limiter_engine::quota::{apply_reset_edge, apply_window_roll, open_window_if_elapsed};
use zae_limiter_engine::retry::floor_div;
use zae_limiter_engine::rolling::{RollingLimit, RollingState};
use zae_limiter_engine::schedule::{Entry, Schedule};
use zae_limiter_engine::zone::zone;

use crate::items::config::model_modifier;
use crate::manifest::model::{LimitKind, LimitSpec};

/// A manifest limit the engine cannot build (the manifest was validated, so
/// this means the two disagree; reported, never a panic).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("limit '{limit}': {message}")]
pub struct BuildError {
    pub limit: String,
    pub message: String,
}

/// What a check found, before the request is admitted or refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verdict {
    /// The request fits (tokens, window room or a free slot).
    pub fits: bool,
    /// The limit refuses it: it does not fit and the limit is neither soft
    /// nor bypassed.
    pub refuses: bool,
    /// Effective capacity now (whole tokens, the amount, or slots).
    pub capacity: i128,
    /// What was available to this request (whole tokens, room left in the
    /// window, free slots); negative for a soft bucket in debt.
    pub available: i128,
}

/// What a limit counts. A handful live for a whole replay, so the variants'
/// sizes (a rolling window holds 61 counters inline) do not matter.
#[derive(Debug)]
#[allow(clippy::large_enum_variant)]
enum State {
    Bucket {
        state: BucketState,
        started: bool,
        /// The fields a pass may change, restored when the request is refused.
        saved: Option<Saved>,
        pending: Option<(i128, i64)>,
    },
    Rolling {
        limit: RollingLimit,
        state: RollingState,
    },
    Concurrency {
        limit: ConcurrencyLimit,
        holds: Holds,
        peak: u64,
    },
}

#[derive(Debug, Clone, Copy)]
struct Saved {
    tokens_milli: i128,
    last_refill_ms: i64,
    window_start_ms: Option<i64>,
    window_applied_ms: Option<i64>,
    grant_count: Option<i128>,
    topped_up_milli: Option<i128>,
}

impl Saved {
    fn of(s: &BucketState) -> Saved {
        Saved {
            tokens_milli: s.tokens_milli,
            last_refill_ms: s.last_refill_ms,
            window_start_ms: s.window_start_ms,
            window_applied_ms: s.window_applied_ms,
            grant_count: s.grant_count,
            topped_up_milli: s.topped_up_milli,
        }
    }

    fn restore(self, s: &mut BucketState) {
        s.tokens_milli = self.tokens_milli;
        s.last_refill_ms = self.last_refill_ms;
        s.window_start_ms = self.window_start_ms;
        s.window_applied_ms = self.window_applied_ms;
        s.grant_count = self.grant_count;
        s.topped_up_milli = self.topped_up_milli;
    }
}

/// One applicable limit and its state.
#[derive(Debug)]
pub struct Counter {
    pub name: String,
    /// Soft limits, and every limit of a bypassed level, count but never refuse.
    pub lenient: bool,
    state: State,
}

/// How a hold operation went for one concurrent limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HoldOutcome {
    Done,
    /// The hold is not open: refused, expired, already closed or never made.
    NotOpen,
}

impl Counter {
    /// Build the engine state for one manifest limit. `bypass`: the level is
    /// `disabled: bypass` (admit everything but count).
    pub fn build(name: &str, spec: &LimitSpec, bypass: bool) -> Result<Counter, BuildError> {
        let err = |message: String| BuildError {
            limit: name.to_string(),
            message,
        };
        let state = match spec.kind {
            LimitKind::Bucket => {
                // As the limiter reads them back from the table: a scale in per-mille.
                let modifiers = spec
                    .schedule
                    .iter()
                    .map(|e| model_modifier(&e.modifier).map(|m| m.params()))
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|e| err(e.to_string()))?;
                let sched = schedule(
                    spec.schedule
                        .iter()
                        .zip(modifiers)
                        .map(|(e, m)| (e.cron.as_str(), e.tz.as_str(), Some(m))),
                )
                .map_err(err)?;
                let reset_sched = schedule(
                    spec.reset_schedule
                        .iter()
                        .map(|e| (e.cron.as_str(), e.tz.as_str(), None)),
                )
                .map_err(err)?;
                let rsa = spec
                    .reset_after_seconds
                    .map(i64::try_from)
                    .transpose()
                    .map_err(|_| err("reset_after_seconds is out of range".into()))?;
                State::Bucket {
                    state: BucketState {
                        tokens_milli: 0,
                        last_refill_ms: 0,
                        capacity_milli: i128::from(spec.capacity) * 1000,
                        refill_amount_milli: i128::from(spec.refill_amount) * 1000,
                        refill_period_ms: i128::from(spec.refill_period) * 1000,
                        total_consumed_milli: Some(0),
                        shard_count: 1,
                        sched,
                        reset_sched,
                        window_start_ms: None,
                        reset_after_seconds: rsa,
                        window_applied_ms: None,
                        window_consumed_mark_milli: None,
                        grant_count: None,
                        topped_up_milli: None,
                        soft: spec.soft,
                        bypass,
                    },
                    started: false,
                    saved: None,
                    pending: None,
                }
            }
            LimitKind::Rolling { window } => {
                let limit = RollingLimit::new(window.window(), i128::from(spec.capacity))
                    .map_err(|e| err(e.to_string()))?;
                State::Rolling {
                    state: limit.empty_state(),
                    limit,
                }
            }
            LimitKind::Concurrency { hold_ttl_seconds } => {
                let ttl = i64::try_from(hold_ttl_seconds).unwrap_or(i64::MAX);
                let limit = ConcurrencyLimit::new(spec.capacity, Some(ttl))
                    .map_err(|e| err(e.to_string()))?;
                State::Concurrency {
                    limit,
                    holds: Holds::new(),
                    peak: 0,
                }
            }
        };
        Ok(Counter {
            name: name.to_string(),
            lenient: spec.soft || bypass,
            state,
        })
    }

    pub fn is_concurrency(&self) -> bool {
        matches!(self.state, State::Concurrency { .. })
    }

    /// Evaluate a request of `cost` at `now_ms` without committing it.
    /// Every `check` is followed by exactly one `commit` or `rollback`.
    pub fn check(&mut self, cost: u64, now_ms: i64) -> Verdict {
        let cost = i128::from(cost);
        let (fits, capacity, available) = match &mut self.state {
            State::Bucket {
                state,
                started,
                saved,
                pending,
            } => {
                if !*started {
                    // A new bucket starts full at the scheduled share
                    // (docs/semantics.md, "Buckets and shards").
                    state.tokens_milli = state.reset_target_milli(now_ms);
                    state.last_refill_ms = now_ms;
                    *started = true;
                }
                *saved = Some(Saved::of(state));
                let has_rsa = state.reset_after_seconds.is_some();
                let opened = open_window_if_elapsed(state, has_rsa, now_ms).is_some();
                apply_reset_edge(state, now_ms);
                apply_window_roll(state, opened, now_ms);
                let c = state.try_consume(cost, now_ms);
                *pending = c
                    .success
                    .then_some((c.new_tokens_milli, c.new_last_refill_ms));
                let capacity = floor_div(state.ceiling_milli(now_ms), 1000);
                (c.available >= cost, capacity, c.available)
            }
            State::Rolling { limit, state } => match limit.check(state, cost, now_ms) {
                Ok(c) => (c.allowed, c.amount, c.amount.saturating_sub(c.used)),
                // Costs are never negative and the state is the limit's own.
                Err(_) => (false, limit.amount(), 0),
            },
            State::Concurrency { limit, holds, .. } => {
                let c = limit.check(holds, now_ms);
                (c.allowed, i128::from(c.slots), i128::from(c.free()))
            }
        };
        Verdict {
            fits,
            refuses: !fits && !self.lenient,
            capacity,
            available,
        }
    }

    /// The request was admitted: record its cost, and for a reservation take
    /// a slot of a concurrent limit (when one is free: a soft or bypassed
    /// concurrent limit admits a reservation it has no slot for, unheld).
    pub fn commit(
        &mut self,
        cost: u64,
        now_ms: i64,
        reserve: Option<(&str, Option<i64>)>,
    ) -> Result<(), ConcurrencyError> {
        let cost = i128::from(cost);
        match &mut self.state {
            State::Bucket {
                state,
                saved,
                pending,
                ..
            } => {
                *saved = None;
                if let Some((tokens, rf)) = pending.take() {
                    state.tokens_milli = tokens;
                    // A quota's commit stamps the request time (docs/semantics.md, "Quotas"), so an
                    // edge at or before it never resets twice.
                    state.last_refill_ms = if state.is_quota() { rf.max(now_ms) } else { rf };
                    state.total_consumed_milli = Some(
                        state
                            .total_consumed_milli
                            .unwrap_or(0)
                            .saturating_add(cost.saturating_mul(1000)),
                    );
                }
                Ok(())
            }
            State::Rolling { limit, state } => {
                let _ = limit.record(state, cost, now_ms);
                Ok(())
            }
            State::Concurrency { limit, holds, peak } => {
                if let Some((id, ttl)) = reserve {
                    let c = limit.reserve(holds, id, ttl, now_ms)?;
                    *peak = (*peak).max(c.held);
                }
                Ok(())
            }
        }
    }

    /// The request was refused: forget the pass (only a rolling window's
    /// head may have moved forward, which changes nothing it counts).
    pub fn rollback(&mut self) {
        if let State::Bucket {
            state,
            saved,
            pending,
            ..
        } = &mut self.state
        {
            if let Some(s) = saved.take() {
                s.restore(state);
            }
            *pending = None;
        }
    }

    /// Release or commit a hold (a no-op for limits that hold nothing).
    pub fn close_hold(&mut self, id: &str, now_ms: i64) -> HoldOutcome {
        match &mut self.state {
            State::Concurrency { limit, holds, .. } => match limit.release(holds, id, now_ms) {
                Ok(()) => HoldOutcome::Done,
                Err(_) => HoldOutcome::NotOpen,
            },
            _ => HoldOutcome::Done,
        }
    }

    /// Heartbeat a hold.
    pub fn extend_hold(
        &mut self,
        id: &str,
        ttl_seconds: Option<i64>,
        now_ms: i64,
    ) -> Result<HoldOutcome, ConcurrencyError> {
        match &mut self.state {
            State::Concurrency { limit, holds, .. } => {
                match limit.extend(holds, id, ttl_seconds, now_ms) {
                    Ok(_) => Ok(HoldOutcome::Done),
                    Err(ConcurrencyError::UnknownHold { .. }) => Ok(HoldOutcome::NotOpen),
                    Err(e) => Err(e),
                }
            }
            _ => Ok(HoldOutcome::Done),
        }
    }

    /// Most holds open at once so far (concurrent limits only).
    pub fn peak_holds(&self) -> Option<u64> {
        match &self.state {
            State::Concurrency { peak, .. } => Some(*peak),
            _ => None,
        }
    }
}

/// How a limit reads in a report: `bucket 500/60s, scheduled`, `rolling 1000/day`.
pub fn describe(spec: &LimitSpec) -> String {
    let mut s = match spec.kind {
        LimitKind::Rolling { window } => format!("rolling {}/{window}", spec.capacity),
        LimitKind::Concurrency { hold_ttl_seconds } => {
            format!("{} at once, holds {hold_ttl_seconds}s", spec.capacity)
        }
        LimitKind::Bucket if !spec.reset_schedule.is_empty() => {
            let e = &spec.reset_schedule[0];
            format!("quota {}, resets \"{}\" {}", spec.capacity, e.cron, e.tz)
        }
        LimitKind::Bucket => match spec.reset_after_seconds {
            Some(rsa) => format!("quota {}, {rsa}s after first use", spec.capacity),
            None => format!(
                "bucket {}, +{}/{}s",
                spec.capacity, spec.refill_amount, spec.refill_period
            ),
        },
    };
    if !spec.schedule.is_empty() {
        s.push_str(", scheduled");
    }
    if spec.soft {
        s.push_str(", soft");
    }
    s
}

/// The kind as a word, for JSON.
pub fn kind_name(spec: &LimitSpec) -> &'static str {
    match spec.kind {
        LimitKind::Rolling { .. } => "rolling",
        LimitKind::Concurrency { .. } => "concurrency",
        LimitKind::Bucket if spec.resets() => "quota",
        LimitKind::Bucket => "bucket",
    }
}

fn schedule<'a>(
    entries: impl Iterator<Item = (&'a str, &'a str, Option<Modifier>)>,
) -> Result<Schedule, String> {
    let mut out: Vec<(Tz, Entry)> = Vec::new();
    for (cron, tz, modifier) in entries {
        let tz = zone(tz).map_err(|e| format!("time zone {tz:?}: {e}"))?;
        let spec = CronSpec::parse(cron).map_err(|e| format!("cron {cron:?}: {e}"))?;
        out.push((
            tz,
            Entry {
                cron: cron.to_string(),
                spec,
                modifier,
            },
        ));
    }
    one_zone(out).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::model::{ResetEntry, ScheduleEntry};
    use zae_limiter_engine::rolling::RollingWindow;

    fn spec(capacity: u64, refill: u64, period: u64) -> LimitSpec {
        LimitSpec::bucket(capacity, refill, period)
    }

    /// Check then commit or roll back, as the replay does for one limit.
    fn take(c: &mut Counter, cost: u64, now: i64) -> bool {
        let v = c.check(cost, now);
        if v.refuses {
            c.rollback();
        } else {
            c.commit(cost, now, None).unwrap();
        }
        !v.refuses
    }

    #[test]
    fn bucket_refills_and_refuses() {
        let mut c = Counter::build("rpm", &spec(2, 1, 60), false).unwrap();
        assert!(take(&mut c, 1, 0));
        assert!(take(&mut c, 1, 1));
        let v = c.check(1, 2);
        assert_eq!(
            (v.fits, v.refuses, v.capacity, v.available),
            (false, true, 2, 0)
        );
        c.rollback();
        assert!(!take(&mut c, 1, 59_000));
        assert!(take(&mut c, 1, 60_000));
    }

    #[test]
    fn a_refused_pass_changes_nothing() {
        let mut c = Counter::build("tpm", &spec(10, 10, 60), false).unwrap();
        assert!(take(&mut c, 6, 0));
        // 30 s later 5 tokens have dripped back: 9 available, 10 asked.
        let v = c.check(10, 30_000);
        assert_eq!(v.available, 9);
        c.rollback();
        // Had the refused pass been kept, its drift-compensated clock would be
        // the same; the balance after 30 more seconds must be the full 10.
        let v = c.check(10, 60_000);
        assert!(v.fits);
        c.rollback();
    }

    #[test]
    fn soft_counts_but_never_refuses() {
        let mut s = spec(1, 1, 60);
        s.soft = true;
        let mut c = Counter::build("rpm", &s, false).unwrap();
        assert!(take(&mut c, 1, 0));
        let v = c.check(1, 1);
        assert_eq!((v.fits, v.refuses), (false, false));
        c.commit(1, 1, None).unwrap();
        assert_eq!(c.check(0, 2).available, -1, "a soft bucket goes into debt");
        c.rollback();
        // A bypassed level behaves the same for a hard limit.
        let mut b = Counter::build("rpm", &spec(1, 1, 60), true).unwrap();
        assert!(take(&mut b, 1, 0));
        assert!(take(&mut b, 1, 1));
    }

    #[test]
    fn calendar_quota_resets_at_its_edge_in_its_zone() {
        let mut s = spec(2, 0, 1);
        s.reset_schedule = vec![ResetEntry {
            cron: "0 0 * * *".into(),
            tz: "America/New_York".into(),
        }];
        let mut c = Counter::build("rpd", &s, false).unwrap();
        // 2026-12-01T04:00Z is 23:00 in New York; midnight there is 05:00Z.
        let t0 = 1_796_097_600_000;
        assert!(take(&mut c, 2, t0));
        assert!(!take(&mut c, 1, t0 + 3_599_999));
        assert!(take(&mut c, 1, t0 + 3_600_000));
    }

    #[test]
    fn session_quota_opens_at_first_use() {
        let mut s = spec(1, 0, 1);
        s.reset_after_seconds = Some(60);
        let mut c = Counter::build("session", &s, false).unwrap();
        assert!(take(&mut c, 1, 10_000));
        assert!(!take(&mut c, 1, 69_999));
        assert!(take(&mut c, 1, 70_000));
    }

    #[test]
    fn schedule_scales_capacity_quantised() {
        let mut s = spec(1000, 1000, 60);
        s.schedule = vec![ScheduleEntry {
            cron: "* 9-17 * * *".into(),
            tz: "UTC".into(),
            modifier: crate::manifest::model::Modifier::Scale(0.3333),
        }];
        let mut c = Counter::build("rpm", &s, false).unwrap();
        // 09:00Z: the scale is stored as 333 per-mille.
        let nine = 9 * 3_600_000;
        assert_eq!(c.check(1, nine).capacity, 333);
        c.rollback();
        let v = c.check(1, 18 * 3_600_000);
        assert_eq!(
            (v.capacity, v.available),
            (1000, 1000),
            "back to the base after 17:59"
        );
        c.rollback();
    }

    #[test]
    fn rolling_window_counts_the_last_minute() {
        let mut s = spec(3, 0, 1);
        s.kind = LimitKind::Rolling {
            window: RollingWindow::Minute,
        };
        let mut c = Counter::build("rpm", &s, false).unwrap();
        assert!(take(&mut c, 3, 59_000));
        assert!(!take(&mut c, 1, 60_500), "no burst at the minute boundary");
        assert!(take(&mut c, 1, 120_000));
    }

    #[test]
    fn concurrency_holds_slots_until_closed_or_expired() {
        let mut s = spec(1, 0, 1);
        s.kind = LimitKind::Concurrency {
            hold_ttl_seconds: 10,
        };
        let mut c = Counter::build("in_flight", &s, false).unwrap();
        assert!(c.is_concurrency());
        let v = c.check(5, 0);
        assert!(v.fits);
        c.commit(5, 0, Some(("a", None))).unwrap();
        assert!(c.check(0, 1).refuses, "every slot held");
        c.rollback();
        assert_eq!(c.extend_hold("a", None, 5_000), Ok(HoldOutcome::Done));
        assert!(
            c.check(0, 14_999).refuses,
            "the heartbeat pushed the expiry"
        );
        c.rollback();
        assert!(
            !c.check(0, 15_000).refuses,
            "a dead worker's slot frees itself"
        );
        c.rollback();
        assert_eq!(c.close_hold("a", 15_000), HoldOutcome::NotOpen);
        c.commit(0, 16_000, Some(("b", None))).unwrap();
        assert!(c.commit(0, 16_000, Some(("b", None))).is_err());
        assert_eq!(c.close_hold("b", 16_001), HoldOutcome::Done);
        assert_eq!(c.peak_holds(), Some(1));
    }

    #[test]
    fn descriptions() {
        assert_eq!(describe(&spec(500, 500, 60)), "bucket 500, +500/60s");
        let mut s = spec(3, 0, 1);
        s.kind = LimitKind::Concurrency {
            hold_ttl_seconds: 300,
        };
        assert_eq!(describe(&s), "3 at once, holds 300s");
        assert_eq!(kind_name(&s), "concurrency");
    }
}
