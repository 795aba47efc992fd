//! Path parameters (`{id}`, `{scope}`), parsed while the request is taken
//! apart so a handler receives the typed value. One that does not parse is
//! the same 400 with our JSON body as any other malformed request, and, as
//! the path is read before the body, it is the error a request with both
//! wrong gets.

use axum::extract::{FromRequestParts, Path};
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};

use super::error::ApiError;

/// A value read from the route's one path parameter.
pub trait FromPath: Sized {
    fn from_path(text: &str) -> Result<Self, ApiError>;
}

/// The route's path parameter as a `T`.
pub struct PathParam<T>(pub T);

impl<S: Send + Sync, T: FromPath> FromRequestParts<S> for PathParam<T> {
    /// Axum's own answer when the segment cannot be decoded at all (not
    /// UTF-8); our [`ApiError`] when it does not parse.
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Response> {
        let Path(text) = Path::<String>::from_request_parts(parts, state)
            .await
            .map_err(IntoResponse::into_response)?;
        T::from_path(&text)
            .map(PathParam)
            .map_err(IntoResponse::into_response)
    }
}
