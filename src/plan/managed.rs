//! The managed set (docs/storage.md, "The `#PROVISIONER` record"): which levels a
//! manifest owns. It lives in the `#PROVISIONER` record, one per namespace; only
//! levels in it are ever created, updated or deleted by apply.

use std::collections::{BTreeMap, BTreeSet};

use crate::items::read::Unreadable;
use crate::manifest::Manifest;
use crate::plan::identity::RecordIdentity;
use crate::plan::level::Level;
use crate::store::{AttrValue, Item, Key, Store, StoreError};

/// Levels owned by the declarative manifest.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ManagedSet {
    pub system: bool,
    pub resources: BTreeSet<String>,
    /// entity id → resource names (including `_default_`)
    pub entities: BTreeMap<String, BTreeSet<String>>,
}

/// The stored record: the managed set plus legacy (0.16) `cascade_pending` entries.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProvisionerRecord {
    pub managed: ManagedSet,
    /// Legacy owed cascade fan-outs as (level, target); retried, then dropped at the next write.
    pub cascade_pending: Vec<(String, String)>,
    /// `applied_hash` and `last_applied` ([`crate::plan::digests::stamp`]):
    /// which apply wrote the record. `None` when there is no record.
    pub stamp: Option<String>,
    /// Which write of the record this is (docs/storage.md, "Concurrent
    /// applies"): apply writes its record only over this one.
    pub identity: RecordIdentity,
}

/// The key of the `#PROVISIONER` record of namespace `ns`.
pub fn record_key(ns: &str) -> Key {
    crate::items::keys::provisioner_key(ns)
}

impl ManagedSet {
    /// The levels a manifest declares: `system:` present (even `{}`), every resource,
    /// every (entity, resource) pair. An entity without resources owns nothing.
    pub fn from_manifest(m: &Manifest) -> Self {
        let mut entities = BTreeMap::new();
        for (e, resources) in &m.entities {
            if !resources.is_empty() {
                entities.insert(e.clone(), resources.keys().cloned().collect());
            }
        }
        ManagedSet {
            system: m.system.is_some(),
            resources: m.resources.keys().cloned().collect(),
            entities,
        }
    }

    pub fn contains(&self, level: &Level) -> bool {
        match level {
            Level::System => self.system,
            Level::Resource(r) => self.resources.contains(r),
            Level::Entity(e, r) => self.entities.get(e).is_some_and(|s| s.contains(r)),
        }
    }

    /// Every (entity, resource) pair, sorted by the tuple.
    pub fn entity_pairs(&self) -> Vec<(String, String)> {
        self.entities
            .iter()
            .flat_map(|(e, rs)| rs.iter().map(move |r| (e.clone(), r.clone())))
            .collect()
    }

    /// Decodes the managed attributes of a `#PROVISIONER` item. Unknown shapes are
    /// corrupt: guessing would risk deleting levels nobody asked to delete.
    pub fn from_item(item: &Item) -> Result<Self, Unreadable> {
        let system = match item.get("managed_system") {
            None | Some(AttrValue::Null) => false,
            Some(AttrValue::Bool(b)) => *b,
            Some(_) => return Err("managed_system is not a boolean".into()),
        };
        let resources = match item.get("managed_resources") {
            None | Some(AttrValue::Null) => BTreeSet::new(),
            Some(v) => string_list(v).ok_or(Unreadable::from(
                "managed_resources is not a list of strings",
            ))?,
        };
        let mut entities = BTreeMap::new();
        match item.get("managed_entities") {
            None | Some(AttrValue::Null) => {}
            Some(AttrValue::M(m)) => {
                for (e, v) in m {
                    let rs = string_list(v)
                        .ok_or_else(|| format!("managed_entities.{e} is not a list of strings"))?;
                    if !rs.is_empty() {
                        entities.insert(e.clone(), rs);
                    }
                }
            }
            Some(_) => return Err("managed_entities is not a map".into()),
        }
        Ok(ManagedSet {
            system,
            resources,
            entities,
        })
    }
}

fn string_list(v: &AttrValue) -> Option<BTreeSet<String>> {
    match v {
        AttrValue::L(items) => items.iter().map(|x| x.as_s().map(str::to_string)).collect(),
        AttrValue::Ss(s) => Some(s.clone()),
        _ => None,
    }
}

/// Reads the record (eventually consistent, as the reference does). Missing means
/// nothing is managed.
pub fn read(store: &dyn Store, ns: &str) -> Result<ProvisionerRecord, StoreError> {
    let key = record_key(ns);
    // Consistent (the reference reads it eventually consistent): `--no-refresh`
    // trusts digests only for the record they were written with.
    let Some(item) = store.get(&key, true)? else {
        return Ok(ProvisionerRecord::default());
    };
    let identity = RecordIdentity::of(Some(&item));
    let corrupt = |reason: String| StoreError::Corrupt {
        pk: key.pk.clone(),
        sk: key.sk.clone(),
        reason,
    };
    let managed = ManagedSet::from_item(&item).map_err(|e| corrupt(e.to_string()))?;
    let mut cascade_pending = Vec::new();
    if let Some(AttrValue::L(entries)) = item.get("cascade_pending") {
        for e in entries {
            if let AttrValue::M(m) = e {
                let level = m.get("level").and_then(|v| v.as_s());
                let target = m.get("target").and_then(|v| v.as_s()).unwrap_or("");
                if let Some(level) = level {
                    cascade_pending.push((level.to_string(), target.to_string()));
                }
            }
        }
    }
    let text = |name: &str| item.get(name).and_then(AttrValue::as_s).unwrap_or_default();
    Ok(ProvisionerRecord {
        managed,
        cascade_pending,
        stamp: Some(crate::plan::digests::stamp(
            text("applied_hash"),
            text("last_applied"),
        )),
        identity,
    })
}

/// The full record apply writes at the end (an unconditional PutItem).
pub fn record_item(ns: &str, managed: &ManagedSet, last_applied: &str, applied_hash: &str) -> Item {
    let key = record_key(ns);
    let list = |s: &BTreeSet<String>| AttrValue::L(s.iter().map(AttrValue::s).collect());
    let mut item = Item::new();
    item.insert("PK".into(), AttrValue::s(&key.pk));
    item.insert("SK".into(), AttrValue::s(&key.sk));
    item.insert("managed_system".into(), AttrValue::Bool(managed.system));
    item.insert("managed_resources".into(), list(&managed.resources));
    item.insert(
        "managed_entities".into(),
        AttrValue::M(
            managed
                .entities
                .iter()
                .map(|(e, rs)| (e.clone(), list(rs)))
                .collect(),
        ),
    );
    item.insert("last_applied".into(), AttrValue::s(last_applied));
    item.insert("applied_hash".into(), AttrValue::s(applied_hash));
    item.insert("GSI4PK".into(), AttrValue::s(ns));
    item.insert("GSI4SK".into(), AttrValue::s(&key.pk));
    item
}

/// ISO-8601 UTC with microseconds and `+00:00`, like Python's `isoformat()`.
pub fn iso_timestamp(now_ms: i64) -> String {
    chrono::DateTime::<chrono::Utc>::from_timestamp_millis(now_ms)
        .unwrap_or_default()
        .format("%Y-%m-%dT%H:%M:%S%.6f+00:00")
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::model::{LevelConfig, SystemLevel};
    use crate::store::memory::MemoryStore;

    fn manifest() -> Manifest {
        let mut m = Manifest {
            namespace: "d".into(),
            system: Some(SystemLevel::default()),
            resources: Default::default(),
            entities: Default::default(),
        };
        m.resources.insert("gpt-4".into(), LevelConfig::default());
        m.resources
            .insert("claude-3".into(), LevelConfig::default());
        let mut u = indexmap::IndexMap::new();
        u.insert("gpt-4".into(), LevelConfig::default());
        u.insert("_default_".into(), LevelConfig::default());
        m.entities.insert("user-premium".into(), u);
        m.entities.insert("empty".into(), Default::default());
        m
    }

    #[test]
    fn managed_set_from_manifest_sorts_and_skips_empty_entities() {
        let s = ManagedSet::from_manifest(&manifest());
        assert!(s.system);
        assert_eq!(
            s.resources.iter().collect::<Vec<_>>(),
            ["claude-3", "gpt-4"]
        );
        assert_eq!(
            s.entity_pairs(),
            vec![
                ("user-premium".to_string(), "_default_".to_string()),
                ("user-premium".to_string(), "gpt-4".to_string())
            ]
        );
        assert!(!s.entities.contains_key("empty"));
    }

    #[test]
    fn record_round_trips_through_the_store() {
        let store = MemoryStore::new();
        assert_eq!(read(&store, "ns").unwrap(), ProvisionerRecord::default());
        let s = ManagedSet::from_manifest(&manifest());
        store.put(record_item("ns", &s, &iso_timestamp(0), "sha256:x"));
        let back = read(&store, "ns").unwrap();
        assert_eq!(back.managed, s);
        let item = store.item("ns/SYSTEM#", "#PROVISIONER").unwrap();
        assert_eq!(
            item.get("last_applied"),
            Some(&AttrValue::s("1970-01-01T00:00:00.000000+00:00"))
        );
        assert_eq!(item.get("GSI4SK"), Some(&AttrValue::s("ns/SYSTEM#")));
    }

    #[test]
    fn legacy_cascade_pending_is_read_and_bad_shapes_are_corrupt() {
        let store = MemoryStore::new();
        let mut item = record_item("ns", &ManagedSet::default(), "t", "h");
        let mut entry = BTreeMap::new();
        entry.insert("level".to_string(), AttrValue::s("resource"));
        entry.insert("target".to_string(), AttrValue::s("gpt-4"));
        item.insert(
            "cascade_pending".into(),
            AttrValue::L(vec![AttrValue::M(entry)]),
        );
        store.put(item.clone());
        assert_eq!(
            read(&store, "ns").unwrap().cascade_pending,
            vec![("resource".to_string(), "gpt-4".to_string())]
        );
        item.insert("managed_resources".into(), AttrValue::s("gpt-4"));
        store.put(item);
        assert!(matches!(
            read(&store, "ns"),
            Err(StoreError::Corrupt { .. })
        ));
    }
}
