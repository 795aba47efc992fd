//! The one clock, and the one RFC 3339 rendering of an epoch-ms instant.
//!
//! * [`system_ms`]: the system clock. Tests shift it with
//!   `ZAEL_TEST_CLOCK_OFFSET_MS=MS` (so an interrupted apply's leases can
//!   run out without waiting); nothing else reads that variable. `limits
//!   apply` and the records the table keeps (`created_at`, `updated_at`) use
//!   it: their times are leases between real processes and stamps a running
//!   Python limiter compares with its own clock.
//! * [`now_ms`]: "now" of the commands that act at a moment the user may
//!   want to rehearse (`cooldown …`, `acquire`, `reservation …`): `ZAEL_NOW`
//!   (RFC 3339) when it is set, else [`system_ms`], so a wrapper script can
//!   be rehearsed at any instant and tests cross process boundaries
//!   deterministically.

use chrono::{DateTime, SecondsFormat, Utc};
use zae_limiter_engine::civil::MAX_EPOCH_MS;

/// Test and rehearsal clock override: an RFC 3339 instant used as "now".
pub const NOW_ENV: &str = "ZAEL_NOW";
/// Tests only: milliseconds added to the system clock.
pub const TEST_OFFSET_ENV: &str = "ZAEL_TEST_CLOCK_OFFSET_MS";

/// A time that is not RFC 3339, or one outside 1970..=9999 (every instant the
/// commands store or compare lies in that range, docs/robustness.md).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InstantError {
    #[error("{what} '{text}' is not an RFC 3339 time such as 2026-12-02T10:00:00Z ({reason})")]
    NotRfc3339 {
        what: String,
        text: String,
        reason: String,
    },
    #[error(
        "{what} '{text}' is out of range: instants from 1970-01-01 to {} are accepted",
        rfc3339(MAX_EPOCH_MS)
    )]
    OutOfRange { what: String, text: String },
}

/// The system clock in epoch ms, shifted by `ZAEL_TEST_CLOCK_OFFSET_MS` when set.
pub fn system_ms() -> i64 {
    let offset = std::env::var(TEST_OFFSET_ENV)
        .ok()
        .and_then(|v| v.trim().parse::<i64>().ok())
        .unwrap_or(0);
    Utc::now().timestamp_millis().saturating_add(offset)
}

/// "Now" in epoch ms: `ZAEL_NOW` when set, else [`system_ms`].
pub fn now_ms() -> Result<i64, InstantError> {
    match std::env::var(NOW_ENV) {
        Ok(v) if !v.is_empty() => parse_instant(&v, NOW_ENV),
        _ => Ok(system_ms()),
    }
}

/// An RFC 3339 instant (any offset) from 1970 to 9999
/// ([`MAX_EPOCH_MS`]) in epoch ms; `what` names it in the error.
pub fn parse_instant(text: &str, what: &str) -> Result<i64, InstantError> {
    let ms = DateTime::parse_from_rfc3339(text.trim())
        .map(|t| t.timestamp_millis())
        .map_err(|e| InstantError::NotRfc3339 {
            what: what.to_string(),
            text: text.to_string(),
            reason: e.to_string(),
        })?;
    if !(0..=MAX_EPOCH_MS).contains(&ms) {
        return Err(InstantError::OutOfRange {
            what: what.to_string(),
            text: text.to_string(),
        });
    }
    Ok(ms)
}

/// RFC 3339 in UTC, whole seconds unless the instant has milliseconds.
pub fn rfc3339(ms: i64) -> String {
    match DateTime::<Utc>::from_timestamp_millis(ms) {
        Some(t) if ms % 1000 == 0 => t.to_rfc3339_opts(SecondsFormat::Secs, true),
        Some(t) => t.to_rfc3339_opts(SecondsFormat::Millis, true),
        None => format!("@{ms}ms"),
    }
}

/// [`system_ms`] in whole seconds, as the table's records stamp it
/// (`2026-12-02T10:00:00Z`).
pub fn system_stamp() -> String {
    rfc3339(system_ms().div_euclid(1000) * 1000)
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
        let e = parse_instant("1969-12-31T23:59:59Z", "ZAEL_NOW")
            .unwrap_err()
            .to_string();
        assert!(
            e.ends_with("is out of range: instants from 1970-01-01 to 9999-12-30T23:59:59.999Z are accepted"),
            "{e}"
        );
    }
}
