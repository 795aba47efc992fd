//! The runtime's answers as JSON, version 1: what `acquire --format json` and
//! `reservation … --format json` print, and (through [`camel_case`]) what an
//! HTTP front end returns. Fields are only ever added within a version.
//!
//! ```json
//! {"version": 1, "allowed": false, "mode": "reserve",
//!  "namespace": "default", "entity": "user-1", "resource": "gpt-4",
//!  "level": "resource",                    // which level's limits applied (null: store unreadable)
//!  "reservation": null,                    // or {"id", "expires_at", "expires_at_ms", "slots": [...]}
//!  "retry_after_seconds": 12,              // whole seconds, rounded up; null when admitted or waiting cannot help
//!  "retry_after_ms": 11250,
//!  "resets_at": "2026-12-02T10:01:01Z",    // when every enforced limit is whole again
//!  "now": "2026-12-02T10:00:00Z",
//!  "disabled": null,                       // or {"level": "entity", "value": "disabled" | "bypass"}
//!  "unavailable": null,                    // or why on_unavailable answered
//!  "limits": [{"name": "rpm", "kind": "rolling", "window": "minute", "enforced_here": true,
//!              "allowed": false, "soft": false, "cost": 1, "amount": 30, "remaining": 0,
//!              "resets_at": "…", "retry_after_seconds": 12, "retry_after_ms": 11250},
//!             {"name": "tpm", "kind": "rate", "enforced_here": false, "allowed": null, …}]}
//! ```

use serde_json::{json, Map, Value};

use super::decide::{units, Closure, Decision, Extended, LimitAnswer};
use super::ops::Cleared;
use super::state::{window_ahead_of, RuntimeState};
use crate::clock::rfc3339;
use crate::items::source::Source;
use crate::manifest::model::Disabled;

/// Whole seconds, rounded up: waiting that long is never too short.
pub fn ceil_seconds(ms: i64) -> i64 {
    ms.div_euclid(1000) + i64::from(ms.rem_euclid(1000) != 0)
}

fn instant(ms: Option<i64>) -> Value {
    ms.map_or(Value::Null, |ms| json!(rfc3339(ms)))
}

fn limit_json(l: &LimitAnswer) -> Value {
    let mut m = Map::new();
    m.insert("name".into(), json!(l.name));
    m.insert("kind".into(), json!(l.kind));
    if let Some(w) = l.window {
        m.insert("window".into(), json!(w.to_string()));
    }
    m.insert("enforced_here".into(), json!(l.enforced_here));
    m.insert("allowed".into(), json!(l.allowed));
    m.insert("soft".into(), json!(l.soft));
    m.insert("cost".into(), json!(l.cost));
    m.insert("amount".into(), json!(l.amount));
    m.insert("remaining".into(), json!(l.remaining));
    m.insert("resets_at".into(), instant(l.resets_at_ms));
    m.insert(
        "retry_after_seconds".into(),
        json!(l.retry_after_ms.map(ceil_seconds)),
    );
    m.insert("retry_after_ms".into(), json!(l.retry_after_ms));
    Value::Object(m)
}

/// The answer to `acquire`.
pub fn decision_json(d: &Decision, namespace: &str, entity: &str, resource: &str) -> Value {
    json!({
        "version": 1,
        "allowed": d.allowed,
        "mode": d.mode.as_str(),
        "namespace": namespace,
        "entity": entity,
        "resource": resource,
        "level": d.source.map(|s| s.as_str()),
        "reservation": d.reservation.as_ref().map(|r| json!({
            "id": r.id.to_string(),
            "expires_at": rfc3339(r.expires_at_ms),
            "expires_at_ms": r.expires_at_ms,
            "slots": r.slots,
        })),
        "retry_after_seconds": d.retry_after_ms.map(ceil_seconds),
        "retry_after_ms": d.retry_after_ms,
        "resets_at": instant(d.resets_at_ms),
        "now": rfc3339(d.now_ms),
        "disabled": disabled_json(d.disabled),
        "unavailable": d.unavailable.as_ref().map(ToString::to_string),
        "limits": d.limits.iter().map(limit_json).collect::<Vec<_>>(),
    })
}

/// The `disabled` flag in force and the level it comes from, or `null`.
pub fn disabled_json(disabled: Option<(Source, Disabled)>) -> Value {
    disabled.map_or(Value::Null, |(level, value)| {
        json!({
            "level": level.as_str(),
            "value": match value {
                Disabled::Disabled => "disabled",
                Disabled::Bypass => "bypass",
                Disabled::Enforced => "enforced",
            },
        })
    })
}

/// The answer to `reservation release` and `reservation commit`.
pub fn closure_json(c: &Closure, namespace: &str, now_ms: i64) -> Value {
    json!({
        "version": 1,
        "id": c.id.to_string(),
        "namespace": namespace,
        "entity": c.id.entity,
        "resource": c.id.resource,
        "result": if c.already.is_some() { "already_closed" } else { c.how.as_str() },
        "already": c.already.as_ref().map(|a| json!({
            "how": a.how.as_str(),
            "at": rfc3339(a.at),
        })),
        "slots": c.slots,
        "corrections": c.corrections.iter().map(|x| json!({
            "name": x.name,
            "counted": x.counted,
            "actual": x.actual,
            "applied": x.applied,
        })).collect::<Vec<_>>(),
        "now": rfc3339(now_ms),
    })
}

/// The answer to `reservation extend`.
pub fn extended_json(e: &Extended, namespace: &str, now_ms: i64) -> Value {
    json!({
        "version": 1,
        "id": e.id.to_string(),
        "namespace": namespace,
        "entity": e.id.entity,
        "resource": e.id.resource,
        "result": "extended",
        "expires_at": rfc3339(e.expires_at_ms),
        "expires_at_ms": e.expires_at_ms,
        "previous_expires_at": rfc3339(e.previous_ms),
        "now": rfc3339(now_ms),
    })
}

/// The answer to `runtime show`: what is stored for (entity, resource) as
/// of `now_ms` (`stored: false` and empty lists when nothing is).
pub fn state_json(
    st: Option<&RuntimeState>,
    namespace: &str,
    entity: &str,
    resource: &str,
    now_ms: i64,
) -> Value {
    let empty = RuntimeState::empty(entity, resource);
    let s = st.unwrap_or(&empty);
    json!({
        "version": 1,
        "namespace": namespace,
        "entity": entity,
        "resource": resource,
        "now": rfc3339(now_ms),
        "stored": st.is_some(),
        "state_version": s.version,
        "updated_at": st.map(|s| rfc3339(s.updated_at)),
        "ahead_of_clock": s.ahead_of(now_ms),
        "windows": s.rolling.iter().map(|(name, w)| json!({
            "name": name,
            "window": w.window().to_string(),
            "used": units(w.used_at(now_ms)),
            "all_gone_at": instant(w.all_gone_at().filter(|at| *at > now_ms)),
            "ahead_of_clock": window_ahead_of(w, now_ms),
        })).collect::<Vec<_>>(),
        "holds": s.holds.iter().map(|(token, h)| json!({
            "id": s.reservation_id(token).to_string(),
            "holder": h.holder,
            "slots": h.slots,
            "counted": h.counted.iter().map(|(n, c)| (n.clone(), json!(units(c.cost)))).collect::<Map<_, _>>(),
            "taken_at": rfc3339(h.created_at),
            "expires_at": rfc3339(h.expires_at),
            "expires_at_ms": h.expires_at,
            "expired": h.expires_at <= now_ms,
        })).collect::<Vec<_>>(),
        "closed": s.closed.iter().map(|(token, c)| json!({
            "id": s.reservation_id(token).to_string(),
            "how": c.how.as_str(),
            "at": rfc3339(c.at),
        })).collect::<Vec<_>>(),
    })
}

/// The answer to `runtime clear`.
pub fn cleared_json(
    c: &Cleared,
    namespace: &str,
    entity: &str,
    resource: &str,
    now_ms: i64,
) -> Value {
    let (result, st, unreadable) = match c {
        Cleared::Nothing => ("nothing", None, None),
        Cleared::State(st) => ("cleared", Some(st.as_ref()), None),
        Cleared::Unreadable(why) => ("cleared", None, Some(why)),
    };
    json!({
        "version": 1,
        "namespace": namespace,
        "entity": entity,
        "resource": resource,
        "result": result,
        "unreadable": unreadable,
        "windows": st.map(|s| s.rolling.keys().collect::<Vec<_>>()).unwrap_or_default(),
        "holds_let_go": st.map(|s| s.open_holds(now_ms).map(|t| s.reservation_id(t).to_string()).collect::<Vec<_>>()).unwrap_or_default(),
        "now": rfc3339(now_ms),
    })
}

/// The same document with camelCase keys (`retry_after_seconds` →
/// `retryAfterSeconds`), for front ends whose API speaks camelCase.
pub fn camel_case(v: Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.into_iter()
                .map(|(k, v)| (camel(&k), camel_case(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.into_iter().map(camel_case).collect()),
        other => other,
    }
}

fn camel(key: &str) -> String {
    let mut out = String::with_capacity(key.len());
    let mut upper = false;
    for c in key.chars() {
        if c == '_' {
            upper = true;
        } else if upper {
            out.extend(c.to_uppercase());
            upper = false;
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_round_up() {
        assert_eq!(ceil_seconds(0), 0);
        assert_eq!(ceil_seconds(1), 1);
        assert_eq!(ceil_seconds(1000), 1);
        assert_eq!(ceil_seconds(1001), 2);
    }

    #[test]
    fn camel_case_is_deep() {
        let v =
            json!({"retry_after_seconds": 1, "limits": [{"enforced_here": true}], "version": 1});
        assert_eq!(
            camel_case(v),
            json!({"retryAfterSeconds": 1, "limits": [{"enforcedHere": true}], "version": 1})
        );
    }
}
