//! Keeping every level an apply writes inside the managed set, whatever
//! else writes the `#PROVISIONER` record (docs/storage.md, "Concurrent
//! applies").
//!
//! The lock keeps our applies apart, but an apply run with `--lock=false`
//! and the reference's provisioner (which knows nothing of our lock) write
//! the record too, and a process can die between its config writes and its
//! record. So an apply:
//! * before any write, checks that the record is still the one its plan read
//!   and, when the result fits the record, adds every level it declares to it
//!   ([`widen`]): a crash after the config writes leaves those levels managed,
//!   so the next apply of any manifest (ours or the reference's provisioner)
//!   keeps or deletes them. A managed set beyond the record is not widened:
//!   the levels an apply is about to create are also recorded in items of
//!   ours before the first config write
//!   ([`crate::apply::record::before_writes`]), which our next apply reads;
//! * writes its final record only over that one
//!   ([`crate::apply::record::write_record`] is conditioned on its identity);
//!   when someone else wrote the record in between, it does not replace their
//!   managed set with its own, but adds the levels it wrote to the record it
//!   found ([`keep_written`]) and says what to do. Deleting them instead would
//!   race the other writer (it may have written the same level) and needs the
//!   entity-count journal again; adding them is one conditional write.

use crate::plan::identity::{RecordIdentity, WRITE_ATTR};
use crate::plan::level::Level;
use crate::plan::managed::{self, ManagedSet};
use crate::store::{AttrValue, Item, Store, StoreError, WriteOp};

/// Rounds of read-merge-write before giving up on a record that keeps changing.
const ROUNDS: usize = 5;

/// What [`keep_written`] found and did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kept {
    /// The record found instead of the one planned against.
    pub found: RecordIdentity,
    /// Levels added to its managed set (0: it already managed them all).
    pub added: usize,
}

/// The record must still be the one the plan read (`planned`): an apply
/// whose plan is already stale stops before it writes anything.
pub fn unchanged(
    store: &dyn Store,
    ns: &str,
    planned: &RecordIdentity,
) -> Result<Option<Item>, Changed> {
    let item = store.get(&managed::record_key(ns), true)?;
    let found = RecordIdentity::of(item.as_ref());
    if found != *planned {
        return Err(Changed::Record(found));
    }
    Ok(item)
}

/// Step 4a, before any write of an apply: the record must still be the one
/// the plan read (`planned`, see [`unchanged`]), and it now also manages
/// every level the apply `declares` (written with a condition on `planned`),
/// so an apply that dies after its config writes leaves nothing outside the
/// managed set: the next apply, of any manifest, sees those levels and keeps
/// or deletes them. Not when the record has a managed set beyond it
/// (`overflow`) or would outgrow the record: then only the check. Returns
/// the identity the final record write must find.
pub fn widen(
    store: &dyn Store,
    ns: &str,
    planned: &RecordIdentity,
    overflow: bool,
    declares: &ManagedSet,
    now_ms: i64,
    fallback_hash: &str,
) -> Result<RecordIdentity, Changed> {
    let item = unchanged(store, ns, planned)?;
    if overflow {
        return Ok(planned.clone());
    }
    let levels = levels_of(declares);
    match add_levels(store, ns, item, &levels, now_ms, fallback_hash, Mode::Widen) {
        Ok((_, now)) => Ok(now),
        Err(StoreError::ConditionFailed { .. }) => {
            let now = RecordIdentity::of(store.get(&managed::record_key(ns), true)?.as_ref());
            Err(Changed::Record(now))
        }
        Err(e) => Err(e.into()),
    }
}

/// Why [`widen`] stopped the apply.
#[derive(Debug, thiserror::Error)]
pub enum Changed {
    /// Another writer changed the record after the plan read it.
    #[error("the #PROVISIONER record changed after this apply read it (it is now {}); another apply that did not take the lock, or the reference's provisioner, wrote it. Nothing was written: plan and apply again", .0.describe())]
    Record(RecordIdentity),
    #[error("claiming the #PROVISIONER record before the writes: {0}")]
    Store(#[from] StoreError),
}

/// Adds `levels` to the managed set of the record as it is now, with a write
/// conditioned on what was just read (retried while it keeps changing). The
/// record keeps every other attribute, its `applied_hash` included (there is
/// no record: `fallback_hash`), and gets a new `last_applied` and write id, so
/// saved plans and recorded digests made against it are no longer trusted.
///
/// It is written even when it already manages every level: the apply that
/// wrote it may still be running, planned against a record that named our
/// levels before they existed (so it "deleted" them, writing nothing), and
/// about to write a final record without them. A new identity makes that
/// final write fail too, and that apply adds its own levels in turn instead
/// of dropping ours.
pub fn keep_written(
    store: &dyn Store,
    ns: &str,
    levels: &[Level],
    now_ms: i64,
    fallback_hash: &str,
) -> Result<Kept, StoreError> {
    let key = managed::record_key(ns);
    for _ in 0..ROUNDS {
        let item = store.get(&key, true)?;
        let found = RecordIdentity::of(item.as_ref());
        match add_levels(store, ns, item, levels, now_ms, fallback_hash, Mode::Keep) {
            Ok((added, _)) => return Ok(Kept { found, added }),
            Err(StoreError::ConditionFailed { .. }) => continue,
            Err(e) => return Err(e),
        }
    }
    Err(StoreError::Backend(format!(
        "the #PROVISIONER record kept changing ({ROUNDS} tries)"
    )))
}

/// What [`add_levels`] is for.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Step 4a: written only when a level is new and the set fits the record.
    Widen,
    /// After a failed final write ([`keep_written`]): always written.
    Keep,
}

/// Writes `item` (the record as read; `None`: none) with `levels` added to
/// its managed set, conditioned on it being unchanged. Returns how many levels
/// were added and the identity now stored (see [`Mode`] for when nothing is
/// written).
fn add_levels(
    store: &dyn Store,
    ns: &str,
    item: Option<Item>,
    levels: &[Level],
    now_ms: i64,
    fallback_hash: &str,
    mode: Mode,
) -> Result<(usize, RecordIdentity), StoreError> {
    let key = managed::record_key(ns);
    let found = RecordIdentity::of(item.as_ref());
    let mut set = match &item {
        Some(i) => ManagedSet::from_item(i).map_err(|reason| StoreError::Corrupt {
            pk: key.pk.clone(),
            sk: key.sk.clone(),
            reason: reason.to_string(),
        })?,
        None => ManagedSet::default(),
    };
    let added = levels.iter().filter(|l| add(&mut set, l)).count();
    if added == 0 && mode == Mode::Widen {
        return Ok((0, found));
    }
    let hash = found.applied_hash.as_deref().unwrap_or(fallback_hash);
    // A set beyond the record's size keeps what fits; the rest stays known to
    // this tool through the items that recorded the levels before their writes.
    let (fresh, beyond) = managed::record_item(
        ns,
        &set,
        &managed::iso_timestamp(now_ms),
        hash,
        managed::record_limit(),
        &[],
    );
    if mode == Mode::Widen && !beyond.is_empty() {
        return Ok((0, found));
    }
    let mut merged = item.unwrap_or_default();
    for (name, value) in fresh {
        if name != "applied_hash" || !merged.contains_key(&name) {
            merged.insert(name, value);
        }
    }
    // A fresh id for this write (RecordIdentity::write_id): the hash is kept
    // and another apply may have started in the same millisecond.
    merged.insert(
        WRITE_ATTR.to_string(),
        AttrValue::s(crate::apply::new_token()),
    );
    let now = RecordIdentity::of(Some(&merged));
    store.write(WriteOp::Put {
        item: merged,
        condition: Some(found.condition()),
    })?;
    Ok((added, now))
}

/// Every level of a managed set.
pub fn levels_of(set: &ManagedSet) -> Vec<Level> {
    let mut out = Vec::new();
    if set.system {
        out.push(Level::System);
    }
    out.extend(set.resources.iter().cloned().map(Level::Resource));
    out.extend(
        set.entity_pairs()
            .into_iter()
            .map(|(e, r)| Level::Entity(e, r)),
    );
    out
}

/// Adds `level` to `set`; whether it was new.
fn add(set: &mut ManagedSet, level: &Level) -> bool {
    match level {
        Level::System => !std::mem::replace(&mut set.system, true),
        Level::Resource(r) => set.resources.insert(r.clone()),
        Level::Entity(e, r) => set.entities.entry(e.clone()).or_default().insert(r.clone()),
    }
}

/// The apply error that says what happened and what to do.
pub fn message(planned: &RecordIdentity, kept: &Result<Kept, StoreError>) -> String {
    let head = "the #PROVISIONER record changed while this apply ran (another apply that did not take the lock, or the reference's provisioner, wrote it), so this apply did not write its record over it";
    let what = match kept {
        Ok(k) => format!(
            "planned against {}, found {}; {}",
            planned.describe(),
            k.found.describe(),
            match k.added {
                0 => "it already manages every level this apply wrote".to_string(),
                n => format!(
                    "the {n} level(s) this apply wrote that it did not manage were added to its managed set, so none is left outside it"
                ),
            }
        ),
        Err(e) => format!(
            "planned against {}; adding the levels this apply wrote to the record failed ({e}), so some may be outside the managed set until an apply of this manifest finishes",
            planned.describe()
        ),
    };
    format!(
        "{head}: {what}. Run `zae-limiter limits plan` with the manifest that should be in force, then apply it"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::memory::MemoryStore;

    fn entity(e: &str) -> Level {
        Level::Entity(e.into(), "r".into())
    }

    #[test]
    fn written_levels_join_the_record_found_which_keeps_its_hash() {
        let s = MemoryStore::new();
        let mut theirs = ManagedSet::default();
        theirs.resources.insert("r".into());
        theirs
            .entities
            .entry("x".into())
            .or_default()
            .insert("r".into());
        let mut rec = record("ns", &theirs, "t-theirs", "sha256:theirs");
        rec.insert("extra".into(), AttrValue::s("kept"));
        s.put(rec);
        let kept = keep_written(
            &s,
            "ns",
            &[Level::Resource("r".into()), entity("a"), Level::System],
            0,
            "sha256:ours",
        )
        .unwrap();
        assert_eq!(kept.added, 2);
        assert_eq!(kept.found.last_applied.as_deref(), Some("t-theirs"));
        let now = managed::read(&s, "ns").unwrap();
        assert!(now.managed.system);
        assert!(now.managed.contains(&entity("a")) && now.managed.contains(&entity("x")));
        assert_eq!(now.identity.applied_hash.as_deref(), Some("sha256:theirs"));
        assert_ne!(now.identity, kept.found, "a new last_applied");
        let item = s.item("ns/SYSTEM#", "#PROVISIONER").unwrap();
        assert_eq!(item.get("extra"), Some(&AttrValue::s("kept")));
        // Nothing new to add: written all the same, so an apply still running
        // against the record found cannot write its own over it.
        let again = keep_written(&s, "ns", &[entity("a")], 5, "sha256:ours").unwrap();
        assert_eq!((again.added, &again.found), (0, &now.identity));
        let after = managed::read(&s, "ns").unwrap();
        assert_ne!(after.identity, now.identity);
        assert_eq!(after.managed, now.managed);
        assert!(matches!(
            s.write(WriteOp::Put {
                item: record("ns", &theirs, "t-late", "sha256:theirs"),
                condition: Some(now.identity.condition()),
            }),
            Err(StoreError::ConditionFailed { .. })
        ));
    }

    #[test]
    fn widen_checks_the_record_planned_against_and_adds_the_declared_levels() {
        let s = MemoryStore::new();
        let mut old = ManagedSet::default();
        old.resources.insert("old".into());
        s.put(record("ns", &old, "t0", "sha256:old"));
        let planned = managed::read(&s, "ns").unwrap().identity;
        let mut declares = ManagedSet::default();
        declares.insert(&Level::Resource("new".into()));
        declares.insert(&entity("a"));
        let now = widen(&s, "ns", &planned, false, &declares, 0, "sha256:new").unwrap();
        let rec = managed::read(&s, "ns").unwrap();
        assert_eq!(rec.identity, now);
        assert_ne!(now, planned);
        assert_eq!(
            levels_of(&rec.managed),
            vec![
                Level::Resource("new".into()),
                Level::Resource("old".into()),
                entity("a")
            ],
            "the old managed set and the declared levels"
        );
        // Nothing new to manage: nothing written.
        assert_eq!(
            widen(&s, "ns", &now, false, &declares, 5, "sha256:new").unwrap(),
            now
        );
        // A record with a managed set beyond it is only checked.
        declares.insert(&entity("b"));
        assert_eq!(
            widen(&s, "ns", &now, true, &declares, 7, "sha256:new").unwrap(),
            now
        );
        assert!(!managed::read(&s, "ns")
            .unwrap()
            .managed
            .contains(&entity("b")));
        // The record the plan read was replaced: stop before any write.
        let err = widen(&s, "ns", &planned, false, &declares, 9, "sha256:new").unwrap_err();
        assert!(matches!(err, Changed::Record(ref found) if *found == now));
        assert!(err.to_string().contains("Nothing was written"), "{err}");
        assert_eq!(managed::read(&s, "ns").unwrap().identity, now);
    }

    #[test]
    fn widen_leaves_a_record_that_would_outgrow_its_item_alone() {
        let s = MemoryStore::new();
        let big = ManagedSet::tenants(12_000);
        let planned = RecordIdentity::default();
        assert_eq!(
            widen(&s, "ns", &planned, false, &big, 0, "sha256:new").unwrap(),
            planned
        );
        assert!(!managed::read(&s, "ns").unwrap().identity.exists);
    }

    #[test]
    fn unchanged_stops_an_apply_whose_record_was_replaced() {
        let s = MemoryStore::new();
        assert!(unchanged(&s, "ns", &RecordIdentity::default()).is_ok());
        let mut old = ManagedSet::default();
        old.resources.insert("old".into());
        s.put(record("ns", &old, "t0", "sha256:old"));
        let planned = managed::read(&s, "ns").unwrap().identity;
        assert!(unchanged(&s, "ns", &planned).is_ok());
        // Planned against no record, but one was written since.
        let err = unchanged(&s, "ns", &RecordIdentity::default()).unwrap_err();
        assert!(matches!(err, Changed::Record(ref found) if *found == planned));
        // The record the plan read was replaced: stop before any write.
        s.put(record("ns", &old, "t1", "sha256:old"));
        let err = unchanged(&s, "ns", &planned).unwrap_err();
        assert!(err.to_string().contains("Nothing was written"), "{err}");
    }

    fn record(ns: &str, set: &ManagedSet, at: &str, hash: &str) -> Item {
        managed::record_item(ns, set, at, hash, usize::MAX, &[]).0
    }

    #[test]
    fn without_a_record_one_is_written_with_the_levels() {
        let s = MemoryStore::new();
        let kept = keep_written(&s, "ns", &[entity("a")], 0, "sha256:ours").unwrap();
        assert_eq!((kept.found.exists, kept.added), (false, 1));
        let rec = managed::read(&s, "ns").unwrap();
        assert!(rec.managed.contains(&entity("a")));
        assert_eq!(rec.identity.applied_hash.as_deref(), Some("sha256:ours"));
        let msg = message(&RecordIdentity::default(), &Ok(kept));
        assert!(msg.contains("planned against no #PROVISIONER record, found no #PROVISIONER record; the 1 level(s)"), "{msg}");
    }
}
