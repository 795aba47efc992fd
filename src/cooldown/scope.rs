//! Scope names: the key of an exhausted quota (provider/account/bucket), checked
//! before anything touches the store so a bad name never reaches a key.

/// Longest scope accepted, in bytes (keeps keys far below DynamoDB's limits).
pub const MAX_SCOPE_BYTES: usize = 256;

/// A validated scope: non-empty, at most [`MAX_SCOPE_BYTES`], no `#` (the key
/// separator), no control characters, no surrounding whitespace.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Scope(String);

/// Why a scope was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid scope {shown}: {why}; use e.g. provider/account/bucket")]
pub struct ScopeError {
    shown: String,
    why: &'static str,
}

impl Scope {
    pub fn parse(text: &str) -> Result<Scope, ScopeError> {
        let err = |why| ScopeError {
            shown: format!("{text:?}"),
            why,
        };
        if text.is_empty() {
            return Err(err("it is empty"));
        }
        if text.len() > MAX_SCOPE_BYTES {
            return Err(ScopeError {
                shown: format!("of {} bytes", text.len()),
                why: "it is longer than 256 bytes",
            });
        }
        if text.contains('#') {
            return Err(err("'#' is reserved as the key separator"));
        }
        if text.chars().any(char::is_control) {
            return Err(err("it contains a control character"));
        }
        if text.trim() != text {
            return Err(err("it starts or ends with whitespace"));
        }
        Ok(Scope(text.to_string()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for Scope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_ordinary_scopes() {
        for s in [
            "openai/acct-42/gpt-4",
            "a",
            "anthropic:org 7/tokens",
            &"x".repeat(256),
        ] {
            assert_eq!(Scope::parse(s).unwrap().as_str(), s);
        }
    }

    #[test]
    fn refuses_bad_scopes_with_a_reason() {
        let cases = [
            ("", "it is empty"),
            ("a#b", "'#' is reserved"),
            ("a\nb", "control character"),
            (" a", "whitespace"),
        ];
        for (s, why) in cases {
            let e = Scope::parse(s).unwrap_err().to_string();
            assert!(e.contains(why), "{s:?}: {e}");
        }
        let long = Scope::parse(&"x".repeat(257)).unwrap_err().to_string();
        assert_eq!(
            long,
            "invalid scope of 257 bytes: it is longer than 256 bytes; use e.g. provider/account/bucket"
        );
    }
}
