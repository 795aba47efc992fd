//! One config write, done the way the Python client API does it, so the Python
//! tool's listings see what apply wrote: a resource write also adds the name to
//! the `#RESOURCES` set, and an entity write keeps the per-resource reference count
//! in `#ENTITY_CONFIG_RESOURCES` (spec dynamodb.md §5.5, §5.6).
//!
//! Each write and its registry update go in ONE transaction, so a process killed
//! between them cannot leave a level without its registry entry (the reference
//! client uses two calls for resources).

use crate::apply::level::Level;
use crate::store::{AttrValue, Condition, Item, Store, StoreError, UpdateAction, WriteOp};

use crate::items::keys::{
    entity_config_registry_key as entity_registry_key, resources_registry_key as resources_key,
};

fn gsi4(ns: &str) -> Vec<UpdateAction> {
    vec![
        UpdateAction::SetIfNotExists("GSI4PK".into(), AttrValue::s(ns)),
        UpdateAction::SetIfNotExists(
            "GSI4SK".into(),
            AttrValue::s(crate::items::keys::system_pk(ns)),
        ),
    ]
}

/// Writes `item` as the level's config (full replace). `existed` is what the
/// pre-read saw; it only picks the fast path, the conditions decide.
pub fn put_level(
    store: &dyn Store,
    ns: &str,
    level: &Level,
    item: Item,
    existed: bool,
) -> Result<(), StoreError> {
    match level {
        Level::System => store
            .write(WriteOp::Put {
                item,
                condition: None,
            })
            .map(|_| ()),
        Level::Resource(r) => {
            let mut actions = vec![UpdateAction::AddToSet("resources".into(), vec![r.clone()])];
            actions.extend(gsi4(ns));
            store.transact(vec![
                WriteOp::Put {
                    item,
                    condition: None,
                },
                WriteOp::Update {
                    key: resources_key(ns),
                    actions,
                    condition: None,
                },
            ])
        }
        Level::Entity(_, r) => {
            if !existed {
                let mut actions = vec![UpdateAction::AddNumber(r.clone(), "1".into())];
                actions.extend(gsi4(ns));
                let first = store.transact(vec![
                    WriteOp::Put {
                        item: item.clone(),
                        condition: Some(Condition::NotExists),
                    },
                    WriteOp::Update {
                        key: entity_registry_key(ns),
                        actions,
                        condition: None,
                    },
                ]);
                match first {
                    Err(StoreError::TransactionCanceled(_)) => {}
                    other => return other,
                }
            }
            // The item exists: replace it; the reference count already includes it.
            store
                .write(WriteOp::Put {
                    item,
                    condition: None,
                })
                .map(|_| ())
        }
    }
}

/// Most level puts in one [`put_levels`] transaction: DynamoDB's limit of 100
/// operations, less the two registry updates.
pub const BATCH_MAX: usize = 98;

/// Writes many levels (full replace) and their registry entries in ONE
/// transaction: each put as [`put_level`] would, with the `#RESOURCES` additions
/// merged into one update and the entity counts summed per resource. A level the
/// pre-read saw absent is put `attribute_not_exists(PK)`, so if it appeared
/// meanwhile the whole batch is cancelled and nothing is written; the caller then
/// writes the levels one by one.
pub fn put_levels(
    store: &dyn Store,
    ns: &str,
    batch: &[(&Level, &Item, bool)],
) -> Result<(), StoreError> {
    let mut ops = Vec::new();
    let mut resources: Vec<String> = Vec::new();
    let mut counts: std::collections::BTreeMap<String, i64> = Default::default();
    for (level, item, existed) in batch {
        let mut condition = None;
        match level {
            Level::System => {}
            Level::Resource(r) => resources.push(r.clone()),
            Level::Entity(_, r) => {
                if !existed {
                    condition = Some(Condition::NotExists);
                    *counts.entry(r.clone()).or_default() += 1;
                }
            }
        }
        ops.push(WriteOp::Put {
            item: (*item).clone(),
            condition,
        });
    }
    if !resources.is_empty() {
        let mut actions = vec![UpdateAction::AddToSet("resources".into(), resources)];
        actions.extend(gsi4(ns));
        ops.push(WriteOp::Update {
            key: resources_key(ns),
            actions,
            condition: None,
        });
    }
    if !counts.is_empty() {
        let mut actions: Vec<UpdateAction> = counts
            .into_iter()
            .map(|(r, n)| UpdateAction::AddNumber(r, n.to_string()))
            .collect();
        actions.extend(gsi4(ns));
        ops.push(WriteOp::Update {
            key: entity_registry_key(ns),
            actions,
            condition: None,
        });
    }
    store.transact(ops)
}

/// Deletes the level's config item (and its registry entry).
pub fn delete_level(store: &dyn Store, ns: &str, level: &Level) -> Result<(), StoreError> {
    let key = level.key(ns);
    match level {
        Level::System => store
            .write(WriteOp::Delete {
                key,
                condition: None,
            })
            .map(|_| ()),
        Level::Resource(r) => store
            .transact(vec![
                WriteOp::Delete {
                    key,
                    condition: None,
                },
                WriteOp::Update {
                    key: resources_key(ns),
                    actions: vec![UpdateAction::DeleteFromSet(
                        "resources".into(),
                        vec![r.clone()],
                    )],
                    condition: Some(Condition::Exists),
                },
            ])
            .or_else(|e| match e {
                // No registry item at all: delete the level alone.
                StoreError::TransactionCanceled(_) => store
                    .write(WriteOp::Delete {
                        key: level.key(ns),
                        condition: None,
                    })
                    .map(|_| ()),
                other => Err(other),
            }),
        Level::Entity(_, r) => {
            for _ in 0..3 {
                let registry = store.get(&entity_registry_key(ns), true)?;
                let count = registry
                    .as_ref()
                    .and_then(|i| i.get(r))
                    .and_then(|v| v.as_n())
                    .and_then(|n| n.parse::<i64>().ok());
                // Decrement, and drop the attribute when it reaches zero — in the
                // same transaction, conditioned on the count just read.
                let (actions, condition) = match count {
                    None => (None, None),
                    Some(c) if c <= 1 => (
                        Some(vec![UpdateAction::Remove(r.clone())]),
                        Some(Condition::AttrEquals(r.clone(), AttrValue::n(c))),
                    ),
                    Some(c) => (
                        Some(vec![UpdateAction::AddNumber(r.clone(), "-1".into())]),
                        Some(Condition::AttrEquals(r.clone(), AttrValue::n(c))),
                    ),
                };
                let mut ops = vec![WriteOp::Delete {
                    key: key.clone(),
                    condition: Some(Condition::Exists),
                }];
                if let Some(actions) = actions {
                    ops.push(WriteOp::Update {
                        key: entity_registry_key(ns),
                        actions,
                        condition,
                    });
                }
                match store.transact(ops) {
                    Ok(()) => return Ok(()),
                    Err(StoreError::TransactionCanceled(_)) => {
                        if store.get(&key, true)?.is_none() {
                            return Ok(());
                        }
                    }
                    Err(e) => return Err(e),
                }
            }
            Err(StoreError::Backend(format!(
                "the entity-config registry kept changing while deleting {}",
                level.target()
            )))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apply::memstore::MemStore;

    fn item(level: &Level) -> Item {
        let k = level.key("ns");
        let mut i = Item::new();
        i.insert("PK".into(), AttrValue::s(k.pk));
        i.insert("SK".into(), AttrValue::s(k.sk));
        i.insert("l_rpm_cp".into(), AttrValue::n(5));
        i
    }

    #[test]
    fn resource_writes_maintain_the_resources_set() {
        let s = MemStore::new();
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
    fn a_batch_of_puts_equals_the_same_puts_one_by_one() {
        let levels = [
            Level::System,
            Level::Resource("a".into()),
            Level::Resource("b".into()),
            Level::Entity("u1".into(), "a".into()),
            Level::Entity("u2".into(), "a".into()),
            Level::Entity("u2".into(), "_default_".into()),
        ];
        let one = MemStore::new();
        let many = MemStore::new();
        for l in &levels {
            put_level(&one, "ns", l, item(l), false).unwrap();
        }
        let items: Vec<Item> = levels.iter().map(item).collect();
        let batch: Vec<(&Level, &Item, bool)> = levels
            .iter()
            .zip(&items)
            .map(|(l, i)| (l, i, false))
            .collect();
        put_levels(&many, "ns", &batch).unwrap();
        assert_eq!(one.snapshot(), many.snapshot());
        // An entity that exists although the pre-read said absent cancels the batch.
        let before = many.snapshot();
        assert!(matches!(
            put_levels(&many, "ns", &batch),
            Err(StoreError::TransactionCanceled(_))
        ));
        assert_eq!(many.snapshot(), before);
        // Marked as existing, it is replaced without counting it again.
        let batch: Vec<(&Level, &Item, bool)> = levels
            .iter()
            .zip(&items)
            .map(|(l, i)| (l, i, true))
            .collect();
        put_levels(&many, "ns", &batch).unwrap();
        assert_eq!(many.snapshot(), before);
    }

    #[test]
    fn entity_writes_count_references_per_resource() {
        let s = MemStore::new();
        let u1 = Level::Entity("u1".into(), "gpt-4".into());
        let u2 = Level::Entity("u2".into(), "gpt-4".into());
        put_level(&s, "ns", &u1, item(&u1), false).unwrap();
        // A stale "absent" pre-read must not count the same item twice.
        put_level(&s, "ns", &u1, item(&u1), false).unwrap();
        put_level(&s, "ns", &u2, item(&u2), true).unwrap();
        let count = |s: &MemStore| {
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
