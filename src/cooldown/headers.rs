//! The response-headers adapter: every header a provider uses to say when its
//! quota comes back is normalised here, and nowhere else, into [`Hint`]s.
//!
//! Headers arrive as (name, value) pairs: from a `curl -D` file
//! ([`super::dump`]) for the CLI, and from a JSON object for the HTTP API, so
//! both read them identically. Names are compared without regard to case;
//! every occurrence of a repeated header counts.
//!
//! | header | sent by | unit | read as |
//! |---|---|---|---|
//! | `retry-after` | HTTP, Anthropic, OpenAI | delta-seconds or HTTP-date | after receipt, or that instant |
//! | `retry-after-ms` | OpenAI, Azure OpenAI | milliseconds (decimal) | after receipt |
//! | `x-ratelimit-reset-requests` | OpenAI (and Groq, …) | Go duration (`1s`, `6m0s`, `2h10m3.5s`, `20ms`) | after receipt |
//! | `x-ratelimit-reset-tokens` | OpenAI (and Groq, …) | Go duration | after receipt |
//! | `anthropic-ratelimit-requests-reset` | Anthropic | RFC 3339 instant | that instant |
//! | `anthropic-ratelimit-tokens-reset` | Anthropic | RFC 3339 instant | that instant |
//! | `anthropic-ratelimit-input-tokens-reset` | Anthropic | RFC 3339 instant | that instant |
//! | `anthropic-ratelimit-output-tokens-reset` | Anthropic | RFC 3339 instant | that instant |
//!
//! Every reset is kept, and the latest wins: a limit whose `remaining` is above
//! zero may still be the one hit (a request larger than what remains), so no
//! reset is judged inapplicable. A header whose name mentions a reset or a
//! retry but is not in the table (`x-ratelimit-reset`, epoch seconds at one
//! provider and seconds-from-now at another) is reported, never guessed at.
//! The same table, for users, is in docs/cooldowns.md.

use zae_limiter_engine::cooldown::{Hint, HintField, Unit};

/// Every header read, with the unit of its value (names compared without case).
pub const READ: [HintField; 8] = [
    HintField::RETRY_AFTER,
    HintField::new("retry-after-ms", Unit::MillisecondsAfter),
    HintField::new("x-ratelimit-reset-requests", Unit::GoDurationAfter),
    HintField::new("x-ratelimit-reset-tokens", Unit::GoDurationAfter),
    HintField::new("anthropic-ratelimit-requests-reset", Unit::Rfc3339),
    HintField::new("anthropic-ratelimit-tokens-reset", Unit::Rfc3339),
    HintField::new("anthropic-ratelimit-input-tokens-reset", Unit::Rfc3339),
    HintField::new("anthropic-ratelimit-output-tokens-reset", Unit::Rfc3339),
];

/// Longest header value passed on: no reset is written in more.
const MAX_VALUE_BYTES: usize = 256;
/// How much of an unread value a warning shows.
const SHOWN_CHARS: usize = 80;

/// What the headers said.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HeaderHints {
    /// One hint per occurrence of a header in [`READ`], in the order given.
    /// A hint's value may still be malformed: the engine says so when it is
    /// read ([`zae_limiter_engine::cooldown::usable_hints`]).
    pub hints: Vec<Hint>,
    /// Headers left out, and why.
    pub problems: Vec<HeaderProblem>,
}

/// Why a header, or a line of a headers file, was left out.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HeaderProblem {
    #[error("header '{name}: {value}' is not read: it looks like a reset or a retry time, but not one whose unit is known (the headers read are listed in docs/cooldowns.md)")]
    Unknown { name: String, value: String },
    #[error("header '{name}': the value has control characters ({value})")]
    ControlCharacters { name: String, value: String },
    #[error("header '{name}': the value is {len} bytes long; no reset is written in more than {MAX_VALUE_BYTES}")]
    TooLong { name: String, len: usize },
    #[error("line {line} is not a header ('Name: value'): {text}")]
    NotAHeader { line: usize, text: String },
    #[error(
        "line {line} is not an HTTP status line such as 'HTTP/1.1 429 Too Many Requests': {text}"
    )]
    BadStatusLine { line: usize, text: String },
}

/// Reads the headers of one response. Headers outside [`READ`] are ignored,
/// except those that look like a reset or a retry time ([`HeaderProblem::Unknown`]).
pub fn read_headers<N: AsRef<str>, V: AsRef<str>>(pairs: &[(N, V)]) -> HeaderHints {
    let mut out = HeaderHints::default();
    for (name, value) in pairs {
        let (name, value) = (name.as_ref().trim(), value.as_ref());
        let lower = name.to_ascii_lowercase();
        let Some(field) = READ.iter().find(|f| f.name().eq_ignore_ascii_case(name)) else {
            if lower.contains("reset") || lower.contains("retry") {
                out.problems.push(HeaderProblem::Unknown {
                    name: name.to_string(),
                    value: shown(value),
                });
            }
            continue;
        };
        if value.len() > MAX_VALUE_BYTES {
            out.problems.push(HeaderProblem::TooLong {
                name: name.to_string(),
                len: value.len(),
            });
        } else if value.chars().any(|c| c.is_control() && c != '\t') {
            out.problems.push(HeaderProblem::ControlCharacters {
                name: name.to_string(),
                value: shown(value),
            });
        } else {
            out.hints.push(Hint::new(*field, value.trim()));
        }
    }
    out
}

/// A value as a warning shows it: control characters escaped, at most
/// [`SHOWN_CHARS`] characters.
pub fn shown(value: &str) -> String {
    let mut out = String::new();
    for c in value.chars().take(SHOWN_CHARS) {
        if c.is_control() {
            out.extend(c.escape_debug());
        } else {
            out.push(c);
        }
    }
    if value.chars().nth(SHOWN_CHARS).is_some() {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use zae_limiter_engine::cooldown::{usable_hints, EpochMs, HintError};

    fn utc(s: &str) -> EpochMs {
        chrono::DateTime::parse_from_rfc3339(s)
            .unwrap()
            .timestamp_millis()
    }

    /// The deadline each header names, by header name (malformed: the error).
    fn deadlines(
        pairs: &[(&str, &str)],
        received: EpochMs,
    ) -> Vec<(String, Result<String, HintError>)> {
        read_headers(pairs)
            .hints
            .iter()
            .map(|h| {
                let d = h.deadline(received).map(crate::clock::rfc3339);
                (h.field().name().to_string(), d)
            })
            .collect()
    }

    fn ok(name: &str, at: &str) -> (String, Result<String, HintError>) {
        (name.to_string(), Ok(at.to_string()))
    }

    /// OpenAI's shape (recorded): a 429 for tokens, received one minute before
    /// a month end; the longest reset carries it into the next month.
    #[test]
    fn openai_reset_durations() {
        let received = utc("2026-01-31T23:59:00Z");
        let pairs = [
            ("x-ratelimit-limit-requests", "500"),
            ("x-ratelimit-limit-tokens", "30000"),
            ("x-ratelimit-remaining-requests", "499"),
            ("x-ratelimit-remaining-tokens", "0"),
            ("x-ratelimit-reset-requests", "120ms"),
            ("x-ratelimit-reset-tokens", "2h10m3.5s"),
            ("retry-after-ms", "1500"),
            ("retry-after", "2"),
        ];
        assert_eq!(
            deadlines(&pairs, received),
            vec![
                ok("x-ratelimit-reset-requests", "2026-01-31T23:59:00.120Z"),
                ok("x-ratelimit-reset-tokens", "2026-02-01T02:09:03.500Z"),
                ok("retry-after-ms", "2026-01-31T23:59:01.500Z"),
                ok("Retry-After", "2026-01-31T23:59:02Z"),
            ]
        );
        // Limits and remaining counts say nothing about when: not reported.
        assert!(read_headers(&pairs).problems.is_empty());
        // Go's own spellings of short and long resets.
        for (value, at) in [
            ("1s", "2026-01-31T23:59:01Z"),
            ("6m0s", "2026-02-01T00:05:00Z"),
            ("7.66s", "2026-01-31T23:59:07.660Z"),
            ("1h0m0s", "2026-02-01T00:59:00Z"),
        ] {
            assert_eq!(
                deadlines(&[("x-ratelimit-reset-tokens", value)], received),
                vec![ok("x-ratelimit-reset-tokens", at)],
                "{value}"
            );
        }
    }

    /// Anthropic's shape (recorded): RFC 3339 resets and a delta-seconds
    /// retry-after, received just before the US spring-forward (2026-03-08,
    /// 02:00 PST → 03:00 PDT): an offset-bearing reset is an instant, so the
    /// skipped local hour neither shortens nor stretches it.
    #[test]
    fn anthropic_resets_across_a_dst_change() {
        let received = utc("2026-03-08T09:59:30Z"); // 01:59:30 PST
        let pairs = [
            ("anthropic-ratelimit-requests-limit", "50"),
            ("anthropic-ratelimit-requests-remaining", "0"),
            ("anthropic-ratelimit-requests-reset", "2026-03-08T10:00:00Z"),
            (
                "anthropic-ratelimit-tokens-reset",
                "2026-03-08T03:00:30-07:00",
            ),
            (
                "anthropic-ratelimit-input-tokens-reset",
                "2026-03-08T01:59:59-08:00",
            ),
            (
                "anthropic-ratelimit-output-tokens-reset",
                "2026-03-08T10:00:45.250Z",
            ),
            ("retry-after", "31"),
            ("request-id", "req_018EeWyXxfu5pfWkrYcMdjWG"),
        ];
        assert_eq!(
            deadlines(&pairs, received),
            vec![
                ok("anthropic-ratelimit-requests-reset", "2026-03-08T10:00:00Z"),
                // 03:00:30 PDT, the first minute after the skipped hour, is 10:00:30 UTC:
                // 31 s after 01:59:59 PST, not an hour and 31 s.
                ok("anthropic-ratelimit-tokens-reset", "2026-03-08T10:00:30Z"),
                ok(
                    "anthropic-ratelimit-input-tokens-reset",
                    "2026-03-08T09:59:59Z"
                ),
                ok(
                    "anthropic-ratelimit-output-tokens-reset",
                    "2026-03-08T10:00:45.250Z"
                ),
                ok("Retry-After", "2026-03-08T10:00:01Z"),
            ]
        );
    }

    /// `Retry-After` as an HTTP-date, over a month end and a European DST
    /// change (2026-10-25 03:00 CEST → 02:00 CET): HTTP-dates are GMT, so
    /// the local clock change does not enter.
    #[test]
    fn retry_after_http_dates_and_seconds() {
        let received = utc("2026-10-31T23:30:00Z");
        assert_eq!(
            deadlines(
                &[
                    ("Retry-After", "Sun, 01 Nov 2026 00:30:00 GMT"),
                    ("RETRY-AFTER", "3600"),
                    ("retry-after", "Sunday, 01-Nov-26 00:15:00 GMT"),
                    ("retry-after", "Sun Nov  1 00:45:00 2026"),
                ],
                received
            ),
            vec![
                ok("Retry-After", "2026-11-01T00:30:00Z"),
                ok("Retry-After", "2026-11-01T00:30:00Z"),
                ok("Retry-After", "2026-11-01T00:15:00Z"),
                ok("Retry-After", "2026-11-01T00:45:00Z"),
            ]
        );
        let dst = utc("2026-10-25T00:30:00Z"); // 02:30 CEST, the first time
        assert_eq!(
            deadlines(&[("retry-after", "Sun, 25 Oct 2026 01:30:00 GMT")], dst),
            vec![ok("Retry-After", "2026-10-25T01:30:00Z")]
        );
    }

    #[test]
    fn malformed_values_reach_the_engine_and_are_named() {
        let received = utc("2026-12-02T10:00:00Z");
        let h = read_headers(&[
            ("x-ratelimit-reset-tokens", "soon"),
            ("x-ratelimit-reset-requests", "6m0s"),
            ("anthropic-ratelimit-tokens-reset", "1796421160"),
            ("retry-after-ms", "-20"),
        ]);
        let (usable, unusable) = usable_hints(&h.hints, received);
        assert_eq!(
            usable,
            vec![Hint::new(READ[2], "6m0s")],
            "the good header beside the bad ones is kept"
        );
        let msgs: Vec<String> = unusable.iter().map(ToString::to_string).collect();
        assert_eq!(
            msgs,
            vec![
                "x-ratelimit-reset-tokens: 'soon' cannot be read; expected a duration such as 1s, 6m0s, 2h10m3.5s or 20ms",
                "anthropic-ratelimit-tokens-reset: '1796421160' cannot be read; expected an RFC 3339 time such as 2026-12-02T10:00:00Z",
                "retry-after-ms: '-20' is negative; a reset cannot lie before the response",
            ]
        );
    }

    #[test]
    fn unknown_reset_headers_are_reported_and_others_ignored() {
        let h = read_headers(&[
            ("X-RateLimit-Reset", "1796421160"),
            ("ratelimit-reset", "30"),
            ("anthropic-ratelimit-unified-reset", "1796421160"),
            ("content-type", "application/json"),
            ("x-ratelimit-remaining-tokens", "0"),
        ]);
        assert!(h.hints.is_empty());
        let names: Vec<&str> = h
            .problems
            .iter()
            .map(|p| match p {
                HeaderProblem::Unknown { name, .. } => name.as_str(),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(
            names,
            [
                "X-RateLimit-Reset",
                "ratelimit-reset",
                "anthropic-ratelimit-unified-reset"
            ]
        );
        assert_eq!(
            h.problems[0].to_string(),
            "header 'X-RateLimit-Reset: 1796421160' is not read: it looks like a reset or a retry time, but not one whose unit is known (the headers read are listed in docs/cooldowns.md)"
        );
    }

    #[test]
    fn hostile_values_are_left_out_and_shown_escaped() {
        let long = "9".repeat(10_000);
        let h = read_headers(&[
            ("retry-after", long.as_str()),
            ("retry-after", "30\u{1b}[2J"),
            ("x-ratelimit-reset-foo", "\u{7}bell"),
        ]);
        assert!(h.hints.is_empty());
        assert_eq!(
            h.problems[0],
            HeaderProblem::TooLong {
                name: "retry-after".into(),
                len: 10_000
            }
        );
        assert_eq!(
            h.problems[1].to_string(),
            "header 'retry-after': the value has control characters (30\\u{1b}[2J)"
        );
        assert!(h.problems[2].to_string().contains("\\u{7}bell"));
        let shown_long = shown(&long);
        assert_eq!(shown_long.chars().count(), SHOWN_CHARS + 1);
        assert!(shown_long.ends_with('…'));
    }

    #[test]
    fn names_are_trimmed_and_compared_without_case_values_trimmed() {
        let h = read_headers(&[(" Retry-After ", "  120 ")]);
        assert_eq!(h.hints, vec![Hint::new(READ[0], "120")]);
        // Pairs may be owned (a JSON object's entries) or borrowed.
        let owned = vec![("Retry-After".to_string(), "120".to_string())];
        assert_eq!(read_headers(&owned).hints, h.hints);
    }
}
