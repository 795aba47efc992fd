//! Request traces, read one line at a time.
//!
//! Two spellings of the same events:
//!
//! * **CSV** with a header: `timestamp` (required), then optionally `op`,
//!   `hold` and `ttl`, and one column per limit holding that request's cost
//!   (`timestamp,op,hold,rpm,tpm`). No quoting: ids may not contain commas.
//! * **JSON lines**: `{"timestamp": "…", "op": "reserve", "hold": "job-7",
//!   "ttl": 120, "cost": {"rpm": 1, "tpm": 800}}`.
//!
//! `timestamp` is RFC 3339 or epoch milliseconds. `op` is `consume` (the
//! default), `reserve` (also takes a slot of every concurrent limit, held as
//! `hold`), `release` / `commit` (give the slot back), or `extend` (a
//! heartbeat; `ttl` seconds, default the limit's). Blank lines and lines
//! starting with `#` are skipped. A limit with no cost on a line is checked
//! with cost 0.

use std::borrow::Cow;
use std::collections::HashMap;
use std::io::BufRead;

use serde::Deserialize;

use super::clock::parse_instant;

/// What a trace line asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Consume,
    Reserve,
    Release,
    Commit,
    Extend,
}

impl Op {
    pub fn parse(text: &str) -> Option<Op> {
        Some(match text {
            "" | "consume" => Op::Consume,
            "reserve" => Op::Reserve,
            "release" => Op::Release,
            "commit" => Op::Commit,
            "extend" => Op::Extend,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Op::Consume => "consume",
            Op::Reserve => "reserve",
            Op::Release => "release",
            Op::Commit => "commit",
            Op::Extend => "extend",
        }
    }

    /// Consume and reserve are requests (admitted or refused); the others
    /// only act on holds.
    pub fn is_request(self) -> bool {
        matches!(self, Op::Consume | Op::Reserve)
    }
}

/// One event. Reused between lines so reading allocates nothing per line
/// once the buffers have grown.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// 1-based line in the trace.
    pub line: u64,
    pub at_ms: i64,
    pub op: Op,
    /// Empty when the line names no hold.
    pub hold: String,
    pub ttl_seconds: Option<i64>,
    /// (cost name id, cost); ids index [`TraceReader::names`].
    pub costs: Vec<(usize, u64)>,
}

impl Default for Event {
    fn default() -> Self {
        Event {
            line: 0,
            at_ms: 0,
            op: Op::Consume,
            hold: String::new(),
            ttl_seconds: None,
            costs: Vec::new(),
        }
    }
}

/// The two trace spellings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TraceFormat {
    Csv,
    Jsonl,
}

impl TraceFormat {
    pub fn as_str(self) -> &'static str {
        match self {
            TraceFormat::Csv => "csv",
            TraceFormat::Jsonl => "jsonl",
        }
    }
}

/// A trace line that cannot be read; line 0 is the trace as a whole (an
/// empty CSV trace has no line to blame).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceError {
    pub line: u64,
    pub message: String,
}

impl std::fmt::Display for TraceError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.line {
            0 => f.write_str(&self.message),
            n => write!(f, "line {n}: {}", self.message),
        }
    }
}

impl std::error::Error for TraceError {}

/// Why reading stopped: a bad line or the file itself.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("{0}")]
    Line(#[from] TraceError),
    #[error("cannot read the trace: {0}")]
    Io(#[from] std::io::Error),
}

enum Columns {
    /// Not yet seen the header.
    Pending,
    Csv(Vec<Column>),
}

#[derive(Debug, Clone, Copy)]
enum Column {
    Timestamp,
    Op,
    Hold,
    Ttl,
    Cost(usize),
}

/// Different cost names a trace may use: names are limits, so a trace with
/// more is not one (and the name table must stay bounded).
pub const MAX_COST_NAMES: usize = 1024;

/// Longest trace line read (bytes, newline included): room for every cost
/// name, far below what would exhaust memory (a 2 GB line stops here).
pub const MAX_LINE_BYTES: u64 = 1024 * 1024;

/// Reads events from any buffered source, keeping only the current line.
pub struct TraceReader<R> {
    src: R,
    format: TraceFormat,
    columns: Columns,
    names: Vec<String>,
    ids: HashMap<String, usize>,
    buf: String,
    line: u64,
    bytes: u64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonLine<'a> {
    #[serde(borrow)]
    timestamp: JsonTime<'a>,
    #[serde(default, borrow)]
    op: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    hold: Option<Cow<'a, str>>,
    #[serde(default)]
    ttl: Option<i64>,
    #[serde(default, borrow)]
    cost: CostPairs<'a>,
}

/// `timestamp`: epoch milliseconds (an integer) or an RFC 3339 string. Read by
/// hand, not as an untagged enum, so a wrong value is explained in the trace's
/// terms instead of serde's ("did not match any variant of untagged enum").
enum JsonTime<'a> {
    Ms(i64),
    Text(Cow<'a, str>),
}

impl<'de: 'a, 'a> Deserialize<'de> for JsonTime<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> serde::de::Visitor<'de> for Visit<'a> {
            type Value = JsonTime<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a timestamp: epoch milliseconds (a whole number) or an RFC 3339 string such as \"2026-12-01T09:00:00.250Z\"")
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Self::Value, E> {
                Ok(JsonTime::Ms(v))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Self::Value, E> {
                i64::try_from(v)
                    .map(JsonTime::Ms)
                    .map_err(|_| E::custom(format!("timestamp {v} is out of range")))
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Self::Value, E> {
                Err(E::custom(if v.fract() == 0.0 {
                    format!("timestamp {v} is written with a decimal point or an exponent: write epoch milliseconds as a plain integer")
                } else {
                    format!("timestamp {v} is not a whole number of milliseconds: write epoch milliseconds as an integer (times are kept to the millisecond)")
                }))
            }
            fn visit_borrowed_str<E: serde::de::Error>(
                self,
                v: &'de str,
            ) -> Result<Self::Value, E> {
                Ok(JsonTime::Text(Cow::Borrowed(v)))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(JsonTime::Text(Cow::Owned(v.to_string())))
            }
        }
        d.deserialize_any(Visit(std::marker::PhantomData))
    }
}

/// `cost` as a JSON object, read into pairs in order without building a map.
#[derive(Default)]
struct CostPairs<'a>(Vec<(Cow<'a, str>, u64)>);

impl<'de: 'a, 'a> Deserialize<'de> for CostPairs<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> serde::de::Visitor<'de> for Visit<'a> {
            type Value = CostPairs<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an object of limit name to whole non-negative cost, e.g. {\"rpm\": 1}")
            }
            fn visit_map<M: serde::de::MapAccess<'de>>(
                self,
                mut m: M,
            ) -> Result<Self::Value, M::Error> {
                let mut out = Vec::new();
                while let Some((k, v)) = m.next_entry::<Cow<'a, str>, u64>()? {
                    out.push((k, v));
                }
                Ok(CostPairs(out))
            }
        }
        d.deserialize_map(Visit(std::marker::PhantomData))
    }
}

impl<R: BufRead> TraceReader<R> {
    pub fn new(src: R, format: TraceFormat) -> Self {
        TraceReader {
            src,
            format,
            columns: Columns::Pending,
            names: Vec::new(),
            ids: HashMap::new(),
            buf: String::new(),
            line: 0,
            bytes: 0,
        }
    }

    /// Cost names seen so far, by id.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// Bytes consumed so far (for the progress bar).
    pub fn bytes_read(&self) -> u64 {
        self.bytes
    }

    /// Lines read so far.
    pub fn lines_read(&self) -> u64 {
        self.line
    }

    fn id(&mut self, name: &str) -> Result<usize, String> {
        if let Some(&id) = self.ids.get(name) {
            return Ok(id);
        }
        if self.names.len() >= MAX_COST_NAMES {
            return Err(format!(
                "more than {MAX_COST_NAMES} different cost names: costs are named after limits"
            ));
        }
        let id = self.names.len();
        self.names.push(name.to_string());
        self.ids.insert(name.to_string(), id);
        Ok(id)
    }

    /// Fill `ev` with the next event; `false` at the end of the trace.
    pub fn next_event(&mut self, ev: &mut Event) -> Result<bool, ReadError> {
        loop {
            self.buf.clear();
            let n = match crate::input::read_line(&mut self.src, MAX_LINE_BYTES, &mut self.buf) {
                Ok(n) => n,
                Err(crate::input::BoundedError::Io(e)) => return Err(e.into()),
                Err(e @ crate::input::BoundedError::TooLarge { .. }) => {
                    return Err(TraceError {
                        line: self.line + 1,
                        message: format!("the line is {e}; a trace line that long is refused"),
                    }
                    .into())
                }
            };
            if n == 0 {
                if matches!(self.columns, Columns::Pending) && self.format == TraceFormat::Csv {
                    return Err(TraceError {
                        line: 0,
                        message: "the CSV trace is empty (no header, no request): start it with a header line such as `timestamp,op,hold,rpm,tpm`, then one line per request".into(),
                    }
                    .into());
                }
                return Ok(false);
            }
            self.bytes += n as u64;
            self.line += 1;
            let text = self.buf.trim();
            if text.is_empty() || text.starts_with('#') {
                continue;
            }
            let line = self.line;
            let text = std::mem::take(&mut self.buf);
            let result = match self.format {
                TraceFormat::Csv => self.csv_line(text.trim(), line, ev),
                TraceFormat::Jsonl => self.json_line(text.trim(), line, ev),
            };
            self.buf = text;
            match result {
                Ok(true) => return Ok(true),
                Ok(false) => continue,
                Err(message) => return Err(TraceError { line, message }.into()),
            }
        }
    }

    /// `Ok(false)` for the header line.
    fn csv_line(&mut self, text: &str, line: u64, ev: &mut Event) -> Result<bool, String> {
        let Columns::Csv(cols) = &self.columns else {
            let mut cols = Vec::new();
            let mut seen = std::collections::HashSet::new();
            for raw in text.split(',') {
                let name = raw.trim();
                if !seen.insert(name) {
                    return Err(format!("column {name:?} appears twice in the header"));
                }
                cols.push(match name {
                    "timestamp" => Column::Timestamp,
                    "op" => Column::Op,
                    "hold" => Column::Hold,
                    "ttl" => Column::Ttl,
                    "" => return Err("the header has an empty column name".into()),
                    other => Column::Cost(self.id(other)?),
                });
            }
            if !cols.iter().any(|c| matches!(c, Column::Timestamp)) {
                return Err(format!(
                    "the CSV header {text:?} has no `timestamp` column: start the trace with e.g. `timestamp,op,hold,rpm,tpm`"
                ));
            }
            self.columns = Columns::Csv(cols);
            return Ok(false);
        };
        ev.line = line;
        ev.op = Op::Consume;
        ev.hold.clear();
        ev.ttl_seconds = None;
        ev.costs.clear();
        let mut fields = text.split(',');
        for col in cols {
            let field = fields.next().map(str::trim).ok_or_else(|| {
                format!(
                    "{} field(s) where the header has {}",
                    text.split(',').count(),
                    cols.len()
                )
            })?;
            match *col {
                Column::Timestamp => ev.at_ms = parse_instant(field).map_err(|e| e.to_string())?,
                Column::Op => ev.op = parse_op(field)?,
                Column::Hold => ev.hold.push_str(field),
                Column::Ttl if field.is_empty() => {}
                Column::Ttl => ev.ttl_seconds = Some(parse_ttl(field)?),
                Column::Cost(_) if field.is_empty() => {}
                Column::Cost(id) => ev.costs.push((id, parse_cost(&self.names[id], field)?)),
            }
        }
        if fields.next().is_some() {
            return Err(format!(
                "{} fields where the header has {}",
                text.split(',').count(),
                cols.len()
            ));
        }
        Ok(true)
    }

    fn json_line(&mut self, text: &str, line: u64, ev: &mut Event) -> Result<bool, String> {
        let example = "a JSON-lines trace has one object per line: {\"timestamp\": \"2026-12-01T09:00:00Z\", \"cost\": {\"rpm\": 1}}";
        if !text.starts_with('{') {
            return Err(format!("not a JSON object ({example})"));
        }
        let parsed: JsonLine<'_> =
            serde_json::from_str(text).map_err(|e| format!("{e} ({example})"))?;
        ev.line = line;
        ev.at_ms = match parsed.timestamp {
            JsonTime::Ms(ms) => super::clock::checked_instant(ms)
                .ok_or_else(|| super::clock::TimeError::OutOfRange(ms.to_string()).to_string())?,
            JsonTime::Text(t) => parse_instant(&t).map_err(|e| e.to_string())?,
        };
        ev.op = parse_op(parsed.op.as_deref().unwrap_or(""))?;
        ev.hold.clear();
        if let Some(h) = parsed.hold {
            ev.hold.push_str(&h);
        }
        ev.ttl_seconds = parsed.ttl;
        ev.costs.clear();
        for (name, cost) in parsed.cost.0 {
            let id = self.id(&name)?;
            ev.costs.push((id, cost));
        }
        Ok(true)
    }
}

fn parse_op(text: &str) -> Result<Op, String> {
    Op::parse(text).ok_or_else(|| {
        format!("op {text:?} is not one of consume, reserve, release, commit, extend")
    })
}

fn parse_ttl(text: &str) -> Result<i64, String> {
    text.parse()
        .map_err(|_| format!("ttl {text:?} is not a whole number of seconds"))
}

fn parse_cost(name: &str, text: &str) -> Result<u64, String> {
    text.parse()
        .map_err(|_| format!("cost {text:?} for {name:?} is not a whole non-negative number"))
}

/// The format a trace is in: from its extension, else from its first
/// non-blank byte (`{` is JSON lines).
pub fn detect_format(path_hint: Option<&str>, first_bytes: &[u8]) -> TraceFormat {
    if let Some(p) = path_hint {
        let lower = p.to_ascii_lowercase();
        if lower.ends_with(".csv") {
            return TraceFormat::Csv;
        }
        if lower.ends_with(".jsonl") || lower.ends_with(".ndjson") || lower.ends_with(".json") {
            return TraceFormat::Jsonl;
        }
    }
    match first_bytes.iter().find(|b| !b.is_ascii_whitespace()) {
        Some(b'{') => TraceFormat::Jsonl,
        _ => TraceFormat::Csv,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_all(text: &str, format: TraceFormat) -> Result<(Vec<Event>, Vec<String>), ReadError> {
        let mut r = TraceReader::new(text.as_bytes(), format);
        let mut out = Vec::new();
        let mut ev = Event::default();
        while r.next_event(&mut ev)? {
            out.push(ev.clone());
        }
        Ok((out, r.names().to_vec()))
    }

    #[test]
    fn csv_with_ops_holds_and_costs() {
        let text = "# a comment\ntimestamp,op,hold,rpm,tpm\n\
                    2026-12-01T09:00:00Z,,,1,500\n\
                    1796115600001,reserve,job-1,1,\n\
                    2026-12-01T09:00:01Z,release,job-1,,\n";
        let (evs, names) = read_all(text, TraceFormat::Csv).unwrap();
        assert_eq!(names, ["rpm", "tpm"]);
        assert_eq!(evs.len(), 3);
        assert_eq!(evs[0].line, 3);
        assert_eq!(evs[0].op, Op::Consume);
        assert_eq!(evs[0].costs, [(0, 1), (1, 500)]);
        assert_eq!(evs[1].at_ms, 1_796_115_600_001);
        assert_eq!((evs[1].op, evs[1].hold.as_str()), (Op::Reserve, "job-1"));
        assert_eq!(evs[1].costs, [(0, 1)]);
        assert_eq!(evs[2].op, Op::Release);
        assert!(evs[2].costs.is_empty());
    }

    #[test]
    fn json_lines() {
        let text = r#"{"timestamp": "2026-12-01T09:00:00Z", "cost": {"rpm": 1, "tpm": 800}}
{"timestamp": 1796115600500, "op": "extend", "hold": "h", "ttl": 60}
"#;
        let (evs, names) = read_all(text, TraceFormat::Jsonl).unwrap();
        assert_eq!(names, ["rpm", "tpm"]);
        assert_eq!(evs[0].costs, [(0, 1), (1, 800)]);
        assert_eq!(evs[1].ttl_seconds, Some(60));
        assert_eq!(evs[1].op, Op::Extend);
    }

    #[test]
    fn bad_lines_name_their_line() {
        let cases = [
            (
                "ts,rpm\n1,1\n",
                TraceFormat::Csv,
                "line 1",
                "no `timestamp`",
            ),
            (
                "timestamp,rpm\n1,1,2\n",
                TraceFormat::Csv,
                "line 2",
                "fields",
            ),
            ("timestamp,rpm\n1\n", TraceFormat::Csv, "line 2", "field"),
            (
                "timestamp,rpm\nnoon,1\n",
                TraceFormat::Csv,
                "line 2",
                "not an instant",
            ),
            (
                "timestamp,rpm\n1,-3\n",
                TraceFormat::Csv,
                "line 2",
                "non-negative",
            ),
            (
                "timestamp,op\n1,take\n",
                TraceFormat::Csv,
                "line 2",
                "not one of",
            ),
            ("timestamp,rpm,rpm\n", TraceFormat::Csv, "line 1", "twice"),
            (
                "",
                TraceFormat::Csv,
                "the CSV trace is empty",
                "header line",
            ),
            (
                "{\"timestamp\": 1796292556430.5}\n",
                TraceFormat::Jsonl,
                "line 1",
                "not a whole number of milliseconds",
            ),
            (
                "{\"timestamp\": true}\n",
                TraceFormat::Jsonl,
                "line 1",
                "expected a timestamp: epoch milliseconds",
            ),
            (
                "{\"timestamp\": 1, \"costs\": {}}\n",
                TraceFormat::Jsonl,
                "line 1",
                "unknown field",
            ),
            ("[1]\n", TraceFormat::Jsonl, "line 1", "one object per line"),
        ];
        for (text, format, line, what) in cases {
            let err = match read_all(text, format) {
                Ok(got) => panic!("{text:?} was read: {got:?}"),
                Err(e) => e.to_string(),
            };
            assert!(
                err.starts_with(line) && err.contains(what),
                "{text:?}: {err}"
            );
        }
    }

    #[test]
    fn cost_names_are_bounded() {
        let mut text = String::new();
        for i in 0..=MAX_COST_NAMES {
            text.push_str(&format!(
                "{{\"timestamp\": 1, \"cost\": {{\"n{i}\": 1}}}}\n"
            ));
        }
        let err = read_all(&text, TraceFormat::Jsonl).unwrap_err().to_string();
        assert!(
            err.starts_with(&format!("line {}:", MAX_COST_NAMES + 1)),
            "{err}"
        );
    }

    proptest::proptest! {
        /// Whatever the bytes, reading ends in events or a located error.
        #[test]
        fn arbitrary_text_never_panics(text in "(timestamp,op,hold,ttl,rpm\n)?[ -~\n{}\":,]{0,300}") {
            for format in [TraceFormat::Csv, TraceFormat::Jsonl] {
                match read_all(&text, format) {
                    Ok(_) => {}
                    Err(ReadError::Line(e)) => proptest::prop_assert!(e.line as usize <= text.lines().count().max(1)),
                    Err(ReadError::Io(e)) => proptest::prop_assert!(false, "{e}"),
                }
            }
        }
    }

    #[test]
    fn formats_are_detected() {
        assert_eq!(detect_format(Some("t.CSV"), b"{"), TraceFormat::Csv);
        assert_eq!(detect_format(Some("t.jsonl"), b"t"), TraceFormat::Jsonl);
        assert_eq!(
            detect_format(None, b"  \n{\"timestamp\""),
            TraceFormat::Jsonl
        );
        assert_eq!(detect_format(Some("-"), b"timestamp,rpm"), TraceFormat::Csv);
    }
}
