//! The normalised form (docs/manifest.md, "Normalised form") and the `applied_hash` the
//! reference stores in its state record: `"sha256:"` + hex SHA-256 of Python's
//! `json.dumps(normalised, sort_keys=True)` (separators `", "`/`": "`, ASCII escaping).

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use super::model::{Disabled, LevelConfig, LimitKind, LimitSpec, Manifest, Modifier};

/// The normalised manifest as JSON, keys in the reference's order.
///
/// Scales are emitted as integers when they are whole (the reference keeps a
/// YAML `2` as the int 2; a `2.0` written as a float is the only case where the
/// informational hash can differ, since the model keeps the scale as f64).
pub fn normalised_json(m: &Manifest) -> Value {
    let mut top = head_json(m);
    if !m.entities.is_empty() {
        let ents = m
            .entities
            .iter()
            .map(|(id, resources)| (id.clone(), entity_json(resources)))
            .collect();
        top.insert("entities".into(), Value::Object(ents));
    }
    Value::Object(top)
}

/// The normalised manifest without its entities (small, whatever the manifest's size).
fn head_json(m: &Manifest) -> Map<String, Value> {
    let mut top = Map::new();
    top.insert("namespace".into(), Value::String(m.namespace.clone()));
    if let Some(sys) = &m.system {
        let mut s = Map::new();
        s.insert("limits".into(), limits_json(&sys.limits));
        if let Some(o) = sys.on_unavailable {
            s.insert("on_unavailable".into(), Value::String(o.as_str().into()));
        }
        top.insert("system".into(), Value::Object(s));
    }
    if !m.resources.is_empty() {
        let mut res = Map::new();
        for (name, cfg) in &m.resources {
            res.insert(name.clone(), level_json(cfg));
        }
        top.insert("resources".into(), Value::Object(res));
    }
    top
}

/// One entity of the normalised manifest: `{"resources": {…}}`.
fn entity_json(resources: &indexmap::IndexMap<String, LevelConfig>) -> Value {
    let mut res = Map::new();
    for (name, cfg) in resources {
        res.insert(name.clone(), level_json(cfg));
    }
    let mut e = Map::new();
    e.insert("resources".into(), Value::Object(res));
    Value::Object(e)
}

fn level_json(cfg: &LevelConfig) -> Value {
    let mut l = Map::new();
    l.insert("limits".into(), limits_json(&cfg.limits));
    if let Some(d) = cfg.disabled {
        l.insert(
            "disabled".into(),
            match d {
                Disabled::Disabled => Value::Bool(true),
                Disabled::Enforced => Value::Bool(false),
                Disabled::Bypass => Value::String("bypass".into()),
            },
        );
    }
    if let Some(c) = cfg.cascade {
        l.insert("cascade".into(), Value::Bool(c));
    }
    Value::Object(l)
}

fn limits_json(limits: &indexmap::IndexMap<String, LimitSpec>) -> Value {
    let mut out = Map::new();
    for (name, spec) in limits {
        out.insert(name.clone(), limit_json(spec));
    }
    Value::Object(out)
}

/// A bucket keeps the reference's shape exactly (so manifests without the new
/// kinds hash as before); a rolling window and a concurrency limit are written
/// with their own keys only, defaults filled in.
fn limit_json(spec: &LimitSpec) -> Value {
    let mut l = Map::new();
    match spec.kind {
        LimitKind::Bucket => {}
        LimitKind::Rolling { window } => {
            l.insert("capacity".into(), spec.capacity.into());
            l.insert("window".into(), Value::String(window.to_string()));
            l.insert("rolling".into(), Value::Bool(true));
            if spec.soft {
                l.insert("soft".into(), Value::Bool(true));
            }
            return Value::Object(l);
        }
        LimitKind::Concurrency { hold_ttl_seconds } => {
            l.insert("concurrency".into(), spec.capacity.into());
            l.insert("hold_ttl_seconds".into(), hold_ttl_seconds.into());
            if spec.soft {
                l.insert("soft".into(), Value::Bool(true));
            }
            return Value::Object(l);
        }
    }
    l.insert("capacity".into(), spec.capacity.into());
    l.insert("refill_amount".into(), spec.refill_amount.into());
    l.insert("refill_period".into(), spec.refill_period.into());
    if !spec.schedule.is_empty() {
        let entries = spec
            .schedule
            .iter()
            .map(|e| {
                let mut m = Map::new();
                m.insert("cron".into(), Value::String(e.cron.clone()));
                m.insert("tz".into(), Value::String(e.tz.clone()));
                match &e.modifier {
                    Modifier::Scale(s) => {
                        m.insert("scale".into(), scale_json(*s));
                    }
                    Modifier::Absolute {
                        capacity,
                        refill_amount,
                        refill_period_seconds,
                    } => {
                        if let Some(c) = capacity {
                            m.insert("capacity".into(), (*c).into());
                        }
                        if let Some(a) = refill_amount {
                            m.insert("refill_amount".into(), (*a).into());
                        }
                        if let Some(p) = refill_period_seconds {
                            m.insert("refill_period_seconds".into(), (*p).into());
                        }
                    }
                }
                Value::Object(m)
            })
            .collect();
        l.insert("schedule".into(), Value::Array(entries));
    }
    if !spec.reset_schedule.is_empty() {
        let entries = spec
            .reset_schedule
            .iter()
            .map(|e| {
                let mut m = Map::new();
                m.insert("cron".into(), Value::String(e.cron.clone()));
                m.insert("tz".into(), Value::String(e.tz.clone()));
                Value::Object(m)
            })
            .collect();
        l.insert("reset_schedule".into(), Value::Array(entries));
    }
    if let Some(s) = spec.reset_after_seconds {
        l.insert("reset_after_seconds".into(), s.into());
    }
    if spec.soft {
        l.insert("soft".into(), Value::Bool(true));
    }
    Value::Object(l)
}

fn scale_json(s: f64) -> Value {
    if s.fract() == 0.0 && s.abs() < 9.0e15 {
        Value::from(s as i64)
    } else {
        serde_json::Number::from_f64(s)
            .map(Value::Number)
            .unwrap_or(Value::Null)
    }
}

/// `"sha256:"` + hex SHA-256 of [`python_dumps_sorted`] of the normalised form.
///
/// Hashed as it is written, one entity at a time: the text of a large
/// manifest is never held whole.
pub fn applied_hash(m: &Manifest) -> String {
    let head = head_json(m);
    let mut keys: Vec<&str> = head.keys().map(String::as_str).collect();
    if !m.entities.is_empty() {
        keys.push("entities");
    }
    keys.sort_unstable();
    let mut h = Sha256::new();
    let mut out = String::from("{");
    for (i, k) in keys.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        write_string(&mut out, k);
        out.push_str(": ");
        match head.get(*k) {
            Some(v) => write_value(&mut out, v),
            None => {
                let mut ids: Vec<&String> = m.entities.keys().collect();
                ids.sort_unstable();
                out.push('{');
                for (j, id) in ids.into_iter().enumerate() {
                    if j > 0 {
                        out.push_str(", ");
                    }
                    write_string(&mut out, id);
                    out.push_str(": ");
                    if let Some(resources) = m.entities.get(id) {
                        write_value(&mut out, &entity_json(resources));
                    }
                    h.update(out.as_bytes());
                    out.clear();
                }
                out.push('}');
            }
        }
    }
    out.push('}');
    h.update(out.as_bytes());
    let digest = h.finalize();
    let mut hex = String::with_capacity(7 + 64);
    hex.push_str("sha256:");
    for b in digest {
        hex.push_str(&format!("{b:02x}"));
    }
    hex
}

/// Python's `json.dumps(v, sort_keys=True)` with default separators and
/// `ensure_ascii=True`.
pub fn python_dumps_sorted(v: &Value) -> String {
    let mut out = String::new();
    write_value(&mut out, v);
    out
}

fn write_value(out: &mut String, v: &Value) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                out.push_str(&i.to_string());
            } else if let Some(u) = n.as_u64() {
                out.push_str(&u.to_string());
            } else if let Some(f) = n.as_f64() {
                out.push_str(&python_float_repr(f));
            }
        }
        Value::String(s) => write_string(out, s),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_value(out, item);
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_string(out, k);
                out.push_str(": ");
                if let Some(v) = map.get(*k) {
                    write_value(out, v);
                }
            }
            out.push('}');
        }
    }
}

fn write_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 || (c as u32) > 0x7e => {
                let mut buf = [0u16; 2];
                for unit in c.encode_utf16(&mut buf) {
                    out.push_str(&format!("\\u{unit:04x}"));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Python's `repr(float)`: shortest round-trip digits, fixed notation when the
/// decimal exponent is in -4..16, otherwise `d.ddde+XX`.
pub fn python_float_repr(f: f64) -> String {
    if f.is_nan() {
        return "NaN".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "Infinity" } else { "-Infinity" }.into();
    }
    if f == 0.0 {
        return if f.is_sign_negative() { "-0.0" } else { "0.0" }.into();
    }
    // Rust's `{:e}` gives the shortest round-trip digits: "1.2345e6", "5e-1".
    let sci = format!("{:e}", f.abs());
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    let sign = if f < 0.0 { "-" } else { "" };
    if (-4..16).contains(&exp) {
        let n = digits.len() as i32;
        let body = if exp >= 0 {
            let int_len = exp + 1;
            if n <= int_len {
                format!("{digits}{}.0", "0".repeat((int_len - n) as usize))
            } else {
                format!(
                    "{}.{}",
                    &digits[..int_len as usize],
                    &digits[int_len as usize..]
                )
            }
        } else {
            format!("0.{}{digits}", "0".repeat((-exp - 1) as usize))
        };
        format!("{sign}{body}")
    } else {
        let m = if digits.len() > 1 {
            format!("{}.{}", &digits[..1], &digits[1..])
        } else {
            digits
        };
        let esign = if exp < 0 { '-' } else { '+' };
        format!("{sign}{m}e{esign}{:02}", exp.abs())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn float_repr_matches_python() {
        for (f, want) in [
            (0.5, "0.5"),
            (2.0, "2.0"),
            (1000000.0, "1000000.0"),
            (1e16, "1e+16"),
            (1.5e16, "1.5e+16"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (1.25e-7, "1.25e-07"),
            (123.456, "123.456"),
            (-2.5, "-2.5"),
            (0.1 + 0.2, "0.30000000000000004"),
            (999999999999999.9, "999999999999999.9"),
        ] {
            assert_eq!(python_float_repr(f), want, "{f}");
        }
    }

    #[test]
    fn the_streamed_hash_is_the_hash_of_the_whole_text() {
        use crate::manifest::model::{LimitSpec, SystemLevel};
        let whole = |m: &Manifest| {
            let text = python_dumps_sorted(&normalised_json(m));
            let hex: String = Sha256::digest(text.as_bytes())
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect();
            format!("sha256:{hex}")
        };
        let mut m = Manifest::new("d");
        m.system = Some(SystemLevel::default());
        let level = LevelConfig::with_limit("rpm", LimitSpec::bucket(5, 5, 60));
        m.resources.insert("gpt-4".into(), level.clone());
        for e in ["zeta", "alpha", "é-user", "Beta", "empty"] {
            let r = m.entities.entry(e.into()).or_default();
            if e != "empty" {
                r.insert("gpt-4".into(), level.clone());
                r.insert("_default_".into(), level.clone());
            }
        }
        assert_eq!(applied_hash(&m), whole(&m));
        m.entities.clear();
        assert_eq!(applied_hash(&m), whole(&m));
    }

    #[test]
    fn dumps_sorts_keys_and_escapes_like_python() {
        let v = serde_json::json!({"b": [1, 0.5, "é\u{1F600}"], "a": {"y": true, "x": null}});
        assert_eq!(
            python_dumps_sorted(&v),
            r#"{"a": {"x": null, "y": true}, "b": [1, 0.5, "\u00e9\ud83d\ude00"]}"#
        );
    }
}
