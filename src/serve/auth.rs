//! The bearer token: every request must carry `Authorization: Bearer
//! <token>` with the server's token (`ZAEL_API_TOKEN` or `--token-file`).
//! Only the token's SHA-256 is kept, and a presented token is hashed and
//! compared in constant time, so neither its content nor its length leaks
//! through timing. Without a token the server listens on loopback only
//! (checked by the command before it binds) and lets every request through.

use axum::extract::{Request, State};
use axum::http::header::AUTHORIZATION;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::error::ApiError;
use super::App;

/// Shortest token accepted, in bytes.
pub const MIN_TOKEN_LEN: usize = 16;

/// The server's token, kept as its hash.
#[derive(Clone)]
pub struct Token([u8; 32]);

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(…)")
    }
}

/// Why a configured token was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    #[error("the token is {0} bytes; use at least {MIN_TOKEN_LEN} random characters, e.g. from `openssl rand -hex 32`")]
    TooShort(usize),
    #[error("the token may hold only visible ASCII characters (no spaces), as an HTTP header carries it")]
    NotVisible,
}

impl Token {
    /// The token from its text (surrounding whitespace, such as a file's
    /// final newline, is not part of it).
    pub fn new(text: &str) -> Result<Token, TokenError> {
        let t = text.trim();
        if !t.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(TokenError::NotVisible);
        }
        if t.len() < MIN_TOKEN_LEN {
            return Err(TokenError::TooShort(t.len()));
        }
        Ok(Token(Sha256::digest(t.as_bytes()).into()))
    }

    /// Whether `presented` is the token (constant time).
    pub fn matches(&self, presented: &[u8]) -> bool {
        let digest: [u8; 32] = Sha256::digest(presented).into();
        digest.ct_eq(&self.0).into()
    }
}

/// The token in an `Authorization` header value (`Bearer` in any case).
fn bearer(value: &[u8]) -> Option<&[u8]> {
    let (scheme, rest) = value.split_at(value.iter().position(|&b| b == b' ')?);
    scheme
        .eq_ignore_ascii_case(b"bearer")
        .then(|| rest.trim_ascii())
}

/// Middleware: 401 unless the request carries the token.
pub async fn require_token(
    State(app): State<std::sync::Arc<App>>,
    req: Request,
    next: Next,
) -> Response {
    if let Some(token) = &app.settings.token {
        let presented = req
            .headers()
            .get(AUTHORIZATION)
            .and_then(|v| bearer(v.as_bytes()));
        if !presented.is_some_and(|p| token.matches(p)) {
            return ApiError::Unauthorized.into_response();
        }
    }
    next.run(req).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens() {
        let t = Token::new("0123456789abcdef0123\n").unwrap();
        assert!(t.matches(b"0123456789abcdef0123"));
        assert!(!t.matches(b"0123456789abcdef012"));
        assert!(!t.matches(b""));
        assert_eq!(Token::new("short").unwrap_err(), TokenError::TooShort(5));
        assert_eq!(
            Token::new("0123456789 abcdef0123").unwrap_err(),
            TokenError::NotVisible
        );
        assert_eq!(bearer(b"Bearer abc"), Some(&b"abc"[..]));
        assert_eq!(bearer(b"bearer  abc "), Some(&b"abc"[..]));
        assert_eq!(bearer(b"Basic abc"), None);
        assert_eq!(bearer(b"Bearer"), None);
    }
}
