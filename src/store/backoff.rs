//! Jittered exponential backoff, shared by the stores: DynamoDB's retries of
//! throttled and unprocessed requests, and the local store's retries of a
//! SQLite lock it was refused without waiting.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Jittered exponential backoff for round `n` (1-based): up to 25 ms × 2^n, capped at 2 s.
pub fn backoff(n: u32) -> Duration {
    let cap = (25u64 << n.min(7)).min(2_000);
    Duration::from_millis(cap / 2 + jitter(cap / 2 + 1))
}

/// A cheap pseudo-random number below `bound`, for backoff jitter only.
fn jitter(bound: u64) -> u64 {
    static SEED: AtomicU64 = AtomicU64::new(0x9E37_79B9_7F4A_7C15);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos() as u64)
        .unwrap_or(0);
    let mut x = SEED.fetch_add(nanos | 1, Ordering::Relaxed) ^ nanos;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    x % bound.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

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
