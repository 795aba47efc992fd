//! The Python client's entity-config count (`#ENTITY_CONFIG_RESOURCES`: per
//! resource, how many entity config items exist; docs/storage.md,
//! "Registries"), kept exact across crashes, re-applies and lease expiries
//! without a transaction per level.
//!
//! What "exact" means: the count of resource `r` equals the number of entity
//! levels in the GSI3 partition `{ns}/ENTITY_CONFIG#{r}` (every entity level
//! the Python client or this tool writes carries those keys; levels written by
//! the reference's provisioner carry none and are counted by nobody).
//!
//! How, in three parts:
//! 1. **Deltas, applied once.** An apply counts what its own writes did
//!    (a put that made a level appear in the index: +1; a delete of an indexed
//!    level: −1), adds that in one write and then deletes its journal
//!    ([`settle`]). A journal still there means "recount", never "add again".
//! 2. **A journal that only marks.** Before its first write, the apply puts a
//!    journal item naming the resources whose counts it may change, with a
//!    lease ([`begin`]). A journal item that outlives its apply (killed, or a
//!    store error in the settle) means "these counts may be off".
//! 3. **Recounts, idempotent.** A later apply — at once, lease or not — recounts
//!    those resources from the index and sets the counts ([`recover`],
//!    [`recount`]); a recount can run any number of times. A dead apply's
//!    journal is deleted once its lease has run out.
//!
//! Deltas and recounts must not both count one write. A recount therefore
//! replaces the **recount stamp** (`zael#recount`, a random token, a string
//! attribute of the registry item itself) in the same UpdateItem that sets
//! the counts, and a settle adds its deltas in one UpdateItem conditioned on
//! the stamp its journal recorded (and replaces it too); when the stamp
//! changed, it recounts instead. So a delta is applied at most once, and never on top of a
//! recount that already saw its writes. Neither needs a transaction. The
//! Python client reads only the registry's number attributes (a count per
//! resource), so the stamp is invisible to it; no resource can be named
//! `zael#recount` (`#` is not allowed in a name).
//!
//! Every refreshing apply also checks the counts of every resource the
//! registry, the manifest or the managed set names against the index and
//! repairs (and reports) any that disagree ([`recover`] with `also`).
//!
//! Limits: the index a recount reads is eventually consistent on DynamoDB
//! (moto and the local store are not); a recount waits a moment before
//! repairing there, and a count off by a write of that last moment is found
//! by the next apply's check. A Python client deleting a level at the very
//! moment an apply deletes it is counted twice (batched deletes return no old
//! image); the next check repairs that too.

use std::collections::{BTreeMap, BTreeSet};

use crate::items::chunked;
use crate::items::keys;
use crate::store::{
    AttrValue, Condition, Index, Item, Key, Store, StoreError, UpdateAction, WriteOp,
};

/// SK prefix of journal items, under the namespace's `SYSTEM#` partition.
pub const SK_PREFIX: &str = "#APPLY#COUNTS#";
/// The registry's attribute holding the recount stamp (not a count: a string,
/// and no resource can carry `#` in its name).
pub const STAMP_ATTR: &str = "zael#recount";
const ATTEMPTS: usize = 5;
/// How long a recount waits for a lagging index before it repairs a count.
const INDEX_SETTLE: std::time::Duration = std::time::Duration::from_secs(1);

/// A count that disagreed with the entity levels stored, and what it became.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repair {
    pub resource: String,
    /// What the registry held (`None`: no attribute; a non-number is `None` too).
    pub stored: Option<i64>,
    /// The entity levels in the index.
    pub actual: i64,
}

impl std::fmt::Display for Repair {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let was = match self.stored {
            Some(n) => n.to_string(),
            None => "missing".to_string(),
        };
        write!(
            f,
            "the entity-config count of '{}' (#ENTITY_CONFIG_RESOURCES) was {was} for {} stored entity level(s)",
            self.resource, self.actual
        )
    }
}

/// This apply's journal, as [`begin`] wrote it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Journal {
    /// Its items, chunk 0 first (empty: nothing to count).
    pub keys: Vec<Key>,
    /// The recount stamp when it was written (`None`: no recount yet).
    pub stamp: Option<String>,
    pub resources: BTreeSet<String>,
}

/// One journal item as read.
#[derive(Debug, Clone, PartialEq)]
struct Marker {
    key: Key,
    lease: i64,
    resources: BTreeSet<String>,
}

/// Reads the recount stamp and puts the journal items naming `resources`
/// (nothing when empty), before the first config write that may change them.
pub fn begin(
    store: &dyn Store,
    ns: &str,
    token: &str,
    lease: i64,
    resources: BTreeSet<String>,
) -> Result<Journal, StoreError> {
    let (journal, ops) = journal(store, ns, token, lease, resources)?;
    store
        .batch_write(ops)
        .into_iter()
        .collect::<Result<(), _>>()?;
    Ok(journal)
}

/// [`begin`] without the writes: the journal and the puts that write it, for
/// the caller to send with its other writes.
pub fn journal(
    store: &dyn Store,
    ns: &str,
    token: &str,
    lease: i64,
    resources: BTreeSet<String>,
) -> Result<(Journal, Vec<WriteOp>), StoreError> {
    if resources.is_empty() {
        return Ok((Journal::default(), Vec::new()));
    }
    let stamp = read_stamp(store, ns)?;
    let items = encode(ns, token, lease, &resources);
    let keys: Vec<Key> = items.iter().filter_map(Key::of).collect();
    let ops = super::record::puts(items);
    Ok((
        Journal {
            keys,
            stamp,
            resources,
        },
        ops,
    ))
}

/// Adds `deltas` (per resource: the levels this apply's writes added to the
/// index minus those they removed) to the counts in one UpdateItem
/// conditioned on the recount stamp, then removes the journal. When a
/// recount ran since [`begin`], the journal's resources are recounted
/// instead. Counts that reach zero lose their attribute.
pub fn settle(
    store: &dyn Store,
    ns: &str,
    journal: &Journal,
    deltas: &BTreeMap<String, i64>,
) -> Result<(), StoreError> {
    if journal.keys.is_empty() {
        return Ok(());
    }
    let deltas: BTreeMap<&String, i64> = deltas
        .iter()
        .filter(|(_, d)| **d != 0)
        .map(|(r, d)| (r, *d))
        .collect();
    if deltas.is_empty() {
        return delete_all(store, &journal.keys);
    }
    let mut actions: Vec<UpdateAction> = deltas
        .iter()
        .map(|(r, d)| UpdateAction::AddNumber((*r).clone(), d.to_string()))
        .collect();
    // A new stamp too: settling the same journal again can only recount.
    actions.push(UpdateAction::Set(
        STAMP_ATTR.into(),
        AttrValue::s(crate::apply::new_token()),
    ));
    actions.extend(gsi4(ns));
    let add = WriteOp::Update {
        key: keys::entity_config_registry_key(ns),
        actions,
        // No recount since the journal was written.
        condition: Some(stamp_is(journal.stamp.as_deref())),
    };
    match store.write(add) {
        Ok(_) => {
            let lowered: Vec<&str> = deltas
                .iter()
                .filter(|(_, d)| **d < 0)
                .map(|(r, _)| r.as_str())
                .collect();
            remove_zeros(store, ns, &lowered)?;
        }
        Err(StoreError::ConditionFailed { .. }) => {
            recount(store, ns, &journal.resources)?;
        }
        Err(e) => return Err(e),
    }
    // A journal left here (a crash) makes the next apply recount: no harm.
    delete_all(store, &journal.keys)
}

/// Recounts, before this apply plans, the resources of every journal another
/// apply left (its lease running or not: a recount is safe either way) and
/// the resources in `also` (a refreshing apply's check); deletes the journals
/// whose lease ran out. Returns the counts that were wrong.
pub fn recover(
    store: &dyn Store,
    ns: &str,
    now_ms: i64,
    also: &BTreeSet<String>,
    left: Option<&str>,
) -> Result<Vec<Repair>, StoreError> {
    let markers = read_markers(store, ns)?;
    let registry = store.get(&keys::entity_config_registry_key(ns), true)?;
    let mut resources = to_check(also, registry.as_ref(), left);
    // A count at zero or below is a settle that died before dropping it
    // (or wrong): recounted, which drops it.
    resources.extend(counted(registry.as_ref()).into_iter().filter(|r| {
        registry
            .as_ref()
            .and_then(|i| i.get(r))
            .and_then(count_of)
            .is_none_or(|n| n <= 0)
    }));
    for m in &markers {
        resources.extend(m.resources.iter().cloned());
    }
    let repairs = recount(store, ns, &resources)?;
    let dead: Vec<Key> = markers
        .into_iter()
        .filter(|m| m.lease <= now_ms)
        .map(|m| m.key)
        .collect();
    delete_all(store, &dead)?;
    Ok(repairs)
}

/// The counts (as [`to_check`] picks them) that disagree with the index
/// (read only).
pub fn check(
    store: &dyn Store,
    ns: &str,
    resources: &BTreeSet<String>,
    left: Option<&str>,
) -> Result<Vec<Repair>, StoreError> {
    let registry = store.get(&keys::entity_config_registry_key(ns), true)?;
    let resources = to_check(resources, registry.as_ref(), left);
    Ok(disagreements(store, ns, &resources, registry.as_ref())?
        .into_iter()
        .filter_map(|(repair, _)| repair)
        .collect())
}

/// Whether journals of other applies are left (a plan's note that the counts
/// are being repaired).
pub fn journals_left(store: &dyn Store, ns: &str) -> Result<usize, StoreError> {
    Ok(read_markers(store, ns)?.len())
}

/// Sets the count of every resource in `resources` to the entity levels in
/// its index partition, replacing the recount stamp in the same write (so no
/// settle adds a delta on top). Retried when a count changes meanwhile.
pub fn recount(
    store: &dyn Store,
    ns: &str,
    resources: &BTreeSet<String>,
) -> Result<Vec<Repair>, StoreError> {
    if resources.is_empty() {
        return Ok(Vec::new());
    }
    let registry_key = keys::entity_config_registry_key(ns);
    let mut waited = false;
    for _ in 0..ATTEMPTS {
        let registry = store.get(&registry_key, true)?;
        let fixes = disagreements(store, ns, resources, registry.as_ref())?;
        if fixes.is_empty() {
            return Ok(Vec::new());
        }
        if store.index_lags() && !waited {
            // Writes of the last moment may not be in the index yet.
            std::thread::sleep(INDEX_SETTLE);
            waited = true;
            continue;
        }
        let mut actions = Vec::new();
        let mut conditions = vec![stamp_is(stamp_of(registry.as_ref()).as_deref())];
        for (_, (r, was, now)) in &fixes {
            conditions.push(match was {
                Some(v) => Condition::AttrEquals(r.clone(), v.clone()),
                None => Condition::AttrNotExists(r.clone()),
            });
            actions.push(if *now > 0 {
                UpdateAction::Set(r.clone(), AttrValue::n(*now))
            } else {
                UpdateAction::Remove(r.clone())
            });
        }
        actions.push(UpdateAction::Set(
            STAMP_ATTR.into(),
            AttrValue::s(crate::apply::new_token()),
        ));
        actions.extend(gsi4(ns));
        let op = WriteOp::Update {
            key: registry_key.clone(),
            actions,
            condition: Some(Condition::And(conditions)),
        };
        match store.write(op) {
            Ok(_) => return Ok(fixes.into_iter().filter_map(|(r, _)| r).collect()),
            Err(StoreError::ConditionFailed { .. }) => continue,
            Err(e) => return Err(e),
        }
    }
    Err(StoreError::Backend(format!(
        "the entity-config counts of namespace {ns} kept changing during a recount; gave up after {ATTEMPTS} attempts"
    )))
}

/// A fix: (resource, the value read, the count it should be).
type Fix = (String, Option<AttrValue>, i64);

/// Per resource whose stored count differs from the index: the repair to
/// report (`None` for a harmless leftover, a stored zero) and the fix.
fn disagreements(
    store: &dyn Store,
    ns: &str,
    resources: &BTreeSet<String>,
    registry: Option<&Item>,
) -> Result<Vec<(Option<Repair>, Fix)>, StoreError> {
    let mut out = Vec::new();
    for r in resources {
        let actual = store.count_index(Index::Gsi3, &keys::entity_config_gsi3pk(ns, r), "")?;
        let actual = i64::try_from(actual).unwrap_or(i64::MAX);
        let value = registry.and_then(|i| i.get(r)).cloned();
        let stored = value.as_ref().and_then(count_of);
        let right = match (&value, stored) {
            (None, _) => actual == 0,
            (Some(_), Some(n)) => n == actual && n > 0,
            (Some(_), None) => false,
        };
        if right {
            continue;
        }
        let harmless = actual == 0 && stored.is_some_and(|n| n == 0);
        let repair = (!harmless).then(|| Repair {
            resource: r.clone(),
            stored,
            actual,
        });
        out.push((repair, (r.clone(), value, actual)));
    }
    Ok(out)
}

/// Which counts a check reads: those of `wanted` and of every resource the
/// registry names — unless the registry is exactly as the last apply left it
/// (`left`, its [`fingerprint`] on the `#PROVISIONER` record): then nobody
/// but our applies changed a count since, and they leave them exact (a dead
/// one leaves a journal, recounted apart). A Python client changes the
/// registry with every level it writes; the reference's provisioner, which
/// does not, rewrites the record, which drops the fingerprint.
fn to_check(
    wanted: &BTreeSet<String>,
    registry: Option<&Item>,
    left: Option<&str>,
) -> BTreeSet<String> {
    if wanted.is_empty() || left.is_some_and(|l| l == fingerprint(registry)) {
        return BTreeSet::new();
    }
    let mut all = wanted.clone();
    all.extend(counted(registry));
    all
}

/// A short digest of the registry's counts and recount stamp: what an apply
/// records on the `#PROVISIONER` record as the counts it left.
pub fn fingerprint(registry: Option<&Item>) -> String {
    use sha2::{Digest as _, Sha256};
    let mut h = Sha256::new();
    for (name, v) in registry.into_iter().flatten() {
        let text = match v {
            AttrValue::N(n) => n.as_str(),
            AttrValue::S(s) if name == STAMP_ATTR => s.as_str(),
            _ => continue,
        };
        for part in [name.as_bytes(), text.as_bytes()] {
            h.update((part.len() as u64).to_be_bytes());
            h.update(part);
        }
    }
    h.finalize()[..16]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The [`fingerprint`] of the registry as it is now.
pub fn fingerprint_now(store: &dyn Store, ns: &str) -> Result<String, StoreError> {
    let registry = store.get(&keys::entity_config_registry_key(ns), true)?;
    Ok(fingerprint(registry.as_ref()))
}

/// The resources the registry holds a count for.
fn counted(registry: Option<&Item>) -> BTreeSet<String> {
    registry
        .into_iter()
        .flatten()
        .filter(|(name, v)| {
            v.as_n().is_some() && !matches!(name.as_str(), "PK" | "SK" | "GSI4PK" | "GSI4SK")
        })
        .map(|(name, _)| name.clone())
        .collect()
}

fn count_of(v: &AttrValue) -> Option<i64> {
    v.as_n().and_then(|n| n.parse::<i64>().ok())
}

fn read_stamp(store: &dyn Store, ns: &str) -> Result<Option<String>, StoreError> {
    let registry = store.get(&keys::entity_config_registry_key(ns), true)?;
    Ok(stamp_of(registry.as_ref()))
}

fn stamp_of(registry: Option<&Item>) -> Option<String> {
    registry
        .and_then(|i| i.get(STAMP_ATTR))
        .and_then(AttrValue::as_s)
        .map(str::to_string)
}

fn stamp_is(stamp: Option<&str>) -> Condition {
    match stamp {
        Some(s) => Condition::AttrEquals(STAMP_ATTR.into(), AttrValue::s(s)),
        None => Condition::AttrNotExists(STAMP_ATTR.into()),
    }
}

fn delete_all(store: &dyn Store, keys: &[Key]) -> Result<(), StoreError> {
    let ops = keys
        .iter()
        .map(|k| WriteOp::Delete {
            key: k.clone(),
            condition: None,
        })
        .collect();
    store.batch_write(ops).into_iter().collect()
}

/// The registries' GSI4 attributes, set when the item is first made.
pub fn gsi4(ns: &str) -> Vec<UpdateAction> {
    vec![
        UpdateAction::SetIfNotExists("GSI4PK".into(), AttrValue::s(ns)),
        UpdateAction::SetIfNotExists("GSI4SK".into(), AttrValue::s(keys::system_pk(ns))),
    ]
}

/// Drops the count attributes of `resources` that are at zero or below, each
/// conditioned on the value just read.
fn remove_zeros(store: &dyn Store, ns: &str, resources: &[&str]) -> Result<(), StoreError> {
    let key = keys::entity_config_registry_key(ns);
    for r in resources {
        for attempt in 0.. {
            let registry = store.get(&key, true)?;
            let Some(value) = registry.as_ref().and_then(|i| i.get(*r)).cloned() else {
                break;
            };
            if count_of(&value).is_some_and(|c| c > 0) {
                break;
            }
            let op = WriteOp::Update {
                key: key.clone(),
                actions: vec![UpdateAction::Remove((*r).to_string())],
                condition: Some(Condition::AttrEquals((*r).to_string(), value)),
            };
            match store.write(op) {
                Ok(_) => break,
                Err(StoreError::ConditionFailed { .. }) if attempt + 1 < ATTEMPTS => continue,
                Err(e) => return Err(e),
            }
        }
    }
    Ok(())
}

/// The journal items for `resources`, split below the item limit.
fn encode(ns: &str, token: &str, lease: i64, resources: &BTreeSet<String>) -> Vec<Item> {
    let pk = keys::system_pk(ns);
    let item = |i: usize, names: Vec<AttrValue>| {
        let mut it = keys::namespaced_item(ns, Key::new(&pk, format!("{SK_PREFIX}{token}#{i:04}")));
        it.insert("lease".into(), AttrValue::n(lease));
        it.insert("resources".into(), AttrValue::L(names));
        it
    };
    let room = chunked::room(&item(9999, Vec::new()), chunked::LIMIT);
    let names = resources.iter().map(AttrValue::s);
    chunked::split(names, room, chunked::list_element_size)
        .into_iter()
        .enumerate()
        .map(|(i, part)| item(i, part))
        .collect()
}

fn read_markers(store: &dyn Store, ns: &str) -> Result<Vec<Marker>, StoreError> {
    store
        .query(&keys::system_pk(ns), SK_PREFIX, true)?
        .iter()
        .map(decode)
        .collect()
}

/// A journal item: the resources it names (an older build's `entries`
/// list of entity levels counts by their resources).
fn decode(item: &Item) -> Result<Marker, StoreError> {
    let s = |name: &str| item.get(name).and_then(AttrValue::as_s).unwrap_or_default();
    let corrupt = |reason: &str| StoreError::Corrupt {
        pk: s("PK").to_string(),
        sk: s("SK").to_string(),
        reason: format!("entity-count journal: {reason}"),
    };
    let lease = item
        .get("lease")
        .and_then(AttrValue::as_n)
        .and_then(|n| n.parse::<i64>().ok())
        .ok_or_else(|| corrupt("no numeric 'lease'"))?;
    let mut resources = BTreeSet::new();
    match (item.get("resources"), item.get("entries")) {
        (Some(AttrValue::L(list)), _) => {
            for v in list {
                let r = v
                    .as_s()
                    .ok_or_else(|| corrupt("a resource is not a string"))?;
                resources.insert(r.to_string());
            }
        }
        (None, Some(AttrValue::L(list))) => {
            for v in list {
                let r = match v {
                    AttrValue::M(m) => m.get("resource").and_then(AttrValue::as_s),
                    _ => None,
                };
                let r = r.ok_or_else(|| corrupt("an entry lacks its resource"))?;
                resources.insert(r.to_string());
            }
        }
        _ => return Err(corrupt("no 'resources' list")),
    }
    Ok(Marker {
        key: Key::new(s("PK"), s("SK")),
        lease,
        resources,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::memory::MemoryStore;

    fn put_config(s: &MemoryStore, e: &str, r: &str) {
        let k = keys::entity_config_key("ns", e, r);
        s.put(crate::store::item::keyed(
            &k.pk,
            &k.sk,
            &[
                ("GSI3PK", AttrValue::s(keys::entity_config_gsi3pk("ns", r))),
                ("GSI3SK", AttrValue::s(e)),
            ],
        ));
    }

    fn count(s: &MemoryStore, r: &str) -> Option<AttrValue> {
        s.item("ns/SYSTEM#", "#ENTITY_CONFIG_RESOURCES")
            .and_then(|i| i.get(r).cloned())
    }

    fn set_count(s: &MemoryStore, r: &str, n: i64) {
        s.write(WriteOp::Update {
            key: keys::entity_config_registry_key("ns"),
            actions: vec![UpdateAction::Set(r.into(), AttrValue::n(n))],
            condition: None,
        })
        .unwrap();
    }

    fn journal(s: &MemoryStore) -> usize {
        s.query("ns/SYSTEM#", SK_PREFIX, true).unwrap().len()
    }

    fn set(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|n| n.to_string()).collect()
    }

    fn deltas(pairs: &[(&str, i64)]) -> BTreeMap<String, i64> {
        pairs.iter().map(|(r, d)| (r.to_string(), *d)).collect()
    }

    #[test]
    fn a_settle_adds_its_deltas_once_and_removes_the_journal() {
        let s = MemoryStore::new();
        let j = begin(&s, "ns", "t1", 100, set(&["a", "b"])).unwrap();
        assert_eq!(journal(&s), 1);
        put_config(&s, "u1", "a");
        put_config(&s, "u2", "a");
        put_config(&s, "u3", "b");
        settle(&s, "ns", &j, &deltas(&[("a", 2), ("b", 1)])).unwrap();
        assert_eq!(count(&s, "a"), Some(AttrValue::n(2)));
        assert_eq!(count(&s, "b"), Some(AttrValue::n(1)));
        assert_eq!(journal(&s), 0);
        // A second settle of the same journal finds it gone: it recounts,
        // which changes nothing.
        settle(&s, "ns", &j, &deltas(&[("a", 2)])).unwrap();
        assert_eq!(count(&s, "a"), Some(AttrValue::n(2)));
    }

    #[test]
    fn a_recount_since_the_journal_turns_the_settle_into_a_recount() {
        let s = MemoryStore::new();
        let j = begin(&s, "ns", "t1", 100, set(&["a"])).unwrap();
        put_config(&s, "u1", "a");
        // Another apply recounts meanwhile: it already sees u1.
        assert_eq!(
            recount(&s, "ns", &set(&["a"])).unwrap(),
            vec![Repair {
                resource: "a".into(),
                stored: None,
                actual: 1
            }]
        );
        settle(&s, "ns", &j, &deltas(&[("a", 1)])).unwrap();
        assert_eq!(count(&s, "a"), Some(AttrValue::n(1)), "not counted twice");
        assert_eq!(journal(&s), 0);
    }

    #[test]
    fn a_dead_applys_journal_is_recounted_at_once_and_deleted_after_its_lease() {
        let s = MemoryStore::new();
        begin(&s, "ns", "dead", 1_000, set(&["a"])).unwrap();
        put_config(&s, "u1", "a");
        // Lease running: recounted, kept.
        let repairs = recover(&s, "ns", 999, &BTreeSet::new(), None).unwrap();
        assert_eq!(repairs.len(), 1);
        assert_eq!(count(&s, "a"), Some(AttrValue::n(1)));
        assert_eq!(journal(&s), 1);
        // Lease over: recounted again (nothing to do) and deleted.
        assert!(recover(&s, "ns", 1_000, &BTreeSet::new(), None)
            .unwrap()
            .is_empty());
        assert_eq!(count(&s, "a"), Some(AttrValue::n(1)));
        assert_eq!(journal(&s), 0);
    }

    #[test]
    fn deletes_lower_the_count_and_drop_it_at_zero() {
        let s = MemoryStore::new();
        set_count(&s, "a", 2);
        let j = begin(&s, "ns", "t", 0, set(&["a"])).unwrap();
        settle(&s, "ns", &j, &deltas(&[("a", -1)])).unwrap();
        assert_eq!(count(&s, "a"), Some(AttrValue::n(1)));
        let j = begin(&s, "ns", "t", 0, set(&["a"])).unwrap();
        settle(&s, "ns", &j, &deltas(&[("a", -1)])).unwrap();
        assert_eq!(count(&s, "a"), None);
    }

    #[test]
    fn a_wrong_count_is_found_repaired_and_reported() {
        let s = MemoryStore::new();
        put_config(&s, "u1", "a");
        put_config(&s, "u2", "a");
        set_count(&s, "a", 4);
        set_count(&s, "gone", 3);
        set_count(&s, "zero", 0);
        let all = set(&["a", "gone", "zero", "never"]);
        let found = check(&s, "ns", &all, None).unwrap();
        assert_eq!(
            found,
            vec![
                Repair {
                    resource: "a".into(),
                    stored: Some(4),
                    actual: 2
                },
                Repair {
                    resource: "gone".into(),
                    stored: Some(3),
                    actual: 0
                }
            ]
        );
        assert_eq!(
            found[0].to_string(),
            "the entity-config count of 'a' (#ENTITY_CONFIG_RESOURCES) was 4 for 2 stored entity level(s)"
        );
        let repaired = recover(&s, "ns", 0, &all, None).unwrap();
        assert_eq!(repaired, found);
        assert_eq!(count(&s, "a"), Some(AttrValue::n(2)));
        assert_eq!(count(&s, "gone"), None);
        assert_eq!(count(&s, "zero"), None, "a stored zero is dropped quietly");
        assert!(check(&s, "ns", &all, None).unwrap().is_empty());
        // As the last apply left them: not even read again.
        let left = fingerprint_now(&s, "ns").unwrap();
        set_count(&s, "a", 7);
        assert!(
            !check(&s, "ns", &all, Some(&left)).unwrap().is_empty(),
            "changed since"
        );
        let left = fingerprint_now(&s, "ns").unwrap();
        assert!(check(&s, "ns", &all, Some(&left)).unwrap().is_empty());
    }

    #[test]
    fn large_journals_split_under_the_item_limit() {
        let s = MemoryStore::new();
        let many: BTreeSet<String> = (0..20_000)
            .map(|i| format!("resource-{i:06}-{}", "x".repeat(40)))
            .collect();
        let j = begin(&s, "ns", "t", 0, many.clone()).unwrap();
        assert!(j.keys.len() > 1);
        let markers = read_markers(&s, "ns").unwrap();
        let back: BTreeSet<String> = markers.iter().flat_map(|m| m.resources.clone()).collect();
        assert_eq!(back, many);
        for item in s.query("ns/SYSTEM#", SK_PREFIX, true).unwrap() {
            assert!(crate::store::emulate::item_size(&item) <= chunked::LIMIT);
        }
        settle(&s, "ns", &j, &BTreeMap::new()).unwrap();
        assert_eq!(journal(&s), 0);
    }

    #[test]
    fn an_older_journal_names_its_resources_through_its_entries() {
        let s = MemoryStore::new();
        let entry = |e: &str, r: &str| {
            AttrValue::M(BTreeMap::from([
                ("entity".to_string(), AttrValue::s(e)),
                ("resource".to_string(), AttrValue::s(r)),
                ("op".to_string(), AttrValue::s("create")),
            ]))
        };
        s.put(crate::store::item::keyed(
            "ns/SYSTEM#",
            &format!("{SK_PREFIX}old#0000"),
            &[
                ("lease", AttrValue::n(5)),
                (
                    "entries",
                    AttrValue::L(vec![entry("u1", "a"), entry("u2", "b")]),
                ),
            ],
        ));
        put_config(&s, "u1", "a");
        recover(&s, "ns", 10, &BTreeSet::new(), None).unwrap();
        assert_eq!(count(&s, "a"), Some(AttrValue::n(1)));
        assert_eq!(journal(&s), 0);
    }

    #[test]
    fn a_corrupt_journal_item_is_a_typed_error() {
        let s = MemoryStore::new();
        s.put(crate::store::item::keyed(
            "ns/SYSTEM#",
            &format!("{SK_PREFIX}x#0000"),
            &[("lease", AttrValue::s("soon"))],
        ));
        assert!(matches!(
            recover(&s, "ns", 0, &BTreeSet::new(), None),
            Err(StoreError::Corrupt { .. })
        ));
    }
}
