//! Which levels a namespace holds (docs/adopt.md, "Which levels"): the
//! Python client's listing commands read the `#RESOURCES` registry (resource
//! levels), the `#ENTITY_CONFIG_RESOURCES` registry (which resources have
//! entity levels) and GSI3 `{ns}/ENTITY_CONFIG#{r}` (those entities); the
//! system level has one fixed key. Levels written without registry entries
//! (by the 0.17 provisioner, or by hand) are missed that way, so the
//! namespace's GSI4 partition is listed too, by the key prefixes of resource
//! and entity items: every item we or the Python client write carries
//! `GSI4PK = {ns}` and `GSI4SK` = its PK.

use std::collections::BTreeSet;

use crate::items::keys::{self, CONFIG_SK, ENTITY_CONFIG_SK_PREFIX};
use crate::plan::level::Level;
use crate::store::number::Number;
use crate::store::{AttrValue, Index, Key, Store, StoreError};

/// Every level that may exist, sorted for the manifest: the system, resources
/// by name, entity levels by entity id with the entity's `_default_` first,
/// then its resources by name. A level listed by an index whose item is gone
/// is dropped by the caller's read.
pub fn levels(store: &dyn Store, ns: &str) -> Result<Vec<Level>, StoreError> {
    let mut found = BTreeSet::new();
    found.insert(Level::System);
    let registries = store.batch_get(
        &[
            keys::resources_registry_key(ns),
            keys::entity_config_registry_key(ns),
        ],
        true,
    )?;
    if let Some(Some(AttrValue::Ss(names))) = registries[0].as_ref().map(|r| r.get("resources")) {
        found.extend(names.iter().map(|r| Level::Resource(r.clone())));
    }
    if let Some(reg) = &registries[1] {
        for (resource, count) in reg {
            let counted = count
                .as_n()
                .and_then(|n| Number::parse(n).ok())
                .and_then(|n| n.to_i128())
                .is_some_and(|n| n > 0);
            if !counted || keys_attr(resource) {
                continue;
            }
            let pk = keys::entity_config_gsi3pk(ns, resource);
            for key in store.query_index(Index::Gsi3, &pk, "")? {
                found.extend(level_of(ns, &key));
            }
        }
    }
    for prefix in [keys::resource_pk(ns, ""), keys::entity_pk(ns, "")] {
        for key in store.query_index(Index::Gsi4, ns, &prefix)? {
            found.extend(level_of(ns, &key));
        }
    }
    let mut out: Vec<Level> = found.into_iter().collect();
    out.sort_by(|a, b| order(a).cmp(&order(b)));
    Ok(out)
}

/// The stored levels of namespace `ns` that `known` does not hold (read to
/// see that they exist): a plan's levels that the manifest does not declare
/// and no apply of a manifest owns. Python clients enforce them; an apply
/// leaves them as they are.
pub fn unknown_levels(
    store: &dyn Store,
    ns: &str,
    known: impl Fn(&Level) -> bool,
) -> Result<Vec<Level>, StoreError> {
    let candidates: Vec<Level> = levels(store, ns)?
        .into_iter()
        .filter(|l| !known(l))
        .collect();
    let keys: Vec<Key> = candidates.iter().map(|l| l.key(ns)).collect();
    let items = store.batch_get(&keys, true)?;
    Ok(candidates
        .into_iter()
        .zip(items)
        .filter_map(|(level, item)| item.map(|_| level))
        .collect())
}

/// Key and index attributes of a registry item (every other attribute of
/// `#ENTITY_CONFIG_RESOURCES` is a resource's count).
fn keys_attr(name: &str) -> bool {
    matches!(name, "PK" | "SK" | "GSI4PK" | "GSI4SK")
}

/// The sort key: kind, then names, with `_default_` before an entity's resources.
fn order(level: &Level) -> (u8, &str, bool, &str) {
    match level {
        Level::System => (0, "", false, ""),
        Level::Resource(r) => (1, r, false, ""),
        Level::Entity(e, r) => (2, e, r != keys::DEFAULT_RESOURCE, r),
    }
}

/// The level a config item's key names, if it names one.
fn level_of(ns: &str, key: &Key) -> Option<Level> {
    let rest = key.pk.strip_prefix(ns)?.strip_prefix('/')?;
    if let Some(r) = rest.strip_prefix("RESOURCE#") {
        return (key.sk == CONFIG_SK).then(|| Level::Resource(r.to_string()));
    }
    let e = rest.strip_prefix("ENTITY#")?;
    let r = key.sk.strip_prefix(ENTITY_CONFIG_SK_PREFIX)?;
    Some(Level::Entity(e.to_string(), r.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_name_levels() {
        let ns = "n1";
        assert_eq!(
            level_of(ns, &Key::new("n1/RESOURCE#openai/gpt-4", "#CONFIG")),
            Some(Level::Resource("openai/gpt-4".into()))
        );
        assert_eq!(
            level_of(ns, &Key::new("n1/ENTITY#u-1", "#CONFIG#_default_")),
            Some(Level::Entity("u-1".into(), "_default_".into()))
        );
        assert_eq!(level_of(ns, &Key::new("n1/ENTITY#u-1", "#META")), None);
        assert_eq!(level_of(ns, &Key::new("n2/RESOURCE#r", "#CONFIG")), None);
        assert_eq!(level_of(ns, &Key::new("n1/RESOURCE#r", "#STATE")), None);
    }

    #[test]
    fn an_entitys_default_level_comes_first() {
        let mut v = vec![
            Level::Entity("b".into(), "a".into()),
            Level::Entity("a".into(), "z".into()),
            Level::Entity("a".into(), "_default_".into()),
            Level::Entity("a".into(), "A".into()),
            Level::Resource("r".into()),
            Level::System,
        ];
        v.sort_by(|a, b| order(a).cmp(&order(b)));
        assert_eq!(
            v,
            [
                Level::System,
                Level::Resource("r".into()),
                Level::Entity("a".into(), "_default_".into()),
                Level::Entity("a".into(), "A".into()),
                Level::Entity("a".into(), "z".into()),
                Level::Entity("b".into(), "a".into()),
            ]
        );
    }
}
