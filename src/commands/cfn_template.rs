//! `limits cfn-template`: a CloudFormation template whose custom resource
//! (`Custom::ZaeLimiterLimits`) makes the stack's provisioner apply the
//! manifest — the reference's template shape (docs/manifest.md, "`limits cfn-template`"), with
//! two fixes: the manifest is validated first (errors as `limits validate`
//! prints them, exit 1, no template), and a limit's `burst` is carried as its
//! capacity instead of being dropped.
//!
//! The template is built from the validated manifest, so values the user left
//! at their defaults are left out (`RefillAmount` equal to the capacity, or 0
//! for a quota; `RefillPeriod` 60; an entry's `Tz` UTC), exactly as the
//! reference leaves out keys the manifest does not write. The YAML is written
//! as PyYAML's `dump(default_flow_style=False, sort_keys=False)` writes it, and
//! like the reference's `click.echo` the output ends with a blank line.

use crate::cli::output;

use crate::cli::args::CfnTemplateArgs;
use crate::cli::CliError;
use crate::manifest::model::{Disabled, LevelConfig, LimitSpec, Manifest, Modifier};
use crate::manifest::{load_file, render_text};

/// A YAML node, as much of YAML as the template needs.
#[derive(Debug, Clone, PartialEq)]
enum Node {
    Map(Vec<(String, Node)>),
    List(Vec<Node>),
    Str(String),
    Int(u64),
    Bool(bool),
    Float(f64),
}

fn map(entries: Vec<(&str, Node)>) -> Node {
    Node::Map(
        entries
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
    )
}

fn s(v: &str) -> Node {
    Node::Str(v.to_string())
}

const DEFAULT_REFILL_PERIOD: u64 = 60;
const DEFAULT_TZ: &str = "UTC";

fn limit_node(l: &LimitSpec) -> Node {
    let mut m = vec![("Capacity", Node::Int(l.capacity))];
    let default_refill = if l.resets() { 0 } else { l.capacity };
    if l.refill_amount != default_refill {
        m.push(("RefillAmount", Node::Int(l.refill_amount)));
    }
    if l.refill_period != DEFAULT_REFILL_PERIOD {
        m.push(("RefillPeriod", Node::Int(l.refill_period)));
    }
    if let Some(rsa) = l.reset_after_seconds {
        m.push(("ResetAfterSeconds", Node::Int(rsa)));
    }
    if l.soft {
        m.push(("Soft", Node::Bool(true)));
    }
    if !l.schedule.is_empty() {
        let entries = l
            .schedule
            .iter()
            .map(|e| {
                let mut em = vec![("Cron", s(&e.cron))];
                if e.tz != DEFAULT_TZ {
                    em.push(("Tz", s(&e.tz)));
                }
                match &e.modifier {
                    Modifier::Scale(v) => em.push(("Scale", Node::Float(*v))),
                    Modifier::Absolute {
                        capacity,
                        refill_amount,
                        refill_period_seconds,
                    } => {
                        for (k, v) in [
                            ("Capacity", capacity),
                            ("RefillAmount", refill_amount),
                            ("RefillPeriodSeconds", refill_period_seconds),
                        ] {
                            if let Some(v) = v {
                                em.push((k, Node::Int(*v)));
                            }
                        }
                    }
                }
                map(em)
            })
            .collect();
        m.push(("Schedule", Node::List(entries)));
    }
    if !l.reset_schedule.is_empty() {
        let entries = l
            .reset_schedule
            .iter()
            .map(|e| {
                let mut em = vec![("Cron", s(&e.cron))];
                if e.tz != DEFAULT_TZ {
                    em.push(("Tz", s(&e.tz)));
                }
                map(em)
            })
            .collect();
        m.push(("ResetSchedule", Node::List(entries)));
    }
    map(m)
}

fn limits_node(limits: &indexmap::IndexMap<String, LimitSpec>) -> Node {
    Node::Map(
        limits
            .iter()
            .map(|(name, l)| (name.clone(), limit_node(l)))
            .collect(),
    )
}

fn level_node(level: &LevelConfig) -> Node {
    let mut m = vec![("Limits", limits_node(&level.limits))];
    if let Some(d) = level.disabled {
        m.push((
            "Disabled",
            match d {
                Disabled::Disabled => Node::Bool(true),
                Disabled::Enforced => Node::Bool(false),
                Disabled::Bypass => s("bypass"),
            },
        ));
    }
    if let Some(c) = level.cascade {
        m.push(("Cascade", Node::Bool(c)));
    }
    map(m)
}

/// The template for `manifest`, applied by stack `stack`'s provisioner.
fn template(manifest: &Manifest, stack: &str, full: bool) -> Node {
    let mut props = vec![
        (
            "ServiceToken",
            map(vec![(
                "Fn::ImportValue",
                Node::Str(format!("{stack}-ProvisionerArn")),
            )]),
        ),
        ("TableName", s(stack)),
        ("Namespace", s(&manifest.namespace)),
    ];
    if full {
        props.push(("FullApply", Node::Bool(true)));
    }
    if let Some(system) = &manifest.system {
        let mut m = Vec::new();
        if let Some(o) = system.on_unavailable {
            m.push(("OnUnavailable", s(o.as_str())));
        }
        if !system.limits.is_empty() {
            m.push(("Limits", limits_node(&system.limits)));
        }
        props.push(("System", map(m)));
    }
    if !manifest.resources.is_empty() {
        props.push((
            "Resources",
            Node::Map(
                manifest
                    .resources
                    .iter()
                    .map(|(r, level)| (r.clone(), level_node(level)))
                    .collect(),
            ),
        ));
    }
    if !manifest.entities.is_empty() {
        props.push((
            "Entities",
            Node::Map(
                manifest
                    .entities
                    .iter()
                    .map(|(e, resources)| {
                        let rs = Node::Map(
                            resources
                                .iter()
                                .map(|(r, level)| (r.clone(), level_node(level)))
                                .collect(),
                        );
                        (e.clone(), map(vec![("Resources", rs)]))
                    })
                    .collect(),
            ),
        ));
    }
    map(vec![
        ("AWSTemplateFormatVersion", s("2010-09-09")),
        (
            "Description",
            Node::Str(format!(
                "Declarative limits for namespace '{}'",
                manifest.namespace
            )),
        ),
        (
            "Resources",
            map(vec![(
                "TenantLimits",
                map(vec![
                    ("Type", s("Custom::ZaeLimiterLimits")),
                    ("Properties", map(props)),
                ]),
            )]),
        ),
    ])
}

// ---- A PyYAML-compatible block emitter -------------------------------------

fn emit(node: &Node) -> String {
    let mut out = String::new();
    match node {
        Node::Map(entries) if !entries.is_empty() => emit_map(entries, 0, &mut out),
        Node::List(items) if !items.is_empty() => emit_list(items, 0, &mut out),
        other => {
            out.push_str(&inline(other));
            out.push('\n');
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
    }
}

fn is_block(node: &Node) -> bool {
    matches!(node, Node::Map(m) if !m.is_empty()) || matches!(node, Node::List(l) if !l.is_empty())
}

fn emit_map(entries: &[(String, Node)], indent: usize, out: &mut String) {
    for (i, (k, v)) in entries.iter().enumerate() {
        // The first key of a map inside a list item continues the `- ` line.
        if !(i == 0 && out.ends_with("- ")) {
            out.push_str(&" ".repeat(indent));
        }
        out.push_str(&scalar(k));
        out.push(':');
        match v {
            Node::Map(m) if !m.is_empty() => {
                out.push('\n');
                emit_map(m, indent + 2, out);
            }
            // PyYAML writes a block sequence in a mapping at the key's own indent.
            Node::List(l) if !l.is_empty() => {
                out.push('\n');
                emit_list(l, indent, out);
            }
            other => {
                out.push(' ');
                out.push_str(&inline(other));
                out.push('\n');
            }
        }
    }
}

fn emit_list(items: &[Node], indent: usize, out: &mut String) {
    for item in items {
        out.push_str(&" ".repeat(indent));
        out.push_str("- ");
        match item {
            Node::Map(m) if !m.is_empty() => emit_map(m, indent + 2, out),
            Node::List(l) if !l.is_empty() => {
                out.push('\n');
                emit_list(l, indent + 2, out);
            }
            other => {
                debug_assert!(!is_block(other));
                out.push_str(&inline(other));
                out.push('\n');
            }
        }
    }
}

/// Python's `repr(float)` as PyYAML writes it; whole numbers are written as
/// integers (the manifest's `scale: 2` is an int, and the model cannot tell).
fn python_float(f: f64) -> String {
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
fn scalar(v: &str) -> String {
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

/// Whether PyYAML's YAML 1.1 resolver would read `v`, unquoted, as something
/// other than a string (bool, null, int, float, timestamp, merge, value).
fn resolves_to_non_string(v: &str) -> bool {
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
    if b.len() == 10 {
        let mut j = 0;
        if digits(&mut j, 4, 4)
            && lit(&mut j, b'-')
            && digits(&mut j, 2, 2)
            && lit(&mut j, b'-')
            && digits(&mut j, 2, 2)
            && j == 10
        {
            return true;
        }
    }
    if !(digits(&mut i, 4, 4)
        && lit(&mut i, b'-')
        && digits(&mut i, 1, 2)
        && lit(&mut i, b'-')
        && digits(&mut i, 1, 2))
    {
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
    if !(digits(&mut i, 1, 2)
        && lit(&mut i, b':')
        && digits(&mut i, 2, 2)
        && lit(&mut i, b':')
        && digits(&mut i, 2, 2))
    {
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

/// Rolling windows and concurrency limits (issue #7), as `level: limit` names,
/// in manifest order. The 0.17 provisioner behind the template cannot express
/// them, so a template must not carry them.
fn non_bucket_limits(m: &Manifest) -> Vec<String> {
    let mut out = Vec::new();
    let mut scan = |level: String, limits: &indexmap::IndexMap<String, LimitSpec>| {
        for (name, l) in limits {
            if l.kind != crate::manifest::model::LimitKind::Bucket {
                out.push(format!("{level} limit '{name}'"));
            }
        }
    };
    if let Some(sys) = &m.system {
        scan("system".into(), &sys.limits);
    }
    for (r, c) in &m.resources {
        scan(format!("resource '{r}'"), &c.limits);
    }
    for (e, rs) in &m.entities {
        for (r, c) in rs {
            scan(format!("entity '{e}' resource '{r}'"), &c.limits);
        }
    }
    out
}

pub fn run(args: CfnTemplateArgs) -> Result<i32, CliError> {
    let loaded = match load_file(&args.file) {
        Ok(l) => l,
        Err(diags) => {
            output::eprint(render_text(&diags));
            return Err(CliError::Reported(crate::exit_codes::FAILURE));
        }
    };
    if !loaded.warnings.is_empty() {
        output::eprint(render_text(&loaded.warnings));
    }
    let foreign = non_bucket_limits(&loaded.manifest);
    if !foreign.is_empty() {
        return Err(CliError::Failed(format!(
            "{}: the reference's provisioner knows only token buckets and quotas, and would apply {} as broken buckets. Apply this manifest with 'zae-limiter limits apply' instead, or remove those limits from the template's manifest",
            args.file.display(),
            foreign.join(", ")
        )));
    }
    let yaml = emit(&template(&loaded.manifest, &args.name, args.full));
    output::println(yaml)?;
    Ok(crate::exit_codes::OK)
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
            ("1e3", "1e3"),
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
    }
}
