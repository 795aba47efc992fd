//! The named rendering `get-limits` shows for one stored entry
//! (docs/manifest.md, "Showing stored limits"): `1h9-17w1-5s500` → `* 9-17 * * MON-FRI`.
//!
//! The text is the reference's `to_cron` everywhere, except where the
//! reference's text would not parse back to the same sets (docs/semantics.md, B6).
//! There we render each offending day-of-week item as follows:
//!
//! | stored item | reference | ours |
//! |---|---|---|
//! | `0-7` (every day) | `SUN-SUN` (Sunday only) | `SUN-SAT` |
//! | `1-7` | `MON-SUN` (unparseable) | `MON-SAT,SUN` |
//! | `5-7` | `FRI-SUN` (unparseable) | `FRI-SAT,SUN` |
//! | `6-7` | `SAT-SUN` (unparseable) | `SAT,SUN` |
//! | `7/2`, `7/1` | `SUN/2`, `SUN/1` (other days) | `SUN` |
//! | `1-7/2` | `MON-SUN/2` (unparseable) | `MON,WED,FRI,SUN` |
//!
//! That is: a range ending at 7 becomes the range to SAT plus `,SUN`; any
//! other item whose named form means something else is written as the list
//! of its days, Monday first and Sunday last, with runs of three or more as
//! ranges. Such items never start with `*`, so the AND/OR day rule is kept.
//! Month items are checked the same way and left numeric if naming would
//! change them (no such case is known).

use crate::cron::{parse_field, CronField, DAY_NAMES, MONTH_NAMES};
use crate::encoding::{decimal_value, strip_version, tokenize, DecodeError, ENTRY};

/// Render one stored entry (with its version prefix) as a named 5-field cron.
/// Modifier tags are accepted and ignored.
pub fn to_cron(compact_entry: &str) -> Result<String, DecodeError> {
    let rest = strip_version(compact_entry, ENTRY)?;
    let tokens = tokenize(rest)?;
    // Fields come from the tokens, not from splitting text: values may
    // contain spaces (the reference keeps them).
    let value = |tag: char| tokens.iter().find(|(c, _)| *c == tag).map(|(_, v)| *v);
    let minute = value('m').unwrap_or("*");
    let hour = value('h').unwrap_or("*");
    let dom = value('D').unwrap_or("*");
    // Month items: digit runs become names; letters are left as stored.
    let month = match value('M') {
        None => "*".to_string(),
        Some(v) => render_items(v, CronField::Month, month_name, |item| item.to_string()),
    };
    // Day-of-week items: digit runs become names (0 and 7 are SUN); letters
    // are left as stored (`1wtue` shows `tue`, as the reference does).
    let dow = match value('w') {
        None => "*".to_string(),
        Some(v) => render_items(v, CronField::DayOfWeek, day_name, fix_weekday_item),
    };
    Ok(format!("{minute} {hour} {dom} {month} {dow}"))
}

/// Apply `name` to each digit run in the part of `item` before its first `/`.
/// Digits are Unicode decimal digits, as Python's `\\d` and `int()` read them
/// (the reference renders a stored fullwidth `５` as FRI).
fn name_digit_runs(item: &str, name: impl Fn(u128) -> Option<&'static str>) -> String {
    let (head, tail) = match item.find('/') {
        Some(i) => item.split_at(i),
        None => (item, ""),
    };
    let mut out = String::new();
    let mut run = String::new();
    let mut value: u128 = 0;
    for c in head.chars() {
        if let Some(d) = decimal_value(c) {
            run.push(c);
            value = value.saturating_mul(10).saturating_add(d as u128);
            continue;
        }
        flush_run(&mut run, &mut value, &mut out, &name);
        out.push(c);
    }
    flush_run(&mut run, &mut value, &mut out, &name);
    out.push_str(tail);
    out
}

fn flush_run(
    run: &mut String,
    value: &mut u128,
    out: &mut String,
    name: &impl Fn(u128) -> Option<&'static str>,
) {
    if !run.is_empty() {
        match name(*value) {
            Some(n) => out.push_str(n),
            None => out.push_str(run),
        }
        run.clear();
    }
    *value = 0;
}

fn month_name(v: u128) -> Option<&'static str> {
    (1..=12).contains(&v).then(|| MONTH_NAMES[(v - 1) as usize])
}

fn day_name(v: u128) -> Option<&'static str> {
    match v {
        0 | 7 => Some("SUN"),
        1..=6 => Some(DAY_NAMES[v as usize]),
        _ => None,
    }
}

/// One field's comma items with their digit runs named by `name`; an item
/// whose named form would mean another set shows `otherwise(item)` instead.
fn render_items(
    v: &str,
    field: CronField,
    name: fn(u128) -> Option<&'static str>,
    otherwise: fn(&str) -> String,
) -> String {
    let items: Vec<String> = v
        .split(',')
        .map(|item| {
            let named = name_digit_runs(item, name);
            match same_set(item, &named, field) {
                Some(false) => otherwise(item),
                _ => named,
            }
        })
        .collect();
    items.join(",")
}

/// Sunday folded to ISO 7: the set the matcher uses.
fn fold(mask: u64, field: CronField) -> u64 {
    if field == CronField::DayOfWeek {
        (mask & 0xFE) | ((mask & 1) << 7)
    } else {
        mask
    }
}

/// Whether `named` means the same set as the stored item; None when the
/// stored item itself does not parse (then there is nothing to preserve).
/// Both are read as the parser reads them, upper-cased.
fn same_set(stored: &str, named: &str, field: CronField) -> Option<bool> {
    let want = fold(parse_field(&stored.to_uppercase(), field)?, field);
    Some(parse_field(&named.to_uppercase(), field).map(|m| fold(m, field)) == Some(want))
}

/// A readable, correct form of a weekday item whose reference rendering
/// would change its meaning (see the module table).
fn fix_weekday_item(numeric: &str) -> String {
    let up = numeric.to_uppercase();
    let Some(mask) = parse_field(&up, CronField::DayOfWeek) else {
        return numeric.to_string();
    };
    if !up.contains('/') {
        if let Some((a, b)) = up.split_once('-') {
            let num = |s: &str| {
                s.parse::<u32>()
                    .ok()
                    .or_else(|| DAY_NAMES.iter().position(|n| *n == s).map(|i| i as u32))
            };
            if let (Some(a), Some(7)) = (num(a), num(b)) {
                return match a {
                    0 => "SUN-SAT".to_string(),
                    7 => "SUN".to_string(),
                    6 => "SAT,SUN".to_string(),
                    a => format!("{}-SAT,SUN", DAY_NAMES[a as usize]),
                };
            }
        }
    }
    list_days(fold(mask, CronField::DayOfWeek))
}

/// Days of an ISO weekday mask, Monday first, Sunday last; runs of three or
/// more Monday..Saturday as ranges.
fn list_days(mask: u64) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut d = 1u32;
    while d <= 6 {
        if mask & (1 << d) == 0 {
            d += 1;
            continue;
        }
        let start = d;
        while d < 6 && mask & (1 << (d + 1)) != 0 {
            d += 1;
        }
        match d - start {
            0 => parts.push(DAY_NAMES[start as usize].to_string()),
            1 => {
                parts.push(DAY_NAMES[start as usize].to_string());
                parts.push(DAY_NAMES[d as usize].to_string());
            }
            _ => parts.push(format!(
                "{}-{}",
                DAY_NAMES[start as usize], DAY_NAMES[d as usize]
            )),
        }
        d += 1;
    }
    if mask & (1 << 7) != 0 {
        parts.push("SUN".to_string());
    }
    parts.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each stored entry renders to the expected cron text.
    fn assert_renders(cases: &[(&str, &str)]) {
        for (stored, cron) in cases {
            assert_eq!(to_cron(stored).unwrap(), *cron, "{stored}");
        }
    }

    #[test]
    fn reference_text() {
        assert_renders(&[
            ("1h9-17w1-5s500", "* 9-17 * * MON-FRI"),
            ("1m0h0M1,7", "0 0 * JAN,JUL *"),
            ("1M1/2,5", "* * * JAN/2,MAY *"),
            ("1w1-5/2,0", "* * * * MON-FRI/2,SUN"),
            ("1m0;h1", "0; 1 * * *"),
            ("1Mjan", "* * * j *"),
            ("1MFeb-4", "* * * Feb-APR *"),
            ("1wtue", "* * * * tue"),
            ("1w0,Sun", "* * * * SUN,Sun"),
            ("1w\u{661}-\u{665}", "* * * * MON-FRI"),
            ("1w8", "* * * * 8"),
        ]);
    }

    #[test]
    fn b6_fixes() {
        assert_renders(&[
            ("1w0-7", "* * * * SUN-SAT"),
            ("1w1-7", "* * * * MON-SAT,SUN"),
            ("1w5-7", "* * * * FRI-SAT,SUN"),
            ("1w6-7", "* * * * SAT,SUN"),
            ("1w7/2", "* * * * SUN"),
            ("1w7/1", "* * * * SUN"),
            ("1w1-7/2", "* * * * MON,WED,FRI,SUN"),
            // The reference is accidentally right here: SUN-SUN/2 is 0/2.
            ("1w0-7/2", "* * * * SUN-SUN/2"),
            ("1wSun-7", "* * * * SUN-SAT"),
        ]);
    }
}

#[cfg(test)]
mod round_trip {
    use super::*;
    use crate::cron::CronSpec;
    use crate::encoding::{encode_reset, strategies::cron};
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(
            std::env::var("ZAEL_PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(1024)
        ))]

        /// Whatever we render parses back to the sets that were stored
        /// (the property the reference's `to_cron` lacks; docs/semantics.md, B6).
        #[test]
        fn render_parse(c in cron()) {
            let Ok(spec) = CronSpec::parse(&c) else { return Ok(()) };
            let enc = encode_reset(&[c.as_str()]).unwrap();
            let named = to_cron(&enc).unwrap();
            prop_assert_eq!(CronSpec::parse(&named).ok(), Some(spec), "{} -> {} -> {}", c, enc, named);
        }

        /// Rendering never panics on arbitrary stored text.
        #[test]
        fn render_total(s in "1\\PC{0,30}") {
            let _ = to_cron(&s);
        }
    }
}
