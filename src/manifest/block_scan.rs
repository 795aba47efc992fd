//! A fast event source for the plain block YAML that manifests are written in.
//!
//! saphyr's scanner is general (multi-line flow collections and scalars,
//! anchors, tags, directives) and spends most of a large manifest's parse time
//! on that generality. Real manifests use a small subset, one construct per
//! line:
//!
//! ```yaml
//! # comment
//! key: plain value      # comment
//! key: "quoted \" escape" | 'it''s'
//! key:                  (a nested block follows, or the value is null)
//!   - item
//!   - key: value        (a compact mapping inside a sequence entry)
//!   - - nested
//!   - {cron: "0 0 * * *", tz: UTC, scale: 0.5}
//! key: {capacity: 1000, tags: [a, "b"]}   (one-line flow, nested freely)
//! ```
//!
//! [`scan`] recognises exactly that subset and emits the same events, with the
//! same spans, as `saphyr_parser::Parser` does on it. On the first line outside
//! the subset (anything with tabs, CR, flow collections that span lines or hold
//! comments, block scalars, anchors, aliases, tags, document markers, quoted
//! block keys, multi-line scalars, or indentation that YAML would reject) it
//! stops with [`Unsupported`] and the caller parses the whole text again with
//! saphyr, so errors, their messages and every construct outside the subset
//! keep saphyr's behaviour. Equivalence on the subset is checked by
//! differential tests against saphyr (below, on every fixture, generated block
//! and flow manifests, edge cases, and random block and flow YAML; and in
//! `yaml.rs` on the built documents).
//!
//! Positions: the subset is ASCII outside comments (quoted scalars included;
//! their escapes may stand for any character), so before a comment a byte
//! offset is also the character column saphyr reports; markers carry line and
//! column only (the tree builder reads nothing else).

use std::borrow::Cow;

use saphyr_parser::{Event, Marker, ScalarStyle, Span};

/// The text uses YAML outside the subset (or the sink refused an event): parse
/// it with the full parser instead.
#[derive(Debug, PartialEq, Eq)]
pub struct Unsupported;

type Step = Result<(), Unsupported>;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Block {
    Map,
    Seq,
}

/// An open block collection: its kind, the column of its keys or dashes, and
/// whether it is a sequence at its parent key's own column (`key:\n- item`).
#[derive(Clone, Copy)]
struct Open {
    block: Block,
    indent: usize,
    indentless: bool,
}

/// A `key:` or `-` whose value is not on its line: the next line decides
/// between a nested block and null.
#[derive(Clone, Copy)]
enum Pending {
    /// `key:` at column `indent`; a null value is placed at the colon.
    Key { indent: usize, colon: Marker },
    /// `-` at column `dash`; a null item is placed at `null`.
    Dash { dash: usize, null: Marker },
}

/// Where events go; `false` stops the scan.
pub type Sink<'a, 'b> = dyn FnMut(Event<'a>, Span) -> bool + 'b;

/// Emit the events of `text` to `sink`, or return [`Unsupported`] as soon as
/// the text leaves the subset. Events already emitted then belong to an
/// abandoned parse and must be discarded.
pub fn scan<'a>(text: &'a str, sink: &mut Sink<'a, '_>) -> Step {
    precheck(text)?;
    let mut s = Scanner::default();
    s.lines(text, 1, sink)?;
    s.settle(end_of_stream(text), 0, sink)
}

/// Whole-text conditions of the subset.
pub fn precheck(text: &str) -> Step {
    // Where a text without a final newline ends depends on its last token in
    // saphyr; such files are rare enough to leave to it.
    let unusual = text.starts_with('\u{feff}') || !(text.is_empty() || text.ends_with('\n'));
    let bytes = text.as_bytes();
    if unusual || bytes.contains(&b'\t') || bytes.contains(&b'\r') {
        return Err(Unsupported);
    }
    Ok(())
}

/// saphyr puts the end of the stream at column 0 of the line after the last.
pub fn end_of_stream(text: &str) -> Marker {
    mark(text.bytes().filter(|&b| b == b'\n').count() + 1, 0)
}

/// Where a large manifest's `entities:` mapping is cut in two, so that two
/// threads can scan and build the halves (see `yaml::parse_in_two`).
///
/// The rule: the text is in the subset (checked by the scans themselves, which
/// fall back on anything else), so every line stands alone: no scalar, flow
/// collection or comment spans lines. `entities:` is a top-level key written
/// alone on its line at column 0, and its value is a block mapping whose keys
/// sit at the column `indent` of its first content line. Any later content
/// line at exactly that column that is not a `-` item, before the first line
/// less indented (the mapping's end), starts an entity and is a safe cut: the
/// first half's blocks deeper than the mapping end there, and the second half
/// starts at a key of the mapping. (The first entity is no cut: the mapping
/// opens there.)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Split {
    /// Column of the entity keys.
    pub indent: usize,
    /// Byte offset of the first line of the second half, and its position.
    pub at: usize,
    pub at_mark: Marker,
    /// Byte offset of the first line after the mapping (the text's length if
    /// none), and where saphyr ends the blocks that line closes.
    pub end: usize,
    pub end_mark: Marker,
}

/// The cut described at [`Split`], if the text has one, at the first entity
/// that starts at byte `from` or later (the middle of the text, but the tests
/// try every entity).
pub fn entities_split(text: &str, from: usize) -> Option<Split> {
    let (mut offset, mut lines) = (0, 0);
    let mut indent = None;
    let mut cut: Option<(usize, Marker)> = None;
    let mut seen_entities = false;
    for (i, line) in text.split_inclusive('\n').enumerate() {
        let (start, n) = (offset, i + 1);
        offset += line.len();
        lines = n;
        let content = line.strip_suffix('\n').unwrap_or(line);
        let spaces = skip_spaces(content.as_bytes(), 0);
        if spaces == content.len() || content.as_bytes()[spaces] == b'#' {
            continue;
        }
        match indent {
            None if seen_entities => {
                if spaces == 0 || is_dash(content.as_bytes(), spaces) {
                    return None;
                }
                indent = Some(spaces);
            }
            None => seen_entities = content.trim_end() == "entities:",
            Some(k) if spaces < k => {
                let (at, at_mark) = cut?;
                return Some(Split {
                    indent: k,
                    at,
                    at_mark,
                    end: start,
                    end_mark: mark(n, spaces),
                });
            }
            Some(k)
                if spaces == k
                    && cut.is_none()
                    && start >= from
                    && !is_dash(content.as_bytes(), k) =>
            {
                cut = Some((start, mark(n, k)));
            }
            Some(_) => {}
        }
    }
    let (at, at_mark) = cut?;
    Some(Split {
        indent: indent?,
        at,
        at_mark,
        end: text.len(),
        end_mark: mark(lines + 1, 0),
    })
}

/// The scanner's state between lines. Chunks of whole lines can be fed in
/// turn, and a scan can start inside a mapping ([`Scanner::inside_map`]).
#[derive(Default)]
pub struct Scanner {
    stack: Vec<Open>,
    pending: Option<Pending>,
    started: bool,
}

impl Scanner {
    /// A scan that starts at a key of a block mapping whose keys are at column
    /// `indent` (the mapping's own events are the caller's business).
    pub fn inside_map(indent: usize) -> Scanner {
        Scanner {
            stack: vec![Open {
                block: Block::Map,
                indent,
                indentless: false,
            }],
            pending: None,
            started: true,
        }
    }

    /// Whether the innermost open block is a mapping at column `indent`,
    /// `depth` blocks deep, with no value pending.
    pub fn is_in_map(&self, depth: usize, indent: usize) -> bool {
        let top = self.stack.last();
        self.stack.len() == depth
            && self.pending.is_none()
            && top.is_some_and(|o| o.block == Block::Map && o.indent == indent && !o.indentless)
    }

    /// Scan `chunk` (whole lines, each ending in a newline) whose first line is
    /// line `first` of the file.
    pub fn lines<'a>(&mut self, chunk: &'a str, first: usize, sink: &mut Sink<'a, '_>) -> Step {
        for (i, line) in chunk.split_terminator('\n').enumerate() {
            self.line(sink, first + i, line)?;
        }
        Ok(())
    }

    /// What a line less indented than every open block above the outermost
    /// `keep` does at `at`: a pending value becomes null and those blocks end.
    /// With `keep` 0 at the end of the stream, this ends the scan.
    pub fn settle<'a>(&mut self, at: Marker, keep: usize, sink: &mut Sink<'a, '_>) -> Step {
        match self.pending.take() {
            Some(Pending::Key { colon: null, .. } | Pending::Dash { null, .. }) => {
                emit_null(sink, null, null)?
            }
            None => {}
        }
        while self.stack.len() > keep {
            self.close(sink, at)?;
        }
        Ok(())
    }
}

/// A byte that may appear anywhere in a plain scalar of the subset.
fn plain_safe(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"-_./+~()$^=<;".contains(&b)
}

/// Column (in characters, as saphyr counts) of byte offset `at` in `line`.
fn col(line: &str, at: usize) -> usize {
    let head = &line.as_bytes()[..at];
    if head.is_ascii() {
        at
    } else {
        line[..at].chars().count()
    }
}

fn mark(line_no: usize, col: usize) -> Marker {
    Marker::new(0, line_no, col)
}

/// The end of `line` after optional spaces and an optional comment starting at
/// byte `at`; `None` if anything else follows. A comment needs a space before it
/// unless it starts the line's content (`start_of_content`).
fn rest_is_blank(line: &str, at: usize, start_of_content: bool) -> Option<()> {
    let bytes = line.as_bytes();
    let mut i = at;
    while i < bytes.len() && bytes[i] == b' ' {
        i += 1;
    }
    if i == bytes.len() {
        return Some(());
    }
    if bytes[i] == b'#' && (i > at || start_of_content) {
        let comment = &line[i..];
        let printable = comment
            .chars()
            .all(|c| !c.is_control() && !matches!(c, '\u{feff}' | '\u{fffe}' | '\u{ffff}'));
        return printable.then_some(());
    }
    None
}

/// A plain scalar starting at byte `at`: its end (after the last non-space
/// character) and the byte where scanning stopped (end of line, `#`, or a `:`
/// followed by a space or the end of the line).
fn plain(line: &str, at: usize) -> Option<(usize, usize)> {
    let bytes = line.as_bytes();
    let first = *bytes.get(at)?;
    if !plain_safe(first) {
        return None;
    }
    if first == b'-' && !bytes.get(at + 1).is_some_and(|&b| plain_safe(b)) {
        return None;
    }
    let (mut i, mut end) = (at, at);
    while i < bytes.len() {
        match bytes[i] {
            b if plain_safe(b) => {
                i += 1;
                end = i;
            }
            b':' if bytes.get(i + 1).is_some_and(|&b| plain_safe(b)) => {
                i += 1;
                end = i;
            }
            b' ' => i += 1,
            _ => break,
        }
    }
    Some((end, i))
}

/// Whether a `-` at byte `at` starts a block sequence entry.
fn is_dash(bytes: &[u8], at: usize) -> bool {
    bytes[at] == b'-' && bytes.get(at + 1).is_none_or(|&b| b == b' ')
}

/// First byte at or after `at` that is not a space.
fn skip_spaces(bytes: &[u8], mut at: usize) -> usize {
    while at < bytes.len() && bytes[at] == b' ' {
        at += 1;
    }
    at
}

/// Hands one event to `sink`; a refusal ends the fast path.
fn emit<'a>(sink: &mut Sink<'a, '_>, event: Event<'a>, start: Marker, end: Marker) -> Step {
    if sink(event, Span::new(start, end)) {
        Ok(())
    } else {
        Err(Unsupported)
    }
}

/// An empty plain scalar (a null value) spanning `start` to `end`.
fn emit_null(sink: &mut Sink<'_, '_>, start: Marker, end: Marker) -> Step {
    let event = Event::Scalar(Cow::Borrowed(""), ScalarStyle::Plain, 0, None);
    emit(sink, event, start, end)
}

impl Scanner {
    fn open<'a>(
        &mut self,
        sink: &mut Sink<'a, '_>,
        block: Block,
        at: Marker,
        indent: usize,
        indentless: bool,
    ) -> Step {
        self.stack.push(Open {
            block,
            indent,
            indentless,
        });
        self.started = true;
        let event = match block {
            Block::Map => Event::MappingStart(0, None),
            Block::Seq => Event::SequenceStart(0, None),
        };
        emit(sink, event, at, at)
    }

    fn close<'a>(&mut self, sink: &mut Sink<'a, '_>, at: Marker) -> Step {
        let event = match self.stack.pop() {
            Some(Open {
                block: Block::Map, ..
            }) => Event::MappingEnd,
            Some(Open {
                block: Block::Seq, ..
            }) => Event::SequenceEnd,
            None => return Err(Unsupported),
        };
        emit(sink, event, at, at)
    }

    /// One line: settle a pending value, close the blocks it dedents out of,
    /// then read its entry.
    fn line<'a>(&mut self, sink: &mut Sink<'a, '_>, n: usize, line: &'a str) -> Step {
        let bytes = line.as_bytes();
        let indent = skip_spaces(bytes, 0);
        if indent == bytes.len() || bytes[indent] == b'#' {
            return rest_is_blank(line, indent, true).ok_or(Unsupported);
        }
        if indent == 0 && (line.starts_with("---") || line.starts_with("...")) {
            return Err(Unsupported);
        }
        // A flow collection as the whole document; any later content leaves
        // the subset (the stack stays empty once started).
        if !self.started && matches!(bytes[indent], b'{' | b'[') {
            self.started = true;
            return Flow { sink, n, line }.collection(indent, 0).map(drop);
        }
        let block = if is_dash(bytes, indent) {
            Block::Seq
        } else {
            Block::Map
        };
        let here = mark(n, indent);
        let nested = match self.pending.take() {
            None => false,
            Some(Pending::Key { indent: key, colon }) => {
                if indent > key {
                    self.open(sink, block, here, indent, false)?;
                    true
                } else if indent == key && block == Block::Seq {
                    // saphyr starts an indentless sequence at its first item's content.
                    let content = skip_spaces(bytes, indent + 1);
                    let start = if content == bytes.len() || bytes[content] == b'#' {
                        bytes.len()
                    } else {
                        content
                    };
                    self.open(sink, block, mark(n, col(line, start)), indent, true)?;
                    true
                } else {
                    emit_null(sink, colon, colon)?;
                    false
                }
            }
            Some(Pending::Dash { dash, null }) => {
                if indent > dash {
                    self.open(sink, block, here, indent, false)?;
                    true
                } else {
                    emit_null(sink, null, null)?;
                    false
                }
            }
        };
        if !nested {
            while let Some(top) = self.stack.last() {
                let dedent = top.indent > indent
                    || (top.indent == indent && top.indentless && block == Block::Map);
                if !dedent {
                    break;
                }
                self.close(sink, here)?;
            }
            match self.stack.last() {
                Some(top) if top.indent == indent && top.block == block => {}
                None if !self.started => self.open(sink, block, here, indent, false)?,
                _ => return Err(Unsupported),
            }
        }
        self.entry(sink, n, line, indent)
    }

    /// The entry at byte `at`, inside the block on top of the stack.
    fn entry<'a>(&mut self, sink: &mut Sink<'a, '_>, n: usize, line: &'a str, at: usize) -> Step {
        let bytes = line.as_bytes();
        if is_dash(bytes, at) {
            let content = skip_spaces(bytes, at + 1);
            if content == bytes.len() || bytes[content] == b'#' {
                rest_is_blank(line, at + 1, false).ok_or(Unsupported)?;
                self.pending = Some(Pending::Dash {
                    dash: at,
                    null: mark(n, col(line, bytes.len())),
                });
                return Ok(());
            }
            let c = col(line, content);
            if is_dash(bytes, content) {
                self.open(sink, Block::Seq, mark(n, c), c, false)?;
                return self.entry(sink, n, line, content);
            }
            if self.key_at(line, content).is_some() {
                self.open(sink, Block::Map, mark(n, c), c, false)?;
                return self.entry(sink, n, line, content);
            }
            return self.value(sink, n, line, content);
        }
        let (end, colon) = self.key_at(line, at).ok_or(Unsupported)?;
        emit(
            sink,
            Event::Scalar(Cow::Borrowed(&line[at..end]), ScalarStyle::Plain, 0, None),
            mark(n, col(line, at)),
            mark(n, col(line, end)),
        )?;
        let value = skip_spaces(bytes, colon + 1);
        if value == bytes.len() || bytes[value] == b'#' {
            rest_is_blank(line, colon + 1, false).ok_or(Unsupported)?;
            self.pending = Some(Pending::Key {
                indent: at,
                colon: mark(n, col(line, colon)),
            });
            return Ok(());
        }
        self.value(sink, n, line, value)
    }

    /// `key:` at byte `at`: the key's end and the colon's byte, if this is one.
    fn key_at(&self, line: &str, at: usize) -> Option<(usize, usize)> {
        let bytes = line.as_bytes();
        let (end, stop) = plain(line, at)?;
        let is_key = end == stop
            && bytes.get(stop) == Some(&b':')
            && bytes.get(stop + 1).is_none_or(|&b| b == b' ');
        // saphyr limits implicit keys to 1024 characters.
        (is_key && end - at < 1000).then_some((end, stop))
    }

    /// A value at byte `at` that ends its line (bar a comment): a one-line
    /// flow collection or a scalar.
    fn value<'a>(&mut self, sink: &mut Sink<'a, '_>, n: usize, line: &'a str, at: usize) -> Step {
        match line.as_bytes()[at] {
            b'{' | b'[' => Flow { sink, n, line }.collection(at, 0).map(drop),
            _ => self.scalar(sink, n, line, at),
        }
    }

    /// A single-line scalar value at byte `at`, then nothing but a comment.
    fn scalar<'a>(&mut self, sink: &mut Sink<'a, '_>, n: usize, line: &'a str, at: usize) -> Step {
        let start = mark(n, col(line, at));
        if let Some((text, style, after)) = quoted(line, at)? {
            rest_is_blank(line, after, false).ok_or(Unsupported)?;
            // saphyr ends a quoted scalar's span after the rest of its line.
            let end = mark(n, col(line, line.len()));
            return emit(sink, Event::Scalar(text, style, 0, None), start, end);
        }
        let (end, _) = plain(line, at).ok_or(Unsupported)?;
        rest_is_blank(line, end, false).ok_or(Unsupported)?;
        emit(
            sink,
            Event::Scalar(Cow::Borrowed(&line[at..end]), ScalarStyle::Plain, 0, None),
            start,
            mark(n, col(line, end)),
        )
    }
}

/// Deepest nesting of flow collections the fast path takes; deeper ones go to
/// saphyr (and the tree's own depth limit).
const MAX_FLOW_DEPTH: usize = 32;

/// One-line flow collections: `{key: value, ...}` and `[item, ...]` opened and
/// closed on one line, nested freely, whose keys are scalars and whose values
/// and items are scalars or such collections, entries separated by `,`.
/// Everything else in flow (a comment, a line break, a trailing comma, an
/// empty or complex key, `[a: b]` pairs, anchors, tags, `?`) leaves the subset.
///
/// saphyr's spans here: an opening bracket or a `,` spans itself and the
/// spaces after it; a closing bracket also the rest of the line when it closes
/// the outermost collection; a quoted scalar its quotes and the spaces after
/// them; a plain scalar its text. A null value after `:` sits at the colon; a
/// key without `:` gets a null value spanning the token after the key.
///
/// Inside a flow collection the line is ASCII (plain scalars are, quoted ones
/// are checked), so there a byte offset is the column.
///
/// Flow keeps no block state: it needs only where the events go and the line
/// they come from (`line`, line number `n`).
struct Flow<'a, 's> {
    sink: &'s mut Sink<'a, 's>,
    n: usize,
    line: &'a str,
}

impl<'a> Flow<'a, '_> {
    /// The collection whose bracket is at byte `open`: its events, then the
    /// byte where the token after its closing bracket starts (for the
    /// outermost, `depth` 0, the end of the line).
    fn collection(&mut self, open: usize, depth: usize) -> Result<usize, Unsupported> {
        if depth >= MAX_FLOW_DEPTH {
            return Err(Unsupported);
        }
        let (n, line) = (self.n, self.line);
        let bytes = line.as_bytes();
        let map = bytes[open] == b'{';
        let (start, end, close) = if map {
            (Event::MappingStart(0, None), Event::MappingEnd, b'}')
        } else {
            (Event::SequenceStart(0, None), Event::SequenceEnd, b']')
        };
        let mut at = skip_spaces(bytes, open + 1);
        emit(self.sink, start, mark(n, open), mark(n, at))?;
        if bytes.get(at) != Some(&close) {
            loop {
                at = if map {
                    self.pair(at, depth)?
                } else {
                    self.node(at, depth)?
                };
                match bytes.get(at) {
                    Some(b',') => at = skip_spaces(bytes, at + 1),
                    Some(&b) if b == close => break,
                    _ => return Err(Unsupported),
                }
                // saphyr ends a mapping at a trailing comma; left to it.
                if bytes.get(at) == Some(&close) {
                    return Err(Unsupported);
                }
            }
        }
        let after = flow_token_end(line, at, depth)?;
        emit(self.sink, end, mark(n, at), mark(n, col(line, after)))?;
        Ok(after)
    }

    /// A flow item at byte `at`: a nested collection or a scalar; returns the
    /// byte where the next token starts.
    fn node(&mut self, at: usize, depth: usize) -> Result<usize, Unsupported> {
        match self.line.as_bytes().get(at) {
            Some(b'{' | b'[') => self.collection(at, depth + 1),
            _ => self.scalar(at).map(|(next, _)| next),
        }
    }

    /// A scalar inside a flow collection at byte `at`: the byte where the next
    /// token starts, and whether the scalar was quoted.
    fn scalar(&mut self, at: usize) -> Result<(usize, bool), Unsupported> {
        let (n, line) = (self.n, self.line);
        let bytes = line.as_bytes();
        if let Some((text, style, after)) = quoted(line, at)? {
            let next = skip_spaces(bytes, after);
            let event = Event::Scalar(text, style, 0, None);
            emit(self.sink, event, mark(n, at), mark(n, next))?;
            return Ok((next, true));
        }
        let (end, next) = plain(line, at).ok_or(Unsupported)?;
        let text = &line[at..end];
        // saphyr refuses a word `-` right before a flow indicator (`[a -]`).
        if end == next && text.ends_with(" -") {
            return Err(Unsupported);
        }
        let event = Event::Scalar(Cow::Borrowed(text), ScalarStyle::Plain, 0, None);
        emit(self.sink, event, mark(n, at), mark(n, end))?;
        Ok((next, false))
    }

    /// A mapping entry at byte `at`: a scalar key, then `: value`, `:` alone
    /// or nothing; returns the byte where the next token starts.
    fn pair(&mut self, at: usize, depth: usize) -> Result<usize, Unsupported> {
        let (n, line) = (self.n, self.line);
        let bytes = line.as_bytes();
        let (next, quoted_key) = self.scalar(at)?;
        match bytes.get(next) {
            Some(b':') => {
                // After a plain key, a `:` needs a space or an end of entry
                // after it (`a:b` is one scalar, `a:[` an error); a quoted
                // key's value may follow its colon directly (`"a":b`).
                let spaced = matches!(bytes.get(next + 1), Some(b' ' | b',' | b'}'));
                if !(spaced || quoted_key) {
                    return Err(Unsupported);
                }
                let value = skip_spaces(bytes, next + 1);
                if matches!(bytes.get(value), Some(b',' | b'}')) {
                    let colon = mark(n, next);
                    emit_null(self.sink, colon, colon)?;
                    return Ok(value);
                }
                self.node(value, depth)
            }
            Some(b',') => {
                let end = skip_spaces(bytes, next + 1);
                emit_null(self.sink, mark(n, next), mark(n, end))?;
                Ok(next)
            }
            Some(b'}') => {
                let end = flow_token_end(line, next, depth)?;
                emit_null(self.sink, mark(n, next), mark(n, col(line, end)))?;
                Ok(next)
            }
            _ => Err(Unsupported),
        }
    }
}

/// Where the span of the one-character flow token at byte `at` ends: after
/// the spaces that follow it, and for the outermost collection's closing
/// bracket (`depth` 0) after the rest of the line, which must be blank or a
/// comment.
fn flow_token_end(line: &str, at: usize, depth: usize) -> Result<usize, Unsupported> {
    if depth > 0 {
        return Ok(skip_spaces(line.as_bytes(), at + 1));
    }
    rest_is_blank(line, at + 1, false).ok_or(Unsupported)?;
    Ok(line.len())
}

/// A quoted scalar opening at byte `at` (`Ok(None)` if no quote is there) and
/// closing on its line: its text, with `''` and backslash escapes resolved as
/// saphyr does, and the byte after the closing quote. Only printable ASCII is
/// taken, so columns stay byte offsets.
fn quoted(
    line: &str,
    at: usize,
) -> Result<Option<(Cow<'_, str>, ScalarStyle, usize)>, Unsupported> {
    let bytes = line.as_bytes();
    let (quote, style) = match bytes.get(at) {
        Some(b'"') => (b'"', ScalarStyle::DoubleQuoted),
        Some(b'\'') => (b'\'', ScalarStyle::SingleQuoted),
        _ => return Ok(None),
    };
    // `owned` holds the text up to `run` once an escape was seen.
    let (mut owned, mut run, mut i): (Option<String>, usize, usize) = (None, at + 1, at + 1);
    loop {
        let b = *bytes.get(i).ok_or(Unsupported)?;
        if !(b' '..=b'~').contains(&b) {
            return Err(Unsupported);
        }
        let escaped = match b {
            b'\'' if quote == b'\'' && bytes.get(i + 1) == Some(&b'\'') => ('\'', 2),
            b if b == quote => break,
            b'\\' if quote == b'"' => escape(&bytes[i + 1..]).ok_or(Unsupported)?,
            _ => {
                i += 1;
                continue;
            }
        };
        let text = owned.get_or_insert_with(String::new);
        text.push_str(&line[run..i]);
        text.push(escaped.0);
        i += escaped.1;
        run = i;
    }
    let text = match owned {
        None => Cow::Borrowed(&line[at + 1..i]),
        Some(mut text) => {
            text.push_str(&line[run..i]);
            Cow::Owned(text)
        }
    };
    Ok(Some((text, style, i + 1)))
}

/// The character a double-quoted scalar's escape stands for, given the bytes
/// after its backslash, and the escape's length with the backslash.
fn escape(rest: &[u8]) -> Option<(char, usize)> {
    let c = match *rest.first()? {
        b'0' => '\0',
        b'a' => '\x07',
        b'b' => '\x08',
        b't' => '\t',
        b'n' => '\n',
        b'v' => '\x0b',
        b'f' => '\x0c',
        b'r' => '\r',
        b'e' => '\x1b',
        b' ' => ' ',
        b'"' => '"',
        b'/' => '/',
        b'\\' => '\\',
        b'N' => '\u{85}',
        b'_' => '\u{a0}',
        b'L' => '\u{2028}',
        b'P' => '\u{2029}',
        b'x' => return hex_escape(rest, 2),
        b'u' => return hex_escape(rest, 4),
        b'U' => return hex_escape(rest, 8),
        _ => return None,
    };
    Some((c, 2))
}

/// `\xHH`, `\uHHHH` or `\UHHHHHHHH` (`rest` starts at the letter).
fn hex_escape(rest: &[u8], digits: usize) -> Option<(char, usize)> {
    let hex = rest.get(1..=digits)?;
    if !hex.iter().all(u8::is_ascii_hexdigit) {
        return None;
    }
    let value = u32::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok()?;
    Some((char::from_u32(value)?, 2 + digits))
}

#[cfg(test)]
pub(crate) mod tests {
    //! Differential tests: on every input the fast path accepts, its events and
    //! spans must be exactly saphyr's.
    use super::*;
    use saphyr_parser::Parser;

    fn show(event: &Event, span: &Span) -> String {
        let (s, e) = (span.start, span.end);
        format!(
            "{event:?} {}:{}-{}:{}",
            s.line(),
            s.col(),
            e.line(),
            e.col()
        )
    }

    /// saphyr's events between the document's start and end, or its error.
    fn saphyr_events(text: &str) -> Result<Vec<String>, saphyr_parser::ScanError> {
        let mut parser = Parser::new_from_str(text);
        let mut out = Vec::new();
        while let Some(next) = parser.next_event() {
            let (event, span) = next?;
            match event {
                Event::StreamEnd => break,
                Event::StreamStart | Event::DocumentStart(_) | Event::DocumentEnd => {}
                _ => out.push(show(&event, &span)),
            }
        }
        Ok(out)
    }

    fn fast_events(text: &str) -> Option<Vec<String>> {
        let mut out = Vec::new();
        scan(text, &mut |event, span| {
            out.push(show(&event, &span));
            true
        })
        .ok()?;
        Some(out)
    }

    /// `true` when the fast path took `text`; panics if it disagrees with saphyr.
    fn check(name: &str, text: &str) -> bool {
        let Some(fast) = fast_events(text) else {
            return false;
        };
        match saphyr_events(text) {
            Ok(full) if full == fast => true,
            Ok(full) => {
                let at = full.iter().zip(&fast).position(|(a, b)| a != b);
                panic!(
                    "{name}: events differ at {at:?}\nsaphyr: {:?}\nfast:   {:?}\n--- text ---\n{text}",
                    at.map(|i| &full[i]),
                    at.map(|i| &fast[i]),
                )
            }
            Err(e) => panic!("{name}: saphyr refuses what the fast path accepted: {e}\n{text}"),
        }
    }

    /// Every case takes the fast path, with saphyr's exact events.
    fn assert_all_exact(label: &str, cases: &[&str]) {
        for (i, text) in cases.iter().enumerate() {
            assert!(
                check(&format!("{label} {i}"), text),
                "{label} {i} fell back:\n{text}"
            );
        }
    }

    /// Every case falls back to saphyr.
    fn assert_all_fall_back(cases: &[&str]) {
        for text in cases {
            assert_eq!(fast_events(text), None, "should fall back:\n{text}");
        }
    }

    /// How many random documents a test tries (`ZAEL_BLOCK_SCAN_CASES`
    /// overrides `default`, e.g. 100000 for a long run).
    fn random_cases(default: u32) -> u32 {
        std::env::var("ZAEL_BLOCK_SCAN_CASES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    }

    /// A manifest shaped like bench/gen_manifest.py's, with `entities`
    /// entities; with `flow`, schedule entries and small limits are written as
    /// one-line flow collections (`--flow`).
    pub(crate) fn generated_manifest(entities: usize, flow: bool) -> String {
        let (system, berlin, new_york, weekend, midnight) = if flow {
            (
                "    rpm: {capacity: 100000}\n",
                "          - {cron: \"* 9-17 * * MON-FRI\", tz: Europe/Berlin, scale: 0.5}\n",
                "              - {cron: \"* 9-17 * * MON-FRI\", tz: America/New_York, scale: 0.5}\n",
                "              - {cron: '* * * * SAT,SUN', capacity: 2000}\n",
                "              - {cron: \"0 0 * * *\"}\n",
            )
        } else {
            (
                "    rpm:\n      capacity: 100000\n",
                "          - cron: \"* 9-17 * * MON-FRI\"\n            tz: Europe/Berlin\n            scale: 0.5\n",
                "              - cron: \"* 9-17 * * MON-FRI\"\n                tz: America/New_York\n",
                "              - cron: '* * * * SAT,SUN'\n                capacity: 2000\n",
                "              - cron: \"0 0 * * *\"\n",
            )
        };
        let mut m = format!(
            "# generated\nnamespace: bench\nsystem:\n  on_unavailable: allow\n  limits:\n{system}resources:\n"
        );
        for r in 0..3 {
            m += &format!("  model-{r}:\n    limits:\n      rpm:\n        capacity: 5000\n");
            m += &format!("        schedule:\n{berlin}");
        }
        m += "entities:\n";
        for e in 0..entities {
            m += &format!("  user-{e:06}:\n    resources:\n");
            for r in 0..3 {
                m += &format!(
                    "      model-{r}:\n        limits:\n          rpm:\n            capacity: {}\n",
                    100 + e % 900
                );
                m += &format!("            schedule:\n{new_york}{weekend}");
                m += &format!("          rpd:\n            capacity: {}\n", 10000 + e);
                m += &format!("            reset_schedule:\n{midnight}");
                if flow && e % 3 == 0 {
                    m += "          session: {capacity: 500, reset_after_seconds: 18000}\n";
                    m += "          tpm: {capacity: 9, schedule: [{cron: \"* * * * *\", scale: 2}]}\n";
                }
            }
        }
        m
    }

    #[test]
    fn generated_manifests_take_the_fast_path_exactly() {
        assert!(check("generated", &generated_manifest(20, false)));
        assert!(check("generated flow", &generated_manifest(20, true)));
    }

    #[test]
    fn every_fixture_matches_saphyr() {
        let root = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/manifests");
        let (mut total, mut fast) = (0, 0);
        for dir in ["valid", "invalid"] {
            let entries = std::fs::read_dir(format!("{root}/{dir}")).unwrap();
            for entry in entries {
                let path = entry.unwrap().path();
                if path.extension().and_then(|e| e.to_str()) != Some("yaml") {
                    continue;
                }
                let text = std::fs::read_to_string(&path).unwrap();
                total += 1;
                fast += usize::from(check(&path.display().to_string(), &text));
            }
        }
        // Most fixtures are plain block YAML; if this drops, the subset shrank.
        assert!(total > 100 && fast * 4 > total * 3, "{fast} of {total}");
    }

    /// Constructs inside the subset that must stay exact (positions included).
    #[test]
    fn edge_cases_inside_the_subset_are_exact() {
        let cases = [
            "",
            "# only a comment\n",
            "a: 1\n",
            "a:\n",
            "a:   # null, commented\nb: 2\n",
            "a:\n  b:\n    c: x y   \n  d: 'q'  # é\n",
            "k:\n- a\n-\n- - x\n  - y\n-   b: 1\n    c:\n- 'z'   \n",
            "  indented: root\n  b: 2\n",
            "a:\n   b: 3-space\n   c:\n    - one\n",
            "- top\n-\n  nested: map\n- - deep\n",
            "a: 1\nb: 2\na: 3\n",
            "<<: x\nk: v\n",
            "x-y.z/w: (a)$b^c=d<e;f~\n",
            "url: a:b:c\nt: 1:30\n",
            "n: -5\nf: -.inf\nh: 0x1F\no: 0o17\nnul: ~\nb: True\n",
            "a: \"x # not a comment\"\nb: 'it\"s'\n",
            "\n\n# é — ünïcode\n\na: 1\n\n# trailing\n\n",
            "a:\n  - x\n\n  # between\n\n  - y\nb: 1\n",
            "a: 'it''s'\nb: '''q'''\nc: \"esc \\\" \\n \\u00e9\"  # c\n",
        ];
        assert_all_exact("case", &cases);
    }

    /// Everything outside the subset goes to saphyr.
    #[test]
    fn constructs_outside_the_subset_fall_back() {
        let cases = [
            "a: &x 1\nb: *x\n",
            "a: |\n  text\n",
            "a: >\n  text\n",
            "a: 1\r\nb: 2\r\n",
            "\u{feff}a: 1\n",
            "a:\n\tb: 1\n",
            "a: 1\n\t# tab in a comment line\n",
            "a: multi\n  line\n",
            "a: \"multi\n  line\"\n",
            "---\na: 1\n",
            "a: 1\n...\n",
            "%YAML 1.2\n---\na: 1\n",
            "a: !!str 1\n",
            "\"quoted key\": 1\n",
            "? complex\n: key\n",
            "a: 1",
            "a: b: c\n",
            "a:\n    b: 1\n  c: 2\n",
            "a: 1\n  b: 2\n",
            "a: x#y\n",
            "a: */5 * * * *\n",
            "- a\nb: 1\n",
            "a: 1\n- b\n",
            "a : 1\n",
        ];
        assert_all_fall_back(&cases);
    }

    /// One-line flow collections that must stay exact (positions included).
    #[test]
    fn flow_edge_cases_inside_the_subset_are_exact() {
        let deep = nested_sequences(MAX_FLOW_DEPTH);
        let cases = [
            // Empty collections, spaced or not, at the root and as values.
            "{}\n",
            "[]\n",
            "a: {}\nb: []\nc: { }\nd: [  ]\n",
            "- {}\n- []\n",
            // At the document root, indented, with comments around.
            "{a: 1, b: [x, y]}\n",
            "  [a, {b: c}]  # root\n",
            "# c\n\n{a: 1}\n\n# after\n",
            // As a mapping value, a sequence item (indented or not), nested.
            "rpm: {capacity: 1000}\n",
            "s:\n  - {cron: \"* 9-17 * * MON-FRI\", tz: Europe/Berlin, scale: 0.5}\n  - [a, b]\n  -   {}   # c\n",
            "k:\n- {a: 1}\n- [b]\nl: 2\n",
            "- {a: 1}\n- - [x]\n- k: {b: 2}\n  l: [c]\n",
            "a: [[], [[x]], {b: {c: [d, {e: f}]}}]\n",
            "a: {b: [1,2,3],c: {d: e}, f: [ {g: h} , [i] ]}\n",
            // Quoted keys, and a quoted key's value right after its colon.
            "a: {\"k\": v, 'q k': \"w\"}\n",
            "a: {\"k\":v, 'l':[1], \"m\":{n: o}, \"p\" :q, 'r':, \"s\":}\n",
            // Escapes in double quotes, '' in single quotes.
            "a: [\"x\\\"y\\\\z \\/ \\u00e9\\x41\\U0001F600\\N\\_\\L\\P\\0\\a\\b\\e\\f\\n\\r\\t\\v\\ \"]\n",
            "a: ['it''s', '''', 'a''''b', '', \"\"]\n",
            // `:`, `,`, `#` and brackets inside quoted values.
            "a: {b: \"x: y\", c: 'k: v, w', d: \"[#]\", e: '{}'}\n",
            // Plain scalars with spaces, trailing spaces before a delimiter.
            "a: {b: x y z, c d: e f   , g:   h}\n",
            "a: [x y ,  z  ]\n",
            // URLs and other plain scalars with `:` inside.
            "a: {url: http://x, http://y/z: w, t: 1:30}\n",
            "a: [http://x/a, a:b:c]\n",
            // `{a: b}` (a pair) against `{a:b}` (a key `a:b` with a null value).
            "a: {a: b}\nb: {a:b}\nc: {a:1, b: 2}\n",
            "a: [a:b]\n",
            // Keys without a value, and null values at the colon.
            "a: {b, c: d, e}\n",
            "a: {b}\n",
            "a: {b: , c:, d :, e : f, g:}\n",
            // Delimiters without spaces, and many spaces.
            "a: [a,b]\nb: {c:d,e: f}\n",
            "a: {   b   :   c   ,   d   :   e   }   \n",
            // Comments after the outermost collection (non-ASCII ones too).
            "a: {b: 1}   \nb: [c]   # é comment\n",
            // Duplicate and merge keys, typed scalars.
            "a: {b: 1, b: 2}\n",
            "a: {<<: {x: 1}, y: 2}\n",
            "a: [-1, .5, ~, null, true, 0x1F, -.inf, '1', \"2\"]\n",
            "a: {1: 2, true: x}\n",
            deep.as_str(),
        ];
        assert_all_exact("flow case", &cases);
    }

    /// `a: [[...[x]...]]`, `depth` sequences deep.
    fn nested_sequences(depth: usize) -> String {
        format!("a: {}x{}\n", "[".repeat(depth), "]".repeat(depth))
    }

    /// Flow YAML outside the one-line subset goes to saphyr.
    #[test]
    fn flow_outside_the_subset_falls_back() {
        let too_deep = nested_sequences(MAX_FLOW_DEPTH + 1);
        let cases = [
            // Multi-line flow collections.
            "a: {b: 1,\n  c: 2}\n",
            "a: [1,\n  2]\n",
            "a: {\n  b: 1}\n",
            "a: [\n]\n",
            "k:\n  {a: 1}\n",
            // Comments inside a flow collection, or not separated by a space.
            "a: [1 # c\n  ]\n",
            "a: {b: 1 #c}\n",
            "a: {b: 1}#c\n",
            // Trailing commas (saphyr ends the mapping at the comma), empty entries.
            "a: {b: 1,}\n",
            "a: [1,]\n",
            "a: [1, ]\n",
            "a: [, a]\n",
            "a: [a, , b]\n",
            // Anchors, aliases and tags inside or on a flow collection.
            "a: {b: &x 1, c: *x}\n",
            "a: [!!str 1]\n",
            "a: &x {b: 1}\n",
            "a: !!map {b: 1}\n",
            // Pairs in a sequence, complex, empty or collection keys.
            "a: [b: c]\n",
            "a: [b:]\n",
            "a: {? b: c}\n",
            "a: {: b}\n",
            "a: {[b]: c}\n",
            "a: {{b: c}: d}\n",
            // A flow collection as a block key.
            "{a: 1}: b\n",
            "[a]: b\n",
            "a: [b]: c\n",
            "- {a: 1}: b\n",
            // Values glued to a plain key's colon, or followed by more.
            "a: {b:[c]}\n",
            "a: {b:{c: d}}\n",
            "a: {b: c: d}\n",
            "a: {b: \"x\" y}\n",
            "a: [\"a\"\"b\"]\n",
            "a: [b] x\n",
            "a: [b]]\n",
            "a: [b}\n",
            "a: {b: 1]\n",
            "a: {b: 'x}\n",
            "a: {b: \"x}\n",
            // Scalars outside the subset.
            "a: {b: é}\n",
            "a: {\"é\": 1}\n",
            "a: [\"\\q\"]\n",
            "a: [\"\\x4\"]\n",
            "a: [\"\\uD800\"]\n",
            "a: \"x\\\n  y\"\n",
            "a: [*/5 * * * *]\n",
            "a: {b: -}\n",
            "a: [-]\n",
            "a: [- a]\n",
            "a: [-,a]\n",
            "a: [b -]\n",
            "a: {b: c -}\n",
            // More content after a flow document.
            "{a: 1}\nb: 2\n",
            "[a]\n[b]\n",
            too_deep.as_str(),
        ];
        assert_all_fall_back(&cases);
    }

    /// Random documents with flow collections, inside the subset and just
    /// outside it: flow nodes as values, items and roots, then sometimes one
    /// character inserted anywhere.
    #[test]
    fn random_flow_yaml_matches_saphyr() {
        use proptest::prelude::*;
        use proptest::sample::select;
        use proptest::test_runner::{Config, TestRunner};

        /// Mostly scalars of the subset, sometimes ones just outside it.
        fn scalar() -> impl Strategy<Value = &'static str> {
            let inside = select(vec![
                "a",
                "x y",
                "1",
                "-5",
                "0.5",
                "true",
                "~",
                "a:b",
                "http://x",
                "<<",
                "-x",
                "a - b",
                "'q'",
                "\"q r\"",
                "'a, b'",
                "\"c: d\"",
                "\"* 9-17 * * MON-FRI\"",
                "'it''s'",
                "''",
                "\"e\\\"s\\\\c\"",
                "\"\\u00e9\\x41\\t\"",
                "Europe/Berlin",
                "'\\q'",
            ]);
            let outside = select(vec![
                "", "-", "a -", "a:", ":a", "?a", "&a", "*a", "!t", "é", "#", "a #b", "\"x",
                "\"\\q\"", "\"\\x4\"", "a\\b",
            ]);
            prop_oneof![8 => inside, 1 => outside]
        }
        fn node() -> impl Strategy<Value = String> {
            let leaf = scalar().prop_map(str::to_string);
            leaf.prop_recursive(3, 24, 4, |inner| {
                let colon = select(vec![": ", ":", " : ", "", ":  "]);
                let comma = select(vec![", ", ",", " , ", ",  "]);
                let pad = select(vec!["", "", " "]);
                let pairs = proptest::collection::vec((scalar(), colon, inner.clone()), 0..4);
                let items = proptest::collection::vec(inner, 0..4);
                prop_oneof![
                    (pairs, comma.clone(), pad.clone()).prop_map(|(pairs, comma, pad)| {
                        let entries: Vec<String> = pairs
                            .into_iter()
                            .map(|(key, colon, value)| match colon {
                                "" => key.to_string(),
                                _ => format!("{key}{colon}{value}"),
                            })
                            .collect();
                        format!("{{{pad}{}{pad}}}", entries.join(comma))
                    }),
                    (items, comma, pad).prop_map(|(items, comma, pad)| {
                        format!("[{pad}{}{pad}]", items.join(comma))
                    }),
                ]
            })
        }
        let tail = select(vec!["", "", " ", "  # c", " # é", "#x"]);
        let entry =
            (0..4usize, node(), node(), tail.clone()).prop_map(|(shape, a, b, tail)| match shape {
                0 => format!("k: {a}{tail}\n"),
                1 => format!("k:\n  - {a}{tail}\n  - {b}\n"),
                2 => format!("k:\n- {a}\n- n: {b}{tail}\n  m: 1\n"),
                _ => format!("k:\n  n: {a}\n  m:\n    - - {b}{tail}\n"),
            });
        let document = prop_oneof![
            (node(), tail).prop_map(|(root, tail)| format!("{root}{tail}\n")),
            proptest::collection::vec(entry, 1..4).prop_map(|entries| entries.concat()),
        ];
        let inserted = select(vec![
            " ", ",", ":", "#", "{", "}", "[", "]", "'", "\"", "\\", "&", "\n", "-", "?",
        ]);
        let mutation = (0..6usize, any::<prop::sample::Index>(), inserted);
        let text = (document, mutation).prop_map(|(mut text, (chance, at, c))| {
            let at = at.index(text.len());
            if chance == 0 && text.is_char_boundary(at) {
                text.insert_str(at, c);
            }
            text
        });
        let cases = random_cases(2000);
        let fast = std::cell::Cell::new(0u32);
        let config = Config {
            failure_persistence: None,
            ..Config::with_cases(cases)
        };
        TestRunner::new(config)
            .run(&text, |text| {
                fast.set(fast.get() + u32::from(check("random flow", &text)));
                Ok(())
            })
            .unwrap();
        // The generator must keep exercising the fast path, not only the fallback.
        assert!(
            fast.get() * 4 > cases,
            "only {} of {cases} took the fast path",
            fast.get()
        );
    }

    /// A small deterministic generator of block YAML (xorshift), near the subset
    /// and often just outside it.
    struct Gen(u64);

    impl Gen {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }
        fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
            items[self.below(items.len())]
        }
        fn scalar(&mut self) -> &'static str {
            self.pick(&[
                "a",
                "x y",
                "1",
                "-5",
                "1.5",
                "true",
                "no",
                "~",
                "a:b",
                "-x",
                "<<",
                "'q'",
                "\"q r\"",
                "'a # b'",
                "\"* 9-17 * * MON-FRI\"",
                "",
                "a: b",
                "x#y",
                "-",
                "--",
                "?x",
                ":x",
                "[a]",
                "&a",
                "*a",
                "!t",
                "|",
                "é",
                "'it''s'",
                "\"a\\\"b\"",
                "'x",
                "a,b",
                "%x",
                "@x",
                "a ",
            ])
        }
        fn key(&mut self) -> &'static str {
            self.pick(&[
                "a", "b", "k1", "long key", "x-y", "<<", "1", "-a", "'q'", "a ", "?",
            ])
        }
        fn tail(&mut self) -> &'static str {
            self.pick(&["", "", "", " ", "  # c", " # é", "#x"])
        }
        fn node(
            &mut self,
            out: &mut Vec<String>,
            indent: usize,
            lead: Option<String>,
            depth: usize,
        ) {
            let is_map = self.below(2) == 0;
            let step = self
                .pick(&["2", "2", "4", "1", "3"])
                .parse::<usize>()
                .unwrap_or(2);
            for i in 0..1 + self.below(3) {
                let prefix = match (&lead, i) {
                    (Some(l), 0) => l.clone(),
                    _ => " ".repeat(indent),
                };
                let nested = depth < 3 && self.below(3) == 0;
                if is_map {
                    let key = self.key();
                    if nested {
                        out.push(format!("{prefix}{key}:{}", self.tail()));
                        let same = self.below(2) == 0;
                        self.node(
                            out,
                            if same { indent } else { indent + step },
                            None,
                            depth + 1,
                        );
                    } else {
                        out.push(format!("{prefix}{key}: {}{}", self.scalar(), self.tail()));
                    }
                } else if nested && self.below(2) == 0 {
                    let lead = format!("{prefix}- ");
                    self.node(out, indent + 2, Some(lead), depth + 1);
                } else if nested {
                    out.push(format!("{prefix}-{}", self.tail()));
                    self.node(out, indent + step, None, depth + 1);
                } else {
                    out.push(format!("{prefix}- {}{}", self.scalar(), self.tail()));
                }
                if self.below(8) == 0 {
                    out.push(self.pick(&["", "  # c", "# é"]).to_string());
                }
            }
        }
        fn document(&mut self) -> String {
            let mut lines = Vec::new();
            let indent = self.pick(&["0", "0", "0", "1", "2"]).parse().unwrap_or(0);
            self.node(&mut lines, indent, None, 0);
            if self.below(5) == 0 {
                let i = self.below(lines.len());
                let at = self.below(lines[i].len() + 1);
                if lines[i].is_char_boundary(at) {
                    let c = self.pick(&[" ", ":", "#", "-", "'", "\"", "\t", "[", "\r"]);
                    lines[i].insert_str(at, c);
                }
            }
            let mut text = lines.join("\n");
            if self.below(10) > 0 {
                text.push('\n');
            }
            text
        }
    }

    #[test]
    fn random_block_yaml_matches_saphyr() {
        let cases = random_cases(3000);
        let mut gen = Gen(0x9e37_79b9_7f4a_7c15);
        let mut fast = 0;
        for i in 0..cases {
            let text = gen.document();
            fast += u32::from(check(&format!("random #{i}"), &text));
        }
        // The generator must keep exercising the fast path, not only the fallback.
        assert!(
            fast * 10 > cases,
            "only {fast} of {cases} took the fast path"
        );
    }
}
