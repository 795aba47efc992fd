//! The decisions, as pure functions of a resolved level, the stored state, a
//! request and `now`: no I/O, so every rule is tested without a store.
//!
//! * **All or nothing.** A request is admitted only when every rolling window
//!   and concurrency limit of the level admits it; then every one records it,
//!   and when one refuses none does (a refusal writes nothing).
//! * **Costs.** Every rolling window is charged 1 (one call) unless the
//!   request names its cost (`--cost NAME=N`, 0 allowed). A concurrency limit
//!   takes one slot per reservation whatever the cost. Token buckets and
//!   quotas are listed as not enforced here (the Python library's acquire
//!   enforces them on its bucket items) and never charged.
//! * **Modes.** `consume` counts the cost in every rolling window and checks
//!   that a slot is free in every concurrency limit, taking none; `preview`
//!   decides the same and writes nothing; `reserve` also takes one slot of
//!   every concurrency limit under one reservation (the level must have one).
//! * **Flags.** A level `disabled: true` refuses everything (retrying will not
//!   help); `disabled: bypass` and soft limits count but never refuse (a full
//!   soft concurrency limit admits a reservation without a slot of it).
//! * **Housekeeping on every write.** Expired holds and forgotten closed
//!   reservations are dropped, windows that hold nothing any more and the
//!   state of limits the level no longer has are removed, so the item stays
//!   bounded: at most as many holds as slots, at most [`MAX_CLOSED`] closed.

use std::collections::{BTreeMap, BTreeSet};

use zae_limiter_engine::concurrency::{ConcurrencyLimit, Holds};
use zae_limiter_engine::rolling::{RollingCheck, RollingLimit, RollingWindow};

use super::id::ReservationId;
use super::level::{OnUnavailable, ResolvedLevel};
use super::state::{Closed, Closing, Counted, Hold, RuntimeState, MAX_CLOSED};
use super::RuntimeError;
use crate::clock::rfc3339;
use crate::items::config::StoredLimit;
use crate::items::source::Source;
use crate::manifest::model::{Disabled, LimitKind};

/// What a rolling window is charged when the request names no cost for it.
pub const DEFAULT_COST: u64 = 1;
/// The largest cost a request may name (the largest amount a limit can have).
pub const MAX_COST: u64 = 1_000_000_000_000_000;
/// The longest holder, in bytes: a reservation's (`--holder`, `"holder"`)
/// and a cooldown probe's worker id alike.
pub const MAX_HOLDER_BYTES: usize = 256;

/// A holder names who holds a reservation or a probe (a worker, a job): 1 to
/// [`MAX_HOLDER_BYTES`] bytes, no control characters (it is printed back).
pub fn check_holder(text: &str) -> Result<(), RuntimeError> {
    if text.is_empty() || text.len() > MAX_HOLDER_BYTES || text.chars().any(char::is_control) {
        return Err(RuntimeError::BadHolder(text.to_string()));
    }
    Ok(())
}

/// What the request asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Count the cost; check that a slot is free.
    Consume,
    /// Decide as `consume` would, write nothing.
    Preview,
    /// Count the cost and take a slot of every concurrency limit.
    Reserve,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Consume => "consume",
            Mode::Preview => "preview",
            Mode::Reserve => "reserve",
        }
    }
}

/// One check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub mode: Mode,
    /// Cost per limit name, in whole units.
    pub costs: BTreeMap<String, u64>,
    /// `reserve`: how long the hold lasts (default: the shortest
    /// `hold_ttl_seconds` of the level's concurrency limits).
    pub ttl_seconds: Option<i64>,
    /// `reserve`: who holds it, for operators reading the state.
    pub holder: Option<String>,
}

impl Request {
    /// A bare request: one call against every rolling window.
    pub fn new(mode: Mode) -> Request {
        Request {
            mode,
            costs: BTreeMap::new(),
            ttl_seconds: None,
            holder: None,
        }
    }

    /// A bare request, or `None` when a hold's TTL or holder is given with a
    /// mode that holds nothing (only reserve holds); each front end refuses
    /// that in the words of its own flags or fields.
    pub fn checked(mode: Mode, ttl_given: bool, holder_given: bool) -> Option<Request> {
        if mode != Mode::Reserve && (ttl_given || holder_given) {
            return None;
        }
        Some(Request::new(mode))
    }
}

/// One limit of the level in the answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimitAnswer {
    pub name: String,
    /// `rolling`, `concurrency`, or for limits not enforced here `rate`,
    /// `calendar_quota`, `session_quota`.
    pub kind: &'static str,
    /// False for token buckets and quotas.
    pub enforced_here: bool,
    pub soft: bool,
    /// Whether this limit admits the request; `None` when it was not evaluated
    /// (not enforced here, or the level is disabled).
    pub allowed: Option<bool>,
    /// What a rolling window was charged (whole units).
    pub cost: Option<u64>,
    /// The amount of a window, the slots of a concurrency limit, a bucket's capacity.
    pub amount: u64,
    /// What is left after this request: units of a window, free slots.
    pub remaining: Option<u64>,
    /// When the limit is whole again (every counted use left the window,
    /// every hold expired), if nothing else happens.
    pub resets_at_ms: Option<i64>,
    /// On a refusal: ms until this limit admits the same request, if nothing
    /// else happens. `None` with `never` when waiting cannot help.
    pub retry_after_ms: Option<i64>,
    /// The cost is above the window's amount: never admitted.
    pub never: bool,
    pub window: Option<RollingWindow>,
}

/// A reservation that was granted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Granted {
    pub id: ReservationId,
    pub expires_at_ms: i64,
    /// The concurrency limits it holds a slot of.
    pub slots: Vec<String>,
}

/// The answer to a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    pub allowed: bool,
    pub mode: Mode,
    /// The level the limits came from; `None` when the store could not be
    /// read and `on_unavailable` answered.
    pub source: Option<Source>,
    pub reservation: Option<Granted>,
    /// On a refusal, ms until the whole request would be admitted if nothing
    /// else happens (the longest wait of the refusing limits); `None` when
    /// admitted, or when waiting cannot help.
    pub retry_after_ms: Option<i64>,
    /// When every enforced limit is whole again.
    pub resets_at_ms: Option<i64>,
    pub limits: Vec<LimitAnswer>,
    /// The `disabled` flag in force (`bypass` counts without refusing;
    /// `disabled` refuses everything).
    pub disabled: Option<(Source, Disabled)>,
    /// Set when the limits were not checked: why.
    pub unavailable: Option<Unchecked>,
    pub now_ms: i64,
}

/// Why a decision was made without checking the limits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unchecked {
    /// The store or the state could not be used, and `on_unavailable`
    /// answered. The text names the store (a file, a table, an SDK error).
    Unavailable(String),
    /// The state item of the pair cannot be read, and `on_unavailable`
    /// answered. It is never overwritten: every decision on the pair
    /// answers so until an operator clears it (`zae-limiter runtime clear`).
    StateUnreadable(String),
    /// Other writers kept winning the write: refused, try again in a second.
    Contended(String),
}

impl std::fmt::Display for Unchecked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unchecked::Unavailable(why)
            | Unchecked::StateUnreadable(why)
            | Unchecked::Contended(why) => f.write_str(why),
        }
    }
}

impl Decision {
    /// The answer when the limits could not be checked (`why`).
    pub fn unavailable(policy: OnUnavailable, mode: Mode, why: Unchecked, now_ms: i64) -> Decision {
        Decision {
            allowed: policy == OnUnavailable::Allow,
            mode,
            source: None,
            reservation: None,
            retry_after_ms: None,
            resets_at_ms: None,
            limits: Vec::new(),
            disabled: None,
            unavailable: Some(why),
            now_ms,
        }
    }

    /// The limits that refused.
    pub fn refused_by(&self) -> impl Iterator<Item = &LimitAnswer> {
        self.limits.iter().filter(|l| l.allowed == Some(false))
    }

    /// Whether the level is `disabled: true`.
    pub fn is_disabled(&self) -> bool {
        matches!(self.disabled, Some((_, Disabled::Disabled)))
    }
}

fn milli(units: u64) -> i128 {
    i128::from(units) * 1000
}

/// Whole units of `milli` millitokens, rounded down (what an answer shows).
pub(crate) fn units(milli: i128) -> u64 {
    u64::try_from(milli.max(0) / 1000).unwrap_or(u64::MAX)
}

/// The get-limits word for a limit not enforced here.
fn bucket_kind(l: &StoredLimit) -> &'static str {
    if !l.reset_schedule.is_empty() {
        "calendar_quota"
    } else if l.reset_after_seconds.is_some() {
        "session_quota"
    } else {
        "rate"
    }
}

fn answer(l: &StoredLimit) -> LimitAnswer {
    let (kind, enforced_here, window) = match l.kind {
        LimitKind::Bucket => (bucket_kind(l), false, None),
        LimitKind::Rolling { window } => ("rolling", true, Some(window)),
        LimitKind::Concurrency { .. } => ("concurrency", true, None),
    };
    LimitAnswer {
        name: l.name.clone(),
        kind,
        enforced_here,
        soft: l.soft,
        allowed: None,
        cost: None,
        amount: l.capacity,
        remaining: None,
        resets_at_ms: None,
        retry_after_ms: None,
        never: false,
        window,
    }
}

fn rolling_limit(l: &StoredLimit, window: RollingWindow) -> Result<RollingLimit, RuntimeError> {
    // The codec refuses a zero amount, so this only fails on a corrupt level.
    RollingLimit::new(window.window(), milli(l.capacity)).map_err(|e| internal(&l.name, e))
}

/// Rolling window `l` of `state` (its state, empty when new) and the cost
/// `req` charges it (one call unless `--cost` says otherwise).
fn rolling_of<'s>(
    state: &'s mut RuntimeState,
    l: &StoredLimit,
    window: RollingWindow,
    req: &Request,
) -> Result<
    (
        RollingLimit,
        &'s mut zae_limiter_engine::rolling::RollingState,
        u64,
    ),
    RuntimeError,
> {
    let limit = rolling_limit(l, window)?;
    let st = state
        .rolling
        .entry(l.name.clone())
        .or_insert_with(|| limit.empty_state());
    let cost = req.costs.get(&l.name).copied().unwrap_or(DEFAULT_COST);
    Ok((limit, st, cost))
}

fn concurrency_limit(l: &StoredLimit, ttl: u64) -> Result<ConcurrencyLimit, RuntimeError> {
    let ttl = i64::try_from(ttl).unwrap_or(i64::MAX);
    ConcurrencyLimit::new(l.capacity, Some(ttl)).map_err(|e| internal(&l.name, e))
}

fn internal(name: &str, e: impl std::fmt::Display) -> RuntimeError {
    RuntimeError::StateUnreadable {
        pk: String::new(),
        sk: String::new(),
        reason: format!("limit '{name}': {e}"),
    }
}

/// The engine's holds of concurrency limit `name`: the reservations holding a slot of it.
fn holds_of(st: &RuntimeState, name: &str) -> Result<Holds, RuntimeError> {
    Holds::from_parts(
        st.holds
            .iter()
            .filter(|(_, h)| h.slots.contains(name))
            .map(|(t, h)| (t.clone(), h.expires_at)),
    )
    .map_err(|e| internal(name, e))
}

fn rolling_answer(a: &mut LimitAnswer, cost: u64, c: &RollingCheck, lenient: bool) {
    a.allowed = Some(c.allowed || lenient);
    a.cost = Some(cost);
    a.remaining = Some(units(c.amount.saturating_sub(c.used)));
    a.resets_at_ms = c.resets_at_ms;
    a.retry_after_ms = if a.allowed == Some(true) {
        None
    } else {
        c.retry_after_ms
    };
    a.never = a.allowed == Some(false) && c.retry_after_ms.is_none();
}

/// Free slots, when every hold of the limit is gone, and the engine's wait.
fn slot_answer(
    a: &mut LimitAnswer,
    allowed: bool,
    free: u64,
    holds: &Holds,
    now: i64,
    retry: Option<i64>,
) {
    a.allowed = Some(allowed);
    a.remaining = Some(free);
    a.resets_at_ms = holds.iter().map(|(_, at)| at).filter(|&at| at > now).max();
    a.retry_after_ms = if allowed { None } else { retry };
}

/// Checks the request against the level before anything is decided.
fn check_request(level: &ResolvedLevel, req: &Request) -> Result<(), RuntimeError> {
    for (name, &cost) in &req.costs {
        if level.limit(name).is_none() {
            return Err(RuntimeError::UnknownCost {
                name: name.clone(),
                level: level.source.as_str(),
                known: level.names(),
            });
        }
        check_cost(name, cost)?;
    }
    if let Some(ttl) = req.ttl_seconds {
        check_ttl("the reservation's TTL", ttl)?;
    }
    if let Some(h) = &req.holder {
        check_holder(h)?;
    }
    Ok(())
}

/// A cost of one limit: at most [`MAX_COST`] whole units, for acquire and
/// commit alike.
fn check_cost(name: &str, cost: u64) -> Result<(), RuntimeError> {
    if cost > MAX_COST {
        return Err(RuntimeError::CostTooLarge {
            name: name.to_string(),
            cost,
        });
    }
    Ok(())
}

/// Reservation `id` cannot be closed or extended, and why.
fn not_open(id: &ReservationId, namespace: &str, why: String) -> RuntimeError {
    RuntimeError::NotOpen {
        id: id.to_string(),
        namespace: namespace.to_string(),
        why,
    }
}

/// A hold's TTL: 1 to 3600 seconds.
pub fn check_ttl(what: &'static str, seconds: i64) -> Result<(), RuntimeError> {
    if (1..=3600).contains(&seconds) {
        Ok(())
    } else {
        Err(RuntimeError::TtlOutOfRange { what, seconds })
    }
}

/// Drops what no longer counts at `now`: expired holds, forgotten closed
/// reservations (and all but the newest [`MAX_CLOSED`]), and when the level is
/// known, windows of limits it no longer has (or of a changed window) and
/// windows that count nothing any more, and slots of removed concurrency limits.
fn sweep(st: &mut RuntimeState, level: Option<&ResolvedLevel>, now: i64) {
    st.holds.retain(|_, h| h.expires_at > now);
    st.closed.retain(|_, c| c.expires_at > now);
    while st.closed.len() > MAX_CLOSED {
        let oldest = st
            .closed
            .iter()
            .min_by_key(|(_, c)| c.at)
            .map(|(t, _)| t.clone());
        if let Some(t) = oldest {
            st.closed.remove(&t);
        }
    }
    let Some(level) = level else { return };
    st.rolling.retain(|name, rs| {
        let same = matches!(
            level.limit(name).map(|l| l.kind),
            Some(LimitKind::Rolling { window }) if window == rs.window()
        );
        same && rs.all_gone_at().is_some_and(|at| at > now)
    });
    let concurrent = |n: &String| {
        matches!(
            level.limit(n).map(|l| l.kind),
            Some(LimitKind::Concurrency { .. })
        )
    };
    for h in st.holds.values_mut() {
        h.slots.retain(concurrent);
    }
}

/// Decides `req` for `level` on the stored state `current` at `now`. Returns
/// the decision and, when something must be written, the next state (its
/// version is set by the caller). `id` names the hold a reservation takes.
pub fn acquire(
    level: &ResolvedLevel,
    current: &RuntimeState,
    req: &Request,
    id: &ReservationId,
    now: i64,
) -> Result<(Decision, Option<RuntimeState>), RuntimeError> {
    check_request(level, req)?;
    let mut decision = Decision {
        allowed: false,
        mode: req.mode,
        source: Some(level.source),
        reservation: None,
        retry_after_ms: None,
        resets_at_ms: None,
        limits: level.limits().iter().map(answer).collect(),
        disabled: level.disabled,
        unavailable: None,
        now_ms: now,
    };
    if decision.is_disabled() {
        return Ok((decision, None));
    }
    let concurrency_ttls: Vec<u64> = level
        .limits()
        .iter()
        .filter_map(|l| match l.kind {
            LimitKind::Concurrency { hold_ttl_seconds } => Some(hold_ttl_seconds),
            _ => None,
        })
        .collect();
    if req.mode == Mode::Reserve && concurrency_ttls.is_empty() {
        return Err(RuntimeError::NothingToReserve {
            entity: level.entity.clone(),
            resource: level.resource.clone(),
            level: level.source.as_str(),
        });
    }
    let bypass = matches!(level.disabled, Some((_, Disabled::Bypass)));
    let mut next = current.clone();
    sweep(&mut next, Some(level), now);

    // Every limit's verdict, nothing recorded yet.
    for (l, a) in level.limits().iter().zip(decision.limits.iter_mut()) {
        let lenient = l.soft || bypass;
        match l.kind {
            LimitKind::Bucket => {}
            LimitKind::Rolling { window } => {
                let (limit, st, cost) = rolling_of(&mut next, l, window, req)?;
                let c = limit
                    .check(st, milli(cost), now)
                    .map_err(|e| internal(&l.name, e))?;
                rolling_answer(a, cost, &c, lenient);
            }
            LimitKind::Concurrency { hold_ttl_seconds } => {
                let limit = concurrency_limit(l, hold_ttl_seconds)?;
                let holds = holds_of(&next, &l.name)?;
                let c = limit.check(&holds, now);
                slot_answer(
                    a,
                    c.allowed || lenient,
                    c.free(),
                    &holds,
                    now,
                    c.retry_after_ms,
                );
            }
        }
    }
    let (allowed, retry) = verdict(&decision.limits);
    decision.allowed = allowed;
    decision.retry_after_ms = retry;
    if !decision.allowed || req.mode == Mode::Preview {
        decision.resets_at_ms = resets_at(&decision.limits);
        return Ok((decision, None));
    }

    // Admitted: record everywhere.
    let ttl = req.ttl_seconds.unwrap_or_else(|| {
        concurrency_ttls
            .iter()
            .copied()
            .min()
            .map_or(0, |t| t as i64)
    });
    let mut counted = BTreeMap::new();
    let mut slots = BTreeSet::new();
    let mut wrote = false;
    for (l, a) in level.limits().iter().zip(decision.limits.iter_mut()) {
        let lenient = l.soft || bypass;
        match l.kind {
            LimitKind::Bucket => {}
            LimitKind::Rolling { window } => {
                let (limit, st, cost) = rolling_of(&mut next, l, window, req)?;
                if lenient {
                    limit
                        .record(st, milli(cost), now)
                        .map_err(|e| internal(&l.name, e))?;
                } else {
                    limit
                        .consume(st, milli(cost), now)
                        .map_err(|e| internal(&l.name, e))?;
                }
                let c = limit.check(st, 0, now).map_err(|e| internal(&l.name, e))?;
                rolling_answer(a, cost, &c, true);
                counted.insert(
                    l.name.clone(),
                    Counted {
                        window,
                        slice: st.head_slice(),
                        cost: milli(cost),
                    },
                );
                wrote = true;
            }
            LimitKind::Concurrency { hold_ttl_seconds } if req.mode == Mode::Reserve => {
                let limit = concurrency_limit(l, hold_ttl_seconds)?;
                let mut holds = holds_of(&next, &l.name)?;
                let c = limit
                    .reserve(&mut holds, &id.token, Some(ttl), now)
                    .map_err(|e| internal(&l.name, e))?;
                if c.allowed {
                    slots.insert(l.name.clone());
                }
                slot_answer(a, true, c.free(), &holds, now, None);
            }
            LimitKind::Concurrency { .. } => {}
        }
    }
    if !slots.is_empty() {
        let expires_at = now.saturating_add(ttl.saturating_mul(1000));
        decision.reservation = Some(Granted {
            id: id.clone(),
            expires_at_ms: expires_at,
            slots: slots.iter().cloned().collect(),
        });
        next.holds.insert(
            id.token.clone(),
            Hold {
                expires_at,
                created_at: now,
                holder: req.holder.clone(),
                slots,
                counted,
            },
        );
        wrote = true;
    }
    decision.resets_at_ms = resets_at(&decision.limits);
    if !wrote {
        return Ok((decision, None));
    }
    next.updated_at = now;
    Ok((decision, Some(next)))
}

/// Admitted when no limit refuses; otherwise the longest wait of the refusing
/// limits (at that instant each of them admits), `None` when one never will.
fn verdict(limits: &[LimitAnswer]) -> (bool, Option<i64>) {
    let refusing: Vec<&LimitAnswer> = limits.iter().filter(|l| l.allowed == Some(false)).collect();
    if refusing.is_empty() {
        return (true, None);
    }
    if refusing
        .iter()
        .any(|a| a.never || a.retry_after_ms.is_none())
    {
        return (false, None);
    }
    (
        false,
        refusing.iter().filter_map(|a| a.retry_after_ms).max(),
    )
}

fn resets_at(limits: &[LimitAnswer]) -> Option<i64> {
    limits.iter().filter_map(|l| l.resets_at_ms).max()
}

/// One rolling limit's cost as corrected by a commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Correction {
    pub name: String,
    /// What the reservation counted, whole units.
    pub counted: u64,
    pub actual: u64,
    /// False when the window it was counted in has passed (or the limit is
    /// no longer counted here): nothing left to correct.
    pub applied: bool,
}

/// What release or commit did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Closure {
    pub id: ReservationId,
    pub how: Closing,
    /// The concurrency limits whose slot was given back.
    pub slots: Vec<String>,
    pub corrections: Vec<Correction>,
    /// Set when the reservation had been closed before: nothing changed now.
    pub already: Option<Closed>,
}

/// Release or commit reservation `id` (commit may correct the rolling costs it
/// counted: `costs`, whole units). A reservation closed before answers with
/// `already` and changes nothing; one that expired or is unknown is an error.
pub fn close(
    current: &RuntimeState,
    id: &ReservationId,
    how: Closing,
    costs: &BTreeMap<String, u64>,
    namespace: &str,
    now: i64,
) -> Result<(Closure, Option<RuntimeState>), RuntimeError> {
    let Some(hold) = current.holds.get(&id.token) else {
        if let Some(c) = current.closed.get(&id.token).filter(|c| c.expires_at > now) {
            // A commit retried after it went through is harmless; a
            // correction after a release would be dropped without a word.
            if how == Closing::Committed && !costs.is_empty() && c.how == Closing::Released {
                return Err(not_open(
                    id,
                    namespace,
                    format!(
                        "it was released at {}, and a released reservation keeps what it counted: the correction was not made. To correct a count, commit with the actual cost (`--cost NAME=N`; over HTTP, `cost`) instead of releasing",
                        crate::clock::rfc3339(c.at)
                    ),
                ));
            }
            return Ok((
                Closure {
                    id: id.clone(),
                    how,
                    slots: Vec::new(),
                    corrections: Vec::new(),
                    already: Some(c.clone()),
                },
                None,
            ));
        }
        return Err(not_open(
            id,
            namespace,
            "no such reservation here: it was never made, or it expired or was closed long enough ago to be forgotten (an expired hold's slot is free again)".into(),
        ));
    };
    if hold.expires_at <= now {
        return Err(not_open(
            id,
            namespace,
            format!(
                "it expired at {}; its slot is free again and its work is no longer covered: reserve again",
                rfc3339(hold.expires_at)
            ),
        ));
    }
    for (name, &cost) in costs {
        if !hold.counted.contains_key(name) {
            let counted: Vec<&str> = hold.counted.keys().map(String::as_str).collect();
            return Err(RuntimeError::NotCounted {
                id: id.to_string(),
                name: name.clone(),
                counted: if counted.is_empty() {
                    "nothing".into()
                } else {
                    counted.join(", ")
                },
            });
        }
        check_cost(name, cost)?;
    }
    let mut next = current.clone();
    next.holds.remove(&id.token);
    let mut corrections = Vec::new();
    for (name, &actual) in costs {
        let c = &hold.counted[name];
        let applied = match next.rolling.get_mut(name) {
            Some(rs) if rs.window() == c.window => rs
                .correct(c.slice, c.cost, milli(actual), now)
                .map_err(|e| internal(name, e))?,
            _ => false,
        };
        corrections.push(Correction {
            name: name.clone(),
            counted: units(c.cost),
            actual,
            applied,
        });
    }
    next.closed.insert(
        id.token.clone(),
        Closed {
            how,
            at: now,
            expires_at: hold.expires_at,
        },
    );
    sweep(&mut next, None, now);
    next.updated_at = now;
    Ok((
        Closure {
            id: id.clone(),
            how,
            slots: hold.slots.iter().cloned().collect(),
            corrections,
            already: None,
        },
        Some(next),
    ))
}

/// What extend did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Extended {
    pub id: ReservationId,
    pub previous_ms: i64,
    pub expires_at_ms: i64,
}

/// Heartbeat: keep reservation `id` open until `now + ttl` (never shortened).
pub fn extend(
    current: &RuntimeState,
    id: &ReservationId,
    ttl_seconds: i64,
    namespace: &str,
    now: i64,
) -> Result<(Extended, RuntimeState), RuntimeError> {
    check_ttl("--ttl", ttl_seconds)?;
    let hold = match current.holds.get(&id.token) {
        Some(h) if h.expires_at > now => h,
        Some(h) => {
            return Err(not_open(
                id,
                namespace,
                format!(
                    "it expired at {}, so a heartbeat cannot revive it: reserve again",
                    rfc3339(h.expires_at)
                ),
            ))
        }
        None => match current.closed.get(&id.token) {
            Some(c) => {
                return Err(not_open(
                    id,
                    namespace,
                    format!("it was {} at {}", c.how.as_str(), rfc3339(c.at)),
                ))
            }
            None => return Err(not_open(
                id,
                namespace,
                "no such reservation here: it was never made, or it expired or was closed long ago"
                    .into(),
            )),
        },
    };
    // The engine's heartbeat rule, on this one hold (the slot count is irrelevant).
    let mut holds = Holds::from_parts([(id.token.clone(), hold.expires_at)])
        .map_err(|e| internal(&id.token, e))?;
    let expires_at = ConcurrencyLimit::new(1, Some(ttl_seconds))
        .and_then(|l| l.extend(&mut holds, &id.token, None, now))
        .map_err(|e| internal(&id.token, e))?;
    let mut next = current.clone();
    if let Some(h) = next.holds.get_mut(&id.token) {
        h.expires_at = expires_at;
    }
    sweep(&mut next, None, now);
    next.updated_at = now;
    Ok((
        Extended {
            id: id.clone(),
            previous_ms: hold.expires_at,
            expires_at_ms: expires_at,
        },
        next,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::state::RuntimeState;
    use proptest::prelude::*;

    const T0: i64 = 1_796_205_600_000;

    fn limit(name: &str, capacity: u64, kind: LimitKind) -> StoredLimit {
        StoredLimit {
            name: name.into(),
            capacity,
            refill_amount: if kind == LimitKind::Bucket {
                capacity
            } else {
                0
            },
            refill_period: 60,
            schedule: Vec::new(),
            reset_schedule: Vec::new(),
            reset_after_seconds: None,
            soft: false,
            kind,
        }
    }

    fn rolling(name: &str, amount: u64) -> StoredLimit {
        limit(
            name,
            amount,
            LimitKind::Rolling {
                window: RollingWindow::Minute,
            },
        )
    }

    fn slots(name: &str, n: u64, ttl: u64) -> StoredLimit {
        limit(
            name,
            n,
            LimitKind::Concurrency {
                hold_ttl_seconds: ttl,
            },
        )
    }

    fn level(limits: Vec<StoredLimit>) -> ResolvedLevel {
        let mut limits = limits;
        limits.sort_by(|a, b| a.name.cmp(&b.name));
        ResolvedLevel {
            entity: "user-1".into(),
            resource: "gpt-4".into(),
            source: Source::Resource,
            config: crate::items::config::StoredLevel {
                limits,
                ..Default::default()
            },
            disabled: None,
            on_unavailable: OnUnavailable::Block,
        }
    }

    /// A tiny in-memory "store": the state as it would be written and read back.
    struct Sim {
        level: ResolvedLevel,
        state: RuntimeState,
    }

    impl Sim {
        fn new(level: ResolvedLevel) -> Sim {
            let state = RuntimeState::empty(&level.entity, &level.resource);
            Sim { level, state }
        }

        fn put(&mut self, next: RuntimeState, now: i64) {
            let item = next.to_item("ns", now);
            self.state = RuntimeState::from_item(&item).expect("written state reads back");
        }

        fn ask(&mut self, req: &Request, now: i64) -> Decision {
            let id = ReservationId::generate("user-1", "gpt-4").unwrap();
            let (d, next) = acquire(&self.level, &self.state, req, &id, now).unwrap();
            if let Some(next) = next {
                assert!(d.allowed, "only an admitted request writes");
                assert_ne!(req.mode, Mode::Preview, "a preview writes nothing");
                self.put(next, now);
            }
            d
        }

        fn consume(&mut self, now: i64) -> Decision {
            self.ask(&Request::new(Mode::Consume), now)
        }

        fn reserve(&mut self, now: i64) -> Decision {
            self.ask(&Request::new(Mode::Reserve), now)
        }

        fn close(
            &mut self,
            d: &Decision,
            how: Closing,
            costs: &[(&str, u64)],
            now: i64,
        ) -> Result<Closure, RuntimeError> {
            let id = &d.reservation.as_ref().expect("a reservation").id;
            let costs = costs.iter().map(|(n, c)| (n.to_string(), *c)).collect();
            let (c, next) = close(&self.state, id, how, &costs, "default", now)?;
            if let Some(next) = next {
                self.put(next, now);
            }
            Ok(c)
        }
    }

    #[test]
    fn only_a_reservation_takes_a_ttl_or_holder() {
        assert_eq!(
            Request::checked(Mode::Reserve, true, true),
            Some(Request::new(Mode::Reserve))
        );
        assert_eq!(
            Request::checked(Mode::Consume, false, false),
            Some(Request::new(Mode::Consume))
        );
        assert_eq!(Request::checked(Mode::Consume, true, false), None);
        assert_eq!(Request::checked(Mode::Preview, false, true), None);
    }

    #[test]
    fn three_slots_three_reservations_then_a_refusal_until_one_goes() {
        let mut sim = Sim::new(level(vec![slots("jobs", 3, 60)]));
        let held: Vec<Decision> = (0..3).map(|i| sim.reserve(T0 + i * 1000)).collect();
        assert!(held.iter().all(|d| d.allowed && d.reservation.is_some()));
        assert_eq!(held[2].limits[0].remaining, Some(0));
        let full = sim.reserve(T0 + 5_000);
        assert!(!full.allowed);
        assert!(full.reservation.is_none());
        // The earliest hold (T0, 60 s) frees its slot first.
        assert_eq!(full.retry_after_ms, Some(55_000));
        assert_eq!(full.limits[0].retry_after_ms, Some(55_000));
        // A consume is allowed while a slot is free and takes none; none is.
        assert!(!sim.consume(T0 + 5_000).allowed);
        // Release one: exactly one more.
        let c = sim
            .close(&held[1], Closing::Released, &[], T0 + 6_000)
            .unwrap();
        assert_eq!(c.slots, ["jobs"]);
        assert!(sim.reserve(T0 + 6_000).allowed);
        assert!(!sim.reserve(T0 + 6_000).allowed);
        // At the earliest expiry, and not before, a slot frees itself.
        assert!(!sim.reserve(T0 + 59_999).allowed);
        assert!(sim.reserve(T0 + 60_000).allowed);
        assert_eq!(sim.state.holds.len(), 3, "expired holds are swept on write");
    }

    #[test]
    fn a_rolling_window_admits_its_amount_and_says_when_to_retry() {
        let mut sim = Sim::new(level(vec![
            rolling("rpm", 3),
            limit("tpm", 100, LimitKind::Bucket),
        ]));
        for i in 0..3 {
            let d = sim.consume(T0 + i * 10_000);
            assert!(d.allowed);
            assert_eq!(d.limits[0].remaining, Some(2 - i as u64));
            let tpm = &d.limits[1];
            assert_eq!(
                (tpm.kind, tpm.enforced_here, tpm.allowed),
                ("rate", false, None)
            );
        }
        let refused = sim.consume(T0 + 25_000);
        assert!(!refused.allowed);
        assert_eq!(refused.refused_by().next().unwrap().name, "rpm");
        // The use at T0 leaves when its slice's 61st successor begins.
        let ra = refused.retry_after_ms.unwrap();
        assert_eq!(T0 + 25_000 + ra, T0 + 61_000);
        assert!(
            !sim.ask(&Request::new(Mode::Preview), T0 + 25_000 + ra - 1)
                .allowed
        );
        assert!(sim.consume(T0 + 25_000 + ra).allowed);
        assert_eq!(refused.resets_at_ms, Some(T0 + 81_000));
    }

    #[test]
    fn all_or_nothing_and_preview_writes_nothing() {
        let mut sim = Sim::new(level(vec![rolling("rpm", 10), slots("jobs", 1, 60)]));
        assert!(sim.reserve(T0).allowed);
        let before = sim.state.clone();
        // The slot is taken: the window admits, the request does not, nothing is counted.
        let d = sim.reserve(T0 + 1);
        assert!(!d.allowed);
        assert_eq!(d.limits[1].allowed, Some(true));
        assert_eq!(sim.state, before);
        let p = sim.ask(&Request::new(Mode::Preview), T0 + 2);
        assert_eq!(sim.state, before);
        assert!(!p.allowed);
    }

    #[test]
    fn costs_default_to_one_call_and_name_limits_of_the_level() {
        let mut sim = Sim::new(level(vec![
            rolling("rpm", 10),
            rolling("tpm", 1000),
            slots("jobs", 2, 60),
        ]));
        let mut req = Request::new(Mode::Consume);
        req.costs.insert("tpm".into(), 600);
        req.costs.insert("jobs".into(), 7);
        let d = sim.ask(&req, T0);
        let cost = |d: &Decision, n: &str| d.limits.iter().find(|l| l.name == n).unwrap().cost;
        assert_eq!(
            (cost(&d, "rpm"), cost(&d, "tpm"), cost(&d, "jobs")),
            (Some(1), Some(600), None)
        );
        assert!(!sim.ask(&req, T0 + 1).allowed, "600 + 600 > 1000");
        req.costs.insert("tpm".into(), 0);
        assert!(sim.ask(&req, T0 + 2).allowed, "a cost of 0 fits");
        req.costs.insert("tmp".into(), 1);
        let e = acquire(
            &sim.level,
            &sim.state,
            &req,
            &ReservationId::generate("user-1", "gpt-4").unwrap(),
            T0,
        )
        .unwrap_err();
        assert!(
            e.to_string().contains(
                "'tmp' is not a limit of the resource level (its limits: jobs, rpm, tpm)"
            ),
            "{e}"
        );
        // A cost above the amount can never be admitted: no retry.
        let mut big = Request::new(Mode::Consume);
        big.costs.insert("rpm".into(), 11);
        let d = sim.ask(&big, T0 + 3);
        assert!(!d.allowed);
        assert!(d.limits.iter().any(|l| l.never));
        assert_eq!(d.retry_after_ms, None);
    }

    #[test]
    fn reserve_needs_a_concurrency_limit_and_a_valid_ttl() {
        let sim = Sim::new(level(vec![rolling("rpm", 10)]));
        let id = ReservationId::generate("user-1", "gpt-4").unwrap();
        assert!(matches!(
            acquire(
                &sim.level,
                &sim.state,
                &Request::new(Mode::Reserve),
                &id,
                T0
            ),
            Err(RuntimeError::NothingToReserve { .. })
        ));
        let mut sim = Sim::new(level(vec![slots("a", 2, 300), slots("b", 2, 120)]));
        let d = sim.reserve(T0);
        // The shortest hold TTL of the level.
        assert_eq!(d.reservation.unwrap().expires_at_ms, T0 + 120_000);
        let mut req = Request::new(Mode::Reserve);
        req.ttl_seconds = Some(3_601);
        assert!(matches!(
            acquire(&sim.level, &sim.state, &req, &id, T0),
            Err(RuntimeError::TtlOutOfRange { .. })
        ));
        req.ttl_seconds = Some(3_600);
        req.holder = Some("a\nb".into());
        assert!(matches!(
            acquire(&sim.level, &sim.state, &req, &id, T0),
            Err(RuntimeError::BadHolder { .. })
        ));
        req.holder = Some("worker-7".into());
        let d = sim.ask(&req, T0);
        assert_eq!(
            d.reservation.as_ref().unwrap().expires_at_ms,
            T0 + 3_600_000
        );
        let token = &d.reservation.unwrap().id.token;
        assert_eq!(sim.state.holds[token].holder.as_deref(), Some("worker-7"));
    }

    #[test]
    fn disabled_refuses_bypass_and_soft_count_without_refusing() {
        let mut l = level(vec![rolling("rpm", 1), slots("jobs", 1, 60)]);
        l.disabled = Some((Source::Entity, Disabled::Disabled));
        let mut sim = Sim::new(l);
        let d = sim.reserve(T0);
        assert!(!d.allowed && d.is_disabled());
        assert_eq!(d.retry_after_ms, None);
        assert!(sim.state.rolling.is_empty());

        let mut l = level(vec![rolling("rpm", 1), slots("jobs", 1, 60)]);
        l.disabled = Some((Source::Resource, Disabled::Bypass));
        let mut sim = Sim::new(l);
        assert!(sim.reserve(T0).reservation.is_some());
        let d = sim.reserve(T0 + 1);
        assert!(d.allowed, "bypass never refuses");
        assert!(
            d.reservation.is_none(),
            "but takes no slot it does not have"
        );
        assert_eq!(
            d.limits[1].remaining,
            Some(0),
            "the window is over its amount"
        );
        assert_eq!(sim.state.rolling["rpm"].used(), 2000, "and it still counts");

        let mut soft = slots("jobs", 1, 60);
        soft.soft = true;
        let mut sim = Sim::new(level(vec![soft, slots("hard", 5, 60)]));
        sim.reserve(T0);
        let d = sim.reserve(T0 + 1);
        assert!(d.allowed);
        assert_eq!(d.reservation.unwrap().slots, ["hard"]);
    }

    #[test]
    fn commit_corrects_within_the_window_and_closing_twice_is_harmless() {
        let mut sim = Sim::new(level(vec![rolling("tpm", 1000), slots("jobs", 2, 300)]));
        let mut req = Request::new(Mode::Reserve);
        req.costs.insert("tpm".into(), 800);
        let r = sim.ask(&req, T0);
        assert!(!sim.ask(&req, T0 + 1).allowed, "800 estimated");
        let c = sim
            .close(&r, Closing::Committed, &[("tpm", 300)], T0 + 5_000)
            .unwrap();
        assert_eq!(
            c.corrections,
            [Correction {
                name: "tpm".into(),
                counted: 800,
                actual: 300,
                applied: true
            }]
        );
        assert_eq!(c.slots, ["jobs"]);
        assert_eq!(sim.state.rolling["tpm"].used(), 300_000);
        // The corrected use leaves with the slice it was counted in.
        let mut one = Request::new(Mode::Preview);
        one.costs.insert("tpm".into(), 1000);
        assert!(!sim.ask(&one, T0 + 60_999).allowed);
        assert!(sim.ask(&one, T0 + 61_000).allowed);
        // Twice: harmless, says so, changes nothing.
        let before = sim.state.clone();
        let again = sim.close(&r, Closing::Released, &[], T0 + 6_000).unwrap();
        assert_eq!(
            again.already.map(|a| (a.how, a.at)),
            Some((Closing::Committed, T0 + 5_000))
        );
        assert_eq!(sim.state, before);
        // Too late to correct: the window it was counted in has passed.
        let r = sim.ask(&req, T0 + 100_000);
        let c = sim
            .close(&r, Closing::Committed, &[("tpm", 0)], T0 + 170_000)
            .unwrap();
        assert!(!c.corrections[0].applied);
        // Only what the reservation counted can be corrected.
        let r = sim.ask(&req, T0 + 200_000);
        let e = sim
            .close(&r, Closing::Committed, &[("jobs", 1)], T0 + 200_001)
            .unwrap_err();
        assert!(
            e.to_string()
                .contains("did not count limit 'jobs' (it counted: tpm)"),
            "{e}"
        );
    }

    #[test]
    fn expired_or_unknown_reservations_are_errors_and_extend_keeps_a_slot() {
        let mut sim = Sim::new(level(vec![slots("jobs", 1, 10)]));
        let r = sim.reserve(T0);
        let id = r.reservation.as_ref().unwrap().id.clone();
        // A heartbeat at 8 s keeps the slot past its first TTL.
        let (e, next) = extend(&sim.state, &id, 10, "default", T0 + 8_000).unwrap();
        assert_eq!((e.previous_ms, e.expires_at_ms), (T0 + 10_000, T0 + 18_000));
        sim.put(next, T0 + 8_000);
        assert!(!sim.reserve(T0 + 12_000).allowed);
        assert!(matches!(
            extend(&sim.state, &id, 3_601, "default", T0),
            Err(RuntimeError::TtlOutOfRange { .. })
        ));
        // Expired: an error that says so, for release and extend.
        let e = sim
            .close(&r, Closing::Released, &[], T0 + 18_000)
            .unwrap_err();
        assert!(e.to_string().contains("expired"), "{e}");
        assert!(extend(&sim.state, &id, 10, "default", T0 + 18_000).is_err());
        // Unknown.
        let other = ReservationId::generate("user-1", "gpt-4").unwrap();
        let e = close(
            &sim.state,
            &other,
            Closing::Released,
            &BTreeMap::new(),
            "default",
            T0,
        )
        .unwrap_err();
        assert!(matches!(e, RuntimeError::NotOpen { .. }));
        assert!(e.to_string().contains("never made"), "{e}");
    }

    #[test]
    fn removed_limits_and_changed_windows_are_cleaned_up() {
        let mut sim = Sim::new(level(vec![
            rolling("rpm", 10),
            rolling("old", 10),
            slots("jobs", 2, 60),
        ]));
        let r = sim.reserve(T0);
        assert_eq!(sim.state.rolling.len(), 2);
        // `old` removed, `rpm` now per hour, `jobs` removed.
        let mut hourly = rolling("rpm", 10);
        hourly.kind = LimitKind::Rolling {
            window: RollingWindow::Hour,
        };
        sim.level = level(vec![hourly, slots("other", 1, 60)]);
        sim.reserve(T0 + 1_000);
        assert_eq!(sim.state.rolling.keys().collect::<Vec<_>>(), ["rpm"]);
        assert_eq!(sim.state.rolling["rpm"].window(), RollingWindow::Hour);
        assert_eq!(
            sim.state.rolling["rpm"].used(),
            1000,
            "a changed window starts empty"
        );
        let token = &r.reservation.as_ref().unwrap().id.token;
        assert!(
            sim.state.holds[token].slots.is_empty(),
            "no slot of a removed limit"
        );
        // It can still be released (it holds nothing).
        assert!(sim
            .close(&r, Closing::Released, &[], T0 + 2_000)
            .unwrap()
            .slots
            .is_empty());
    }

    #[test]
    fn closed_reservations_are_remembered_within_bounds() {
        let mut sim = Sim::new(level(vec![slots("jobs", 1, 3_600)]));
        for i in 0..(MAX_CLOSED as i64 + 10) {
            let r = sim.reserve(T0 + i);
            sim.close(&r, Closing::Released, &[], T0 + i).unwrap();
        }
        assert_eq!(sim.state.closed.len(), MAX_CLOSED);
        assert!(sim.state.holds.is_empty());
    }

    #[derive(Debug, Clone)]
    enum Op {
        Advance(i64),
        Consume(u64),
        Reserve,
        Release(usize),
        Commit(usize, u64),
        Extend(usize),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (0i64..9_000).prop_map(Op::Advance),
            4 => (0u64..3).prop_map(Op::Consume),
            3 => Just(Op::Reserve),
            1 => (0usize..8).prop_map(Op::Release),
            1 => (0usize..8, 0u64..3).prop_map(|(i, c)| Op::Commit(i, c)),
            1 => (0usize..8).prop_map(Op::Extend),
        ]
    }

    proptest! {
        /// Any sequence of requests, each read back through the item
        /// encoding: never more open holds than slots, never more than the
        /// amount counted in any minute (corrections only ever lower a cost
        /// here), and every refusal's retry-after is admitted when retried.
        #[test]
        fn holds_and_windows_stay_within_their_limits(
            n in 1u64..4,
            amount in 1u64..8,
            ops in prop::collection::vec(op(), 1..120),
        ) {
            let mut sim = Sim::new(level(vec![rolling("rpm", amount), slots("jobs", n, 20)]));
            let mut now = T0;
            let mut admitted: Vec<(i64, u64)> = Vec::new();
            let mut reservations: Vec<Decision> = Vec::new();
            for op in ops {
                match op {
                    Op::Advance(d) => now += d,
                    Op::Consume(cost) => {
                        let mut req = Request::new(Mode::Consume);
                        req.costs.insert("rpm".into(), cost);
                        let before = sim.state.clone();
                        let d = sim.ask(&req, now);
                        if d.allowed {
                            admitted.push((now, cost));
                        } else if let Some(ra) = d.retry_after_ms {
                            let mut s2 = Sim { level: sim.level.clone(), state: before };
                            prop_assert!(s2.ask(&req, now + ra).allowed, "retry after {ra} ms refused");
                        }
                    }
                    Op::Reserve => {
                        let d = sim.reserve(now);
                        if d.allowed {
                            admitted.push((now, 1));
                            reservations.push(d);
                        }
                    }
                    Op::Release(_) | Op::Extend(_) | Op::Commit(..) if reservations.is_empty() => {}
                    Op::Release(i) => {
                        let r = &reservations[i % reservations.len()].clone();
                        let _ = sim.close(r, Closing::Released, &[], now);
                    }
                    Op::Commit(i, cost) => {
                        let r = &reservations[i % reservations.len()].clone();
                        if let Ok(c) = sim.close(r, Closing::Committed, &[("rpm", cost.min(1))], now) {
                            if c.already.is_none() && c.corrections[0].applied && cost == 0 {
                                let at = r.now_ms;
                                if let Some(p) = admitted.iter().position(|&(t, c)| t == at && c == 1) {
                                    admitted[p].1 = 0;
                                }
                            }
                        }
                    }
                    Op::Extend(i) => {
                        let id = reservations[i % reservations.len()].reservation.as_ref().unwrap().id.clone();
                        if let Ok((_, next)) = extend(&sim.state, &id, 20, "default", now) {
                            sim.put(next, now);
                        }
                    }
                }
                let open = sim.state.holds.values().filter(|h| h.expires_at > now && h.slots.contains("jobs")).count() as u64;
                prop_assert!(open <= n, "{open} holds open, {n} slots");
                let in_minute: u64 = admitted.iter().filter(|(t, _)| *t > now - 60_000).map(|(_, c)| c).sum();
                prop_assert!(in_minute <= amount, "{in_minute} admitted in a minute, amount {amount}");
            }
        }
    }
}
