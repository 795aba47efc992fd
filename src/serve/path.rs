//! Path parameters (`{id}`, `{scope}`), parsed while the request is taken
//! apart so a handler receives the typed value. One that does not parse is
//! the same 400 with our JSON body as any other malformed request, and, as
//! the path is read before the body, it is the error a request with both
//! wrong gets.

use axum::extract::path::ErrorKind;
use axum::extract::rejection::PathRejection;
use axum::extract::{FromRequestParts, Path};
use axum::http::request::Parts;

use super::error::{self, ApiError};

/// A value read from the route's one path parameter.
pub trait FromPath: Sized {
    fn from_path(text: &str) -> Result<Self, ApiError>;
}

/// The route's path parameter as a `T`.
pub struct PathParam<T>(pub T);

impl<S: Send + Sync, T: FromPath> FromRequestParts<S> for PathParam<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let Path(text) = Path::<String>::from_request_parts(parts, state)
            .await
            .map_err(|e| undecodable(e, parts.uri.path()))?;
        T::from_path(&text).map(PathParam)
    }
}

/// Axum's rejection of a segment it cannot decode at all (percent-encoded
/// bytes that are not UTF-8) as our 400; anything else it refuses is a
/// route that does not match its handler, a bug of ours: logged, a 500.
fn undecodable(e: PathRejection, path: &str) -> ApiError {
    if let PathRejection::FailedToDeserializePathParams(f) = &e {
        if let ErrorKind::InvalidUtf8InPathParam { key } = f.kind() {
            return ApiError::BadRequest(format!(
                "the {{{key}}} in the path {path} is not UTF-8 once percent-decoded; \
                 send the {key}'s UTF-8 bytes, percent-encoded"
            ));
        }
    }
    error::log(&format!("path {path}: {}", e.body_text()));
    ApiError::Internal("the request's path could not be read on the server".into())
}
