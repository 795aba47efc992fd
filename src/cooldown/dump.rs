//! The `curl -D FILE` format: the response headers as curl received them.
//!
//! One block per response curl saw — a `100 Continue`, each redirect followed
//! with `-L`, a proxy's `200 Connection established` — each a status line
//! (`HTTP/1.1 429 Too Many Requests`, `HTTP/2 429`), header lines and a blank
//! line; **the last block is the response**. Lines end in CRLF or LF. Also
//! read: `curl -i` output (the body follows the last block and is returned),
//! and a bare list of `Name: value` lines without a status line. A line that
//! is neither is reported and skipped; the headers around it still count.
//!
//! The file is read bounded, like a response body
//! ([`super::response::MAX_BODY_BYTES`]); bytes that are not UTF-8 (legal in
//! header values) become U+FFFD rather than losing the whole file.

use std::path::Path;

use super::headers::{shown, HeaderProblem};
use super::response::MAX_BODY_BYTES;

/// The last response of a headers file.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HeaderDump {
    /// The status of the last block's status line (`None` without one).
    pub status: Option<u16>,
    /// The last block's headers, in order, names as written.
    pub headers: Vec<(String, String)>,
    /// What follows the last block (`curl -i`), when not blank.
    pub body: Option<String>,
    /// Lines of the last block that could not be read.
    pub problems: Vec<HeaderProblem>,
}

/// Why a headers file could not be read at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DumpError {
    #[error("cannot read the headers: {0}")]
    Unreadable(String),
    #[error("the headers file is larger than {}; files that large are not read", crate::input::bytes(*max))]
    TooLarge { max: u64 },
}

/// Reads the headers file at `path` (`-`: standard input).
pub fn read_dump_file(path: &Path) -> Result<HeaderDump, DumpError> {
    let bytes = crate::input::read_path(path, MAX_BODY_BYTES).map_err(|e| match e {
        crate::input::BoundedError::TooLarge { max } => DumpError::TooLarge { max },
        crate::input::BoundedError::Io(e) => DumpError::Unreadable(e.to_string()),
    })?;
    Ok(parse(&String::from_utf8_lossy(&bytes)))
}

/// Parses `curl -D` text (see the module doc).
pub fn parse(text: &str) -> HeaderDump {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = Lines {
        text,
        pos: 0,
        no: 0,
    };
    let mut out = HeaderDump::default();
    let mut started = false;
    'blocks: loop {
        // Blank lines separate blocks.
        let (mut no, mut line, start) = loop {
            match lines.next() {
                None => break 'blocks,
                Some((_, l, _)) if l.trim().is_empty() => continue,
                Some(found) => break found,
            }
        };
        if is_status_line(line) {
            out = HeaderDump::default();
            out.status = status_of(line, no, &mut out.problems);
            match lines.next() {
                Some((n, l, _)) => (no, line) = (n, l),
                None => break,
            }
        } else if started {
            let body = &text[start..];
            out.body = Some(body.to_string()).filter(|b| !b.trim().is_empty());
            break;
        }
        started = true;
        // Header lines up to a blank line.
        loop {
            if line.trim().is_empty() {
                break;
            }
            if is_status_line(line) {
                // A new response without the blank line before it.
                out = HeaderDump::default();
                out.status = status_of(line, no, &mut out.problems);
            } else if line.starts_with([' ', '\t']) && !out.headers.is_empty() {
                // Obsolete line folding: a continuation of the previous value.
                if let Some((_, value)) = out.headers.last_mut() {
                    value.push(' ');
                    value.push_str(line.trim());
                }
            } else {
                match line.split_once(':') {
                    Some((name, value)) if is_token(name) => {
                        out.headers
                            .push((name.to_string(), value.trim().to_string()));
                    }
                    _ => out.problems.push(HeaderProblem::NotAHeader {
                        line: no,
                        text: shown(line),
                    }),
                }
            }
            match lines.next() {
                Some((n, l, _)) => (no, line) = (n, l),
                None => break 'blocks,
            }
        }
    }
    out
}

/// Lines with their 1-based number and byte offset, without `\r\n` / `\n`.
struct Lines<'a> {
    text: &'a str,
    pos: usize,
    no: usize,
}

impl<'a> Iterator for Lines<'a> {
    type Item = (usize, &'a str, usize);

    fn next(&mut self) -> Option<Self::Item> {
        if self.pos >= self.text.len() {
            return None;
        }
        let start = self.pos;
        let rest = &self.text[start..];
        let (line, len) = match rest.find('\n') {
            Some(i) => (&rest[..i], i + 1),
            None => (rest, rest.len()),
        };
        self.pos += len;
        self.no += 1;
        Some((self.no, line.strip_suffix('\r').unwrap_or(line), start))
    }
}

fn is_status_line(line: &str) -> bool {
    line.starts_with("HTTP/")
}

/// The code of `HTTP/<version> <3 digits>[ <reason>]`, or a problem.
fn status_of(line: &str, no: usize, problems: &mut Vec<HeaderProblem>) -> Option<u16> {
    let mut parts = line.splitn(3, ' ');
    let version = parts.next().unwrap_or_default();
    let code = parts.next().unwrap_or_default();
    let version_ok = version
        .strip_prefix("HTTP/")
        .is_some_and(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit() || b == b'.'));
    match code.parse::<u16>() {
        Ok(c) if version_ok && code.len() == 3 && (100..=999).contains(&c) => Some(c),
        _ => {
            problems.push(HeaderProblem::BadStatusLine {
                line: no,
                text: shown(line),
            });
            None
        }
    }
}

/// An HTTP field name: one or more token characters (RFC 9110 §5.6.2).
fn is_token(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn pairs(d: &HeaderDump) -> Vec<(&str, &str)> {
        d.headers
            .iter()
            .map(|(n, v)| (n.as_str(), v.as_str()))
            .collect()
    }

    #[test]
    fn one_response_with_crlf() {
        let d = parse(
            "HTTP/1.1 429 Too Many Requests\r\nDate: Wed, 02 Dec 2026 10:00:00 GMT\r\nRetry-After: 20\r\ncontent-type: application/json\r\n\r\n",
        );
        assert_eq!(d.status, Some(429));
        assert_eq!(
            pairs(&d),
            [
                ("Date", "Wed, 02 Dec 2026 10:00:00 GMT"),
                ("Retry-After", "20"),
                ("content-type", "application/json")
            ]
        );
        assert_eq!(d.body, None);
        assert!(d.problems.is_empty());
    }

    #[test]
    fn the_last_block_counts() {
        // 100 Continue, then a redirect followed with -L, then the refusal.
        let d = parse(concat!(
            "HTTP/1.1 100 Continue\r\n\r\n",
            "HTTP/1.1 302 Found\r\nLocation: /v2\r\nRetry-After: 1\r\n\r\n",
            "HTTP/2 429 \r\nretry-after: 30\r\nx-ratelimit-reset-tokens: 6m0s\r\n\r\n",
        ));
        assert_eq!(d.status, Some(429));
        assert_eq!(
            pairs(&d),
            [("retry-after", "30"), ("x-ratelimit-reset-tokens", "6m0s")]
        );
        // A proxy's CONNECT answer, LF line ends, HTTP/2 without a reason.
        let d = parse("HTTP/1.1 200 Connection established\n\nHTTP/2 503\nretry-after: 5\n");
        assert_eq!(d.status, Some(503));
        assert_eq!(pairs(&d), [("retry-after", "5")]);
        // A status line without the blank line before it still starts a block.
        let d = parse("HTTP/1.1 100 Continue\nHTTP/1.1 429 Too Many Requests\nRetry-After: 7\n");
        assert_eq!(
            (d.status, pairs(&d)),
            (Some(429), vec![("Retry-After", "7")])
        );
    }

    #[test]
    fn repeated_headers_and_case_are_kept_as_written() {
        let d = parse("HTTP/1.1 429 x\r\nRetry-After: 20\r\nRETRY-AFTER: 40\r\n\r\n");
        assert_eq!(pairs(&d), [("Retry-After", "20"), ("RETRY-AFTER", "40")]);
    }

    #[test]
    fn curl_i_output_carries_the_body() {
        let d = parse(
            "HTTP/1.1 429 Too Many Requests\r\nretry-after: 20\r\n\r\n{\"error\":{\"type\":\"rate_limit_error\"}}\n",
        );
        assert_eq!(d.status, Some(429));
        assert_eq!(
            d.body.as_deref(),
            Some("{\"error\":{\"type\":\"rate_limit_error\"}}\n")
        );
    }

    #[test]
    fn bare_headers_folding_and_bad_lines() {
        let d = parse("Retry-After: 20\nX-Note: a\n  b\nnot a header\n{\"json\": 1}\nAnthropic-Ratelimit-Tokens-Reset:2026-12-02T10:00:00Z\n");
        assert_eq!(d.status, None);
        assert_eq!(
            pairs(&d),
            [
                ("Retry-After", "20"),
                ("X-Note", "a b"),
                ("Anthropic-Ratelimit-Tokens-Reset", "2026-12-02T10:00:00Z")
            ]
        );
        let msgs: Vec<String> = d.problems.iter().map(ToString::to_string).collect();
        assert_eq!(
            msgs,
            [
                "line 4 is not a header ('Name: value'): not a header",
                "line 5 is not a header ('Name: value'): {\"json\": 1}"
            ]
        );
        let d = parse("HTTP/1.1 abc Broken\r\nRetry-After: 5\r\n\r\n");
        assert_eq!(d.status, None);
        assert_eq!(pairs(&d), [("Retry-After", "5")]);
        assert_eq!(
            d.problems[0].to_string(),
            "line 1 is not an HTTP status line such as 'HTTP/1.1 429 Too Many Requests': HTTP/1.1 abc Broken"
        );
        assert_eq!(parse(""), HeaderDump::default());
        assert_eq!(parse("\r\n\r\n"), HeaderDump::default());
        // A status line alone.
        assert_eq!(parse("HTTP/1.1 429").status, Some(429));
    }

    #[test]
    fn files_are_read_bounded_and_lossily() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("h");
        std::fs::write(&path, b"HTTP/1.1 429 \xff\r\nRetry-After: 9\r\n\r\n").unwrap();
        let d = read_dump_file(&path).unwrap();
        assert_eq!(
            (d.status, pairs(&d)),
            (Some(429), vec![("Retry-After", "9")])
        );
        let err = read_dump_file(Path::new("/dev/zero")).unwrap_err();
        assert_eq!(
            err.to_string(),
            "the headers file is larger than 1 MiB; files that large are not read"
        );
        assert!(matches!(
            read_dump_file(&dir.path().join("missing")),
            Err(DumpError::Unreadable(_))
        ));
    }

    proptest! {
        /// Any text parses without panicking, and every header kept has a
        /// token name and a value without line ends.
        #[test]
        fn parse_is_total(text in "(HTTP/[12](\\.1)? [0-9]{1,4}[ a-z]*|[A-Za-z-]{0,12}:? ?[ -~]{0,12}|[ \t]+x|\\PC{0,8}|)(\r?\n(HTTP/2 429|[A-Za-z-]{1,8}: [0-9a-z]{0,4}|\\PC{0,8}|)){0,8}") {
            let d = parse(&text);
            for (n, v) in &d.headers {
                prop_assert!(is_token(n));
                prop_assert!(!v.contains('\n'));
            }
        }
    }
}
