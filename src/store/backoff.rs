//! Jittered exponential backoff, shared by the stores: DynamoDB's retries of
//! throttled and unprocessed requests, and the local store's retries of a
//! SQLite lock it was refused without waiting, and the runtime's and the
//! cooldowns' retries of a conditional write another process won. Every such
//! wait goes through [`pause`].

use std::cell::Cell;
use std::time::Duration;

/// Jittered exponential backoff for round `n` (1-based): up to 25 ms × 2^n, capped at 2 s.
pub fn backoff(n: u32) -> Duration {
    let cap = (25u64 << n.min(7)).min(2_000);
    Duration::from_millis(cap / 2 + crate::random::jitter(cap / 2 + 1))
}

thread_local! {
    /// How this thread pauses; `None`: it sleeps. See [`with_pauser`].
    static PAUSER: Cell<Option<fn(Duration)>> = const { Cell::new(None) };
}

/// Runs `f` with every [`pause`] on this thread done by `pauser`. A server
/// that runs local store calls on its async worker threads (they take
/// microseconds) passes one that hands the worker's other tasks to another
/// thread before it sleeps: a lock held by another process, or a write lost
/// to another process, then delays the one request that met it, not the
/// server.
pub fn with_pauser<T>(pauser: fn(Duration), f: impl FnOnce() -> T) -> T {
    struct Restore(Option<fn(Duration)>);
    impl Drop for Restore {
        fn drop(&mut self) {
            PAUSER.set(self.0);
        }
    }
    let _restore = Restore(PAUSER.replace(Some(pauser)));
    f()
}

/// Waits `d` before trying again (a busy database, a lost conditional
/// write): sleeps, or calls the pauser [`with_pauser`] set on this thread.
pub fn pause(d: Duration) {
    match PAUSER.get() {
        Some(pauser) => pauser(d),
        None => std::thread::sleep(d),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    thread_local! {
        static PAUSED: Cell<Duration> = const { Cell::new(Duration::ZERO) };
    }

    fn record(d: Duration) {
        PAUSED.set(PAUSED.get() + d);
    }

    fn count_twice(d: Duration) {
        PAUSED.set(PAUSED.get() + 2 * d);
    }

    #[test]
    fn pauses_go_to_the_pauser_set_for_the_call_and_only_then() {
        let ms = Duration::from_millis(1);
        with_pauser(record, || {
            pause(ms);
            // Nested: the inner pauser for its call, the outer one after.
            with_pauser(count_twice, || pause(ms));
            pause(ms);
        });
        assert_eq!(PAUSED.get(), 4 * ms);
        // Outside any call: a plain sleep, which records nothing.
        let started = std::time::Instant::now();
        pause(ms);
        assert!(started.elapsed() >= ms);
        assert_eq!(PAUSED.get(), 4 * ms);
        // Restored even when the call panics.
        let _ = std::panic::catch_unwind(|| with_pauser(record, || panic!("in the call")));
        pause(ms);
        assert_eq!(PAUSED.get(), 4 * ms);
    }

    #[test]
    fn rounds_wait_between_half_and_all_of_a_doubling_cap() {
        for n in 1..12 {
            let cap = (25u64 << n.min(7)).min(2_000);
            for _ in 0..50 {
                let ms = backoff(n).as_millis() as u64;
                assert!(
                    (cap / 2..=cap).contains(&ms),
                    "round {n}: {ms} ms, cap {cap}"
                );
            }
        }
        assert!(backoff(20) <= Duration::from_secs(2));
    }
}
