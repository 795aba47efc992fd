//! The chart's data: admitted and refused requests, and per limit its
//! effective capacity, the least available and its refusals, in time buckets.
//!
//! The trace's length is unknown while it streams, so buckets start one
//! second wide and, whenever there would be more than `max_buckets`,
//! neighbours are merged and the width steps up a ladder of widths people
//! read easily (1 s, 2 s, 10 s, 30 s, 1 min, 5 min, 15 min, 30 min, 1 h, 2 h,
//! 6 h, 12 h, 1 d, 7 d, then doubling), each a whole multiple of the last.
//! Memory stays at `max_buckets × limits` points for any trace.

/// One limit in one bucket.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Point {
    /// The last effective capacity seen.
    pub capacity: Option<i128>,
    /// The least available to a request in the bucket.
    pub low: Option<i128>,
    pub refused: u64,
}

impl Point {
    fn merge(self, later: Point) -> Point {
        Point {
            capacity: later.capacity.or(self.capacity),
            low: match (self.low, later.low) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            },
            refused: self.refused + later.refused,
        }
    }
}

/// One time bucket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bucket {
    pub admitted: u64,
    pub refused: u64,
    pub limits: Vec<Point>,
}

/// Bounded, adaptively bucketed series.
#[derive(Debug, Clone)]
pub struct Series {
    origin: Option<i64>,
    width_ms: i64,
    max_buckets: usize,
    n_limits: usize,
    buckets: Vec<Bucket>,
}

impl Series {
    pub fn new(n_limits: usize, max_buckets: usize) -> Series {
        Series {
            origin: None,
            width_ms: 1000,
            max_buckets: max_buckets.max(2),
            n_limits,
            buckets: Vec::new(),
        }
    }

    pub fn origin_ms(&self) -> Option<i64> {
        self.origin
    }

    pub fn width_ms(&self) -> i64 {
        self.width_ms
    }

    pub fn buckets(&self) -> &[Bucket] {
        &self.buckets
    }

    /// The bucket for `at_ms` (instants never go back: the replay's clock
    /// is monotonic; an earlier one lands in the first bucket).
    fn bucket(&mut self, at_ms: i64) -> &mut Bucket {
        let origin = *self.origin.get_or_insert(at_ms);
        let offset = at_ms.saturating_sub(origin).max(0);
        let mut index = offset / self.width_ms;
        while index >= self.max_buckets as i64 {
            self.widen();
            index = offset / self.width_ms;
        }
        let index = index as usize;
        while self.buckets.len() <= index {
            self.buckets.push(Bucket {
                admitted: 0,
                refused: 0,
                limits: vec![Point::default(); self.n_limits],
            });
        }
        &mut self.buckets[index]
    }

    /// Step up the ladder, merging each run of `factor` buckets into one.
    fn widen(&mut self) {
        let next = next_width(self.width_ms);
        let factor = (next / self.width_ms).max(1) as usize;
        let old = std::mem::take(&mut self.buckets);
        for chunk in old.chunks(factor) {
            let mut a = chunk[0].clone();
            for b in &chunk[1..] {
                a.admitted += b.admitted;
                a.refused += b.refused;
                for (p, q) in a.limits.iter_mut().zip(&b.limits) {
                    *p = p.merge(*q);
                }
            }
            self.buckets.push(a);
        }
        self.width_ms = next;
    }

    /// Count one request and what each limit saw: (capacity, available, refused).
    pub fn record(
        &mut self,
        at_ms: i64,
        admitted: bool,
        limits: impl Iterator<Item = (i128, i128, bool)>,
    ) {
        let b = self.bucket(at_ms);
        if admitted {
            b.admitted += 1;
        } else {
            b.refused += 1;
        }
        for (p, (capacity, available, refused)) in b.limits.iter_mut().zip(limits) {
            p.capacity = Some(capacity);
            p.low = Some(p.low.map_or(available, |l| l.min(available)));
            p.refused += u64::from(refused);
        }
    }
}

/// Bucket widths, each a whole multiple of the one before.
const LADDER_MS: [i64; 14] = [
    1_000,
    2_000,
    10_000,
    30_000,
    60_000,
    300_000,
    900_000,
    1_800_000,
    3_600_000,
    7_200_000,
    21_600_000,
    43_200_000,
    86_400_000,
    604_800_000,
];

fn next_width(width_ms: i64) -> i64 {
    LADDER_MS
        .iter()
        .copied()
        .find(|&w| w > width_ms)
        .unwrap_or_else(|| width_ms.saturating_mul(2))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_merge_in_pairs_and_stay_bounded() {
        let mut s = Series::new(1, 4);
        for i in 0..4 {
            s.record(i * 1000, i != 2, [(10, 10 - i as i128, i == 2)].into_iter());
        }
        assert_eq!((s.width_ms(), s.buckets().len()), (1000, 4));
        // A fifth second forces one merge: two-second buckets (the ladder's next).
        s.record(4000, true, [(20, 1, false)].into_iter());
        assert_eq!((s.width_ms(), s.buckets().len()), (2000, 3));
        let b = &s.buckets()[1];
        assert_eq!((b.admitted, b.refused), (1, 1));
        assert_eq!(
            b.limits[0],
            Point {
                capacity: Some(10),
                low: Some(7),
                refused: 1
            }
        );
        // A long jump keeps widening until it fits; the total count survives.
        s.record(1_000_000, true, [(5, 5, false)].into_iter());
        assert!(s.buckets().len() <= 4);
        assert_eq!(
            s.width_ms(),
            300_000,
            "1000 s over at most 4 buckets: 5 minutes"
        );
        let total: u64 = s.buckets().iter().map(|b| b.admitted + b.refused).sum();
        assert_eq!(total, 6);
        assert_eq!(s.origin_ms(), Some(0));
        assert_eq!(s.buckets()[0].limits[0].capacity, Some(20));
    }
}

#[cfg(test)]
mod ladder_tests {
    use super::*;

    #[test]
    fn every_width_divides_the_next() {
        let mut w = 1000;
        for _ in 0..40 {
            let n = next_width(w);
            assert!(n > w && n % w == 0, "{w} -> {n}");
            w = n;
        }
    }
}
