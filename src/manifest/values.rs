//! Reading typed values out of located YAML nodes. Each reader reports a typed,
//! located message (never a raw parser error) and returns `None` on failure so
//! the caller can carry on and find the next problem.

use super::report::Reporter;
use super::yaml::{Kind, Node, Scalar, Style, Value};

/// The bounds of token counts (10^15) and durations (10^9 s): the engine's rules.
pub use zae_limiter_engine::params::{MAX_PERIOD_SECONDS, MAX_TOKENS};
/// The largest schedule scale (10^6).
pub const MAX_SCALE: f64 = 1_000_000.0;

/// YAML 1.1 boolean spellings that YAML 1.2 reads as strings.
pub fn is_yaml11_bool(s: &Scalar) -> Option<bool> {
    if s.style != Style::Plain {
        return None;
    }
    let is = |word: &str| s.text.eq_ignore_ascii_case(word);
    if is("yes") || is("on") || is("y") {
        Some(true)
    } else if is("no") || is("off") || is("n") {
        Some(false)
    } else {
        None
    }
}

/// A short description of what a node is, for "got ..." in messages.
pub fn describe(node: &Node) -> String {
    match &node.kind {
        Kind::Seq(_) => "a list".into(),
        Kind::Map(_) => "a mapping".into(),
        Kind::Scalar(s) => describe_scalar(s),
    }
}

pub fn describe_scalar(s: &Scalar) -> String {
    match (&s.value, s.style) {
        (Value::Null, _) => "nothing (null)".into(),
        (Value::Bool(b), _) => format!("the boolean {b}"),
        (Value::Int(_) | Value::HugeInt | Value::Float(_), _) => s.text.clone(),
        (Value::Str, Style::Plain) => format!("'{}'", s.text),
        (Value::Str, _) => format!("the string '{}'", s.text),
    }
}

/// Map entries of a node that must be a mapping.
pub fn as_map(node: &Node) -> Option<&[(Node, Node)]> {
    match &node.kind {
        Kind::Map(entries) => Some(entries),
        _ => None,
    }
}

/// The unit a whole number counts, for help texts.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    Tokens,
    Seconds,
}

/// A whole number within `min..=max`.
pub fn whole(
    r: &mut Reporter,
    node: &Node,
    path: &str,
    name: &str,
    min: u64,
    max: u64,
    unit: Unit,
) -> Option<u64> {
    let unit_word = match unit {
        Unit::Tokens => "whole tokens",
        Unit::Seconds => "whole seconds",
    };
    // Help texts are built only when a problem is reported: valid manifests
    // carry hundreds of thousands of numbers.
    let range_help = || format!("{name} is in {unit_word}, from {min} to {max}");
    let Kind::Scalar(s) = &node.kind else {
        r.error(
            node,
            path,
            format!("{name} must be a whole number, got {}", describe(node)),
            Some(range_help()),
        );
        return None;
    };
    match s.value {
        Value::Int(v) => {
            if s.style == Style::Plain && has_ambiguous_leading_zero(&s.text) {
                let octal = i128::from_str_radix(s.text.trim_start_matches(['+', '-']), 8).ok();
                r.error(
                    node,
                    path,
                    format!(
                        "{name} `{}` has a leading zero, which YAML readers disagree about",
                        s.text
                    ),
                    Some(match octal {
                        Some(o) => format!(
                            "YAML 1.2 reads it as {v}, YAML 1.1 (the Python zae-limiter CLI) as octal {o}; write {v} without the leading zero"
                        ),
                        None => format!("write {v} without the leading zero"),
                    }),
                );
                return None;
            }
            if v < i128::from(min) {
                let msg = if min == 0 {
                    format!("{name} must not be negative, got {v}")
                } else {
                    format!("{name} must be positive, got {v}")
                };
                r.error(node, path, msg, Some(range_help()));
                return None;
            }
            if v > i128::from(max) {
                r.error(
                    node,
                    path,
                    format!("{name} must be at most {max}, got {v}"),
                    Some(range_help()),
                );
                return None;
            }
            u64::try_from(v).ok()
        }
        Value::HugeInt => {
            r.error(
                node,
                path,
                format!("{name} must be at most {max}, got {}", s.text),
                Some(range_help()),
            );
            None
        }
        Value::Float(f) => {
            let help = if f.is_finite() && f.fract() == 0.0 && f.abs() < 1e18 {
                if f.abs() > max as f64 {
                    format!("{name} is at most {max}")
                } else {
                    format!("write {} without a decimal point or exponent", f as i64)
                }
            } else {
                format!("{name} counts {unit_word}; fractions are not stored")
            };
            r.error(
                node,
                path,
                format!("{name} must be a whole number, got {}", s.text),
                Some(help),
            );
            None
        }
        Value::Bool(b) => {
            r.error(
                node,
                path,
                format!("{name} must be a whole number, got the boolean {b}"),
                Some(range_help()),
            );
            None
        }
        Value::Null => {
            r.error(
                node,
                path,
                format!("{name} has no value"),
                Some(format!("give a number: {}", range_help())),
            );
            None
        }
        Value::Str => {
            let help = if s.style == Style::Quoted && s.text.trim().parse::<i128>().is_ok() {
                format!("remove the quotes: {name}: {}", s.text.trim())
            } else if s.text.contains('_') && s.text.replace('_', "").parse::<u64>().is_ok() {
                format!(
                    "YAML 1.2 has no digit separators; write {}",
                    s.text.replace('_', "")
                )
            } else if let Some(secs) = (unit == Unit::Seconds)
                .then(|| duration_seconds(&s.text))
                .flatten()
            {
                format!("durations are plain numbers of seconds (no units): write {secs}")
            } else if unit == Unit::Seconds && looks_like_duration(&s.text) {
                "durations are plain numbers of seconds (no units): 60 = 1 minute, 3600 = 1 hour, 86400 = 1 day".to_string()
            } else {
                range_help()
            };
            r.error(
                node,
                path,
                format!("{name} must be a whole number, got {}", describe_scalar(s)),
                Some(help),
            );
            None
        }
    }
}

fn has_ambiguous_leading_zero(text: &str) -> bool {
    let digits = text.trim_start_matches(['+', '-']);
    digits.len() > 1 && digits.starts_with('0') && digits.bytes().all(|b| b.is_ascii_digit())
}

/// `5h`, `90s`, `30m`, `1d`, `1h30m` → seconds.
fn duration_seconds(text: &str) -> Option<u64> {
    let mut total: u64 = 0;
    let mut num = String::new();
    let mut any = false;
    for c in text.trim().chars() {
        if c.is_ascii_digit() {
            num.push(c);
            continue;
        }
        let unit = match c {
            's' => 1,
            'm' => 60,
            'h' => 3600,
            'd' => 86400,
            _ => return None,
        };
        let n: u64 = num.parse().ok()?;
        total = total.checked_add(n.checked_mul(unit)?)?;
        num.clear();
        any = true;
    }
    (any && num.is_empty()).then_some(total)
}

fn looks_like_duration(text: &str) -> bool {
    let t = text.trim();
    t.contains(':')
        || t.trim_end_matches(|c: char| c.is_ascii_alphabetic())
            .parse::<f64>()
            .is_ok()
}

/// A real boolean. YAML 1.1 `yes/no/on/off` get a help that says what to write.
pub fn boolean(r: &mut Reporter, node: &Node, path: &str, name: &str) -> Option<bool> {
    if let Kind::Scalar(s) = &node.kind {
        if let Value::Bool(b) = s.value {
            return Some(b);
        }
        if let Some(b) = is_yaml11_bool(s) {
            r.error(
                node,
                path,
                format!("{name}: must be true or false, got `{}`", s.text),
                Some(format!(
                    "write `{b}`: `{}` is a boolean only in YAML 1.1; YAML 1.2 reads it as a string",
                    s.text
                )),
            );
            return None;
        }
        if s.style == Style::Quoted && matches!(s.text.as_str(), "true" | "false") {
            r.error(
                node,
                path,
                format!("{name}: must be true or false, got the string '{}'", s.text),
                Some(format!("remove the quotes: {name}: {}", s.text)),
            );
            return None;
        }
    }
    r.error(
        node,
        path,
        format!("{name}: must be true or false, got {}", describe(node)),
        Some(format!("write `{name}: true` or `{name}: false`")),
    );
    None
}

/// A string scalar (plain, quoted or block). Numbers and booleans are refused
/// with a hint to quote them.
pub fn string<'n>(r: &mut Reporter, node: &'n Node, path: &str, name: &str) -> Option<&'n str> {
    string_or(r, node, path, name, None)
}

/// [`string`] with the help to show when the value is missing or not a string.
pub fn string_or<'n>(
    r: &mut Reporter,
    node: &'n Node,
    path: &str,
    name: &str,
    help: Option<&str>,
) -> Option<&'n str> {
    let help = || help.map(str::to_string);
    match &node.kind {
        Kind::Scalar(Scalar {
            text,
            value: Value::Str,
            ..
        }) => Some(text),
        Kind::Scalar(Scalar {
            value: Value::Null, ..
        }) => {
            r.error(node, path, format!("{name} has no value"), help());
            None
        }
        Kind::Scalar(s) => {
            r.error(
                node,
                path,
                format!("{name} must be a string, got {}", describe_scalar(s)),
                help().or_else(|| Some(format!("quote it: {name}: \"{}\"", s.text))),
            );
            None
        }
        _ => {
            r.error(
                node,
                path,
                format!("{name} must be a string, got {}", describe(node)),
                help(),
            );
            None
        }
    }
}

/// A positive, finite number (int or float) at most `max`.
pub fn scale(r: &mut Reporter, node: &Node, path: &str) -> Option<f64> {
    let help = || {
        Some(format!(
        "scale multiplies the limit's base parameters: a number above 0 and at most {}, e.g. 0.5 or 2",
        MAX_SCALE as u64
    ))
    };
    // The refusals that share the general help (a quoted number and one
    // above the maximum get their own, below).
    let refuse = |r: &mut Reporter, must: &str, got: &str| {
        r.error(
            node,
            path,
            format!("scale must be {must}, got {got}"),
            help(),
        );
    };
    // A mapping, a list or a scalar that is no number: one message.
    let not_a_number = |r: &mut Reporter| refuse(r, "a number", &describe(node));
    let Kind::Scalar(s) = &node.kind else {
        not_a_number(r);
        return None;
    };
    let v = match s.value {
        Value::Int(i) => i as f64,
        Value::HugeInt => f64::INFINITY,
        Value::Float(f) => f,
        Value::Str if s.style == Style::Quoted && s.text.trim().parse::<f64>().is_ok() => {
            r.error(
                node,
                path,
                format!("scale must be a number, got the string '{}'", s.text),
                Some(format!("remove the quotes: scale: {}", s.text.trim())),
            );
            return None;
        }
        _ => {
            not_a_number(r);
            return None;
        }
    };
    if !v.is_finite() && !matches!(s.value, Value::HugeInt) {
        refuse(r, "a finite number", &s.text);
        return None;
    }
    if v <= 0.0 {
        refuse(r, "positive", &s.text);
        return None;
    }
    if v > MAX_SCALE {
        r.error(
            node,
            path,
            format!("scale must be at most {}, got {}", MAX_SCALE as u64, s.text),
            Some("above this the effective limit (capacity x 1000 x scale) leaves the range DynamoDB stores exactly".into()),
        );
        return None;
    }
    // The table keeps a scale in whole thousandths (see `scale_permille`): say
    // so when that changes the value written, rather than apply it silently.
    let permille = zae_limiter_engine::encoding::scale_permille(v);
    if permille as f64 / 1000.0 != v {
        let stored = thousandths(permille);
        let floor = if permille == 1 {
            " (the smallest scale)"
        } else {
            ""
        };
        r.warning(
            node,
            path,
            format!(
                "scale {} is stored in thousandths: it is applied as {stored}{floor}",
                s.text.trim()
            ),
            Some(format!("write `scale: {stored}` to say what is applied")),
        );
    }
    Some(v)
}

/// `permille / 1000` in decimal without float noise: 500 → `0.5`, 1 → `0.001`, 2000 → `2`.
fn thousandths(permille: u64) -> String {
    let (whole, frac) = (permille / 1000, permille % 1000);
    if frac == 0 {
        return whole.to_string();
    }
    let frac = format!("{frac:03}");
    format!("{whole}.{}", frac.trim_end_matches('0'))
}
