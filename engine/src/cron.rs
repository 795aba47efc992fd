//! 5-field cron patterns: parsing (cronsim 2.8 grammar plus zae-limiter's checks),
//! expanded field sets and the day-of-month/day-of-week rule.
//!
//! CONTRACT (shared with schedule scanning, the manifest validator and the
//! CLI): the public names and signatures below are relied on elsewhere; extend,
//! don't rename.
//!
//! The grammar is the reference's, not a generic cron's (docs/semantics.md, "Cron patterns"):
//! fields are split on Python's notion of whitespace, upper-cased with full
//! Unicode rules (`ſun` is `SUN`), names are `JAN`–`DEC` and `SUN`–`SAT`
//! only, Sunday is `0` inside ranges and steps (so `SAT-SUN` is backwards),
//! a step on a single value runs to the field maximum (`7/2` is Sunday
//! alone), and `L`, `W`, `#`, `?`, `@daily` and 6-field patterns are refused.

use std::ops::Range;

/// One of the five fields, in cron order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CronField {
    Minute,
    Hour,
    DayOfMonth,
    Month,
    DayOfWeek,
}

impl CronField {
    /// The name used in messages: `minute`, `hour`, `day-of-month`, `month`, `day-of-week`.
    pub fn name(self) -> &'static str {
        match self {
            CronField::Minute => "minute",
            CronField::Hour => "hour",
            CronField::DayOfMonth => "day-of-month",
            CronField::Month => "month",
            CronField::DayOfWeek => "day-of-week",
        }
    }

    /// All five fields in cron order.
    pub const ALL: [CronField; 5] = [
        CronField::Minute,
        CronField::Hour,
        CronField::DayOfMonth,
        CronField::Month,
        CronField::DayOfWeek,
    ];

    /// Smallest and largest value the field accepts as typed
    /// (day-of-week accepts 0..=7; both ends are Sunday).
    pub fn bounds(self) -> (u32, u32) {
        match self {
            CronField::Minute => (0, 59),
            CronField::Hour => (0, 23),
            CronField::DayOfMonth => (1, 31),
            CronField::Month => (1, 12),
            CronField::DayOfWeek => (0, 7),
        }
    }
}

/// Why a pattern was rejected, and where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct CronError {
    /// The offending field, when the problem is inside one (None for a wrong field count).
    pub field: Option<CronField>,
    /// Byte range of the offending text within the expression as given.
    pub span: Range<usize>,
    /// What is wrong, in one sentence, e.g. "day-of-week: a range cannot end at SUN (0)".
    pub message: String,
    /// How to fix it, e.g. "write SAT,SUN or 6-7 instead of SAT-SUN".
    pub help: Option<String>,
}

/// A parsed pattern: expanded sets as bitmasks, plus the day rule.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CronSpec {
    /// Bit m set for each matching minute 0..=59.
    pub minutes: u64,
    /// Bit h set for each matching hour 0..=23.
    pub hours: u32,
    /// Bit d set for each matching day-of-month 1..=31.
    pub days: u32,
    /// Bit m set for each matching month 1..=12.
    pub months: u16,
    /// Bit d set for each matching ISO weekday 1..=7 (Mon=1 … Sun=7; Sunday folded to 7).
    pub weekdays: u8,
    /// True when the raw day-of-month or day-of-week field starts with `*`:
    /// days match when both agree (AND); otherwise when either does (OR, as in Vixie cron).
    pub day_and: bool,
}

/// Month names as the grammar knows them (index + 1 is the month number).
pub const MONTH_NAMES: [&str; 12] = [
    "JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC",
];

/// Day names as the grammar knows them (index is the cron number, SUN = 0).
pub const DAY_NAMES: [&str; 7] = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"];

/// Python's `str.isspace` (Unicode 14): Rust's `char::is_whitespace` plus the
/// information separators U+001C..U+001F, which `str.split()` also splits on.
pub fn is_python_space(c: char) -> bool {
    matches!(c, '\u{1c}'..='\u{1f}') || c.is_whitespace()
}

/// Python's `str.split()` with no argument: runs of whitespace separate
/// fields, leading and trailing whitespace is ignored. Returns each piece with
/// its byte range in `s`.
pub fn python_split(s: &str) -> Vec<(Range<usize>, &str)> {
    let mut out = Vec::new();
    let mut start: Option<usize> = None;
    for (i, c) in s.char_indices() {
        if is_python_space(c) {
            if let Some(st) = start.take() {
                out.push((st..i, &s[st..i]));
            }
        } else if start.is_none() {
            start = Some(i);
        }
    }
    if let Some(st) = start {
        out.push((st..s.len(), &s[st..]));
    }
    out
}

/// A part of a pattern written as a range of one value with a step
/// (`5-5/10`, `MON-1/2`): see [`one_value_steps`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OneValueStep<'a> {
    pub field: CronField,
    /// The part's bytes in the pattern.
    pub span: Range<usize>,
    /// The range's first end (`5`, `MON`) and the step (`10`), as written.
    pub value: &'a str,
    pub step: &'a str,
}

/// The parts of a pattern written as a range of one value with a step.
/// This grammar reads them as cronsim 2.8 does, stepping from the value to
/// the field's end (`5-5/10` is `5/10`); cronsim 2.9 and later read the value
/// alone, so Python limiters disagree by the cronsim they run on
/// (docs/semantics.md, "One-value ranges with a step"). For a lint. A part
/// whose step leaves the field at once (`59-59/4`, `SAT-6/2`) is the value
/// alone either way, and is not listed.
pub fn one_value_steps(expr: &str) -> Vec<OneValueStep<'_>> {
    let mut out = Vec::new();
    for ((span, raw), field) in python_split(expr).into_iter().zip(CronField::ALL) {
        let value = |s: &str| parse_value(&s.to_uppercase(), field).ok();
        let mut at = span.start;
        for part in raw.split(',') {
            let parsed = part
                .split_once('/')
                .and_then(|(range, step)| Some((range.split_once('-')?, step)));
            if let Some(((a, b), step)) = parsed {
                let one_value = matches!((value(a), value(b)), (Some(x), Some(y)) if x == y);
                if one_value && read_two_ways(expr, at..at + part.len(), field, (a, step)) {
                    out.push(OneValueStep {
                        field,
                        span: at..at + part.len(),
                        value: a,
                        step,
                    });
                }
            }
            at += part.len() + 1;
        }
    }
    out
}

/// Whether the part at `span` of `expr`, a one-value range `a-a/step`, means
/// other values read as `a/step` (cronsim 2.8, this grammar) than as `a`
/// alone (cronsim 2.9): not when the step leaves the field at once.
fn read_two_ways(
    expr: &str,
    span: Range<usize>,
    field: CronField,
    (a, step): (&str, &str),
) -> bool {
    let values = |part: &str| {
        let mut e = expr.to_string();
        e.replace_range(span.clone(), part);
        let index = CronField::ALL.iter().position(|f| *f == field)?;
        CronSpec::parse(&e)
            .ok()
            .map(|s| s.field_values()[index].clone())
    };
    values(&format!("{a}/{step}")) != values(a)
}

/// Lowest set bit of `mask` at or above `from`, if any (`from` ≥ 64 gives None).
///
/// The scanners use this to jump straight to the next matching minute, hour,
/// day or month instead of stepping one at a time.
pub fn next_bit(mask: u64, from: u32) -> Option<u32> {
    if from >= 64 {
        return None;
    }
    let m = mask & (u64::MAX << from);
    if m == 0 {
        None
    } else {
        Some(m.trailing_zeros())
    }
}

/// Highest set bit of `mask` at or below `upto`, if any.
pub fn prev_bit(mask: u64, upto: u32) -> Option<u32> {
    let m = if upto >= 63 {
        mask
    } else {
        mask & ((1u64 << (upto + 1)) - 1)
    };
    if m == 0 {
        None
    } else {
        Some(63 - m.leading_zeros())
    }
}

/// Largest day count cronsim assumes for a month (February counts 29).
fn max_days_in_month(month: u32) -> u32 {
    match month {
        2 => 29,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

impl CronSpec {
    /// Parse a 5-field pattern exactly as zae-limiter 0.17 accepts it
    /// (docs/semantics.md, "Cron patterns").
    ///
    /// Errors name the field, carry the byte span of its text in `expr`, and
    /// say how to fix the pattern where the fix is obvious.
    pub fn parse(expr: &str) -> Result<CronSpec, CronError> {
        let fields = python_split(expr);
        if fields.len() != 5 {
            return Err(field_count_error(expr, &fields));
        }
        let mut masks = [0u64; 5];
        let mut upper: Vec<String> = Vec::with_capacity(5);
        for (i, field) in CronField::ALL.iter().copied().enumerate() {
            let (span, raw) = (&fields[i].0, fields[i].1);
            let up = raw.to_uppercase();
            masks[i] =
                parse_expr(&up, field).map_err(|p| p.into_error(field, span.clone(), raw))?;
            upper.push(up);
        }
        let day_and = upper[2].starts_with('*') || upper[4].starts_with('*');
        let days = masks[2] as u32;
        let months = masks[3] as u16;
        if day_and {
            // cronsim's feasibility check: a day above 29 must fit some selected month.
            let min_day = days.trailing_zeros();
            if min_day > 29 {
                let longest = (1..=12)
                    .filter(|m| months & (1 << m) != 0)
                    .map(max_days_in_month)
                    .max()
                    .unwrap_or(0);
                if min_day > longest {
                    let month_list: Vec<&str> = (1..=12)
                        .filter(|m| months & (1 << m) != 0)
                        .map(|m| MONTH_NAMES[(m - 1) as usize])
                        .collect();
                    return Err(CronError {
                        field: Some(CronField::DayOfMonth),
                        span: fields[2].0.clone(),
                        message: format!(
                            "day-of-month: day {min_day} never occurs in {} (at most {longest} days), so the pattern would never match",
                            month_list.join(",")
                        ),
                        help: Some(
                            "pick a day that exists in the selected months, or select a month long enough"
                                .to_string(),
                        ),
                    });
                }
            }
        }
        let dow = masks[4];
        let weekdays = (((dow & 0xFE) | ((dow & 1) << 7)) & 0xFE) as u8;
        Ok(CronSpec {
            minutes: masks[0],
            hours: masks[1] as u32,
            days,
            months,
            weekdays,
            day_and,
        })
    }

    /// Whether a wall-clock minute matches: minute, hour and month must be in
    /// their sets; the day rule combines day-of-month and ISO weekday (1..=7)
    /// with AND or OR per `day_and`. Out-of-range inputs simply do not match.
    pub fn matches_fields(
        &self,
        minute: u32,
        hour: u32,
        day: u32,
        month: u32,
        iso_weekday: u32,
    ) -> bool {
        self.has_minute(minute)
            && self.has_hour(hour)
            && self.has_month(month)
            && self.day_matches(day, iso_weekday)
    }

    /// Minute `m` (0..=59) is in the minute set.
    pub fn has_minute(&self, m: u32) -> bool {
        m < 60 && self.minutes & (1u64 << m) != 0
    }

    /// Hour `h` (0..=23) is in the hour set.
    pub fn has_hour(&self, h: u32) -> bool {
        h < 24 && self.hours & (1u32 << h) != 0
    }

    /// Month `m` (1..=12) is in the month set.
    pub fn has_month(&self, m: u32) -> bool {
        (1..=12).contains(&m) && self.months & (1u16 << m) != 0
    }

    /// The day rule alone: day-of-month `day` (1..=31) and ISO weekday (1..=7).
    pub fn day_matches(&self, day: u32, iso_weekday: u32) -> bool {
        let dom = (1..=31).contains(&day) && self.days & (1u32 << day) != 0;
        let dow = (1..=7).contains(&iso_weekday) && self.weekdays & (1u8 << iso_weekday) != 0;
        if self.day_and {
            dom && dow
        } else {
            dom || dow
        }
    }

    /// The sets as sorted lists, in field order (weekdays ISO 1..=7); for tests and display.
    pub fn field_values(&self) -> [Vec<u32>; 5] {
        let list = |mask: u64| {
            (0..64)
                .filter(|b| mask & (1u64 << b) != 0)
                .collect::<Vec<u32>>()
        };
        [
            list(self.minutes),
            list(self.hours as u64),
            list(self.days as u64),
            list(self.months as u64),
            list(self.weekdays as u64),
        ]
    }
}

/// Expand one field's text (already upper-cased) to its value set, before
/// the Sunday fold: bit v for each value v, day-of-week 0..=7.
///
/// Used by the renderer to check that a displayed form means the same set.
pub fn parse_field(upper: &str, field: CronField) -> Option<u64> {
    parse_expr(upper, field).ok()
}

/// A problem inside one field, before it is placed in the expression.
#[derive(Debug)]
enum Problem {
    EmptyItem,
    Extended(String),
    BadStep(String),
    ZeroStep,
    BadValue(String),
    OutOfRange(u128),
    Backwards {
        start: (u32, String),
        end: (u32, String),
    },
}

impl Problem {
    fn into_error(self, field: CronField, span: Range<usize>, raw: &str) -> CronError {
        let name = field.name();
        let (lo, hi) = field.bounds();
        let (message, help) = match self {
            Problem::EmptyItem => (
                format!("{name}: empty item in the list '{raw}'"),
                Some("remove the extra comma".to_string()),
            ),
            Problem::Extended(tok) => (
                format!(
                    "{name}: '{tok}' uses an extended token (L, W, # or ?), which is not supported"
                ),
                Some(match field {
                    CronField::DayOfMonth => {
                        "list the days explicitly, e.g. 28-31 for the end of the month".to_string()
                    }
                    _ => "list the weekdays explicitly, e.g. MON-FRI".to_string(),
                }),
            ),
            Problem::BadStep(step) => (
                format!("{name}: the step '{step}' is not a whole number"),
                Some(
                    "write the step as digits after a single '/', e.g. */15 or 10-50/5".to_string(),
                ),
            ),
            Problem::ZeroStep => (
                format!("{name}: a step of 0 is not allowed"),
                Some("use a step of 1 or more, e.g. */1".to_string()),
            ),
            Problem::BadValue(v) => bad_value(field, &v),
            Problem::OutOfRange(v) => (
                format!("{name}: {v} is out of range ({lo}-{hi})"),
                Some(match field {
                    CronField::DayOfWeek => {
                        "day-of-week values run 0-7 (0 and 7 are both Sunday)".to_string()
                    }
                    _ => format!("{name} values run {lo}-{hi}"),
                }),
            ),
            Problem::Backwards { start, end } => backwards(field, start, end),
        };
        CronError {
            field: Some(field),
            span,
            message,
            help,
        }
    }
}

fn bad_value(field: CronField, v: &str) -> (String, Option<String>) {
    let name = field.name();
    let (lo, hi) = field.bounds();
    if v.is_empty() {
        return (
            format!("{name}: a value is missing"),
            Some(format!("write a number {lo}-{hi}")),
        );
    }
    if field == CronField::DayOfMonth && (v.contains('W') || v.contains('L') || v.contains('?')) {
        return (
            format!("{name}: '{v}' uses an extended token (L, W or ?), which is not supported"),
            Some("list the days explicitly, e.g. 28-31 for the end of the month".to_string()),
        );
    }
    if v.contains('?') {
        return (
            format!("{name}: '?' is not supported"),
            Some("write * for any value".to_string()),
        );
    }
    let letters = v.chars().all(|c| c.is_alphabetic());
    let help = match field {
        CronField::Month
            if letters && v.len() > 3 && MONTH_NAMES.iter().any(|n| v.starts_with(n)) =>
        {
            Some(format!("use the 3-letter name {}", &v[..3]))
        }
        CronField::DayOfWeek
            if letters && v.len() > 3 && DAY_NAMES.iter().any(|n| v.starts_with(n)) =>
        {
            Some(format!("use the 3-letter name {}", &v[..3]))
        }
        CronField::Month => Some("write a number 1-12 or a name JAN-DEC".to_string()),
        CronField::DayOfWeek => {
            Some("write a number 0-7 (0 and 7 are Sunday) or a name SUN-SAT".to_string())
        }
        _ if letters && (MONTH_NAMES.contains(&v) || DAY_NAMES.contains(&v)) => {
            Some("names are allowed only in the month and day-of-week fields".to_string())
        }
        _ => Some(format!("write a number {lo}-{hi} in ASCII digits")),
    };
    (format!("{name}: '{v}' is not a valid value"), help)
}

fn backwards(
    field: CronField,
    start: (u32, String),
    end: (u32, String),
) -> (String, Option<String>) {
    let name = field.name();
    if field == CronField::DayOfWeek && end.0 == 0 {
        // SAT-SUN and friends: SUN is 0 inside a range.
        let s = start.1.as_str();
        let alt_num = if start.0 == 6 {
            "6,7".to_string()
        } else {
            format!("{}-7", start.0)
        };
        let alt_name = match start.0 {
            6 => "SAT,SUN".to_string(),
            n if (1..6).contains(&n) => format!("{}-SAT,SUN", DAY_NAMES[n as usize]),
            _ => alt_num.clone(),
        };
        return (
            format!("{name}: the range {s}-{} ends at Sunday, which is 0 inside a range, so it runs backwards", end.1),
            Some(format!("write {alt_name} or {alt_num}")),
        );
    }
    let (lo, hi) = field.bounds();
    let help = if start.0 <= hi && end.0 >= lo {
        Some(format!(
            "a range must run from low to high; to wrap around, write two ranges: {}-{hi},{lo}-{}",
            start.1, end.1
        ))
    } else {
        None
    };
    (
        format!("{name}: the range {}-{} runs backwards", start.1, end.1),
        help,
    )
}

fn field_count_error(expr: &str, fields: &[(Range<usize>, &str)]) -> CronError {
    let span = match (fields.first(), fields.last()) {
        (Some(a), Some(b)) => a.0.start..b.0.end,
        _ => 0..expr.len(),
    };
    let trimmed = fields.first().map(|f| f.1).unwrap_or("");
    let help = if fields.len() == 1 && trimmed.starts_with('@') {
        let alt = match trimmed.to_ascii_lowercase().as_str() {
            "@yearly" | "@annually" => Some("0 0 1 1 *"),
            "@monthly" => Some("0 0 1 * *"),
            "@weekly" => Some("0 0 * * SUN"),
            "@daily" | "@midnight" => Some("0 0 * * *"),
            "@hourly" => Some("0 * * * *"),
            _ => None,
        };
        Some(match alt {
            Some(a) => format!("shortcuts like {trimmed} are not supported; write {a}"),
            None => format!("{trimmed} is not supported; write 5 fields"),
        })
    } else if fields.len() == 6 {
        Some("a 6-field pattern (with seconds) is not supported: nothing here is finer than a minute; drop the seconds field".to_string())
    } else if fields.len() > 6 {
        Some("write exactly 5 fields".to_string())
    } else {
        Some("write 5 fields, e.g. * 9-17 * * MON-FRI".to_string())
    };
    CronError {
        field: None,
        span,
        message: format!(
            "expected exactly 5 fields (minute hour day-of-month month day-of-week), found {}",
            fields.len()
        ),
        help,
    }
}

/// The full range of a field as a mask.
fn full(field: CronField) -> u64 {
    let (lo, hi) = field.bounds();
    range_mask(lo, hi)
}

fn range_mask(lo: u32, hi: u32) -> u64 {
    // hi ≤ 59 for every field.
    let upper = if hi >= 63 {
        u64::MAX
    } else {
        (1u64 << (hi + 1)) - 1
    };
    upper & (u64::MAX << lo)
}

/// cronsim's recursive field grammar (docs/semantics.md, "Cron patterns"); the
/// first rule that applies wins.
fn parse_expr(s: &str, field: CronField) -> Result<u64, Problem> {
    if s == "*" {
        return Ok(full(field));
    }
    if s.contains(',') {
        let mut acc = 0u64;
        for term in s.split(',') {
            if term.is_empty() {
                return Err(Problem::EmptyItem);
            }
            acc |= parse_expr(term, field)?;
        }
        return Ok(acc);
    }
    if field == CronField::DayOfWeek && (s.contains('L') || s.contains('#')) {
        return Err(Problem::Extended(s.to_string()));
    }
    if let Some((base, step)) = s.split_once('/') {
        if step.is_empty() || !step.bytes().all(|b| b.is_ascii_digit()) {
            return Err(Problem::BadStep(step.to_string()));
        }
        let step = saturating_digits(step);
        if step == 0 {
            return Err(Problem::ZeroStep);
        }
        let base_set = parse_expr(base, field)?;
        let (_, hi) = field.bounds();
        let mut out = 0u64;
        if base_set.count_ones() == 1 {
            let mut v = base_set.trailing_zeros() as u128;
            while v <= hi as u128 {
                out |= 1u64 << v;
                // A step of 10^40 saturates; it must not wrap (found by fuzzing).
                v = v.saturating_add(step);
            }
        } else {
            let mut idx: u128 = 0;
            for b in 0..64u32 {
                if base_set & (1u64 << b) != 0 {
                    if idx % step == 0 {
                        out |= 1u64 << b;
                    }
                    idx += 1;
                }
            }
        }
        return Ok(out);
    }
    if let Some((a, b)) = s.split_once('-') {
        let start = parse_value(a, field)?;
        let end = parse_value(b, field)?;
        if end < start {
            return Err(Problem::Backwards {
                start: (start, a.to_string()),
                end: (end, b.to_string()),
            });
        }
        return Ok(range_mask(start, end));
    }
    if field == CronField::DayOfMonth && (s == "L" || s == "LW") {
        return Err(Problem::Extended(s.to_string()));
    }
    Ok(1u64 << parse_value(s, field)?)
}

/// Digits as a number, saturating far above any field's range.
fn saturating_digits(s: &str) -> u128 {
    s.bytes().fold(0u128, |acc, b| {
        acc.saturating_mul(10).saturating_add((b - b'0') as u128)
    })
}

/// Rule 8: a name (month and day-of-week only) or ASCII digits inside the field range.
fn parse_value(s: &str, field: CronField) -> Result<u32, Problem> {
    let named = match field {
        CronField::Month => MONTH_NAMES
            .iter()
            .position(|n| *n == s)
            .map(|i| i as u32 + 1),
        CronField::DayOfWeek => DAY_NAMES.iter().position(|n| *n == s).map(|i| i as u32),
        _ => None,
    };
    if let Some(v) = named {
        return Ok(v);
    }
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(Problem::BadValue(s.to_string()));
    }
    let v = saturating_digits(s);
    let (lo, hi) = field.bounds();
    if v < lo as u128 || v > hi as u128 {
        return Err(Problem::OutOfRange(v));
    }
    Ok(v as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sets(expr: &str) -> [Vec<u32>; 5] {
        CronSpec::parse(expr).unwrap().field_values()
    }

    #[test]
    fn one_value_ranges_with_a_step_are_found() {
        fn found(e: &str) -> Vec<(CronField, &str)> {
            one_value_steps(e)
                .into_iter()
                .map(|s| (s.field, &e[s.span]))
                .collect()
        }
        let parts = one_value_steps("* 9-9/4 * * *");
        assert_eq!((parts[0].value, parts[0].step), ("9", "4"));
        assert_eq!(found("5-5/10 * * * *"), [(CronField::Minute, "5-5/10")]);
        assert_eq!(
            found("0,05-5/10 3-3/1 * 5-MAY/2 MON-1/2"),
            [
                (CronField::Minute, "05-5/10"),
                (CronField::Hour, "3-3/1"),
                (CronField::Month, "5-MAY/2"),
                (CronField::DayOfWeek, "MON-1/2"),
            ]
        );
        // A real range, a range without a step, a plain step: as every
        // cronsim reads them.
        assert!(found("5-6/10 5-5 */5 1/2 *").is_empty());
        // A step that leaves the field at once: the value alone either way.
        for e in [
            "59-59/4 * * * *",
            "* 23-23/2 * * *",
            "* * 31-31/2 * *",
            "* * * * SAT-6/2",
            "* * * * 7-7/2",
        ] {
            assert!(found(e).is_empty(), "{e}");
        }
        assert_eq!(
            found("* * * * FRI-5/2"),
            [(CronField::DayOfWeek, "FRI-5/2")]
        );
        // The grammar reads it as a step from the value to the field's end.
        assert_eq!(sets("5-5/10 * * * *")[0], [5, 15, 25, 35, 45, 55]);
    }

    #[test]
    fn weekday_rules() {
        assert_eq!(sets("* * * * 7/2")[4], vec![7]);
        assert_eq!(sets("* * * * 0/2")[4], vec![2, 4, 6, 7]);
        assert_eq!(sets("* * * * */2")[4], vec![2, 4, 6, 7]);
        assert_eq!(sets("* * * * 1/2")[4], vec![1, 3, 5, 7]);
        assert_eq!(sets("* * * * SUN/1")[4], vec![1, 2, 3, 4, 5, 6, 7]);
        assert_eq!(sets("* * * * ſun")[4], vec![7]);
        assert_eq!(sets("5-5/10 * * * *")[0], vec![5, 15, 25, 35, 45, 55]);
    }

    #[test]
    fn sat_sun_is_backwards_with_help() {
        let e = CronSpec::parse("0 0 * * SAT-SUN").unwrap_err();
        assert_eq!(e.field, Some(CronField::DayOfWeek));
        assert_eq!(e.span, 8..15);
        assert_eq!(e.help.as_deref(), Some("write SAT,SUN or 6,7"));
    }

    #[test]
    fn day_and_from_first_char() {
        assert!(CronSpec::parse("* * */2 * 1").unwrap().day_and);
        assert!(CronSpec::parse("* * 1 * *,0").unwrap().day_and);
        assert!(!CronSpec::parse("* * 1 * 0,*").unwrap().day_and);
        assert!(!CronSpec::parse("0 0 1-31 * MON").unwrap().day_and);
    }

    #[test]
    fn feasibility() {
        assert!(CronSpec::parse("0 0 30 2 *").is_err());
        assert!(CronSpec::parse("0 0 30 2 1").is_ok());
        assert!(CronSpec::parse("0 0 31 4,5 *").is_ok());
    }

    #[test]
    fn python_whitespace() {
        assert!(CronSpec::parse("0\u{1c}0\u{a0}*\u{3000}* *").is_ok());
        let e = CronSpec::parse("@daily").unwrap_err();
        assert_eq!(e.field, None);
        assert!(e.help.unwrap().contains("0 0 * * *"));
    }

    #[test]
    fn huge_steps_saturate() {
        let huge = "3".repeat(60);
        assert_eq!(sets(&format!("* * * 7/{huge} *"))[3], vec![7]);
        assert_eq!(sets(&format!("*/{huge} * * * *"))[0], vec![0]);
        assert_eq!(sets(&format!("* * * * 1-5/{huge}"))[4], vec![1]);
    }

    #[test]
    fn bit_helpers() {
        assert_eq!(next_bit(0b1010, 2), Some(3));
        assert_eq!(next_bit(0b1010, 4), None);
        assert_eq!(next_bit(u64::MAX, 64), None);
        assert_eq!(prev_bit(0b1010, 2), Some(1));
        assert_eq!(prev_bit(0b1010, 0), None);
        assert_eq!(prev_bit(1 << 63, 200), Some(63));
    }

    proptest::proptest! {
        /// Parsing never panics, and an accepted pattern's sets stay inside
        /// the field ranges.
        #[test]
        fn parse_total(s in "[0-9A-Za-z*/,\\- #?@\u{a0}\u{17f}\u{1c}]{0,40}") {
            if let Ok(spec) = CronSpec::parse(&s) {
                proptest::prop_assert_eq!(spec.minutes >> 60, 0);
                proptest::prop_assert_eq!(spec.hours >> 24, 0);
                proptest::prop_assert_eq!(spec.days & 1, 0);
                proptest::prop_assert_eq!(spec.months & !0b1_1111_1111_1110, 0);
                proptest::prop_assert_eq!(spec.weekdays & 1, 0);
            }
        }

        /// Errors point into the text they were given.
        #[test]
        fn error_spans_are_inside(s in "\\PC{0,40}") {
            if let Err(e) = CronSpec::parse(&s) {
                proptest::prop_assert!(e.span.end <= s.len() && s.is_char_boundary(e.span.start) && s.is_char_boundary(e.span.end));
            }
        }
    }
}
