//! Jittered exponential backoff, shared by the stores: DynamoDB's retries of
//! throttled and unprocessed requests, and the local store's retries of a
//! SQLite lock it was refused without waiting.

use std::time::Duration;

/// Jittered exponential backoff for round `n` (1-based): up to 25 ms × 2^n, capped at 2 s.
pub fn backoff(n: u32) -> Duration {
    let cap = (25u64 << n.min(7)).min(2_000);
    Duration::from_millis(cap / 2 + crate::random::jitter(cap / 2 + 1))
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
