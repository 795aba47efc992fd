//! Busy polling: after an answer, when requests have been coming close
//! together, the worker keeps looking for the next one for a moment instead
//! of going to sleep. On a virtual machine, waking a sleeping CPU for the next
//! request costs tens of microseconds, as much as a local-store decision
//! itself: one client's check round trip went from ~200 to ~140 µs on the
//! 2-core benchmark machine (docs/serve.md#speed).
//!
//! Adaptive, like the kernel's halt-polling: a request that arrived more than
//! the window after the previous answer starts no polling, so a server that is
//! asked now and then never spins; one that is asked back to back polls only
//! in the gaps its CPU would have slept through. The time spent polling with
//! nothing else to do is counted in `/metrics` (`zael_busy_poll_seconds_total`).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::metrics::Metrics;

/// Two polls of the sockets this close together had nothing run between
/// them: the time is polling's own (a yield and a look at the sockets take
/// a few microseconds; a request, a hundred).
const IDLE_GAP_NS: u64 = 20_000;

pub struct BusyPoll {
    window_ns: u64,
    /// The clock's origin: times below are nanoseconds since.
    origin: Instant,
    /// When the last answer was sent (0: none yet).
    last_answer_ns: AtomicU64,
    /// Polling goes on until then.
    until_ns: AtomicU64,
    polling: AtomicBool,
    metrics: Arc<Metrics>,
}

impl BusyPoll {
    /// `window` zero: never polls.
    pub fn new(window: Duration, metrics: Arc<Metrics>) -> Arc<BusyPoll> {
        Arc::new(BusyPoll {
            window_ns: u64::try_from(window.as_nanos()).unwrap_or(u64::MAX),
            origin: Instant::now(),
            last_answer_ns: AtomicU64::new(0),
            until_ns: AtomicU64::new(0),
            polling: AtomicBool::new(false),
            metrics,
        })
    }

    fn now_ns(&self) -> u64 {
        // Never 0, which means "no answer yet".
        u64::try_from(self.origin.elapsed().as_nanos()).unwrap_or(u64::MAX) | 1
    }

    /// A request arrived: whether it came within the window of the last
    /// answer (so polling after its answer is likely to catch the next one).
    pub fn arrived(&self) -> bool {
        let last = self.last_answer_ns.load(Ordering::Relaxed);
        self.window_ns > 0 && last != 0 && self.now_ns().saturating_sub(last) <= self.window_ns
    }

    /// A request was answered; `close` is what [`BusyPoll::arrived`] said
    /// of it. Must run on the async runtime (it may spawn the poller).
    pub fn answered(self: &Arc<Self>, close: bool) {
        let now = self.now_ns();
        self.last_answer_ns.store(now, Ordering::Relaxed);
        if !close {
            return;
        }
        // SeqCst here and in `poll`: a poller that is stopping sees this
        // deadline, or this answer sees that it stopped and starts another.
        self.until_ns
            .store(now.saturating_add(self.window_ns), Ordering::SeqCst);
        if self.polling.swap(true, Ordering::SeqCst) {
            return; // the poller running sees the new deadline
        }
        let me = self.clone();
        tokio::spawn(async move { me.poll().await });
    }

    /// Yields to the runtime until the deadline passes: each yield lets the
    /// worker check its sockets (without sleeping) and run what is ready.
    /// Counts the time between two yields that nothing else used.
    async fn poll(&self) {
        let mut last = self.now_ns();
        loop {
            if self.now_ns() >= self.until_ns.load(Ordering::SeqCst) {
                self.polling.store(false, Ordering::SeqCst);
                // An answer between the check and the store saw `polling`
                // still set and only moved the deadline: go on for it.
                let extended = self.now_ns() < self.until_ns.load(Ordering::SeqCst);
                if !extended || self.polling.swap(true, Ordering::SeqCst) {
                    break;
                }
            }
            tokio::task::yield_now().await;
            let now = self.now_ns();
            let gap = now.saturating_sub(last);
            if gap < IDLE_GAP_NS {
                self.metrics.busy_poll(Duration::from_nanos(gap));
            }
            last = now;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "current_thread")]
    async fn polls_only_after_requests_that_came_close_together() {
        let metrics = Arc::new(Metrics::default());
        let bp = BusyPoll::new(Duration::from_millis(5), metrics.clone());
        // The first request has no answer before it: not close.
        assert!(!bp.arrived());
        bp.answered(false);
        assert!(!bp.polling.load(Ordering::SeqCst));
        // The next one, right after: close, so its answer starts polling.
        assert!(bp.arrived());
        bp.answered(true);
        assert!(bp.polling.load(Ordering::SeqCst));
        // The poller runs for the window, then stops and counts its time.
        tokio::time::sleep(Duration::from_millis(1)).await;
        let started = Instant::now();
        while bp.polling.load(Ordering::SeqCst) {
            assert!(started.elapsed() < Duration::from_secs(5), "never stopped");
            tokio::task::yield_now().await;
        }
        // With nothing else to run, most of the window is polling's own.
        let polled = metrics.busy_poll_time();
        assert!(polled >= Duration::from_millis(2), "{polled:?}");
        // A request long after the last answer is not close.
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert!(!bp.arrived());
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_zero_window_never_polls() {
        let metrics = Arc::new(Metrics::default());
        let bp = BusyPoll::new(Duration::ZERO, metrics.clone());
        bp.answered(false);
        // Even an answer said to be close polls for no time at all.
        assert!(!bp.arrived());
        bp.answered(true);
        for _ in 0..100 {
            tokio::task::yield_now().await;
        }
        assert!(!bp.polling.load(Ordering::SeqCst));
        assert_eq!(metrics.busy_poll_time(), Duration::ZERO);
    }

    /// An answer while the poller runs moves its deadline: the one poller
    /// goes on for it instead of a second one starting.
    #[tokio::test(flavor = "current_thread")]
    async fn an_answer_while_polling_extends_the_poll() {
        let metrics = Arc::new(Metrics::default());
        let bp = BusyPoll::new(Duration::from_millis(20), metrics.clone());
        bp.answered(true);
        let started = Instant::now();
        tokio::time::sleep(Duration::from_millis(1)).await;
        bp.answered(true);
        while bp.polling.load(Ordering::SeqCst) {
            assert!(started.elapsed() < Duration::from_secs(5), "never stopped");
            tokio::task::yield_now().await;
        }
        // Polled to the second answer's deadline, past the first one's.
        assert!(
            started.elapsed() >= Duration::from_millis(21),
            "{:?}",
            started.elapsed()
        );
    }
}
