//! The one clock of the commands that act "now" (`cooldown …`, `acquire`,
//! `reservation …`): `ZAEL_NOW` (RFC 3339) when it is set, else the system
//! clock, so a wrapper script can be rehearsed at any instant and tests can
//! cross process boundaries deterministically; and the one RFC 3339 rendering
//! of an epoch-ms instant their answers use.

use chrono::{DateTime, SecondsFormat, Utc};

/// Test and rehearsal clock override: an RFC 3339 instant used as "now".
pub const NOW_ENV: &str = "ZAEL_NOW";

/// A time that is not RFC 3339, or a clock override out of range.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InstantError {
    #[error("{what} '{text}' is not an RFC 3339 time such as 2026-12-02T10:00:00Z ({reason})")]
    NotRfc3339 {
        what: String,
        text: String,
        reason: String,
    },
    #[error("{what} '{text}' is out of range: instants from 1970-01-01 to {max} are accepted")]
    OutOfRange {
        what: String,
        text: String,
        max: String,
    },
}

/// "Now" in epoch ms: `ZAEL_NOW` when set, else the system clock. An override
/// outside 1970..=9999 is refused: every instant the commands store or
/// compare lies in that range (docs/robustness.md).
pub fn now_ms() -> Result<i64, InstantError> {
    match std::env::var(NOW_ENV) {
        Ok(v) if !v.is_empty() => {
            let ms = parse_instant(&v, NOW_ENV)?;
            if !(0..=zae_limiter_engine::civil::MAX_EPOCH_MS).contains(&ms) {
                return Err(InstantError::OutOfRange {
                    what: NOW_ENV.to_string(),
                    text: v,
                    max: rfc3339(zae_limiter_engine::civil::MAX_EPOCH_MS),
                });
            }
            Ok(ms)
        }
        _ => Ok(Utc::now().timestamp_millis()),
    }
}

/// An RFC 3339 instant (any offset) in epoch ms; `what` names it in the error.
pub fn parse_instant(text: &str, what: &str) -> Result<i64, InstantError> {
    DateTime::parse_from_rfc3339(text.trim())
        .map(|t| t.timestamp_millis())
        .map_err(|e| InstantError::NotRfc3339 {
            what: what.to_string(),
            text: text.to_string(),
            reason: e.to_string(),
        })
}

/// RFC 3339 in UTC, whole seconds unless the instant has milliseconds.
pub fn rfc3339(ms: i64) -> String {
    match DateTime::<Utc>::from_timestamp_millis(ms) {
        Some(t) if ms % 1000 == 0 => t.to_rfc3339_opts(SecondsFormat::Secs, true),
        Some(t) => t.to_rfc3339_opts(SecondsFormat::Millis, true),
        None => format!("@{ms}ms"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instants_both_ways() {
        assert_eq!(
            parse_instant("2026-12-02T10:00:00Z", "x"),
            Ok(1_796_205_600_000)
        );
        assert_eq!(
            parse_instant("2026-12-02T11:00:00.250+01:00", "x"),
            Ok(1_796_205_600_250)
        );
        assert_eq!(rfc3339(1_796_205_600_000), "2026-12-02T10:00:00Z");
        assert_eq!(rfc3339(1_796_205_600_250), "2026-12-02T10:00:00.250Z");
        assert_eq!(rfc3339(i64::MAX), format!("@{}ms", i64::MAX));
        let e = parse_instant("soon", "ZAEL_NOW").unwrap_err().to_string();
        assert!(
            e.starts_with("ZAEL_NOW 'soon' is not an RFC 3339 time"),
            "{e}"
        );
    }
}
