//! Query strings (`GET /v1/limits?entity=E&resource=R`), parsed into a `T`
//! while the request is taken apart. One that does not parse is a 400 with
//! our JSON body naming the parameter (`missing query parameter
//! `resource``), as a malformed body is ([`super::body`]); unknown
//! parameters are refused when `T` denies them, so a misspelt one never
//! passes silently.

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use serde::de::DeserializeOwned;

use super::error::ApiError;

/// The request's query string as a `T`.
pub struct QueryParams<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for QueryParams<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, ApiError> {
        let query = parts.uri.query().unwrap_or_default();
        parse(query).map(QueryParams).map_err(|why| {
            ApiError::BadRequest(format!(
                "{why} in {} {}; see docs/serve.md for the API",
                parts.method,
                parts.uri.path()
            ))
        })
    }
}

/// Reads `query` (without its `?`) as a `T`; the error names the parameter
/// in a query string's words, not serde's ("field").
fn parse<T: DeserializeOwned>(query: &str) -> Result<T, String> {
    let de = serde_urlencoded::Deserializer::new(form_urlencoded::parse(query.as_bytes()));
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner().to_string();
        for (serde_words, ours) in [
            ("missing field ", "missing query parameter "),
            ("unknown field ", "unknown query parameter "),
        ] {
            if let Some(rest) = inner.strip_prefix(serde_words) {
                return format!("{ours}{rest}");
            }
        }
        if path == "." {
            format!("invalid query string: {inner}")
        } else {
            format!("invalid query parameter `{path}`: {inner}")
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Q {
        entity: String,
        resource: String,
        n: Option<u32>,
    }

    #[test]
    fn errors_name_the_parameter() {
        let q: Q = parse("entity=a%20b&resource=r+1").unwrap();
        assert_eq!((q.entity.as_str(), q.resource.as_str()), ("a b", "r 1"));
        assert_eq!(q.n, None);
        assert_eq!(parse::<Q>("entity=w&resource=r&n=3").unwrap().n, Some(3));
        assert_eq!(
            parse::<Q>("entity=w").unwrap_err(),
            "missing query parameter `resource`"
        );
        assert!(parse::<Q>("entity=w&resource=r&resorce=x")
            .unwrap_err()
            .starts_with("unknown query parameter `resorce`, expected"));
        assert!(parse::<Q>("entity=w&resource=r&n=x")
            .unwrap_err()
            .starts_with("invalid query parameter `n`: "));
    }
}
