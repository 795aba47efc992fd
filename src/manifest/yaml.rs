//! YAML 1.2 text → a located tree: every node keeps its position, so every rule
//! can point at the exact value it rejects.
//!
//! Built on `saphyr-parser` events (saphyr's own parser) rather than saphyr's
//! loader, because the loader keeps the last of duplicate keys silently and copies
//! aliased nodes without a bound. Here duplicate keys are reported, alias expansion
//! and nesting depth are bounded, scalars keep their text and quoting style (so a
//! YAML 1.1 `yes` or a quoted `'100'` can be explained), and `<<` merge keys work
//! as they do in PyYAML, which the reference uses.
//!
//! Speed: the plain block YAML manifests are written in (with one-line flow
//! collections such as `rpm: {capacity: 1000}`) is scanned by `block_scan`,
//! which emits saphyr's exact events several times faster, and
//! a large manifest's `entities` are scanned and built on two threads
//! (`parse_in_two`). Everything else, and every error, goes through saphyr.

use saphyr_parser::{Event, Parser, ScalarStyle, ScanError, Span, Tag};

use super::block_scan;

/// Largest manifest read (bytes). Larger files are refused before parsing.
pub const MAX_FILE_BYTES: u64 = 64 * 1024 * 1024;
/// Most nodes alias expansion may copy in one document (a "billion laughs" guard).
pub const MAX_ALIAS_NODES: usize = 1_000_000;
/// Deepest nesting of lists and mappings accepted.
pub const MAX_DEPTH: usize = 128;

/// A position in the source: 1-based line, 1-based column in characters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Pos {
    pub line: usize,
    pub col: usize,
}

impl Pos {
    fn from_marker(m: &saphyr_parser::Marker) -> Pos {
        Pos {
            line: m.line().max(1),
            col: m.col() + 1,
        }
    }
}

/// How a scalar was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    Plain,
    Quoted,
    Block,
}

/// A scalar resolved with the YAML 1.2 core schema.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Bool(bool),
    Int(i128),
    /// An integer literal too large for i128.
    HugeInt,
    Float(f64),
    Str,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Scalar {
    /// The scalar's content (quotes removed, escapes applied).
    pub text: String,
    pub style: Style,
    pub value: Value,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Kind {
    Scalar(Scalar),
    Seq(Vec<Node>),
    /// Entries in document order (merge keys already applied).
    Map(Vec<(Node, Node)>),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    pub kind: Kind,
    pub start: Pos,
    pub end: Pos,
}

impl Node {
    pub fn scalar(&self) -> Option<&Scalar> {
        match &self.kind {
            Kind::Scalar(s) => Some(s),
            _ => None,
        }
    }

    pub fn is_null(&self) -> bool {
        matches!(
            &self.kind,
            Kind::Scalar(Scalar {
                value: Value::Null,
                ..
            })
        )
    }

    /// Number of nodes in this subtree (for the alias budget).
    fn size(&self) -> usize {
        match &self.kind {
            Kind::Scalar(_) => 1,
            Kind::Seq(items) => 1 + items.iter().map(Node::size).sum::<usize>(),
            Kind::Map(entries) => {
                1 + entries
                    .iter()
                    .map(|(k, v)| k.size() + v.size())
                    .sum::<usize>()
            }
        }
    }
}

/// A problem found while reading the YAML itself.
#[derive(Debug, Clone, PartialEq)]
pub struct YamlProblem {
    pub start: Pos,
    pub end: Pos,
    pub message: String,
    pub help: Option<String>,
}

/// The parsed document plus problems that did not stop parsing (duplicate keys).
#[derive(Debug)]
pub struct Document {
    /// `None` for an empty document (nothing but comments).
    pub root: Option<Node>,
    pub problems: Vec<YamlProblem>,
}

/// Parse one YAML document. `Err` is a problem that stopped parsing.
///
/// Plain block YAML with one-line flow collections, what manifests are made
/// of, goes through the fast `block_scan` event source; anything else (and
/// any error) through saphyr. Both feed the same `Builder`, and the fast path
/// emits exactly saphyr's events, so the result does not depend on which path
/// ran.
pub fn parse(text: &str) -> Result<Document, YamlProblem> {
    match parse_block_subset(text) {
        Some(doc) => Ok(doc),
        None => parse_full(text),
    }
}

/// Below this size a second thread costs more than it saves.
const PARALLEL_MIN_BYTES: usize = 1 << 20;

/// The fast path; `None` when the text leaves the subset or building failed
/// (the full parser then reports the problem at the same place).
fn parse_block_subset(text: &str) -> Option<Document> {
    block_scan::precheck(text).ok()?;
    let two_cores = std::thread::available_parallelism().is_ok_and(|n| n.get() > 1);
    if two_cores && text.len() >= PARALLEL_MIN_BYTES {
        if let Some(doc) =
            block_scan::entities_split(text, text.len() / 2).and_then(|s| parse_in_two(text, &s))
        {
            return Some(doc);
        }
    }
    let mut builder = Builder::default();
    block_scan::scan(text, &mut |event, span| builder.event(event, span).is_ok()).ok()?;
    Some(builder.into_document())
}

/// The fast path on two threads, one per half of the `entities` mapping (the
/// cut is explained at [`block_scan::Split`]). The second half's entries are
/// appended to the mapping the first half built, before the mapping ends, so
/// the document, duplicate keys across the halves included, is the one a
/// single pass builds. `None` if anything is not as the cut expects.
fn parse_in_two(text: &str, split: &block_scan::Split) -> Option<Document> {
    let (head, body, rest) = (
        &text[..split.at],
        &text[split.at..split.end],
        &text[split.end..],
    );
    // The root mapping and `entities`: the depth the second half starts at.
    const DEPTH: usize = 2;
    std::thread::scope(|scope| {
        let second = std::thread::Builder::new()
            .spawn_scoped(scope, || {
                let mut b = Builder::default();
                for _ in 0..DEPTH {
                    b.stack.push(Frame {
                        collection: Collection::Map,
                        start: Pos::default(),
                        anchor: 0,
                        base: 0,
                    });
                }
                let mut sink = |event, span| b.event(event, span).is_ok();
                let mut s = block_scan::Scanner::inside_map(split.indent);
                s.lines(body, split.at_mark.line(), &mut sink).ok()?;
                s.settle(split.end_mark, 1, &mut sink).ok()?;
                (b.stack.len() == DEPTH).then_some((b.children, b.problems))
            })
            .ok()?;
        let mut b = Builder::default();
        let mut s = block_scan::Scanner::default();
        s.lines(head, 1, &mut |e, span| b.event(e, span).is_ok())
            .ok()?;
        // What the cut line does to the first half: close its deeper blocks.
        s.settle(split.at_mark, DEPTH, &mut |e, span| {
            b.event(e, span).is_ok()
        })
        .ok()?;
        let (children, problems) = second.join().ok()??;
        if !s.is_in_map(DEPTH, split.indent) || b.stack.len() != DEPTH {
            return None;
        }
        b.children.extend(children);
        b.problems.extend(problems);
        let mut sink = |event, span| b.event(event, span).is_ok();
        s.lines(rest, split.end_mark.line(), &mut sink).ok()?;
        s.settle(block_scan::end_of_stream(text), 0, &mut sink)
            .ok()?;
        Some(b.into_document())
    })
}

/// Every YAML construct, through saphyr's parser.
fn parse_full(text: &str) -> Result<Document, YamlProblem> {
    let mut builder = Builder::default();
    let mut parser = Parser::new_from_str(text);
    let mut documents = 0usize;
    while let Some(next) = parser.next_event() {
        let (event, span) = match next {
            Ok(next) => next,
            Err(e) => return Err(unclosed(&e, text, &builder).unwrap_or_else(|| scan_problem(e))),
        };
        match event {
            Event::StreamEnd => break,
            Event::DocumentStart(_) => {
                documents += 1;
                if documents > 1 {
                    return Err(YamlProblem {
                        start: Pos::from_marker(&span.start),
                        end: Pos::from_marker(&span.end),
                        message: "a manifest is one YAML document, but this file has more than one"
                            .into(),
                        help: Some(
                            "split the documents into separate files and pass each one".into(),
                        ),
                    });
                }
            }
            other => builder.event(other, span)?,
        }
    }
    Ok(Document {
        root: builder.root,
        problems: builder.problems,
    })
}

/// A flow collection (`[1, 2`, `{a: 1`, `key: [`) the file ends inside:
/// the parser reports the end of the file, after the last line, where no line
/// can be shown, and its message depends on what it expected next (`while
/// parsing a flow ...`, `did not find expected node content`, ...). The
/// innermost bracket still open is what to fix. Events do not say whether a
/// collection was written in flow style, so the character it starts at
/// decides (a block mapping whose first key is `[a]` starts at a `[` too, but
/// is a mapping, so the kind must match the bracket as well).
fn unclosed(e: &ScanError, text: &str, b: &Builder) -> Option<YamlProblem> {
    if e.marker().index() < text.chars().count() {
        return None;
    }
    let (start, bracket, close) = b.stack.iter().rev().find_map(|open| {
        let c = text
            .split('\n')
            .nth(open.start.line.checked_sub(1)?)?
            .chars()
            .nth(open.start.col.checked_sub(1)?)?;
        match (c, open.collection) {
            ('[', Collection::Seq) => Some((open.start, '[', ']')),
            ('{', Collection::Map) => Some((open.start, '{', '}')),
            _ => None,
        }
    })?;
    Some(YamlProblem {
        start,
        end: Pos {
            line: start.line,
            col: start.col + 1,
        },
        message: format!(
            "YAML syntax error: this `{bracket}` is never closed: the file ends inside it"
        ),
        help: Some(format!("close it with `{close}` where its items end")),
    })
}

fn scan_problem(e: ScanError) -> YamlProblem {
    let pos = Pos::from_marker(e.marker());
    let info = e.info().to_string();
    // Whole words: "unprintable" contains "tab".
    let words: Vec<&str> = info.split(|c: char| !c.is_ascii_alphanumeric()).collect();
    let help = if words.iter().any(|w| *w == "tab" || *w == "tabs") {
        Some("YAML does not allow tabs for indentation; indent with spaces".to_string())
    } else if info.contains("unprintable") {
        Some("YAML allows no control character (such as a NUL byte) other than tab and line breaks: remove the character under the caret (shown as a ␀-style symbol); is this a text file?".to_string())
    } else if info.contains("anchor or alias") || info.contains("unknown anchor") {
        Some("a value that starts with `*` or `&` must be quoted, e.g. \"*/5 * * * *\"".to_string())
    } else if info.contains("mapping values are not allowed") {
        Some("a value containing `: ` must be quoted".to_string())
    } else {
        None
    };
    YamlProblem {
        start: pos,
        end: pos,
        message: format!("YAML syntax error: {info}"),
        help,
    }
}

/// An open collection; its finished children sit on `Builder::children` from
/// index `base` on (keys and values alternating for a mapping).
struct Frame {
    collection: Collection,
    start: Pos,
    anchor: usize,
    base: usize,
}

#[derive(Clone, Copy)]
enum Collection {
    Seq,
    Map,
}

/// Events → tree. Children are collected on one shared stack and moved into an
/// exactly sized `Vec` when their collection ends: a large manifest has hundreds
/// of thousands of small mappings, and growing each one's `Vec` entry by entry
/// doubled the tree's memory.
#[derive(Default)]
struct Builder {
    stack: Vec<Frame>,
    children: Vec<Node>,
    anchors: Vec<Option<Node>>,
    alias_budget_used: usize,
    root: Option<Node>,
    problems: Vec<YamlProblem>,
}

impl Builder {
    fn into_document(self) -> Document {
        Document {
            root: self.root,
            problems: self.problems,
        }
    }

    fn event(&mut self, event: Event<'_>, span: Span) -> Result<(), YamlProblem> {
        let start = Pos::from_marker(&span.start);
        let end = Pos::from_marker(&span.end);
        match event {
            Event::Scalar(text, style, anchor, tag) => {
                let scalar = resolve_scalar(&text, style, tag.as_deref(), start, end)?;
                let node = Node {
                    kind: Kind::Scalar(scalar),
                    start,
                    end,
                };
                self.finish(node, anchor)
            }
            Event::SequenceStart(anchor, tag) => {
                self.open(Collection::Seq, anchor, tag.as_deref(), start)
            }
            Event::MappingStart(anchor, tag) => {
                self.open(Collection::Map, anchor, tag.as_deref(), start)
            }
            Event::SequenceEnd => match self.stack.pop() {
                Some(Frame {
                    collection: Collection::Seq,
                    start,
                    anchor,
                    base,
                }) => {
                    let items: Vec<Node> = self.children.drain(base..).collect();
                    self.finish(
                        Node {
                            kind: Kind::Seq(items),
                            start,
                            end,
                        },
                        anchor,
                    )
                }
                _ => Err(internal(start)),
            },
            Event::MappingEnd => match self.stack.pop() {
                Some(Frame {
                    collection: Collection::Map,
                    start,
                    anchor,
                    base,
                }) => {
                    let mut entries = Vec::with_capacity((self.children.len() - base) / 2);
                    let mut children = self.children.drain(base..);
                    while let (Some(key), Some(value)) = (children.next(), children.next()) {
                        entries.push((key, value));
                    }
                    drop(children);
                    let entries = self.merge_and_check(entries)?;
                    self.finish(
                        Node {
                            kind: Kind::Map(entries),
                            start,
                            end,
                        },
                        anchor,
                    )
                }
                _ => Err(internal(start)),
            },
            Event::Alias(id) => {
                let Some(Some(target)) = self.anchors.get(id) else {
                    return Err(YamlProblem {
                        start,
                        end,
                        message: "this alias refers to an anchor that is not defined before it"
                            .into(),
                        help: Some(
                            "define `&name` before using `*name`; a value that starts with `*` must be quoted"
                                .into(),
                        ),
                    });
                };
                let size = target.size();
                self.alias_budget_used = self.alias_budget_used.saturating_add(size);
                if self.alias_budget_used > MAX_ALIAS_NODES {
                    return Err(YamlProblem {
                        start,
                        end,
                        message: format!(
                            "aliases expand to more than {MAX_ALIAS_NODES} nodes; the manifest is refused"
                        ),
                        help: Some(
                            "a manifest with this much repetition is almost certainly malformed (an alias bomb); write the values out or reduce the nesting of aliases"
                                .into(),
                        ),
                    });
                }
                let node = target.clone();
                self.finish(node, 0)
            }
            Event::Nothing
            | Event::StreamStart
            | Event::StreamEnd
            | Event::DocumentStart(_)
            | Event::DocumentEnd => Ok(()),
        }
    }

    /// A collection starts: its tag is checked and its frame pushed, unless
    /// the nesting is already as deep as allowed.
    fn open(
        &mut self,
        collection: Collection,
        anchor: usize,
        tag: Option<&Tag>,
        start: Pos,
    ) -> Result<(), YamlProblem> {
        let expected = match collection {
            Collection::Seq => "seq",
            Collection::Map => "map",
        };
        check_collection_tag(tag, expected, start)?;
        if self.stack.len() >= MAX_DEPTH {
            return Err(YamlProblem {
                start,
                end: start,
                message: format!("nesting deeper than {MAX_DEPTH} levels; the manifest is refused"),
                help: Some("a limits manifest needs fewer than 10 levels".into()),
            });
        }
        self.stack.push(Frame {
            collection,
            start,
            anchor,
            base: self.children.len(),
        });
        Ok(())
    }

    /// A complete node: record its anchor, then attach it to its parent.
    fn finish(&mut self, node: Node, anchor: usize) -> Result<(), YamlProblem> {
        if anchor > 0 {
            if self.anchors.len() <= anchor {
                self.anchors.resize(anchor + 1, None);
            }
            self.anchors[anchor] = Some(node.clone());
        }
        if self.stack.is_empty() {
            self.root = Some(node);
        } else {
            self.children.push(node);
        }
        Ok(())
    }

    /// Apply `<<` merge keys (explicit keys win, earlier merged maps win over later
    /// ones, as in PyYAML) and report duplicate keys.
    fn merge_and_check(
        &mut self,
        entries: Vec<(Node, Node)>,
    ) -> Result<Vec<(Node, Node)>, YamlProblem> {
        let has_merge = entries.iter().any(|(k, _)| {
            matches!(k.scalar(), Some(Scalar { text, style: Style::Plain, .. }) if text == "<<")
        });
        let mut merged: Vec<(Node, Node)> = Vec::new();
        // Without a merge key (the usual case) the entries are kept as they are.
        let (mut own, entries) = if has_merge {
            (Vec::with_capacity(entries.len()), entries)
        } else {
            (entries, Vec::new())
        };
        for (key, value) in entries {
            let is_merge = matches!(
                key.scalar(),
                Some(Scalar { text, style: Style::Plain, .. }) if text == "<<"
            );
            if !is_merge {
                own.push((key, value));
                continue;
            }
            let sources: Vec<Node> = match value.kind {
                Kind::Map(_) => vec![value],
                Kind::Seq(items) if items.iter().all(|i| matches!(i.kind, Kind::Map(_))) => items,
                _ => {
                    return Err(YamlProblem {
                        start: value.start,
                        end: value.end,
                        message: "a `<<` merge key needs a mapping or a list of mappings".into(),
                        help: Some("write `<<: *name` where `&name` marks a mapping".into()),
                    })
                }
            };
            for source in sources {
                if let Kind::Map(src_entries) = source.kind {
                    for (k, v) in src_entries {
                        let text = key_text(&k);
                        let known = merged.iter().any(|(mk, _)| key_text(mk) == text);
                        if !known {
                            merged.push((k, v));
                        }
                    }
                }
            }
        }
        // Duplicate explicit keys (no allocation: small maps are compared pairwise).
        let mut duplicates: Vec<(usize, usize)> = Vec::new();
        if own.len() <= 16 {
            for i in 1..own.len() {
                if let Some(t) = key_str(&own[i].0) {
                    if let Some(j) = (0..i).find(|&j| key_str(&own[j].0) == Some(t)) {
                        duplicates.push((i, j));
                    }
                }
            }
        } else {
            let mut seen: std::collections::HashMap<&str, usize> =
                std::collections::HashMap::with_capacity(own.len());
            for (i, (key, _)) in own.iter().enumerate() {
                let Some(t) = key_str(key) else { continue };
                match seen.get(t) {
                    Some(&j) => duplicates.push((i, j)),
                    None => {
                        seen.insert(t, i);
                    }
                }
            }
        }
        for (i, j) in duplicates {
            let key = &own[i].0;
            self.problems.push(YamlProblem {
                start: key.start,
                end: key.end,
                message: format!(
                    "duplicate key `{}` (first defined on line {})",
                    key_str(key).unwrap_or_default(),
                    own[j].0.start.line
                ),
                help: Some(
                    "YAML readers keep only one of them, silently; remove or rename one".into(),
                ),
            });
        }
        for (k, v) in merged {
            let text = key_str(&k);
            if text.is_some() && !own.iter().any(|(ok, _)| key_str(ok) == text) {
                own.push((k, v));
            }
        }
        Ok(own)
    }
}

fn key_text(node: &Node) -> Option<String> {
    node.scalar().map(|s| s.text.clone())
}

fn key_str(node: &Node) -> Option<&str> {
    node.scalar().map(|s| s.text.as_str())
}

fn internal(pos: Pos) -> YamlProblem {
    YamlProblem {
        start: pos,
        end: pos,
        message: "YAML syntax error: unbalanced structure".into(),
        help: None,
    }
}

fn check_collection_tag(tag: Option<&Tag>, expected: &str, pos: Pos) -> Result<(), YamlProblem> {
    match tag {
        None => Ok(()),
        Some(t) if t.is_yaml_core_schema() && t.suffix == expected => Ok(()),
        Some(t) => Err(unsupported_tag(t, pos)),
    }
}

fn unsupported_tag(tag: &Tag, pos: Pos) -> YamlProblem {
    YamlProblem {
        start: pos,
        end: pos,
        message: format!("unsupported YAML tag `{tag}`"),
        help: Some(
            "a manifest uses plain values; only the core tags (!!str, !!int, !!float, !!bool, !!null) are understood"
                .into(),
        ),
    }
}

fn resolve_scalar(
    text: &str,
    style: ScalarStyle,
    tag: Option<&Tag>,
    start: Pos,
    end: Pos,
) -> Result<Scalar, YamlProblem> {
    let our_style = match style {
        ScalarStyle::Plain => Style::Plain,
        ScalarStyle::SingleQuoted | ScalarStyle::DoubleQuoted => Style::Quoted,
        ScalarStyle::Literal | ScalarStyle::Folded => Style::Block,
    };
    let value = match tag {
        None => {
            if our_style == Style::Plain {
                resolve_plain(text)
            } else {
                Value::Str
            }
        }
        Some(t) if t.is_yaml_core_schema() => {
            let bad = || YamlProblem {
                start,
                end,
                message: format!("`{text}` is not a valid !!{}", t.suffix),
                help: None,
            };
            match t.suffix.as_str() {
                "str" => Value::Str,
                "null" => match resolve_plain(text) {
                    Value::Null => Value::Null,
                    _ => return Err(bad()),
                },
                "bool" => match resolve_plain(text) {
                    v @ Value::Bool(_) => v,
                    _ => return Err(bad()),
                },
                "int" => match resolve_plain(text) {
                    v @ (Value::Int(_) | Value::HugeInt) => v,
                    _ => return Err(bad()),
                },
                "float" => match resolve_plain(text) {
                    Value::Int(i) => Value::Float(i as f64),
                    v @ Value::Float(_) => v,
                    _ => return Err(bad()),
                },
                _ => return Err(unsupported_tag(t, start)),
            }
        }
        // A non-specific `!` tag forces a string.
        Some(t) if t.handle == "!" && t.suffix.is_empty() => Value::Str,
        Some(t) => return Err(unsupported_tag(t, start)),
    };
    Ok(Scalar {
        text: text.to_string(),
        style: our_style,
        value,
    })
}

/// The YAML 1.2 core schema's resolution of a plain scalar.
pub fn resolve_plain(text: &str) -> Value {
    match text {
        "" | "~" | "null" | "Null" | "NULL" => return Value::Null,
        "true" | "True" | "TRUE" => return Value::Bool(true),
        "false" | "False" | "FALSE" => return Value::Bool(false),
        ".nan" | ".NaN" | ".NAN" => return Value::Float(f64::NAN),
        ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" => {
            return Value::Float(f64::INFINITY)
        }
        "-.inf" | "-.Inf" | "-.INF" => return Value::Float(f64::NEG_INFINITY),
        _ => {}
    }
    let bytes = text.as_bytes();
    // Decimal integer: [-+]?[0-9]+
    let (sign, digits) = match bytes.first() {
        Some(b'-') | Some(b'+') => (&text[..1], &text[1..]),
        _ => ("", text),
    };
    if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
        return match text.parse::<i128>() {
            Ok(v) => Value::Int(v),
            Err(_) => Value::HugeInt,
        };
    }
    if sign.is_empty() {
        if let Some(oct) = text.strip_prefix("0o") {
            if !oct.is_empty() && oct.bytes().all(|b| (b'0'..=b'7').contains(&b)) {
                return i128::from_str_radix(oct, 8)
                    .map(Value::Int)
                    .unwrap_or(Value::HugeInt);
            }
        }
        if let Some(hex) = text.strip_prefix("0x") {
            if !hex.is_empty() && hex.bytes().all(|b| b.is_ascii_hexdigit()) {
                return i128::from_str_radix(hex, 16)
                    .map(Value::Int)
                    .unwrap_or(Value::HugeInt);
            }
        }
    }
    if is_core_float(digits) {
        if let Ok(f) = text.parse::<f64>() {
            return Value::Float(f);
        }
    }
    Value::Str
}

/// `(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?` (sign already stripped).
fn is_core_float(s: &str) -> bool {
    let b = s.as_bytes();
    let mut i = 0;
    let int_start = i;
    while i < b.len() && b[i].is_ascii_digit() {
        i += 1;
    }
    let int_digits = i - int_start;
    let mut frac_digits = 0;
    if i < b.len() && b[i] == b'.' {
        i += 1;
        let fs = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        frac_digits = i - fs;
        if int_digits == 0 && frac_digits == 0 {
            return false;
        }
    } else if int_digits == 0 {
        return false;
    }
    if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
        i += 1;
        if i < b.len() && (b[i] == b'-' || b[i] == b'+') {
            i += 1;
        }
        let es = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        if i == es {
            return false;
        }
    }
    let _ = frac_digits;
    i == b.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root(text: &str) -> Node {
        parse(text).unwrap().root.unwrap()
    }

    fn map_get<'a>(node: &'a Node, key: &str) -> &'a Node {
        match &node.kind {
            Kind::Map(entries) => {
                &entries
                    .iter()
                    .find(|(k, _)| k.scalar().unwrap().text == key)
                    .unwrap()
                    .1
            }
            _ => panic!("not a map"),
        }
    }

    #[test]
    fn core_schema_resolution() {
        assert_eq!(resolve_plain("100"), Value::Int(100));
        assert_eq!(resolve_plain("-5"), Value::Int(-5));
        assert_eq!(resolve_plain("0x10"), Value::Int(16));
        assert_eq!(resolve_plain("0o17"), Value::Int(15));
        assert_eq!(resolve_plain("1e3"), Value::Float(1000.0));
        assert_eq!(resolve_plain("1.5"), Value::Float(1.5));
        assert_eq!(resolve_plain(".5"), Value::Float(0.5));
        assert_eq!(resolve_plain("yes"), Value::Str);
        assert_eq!(resolve_plain("1_000"), Value::Str);
        assert_eq!(resolve_plain("1:30"), Value::Str);
        assert_eq!(resolve_plain("True"), Value::Bool(true));
        assert_eq!(resolve_plain("~"), Value::Null);
        assert_eq!(resolve_plain("."), Value::Str);
        assert_eq!(resolve_plain("1e"), Value::Str);
        assert_eq!(
            resolve_plain("99999999999999999999999999999999999999999"),
            Value::HugeInt
        );
        assert!(matches!(resolve_plain(".nan"), Value::Float(f) if f.is_nan()));
    }

    #[test]
    fn positions_are_one_based_and_quotes_are_strings() {
        let r = root("a: 'x'\nb:\n  c: 5\n");
        let a = map_get(&r, "a");
        assert_eq!(a.start, Pos { line: 1, col: 4 });
        assert_eq!(a.scalar().unwrap().value, Value::Str);
        let c = map_get(map_get(&r, "b"), "c");
        assert_eq!(c.start, Pos { line: 3, col: 6 });
        assert_eq!(c.scalar().unwrap().value, Value::Int(5));
    }

    #[test]
    fn duplicate_keys_are_reported_with_both_lines() {
        let doc = parse("a: 1\nb: 2\na: 3\n").unwrap();
        assert_eq!(doc.problems.len(), 1);
        assert_eq!(doc.problems[0].start.line, 3);
        assert!(doc.problems[0].message.contains("line 1"));
    }

    #[test]
    fn merge_keys_fill_missing_keys_only() {
        let r = root("base: &b {x: 1, y: 2}\nm:\n  <<: *b\n  y: 3\n");
        let m = map_get(&r, "m");
        assert_eq!(map_get(m, "x").scalar().unwrap().value, Value::Int(1));
        assert_eq!(map_get(m, "y").scalar().unwrap().value, Value::Int(3));
    }

    #[test]
    fn alias_bomb_is_refused() {
        let mut text = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 1..10 {
            let prev = i - 1;
            text.push_str(&format!(
                "a{i}: &a{i} [*a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}]\n"
            ));
        }
        let err = parse(&text).unwrap_err();
        assert!(err.message.contains("aliases expand"), "{}", err.message);
    }

    #[test]
    fn deep_nesting_is_refused() {
        let text = "[".repeat(10_000);
        let err = parse(&text).unwrap_err();
        assert!(err.message.contains("nesting") || err.message.contains("syntax"));
    }

    #[test]
    fn two_documents_are_refused() {
        let err = parse("a: 1\n---\nb: 2\n").unwrap_err();
        assert!(err.message.contains("one YAML document"));
    }

    #[test]
    fn unknown_tags_are_refused() {
        assert!(parse("a: !foo 3\n").is_err());
        let r = root("a: !!str 5\n");
        assert_eq!(map_get(&r, "a").scalar().unwrap().value, Value::Str);
    }

    /// The fast path builds the very document saphyr's events build (duplicate
    /// keys and merge keys included); Debug text so NaN compares equal.
    #[test]
    fn fast_and_full_paths_build_the_same_document() {
        let root = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/manifests");
        let mut texts = vec![
            crate::manifest::block_scan::tests::generated_manifest(5, false),
            crate::manifest::block_scan::tests::generated_manifest(5, true),
            "a: 1\nb:\n  c: 2\n  c: 3\na: 4\n".to_string(),
            "<<: 1\nm:\n  - <<: x\n    y: .nan\n".to_string(),
        ];
        for dir in ["valid", "invalid"] {
            for entry in std::fs::read_dir(format!("{root}/{dir}")).unwrap() {
                let path = entry.unwrap().path();
                if path.extension().is_some_and(|e| e == "yaml") {
                    texts.push(std::fs::read_to_string(path).unwrap());
                }
            }
        }
        let mut fast = 0;
        for text in &texts {
            if let Some(doc) = parse_block_subset(text) {
                fast += 1;
                let full = parse_full(text).map(|d| format!("{:?} {:?}", d.root, d.problems));
                assert_eq!(
                    Ok(format!("{:?} {:?}", doc.root, doc.problems)),
                    full,
                    "{text}"
                );
            }
        }
        assert!(fast * 4 > texts.len() * 3, "{fast} of {}", texts.len());
    }

    /// Two threads build the document one pass builds, wherever the cut falls.
    #[test]
    fn parse_in_two_builds_the_single_pass_document() {
        let generated = crate::manifest::block_scan::tests::generated_manifest(20, false);
        let texts = [
            generated.clone(),
            crate::manifest::block_scan::tests::generated_manifest(20, true),
            // More after the mapping, nulls and an indentless list before cuts,
            // a duplicate entity across the halves, comments at odd columns.
            format!(
                "{generated}  user-000001:\n    x:\n  e:\n  - a\n  -\n# c\n    # c\n\nafter: 1\n"
            ),
            "entities:\n   a: 1\n   b:\n     - x\n   c:\n   a:\n     d: 2\nz:\n".to_string(),
            "namespace: n\nentities:\n  a:\n    b: 1\n  c:\n    - - d\n  e: f\n".to_string(),
        ];
        let mut cuts = 0;
        for text in &texts {
            let full = parse_full(text).map(|d| format!("{:?} {:?}", d.root, d.problems));
            let mut tried = Vec::new();
            for (from, _) in text.match_indices('\n') {
                let Some(split) = block_scan::entities_split(text, from) else {
                    continue;
                };
                if tried.contains(&split) {
                    continue;
                }
                tried.push(split);
                let doc = parse_in_two(text, &split)
                    .unwrap_or_else(|| panic!("cut {split:?} not taken:\n{text}"));
                let two = format!("{:?} {:?}", doc.root, doc.problems);
                assert_eq!(Ok(two), full, "cut {split:?}:\n{text}");
                cuts += 1;
            }
        }
        assert!(cuts > 40, "only {cuts} cuts tried");
        // A second half outside the subset: no document from the fast path.
        let bad = "entities:\n  a: 1\n  b: {c: 1,\n    d: 2}\n";
        let split = block_scan::entities_split(bad, 0).unwrap();
        assert!(parse_in_two(bad, &split).is_none());
    }

    #[test]
    fn a_flow_collection_the_file_ends_inside_is_reported_at_its_bracket() {
        // (text, line, column of the innermost open bracket, the bracket)
        let cases = [
            ("namespace: d\nsystem: [\n", 2, 9, '['),
            ("namespace: d\nsystem: {\n", 2, 9, '{'),
            ("namespace: d\nsystem: {limits: \n", 2, 9, '{'),
            ("[a,\n", 1, 1, '['),
            ("[a, b", 1, 1, '['),
            (
                "system:\n  limits:\n    tpd: {\n     capacity: 200,\n",
                3,
                10,
                '{',
            ),
            ("tpd: {capacity: 200, refill_amount: \n", 1, 6, '{'),
            ("s: [a, {b: [c, d], e: 1\n", 1, 8, '{'),
            // An implicit mapping inside a list starts at its key, not a bracket.
            ("s: [a: 1,\n", 1, 4, '['),
            ("s: [\r\n  a,\r\n", 1, 4, '['),
        ];
        for (text, line, col, bracket) in cases {
            let err = parse(text).unwrap_err();
            assert_eq!(err.start, Pos { line, col }, "{text:?}: {err:?}");
            assert_eq!(err.end, Pos { line, col: col + 1 }, "{text:?}");
            assert!(
                err.message
                    .contains(&format!("this `{bracket}` is never closed")),
                "{text:?}: {err:?}"
            );
            assert!(err.help.is_some(), "{text:?}");
        }
        // Errors elsewhere, or with no flow collection open, keep saphyr's report.
        for text in [
            "s: [\"abc\n",
            "a: [1]\nb: c: d\n",
            "a:\n  - b\n c\n",
            "[a]: 1\nb: &\n",
        ] {
            let err = parse(text).unwrap_err();
            assert!(!err.message.contains("never closed"), "{text:?}: {err:?}");
        }
    }

    #[test]
    fn unquoted_cron_is_a_syntax_error_with_quoting_help() {
        let err = parse("cron: */5 * * * *\n").unwrap_err();
        assert!(err.help.unwrap_or_default().contains("quoted"));
    }
}
