//! Reading a provider's JSON refusal body: the fields that say when the quota
//! comes back, at the top level or inside an `error` object, e.g.
//! `{"error": {"type": "usage_limit_reached", "resets_in_seconds": 202825}}`.

use serde_json::Value;
use zae_limiter_engine::cooldown::Hint;

/// What the body said.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ResponseHints {
    pub hints: Vec<Hint>,
    /// `error.type` or `error.code` (e.g. `usage_limit_reached`), for the recorded reason.
    pub label: Option<String>,
}

/// Why a body could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResponseError {
    #[error("the response body is not JSON: {0}")]
    NotJson(String),
    #[error("the response body is not a JSON object")]
    NotObject,
    #[error("field '{path}' is {found}; expected a number or a string")]
    WrongType { path: String, found: &'static str },
}

/// Extracts `resets_in_seconds` and `resets_at` (top level and under `error`)
/// and the error label. A `null` field counts as absent.
pub fn read_response(body: &str) -> Result<ResponseHints, ResponseError> {
    let v: Value = serde_json::from_str(body).map_err(|e| ResponseError::NotJson(e.to_string()))?;
    let Value::Object(top) = &v else {
        return Err(ResponseError::NotObject);
    };
    let mut out = ResponseHints::default();
    let mut scan =
        |obj: &serde_json::Map<String, Value>, prefix: &str| -> Result<(), ResponseError> {
            for (name, make) in [
                (
                    "resets_in_seconds",
                    Hint::ResetsInSeconds as fn(String) -> Hint,
                ),
                ("resets_at", Hint::ResetsAt as fn(String) -> Hint),
            ] {
                if let Some(text) = scalar_text(obj.get(name), &format!("{prefix}{name}"))? {
                    out.hints.push(make(text));
                }
            }
            Ok(())
        };
    scan(top, "")?;
    if let Some(Value::Object(err)) = top.get("error") {
        scan(err, "error.")?;
        out.label = ["type", "code"]
            .iter()
            .find_map(|k| err.get(*k).and_then(Value::as_str).map(str::to_string));
    }
    Ok(out)
}

fn scalar_text(v: Option<&Value>, path: &str) -> Result<Option<String>, ResponseError> {
    let wrong = |found| ResponseError::WrongType {
        path: path.to_string(),
        found,
    };
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => Ok(Some(n.to_string())),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(Value::Bool(_)) => Err(wrong("a boolean")),
        Some(Value::Array(_)) => Err(wrong("an array")),
        Some(Value::Object(_)) => Err(wrong("an object")),
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
                Hint::ResetsInSeconds("202825".into()),
                Hint::ResetsAt("1796421160".into())
            ]
        );
        assert_eq!(r.label.as_deref(), Some("usage_limit_reached"));
    }

    #[test]
    fn reads_top_level_fields_strings_and_nulls() {
        let r = read_response(r#"{"resets_at":"2026-12-04T18:20:25Z","resets_in_seconds":null}"#)
            .unwrap();
        assert_eq!(r.hints, vec![Hint::ResetsAt("2026-12-04T18:20:25Z".into())]);
        assert_eq!(r.label, None);
        assert_eq!(read_response("{}").unwrap(), ResponseHints::default());
        // Fractions keep their text; the engine rounds them up.
        let r = read_response(r#"{"resets_in_seconds": 1.5e2}"#).unwrap();
        assert_eq!(r.hints, vec![Hint::ResetsInSeconds("150.0".into())]);
    }

    #[test]
    fn refuses_what_it_cannot_read() {
        assert!(matches!(
            read_response("not json"),
            Err(ResponseError::NotJson(_))
        ));
        assert_eq!(read_response("[1]"), Err(ResponseError::NotObject));
        assert_eq!(
            read_response(r#"{"error":{"resets_in_seconds":true}}"#)
                .unwrap_err()
                .to_string(),
            "field 'error.resets_in_seconds' is a boolean; expected a number or a string"
        );
    }
}
