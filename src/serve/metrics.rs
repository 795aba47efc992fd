//! `GET /metrics`: counters and a latency histogram in the Prometheus text
//! format (version 0.0.4), rendered by hand from atomics and small maps — no
//! metrics library for a dozen series.
//!
//! | series | labels | what |
//! |---|---|---|
//! | `zael_decisions_total` | `mode`, `outcome` | checks answered: `allowed`, `refused`, `allowed_unchecked` / `refused_unchecked` (on_unavailable answered, or other writers kept winning) |
//! | `zael_refusals_total` | `limit` | refused checks by refusing limit (a check refused by two limits counts for both) |
//! | `zael_http_requests_total` | `route`, `status` | every request, by route template (`/v1/reservations/{id}/release`) |
//! | `zael_http_request_duration_seconds` | `route` | latency histogram, from the first byte of the request to the response |
//! | `zael_store_requests_total` | `op` | store calls (`get`, `batch_get`, `query`, `write`, …) |
//! | `zael_store_errors_total` | | store calls that failed (a lost conditional write excepted) |
//! | `zael_store_conflicts_total` | | conditional writes that lost a race: each is decided again (a retry) |
//! | `zael_config_cache_hits_total` / `_misses_total` | | resolved levels and namespaces served from the `--config-ttl` cache, or read |
//! | `zael_busy_poll_seconds_total` | | time the worker spent looking for the next request with nothing else to do, where it would have slept (`--busy-poll-us`) |
//! | `zael_event_loop_lag_seconds` | | histogram: how late a task asking to wake every 10 ms was woken; while it was late, nothing on the worker ran ([`super::lag`]) |

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;
use std::time::Duration;

use crate::runtime::Decision;
use crate::store::observe::{Observer, Steps};
use crate::store::StoreError;

/// Upper bounds of the latency buckets, in microseconds (0.5 ms to 10 s).
const BUCKETS_US: [u64; 14] = [
    500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000, 1_000_000,
    2_500_000, 5_000_000, 10_000_000,
];

/// Distinct limit names kept apart in `zael_refusals_total`; later ones count as `_other_`.
const MAX_LIMIT_LABELS: usize = 256;

#[derive(Debug, Default, Clone)]
struct Histogram {
    counts: [u64; BUCKETS_US.len()],
    count: u64,
    sum_us: u64,
}

impl Histogram {
    fn observe(&mut self, took: Duration) {
        let us = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
        for (bound, count) in BUCKETS_US.iter().zip(self.counts.iter_mut()) {
            if us <= *bound {
                *count += 1;
            }
        }
        self.count += 1;
        self.sum_us = self.sum_us.saturating_add(us);
    }

    /// The series of one histogram; `labels` is empty or `a="x",` (ending in
    /// a comma, for the bucket's `le`).
    fn render(&self, out: &mut String, name: &str, labels: &str) {
        let bounds = BUCKETS_US.iter().map(|b| (*b as f64 / 1e6).to_string());
        for (le, n) in bounds.zip(self.counts) {
            let _ = writeln!(out, "{name}_bucket{{{labels}le=\"{le}\"}} {n}");
        }
        let _ = writeln!(out, "{name}_bucket{{{labels}le=\"+Inf\"}} {}", self.count);
        let labels = match labels.trim_end_matches(',') {
            "" => String::new(),
            l => format!("{{{l}}}"),
        };
        let _ = writeln!(out, "{name}_sum{labels} {}", self.sum_us as f64 / 1e6);
        let _ = writeln!(out, "{name}_count{labels} {}", self.count);
    }
}

/// The server's counters; shared by every request.
#[derive(Debug, Default)]
pub struct Metrics {
    decisions: Mutex<BTreeMap<(&'static str, &'static str), u64>>,
    refusals: Mutex<BTreeMap<String, u64>>,
    http: Mutex<BTreeMap<(String, u16), u64>>,
    latency: Mutex<BTreeMap<String, Histogram>>,
    store_requests: Mutex<BTreeMap<&'static str, u64>>,
    store_errors: AtomicU64,
    store_conflicts: AtomicU64,
    cache_hits: AtomicU64,
    cache_misses: AtomicU64,
    busy_poll_ns: AtomicU64,
    lag: Mutex<Histogram>,
}

fn bump<K: Ord>(map: &Mutex<BTreeMap<K, u64>>, key: K) {
    if let Ok(mut m) = map.lock() {
        *m.entry(key).or_default() += 1;
    }
}

impl Metrics {
    /// One check's answer.
    pub fn decision(&self, d: &Decision) {
        let outcome = match (d.allowed, d.unavailable.is_some()) {
            (true, false) => "allowed",
            (false, false) => "refused",
            (true, true) => "allowed_unchecked",
            (false, true) => "refused_unchecked",
        };
        bump(&self.decisions, (d.mode.as_str(), outcome));
        if let Ok(mut m) = self.refusals.lock() {
            for l in d.refused_by() {
                let known = m.contains_key(&l.name) || m.len() < MAX_LIMIT_LABELS;
                let name = if known {
                    l.name.clone()
                } else {
                    "_other_".into()
                };
                *m.entry(name).or_default() += 1;
            }
        }
    }

    /// One HTTP request, by route template.
    pub fn request(&self, route: &str, status: u16, took: Duration) {
        bump(&self.http, (route.to_string(), status));
        if let Ok(mut m) = self.latency.lock() {
            m.entry(route.to_string()).or_default().observe(took);
        }
    }

    /// How late the event loop's probe was woken ([`super::lag`]).
    pub fn event_loop_lag(&self, lag: Duration) {
        if let Ok(mut h) = self.lag.lock() {
            h.observe(lag);
        }
    }

    /// Probe wakes so far, and those later than `over`'s bucket bound.
    #[cfg(test)]
    pub fn event_loop_lags(&self, over: Duration) -> (u64, u64) {
        let h = self.lag.lock().unwrap();
        let bound = BUCKETS_US
            .iter()
            .position(|b| *b == over.as_micros() as u64)
            .expect("a bucket bound");
        (h.count, h.count - h.counts[bound])
    }

    pub fn cache(&self, hit: bool) {
        let c = if hit {
            &self.cache_hits
        } else {
            &self.cache_misses
        };
        c.fetch_add(1, Relaxed);
    }

    /// Time busy polling had to itself ([`super::busy_poll`]).
    pub fn busy_poll(&self, took: Duration) {
        let ns = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
        self.busy_poll_ns.fetch_add(ns, Relaxed);
    }

    /// The time spent busy polling so far.
    pub fn busy_poll_time(&self) -> Duration {
        Duration::from_nanos(self.busy_poll_ns.load(Relaxed))
    }

    /// The Prometheus text.
    pub fn render(&self) -> String {
        let mut out = String::new();
        counter(
            &mut out,
            "zael_decisions_total",
            "Checks answered, by mode and outcome.",
            &self.decisions,
            |(mode, outcome)| format!("mode=\"{mode}\",outcome=\"{outcome}\""),
        );
        counter(
            &mut out,
            "zael_refusals_total",
            "Refused checks, by refusing limit.",
            &self.refusals,
            |limit| format!("limit=\"{}\"", escape(limit)),
        );
        counter(
            &mut out,
            "zael_http_requests_total",
            "HTTP requests, by route and status.",
            &self.http,
            |(route, status)| format!("route=\"{}\",status=\"{status}\"", escape(route)),
        );
        head(
            &mut out,
            "zael_http_request_duration_seconds",
            "histogram",
            "HTTP request latency, by route.",
        );
        if let Ok(m) = self.latency.lock() {
            for (route, h) in m.iter() {
                let labels = format!("route=\"{}\",", escape(route));
                h.render(&mut out, "zael_http_request_duration_seconds", &labels);
            }
        }
        counter(
            &mut out,
            "zael_store_requests_total",
            "Store calls, by operation.",
            &self.store_requests,
            |op| format!("op=\"{op}\""),
        );
        for (name, help, value) in [
            (
                "zael_store_errors_total",
                "Store calls that failed (lost conditional writes excepted).",
                &self.store_errors,
            ),
            (
                "zael_store_conflicts_total",
                "Conditional writes that lost a race; each is decided again.",
                &self.store_conflicts,
            ),
            (
                "zael_config_cache_hits_total",
                "Namespaces and resolved levels served from the config cache.",
                &self.cache_hits,
            ),
            (
                "zael_config_cache_misses_total",
                "Namespaces and resolved levels read from the store.",
                &self.cache_misses,
            ),
        ] {
            head(&mut out, name, "counter", help);
            let _ = writeln!(out, "{name} {}", value.load(Relaxed));
        }
        let name = "zael_busy_poll_seconds_total";
        head(
            &mut out,
            name,
            "counter",
            "Time spent looking for the next request with nothing else to do.",
        );
        let _ = writeln!(out, "{name} {}", self.busy_poll_time().as_secs_f64());
        let name = "zael_event_loop_lag_seconds";
        head(
            &mut out,
            name,
            "histogram",
            "How late the worker's event loop woke a task asked to wake every 10 ms.",
        );
        if let Ok(h) = self.lag.lock() {
            h.render(&mut out, name, "");
        }
        out
    }
}

/// A counter family: its `# HELP` and `# TYPE` lines, then one sample per
/// key of `map`, labelled by `labels` (`a="x",b="y"`).
fn counter<K>(
    out: &mut String,
    name: &str,
    help: &str,
    map: &Mutex<BTreeMap<K, u64>>,
    labels: impl Fn(&K) -> String,
) {
    head(out, name, "counter", help);
    if let Ok(m) = map.lock() {
        for (k, n) in m.iter() {
            let _ = writeln!(out, "{name}{{{}}} {n}", labels(k));
        }
    }
}

/// The `# HELP` and `# TYPE` lines of a metric family.
fn head(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

/// A label value as Prometheus reads it.
fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// What `zael_store_*` report: the store's calls ([`crate::store::observe`]).
impl Observer for Metrics {
    fn call(&self, op: &'static str, _items: usize, _took: Duration, error: Option<&StoreError>) {
        bump(&self.store_requests, op);
        match error {
            None => {}
            Some(StoreError::ConditionFailed { .. }) => {
                self.store_conflicts.fetch_add(1, Relaxed);
            }
            Some(_) => {
                self.store_errors.fetch_add(1, Relaxed);
            }
        }
    }

    /// Counted as the read (none when the caller read the item before,
    /// `known`) and the write it is made of, DynamoDB's GetItem and PutItem,
    /// whichever store carries it out; a failure before the item was shown
    /// (the local store: its write lock not granted in time) counts as a
    /// failed read.
    fn read_then_write(&self, steps: Steps, took: Duration, error: Option<&StoreError>) {
        if !steps.shown {
            return self.call("get", 1, took, error);
        }
        if steps.reads {
            self.call("get", 1, took, None);
        }
        if steps.wrote {
            self.call("write", 1, took, error);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::{Decision, Mode, OnUnavailable};

    #[test]
    fn renders_counters_and_histograms() {
        let m = Metrics::default();
        let why = crate::runtime::decide::Unchecked::Unavailable("x".into());
        let d = Decision::unavailable(OnUnavailable::Block, Mode::Consume, why, 0);
        m.decision(&d);
        m.request("/v1/checks", 200, Duration::from_micros(700));
        m.request("/v1/checks", 200, Duration::from_millis(20));
        m.cache(true);
        m.event_loop_lag(Duration::from_micros(300));
        m.event_loop_lag(Duration::from_millis(60));
        let text = m.render();
        for want in [
            "zael_decisions_total{mode=\"consume\",outcome=\"refused_unchecked\"} 1",
            "zael_http_requests_total{route=\"/v1/checks\",status=\"200\"} 2",
            "zael_http_request_duration_seconds_bucket{route=\"/v1/checks\",le=\"0.0005\"} 0",
            "zael_http_request_duration_seconds_bucket{route=\"/v1/checks\",le=\"0.001\"} 1",
            "zael_http_request_duration_seconds_bucket{route=\"/v1/checks\",le=\"0.025\"} 2",
            "zael_http_request_duration_seconds_bucket{route=\"/v1/checks\",le=\"+Inf\"} 2",
            "zael_http_request_duration_seconds_count{route=\"/v1/checks\"} 2",
            "zael_event_loop_lag_seconds_bucket{le=\"0.0005\"} 1",
            "zael_event_loop_lag_seconds_bucket{le=\"0.05\"} 1",
            "zael_event_loop_lag_seconds_bucket{le=\"0.1\"} 2",
            "zael_event_loop_lag_seconds_bucket{le=\"+Inf\"} 2",
            "zael_event_loop_lag_seconds_sum 0.0603",
            "zael_event_loop_lag_seconds_count 2",
            "zael_config_cache_hits_total 1",
        ] {
            assert!(text.contains(want), "{want} in\n{text}");
        }
    }

    #[test]
    fn a_read_then_write_counts_as_its_read_and_its_write() {
        let m = Metrics::default();
        let steps = |reads, shown, wrote| Steps {
            reads,
            shown,
            wrote,
        };
        let lost = StoreError::ConditionFailed {
            pk: "a".into(),
            sk: "#A".into(),
        };
        let broken = StoreError::Backend("x".into());
        let none = Duration::ZERO;
        m.read_then_write(steps(true, true, true), none, None);
        m.read_then_write(steps(false, true, true), none, Some(&lost));
        m.read_then_write(steps(true, true, false), none, None);
        m.read_then_write(steps(true, false, false), none, Some(&broken));
        m.call("query", 0, none, None);
        let text = m.render();
        for want in [
            "zael_store_requests_total{op=\"get\"} 3",
            "zael_store_requests_total{op=\"query\"} 1",
            "zael_store_requests_total{op=\"write\"} 2",
            "zael_store_errors_total 1",
            "zael_store_conflicts_total 1",
        ] {
            assert!(text.contains(want), "{want} in\n{text}");
        }
        assert!(!text.contains("read_then_write"), "{text}");
    }
}
