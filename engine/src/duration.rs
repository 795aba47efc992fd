//! The one duration syntax of the tool: what flags (`--lease 5m`, `--ttl 90s`,
//! `--wait-up-to 10s`, `limits gen-trace --duration 7d`, `--hold 5s..2m`),
//! variables (`ZAEL_COOLDOWN_CEILING=31d`) and traces accept, and the one way a
//! span is written for people. A provider's own duration formats (Go's
//! `6m0s` in `x-ratelimit-reset-*`) are read where they are defined
//! ([`crate::cooldown`]), not here.
//!
//! Syntax: whole numbers, each followed by a unit (`ms`, `s`, `m` or `min`,
//! `h`, `d`), summed: `500ms`, `90s`, `5m`, `1h30m`, `2d 4h`; or a bare number
//! of seconds (`60`). What [`human_duration`] writes reads back.

/// One second in milliseconds.
pub const SECOND_MS: i64 = 1_000;
/// One minute in milliseconds.
pub const MINUTE_MS: i64 = 60 * SECOND_MS;
/// One hour in milliseconds.
pub const HOUR_MS: i64 = 60 * MINUTE_MS;
/// One day in milliseconds.
pub const DAY_MS: i64 = 24 * HOUR_MS;

/// Why a duration was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    #[error("'{0}' is not a duration; write e.g. 90s, 5m, 1h30m, 2d or 500ms")]
    Invalid(String),
    /// Well-formed, but more milliseconds than a 64-bit count holds.
    #[error("'{0}' is too long a duration (more than 292 million years)")]
    TooLong(String),
}

/// Parses `500ms`, `90s`, `5m` (or `5min`), `1h30m`, `2d 4h` or plain seconds
/// (`60`) into ms. Zero is a duration; callers that need more say so.
pub fn parse_duration_ms(text: &str) -> Result<i64, DurationError> {
    let err = || DurationError::Invalid(text.to_string());
    let too_long = || DurationError::TooLong(text.to_string());
    let t = text.trim();
    if t.is_empty() {
        return Err(err());
    }
    if t.bytes().all(|b| b.is_ascii_digit()) {
        let secs: i64 = t.parse().map_err(|_| too_long())?;
        return secs.checked_mul(SECOND_MS).ok_or_else(too_long);
    }
    let mut total: i64 = 0;
    let mut rest = t;
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(|b| b.is_ascii_digit()).count();
        if digits == 0 {
            return Err(err());
        }
        let number = &rest[..digits];
        rest = &rest[digits..];
        let unit_len = rest.bytes().take_while(|b| b.is_ascii_alphabetic()).count();
        let unit = match &rest[..unit_len] {
            "ms" => 1,
            "s" => SECOND_MS,
            "m" | "min" => MINUTE_MS,
            "h" => HOUR_MS,
            "d" => DAY_MS,
            _ => return Err(err()),
        };
        let n: i64 = number.parse().map_err(|_| too_long())?;
        // Parts may be separated by spaces, as [`human_duration`] writes them.
        rest = rest[unit_len..].trim_start();
        total = n
            .checked_mul(unit)
            .and_then(|v| total.checked_add(v))
            .ok_or_else(too_long)?;
    }
    Ok(total)
}

/// A span for people: below a second in milliseconds (`850ms`), else rounded
/// up to whole seconds and written in its two largest units (`2d 8h`,
/// `5m 3s`, `15h`); `0s` only when nothing is left.
pub fn human_duration(ms: i64) -> String {
    if ms <= 0 {
        return "0s".to_string();
    }
    if ms < SECOND_MS {
        return format!("{ms}ms");
    }
    let secs = ms / SECOND_MS + i64::from(ms % SECOND_MS != 0);
    let units = [
        (secs / 86_400, "d"),
        (secs % 86_400 / 3_600, "h"),
        (secs % 3_600 / 60, "m"),
        (secs % 60, "s"),
    ];
    let first = units.iter().position(|(n, _)| *n > 0).unwrap_or(3);
    units[first..]
        .iter()
        .take(2)
        .filter(|(n, _)| *n > 0)
        .map(|(n, u)| format!("{n}{u}"))
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn human_durations() {
        for (ms, shown) in [
            (202_830_000, "2d 8h"),
            (2 * DAY_MS + 5 * MINUTE_MS, "2d"),
            (HOUR_MS, "1h"),
            (90_000, "1m 30s"),
            (1_001, "2s"),
            (850, "850ms"),
            (1, "1ms"),
            (0, "0s"),
            (-5, "0s"),
        ] {
            assert_eq!(human_duration(ms), shown, "{ms}");
        }
    }

    #[test]
    fn durations_parse() {
        for (text, ms) in [
            ("60", 60_000),
            ("90s", 90_000),
            ("5m", 300_000),
            ("5min", 300_000),
            ("1h30m", 5_400_000),
            ("1h 30m", 5_400_000),
            ("2d", 2 * DAY_MS),
            ("500ms", 500),
            ("0s", 0),
        ] {
            assert_eq!(parse_duration_ms(text), Ok(ms), "{text}");
        }
        for bad in [
            "",
            "5x",
            "m",
            "1.5s",
            "-3s",
            "3w",
            "1 h",
            "99999999999999999999x",
        ] {
            assert_eq!(
                parse_duration_ms(bad),
                Err(DurationError::Invalid(bad.into())),
                "{bad}"
            );
        }
        // Well-formed, but too long: said so, not "not a duration".
        for long in [
            "99999999999999999999s",
            "99999999999999999d",
            "99999999999999999999",
        ] {
            assert_eq!(
                parse_duration_ms(long),
                Err(DurationError::TooLong(long.into())),
                "{long}"
            );
        }
    }

    proptest! {
        /// What is written for people reads back, at most one unit of its
        /// second place short (the rest is left out) and never above.
        #[test]
        fn written_spans_read_back(ms in 1i64..400 * DAY_MS) {
            let shown = human_duration(ms);
            let back = parse_duration_ms(&shown).unwrap();
            let ceil = if ms < SECOND_MS { ms } else { (ms + SECOND_MS - 1) / SECOND_MS * SECOND_MS };
            prop_assert!(back <= ceil, "{ms} -> {shown} -> {back}");
            let first_unit = [DAY_MS, HOUR_MS, MINUTE_MS, SECOND_MS]
                .into_iter()
                .find(|u| ceil >= *u)
                .unwrap_or(1);
            let second_unit = match first_unit {
                DAY_MS => HOUR_MS,
                HOUR_MS => MINUTE_MS,
                MINUTE_MS => SECOND_MS,
                _ => 1,
            };
            prop_assert!(ceil - back < second_unit, "{ms} -> {shown} -> {back}");
        }

        #[test]
        fn parsing_never_panics(s in "\\PC{0,40}") {
            let _ = parse_duration_ms(&s);
        }
    }
}
