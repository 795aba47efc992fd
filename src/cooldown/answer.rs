//! The cooldown answers as JSON, version 1: what `cooldown … --format json`
//! prints and, through [`crate::runtime::answer::camel_case`], what `serve`'s
//! `/v1/cooldowns/…` endpoints return, so both say the same thing in the same
//! fields. Fields are only ever added within a version.
//!
//! Every document carries `"version": 1` ([`versioned`]); `check` and `probe`
//! carry the verdict (`go`, `wait`, `needs_operator`, `unreadable`; `probe`:
//! `no_cooldown`, `won`, `wait`, `needs_operator`) and the exit code the CLI
//! gives it.

use serde_json::{json, Value};
use zae_limiter_engine::cooldown::EpochMs;
use zae_limiter_engine::duration::human_duration;

use super::ops::Listed;
use super::{CooldownState, ProbeResult, Scope, SettleResult, Verdict};
use crate::clock::rfc3339;
use crate::exit_codes;

/// The document with the top-level `"version": 1` every JSON answer carries.
pub fn versioned(mut v: Value) -> Value {
    if let Some(map) = v.as_object_mut() {
        map.insert("version".into(), json!(1));
    }
    v
}

/// One scope's stored state.
pub fn state_json(st: &CooldownState, now: EpochMs) -> Value {
    let left = st.not_before.saturating_sub(now).max(0);
    json!({
        "scope": st.scope,
        "state": st.phase.as_str(),
        "not_before": (st.not_before > 0).then(|| rfc3339(st.not_before)),
        "not_before_ms": st.not_before,
        "remaining": human_duration(left),
        "remaining_ms": left,
        "reason": st.reason,
        "backoff_attempt": st.backoff_attempt,
        "received_at": rfc3339(st.received_at),
        "updated_at": rfc3339(st.updated_at),
        "version": st.version,
        "probe": st.probe.as_ref().map(|l| json!({
            "holder": l.holder,
            "expires_at": rfc3339(l.expires_at),
            "expires_at_ms": l.expires_at,
            "live": l.expires_at > now,
        })),
    })
}

/// A verdict on a scope, with its exit code and the state it was read from.
pub fn verdict_json(
    scope: &Scope,
    verdict: &str,
    code: i32,
    st: Option<&CooldownState>,
    now: EpochMs,
) -> Value {
    json!({
        "scope": scope.as_str(),
        "verdict": verdict,
        "exit_code": code,
        "now": rfc3339(now),
        "state": st.map(|s| state_json(s, now)),
    })
}

/// `check`'s answer at `now` and its exit code: 0 go, 75 wait (with
/// `until`), 76 needs an operator.
pub fn check_json(scope: &Scope, st: Option<&CooldownState>, now: EpochMs) -> (Value, i32) {
    let Some(st) = st else {
        return (
            verdict_json(scope, "go", exit_codes::OK, None, now),
            exit_codes::OK,
        );
    };
    let (word, code, until) = match st.verdict(now) {
        Verdict::Go => ("go", exit_codes::OK, None),
        Verdict::Wait { until, .. } => ("wait", exit_codes::TEMPFAIL, Some(until)),
        Verdict::NeedsOperator => ("needs_operator", exit_codes::NEEDS_OPERATOR, None),
    };
    let mut v = verdict_json(scope, word, code, Some(st), now);
    if let Some(until) = until {
        v["until"] = json!(rfc3339(until));
        v["until_ms"] = json!(until);
        v["remaining"] = json!(human_duration(until.saturating_sub(now)));
    }
    (v, code)
}

/// The state cannot be read (76): never a permission.
pub fn unreadable_json(scope: &Scope, why: &str, now: EpochMs) -> Value {
    let mut v = verdict_json(scope, "unreadable", exit_codes::NEEDS_OPERATOR, None, now);
    v["error"] = json!(why);
    v
}

/// `probe`'s answer for `holder` and its exit code: 0 won (or no cooldown),
/// 75 wait (with `until`), 76 needs an operator.
pub fn probe_json(scope: &Scope, holder: &str, r: &ProbeResult, now: EpochMs) -> (Value, i32) {
    let (word, code, st, until) = match r {
        ProbeResult::NoCooldown => ("no_cooldown", exit_codes::OK, None, None),
        ProbeResult::Won { state, .. } => ("won", exit_codes::OK, Some(state), None),
        ProbeResult::Wait { until, state, .. } => {
            ("wait", exit_codes::TEMPFAIL, Some(state), Some(*until))
        }
        ProbeResult::NeedsOperator { state } => (
            "needs_operator",
            exit_codes::NEEDS_OPERATOR,
            Some(state),
            None,
        ),
    };
    let mut v = verdict_json(scope, word, code, st, now);
    v["holder"] = json!(holder);
    if let Some(until) = until {
        v["until"] = json!(rfc3339(until));
        v["until_ms"] = json!(until);
    }
    (v, code)
}

/// `settle`'s answer: `cleared`, or `recorded` / `operator_kept` with the state.
pub fn settle_json(scope: &Scope, r: &SettleResult, now: EpochMs) -> Value {
    match r {
        SettleResult::Cleared => json!({"scope": scope.as_str(), "result": "cleared"}),
        SettleResult::Recorded(st) | SettleResult::OperatorKept(st) => {
            let word = match r {
                SettleResult::OperatorKept(_) => "operator_kept",
                _ => "recorded",
            };
            json!({"scope": scope.as_str(), "result": word, "state": state_json(st, now)})
        }
    }
}

/// `record`'s answer: the state after the refusal.
pub fn record_json(st: &CooldownState, now: EpochMs) -> Value {
    json!({"recorded": state_json(st, now)})
}

/// `clear`'s answer: whether a cooldown existed.
pub fn clear_json(scope: &Scope, existed: bool) -> Value {
    json!({"scope": scope.as_str(), "cleared": existed})
}

/// `list`'s answer: every scope with its status word, or why it is unreadable.
pub fn list_json(namespace: &str, rows: &[Listed], now: EpochMs) -> Value {
    let items: Vec<Value> = rows
        .iter()
        .map(|r| match &r.state {
            Ok(st) => {
                let mut v = state_json(st, now);
                v["status"] = json!(status_word(st, now));
                v
            }
            Err(why) => {
                json!({"scope": r.scope, "status": "unreadable", "error": why.to_string()})
            }
        })
        .collect();
    json!({"namespace": namespace, "cooldowns": items})
}

/// One word for an operator: cooling, probing, eligible or needs_operator.
pub fn status_word(st: &CooldownState, now: EpochMs) -> &'static str {
    match st.verdict(now) {
        Verdict::NeedsOperator => "needs_operator",
        Verdict::Wait {
            probe_holder: Some(_),
            ..
        } => "probing",
        Verdict::Wait { .. } => "cooling",
        Verdict::Go => "eligible",
    }
}
