//! `entity get-limits`, `resource get-defaults`, `system get-defaults`: the
//! reference's text, line for line (docs/manifest.md, "Showing stored limits"), with two
//! deliberate differences: limits are listed by name (the reference prints
//! them in DynamoDB's attribute order, which is not stable), and cron entries
//! use the engine's rendering, which never prints a day-of-week text that
//! means other days (docs/semantics.md, B6).
//!
//! The JSON form (`--format json`), version 1:
//! ```json
//! {"version": 1, "level": "entity" | "resource" | "system",
//!  "namespace": "default", "entity_id": "user-1", "resource": "gpt-4",  // when they apply
//!  "configured": true,            // the config item exists
//!  "limits": [{"name": "rpm", "kind": "rate" | "calendar_quota" | "session_quota",
//!              "capacity": 1000, "refill_amount": 1000, "refill_period_seconds": 60,
//!              "soft": false, "reset_after_seconds": 18000,      // session quotas only
//!              "schedule": [{"cron": "* 9-17 * * MON-FRI", "tz": "America/New_York",
//!                            "scale": 0.5} | {..., "capacity": 2000, "refill_amount": 2000,
//!                            "refill_period_seconds": 60}],
//!              "reset_schedule": [{"cron": "0 0 * * *", "tz": "America/New_York"}]}],
//!  // a rolling window and a concurrency limit carry their manifest keys only:
//!  //   {"name": "rpd", "kind": "rolling", "capacity": 1000, "window": "day", "soft": false}
//!  //   {"name": "jobs", "kind": "concurrency", "concurrency": 3, "hold_ttl_seconds": 300,
//!  //    "soft": false}
//!  "disabled": null | true | false | "bypass", "cascade": null | true | false,
//!  "on_unavailable": "allow"}                                     // system only
//! ```
//! `cron` is the rendered (named) form the text shows; limits are sorted by name.
//!
//! The kinds Python 0.17 does not know (issue #7) print as
//! `rpd: 1,000 per rolling day` and `jobs: 3 concurrent (holds expire after 5m)`,
//! with ` (soft)` like any limit.

use serde_json::{json, Map, Value};
use zae_limiter_engine::encoding::Modifier;
use zae_limiter_engine::render::to_cron;

use super::numbers::{python_g, thousands};
use crate::items::config::{StoredEntry, StoredLevel, StoredLimit};
use crate::manifest::model::{Disabled, LimitKind};

/// A stored entry that cannot be rendered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("limit '{limit}': {reason}")]
pub struct RenderError {
    pub limit: String,
    pub reason: String,
}

/// `/{unit}` or `/{count}{unit}` for the largest of day, hour, min, sec dividing the period.
pub fn period_suffix(seconds: u64) -> String {
    for (size, unit) in [(86_400, "day"), (3_600, "hour"), (60, "min"), (1, "sec")] {
        if seconds >= size && seconds % size == 0 {
            let count = seconds / size;
            return if count == 1 {
                format!("/{unit}")
            } else {
                format!("/{count}{unit}")
            };
        }
    }
    format!("/{seconds}sec")
}

/// `5h30m15s`: the non-zero units among d, h, m, s, largest first.
pub fn duration(seconds: u64) -> String {
    let parts = [
        (seconds / 86_400, "d"),
        (seconds % 86_400 / 3_600, "h"),
        (seconds % 3_600 / 60, "m"),
        (seconds % 60, "s"),
    ];
    let out: String = parts
        .iter()
        .filter(|(v, _)| *v > 0)
        .map(|(v, u)| format!("{v}{u}"))
        .collect();
    if out.is_empty() {
        "0s".into()
    } else {
        out
    }
}

/// The named 5-field cron of a stored entry (falls back to the stored numeric form
/// when the entry has no field at all, which only hand-written items contain).
pub fn cron_text(e: &StoredEntry) -> String {
    to_cron(&e.compact).unwrap_or_else(|_| e.cron.clone())
}

/// `"<cron>" <tz>`
pub fn entry_text(e: &StoredEntry) -> String {
    format!("\"{}\" {}", cron_text(e), e.tz)
}

/// What an entry does: `scale 50%`, `capacity 2,000, refill_amount 2,000`.
pub fn effect(m: Option<&Modifier>) -> String {
    match m {
        Some(Modifier::Scale { permille }) => {
            format!("scale {}%", python_g(*permille as f64 / 1000.0 * 100.0))
        }
        Some(Modifier::Absolute {
            capacity,
            refill_amount,
            refill_period_seconds,
        }) => [
            ("capacity", capacity),
            ("refill_amount", refill_amount),
            ("refill_period_seconds", refill_period_seconds),
        ]
        .iter()
        .filter_map(|(k, v)| v.map(|v| format!("{k} {}", thousands(v))))
        .collect::<Vec<_>>()
        .join(", "),
        None => String::new(),
    }
}

/// The head line of a rolling window or a concurrency limit; `None` for a bucket.
fn other_kind_head(l: &StoredLimit) -> Option<String> {
    match l.kind {
        LimitKind::Bucket => None,
        LimitKind::Rolling { window } => Some(format!(
            "{}: {} per rolling {window}",
            l.name,
            thousands(l.capacity)
        )),
        LimitKind::Concurrency { hold_ttl_seconds } => Some(format!(
            "{}: {} concurrent (holds expire after {})",
            l.name,
            thousands(l.capacity),
            duration(hold_ttl_seconds)
        )),
    }
}

/// The lines of one limit at `indent` spaces (the Schedule block 2 and 4 deeper).
pub fn limit_lines(l: &StoredLimit, indent: usize) -> Vec<String> {
    let pad = " ".repeat(indent);
    let mut head = if let Some(head) = other_kind_head(l) {
        head
    } else if !l.reset_schedule.is_empty() {
        let resets: Vec<String> = l.reset_schedule.iter().map(entry_text).collect();
        format!(
            "{}: {} quota (resets {})",
            l.name,
            thousands(l.capacity),
            resets.join(", ")
        )
    } else if let Some(rsa) = l.reset_after_seconds {
        format!(
            "{}: {} quota (resets {} after first use)",
            l.name,
            thousands(l.capacity),
            duration(rsa)
        )
    } else {
        let mut s = format!(
            "{}: {}{}",
            l.name,
            thousands(l.refill_amount),
            period_suffix(l.refill_period)
        );
        if l.capacity != l.refill_amount {
            s.push_str(&format!(" (burst: {})", thousands(l.capacity)));
        }
        s
    };
    if l.soft {
        head.push_str(" (soft)");
    }
    let mut out = vec![format!("{pad}{head}")];
    if !l.schedule.is_empty() {
        out.push(format!("{pad}  Schedule:"));
        for e in &l.schedule {
            out.push(format!(
                "{pad}    {}  → {}",
                entry_text(e),
                effect(e.modifier.as_ref())
            ));
        }
    }
    out
}

fn flag_lines(level: &StoredLevel) -> Vec<String> {
    let mut out = Vec::new();
    match level.disabled {
        Some(Disabled::Disabled) => out.push("Status: DISABLED".to_string()),
        Some(Disabled::Bypass) => out.push("Status: BYPASSED".to_string()),
        Some(Disabled::Enforced) => out.push("Status: enabled (explicit override)".to_string()),
        None => {}
    }
    match level.cascade {
        Some(true) => out.push("Cascade: on (explicit)".to_string()),
        Some(false) => out.push("Cascade: off (explicit)".to_string()),
        None => {}
    }
    out
}

fn join(lines: Vec<String>) -> String {
    let mut s = lines.join("\n");
    s.push('\n');
    s
}

/// `entity get-limits` text. `level` is `None` when no config item exists.
pub fn entity_text(entity: &str, resource: &str, level: Option<&StoredLevel>) -> String {
    let mut lines = Vec::new();
    match level {
        Some(l) if !l.limits.is_empty() => {
            lines.push(format!(
                "Limits for entity '{entity}' on resource '{resource}':"
            ));
            lines.extend(l.limits.iter().flat_map(|x| limit_lines(x, 2)));
        }
        _ => lines.push(format!(
            "No limits configured for entity '{entity}' on resource '{resource}'"
        )),
    }
    if let Some(l) = level {
        lines.extend(flag_lines(l));
    }
    join(lines)
}

/// `resource get-defaults` text.
pub fn resource_text(resource: &str, level: Option<&StoredLevel>) -> String {
    let mut lines = Vec::new();
    match level {
        Some(l) if !l.limits.is_empty() => {
            lines.push(format!("Defaults for resource '{resource}':"));
            lines.extend(l.limits.iter().flat_map(|x| limit_lines(x, 2)));
        }
        _ => lines.push(format!("No defaults configured for resource '{resource}'")),
    }
    if let Some(l) = level {
        lines.extend(flag_lines(l));
    }
    join(lines)
}

/// `system get-defaults` text.
pub fn system_text(level: Option<&StoredLevel>) -> String {
    let empty = StoredLevel::default();
    let l = level.unwrap_or(&empty);
    if l.limits.is_empty() && l.on_unavailable.is_none() {
        return join(vec!["No system defaults configured".to_string()]);
    }
    let mut lines = vec!["System-wide defaults:".to_string()];
    if !l.limits.is_empty() {
        lines.push("  Limits:".to_string());
        lines.extend(l.limits.iter().flat_map(|x| limit_lines(x, 4)));
    }
    if let Some(o) = &l.on_unavailable {
        lines.push(format!("  on_unavailable: {o}"));
    }
    join(lines)
}

fn entry_json(e: &StoredEntry) -> Value {
    let mut m = Map::new();
    m.insert("cron".into(), json!(cron_text(e)));
    m.insert("tz".into(), json!(e.tz));
    match e.modifier {
        Some(Modifier::Scale { permille }) => {
            m.insert("scale".into(), json!(permille as f64 / 1000.0));
        }
        Some(Modifier::Absolute {
            capacity,
            refill_amount,
            refill_period_seconds,
        }) => {
            for (k, v) in [
                ("capacity", capacity),
                ("refill_amount", refill_amount),
                ("refill_period_seconds", refill_period_seconds),
            ] {
                if let Some(v) = v {
                    m.insert(k.into(), json!(v));
                }
            }
        }
        None => {}
    }
    Value::Object(m)
}

fn limit_json(l: &StoredLimit) -> Value {
    let mut m = Map::new();
    m.insert("name".into(), json!(l.name));
    match l.kind {
        LimitKind::Bucket => {}
        LimitKind::Rolling { window } => {
            m.insert("kind".into(), json!("rolling"));
            m.insert("capacity".into(), json!(l.capacity));
            m.insert("window".into(), json!(window.to_string()));
            m.insert("soft".into(), json!(l.soft));
            return Value::Object(m);
        }
        LimitKind::Concurrency { hold_ttl_seconds } => {
            m.insert("kind".into(), json!("concurrency"));
            m.insert("concurrency".into(), json!(l.capacity));
            m.insert("hold_ttl_seconds".into(), json!(hold_ttl_seconds));
            m.insert("soft".into(), json!(l.soft));
            return Value::Object(m);
        }
    }
    let kind = if !l.reset_schedule.is_empty() {
        "calendar_quota"
    } else if l.reset_after_seconds.is_some() {
        "session_quota"
    } else {
        "rate"
    };
    m.insert("kind".into(), json!(kind));
    m.insert("capacity".into(), json!(l.capacity));
    m.insert("refill_amount".into(), json!(l.refill_amount));
    m.insert("refill_period_seconds".into(), json!(l.refill_period));
    m.insert("soft".into(), json!(l.soft));
    if let Some(rsa) = l.reset_after_seconds {
        m.insert("reset_after_seconds".into(), json!(rsa));
    }
    m.insert(
        "schedule".into(),
        Value::Array(l.schedule.iter().map(entry_json).collect()),
    );
    m.insert(
        "reset_schedule".into(),
        Value::Array(l.reset_schedule.iter().map(entry_json).collect()),
    );
    Value::Object(m)
}

/// Which level a JSON document describes.
pub enum Subject<'a> {
    Entity { entity: &'a str, resource: &'a str },
    Resource(&'a str),
    System,
}

/// The `--format json` document (shape in the module docs).
pub fn to_json(namespace: &str, subject: Subject<'_>, level: Option<&StoredLevel>) -> Value {
    let mut m = Map::new();
    m.insert("version".into(), json!(1));
    let name = match subject {
        Subject::Entity { entity, resource } => {
            m.insert("entity_id".into(), json!(entity));
            m.insert("resource".into(), json!(resource));
            "entity"
        }
        Subject::Resource(r) => {
            m.insert("resource".into(), json!(r));
            "resource"
        }
        Subject::System => "system",
    };
    m.insert("level".into(), json!(name));
    m.insert("namespace".into(), json!(namespace));
    m.insert("configured".into(), json!(level.is_some()));
    let empty = StoredLevel::default();
    let l = level.unwrap_or(&empty);
    m.insert(
        "limits".into(),
        Value::Array(l.limits.iter().map(limit_json).collect()),
    );
    if name == "system" {
        m.insert("on_unavailable".into(), json!(l.on_unavailable));
    } else {
        let disabled = match l.disabled {
            None => Value::Null,
            Some(Disabled::Disabled) => json!(true),
            Some(Disabled::Enforced) => json!(false),
            Some(Disabled::Bypass) => json!("bypass"),
        };
        m.insert("disabled".into(), disabled);
        m.insert("cascade".into(), json!(l.cascade));
    }
    Value::Object(m)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::items::config::decode_level;
    use crate::store::typed_json::item_from_str;

    #[test]
    fn period_suffixes() {
        let cases = [
            (1, "/sec"),
            (2, "/2sec"),
            (59, "/59sec"),
            (60, "/min"),
            (61, "/61sec"),
            (90, "/90sec"),
            (120, "/2min"),
            (3600, "/hour"),
            (5400, "/90min"),
            (7200, "/2hour"),
            (86400, "/day"),
            (172800, "/2day"),
            (604800, "/7day"),
            (2592000, "/30day"),
            (86401, "/86401sec"),
        ];
        for (s, want) in cases {
            assert_eq!(period_suffix(s), want, "{s}");
        }
    }

    #[test]
    fn durations() {
        assert_eq!(duration(18000), "5h");
        assert_eq!(duration(19815), "5h30m15s");
        assert_eq!(duration(86490), "1d1m30s");
        assert_eq!(duration(59), "59s");
    }

    fn level(json: &str) -> StoredLevel {
        decode_level(&item_from_str(json).unwrap()).unwrap()
    }

    #[test]
    fn flags_only_levels_print_the_no_limits_line_then_the_flags() {
        let l = level(
            r##"{"PK":{"S":"n/ENTITY#user-1"},"SK":{"S":"#CONFIG#_default_"},"disabled":{"BOOL":true},"cascade":{"BOOL":true}}"##,
        );
        assert_eq!(
            entity_text("user-1", "_default_", Some(&l)),
            "No limits configured for entity 'user-1' on resource '_default_'\nStatus: DISABLED\nCascade: on (explicit)\n"
        );
        assert_eq!(
            entity_text("user-1", "_default_", None),
            "No limits configured for entity 'user-1' on resource '_default_'\n"
        );
        let l = level(
            r##"{"PK":{"S":"n/ENTITY#user-1"},"SK":{"S":"#CONFIG#gpt-4"},"l_rpm_cp":{"N":"5"},"l_rpm_ra":{"N":"5"},"l_rpm_rp":{"N":"60"},"disabled":{"S":"bypass"},"cascade":{"BOOL":false}}"##,
        );
        assert_eq!(
            entity_text("user-1", "gpt-4", Some(&l)),
            "Limits for entity 'user-1' on resource 'gpt-4':\n  rpm: 5/min\nStatus: BYPASSED\nCascade: off (explicit)\n"
        );
        let l = level(
            r##"{"PK":{"S":"n/RESOURCE#gpt-4"},"SK":{"S":"#CONFIG"},"disabled":{"BOOL":false}}"##,
        );
        assert_eq!(
            resource_text("gpt-4", Some(&l)),
            "No defaults configured for resource 'gpt-4'\nStatus: enabled (explicit override)\n"
        );
    }

    #[test]
    fn system_shapes() {
        assert_eq!(system_text(None), "No system defaults configured\n");
        let l = level(
            r##"{"PK":{"S":"n/SYSTEM#"},"SK":{"S":"#CONFIG"},"on_unavailable":{"S":"block"}}"##,
        );
        assert_eq!(
            system_text(Some(&l)),
            "System-wide defaults:\n  on_unavailable: block\n"
        );
        let l = level(
            r##"{"PK":{"S":"n/SYSTEM#"},"SK":{"S":"#CONFIG"},"l_tpm_cp":{"N":"15000"},"l_tpm_ra":{"N":"10000"},"l_tpm_rp":{"N":"60"},"l_rpd_cp":{"N":"10000"},"l_rpd_ra":{"N":"0"},"l_rpd_rp":{"N":"60"},"l_rpd_rsched":{"S":"1m0h0"},"sched_tz":{"S":"America/New_York"},"on_unavailable":{"S":"allow"}}"##,
        );
        assert_eq!(
            system_text(Some(&l)),
            "System-wide defaults:\n  Limits:\n    rpd: 10,000 quota (resets \"0 0 * * *\" America/New_York)\n    tpm: 10,000/min (burst: 15,000)\n  on_unavailable: allow\n"
        );
    }

    #[test]
    fn sunday_ranges_render_as_the_days_they_mean() {
        let l = level(
            r##"{"PK":{"S":"n/SYSTEM#"},"SK":{"S":"#CONFIG"},"l_q_cp":{"N":"5"},"l_q_ra":{"N":"0"},"l_q_rp":{"N":"60"},"l_q_rsched":{"S":"1m0h0w0-7"}}"##,
        );
        let lines = limit_lines(&l.limits[0], 0);
        assert_eq!(lines, ["q: 5 quota (resets \"0 0 * * SUN-SAT\" UTC)"]);
    }

    #[test]
    fn json_document() {
        let l = level(
            r##"{"PK":{"S":"n/ENTITY#e"},"SK":{"S":"#CONFIG#r"},"l_rpm_cp":{"N":"10"},"l_rpm_ra":{"N":"5"},"l_rpm_rp":{"N":"60"},"l_rpm_sched":{"S":"1h9-17w1-5s500"},"sched_tz":{"S":"UTC"},"disabled":{"S":"bypass"}}"##,
        );
        let v = to_json(
            "default",
            Subject::Entity {
                entity: "e",
                resource: "r",
            },
            Some(&l),
        );
        assert_eq!(
            v,
            json!({"version":1,"entity_id":"e","resource":"r","level":"entity","namespace":"default","configured":true,
                "limits":[{"name":"rpm","kind":"rate","capacity":10,"refill_amount":5,"refill_period_seconds":60,"soft":false,
                    "schedule":[{"cron":"* 9-17 * * MON-FRI","tz":"UTC","scale":0.5}],"reset_schedule":[]}],
                "disabled":"bypass","cascade":null})
        );
    }

    #[test]
    fn other_kinds_render_in_text_and_json() {
        let l = level(
            r##"{"PK":{"S":"n/RESOURCE#gpt-4"},"SK":{"S":"#CONFIG"},"l_rpm_cp":{"N":"100"},"l_rpm_ra":{"N":"100"},"l_rpm_rp":{"N":"60"},"r_rpd_amt":{"N":"10000"},"r_rpd_win":{"S":"day"},"r_rpd_soft":{"BOOL":true},"c_jobs_slots":{"N":"3"},"c_jobs_ttl":{"N":"90"}}"##,
        );
        assert_eq!(
            resource_text("gpt-4", Some(&l)),
            "Defaults for resource 'gpt-4':\n  jobs: 3 concurrent (holds expire after 1m30s)\n  rpd: 10,000 per rolling day (soft)\n  rpm: 100/min\n"
        );
        assert_eq!(
            system_text(Some(&l)),
            "System-wide defaults:\n  Limits:\n    jobs: 3 concurrent (holds expire after 1m30s)\n    rpd: 10,000 per rolling day (soft)\n    rpm: 100/min\n"
        );
        let v = to_json("default", Subject::Resource("gpt-4"), Some(&l));
        assert_eq!(
            v["limits"],
            json!([
                {"name":"jobs","kind":"concurrency","concurrency":3,"hold_ttl_seconds":90,"soft":false},
                {"name":"rpd","kind":"rolling","capacity":10000,"window":"day","soft":true},
                {"name":"rpm","kind":"rate","capacity":100,"refill_amount":100,"refill_period_seconds":60,"soft":false,"schedule":[],"reset_schedule":[]}
            ])
        );
    }

    #[test]
    fn a_level_of_other_kinds_only_still_lists_them() {
        let l = level(
            r##"{"PK":{"S":"n/ENTITY#u"},"SK":{"S":"#CONFIG#_default_"},"r_rpm_amt":{"N":"60"},"r_rpm_win":{"S":"minute"},"c_c_slots":{"N":"1"},"c_c_ttl":{"N":"300"}}"##,
        );
        assert_eq!(
            entity_text("u", "_default_", Some(&l)),
            "Limits for entity 'u' on resource '_default_':\n  c: 1 concurrent (holds expire after 5m)\n  rpm: 60 per rolling minute\n"
        );
    }
}
