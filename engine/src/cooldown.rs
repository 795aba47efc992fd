//! Provider cooldowns: turning what a provider said when it refused (HTTP
//! `Retry-After`, JSON `resets_in_seconds` / `resets_at`, a provider's reset
//! headers, each read by its [`Unit`]) into one absolute not-before deadline
//! that every worker sharing the quota consults.
//!
//! Pure: every function takes the instants it needs (`received_at`, `now`)
//! explicitly; nothing here reads a clock.
//!
//! # Units
//!
//! Every instant is epoch **milliseconds** ([`EpochMs`], `i64`) and every span
//! is milliseconds, integers throughout. Provider values are decimal *seconds*
//! (or dates) and are converted to whole milliseconds, rounding **up** so a
//! fractional reset is never called early. [`next_probe`] and [`may_probe`]
//! are plain arithmetic on one unit: the worked example, stated in
//! seconds-like units (received 1000, reset 1000+202825, margin 5 → 203830),
//! holds verbatim with those numbers, and holds scaled by 1000 when the same
//! quantities go through the millisecond parsers (received 1 000 000 ms,
//! `resets_in_seconds` "202825", margin 5 000 ms → 203 830 000 ms). Both are
//! tests below.
//!
//! # Rules
//!
//! * `resets_in_seconds` and a delta-seconds `Retry-After` are relative to the
//!   instant the response was **received**, never to "now": a worker that
//!   records a response late must not stretch the cooldown.
//! * The deadline is the latest of every constraint plus the margin, and never
//!   earlier than the deadline already recorded (a later response cannot
//!   shorten a cooldown).
//! * Without any usable hint the policy falls back to a bounded exponential
//!   backoff, never to "call again now".
//! * A reset farther away than the plausibility ceiling is kept exactly as
//!   given and flagged for an operator ([`Assessment::implausible`]); it is
//!   neither slept on silently nor truncated. A reset past the last instant
//!   we can represent ([`HintError::is_beyond_range`]: a number too large, or
//!   a well-formed date past 9999, with a five-digit or `+` year) lies beyond
//!   every ceiling: flagged the same way, with that last instant as its
//!   deadline. Text that is no date at all is unusable, whatever its year.

use chrono::{DateTime, NaiveDate, NaiveTime, Weekday};

use crate::civil::MAX_EPOCH_MS;
use crate::decimal::{split_sign, Decimal};

/// Milliseconds since the Unix epoch (UTC).
pub type EpochMs = i64;

// The one duration syntax and its units, re-exported where the cooldown
// arithmetic has always offered them.
pub use crate::duration::{
    human_duration, parse_duration_ms, DurationError, DAY_MS, HOUR_MS, MINUTE_MS, SECOND_MS,
};

/// Largest safety margin accepted: a day is already far beyond any clock skew.
pub const MAX_MARGIN_MS: i64 = DAY_MS;
/// Largest plausibility ceiling accepted (ten years).
pub const MAX_CEILING_MS: i64 = 3_650 * DAY_MS;
/// Largest per-worker jitter bound accepted.
pub const MAX_JITTER_MS: i64 = HOUR_MS;
/// Longest recovery-probe lease accepted (a lease covers one call).
pub const MAX_LEASE_MS: i64 = DAY_MS;
/// The last instant a deadline may name; a later one is out of range (see
/// [`crate::civil::MAX_EPOCH_MS`]). A stored deadline past it is corruption.
pub const MAX_DEADLINE_MS: EpochMs = MAX_EPOCH_MS;

/// How a provider writes when its quota comes back, and so how a value is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Unit {
    /// HTTP `Retry-After`: delta-seconds after receipt, or an HTTP-date.
    DeltaSecondsOrHttpDate,
    /// Decimal seconds after receipt (JSON `resets_in_seconds`).
    SecondsAfter,
    /// Decimal milliseconds after receipt (`retry-after-ms`).
    MillisecondsAfter,
    /// A Go `time.Duration` after receipt: `1s`, `6m0s`, `2h10m3.5s`, `20ms`
    /// (OpenAI's `x-ratelimit-reset-*`). A provider's format, not our flag
    /// syntax ([`parse_duration_ms`]): fractions, `ns`/`us`/`µs`, no `d`.
    GoDurationAfter,
    /// Epoch seconds or epoch milliseconds, told apart by magnitude
    /// ([`EPOCH_MS_FROM`]), or an RFC 3339 time (JSON `resets_at`).
    EpochOrRfc3339,
    /// An RFC 3339 time only (Anthropic's `anthropic-ratelimit-*-reset`).
    Rfc3339,
}

impl Unit {
    /// What a value of this unit looks like, for error messages.
    pub fn expected(self) -> &'static str {
        match self {
            Unit::DeltaSecondsOrHttpDate => {
                "delta-seconds or an HTTP-date (e.g. 'Sun, 06 Nov 1994 08:49:37 GMT')"
            }
            Unit::SecondsAfter => "a number of seconds",
            Unit::MillisecondsAfter => "a number of milliseconds",
            Unit::GoDurationAfter => "a duration such as 1s, 6m0s, 2h10m3.5s or 20ms",
            Unit::EpochOrRfc3339 => "epoch seconds or milliseconds, or an RFC 3339 time",
            Unit::Rfc3339 => "an RFC 3339 time such as 2026-12-02T10:00:00Z",
        }
    }
}

/// Where a value came from: its name as the provider spells it (used in
/// errors and recorded reasons) and its [`Unit`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct HintField {
    name: &'static str,
    unit: Unit,
}

impl HintField {
    /// HTTP `Retry-After` (also `--retry-after`).
    pub const RETRY_AFTER: HintField = HintField::new("Retry-After", Unit::DeltaSecondsOrHttpDate);
    /// JSON `resets_in_seconds` (also `--resets-in-seconds`).
    pub const RESETS_IN_SECONDS: HintField =
        HintField::new("resets_in_seconds", Unit::SecondsAfter);
    /// JSON `resets_at` (also `--resets-at`).
    pub const RESETS_AT: HintField = HintField::new("resets_at", Unit::EpochOrRfc3339);

    /// A field named `name` whose values are written in `unit`.
    pub const fn new(name: &'static str, unit: Unit) -> Self {
        HintField { name, unit }
    }

    /// The field's name as the provider spells it.
    pub fn name(self) -> &'static str {
        self.name
    }

    /// How its values are written.
    pub fn unit(self) -> Unit {
        self.unit
    }
}

impl std::fmt::Display for HintField {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

/// Why a provider value was rejected. Nothing is recorded from a rejected value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HintError {
    #[error("{field}: the value is empty; expected {}", field.unit.expected())]
    Empty { field: HintField },
    #[error("{field}: '{value}' is not a finite number")]
    NonFinite { field: HintField, value: String },
    #[error("{field}: '{value}' is negative; a reset cannot lie before the response")]
    Negative { field: HintField, value: String },
    #[error("{field}: '{value}' cannot be read; expected {}", field.unit.expected())]
    Unparseable { field: HintField, value: String },
    #[error("{field}: '{value}' is out of range")]
    OutOfRange { field: HintField, value: String },
}

/// One thing a provider said about when its quota comes back, as received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hint {
    field: HintField,
    value: String,
}

impl Hint {
    /// `value` as given under `field`.
    pub fn new(field: HintField, value: impl Into<String>) -> Self {
        Hint {
            field,
            value: value.into(),
        }
    }

    /// An HTTP `Retry-After` value.
    pub fn retry_after(value: impl Into<String>) -> Self {
        Hint::new(HintField::RETRY_AFTER, value)
    }

    /// A JSON `resets_in_seconds` value, relative to when the response was received.
    pub fn resets_in_seconds(value: impl Into<String>) -> Self {
        Hint::new(HintField::RESETS_IN_SECONDS, value)
    }

    /// A JSON `resets_at` value: epoch seconds or milliseconds, or RFC 3339.
    pub fn resets_at(value: impl Into<String>) -> Self {
        Hint::new(HintField::RESETS_AT, value)
    }

    /// The field this hint came from.
    pub fn field(&self) -> HintField {
        self.field
    }

    /// The value as received.
    pub fn value(&self) -> &str {
        &self.value
    }

    /// The absolute deadline this hint names, for a response received at
    /// `received_at`; one past [`MAX_DEADLINE_MS`] is out of range.
    pub fn deadline(&self, received_at: EpochMs) -> Result<EpochMs, HintError> {
        let (field, value) = (self.field, self.value.as_str());
        let text = value.trim();
        if text.is_empty() {
            return Err(HintError::Empty { field });
        }
        let bad = |e: NumError| e.into_hint(field, value);
        let d = match field.unit {
            Unit::DeltaSecondsOrHttpDate if looks_numeric(text) => {
                add(received_at, seconds_to_ms(text).map_err(bad)?, field, value)
            }
            Unit::DeltaSecondsOrHttpDate => http_date(text, received_at).read(field, value),
            Unit::SecondsAfter => add(received_at, seconds_to_ms(text).map_err(bad)?, field, value),
            Unit::MillisecondsAfter => add(
                received_at,
                decimal_ceil(text, 0).map_err(bad)?,
                field,
                value,
            ),
            Unit::GoDurationAfter => add(
                received_at,
                go_duration_ms(text).map_err(bad)?,
                field,
                value,
            ),
            Unit::EpochOrRfc3339 => match rfc3339(text) {
                DateRead::Invalid if looks_numeric(text) => epoch_to_ms(text).map_err(bad),
                read => read.read(field, value),
            },
            Unit::Rfc3339 => rfc3339(text).read(field, value),
        }?;
        if d > MAX_DEADLINE_MS {
            return Err(HintError::OutOfRange {
                field,
                value: value.to_string(),
            });
        }
        Ok(d)
    }
}

impl HintError {
    /// Whether the value names a reset past the last instant we can represent
    /// ([`MAX_DEADLINE_MS`]): a well-formed, absurdly far reset, which
    /// [`assess`] escalates like any reset beyond the ceiling, never garbage
    /// that falls back to the backoff.
    pub fn is_beyond_range(&self) -> bool {
        matches!(self, HintError::OutOfRange { .. })
    }
}

fn unparseable(field: HintField, value: &str) -> HintError {
    HintError::Unparseable {
        field,
        value: value.to_string(),
    }
}

/// Splits `hints` into those that name a deadline (or one past the
/// representable range, which [`assess`] escalates) and the errors of those
/// that do not, so a refusal is recorded from what is usable (never dropped
/// because one value was garbage).
pub fn usable_hints(hints: &[Hint], received_at: EpochMs) -> (Vec<Hint>, Vec<HintError>) {
    let mut usable = Vec::new();
    let mut unusable = Vec::new();
    for h in hints {
        match h.deadline(received_at) {
            Ok(_) => usable.push(h.clone()),
            Err(e) if e.is_beyond_range() => usable.push(h.clone()),
            Err(e) => unusable.push(e),
        }
    }
    (usable, unusable)
}

/// `Retry-After`: delta-seconds from `received_at`, or an HTTP-date in any of
/// the three forms HTTP allows (IMF-fixdate, RFC 850, asctime).
pub fn retry_after_deadline(value: &str, received_at: EpochMs) -> Result<EpochMs, HintError> {
    Hint::retry_after(value).deadline(received_at)
}

/// `resets_in_seconds`: seconds after the response was received (never after "now").
pub fn resets_in_seconds_deadline(value: &str, received_at: EpochMs) -> Result<EpochMs, HintError> {
    Hint::resets_in_seconds(value).deadline(received_at)
}

/// `resets_at`: epoch seconds or milliseconds (fractions allowed; see
/// [`EPOCH_MS_FROM`]) or an RFC 3339 time.
pub fn resets_at_deadline(value: &str) -> Result<EpochMs, HintError> {
    // An absolute instant: the receipt does not enter.
    Hint::resets_at(value).deadline(0)
}

/// An epoch number at or above this (10^12) is milliseconds, below it seconds.
///
/// Every epoch-seconds instant up to 9999-12-30 (the last we accept, about
/// 2.5 × 10^11) lies below it, and every epoch-milliseconds instant since
/// 2001-09-09T01:46:40Z lies at or above it, so no plausible reset is misread.
/// A number between 2.5 × 10^11 and 10^12 is seconds past 9999: out of range.
pub const EPOCH_MS_FROM: i64 = 1_000_000_000_000;

/// An epoch number (seconds or milliseconds by [`EPOCH_MS_FROM`]) → ms, rounded up.
fn epoch_to_ms(text: &str) -> Result<EpochMs, NumError> {
    let as_seconds = seconds_to_ms(text);
    match as_seconds {
        // value × 1000 ≥ 10^15 ⇔ value ≥ 10^12; an overflow is a huge value too.
        Ok(ms) if ms < EPOCH_MS_FROM * SECOND_MS => Ok(ms),
        Ok(_) | Err(NumError::TooLarge) => decimal_ceil(text, 0),
        Err(e) => Err(e),
    }
}

fn add(base: EpochMs, ms: i64, field: HintField, value: &str) -> Result<EpochMs, HintError> {
    base.checked_add(ms).ok_or_else(|| HintError::OutOfRange {
        field,
        value: value.to_string(),
    })
}

/// Whether `text` is meant as a number (so a number's error is reported, not "not a date").
fn looks_numeric(text: &str) -> bool {
    let body = text.trim_start_matches(['-', '+']);
    let lower = body.to_ascii_lowercase();
    let number_like = body
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_digit() || c == '.')
        && body
            .chars()
            .all(|c| c.is_ascii_digit() || matches!(c, '.' | 'e' | 'E' | '+' | '-'));
    number_like || matches!(lower.as_str(), "inf" | "infinity" | "nan")
}

/// Why a number of seconds was refused (before the field is known).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum NumError {
    NonFinite,
    Negative,
    Syntax,
    TooLarge,
}

impl NumError {
    fn into_hint(self, field: HintField, value: &str) -> HintError {
        let value = value.to_string();
        match self {
            NumError::NonFinite => HintError::NonFinite { field, value },
            NumError::Negative => HintError::Negative { field, value },
            NumError::Syntax => HintError::Unparseable { field, value },
            NumError::TooLarge => HintError::OutOfRange { field, value },
        }
    }
}

/// Decimal seconds (JSON number syntax: fraction and exponent allowed) → whole
/// milliseconds, rounded up. Exact: no floating point is involved.
fn seconds_to_ms(text: &str) -> Result<i64, NumError> {
    decimal_ceil(text, 3)
}

/// A decimal number (JSON number syntax) × 10^`shift`, rounded up to an
/// integer. Exact: no floating point is involved.
fn decimal_ceil(text: &str, shift: i64) -> Result<i64, NumError> {
    if matches!(
        split_sign(text).1.to_ascii_lowercase().as_str(),
        "inf" | "infinity" | "nan"
    ) {
        return Err(NumError::NonFinite);
    }
    let Decimal {
        negative,
        int_part,
        frac_part,
        exponent,
    } = Decimal::split(text).ok_or(NumError::Syntax)?;
    let exp: i64 = match exponent {
        None => 0,
        Some((neg, digits)) => {
            // Saturate: anything beyond ±10^6 is far outside every range we
            // accept. All zeros ("5e0", "5e-00") is an exponent of 0.
            let significant = digits.trim_start_matches('0');
            let magnitude: i64 = if significant.is_empty() {
                0
            } else {
                significant.parse().unwrap_or(1_000_000)
            };
            let magnitude = magnitude.min(1_000_000);
            if neg {
                -magnitude
            } else {
                magnitude
            }
        }
    };
    let digits = format!("{int_part}{frac_part}");
    let significant = digits.trim_start_matches('0');
    if significant.is_empty() {
        return Ok(0);
    }
    if negative {
        return Err(NumError::Negative);
    }
    // value × 10^shift = significant × 10^(exp − frac_len + shift) = significant × 10^k.
    let k = exp - frac_part.len() as i64 + shift;
    if k >= 0 {
        if significant.len() as i64 + k > 18 {
            return Err(NumError::TooLarge);
        }
        let base: i64 = significant.parse().map_err(|_| NumError::TooLarge)?;
        return base
            .checked_mul(10_i64.pow(k as u32))
            .ok_or(NumError::TooLarge);
    }
    // A fraction remains: keep the integer part and round up.
    let int_len = significant.len() as i64 + k;
    if int_len <= 0 {
        return Ok(1);
    }
    let (whole, rest) = significant.split_at(int_len as usize);
    if whole.len() > 18 {
        return Err(NumError::TooLarge);
    }
    let whole: i64 = whole.parse().map_err(|_| NumError::TooLarge)?;
    let round_up = rest.bytes().any(|b| b != b'0');
    Ok(whole + i64::from(round_up))
}

/// A Go `time.Duration` string (`1s`, `6m0s`, `2h10m3.5s`, `20ms`, `1.5µs`,
/// `0`) → whole milliseconds, rounded up. Exact: each part is summed in
/// nanoseconds as an integer.
fn go_duration_ms(text: &str) -> Result<i64, NumError> {
    const NS_PER_MS: i128 = 1_000_000;
    let (negative, mut rest) = split_sign(text);
    if rest == "0" {
        return Ok(0);
    }
    if rest.is_empty() {
        return Err(NumError::Syntax);
    }
    let mut total_ns: i128 = 0;
    while !rest.is_empty() {
        let int_len = rest.bytes().take_while(u8::is_ascii_digit).count();
        let (int_part, after) = rest.split_at(int_len);
        let (frac_part, after) = match after.strip_prefix('.') {
            Some(f) => f.split_at(f.bytes().take_while(u8::is_ascii_digit).count()),
            None => ("", after),
        };
        if int_part.is_empty() && frac_part.is_empty() {
            return Err(NumError::Syntax);
        }
        let unit_len = after
            .char_indices()
            .find(|(_, c)| c.is_ascii_digit() || *c == '.')
            .map_or(after.len(), |(i, _)| i);
        let unit_ns: i128 = match &after[..unit_len] {
            "ns" => 1,
            "us" | "\u{b5}s" | "\u{3bc}s" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            _ => return Err(NumError::Syntax),
        };
        rest = &after[unit_len..];
        // 10^20 h is far past any range we accept; more digits cannot fit.
        let int_digits = int_part.trim_start_matches('0');
        if int_digits.len() > 20 {
            return Err(NumError::TooLarge);
        }
        let int: i128 = if int_digits.is_empty() {
            0
        } else {
            int_digits.parse().map_err(|_| NumError::TooLarge)?
        };
        // Eighteen fraction digits are finer than a nanosecond of an hour;
        // any digit beyond them only rounds up.
        let (kept, dropped) = frac_part.split_at(frac_part.len().min(18));
        let frac: i128 = if kept.is_empty() {
            0
        } else {
            kept.parse().map_err(|_| NumError::Syntax)?
        };
        let scale = 10_i128.pow(kept.len() as u32);
        let frac_ns = frac * unit_ns;
        let round = i128::from(frac_ns % scale != 0 || dropped.bytes().any(|b| b != b'0'));
        total_ns = int
            .checked_mul(unit_ns)
            .and_then(|n| n.checked_add(frac_ns / scale + round))
            .and_then(|n| total_ns.checked_add(n))
            .ok_or(NumError::TooLarge)?;
    }
    if negative && total_ns > 0 {
        return Err(NumError::Negative);
    }
    let ms = (total_ns + NS_PER_MS - 1) / NS_PER_MS;
    i64::try_from(ms).map_err(|_| NumError::TooLarge)
}

/// What a date said: an instant, one past every year we represent, or nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DateRead {
    At(EpochMs),
    /// Well-formed, but its year is past 9999 (a 5+ digit year, or an
    /// expanded `+YYYYY` one): out of range, escalated, never garbage.
    BeyondRange,
    Invalid,
}

impl DateRead {
    fn read(self, field: HintField, value: &str) -> Result<EpochMs, HintError> {
        match self {
            DateRead::At(ms) => Ok(ms),
            DateRead::BeyondRange => Err(HintError::OutOfRange {
                field,
                value: value.to_string(),
            }),
            DateRead::Invalid => Err(unparseable(field, value)),
        }
    }
}

/// A year written with more digits than four: `Some(true)` when its value is
/// past 9999, `Some(false)` when it is not (`02026`), `None` when it is not
/// all digits.
fn long_year(digits: &str) -> Option<bool> {
    all_digits(digits)?;
    let significant = digits.trim_start_matches('0');
    Some(significant.len() > 4)
}

/// An RFC 3339 time; also ISO 8601's expanded years (`+10000-01-01T…`,
/// `+2026-…`) and five-digit years (`10000-01-01T…`), which chrono refuses:
/// one past 9999 is [`DateRead::BeyondRange`], the rest read as written.
fn rfc3339(text: &str) -> DateRead {
    if let Ok(t) = DateTime::parse_from_rfc3339(text) {
        return DateRead::At(t.timestamp_millis());
    }
    let (plus, rest) = match text.strip_prefix('+') {
        Some(r) => (true, r),
        None => (false, text),
    };
    let Some(dash) = rest.find('-') else {
        return DateRead::Invalid;
    };
    let (year, tail) = rest.split_at(dash);
    if year.len() < 4 || (!plus && year.len() == 4) {
        return DateRead::Invalid;
    }
    let Some(beyond) = long_year(year) else {
        return DateRead::Invalid;
    };
    if beyond {
        // The rest must be well-formed: checked in a leap year, so that
        // 29 February of a far leap year is not refused.
        return match DateTime::parse_from_rfc3339(&format!("2000{tail}")) {
            Ok(_) => DateRead::BeyondRange,
            Err(_) => DateRead::Invalid,
        };
    }
    let year = year.trim_start_matches('0');
    match DateTime::parse_from_rfc3339(&format!("{year:0>4}{tail}")) {
        Ok(t) => DateRead::At(t.timestamp_millis()),
        Err(_) => DateRead::Invalid,
    }
}

/// An HTTP-date in any of the three forms HTTP (RFC 9110 §5.6.7) allows:
///
/// * IMF-fixdate: `Sun, 06 Nov 1994 08:49:37 GMT`
/// * RFC 850:     `Sunday, 06-Nov-94 08:49:37 GMT`
/// * asctime:     `Sun Nov  6 08:49:37 1994`
///
/// An RFC 850 two-digit year is placed within 50 years of `reference` (the
/// rule HTTP gives recipients). The weekday must agree with the date.
pub fn parse_http_date(text: &str, reference: EpochMs) -> Option<EpochMs> {
    match http_date(text, reference) {
        DateRead::At(ms) => Some(ms),
        DateRead::BeyondRange | DateRead::Invalid => None,
    }
}

/// [`parse_http_date`], telling a well-formed date past 9999 (a five-digit
/// year in an IMF-fixdate or asctime date) from garbage. Such a year's
/// weekday is not checked: the date is escalated to an operator anyway, and a
/// cooldown must not fail open over a weekday.
fn http_date(text: &str, reference: EpochMs) -> DateRead {
    let tokens: Vec<&str> = text.split_whitespace().collect();
    let Some(date) = HttpDate::split(&tokens) else {
        return DateRead::Invalid;
    };
    if date.year.len() > 4 {
        return match far_date(date.year, date.month, date.day, date.time) {
            Some(true) => DateRead::BeyondRange,
            Some(false) | None => DateRead::Invalid,
        };
    }
    match date.at(reference) {
        Some(ms) => DateRead::At(ms),
        None => DateRead::Invalid,
    }
}

/// An HTTP-date's fields, as its form writes them (split by
/// [`HttpDate::split`], read by [`HttpDate::at`]).
struct HttpDate<'a> {
    weekday: Weekday,
    day: &'a str,
    month: &'a str,
    /// Four digits, more for a year past 9999, or two in RFC 850.
    year: &'a str,
    /// RFC 850's two-digit year, placed by [`two_digit_year`].
    rfc850: bool,
    time: &'a str,
}

impl<'a> HttpDate<'a> {
    /// The fields of a date in one of the three forms, with its weekday's
    /// name read; `None` for any other shape.
    fn split(tokens: &[&'a str]) -> Option<HttpDate<'a>> {
        match *tokens {
            // IMF-fixdate
            [wd, day, month, year, time, "GMT"] if day.len() == 2 => Some(HttpDate {
                weekday: short_weekday(wd.strip_suffix(',')?)?,
                day,
                month,
                year,
                rfc850: false,
                time,
            }),
            // RFC 850
            [wd, dmy, time, "GMT"] => {
                let mut parts = dmy.split('-');
                let (day, month, year) = (parts.next()?, parts.next()?, parts.next()?);
                if parts.next().is_some() || day.len() != 2 || year.len() != 2 {
                    return None;
                }
                Some(HttpDate {
                    weekday: long_weekday(wd.strip_suffix(',')?)?,
                    day,
                    month,
                    year,
                    rfc850: true,
                    time,
                })
            }
            // asctime
            [wd, month, day, time, year] if !day.is_empty() && day.len() <= 2 => Some(HttpDate {
                weekday: short_weekday(wd)?,
                day,
                month,
                year,
                rfc850: false,
                time,
            }),
            _ => None,
        }
    }

    /// The instant of a date whose year has four digits (RFC 850's two),
    /// when the date exists and its weekday agrees.
    fn at(&self, reference: EpochMs) -> Option<EpochMs> {
        let digits: i32 = all_digits(self.year)?.parse().ok()?;
        let year = match (self.rfc850, self.year.len()) {
            (true, 2) => two_digit_year(digits, reference),
            (false, 4) => digits,
            _ => return None,
        };
        let day = all_digits(self.day)?.parse().ok()?;
        let date = ymd(year, month_number(self.month)?, day)?;
        use chrono::Datelike;
        if date.weekday() != self.weekday {
            return None;
        }
        let (time, leap) = hms(self.time)?;
        let at = date.and_time(time).and_utc().timestamp_millis();
        Some(at + if leap { SECOND_MS } else { 0 })
    }
}

/// For a date whose year has more than four digits: `Some(true)` when it is
/// well-formed and past 9999, `Some(false)` when its year is not past 9999
/// (read by the four-digit rules, so refused), `None` when malformed. Day
/// and month are checked in a leap year.
fn far_date(year: &str, month: &str, day: &str, time: &str) -> Option<bool> {
    ymd(2000, month_number(month)?, all_digits(day)?.parse().ok()?)?;
    hms(time)?;
    long_year(year)
}

fn all_digits(s: &str) -> Option<&str> {
    (!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())).then_some(s)
}

fn ymd(year: i32, month: u32, day: u32) -> Option<NaiveDate> {
    NaiveDate::from_ymd_opt(year, month, day)
}

/// `HH:MM:SS`; a leap second (`:60`) is read as the following instant.
fn hms(text: &str) -> Option<(NaiveTime, bool)> {
    let mut parts = text.split(':');
    let (h, m, s) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() || [h, m, s].iter().any(|p| p.len() != 2) {
        return None;
    }
    let (h, m, s): (u32, u32, u32) = (
        all_digits(h)?.parse().ok()?,
        all_digits(m)?.parse().ok()?,
        all_digits(s)?.parse().ok()?,
    );
    if s == 60 {
        return Some((NaiveTime::from_hms_opt(h, m, 59)?, true));
    }
    Some((NaiveTime::from_hms_opt(h, m, s)?, false))
}

fn two_digit_year(yy: i32, reference: EpochMs) -> i32 {
    use chrono::Datelike;
    let ref_year = DateTime::from_timestamp_millis(reference)
        .map(|t| t.year())
        .unwrap_or(1970);
    let mut year = ref_year - ref_year.rem_euclid(100) + yy;
    if year > ref_year + 50 {
        year -= 100;
    } else if year <= ref_year - 50 {
        year += 100;
    }
    year
}

fn month_number(name: &str) -> Option<u32> {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    MONTHS.iter().position(|m| *m == name).map(|i| i as u32 + 1)
}

fn short_weekday(name: &str) -> Option<Weekday> {
    Some(match name {
        "Mon" => Weekday::Mon,
        "Tue" => Weekday::Tue,
        "Wed" => Weekday::Wed,
        "Thu" => Weekday::Thu,
        "Fri" => Weekday::Fri,
        "Sat" => Weekday::Sat,
        "Sun" => Weekday::Sun,
        _ => return None,
    })
}

fn long_weekday(name: &str) -> Option<Weekday> {
    Some(match name {
        "Monday" => Weekday::Mon,
        "Tuesday" => Weekday::Tue,
        "Wednesday" => Weekday::Wed,
        "Thursday" => Weekday::Thu,
        "Friday" => Weekday::Fri,
        "Saturday" => Weekday::Sat,
        "Sunday" => Weekday::Sun,
        _ => return None,
    })
}

/// The not-before instant: the latest of `received_at` and every deadline, plus
/// `margin`, and never earlier than `existing` (0 when nothing is recorded).
/// Unit-agnostic: all arguments must be in the same unit (epoch ms in this crate).
pub fn next_probe(
    existing: EpochMs,
    received_at: EpochMs,
    deadlines: &[EpochMs],
    margin: i64,
) -> EpochMs {
    let latest = deadlines.iter().copied().fold(received_at, i64::max);
    existing.max(latest.saturating_add(margin.max(0)))
}

/// Whether a call may be made at `now`: exactly when `now >= not_before`.
pub fn may_probe(now: EpochMs, not_before: EpochMs) -> bool {
    now >= not_before
}

/// Bounded exponential backoff for a refusal that named no reset:
/// `base × 2^attempt`, capped at `max`, and never zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// First delay (attempt 0), in ms.
    pub base_ms: i64,
    /// Upper bound of any delay, in ms.
    pub max_ms: i64,
}

impl Default for Backoff {
    /// One minute, doubling, at most six hours.
    fn default() -> Self {
        Backoff {
            base_ms: MINUTE_MS,
            max_ms: 6 * HOUR_MS,
        }
    }
}

impl Backoff {
    /// The delay for the `attempt`-th consecutive refusal without a usable hint (0-based).
    pub fn delay_ms(&self, attempt: u32) -> i64 {
        let base = self.base_ms.max(1);
        let cap = self.max_ms.max(base);
        let factor = 1_i64.checked_shl(attempt.min(62)).unwrap_or(i64::MAX);
        base.saturating_mul(factor).min(cap)
    }
}

/// The knobs of the cooldown policy. All spans in ms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    /// Added after the latest constraint (clock skew, provider rounding).
    pub margin_ms: i64,
    /// A reset farther than this after the response is escalated to an operator.
    pub ceiling_ms: i64,
    /// Used when the provider said nothing usable.
    pub backoff: Backoff,
    /// Upper bound of the per-worker jitter after a deadline.
    pub max_jitter_ms: i64,
}

/// The default plausibility ceiling: 31 days.
pub const DEFAULT_CEILING_MS: i64 = 31 * DAY_MS;
/// The default margin: 5 seconds.
pub const DEFAULT_MARGIN_MS: i64 = 5 * SECOND_MS;
/// The default jitter bound: 30 seconds.
pub const DEFAULT_MAX_JITTER_MS: i64 = 30 * SECOND_MS;

impl Default for Policy {
    fn default() -> Self {
        Policy {
            margin_ms: DEFAULT_MARGIN_MS,
            ceiling_ms: DEFAULT_CEILING_MS,
            backoff: Backoff::default(),
            max_jitter_ms: DEFAULT_MAX_JITTER_MS,
        }
    }
}

/// What the new deadline rests on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Basis {
    /// At least one provider hint.
    Provider,
    /// No usable hint: the backoff policy's `attempt`-th step.
    Backoff { attempt: u32 },
}

/// A reset beyond the plausibility ceiling: kept as given, for an operator to judge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Implausible {
    /// The provider's deadline, untruncated; [`MAX_DEADLINE_MS`] when it
    /// lies past it (`beyond_range`).
    pub deadline: EpochMs,
    /// How far after the response it lies.
    pub after_received_ms: i64,
    /// The ceiling it exceeded.
    pub ceiling_ms: i64,
    /// The reset lies past the last instant we can represent.
    pub beyond_range: bool,
}

/// The outcome of one refusal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Assessment {
    /// The new not-before instant (never earlier than the existing one).
    pub not_before: EpochMs,
    pub basis: Basis,
    /// Set when a reset exceeds the ceiling: the scope needs an operator.
    pub implausible: Option<Implausible>,
}

/// Folds one refusal into the recorded deadline.
///
/// `existing` is the recorded not-before (0 when none); `backoff_attempt` the
/// number of consecutive refusals that named no reset so far. Any invalid hint
/// rejects the whole refusal (callers keep only [`usable_hints`]); one past
/// the representable range is read as [`MAX_DEADLINE_MS`] and flagged. The result
/// never lies past [`MAX_DEADLINE_MS`]: a margin that would carry it further
/// stops there (such a deadline is implausible, for an operator anyway).
pub fn assess(
    existing: EpochMs,
    received_at: EpochMs,
    hints: &[Hint],
    backoff_attempt: u32,
    policy: &Policy,
) -> Result<Assessment, HintError> {
    let mut beyond_range = false;
    let deadlines = hints
        .iter()
        .map(|h| match h.deadline(received_at) {
            Err(e) if e.is_beyond_range() => {
                beyond_range = true;
                Ok(MAX_DEADLINE_MS)
            }
            read => read,
        })
        .collect::<Result<Vec<_>, _>>()?;
    if deadlines.is_empty() {
        let delay = policy.backoff.delay_ms(backoff_attempt);
        let not_before = next_probe(
            existing,
            received_at,
            &[received_at.saturating_add(delay)],
            policy.margin_ms,
        )
        .min(MAX_DEADLINE_MS.max(existing));
        return Ok(Assessment {
            not_before,
            basis: Basis::Backoff {
                attempt: backoff_attempt,
            },
            implausible: None,
        });
    }
    let latest = deadlines.iter().copied().max().unwrap_or(received_at);
    let after_received_ms = latest.saturating_sub(received_at);
    let implausible =
        (beyond_range || after_received_ms > policy.ceiling_ms).then_some(Implausible {
            deadline: latest,
            after_received_ms,
            ceiling_ms: policy.ceiling_ms,
            beyond_range,
        });
    Ok(Assessment {
        not_before: next_probe(existing, received_at, &deadlines, policy.margin_ms)
            .min(MAX_DEADLINE_MS.max(existing)),
        basis: Basis::Provider,
        implausible,
    })
}

/// This worker's jitter after a deadline, in `0..=max_jitter_ms`: a stable
/// function of `worker` and `seed`, so workers spread out and tests can predict it.
pub fn jitter_ms(worker: &str, seed: u64, max_jitter_ms: i64) -> i64 {
    if max_jitter_ms <= 0 {
        return 0;
    }
    // FNV-1a over seed and worker id, then a SplitMix64 finaliser for spread.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in seed.to_le_bytes().iter().chain(worker.as_bytes()) {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h = (h ^ (h >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h = (h ^ (h >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^= h >> 31;
    (h % (max_jitter_ms as u64 + 1)) as i64
}

/// A stable seed from text (e.g. the scope), for [`jitter_ms`].
pub fn seed_of(text: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.as_bytes() {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// When this worker may resume: the deadline plus its jitter.
pub fn resume_at(not_before: EpochMs, worker: &str, seed: u64, max_jitter_ms: i64) -> EpochMs {
    not_before.saturating_add(jitter_ms(worker, seed, max_jitter_ms))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn utc(s: &str) -> EpochMs {
        DateTime::parse_from_rfc3339(s).unwrap().timestamp_millis()
    }

    /// The worked example, verbatim, in its own (seconds-like) units.
    #[test]
    fn worked_example_verbatim() {
        let first = next_probe(0, 1000, &[1000 + 202_825], 5);
        assert_eq!(first, 203_830);
        // A later, shorter Retry-After cannot shorten the cooldown.
        assert_eq!(next_probe(first, 2000, &[2000 + 3000], 5), 203_830);
        // Fresh scope, two constraints: the latest wins.
        assert_eq!(next_probe(0, 1000, &[5000, 9000], 5), 9005);
        assert!(!may_probe(1000 + 3600, first));
        assert!(!may_probe(203_829, first));
        assert!(may_probe(203_830, first));
    }

    /// The same example through the parsers, in epoch milliseconds.
    #[test]
    fn worked_example_through_the_parsers_in_ms() {
        let p = Policy {
            margin_ms: 5_000,
            ..Policy::default()
        };
        let a = assess(0, 1_000_000, &[Hint::resets_in_seconds("202825")], 0, &p).unwrap();
        assert_eq!(a.not_before, 203_830_000);
        assert_eq!(a.basis, Basis::Provider);
        assert_eq!(a.implausible, None);
        let b = assess(a.not_before, 2_000_000, &[Hint::retry_after("3000")], 0, &p).unwrap();
        assert_eq!(b.not_before, 203_830_000);
        // Retry-After 5000 s after receipt (6000 s); quota reset at epoch 9000 s.
        let c = assess(
            0,
            1_000_000,
            &[Hint::retry_after("5000"), Hint::resets_at("9000")],
            0,
            &p,
        )
        .unwrap();
        assert_eq!(c.not_before, 9_005_000);
        assert!(!may_probe(4_600_000, a.not_before));
        assert!(!may_probe(203_829_999, a.not_before));
        assert!(may_probe(203_830_000, a.not_before));
    }

    #[test]
    fn resets_in_seconds_counts_from_receipt_not_now() {
        let received = utc("2026-12-02T10:00:00Z");
        let d = resets_in_seconds_deadline("202825", received).unwrap();
        assert_eq!(d, received + 202_825_000);
        // The value does not depend on when it is evaluated: there is no `now` input.
        assert_eq!(d, utc("2026-12-04T18:20:25Z"));
    }

    #[test]
    fn seconds_parse_exactly_and_round_up() {
        for (text, want) in [
            ("0", Ok(0)),
            ("1", Ok(1000)),
            ("1.5", Ok(1500)),
            ("1.0001", Ok(1001)),
            (".25", Ok(250)),
            ("2.02825e5", Ok(202_825_000)),
            ("202825.0", Ok(202_825_000)),
            ("1e-9", Ok(1)),
            ("1E3", Ok(1_000_000)),
            ("5e0", Ok(5000)),
            ("1.5E+00", Ok(1500)),
            ("2e-0", Ok(2000)),
            ("1e0000001", Ok(10_000)),
            ("-0", Ok(0)),
            ("-1", Err(NumError::Negative)),
            ("-0.001", Err(NumError::Negative)),
            ("NaN", Err(NumError::NonFinite)),
            ("inf", Err(NumError::NonFinite)),
            ("-Infinity", Err(NumError::NonFinite)),
            ("1e400", Err(NumError::TooLarge)),
            ("99999999999999999", Err(NumError::TooLarge)),
            ("1.2.3", Err(NumError::Syntax)),
            (".", Err(NumError::Syntax)),
            ("1e", Err(NumError::Syntax)),
            ("12abc", Err(NumError::Syntax)),
        ] {
            assert_eq!(seconds_to_ms(text), want, "{text}");
        }
    }

    #[test]
    fn bad_values_are_typed_errors_naming_the_field() {
        /// The variant and the field an error names.
        fn kind(e: HintError) -> (&'static str, HintField) {
            match e {
                HintError::Empty { field } => ("Empty", field),
                HintError::NonFinite { field, .. } => ("NonFinite", field),
                HintError::Negative { field, .. } => ("Negative", field),
                HintError::Unparseable { field, .. } => ("Unparseable", field),
                HintError::OutOfRange { field, .. } => ("OutOfRange", field),
            }
        }
        let r = 1_000_000;
        let (secs, retry, at) = (
            HintField::RESETS_IN_SECONDS,
            HintField::RETRY_AFTER,
            HintField::RESETS_AT,
        );
        let cases = [
            (resets_in_seconds_deadline("-5", r), "Negative", secs),
            (resets_in_seconds_deadline("NaN", r), "NonFinite", secs),
            (resets_in_seconds_deadline("soon", r), "Unparseable", secs),
            (resets_in_seconds_deadline("  ", r), "Empty", secs),
            (retry_after_deadline("-1", r), "Negative", retry),
            (retry_after_deadline("tomorrow", r), "Unparseable", retry),
            (retry_after_deadline("Infinity", r), "NonFinite", retry),
            (
                resets_at_deadline("2026-13-01T00:00:00Z"),
                "Unparseable",
                at,
            ),
            (resets_at_deadline("-3"), "Negative", at),
        ];
        for (i, (got, variant, field)) in cases.into_iter().enumerate() {
            assert_eq!(got.map_err(kind), Err((variant, field)), "case {i}");
        }
        let msg = resets_in_seconds_deadline("soon", r)
            .unwrap_err()
            .to_string();
        assert_eq!(
            msg,
            "resets_in_seconds: 'soon' cannot be read; expected a number of seconds"
        );
    }

    #[test]
    fn retry_after_accepts_all_three_http_date_forms() {
        let want = utc("1994-11-06T08:49:37Z");
        let reference = utc("2026-12-02T00:00:00Z");
        for form in [
            "Sun, 06 Nov 1994 08:49:37 GMT",
            "Sunday, 06-Nov-94 08:49:37 GMT",
            "Sun Nov  6 08:49:37 1994",
        ] {
            assert_eq!(retry_after_deadline(form, reference), Ok(want), "{form}");
        }
        assert_eq!(
            retry_after_deadline("Fri, 04 Dec 2026 18:20:30 GMT", reference),
            Ok(utc("2026-12-04T18:20:30Z"))
        );
        // Delta-seconds is relative to receipt.
        assert_eq!(
            retry_after_deadline("120", reference),
            Ok(reference + 120_000)
        );
    }

    #[test]
    fn http_dates_are_checked() {
        let r = utc("2026-12-02T00:00:00Z");
        // Wrong weekday, bad day, no GMT, lower-case month, bad time.
        for bad in [
            "Mon, 06 Nov 1994 08:49:37 GMT",
            "Sun, 31 Nov 1994 08:49:37 GMT",
            "Sun, 06 Nov 1994 08:49:37 UTC",
            "Sun, 06 nov 1994 08:49:37 GMT",
            "Sun, 06 Nov 1994 25:49:37 GMT",
            "Sun, 6 Nov 1994 08:49:37 GMT",
            "Sun Nov  6 08:49 1994",
            // A two-digit year is RFC 850's only; a sign or a short year is
            // no year (Rust's integer parser would take `+994`).
            "Sun Nov  6 08:49:37 94",
            "Sun, 06 Nov 94 08:49:37 GMT",
            "Sun, 06 Nov +994 08:49:37 GMT",
            "Sun, +6 Nov 1994 08:49:37 GMT",
            "Sunday, 06-Nov-1994 08:49:37 GMT",
        ] {
            assert_eq!(parse_http_date(bad, r), None, "{bad}");
        }
        // A leap second is the next instant.
        assert_eq!(
            parse_http_date("Wed, 31 Dec 2008 23:59:60 GMT", r),
            Some(utc("2009-01-01T00:00:00Z"))
        );
    }

    #[test]
    fn rfc850_two_digit_years_stay_within_fifty_years_of_the_reference() {
        let r = utc("2026-12-02T00:00:00Z");
        assert_eq!(
            parse_http_date("Wednesday, 02-Dec-26 00:00:00 GMT", r),
            Some(r)
        );
        // 2076 is exactly 50 years ahead: kept; 2077 would be more: 1977.
        assert_eq!(
            parse_http_date("Wednesday, 02-Dec-76 00:00:00 GMT", r),
            Some(utc("2076-12-02T00:00:00Z"))
        );
        assert_eq!(
            parse_http_date("Friday, 02-Dec-77 00:00:00 GMT", r),
            Some(utc("1977-12-02T00:00:00Z"))
        );
    }

    #[test]
    fn resets_at_reads_epoch_seconds_and_rfc3339() {
        assert_eq!(resets_at_deadline("1796218335"), Ok(1_796_218_335_000));
        assert_eq!(resets_at_deadline("1796218335.5"), Ok(1_796_218_335_500));
        assert_eq!(
            resets_at_deadline("2026-12-04T18:20:25+01:00"),
            Ok(utc("2026-12-04T17:20:25Z"))
        );
    }

    #[test]
    fn resets_at_in_milliseconds_is_told_apart_by_magnitude() {
        // The same instant in seconds and in milliseconds.
        assert_eq!(resets_at_deadline("1796421160"), Ok(1_796_421_160_000));
        assert_eq!(resets_at_deadline("1796421160123"), Ok(1_796_421_160_123));
        assert_eq!(resets_at_deadline("1796421160123.4"), Ok(1_796_421_160_124));
        assert_eq!(
            resets_at_deadline("1.796421160123e12"),
            Ok(1_796_421_160_123)
        );
        // The boundary: just below is seconds (year 33658, out of range), at it milliseconds.
        assert_eq!(resets_at_deadline("1000000000000"), Ok(EPOCH_MS_FROM));
        assert!(matches!(
            resets_at_deadline("999999999999.5"),
            Err(HintError::OutOfRange { .. })
        ));
        // Every epoch-seconds instant we accept stays seconds (the last: 9999-12-30T23:59:59Z).
        assert_eq!(resets_at_deadline("253402214399"), Ok(253_402_214_399_000));
        // Huge numbers are out of range, never a wrapped instant.
        assert!(matches!(
            resets_at_deadline("1e40"),
            Err(HintError::OutOfRange { .. })
        ));
        assert!(matches!(
            resets_at_deadline("-1796421160123"),
            Err(HintError::Negative { .. })
        ));
    }

    #[test]
    fn go_durations_parse_exactly_and_round_up() {
        for (text, ms) in [
            ("1s", 1_000),
            ("6m0s", 360_000),
            ("2h10m3.5s", 7_803_500),
            ("20ms", 20),
            ("7.66s", 7_660),
            ("2m59.56s", 179_560),
            ("0", 0),
            ("0s", 0),
            ("+1s", 1_000),
            ("1.5h", 5_400_000),
            ("1us", 1),
            ("1\u{b5}s", 1),
            ("1\u{3bc}s", 1),
            ("999999ns", 1),
            ("1000000ns", 1),
            ("1000001ns", 2),
            (".5s", 500),
            ("1.s", 1_000),
            ("0.0000000000000000000001h", 1),
            ("1h1h", 7_200_000),
        ] {
            assert_eq!(go_duration_ms(text), Ok(ms), "{text}");
        }
        for (text, err) in [
            ("", NumError::Syntax),
            ("1", NumError::Syntax),
            ("s", NumError::Syntax),
            (".s", NumError::Syntax),
            ("1d", NumError::Syntax),
            ("1 s", NumError::Syntax),
            ("1s ", NumError::Syntax),
            ("1S", NumError::Syntax),
            ("1.2.3s", NumError::Syntax),
            ("-1s", NumError::Negative),
            ("99999999999999999999999h", NumError::TooLarge),
            ("9999999999999999999h", NumError::TooLarge),
        ] {
            assert_eq!(go_duration_ms(text), Err(err), "{text}");
        }
        assert_eq!(go_duration_ms("-0s"), Ok(0));
    }

    #[test]
    fn header_units_name_their_field() {
        let received = utc("2026-03-08T09:59:58Z");
        let openai = HintField::new("x-ratelimit-reset-tokens", Unit::GoDurationAfter);
        assert_eq!(
            Hint::new(openai, "6m0s").deadline(received),
            Ok(received + 360_000)
        );
        let err = Hint::new(openai, "soon").deadline(received).unwrap_err();
        assert_eq!(
            err.to_string(),
            "x-ratelimit-reset-tokens: 'soon' cannot be read; expected a duration such as 1s, 6m0s, 2h10m3.5s or 20ms"
        );
        let ms = HintField::new("retry-after-ms", Unit::MillisecondsAfter);
        assert_eq!(
            Hint::new(ms, "1500").deadline(received),
            Ok(received + 1500)
        );
        assert_eq!(Hint::new(ms, "0.2").deadline(received), Ok(received + 1));
        assert!(matches!(
            Hint::new(ms, "-5").deadline(received),
            Err(HintError::Negative { .. })
        ));
        let anthropic = HintField::new("anthropic-ratelimit-tokens-reset", Unit::Rfc3339);
        // An instant with an offset: absolute, whatever the receipt.
        assert_eq!(
            Hint::new(anthropic, "2026-03-08T03:00:00-07:00").deadline(0),
            Ok(utc("2026-03-08T10:00:00Z"))
        );
        // Epoch numbers are not RFC 3339.
        assert!(matches!(
            Hint::new(anthropic, "1796421160").deadline(received),
            Err(HintError::Unparseable { .. })
        ));
        assert!(matches!(
            Hint::new(anthropic, " ").deadline(received),
            Err(HintError::Empty { .. })
        ));
    }

    #[test]
    fn no_hint_falls_back_to_bounded_backoff_never_now() {
        let p = Policy::default();
        let now = 10_000_000;
        let steps: Vec<i64> = (0..12)
            .map(|a| assess(0, now, &[], a, &p).unwrap().not_before - now)
            .collect();
        assert_eq!(steps[0], MINUTE_MS + p.margin_ms);
        assert_eq!(steps[1], 2 * MINUTE_MS + p.margin_ms);
        assert_eq!(steps[11], 6 * HOUR_MS + p.margin_ms);
        assert!(steps.windows(2).all(|w| w[0] <= w[1]));
        // Even a zero policy never says "call again now".
        let zero = Policy {
            margin_ms: 0,
            backoff: Backoff {
                base_ms: 0,
                max_ms: 0,
            },
            ..p
        };
        assert!(assess(0, now, &[], 0, &zero).unwrap().not_before > now);
        assert_eq!(Backoff::default().delay_ms(u32::MAX), 6 * HOUR_MS);
    }

    #[test]
    fn far_resets_are_kept_whole_and_flagged() {
        let p = Policy::default();
        let received = utc("2026-12-02T00:00:00Z");
        let forty_days = (40 * 86_400).to_string();
        let a = assess(0, received, &[Hint::resets_in_seconds(forty_days)], 0, &p).unwrap();
        assert_eq!(a.not_before, received + 40 * DAY_MS + p.margin_ms);
        let flag = a.implausible.unwrap();
        assert_eq!(flag.deadline, received + 40 * DAY_MS);
        assert_eq!(flag.ceiling_ms, 31 * DAY_MS);
        // Exactly at the ceiling is plausible; a configured ceiling is honoured.
        let at = assess(
            0,
            received,
            &[Hint::resets_in_seconds((31 * 86_400).to_string())],
            0,
            &p,
        )
        .unwrap();
        assert_eq!(at.implausible, None);
        let tight = Policy {
            ceiling_ms: HOUR_MS,
            ..p
        };
        assert!(assess(0, received, &[Hint::retry_after("3601")], 0, &tight)
            .unwrap()
            .implausible
            .is_some());
    }

    #[test]
    fn one_bad_hint_rejects_the_refusal() {
        let p = Policy::default();
        let r = assess(
            0,
            1000,
            &[Hint::resets_in_seconds("60"), Hint::retry_after("-1")],
            0,
            &p,
        );
        assert!(matches!(r, Err(HintError::Negative { .. })));
    }

    #[test]
    fn jitter_is_bounded_deterministic_and_spread() {
        let seed = seed_of("openai/acct-42");
        let a = jitter_ms("worker-a", seed, 30_000);
        assert_eq!(a, jitter_ms("worker-a", seed, 30_000));
        let all: std::collections::BTreeSet<i64> = (0..50)
            .map(|i| jitter_ms(&format!("w{i}"), seed, 30_000))
            .collect();
        assert!(all.iter().all(|j| (0..=30_000).contains(j)));
        assert!(all.len() > 40, "jitter should spread workers: {all:?}");
        assert_eq!(jitter_ms("worker-a", seed, 0), 0);
        assert_eq!(resume_at(1000, "w", seed, 0), 1000);
    }

    #[test]
    fn deadlines_past_the_last_instant_are_out_of_range() {
        let r = utc("2026-12-02T00:00:00Z");
        // Year ~3.2 million (as epoch ms): parses, but no stored deadline may name it.
        let far = Hint::resets_at("99999999999999999");
        assert!(matches!(
            far.deadline(r),
            Err(HintError::OutOfRange {
                field: HintField::RESETS_AT,
                ..
            })
        ));
        assert!(Hint::resets_at("253402214399").deadline(r).is_ok());
        let (usable, unusable) = usable_hints(
            &[
                Hint::retry_after("garbage"),
                far.clone(),
                Hint::resets_in_seconds("60"),
            ],
            r,
        );
        // Garbage is left out; a reset past the last instant is kept, for
        // assess to escalate.
        assert_eq!(usable, vec![far.clone(), Hint::resets_in_seconds("60")]);
        assert_eq!(unusable.len(), 1);
        assert!(!unusable[0].is_beyond_range());
        for hint in [
            far,
            Hint::resets_in_seconds("99999999999999"),
            Hint::retry_after("1e40"),
            Hint::resets_at("9999-12-31T23:59:59Z"),
        ] {
            let a = assess(
                0,
                r,
                &[hint.clone(), Hint::resets_in_seconds("60")],
                0,
                &Policy::default(),
            )
            .unwrap();
            assert_eq!(a.not_before, MAX_DEADLINE_MS, "{hint:?}");
            let flag = a.implausible.expect("escalated");
            assert!(flag.beyond_range, "{hint:?}");
            assert_eq!(flag.deadline, MAX_DEADLINE_MS);
        }
        assert!(
            !assess(
                0,
                r,
                &[Hint::resets_in_seconds((40 * 86_400).to_string())],
                0,
                &Policy::default()
            )
            .unwrap()
            .implausible
            .unwrap()
            .beyond_range
        );
        // A margin cannot carry a deadline past the last instant.
        let p = Policy {
            margin_ms: MAX_MARGIN_MS,
            ..Policy::default()
        };
        let a = assess(0, r, &[Hint::resets_at("253402214399")], 0, &p).unwrap();
        assert_eq!(a.not_before, MAX_DEADLINE_MS);
    }

    #[test]
    fn dates_past_9999_are_out_of_range_and_garbage_is_not() {
        let r = utc("2026-12-02T00:00:00Z");
        let out = |h: Hint| matches!(h.deadline(r), Err(HintError::OutOfRange { .. }));
        let garbage = |h: Hint| matches!(h.deadline(r), Err(HintError::Unparseable { .. }));
        for far in [
            // 1 Jan 10000 is a Saturday; a far date's weekday is not checked.
            "Sat, 01 Jan 10000 00:00:00 GMT",
            "Fri, 01 Jan 10000 00:00:00 GMT",
            "Sat Jan  1 00:00:00 10000",
            "Tue, 29 Feb 12024 00:00:00 GMT",
        ] {
            assert!(out(Hint::retry_after(far)), "{far}");
        }
        for far in [
            "10000-01-01T00:00:00Z",
            "+10000-01-01T00:00:00Z",
            "+123456-06-30T12:00:00.5+02:00",
            // The last day of 9999 is past the last instant too.
            "9999-12-31T12:00:00Z",
        ] {
            assert!(out(Hint::resets_at(far)), "{far}");
            assert!(out(Hint::new(HintField::new("x", Unit::Rfc3339), far)));
        }
        // An expanded year that is not past 9999 reads as written.
        assert_eq!(
            resets_at_deadline("+2026-12-04T18:20:25Z"),
            Ok(utc("2026-12-04T18:20:25Z"))
        );
        assert_eq!(
            resets_at_deadline("02026-12-04T18:20:25Z"),
            Ok(utc("2026-12-04T18:20:25Z"))
        );
        // Malformed text stays garbage, whatever its year.
        for bad in [
            "Sat, 32 Jan 10000 00:00:00 GMT",
            "Sat, 01 Foo 10000 00:00:00 GMT",
            "Sat, 01 Jan 10000 25:00:00 GMT",
            "Sat, 01 Jan 1000x 00:00:00 GMT",
            "Xyz, 01 Jan 10000 00:00:00 GMT",
            "Sat, 1 Jan 10000 00:00:00 GMT",
            "Sat, 01 Jan 01999 00:00:00 GMT",
        ] {
            assert!(garbage(Hint::retry_after(bad)), "{bad}");
        }
        for bad in [
            "10000-13-01T00:00:00Z",
            "+10000-01-01",
            "+1000x-01-01T00:00:00Z",
            "+-10000-01-01T00:00:00Z",
            "+999-01-01T00:00:00Z",
        ] {
            assert!(garbage(Hint::resets_at(bad)), "{bad}");
        }
        // And escalates like the numbers do.
        let a = assess(
            0,
            r,
            &[Hint::retry_after("Fri, 01 Jan 10000 00:00:00 GMT")],
            0,
            &Policy::default(),
        )
        .unwrap();
        assert_eq!(a.basis, Basis::Provider);
        assert!(a.implausible.unwrap().beyond_range);
    }

    proptest! {
        /// Whatever the numbers (a stored i64::MIN, a huge margin, any attempt
        /// count), assessing never panics, never lowers the recorded deadline
        /// and never names an instant past the last one.
        #[test]
        fn assess_is_total_and_bounded(
            existing in prop_oneof![Just(i64::MIN), Just(i64::MAX), Just(0i64), any::<i64>()],
            received in prop_oneof![Just(i64::MIN), Just(i64::MAX), any::<i64>()],
            margin in prop_oneof![Just(i64::MAX), Just(i64::MIN), any::<i64>()],
            attempt in any::<u32>(),
            value in prop_oneof![Just("9223372036854775".to_string()), "[0-9.e+-]{0,20}"],
        ) {
            let p = Policy { margin_ms: margin, ..Policy::default() };
            for hints in [vec![], vec![Hint::resets_in_seconds(value.clone())], vec![Hint::retry_after(value.clone())]] {
                if let Ok(a) = assess(existing, received, &hints, attempt, &p) {
                    prop_assert!(a.not_before >= existing);
                    prop_assert!(a.not_before <= MAX_DEADLINE_MS.max(existing));
                }
            }
            let _ = human_duration(existing.wrapping_sub(received));
            let _ = resume_at(existing, "w", 7, margin);
        }

        /// A recorded deadline never moves earlier, whatever arrives next.
        #[test]
        fn next_probe_is_monotonic(
            existing in 0i64..1_000_000_000_000,
            received in 0i64..1_000_000_000_000,
            deadlines in proptest::collection::vec(0i64..2_000_000_000_000, 0..5),
            margin in 0i64..100_000,
        ) {
            let n = next_probe(existing, received, &deadlines, margin);
            prop_assert!(n >= existing);
            prop_assert!(n >= received + margin);
            for d in &deadlines {
                prop_assert!(n >= d + margin);
            }
            // Folding responses one at a time never lowers the deadline and ends
            // no earlier than the all-at-once answer.
            let mut acc = next_probe(existing, received, &[], margin);
            prop_assert!(acc >= existing);
            for d in &deadlines {
                let next = next_probe(acc, received, &[*d], margin);
                prop_assert!(next >= acc);
                acc = next;
            }
            prop_assert_eq!(acc, n);
        }

        /// A longer reset never yields an earlier deadline.
        #[test]
        fn assess_is_monotonic_in_the_reset(
            received in 0i64..4_000_000_000_000,
            a in 0u32..10_000_000,
            b in 0u32..10_000_000,
        ) {
            let p = Policy::default();
            let (lo, hi) = (a.min(b), a.max(b));
            let x = assess(0, received, &[Hint::resets_in_seconds(lo.to_string())], 0, &p).unwrap();
            let y = assess(0, received, &[Hint::resets_in_seconds(hi.to_string())], 0, &p).unwrap();
            prop_assert!(x.not_before <= y.not_before);
            prop_assert_eq!(y.not_before, received + i64::from(hi) * 1000 + p.margin_ms);
        }

        /// may_probe flips exactly once, at the deadline.
        #[test]
        fn may_probe_is_a_threshold(now in any::<i64>(), nb in any::<i64>()) {
            prop_assert_eq!(may_probe(now, nb), now >= nb);
            if may_probe(now, nb) && now < i64::MAX {
                prop_assert!(may_probe(now + 1, nb));
            }
        }

        /// Decimal seconds round up to ms and agree with integer arithmetic.
        #[test]
        fn decimal_seconds_round_up(whole in 0u32..1_000_000_000, frac in 0u32..1_000_000) {
            let text = format!("{whole}.{frac:06}");
            let want = i64::from(whole) * 1000 + (i64::from(frac) + 999) / 1000;
            prop_assert_eq!(seconds_to_ms(&text), Ok(want));
        }

        /// Parsers never panic on arbitrary text.
        #[test]
        fn parsers_never_panic(s in "\\PC{0,40}", r in any::<i64>()) {
            let _ = retry_after_deadline(&s, r);
            let _ = resets_in_seconds_deadline(&s, r);
            let _ = resets_at_deadline(&s);
            let _ = parse_duration_ms(&s);
            let _ = go_duration_ms(&s);
            let _ = epoch_to_ms(&s);
        }
    }
}
