//! Calendar quotas (reset on the first request after an edge;
//! docs/semantics.md, "Quotas") and session quotas (a window of `reset_after`
//! seconds anchored to first use): the limiter's slow pass over one bucket.

use crate::bucket::{per_shard, BucketState, ShardLimit};
use crate::schedule::{next_boundary, Schedule};

/// The limit's configuration as the slow pass attaches it to the state.
#[derive(Debug, Clone, PartialEq)]
pub struct QuotaConfig {
    pub schedule: Schedule,
    pub reset_schedule: Schedule,
    pub reset_after_seconds: Option<i64>,
}

/// What one slow pass did and reports.
#[derive(Debug, Clone, PartialEq)]
pub struct SlowPass {
    /// The start of a session window opened by this pass.
    pub opened_window_start_ms: Option<i64>,
    pub reset_applied: bool,
    pub roll_applied: bool,
    pub exceeded: bool,
    pub available: i128,
    pub retry_after_seconds: f64,
    /// The session window end, when strictly after now.
    pub resets_at_ms: Option<i64>,
    pub reported_limit: ShardLimit,
    /// Tokens taken (0 when refused).
    pub consumed: i128,
    /// "Valid until": the earliest of the next parameter boundary, the next reset
    /// stamp and the window end; the next request after it takes the slow path.
    pub vu_ms: Option<i64>,
    pub next_reset_edge_ms: Option<i64>,
    /// The state after the pass, in memory (a refused pass writes nothing).
    pub state: BucketState,
}

/// `_open_window_if_elapsed`: with `reset_after`, start a window at `now` when
/// none is open (anchored to this use, not to the old window's end).
pub fn open_window_if_elapsed(
    state: &mut BucketState,
    limit_has_reset_after: bool,
    now_ms: i64,
) -> Option<i64> {
    if !limit_has_reset_after || state.reset_after_seconds.is_none() {
        return None;
    }
    if let Some(end) = state.window_end_ms() {
        if now_ms < end {
            return None;
        }
    }
    state.window_start_ms = Some(now_ms);
    Some(now_ms)
}

/// `_apply_reset_edge`: when the latest reset edge is after the last refill,
/// set the balance to the reset target, once however many edges were missed.
pub fn apply_reset_edge(state: &mut BucketState, now_ms: i64) -> bool {
    if state.reset_sched.is_empty() {
        return false;
    }
    match state.reset_sched.prev_reset_edge(now_ms) {
        Some(edge) if edge > state.last_refill_ms => {
            state.tokens_milli = state.reset_target_milli(now_ms);
            state.grant_count = Some(state.shard_count);
            state.topped_up_milli = None;
            true
        }
        _ => false,
    }
}

/// `_apply_window_roll`: refill a session window that was opened now, or that
/// started after the last one applied (carrying over what other shards spent).
pub fn apply_window_roll(state: &mut BucketState, opened: bool, now_ms: i64) -> bool {
    let Some(ws) = state.window_start_ms else {
        return false;
    };
    let applied = state.window_applied_ms.unwrap_or(state.last_refill_ms);
    if !opened && ws <= applied {
        return false;
    }
    let target = state.reset_target_milli(now_ms);
    state.tokens_milli = if opened {
        target
    } else {
        match (state.total_consumed_milli, state.window_consumed_mark_milli) {
            (Some(tc), Some(wtc)) => target - (tc - wtc).max(0),
            _ => target,
        }
    };
    state.window_applied_ms = Some(ws);
    state.grant_count = Some(state.shard_count);
    state.topped_up_milli = None;
    true
}

/// The limiter's slow pass for one existing bucket: attach the config, open a
/// session window, apply a missed reset edge, roll the window, admit the
/// request, and compute the stamps.
pub fn slow_pass(
    state: &BucketState,
    config: &QuotaConfig,
    requested: i128,
    now_ms: i64,
) -> SlowPass {
    let mut st = state.clone();
    st.sched = config.schedule.clone();
    st.reset_sched = config.reset_schedule.clone();
    st.reset_after_seconds = config.reset_after_seconds;

    let opened = open_window_if_elapsed(&mut st, config.reset_after_seconds.is_some(), now_ms);
    let reset_applied = apply_reset_edge(&mut st, now_ms);
    let roll_applied = apply_window_roll(&mut st, opened.is_some(), now_ms);

    let c = st.try_consume(requested, now_ms);
    let consumed = if c.success { requested } else { 0 };
    if c.success {
        st.tokens_milli = c.new_tokens_milli;
        st.last_refill_ms = c.new_last_refill_ms;
        st.total_consumed_milli = Some(
            st.total_consumed_milli
                .unwrap_or(0)
                .saturating_add(requested.saturating_mul(1000)),
        );
    }

    let window_end = st.window_end_ms();
    let vu = [
        (!st.sched.is_empty())
            .then(|| next_boundary(&st.sched, &Schedule::empty(), now_ms))
            .flatten(),
        st.reset_sched.next_reset_stamp(now_ms),
        window_end,
    ]
    .into_iter()
    .flatten()
    .min();

    let eff = st.effective(now_ms);
    let quota = st.is_quota();
    let divisor = if quota {
        st.grant_count.unwrap_or(st.shard_count)
    } else {
        st.shard_count
    };
    let reported_limit = per_shard(eff, divisor, st.topped_up_milli.unwrap_or(0), quota);

    SlowPass {
        opened_window_start_ms: opened,
        reset_applied,
        roll_applied,
        exceeded: !c.success,
        available: c.available,
        retry_after_seconds: c.retry_after_seconds,
        resets_at_ms: window_end.filter(|&e| e > now_ms),
        reported_limit,
        consumed,
        vu_ms: vu,
        next_reset_edge_ms: st.reset_sched.next_reset_edge(now_ms),
        state: st,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cron::CronSpec;
    use crate::params::Params;
    use crate::schedule::Entry;

    fn state(reset_sched: Schedule, rsa: Option<i64>) -> BucketState {
        BucketState {
            total_consumed_milli: Some(10_000),
            reset_sched,
            reset_after_seconds: rsa,
            grant_count: Some(1),
            ..BucketState::empty(Params::new(10_000, 0, 1000), 0)
        }
    }

    fn daily() -> Schedule {
        Schedule {
            tz: chrono_tz::UTC,
            entries: vec![Entry {
                cron: "0 0 * * *".into(),
                spec: CronSpec::parse("0 0 * * *").unwrap(),
                modifier: None,
            }],
        }
    }

    #[test]
    fn missed_edges_reset_once() {
        // Empty since 1970-01-01; five midnights later one request resets the
        // balance to the full amount once and takes one token.
        let st = state(daily(), None);
        let cfg = QuotaConfig {
            schedule: Schedule::empty(),
            reset_schedule: daily(),
            reset_after_seconds: None,
        };
        let now = 5 * 86_400_000 + 1234;
        let pass = slow_pass(&st, &cfg, 1, now);
        assert!(pass.reset_applied && !pass.exceeded);
        assert_eq!(pass.state.tokens_milli, 9000);
        assert_eq!(pass.next_reset_edge_ms, Some(6 * 86_400_000));
        // The commit writes rf = now (docs/semantics.md, "Quotas"); a second
        // request the same day finds no edge after it and does not reset again.
        let mut committed = pass.state.clone();
        committed.last_refill_ms = now;
        let again = slow_pass(&committed, &cfg, 1, now + 60_000);
        assert!(!again.reset_applied);
        assert_eq!(again.state.tokens_milli, 8000);
    }

    #[test]
    fn session_window_is_anchored_to_first_use_after_expiry() {
        let mut st = state(Schedule::empty(), Some(60));
        st.window_start_ms = Some(1_000);
        st.window_applied_ms = Some(1_000);
        let cfg = QuotaConfig {
            schedule: Schedule::empty(),
            reset_schedule: Schedule::empty(),
            reset_after_seconds: Some(60),
        };
        // Inside the window: refused, wait until its end (no +1 ms).
        let inside = slow_pass(&st, &cfg, 1, 31_000);
        assert!(inside.exceeded);
        assert_eq!(inside.retry_after_seconds, 30.0);
        assert_eq!(inside.resets_at_ms, Some(61_000));
        // Long after it ended: a new window opens at now, not at 61 s.
        let later = slow_pass(&st, &cfg, 1, 500_000);
        assert_eq!(later.opened_window_start_ms, Some(500_000));
        assert!(later.roll_applied && !later.exceeded);
        assert_eq!(later.state.tokens_milli, 9000);
        assert_eq!(later.vu_ms, Some(560_000));
    }
}
