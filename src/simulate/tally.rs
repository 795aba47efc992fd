//! What a replay counts: requests admitted and refused, per limit how often
//! it refused (and how often it was the only one to), and the longest run of
//! consecutive refusals with when it started and ended. Fixed size whatever
//! the trace length (plus the names of unknown cost columns).

use std::collections::BTreeSet;

/// A run of consecutive refused requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Streak {
    pub requests: u64,
    pub from_ms: i64,
    pub to_ms: i64,
}

impl Streak {
    pub fn span_ms(&self) -> i64 {
        self.to_ms.saturating_sub(self.from_ms)
    }
}

/// The current run and the longest so far (the first of equal length wins).
#[derive(Debug, Clone, Default)]
pub struct StreakTracker {
    current: Option<Streak>,
    longest: Option<Streak>,
}

impl StreakTracker {
    pub fn refused(&mut self, at_ms: i64) {
        let s = self.current.get_or_insert(Streak {
            requests: 0,
            from_ms: at_ms,
            to_ms: at_ms,
        });
        s.requests += 1;
        s.to_ms = at_ms;
        if self.longest.is_none_or(|l| s.requests > l.requests) {
            self.longest = Some(*s);
        }
    }

    pub fn admitted(&mut self) {
        self.current = None;
    }

    pub fn longest(&self) -> Option<Streak> {
        self.longest
    }
}

/// One limit's counts.
#[derive(Debug, Clone, Default)]
pub struct LimitTally {
    /// Requests this limit was asked about.
    pub checked: u64,
    /// Requests it refused.
    pub refused: u64,
    /// Requests it refused while every other limit admitted them: it alone
    /// decided.
    pub refused_alone: u64,
    /// Requests that did not fit but were admitted because the limit is soft
    /// or its level bypassed.
    pub over_but_admitted: u64,
    pub first_refusal_ms: Option<i64>,
    pub last_refusal_ms: Option<i64>,
    pub streak: StreakTracker,
    /// The least available to any request (whole tokens, room or slots).
    pub lowest_available: Option<i128>,
}

/// Everything a replay counts.
#[derive(Debug, Clone, Default)]
pub struct Tally {
    /// Consume and reserve lines.
    pub requests: u64,
    pub admitted: u64,
    pub refused: u64,
    pub streak: StreakTracker,
    pub limits: Vec<LimitTally>,
    /// Release, commit and extend lines.
    pub hold_ops: u64,
    /// Hold operations on a hold whose reservation was refused (expected:
    /// a trace recorded without the limits releases what it reserved).
    pub hold_ops_for_refused: u64,
    /// Hold operations on a hold that was not open: it expired, was already
    /// closed, or was never reserved.
    pub hold_ops_not_open: u64,
    /// Lines whose timestamp was before an earlier line's; evaluated at the
    /// latest time seen (the virtual clock never goes back).
    pub out_of_order: u64,
    pub first_ms: Option<i64>,
    pub last_ms: Option<i64>,
    /// Cost columns that name no applicable limit (ignored).
    pub unknown_costs: BTreeSet<String>,
}

impl Tally {
    pub fn new(limits: usize) -> Tally {
        Tally {
            limits: vec![LimitTally::default(); limits],
            ..Tally::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_longest_run_wins_and_the_first_of_equals() {
        let mut t = StreakTracker::default();
        t.refused(1);
        t.refused(2);
        t.admitted();
        t.refused(10);
        t.refused(11);
        t.admitted();
        assert_eq!(
            t.longest(),
            Some(Streak {
                requests: 2,
                from_ms: 1,
                to_ms: 2
            })
        );
        t.refused(20);
        t.refused(25);
        t.refused(40);
        let l = t.longest().unwrap();
        assert_eq!((l.requests, l.from_ms, l.span_ms()), (3, 20, 20));
    }
}
