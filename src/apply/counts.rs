//! The Python client's entity-config count (`#ENTITY_CONFIG_RESOURCES`: per
//! resource, how many entity config items exist; docs/storage.md, "Registries"), kept
//! exact across crashes without a transaction per level.
//!
//! An increment is not idempotent, so it cannot simply be redone after a crash,
//! and writing each new level together with its increment in one transaction
//! costs a transaction per level (slow on DynamoDB, very slow on moto). Instead
//! apply keeps a small journal:
//!
//! 1. before its config writes, it puts journal items listing the entity levels
//!    it is about to create or delete ([`write_ahead`]), with a lease;
//! 2. it writes the levels (plain batched writes);
//! 3. [`settle`] counts the creates and deletes its own conditional writes
//!    carried out, and in ONE transaction adds that to the count and deletes
//!    the journal item. The transaction makes the increment happen exactly once.
//!
//! A process killed between 1 and 3 leaves the journal item; the next apply,
//! once the lease has run out, settles it ([`recover`]) by reading the levels
//! back (a create counts when the level exists, a delete when it is gone) before
//! it reads anything else, so its own pre-read sees the levels the dead apply
//! wrote and does not count them again. A count that reaches zero loses its attribute, as
//! the Python client leaves it.
//!
//! Not covered: a dead apply's journal recovered while another writer created
//! or deleted one of its levels in between (the reference has no locking at all).

use std::collections::BTreeMap;

use crate::items::keys;
use crate::store::{AttrValue, Condition, Item, Key, Store, StoreError, UpdateAction, WriteOp};

/// SK prefix of journal items, under the namespace's `SYSTEM#` partition.
pub const SK_PREFIX: &str = "#APPLY#COUNTS#";
/// Most bytes of entries in one journal item (DynamoDB's item limit is 400 KB).
const CHUNK_BYTES: usize = 300_000;
const ATTEMPTS: usize = 5;

/// One entity level apply will create (`+1`) or delete (`-1`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub entity: String,
    pub resource: String,
    pub create: bool,
}

/// One journal item as written or read.
#[derive(Debug, Clone, PartialEq)]
pub struct Chunk {
    pub key: Key,
    pub lease: i64,
    pub entries: Vec<Entry>,
}

/// Puts the journal items for `entries` (none when empty). Returns the chunks
/// to [`settle`] after the config writes.
pub fn write_ahead(
    store: &dyn Store,
    ns: &str,
    token: &str,
    lease: i64,
    entries: Vec<Entry>,
) -> Result<Vec<Chunk>, StoreError> {
    let mut chunks: Vec<Chunk> = Vec::new();
    let mut bytes = 0;
    for e in entries {
        let size = e.entity.len() + e.resource.len() + 32;
        if chunks.is_empty() || bytes + size > CHUNK_BYTES {
            let sk = format!("{SK_PREFIX}{token}#{:04}", chunks.len());
            chunks.push(Chunk {
                key: Key::new(keys::system_pk(ns), sk),
                lease,
                entries: Vec::new(),
            });
            bytes = 0;
        }
        bytes += size;
        if let Some(c) = chunks.last_mut() {
            c.entries.push(e);
        }
    }
    for c in &chunks {
        store.write(WriteOp::Put {
            item: encode(ns, c),
            condition: None,
        })?;
    }
    Ok(chunks)
}

/// Adds what `chunk` describes to the count and deletes the chunk, in one
/// transaction. `outcome` says which entries this apply's own writes carried
/// out (its conditional create or delete succeeded); without it (recovering a
/// dead apply's journal) the store is read: a create counts when the level
/// exists, a delete when it is gone. A chunk someone else settled first is left
/// alone.
pub fn settle(
    store: &dyn Store,
    ns: &str,
    chunk: &Chunk,
    outcome: Option<&dyn Fn(&Entry) -> bool>,
) -> Result<(), StoreError> {
    let happened: Vec<bool> = match outcome {
        Some(f) => chunk.entries.iter().map(f).collect(),
        None => {
            let level_keys: Vec<Key> = chunk
                .entries
                .iter()
                .map(|e| keys::entity_config_key(ns, &e.entity, &e.resource))
                .collect();
            let now = store.batch_get(&level_keys, true)?;
            chunk
                .entries
                .iter()
                .zip(&now)
                .map(|(e, item)| e.create == item.is_some())
                .collect()
        }
    };
    let mut deltas: BTreeMap<&str, i64> = BTreeMap::new();
    for (e, _) in chunk.entries.iter().zip(happened).filter(|(_, h)| *h) {
        *deltas.entry(&e.resource).or_default() += if e.create { 1 } else { -1 };
    }
    deltas.retain(|_, d| *d != 0);
    let done = WriteOp::Delete {
        key: chunk.key.clone(),
        condition: Some(Condition::Exists),
    };
    if deltas.is_empty() {
        return match store.write(done) {
            Ok(_) | Err(StoreError::ConditionFailed { .. }) => Ok(()),
            Err(e) => Err(e),
        };
    }
    let mut actions: Vec<UpdateAction> = deltas
        .iter()
        .map(|(r, d)| UpdateAction::AddNumber((*r).to_string(), d.to_string()))
        .collect();
    actions.extend(gsi4(ns));
    let update = WriteOp::Update {
        key: keys::entity_config_registry_key(ns),
        actions,
        condition: None,
    };
    match store.transact(vec![update, done]) {
        Ok(()) | Err(StoreError::TransactionCanceled(_)) => {}
        Err(e) => return Err(e),
    }
    let lowered: Vec<&str> = deltas
        .iter()
        .filter(|(_, d)| **d < 0)
        .map(|(r, _)| *r)
        .collect();
    remove_zeros(store, ns, &lowered)
}

/// Settles every journal item whose lease has run out (its apply died), and
/// drops counts a dead apply left at zero. Returns how many items were settled.
pub fn recover(store: &dyn Store, ns: &str, now_ms: i64) -> Result<usize, StoreError> {
    let mut settled = 0;
    for item in store.query(&keys::system_pk(ns), SK_PREFIX, true)? {
        let chunk = decode(&item)?;
        if chunk.lease <= now_ms {
            settle(store, ns, &chunk, None)?;
            settled += 1;
        }
    }
    let registry = store.get(&keys::entity_config_registry_key(ns), true)?;
    let zeros: Vec<&str> = registry
        .iter()
        .flat_map(|i| i.iter())
        .filter(|(_, v)| {
            v.as_n()
                .and_then(|n| n.parse::<i64>().ok())
                .is_some_and(|c| c <= 0)
        })
        .map(|(name, _)| name.as_str())
        .collect();
    remove_zeros(store, ns, &zeros)?;
    Ok(settled)
}

/// The registry's GSI4 attributes, set when the item is first made.
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
            let count = value.as_n().and_then(|n| n.parse::<i64>().ok());
            if count.is_some_and(|c| c > 0) {
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

fn encode(ns: &str, c: &Chunk) -> Item {
    let mut item = Item::new();
    item.insert("PK".into(), AttrValue::s(&c.key.pk));
    item.insert("SK".into(), AttrValue::s(&c.key.sk));
    item.insert("GSI4PK".into(), AttrValue::s(ns));
    item.insert("GSI4SK".into(), AttrValue::s(&c.key.pk));
    item.insert("lease".into(), AttrValue::n(c.lease));
    let entries = c
        .entries
        .iter()
        .map(|e| {
            let mut m = BTreeMap::new();
            m.insert("entity".to_string(), AttrValue::s(&e.entity));
            m.insert("resource".to_string(), AttrValue::s(&e.resource));
            m.insert(
                "op".to_string(),
                AttrValue::s(if e.create { "create" } else { "delete" }),
            );
            AttrValue::M(m)
        })
        .collect();
    item.insert("entries".into(), AttrValue::L(entries));
    item
}

fn decode(item: &Item) -> Result<Chunk, StoreError> {
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
    let Some(AttrValue::L(list)) = item.get("entries") else {
        return Err(corrupt("no 'entries' list"));
    };
    let mut entries = Vec::with_capacity(list.len());
    for v in list {
        let AttrValue::M(m) = v else {
            return Err(corrupt("an entry is not a map"));
        };
        let field = |n: &str| m.get(n).and_then(AttrValue::as_s);
        let (Some(entity), Some(resource), Some(op)) =
            (field("entity"), field("resource"), field("op"))
        else {
            return Err(corrupt("an entry lacks entity, resource or op"));
        };
        let create = match op {
            "create" => true,
            "delete" => false,
            other => return Err(corrupt(&format!("unknown op '{other}'"))),
        };
        entries.push(Entry {
            entity: entity.to_string(),
            resource: resource.to_string(),
            create,
        });
    }
    Ok(Chunk {
        key: Key::new(s("PK"), s("SK")),
        lease,
        entries,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::memory::MemoryStore;

    fn entry(e: &str, r: &str, create: bool) -> Entry {
        Entry {
            entity: e.into(),
            resource: r.into(),
            create,
        }
    }

    fn put_config(s: &MemoryStore, e: &str, r: &str) {
        let k = keys::entity_config_key("ns", e, r);
        let mut i = Item::new();
        i.insert("PK".into(), AttrValue::s(k.pk));
        i.insert("SK".into(), AttrValue::s(k.sk));
        s.write(WriteOp::Put {
            item: i,
            condition: None,
        })
        .unwrap();
    }

    fn count(s: &MemoryStore, r: &str) -> Option<AttrValue> {
        s.item("ns/SYSTEM#", "#ENTITY_CONFIG_RESOURCES")
            .and_then(|i| i.get(r).cloned())
    }

    fn journal(s: &MemoryStore) -> usize {
        s.query("ns/SYSTEM#", SK_PREFIX, true).unwrap().len()
    }

    #[test]
    fn settling_counts_only_the_writes_that_happened_and_only_once() {
        let s = MemoryStore::new();
        let chunks = write_ahead(
            &s,
            "ns",
            "t1",
            100,
            vec![
                entry("u1", "a", true),
                entry("u2", "a", true),
                entry("u3", "b", true),
            ],
        )
        .unwrap();
        assert_eq!(chunks.len(), 1);
        assert_eq!(journal(&s), 1);
        // u2's write never happened.
        put_config(&s, "u1", "a");
        put_config(&s, "u3", "b");
        settle(&s, "ns", &chunks[0], None).unwrap();
        assert_eq!(count(&s, "a"), Some(AttrValue::n(1)));
        assert_eq!(count(&s, "b"), Some(AttrValue::n(1)));
        assert_eq!(journal(&s), 0);
        // Settling again (a second settler) changes nothing.
        settle(&s, "ns", &chunks[0], None).unwrap();
        assert_eq!(count(&s, "a"), Some(AttrValue::n(1)));
    }

    #[test]
    fn a_dead_applys_journal_is_recovered_after_its_lease() {
        let s = MemoryStore::new();
        write_ahead(&s, "ns", "dead", 1_000, vec![entry("u1", "a", true)]).unwrap();
        put_config(&s, "u1", "a");
        assert_eq!(recover(&s, "ns", 999).unwrap(), 0, "lease still live");
        assert_eq!(count(&s, "a"), None);
        assert_eq!(recover(&s, "ns", 1_000).unwrap(), 1);
        assert_eq!(count(&s, "a"), Some(AttrValue::n(1)));
        assert_eq!(recover(&s, "ns", 5_000).unwrap(), 0);
    }

    #[test]
    fn deletes_lower_the_count_and_drop_it_at_zero() {
        let s = MemoryStore::new();
        put_config(&s, "u1", "a");
        put_config(&s, "u2", "a");
        let c = write_ahead(
            &s,
            "ns",
            "t",
            0,
            vec![entry("u1", "a", true), entry("u2", "a", true)],
        )
        .unwrap();
        settle(&s, "ns", &c[0], None).unwrap();
        assert_eq!(count(&s, "a"), Some(AttrValue::n(2)));
        let c = write_ahead(&s, "ns", "t", 0, vec![entry("u1", "a", false)]).unwrap();
        s.write(WriteOp::Delete {
            key: keys::entity_config_key("ns", "u1", "a"),
            condition: None,
        })
        .unwrap();
        settle(&s, "ns", &c[0], None).unwrap();
        assert_eq!(count(&s, "a"), Some(AttrValue::n(1)));
        let c = write_ahead(&s, "ns", "t", 0, vec![entry("u2", "a", false)]).unwrap();
        s.write(WriteOp::Delete {
            key: keys::entity_config_key("ns", "u2", "a"),
            condition: None,
        })
        .unwrap();
        settle(&s, "ns", &c[0], None).unwrap();
        assert_eq!(count(&s, "a"), None);
    }

    #[test]
    fn large_journals_split_under_the_item_limit() {
        let s = MemoryStore::new();
        let long = "e".repeat(200);
        let entries: Vec<Entry> = (0..3_000)
            .map(|i| entry(&format!("{long}{i}"), "a", true))
            .collect();
        let chunks = write_ahead(&s, "ns", "t", 0, entries).unwrap();
        assert!(chunks.len() > 1);
        let total: usize = chunks.iter().map(|c| c.entries.len()).sum();
        assert_eq!(total, 3_000);
        for item in s.query("ns/SYSTEM#", SK_PREFIX, true).unwrap() {
            assert!(!decode(&item).unwrap().entries.is_empty());
        }
    }

    #[test]
    fn a_corrupt_journal_item_is_a_typed_error() {
        let s = MemoryStore::new();
        let mut i = Item::new();
        i.insert("PK".into(), AttrValue::s("ns/SYSTEM#"));
        i.insert("SK".into(), AttrValue::s(format!("{SK_PREFIX}x#0000")));
        i.insert("lease".into(), AttrValue::s("soon"));
        s.write(WriteOp::Put {
            item: i,
            condition: None,
        })
        .unwrap();
        assert!(matches!(
            recover(&s, "ns", 0),
            Err(StoreError::Corrupt { .. })
        ));
    }
}
