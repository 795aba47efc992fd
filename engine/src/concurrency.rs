//! Concurrency limits: a cap on work in flight, counted in open holds rather
//! than in use.
//!
//! # Semantics
//!
//! The limit's amount is its number of slots. A reservation takes one slot
//! whatever its cost (the cost still counts against the subject's other
//! limits, which is the caller's business) and holds it until it is
//! committed, released or expires. A hold lasts a TTL — the limit's
//! `hold_ttl_seconds` (default [`DEFAULT_HOLD_TTL_SECONDS`]) or one given with
//! the reservation, between [`MIN_HOLD_TTL_SECONDS`] and
//! [`MAX_HOLD_TTL_SECONDS`] — and a heartbeat ([`ConcurrencyLimit::extend`])
//! pushes its expiry to `now + ttl`. A worker that dies stops extending and its
//! slot frees itself: a hold is open while `now < expires_at` and gone from the
//! first instant `now >= expires_at`.
//!
//! A consume or preview check ([`ConcurrencyLimit::check`]) is allowed while a
//! slot is free but takes none. When every slot is held, `retry_after` is the
//! time until the earliest hold expires (if the slots were lowered below the
//! open holds, until enough of them expire to free one).
//!
//! Hold ids are supplied by the caller (non-empty, at most
//! [`MAX_HOLD_ID_BYTES`] bytes, no control characters). Reserving an id that is
//! open, or extending, committing or releasing one that is not, is a typed
//! error ([`ConcurrencyError`]); an expired hold counts as not open.
//!
//! # Clock going backwards
//!
//! Expiries are absolute instants, so a check at an earlier `now` sees holds
//! as open for longer: an earlier clock never frees a slot early. A heartbeat
//! never shortens a hold: its expiry becomes the later of the current one and
//! `now + ttl`. Every write (reserve, extend, commit, release whose arguments
//! are valid) first drops the holds expired at its `now`; a dropped hold stays
//! gone if the clock later goes back. Nothing panics whatever the instants
//! (expiries saturate).
//!
//! # Changing kind
//!
//! A concurrent limit counts open holds; every other limit counts use. The two
//! states have nothing in common, so a limit cannot change from one kind to
//! the other: `plan` calls [`check_kind_change`], which refuses with "create a
//! new limit instead".
//!
//! # Declaring it in a manifest (next to `capacity`)
//!
//! ```yaml
//! limits:
//!   in_flight:
//!     concurrency: 3          # slots; no capacity/refill, no window
//!     hold_ttl_seconds: 120   # optional, 1..=3600, default 300
//! ```
//!
//! [`ConcurrencyLimit::new`] validates both values.
//!
//! # What must be stored
//!
//! Config: the slot count and `hold_ttl_seconds`, under attribute names that
//! the Python 0.17 client ignores (it discovers limits by a `_cp` suffix under
//! `l_`/`w_` on config items and by `b_{n}_tk` + `b_{n}_cp` on bucket items).
//! State, per (entity, resource): every open hold as its id and its expiry in
//! epoch ms ([`Holds::iter`], rebuilt and validated by [`Holds::from_parts`]).
//! Expired holds may be dropped on any write ([`Holds::expire`]). A reservation
//! must be a conditional write on the holds read, so two workers cannot take
//! the last slot; the holds are one ledger and should not be sharded.

use std::collections::BTreeMap;
use std::fmt;

/// The hold TTL when neither the limit nor the reservation gives one.
pub const DEFAULT_HOLD_TTL_SECONDS: i64 = 300;
/// The shortest hold TTL.
pub const MIN_HOLD_TTL_SECONDS: i64 = 1;
/// The longest hold TTL: a dead worker's slot comes back within the hour.
pub const MAX_HOLD_TTL_SECONDS: i64 = 3_600;
/// The longest hold id, in bytes.
pub const MAX_HOLD_ID_BYTES: usize = 256;
/// The most slots a concurrency limit may have. Open holds are one ledger
/// (an id and an expiry each, one item per subject), and DynamoDB items stop
/// at 400 KB, so the slot count stays far below what would not fit.
pub const MAX_SLOTS: u64 = 1_000;

/// Why a concurrency limit, hold or stored state was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConcurrencyError {
    #[error("a concurrent limit needs at least one slot, got {slots}")]
    NoSlots { slots: u64 },
    #[error("a concurrent limit has at most {MAX_SLOTS} slots, got {slots}")]
    TooManySlots { slots: u64 },
    #[error("hold_ttl_seconds must be between {MIN_HOLD_TTL_SECONDS} and {MAX_HOLD_TTL_SECONDS}, got {ttl_seconds}")]
    TtlOutOfRange { ttl_seconds: i64 },
    #[error("invalid hold id {id:?}: {reason}")]
    InvalidHoldId { id: String, reason: &'static str },
    #[error("hold '{id}' is already open")]
    DuplicateHold { id: String },
    #[error("no open hold '{id}' (never reserved, already committed or released, or expired)")]
    UnknownHold { id: String },
    #[error("the stored holds name '{id}' twice")]
    DuplicateStoredHold { id: String },
}

/// A declared concurrent limit: at most `slots` holds open at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConcurrencyLimit {
    slots: u64,
    hold_ttl_seconds: i64,
}

impl ConcurrencyLimit {
    /// `slots` at once, holds lasting `hold_ttl_seconds` (default 300 s).
    pub fn new(slots: u64, hold_ttl_seconds: Option<i64>) -> Result<Self, ConcurrencyError> {
        if slots == 0 {
            return Err(ConcurrencyError::NoSlots { slots });
        }
        if slots > MAX_SLOTS {
            return Err(ConcurrencyError::TooManySlots { slots });
        }
        let hold_ttl_seconds = validate_ttl(hold_ttl_seconds.unwrap_or(DEFAULT_HOLD_TTL_SECONDS))?;
        Ok(ConcurrencyLimit {
            slots,
            hold_ttl_seconds,
        })
    }

    pub fn slots(&self) -> u64 {
        self.slots
    }

    pub fn hold_ttl_seconds(&self) -> i64 {
        self.hold_ttl_seconds
    }

    /// A consume or preview check: allowed while a slot is free; takes none.
    pub fn check(&self, holds: &Holds, now_ms: i64) -> SlotCheck {
        let open = holds.open_expiries(now_ms);
        self.decide(&open, now_ms)
    }

    /// Take a slot for hold `id` until `now + ttl` (the limit's TTL when
    /// `ttl_seconds` is `None`). A full limit is a refusal, not an error; the
    /// holds are unchanged then, except that expired ones are dropped.
    pub fn reserve(
        &self,
        holds: &mut Holds,
        id: &str,
        ttl_seconds: Option<i64>,
        now_ms: i64,
    ) -> Result<SlotCheck, ConcurrencyError> {
        validate_id(id)?;
        let ttl = validate_ttl(ttl_seconds.unwrap_or(self.hold_ttl_seconds))?;
        holds.expire(now_ms);
        if holds.by_id.contains_key(id) {
            return Err(ConcurrencyError::DuplicateHold { id: id.to_owned() });
        }
        let open = holds.open_expiries(now_ms);
        let decision = self.decide(&open, now_ms);
        if !decision.allowed {
            return Ok(decision);
        }
        let expires_at = expiry(now_ms, ttl);
        holds.by_id.insert(id.to_owned(), expires_at);
        Ok(SlotCheck {
            held: decision.held + 1,
            expires_at_ms: Some(expires_at),
            ..decision
        })
    }

    /// Heartbeat: keep hold `id` open until `now + ttl` (never shortened).
    /// Returns the new expiry.
    pub fn extend(
        &self,
        holds: &mut Holds,
        id: &str,
        ttl_seconds: Option<i64>,
        now_ms: i64,
    ) -> Result<i64, ConcurrencyError> {
        let ttl = validate_ttl(ttl_seconds.unwrap_or(self.hold_ttl_seconds))?;
        holds.expire(now_ms);
        let current = holds
            .by_id
            .get_mut(id)
            .ok_or_else(|| ConcurrencyError::UnknownHold { id: id.to_owned() })?;
        *current = (*current).max(expiry(now_ms, ttl));
        Ok(*current)
    }

    /// The work finished: give the slot back (its cost is counted elsewhere).
    pub fn commit(&self, holds: &mut Holds, id: &str, now_ms: i64) -> Result<(), ConcurrencyError> {
        holds.close(id, now_ms)
    }

    /// The work was abandoned: give the slot back.
    pub fn release(
        &self,
        holds: &mut Holds,
        id: &str,
        now_ms: i64,
    ) -> Result<(), ConcurrencyError> {
        holds.close(id, now_ms)
    }

    /// `open` holds the expiries of the open holds, sorted.
    fn decide(&self, open: &[i64], now_ms: i64) -> SlotCheck {
        let held = open.len() as u64;
        let allowed = held < self.slots;
        let retry_after_ms = if allowed {
            None
        } else {
            // held - slots + 1 holds must expire to free one slot.
            let index = usize::try_from(held - self.slots).unwrap_or(usize::MAX);
            open.get(index).map(|&at| {
                (i128::from(at) - i128::from(now_ms)).clamp(1, i128::from(i64::MAX)) as i64
            })
        };
        SlotCheck {
            allowed,
            held,
            slots: self.slots,
            expires_at_ms: None,
            retry_after_ms,
        }
    }
}

/// What a check or reservation decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlotCheck {
    pub allowed: bool,
    /// Open holds after the call (including a hold this reservation took).
    pub held: u64,
    pub slots: u64,
    /// The new hold's expiry, for an admitted reservation.
    pub expires_at_ms: Option<i64>,
    /// On a refusal, ms from `now` until a slot frees itself (at least 1).
    pub retry_after_ms: Option<i64>,
}

impl SlotCheck {
    /// Free slots (0 when over the limit).
    pub fn free(&self) -> u64 {
        self.slots.saturating_sub(self.held)
    }
}

/// The open holds of one concurrent limit: id → expiry (epoch ms).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Holds {
    by_id: BTreeMap<String, i64>,
}

impl Holds {
    /// No holds.
    pub fn new() -> Self {
        Holds::default()
    }

    /// Rebuild stored holds, validating every id and refusing duplicates.
    pub fn from_parts<I, S>(holds: I) -> Result<Self, ConcurrencyError>
    where
        I: IntoIterator<Item = (S, i64)>,
        S: Into<String>,
    {
        let mut by_id = BTreeMap::new();
        for (id, expires_at) in holds {
            let id = id.into();
            validate_id(&id)?;
            if by_id.contains_key(&id) {
                return Err(ConcurrencyError::DuplicateStoredHold { id });
            }
            by_id.insert(id, expires_at);
        }
        Ok(Holds { by_id })
    }

    /// Every hold kept (open or not yet dropped), by id, with its expiry.
    pub fn iter(&self) -> impl Iterator<Item = (&str, i64)> {
        self.by_id.iter().map(|(id, &at)| (id.as_str(), at))
    }

    /// The expiry of hold `id` while it is open at `now_ms`.
    pub fn expires_at(&self, id: &str, now_ms: i64) -> Option<i64> {
        self.by_id.get(id).copied().filter(|&at| at > now_ms)
    }

    /// Holds open at `now_ms`.
    pub fn open(&self, now_ms: i64) -> usize {
        self.by_id.values().filter(|&&at| at > now_ms).count()
    }

    /// Drop the holds that expired by `now_ms`; returns their ids.
    pub fn expire(&mut self, now_ms: i64) -> Vec<String> {
        let gone: Vec<String> = self
            .by_id
            .iter()
            .filter(|(_, &at)| at <= now_ms)
            .map(|(id, _)| id.clone())
            .collect();
        for id in &gone {
            self.by_id.remove(id);
        }
        gone
    }

    fn open_expiries(&self, now_ms: i64) -> Vec<i64> {
        let mut open: Vec<i64> = self
            .by_id
            .values()
            .copied()
            .filter(|&at| at > now_ms)
            .collect();
        open.sort_unstable();
        open
    }

    fn close(&mut self, id: &str, now_ms: i64) -> Result<(), ConcurrencyError> {
        self.expire(now_ms);
        self.by_id
            .remove(id)
            .map(|_| ())
            .ok_or_else(|| ConcurrencyError::UnknownHold { id: id.to_owned() })
    }
}

fn validate_ttl(ttl_seconds: i64) -> Result<i64, ConcurrencyError> {
    if (MIN_HOLD_TTL_SECONDS..=MAX_HOLD_TTL_SECONDS).contains(&ttl_seconds) {
        Ok(ttl_seconds)
    } else {
        Err(ConcurrencyError::TtlOutOfRange { ttl_seconds })
    }
}

fn validate_id(id: &str) -> Result<(), ConcurrencyError> {
    let reason = if id.is_empty() {
        "it is empty"
    } else if id.len() > MAX_HOLD_ID_BYTES {
        "it is longer than 256 bytes"
    } else if id.chars().any(char::is_control) {
        "it contains a control character"
    } else {
        return Ok(());
    };
    Err(ConcurrencyError::InvalidHoldId {
        id: id.to_owned(),
        reason,
    })
}

fn expiry(now_ms: i64, ttl_seconds: i64) -> i64 {
    now_ms.saturating_add(ttl_seconds.saturating_mul(1000))
}

/// What a limit counts, for refusing a change of kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LimitKind {
    /// Token buckets, quotas and rolling windows: they count use.
    CountsUse,
    /// Concurrent limits: they count open holds.
    CountsHolds,
}

impl LimitKind {
    pub fn of(concurrent: bool) -> LimitKind {
        if concurrent {
            LimitKind::CountsHolds
        } else {
            LimitKind::CountsUse
        }
    }
}

impl fmt::Display for LimitKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            LimitKind::CountsUse => "a limit that counts use",
            LimitKind::CountsHolds => "a concurrent limit",
        })
    }
}

/// A limit would change to or from concurrent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("limit '{limit}' cannot change from {from} to {to} (one counts use, the other open holds): create a new limit instead")]
pub struct KindChangeError {
    pub limit: String,
    pub from: LimitKind,
    pub to: LimitKind,
}

/// `plan`'s rule: a limit keeps its kind; a change of kind is refused.
pub fn check_kind_change(
    limit: &str,
    from: LimitKind,
    to: LimitKind,
) -> Result<(), KindChangeError> {
    if from == to {
        return Ok(());
    }
    Err(KindChangeError {
        limit: limit.to_owned(),
        from,
        to,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn three() -> ConcurrencyLimit {
        ConcurrencyLimit::new(3, None).unwrap()
    }

    #[test]
    fn limit_validation() {
        assert_eq!(three().hold_ttl_seconds(), 300);
        assert_eq!(
            ConcurrencyLimit::new(0, None),
            Err(ConcurrencyError::NoSlots { slots: 0 })
        );
        for bad in [0, -1, 3_601, i64::MIN, i64::MAX] {
            assert_eq!(
                ConcurrencyLimit::new(1, Some(bad)),
                Err(ConcurrencyError::TtlOutOfRange { ttl_seconds: bad })
            );
        }
        assert!(ConcurrencyLimit::new(1, Some(1)).is_ok());
        assert!(ConcurrencyLimit::new(1, Some(3_600)).is_ok());
        assert!(ConcurrencyLimit::new(MAX_SLOTS, None).is_ok());
        assert_eq!(
            ConcurrencyLimit::new(MAX_SLOTS + 1, None),
            Err(ConcurrencyError::TooManySlots {
                slots: MAX_SLOTS + 1
            })
        );
    }

    #[test]
    fn slots_fill_and_free() {
        let limit = three();
        let mut h = Holds::new();
        for (i, id) in ["a", "b", "c"].iter().enumerate() {
            let r = limit.reserve(&mut h, id, None, 1_000 * i as i64).unwrap();
            assert!(r.allowed);
            assert_eq!(r.held, i as u64 + 1);
            assert_eq!(r.expires_at_ms, Some(1_000 * i as i64 + 300_000));
        }
        let full = limit.reserve(&mut h, "d", None, 5_000).unwrap();
        assert!(!full.allowed);
        assert_eq!(full.free(), 0);
        // The earliest hold ("a", until 300 000) decides.
        assert_eq!(full.retry_after_ms, Some(295_000));
        assert!(h.expires_at("d", 5_000).is_none());
        // A preview sees the same and takes nothing.
        assert_eq!(limit.check(&h, 5_000), full);
        limit.commit(&mut h, "b", 6_000).unwrap();
        let c = limit.check(&h, 6_000);
        assert!(c.allowed);
        assert_eq!(c.held, 2);
        assert_eq!(h.open(6_000), 2);
        limit.release(&mut h, "c", 6_000).unwrap();
        assert_eq!(h.open(6_000), 1);
    }

    #[test]
    fn expired_holds_free_their_slot_at_their_expiry() {
        let limit = ConcurrencyLimit::new(1, Some(10)).unwrap();
        let mut h = Holds::new();
        assert!(limit.reserve(&mut h, "w", None, 0).unwrap().allowed);
        assert!(!limit.check(&h, 9_999).allowed);
        assert!(limit.check(&h, 10_000).allowed);
        assert_eq!(
            limit.commit(&mut h, "w", 10_000),
            Err(ConcurrencyError::UnknownHold { id: "w".into() })
        );
        // The id can be reused once its hold expired.
        assert!(limit.reserve(&mut h, "w", None, 10_000).unwrap().allowed);
        assert_eq!(h.expire(20_000), vec!["w".to_string()]);
    }

    #[test]
    fn heartbeat_extends_and_never_shortens() {
        let limit = ConcurrencyLimit::new(1, Some(60)).unwrap();
        let mut h = Holds::new();
        limit.reserve(&mut h, "w", Some(3_600), 0).unwrap();
        assert_eq!(limit.extend(&mut h, "w", None, 1_000), Ok(3_600_000));
        assert_eq!(limit.extend(&mut h, "w", Some(3_600), 1_000), Ok(3_601_000));
        assert_eq!(
            limit.extend(&mut h, "w", Some(3_601), 1_000),
            Err(ConcurrencyError::TtlOutOfRange { ttl_seconds: 3_601 })
        );
        assert_eq!(
            limit.extend(&mut h, "x", None, 1_000),
            Err(ConcurrencyError::UnknownHold { id: "x".into() })
        );
        // Too late: the hold expired, a heartbeat cannot revive it.
        assert!(limit.extend(&mut h, "w", None, 3_601_000).is_err());
    }

    #[test]
    fn hold_id_errors() {
        let limit = three();
        let mut h = Holds::new();
        limit.reserve(&mut h, "job-1", None, 0).unwrap();
        assert_eq!(
            limit.reserve(&mut h, "job-1", None, 1),
            Err(ConcurrencyError::DuplicateHold { id: "job-1".into() })
        );
        for bad in ["", "a\nb", &"x".repeat(257)] {
            assert!(matches!(
                limit.reserve(&mut h, bad, None, 1),
                Err(ConcurrencyError::InvalidHoldId { .. })
            ));
        }
        assert!(limit.reserve(&mut h, &"é".repeat(128), None, 1).is_ok());
        assert_eq!(
            limit.reserve(&mut h, "t", Some(0), 1),
            Err(ConcurrencyError::TtlOutOfRange { ttl_seconds: 0 })
        );
        assert_eq!(
            limit.release(&mut h, "nope", 1),
            Err(ConcurrencyError::UnknownHold { id: "nope".into() })
        );
        assert_eq!(h.open(1), 2);
    }

    #[test]
    fn stored_holds_round_trip_and_are_validated() {
        let limit = three();
        let mut h = Holds::new();
        limit.reserve(&mut h, "a", None, 0).unwrap();
        limit.reserve(&mut h, "b", Some(20), 0).unwrap();
        let parts: Vec<(String, i64)> = h.iter().map(|(id, at)| (id.to_string(), at)).collect();
        assert_eq!(parts, vec![("a".into(), 300_000), ("b".into(), 20_000)]);
        assert_eq!(Holds::from_parts(parts), Ok(h));
        assert_eq!(
            Holds::from_parts([("a", 1), ("a", 2)]),
            Err(ConcurrencyError::DuplicateStoredHold { id: "a".into() })
        );
        assert!(Holds::from_parts([("", 1)]).is_err());
    }

    #[test]
    fn lowered_slots_wait_for_enough_holds() {
        let wide = ConcurrencyLimit::new(3, Some(10)).unwrap();
        let mut h = Holds::new();
        wide.reserve(&mut h, "a", None, 0).unwrap();
        wide.reserve(&mut h, "b", None, 1_000).unwrap();
        wide.reserve(&mut h, "c", None, 2_000).unwrap();
        let narrow = ConcurrencyLimit::new(1, Some(10)).unwrap();
        let c = narrow.check(&h, 2_000);
        assert!(!c.allowed);
        // With one slot, all three holds must go: the last expires at 12 000.
        assert_eq!(c.retry_after_ms, Some(10_000));
        assert!(!narrow.check(&h, 11_999).allowed);
        assert!(narrow.check(&h, 12_000).allowed);
        // With two slots, two must go: the second expires at 11 000.
        let two = ConcurrencyLimit::new(2, Some(10)).unwrap();
        assert_eq!(two.check(&h, 2_000).retry_after_ms, Some(9_000));
    }

    #[test]
    fn clock_going_backwards_never_frees_early() {
        let limit = ConcurrencyLimit::new(1, Some(10)).unwrap();
        let mut h = Holds::new();
        limit.reserve(&mut h, "w", None, 100_000).unwrap();
        let c = limit.check(&h, 50_000);
        assert!(!c.allowed);
        assert_eq!(c.retry_after_ms, Some(60_000));
        assert_eq!(limit.extend(&mut h, "w", None, 50_000), Ok(110_000));
        for now in [i64::MIN, i64::MAX] {
            let _ = limit.check(&h, now);
            let mut copy = h.clone();
            let _ = limit.reserve(&mut copy, "x", Some(3_600), now);
            let _ = limit.extend(&mut copy, "x", Some(3_600), now);
        }
        let mut h = Holds::new();
        let r = limit
            .reserve(&mut h, "late", Some(3_600), i64::MAX - 5)
            .unwrap();
        assert_eq!(r.expires_at_ms, Some(i64::MAX));
        assert_eq!(limit.check(&h, i64::MIN).retry_after_ms, Some(i64::MAX));
    }

    #[test]
    fn kind_change_is_refused() {
        assert!(check_kind_change("x", LimitKind::CountsUse, LimitKind::CountsUse).is_ok());
        assert!(check_kind_change("x", LimitKind::CountsHolds, LimitKind::CountsHolds).is_ok());
        for (from, to) in [
            (LimitKind::of(true), LimitKind::of(false)),
            (LimitKind::of(false), LimitKind::of(true)),
        ] {
            let err = check_kind_change("in_flight", from, to).unwrap_err();
            let text = err.to_string();
            assert!(text.contains("'in_flight'"), "{text}");
            assert!(text.ends_with("create a new limit instead"), "{text}");
        }
        assert_eq!(
            check_kind_change("rpm", LimitKind::CountsHolds, LimitKind::CountsUse)
                .unwrap_err()
                .to_string(),
            "limit 'rpm' cannot change from a concurrent limit to a limit that counts use \
             (one counts use, the other open holds): create a new limit instead"
        );
    }

    #[derive(Debug, Clone)]
    enum Op {
        Advance(i64),
        Reserve(usize, Option<i64>),
        Extend(usize, Option<i64>),
        Commit(usize),
        Release(usize),
        Check,
    }

    fn ttl() -> impl Strategy<Value = Option<i64>> {
        prop_oneof![
            3 => Just(None),
            3 => (1i64..120).prop_map(Some),
            1 => (1i64..=3_600).prop_map(Some),
            1 => prop_oneof![Just(0i64), Just(-3), Just(3_601)].prop_map(Some),
        ]
    }

    fn op() -> impl Strategy<Value = Op> {
        let id = 0usize..7;
        prop_oneof![
            3 => (0i64..90_000).prop_map(Op::Advance),
            1 => (-30_000i64..0).prop_map(Op::Advance),
            4 => (id.clone(), ttl()).prop_map(|(i, t)| Op::Reserve(i, t)),
            2 => (id.clone(), ttl()).prop_map(|(i, t)| Op::Extend(i, t)),
            1 => id.clone().prop_map(Op::Commit),
            1 => id.prop_map(Op::Release),
            1 => Just(Op::Check),
        ]
    }

    proptest! {
        /// Against a plain model (id → expiry, open while now < expiry): open
        /// holds never exceed the slots; expired holds always free their slot;
        /// errors come exactly when the id is open or not; and a refused
        /// reservation retried after `retry_after` (nothing else happening)
        /// is admitted, one ms earlier it is not.
        #[test]
        fn holds_follow_the_model(
            slots in 1u64..5,
            default_ttl in 1i64..100,
            ops in prop::collection::vec(op(), 1..150),
        ) {
            let limit = ConcurrencyLimit::new(slots, Some(default_ttl)).unwrap();
            let mut holds = Holds::new();
            let mut model: BTreeMap<String, i64> = BTreeMap::new();
            let mut now = 1_000_000i64;
            for op in ops {
                let open_in_model = |m: &BTreeMap<String, i64>, now: i64, id: &str| {
                    m.get(id).is_some_and(|&at| at > now)
                };
                // Writes drop what expired by their now (after argument checks).
                let prune = |m: &mut BTreeMap<String, i64>, now: i64| m.retain(|_, at| *at > now);
                match op {
                    Op::Advance(d) => now += d,
                    Op::Reserve(i, t) => {
                        let id = format!("h{i}");
                        let before = holds.clone();
                        let r = limit.reserve(&mut holds, &id, t, now);
                        let ttl_ok = (1..=3_600).contains(&t.unwrap_or(default_ttl));
                        let live = model.values().filter(|&&at| at > now).count() as u64;
                        if ttl_ok {
                            prune(&mut model, now);
                        }
                        if !ttl_ok {
                            let refused_ttl = matches!(r, Err(ConcurrencyError::TtlOutOfRange { .. }));
                            prop_assert!(refused_ttl);
                        } else if open_in_model(&model, now, &id) {
                            prop_assert_eq!(r, Err(ConcurrencyError::DuplicateHold { id }));
                        } else {
                            let r = r.unwrap();
                            prop_assert_eq!(r.allowed, live < slots);
                            if r.allowed {
                                model.insert(id, now + t.unwrap_or(default_ttl) * 1000);
                            } else {
                                let ra = r.retry_after_ms.unwrap();
                                prop_assert!(ra >= 1);
                                let mut later = before.clone();
                                let again = limit.reserve(&mut later, &id, t, now + ra).unwrap();
                                prop_assert!(again.allowed, "retry_after {} too early", ra);
                                let mut early = before;
                                let again = limit.reserve(&mut early, &id, t, now + ra - 1).unwrap();
                                prop_assert!(!again.allowed, "retry_after {} too late", ra);
                            }
                        }
                    }
                    Op::Extend(i, t) => {
                        let id = format!("h{i}");
                        let r = limit.extend(&mut holds, &id, t, now);
                        let ttl_ok = (1..=3_600).contains(&t.unwrap_or(default_ttl));
                        if ttl_ok {
                            prune(&mut model, now);
                        }
                        if !ttl_ok {
                            prop_assert!(r.is_err());
                        } else if open_in_model(&model, now, &id) {
                            let at = model.get_mut(&id).unwrap();
                            *at = (*at).max(now + t.unwrap_or(default_ttl) * 1000);
                            prop_assert_eq!(r, Ok(*at));
                        } else {
                            prop_assert_eq!(r, Err(ConcurrencyError::UnknownHold { id }));
                        }
                    }
                    Op::Commit(i) | Op::Release(i) => {
                        let id = format!("h{i}");
                        let r = if matches!(op, Op::Commit(_)) {
                            limit.commit(&mut holds, &id, now)
                        } else {
                            limit.release(&mut holds, &id, now)
                        };
                        prune(&mut model, now);
                        if open_in_model(&model, now, &id) {
                            prop_assert_eq!(r, Ok(()));
                            model.remove(&id);
                        } else {
                            prop_assert_eq!(r, Err(ConcurrencyError::UnknownHold { id }));
                        }
                    }
                    Op::Check => {
                        let live = model.values().filter(|&&at| at > now).count() as u64;
                        let before = holds.clone();
                        let c = limit.check(&holds, now);
                        prop_assert_eq!(&holds, &before);
                        prop_assert_eq!(c.allowed, live < slots);
                        if let Some(ra) = c.retry_after_ms {
                            prop_assert!(limit.check(&holds, now + ra).allowed);
                        }
                    }
                }
                // Never more open holds than slots, and exactly the model's.
                let open = holds.open(now) as u64;
                prop_assert!(open <= slots);
                let model_open = model.values().filter(|&&at| at > now).count() as u64;
                prop_assert_eq!(open, model_open);
                // Expired holds free their slot: once the latest expiry has
                // passed, every slot is free.
                let last = holds.iter().map(|(_, at)| at).max().unwrap_or(now).max(now);
                let c = limit.check(&holds, last);
                prop_assert_eq!(c.held, 0);
                prop_assert_eq!(c.free(), slots);
            }
        }
    }
}
