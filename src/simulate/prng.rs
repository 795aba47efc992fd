//! SplitMix64: a tiny, fast, seedable generator, so a seed gives the same
//! trace on every machine and every version (no dependency whose stream may
//! change between releases). Only the trace generator uses it.

/// One SplitMix64 stream.
#[derive(Debug, Clone)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    pub fn new(seed: u64) -> Self {
        SplitMix64 { state: seed }
    }

    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, 1)` with 53 random bits.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform in `lo..=hi` (`lo` when the range is empty), without modulo bias
    /// worth mentioning at trace sizes (128-bit multiply-shift).
    pub fn range_inclusive(&mut self, lo: u64, hi: u64) -> u64 {
        if hi <= lo {
            return lo;
        }
        let span = u128::from(hi - lo) + 1;
        lo + ((u128::from(self.next_u64()) * span) >> 64) as u64
    }

    /// An exponential wait with the given mean (a Poisson process's gap).
    pub fn exponential(&mut self, mean: f64) -> f64 {
        // 1 - u is in (0, 1], so the logarithm is finite.
        -(1.0 - self.next_f64()).ln() * mean
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_stream_for_seed_zero() {
        // The published SplitMix64 reference values for seed 0.
        let mut r = SplitMix64::new(0);
        assert_eq!(r.next_u64(), 0xE220_A839_7B1D_CDAF);
        assert_eq!(r.next_u64(), 0x6E78_9E6A_A1B9_65F4);
    }

    #[test]
    fn ranges_stay_inside_and_cover_both_ends() {
        let mut r = SplitMix64::new(7);
        let mut seen = [false; 4];
        for _ in 0..1000 {
            let v = r.range_inclusive(10, 13);
            assert!((10..=13).contains(&v));
            seen[(v - 10) as usize] = true;
            let f = r.next_f64();
            assert!((0.0..1.0).contains(&f));
        }
        assert!(seen.iter().all(|&s| s));
        assert_eq!(r.range_inclusive(5, 5), 5);
        assert_eq!(r.range_inclusive(9, 3), 9);
    }

    #[test]
    fn exponential_mean_is_close() {
        let mut r = SplitMix64::new(42);
        let n = 20_000;
        let sum: f64 = (0..n).map(|_| r.exponential(2.0)).sum();
        let mean = sum / f64::from(n);
        assert!((1.9..2.1).contains(&mean), "{mean}");
    }
}
