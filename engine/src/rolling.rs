//! Rolling windows: a limit on the use counted over the last minute, hour or
//! day at the moment of each check, so there is no burst at a UTC boundary.
//!
//! # Counting
//!
//! A window of length `W` is counted in slices of `W / 60` (a second for a
//! minute, a minute for an hour, 24 minutes for a day). At an instant `now` in
//! slice `c` (`c = floor(now / slice)`), the window `(now - W, now]` touches
//! slices `c - 60 ..= c`: the current slice, 59 whole ones, and the oldest one
//! that the window covers only in part. That oldest slice counts **whole**, so
//! the state keeps [`COUNTERS`] = 61 counters. Consequences:
//!
//! * a rolling limit never admits more than its amount in any span of `W`
//!   milliseconds (every event of such a span is inside the counted slices);
//! * it may refuse at most one slice early: a use leaves the count at the end
//!   of the slice in which it falls out of the true window.
//!
//! A request of cost `c` is admitted when `used + c <= amount` (a cost of 0 is
//! refused only while the window is over its amount, e.g. after the amount was
//! lowered). Use recorded in slice `k` leaves the count at `(k + 61) · slice`.
//!
//! # Clock going backwards
//!
//! The state remembers only its newest slice (`head_slice`). A check whose
//! `now` falls in an older slice is evaluated, and its use recorded, as if it
//! happened in the newest slice: the window never moves backwards, nothing is
//! forgotten early, and use recorded then leaves the window later than it
//! would have. `retry_after` is still measured from the caller's `now`, so it
//! is longer by the distance the clock went back. Nothing panics, whatever the
//! instants (far past or far future instants saturate).
//!
//! # Units
//!
//! Amounts and costs are integers in the caller's unit; the limiter stores
//! millitokens like token buckets (`capacity × 1000`). Instants are epoch ms.
//!
//! # Declaring it in a manifest (next to `capacity`)
//!
//! ```yaml
//! limits:
//!   requests:
//!     capacity: 1000     # the amount allowed in any rolling day
//!     window: day        # minute | hour | day (month and total cannot roll)
//!     rolling: true
//! ```
//!
//! [`Window::parse`] reads the `window` value; [`RollingLimit::new`] refuses
//! `rolling: true` on `month`, `total` and `concurrent` with
//! [`RollingError::NotRollable`], and a non-positive amount.
//!
//! # What must be stored
//!
//! Config: the window name and the amount, under attribute names that the
//! Python 0.17 client ignores (it discovers limits by a `_cp` suffix under
//! `l_`/`w_` on config items and by `b_{n}_tk` + `b_{n}_cp` on bucket items,
//! so neither may be used). State, per (entity, resource): the window (to
//! detect a changed window: [`RollingError::WindowMismatch`]; a changed window
//! starts from an empty state), `head_slice` (an integer) and the 61 counters
//! oldest first ([`RollingState::counters`]); [`RollingState::from_parts`]
//! rebuilds and validates it. A rolling limit should not be sharded: the
//! counters are one ledger; a sharded store would have to split the amount.

use std::fmt;

/// Counters kept by a rolling window: 60 slices plus the partly covered
/// oldest one, which counts whole.
pub const COUNTERS: usize = 61;

/// Slices per window length.
pub const SLICES_PER_WINDOW: i64 = 60;

/// Every window a limit can declare; only minute, hour and day can roll.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Window {
    Minute,
    Hour,
    Day,
    Month,
    Total,
    Concurrent,
}

impl Window {
    /// All windows, in the order the manifest documentation lists them.
    pub const ALL: [Window; 6] = [
        Window::Minute,
        Window::Hour,
        Window::Day,
        Window::Month,
        Window::Total,
        Window::Concurrent,
    ];

    /// The manifest spelling.
    pub fn name(self) -> &'static str {
        match self {
            Window::Minute => "minute",
            Window::Hour => "hour",
            Window::Day => "day",
            Window::Month => "month",
            Window::Total => "total",
            Window::Concurrent => "concurrent",
        }
    }

    /// Parse the manifest spelling (exact, lower case).
    pub fn parse(text: &str) -> Option<Window> {
        Window::ALL.into_iter().find(|w| w.name() == text)
    }
}

impl fmt::Display for Window {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A window that can roll.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RollingWindow {
    Minute,
    Hour,
    Day,
}

impl RollingWindow {
    /// The window length in ms.
    pub fn length_ms(self) -> i64 {
        match self {
            RollingWindow::Minute => 60_000,
            RollingWindow::Hour => 3_600_000,
            RollingWindow::Day => 86_400_000,
        }
    }

    /// One slice: a sixtieth of the window.
    pub fn slice_ms(self) -> i64 {
        self.length_ms() / SLICES_PER_WINDOW
    }

    /// The general window this is.
    pub fn window(self) -> Window {
        match self {
            RollingWindow::Minute => Window::Minute,
            RollingWindow::Hour => Window::Hour,
            RollingWindow::Day => Window::Day,
        }
    }

    /// The slice an instant falls in (floor division, so negative instants too).
    pub fn slice_of(self, now_ms: i64) -> i64 {
        now_ms.div_euclid(self.slice_ms())
    }
}

impl TryFrom<Window> for RollingWindow {
    type Error = RollingError;

    fn try_from(window: Window) -> Result<Self, RollingError> {
        match window {
            Window::Minute => Ok(RollingWindow::Minute),
            Window::Hour => Ok(RollingWindow::Hour),
            Window::Day => Ok(RollingWindow::Day),
            other => Err(RollingError::NotRollable { window: other }),
        }
    }
}

impl fmt::Display for RollingWindow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.window().name())
    }
}

/// Why a rolling limit, state or check was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RollingError {
    #[error("a {window} window cannot be rolling: only minute, hour and day windows roll")]
    NotRollable { window: Window },
    #[error("a rolling limit's amount must be positive, got {amount}")]
    AmountNotPositive { amount: i128 },
    #[error("a cost cannot be negative, got {cost}")]
    NegativeCost { cost: i128 },
    #[error("the stored rolling state counts a {stored} window but the limit is per {limit}; a changed window starts from an empty state")]
    WindowMismatch {
        stored: RollingWindow,
        limit: RollingWindow,
    },
    #[error("a rolling state needs exactly {expected} counters, got {got}")]
    CounterCount { expected: usize, got: usize },
    #[error("rolling counter {index} is negative ({value})")]
    NegativeCounter { index: usize, value: i128 },
}

/// A declared rolling limit: at most `amount` in any window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RollingLimit {
    window: RollingWindow,
    amount: i128,
}

impl RollingLimit {
    /// A limit of `amount` per rolling `window`; month, total and concurrent
    /// windows cannot roll, and the amount must be positive.
    pub fn new(window: Window, amount: i128) -> Result<Self, RollingError> {
        let window = RollingWindow::try_from(window)?;
        if amount <= 0 {
            return Err(RollingError::AmountNotPositive { amount });
        }
        Ok(RollingLimit { window, amount })
    }

    pub fn window(&self) -> RollingWindow {
        self.window
    }

    pub fn amount(&self) -> i128 {
        self.amount
    }

    /// An empty state for this limit.
    pub fn empty_state(&self) -> RollingState {
        RollingState::new(self.window)
    }

    /// Would `cost` be admitted at `now_ms`? Changes nothing (a preview).
    pub fn check(
        &self,
        state: &RollingState,
        cost: i128,
        now_ms: i64,
    ) -> Result<RollingCheck, RollingError> {
        self.validate(state, cost)?;
        let mut view = state.clone();
        view.advance(now_ms);
        Ok(self.decide(&view, cost, now_ms))
    }

    /// Check and, when admitted, record `cost` in the state. A refusal leaves
    /// the counts as they were (only the slice head may move forward).
    pub fn consume(
        &self,
        state: &mut RollingState,
        cost: i128,
        now_ms: i64,
    ) -> Result<RollingCheck, RollingError> {
        self.validate(state, cost)?;
        state.advance(now_ms);
        let decision = self.decide(state, cost, now_ms);
        if decision.allowed {
            state.add_to_head(cost);
            return Ok(RollingCheck {
                used: decision.used.saturating_add(cost),
                resets_at_ms: state.all_gone_at(),
                ..decision
            });
        }
        Ok(decision)
    }

    /// Record `cost` without checking (a soft limit, or use admitted by the
    /// caller elsewhere); returns the use now counted.
    pub fn record(
        &self,
        state: &mut RollingState,
        cost: i128,
        now_ms: i64,
    ) -> Result<i128, RollingError> {
        self.validate(state, cost)?;
        state.advance(now_ms);
        state.add_to_head(cost);
        Ok(state.used())
    }

    fn validate(&self, state: &RollingState, cost: i128) -> Result<(), RollingError> {
        if cost < 0 {
            return Err(RollingError::NegativeCost { cost });
        }
        if state.window != self.window {
            return Err(RollingError::WindowMismatch {
                stored: state.window,
                limit: self.window,
            });
        }
        Ok(())
    }

    /// The decision on a state already advanced to `now_ms`'s slice.
    fn decide(&self, state: &RollingState, cost: i128, now_ms: i64) -> RollingCheck {
        let used = state.used();
        let allowed = used.saturating_add(cost) <= self.amount;
        let retry_after_ms = if allowed {
            None
        } else {
            state
                .admissible_at(self.amount, cost)
                .map(|at| at.saturating_sub(now_ms).max(1))
        };
        RollingCheck {
            allowed,
            used,
            amount: self.amount,
            resets_at_ms: state.all_gone_at(),
            retry_after_ms,
        }
    }
}

/// What a check decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RollingCheck {
    pub allowed: bool,
    /// Use counted in the window after the check (including the cost when it
    /// was admitted by `consume`).
    pub used: i128,
    pub amount: i128,
    /// When every use now counted has left the window, so the whole amount is
    /// free again; `None` when nothing is counted.
    pub resets_at_ms: Option<i64>,
    /// On a refusal, ms from `now` until enough use has left the window for
    /// this cost (at least 1); `None` when admitted, and also when the cost is
    /// above the amount and can never be admitted.
    pub retry_after_ms: Option<i64>,
}

impl RollingCheck {
    /// What is left of the amount (0 when over it).
    pub fn remaining(&self) -> i128 {
        self.amount.saturating_sub(self.used).max(0)
    }
}

/// The counted use of one rolling limit: the newest slice seen and 61
/// counters, oldest first (`counters[i]` is slice `head_slice - 60 + i`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RollingState {
    window: RollingWindow,
    head_slice: i64,
    counters: [i128; COUNTERS],
}

impl RollingState {
    /// Nothing counted yet.
    pub fn new(window: RollingWindow) -> Self {
        RollingState {
            window,
            head_slice: i64::MIN,
            counters: [0; COUNTERS],
        }
    }

    /// Rebuild a stored state: exactly 61 non-negative counters, oldest first.
    pub fn from_parts(
        window: RollingWindow,
        head_slice: i64,
        counters: &[i128],
    ) -> Result<Self, RollingError> {
        let counters: [i128; COUNTERS] =
            counters
                .try_into()
                .map_err(|_| RollingError::CounterCount {
                    expected: COUNTERS,
                    got: counters.len(),
                })?;
        if let Some((index, &value)) = counters.iter().enumerate().find(|(_, &v)| v < 0) {
            return Err(RollingError::NegativeCounter { index, value });
        }
        Ok(RollingState {
            window,
            head_slice,
            counters,
        })
    }

    pub fn window(&self) -> RollingWindow {
        self.window
    }

    /// The newest slice seen (`i64::MIN` before the first use).
    pub fn head_slice(&self) -> i64 {
        self.head_slice
    }

    /// The counters, oldest first; the last is the head slice.
    pub fn counters(&self) -> &[i128; COUNTERS] {
        &self.counters
    }

    /// Use counted in the window as of the head slice.
    pub fn used(&self) -> i128 {
        self.counters
            .iter()
            .fold(0i128, |sum, &c| sum.saturating_add(c))
    }

    /// Use counted in the window that ends at `now_ms` (slices that left it
    /// by then no longer count). A head newer than `now_ms`'s slice (written
    /// by a clock ahead of this one) counts as of the head.
    pub fn used_at(&self, now_ms: i64) -> i128 {
        let mut at = self.clone();
        at.advance(now_ms);
        at.used()
    }

    /// Whether the newest slice seen is later than `now_ms`'s: a clock ahead
    /// of this one counted here, and until `now_ms` catches up its use
    /// leaves the window later than this clock expects.
    pub fn ahead_of(&self, now_ms: i64) -> bool {
        self.head_slice > self.window.slice_of(now_ms)
    }

    /// Correct use recorded earlier in `slice` (a reservation's estimate,
    /// `counted`) to what it turned out to be (`actual`), as the commit of a
    /// reservation does. The correction lands in the slice the use was counted
    /// in, so it leaves the window when the original would have; once that
    /// slice has left the window at `now_ms` there is nothing to correct and
    /// `false` is returned. The counter never goes below 0 (use counted in the
    /// slice by others is not taken back), and a correction is recorded, not
    /// checked: the work was done.
    pub fn correct(
        &mut self,
        slice: i64,
        counted: i128,
        actual: i128,
        now_ms: i64,
    ) -> Result<bool, RollingError> {
        for cost in [counted, actual] {
            if cost < 0 {
                return Err(RollingError::NegativeCost { cost });
            }
        }
        self.advance(now_ms);
        let oldest = i128::from(self.head_slice) - (COUNTERS as i128 - 1);
        let offset = i128::from(slice) - oldest;
        if !(0..COUNTERS as i128).contains(&offset) {
            return Ok(false);
        }
        // offset is in 0..61 here.
        let counter = &mut self.counters[offset as usize];
        *counter = counter
            .saturating_sub(counted)
            .max(0)
            .saturating_add(actual);
        Ok(true)
    }

    /// Move the head forward to `now_ms`'s slice, dropping slices that left;
    /// an older slice (clock went back) leaves the head where it is.
    fn advance(&mut self, now_ms: i64) {
        let slice = self.window.slice_of(now_ms);
        if slice <= self.head_slice {
            return;
        }
        let step = i128::from(slice) - i128::from(self.head_slice);
        if step >= COUNTERS as i128 {
            self.counters = [0; COUNTERS];
        } else {
            // step is in 1..61 here.
            let step = step as usize;
            self.counters.rotate_left(step);
            self.counters[COUNTERS - step..].fill(0);
        }
        self.head_slice = slice;
    }

    fn add_to_head(&mut self, cost: i128) {
        let head = &mut self.counters[COUNTERS - 1];
        *head = head.saturating_add(cost);
    }

    /// The instant the use counted at counter `index` leaves the window.
    fn leaves_at(&self, index: usize) -> i64 {
        // Slice head - 60 + index leaves when slice head + 1 + index begins.
        let slice = i128::from(self.head_slice) + 1 + index as i128;
        let at = slice.saturating_mul(i128::from(self.window.slice_ms()));
        i64::try_from(at).unwrap_or(if at < 0 { i64::MIN } else { i64::MAX })
    }

    /// When the newest counted use leaves (the window is whole again);
    /// `None` when nothing is counted. A store uses it to let idle state expire.
    pub fn all_gone_at(&self) -> Option<i64> {
        let newest = self.counters.iter().rposition(|&c| c > 0)?;
        Some(self.leaves_at(newest))
    }

    /// The earliest instant at which `cost` fits under `amount` if nothing
    /// else is recorded; `None` when it never fits.
    fn admissible_at(&self, amount: i128, cost: i128) -> Option<i64> {
        if cost > amount {
            return None;
        }
        let mut used = self.used();
        for (index, &count) in self.counters.iter().enumerate() {
            if count == 0 {
                continue;
            }
            used = used.saturating_sub(count);
            if used.saturating_add(cost) <= amount {
                return Some(self.leaves_at(index));
            }
        }
        // Unreachable with cost <= amount: once every counter left, used = 0.
        Some(self.leaves_at(COUNTERS - 1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn minute(amount: i128) -> RollingLimit {
        RollingLimit::new(Window::Minute, amount).unwrap()
    }

    #[test]
    fn windows_and_slices() {
        assert_eq!(RollingWindow::Minute.slice_ms(), 1_000);
        assert_eq!(RollingWindow::Hour.slice_ms(), 60_000);
        assert_eq!(RollingWindow::Day.slice_ms(), 1_440_000);
        for w in Window::ALL {
            assert_eq!(Window::parse(w.name()), Some(w));
        }
        assert_eq!(Window::parse("Day"), None);
        assert_eq!(RollingWindow::Minute.slice_of(-1), -1);
    }

    #[test]
    fn month_total_and_concurrent_cannot_roll() {
        for w in [Window::Month, Window::Total, Window::Concurrent] {
            let err = RollingLimit::new(w, 10).unwrap_err();
            assert_eq!(err, RollingError::NotRollable { window: w });
            assert!(err.to_string().contains(w.name()));
        }
        assert_eq!(
            RollingLimit::new(Window::Day, 0),
            Err(RollingError::AmountNotPositive { amount: 0 })
        );
    }

    #[test]
    fn use_at_an_instant_drops_what_left_and_a_head_ahead_is_seen() {
        let limit = minute(100);
        let mut s = limit.empty_state();
        limit.consume(&mut s, 30, 10_000).unwrap();
        limit.consume(&mut s, 20, 40_000).unwrap();
        assert_eq!(s.used_at(40_000), 50);
        // Slice 10 leaves when slice 71 begins.
        assert_eq!(s.used_at(70_999), 50);
        assert_eq!(s.used_at(71_000), 20);
        assert_eq!(s.used_at(101_000), 0);
        // Looking is not counting: the state itself is unchanged.
        assert_eq!(s.used(), 50);
        // An earlier clock sees the use as of the head, and that it is ahead.
        assert_eq!(s.used_at(5_000), 50);
        assert!(s.ahead_of(39_999));
        assert!(!s.ahead_of(40_000));
        assert!(!limit.empty_state().ahead_of(i64::MIN));
    }

    #[test]
    fn no_burst_across_a_minute_boundary() {
        // 100 at 59.5 s: the fixed minute would reset at 60 s; the rolling one does not.
        let limit = minute(100);
        let mut s = limit.empty_state();
        assert!(limit.consume(&mut s, 100, 59_500).unwrap().allowed);
        let denied = limit.consume(&mut s, 1, 60_500).unwrap();
        assert!(!denied.allowed);
        // Slice 59 leaves when slice 120 begins: 120 s.
        assert_eq!(denied.retry_after_ms, Some(120_000 - 60_500));
        assert_eq!(denied.resets_at_ms, Some(120_000));
        assert!(!limit.consume(&mut s, 1, 119_999).unwrap().allowed);
        assert!(limit.consume(&mut s, 1, 120_000).unwrap().allowed);
    }

    #[test]
    fn oldest_slice_counts_whole_so_refusal_is_at_most_one_slice_early() {
        let limit = minute(1);
        let mut s = limit.empty_state();
        assert!(limit.consume(&mut s, 1, 0).unwrap().allowed);
        // At 60 000 the use at 0 is out of (0, 60 000] but its slice still counts.
        let c = limit.check(&s, 1, 60_000).unwrap();
        assert!(!c.allowed);
        assert_eq!(c.retry_after_ms, Some(1_000));
        assert!(limit.check(&s, 1, 61_000).unwrap().allowed);
        // A use at the last ms of slice 0 is still inside the window at 60 998.
        let mut s = limit.empty_state();
        limit.consume(&mut s, 1, 999).unwrap();
        assert!(!limit.check(&s, 1, 60_998).unwrap().allowed);
    }

    #[test]
    fn slice_boundaries() {
        let limit = minute(2);
        let mut s = limit.empty_state();
        limit.consume(&mut s, 1, 999).unwrap(); // slice 0
        limit.consume(&mut s, 1, 1_000).unwrap(); // slice 1
        assert_eq!(s.counters()[COUNTERS - 2..], [1, 1]);
        let c = limit.check(&s, 1, 1_000).unwrap();
        assert_eq!(c.retry_after_ms, Some(61_000 - 1_000));
        assert_eq!(c.resets_at_ms, Some(62_000));
        assert_eq!(c.remaining(), 0);
        // Needing 2 waits for both slices.
        let c = limit.check(&s, 2, 1_000).unwrap();
        assert_eq!(c.retry_after_ms, Some(62_000 - 1_000));
        // Far in the future everything is gone.
        assert_eq!(limit.check(&s, 2, 10_000_000).unwrap().used, 0);
    }

    #[test]
    fn day_slices_are_24_minutes() {
        let limit = RollingLimit::new(Window::Day, 1).unwrap();
        let mut s = limit.empty_state();
        // 00:23:59.999 is the last ms of the day's first slice.
        assert!(limit.consume(&mut s, 1, 1_439_999).unwrap().allowed);
        let c = limit.check(&s, 1, 86_400_000).unwrap();
        assert!(!c.allowed);
        // It leaves when slice 61 begins: the next day at 00:24.
        assert_eq!(c.resets_at_ms, Some(87_840_000));
        assert_eq!(c.retry_after_ms, Some(1_440_000));
        assert!(!limit.check(&s, 1, 87_839_999).unwrap().allowed);
        assert!(limit.check(&s, 1, 87_840_000).unwrap().allowed);
        // The hour's slice is a minute.
        let hour = RollingLimit::new(Window::Hour, 1).unwrap();
        let mut s = hour.empty_state();
        hour.consume(&mut s, 1, 60_000).unwrap();
        assert_eq!(
            hour.check(&s, 1, 60_001).unwrap().resets_at_ms,
            Some(3_720_000)
        );
    }

    #[test]
    fn cost_above_amount_never_fits() {
        let limit = minute(5);
        let s = limit.empty_state();
        let c = limit.check(&s, 6, 0).unwrap();
        assert!(!c.allowed);
        assert_eq!(c.retry_after_ms, None);
        assert_eq!(c.resets_at_ms, None);
        assert_eq!(
            limit.check(&s, -1, 0),
            Err(RollingError::NegativeCost { cost: -1 })
        );
    }

    #[test]
    fn refusal_records_nothing() {
        let limit = minute(3);
        let mut s = limit.empty_state();
        limit.consume(&mut s, 3, 5_000).unwrap();
        let before = s.used();
        assert!(!limit.consume(&mut s, 1, 5_001).unwrap().allowed);
        assert_eq!(s.used(), before);
    }

    #[test]
    fn clock_going_backwards_counts_in_the_newest_slice() {
        let limit = minute(2);
        let mut s = limit.empty_state();
        limit.consume(&mut s, 1, 30_000).unwrap();
        // The clock goes back 20 s: recorded in slice 30, not slice 10.
        let c = limit.consume(&mut s, 1, 10_000).unwrap();
        assert!(c.allowed);
        assert_eq!(s.head_slice(), 30);
        assert_eq!(s.counters()[COUNTERS - 1], 2);
        let c = limit.check(&s, 1, 10_000).unwrap();
        // Leaves at 91 s, measured from the caller's (earlier) now.
        assert_eq!(c.retry_after_ms, Some(91_000 - 10_000));
        // Extreme instants never panic.
        for now in [i64::MIN, -1, 0, i64::MAX] {
            let _ = limit.consume(&mut s, 1, now).unwrap();
            let _ = limit.check(&s, 2, now).unwrap();
        }
    }

    #[test]
    fn extreme_instants_saturate() {
        let limit = RollingLimit::new(Window::Day, 1).unwrap();
        let mut s = limit.empty_state();
        assert!(limit.consume(&mut s, 1, i64::MAX).unwrap().allowed);
        let c = limit.check(&s, 1, i64::MAX).unwrap();
        assert!(!c.allowed);
        assert_eq!(c.retry_after_ms, Some(1));
        let mut s = limit.empty_state();
        assert!(limit.consume(&mut s, 1, i64::MIN).unwrap().allowed);
        assert!(!limit.check(&s, 1, i64::MIN).unwrap().allowed);
        let big = RollingLimit::new(Window::Hour, i128::MAX).unwrap();
        let mut s = big.empty_state();
        big.record(&mut s, i128::MAX, 0).unwrap();
        assert_eq!(big.record(&mut s, i128::MAX, 1).unwrap(), i128::MAX);
    }

    #[test]
    fn state_round_trips_through_integers_and_is_validated() {
        let limit = RollingLimit::new(Window::Hour, 10).unwrap();
        let mut s = limit.empty_state();
        limit.consume(&mut s, 4, 3_600_000).unwrap();
        limit.consume(&mut s, 3, 3_700_000).unwrap();
        let back =
            RollingState::from_parts(s.window(), s.head_slice(), s.counters().as_slice()).unwrap();
        assert_eq!(back, s);
        assert_eq!(
            RollingState::from_parts(RollingWindow::Hour, 0, &[0; 60]),
            Err(RollingError::CounterCount {
                expected: 61,
                got: 60
            })
        );
        let mut bad = [0i128; COUNTERS];
        bad[7] = -1;
        assert_eq!(
            RollingState::from_parts(RollingWindow::Hour, 0, &bad),
            Err(RollingError::NegativeCounter {
                index: 7,
                value: -1
            })
        );
        let other = RollingState::new(RollingWindow::Minute);
        assert!(matches!(
            limit.check(&other, 1, 0),
            Err(RollingError::WindowMismatch { .. })
        ));
    }

    #[test]
    fn corrections_land_in_the_slice_counted_and_expire_with_it() {
        let limit = minute(10);
        let mut s = limit.empty_state();
        limit.consume(&mut s, 5, 2_500).unwrap(); // slice 2
        let slice = s.head_slice();
        limit.consume(&mut s, 1, 30_000).unwrap();
        // Down: the estimate of 5 was 2.
        assert_eq!(s.correct(slice, 5, 2, 31_000), Ok(true));
        assert_eq!(limit.check(&s, 0, 31_000).unwrap().used, 3);
        // Up again, above the amount: recorded, not checked.
        assert_eq!(s.correct(slice, 2, 12, 31_000), Ok(true));
        assert_eq!(limit.check(&s, 0, 31_000).unwrap().used, 13);
        // The correction leaves with its slice: slice 2 leaves at 63 s.
        assert_eq!(limit.check(&s, 0, 62_999).unwrap().used, 13);
        assert_eq!(limit.check(&s, 0, 63_000).unwrap().used, 1);
        // The oldest slice still counts, one later it is gone.
        assert_eq!(s.correct(slice, 12, 0, 62_999), Ok(true));
        assert_eq!(s.correct(slice, 0, 4, 63_000), Ok(false));
        assert_eq!(limit.check(&s, 0, 63_000).unwrap().used, 1);
        // Never below zero; negative costs are refused.
        let mut s = limit.empty_state();
        limit.consume(&mut s, 1, 0).unwrap();
        assert_eq!(s.correct(0, 5, 0, 0), Ok(true));
        assert_eq!(s.used(), 0);
        assert!(s.correct(0, 0, -1, 0).is_err());
        // A slice newer than the head was never counted here.
        assert_eq!(s.correct(5, 0, 1, 0), Ok(false));
    }

    #[test]
    fn lowered_amount_refuses_even_zero_cost_until_use_leaves() {
        let high = minute(10);
        let mut s = high.empty_state();
        high.consume(&mut s, 8, 0).unwrap();
        let low = minute(5);
        let c = low.check(&s, 0, 1).unwrap();
        assert!(!c.allowed);
        assert_eq!(c.retry_after_ms, Some(61_000 - 1));
    }

    /// One request of a generated trace.
    #[derive(Debug, Clone)]
    struct Step {
        advance_ms: i64,
        cost: i128,
    }

    fn steps(max_advance: i64) -> impl Strategy<Value = Vec<Step>> {
        prop::collection::vec(
            (
                prop_oneof![
                    3 => 0..max_advance,
                    1 => Just(0i64),
                    1 => 0..max_advance * 40,
                ],
                0i128..6,
            )
                .prop_map(|(advance_ms, cost)| Step { advance_ms, cost }),
            1..160,
        )
    }

    fn window_strategy() -> impl Strategy<Value = Window> {
        prop_oneof![Just(Window::Minute), Just(Window::Hour), Just(Window::Day)]
    }

    proptest! {
        /// Against a brute-force record of admitted events: no span of the
        /// window's length holds more than the amount; a refusal counts only
        /// use from at most one slice before the window; and retrying after
        /// `retry_after` is admitted, one ms earlier is not.
        #[test]
        fn never_more_than_amount_in_any_window(
            window in window_strategy(),
            amount in 1i128..12,
            start in -10_000_000_000i64..10_000_000_000,
            trace in steps(3_000),
        ) {
            let limit = RollingLimit::new(window, amount).unwrap();
            let w = limit.window().length_ms();
            let slice = limit.window().slice_ms();
            let mut state = limit.empty_state();
            let mut admitted: Vec<(i64, i128)> = Vec::new();
            let mut now = start;
            for step in trace {
                now += step.advance_ms * (w / 60_000);
                let before = state.clone();
                let c = limit.consume(&mut state, step.cost, now).unwrap();
                if c.allowed {
                    admitted.push((now, step.cost));
                    // Every span of length w ending now.
                    let in_span: i128 = admitted
                        .iter()
                        .filter(|(t, _)| *t > now - w)
                        .map(|(_, c)| c)
                        .sum();
                    prop_assert!(in_span <= amount, "{in_span} > {amount} in a span ending at {now}");
                } else {
                    let recent: i128 = admitted
                        .iter()
                        .filter(|(t, _)| *t > now - w - slice)
                        .map(|(_, c)| c)
                        .sum();
                    prop_assert!(recent + step.cost > amount, "refused more than one slice early");
                    match c.retry_after_ms {
                        None => prop_assert!(step.cost > amount),
                        Some(ra) => {
                            prop_assert!(ra >= 1);
                            prop_assert!(limit.check(&before, step.cost, now + ra).unwrap().allowed);
                            prop_assert!(!limit.check(&before, step.cost, now + ra - 1).unwrap().allowed);
                        }
                    }
                }
                if let Some(at) = c.resets_at_ms {
                    prop_assert_eq!(limit.check(&state, 0, at).unwrap().used, 0);
                    prop_assert!(limit.check(&state, 0, at - 1).unwrap().used > 0);
                }
            }
        }

        /// With a clock that jumps back and forth, the same holds for the
        /// instants the state acts on (the newest seen), and nothing panics.
        #[test]
        fn backwards_clock_is_safe(
            amount in 1i128..8,
            moves in prop::collection::vec((-200_000i64..200_000, 0i128..4), 1..120),
        ) {
            let limit = minute(amount);
            let w = limit.window().length_ms();
            let mut state = limit.empty_state();
            let mut admitted: Vec<(i64, i128)> = Vec::new();
            let mut now = 0i64;
            let mut newest = i64::MIN;
            for (delta, cost) in moves {
                now += delta;
                newest = newest.max(now);
                let c = limit.consume(&mut state, cost, now).unwrap();
                if c.allowed {
                    admitted.push((newest, cost));
                    let in_span: i128 = admitted
                        .iter()
                        .filter(|(t, _)| *t > newest - w)
                        .map(|(_, c)| c)
                        .sum();
                    prop_assert!(in_span <= amount);
                } else if let Some(ra) = c.retry_after_ms {
                    prop_assert!(ra >= 1);
                }
            }
        }
    }
}
