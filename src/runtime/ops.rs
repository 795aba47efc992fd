//! The runtime over any [`Store`]: every change reads the state item strongly
//! consistent, lets [`super::decide`] compute the next state, and writes it
//! with one PutItem conditioned on the version it read
//! (`attribute_not_exists(PK)` for a new item). A failed condition means
//! another process wrote first: the decision is made again on the fresh state
//! after the stores' jittered backoff ([`crate::store::backoff`]). A refusal,
//! a preview and a consume that counts nothing write nothing. The read and
//! the write are one [`Store::read_then_write`]: on the local store one
//! SQLite transaction, which no other process's write can come between.
//!
//! Requests per call: [`acquire`] reads the config items and the state in one
//! BatchGetItem and writes once; [`decide`] (a level resolved earlier) reads
//! the state with one GetItem and writes once; release, commit and extend
//! read and write the state item alone.

use std::collections::BTreeMap;

use super::decide::{self, Closure, Decision, Extended, Mode, Request, Unchecked};
use super::id::ReservationId;
use super::level::{self, OnUnavailable, ResolvedLevel, DEFAULT_ON_UNAVAILABLE};
use super::state::{self, Closing, RuntimeState};
use super::RuntimeError;
use crate::items::{keys, namespace, version};
use crate::plan::version::check_usable;
use crate::store::backoff::{self, backoff};
use crate::store::{AttrValue, Condition, Item, Key, Removed, Store, StoreError, WriteOp};

/// Decisions recomputed after lost races before giving up (about 10 s of
/// backoff in all).
const MAX_ATTEMPTS: u32 = 12;

/// A namespace: its name (for messages) and its id (in keys).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Namespace {
    pub name: String,
    pub id: String,
}

/// Resolves namespace `name`, refusing a table this client may not use: the
/// forward record and the version record in one batch read. A namespace that
/// is not registered is an error, never an empty namespace.
pub fn namespace_id(store: &dyn Store, name: &str) -> Result<Namespace, RuntimeError> {
    keys::validate_namespace_name(name)?;
    let items = store.batch_get(&[keys::namespace_key(name), keys::version_key()], false)?;
    let record = items[1].as_ref().map(version::from_item);
    check_usable(record.as_ref(), store)?;
    let id = items[0]
        .as_ref()
        .and_then(namespace::active_id)
        .ok_or_else(|| RuntimeError::NamespaceNotFound(name.to_string()))?;
    Ok(Namespace {
        name: name.to_string(),
        id,
    })
}

/// Resolves the level of (entity, resource): config only, one batch read.
pub fn resolve(
    store: &dyn Store,
    ns: &Namespace,
    entity: &str,
    resource: &str,
) -> Result<ResolvedLevel, RuntimeError> {
    level::resolve(store, &ns.id, entity, resource)
}

/// Resolves the level and decides in one: the config items and the state
/// item in one (strongly consistent) batch read, then at most one write.
/// When the store cannot be read or the state is unreadable, the answer is
/// the system level's `on_unavailable` (`block` when even the config could
/// not be read), with `unavailable` saying why.
pub fn acquire(
    store: &dyn Store,
    ns: &Namespace,
    entity: &str,
    resource: &str,
    req: &Request,
    now: i64,
) -> Result<Decision, RuntimeError> {
    level::validate(entity, resource)?;
    let levels = level::config_keys(&ns.id, entity, resource);
    let mut keys: Vec<Key> = levels.iter().map(|(_, k)| k.clone()).collect();
    let state_key = state::key(&ns.id, entity, resource);
    keys.push(state_key.clone());
    let (items, state_item) = match store.batch_get(&keys, true) {
        Ok(mut items) => {
            let state_item = items.pop().flatten();
            (items, Ok(state_item))
        }
        // A state row the local store cannot decode fails the whole batch:
        // the config alone is read again, so the level's `on_unavailable`
        // answers, as it does for a state item that decodes but is unreadable.
        Err(StoreError::Corrupt { pk, sk, reason }) if pk == state_key.pk => {
            match store.batch_get(&keys[..levels.len()], true) {
                Ok(items) => (items, Err(RuntimeError::StateUnreadable { pk, sk, reason })),
                Err(e) => return degrade(e.into(), DEFAULT_ON_UNAVAILABLE, req, None, now),
            }
        }
        Err(e) => return degrade(e.into(), DEFAULT_ON_UNAVAILABLE, req, None, now),
    };
    let level = level::from_items(entity, resource, &levels, &items)?;
    let out = state_item.and_then(|st| decide_from(store, ns, &level, req, Some(st), now));
    degrade_result(out, &level, req, now)
}

/// Decides on a level resolved earlier (a server may cache it; the state is
/// always read): one strongly consistent read, at most one write.
pub fn decide(
    store: &dyn Store,
    ns: &Namespace,
    level: &ResolvedLevel,
    req: &Request,
    now: i64,
) -> Result<Decision, RuntimeError> {
    let out = decide_from(store, ns, level, req, None, now);
    degrade_result(out, level, req, now)
}

fn decide_from(
    store: &dyn Store,
    ns: &Namespace,
    level: &ResolvedLevel,
    req: &Request,
    first: Option<Option<Item>>,
    now: i64,
) -> Result<Decision, RuntimeError> {
    let id =
        ReservationId::generate(&level.entity, &level.resource).map_err(RuntimeError::Random)?;
    change(store, ns, &id, first, now, |cur| {
        decide::acquire(level, cur, req, &id, now)
    })
}

fn degrade_result(
    out: Result<Decision, RuntimeError>,
    level: &ResolvedLevel,
    req: &Request,
    now: i64,
) -> Result<Decision, RuntimeError> {
    match out {
        Err(e) => degrade(e, level.on_unavailable, req, Some(level), now),
        ok => ok,
    }
}

/// `on_unavailable` answers a failure to reach the store or read the state;
/// every other failure stays an error.
fn degrade(
    e: RuntimeError,
    policy: OnUnavailable,
    req: &Request,
    level: Option<&ResolvedLevel>,
    now: i64,
) -> Result<Decision, RuntimeError> {
    if !e.is_unavailable() {
        return Err(e);
    }
    let mut d = Decision::unavailable(policy, req.mode, unchecked(&e), now);
    d.source = level.map(|l| l.source);
    Ok(d)
}

/// Why an unavailable failure left the limits unchecked.
fn unchecked(e: &RuntimeError) -> Unchecked {
    match e {
        RuntimeError::StateUnreadable { .. } => Unchecked::StateUnreadable(e.to_string()),
        _ => Unchecked::Unavailable(e.to_string()),
    }
}

/// The answer of a check whose runtime call failed, as every front end gives
/// it (`acquire`, `serve`): a store that could not be read before the system
/// level was blocks ([`DEFAULT_ON_UNAVAILABLE`]); other writers that kept
/// winning the write get a refusal with a retry-after of one second, saying
/// why. Every other failure stays an error.
pub fn refusal_for(e: RuntimeError, mode: Mode, now: i64) -> Result<Decision, RuntimeError> {
    match e {
        e if e.is_unavailable() => Ok(Decision::unavailable(
            DEFAULT_ON_UNAVAILABLE,
            mode,
            unchecked(&e),
            now,
        )),
        e @ RuntimeError::Contended { .. } => {
            let why = Unchecked::Contended(e.to_string());
            let mut d = Decision::unavailable(DEFAULT_ON_UNAVAILABLE, mode, why, now);
            d.retry_after_ms = Some(1_000);
            Ok(d)
        }
        e => Err(e),
    }
}

/// Gives reservation `id`'s slots back (its counted cost stays counted).
pub fn release(
    store: &dyn Store,
    ns: &Namespace,
    id: &ReservationId,
    now: i64,
) -> Result<Closure, RuntimeError> {
    close(store, ns, id, Closing::Released, &BTreeMap::new(), now)
}

/// The work of reservation `id` is done: its slots go back and, for the
/// rolling limits named in `costs` (whole units), what it counted is
/// corrected to the actual cost within the window it was counted in.
pub fn commit(
    store: &dyn Store,
    ns: &Namespace,
    id: &ReservationId,
    costs: &BTreeMap<String, u64>,
    now: i64,
) -> Result<Closure, RuntimeError> {
    close(store, ns, id, Closing::Committed, costs, now)
}

fn close(
    store: &dyn Store,
    ns: &Namespace,
    id: &ReservationId,
    how: Closing,
    costs: &BTreeMap<String, u64>,
    now: i64,
) -> Result<Closure, RuntimeError> {
    change(store, ns, id, None, now, |cur| {
        decide::close(cur, id, how, costs, &ns.name, now)
    })
}

/// Heartbeat: keeps reservation `id` open until `now + ttl_seconds`.
pub fn extend(
    store: &dyn Store,
    ns: &Namespace,
    id: &ReservationId,
    ttl_seconds: i64,
    now: i64,
) -> Result<Extended, RuntimeError> {
    change(store, ns, id, None, now, |cur| {
        decide::extend(cur, id, ttl_seconds, &ns.name, now).map(|(e, next)| (e, Some(next)))
    })
}

/// The stored state of (entity, resource), for an operator to look at;
/// `None` when nothing is stored (nothing counted, nothing held). An item
/// that cannot be read is [`RuntimeError::StateUnreadable`].
pub fn inspect(
    store: &dyn Store,
    ns: &Namespace,
    entity: &str,
    resource: &str,
) -> Result<Option<RuntimeState>, RuntimeError> {
    level::validate(entity, resource)?;
    let key = state::key(&ns.id, entity, resource);
    match store.get(&key, true) {
        Ok(item) => item.map(|i| load(&i, &key, entity, resource)).transpose(),
        Err(StoreError::Corrupt { pk, sk, reason }) => {
            Err(RuntimeError::StateUnreadable { pk, sk, reason })
        }
        Err(e) => Err(e.into()),
    }
}

/// What [`clear`] removed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cleared {
    /// Nothing was stored.
    Nothing,
    /// The state as it was: its holds are let go, its windows empty.
    State(Box<RuntimeState>),
    /// An item that could not be read (why).
    Unreadable(String),
}

/// Removes the state of (entity, resource), readable or not: every rolling
/// window starts empty and every hold is let go (a holder still working is
/// no longer counted; its `reservation release` then says "unknown"). The
/// operator's remedy for a state nothing else overwrites: an unreadable
/// item, or windows a clock far ahead counted in. A decision racing the
/// delete conditions its write on the version it read, so it decides again
/// on the empty state.
pub fn clear(
    store: &dyn Store,
    ns: &Namespace,
    entity: &str,
    resource: &str,
) -> Result<Cleared, RuntimeError> {
    level::validate(entity, resource)?;
    let key = state::key(&ns.id, entity, resource);
    Ok(match crate::store::remove(store, &key)? {
        Removed::Nothing => Cleared::Nothing,
        Removed::Undecodable(why) => Cleared::Unreadable(why),
        Removed::Item(item) => match load(&item, &key, entity, resource) {
            Ok(st) => Cleared::State(Box::new(st)),
            Err(e) => Cleared::Unreadable(e.to_string()),
        },
    })
}

/// Reads a stored state item; anything it cannot read is an error, never an empty state.
fn load(
    item: &Item,
    key: &Key,
    entity: &str,
    resource: &str,
) -> Result<RuntimeState, RuntimeError> {
    let unreadable = |reason: String| RuntimeError::StateUnreadable {
        pk: key.pk.clone(),
        sk: key.sk.clone(),
        reason,
    };
    let st = RuntimeState::from_item(item).map_err(|e| unreadable(e.to_string()))?;
    if st.entity != entity || st.resource != resource {
        return Err(unreadable(format!(
            "it names entity '{}' and resource '{}', not those of its key",
            st.entity, st.resource
        )));
    }
    Ok(st)
}

/// Read the state item of `id`'s (entity, resource) (or take `first`, already
/// read), decide, write conditioned on the version read; on a lost race, again.
/// The read and the write are one [`Store::read_then_write`] (`first` saves
/// DynamoDB the read): the local store holds the item still between them,
/// so there it never loses a race.
fn change<T>(
    store: &dyn Store,
    ns: &Namespace,
    id: &ReservationId,
    mut first: Option<Option<Item>>,
    now: i64,
    mut step: impl FnMut(&RuntimeState) -> Result<(T, Option<RuntimeState>), RuntimeError>,
) -> Result<T, RuntimeError> {
    let (entity, resource) = (id.entity.as_str(), id.resource.as_str());
    let key = &state::key(&ns.id, entity, resource);
    for attempt in 0..MAX_ATTEMPTS {
        // What the step made of the item it was shown: the answer or why
        // there is none; the write, if any, goes to the store.
        let mut decided: Option<Result<T, RuntimeError>> = None;
        let mut next = |item: Option<&Item>| -> Option<WriteOp> {
            let (out, op) = match next_write(ns, key, entity, resource, item, now, &mut step) {
                Ok((out, op)) => (Ok(out), op),
                Err(e) => (Err(e), None),
            };
            decided = Some(out);
            op
        };
        let written = store.read_then_write(key, first.take(), &mut next);
        match written {
            Ok(()) => {
                return decided.unwrap_or_else(|| {
                    Err(StoreError::Backend(
                        "the store wrote without showing the state item to the decision".into(),
                    )
                    .into())
                })
            }
            Err(StoreError::ConditionFailed { .. }) => backoff::pause(backoff(attempt)),
            // Never a store failure `on_unavailable` could answer "allow".
            Err(StoreError::ItemTooLarge { bytes, .. }) => {
                return Err(RuntimeError::StateTooLarge {
                    entity: entity.to_string(),
                    resource: resource.to_string(),
                    bytes,
                })
            }
            // The local store cannot decode the state row it read.
            Err(StoreError::Corrupt { pk, sk, reason }) => {
                return Err(RuntimeError::StateUnreadable { pk, sk, reason })
            }
            Err(e) => return Err(e.into()),
        }
    }
    Err(RuntimeError::Contended {
        entity: entity.to_string(),
        resource: resource.to_string(),
        attempts: MAX_ATTEMPTS,
    })
}

/// One step on the stored `item`: the answer, and the write of the next
/// state conditioned on the version read (none when nothing changes).
fn next_write<T>(
    ns: &Namespace,
    key: &Key,
    entity: &str,
    resource: &str,
    item: Option<&Item>,
    now: i64,
    step: &mut impl FnMut(&RuntimeState) -> Result<(T, Option<RuntimeState>), RuntimeError>,
) -> Result<(T, Option<WriteOp>), RuntimeError> {
    let current = match item {
        Some(i) => load(i, key, entity, resource)?,
        None => RuntimeState::empty(entity, resource),
    };
    let (out, next) = step(&current)?;
    let Some(mut next) = next else {
        return Ok((out, None));
    };
    next.version = match item {
        None => crate::store::first_version()?,
        Some(_) => current.version.wrapping_add(1).max(1),
    };
    let condition = match item {
        None => Condition::NotExists,
        Some(_) => Condition::AttrEquals("version".into(), AttrValue::n(current.version)),
    };
    let op = WriteOp::Put {
        item: next.to_item(&ns.id, now),
        condition: Some(condition),
    };
    Ok((out, Some(op)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::items;
    use crate::store::memory::MemoryStore;

    const NOW: i64 = 1_796_205_600_000;

    /// A namespace with resource `slots`: two concurrency slots.
    fn store() -> (MemoryStore, Namespace) {
        let store = MemoryStore::new();
        items::version::ensure_initialized(&store).unwrap();
        let id = items::namespace::register(&store, "default").unwrap().id;
        let text = "namespace: default\nresources:\n  slots:\n    limits:\n      in_flight: {concurrency: 2}\n";
        let m = crate::manifest::load_str("m.yaml", text)
            .ok()
            .unwrap()
            .manifest;
        store.put(items::config::build_resource(&id, "slots", &m.resources["slots"]).unwrap());
        let ns = Namespace {
            name: "default".into(),
            id,
        };
        (store, ns)
    }

    fn reserve(store: &MemoryStore, ns: &Namespace, first: Option<Option<Item>>) -> String {
        let level = resolve(store, ns, "e", "slots").unwrap();
        let d = decide_from(store, ns, &level, &Request::new(Mode::Reserve), first, NOW).unwrap();
        assert!(d.allowed, "{d:?}");
        d.reservation.unwrap().id.token
    }

    fn holds(store: &MemoryStore, ns: &Namespace) -> Vec<String> {
        let st = inspect(store, ns, "e", "slots").unwrap().unwrap();
        st.holds.keys().cloned().collect()
    }

    /// A decision that read the state before a `runtime clear` and writes
    /// after the next item was created must not match that item: it decides
    /// again on it, and nothing the new item holds is lost.
    #[test]
    fn a_write_on_what_was_read_before_a_clear_does_not_match_the_next_item() {
        let (store, ns) = store();
        let old = reserve(&store, &ns, None);
        let stale = store.item(&state::pk(&ns.id, "e", "slots"), state::SK);
        assert!(matches!(
            clear(&store, &ns, "e", "slots").unwrap(),
            Cleared::State(_)
        ));
        let new = reserve(&store, &ns, None);
        // The stale read is shown to the decision in place of a fresh one
        // (as DynamoDB's batch read or a slow write would have it).
        let late = reserve(&store, &ns, Some(stale));
        let mut want = vec![new, late];
        want.sort();
        assert_eq!(
            holds(&store, &ns),
            want,
            "the cleared hold {old} stays gone"
        );
    }

    #[test]
    fn new_items_start_at_a_random_version_and_count_up() {
        let (store, ns) = store();
        reserve(&store, &ns, None);
        let first = inspect(&store, &ns, "e", "slots").unwrap().unwrap().version;
        reserve(&store, &ns, None);
        let second = inspect(&store, &ns, "e", "slots").unwrap().unwrap().version;
        assert_eq!(second, first + 1);
        assert!(first < 1 << 53);
        clear(&store, &ns, "e", "slots").unwrap();
        reserve(&store, &ns, None);
        let again = inspect(&store, &ns, "e", "slots").unwrap().unwrap().version;
        assert_ne!(again, 1, "a new item does not start at 1 again");
    }
}
