//! Everything one refused response says about when to call again — explicit
//! values, its status, its headers, its JSON body — gathered into one
//! [`Refusal`] (for `record`) or [`Settlement`] (for a probe's `settle`),
//! with a [`Warning`] for each thing that could not be used.
//!
//! This is the one path from a response to a refusal: the CLI feeds it flags
//! and files, and the HTTP API (`POST /v1/cooldowns/{scope}/record`: status,
//! headers as a JSON object, body, receivedAt; `src/serve/cooldowns.rs`)
//! feeds it the same parts, so both decide alike. Nothing here loses the refusal: what cannot be
//! read becomes a warning, and with no usable reset the backoff applies.

use zae_limiter_engine::cooldown::{usable_hints, EpochMs, Hint, HintError};

use super::dump::{DumpError, HeaderDump};
use super::headers::{read_headers, HeaderProblem};
use super::ops::{Refusal, Settlement};
use super::response::{read_response, ResponseError, ResponseHints};

/// How far a given receipt instant may lie after "now" (clock skew between hosts).
pub const RECEIPT_SKEW_MS: i64 = 5 * 60 * 1000;

/// Something given that the refusal is recorded without.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Warning {
    #[error("{origin}: {error}; recording without it")]
    Body {
        origin: String,
        error: ResponseError,
    },
    #[error("{origin}: {error}; recording without them")]
    Headers { origin: String, error: DumpError },
    #[error("{origin}: {problem}; recording without it")]
    Header {
        origin: String,
        problem: HeaderProblem,
    },
    #[error("{0}; recording without it")]
    Hint(HintError),
    #[error("{origin}: status {status} is not a refusal; recording without it")]
    NotARefusal { origin: String, status: u16 },
    #[error("{origin}: status {found} differs from the status given ({kept}); recording {kept}")]
    StatusConflict {
        origin: String,
        found: u16,
        kept: u16,
    },
    #[error("the response was received at {received_at}, after now ({now}); a response cannot be received in the future, so it counts as received now")]
    FutureReceipt { received_at: String, now: String },
    #[error("no usable reset: recording with the backoff")]
    NoUsableReset,
}

/// The parts of one refused response, as they are added.
#[derive(Debug, Clone, Default)]
pub struct Evidence {
    status: Option<u16>,
    hints: Vec<Hint>,
    label: Option<String>,
    warnings: Vec<Warning>,
}

impl Evidence {
    /// A value given explicitly (a flag). An identical one already given is not repeated.
    pub fn hint(&mut self, hint: Hint) {
        let same = |h: &Hint| h.field() == hint.field() && h.value().trim() == hint.value().trim();
        if !self.hints.iter().any(same) {
            self.hints.push(hint);
        }
    }

    /// The response's status, from `origin`. The first status given counts; a
    /// later, different one is a warning. A status below 400 is not a refusal
    /// and is left out (the refusal is still recorded).
    pub fn status(&mut self, origin: &str, status: u16) {
        if status < 400 {
            self.warnings.push(Warning::NotARefusal {
                origin: origin.to_string(),
                status,
            });
            return;
        }
        match self.status {
            None => self.status = Some(status),
            Some(kept) if kept != status => self.warnings.push(Warning::StatusConflict {
                origin: origin.to_string(),
                found: status,
                kept,
            }),
            Some(_) => {}
        }
    }

    /// The response's headers, as (name, value) pairs, through the one
    /// adapter ([`super::headers`]).
    pub fn headers<N: AsRef<str>, V: AsRef<str>>(&mut self, origin: &str, pairs: &[(N, V)]) {
        let read = read_headers(pairs);
        for h in read.hints {
            self.hint(h);
        }
        self.header_problems(origin, read.problems);
    }

    /// A `curl -D` headers file: its last response's status, headers and (for
    /// `curl -i` output) body.
    pub fn dump(&mut self, origin: &str, dump: Result<HeaderDump, DumpError>) {
        let dump = match dump {
            Ok(d) => d,
            Err(error) => {
                self.warnings.push(Warning::Headers {
                    origin: origin.to_string(),
                    error,
                });
                return;
            }
        };
        self.header_problems(origin, dump.problems);
        if let Some(s) = dump.status {
            self.status(origin, s);
        }
        self.headers(origin, &dump.headers);
        if let Some(body) = dump.body {
            self.body(origin, read_response(&body));
        }
    }

    /// A JSON body, read (or not) by [`super::response`].
    pub fn body(&mut self, origin: &str, read: Result<ResponseHints, ResponseError>) {
        let warn = |error| Warning::Body {
            origin: origin.to_string(),
            error,
        };
        match read {
            Ok(r) => {
                for h in r.hints {
                    self.hint(h);
                }
                self.label = self.label.take().or(r.label);
                self.warnings.extend(r.problems.into_iter().map(warn));
            }
            Err(e) => self.warnings.push(warn(e)),
        }
    }

    /// When the response was received: `given`, unless it lies after `now`
    /// (beyond clock skew), which would also dodge the plausibility ceiling.
    pub fn received_at(&mut self, given: Option<EpochMs>, now: EpochMs) -> EpochMs {
        match given {
            Some(at) if at > now.saturating_add(RECEIPT_SKEW_MS) => {
                let fmt = crate::clock::rfc3339;
                self.warnings.push(Warning::FutureReceipt {
                    received_at: fmt(at),
                    now: fmt(now),
                });
                now
            }
            Some(at) => at,
            None => now,
        }
    }

    /// The refusal to record: an auth rejection for 401/403, else a quota
    /// refusal from the usable hints; and every warning.
    pub fn refusal(mut self, received_at: EpochMs) -> (Refusal, Vec<Warning>) {
        let refusal = match self.status {
            Some(status @ (401 | 403)) => Refusal::Auth {
                status,
                received_at,
            },
            status => Refusal::Quota {
                status,
                hints: self.usable(received_at),
                received_at,
                label: self.label.take(),
            },
        };
        (refusal, self.warnings)
    }

    /// A probe refused again for quota: the usable hints; and every warning.
    pub fn settlement(mut self, received_at: EpochMs) -> (Settlement, Vec<Warning>) {
        let settlement = Settlement::Quota {
            hints: self.usable(received_at),
            label: self.label.take(),
            received_at,
        };
        (settlement, self.warnings)
    }

    fn usable(&mut self, received_at: EpochMs) -> Vec<Hint> {
        let (usable, unusable) = usable_hints(&self.hints, received_at);
        if usable.is_empty() && !unusable.is_empty() {
            self.warnings.extend(
                unusable
                    .into_iter()
                    .map(Warning::Hint)
                    .chain([Warning::NoUsableReset]),
            );
        } else {
            self.warnings
                .extend(unusable.into_iter().map(Warning::Hint));
        }
        usable
    }

    fn header_problems(&mut self, origin: &str, problems: Vec<HeaderProblem>) {
        self.warnings
            .extend(problems.into_iter().map(|problem| Warning::Header {
                origin: origin.to_string(),
                problem,
            }));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cooldown::dump::parse;

    const T: EpochMs = 1_796_205_600_000; // 2026-12-02T10:00:00Z

    fn messages(w: &[Warning]) -> Vec<String> {
        w.iter().map(ToString::to_string).collect()
    }

    /// The warnings of the refusal `e` makes, which must be a quota refusal
    /// without a usable hint (the backoff applies).
    fn hintless_quota(e: Evidence) -> Vec<String> {
        let (r, w) = e.refusal(T);
        assert!(
            matches!(r, Refusal::Quota { ref hints, .. } if hints.is_empty()),
            "{r:?}"
        );
        messages(&w)
    }

    #[test]
    fn headers_and_a_json_body_together() {
        let mut e = Evidence::default();
        e.dump(
            "h",
            Ok(parse("HTTP/2 429\r\nretry-after: 20\r\nx-ratelimit-reset-tokens: 6m0s\r\nx-ratelimit-reset: 99\r\n\r\n")),
        );
        e.body(
            "b",
            read_response(r#"{"error":{"type":"usage_limit_reached","resets_in_seconds":60}}"#),
        );
        let (r, w) = e.refusal(T);
        let Refusal::Quota {
            status,
            hints,
            label,
            ..
        } = r
        else {
            panic!("{r:?}")
        };
        assert_eq!(status, Some(429));
        assert_eq!(label.as_deref(), Some("usage_limit_reached"));
        let named: Vec<(&str, &str)> = hints
            .iter()
            .map(|h| (h.field().name(), h.value()))
            .collect();
        assert_eq!(
            named,
            [
                ("Retry-After", "20"),
                ("x-ratelimit-reset-tokens", "6m0s"),
                ("resets_in_seconds", "60")
            ]
        );
        assert_eq!(messages(&w).len(), 1);
        assert!(messages(&w)[0].starts_with("h: header 'x-ratelimit-reset: 99' is not read"));
    }

    #[test]
    fn a_malformed_header_never_loses_the_refusal() {
        let mut e = Evidence::default();
        e.headers("headers", &[("x-ratelimit-reset-tokens", "soon")]);
        assert_eq!(
            hintless_quota(e),
            [
                "x-ratelimit-reset-tokens: 'soon' cannot be read; expected a duration such as 1s, 6m0s, 2h10m3.5s or 20ms; recording without it",
                "no usable reset: recording with the backoff"
            ]
        );
    }

    #[test]
    fn statuses() {
        // The headers' 401 makes an auth rejection.
        let mut e = Evidence::default();
        e.dump("h", Ok(parse("HTTP/1.1 401 Unauthorized\r\n\r\n")));
        assert!(matches!(e.refusal(T).0, Refusal::Auth { status: 401, .. }));
        // An explicit status given first wins; a different one is named.
        let mut e = Evidence::default();
        e.status("--status", 429);
        e.dump("h", Ok(parse("HTTP/1.1 503 x\r\n\r\n")));
        let (r, w) = e.refusal(T);
        assert!(matches!(
            r,
            Refusal::Quota {
                status: Some(429),
                ..
            }
        ));
        assert_eq!(
            messages(&w),
            ["h: status 503 differs from the status given (429); recording 429"]
        );
        // A success is not a refusal: left out, the refusal still recorded.
        let mut e = Evidence::default();
        e.dump("h", Ok(parse("HTTP/1.1 200 OK\r\n\r\n")));
        let (r, w) = e.refusal(T);
        assert!(matches!(r, Refusal::Quota { status: None, .. }));
        assert_eq!(
            messages(&w),
            ["h: status 200 is not a refusal; recording without it"]
        );
    }

    #[test]
    fn identical_values_count_once_and_receipts_are_bounded() {
        let mut e = Evidence::default();
        e.hint(Hint::retry_after("20"));
        e.headers("h", &[("Retry-After", " 20"), ("retry-after", "20")]);
        assert_eq!(e.hints.len(), 1);
        assert_eq!(e.received_at(Some(T - 1), T), T - 1);
        assert_eq!(
            e.received_at(Some(T + RECEIPT_SKEW_MS), T),
            T + RECEIPT_SKEW_MS
        );
        assert_eq!(e.received_at(Some(T + 86_400_000), T), T);
        assert_eq!(e.received_at(None, T), T);
        let (_, w) = e.settlement(T);
        assert_eq!(
            messages(&w),
            ["the response was received at 2026-12-03T10:00:00Z, after now (2026-12-02T10:00:00Z); a response cannot be received in the future, so it counts as received now"]
        );
    }

    #[test]
    fn unreadable_files_are_warnings() {
        let mut e = Evidence::default();
        e.dump("h.txt", Err(DumpError::TooLarge { max: 1 << 20 }));
        e.body("b.json", Err(ResponseError::NotObject));
        assert_eq!(
            hintless_quota(e),
            [
                "h.txt: the headers file is larger than 1 MiB; files that large are not read; recording without them",
                "b.json: the response body is not a JSON object; recording without it"
            ]
        );
    }
}
