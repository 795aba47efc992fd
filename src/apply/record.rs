//! What apply records for the next plan: the `#PROVISIONER` record (the
//! managed set the manifest declares, [`crate::plan::managed`]) and, after
//! it, the level digests `--no-refresh` trusts ([`crate::plan::digests`]
//! owns their format and reads them). The digests stop being true with the
//! first config write, so [`invalidate`] runs before it.

use crate::manifest::Manifest;
use crate::plan::digests::{self, Digest};
use crate::plan::identity::RecordIdentity;
use crate::plan::managed::{self, ManagedSet};
use crate::store::{Key, Store, StoreError, WriteOp};

/// Writes the `#PROVISIONER` record: managed = what the manifest declares
/// (even for levels whose write failed), only over the record the plan was
/// computed against (`expect`; a changed one fails with
/// [`StoreError::ConditionFailed`], see [`crate::apply::conflict`]). Returns
/// its `last_applied` stamp.
pub fn write_record(
    store: &dyn Store,
    ns: &str,
    manifest: &Manifest,
    now_ms: i64,
    applied_hash: &str,
    expect: &RecordIdentity,
) -> Result<String, StoreError> {
    let last_applied = managed::iso_timestamp(now_ms);
    let item = managed::record_item(
        ns,
        &ManagedSet::from_manifest(manifest),
        &last_applied,
        applied_hash,
    );
    store.write(WriteOp::Put {
        item,
        condition: Some(expect.condition()),
    })?;
    Ok(last_applied)
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
    let written: Vec<Key> = items.as_slice().iter().filter_map(Key::of).collect();
    let rest = items.map(|item| WriteOp::Put {
        item,
        condition: None,
    });
    for r in store.batch_write(rest.collect()) {
        r?;
    }
    let mut kept = written;
    if let Some(item) = first {
        kept.extend(Key::of(&item));
        store.write(WriteOp::Put {
            item,
            condition: None,
        })?;
    }
    let drop: Vec<WriteOp> = stale
        .iter()
        .filter(|k| !kept.contains(k))
        .map(|k| WriteOp::Delete {
            key: k.clone(),
            condition: None,
        })
        .collect();
    for r in store.batch_write(drop) {
        r?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::digests::tests::{item, key};
    use crate::store::memory::MemoryStore;
    use crate::store::AttrValue;

    fn many(n: usize) -> Vec<Digest> {
        (0..n)
            .map(|i| digests::digest(&key(), &item(&i.to_string())))
            .collect()
    }

    #[test]
    fn written_digests_read_back_for_the_same_record_only() {
        let s = MemoryStore::default();
        let d = many(digests::PER_CHUNK * 2 + 5);
        write_digests(&s, "ns", "g1", "sha256:a t1", &d, &[]).unwrap();
        let r = digests::read(&s, "ns", Some("sha256:a t1")).unwrap();
        assert_eq!(r.keys.len(), 3);
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
        write_digests(&s, "ns", "g1", "st", &many(digests::PER_CHUNK + 1), &[]).unwrap();
        invalidate(&s, "ns").unwrap();
        assert_eq!(
            digests::read(&s, "ns", Some("st")).unwrap().digests,
            Err(digests::Untrusted::Missing)
        );

        // A new generation whose chunk 1 never landed: chunk 0 names 2 chunks,
        // the chunk 1 found is the old one.
        write_digests(&s, "ns", "g1", "st", &many(digests::PER_CHUNK + 1), &[]).unwrap();
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
        write_digests(&s, "ns", "g1", "st", &many(digests::PER_CHUNK * 2 + 1), &[]).unwrap();
        let before = digests::read(&s, "ns", Some("st")).unwrap();
        assert_eq!(before.keys.len(), 3);
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
}
