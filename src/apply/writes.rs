//! Config writes, done so the Python tool's listings see what apply wrote: a
//! resource level also appears in the `#RESOURCES` set, and entity levels are
//! counted per resource in `#ENTITY_CONFIG_RESOURCES` (docs/storage.md,
//! "Registries").
//!
//! Many levels are written at once as batched, unconditional puts and
//! deletes ([`Store::batch_write`]: 25 a request on DynamoDB); a transaction
//! per level costs far more, on DynamoDB and even more on moto. Crash safety
//! without them:
//! * a resource name is added to the `#RESOURCES` set *before* its level is
//!   written and removed only *after* its level is deleted (both idempotent,
//!   so a later apply redoes them harmlessly); a name added for a create that
//!   then failed is taken out again;
//! * the entity counts are the caller's: [`write_levels`] returns what its
//!   writes did to each count, and [`crate::apply::counts`] applies that
//!   exactly once.

use std::collections::BTreeMap;

use crate::items::keys::resources_registry_key as resources_key;
use crate::plan::level::Level;
use crate::store::{Condition, Item, Store, StoreError, UpdateAction, WriteOp};

/// One level write.
#[derive(Debug, Clone, Copy)]
pub enum LevelWrite<'a> {
    /// Full replace. `existed`: the pre-read saw the item; `indexed`: it was in
    /// the entity-config index (so it is already counted).
    Put {
        level: &'a Level,
        item: &'a Item,
        existed: bool,
        indexed: bool,
    },
    /// `existed: false` writes nothing but the registry (already gone).
    Delete {
        level: &'a Level,
        existed: bool,
        indexed: bool,
    },
}

/// What [`write_levels`] did.
#[derive(Debug, Default)]
pub struct Written {
    /// One result per write, in order; an error says what failed.
    pub results: Vec<Result<(), String>>,
    /// Per resource, the entity levels these writes added to the entity-config
    /// index minus those they removed.
    pub deltas: BTreeMap<String, i64>,
}

/// Whether `item` is in the entity-config index (GSI3), where the Python
/// client counts it.
pub fn indexed(item: &Item) -> bool {
    crate::store::emulate::index_keys(item, crate::store::Index::Gsi3).is_some()
}

/// Writes many levels and keeps the `#RESOURCES` set.
pub fn write_levels(store: &dyn Store, ns: &str, writes: &[LevelWrite<'_>]) -> Written {
    let mut results: Vec<Option<Result<(), String>>> = writes.iter().map(|_| None).collect();

    // 1. Resource names into `#RESOURCES`, ahead of their levels.
    let added: Vec<String> = writes
        .iter()
        .filter_map(|w| match w {
            LevelWrite::Put {
                level: Level::Resource(r),
                ..
            } => Some(r.clone()),
            _ => None,
        })
        .collect();
    if let Err(e) = update_resources_set(store, ns, added, Vec::new()) {
        let why = format!("adding it to the #RESOURCES registry: {e}");
        for (w, r) in writes.iter().zip(results.iter_mut()) {
            if matches!(
                w,
                LevelWrite::Put {
                    level: Level::Resource(_),
                    ..
                }
            ) {
                *r = Some(Err(why.clone()));
            }
        }
    }

    // 2. The levels, in batches.
    let mut which = Vec::new();
    let mut ops = Vec::new();
    for (i, w) in writes.iter().enumerate() {
        if results[i].is_some() {
            continue;
        }
        let op = match *w {
            LevelWrite::Put { item, .. } => WriteOp::Put {
                item: item.clone(),
                condition: None,
            },
            LevelWrite::Delete { existed: false, .. } => {
                results[i] = Some(Ok(())); // already gone
                continue;
            }
            LevelWrite::Delete { level, .. } => WriteOp::Delete {
                key: level.key(ns),
                condition: None,
            },
        };
        which.push(i);
        ops.push(op);
    }
    for (i, r) in which.into_iter().zip(store.batch_write(ops)) {
        results[i] = Some(r.map_err(|e| e.to_string()));
    }

    // 3. What the writes did to the counts and to `#RESOURCES`.
    let mut deltas: BTreeMap<String, i64> = BTreeMap::new();
    let (mut removed, mut undo) = (Vec::new(), Vec::new());
    for (w, r) in writes.iter().zip(&results) {
        let ok = matches!(r, Some(Ok(())));
        match (*w, ok) {
            (
                LevelWrite::Put {
                    level: Level::Entity(_, res),
                    item,
                    indexed: before,
                    ..
                },
                true,
            ) => {
                *deltas.entry(res.clone()).or_default() +=
                    i64::from(indexed(item)) - i64::from(before)
            }
            (
                LevelWrite::Delete {
                    level: Level::Entity(_, res),
                    existed: true,
                    indexed: true,
                },
                true,
            ) => *deltas.entry(res.clone()).or_default() -= 1,
            (
                LevelWrite::Delete {
                    level: Level::Resource(r),
                    ..
                },
                true,
            ) => removed.push(r.clone()),
            (
                LevelWrite::Put {
                    level: Level::Resource(r),
                    existed: false,
                    ..
                },
                false,
            ) => undo.push(r.clone()),
            _ => {}
        }
    }
    deltas.retain(|_, d| *d != 0);
    if let Err(e) = update_resources_set(store, ns, Vec::new(), removed) {
        // The level is gone; its name stays listed until an apply removes it.
        let why = format!("deleted, but removing it from the #RESOURCES registry failed: {e}");
        for (w, r) in writes.iter().zip(results.iter_mut()) {
            if matches!(
                w,
                LevelWrite::Delete {
                    level: Level::Resource(_),
                    ..
                }
            ) && matches!(r, Some(Ok(())))
            {
                *r = Some(Err(why.clone()));
            }
        }
    }
    // Best effort: a name listed for a level that was never written.
    let _ = update_resources_set(store, ns, Vec::new(), undo);
    Written {
        results: results
            .into_iter()
            .map(|r| r.unwrap_or_else(|| Err("the write was not run".into())))
            .collect(),
        deltas,
    }
}

/// Writes `item` as the level's config (full replace), with its registry
/// entries and count, as an apply of that one level would. `existed` is what
/// the caller's read saw; an entity level is read again (whether it is
/// already counted decides its count).
pub fn put_level(
    store: &dyn Store,
    ns: &str,
    level: &Level,
    item: Item,
    existed: bool,
) -> Result<(), StoreError> {
    let live = match level {
        Level::Entity(..) => store.get(&level.key(ns), true)?,
        _ => None,
    };
    let w = LevelWrite::Put {
        level,
        item: &item,
        existed: existed || live.is_some(),
        indexed: live.as_ref().is_some_and(indexed),
    };
    single(store, ns, level, w)
}

/// Deletes the level's config item, with its registry entries and count.
pub fn delete_level(store: &dyn Store, ns: &str, level: &Level) -> Result<(), StoreError> {
    let live = store.get(&level.key(ns), true)?;
    let w = LevelWrite::Delete {
        level,
        existed: live.is_some(),
        indexed: live.as_ref().is_some_and(indexed),
    };
    single(store, ns, level, w)
}

fn single(store: &dyn Store, ns: &str, level: &Level, w: LevelWrite<'_>) -> Result<(), StoreError> {
    let resources = match level {
        Level::Entity(_, r) => [r.clone()].into(),
        _ => Default::default(),
    };
    let token = crate::apply::new_token();
    let lease = crate::clock::system_ms().saturating_add(crate::apply::LEASE_MS);
    let journal = crate::apply::counts::begin(store, ns, &token, lease, resources)?;
    let mut out = write_levels(store, ns, &[w]);
    crate::apply::counts::settle(store, ns, &journal, &out.deltas)?;
    match out.results.pop() {
        Some(Err(e)) => Err(StoreError::Backend(e)),
        _ => Ok(()),
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
        actions.extend(crate::apply::counts::gsi4(ns));
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
pub(crate) mod tests {
    use super::*;
    use crate::apply::counts;
    use crate::store::item::keyed;
    use crate::store::memory::MemoryStore;
    use crate::store::AttrValue;
    use crate::store::Key;

    fn item(level: &Level) -> Item {
        let k = level.key("ns");
        let mut attrs = vec![("l_rpm_cp", AttrValue::n(5))];
        if let Level::Entity(e, r) = level {
            attrs.push((
                "GSI3PK",
                AttrValue::s(crate::items::keys::entity_config_gsi3pk("ns", r)),
            ));
            attrs.push(("GSI3SK", AttrValue::s(e)));
        }
        keyed(&k.pk, &k.sk, &attrs)
    }

    pub(crate) fn put_level(store: &dyn Store, ns: &str, level: &Level, item: Item) {
        super::put_level(store, ns, level, item, false).unwrap();
    }

    pub(crate) fn delete_level(store: &dyn Store, ns: &str, level: &Level) {
        super::delete_level(store, ns, level).unwrap();
    }

    /// The store's items without the counts' recount stamp (a random token).
    fn unstamped(s: &MemoryStore) -> std::collections::BTreeMap<Key, Item> {
        let mut all = s.snapshot();
        for item in all.values_mut() {
            item.remove(counts::STAMP_ATTR);
        }
        all
    }

    #[test]
    fn resource_writes_maintain_the_resources_set() {
        let s = MemoryStore::new();
        let a = Level::Resource("a".into());
        let b = Level::Resource("b".into());
        put_level(&s, "ns", &a, item(&a));
        put_level(&s, "ns", &b, item(&b));
        let reg = s.item("ns/SYSTEM#", "#RESOURCES").unwrap();
        assert_eq!(
            reg.get("resources"),
            Some(&AttrValue::Ss(["a".to_string(), "b".to_string()].into()))
        );
        assert_eq!(reg.get("GSI4PK"), Some(&AttrValue::s("ns")));
        delete_level(&s, "ns", &a);
        delete_level(&s, "ns", &b);
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
            put_level(&one, "ns", l, item(l));
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
                    indexed: existed,
                })
                .collect()
        };
        let all: std::collections::BTreeSet<String> =
            ["a".to_string(), "_default_".to_string()].into();
        let j = counts::begin(&many, "ns", "t", 0, all.clone()).unwrap();
        let out = write_levels(&many, "ns", &puts(false));
        assert!(out.results.iter().all(Result::is_ok));
        counts::settle(&many, "ns", &j, &out.deltas).unwrap();
        assert_eq!(unstamped(&one), unstamped(&many));
        // Marked as existing, they are replaced without counting them again.
        let before = many.snapshot();
        let out = write_levels(&many, "ns", &puts(true));
        assert!(out.deltas.is_empty());
        assert_eq!(many.snapshot(), before, "no journal, no settle");
        // Deleting them all, in one batch, empties the registries.
        let batch: Vec<LevelWrite<'_>> = levels
            .iter()
            .map(|level| LevelWrite::Delete {
                level,
                existed: true,
                indexed: matches!(level, Level::Entity(..)),
            })
            .collect();
        let j = counts::begin(&many, "ns", "t", 0, all).unwrap();
        let out = write_levels(&many, "ns", &batch);
        counts::settle(&many, "ns", &j, &out.deltas).unwrap();
        for l in &levels {
            delete_level(&one, "ns", l);
        }
        assert_eq!(unstamped(&one), unstamped(&many));
        let counts = many.item("ns/SYSTEM#", "#ENTITY_CONFIG_RESOURCES");
        assert!(counts.is_some_and(|c| !c.contains_key("a") && !c.contains_key("_default_")));
    }

    #[test]
    fn a_level_that_was_not_in_the_index_is_counted_when_written_into_it() {
        let s = MemoryStore::new();
        let u1 = Level::Entity("u1".into(), "gpt-4".into());
        // Written by the reference's provisioner: no GSI3 keys, not counted.
        let k = u1.key("ns");
        s.put(keyed(&k.pk, &k.sk, &[("l_rpm_cp", AttrValue::n(1))]));
        put_level(&s, "ns", &u1, item(&u1));
        let count = s
            .item("ns/SYSTEM#", "#ENTITY_CONFIG_RESOURCES")
            .and_then(|i| i.get("gpt-4").cloned());
        assert_eq!(count, Some(AttrValue::n(1)));
        assert!(counts::check(&s, "ns", &["gpt-4".to_string()].into(), None)
            .unwrap()
            .is_empty());
        delete_level(&s, "ns", &u1);
        assert!(s
            .get(&Key::new("ns/ENTITY#u1", "#CONFIG#gpt-4"), true)
            .unwrap()
            .is_none());
    }

    #[test]
    fn a_failed_resource_create_leaves_no_name_and_a_failed_delete_keeps_it() {
        use crate::apply::fault::tests::failing;
        let s = failing("put:RESOURCE#b,delete:RESOURCE#a");
        let a = Level::Resource("a".into());
        let b = Level::Resource("b".into());
        let ia = item(&a);
        let out = write_levels(
            s.as_ref(),
            "ns",
            &[LevelWrite::Put {
                level: &a,
                item: &ia,
                existed: false,
                indexed: false,
            }],
        );
        assert!(out.results[0].is_ok());
        let ib = item(&b);
        let out = write_levels(
            s.as_ref(),
            "ns",
            &[
                LevelWrite::Put {
                    level: &b,
                    item: &ib,
                    existed: false,
                    indexed: false,
                },
                LevelWrite::Delete {
                    level: &a,
                    existed: true,
                    indexed: false,
                },
            ],
        );
        assert!(out.results.iter().all(Result::is_err), "{:?}", out.results);
        let reg = s.get(&resources_key("ns"), true).unwrap().unwrap();
        assert_eq!(
            reg.get("resources"),
            Some(&AttrValue::Ss(["a".to_string()].into())),
            "a is still there, b was never written"
        );
    }
}
