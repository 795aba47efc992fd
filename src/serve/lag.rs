//! Event-loop lag: a task on the async worker asks to be woken every
//! [`PERIOD`] and measures how late it was woken. While it was late nothing
//! else on that worker ran either: no request was read or answered. With the
//! local store's one worker (docs/serve.md#speed), that is every request.
//!
//! Every wake goes into `/metrics` (`zael_event_loop_lag_seconds`). A wake
//! [`LOG_AFTER`] late or more is logged, with the steal time the kernel
//! counted over the same span (`/proc/stat`): time the hypervisor ran
//! something else on this virtual machine's CPUs. That tells an operator
//! whether a latency spike came from the host or from this machine (a
//! blocking call on the worker, too few CPUs for the work).

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::metrics::Metrics;

/// How often the probe asks to be woken. A stall of `s` shows as a lag of at
/// least `s - PERIOD`; 100 wakes a second cost next to nothing.
pub const PERIOD: Duration = Duration::from_millis(10);

/// A lag worth a log line: five times the local store's p99 goal.
pub const LOG_AFTER: Duration = Duration::from_millis(50);

/// At most one log line this often; the lines in between are counted in it.
const LOG_EVERY: Duration = Duration::from_secs(10);

/// The kernel's steal time so far, in its clock ticks (`USER_HZ`, 100 a
/// second on x86-64 and arm64), summed over the CPUs: the 8th number of the
/// `cpu` line of `/proc/stat`. `None` where there is no such file or line
/// (not Linux).
pub fn steal_ticks() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    parse_steal(&stat)
}

fn parse_steal(stat: &str) -> Option<u64> {
    let line = stat.lines().next()?;
    let mut fields = line.split_whitespace();
    (fields.next()? == "cpu").then_some(())?;
    fields.nth(7)?.parse().ok()
}

const TICK: Duration = Duration::from_millis(10);

/// One late wake, as the log tells it.
#[derive(Debug, Clone, PartialEq)]
pub struct Late {
    pub lag: Duration,
    /// Steal time counted while the probe slept (`None`: unknown).
    pub steal: Option<Duration>,
    /// Late wakes not logged since the last line.
    pub unlogged: u64,
}

impl Late {
    pub fn describe(&self) -> String {
        let mut text = format!(
            "the event loop was held up {} ms: nothing on this worker ran, no request was answered",
            self.lag.as_millis()
        );
        match self.steal {
            Some(s) if !s.is_zero() => text.push_str(&format!(
                "; the host took {} ms of this machine's CPU time in that span (steal time): the stall is likely the host's",
                s.as_millis()
            )),
            Some(_) => text.push_str(
                "; the host counted no steal time in that span: look at this machine (CPU contention, a blocking call)",
            ),
            None => {}
        }
        if self.unlogged > 0 {
            text.push_str(&format!(
                " ({} more wakes over {} ms late since the last such line were not logged)",
                self.unlogged,
                LOG_AFTER.as_millis()
            ));
        }
        text
    }
}

/// Wakes every `period` for as long as the runtime runs: records each wake's
/// lag, and hands a [`Late`] to `log` for one over [`LOG_AFTER`] (at most one
/// per [`LOG_EVERY`]). `steal` reads the steal counter ([`steal_ticks`]).
pub async fn watch(
    period: Duration,
    metrics: Arc<Metrics>,
    steal: fn() -> Option<u64>,
    log: impl Fn(Late),
) {
    let mut last_logged: Option<Instant> = None;
    let mut unlogged = 0;
    loop {
        let before = steal();
        let asked = Instant::now();
        tokio::time::sleep(period).await;
        let lag = asked.elapsed().saturating_sub(period);
        metrics.event_loop_lag(lag);
        if lag < LOG_AFTER {
            continue;
        }
        if last_logged.is_some_and(|at| at.elapsed() < LOG_EVERY) {
            unlogged += 1;
            continue;
        }
        let stolen = before
            .zip(steal())
            .map(|(b, a)| TICK * a.saturating_sub(b) as u32);
        log(Late {
            lag,
            steal: stolen,
            unlogged,
        });
        last_logged = Some(Instant::now());
        unlogged = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Mutex;

    #[test]
    fn reads_the_steal_field_of_the_cpu_line() {
        let stat =
            "cpu  2872787 8629 591508 3823446 45874 0 69932 66976 0 0\ncpu0 1 2 3 4 5 6 7 8 9 10\n";
        assert_eq!(parse_steal(stat), Some(66_976));
        assert_eq!(parse_steal("cpu0 1 2 3 4 5 6 7 8\n"), None);
        assert_eq!(parse_steal("cpu 1 2 3\n"), None);
        assert_eq!(parse_steal(""), None);
        #[cfg(target_os = "linux")]
        assert!(steal_ticks().is_some(), "this Linux has a /proc/stat");
    }

    static STEAL: AtomicU64 = AtomicU64::new(0);
    fn fake_steal() -> Option<u64> {
        Some(STEAL.load(Ordering::SeqCst))
    }

    /// A task that blocks the worker holds the probe up as long: the lag is
    /// recorded, logged once with the steal counted meanwhile, and a second
    /// stall within [`LOG_EVERY`] is counted for the next line, not logged.
    #[tokio::test(flavor = "current_thread")]
    async fn a_blocked_worker_is_measured_and_logged_once() {
        let metrics = Arc::new(Metrics::default());
        let logged = Arc::new(Mutex::new(Vec::new()));
        let sink = logged.clone();
        tokio::spawn(watch(PERIOD, metrics.clone(), fake_steal, move |l| {
            sink.lock().unwrap().push(l)
        }));
        // Let the probe go to sleep, then hold the only thread.
        tokio::time::sleep(Duration::from_millis(1)).await;
        STEAL.fetch_add(7, Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(120));
        tokio::time::sleep(PERIOD * 3).await;
        {
            let logged = logged.lock().unwrap();
            assert_eq!(logged.len(), 1, "{logged:?}");
            let late = &logged[0];
            // At least the stall less the period it was asked to sleep.
            assert!(late.lag >= Duration::from_millis(105), "{late:?}");
            assert_eq!(late.steal, Some(Duration::from_millis(70)));
            assert_eq!(late.unlogged, 0);
            assert!(late.describe().contains("the stall is likely the host's"));
        }
        // Wakes on time and the late one (more only on a loaded machine).
        let (wakes, over) = metrics.event_loop_lags(LOG_AFTER);
        assert!(wakes >= 2 && over >= 1, "{wakes} wakes, {over} late");
        // Again, at once: counted, not logged.
        std::thread::sleep(Duration::from_millis(80));
        tokio::time::sleep(PERIOD * 3).await;
        assert_eq!(logged.lock().unwrap().len(), 1);
        assert!(metrics.event_loop_lags(LOG_AFTER).1 > over);
    }

    #[test]
    fn says_where_to_look() {
        let late = |steal| Late {
            lag: Duration::from_millis(44),
            steal,
            unlogged: 3,
        };
        let host = late(Some(Duration::from_millis(40))).describe();
        assert!(
            host.starts_with("the event loop was held up 44 ms"),
            "{host}"
        );
        assert!(host.contains("took 40 ms"), "{host}");
        assert!(host.contains("(3 more wakes over 50 ms late"), "{host}");
        let here = late(Some(Duration::ZERO)).describe();
        assert!(here.contains("look at this machine"), "{here}");
        let unknown = late(None).describe();
        assert!(!unknown.contains("steal"), "{unknown}");
    }
}
