//! How long to wait before a refused request would succeed (docs/semantics.md, "Retry after"),
//! and the fields of the reference's `RateLimitExceeded`.
//!
//! Waits are computed in integer milliseconds and turned into seconds only at
//! the end, with Python's correctly rounded `int / 1000`.

use crate::params::{effective_params, Params};
use crate::schedule::{next_boundary, Schedule};

/// Python's `a // b` (floor division) on `i128`, with `b == 0` giving 0 and
/// overflow saturating: validated limits never divide by zero, and no input may
/// panic.
pub fn floor_div(a: i128, b: i128) -> i128 {
    if b == 0 {
        return 0;
    }
    match a.checked_div(b) {
        Some(q) => {
            if (a % b != 0) && ((a < 0) != (b < 0)) {
                q - 1
            } else {
                q
            }
        }
        None => i128::MAX,
    }
}

/// Milliseconds to seconds as the reference does it: `float(x) / 1000`
/// (the integer is rounded to an f64 first, then divided; the vectors show
/// `(10**36 + 1) ms` as `1.0000000000000001e33` s, not the correctly rounded `1e33`).
pub fn ms_to_seconds(x: i128) -> f64 {
    x as f64 / 1000.0
}

/// `(ms + 1) / 1000`: the reference's wait for an instant `ms` after now.
fn wait_until(delta_ms: i128) -> f64 {
    ms_to_seconds(delta_ms.saturating_add(1))
}

/// `calculate_retry_after(deficit, ra, rp, next_reset_ms, now_ms)`: a drip wait
/// `(deficit·rp // ra + 1)/1000`; with no drip, the wait to the given reset
/// (+1 ms), or 0.0 without one.
pub fn calculate_retry_after(
    deficit_milli: i128,
    refill_amount_milli: i128,
    refill_period_ms: i128,
    next_reset: Option<(i64, i64)>,
) -> f64 {
    if deficit_milli <= 0 {
        return 0.0;
    }
    if refill_amount_milli <= 0 {
        return match next_reset {
            Some((reset_ms, now_ms)) if reset_ms > now_ms => {
                wait_until(i128::from(reset_ms) - i128::from(now_ms))
            }
            _ => 0.0,
        };
    }
    wait_until(floor_div(
        deficit_milli.saturating_mul(refill_period_ms),
        refill_amount_milli,
    ))
}

/// Inputs of [`retry_after_with_schedule`] besides the deficit.
#[derive(Debug, Clone, Copy)]
pub struct RetryInputs<'a> {
    /// The undivided base parameters.
    pub base: Params,
    pub sched: &'a Schedule,
    pub reset_sched: &'a Schedule,
    pub now_ms: i64,
    pub shard_count: i128,
    pub max_windows: u32,
}

/// `retry_after_with_schedule`: walk parameter boundaries, integrating the
/// refill rate in force in each window, until the deficit is covered; a reset
/// edge reached first is the answer (its instant + 1 ms). Seconds.
pub fn retry_after_with_schedule(deficit_milli: i128, inp: &RetryInputs<'_>) -> f64 {
    if deficit_milli <= 0 {
        return 0.0;
    }
    let d = inp.shard_count.max(1);
    let rate = |x: i128| {
        let share = floor_div(x, d);
        if share > 0 {
            share
        } else {
            x
        }
    };
    let now = i128::from(inp.now_ms);
    let mut remaining = deficit_milli;
    let mut cursor = inp.now_ms;
    let mut walked = 0;
    while walked < inp.max_windows {
        walked += 1;
        let eff = effective_params(inp.base, inp.sched, cursor);
        let r = rate(eff.refill_amount_milli);
        let rp_e = eff.refill_period_ms;
        let edge = inp.reset_sched.next_reset_edge(cursor);
        let b = next_boundary(inp.sched, inp.reset_sched, cursor);
        if r <= 0 {
            match (edge, b) {
                (Some(e), b) if b.is_none_or(|b| e <= b) => return wait_until(i128::from(e) - now),
                (_, None) => break,
                (_, Some(b)) => {
                    cursor = b;
                    continue;
                }
            }
        }
        let need = floor_div(remaining.saturating_mul(rp_e), r);
        let cur = i128::from(cursor);
        let end = match b {
            Some(b) => i128::from(b),
            None => cur.saturating_add(need),
        };
        let done_at = cur.saturating_add(need);
        if let Some(e) = edge {
            if i128::from(e) <= end.min(done_at) {
                return wait_until(i128::from(e) - now);
            }
        }
        if done_at <= end {
            return wait_until(done_at - now);
        }
        remaining -= floor_div((end - cur).saturating_mul(r), rp_e);
        cursor = i64::try_from(end).unwrap_or(i64::MAX);
    }
    let fr = rate(inp.base.refill_amount_milli);
    if fr <= 0 {
        return match inp.reset_sched.next_reset_edge(inp.now_ms) {
            Some(e) => wait_until(i128::from(e) - now),
            None => 0.0,
        };
    }
    wait_until(floor_div(
        deficit_milli.saturating_mul(inp.base.refill_period_ms),
        fr,
    ))
}

/// The caller-facing fields of the reference's `RateLimitExceeded`.
#[derive(Debug, Clone, PartialEq)]
pub struct RateLimitExceeded {
    /// The largest wait over the violations (the first on a tie), seconds.
    pub retry_after_seconds: f64,
    /// Index of the violation that set the wait.
    pub primary: usize,
    /// `int(seconds * 1000)`: float truncation (1.001 s gives 1000).
    pub retry_after_ms: i64,
    /// `str(int(seconds) + 1)`: always one more than the whole seconds.
    pub retry_after_header: String,
}

impl RateLimitExceeded {
    /// Summarise the waits of the violated limits (empty gives a zero wait).
    pub fn from_waits(waits: &[f64]) -> RateLimitExceeded {
        let mut primary = 0;
        let mut best = waits.first().copied().unwrap_or(0.0);
        for (i, &w) in waits.iter().enumerate().skip(1) {
            if w > best {
                best = w;
                primary = i;
            }
        }
        RateLimitExceeded {
            retry_after_seconds: best,
            primary,
            retry_after_ms: (best * 1000.0) as i64,
            retry_after_header: ((best as i64).saturating_add(1)).to_string(),
        }
    }

    /// The reference's message: `Rate limit exceeded for E/R: [names]. Retry after 1.0s`.
    pub fn message(&self, entity: &str, resource: &str, names: &[&str]) -> String {
        format!(
            "Rate limit exceeded for {entity}/{resource}: [{}]. Retry after {}s",
            names.join(", "),
            format_1f(self.retry_after_seconds)
        )
    }
}

/// Python's `f"{x:.1f}"`: the exact binary value rounded half to even.
pub fn format_1f(x: f64) -> String {
    format!("{x:.1}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floor_division_matches_python() {
        assert_eq!(floor_div(-1, 1000), -1);
        assert_eq!(floor_div(-1500, 1000), -2);
        assert_eq!(floor_div(7, 2), 3);
        assert_eq!(floor_div(7, -2), -4);
        assert_eq!(floor_div(5, 0), 0);
        assert_eq!(floor_div(i128::MIN, -1), i128::MAX);
    }

    #[test]
    fn seconds_are_correctly_rounded() {
        assert_eq!(ms_to_seconds(1001), 1.001);
        assert_eq!(ms_to_seconds(10i128.pow(36) + 1), 1.0000000000000001e33);
        assert_eq!(ms_to_seconds(-1001), -1.001);
    }

    #[test]
    fn spec_worked_example() {
        // 500 tokens short at 1000/min, halved 10 s from now: 50.001 s
        // (docs/semantics.md, "Retry after").
        let sched = Schedule {
            tz: chrono_tz::UTC,
            entries: vec![crate::schedule::Entry {
                cron: "1-59 * * * *".into(),
                spec: crate::cron::CronSpec::parse("1-59 * * * *").unwrap(),
                modifier: Some(crate::params::Modifier::Scale(crate::params::Scale::Float(
                    0.5,
                ))),
            }],
        };
        let inp = RetryInputs {
            base: Params::new(1_000_000, 1_000_000, 60_000),
            sched: &sched,
            reset_sched: &Schedule::empty(),
            now_ms: 1_700_000_000_000 - 1_700_000_000_000 % 3_600_000 + 50_000,
            shard_count: 1,
            max_windows: 8,
        };
        assert_eq!(retry_after_with_schedule(500_000, &inp), 50.001);
        assert_eq!(
            calculate_retry_after(500_000, 1_000_000, 60_000, None),
            30.001
        );
    }

    #[test]
    fn one_decimal_rounds_half_to_even() {
        assert_eq!(format_1f(0.25), "0.2");
        assert_eq!(format_1f(0.35), "0.3");
        assert_eq!(format_1f(59.999), "60.0");
    }
}
