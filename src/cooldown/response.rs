//! Reading a provider's JSON refusal body: the fields that say when the quota
//! comes back, at the top level or inside an `error` object, e.g.
//! `{"error": {"type": "usage_limit_reached", "resets_in_seconds": 202825}}`.
//!
//! Nothing here stops a refusal from being recorded: what cannot be read is
//! reported so the caller can warn and record from what can.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::value::RawValue;
use serde_json::Value;
use zae_limiter_engine::cooldown::{Hint, HintField};

/// Largest response body (and headers file) read; a larger one is ignored (as
/// a manifest over its cap is refused), so `--response /dev/zero` cannot
/// exhaust memory.
pub const MAX_BODY_BYTES: u64 = 1024 * 1024;

/// What the body said.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ResponseHints {
    pub hints: Vec<Hint>,
    /// `error.type` or `error.code` (e.g. `usage_limit_reached`), for the recorded reason.
    pub label: Option<String>,
    /// Known fields that were present but unusable (left out of `hints`).
    pub problems: Vec<ResponseError>,
}

/// Why a body, or one of its fields, could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResponseError {
    #[error("cannot read the response body: {0}")]
    Unreadable(String),
    #[error("the response body is larger than {}; bodies that large are not read", crate::input::bytes(*max))]
    TooLarge { max: u64 },
    #[error("the response body is not UTF-8 text (invalid byte at offset {offset})")]
    NotUtf8 { offset: usize },
    #[error("the response body is not JSON: {0}")]
    NotJson(String),
    #[error("the response body is not a JSON object")]
    NotObject,
    #[error("field '{path}' is {found}; expected a number or a string")]
    WrongType { path: String, found: &'static str },
}

/// Reads the body file at `path` (`-`: standard input; at most
/// [`MAX_BODY_BYTES`], UTF-8) and what it says.
pub fn read_response_file(path: &Path) -> Result<ResponseHints, ResponseError> {
    let bytes = crate::input::read_path(path, MAX_BODY_BYTES).map_err(|e| match e {
        crate::input::BoundedError::TooLarge { max } => ResponseError::TooLarge { max },
        crate::input::BoundedError::Io(e) => ResponseError::Unreadable(e.to_string()),
    })?;
    let text = String::from_utf8(bytes).map_err(|e| ResponseError::NotUtf8 {
        offset: e.utf8_error().valid_up_to(),
    })?;
    read_response(&text)
}

/// Extracts `resets_in_seconds` and `resets_at` (top level and under `error`)
/// and the error label. A `null` field counts as absent; a field of the wrong
/// type is left out and listed in `problems`. A leading byte-order mark is
/// skipped (some servers and editors write one). An empty body (many 429s
/// have none; `curl -o` still writes the file) says nothing, without a problem.
pub fn read_response(body: &str) -> Result<ResponseHints, ResponseError> {
    let body = body.strip_prefix('\u{feff}').unwrap_or(body);
    if body.trim().is_empty() {
        return Ok(ResponseHints::default());
    }
    // Read as raw values, not as a `Value`: serde_json refuses a number past
    // every float (`1e400`) for the whole document, and such a number under
    // `resets_in_seconds` is a reset past every year we represent, to be
    // escalated, not a reason to ignore the body and back off for a minute.
    let raw: &RawValue =
        serde_json::from_str(body).map_err(|e| ResponseError::NotJson(e.to_string()))?;
    let top = object(raw).ok_or(ResponseError::NotObject)?;
    let mut out = ResponseHints::default();
    let mut scan = |obj: &Fields, prefix: &str| {
        for field in [HintField::RESETS_IN_SECONDS, HintField::RESETS_AT] {
            let name = field.name();
            match scalar_text(obj.get(name).copied(), &format!("{prefix}{name}")) {
                Ok(Some(text)) => out.hints.push(Hint::new(field, text)),
                Ok(None) => {}
                Err(e) => out.problems.push(e),
            }
        }
    };
    scan(&top, "");
    if let Some(err) = top.get("error").and_then(|e| object(e)) {
        scan(&err, "error.");
        out.label = ["type", "code"].iter().find_map(|k| {
            let v = serde_json::from_str::<Value>(err.get(*k)?.get()).ok()?;
            v.as_str().map(str::to_string)
        });
    }
    Ok(out)
}

/// An object's members, unparsed (a repeated key: the last one, as `Value`).
type Fields<'a> = BTreeMap<String, &'a RawValue>;

fn object(raw: &RawValue) -> Option<Fields<'_>> {
    raw.get()
        .starts_with('{')
        .then(|| serde_json::from_str(raw.get()).ok())
        .flatten()
}

/// A field's value as text: a string's contents, or a number exactly as
/// written (so one too large for a float is kept, for the engine to read).
fn scalar_text(v: Option<&RawValue>, path: &str) -> Result<Option<String>, ResponseError> {
    match v {
        None => Ok(None),
        Some(raw) => scalar(raw).map_err(|found| ResponseError::WrongType {
            path: path.to_string(),
            found,
        }),
    }
}

/// A raw JSON value as a hint's text: a string's contents, or a number
/// exactly as written (so one too large for a float is kept, for the engine
/// to find out of range); `None` for `null`; otherwise what it is instead
/// ("a boolean"). `serve` reads its hints and headers with it too.
pub fn scalar(raw: &RawValue) -> Result<Option<String>, &'static str> {
    let text = raw.get();
    match text.as_bytes().first() {
        Some(b'-' | b'0'..=b'9') => {
            // The usual rendering (`1.5e2` → `150.0`) when it fits a float,
            // the text as written when it does not.
            Ok(Some(match serde_json::from_str::<Value>(text) {
                Ok(Value::Number(n)) => n.to_string(),
                _ => text.to_string(),
            }))
        }
        Some(b'"') => serde_json::from_str::<String>(text)
            .map(Some)
            .map_err(|_| "a string that cannot be decoded"),
        Some(b'n') => Ok(None),
        Some(b't' | b'f') => Err("a boolean"),
        Some(b'[') => Err("an array"),
        _ => Err("an object"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_nested_usage_limit_bodies() {
        let body = r#"{"error":{"type":"usage_limit_reached","message":"The usage limit has been reached","plan_type":"plus","resets_at":1796421160,"resets_in_seconds":202825}}"#;
        let r = read_response(body).unwrap();
        assert_eq!(
            r.hints,
            vec![
                Hint::resets_in_seconds("202825"),
                Hint::resets_at("1796421160")
            ]
        );
        assert_eq!(r.label.as_deref(), Some("usage_limit_reached"));
    }

    #[test]
    fn reads_top_level_fields_strings_and_nulls() {
        let r = read_response(r#"{"resets_at":"2026-12-04T18:20:25Z","resets_in_seconds":null}"#)
            .unwrap();
        assert_eq!(r.hints, vec![Hint::resets_at("2026-12-04T18:20:25Z")]);
        assert_eq!(r.label, None);
        assert_eq!(read_response("{}").unwrap(), ResponseHints::default());
        assert_eq!(read_response(" \r\n").unwrap(), ResponseHints::default());
        // Fractions keep their text; the engine rounds them up.
        let r = read_response(r#"{"resets_in_seconds": 1.5e2}"#).unwrap();
        assert_eq!(r.hints, vec![Hint::resets_in_seconds("150.0")]);
    }

    #[test]
    fn refuses_what_it_cannot_read() {
        assert!(matches!(
            read_response("not json"),
            Err(ResponseError::NotJson(_))
        ));
        assert_eq!(read_response("[1]"), Err(ResponseError::NotObject));
        // A field of the wrong type is left out and named; the others are kept.
        let r = read_response(r#"{"resets_at": 1796421160, "error":{"resets_in_seconds":true}}"#)
            .unwrap();
        assert_eq!(r.hints, vec![Hint::resets_at("1796421160")]);
        assert_eq!(
            r.problems[0].to_string(),
            "field 'error.resets_in_seconds' is a boolean; expected a number or a string"
        );
    }

    #[test]
    fn a_number_past_every_float_is_kept_as_written() {
        // serde_json refuses 1e400 as a value; the body is still read, the
        // number kept for the engine (which finds it out of range).
        let r = read_response(
            r#"{"tokens": 1e400, "error":{"type":"rate_limit","resets_in_seconds":1e400,"resets_at":-1E+400}}"#,
        )
        .unwrap();
        assert_eq!(
            r.hints,
            vec![Hint::resets_in_seconds("1e400"), Hint::resets_at("-1E+400")]
        );
        assert_eq!(r.label.as_deref(), Some("rate_limit"));
        assert!(r.problems.is_empty());
        // A huge number inside an array is still the wrong type.
        let r = read_response(r#"{"resets_at": [1e400]}"#).unwrap();
        assert_eq!(
            r.problems[0].to_string(),
            "field 'resets_at' is an array; expected a number or a string"
        );
        // Repeated keys: the last one counts, as before.
        let r = read_response(r#"{"resets_at": 1, "resets_at": "x"}"#).unwrap();
        assert_eq!(r.hints, vec![Hint::resets_at("x")]);
        assert!(matches!(
            read_response(r#"{"resets_at": 1e400"#),
            Err(ResponseError::NotJson(_))
        ));
    }

    #[test]
    fn a_byte_order_mark_is_skipped() {
        let r = read_response("\u{feff}{\"resets_in_seconds\": 3600}").unwrap();
        assert_eq!(r.hints, vec![Hint::resets_in_seconds("3600")]);
    }

    #[test]
    fn files_are_read_bounded_and_as_utf8() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("body");
        std::fs::write(&path, b"{\"resets_at\": \xff}").unwrap();
        assert_eq!(
            read_response_file(&path),
            Err(ResponseError::NotUtf8 { offset: 14 })
        );
        let err = read_response_file(Path::new("/dev/zero")).unwrap_err();
        assert_eq!(
            err,
            ResponseError::TooLarge {
                max: MAX_BODY_BYTES
            }
        );
        assert_eq!(
            err.to_string(),
            "the response body is larger than 1 MiB; bodies that large are not read"
        );
        assert!(matches!(
            read_response_file(&dir.path().join("missing")),
            Err(ResponseError::Unreadable(_))
        ));
    }
}
