//! Synthetic traces for `limits gen-trace`: arrivals shaped steady, bursty or
//! by business hours, with per-request costs and optional holds, the same for
//! the same seed on every machine.
//!
//! * `steady`: a Poisson process at the rate.
//! * `bursty`: the same average rate, in bursts: 12 s (mean) at 4× the rate,
//!   then 48 s at a quarter of it.
//! * `business-hours`: the rate Monday to Friday 09:00–17:00 in `--tz`, a
//!   tenth of it at other times.
//!
//! Arrival gaps use floating point (they only decide *when* a line is
//! written); everything the replay evaluates is integers.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io::Write;

use chrono::{Datelike, TimeZone, Timelike, Utc, Weekday};
use chrono_tz::Tz;

use super::clock::parse_duration;
use super::prng::SplitMix64;
use super::trace::Op;
use crate::clock::rfc3339;

/// A generator option that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GenError {
    #[error("--rate {0:?}: write requests per second, minute or hour, e.g. 20/s, 600/min, 5000/h (a bare number is per second)")]
    Rate(String),
    #[error("--rate {0:?} is above the highest rate the generator takes, {MAX_RATE_PER_SECOND}/s; write a lower rate")]
    RateTooHigh(String),
    #[error("--costs {0:?}: write name=COST or name=LOW..HIGH, comma-separated, e.g. rpm=1,tpm=500..2000")]
    Costs(String),
    #[error("--costs: {0:?} is not a limit name (start with a letter, then letters, digits, `_`, `.` or `-`)")]
    CostName(String),
    #[error("--costs: {0:?} appears twice")]
    DuplicateCost(String),
    #[error("--hold {0:?}: write a duration or a range of durations, e.g. 30s or 5s..2m")]
    Hold(String),
}

/// How arrivals are spread over time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    Steady,
    Bursty,
    BusinessHours,
}

/// One cost column: a constant (`lo == hi`) or uniform in `lo..=hi`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CostSpec {
    pub name: String,
    pub lo: u64,
    pub hi: u64,
}

/// The highest `--rate` (requests per second) the generator takes.
pub const MAX_RATE_PER_SECOND: u64 = 1_000_000;

/// `20`, `20/s`, `600/min`, `5000/h` → requests per second.
pub fn parse_rate(text: &str) -> Result<f64, GenError> {
    let bad = || GenError::Rate(text.to_string());
    let (num, per) = match text.trim().split_once('/') {
        Some((n, unit)) => {
            let per = match unit.trim() {
                "s" | "sec" | "second" => 1.0,
                "m" | "min" | "minute" => 60.0,
                "h" | "hour" => 3600.0,
                "d" | "day" => 86_400.0,
                _ => return Err(bad()),
            };
            (n.trim(), per)
        }
        None => (text.trim(), 1.0),
    };
    let n: f64 = num.parse().map_err(|_| bad())?;
    if !n.is_finite() || n <= 0.0 {
        return Err(bad());
    }
    if n / per > MAX_RATE_PER_SECOND as f64 {
        return Err(GenError::RateTooHigh(text.to_string()));
    }
    Ok(n / per)
}

/// `rpm=1,tpm=500..2000`.
pub fn parse_costs(text: &str) -> Result<Vec<CostSpec>, GenError> {
    let bad = || GenError::Costs(text.to_string());
    let mut out: Vec<CostSpec> = Vec::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (name, value) = part.split_once('=').ok_or_else(bad)?;
        let name = name.trim();
        let valid = name.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'));
        if !valid {
            return Err(GenError::CostName(name.to_string()));
        }
        if out.iter().any(|c| c.name == name) {
            return Err(GenError::DuplicateCost(name.to_string()));
        }
        let num = |s: &str| s.trim().parse::<u64>().map_err(|_| bad());
        let (lo, hi) = match value.split_once("..") {
            Some((a, b)) => (num(a)?, num(b)?),
            None => (num(value)?, num(value)?),
        };
        if lo > hi {
            return Err(bad());
        }
        out.push(CostSpec {
            name: name.to_string(),
            lo,
            hi,
        });
    }
    if out.is_empty() {
        return Err(bad());
    }
    Ok(out)
}

/// `30s` or `5s..2m` → (low, high) in ms.
pub fn parse_hold(text: &str) -> Result<(i64, i64), GenError> {
    let bad = || GenError::Hold(text.to_string());
    let (a, b) = text.split_once("..").unwrap_or((text, text));
    let lo = parse_duration(a).map_err(|_| bad())?;
    let hi = parse_duration(b).map_err(|_| bad())?;
    if lo > hi {
        return Err(bad());
    }
    Ok((lo, hi))
}

/// Everything a generated trace depends on.
#[derive(Debug, Clone)]
pub struct Plan {
    pub shape: Shape,
    pub rate_per_s: f64,
    pub start_ms: i64,
    pub duration_ms: i64,
    pub seed: u64,
    pub tz: Tz,
    pub costs: Vec<CostSpec>,
    /// Each request reserves a hold released this long after (uniform, ms).
    pub hold_ms: Option<(i64, i64)>,
}

/// One generated line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GenEvent {
    pub at_ms: i64,
    pub op: Op,
    /// Hold number (`h{n}`) for reserve and release lines.
    pub hold: Option<u64>,
    /// One cost per [`Plan::costs`] column; empty for releases.
    pub costs: Vec<u64>,
}

/// The events of a plan, in time order, one at a time.
pub struct Generator {
    plan: Plan,
    rng: SplitMix64,
    /// Offset of the last arrival from the start, ms (fractional).
    t: f64,
    /// Bursty: in a burst, and when the current phase ends.
    burst: bool,
    phase_end: f64,
    next_arrival: Option<f64>,
    releases: BinaryHeap<Reverse<(i64, u64)>>,
    holds: u64,
}

const BURST_MEAN_MS: f64 = 12_000.0;
const QUIET_MEAN_MS: f64 = 48_000.0;

impl Generator {
    pub fn new(plan: Plan) -> Generator {
        let mut rng = SplitMix64::new(plan.seed);
        let phase_end = rng.exponential(QUIET_MEAN_MS);
        let mut g = Generator {
            plan,
            rng,
            t: 0.0,
            burst: false,
            phase_end,
            next_arrival: None,
            releases: BinaryHeap::new(),
            holds: 0,
        };
        g.next_arrival = g.arrival();
        g
    }

    /// Rate multiplier of business hours at an offset from the start.
    fn business_factor(&self, offset_ms: f64) -> f64 {
        let at = self.plan.start_ms.saturating_add(offset_ms as i64);
        let Some(local) = Utc
            .timestamp_millis_opt(at)
            .single()
            .map(|t| t.with_timezone(&self.plan.tz))
        else {
            return 1.0;
        };
        let weekday = !matches!(local.weekday(), Weekday::Sat | Weekday::Sun);
        if weekday && (9..17).contains(&local.hour()) {
            1.0
        } else {
            0.1
        }
    }

    /// The next arrival's offset, or `None` past the end.
    fn arrival(&mut self) -> Option<f64> {
        let mean = 1000.0 / self.plan.rate_per_s;
        let end = self.plan.duration_ms as f64;
        loop {
            match self.plan.shape {
                Shape::Steady => self.t += self.rng.exponential(mean),
                Shape::BusinessHours => {
                    // Thinning: candidates at the peak rate, kept by the factor.
                    self.t += self.rng.exponential(mean);
                    if self.t < end && self.rng.next_f64() >= self.business_factor(self.t) {
                        continue;
                    }
                }
                Shape::Bursty => {
                    let m = if self.burst { mean / 4.0 } else { mean * 4.0 };
                    let next = self.t + self.rng.exponential(m);
                    if next > self.phase_end {
                        // Memoryless: restart the draw at the phase change.
                        self.t = self.phase_end;
                        self.burst = !self.burst;
                        let len = if self.burst {
                            BURST_MEAN_MS
                        } else {
                            QUIET_MEAN_MS
                        };
                        self.phase_end += self.rng.exponential(len);
                        if self.t >= end {
                            return None;
                        }
                        continue;
                    }
                    self.t = next;
                }
            }
            return (self.t < end).then_some(self.t);
        }
    }
}

impl Iterator for Generator {
    type Item = GenEvent;

    fn next(&mut self) -> Option<GenEvent> {
        let arrival_ms = self
            .next_arrival
            .map(|t| self.plan.start_ms.saturating_add(t as i64));
        if let Some(&Reverse((at, id))) = self.releases.peek() {
            if arrival_ms.is_none_or(|a| at <= a) {
                self.releases.pop();
                return Some(GenEvent {
                    at_ms: at,
                    op: Op::Release,
                    hold: Some(id),
                    costs: Vec::new(),
                });
            }
        }
        let at_ms = arrival_ms?;
        let costs = self
            .plan
            .costs
            .iter()
            .map(|c| self.rng.range_inclusive(c.lo, c.hi))
            .collect();
        let (op, hold) = match self.plan.hold_ms {
            Some((lo, hi)) => {
                self.holds += 1;
                let d = self.rng.range_inclusive(lo as u64, hi as u64) as i64;
                self.releases
                    .push(Reverse((at_ms.saturating_add(d), self.holds)));
                (Op::Reserve, Some(self.holds))
            }
            None => (Op::Consume, None),
        };
        self.next_arrival = self.arrival();
        Some(GenEvent {
            at_ms,
            op,
            hold,
            costs,
        })
    }
}

/// Output spellings (the trace reader reads both).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutFormat {
    Csv,
    Jsonl,
}

/// Write every event of `gen`; returns the number of lines.
pub fn write_trace<W: Write>(
    out: &mut W,
    gen: Generator,
    format: OutFormat,
) -> std::io::Result<u64> {
    let names: Vec<String> = gen.plan.costs.iter().map(|c| c.name.clone()).collect();
    let holds = gen.plan.hold_ms.is_some();
    if format == OutFormat::Csv {
        let mut header = String::from("timestamp");
        if holds {
            header.push_str(",op,hold");
        }
        for n in &names {
            header.push(',');
            header.push_str(n);
        }
        writeln!(out, "{header}")?;
    }
    let mut lines = 0;
    for ev in gen {
        lines += 1;
        let ts = rfc3339(ev.at_ms);
        match format {
            OutFormat::Csv => {
                write!(out, "{ts}")?;
                if holds {
                    write!(out, ",{},h{}", ev.op.as_str(), ev.hold.unwrap_or(0))?;
                }
                if ev.costs.is_empty() {
                    for _ in &names {
                        out.write_all(b",")?;
                    }
                } else {
                    for c in &ev.costs {
                        write!(out, ",{c}")?;
                    }
                }
                out.write_all(b"\n")?;
            }
            OutFormat::Jsonl => {
                let mut v = serde_json::json!({"timestamp": ts});
                if let Some(h) = ev.hold {
                    v["op"] = ev.op.as_str().into();
                    v["hold"] = format!("h{h}").into();
                }
                if !ev.costs.is_empty() {
                    let m: serde_json::Map<String, serde_json::Value> = names
                        .iter()
                        .cloned()
                        .zip(ev.costs.iter().map(|&c| c.into()))
                        .collect();
                    v["cost"] = m.into();
                }
                writeln!(out, "{v}")?;
            }
        }
    }
    Ok(lines)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(shape: Shape) -> Plan {
        Plan {
            shape,
            rate_per_s: 10.0,
            // Monday 2026-11-30T00:00:00Z.
            start_ms: 1_795_996_800_000,
            duration_ms: 7 * 86_400_000,
            seed: 3,
            tz: chrono_tz::UTC,
            costs: vec![CostSpec {
                name: "tpm".into(),
                lo: 5,
                hi: 9,
            }],
            hold_ms: None,
        }
    }

    #[test]
    fn parses_options() {
        assert_eq!(parse_rate("20"), Ok(20.0));
        assert_eq!(parse_rate("600/min"), Ok(10.0));
        assert_eq!(parse_rate("7200 / h"), Ok(2.0));
        for bad in ["", "0", "-1/s", "5/week", "abc", "inf", "2000000"] {
            assert!(parse_rate(bad).is_err(), "{bad}");
        }
        assert_eq!(parse_rate("1000000/s"), Ok(1e6));
        for high in ["10000000/s", "1000001", "4000000000/h"] {
            assert_eq!(parse_rate(high), Err(GenError::RateTooHigh(high.into())));
        }
        assert_eq!(
            parse_costs("rpm=1, tpm=500..2000").unwrap(),
            [
                CostSpec {
                    name: "rpm".into(),
                    lo: 1,
                    hi: 1
                },
                CostSpec {
                    name: "tpm".into(),
                    lo: 500,
                    hi: 2000
                }
            ]
        );
        for bad in ["", "rpm", "rpm=x", "rpm=5..1", "1x=1", "a=1,a=2"] {
            assert!(parse_costs(bad).is_err(), "{bad}");
        }
        assert_eq!(parse_hold("5s..2m"), Ok((5000, 120_000)));
        assert_eq!(parse_hold("30s"), Ok((30_000, 30_000)));
        assert!(parse_hold("2m..5s").is_err());
    }

    #[test]
    fn steady_is_deterministic_ordered_and_near_the_rate() {
        let a: Vec<GenEvent> = Generator::new(plan(Shape::Steady)).take(2000).collect();
        let b: Vec<GenEvent> = Generator::new(plan(Shape::Steady)).take(2000).collect();
        assert_eq!(a, b, "same seed, same trace");
        assert!(a.windows(2).all(|w| w[0].at_ms <= w[1].at_ms));
        assert!(a.iter().all(|e| (5..=9).contains(&e.costs[0])));
        // 2000 arrivals at 10/s take about 200 s.
        let span = a[1999].at_ms - a[0].at_ms;
        assert!((180_000..220_000).contains(&span), "{span}");
        let mut p = plan(Shape::Steady);
        p.seed = 4;
        let c: Vec<GenEvent> = Generator::new(p).take(10).collect();
        assert_ne!(a[..10], c[..]);
    }

    #[test]
    fn business_hours_are_busier_on_weekdays_by_day() {
        let mut p = plan(Shape::BusinessHours);
        p.rate_per_s = 1.0;
        let mut in_hours = 0u64;
        let mut off_hours = 0u64;
        let probe = Generator::new(p.clone());
        for e in Generator::new(p.clone()) {
            let f = probe.business_factor((e.at_ms - p.start_ms) as f64);
            if f == 1.0 {
                in_hours += 1;
            } else {
                off_hours += 1;
            }
        }
        // 5 × 8 h at 1/s = 144,000 expected inside; 128 h at 0.1/s = 46,080 outside.
        assert!((140_000..148_000).contains(&in_hours), "{in_hours}");
        assert!((44_000..48_500).contains(&off_hours), "{off_hours}");
    }

    #[test]
    fn bursty_keeps_the_average_rate() {
        let p = plan(Shape::Bursty);
        let n = Generator::new(p.clone()).count() as f64;
        let expected = p.rate_per_s * p.duration_ms as f64 / 1000.0;
        assert!((n / expected - 1.0).abs() < 0.05, "{n} vs {expected}");
    }

    #[test]
    fn holds_are_released_in_time_order() {
        let mut p = plan(Shape::Steady);
        p.duration_ms = 60_000;
        p.hold_ms = Some((1000, 5000));
        let evs: Vec<GenEvent> = Generator::new(p).collect();
        assert!(evs.windows(2).all(|w| w[0].at_ms <= w[1].at_ms));
        let reserves = evs.iter().filter(|e| e.op == Op::Reserve).count();
        let releases = evs.iter().filter(|e| e.op == Op::Release).count();
        assert_eq!(reserves, releases);
        assert!(reserves > 400);
    }

    #[test]
    fn both_formats_read_back() {
        use crate::simulate::trace::{Event, TraceFormat, TraceReader};
        let mut p = plan(Shape::Steady);
        p.duration_ms = 5000;
        p.hold_ms = Some((100, 200));
        for (fmt, tf) in [
            (OutFormat::Csv, TraceFormat::Csv),
            (OutFormat::Jsonl, TraceFormat::Jsonl),
        ] {
            let mut buf = Vec::new();
            let n = write_trace(&mut buf, Generator::new(p.clone()), fmt).unwrap();
            let mut r = TraceReader::new(&buf[..], tf);
            let mut ev = Event::default();
            let mut read = 0;
            let expected: Vec<GenEvent> = Generator::new(p.clone()).collect();
            while r.next_event(&mut ev).unwrap() {
                let g = &expected[read];
                assert_eq!((ev.at_ms, ev.op), (g.at_ms, g.op));
                assert_eq!(ev.hold, format!("h{}", g.hold.unwrap()));
                let costs: Vec<u64> = ev.costs.iter().map(|&(_, c)| c).collect();
                assert_eq!(costs, g.costs);
                read += 1;
            }
            assert_eq!(read as u64, n);
        }
    }
}
