//! The replay: each trace event against every applicable limit, all or
//! nothing, on a virtual clock that never goes back.
//!
//! As the reference's acquire does, a request is admitted only when every
//! limit admits it, and then every limit records it; when any refuses,
//! none does. A consume checks a concurrent limit's free slots but takes
//! none; a reserve takes one slot of every concurrent limit as its hold;
//! release and commit give it back; extend is a heartbeat. With the level
//! `disabled: true` every request is admitted and nothing is counted.

use std::collections::HashSet;

use zae_limiter_engine::concurrency::ConcurrencyError;

use super::counters::{Counter, HoldOutcome, Verdict};
use super::series::Series;
use super::tally::Tally;
use super::trace::{Event, Op};

/// A trace line the replay cannot carry out.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct ReplayError {
    pub line: u64,
    pub message: String,
}

/// Refused reservations remembered at most, whatever the trace.
pub const REFUSED_HOLDS_TRACKED: usize = 1 << 16;

/// The replay's state: the limits, the clock and what was counted.
pub struct Replay {
    counters: Vec<Counter>,
    has_holds: bool,
    disabled: bool,
    clock: Option<i64>,
    /// Trace cost-name id → counter index (`None`: no such limit).
    by_name: Vec<Option<usize>>,
    costs: Vec<u64>,
    verdicts: Vec<Verdict>,
    /// Holds whose reservation was refused and not yet released, so that
    /// their release is not reported as a mistake (bounded: a trace that
    /// never releases them cannot grow it past [`REFUSED_HOLDS_TRACKED`]).
    refused_holds: HashSet<String>,
    pub tally: Tally,
    pub series: Series,
}

impl Replay {
    /// `disabled`: the level is `disabled: true` (admit everything, count nothing).
    pub fn new(counters: Vec<Counter>, disabled: bool, chart_buckets: usize) -> Replay {
        let n = counters.len();
        Replay {
            has_holds: counters.iter().any(Counter::is_concurrency),
            counters,
            disabled,
            clock: None,
            by_name: Vec::new(),
            costs: vec![0; n],
            verdicts: Vec::with_capacity(n),
            refused_holds: HashSet::new(),
            tally: Tally::new(n),
            series: Series::new(n, chart_buckets),
        }
    }

    pub fn counters(&self) -> &[Counter] {
        &self.counters
    }

    /// Learn the counter of each cost name the trace has introduced so far.
    fn map_names(&mut self, names: &[String]) {
        for name in &names[self.by_name.len()..] {
            let idx = self.counters.iter().position(|c| &c.name == name);
            if idx.is_none() {
                self.tally.unknown_costs.insert(name.clone());
            }
            self.by_name.push(idx);
        }
    }

    /// Carry out one event. `names` are the trace's cost names by id.
    pub fn step(&mut self, ev: &Event, names: &[String]) -> Result<(), ReplayError> {
        let fail = |message: String| ReplayError {
            line: ev.line,
            message,
        };
        let now = match self.clock {
            Some(c) if ev.at_ms < c => {
                self.tally.out_of_order += 1;
                c
            }
            _ => ev.at_ms,
        };
        self.clock = Some(now);
        self.tally.first_ms.get_or_insert(now);
        self.tally.last_ms = Some(now);
        if names.len() > self.by_name.len() {
            self.map_names(names);
        }
        let needs_hold = matches!(ev.op, Op::Reserve | Op::Release | Op::Commit | Op::Extend);
        if needs_hold && ev.hold.is_empty() {
            return Err(fail(format!(
                "a {} needs a hold id (the `hold` column or field)",
                ev.op.as_str()
            )));
        }
        if !ev.op.is_request() && !ev.costs.is_empty() {
            return Err(fail(format!(
                "a {} takes no costs: costs are counted by the consume or reserve line",
                ev.op.as_str()
            )));
        }
        match ev.op {
            Op::Consume | Op::Reserve => self.request(ev, now).map_err(|e| fail(e.to_string())),
            Op::Release | Op::Commit | Op::Extend if self.refused_holds.contains(&ev.hold) => {
                self.tally.hold_ops += 1;
                self.tally.hold_ops_for_refused += 1;
                if ev.op != Op::Extend {
                    self.refused_holds.remove(&ev.hold);
                }
                Ok(())
            }
            Op::Release | Op::Commit => {
                self.tally.hold_ops += 1;
                let mut not_open = false;
                for c in self.counters.iter_mut().filter(|c| c.is_concurrency()) {
                    not_open |= c.close_hold(&ev.hold, now) == HoldOutcome::NotOpen;
                }
                self.tally.hold_ops_not_open += u64::from(not_open && self.has_holds);
                Ok(())
            }
            Op::Extend => {
                self.tally.hold_ops += 1;
                let mut not_open = false;
                for c in self.counters.iter_mut().filter(|c| c.is_concurrency()) {
                    let r = c
                        .extend_hold(&ev.hold, ev.ttl_seconds, now)
                        .map_err(|e| fail(e.to_string()))?;
                    not_open |= r == HoldOutcome::NotOpen;
                }
                self.tally.hold_ops_not_open += u64::from(not_open && self.has_holds);
                Ok(())
            }
        }
    }

    fn request(&mut self, ev: &Event, now: i64) -> Result<(), ConcurrencyError> {
        let t = &mut self.tally;
        t.requests += 1;
        if self.disabled {
            t.admitted += 1;
            t.streak.admitted();
            self.series.record(now, true, std::iter::empty());
            return Ok(());
        }
        self.costs.fill(0);
        for &(id, cost) in &ev.costs {
            if let Some(Some(i)) = self.by_name.get(id) {
                self.costs[*i] = self.costs[*i].saturating_add(cost);
            }
        }
        self.verdicts.clear();
        for (c, &cost) in self.counters.iter_mut().zip(&self.costs) {
            self.verdicts.push(c.check(cost, now));
        }
        let refusing = self.verdicts.iter().filter(|v| v.refuses).count();
        let admitted = refusing == 0;
        let reserve = (ev.op == Op::Reserve).then_some((ev.hold.as_str(), ev.ttl_seconds));
        let mut result = Ok(());
        for (c, &cost) in self.counters.iter_mut().zip(&self.costs) {
            if admitted {
                if let Err(e) = c.commit(cost, now, reserve) {
                    result = Err(e);
                }
            } else {
                c.rollback();
            }
        }
        if ev.op == Op::Reserve && self.has_holds {
            if admitted {
                self.refused_holds.remove(&ev.hold);
            } else if self.refused_holds.len() < REFUSED_HOLDS_TRACKED {
                self.refused_holds.insert(ev.hold.clone());
            }
        }
        let t = &mut self.tally;
        if admitted {
            t.admitted += 1;
            t.streak.admitted();
        } else {
            t.refused += 1;
            t.streak.refused(now);
        }
        for (lt, v) in t.limits.iter_mut().zip(&self.verdicts) {
            lt.checked += 1;
            lt.lowest_available = Some(
                lt.lowest_available
                    .map_or(v.available, |l| l.min(v.available)),
            );
            if v.refuses {
                lt.refused += 1;
                lt.refused_alone += u64::from(refusing == 1);
                lt.first_refusal_ms.get_or_insert(now);
                lt.last_refusal_ms = Some(now);
                lt.streak.refused(now);
            } else {
                lt.streak.admitted();
                lt.over_but_admitted += u64::from(!v.fits);
            }
        }
        self.series.record(
            now,
            admitted,
            self.verdicts
                .iter()
                .map(|v| (v.capacity, v.available, v.refuses)),
        );
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::model::{LimitKind, LimitSpec};

    fn bucket(capacity: u64, refill: u64, period: u64) -> LimitSpec {
        LimitSpec::bucket(capacity, refill, period)
    }

    fn slots(n: u64, ttl: u64) -> LimitSpec {
        LimitSpec {
            kind: LimitKind::Concurrency {
                hold_ttl_seconds: ttl,
            },
            ..bucket(n, 0, 1)
        }
    }

    fn replay(limits: &[(&str, LimitSpec)]) -> Replay {
        let counters = limits
            .iter()
            .map(|(n, s)| Counter::build(n, s, false).unwrap())
            .collect();
        Replay::new(counters, false, 100)
    }

    fn names() -> Vec<String> {
        vec!["rpm".into(), "tpm".into(), "other".into()]
    }

    fn ev(line: u64, at_ms: i64, op: Op, hold: &str, costs: &[(usize, u64)]) -> Event {
        Event {
            line,
            at_ms,
            op,
            hold: hold.into(),
            ttl_seconds: None,
            costs: costs.to_vec(),
        }
    }

    #[test]
    fn all_or_nothing() {
        // rpm allows 3 requests a minute, tpm 1000 tokens a minute.
        let mut r = replay(&[("rpm", bucket(3, 3, 60)), ("tpm", bucket(1000, 1000, 60))]);
        let n = names();
        r.step(&ev(1, 0, Op::Consume, "", &[(0, 1), (1, 900)]), &n)
            .unwrap();
        // tpm refuses; rpm must not count the refused request.
        r.step(&ev(2, 1, Op::Consume, "", &[(0, 1), (1, 900)]), &n)
            .unwrap();
        r.step(&ev(3, 2, Op::Consume, "", &[(0, 1), (1, 50)]), &n)
            .unwrap();
        r.step(&ev(4, 3, Op::Consume, "", &[(0, 1), (1, 50)]), &n)
            .unwrap();
        r.step(&ev(5, 4, Op::Consume, "", &[(0, 1), (2, 7)]), &n)
            .unwrap();
        let t = &r.tally;
        assert_eq!((t.requests, t.admitted, t.refused), (5, 3, 2));
        assert_eq!((t.limits[0].refused, t.limits[0].refused_alone), (1, 1));
        assert_eq!((t.limits[1].refused, t.limits[1].refused_alone), (1, 1));
        assert_eq!(t.limits[0].first_refusal_ms, Some(4));
        assert_eq!(t.limits[1].first_refusal_ms, Some(1));
        assert_eq!(t.unknown_costs.iter().collect::<Vec<_>>(), ["other"]);
        let s = t.streak.longest().unwrap();
        assert_eq!((s.requests, s.from_ms, s.to_ms), (1, 1, 1));
    }

    #[test]
    fn holds_take_slots_and_consumes_only_look() {
        let mut r = replay(&[("rpm", bucket(100, 100, 60)), ("jobs", slots(2, 60))]);
        let n = names();
        r.step(&ev(1, 0, Op::Reserve, "a", &[(0, 1)]), &n).unwrap();
        r.step(&ev(2, 1, Op::Reserve, "b", &[(0, 1)]), &n).unwrap();
        // Full: a consume is refused (no free slot) and takes nothing.
        r.step(&ev(3, 2, Op::Consume, "", &[(0, 1)]), &n).unwrap();
        r.step(&ev(4, 3, Op::Reserve, "c", &[(0, 1)]), &n).unwrap();
        r.step(&ev(5, 4, Op::Release, "a", &[]), &n).unwrap();
        r.step(&ev(6, 5, Op::Reserve, "c", &[(0, 1)]), &n).unwrap();
        // "b" is extended, then lives past its first TTL; "c" expires.
        r.step(&ev(7, 30_000, Op::Extend, "b", &[]), &n).unwrap();
        r.step(&ev(8, 70_000, Op::Release, "c", &[]), &n).unwrap();
        r.step(&ev(9, 80_000, Op::Commit, "b", &[]), &n).unwrap();
        let t = &r.tally;
        assert_eq!((t.requests, t.admitted, t.refused), (5, 3, 2));
        assert_eq!(t.limits[1].refused, 2);
        assert_eq!((t.hold_ops, t.hold_ops_not_open), (4, 1));
        assert_eq!(
            t.hold_ops_for_refused, 0,
            "\"c\" was reserved again after its refusal"
        );
        assert_eq!(r.counters()[1].peak_holds(), Some(2));
        // A hold id still open cannot be reserved twice.
        r.step(&ev(10, 90_000, Op::Reserve, "d", &[]), &n).unwrap();
        let e = r
            .step(&ev(11, 90_001, Op::Reserve, "d", &[]), &n)
            .unwrap_err();
        assert_eq!(e.line, 11);
        assert!(e.message.contains("already open"), "{e}");
        let e = r
            .step(&ev(12, 90_002, Op::Release, "", &[]), &n)
            .unwrap_err();
        assert!(e.message.contains("needs a hold id"), "{e}");
    }

    #[test]
    fn the_clock_never_goes_back_and_disabled_admits_all() {
        let mut r = replay(&[("rpm", bucket(1, 1, 60))]);
        let n = names();
        r.step(&ev(1, 60_000, Op::Consume, "", &[(0, 1)]), &n)
            .unwrap();
        // Stamped a minute earlier: evaluated at 60 s, so refused.
        r.step(&ev(2, 0, Op::Consume, "", &[(0, 1)]), &n).unwrap();
        assert_eq!((r.tally.refused, r.tally.out_of_order), (1, 1));
        assert_eq!(r.tally.last_ms, Some(60_000));

        let c = vec![Counter::build("rpm", &bucket(1, 1, 60), false).unwrap()];
        let mut d = Replay::new(c, true, 10);
        for i in 0..5 {
            d.step(&ev(i, 0, Op::Consume, "", &[(0, 1)]), &n).unwrap();
        }
        assert_eq!((d.tally.admitted, d.tally.limits[0].checked), (5, 0));
    }

    proptest::proptest! {
        /// Any sequence of events: no panic, every request is admitted or
        /// refused, no limit refuses more than it checked, and holds never
        /// exceed the slots.
        #[test]
        fn any_trace_keeps_the_books(
            events in proptest::collection::vec((0i64..200_000, 0u8..5, 0u8..4, 0u64..4), 0..200)
        ) {
            let mut rolling = bucket(5, 0, 1);
            rolling.kind = LimitKind::Rolling { window: zae_limiter_engine::rolling::RollingWindow::Minute };
            let mut r = replay(&[("rpm", bucket(3, 3, 60)), ("tpm", rolling), ("jobs", slots(2, 5))]);
            let n = names();
            for (i, (at, op, hold, cost)) in events.into_iter().enumerate() {
                let op = [Op::Consume, Op::Reserve, Op::Release, Op::Commit, Op::Extend][op as usize];
                let costs: Vec<(usize, u64)> = if op.is_request() { vec![(0, cost), (1, cost)] } else { vec![] };
                // Only a duplicate reservation of an open hold may fail.
                if let Err(e) = r.step(&ev(i as u64 + 1, at, op, &format!("h{hold}"), &costs), &n) {
                    proptest::prop_assert!(e.message.contains("already open"), "{e}");
                }
            }
            let t = &r.tally;
            proptest::prop_assert_eq!(t.admitted + t.refused, t.requests);
            for lt in &t.limits {
                proptest::prop_assert!(lt.refused <= lt.checked && lt.refused_alone <= lt.refused);
            }
            proptest::prop_assert!(r.counters()[2].peak_holds().unwrap_or(0) <= 2);
        }
    }
}
