//! The chart's data: admitted and refused requests, and per limit its
//! effective capacity, the least available and its refusals, in time buckets.
//!
//! The trace's length is unknown while it streams, so buckets start one
//! second wide and, whenever there would be more than `max_buckets`,
//! neighbours are merged in pairs and the width doubles. Memory stays at
//! `max_buckets × limits` points for any trace.

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
            self.halve();
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

    fn halve(&mut self) {
        let old = std::mem::take(&mut self.buckets);
        let mut it = old.into_iter();
        while let Some(mut a) = it.next() {
            if let Some(b) = it.next() {
                a.admitted += b.admitted;
                a.refused += b.refused;
                for (p, q) in a.limits.iter_mut().zip(b.limits) {
                    *p = p.merge(q);
                }
            }
            self.buckets.push(a);
        }
        self.width_ms = self.width_ms.saturating_mul(2);
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
        // A fifth second forces one merge: two-second buckets.
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
        // A long jump keeps halving until it fits; the total count survives.
        s.record(1_000_000, true, [(5, 5, false)].into_iter());
        assert!(s.buckets().len() <= 4);
        let total: u64 = s.buckets().iter().map(|b| b.admitted + b.refused).sum();
        assert_eq!(total, 6);
        assert_eq!(s.origin_ms(), Some(0));
    }
}
