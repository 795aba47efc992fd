//! Request bodies: JSON, read whatever the `Content-Type` says (a client that
//! forgets the header is not refused for it), an empty body read as `{}`
//! (for endpoints whose fields are all optional). A malformed body is a 400
//! that names the field (`cost.rpm: invalid type: floating point `1.5`,
//! expected u64`); unknown fields are refused, so a misspelt one never passes
//! silently. Bodies over the limit (the `DefaultBodyLimit` layer) are a 413, at
//! once when `Content-Length` declares it.
//! A number too large for a float (`1e400`) is a 400 unless the field reads
//! it raw (a cooldown's hints and provider body do: it is a far reset).

use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use axum::http::StatusCode;
use serde::de::DeserializeOwned;

use super::error::ApiError;

/// The largest request body accepted, in bytes (a cooldown record carries a
/// provider's headers and error body; nothing else comes near).
pub const MAX_BODY_BYTES: usize = 64 * 1024;

/// A JSON body of type `T`.
pub struct JsonBody<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        // Declared over the limit: refused at once, not read until the
        // request times out.
        let declared = req
            .headers()
            .get(axum::http::header::CONTENT_LENGTH)
            .and_then(|n| n.to_str().ok()?.parse::<u64>().ok());
        if declared.is_some_and(|n| n > MAX_BODY_BYTES as u64) {
            return Err(ApiError::PayloadTooLarge(MAX_BODY_BYTES));
        }
        let bytes = Bytes::from_request(req, state).await.map_err(|e| {
            if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
                ApiError::PayloadTooLarge(MAX_BODY_BYTES)
            } else {
                ApiError::BadRequest(format!("cannot read the request body: {}", e.body_text()))
            }
        })?;
        parse(&bytes).map(JsonBody)
    }
}

/// Reads `bytes` as a `T`, naming the field that is wrong. The body is one
/// JSON document: anything after it (a second object, stray text) is
/// refused, never ignored. An empty body reads as `{}`, and an error about
/// it names no position (it would be one in the `{}`, not in what was sent).
pub fn parse<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let empty = bytes.iter().all(u8::is_ascii_whitespace);
    let text: &[u8] = if empty { b"{}" } else { bytes };
    let de = &mut serde_json::Deserializer::from_slice(text);
    let value = serde_path_to_error::deserialize(&mut *de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        let what = if inner.is_syntax() || inner.is_eof() {
            "the request body is not valid JSON".to_string()
        } else if empty {
            "the request body is empty".to_string()
        } else if path == "." {
            "invalid request body".to_string()
        } else {
            format!("invalid field `{path}`")
        };
        let mut why = inner.to_string();
        if empty {
            let at = format!(" at line {} column {}", inner.line(), inner.column());
            why.truncate(why.strip_suffix(at.as_str()).map_or(why.len(), str::len));
        }
        ApiError::BadRequest(format!("{what}: {why}"))
    })?;
    de.end().map_err(|e| {
        ApiError::BadRequest(format!(
            "the request body is not one JSON document: {e} (send one object, nothing after it)"
        ))
    })?;
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    struct Body {
        ttl_seconds: Option<i64>,
        #[serde(default)]
        cost: BTreeMap<String, u64>,
    }

    fn err(text: &str) -> String {
        match parse::<Body>(text.as_bytes()) {
            Err(ApiError::BadRequest(m)) => m,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn errors_name_the_field() {
        assert!(parse::<Body>(b"").unwrap().ttl_seconds.is_none());
        assert_eq!(
            parse::<Body>(br#"{"cost": {"rpm": 2}}"#).unwrap().cost["rpm"],
            2
        );
        assert_eq!(
            err(r#"{"cost": {"rpm": 1.5}}"#),
            "invalid field `cost.rpm`: invalid type: floating point `1.5`, expected u64 at line 1 column 20"
        );
        assert!(err(r#"{"ttlSecond": 5}"#).contains("unknown field `ttlSecond`, expected"));
        assert!(err("{").starts_with("the request body is not valid JSON"));
        assert!(err(r#"{"ttlSeconds": "5"}"#)
            .starts_with("invalid field `ttlSeconds`: invalid type: string"));
        // One document: what follows it is refused, not ignored.
        for (glued, column) in [
            (r#"{"ttlSeconds": 5} trailing"#, 19),
            (r#"{"ttlSeconds": 5}{"ttlSeconds": 6}"#, 18),
        ] {
            assert_eq!(
                err(glued),
                format!("the request body is not one JSON document: trailing characters at line 1 column {column} (send one object, nothing after it)"),
                "{glued}"
            );
        }
        assert_eq!(
            parse::<Body>(b" {\"ttlSeconds\": 5}\n")
                .unwrap()
                .ttl_seconds,
            Some(5)
        );
    }

    #[test]
    fn an_empty_body_is_named_without_a_position() {
        #[derive(Debug, serde::Deserialize)]
        struct Needs {
            #[allow(dead_code)]
            subject: String,
        }
        match parse::<Needs>(b"  ") {
            Err(ApiError::BadRequest(m)) => {
                assert_eq!(m, "the request body is empty: missing field `subject`")
            }
            other => panic!("{other:?}"),
        }
    }
}
