//! What apply records for the next plan: the `#PROVISIONER` record (the
//! managed set, [`crate::plan::managed`], with what does not fit it in our
//! overflow items) and, after it, the level digests `--no-refresh` trusts
//! ([`crate::plan::digests`] owns their format and reads them).
//!
//! The managed set written is what the apply actually did, not what it
//! planned: a level whose create, update or delete failed keeps its old
//! place in (or out of) the set, so the next apply retries it
//! ([`managed_after`]). Before its first config write an apply records the
//! levels it is about to create ([`write_writing`]), so a level written by
//! an apply that dies before its record is still found by the next one.
//! The digests stop being true with the first config write, so
//! [`invalidate`] runs before it.

use crate::plan::digests::{self, Digest};
use crate::plan::level::{Action, Level};
use crate::plan::managed::{self, ManagedSet, ProvisionerRecord};
use crate::store::{AttrValue, Key, Store, StoreError, WriteOp};

/// What became of one planned change of a level.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Written (or found already gone, for a delete).
    Done,
    /// The write did not happen.
    Failed,
    /// A delete of a level only an unconfirmed set named, found absent: it
    /// was never written, so it is simply forgotten.
    Forgotten,
}

/// The managed set after an apply: everything the record (and any
/// unconfirmed set) held and the manifest declares, less what was deleted,
/// and less the levels whose create failed and that were not held before.
pub fn managed_after(
    before: &ProvisionerRecord,
    declared: &ManagedSet,
    outcomes: impl IntoIterator<Item = (Level, Action, Outcome)>,
) -> ManagedSet {
    let held = before.all();
    let mut after = held.clone();
    after.extend(declared);
    for (level, action, outcome) in outcomes {
        match (action, outcome) {
            (Action::Delete, Outcome::Done | Outcome::Forgotten) => after.remove(&level),
            (Action::Create, Outcome::Failed) if !held.contains(&level) => after.remove(&level),
            _ => {}
        }
    }
    after
}

/// Records the levels this apply is about to create (and that no record or
/// set holds yet) before its first config write. Returns the items' keys.
pub fn write_writing(
    store: &dyn Store,
    ns: &str,
    token: &str,
    creates: &ManagedSet,
) -> Result<Vec<Key>, StoreError> {
    if creates.is_empty() {
        return Ok(Vec::new());
    }
    let items = managed::set_items(ns, managed::WRITING_SK_PREFIX, token, creates, &[]);
    let keys = items.iter().filter_map(Key::of).collect();
    put_all(store, items)?;
    Ok(keys)
}

/// Writes the `#PROVISIONER` record for `managed` — what fits the record, and
/// the whole set in overflow items named after the record when it does not
/// fit — then deletes the overflow and writing items in `stale` it did not
/// rewrite. Returns the record's stamp (its `applied_hash` and `last_applied`).
pub fn write_record(
    store: &dyn Store,
    ns: &str,
    token: &str,
    managed: &ManagedSet,
    now_ms: i64,
    applied_hash: &str,
    stale: &[Key],
) -> Result<String, StoreError> {
    let last_applied = managed::iso_timestamp(now_ms);
    let stamp = digests::stamp(applied_hash, &last_applied);
    let (record, rest) = managed::record_item(
        ns,
        managed,
        &last_applied,
        applied_hash,
        managed::record_limit(),
    );
    let mut kept = Vec::new();
    if !rest.is_empty() {
        let items = managed::set_items(
            ns,
            managed::OVERFLOW_SK_PREFIX,
            token,
            managed,
            &[("provisioner", AttrValue::s(&stamp))],
        );
        kept = items.iter().filter_map(Key::of).collect();
        put_all(store, items)?;
    }
    store.write(WriteOp::Put {
        item: record,
        condition: None,
    })?;
    delete_except(store, stale, &kept)?;
    Ok(stamp)
}

/// Whether `managed` fits the `#PROVISIONER` record, and the record's size
/// were it all there (what `limits plan` tells).
pub fn record_size(ns: &str, managed: &ManagedSet) -> (bool, usize) {
    let (record, _) = managed::record_item(ns, managed, "", "", usize::MAX);
    let size = crate::store::emulate::item_size(&record);
    (size <= managed::record_limit(), size)
}

/// Makes the recorded digests unusable (deletes chunk 0). Runs before an
/// apply's first config write.
pub fn invalidate(store: &dyn Store, ns: &str) -> Result<(), StoreError> {
    store
        .write(WriteOp::Delete {
            key: digests::first_chunk_key(ns),
            condition: None,
        })
        .map(|_| ())
}

/// Records `digests` for the `#PROVISIONER` record stamped `record_stamp`:
/// chunks 1.. first, chunk 0 last, then deletes the items in `stale` it did
/// not rewrite.
pub fn write_digests(
    store: &dyn Store,
    ns: &str,
    generation: &str,
    record_stamp: &str,
    digests: &[Digest],
    stale: &[Key],
) -> Result<(), StoreError> {
    let mut items = digests::chunk_items(ns, generation, record_stamp, digests).into_iter();
    let first = items.next();
    let mut kept: Vec<Key> = items.as_slice().iter().filter_map(Key::of).collect();
    put_all(store, items.collect())?;
    if let Some(item) = first {
        kept.extend(Key::of(&item));
        store.write(WriteOp::Put {
            item,
            condition: None,
        })?;
    }
    delete_except(store, stale, &kept)
}

fn put_all(store: &dyn Store, items: Vec<crate::store::Item>) -> Result<(), StoreError> {
    let ops = items
        .into_iter()
        .map(|item| WriteOp::Put {
            item,
            condition: None,
        })
        .collect();
    store.batch_write(ops).into_iter().collect()
}

fn delete_except(store: &dyn Store, stale: &[Key], kept: &[Key]) -> Result<(), StoreError> {
    let drop: Vec<WriteOp> = stale
        .iter()
        .filter(|k| !kept.contains(k))
        .map(|k| WriteOp::Delete {
            key: k.clone(),
            condition: None,
        })
        .collect();
    store.batch_write(drop).into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::digests::tests::{item, key};
    use crate::store::memory::MemoryStore;

    fn many(n: usize) -> Vec<Digest> {
        (0..n)
            .map(|i| digests::digest(&key(), &item(&i.to_string())))
            .collect()
    }

    fn chunk_sizes(s: &MemoryStore) -> Vec<usize> {
        s.query("ns/SYSTEM#", digests::SK_PREFIX, true)
            .unwrap()
            .iter()
            .map(crate::store::emulate::item_size)
            .collect()
    }

    #[test]
    fn written_digests_read_back_for_the_same_record_only() {
        let s = MemoryStore::default();
        let d = many(30_000);
        write_digests(&s, "ns", "g1", "sha256:a t1", &d, &[]).unwrap();
        let sizes = chunk_sizes(&s);
        assert!(sizes.len() >= 3, "{sizes:?}");
        assert!(sizes.iter().all(|n| *n <= crate::items::chunked::LIMIT));
        let r = digests::read(&s, "ns", Some("sha256:a t1")).unwrap();
        assert_eq!(r.keys.len(), sizes.len());
        let set = r.digests.unwrap();
        assert_eq!(set.len(), d.len());
        assert!(d.iter().all(|x| set.contains(x)));
        let other = digests::read(&s, "ns", Some("sha256:b t2")).unwrap();
        assert_eq!(other.digests, Err(digests::Untrusted::OtherApply));
        assert_eq!(
            digests::read(&s, "ns", None).unwrap().digests,
            Err(digests::Untrusted::OtherApply)
        );
    }

    #[test]
    fn invalidated_or_torn_digests_are_not_used() {
        let s = MemoryStore::default();
        write_digests(&s, "ns", "g1", "st", &many(20_000), &[]).unwrap();
        invalidate(&s, "ns").unwrap();
        assert_eq!(
            digests::read(&s, "ns", Some("st")).unwrap().digests,
            Err(digests::Untrusted::Missing)
        );

        // A new generation whose chunk 1 never landed: chunk 0 names 2 chunks,
        // the chunk 1 found is the old one.
        write_digests(&s, "ns", "g1", "st", &many(20_000), &[]).unwrap();
        let mut c0 = s
            .get(&digests::first_chunk_key("ns"), true)
            .unwrap()
            .unwrap();
        c0.insert("generation".into(), AttrValue::s("g2"));
        s.write(WriteOp::Put {
            item: c0,
            condition: None,
        })
        .unwrap();
        assert_eq!(
            digests::read(&s, "ns", Some("st")).unwrap().digests,
            Err(digests::Untrusted::Torn)
        );
    }

    #[test]
    fn a_smaller_rewrite_drops_the_chunks_it_no_longer_needs() {
        let s = MemoryStore::default();
        write_digests(&s, "ns", "g1", "st", &many(30_000), &[]).unwrap();
        let before = digests::read(&s, "ns", Some("st")).unwrap();
        assert!(before.keys.len() >= 3);
        write_digests(&s, "ns", "g2", "st2", &many(3), &before.keys).unwrap();
        let after = digests::read(&s, "ns", Some("st2")).unwrap();
        assert_eq!(after.keys.len(), 1);
        assert_eq!(after.digests.unwrap().len(), 3);
        // An empty manifest still records (an empty) set.
        write_digests(&s, "ns", "g3", "st3", &[], &after.keys).unwrap();
        assert_eq!(
            digests::read(&s, "ns", Some("st3"))
                .unwrap()
                .digests
                .unwrap()
                .len(),
            0
        );
    }

    fn entity(e: &str) -> Level {
        Level::Entity(e.into(), "r".into())
    }

    #[test]
    fn the_managed_set_follows_what_was_written() {
        let mut before = ProvisionerRecord::default();
        for e in ["kept", "dropped", "failed-delete", "failed-update"] {
            before.managed.insert(&entity(e));
        }
        before.unconfirmed.insert(&entity("maybe"));
        before.unconfirmed.insert(&entity("maybe-absent"));
        let mut declared = ManagedSet::default();
        for e in ["kept", "failed-update", "new", "failed-create", "maybe"] {
            declared.insert(&entity(e));
        }
        let after = managed_after(
            &before,
            &declared,
            [
                (entity("dropped"), Action::Delete, Outcome::Done),
                (entity("failed-delete"), Action::Delete, Outcome::Failed),
                (entity("failed-update"), Action::Update, Outcome::Failed),
                (entity("new"), Action::Create, Outcome::Done),
                (entity("failed-create"), Action::Create, Outcome::Failed),
                (entity("maybe"), Action::Create, Outcome::Failed),
                (entity("maybe-absent"), Action::Delete, Outcome::Forgotten),
            ],
        );
        let names: Vec<String> = after.entities.keys().cloned().collect();
        assert_eq!(
            names,
            ["failed-delete", "failed-update", "kept", "maybe", "new"]
        );
    }

    #[test]
    fn a_large_managed_set_is_recorded_beyond_the_record_and_read_back_whole() {
        let s = MemoryStore::default();
        let mut set = ManagedSet::default();
        for e in 0..12_000 {
            set.insert(&Level::Entity(format!("tenant-{e:06}"), "model-0".into()));
        }
        assert!(!record_size("ns", &set).0);
        let stamp = write_record(&s, "ns", "g1", &set, 0, "sha256:x", &[]).unwrap();
        let r = managed::read(&s, "ns").unwrap();
        assert_eq!(r.stamp.as_deref(), Some(stamp.as_str()));
        assert_eq!(r.managed, set);
        assert!(r.unconfirmed.is_empty());
        // A smaller set fits the record again: the overflow goes.
        let mut small = ManagedSet::default();
        small.insert(&entity("one"));
        assert!(record_size("ns", &small).0);
        write_record(&s, "ns", "g2", &small, 1, "sha256:y", &r.extra_keys).unwrap();
        let r = managed::read(&s, "ns").unwrap();
        assert_eq!((r.managed, r.extra_keys.len()), (small, 0));
    }
}
