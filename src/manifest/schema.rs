//! The JSON Schema (2020-12) for manifests, built from the same key lists, name
//! rules and bounds the loader checks, so the two cannot drift apart.
//! `schemas/limits.schema.json` is this value, written by
//! `cargo run -p xtask -- schema` (a unit test fails when the file is stale).
//!
//! The schema is for editors (completion, hover text, early squiggles); it cannot
//! express every rule (cron grammar, time zone names, one zone per item, drip vs
//! reset). `zae-limiter limits validate` checks all of them.

use serde_json::{json, Value};

use zae_limiter_engine::concurrency::{
    DEFAULT_HOLD_TTL_SECONDS, MAX_HOLD_TTL_SECONDS, MIN_HOLD_TTL_SECONDS,
};

use zae_limiter_engine::names::{
    NameRule, ENTITY_ID, LIMIT_NAME, NAMESPACE_REFERENCE, RESOURCE_NAME,
};

use super::kinds::MAX_SLOTS;
use super::lint::LINTS;
use super::values::{MAX_PERIOD_SECONDS, MAX_SCALE, MAX_TOKENS};

/// Where the committed schema lives, relative to the repository root.
pub const SCHEMA_PATH: &str = "schemas/limits.schema.json";

/// A name's schema from its rule (the engine's, which the loader checks too).
fn name(rule: &NameRule, description: &str) -> Value {
    json!({
        "type": "string",
        "maxLength": rule.max_len,
        "pattern": rule.pattern(),
        "description": description,
    })
}
const CRON_PATTERN: &str = r"^\s*\S+(\s+\S+){4}\s*$";

fn tokens(min: u64, description: &str) -> Value {
    json!({
        "type": "integer",
        "minimum": min,
        "maximum": MAX_TOKENS,
        "description": description,
    })
}

fn seconds(description: &str) -> Value {
    json!({
        "type": "integer",
        "minimum": 1,
        "maximum": MAX_PERIOD_SECONDS,
        "description": description,
    })
}

/// The windows that can roll.
const ROLLING_WINDOWS: [&str; 3] = ["minute", "hour", "day"];

/// The schema's side of a refusal list in `kinds` (key, why): the keys only, so
/// the schema refuses exactly what the loader refuses.
fn none_of(keys: &[(&str, &str)]) -> Value {
    let any: Vec<Value> = keys.iter().map(|(k, _)| json!({"required": [k]})).collect();
    json!({"not": {"anyOf": any}})
}

/// Which keys a limit needs and refuses, by kind (docs/manifest.md).
fn kind_rules() -> Value {
    let rolling = json!({"required": ["rolling"], "properties": {"rolling": {"const": true}}});
    json!([
        // A concurrency limit: no key that counts use.
        {"if": {"required": ["concurrency"]}, "then": none_of(&super::kinds::NOT_ON_CONCURRENCY)},
        // Anything else needs `capacity` and has no hold TTL.
        {
            "if": {"not": {"required": ["concurrency"]}},
            "then": {"required": ["capacity"], "not": {"required": ["hold_ttl_seconds"]}},
        },
        // `rolling: true` needs a window and refuses refill, schedules and resets.
        {"if": rolling.clone(), "then": {"required": ["window"], "allOf": [none_of(&super::kinds::NOT_ON_ROLLING)]}},
        // A window is only for a rolling window.
        {"if": {"required": ["window"]}, "then": rolling},
    ])
}

/// `lint: {allow: [ZL101, ...]}`: the codes a limit or a level silences on purpose.
fn lint() -> Value {
    let codes: Vec<&str> = LINTS.iter().map(|l| l.code).collect();
    let list: Vec<String> = LINTS
        .iter()
        .map(|l| format!("{} {}", l.code, l.name))
        .collect();
    json!({
        "type": "object",
        "description": format!("Lints `limits validate` should not report here, on purpose ({}). Ignored by zae-limiter 0.17.", list.join("; ")),
        "properties": {
            "allow": {
                "type": "array",
                "items": {"enum": codes},
                "description": "Lint codes to silence on this limit (or, on a level, on the level and all its limits).",
            },
        },
        "additionalProperties": false,
    })
}

/// The schema document.
pub fn json_schema() -> Value {
    let cron = json!({
        "type": "string",
        "pattern": CRON_PATTERN,
        "description": "A 5-field cron pattern: minute hour day-of-month month day-of-week (e.g. \"* 9-17 * * MON-FRI\"). Quote it: an unquoted `*` starts a YAML alias. Names are the 3-letter JAN..DEC and SUN..SAT; Sunday is 0 or 7; a range cannot end at SUN (write SAT,SUN). L, W, # and ? are not supported.",
        "examples": ["* 9-17 * * MON-FRI", "0 0 * * *", "0 0 1 * *"],
    });
    let tz = json!({
        "type": "string",
        "minLength": 1,
        "default": "UTC",
        "description": "IANA time zone name, case-sensitive (e.g. UTC, Europe/Paris, America/New_York). Defaults to UTC. Every schedule and reset_schedule entry on one config item must use the same zone.",
        "examples": ["UTC", "Europe/Paris", "America/New_York"],
    });
    let absolutes = ["capacity", "refill_amount", "refill_period_seconds"];
    let any_absolute: Vec<Value> = absolutes.iter().map(|k| json!({"required": [k]})).collect();
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://example.invalid/zae-limiter-rs/schemas/limits.schema.json",
        "title": "zae-limiter limits manifest",
        "description": "Declarative rate limits for a zae-limiter 0.17 table: system defaults, resource defaults and per-entity limits. Check with `zae-limiter limits validate FILE`; apply with `zae-limiter limits apply`.",
        "type": "object",
        "required": ["namespace"],
        "properties": {
            "namespace": {
                "type": "string",
                "minLength": 1,
                "maxLength": NAMESPACE_REFERENCE.max_len,
                "pattern": NAMESPACE_REFERENCE.pattern(),
                "description": "Namespace name (not the opaque id). Required. Applying a manifest manages exactly the levels it declares in this namespace.",
            },
            "system": {"$ref": "#/$defs/system"},
            "resources": {
                "type": "object",
                "description": "Resource defaults by resource name: the limits every entity gets on that resource unless it has its own.",
                "propertyNames": {"$ref": "#/$defs/resourceName"},
                "additionalProperties": {"$ref": "#/$defs/level"},
            },
            "entities": {
                "type": "object",
                "description": "Per-entity limits by entity id.",
                "propertyNames": {"$ref": "#/$defs/entityId"},
                "additionalProperties": {"$ref": "#/$defs/entity"},
            },
        },
        "patternProperties": {
            "^x-": {"description": "Ignored: a place to keep YAML anchors (`x-tiers: {pro: &pro {...}}`)."},
        },
        "additionalProperties": false,
        "$defs": {
            "resourceName": name(&RESOURCE_NAME, "Resource name: starts with a letter; letters, digits, _ . - / : only; at most 64 characters."),
            "entityId": name(&ENTITY_ID, "Entity id: starts with a letter or digit; letters, digits, _ . - : @ only; at most 256 characters."),
            "lint": lint(),
            "limitName": name(&LIMIT_NAME, "Limit name: starts with a letter; letters, digits, _ . - only; at most 64 characters; `wcu` is reserved."),
            "system": {
                "type": "object",
                "description": "System-wide defaults. Declaring `system` (even `{}`) manages the system level.",
                "properties": {
                    "limits": {"$ref": "#/$defs/limits"},
                    "on_unavailable": {
                        "enum": ["allow", "block", null],
                        "description": "What limiters do when the table cannot be read: `allow` admits requests, `block` refuses them.",
                    },
                    "lint": {"$ref": "#/$defs/lint"},
                },
                "additionalProperties": false,
            },
            "entity": {
                "type": "object",
                "description": "One entity's limits, by resource name; `_default_` applies to every resource without its own entry.",
                "properties": {
                    "resources": {
                        "type": "object",
                        "propertyNames": {
                            "anyOf": [{"const": "_default_"}, {"$ref": "#/$defs/resourceName"}],
                        },
                        "additionalProperties": {"$ref": "#/$defs/level"},
                    },
                },
                "additionalProperties": false,
            },
            "level": {
                "type": "object",
                "description": "Limits and flags for a resource, or for one entity on one resource.",
                "properties": {
                    "limits": {"$ref": "#/$defs/limits"},
                    "disabled": {
                        "anyOf": [{"type": "boolean"}, {"const": "bypass"}, {"type": "null"}],
                        "description": "true: not enforced; false: enforced (an explicit carve-out); bypass: admit everything but keep counting. Omit to inherit.",
                    },
                    "cascade": {
                        "type": ["boolean", "null"],
                        "description": "Whether consumption also counts against the entity's parent. Omit to inherit.",
                    },
                    "lint": {"$ref": "#/$defs/lint"},
                },
                "additionalProperties": false,
            },
            "limits": {
                "type": "object",
                "description": "Limits by name, e.g. `rpm: {capacity: 500}`.",
                "propertyNames": {"$ref": "#/$defs/limitName"},
                "additionalProperties": {"$ref": "#/$defs/limit"},
            },
            "limit": {
                "type": "object",
                "description": "A token bucket: `capacity` tokens, refilled by `refill_amount` every `refill_period` seconds; or a quota that resets on a calendar (`reset_schedule`) or a session window (`reset_after_seconds`); or a rolling window (`capacity` + `window` + `rolling: true`); or a concurrency limit (`concurrency` + optional `hold_ttl_seconds`).",
                "allOf": kind_rules(),
                "properties": {
                    "capacity": tokens(1, "Bucket ceiling in whole tokens (1 to 10^15). `{capacity: N}` alone means N per minute."),
                    "burst": tokens(1, "Legacy alias: replaces `capacity` (which is still required)."),
                    "refill_amount": tokens(0, "Tokens added per refill_period. Defaults to capacity, or to 0 on a quota (which must not drip)."),
                    "refill_period": seconds("Refill period in seconds (default 60). The key is `refill_period`, not `refill_period_seconds`."),
                    "schedule": {
                        "type": ["array", "null"],
                        "description": "Parameter windows: during every minute a pattern matches, its entry scales or replaces the base parameters. First match wins.",
                        "items": {"$ref": "#/$defs/scheduleEntry"},
                    },
                    "reset_schedule": {
                        "type": ["array", "null"],
                        "description": "Calendar quota: the balance goes back to capacity when a pattern starts matching (e.g. \"0 0 1 * *\", monthly).",
                        "items": {"$ref": "#/$defs/resetEntry"},
                    },
                    "reset_after_seconds": {
                        "type": ["integer", "null"],
                        "minimum": 1,
                        "maximum": MAX_PERIOD_SECONDS,
                        "description": "Session quota: the window in seconds, anchored to each entity's first use. Not with reset_schedule.",
                    },
                    "soft": {
                        "type": "boolean",
                        "description": "Shadow mode: counted and reported, not enforced.",
                    },
                    "window": {
                        "enum": ROLLING_WINDOWS,
                        "description": "With `rolling: true`: count the use of the last minute, hour or day at every check; `capacity` is the most allowed in any such span. Month, total and concurrent windows cannot roll.",
                    },
                    "rolling": {
                        "type": "boolean",
                        "description": "`true` with `window`: a rolling window instead of a token bucket (no refill, no schedules, no resets).",
                    },
                    "concurrency": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": MAX_SLOTS,
                        "description": "A concurrency limit: how many may be in flight at once (slots). Not with capacity, refill, schedules, resets or a window.",
                    },
                    "hold_ttl_seconds": {
                        "type": "integer",
                        "minimum": MIN_HOLD_TTL_SECONDS,
                        "maximum": MAX_HOLD_TTL_SECONDS,
                        "default": DEFAULT_HOLD_TTL_SECONDS,
                        "description": "With `concurrency`: how long a hold lasts unless extended, in seconds (default 300); a dead worker's slot frees itself after it.",
                    },
                    "lint": {"$ref": "#/$defs/lint"},
                },
                "additionalProperties": false,
            },
            "scheduleEntry": {
                "type": "object",
                "description": "A parameter window: `cron`, optional `tz`, and either `scale` or absolute overrides.",
                "required": ["cron"],
                "properties": {
                    "cron": cron.clone(),
                    "tz": tz.clone(),
                    "scale": {
                        "type": "number",
                        "exclusiveMinimum": 0,
                        "maximum": MAX_SCALE,
                        "description": "Multiplies the base parameters inside the window (0.5 halves, 2 doubles). Stored to 1/1000.",
                    },
                    "capacity": tokens(1, "Capacity inside the window, in whole tokens."),
                    "refill_amount": tokens(1, "Refill amount inside the window (not on a quota)."),
                    "refill_period_seconds": seconds("Refill period inside the window, in seconds."),
                },
                "additionalProperties": false,
                "oneOf": [
                    {"required": ["scale"], "not": {"anyOf": any_absolute.clone()}},
                    {"anyOf": any_absolute, "not": {"required": ["scale"]}},
                ],
            },
            "resetEntry": {
                "type": "object",
                "description": "The instant the balance goes back to capacity: `cron` and optional `tz` only.",
                "required": ["cron"],
                "properties": {"cron": cron, "tz": tz},
                "additionalProperties": false,
            },
        },
    })
}

/// The schema as committed: pretty JSON with a trailing newline.
pub fn render() -> String {
    let mut s = serde_json::to_string_pretty(&json_schema()).unwrap_or_default();
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The committed file must equal the generated schema.
    /// `ZAEL_BLESS=1` (or `cargo run -p xtask -- schema`) rewrites it.
    #[test]
    fn committed_schema_is_current() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(SCHEMA_PATH);
        if std::env::var_os("ZAEL_BLESS").is_some() {
            std::fs::write(&path, render()).expect("write schema");
        }
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            committed == render(),
            "{SCHEMA_PATH} is stale: run `cargo run -p xtask -- schema` (or ZAEL_BLESS=1 cargo test)"
        );
    }

    #[test]
    fn schema_uses_the_loader_bounds() {
        let s = json_schema();
        assert_eq!(
            s["$defs"]["limit"]["properties"]["capacity"]["maximum"],
            MAX_TOKENS
        );
        let rules = &s["$defs"]["limit"]["allOf"];
        assert_eq!(
            rules[1]["then"]["required"],
            serde_json::json!(["capacity"]),
            "a limit without `concurrency` needs `capacity`"
        );
        assert_eq!(
            s["$defs"]["limit"]["properties"]["concurrency"]["maximum"],
            MAX_SLOTS
        );
        assert_eq!(
            s["$defs"]["limit"]["properties"]["hold_ttl_seconds"]["maximum"],
            3600
        );
    }
}
