//! A YAML emitter for what this tool writes (`limits cfn-template`, `limits
//! export`): block style as PyYAML's `dump(default_flow_style=False,
//! sort_keys=False)` writes it, so the reference's tools read it back as the
//! same values. A string is written plain only when both YAML 1.1 (PyYAML, the
//! reference) and YAML 1.2 (our loader) read it back as that string; else it
//! is quoted.

use super::yaml::{resolve_plain, Value};

/// A YAML node: as much of YAML as a template or a manifest needs.
#[derive(Debug, Clone, PartialEq)]
pub enum Node {
    Map(Vec<(String, Node)>),
    List(Vec<Node>),
    Str(String),
    Int(u64),
    Bool(bool),
    Float(f64),
    /// A string always written in double quotes (a cron pattern, as the
    /// manifest docs write one).
    Quoted(String),
}

/// A mapping from `(key, value)` pairs, in order.
pub fn map(entries: Vec<(&str, Node)>) -> Node {
    Node::Map(
        entries
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
    )
}

/// A string node.
pub fn s(v: &str) -> Node {
    Node::Str(v.to_string())
}

/// The document as block YAML, one key per line, ending with a newline; a
/// sequence in a mapping sits at its key's indent, as PyYAML writes it.
pub fn emit(node: &Node) -> String {
    emit_with(node, false)
}

/// [`emit`] with every sequence indented under its key, as manifests are
/// written by hand (`schedule:` then `  - cron: …`).
pub fn emit_indented(node: &Node) -> String {
    emit_with(node, true)
}

fn emit_with(node: &Node, indent_lists: bool) -> String {
    let mut out = String::new();
    let mut e = Emitter {
        out: &mut out,
        indent_lists,
    };
    match node {
        Node::Map(entries) if !entries.is_empty() => e.map(entries, 0),
        Node::List(items) if !items.is_empty() => e.list(items, 0),
        other => {
            e.out.push_str(&inline(other));
            e.out.push('\n');
        }
    }
    out
}

/// A node that fits after `key: ` on one line (scalars and empty collections).
fn inline(node: &Node) -> String {
    match node {
        Node::Map(_) => "{}".into(),
        Node::List(_) => "[]".into(),
        Node::Str(v) => scalar(v),
        Node::Int(v) => v.to_string(),
        Node::Bool(b) => if *b { "true" } else { "false" }.into(),
        Node::Float(f) => python_float(*f),
        Node::Quoted(v) => double_quoted(v),
    }
}

fn is_block(node: &Node) -> bool {
    matches!(node, Node::Map(m) if !m.is_empty()) || matches!(node, Node::List(l) if !l.is_empty())
}

struct Emitter<'a> {
    out: &'a mut String,
    indent_lists: bool,
}

impl Emitter<'_> {
    fn map(&mut self, entries: &[(String, Node)], indent: usize) {
        for (i, (k, v)) in entries.iter().enumerate() {
            // The first key of a map inside a list item continues the `- ` line.
            if !(i == 0 && self.out.ends_with("- ")) {
                self.out.push_str(&" ".repeat(indent));
            }
            self.out.push_str(&scalar(k));
            self.out.push(':');
            match v {
                Node::Map(m) if !m.is_empty() => {
                    self.out.push('\n');
                    self.map(m, indent + 2);
                }
                // PyYAML writes a block sequence in a mapping at the key's own indent.
                Node::List(l) if !l.is_empty() => {
                    self.out.push('\n');
                    let at = if self.indent_lists {
                        indent + 2
                    } else {
                        indent
                    };
                    self.list(l, at);
                }
                other => {
                    self.out.push(' ');
                    self.out.push_str(&inline(other));
                    self.out.push('\n');
                }
            }
        }
    }

    fn list(&mut self, items: &[Node], indent: usize) {
        for item in items {
            self.out.push_str(&" ".repeat(indent));
            self.out.push_str("- ");
            match item {
                Node::Map(m) if !m.is_empty() => self.map(m, indent + 2),
                Node::List(l) if !l.is_empty() => {
                    self.out.push('\n');
                    self.list(l, indent + 2);
                }
                other => {
                    debug_assert!(!is_block(other));
                    self.out.push_str(&inline(other));
                    self.out.push('\n');
                }
            }
        }
    }
}

/// Python's `repr(float)` as PyYAML writes it; whole numbers are written as
/// integers (the manifest's `scale: 2` is an int, and the model cannot tell).
pub fn python_float(f: f64) -> String {
    if !f.is_finite() {
        return if f.is_nan() {
            ".nan".into()
        } else if f > 0.0 {
            ".inf".into()
        } else {
            "-.inf".into()
        };
    }
    if f.fract() == 0.0 && f.abs() < 1e16 {
        return format!("{}", f as i64);
    }
    let sci = format!("{f:e}"); // shortest round-trip digits, e.g. "1.5e-5"
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let negative = mantissa.starts_with('-');
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let sign = if negative { "-" } else { "" };
    if (-4..16).contains(&exp) {
        if exp >= 0 {
            let e = exp as usize;
            let (int, frac) = if digits.len() > e + 1 {
                (digits[..=e].to_string(), digits[e + 1..].to_string())
            } else {
                (format!("{digits:0<width$}", width = e + 1), "0".to_string())
            };
            format!("{sign}{int}.{frac}")
        } else {
            let zeros = "0".repeat((-exp - 1) as usize);
            format!("{sign}0.{zeros}{digits}")
        }
    } else {
        let rest = &digits[1..];
        let m = if rest.is_empty() {
            format!("{}.0", &digits[..1])
        } else {
            format!("{}.{rest}", &digits[..1])
        };
        let esign = if exp < 0 { '-' } else { '+' };
        format!("{sign}{m}e{esign}{:02}", exp.abs())
    }
}

/// A string as PyYAML's emitter writes it: plain when that reads back as the
/// same string, else single-quoted, else double-quoted with escapes.
pub fn scalar(v: &str) -> String {
    let printable = v.chars().all(|c| (' '..='~').contains(&c));
    if !printable {
        return double_quoted(v);
    }
    if plain_allowed(v) && !resolves_to_non_string(v) {
        v.to_string()
    } else {
        format!("'{}'", v.replace('\'', "''"))
    }
}

fn double_quoted(v: &str) -> String {
    let mut out = String::from("\"");
    for c in v.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            ' '..='~' => out.push(c),
            c if (c as u32) <= 0xFF => out.push_str(&format!("\\x{:02X}", c as u32)),
            c if (c as u32) <= 0xFFFF => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push_str(&format!("\\U{:08X}", c as u32)),
        }
    }
    out.push('"');
    out
}

/// PyYAML's `analyze_scalar` for block context: no indicator at the start, no
/// `: ` or ` #` inside, no leading or trailing space.
fn plain_allowed(v: &str) -> bool {
    if v.is_empty() || v.starts_with(' ') || v.ends_with(' ') {
        return false;
    }
    let chars: Vec<char> = v.chars().collect();
    let followed_by_space = |i: usize| chars.get(i + 1).is_none_or(|c| *c == ' ');
    for (i, &c) in chars.iter().enumerate() {
        if i == 0 {
            if "#,[]{}&*!|>'\"%@`".contains(c) {
                return false;
            }
            if (c == '?' || c == ':' || c == '-') && followed_by_space(i) {
                return false;
            }
        } else {
            if c == ':' && followed_by_space(i) {
                return false;
            }
            if c == '#' && chars[i - 1] == ' ' {
                return false;
            }
        }
    }
    true
}

/// Whether PyYAML's YAML 1.1 resolver (bool, null, int, float, timestamp,
/// merge, value) or the YAML 1.2 core schema our loader reads with (`1e3`,
/// `0o17`) would read `v`, unquoted, as something other than a string.
fn resolves_to_non_string(v: &str) -> bool {
    if resolve_plain(v) != Value::Str {
        return true;
    }
    const WORDS: [&str; 25] = [
        "yes", "Yes", "YES", "no", "No", "NO", "true", "True", "TRUE", "false", "False", "FALSE",
        "on", "On", "ON", "off", "Off", "OFF", "~", "null", "Null", "NULL", "<<", "=", "",
    ];
    WORDS.contains(&v) || is_yaml11_int(v) || is_yaml11_float(v) || is_timestamp(v)
}

fn strip_sign(v: &str) -> &str {
    v.strip_prefix(['-', '+']).unwrap_or(v)
}

fn all(v: &str, f: impl Fn(char) -> bool) -> bool {
    !v.is_empty() && v.chars().all(f)
}

/// `[0-5]?[0-9]` groups after `:` (sexagesimal).
fn sexagesimal_tail(parts: &[&str]) -> bool {
    !parts.is_empty()
        && parts.iter().all(|p| {
            let b = p.as_bytes();
            match b.len() {
                1 => b[0].is_ascii_digit(),
                2 => (b'0'..=b'5').contains(&b[0]) && b[1].is_ascii_digit(),
                _ => false,
            }
        })
}

fn is_yaml11_int(v: &str) -> bool {
    let u = strip_sign(v);
    if let Some(b) = u.strip_prefix("0b") {
        return all(b, |c| c == '0' || c == '1' || c == '_');
    }
    if let Some(h) = u.strip_prefix("0x") {
        return all(h, |c| c.is_ascii_hexdigit() || c == '_');
    }
    if u == "0" {
        return true;
    }
    if let Some(o) = u.strip_prefix('0') {
        return all(o, |c| ('0'..='7').contains(&c) || c == '_');
    }
    let parts: Vec<&str> = u.split(':').collect();
    let head = parts[0];
    let head_ok = head.starts_with(|c: char| ('1'..='9').contains(&c))
        && all(head, |c| c.is_ascii_digit() || c == '_');
    head_ok && (parts.len() == 1 || sexagesimal_tail(&parts[1..]))
}

fn is_yaml11_float(v: &str) -> bool {
    let u = strip_sign(v);
    if matches!(u, ".inf" | ".Inf" | ".INF") || matches!(v, ".nan" | ".NaN" | ".NAN") {
        return true;
    }
    // [0-9][0-9_]*(:[0-5]?[0-9])+\.[0-9_]*  (sexagesimal float)
    if let Some((whole, frac)) = u.split_once('.') {
        let parts: Vec<&str> = whole.split(':').collect();
        if parts.len() > 1
            && parts[0].starts_with(|c: char| c.is_ascii_digit())
            && all(parts[0], |c| c.is_ascii_digit() || c == '_')
            && sexagesimal_tail(&parts[1..])
            && frac.chars().all(|c| c.is_ascii_digit() || c == '_')
        {
            return true;
        }
    }
    // [0-9][0-9_]*\.[0-9_]*([eE][-+][0-9]+)?  or  \.[0-9_]+([eE][-+][0-9]+)? (unsigned)
    let (num, exp) = match u.find(['e', 'E']) {
        Some(i) => (&u[..i], Some(&u[i + 1..])),
        None => (u, None),
    };
    if let Some(e) = exp {
        let Some(d) = e.strip_prefix(['-', '+']) else {
            return false;
        };
        if !all(d, |c| c.is_ascii_digit()) {
            return false;
        }
    }
    let Some((whole, frac)) = num.split_once('.') else {
        return false;
    };
    let frac_ok = frac.chars().all(|c| c.is_ascii_digit() || c == '_');
    if whole.is_empty() {
        // `.5` form: no sign allowed, at least one fraction character.
        return v.len() == u.len() && !frac.is_empty() && frac_ok;
    }
    whole.starts_with(|c: char| c.is_ascii_digit())
        && all(whole, |c| c.is_ascii_digit() || c == '_')
        && frac_ok
}

/// PyYAML's timestamp resolver: `YYYY-MM-DD`, or `YYYY-M-D` followed by
/// `T`/spaces, `H:MM:SS`, optional fraction and optional zone.
fn is_timestamp(v: &str) -> bool {
    let b = v.as_bytes();
    let mut i = 0;
    // Up to `max` digits (at least `min`), advancing `i`.
    let digits = |i: &mut usize, min: usize, max: usize| -> bool {
        let start = *i;
        while *i < b.len() && b[*i].is_ascii_digit() && *i - start < max {
            *i += 1;
        }
        *i - start >= min
    };
    let lit = |i: &mut usize, c: u8| -> bool {
        if b.get(*i) == Some(&c) {
            *i += 1;
            true
        } else {
            false
        }
    };
    // Three runs of digits (each `(min, max)` long) with `sep` between them.
    let three = |i: &mut usize, sep: u8, [x, y, z]: [(usize, usize); 3]| -> bool {
        digits(i, x.0, x.1)
            && lit(i, sep)
            && digits(i, y.0, y.1)
            && lit(i, sep)
            && digits(i, z.0, z.1)
    };
    if b.len() == 10 {
        let mut j = 0;
        if three(&mut j, b'-', [(4, 4), (2, 2), (2, 2)]) && j == 10 {
            return true;
        }
    }
    if !three(&mut i, b'-', [(4, 4), (1, 2), (1, 2)]) {
        return false;
    }
    if !(lit(&mut i, b'T') || lit(&mut i, b't')) {
        let start = i;
        while i < b.len() && (b[i] == b' ' || b[i] == b'\t') {
            i += 1;
        }
        if i == start {
            return false;
        }
    }
    if !three(&mut i, b':', [(1, 2), (2, 2), (2, 2)]) {
        return false;
    }
    if lit(&mut i, b'.') {
        digits(&mut i, 0, usize::MAX);
    }
    while i < b.len() && (b[i] == b' ' || b[i] == b'\t') {
        i += 1;
    }
    if i == b.len() {
        return true;
    }
    if lit(&mut i, b'Z') {
        return i == b.len();
    }
    if lit(&mut i, b'-') || lit(&mut i, b'+') {
        if !digits(&mut i, 1, 2) {
            return false;
        }
        if lit(&mut i, b':') && !digits(&mut i, 2, 2) {
            return false;
        }
        return i == b.len();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_are_quoted_like_pyyaml() {
        let cases = [
            ("* 9-17 * * MON-FRI", "'* 9-17 * * MON-FRI'"),
            ("0 0 * * *", "0 0 * * *"),
            ("America/New_York", "America/New_York"),
            ("2010-09-09", "'2010-09-09'"),
            (
                "Declarative limits for namespace 'prod'",
                "Declarative limits for namespace 'prod'",
            ),
            ("Fn::ImportValue", "Fn::ImportValue"),
            ("yes", "'yes'"),
            ("Off", "'Off'"),
            ("null", "'null'"),
            ("~", "'~'"),
            ("123", "'123'"),
            ("0755", "'0755'"),
            ("0x1F", "'0x1F'"),
            ("1:30", "'1:30'"),
            ("1.5", "'1.5'"),
            ("1e3", "'1e3'"),
            ("0o17", "'0o17'"),
            ("1.0e+3", "'1.0e+3'"),
            (".5", "'.5'"),
            ("user-1", "user-1"),
            ("-x", "-x"),
            ("- x", "'- x'"),
            ("a: b", "'a: b'"),
            ("a:b", "a:b"),
            ("a #b", "'a #b'"),
            ("a#b", "a#b"),
            ("it's", "it's"),
            ("'q'", "'''q'''"),
            ("", "''"),
            (" x", "' x'"),
            ("bypass", "bypass"),
            ("ſun", "\"\\u017Fun\""),
            ("2026-1-2", "2026-1-2"),
            ("2026-01-02 x", "2026-01-02 x"),
            ("2026-1-2 3:04:05", "'2026-1-2 3:04:05'"),
            ("2026-01-02T03:04:05.5Z", "'2026-01-02T03:04:05.5Z'"),
            ("1_000", "'1_000'"),
            ("0b101", "'0b101'"),
            ("+12", "'+12'"),
            ("12:61", "12:61"),
            ("?x", "?x"),
            ("? x", "'? x'"),
            (":x", ":x"),
            ("<<", "'<<'"),
            ("=", "'='"),
        ];
        for (input, want) in cases {
            assert_eq!(scalar(input), want, "{input:?}");
        }
    }

    #[test]
    fn floats_are_written_like_python_repr() {
        for (f, want) in [
            (0.5, "0.5"),
            (2.0, "2"),
            (0.125, "0.125"),
            (1.0 / 3.0, "0.3333333333333333"),
            (0.0001, "0.0001"),
            (0.00001, "1.0e-05"),
            (1.5e-7, "1.5e-07"),
            (123.456, "123.456"),
            (1e16 + 0.5, "1.0e+16"),
        ] {
            assert_eq!(python_float(f), want, "{f}");
        }
    }

    #[test]
    fn block_layout() {
        let n = map(vec![
            ("a", Node::Int(1)),
            ("empty", Node::Map(vec![])),
            (
                "list",
                Node::List(vec![
                    map(vec![("x", s("1 2")), ("y", Node::Bool(false))]),
                    map(vec![("x", s("* *"))]),
                ]),
            ),
            ("m", map(vec![("k", Node::Float(0.5))])),
        ]);
        assert_eq!(
            emit(&n),
            "a: 1\nempty: {}\nlist:\n- x: 1 2\n  y: false\n- x: '* *'\nm:\n  k: 0.5\n"
        );
        assert_eq!(
            emit_indented(&map(vec![(
                "schedule",
                Node::List(vec![map(vec![("cron", Node::Quoted("0 0 * * *".into()))])])
            )])),
            "schedule:\n  - cron: \"0 0 * * *\"\n"
        );
    }
}
