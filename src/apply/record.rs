//! What apply records for the next plan: the `#PROVISIONER` record (the
//! managed set, [`crate::plan::managed`], with what does not fit it in our
//! overflow items) and, after it, the level digests `--no-refresh` trusts
//! ([`crate::plan::digests`] owns their format and reads them).
//!
//! The managed set written is what the apply actually did, not what it
//! planned: a level whose create, update or delete failed keeps its old
//! place in (or out of) the set, so the next apply retries it
//! ([`managed_after`]). Before its first config write an apply records the
//! levels it is about to create, so a level written by an apply that dies
//! before its record is still found by the next one, and makes the digests
//! unusable, as they stop being true with that write ([`before_writes`]).

use crate::plan::digests::{self, Digest};
use crate::plan::identity::{RecordIdentity, WRITE_ATTR};
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

/// The writes that go before an apply's first config write, as one batch
/// with the count journal: the recorded digests made unusable (chunk 0
/// deleted: they stop being true with the first config write), and the
/// levels this apply is about to create that no record or set holds yet.
/// Returns the ops and the keys of the items recording the creates.
pub fn before_writes(ns: &str, token: &str, creates: &ManagedSet) -> (Vec<WriteOp>, Vec<Key>) {
    let mut ops = vec![WriteOp::Delete {
        key: digests::first_chunk_key(ns),
        condition: None,
    }];
    let mut keys = Vec::new();
    if !creates.is_empty() {
        for item in managed::set_items(ns, managed::WRITING_SK_PREFIX, token, creates, &[]) {
            keys.extend(Key::of(&item));
            ops.push(WriteOp::Put {
                item,
                condition: None,
            });
        }
    }
    (ops, keys)
}

/// What [`write`] managed to record.
#[derive(Debug)]
pub struct Recorded {
    /// The `#PROVISIONER` record's stamp (its `applied_hash` and `last_applied`).
    pub record: Result<String, StoreError>,
    pub digests: Result<(), StoreError>,
}

/// Records an apply's end: the managed set (with `counts_left`, the entity
/// counts' fingerprint after the apply) — the whole set in overflow items
/// first when it does not fit the record — then the `#PROVISIONER` record,
/// only over the one the plan was computed against (`expect`; a changed one
/// fails with [`StoreError::ConditionFailed`], see [`crate::apply::conflict`]),
/// then the level `digests` (they name the new record, so digests that land
/// without it are simply not trusted), and, once the record is in, deletes
/// the items in `stale` (older overflow and digest items, the items recording
/// what the apply was about to create) it did not rewrite.
#[allow(clippy::too_many_arguments)]
pub fn write(
    store: &dyn Store,
    ns: &str,
    token: &str,
    managed: &ManagedSet,
    now_ms: i64,
    applied_hash: &str,
    counts_left: Option<&str>,
    digests: &[Digest],
    stale: &[Key],
    expect: &RecordIdentity,
) -> Recorded {
    let last_applied = managed::iso_timestamp(now_ms);
    let stamp = digests::stamp(applied_hash, &last_applied);
    // A fresh id for this write of the record (RecordIdentity::write_id).
    let mut ours = vec![(WRITE_ATTR, AttrValue::s(crate::apply::new_token()))];
    if let Some(fp) = counts_left {
        ours.push((managed::COUNTS_ATTR, AttrValue::s(fp)));
    }
    let (record, rest) = managed::record_item(
        ns,
        managed,
        &last_applied,
        applied_hash,
        managed::record_limit(),
        &ours,
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
        kept.extend(items.iter().filter_map(Key::of));
        if let Err(e) = put_all(store, items) {
            return Recorded {
                record: Err(e),
                digests: Ok(()),
            };
        }
    }
    let record = store
        .write(WriteOp::Put {
            item: record,
            condition: Some(expect.condition()),
        })
        .map(|_| stamp.clone());
    if record.is_err() {
        return Recorded {
            record,
            digests: Ok(()),
        };
    }
    let chunks = digests::chunk_items(ns, token, &stamp, digests);
    kept.extend(chunks.iter().filter_map(Key::of));
    let digests = put_all(store, chunks);
    if record.is_ok() {
        if let Err(e) = delete_except(store, stale, &kept) {
            return Recorded {
                record,
                digests: Err(e),
            };
        }
    }
    Recorded { record, digests }
}

/// Whether `managed` fits the `#PROVISIONER` record, and the record's size
/// were it all there (what `limits plan` tells).
pub fn record_size(ns: &str, managed: &ManagedSet) -> (bool, usize) {
    let (record, _) = managed::record_item(ns, managed, "", "", usize::MAX, &[]);
    let size = crate::store::emulate::item_size(&record);
    (size <= managed::record_limit(), size)
}

/// One unconditional put per item, for a batch write.
pub(super) fn puts(items: Vec<crate::store::Item>) -> Vec<WriteOp> {
    items
        .into_iter()
        .map(|item| WriteOp::Put {
            item,
            condition: None,
        })
        .collect()
}

fn put_all(store: &dyn Store, items: Vec<crate::store::Item>) -> Result<(), StoreError> {
    store.batch_write(puts(items)).into_iter().collect()
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

    /// [`write`] of an empty managed set with `d`, dropping `stale`.
    fn write_digests(s: &MemoryStore, token: &str, d: &[Digest], stale: &[Key]) -> String {
        let now = managed::read(s, "ns").unwrap().identity;
        let done = write(
            s,
            "ns",
            token,
            &ManagedSet::default(),
            0,
            token,
            None,
            d,
            stale,
            &now,
        );
        done.digests.unwrap();
        done.record.unwrap()
    }

    fn invalidate(s: &MemoryStore) {
        for r in s.batch_write(before_writes("ns", "t", &ManagedSet::default()).0) {
            r.unwrap();
        }
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
        let st = write_digests(&s, "g1", &d, &[]);
        let sizes = chunk_sizes(&s);
        assert!(sizes.len() >= 3, "{sizes:?}");
        assert!(sizes.iter().all(|n| *n <= crate::items::chunked::LIMIT));
        let r = digests::read(&s, "ns", Some(&st)).unwrap();
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
        let st = write_digests(&s, "g1", &many(20_000), &[]);
        invalidate(&s);
        assert_eq!(
            digests::read(&s, "ns", Some(&st)).unwrap().digests,
            Err(digests::Untrusted::Missing)
        );

        // A new generation whose chunk 1 never landed: chunk 0 names 2 chunks,
        // the chunk 1 found is the old one.
        let st = write_digests(&s, "g1", &many(20_000), &[]);
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
            digests::read(&s, "ns", Some(&st)).unwrap().digests,
            Err(digests::Untrusted::Torn)
        );
    }

    #[test]
    fn a_smaller_rewrite_drops_the_chunks_it_no_longer_needs() {
        let s = MemoryStore::default();
        let st = write_digests(&s, "g1", &many(30_000), &[]);
        let before = digests::read(&s, "ns", Some(&st)).unwrap();
        assert!(before.keys.len() >= 3);
        let st2 = write_digests(&s, "g2", &many(3), &before.keys);
        let after = digests::read(&s, "ns", Some(&st2)).unwrap();
        assert_eq!(after.keys.len(), 1);
        assert_eq!(after.digests.unwrap().len(), 3);
        // An empty manifest still records (an empty) set.
        let st3 = write_digests(&s, "g3", &[], &after.keys);
        assert_eq!(
            digests::read(&s, "ns", Some(&st3))
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
        let set = ManagedSet::tenants(12_000);
        assert!(!record_size("ns", &set).0);
        let none = managed::read(&s, "ns").unwrap().identity;
        let stamp = write(&s, "ns", "g1", &set, 0, "sha256:x", None, &[], &[], &none)
            .record
            .unwrap();
        let r = managed::read(&s, "ns").unwrap();
        assert_eq!(r.stamp.as_deref(), Some(stamp.as_str()));
        assert_eq!(r.managed, set);
        assert!(r.unconfirmed.is_empty());
        // A smaller set fits the record again: the overflow goes.
        let mut small = ManagedSet::default();
        small.insert(&entity("one"));
        assert!(record_size("ns", &small).0);
        write(
            &s,
            "ns",
            "g2",
            &small,
            1,
            "sha256:y",
            None,
            &[],
            &r.extra_keys,
            &r.identity,
        )
        .record
        .unwrap();
        let r = managed::read(&s, "ns").unwrap();
        assert_eq!((r.managed, r.extra_keys.len()), (small, 0));
    }
}
