//! When the `#PROVISIONER` record changed while an apply ran
//! (docs/storage.md, "Concurrent applies").
//!
//! An apply plans against the record it read and writes its own record only
//! over that one ([`crate::apply::record::write_record`] is conditioned on its
//! identity). When someone else wrote the record in between (an apply run with
//! `--lock=false`, or the reference's provisioner, which knows nothing of our
//! lock), the condition fails and the apply must not replace their managed set
//! with its own. But the levels it already wrote would then be outside every
//! managed set: enforced by Python, invisible to every later plan. So instead
//! of its record it adds the levels it wrote to the record it found
//! ([`keep_written`]): the next plan, of either manifest, sees them and
//! updates or deletes them. Deleting them instead would race the other writer
//! (it may have written the same level) and needs the entity-count journal
//! again; adding them to the managed set is one conditional write.

use std::collections::HashMap;

use crate::plan::identity::RecordIdentity;
use crate::plan::level::{Action, Level};
use crate::plan::managed::{self, ManagedSet};
use crate::plan::prepare::PlannedChange;
use crate::store::{Item, Key, Store, StoreError, WriteOp};

/// Rounds of read-merge-write before giving up on a record that keeps changing.
const ROUNDS: usize = 5;

/// The levels an apply created or updated (`items`: what step 5 wrote, by
/// key; `None` = deleted).
pub fn written_levels(
    ns: &str,
    changes: &[PlannedChange],
    items: &HashMap<Key, Option<Item>>,
) -> Vec<Level> {
    changes
        .iter()
        .filter(|pc| pc.change.action != Action::Delete)
        .filter(|pc| matches!(items.get(&pc.change.level.key(ns)), Some(Some(_))))
        .map(|pc| pc.change.level.clone())
        .collect()
}

/// What [`keep_written`] found and did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kept {
    /// The record found instead of the one planned against.
    pub found: RecordIdentity,
    /// Levels added to its managed set (0: it already managed them all).
    pub added: usize,
}

/// Adds `levels` to the managed set of the record as it is now, with a write
/// conditioned on what was just read (retried while it keeps changing). The
/// record keeps every other attribute, its `applied_hash` included (there is
/// no record: `fallback_hash`), and gets a new `last_applied`, so saved plans
/// and recorded digests made against it are no longer trusted.
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
        let mut set = match &item {
            Some(i) => ManagedSet::from_item(i).map_err(|reason| StoreError::Corrupt {
                pk: key.pk.clone(),
                sk: key.sk.clone(),
                reason,
            })?,
            None => ManagedSet::default(),
        };
        let added = levels.iter().filter(|l| add(&mut set, l)).count();
        if added == 0 {
            return Ok(Kept { found, added });
        }
        let hash = found.applied_hash.as_deref().unwrap_or(fallback_hash);
        let fresh = managed::record_item(ns, &set, &managed::iso_timestamp(now_ms), hash);
        let mut merged = item.unwrap_or_default();
        for (name, value) in fresh {
            if name != "applied_hash" || !merged.contains_key(&name) {
                merged.insert(name, value);
            }
        }
        match store.write(WriteOp::Put {
            item: merged,
            condition: Some(found.condition()),
        }) {
            Ok(_) => return Ok(Kept { found, added }),
            Err(StoreError::ConditionFailed { .. }) => continue,
            Err(e) => return Err(e),
        }
    }
    Err(StoreError::Backend(format!(
        "the #PROVISIONER record kept changing ({ROUNDS} tries)"
    )))
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
    use crate::plan::level::Change;
    use crate::store::memory::MemoryStore;
    use crate::store::AttrValue;

    fn entity(e: &str) -> Level {
        Level::Entity(e.into(), "r".into())
    }

    #[test]
    fn written_levels_are_the_creates_and_updates_that_landed() {
        let change = |action, level: Level| PlannedChange {
            change: Change::new(action, level),
            desired: None,
            live: None,
            details: vec![],
        };
        let changes = vec![
            change(Action::Create, entity("a")),
            change(Action::Update, entity("b")),
            change(Action::Delete, entity("c")),
            change(Action::Create, entity("failed")),
        ];
        let mut items = HashMap::new();
        items.insert(entity("a").key("ns"), Some(Item::new()));
        items.insert(entity("b").key("ns"), Some(Item::new()));
        items.insert(entity("c").key("ns"), None);
        assert_eq!(
            written_levels("ns", &changes, &items),
            vec![entity("a"), entity("b")]
        );
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
        let mut rec = managed::record_item("ns", &theirs, "t-theirs", "sha256:theirs");
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
        // Nothing new to add: nothing written.
        let again = keep_written(&s, "ns", &[entity("a")], 5, "sha256:ours").unwrap();
        assert_eq!(again.added, 0);
        assert_eq!(managed::read(&s, "ns").unwrap().identity, now.identity);
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
