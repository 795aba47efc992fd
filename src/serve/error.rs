//! The one place where a failure becomes an HTTP status and a JSON body:
//! [`ApiError`] and its `IntoResponse`. The runtime's and the cooldowns'
//! typed errors map onto it ([`From`] impls below), so a handler only says
//! `?`.
//!
//! Bodies are `{"version": 1, "error": {"status", "code", "message"}}`. A
//! client error (4xx) says what was wrong with the request in our words. A
//! server or store failure (5xx) is logged on the server's stderr in full and
//! answered with a message that names no key, endpoint or SDK detail: no
//! error leaks a backtrace or store internals.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::cooldown::CooldownError;
use crate::runtime::RuntimeError;
use crate::store::StoreError;

/// What a request can fail with, by HTTP status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApiError {
    /// 401: no or a wrong bearer token.
    Unauthorized,
    /// 400: the request is malformed or asks for something invalid.
    BadRequest(String),
    /// 404: no such reservation, endpoint or limits.
    NotFound(String),
    /// 405: the endpoint exists, the method does not.
    MethodNotAllowed,
    /// 409: the request conflicts with the stored state (a probe held by another worker).
    Conflict(String),
    /// 413: the body is larger than the limit (bytes).
    PayloadTooLarge(usize),
    /// 503: the store cannot be used now; retrying later may help.
    Unavailable {
        message: String,
        retry_after_seconds: Option<u64>,
    },
    /// 503: the request took longer than the server's request timeout.
    Timeout,
    /// 500: a failure on the server's side, logged in full; the client gets `message`.
    Internal(String),
}

impl ApiError {
    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::Unauthorized => StatusCode::UNAUTHORIZED,
            ApiError::BadRequest(_) => StatusCode::BAD_REQUEST,
            ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::Conflict(_) => StatusCode::CONFLICT,
            ApiError::PayloadTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::Unavailable { .. } | ApiError::Timeout => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// A stable word for programs (`"code"`).
    pub fn code(&self) -> &'static str {
        match self {
            ApiError::Unauthorized => "unauthorized",
            ApiError::BadRequest(_) => "bad_request",
            ApiError::NotFound(_) => "not_found",
            ApiError::MethodNotAllowed => "method_not_allowed",
            ApiError::Conflict(_) => "conflict",
            ApiError::PayloadTooLarge(_) => "payload_too_large",
            ApiError::Unavailable { .. } => "unavailable",
            ApiError::Timeout => "timeout",
            ApiError::Internal(_) => "internal",
        }
    }

    pub fn message(&self) -> String {
        match self {
            ApiError::Unauthorized => {
                "missing or wrong bearer token: send `Authorization: Bearer <token>` with the server's token".into()
            }
            ApiError::BadRequest(m)
            | ApiError::NotFound(m)
            | ApiError::Conflict(m)
            | ApiError::Internal(m) => m.clone(),
            ApiError::MethodNotAllowed => "this endpoint does not take that method".into(),
            ApiError::PayloadTooLarge(max) => {
                format!("the request body is larger than {max} bytes")
            }
            ApiError::Unavailable { message, .. } => message.clone(),
            ApiError::Timeout => "the request took longer than the server's request timeout; nothing is known about its outcome".into(),
        }
    }

    /// Stored state that cannot be read: `e` (which says where) is logged,
    /// the client gets `message`; retrying does not help.
    fn unreadable(e: &dyn std::fmt::Display, message: &str) -> ApiError {
        log(&e.to_string());
        ApiError::Unavailable {
            message: message.into(),
            retry_after_seconds: None,
        }
    }

    /// Other writers kept winning the conditional write: try again in a second.
    fn contended(e: &dyn std::fmt::Display) -> ApiError {
        ApiError::Unavailable {
            message: e.to_string(),
            retry_after_seconds: Some(1),
        }
    }

    /// A store failure: logged in full, answered without its details.
    fn store(e: &StoreError, what: &str) -> ApiError {
        log(&format!("{what}: {e}"));
        match e {
            StoreError::Backend(_) | StoreError::Corrupt { .. } => ApiError::Unavailable {
                message: format!("{what}: the store cannot be used right now (the server's log says why); try again later"),
                retry_after_seconds: Some(1),
            },
            // The table or the local store file went away under the server
            // (or was never there): this instance cannot answer until an
            // operator acts; a load balancer should take it out (503).
            StoreError::TableNotFound { .. } | StoreError::LocalStorePath { .. } => {
                ApiError::Unavailable {
                    message: format!("{what}: the server's table cannot be found (the server's log says where); an operator must restore it or point the server at another"),
                    retry_after_seconds: None,
                }
            }
            _ => ApiError::Internal(format!(
                "{what}: the store refused the request (the server's log says why)"
            )),
        }
    }
}

/// One line on the server's stderr (best effort: a log line that cannot be
/// written must not fail the request).
pub fn log(text: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr().lock(), "zae-limiter serve: {text}");
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status();
        let body = json!({
            "version": 1,
            "error": {"status": status.as_u16(), "code": self.code(), "message": self.message()},
        });
        let mut response = (status, axum::Json(body)).into_response();
        let headers = response.headers_mut();
        match &self {
            ApiError::Unauthorized => {
                headers.insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            }
            ApiError::Unavailable {
                retry_after_seconds: Some(s),
                ..
            } => {
                headers.insert(header::RETRY_AFTER, HeaderValue::from(*s));
            }
            _ => {}
        }
        response
    }
}

impl From<RuntimeError> for ApiError {
    fn from(e: RuntimeError) -> Self {
        use RuntimeError as R;
        match e {
            // The namespace, the config or the state: the store as a whole.
            R::Store(s) => ApiError::store(&s, "the store"),
            R::StateUnreadable { .. } => ApiError::unreadable(
                &format!("{e}; nothing overwrites it: remove it with `zae-limiter runtime clear ENTITY -r RESOURCE` (the key's RUNTIME#ENTITY#RESOURCE) and this server's store flags"),
                "the runtime state of this entity and resource is unreadable (the server's log says where); an operator must look at it",
            ),
            R::Contended { .. } => ApiError::contended(&e),
            // Room comes back as holds end: not the client's fault, not a
            // store failure; it names no store detail.
            R::StateTooLarge { .. } => ApiError::Unavailable {
                message: e.to_string(),
                retry_after_seconds: None,
            },
            R::NamespaceNotFound(_) | R::Table(_) => {
                log(&e.to_string());
                ApiError::Unavailable {
                    message: e.to_string(),
                    retry_after_seconds: None,
                }
            }
            R::Config(_) => {
                log(&e.to_string());
                // The item's key is the log's to say (no key in an answer).
                ApiError::Internal(
                    "a stored config item of this entity and resource cannot be used (the server's log says which and why); an operator must correct it, e.g. with `zae-limiter limits apply`".into(),
                )
            }
            R::Random(_) => {
                log(&e.to_string());
                ApiError::Internal("cannot draw a reservation id".into())
            }
            R::NoLimits { .. } | R::NotOpen { .. } => ApiError::NotFound(e.to_string()),
            // The runtime's words name CLI flags; the API's name its fields.
            R::UnknownCost { name, level, known } => ApiError::BadRequest(format!(
                "cost names '{name}', which is not a limit of the {level} level (its limits: {known})"
            )),
            R::NothingToReserve {
                entity,
                resource,
                level,
            } => ApiError::BadRequest(format!(
                "the {level} level of entity '{entity}' on resource '{resource}' has no concurrency limit, so there is no slot to reserve; use \"mode\": \"consume\""
            )),
            R::Identifier(_)
            | R::BadHolder(_)
            | R::CostTooLarge { .. }
            | R::TtlOutOfRange { .. }
            | R::InvalidId(_)
            | R::NotCounted { .. } => ApiError::BadRequest(e.to_string()),
        }
    }
}

impl From<CooldownError> for ApiError {
    fn from(e: CooldownError) -> Self {
        use CooldownError as C;
        match e {
            C::Store(s) => ApiError::store(&s, "the cooldown state"),
            C::Corrupt { .. } => ApiError::unreadable(
                &e,
                "the cooldown state of this scope is unreadable (the server's log says where); an operator must clear it",
            ),
            C::Contended { .. } => ApiError::contended(&e),
            C::NotHolder { .. } => ApiError::Conflict(e.to_string()),
            C::Scope(_) | C::Hint(_) => ApiError::BadRequest(e.to_string()),
            C::Random(_) => {
                log(&e.to_string());
                ApiError::Internal("cannot draw a cooldown version".into())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_failures_name_no_internals() {
        let e: ApiError = RuntimeError::Store(StoreError::Backend(
            "dispatch failure: connection refused to http://10.1.2.3:8000".into(),
        ))
        .into();
        assert_eq!(e.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert!(!e.message().contains("10.1.2.3"), "{}", e.message());
        let e: ApiError = RuntimeError::Store(StoreError::AccessDenied {
            action: "PutItem".into(),
            table: "secret-table".into(),
        })
        .into();
        assert_eq!(e.status(), StatusCode::INTERNAL_SERVER_ERROR);
        assert!(!e.message().contains("secret-table"), "{}", e.message());
        // A table (or local store file) gone is this instance out of
        // service, not a server bug: 503, naming no path.
        let gone = crate::store::Missing::NoLocalFile("/srv/secret/store.sqlite".into());
        let e: ApiError = RuntimeError::Store(StoreError::TableNotFound {
            table: "jobs".into(),
            where_: gone,
        })
        .into();
        assert_eq!(
            (e.status(), e.code()),
            (StatusCode::SERVICE_UNAVAILABLE, "unavailable")
        );
        assert!(!e.message().contains("secret"), "{}", e.message());
        // A config item the runtime cannot use: its key is in the log only.
        let bad = crate::items::config::CodecError::Unreadable {
            pk: "ns/RESOURCE#secret-res".into(),
            sk: "#CONFIG".into(),
            reason: "attribute 'l_rpm_cp' is not a number".into(),
        };
        let e: ApiError = RuntimeError::Config(bad).into();
        assert_eq!(e.status(), StatusCode::INTERNAL_SERVER_ERROR);
        assert!(!e.message().contains("secret"), "{}", e.message());
    }

    #[test]
    fn client_errors_say_what() {
        let e: ApiError = RuntimeError::BadHolder("a\nb".into()).into();
        assert_eq!(
            (e.status(), e.message().as_str()),
            (
                StatusCode::BAD_REQUEST,
                "holder \"a\\nb\": expected a worker or job name of 1 to 256 bytes, no control characters"
            )
        );
        let e: ApiError = RuntimeError::NotOpen {
            id: "z1.x".into(),
            namespace: "default".into(),
            why: "it is unknown".into(),
        }
        .into();
        assert_eq!(e.status(), StatusCode::NOT_FOUND);
    }
}
