//! Instants as traces and `gen-trace` spell them (RFC 3339 or epoch
//! milliseconds, 0001..9999), and positive durations in the one duration
//! syntax ([`zae_limiter_engine::duration`]). Everything inside is integer
//! epoch milliseconds.

use chrono::DateTime;
use zae_limiter_engine::civil::in_range_ms;
use zae_limiter_engine::duration::{parse_duration_ms, DurationError};

/// Why an instant or a duration could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TimeError {
    #[error("{0:?} is not an instant: write RFC 3339 (2026-12-01T09:00:00Z, 2026-12-01T09:00:00.250-05:00) or epoch milliseconds (1796115600000)")]
    Instant(String),
    #[error("{0:?} is out of range: instants from 0001-01-02 to 9999-12-30 are accepted")]
    OutOfRange(String),
    #[error("{0}")]
    Duration(#[from] DurationError),
    #[error("'{0}' is no time at all; write a duration above zero, e.g. 90s or 15m")]
    Zero(String),
}

/// An RFC 3339 instant or an integer of epoch milliseconds, within the
/// supported range ([`in_range_ms`]), so no later arithmetic can overflow.
pub fn parse_instant(text: &str) -> Result<i64, TimeError> {
    let t = text.trim();
    let digits = t.strip_prefix('-').unwrap_or(t);
    let ms = if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
        t.parse()
            .map_err(|_| TimeError::OutOfRange(text.to_string()))?
    } else {
        DateTime::parse_from_rfc3339(t)
            .map(|d| d.timestamp_millis())
            .map_err(|_| TimeError::Instant(text.to_string()))?
    };
    checked_instant(ms).ok_or_else(|| TimeError::OutOfRange(text.to_string()))
}

/// `ms` when it lies in the supported range.
pub fn checked_instant(ms: i64) -> Option<i64> {
    in_range_ms(ms).then_some(ms)
}

/// A positive duration in the one syntax ([`parse_duration_ms`]) → ms.
pub fn parse_duration(text: &str) -> Result<i64, TimeError> {
    match parse_duration_ms(text)? {
        0 => Err(TimeError::Zero(text.to_string())),
        ms => Ok(ms),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instants_in_both_spellings() {
        assert_eq!(parse_instant("1796115600000"), Ok(1_796_115_600_000));
        assert_eq!(parse_instant("1970-01-01T00:00:01.5Z"), Ok(1500));
        assert_eq!(parse_instant("1970-01-01T00:00:00-01:00"), Ok(3_600_000));
        assert!(parse_instant("yesterday").is_err());
        assert!(parse_instant("").is_err());
        assert!(parse_instant("99999999999999999999999").is_err());
    }

    proptest::proptest! {
        /// Whatever the epoch-ms text, an accepted instant is in range, so
        /// spans and ticks computed from two of them cannot overflow.
        #[test]
        fn accepted_instants_are_in_range(ms in proptest::prelude::any::<i64>()) {
            match parse_instant(&ms.to_string()) {
                Ok(v) => {
                    proptest::prop_assert_eq!(v, ms);
                    proptest::prop_assert!(in_range_ms(v));
                }
                Err(e) => proptest::prop_assert_eq!(e, TimeError::OutOfRange(ms.to_string())),
            }
        }
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("1500ms"), Ok(1500));
        assert_eq!(parse_duration("90"), Ok(90_000));
        assert_eq!(parse_duration("15min"), Ok(900_000));
        assert_eq!(parse_duration("7d"), Ok(604_800_000));
        for bad in ["", "0s", "1.5h", "h", "3w", "-1s", "99999999999999999d"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }
}
