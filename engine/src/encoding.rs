//! The compact storage encoding of schedules and reset schedules, both ways
//! (docs/semantics.md, "Compact encoding"; docs/storage.md, "Config items"):
//! `1h9-17w1-5s500;h0-6c100a50`.
//!
//! This is what a zae-limiter 0.17 limiter reads from a config item, so the
//! encoder writes exactly what the reference writes, and the decoder accepts
//! exactly what the reference accepts (including Python `int()`'s leniency:
//! `+5`, `1_000`, fullwidth digits, surrounding whitespace).
//!
//! Two deliberate differences, both to keep stored values readable:
//! * a reset schedule that is a single `* * * * *` entry is written `1m*`,
//!   not the reference's `1`, which no reader (not even the reference) can
//!   decode (docs/semantics.md, B5). Decoding `1` is still an error.
//! * names are recognised after full Unicode upper-casing, as the parser
//!   does, so `ſep` encodes as `9` where the reference raises (docs/semantics.md, B7).

use crate::cron::{python_split, CronError, CronSpec, DAY_NAMES, MONTH_NAMES};

pub use crate::params::{MAX_PERIOD_SECONDS, MAX_TOKENS};
/// Largest scale (10^6), in per-mille.
pub const MAX_SCALE_PERMILLE: u64 = 1_000_000_000;

/// What a schedule entry changes while its window is active.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Modifier {
    /// Multiply capacity and refill by `permille / 1000`.
    Scale { permille: u64 },
    /// Replace the set fields; unset ones fall back to the base limit.
    Absolute {
        capacity: Option<u64>,
        refill_amount: Option<u64>,
        refill_period_seconds: Option<u64>,
    },
}

impl Modifier {
    /// The values an absolute modifier sets, in stored order, each with its
    /// compact tag and its manifest key; none for a scale.
    pub fn absolute_values(&self) -> impl Iterator<Item = (char, &'static str, u64)> {
        let fields = match *self {
            Modifier::Scale { .. } => [None; 3],
            Modifier::Absolute {
                capacity,
                refill_amount,
                refill_period_seconds,
            } => [capacity, refill_amount, refill_period_seconds],
        };
        [
            ('c', "capacity"),
            ('a', "refill_amount"),
            ('p', "refill_period_seconds"),
        ]
        .into_iter()
        .zip(fields)
        .filter_map(|((tag, key), v)| Some((tag, key, v?)))
    }

    /// A scale modifier from the user's float, validated as the reference's
    /// `ScheduleEntry` does (finite, > 0, ≤ 10^6) and stored as per-mille.
    pub fn scale(scale: f64) -> Result<Modifier, EntryError> {
        if !scale.is_finite() {
            return Err(EntryError::NotFinite {
                value: scale.to_string(),
            });
        }
        if scale <= 0.0 {
            return Err(EntryError::NotPositive {
                field: "scale",
                value: scale.to_string(),
            });
        }
        if scale > 1e6 {
            return Err(EntryError::TooLarge {
                field: "scale",
                max: 1_000_000,
                value: scale.to_string(),
            });
        }
        Ok(Modifier::Scale {
            permille: scale_permille(scale),
        })
    }

    /// Build and validate a modifier from a declaration's optional fields,
    /// as the reference's `ScheduleEntry` does: exactly one of `scale` or
    /// the absolute fields, then finiteness, positivity and upper bounds.
    /// Integers are i128 so a negative or oversized input gets its own error.
    pub fn from_fields(
        scale: Option<f64>,
        capacity: Option<i128>,
        refill_amount: Option<i128>,
        refill_period_seconds: Option<i128>,
    ) -> Result<Modifier, EntryError> {
        let absolute =
            capacity.is_some() || refill_amount.is_some() || refill_period_seconds.is_some();
        match (scale, absolute) {
            (Some(_), true) | (None, false) => Err(EntryError::ExactlyOne),
            (Some(s), false) => Modifier::scale(s),
            (None, true) => {
                check_bound("capacity", capacity, MAX_TOKENS)?;
                check_bound("refill_amount", refill_amount, MAX_TOKENS)?;
                check_bound(
                    "refill_period_seconds",
                    refill_period_seconds,
                    MAX_PERIOD_SECONDS,
                )?;
                // In range 1..=10^15 after the checks above, so the casts are exact.
                Ok(Modifier::Absolute {
                    capacity: capacity.map(|v| v as u64),
                    refill_amount: refill_amount.map(|v| v as u64),
                    refill_period_seconds: refill_period_seconds.map(|v| v as u64),
                })
            }
        }
    }

    /// What the entry does to a limit's parameters, as every limiter applies
    /// a stored entry: a scale as `permille / 1000` (a float), absolute
    /// fields as they are.
    pub fn params(&self) -> crate::params::Modifier {
        use crate::params::{Modifier as P, Scale};
        match *self {
            Modifier::Scale { permille } => P::Scale(Scale::Float(permille as f64 / 1000.0)),
            Modifier::Absolute {
                capacity,
                refill_amount,
                refill_period_seconds,
            } => P::Absolute {
                capacity: capacity.map(i128::from),
                refill_amount: refill_amount.map(i128::from),
                refill_period_seconds: refill_period_seconds.map(i128::from),
            },
        }
    }

    /// The scale as the reference's decoder sees it: `permille / 1000` as f64.
    pub fn scale_value(&self) -> Option<f64> {
        match self {
            Modifier::Scale { permille } => Some(*permille as f64 / 1000.0),
            Modifier::Absolute { .. } => None,
        }
    }

    /// Check the bounds a stored entry must satisfy (docs/semantics.md, "Limits"): exactly one
    /// kind of modifier, every value positive and within its bound.
    pub fn validate(&self) -> Result<(), EntryError> {
        match *self {
            Modifier::Scale { permille } => {
                if permille == 0 {
                    return Err(EntryError::NotPositive {
                        field: "scale",
                        value: "0.0".into(),
                    });
                }
                if permille > MAX_SCALE_PERMILLE {
                    return Err(EntryError::TooLarge {
                        field: "scale",
                        max: 1_000_000,
                        value: (permille as f64 / 1000.0).to_string(),
                    });
                }
                Ok(())
            }
            Modifier::Absolute {
                capacity,
                refill_amount,
                refill_period_seconds,
            } => {
                if capacity.is_none() && refill_amount.is_none() && refill_period_seconds.is_none()
                {
                    return Err(EntryError::ExactlyOne);
                }
                check_bound("capacity", capacity.map(i128::from), MAX_TOKENS)?;
                check_bound("refill_amount", refill_amount.map(i128::from), MAX_TOKENS)?;
                check_bound(
                    "refill_period_seconds",
                    refill_period_seconds.map(i128::from),
                    MAX_PERIOD_SECONDS,
                )
            }
        }
    }
}

fn check_bound(field: &'static str, v: Option<i128>, max: u64) -> Result<(), EntryError> {
    match v {
        Some(v) if v <= 0 => Err(EntryError::NotPositive {
            field,
            value: v.to_string(),
        }),
        Some(v) if v > max as i128 => Err(EntryError::TooLarge {
            field,
            max,
            value: v.to_string(),
        }),
        _ => Ok(()),
    }
}

/// `max(1, round_half_even(scale × 1000))` on the f64 product, as the
/// reference stores a scale. Callers validate the scale first; a NaN or
/// negative input gives 1 and a huge one saturates, never a panic.
pub fn scale_permille(scale: f64) -> u64 {
    let p = (scale * 1000.0).round_ties_even();
    if p.is_nan() || p < 1.0 {
        1
    } else {
        p as u64
    }
}

/// A schedule entry's values are out of bounds (reference `ScheduleEntry` checks).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EntryError {
    #[error("a schedule entry must set exactly one of `scale` or the absolute fields (`capacity`/`refill_amount`/`refill_period_seconds`)")]
    ExactlyOne,
    #[error("scale must be a finite number, got {value}")]
    NotFinite { value: String },
    #[error("{field} must be positive, got {value}")]
    NotPositive { field: &'static str, value: String },
    #[error("{field} must be at most {max}, got {value}")]
    TooLarge {
        field: &'static str,
        max: u64,
        value: String,
    },
}

/// One decoded entry: the 5-field cron as the reference rebuilds it, its
/// parsed sets, and the modifier (None for a reset entry).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub cron: String,
    pub spec: CronSpec,
    pub modifier: Option<Modifier>,
}

/// Why a schedule could not be encoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EncodeError {
    #[error("schedule entry {index}: invalid cron expression '{cron}': {source}")]
    Cron {
        index: usize,
        cron: String,
        source: CronError,
    },
    #[error("schedule entry {index}: {source}")]
    Entry { index: usize, source: EntryError },
}

/// Why a stored compact string could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("{kind} '{value}' carries no version marker; every stored schedule begins with its encoding version (1)")]
    NoVersion { kind: &'static str, value: String },
    #[error("{kind} '{value}' is a version marker with no entries after it{}", if *.kind == RESET { " (zae-limiter 0.17 stores a lone `* * * * *` reset this way and cannot read it back; re-apply the limit to rewrite it)" } else { "" })]
    NoEntries { kind: &'static str, value: String },
    #[error("{kind} '{value}' has an invalid version marker '{version}'")]
    InvalidVersion {
        kind: &'static str,
        value: String,
        version: String,
    },
    #[error("{kind} '{value}' is encoding version {version}; this build reads up to version 1 (it was written by a newer client)")]
    NewerVersion {
        kind: &'static str,
        value: String,
        version: String,
    },
    #[error("malformed compact schedule entry '{entry}': cannot parse from offset {offset}")]
    Malformed { entry: String, offset: usize },
    #[error("duplicate '{tag}' tag in compact schedule entry '{entry}'")]
    DuplicateTag { tag: char, entry: String },
    #[error("reset schedule entry '{entry}' carries the modifier token(s) {tags:?}; a reset overrides no parameters")]
    ModifierOnReset { entry: String, tags: Vec<char> },
    #[error("compact schedule entry '{entry}': '{value}' is not a whole number (tag '{tag}')")]
    BadNumber {
        entry: String,
        tag: char,
        value: String,
    },
    #[error("invalid cron expression '{cron}': {source}")]
    Cron { cron: String, source: CronError },
    #[error("{source}")]
    Entry { source: EntryError },
}

const SCHEDULE: &str = "compact schedule";
const RESET: &str = "compact reset schedule";
/// Kind used by [`crate::render::to_cron`] messages.
pub(crate) const ENTRY: &str = "compact schedule entry";

const TAGS: &str = "mhDMwscap";
const FIELD_TAGS: [char; 5] = ['m', 'h', 'D', 'M', 'w'];

/// The tagged field part of one cron (no version, no modifiers): fields that
/// are exactly `*` are omitted, month names become numbers, weekdays follow
/// the reference's rules (bare name → number with SUN = 7, bare `0` → `7`,
/// names inside ranges and steps → numbers with SUN = 0, digits as typed).
pub fn encode_cron(cron: &str) -> Result<String, CronError> {
    CronSpec::parse(cron)?;
    let fields = python_split(cron);
    let mut out = String::new();
    for (i, (_, raw)) in fields.iter().enumerate() {
        let up = raw.to_uppercase();
        if up == "*" {
            continue;
        }
        out.push(FIELD_TAGS[i]);
        match i {
            3 => out.push_str(&replace_names(&up, |n| {
                month_number(n).map(|v| v.to_string())
            })),
            4 => {
                let items: Vec<String> = up.split(',').map(encode_weekday_item).collect();
                out.push_str(&items.join(","));
            }
            _ => out.push_str(raw),
        }
    }
    Ok(out)
}

fn month_number(name: &str) -> Option<u32> {
    MONTH_NAMES
        .iter()
        .position(|n| *n == name)
        .map(|i| i as u32 + 1)
}

fn day_number(name: &str) -> Option<u32> {
    DAY_NAMES.iter().position(|n| *n == name).map(|i| i as u32)
}

/// One comma item of the weekday field, encoded.
///
/// The bare-name check upper-cases with Unicode rules (`ſat` is SAT); inside
/// ranges and steps only ASCII letter runs are names, and unknown runs are
/// kept as typed.
pub(crate) fn encode_weekday_item(item: &str) -> String {
    if let Some(d) = day_number(&item.to_uppercase()) {
        return if d == 0 {
            "7".to_string()
        } else {
            d.to_string()
        };
    }
    if item == "0" {
        return "7".to_string();
    }
    replace_names(item, |n| day_number(n).map(|v| v.to_string()))
}

/// Replace each run of ASCII letters for which `f` knows a number; leave
/// other runs as they are.
pub(crate) fn replace_names(s: &str, f: impl Fn(&str) -> Option<String>) -> String {
    let mut out = String::with_capacity(s.len());
    let mut run = String::new();
    for c in s.chars() {
        if c.is_ascii_alphabetic() {
            run.push(c);
            continue;
        }
        if !run.is_empty() {
            out.push_str(&f(&run.to_ascii_uppercase()).unwrap_or_else(|| run.clone()));
            run.clear();
        }
        out.push(c);
    }
    if !run.is_empty() {
        out.push_str(&f(&run.to_ascii_uppercase()).unwrap_or(run));
    }
    out
}

fn encode_modifier(m: &Modifier, out: &mut String) {
    match *m {
        Modifier::Scale { permille } => {
            out.push('s');
            out.push_str(&permille.to_string());
        }
        Modifier::Absolute { .. } => {
            for (tag, _, v) in m.absolute_values() {
                out.push(tag);
                out.push_str(&v.to_string());
            }
        }
    }
}

/// Encode a parameter schedule (cron text, modifier) in order: `"1"` then
/// the entries joined by `;`. An empty schedule is `""`. Every cron must
/// parse and every modifier must be within bounds.
pub fn encode_schedule(entries: &[(&str, Modifier)]) -> Result<String, EncodeError> {
    if entries.is_empty() {
        return Ok(String::new());
    }
    let mut parts = Vec::with_capacity(entries.len());
    for (index, (cron, m)) in entries.iter().enumerate() {
        let mut part = encode_cron(cron).map_err(|source| EncodeError::Cron {
            index,
            cron: cron.to_string(),
            source,
        })?;
        m.validate()
            .map_err(|source| EncodeError::Entry { index, source })?;
        encode_modifier(m, &mut part);
        parts.push(part);
    }
    Ok(format!("1{}", parts.join(";")))
}

/// Encode a reset schedule: the same format without modifiers (`1m0h0D1`).
/// A lone `* * * * *` is written `1m*` (readable), not `1` (docs/semantics.md, B5).
pub fn encode_reset(crons: &[&str]) -> Result<String, EncodeError> {
    if crons.is_empty() {
        return Ok(String::new());
    }
    let mut parts = Vec::with_capacity(crons.len());
    for (index, cron) in crons.iter().enumerate() {
        parts.push(encode_cron(cron).map_err(|source| EncodeError::Cron {
            index,
            cron: cron.to_string(),
            source,
        })?);
    }
    if parts.len() == 1 && parts[0].is_empty() {
        return Ok("1m*".to_string());
    }
    Ok(format!("1{}", parts.join(";")))
}

/// Split the version prefix off a stored string and check it; returns the rest.
pub(crate) fn strip_version<'a>(s: &'a str, kind: &'static str) -> Result<&'a str, DecodeError> {
    let digits = s.bytes().take_while(|b| b.is_ascii_digit()).count();
    if digits == 0 {
        return Err(DecodeError::NoVersion {
            kind,
            value: s.to_string(),
        });
    }
    let (ver, rest) = s.split_at(digits);
    if rest.is_empty() {
        return Err(DecodeError::NoEntries {
            kind,
            value: s.to_string(),
        });
    }
    let v = ver.trim_start_matches('0');
    if v.is_empty() {
        return Err(DecodeError::InvalidVersion {
            kind,
            value: s.to_string(),
            version: ver.into(),
        });
    }
    if v != "1" {
        return Err(DecodeError::NewerVersion {
            kind,
            value: s.to_string(),
            version: v.into(),
        });
    }
    Ok(rest)
}

/// Tokenise one entry completely into (tag, value) pairs; values are runs of
/// one or more characters that are not tag letters. Duplicate tags are errors.
pub(crate) fn tokenize(entry: &str) -> Result<Vec<(char, &str)>, DecodeError> {
    let mut out: Vec<(char, &str)> = Vec::new();
    let mut it = entry.char_indices().peekable();
    let mut char_pos = 0usize;
    while let Some((i, c)) = it.next() {
        let tag_pos = char_pos;
        char_pos += 1;
        if !TAGS.contains(c) {
            return Err(DecodeError::Malformed {
                entry: entry.to_string(),
                offset: tag_pos,
            });
        }
        let start = i + c.len_utf8();
        let mut end = start;
        while let Some(&(j, d)) = it.peek() {
            if TAGS.contains(d) {
                break;
            }
            end = j + d.len_utf8();
            char_pos += 1;
            it.next();
        }
        if end == start {
            return Err(DecodeError::Malformed {
                entry: entry.to_string(),
                offset: tag_pos,
            });
        }
        if out.iter().any(|(t, _)| *t == c) {
            return Err(DecodeError::DuplicateTag {
                tag: c,
                entry: entry.to_string(),
            });
        }
        out.push((c, &entry[start..end]));
    }
    Ok(out)
}

/// The cron the reference rebuilds from tags: `m h D M w`, `*` where absent.
pub(crate) fn rebuild_cron(tokens: &[(char, &str)]) -> String {
    FIELD_TAGS
        .iter()
        .map(|t| {
            tokens
                .iter()
                .find(|(c, _)| c == t)
                .map(|(_, v)| *v)
                .unwrap_or("*")
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn parse_cron(cron: String) -> Result<(String, CronSpec), DecodeError> {
    match CronSpec::parse(&cron) {
        Ok(spec) => Ok((cron, spec)),
        Err(source) => Err(DecodeError::Cron { cron, source }),
    }
}

/// Decodes each `;`-separated entry of the stored `kind` schedule `s` with
/// `entry` (given the entry's text and tokens), stopping at the first error.
/// `""` is the empty schedule.
fn decode_entries(
    s: &str,
    kind: &'static str,
    entry: impl Fn(&str, Vec<(char, &str)>) -> Result<Entry, DecodeError>,
) -> Result<Vec<Entry>, DecodeError> {
    if s.is_empty() {
        return Ok(Vec::new());
    }
    let rest = strip_version(s, kind)?;
    rest.split(';')
        .map(|part| entry(part, tokenize(part)?))
        .collect()
}

/// Decode a stored parameter schedule. `""` is the empty schedule.
pub fn decode_schedule(s: &str) -> Result<Vec<Entry>, DecodeError> {
    decode_entries(s, SCHEDULE, |part, tokens| {
        let num = |tag: char| -> Result<Option<i128>, DecodeError> {
            match tokens.iter().find(|(c, _)| *c == tag) {
                None => Ok(None),
                Some((_, v)) => python_int(v)
                    .map(Some)
                    .ok_or_else(|| DecodeError::BadNumber {
                        entry: part.to_string(),
                        tag,
                        value: v.to_string(),
                    }),
            }
        };
        let (s_v, c_v, a_v, p_v) = (num('s')?, num('c')?, num('a')?, num('p')?);
        let (cron, spec) = parse_cron(rebuild_cron(&tokens))?;
        let entry_err = |source| DecodeError::Entry { source };
        let modifier = match (s_v, c_v.is_some() || a_v.is_some() || p_v.is_some()) {
            (Some(_), true) | (None, false) => return Err(entry_err(EntryError::ExactlyOne)),
            (Some(p), false) => {
                if p <= 0 {
                    return Err(entry_err(EntryError::NotPositive {
                        field: "scale",
                        value: format!("{}", p as f64 / 1000.0),
                    }));
                }
                if p > MAX_SCALE_PERMILLE as i128 {
                    return Err(entry_err(EntryError::TooLarge {
                        field: "scale",
                        max: 1_000_000,
                        value: format!("{}", p as f64 / 1000.0),
                    }));
                }
                Modifier::Scale { permille: p as u64 }
            }
            (None, true) => {
                check_bound("capacity", c_v, MAX_TOKENS).map_err(entry_err)?;
                check_bound("refill_amount", a_v, MAX_TOKENS).map_err(entry_err)?;
                check_bound("refill_period_seconds", p_v, MAX_PERIOD_SECONDS).map_err(entry_err)?;
                Modifier::Absolute {
                    capacity: c_v.map(|v| v as u64),
                    refill_amount: a_v.map(|v| v as u64),
                    refill_period_seconds: p_v.map(|v| v as u64),
                }
            }
        };
        Ok(Entry {
            cron,
            spec,
            modifier: Some(modifier),
        })
    })
}

/// Decode a stored reset schedule; any modifier tag is an error. `""` is empty.
pub fn decode_reset(s: &str) -> Result<Vec<Entry>, DecodeError> {
    decode_entries(s, RESET, |part, tokens| {
        let mut mods: Vec<char> = tokens
            .iter()
            .map(|(c, _)| *c)
            .filter(|c| "scap".contains(*c))
            .collect();
        if !mods.is_empty() {
            mods.sort_unstable();
            return Err(DecodeError::ModifierOnReset {
                entry: part.to_string(),
                tags: mods,
            });
        }
        let (cron, spec) = parse_cron(rebuild_cron(&tokens))?;
        Ok(Entry {
            cron,
            spec,
            modifier: None,
        })
    })
}

/// Unicode decimal digit zeros (Python 3.11, Unicode 14): each starts a run of ten.
const DIGIT_ZEROS: [u32; 66] = [
    0x30, 0x660, 0x6F0, 0x7C0, 0x966, 0x9E6, 0xA66, 0xAE6, 0xB66, 0xBE6, 0xC66, 0xCE6, 0xD66,
    0xDE6, 0xE50, 0xED0, 0xF20, 0x1040, 0x1090, 0x17E0, 0x1810, 0x1946, 0x19D0, 0x1A80, 0x1A90,
    0x1B50, 0x1BB0, 0x1C40, 0x1C50, 0xA620, 0xA8D0, 0xA900, 0xA9D0, 0xA9F0, 0xAA50, 0xABF0, 0xFF10,
    0x104A0, 0x10D30, 0x11066, 0x110F0, 0x11136, 0x111D0, 0x112F0, 0x11450, 0x114D0, 0x11650,
    0x116C0, 0x11730, 0x118E0, 0x11950, 0x11C50, 0x11D50, 0x11DA0, 0x16A60, 0x16AC0, 0x16B50,
    0x1D7CE, 0x1D7D8, 0x1D7E2, 0x1D7EC, 0x1D7F6, 0x1E140, 0x1E2F0, 0x1E950, 0x1FBF0,
];

/// The value of a Unicode decimal digit (Python's `\\d` and `int()`).
pub(crate) fn decimal_value(c: char) -> Option<u32> {
    let cp = c as u32;
    DIGIT_ZEROS
        .iter()
        .find(|z| cp >= **z && cp < **z + 10)
        .map(|z| cp - z)
}

/// Python `int(text)` in base 10: surrounding whitespace, an optional sign,
/// Unicode decimal digits with single `_` between digits. Values beyond
/// i128 saturate (they fail every bound check anyway).
pub fn python_int(text: &str) -> Option<i128> {
    let t = text.trim_matches(crate::cron::is_python_space);
    let (neg, body) = match t.chars().next() {
        Some('+') => (false, &t[1..]),
        Some('-') => (true, &t[1..]),
        _ => (false, t),
    };
    if body.is_empty() {
        return None;
    }
    let mut acc: i128 = 0;
    let mut prev_digit = false;
    for c in body.chars() {
        if c == '_' {
            if !prev_digit {
                return None;
            }
            prev_digit = false;
            continue;
        }
        let d = decimal_value(c)?;
        acc = acc.saturating_mul(10).saturating_add(d as i128);
        prev_digit = true;
    }
    if !prev_digit {
        return None;
    }
    Some(if neg { -acc } else { acc })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permille_rounds_half_even() {
        for (scale, permille) in [
            (2.3, 2300),
            (0.0015, 2),
            (0.0025, 2),
            (0.0005, 1),
            (1e-300, 1),
            (f64::NAN, 1),
        ] {
            assert_eq!(scale_permille(scale), permille, "{scale}");
        }
    }

    #[test]
    fn python_int_leniency() {
        for (text, want) in [
            ("+5", Some(5)),
            ("1_000", Some(1000)),
            ("\u{ff15}", Some(5)),
            (" 5 ", Some(5)),
            ("-5", Some(-5)),
        ] {
            assert_eq!(python_int(text), want, "{text:?}");
        }
        for bad in ["1.5", "1__0", "_1", "1_", "", "-"] {
            assert_eq!(python_int(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn lone_wildcard_reset_is_readable() {
        let s = encode_reset(&["* * * * *"]).unwrap();
        assert_eq!(s, "1m*");
        let d = decode_reset(&s).unwrap();
        assert_eq!(d[0].cron, "* * * * *");
        assert!(matches!(
            decode_reset("1"),
            Err(DecodeError::NoEntries { .. })
        ));
    }

    #[test]
    fn unicode_names_encode() {
        assert_eq!(encode_cron("* * * ſep *").unwrap(), "M9");
        assert_eq!(encode_cron("* * * * ſun-MON").unwrap(), "w0-1");
    }
}

/// Strategies shared by the round-trip property tests (here and in `render`).
#[cfg(test)]
pub(crate) mod strategies {
    use crate::cron::{CronField, DAY_NAMES, MONTH_NAMES};
    use proptest::prelude::*;

    /// One value as a user might type it: a number (sometimes zero-padded),
    /// or in month/day-of-week a name in random case.
    fn value(field: CronField) -> BoxedStrategy<(u32, String)> {
        let (lo, hi) = field.bounds();
        let number =
            (lo..=hi, 0usize..3).prop_map(|(v, pad)| (v, format!("{}{v}", "0".repeat(pad))));
        let names: Option<&'static [&'static str]> = match field {
            CronField::Month => Some(&MONTH_NAMES),
            CronField::DayOfWeek => Some(&DAY_NAMES),
            _ => None,
        };
        match names {
            None => number.boxed(),
            Some(names) => {
                let offset = if field == CronField::Month { 1 } else { 0 };
                let name = (0..names.len(), any::<u8>()).prop_map(move |(i, case)| {
                    let n: String = names[i]
                        .chars()
                        .enumerate()
                        .map(|(k, c)| {
                            if case & (1 << k) != 0 {
                                c.to_ascii_lowercase()
                            } else {
                                c
                            }
                        })
                        .collect();
                    (i as u32 + offset, n)
                });
                prop_oneof![number, name].boxed()
            }
        }
    }

    /// One comma item: `*`, a value, a range, or either with a step.
    fn item(field: CronField) -> BoxedStrategy<String> {
        let single = value(field).prop_map(|(_, t)| t);
        let range = (value(field), value(field)).prop_map(|((a, ta), (b, tb))| {
            if a <= b {
                format!("{ta}-{tb}")
            } else {
                format!("{tb}-{ta}")
            }
        });
        let base = prop_oneof![Just("*".to_string()), single, range];
        (base, proptest::option::of(1u32..70))
            .prop_map(|(b, step)| match step {
                Some(s) => format!("{b}/{s}"),
                None => b,
            })
            .boxed()
    }

    fn field(f: CronField) -> BoxedStrategy<String> {
        prop_oneof![
            2 => Just("*".to_string()),
            3 => proptest::collection::vec(item(f), 1..4).prop_map(|v| v.join(",")),
        ]
        .boxed()
    }

    /// Five fields joined by single spaces; mostly valid patterns (a few are
    /// refused, e.g. a range ending at SUN or day 31 in February with AND).
    pub(crate) fn cron() -> impl Strategy<Value = String> {
        (
            field(CronField::Minute),
            field(CronField::Hour),
            field(CronField::DayOfMonth),
            field(CronField::Month),
            field(CronField::DayOfWeek),
        )
            .prop_map(|(a, b, c, d, e)| format!("{a} {b} {c} {d} {e}"))
    }
}

#[cfg(test)]
mod round_trip {
    use super::strategies::cron;
    use super::*;
    use proptest::prelude::*;

    fn modifier() -> impl Strategy<Value = Modifier> {
        let opt = |max: u64| proptest::option::of(1..=max);
        prop_oneof![
            (1..=MAX_SCALE_PERMILLE).prop_map(|permille| Modifier::Scale { permille }),
            (opt(MAX_TOKENS), opt(MAX_TOKENS), opt(MAX_PERIOD_SECONDS))
                .prop_filter("at least one absolute field", |(c, a, p)| {
                    c.is_some() || a.is_some() || p.is_some()
                })
                .prop_map(|(c, a, p)| Modifier::Absolute {
                    capacity: c,
                    refill_amount: a,
                    refill_period_seconds: p,
                }),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(
            std::env::var("ZAEL_PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(512)
        ))]

        /// encode → decode gives the same sets and modifiers, and encoding
        /// the decoded text again gives the same string.
        #[test]
        fn schedule_encode_decode(crons in proptest::collection::vec((cron(), modifier()), 1..4)) {
            let valid: Vec<(&str, Modifier)> = crons
                .iter()
                .filter(|(c, _)| CronSpec::parse(c).is_ok())
                .map(|(c, m)| (c.as_str(), *m))
                .collect();
            prop_assume!(!valid.is_empty());
            let enc = encode_schedule(&valid).unwrap();
            let dec = decode_schedule(&enc).unwrap();
            prop_assert_eq!(dec.len(), valid.len());
            for ((c, m), e) in valid.iter().zip(&dec) {
                prop_assert_eq!(&CronSpec::parse(c).unwrap(), &e.spec);
                prop_assert_eq!(Some(*m), e.modifier);
            }
            let again: Vec<(&str, Modifier)> =
                dec.iter().map(|e| (e.cron.as_str(), e.modifier.unwrap())).collect();
            prop_assert_eq!(encode_schedule(&again).unwrap(), enc);
        }

        /// The same for reset schedules, including the lone `* * * * *`.
        #[test]
        fn reset_encode_decode(crons in proptest::collection::vec(cron(), 1..4)) {
            let valid: Vec<&str> =
                crons.iter().map(String::as_str).filter(|c| CronSpec::parse(c).is_ok()).collect();
            prop_assume!(!valid.is_empty());
            let enc = encode_reset(&valid).unwrap();
            let dec = decode_reset(&enc).unwrap();
            prop_assert_eq!(dec.len(), valid.len());
            for (c, e) in valid.iter().zip(&dec) {
                prop_assert_eq!(&CronSpec::parse(c).unwrap(), &e.spec);
                prop_assert!(e.modifier.is_none());
            }
            let again: Vec<&str> = dec.iter().map(|e| e.cron.as_str()).collect();
            prop_assert_eq!(encode_reset(&again).unwrap(), enc);
        }

        /// Decoding never panics on arbitrary text.
        #[test]
        fn decode_total(s in "\\PC{0,40}") {
            let _ = decode_schedule(&s);
            let _ = decode_reset(&s);
            let _ = python_int(&s);
        }
    }
}
