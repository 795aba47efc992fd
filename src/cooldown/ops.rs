//! The cooldown operations over any [`Store`]: record a refusal, check, take
//! and settle the recovery probe, list and clear. Every change is a
//! read-compute-conditional-write loop (see the module doc of [`crate::cooldown`]).

use std::time::Duration;

use zae_limiter_engine::cooldown::{
    assess, may_probe, resume_at, seed_of, Basis, EpochMs, Hint, Policy,
};
use zae_limiter_engine::duration::human_duration;

use super::scope::Scope;
use super::state::{self, CooldownState, Lease, Phase};
use super::CooldownError;
use crate::clock::rfc3339;
use crate::items::read::Unreadable;
use crate::store::backoff;
use crate::store::{AttrValue, Condition, Index, Item, Key, Store, StoreError, WriteOp};

/// How often a change is recomputed after losing a race before giving up.
const MAX_ATTEMPTS: u32 = 64;
/// DynamoDB's BatchGetItem limit.
const BATCH: usize = 100;

/// A provider's refusal, as recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// A quota or rate refusal (429, 503, …); the hints say when it resets.
    Quota {
        status: Option<u16>,
        hints: Vec<Hint>,
        received_at: EpochMs,
        /// The provider's error type, e.g. `usage_limit_reached`.
        label: Option<String>,
    },
    /// An authentication rejection (401/403): an operator must act; no timed retry.
    Auth { status: u16, received_at: EpochMs },
}

/// The answer to `probe`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProbeResult {
    /// Nothing is recorded for the scope: call freely, no probe needed.
    NoCooldown,
    /// This worker holds the single recovery probe until the lease expires.
    Won { lease: Lease, state: CooldownState },
    /// Not yet: the deadline (plus this worker's jitter) or another worker's live lease.
    Wait {
        until: EpochMs,
        probe_holder: Option<String>,
        state: CooldownState,
    },
    /// An operator must act first.
    NeedsOperator { state: CooldownState },
}

/// What the recovery probe found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Settlement {
    /// The call succeeded: the cooldown ends.
    Ok,
    /// Refused again for quota: record the new deadline.
    Quota {
        hints: Vec<Hint>,
        label: Option<String>,
        /// When the refusal was received (relative hints count from it).
        received_at: EpochMs,
    },
    /// Credentials rejected: escalate.
    Auth,
}

/// The answer to `settle`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SettleResult {
    /// The cooldown is gone.
    Cleared,
    /// A new deadline (or an escalation) is stored.
    Recorded(CooldownState),
    /// The probe succeeded but the scope was escalated meanwhile; the lease is
    /// released and the escalation kept for an operator.
    OperatorKept(CooldownState),
}

/// One row of `list`: a scope and its state, or why its item cannot be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    pub scope: String,
    pub state: Result<CooldownState, Unreadable>,
}

/// The state item of `scope`, which must name that scope.
fn read_state(item: &Item, scope: &str) -> Result<CooldownState, Unreadable> {
    let st = CooldownState::from_item(item)?;
    if st.scope != scope {
        return Err(format!(
            "attribute 'scope' is '{}', not the scope of its key",
            st.scope
        )
        .into());
    }
    Ok(st)
}

/// A read whose item the store cannot decode at all (a local row that is
/// not a typed-JSON item) as that item's unreadable state, like one that
/// decodes but is wrong; any other store failure stays one.
fn undecodable(
    read: Result<Option<Item>, StoreError>,
) -> Result<Result<Option<Item>, Unreadable>, StoreError> {
    match read {
        Ok(item) => Ok(Ok(item)),
        Err(StoreError::Corrupt { reason, .. }) => Ok(Err(Unreadable(format!(
            "the stored item cannot be decoded: {reason}"
        )))),
        Err(e) => Err(e),
    }
}

/// Cooldowns of one namespace in one store.
pub struct Cooldowns<'a> {
    store: &'a dyn Store,
    ns: String,
    policy: Policy,
}

enum Step<T> {
    /// Nothing to write.
    Keep(T),
    /// Write this state (its version is set by the loop); the answer is
    /// made from the state as written, so it reports the version stored.
    Put(CooldownState, Box<dyn FnOnce(CooldownState) -> T>),
    /// Remove the item.
    Delete(T),
}

impl<'a> Cooldowns<'a> {
    /// `ns` is the namespace id (not its name).
    pub fn new(store: &'a dyn Store, ns: impl Into<String>, policy: Policy) -> Self {
        Cooldowns {
            store,
            ns: ns.into(),
            policy,
        }
    }

    /// The scope's state (strongly consistent); `None` when nothing is recorded.
    pub fn load(&self, scope: &Scope) -> Result<Option<CooldownState>, CooldownError> {
        let key = state::key(&self.ns, scope.as_str());
        let corrupt = |e: Unreadable| CooldownError::Corrupt {
            scope: scope.to_string(),
            pk: key.pk.clone(),
            sk: key.sk.clone(),
            reason: e.to_string(),
        };
        let Some(item) = undecodable(self.store.get(&key, true))?.map_err(corrupt)? else {
            return Ok(None);
        };
        let st = read_state(&item, scope.as_str()).map_err(corrupt)?;
        Ok(Some(st))
    }

    /// Folds a refusal into the stored deadline (never shortening it).
    pub fn record(
        &self,
        scope: &Scope,
        refusal: &Refusal,
        now: EpochMs,
    ) -> Result<CooldownState, CooldownError> {
        self.change(scope, |cur| {
            let next = apply_refusal(&self.policy, scope, cur, refusal, now)?;
            Ok(Step::Put(next, Box::new(|written| written)))
        })
    }

    /// Tries to take the single recovery probe for `lease_ms`.
    pub fn probe(
        &self,
        scope: &Scope,
        holder: &str,
        lease_ms: i64,
        now: EpochMs,
    ) -> Result<ProbeResult, CooldownError> {
        let seed = seed_of(scope.as_str());
        self.change(scope, |cur| {
            let Some(cur) = cur else {
                return Ok(Step::Keep(ProbeResult::NoCooldown));
            };
            if cur.phase == Phase::NeedsOperator {
                return Ok(Step::Keep(ProbeResult::NeedsOperator {
                    state: cur.clone(),
                }));
            }
            let eligible = resume_at(cur.not_before, holder, seed, self.policy.max_jitter_ms);
            if !may_probe(now, eligible) {
                return Ok(Step::Keep(ProbeResult::Wait {
                    until: eligible,
                    probe_holder: None,
                    state: cur.clone(),
                }));
            }
            if let Some(l) = cur.live_lease(now) {
                if l.holder != holder {
                    return Ok(Step::Keep(ProbeResult::Wait {
                        until: l.expires_at,
                        probe_holder: Some(l.holder.clone()),
                        state: cur.clone(),
                    }));
                }
            }
            let lease = Lease {
                holder: holder.to_string(),
                expires_at: now.saturating_add(lease_ms),
            };
            let mut next = cur.clone();
            next.probe = Some(lease.clone());
            next.updated_at = now;
            Ok(Step::Put(
                next,
                Box::new(move |state| ProbeResult::Won { lease, state }),
            ))
        })
    }

    /// Ends `holder`'s probe with what it found.
    pub fn settle(
        &self,
        scope: &Scope,
        holder: &str,
        settlement: &Settlement,
        now: EpochMs,
    ) -> Result<SettleResult, CooldownError> {
        self.change(scope, |cur| {
            let not_holder = |held: String| CooldownError::NotHolder {
                scope: scope.to_string(),
                holder: holder.to_string(),
                held,
            };
            let Some(cur) = cur else {
                return Err(not_holder("no cooldown is recorded".into()));
            };
            match &cur.probe {
                Some(l) if l.holder == holder => {}
                Some(l) => return Err(not_holder(format!("it is held by '{}'", l.holder))),
                None => return Err(not_holder("nobody holds it".into())),
            }
            let refusal = match settlement {
                Settlement::Ok if cur.phase == Phase::NeedsOperator => {
                    let mut next = cur.clone();
                    next.probe = None;
                    next.updated_at = now;
                    return Ok(Step::Put(next, Box::new(SettleResult::OperatorKept)));
                }
                Settlement::Ok => return Ok(Step::Delete(SettleResult::Cleared)),
                Settlement::Quota {
                    hints,
                    label,
                    received_at,
                } => Refusal::Quota {
                    status: None,
                    hints: hints.clone(),
                    received_at: *received_at,
                    label: label.clone(),
                },
                Settlement::Auth => Refusal::Auth {
                    status: 401,
                    received_at: now,
                },
            };
            let mut next = apply_refusal(&self.policy, scope, Some(cur), &refusal, now)?;
            next.probe = None;
            match settlement {
                Settlement::Auth => {
                    next.reason = "recovery probe: credentials rejected; needs intervention".into();
                }
                _ if cur.phase == Phase::Cooling => {
                    next.reason = format!("recovery probe {}", next.reason);
                }
                _ => {}
            }
            Ok(Step::Put(next, Box::new(SettleResult::Recorded)))
        })
    }

    /// Removes the scope's cooldown, readable or not. Returns whether one existed.
    pub fn clear(&self, scope: &Scope) -> Result<bool, CooldownError> {
        let key = state::key(&self.ns, scope.as_str());
        let removed = crate::store::remove(self.store, &key)?;
        Ok(removed != crate::store::Removed::Nothing)
    }

    /// Every cooldown of the namespace, by scope.
    pub fn list(&self) -> Result<Vec<Listed>, CooldownError> {
        let prefix = state::pk_prefix(&self.ns);
        let keys: Vec<Key> = self
            .store
            .query_index(Index::Gsi4, &self.ns, &prefix)?
            .into_iter()
            .filter(|k| k.sk == state::SK && k.pk.starts_with(&prefix))
            .collect();
        let mut out = Vec::new();
        for chunk in keys.chunks(BATCH) {
            let items: Vec<Result<Option<Item>, Unreadable>> =
                match self.store.batch_get(chunk, true) {
                    Ok(items) => items.into_iter().map(Ok).collect(),
                    // One item the store cannot decode fails the whole batch:
                    // read the chunk's keys one by one, so only its row is
                    // unreadable and the list goes on.
                    Err(StoreError::Corrupt { .. }) => chunk
                        .iter()
                        .map(|k| undecodable(self.store.get(k, true)))
                        .collect::<Result<_, _>>()?,
                    Err(e) => return Err(e.into()),
                };
            for (key, item) in chunk.iter().zip(items) {
                let scope = key.pk[prefix.len()..].to_string();
                let state = match item {
                    Ok(None) => continue,
                    Ok(Some(item)) => read_state(&item, &scope),
                    Err(why) => Err(why),
                };
                out.push(Listed { scope, state });
            }
        }
        out.sort_by(|a, b| a.scope.cmp(&b.scope));
        Ok(out)
    }

    /// Read, decide, write conditioned on the version read; on a lost race, again.
    fn change<T>(
        &self,
        scope: &Scope,
        mut decide: impl FnMut(Option<&CooldownState>) -> Result<Step<T>, CooldownError>,
    ) -> Result<T, CooldownError> {
        let key = state::key(&self.ns, scope.as_str());
        for attempt in 0..MAX_ATTEMPTS {
            let current = self.load(scope)?;
            let condition = match &current {
                None => Condition::NotExists,
                Some(c) => Condition::AttrEquals("version".into(), AttrValue::n(c.version)),
            };
            let (op, out) = match decide(current.as_ref())? {
                Step::Keep(out) => return Ok(out),
                Step::Put(mut next, answer) => {
                    // from_item refuses u64::MAX, so this cannot overflow; a
                    // new item does not start at 1 ([`crate::store::first_version`]).
                    next.version = match &current {
                        Some(c) => c.version.saturating_add(1),
                        None => crate::store::first_version()?,
                    };
                    let op = WriteOp::Put {
                        item: next.to_item(&self.ns),
                        condition: Some(condition),
                    };
                    (op, answer(next))
                }
                Step::Delete(out) => {
                    if current.is_none() {
                        return Ok(out);
                    }
                    let op = WriteOp::Delete {
                        key: key.clone(),
                        condition: Some(condition),
                    };
                    (op, out)
                }
            };
            match self.store.write(op) {
                Ok(_) => return Ok(out),
                Err(StoreError::ConditionFailed { .. }) => {
                    // Someone else wrote first; spread the retries a little.
                    let spread = u64::from(std::process::id() % 7) + u64::from(attempt % 5);
                    backoff::pause(Duration::from_millis(1 + spread));
                }
                Err(e) => return Err(e.into()),
            }
        }
        Err(CooldownError::Contended {
            scope: scope.to_string(),
            attempts: MAX_ATTEMPTS,
        })
    }
}

/// The state after a refusal: the engine's deadline folded into `cur`.
/// An escalation (auth, implausible reset) is never downgraded by a later refusal.
pub fn apply_refusal(
    policy: &Policy,
    scope: &Scope,
    cur: Option<&CooldownState>,
    refusal: &Refusal,
    now: EpochMs,
) -> Result<CooldownState, CooldownError> {
    let existing = cur.map_or(0, |c| c.not_before);
    let escalated = cur.filter(|c| c.phase == Phase::NeedsOperator);
    let mut next = CooldownState {
        scope: scope.to_string(),
        phase: Phase::Cooling,
        not_before: existing,
        reason: String::new(),
        backoff_attempt: cur.map_or(0, |c| c.backoff_attempt),
        received_at: 0,
        updated_at: now,
        version: cur.map_or(0, |c| c.version),
        probe: cur.and_then(|c| c.probe.clone()),
    };
    match refusal {
        Refusal::Auth {
            status,
            received_at,
        } => {
            next.phase = Phase::NeedsOperator;
            next.received_at = *received_at;
            next.reason = format!("status {status}: credentials rejected; needs intervention");
        }
        Refusal::Quota {
            status,
            hints,
            received_at,
            label,
        } => {
            let a = assess(existing, *received_at, hints, next.backoff_attempt, policy)?;
            next.not_before = a.not_before;
            next.received_at = *received_at;
            let mut words = vec![match status {
                Some(s) => format!("status {s}"),
                None => "refused".to_string(),
            }];
            words.extend(label.iter().cloned());
            match a.basis {
                Basis::Provider => {
                    next.backoff_attempt = 0;
                    words.extend(
                        hints
                            .iter()
                            .map(|h| format!("{} {}", h.field(), h.value().trim())),
                    );
                }
                Basis::Backoff { attempt } => {
                    next.backoff_attempt = attempt.saturating_add(1);
                    words.push(format!(
                        "no reset given: backoff step {} ({})",
                        attempt.saturating_add(1),
                        human_duration(policy.backoff.delay_ms(attempt))
                    ));
                }
            }
            next.reason = words.join("; ");
            if let Some(far) = a.implausible {
                next.phase = Phase::NeedsOperator;
                // No ceiling admits a reset past the last instant: only clear.
                let (how_far, fix) = if far.beyond_range {
                    (
                        format!(
                            "past {}, the last instant the tool can represent",
                            rfc3339(far.deadline)
                        ),
                        "clear it",
                    )
                } else {
                    (
                        format!(
                            "{} after the response",
                            human_duration(far.after_received_ms)
                        ),
                        "clear it or raise ZAEL_COOLDOWN_CEILING",
                    )
                };
                next.reason = format!(
                    "{}; implausible reset {how_far} (ceiling {}): confirm with the provider, then {fix}",
                    next.reason,
                    human_duration(far.ceiling_ms)
                );
            }
        }
    }
    if let Some(prev) = escalated {
        next.phase = Phase::NeedsOperator;
        if !matches!(refusal, Refusal::Auth { .. }) {
            next.reason = prev.reason.clone();
        }
    }
    Ok(next)
}

#[cfg(test)]
mod tests {
    use super::*;
    use zae_limiter_engine::duration::{DAY_MS, SECOND_MS};

    fn scope() -> Scope {
        Scope::parse("openai/acct-42/gpt-4").unwrap()
    }

    fn quota(hints: Vec<Hint>, received_at: EpochMs) -> Refusal {
        Refusal::Quota {
            status: Some(429),
            hints,
            received_at,
            label: None,
        }
    }

    /// A 429 with `hints`, received and applied at `at`, after `prev`, under
    /// the default policy.
    fn refused(
        prev: Option<&CooldownState>,
        hints: Vec<Hint>,
        at: EpochMs,
    ) -> Result<CooldownState, CooldownError> {
        apply_refusal(&Policy::default(), &scope(), prev, &quota(hints, at), at)
    }

    #[test]
    fn refusals_fold_monotonically() {
        let a = refused(None, vec![Hint::resets_in_seconds("202825")], 1_000_000).unwrap();
        assert_eq!(a.not_before, 203_830_000);
        assert_eq!(a.phase, Phase::Cooling);
        assert_eq!(a.reason, "status 429; resets_in_seconds 202825");
        let b = refused(Some(&a), vec![Hint::retry_after("3000")], 2_000_000).unwrap();
        assert_eq!(b.not_before, 203_830_000);
    }

    #[test]
    fn hintless_refusals_step_the_backoff() {
        let p = Policy::default();
        let a = refused(None, vec![], 0).unwrap();
        assert_eq!(a.not_before, 60 * SECOND_MS + p.margin_ms);
        assert_eq!(a.backoff_attempt, 1);
        assert!(a.reason.contains("backoff step 1 (1m)"), "{}", a.reason);
        let t = a.not_before;
        let b = refused(Some(&a), vec![], t).unwrap();
        assert_eq!(b.not_before, t + 120 * SECOND_MS + p.margin_ms);
        assert_eq!(b.backoff_attempt, 2);
        // A hint resets the steps.
        let c = refused(Some(&b), vec![Hint::retry_after("10")], b.not_before).unwrap();
        assert_eq!(c.backoff_attempt, 0);
    }

    #[test]
    fn escalations_stick() {
        let p = Policy::default();
        let s = scope();
        let auth = apply_refusal(
            &p,
            &s,
            None,
            &Refusal::Auth {
                status: 403,
                received_at: 5,
            },
            5,
        )
        .unwrap();
        assert_eq!(auth.phase, Phase::NeedsOperator);
        assert_eq!(
            auth.reason,
            "status 403: credentials rejected; needs intervention"
        );
        let later = refused(Some(&auth), vec![Hint::retry_after("60")], 10).unwrap();
        assert_eq!(later.phase, Phase::NeedsOperator);
        assert_eq!(later.reason, auth.reason);
        assert_eq!(later.not_before, 60_010 + p.margin_ms);
    }

    #[test]
    fn implausible_resets_are_kept_and_escalated() {
        let p = Policy::default();
        let forty = (40 * 86_400).to_string();
        let st = refused(None, vec![Hint::resets_in_seconds(forty)], 0).unwrap();
        assert_eq!(st.phase, Phase::NeedsOperator);
        assert_eq!(st.not_before, 40 * DAY_MS + p.margin_ms);
        assert!(st.reason.contains("implausible reset 40d"), "{}", st.reason);
        assert!(st.reason.contains("ceiling 31d"), "{}", st.reason);
    }

    #[test]
    fn bad_hints_are_errors() {
        let r = refused(None, vec![Hint::resets_in_seconds("NaN")], 0);
        assert!(matches!(r, Err(CooldownError::Hint(_))));
    }
}
