//! Config writes, done so the Python tool's listings see what apply wrote: a
//! resource level also appears in the `#RESOURCES` set, and entity levels are
//! counted per resource in `#ENTITY_CONFIG_RESOURCES` (docs/storage.md,
//! "Registries").
//!
//! Many levels are written at once, as batched writes ([`Store::batch_write`])
//! and, for entity creates and deletes, concurrent conditional writes: one
//! transaction per level (or per 98 levels) costs far more, on DynamoDB and even
//! more on moto. Crash safety without them:
//! * the `#RESOURCES` set is updated *before* the config writes; adding or
//!   removing a name is idempotent, so a later apply redoes it harmlessly;
//! * the entity counts go through a journal ([`counts`]) that makes each
//!   increment happen exactly once, even when the process dies mid-apply.

use std::collections::HashSet;

use crate::apply::counts::{self, Entry};
use crate::plan::level::Level;
use crate::store::{Condition, Item, Store, StoreError, UpdateAction, WriteOp};

use crate::items::keys::resources_registry_key as resources_key;

/// One level write.
#[derive(Debug, Clone, Copy)]
pub enum LevelWrite<'a> {
    /// Full replace. `existed`: the pre-read saw the item (it is not counted again).
    Put {
        level: &'a Level,
        item: &'a Item,
        existed: bool,
    },
    /// `existed: false` writes nothing (already gone).
    Delete { level: &'a Level, existed: bool },
}

impl LevelWrite<'_> {
    fn level(&self) -> &Level {
        match self {
            LevelWrite::Put { level, .. } | LevelWrite::Delete { level, .. } => level,
        }
    }
}

/// What [`write_levels`] did.
#[derive(Debug)]
pub struct Written {
    /// One result per write, in order.
    pub results: Vec<Result<(), StoreError>>,
    /// Keeping the entity counts failed after the writes; the journal stays and
    /// a later apply settles it.
    pub counts: Option<StoreError>,
}

/// Writes many levels and keeps the registries. `token` and `lease` name and
/// time-limit this writer's count journal (see [`counts`]).
pub fn write_levels(
    store: &dyn Store,
    ns: &str,
    token: &str,
    lease: i64,
    writes: &[LevelWrite<'_>],
) -> Written {
    let mut results: Vec<Option<Result<(), StoreError>>> = writes.iter().map(|_| None).collect();

    // 1. The `#RESOURCES` set, ahead of the writes.
    let (mut added, mut removed) = (Vec::new(), Vec::new());
    for w in writes {
        match w {
            LevelWrite::Put {
                level: Level::Resource(r),
                ..
            } => added.push(r.clone()),
            LevelWrite::Delete {
                level: Level::Resource(r),
                ..
            } => removed.push(r.clone()),
            _ => {}
        }
    }
    if let Err(e) = update_resources_set(store, ns, added, removed) {
        fail(writes, &mut results, &e, |l| {
            matches!(l, Level::Resource(_))
        });
    }

    // 2. The count journal, ahead of the writes.
    let entries: Vec<Entry> = writes
        .iter()
        .zip(&results)
        .filter(|(_, r)| r.is_none())
        .filter_map(|(w, _)| match w {
            LevelWrite::Put {
                level: Level::Entity(e, r),
                existed: false,
                ..
            } => Some((e, r, true)),
            LevelWrite::Delete {
                level: Level::Entity(e, r),
                existed: true,
            } => Some((e, r, false)),
            _ => None,
        })
        .map(|(e, r, create)| Entry {
            entity: e.clone(),
            resource: r.clone(),
            create,
        })
        .collect();
    let journal = match counts::write_ahead(store, ns, token, lease, entries) {
        Ok(j) => j,
        Err(e) => {
            fail(writes, &mut results, &e, |l| matches!(l, Level::Entity(..)));
            Vec::new()
        }
    };

    // 3. The config writes: entity deletes are conditional, so a count never
    //    drops for a level someone else deleted (a count too low makes the
    //    Python limiter skip entity configs); every other write is a batched
    //    unconditional put or delete. A level another writer creates between
    //    our pre-read and our put is counted twice: too high only costs the
    //    limiter a read.
    let mut counted: Vec<usize> = Vec::new();
    let mut counted_ops = Vec::new();
    let mut batched: Vec<usize> = Vec::new();
    let mut batched_ops = Vec::new();
    for (i, w) in writes.iter().enumerate() {
        if results[i].is_some() {
            continue;
        }
        match *w {
            LevelWrite::Put { item, .. } => {
                batched.push(i);
                batched_ops.push(WriteOp::Put {
                    item: item.clone(),
                    condition: None,
                });
            }
            LevelWrite::Delete { existed: false, .. } => results[i] = Some(Ok(())), // already gone
            LevelWrite::Delete {
                level: level @ Level::Entity(..),
                ..
            } => {
                counted.push(i);
                counted_ops.push(WriteOp::Delete {
                    key: level.key(ns),
                    condition: Some(Condition::Exists),
                });
            }
            LevelWrite::Delete { level, .. } => {
                batched.push(i);
                batched_ops.push(WriteOp::Delete {
                    key: level.key(ns),
                    condition: None,
                });
            }
        }
    }
    let mut ours: HashSet<(&str, &str)> = HashSet::new();
    for (i, r) in counted.into_iter().zip(store.write_many(counted_ops)) {
        results[i] = Some(match r {
            Ok(_) => {
                if let Level::Entity(e, res) = writes[i].level() {
                    ours.insert((e.as_str(), res.as_str()));
                }
                Ok(())
            }
            // Deleted meanwhile by someone else (who counted it).
            Err(StoreError::ConditionFailed { .. }) => Ok(()),
            Err(e) => Err(e),
        });
    }
    for (i, r) in batched.into_iter().zip(store.batch_write(batched_ops)) {
        if r.is_ok() {
            if let LevelWrite::Put {
                level: Level::Entity(e, res),
                existed: false,
                ..
            } = &writes[i]
            {
                ours.insert((e.as_str(), res.as_str()));
            }
        }
        results[i] = Some(r);
    }

    // 4. Settle the journal with what this apply did.
    let did = |e: &Entry| ours.contains(&(e.entity.as_str(), e.resource.as_str()));
    let mut counts_error = None;
    for chunk in &journal {
        if let Err(e) = counts::settle(store, ns, chunk, Some(&did)) {
            counts_error.get_or_insert(e);
        }
    }
    Written {
        results: results
            .into_iter()
            .map(|r| r.unwrap_or_else(|| Err(StoreError::Backend("write was not run".into()))))
            .collect(),
        counts: counts_error,
    }
}

/// Writes `item` as the level's config (full replace), with its registry entry.
/// `existed` is what the caller's read saw; `false` is checked with a fresh read,
/// so a stale "absent" does not count the level twice.
pub fn put_level(
    store: &dyn Store,
    ns: &str,
    level: &Level,
    item: Item,
    existed: bool,
) -> Result<(), StoreError> {
    let counted = matches!(level, Level::Entity(..));
    let existed = existed || (counted && store.get(&level.key(ns), true)?.is_some());
    let w = LevelWrite::Put {
        level,
        item: &item,
        existed,
    };
    single(store, ns, w)
}

/// Deletes the level's config item (and its registry entry).
pub fn delete_level(store: &dyn Store, ns: &str, level: &Level) -> Result<(), StoreError> {
    let existed = store.get(&level.key(ns), true)?.is_some();
    single(store, ns, LevelWrite::Delete { level, existed })
}

fn single(store: &dyn Store, ns: &str, w: LevelWrite<'_>) -> Result<(), StoreError> {
    let now = crate::clock::system_ms();
    let token = format!("single-{}-{now}", std::process::id());
    let mut out = write_levels(store, ns, &token, now + crate::apply::LEASE_MS, &[w]);
    match (out.results.pop(), out.counts) {
        (Some(Err(e)), _) | (_, Some(e)) => Err(e),
        _ => Ok(()),
    }
}

/// Marks every not-yet-decided write on a level `which` accepts as failed with `e`.
fn fail(
    writes: &[LevelWrite<'_>],
    results: &mut [Option<Result<(), StoreError>>],
    e: &StoreError,
    which: impl Fn(&Level) -> bool,
) {
    for (w, r) in writes.iter().zip(results.iter_mut()) {
        if r.is_none() && which(w.level()) {
            *r = Some(Err(e.clone()));
        }
    }
}

/// Adds and removes resource names in the `#RESOURCES` set (idempotent). A
/// removal from a registry that does not exist is nothing to do.
fn update_resources_set(
    store: &dyn Store,
    ns: &str,
    added: Vec<String>,
    removed: Vec<String>,
) -> Result<(), StoreError> {
    if !added.is_empty() {
        let mut actions = vec![UpdateAction::AddToSet("resources".into(), added)];
        actions.extend(counts::gsi4(ns));
        store.write(WriteOp::Update {
            key: resources_key(ns),
            actions,
            condition: None,
        })?;
    }
    if !removed.is_empty() {
        let op = WriteOp::Update {
            key: resources_key(ns),
            actions: vec![UpdateAction::DeleteFromSet("resources".into(), removed)],
            condition: Some(Condition::Exists),
        };
        match store.write(op) {
            Ok(_) | Err(StoreError::ConditionFailed { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::item::keyed;
    use crate::store::memory::MemoryStore;
    use crate::store::AttrValue;

    fn item(level: &Level) -> Item {
        let k = level.key("ns");
        keyed(&k.pk, &k.sk, &[("l_rpm_cp", AttrValue::n(5))])
    }

    #[test]
    fn resource_writes_maintain_the_resources_set() {
        let s = MemoryStore::new();
        let a = Level::Resource("a".into());
        let b = Level::Resource("b".into());
        put_level(&s, "ns", &a, item(&a), false).unwrap();
        put_level(&s, "ns", &b, item(&b), false).unwrap();
        let reg = s.item("ns/SYSTEM#", "#RESOURCES").unwrap();
        assert_eq!(
            reg.get("resources"),
            Some(&AttrValue::Ss(["a".to_string(), "b".to_string()].into()))
        );
        assert_eq!(reg.get("GSI4PK"), Some(&AttrValue::s("ns")));
        delete_level(&s, "ns", &a).unwrap();
        delete_level(&s, "ns", &b).unwrap();
        assert!(s.item("ns/RESOURCE#a", "#CONFIG").is_none());
        assert!(!s
            .item("ns/SYSTEM#", "#RESOURCES")
            .unwrap()
            .contains_key("resources"));
    }

    #[test]
    fn a_batch_of_writes_equals_the_same_writes_one_by_one() {
        let levels = [
            Level::System,
            Level::Resource("a".into()),
            Level::Resource("b".into()),
            Level::Entity("u1".into(), "a".into()),
            Level::Entity("u2".into(), "a".into()),
            Level::Entity("u2".into(), "_default_".into()),
        ];
        let one = MemoryStore::new();
        let many = MemoryStore::new();
        for l in &levels {
            put_level(&one, "ns", l, item(l), false).unwrap();
        }
        let items: Vec<Item> = levels.iter().map(item).collect();
        let puts = |existed: bool| -> Vec<LevelWrite<'_>> {
            levels
                .iter()
                .zip(&items)
                .map(|(level, item)| LevelWrite::Put {
                    level,
                    item,
                    existed,
                })
                .collect()
        };
        let out = write_levels(&many, "ns", "t", 0, &puts(false));
        assert!(out.results.iter().all(Result::is_ok) && out.counts.is_none());
        assert_eq!(one.snapshot(), many.snapshot());
        // Marked as existing, they are replaced without counting them again.
        let before = many.snapshot();
        write_levels(&many, "ns", "t", 0, &puts(true));
        assert_eq!(many.snapshot(), before);
        // Deleting them all, in one batch, empties the registries.
        let batch: Vec<LevelWrite<'_>> = levels
            .iter()
            .map(|level| LevelWrite::Delete {
                level,
                existed: true,
            })
            .collect();
        write_levels(&many, "ns", "t", 0, &batch);
        for l in &levels {
            delete_level(&one, "ns", l).unwrap();
        }
        assert_eq!(one.snapshot(), many.snapshot());
        let counts = many.item("ns/SYSTEM#", "#ENTITY_CONFIG_RESOURCES");
        assert!(counts.is_some_and(|c| !c.contains_key("a") && !c.contains_key("_default_")));
    }

    #[test]
    fn entity_writes_count_references_per_resource() {
        let s = MemoryStore::new();
        let u1 = Level::Entity("u1".into(), "gpt-4".into());
        let u2 = Level::Entity("u2".into(), "gpt-4".into());
        put_level(&s, "ns", &u1, item(&u1), false).unwrap();
        // A stale "absent" pre-read must not count the same item twice.
        put_level(&s, "ns", &u1, item(&u1), false).unwrap();
        put_level(&s, "ns", &u2, item(&u2), true).unwrap();
        let count = |s: &MemoryStore| {
            s.item("ns/SYSTEM#", "#ENTITY_CONFIG_RESOURCES")
                .and_then(|i| i.get("gpt-4").cloned())
        };
        // u2 was claimed to exist but did not: written without counting, as the
        // reference does for an existing item.
        assert_eq!(count(&s), Some(AttrValue::n(1)));
        put_level(&s, "ns", &u2, item(&u2), false).unwrap();
        assert_eq!(count(&s), Some(AttrValue::n(1)));
        delete_level(&s, "ns", &u1).unwrap();
        assert_eq!(count(&s), None);
        assert!(s.item("ns/ENTITY#u1", "#CONFIG#gpt-4").is_none());
        // Deleting an item that is already gone changes nothing.
        delete_level(&s, "ns", &u1).unwrap();
        delete_level(&s, "ns", &u2).unwrap();
        assert!(s.item("ns/ENTITY#u2", "#CONFIG#gpt-4").is_none());
    }
}
