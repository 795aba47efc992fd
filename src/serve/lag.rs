//! Event-loop lag: a task on the async runtime asks to be woken every
//! [`PERIOD`] and measures how late it was woken. While it was late nothing
//! else on its worker thread ran either: no request there was read or
//! answered. With the local store's one worker (docs/serve.md#speed), that is
//! every request; with several, the others may have gone on.
//!
//! Every wake goes into `/metrics` (`zael_event_loop_lag_seconds`). A wake
//! [`LOG_AFTER`] late or more is logged with what the kernel counted over the
//! same span, which says where to look:
//! * the worker thread's own times (`/proc/thread-self/schedstat`): on a CPU
//!   (code that did not yield, or a host that held the CPU without counting
//!   it as steal), waiting for a CPU (too little CPU for the work), or
//!   neither (blocked: a lock, I/O, a sleep);
//! * the machine's steal time (`/proc/stat`, read at most once a
//!   [`STEAL_EVERY`]: the file grows with the CPUs): time the hypervisor ran
//!   something else on this virtual machine's CPUs.

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

/// The steal time is sampled at most this often (a late wake reads it once
/// more, and says over how long it counted).
pub const STEAL_EVERY: Duration = Duration::from_secs(1);

/// What the probe watches and how.
#[derive(Clone, Copy)]
pub struct Probe {
    pub period: Duration,
    /// A wake this late is logged.
    pub log_after: Duration,
    pub counters: Counters,
    /// The runtime's worker threads (the log line says what one held up
    /// worker means).
    pub workers: usize,
}

impl Probe {
    /// The server's: [`PERIOD`], [`LOG_AFTER`], the kernel's counters.
    pub fn kernel(workers: usize) -> Probe {
        Probe {
            period: PERIOD,
            log_after: LOG_AFTER,
            counters: KERNEL,
            workers,
        }
    }
}

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

/// The calling thread's time on a CPU and waiting for one, so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ThreadTimes {
    pub thread: std::thread::ThreadId,
    pub on_cpu: Duration,
    pub waiting: Duration,
}

/// [`ThreadTimes`] from `/proc/thread-self/schedstat` (nanoseconds on a
/// CPU, nanoseconds waiting for one, timeslices); `None` where there is no
/// such file (not Linux). A kernel that keeps no scheduler statistics shows
/// zeros (as does a new thread before it first left a CPU): see [`watch`].
pub fn thread_times() -> Option<ThreadTimes> {
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let mut fields = stat.split_whitespace().map(|f| f.parse::<u64>().ok());
    Some(ThreadTimes {
        thread: std::thread::current().id(),
        on_cpu: Duration::from_nanos(fields.next()??),
        waiting: Duration::from_nanos(fields.next()??),
    })
}

/// Where the probe reads what the kernel counted ([`steal_ticks`] and
/// [`thread_times`]; a test passes its own).
#[derive(Clone, Copy)]
pub struct Counters {
    pub steal: fn() -> Option<u64>,
    pub thread: fn() -> Option<ThreadTimes>,
}

/// The kernel's.
pub const KERNEL: Counters = Counters {
    steal: steal_ticks,
    thread: thread_times,
};

/// How the worker thread spent a late span.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Spent {
    pub on_cpu: Duration,
    pub waiting: Duration,
}

/// One late wake, as the log tells it.
#[derive(Debug, Clone, PartialEq)]
pub struct Late {
    pub lag: Duration,
    /// From the probe's asking to its wake: the period and the lag.
    pub span: Duration,
    /// The worker thread's times while the probe slept (`None`: unknown, or
    /// it woke on another thread).
    pub spent: Option<Spent>,
    /// Steal time counted over a span that holds the late one (`None`:
    /// unknown).
    pub steal: Option<Steal>,
    /// Late wakes not logged since the last line.
    pub unlogged: u64,
    /// Over how late a wake is logged.
    pub log_after: Duration,
    /// The runtime's worker threads.
    pub workers: usize,
}

/// Steal time the kernel counted (`stolen`) over the last `over`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Steal {
    pub over: Duration,
    pub stolen: Duration,
}

impl Late {
    pub fn describe(&self) -> String {
        let ms = |d: Duration| d.as_millis();
        let mut text = if self.workers == 1 {
            format!(
                "the event loop was held up {} ms: nothing on its one worker ran, no request was answered",
                ms(self.lag)
            )
        } else {
            format!(
                "a worker of the event loop was held up {} ms: nothing else on it ran (one of {} workers: the others could go on answering)",
                ms(self.lag),
                self.workers
            )
        };
        if let Some(s) = self.spent {
            let blocked = self.span.saturating_sub(s.on_cpu + s.waiting);
            text.push_str(&format!(
                "; in those {} ms its thread was on a CPU {} ms (code that did not yield, or a host that held the CPU without counting steal), waited for a CPU {} ms (too little CPU for the work), and neither for {} ms (blocked: a lock, I/O, a sleep)",
                ms(self.span),
                ms(s.on_cpu),
                ms(s.waiting),
                ms(blocked)
            ));
        }
        if let Some(s) = self.steal {
            text.push_str(&format!(
                "; in the last {} ms the host took {} ms of this machine's CPU time (steal time)",
                ms(s.over),
                ms(s.stolen)
            ));
        }
        if self.unlogged > 0 {
            text.push_str(&format!(
                " ({} more wakes over {} ms late since the last such line were not logged)",
                self.unlogged,
                ms(self.log_after)
            ));
        }
        text
    }
}

/// Wakes every `period` for as long as the runtime runs: records each wake's
/// lag, and hands a [`Late`] to `log` for one over `log_after` (at most one
/// per [`LOG_EVERY`]), with what the counters counted meanwhile.
pub async fn watch(probe: Probe, metrics: Arc<Metrics>, log: impl Fn(Late)) {
    let Probe {
        period,
        log_after,
        counters,
        workers,
    } = probe;
    let mut last_logged: Option<Instant> = None;
    let mut unlogged = 0;
    let mut steal: Option<(Instant, u64)> = None;
    loop {
        if steal.is_none_or(|(at, _)| at.elapsed() >= STEAL_EVERY) {
            steal = (counters.steal)().map(|ticks| (Instant::now(), ticks));
        }
        let thread = (counters.thread)();
        let asked = Instant::now();
        tokio::time::sleep(period).await;
        let span = asked.elapsed();
        let lag = span.saturating_sub(period);
        metrics.event_loop_lag(lag);
        if lag < log_after {
            continue;
        }
        if last_logged.is_some_and(|at| at.elapsed() < LOG_EVERY) {
            unlogged += 1;
            continue;
        }
        let stolen = steal.zip((counters.steal)()).map(|((at, b), a)| Steal {
            over: at.elapsed(),
            stolen: TICK * u32::try_from(a.saturating_sub(b)).unwrap_or(u32::MAX),
        });
        let spent = thread
            .zip((counters.thread)())
            // The same thread, and one the kernel counts: after a sleep it
            // has left a CPU at least once, so a zero means no statistics.
            .filter(|(b, a)| b.thread == a.thread && !a.on_cpu.is_zero())
            .map(|(b, a)| Spent {
                on_cpu: a.on_cpu.saturating_sub(b.on_cpu),
                waiting: a.waiting.saturating_sub(b.waiting),
            });
        log(Late {
            lag,
            span,
            spent,
            steal: stolen,
            unlogged,
            log_after,
            workers,
        });
        last_logged = Some(Instant::now());
        unlogged = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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

    thread_local! {
        // Per test: each runs its probe on its own thread.
        static STEAL: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    }
    fn fake_steal() -> Option<u64> {
        Some(STEAL.get())
    }

    /// How long each test holds the probe's thread up.
    const STALL: Duration = Duration::from_millis(120);

    /// Holds the thread up off a CPU, as a blocking call would.
    fn block() {
        std::thread::sleep(STALL);
    }

    /// Runs the probe on this thread's runtime, holds the thread up with
    /// `stall` twice, and returns what was logged and the lags recorded.
    async fn stalled(stall: fn(), thread: fn() -> Option<ThreadTimes>) -> (Vec<Late>, (u64, u64)) {
        let metrics = Arc::new(Metrics::default());
        let logged = Arc::new(Mutex::new(Vec::new()));
        let sink = logged.clone();
        let probe = Probe {
            counters: Counters {
                steal: fake_steal,
                thread,
            },
            // Well under the stall, well over a test thread held up by a
            // loaded machine.
            log_after: Duration::from_millis(100),
            ..Probe::kernel(1)
        };
        let probe = tokio::spawn(watch(probe, metrics.clone(), move |l| {
            sink.lock().unwrap().push(l)
        }));
        // Let the probe go to sleep, then hold the only thread.
        tokio::time::sleep(Duration::from_millis(1)).await;
        STEAL.set(STEAL.get() + 7);
        stall();
        tokio::time::sleep(PERIOD * 3).await;
        let (wakes, late) = metrics.event_loop_lags(LOG_AFTER);
        // Wakes on time and the late one (more only on a loaded machine).
        assert!(wakes >= 2 && late >= 1, "{wakes} wakes, {late} late");
        // Again, at once: counted, not logged.
        stall();
        tokio::time::sleep(PERIOD * 3).await;
        assert!(metrics.event_loop_lags(LOG_AFTER).1 > late);
        probe.abort();
        let logged = logged.lock().unwrap().clone();
        (logged, metrics.event_loop_lags(LOG_AFTER))
    }

    /// A worker blocked in a sleep holds the probe up as long: the lag is
    /// recorded and logged once, with the steal counted meanwhile and the
    /// thread off a CPU; the second stall within [`LOG_EVERY`] is counted
    /// for the next line, not logged.
    #[tokio::test(flavor = "current_thread")]
    async fn a_blocked_worker_is_measured_and_logged_once() {
        let (logged, _) = stalled(block, thread_times).await;
        assert_eq!(logged.len(), 1, "{logged:?}");
        let late = &logged[0];
        // At least the stall less the period it was asked to sleep.
        assert!(late.lag >= Duration::from_millis(105), "{late:?}");
        assert_eq!(late.span, late.lag + PERIOD);
        let steal = late.steal.expect("the fake steal");
        assert_eq!(steal.stolen, Duration::from_millis(70));
        assert!(steal.over >= late.span, "{late:?}");
        assert_eq!(late.unlogged, 0);
        let text = late.describe();
        assert!(text.contains("the host took 70 ms"), "{text}");
        #[cfg(target_os = "linux")]
        {
            let spent = late.spent.expect("this thread's times");
            assert!(spent.on_cpu < Duration::from_millis(60), "{late:?}");
        }
    }

    /// A worker that runs without yielding is on a CPU (or waiting for one)
    /// for the whole stall.
    #[tokio::test(flavor = "current_thread")]
    async fn a_busy_worker_is_seen_on_a_cpu() {
        let spin = || {
            let started = Instant::now();
            while started.elapsed() < STALL {
                std::hint::spin_loop();
            }
        };
        let (logged, _) = stalled(spin, thread_times).await;
        let late = &logged[0];
        #[cfg(target_os = "linux")]
        {
            let spent = late.spent.expect("this thread's times");
            assert!(
                spent.on_cpu + spent.waiting >= Duration::from_millis(100),
                "{late:?}"
            );
        }
    }

    fn no_statistics() -> Option<ThreadTimes> {
        Some(ThreadTimes {
            thread: std::thread::current().id(),
            on_cpu: Duration::ZERO,
            waiting: Duration::ZERO,
        })
    }

    /// A kernel that keeps no scheduler statistics (zeros): the line says
    /// nothing of the thread rather than "blocked all along".
    #[tokio::test(flavor = "current_thread")]
    async fn zero_thread_times_are_unknown() {
        let (logged, _) = stalled(block, no_statistics).await;
        assert_eq!(logged[0].spent, None, "{logged:?}");
        assert!(!logged[0].describe().contains("thread"));
    }

    #[test]
    fn says_where_to_look() {
        let late = |spent, steal| Late {
            lag: Duration::from_millis(44),
            span: Duration::from_millis(54),
            spent,
            steal,
            unlogged: 3,
            log_after: LOG_AFTER,
            workers: 1,
        };
        let spent = Spent {
            on_cpu: Duration::from_millis(40),
            waiting: Duration::from_millis(4),
        };
        let steal = Steal {
            over: Duration::from_millis(810),
            stolen: Duration::from_millis(30),
        };
        let text = late(Some(spent), Some(steal)).describe();
        assert!(
            text.starts_with("the event loop was held up 44 ms: nothing on its one worker ran"),
            "{text}"
        );
        assert!(
            text.contains("in those 54 ms its thread was on a CPU 40 ms"),
            "{text}"
        );
        assert!(text.contains("waited for a CPU 4 ms"), "{text}");
        assert!(text.contains("neither for 10 ms"), "{text}");
        assert!(
            text.contains("in the last 810 ms the host took 30 ms"),
            "{text}"
        );
        assert!(text.contains("(3 more wakes over 50 ms late"), "{text}");
        let several = Late {
            workers: 4,
            ..late(None, None)
        };
        assert!(
            several
                .describe()
                .starts_with("a worker of the event loop was held up 44 ms: nothing else on it ran (one of 4 workers"),
            "{}",
            several.describe()
        );
        let unknown = late(None, None).describe();
        assert!(
            !unknown.contains("steal") && !unknown.contains("thread"),
            "{unknown}"
        );
    }
}
