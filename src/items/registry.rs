//! The registries the Python client keeps next to config items (spec
//! dynamodb.md §5.5, §5.6), so its listing commands see what we write:
//! `#RESOURCES` holds the string set `resources` of resources with defaults;
//! `#ENTITY_CONFIG_RESOURCES` holds one counter per resource (or `_default_`)
//! of entity config items.
//!
//! The building blocks are [`WriteOp`]s; [`put_level`] and [`delete_level`]
//! perform a whole level write the way the client does, registry included.

use super::keys;
use crate::store::{AttrValue, Condition, Item, Key, Store, StoreError, UpdateAction, WriteOp};

fn gsi4(ns: &str) -> [UpdateAction; 2] {
    [
        UpdateAction::SetIfNotExists("GSI4PK".into(), AttrValue::s(ns)),
        UpdateAction::SetIfNotExists("GSI4SK".into(), AttrValue::S(keys::system_pk(ns))),
    ]
}

/// `ADD resources :{r}` on `#RESOURCES` (after writing resource defaults).
pub fn add_resource(ns: &str, resource: &str) -> WriteOp {
    let [a, b] = gsi4(ns);
    WriteOp::Update {
        key: keys::resources_registry_key(ns),
        actions: vec![
            UpdateAction::AddToSet("resources".into(), vec![resource.to_string()]),
            a,
            b,
        ],
        condition: None,
    }
}

/// `DELETE resources :{r}` on `#RESOURCES` (after deleting resource defaults).
pub fn remove_resource(ns: &str, resource: &str) -> WriteOp {
    WriteOp::Update {
        key: keys::resources_registry_key(ns),
        actions: vec![UpdateAction::DeleteFromSet(
            "resources".into(),
            vec![resource.to_string()],
        )],
        condition: None,
    }
}

/// `ADD #r :1` on `#ENTITY_CONFIG_RESOURCES` (a new entity config item for `r`).
pub fn count_entity_config(ns: &str, resource: &str) -> WriteOp {
    let [a, b] = gsi4(ns);
    WriteOp::Update {
        key: keys::entity_config_registry_key(ns),
        actions: vec![
            UpdateAction::AddNumber(resource.to_string(), "1".into()),
            a,
            b,
        ],
        condition: None,
    }
}

/// `ADD #r :-1` on `#ENTITY_CONFIG_RESOURCES` (an entity config item for `r` deleted).
pub fn uncount_entity_config(ns: &str, resource: &str) -> WriteOp {
    WriteOp::Update {
        key: keys::entity_config_registry_key(ns),
        actions: vec![UpdateAction::AddNumber(resource.to_string(), "-1".into())],
        condition: None,
    }
}

/// `REMOVE #r` when `#r <= 0`: drops a counter that reached zero. Its
/// condition failing (the counter is still positive) is the normal case.
pub fn drop_zero_count(ns: &str, resource: &str) -> WriteOp {
    WriteOp::Update {
        key: keys::entity_config_registry_key(ns),
        actions: vec![UpdateAction::Remove(resource.to_string())],
        condition: Some(Condition::AttrNumLe(resource.to_string(), "0".into())),
    }
}

/// The item before a write; a table that does not exist yet (local store before
/// its first write) has no old item, and the write itself reports real errors.
fn read_old(store: &dyn Store, key: &Key) -> Result<Option<Item>, StoreError> {
    match store.get(key, true) {
        Err(StoreError::TableNotFound { .. }) => Ok(None),
        other => other,
    }
}

/// Which registry a config key belongs to.
enum Kind<'a> {
    System,
    Resource(&'a str),
    Entity(&'a str),
}

fn kind_of<'a>(ns: &str, key: &'a Key) -> Kind<'a> {
    let entity_prefix = format!("{ns}/ENTITY#");
    if key.pk.starts_with(&entity_prefix) {
        if let Some(r) = key.sk.strip_prefix(keys::ENTITY_CONFIG_SK_PREFIX) {
            return Kind::Entity(r);
        }
    }
    if let Some(r) = key.pk.strip_prefix(&format!("{ns}/RESOURCE#")) {
        return Kind::Resource(r);
    }
    Kind::System
}

/// Writes a config item (full replace) with the client's registry bookkeeping:
/// a resource level and its `#RESOURCES` entry in one transaction; an entity
/// level as [Put `attribute_not_exists(PK)` + `ADD #r :1`], and when the item
/// already existed a plain Put (the counter counts items, not writes).
/// Returns the item as it was before.
pub fn put_level(store: &dyn Store, ns: &str, item: Item) -> Result<Option<Item>, StoreError> {
    let key =
        Key::of(&item).ok_or_else(|| StoreError::Backend("config item without PK/SK".into()))?;
    match kind_of(ns, &key) {
        Kind::System => store.write(WriteOp::Put {
            item,
            condition: None,
        }),
        Kind::Resource(r) => {
            let old = read_old(store, &key)?;
            store.transact(vec![
                WriteOp::Put {
                    item,
                    condition: None,
                },
                add_resource(ns, r),
            ])?;
            Ok(old)
        }
        Kind::Entity(r) => {
            let first = store.transact(vec![
                WriteOp::Put {
                    item: item.clone(),
                    condition: Some(Condition::NotExists),
                },
                count_entity_config(ns, r),
            ]);
            match first {
                Ok(()) => Ok(None),
                Err(StoreError::TransactionCanceled(_)) => store.write(WriteOp::Put {
                    item,
                    condition: None,
                }),
                Err(e) => Err(e),
            }
        }
    }
}

/// Deletes a config item with the client's registry bookkeeping: a resource
/// level and its `#RESOURCES` entry together; an entity level as [Delete
/// `attribute_exists(PK)` + `ADD #r :-1`] then `REMOVE #r` if it reached 0.
/// Deleting a missing item succeeds and changes no counter. Returns the old item.
pub fn delete_level(store: &dyn Store, ns: &str, key: &Key) -> Result<Option<Item>, StoreError> {
    match kind_of(ns, key) {
        Kind::System => store.write(WriteOp::Delete {
            key: key.clone(),
            condition: None,
        }),
        Kind::Resource(r) => {
            let old = read_old(store, key)?;
            store.transact(vec![
                WriteOp::Delete {
                    key: key.clone(),
                    condition: None,
                },
                remove_resource(ns, r),
            ])?;
            Ok(old)
        }
        Kind::Entity(r) => {
            let old = read_old(store, key)?;
            let res = store.transact(vec![
                WriteOp::Delete {
                    key: key.clone(),
                    condition: Some(Condition::Exists),
                },
                uncount_entity_config(ns, r),
            ]);
            match res {
                Ok(()) => {}
                // Already gone (deleted meanwhile): nothing to uncount.
                Err(StoreError::TransactionCanceled(_)) => return Ok(None),
                Err(e) => return Err(e),
            }
            match store.write(drop_zero_count(ns, r)) {
                Ok(_) | Err(StoreError::ConditionFailed { .. }) => Ok(old),
                Err(e) => Err(e),
            }
        }
    }
}

/// The resources listed in `#RESOURCES` (sorted).
pub fn registered_resources(store: &dyn Store, ns: &str) -> Result<Vec<String>, StoreError> {
    Ok(match store.get(&keys::resources_registry_key(ns), false)? {
        Some(item) => match item.get("resources") {
            Some(AttrValue::Ss(s)) => s.iter().cloned().collect(),
            _ => Vec::new(),
        },
        None => Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::items::config::{build_entity, build_resource, build_system};
    use crate::manifest::model::{LevelConfig, SystemLevel};
    use crate::store::local::LocalStore;

    fn store() -> (tempfile::TempDir, LocalStore) {
        let dir = tempfile::tempdir().unwrap();
        let s = LocalStore::open(&dir.path().join("s.sqlite"), "t").unwrap();
        (dir, s)
    }

    fn counters(s: &LocalStore) -> Item {
        let mut i = s
            .get(&keys::entity_config_registry_key("ns"), true)
            .unwrap()
            .unwrap_or_default();
        i.retain(|k, _| !["PK", "SK", "GSI4PK", "GSI4SK"].contains(&k.as_str()));
        i
    }

    #[test]
    fn resource_levels_keep_the_resource_set() {
        let (_d, s) = store();
        let level = LevelConfig::default();
        for r in ["gpt-4", "claude-3", "gpt-4"] {
            put_level(&s, "ns", build_resource("ns", r, &level).unwrap()).unwrap();
        }
        assert_eq!(
            registered_resources(&s, "ns").unwrap(),
            ["claude-3", "gpt-4"]
        );
        let reg = s
            .get(&keys::resources_registry_key("ns"), true)
            .unwrap()
            .unwrap();
        assert_eq!(reg["GSI4PK"], AttrValue::s("ns"));
        assert_eq!(reg["GSI4SK"], AttrValue::s("ns/SYSTEM#"));
        let old = delete_level(&s, "ns", &keys::resource_config_key("ns", "gpt-4")).unwrap();
        assert!(old.is_some());
        assert_eq!(registered_resources(&s, "ns").unwrap(), ["claude-3"]);
        assert_eq!(
            s.get(&keys::resource_config_key("ns", "gpt-4"), true)
                .unwrap(),
            None
        );
    }

    #[test]
    fn entity_levels_count_items_not_writes() {
        let (_d, s) = store();
        let level = LevelConfig::default();
        let put = |e: &str, r: &str| {
            put_level(&s, "ns", build_entity("ns", e, r, &level).unwrap()).unwrap()
        };
        assert!(put("user-1", "gpt-4").is_none());
        assert!(put("user-1", "gpt-4").is_some(), "second write replaces");
        put("user-2", "gpt-4");
        put("user-1", "_default_");
        assert_eq!(
            counters(&s),
            Item::from([
                ("_default_".into(), AttrValue::n(1)),
                ("gpt-4".into(), AttrValue::n(2))
            ])
        );
        delete_level(&s, "ns", &keys::entity_config_key("ns", "user-1", "gpt-4")).unwrap();
        delete_level(&s, "ns", &keys::entity_config_key("ns", "user-1", "gpt-4")).unwrap();
        assert_eq!(
            counters(&s)["gpt-4"],
            AttrValue::n(1),
            "a second delete uncounts nothing"
        );
        delete_level(&s, "ns", &keys::entity_config_key("ns", "user-2", "gpt-4")).unwrap();
        assert_eq!(
            counters(&s),
            Item::from([("_default_".into(), AttrValue::n(1))]),
            "a counter reaching 0 is removed"
        );
    }

    #[test]
    fn system_levels_have_no_registry() {
        let (_d, s) = store();
        put_level(
            &s,
            "ns",
            build_system("ns", &SystemLevel::default()).unwrap(),
        )
        .unwrap();
        assert!(s
            .get(&keys::resources_registry_key("ns"), true)
            .unwrap()
            .is_none());
        assert!(delete_level(&s, "ns", &keys::system_config_key("ns"))
            .unwrap()
            .is_some());
    }
}
