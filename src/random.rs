//! Randomness, from the operating system (`getrandom`): the bytes of fresh
//! ids and tokens, and the one jitter that spreads retries and renewals.
//! (A cooldown worker's jitter is not random: it is a hash of its id, so every
//! run of the same worker waits the same; see `zae_limiter_engine::cooldown`.)

/// The operating system could not give random bytes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the operating system gave no random bytes ({0})")]
pub struct RandomError(String);

/// `N` random bytes, for ids and tokens that must not be guessed or collide.
pub fn bytes<const N: usize>() -> Result<[u8; N], RandomError> {
    let mut out = [0u8; N];
    getrandom::fill(&mut out).map_err(|e| RandomError(e.to_string()))?;
    Ok(out)
}

/// A number below `bound` (0 when `bound` is 0), for jitter: retries and
/// renewals spread out instead of arriving together. Never fails: without
/// the operating system's bytes, std's per-process random hasher keys mixed
/// with the time stand in (jitter needs spread, not secrecy).
pub fn jitter(bound: u64) -> u64 {
    if bound == 0 {
        return 0;
    }
    let x = match bytes::<8>() {
        Ok(b) => u64::from_le_bytes(b),
        Err(_) => {
            use std::hash::{BuildHasher, Hasher};
            let mut h = std::collections::hash_map::RandomState::new().build_hasher();
            h.write_u128(
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_nanos())
                    .unwrap_or(0),
            );
            h.finish()
        }
    };
    x % bound
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jitter_stays_below_its_bound_and_spreads() {
        // Below 0 or 1 there is only 0.
        assert!([0, 1].into_iter().all(|bound| jitter(bound) == 0));
        let seen: std::collections::BTreeSet<u64> = (0..200).map(|_| jitter(1000)).collect();
        assert!(seen.iter().all(|j| *j < 1000));
        assert!(seen.len() > 100, "jitter should spread: {seen:?}");
    }

    #[test]
    fn bytes_differ_between_draws() {
        assert_ne!(bytes::<16>().unwrap(), bytes::<16>().unwrap());
    }
}
