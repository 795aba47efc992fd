//! The managed set (docs/storage.md, "The `#PROVISIONER` record"): which levels a
//! manifest owns. Only levels in it are ever created, updated or deleted by apply.
//!
//! It lives in the `#PROVISIONER` record, one item per namespace, which the
//! reference's provisioner reads and writes too. A managed set too large for
//! one item (about 5,000 entities with three resources each; see
//! docs/storage.md, "The managed set beyond the record") keeps what fits in the
//! record, in the reference's format, and the rest in items of ours:
//!
//! * `#APPLY#MANAGED#{generation}#{nnnn}`: the whole managed set, whenever it
//!   does not fit the record, written just before the record; chunk 0 names
//!   the record it belongs with (`provisioner`: its `applied_hash` and
//!   `last_applied`).
//! * `#APPLY#WRITING#{token}#{nnnn}`: the levels an apply is about to create,
//!   written before its first config write and deleted after its record, so a
//!   level written by an apply that died before its record is never lost.
//!
//! Reading takes the union of all of them ([`ProvisionerRecord::all`]): the
//! record and the overflow that belongs with it are the managed set
//! ([`ProvisionerRecord::managed`]); any other overflow or writing set is
//! *unconfirmed* — an apply that died, or a record the reference's
//! provisioner rewrote since (it reads and writes only its own record). An
//! unconfirmed level is still ours: deleted when the manifest no longer
//! declares it and it exists, kept when declared.

use std::collections::{BTreeMap, BTreeSet};

use crate::items::read::Unreadable;
use crate::items::{chunked, keys};
use crate::manifest::Manifest;
use crate::plan::identity::RecordIdentity;
use crate::plan::level::Level;
use crate::store::{AttrValue, Item, Key, Store, StoreError};

/// SK prefix of the managed set beyond the `#PROVISIONER` record.
pub const OVERFLOW_SK_PREFIX: &str = "#APPLY#MANAGED#";
/// SK prefix of the levels an apply is about to create.
pub const WRITING_SK_PREFIX: &str = "#APPLY#WRITING#";
/// Test-only: the most bytes the `#PROVISIONER` record may hold (default:
/// [`chunked::LIMIT`]), so tests reach the overflow with small manifests.
pub const RECORD_LIMIT_ENV: &str = "ZAEL_TEST_RECORD_LIMIT_BYTES";

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
    /// The record and the overflow written with it.
    pub managed: ManagedSet,
    /// Levels only in overflow or writing sets that do not belong with the
    /// record (see the module doc).
    pub unconfirmed: ManagedSet,
    /// Legacy owed cascade fan-outs as (level, target); retried, then dropped at the next write.
    pub cascade_pending: Vec<(String, String)>,
    /// `applied_hash` and `last_applied` ([`crate::plan::digests::stamp`]):
    /// which apply wrote the record. `None` when there is no record.
    pub stamp: Option<String>,
    /// Every overflow and writing item found, so the next record write drops
    /// the ones it does not rewrite.
    pub extra_keys: Vec<Key>,
    /// Levels this tool recorded beyond a record that another provisioner
    /// has rewritten since (0 when the record is ours).
    pub beyond_foreign_record: usize,
    /// The entity counts as the apply that wrote the record left them
    /// ([`COUNTS_ATTR`]; `None` when another provisioner wrote the record).
    pub counts_left: Option<String>,
    /// Which write of the record this is (docs/storage.md, "Concurrent
    /// applies"): apply writes its record only over this one.
    pub identity: RecordIdentity,
}

/// Our attribute on the `#PROVISIONER` record: a fingerprint of the entity
/// counts our apply left ([`crate::apply::counts::fingerprint`]). The
/// reference reads only its own attributes and drops this one when it
/// rewrites the record, which is how we notice.
pub const COUNTS_ATTR: &str = "zael_counts";

impl ProvisionerRecord {
    /// What plan and apply say about the record: that another provisioner
    /// rewrote it since this tool recorded levels beyond it.
    pub fn warnings(&self) -> Vec<String> {
        if self.beyond_foreign_record == 0 {
            return Vec::new();
        }
        vec![format!(
            "the #PROVISIONER record was rewritten by another provisioner since this tool's last apply; the {} level(s) this tool recorded beyond that record stay managed (docs/storage.md, \"The managed set beyond the record\")",
            self.beyond_foreign_record
        )]
    }

    /// Every level this namespace's applies own or may have written.
    pub fn all(&self) -> ManagedSet {
        let mut all = self.managed.clone();
        all.extend(&self.unconfirmed);
        all
    }
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

    /// Tests: `n` entities on one resource, too many for the record once `n`
    /// reaches a few thousand.
    #[cfg(test)]
    pub fn tenants(n: usize) -> ManagedSet {
        let mut set = ManagedSet::default();
        for e in 0..n {
            set.insert(&Level::Entity(format!("tenant-{e:06}"), "model-0".into()));
        }
        set
    }

    pub fn insert(&mut self, level: &Level) {
        match level {
            Level::System => self.system = true,
            Level::Resource(r) => {
                self.resources.insert(r.clone());
            }
            Level::Entity(e, r) => {
                self.entities
                    .entry(e.clone())
                    .or_default()
                    .insert(r.clone());
            }
        }
    }

    pub fn remove(&mut self, level: &Level) {
        match level {
            Level::System => self.system = false,
            Level::Resource(r) => {
                self.resources.remove(r);
            }
            Level::Entity(e, r) => {
                if let Some(rs) = self.entities.get_mut(e) {
                    rs.remove(r);
                    if rs.is_empty() {
                        self.entities.remove(e);
                    }
                }
            }
        }
    }

    /// Adds every level of `other`.
    pub fn extend(&mut self, other: &ManagedSet) {
        self.system |= other.system;
        self.resources.extend(other.resources.iter().cloned());
        for (e, rs) in &other.entities {
            self.entities
                .entry(e.clone())
                .or_default()
                .extend(rs.iter().cloned());
        }
    }

    /// Removes every level of `other`.
    pub fn subtract(&mut self, other: &ManagedSet) {
        self.system &= !other.system;
        self.resources.retain(|r| !other.resources.contains(r));
        for (e, rs) in &other.entities {
            if let Some(mine) = self.entities.get_mut(e) {
                mine.retain(|r| !rs.contains(r));
                if mine.is_empty() {
                    self.entities.remove(e);
                }
            }
        }
    }

    pub fn is_empty(&self) -> bool {
        !self.system && self.resources.is_empty() && self.entities.is_empty()
    }

    /// How many levels the set holds.
    pub fn len(&self) -> usize {
        usize::from(self.system)
            + self.resources.len()
            + self.entities.values().map(BTreeSet::len).sum::<usize>()
    }

    /// Every (entity, resource) pair, sorted by the tuple.
    pub fn entity_pairs(&self) -> Vec<(String, String)> {
        self.entities
            .iter()
            .flat_map(|(e, rs)| rs.iter().map(move |r| (e.clone(), r.clone())))
            .collect()
    }

    /// The resources the set's entity levels name (`_default_` included).
    pub fn entity_resources(&self) -> BTreeSet<String> {
        self.entities.values().flatten().cloned().collect()
    }

    /// Decodes the managed attributes of a `#PROVISIONER` item. Unknown shapes are
    /// corrupt: guessing would risk deleting levels nobody asked to delete.
    pub fn from_item(item: &Item) -> Result<Self, Unreadable> {
        let system = match item.get("managed_system") {
            None | Some(AttrValue::Null) => false,
            Some(AttrValue::Bool(b)) => *b,
            Some(_) => return Err("managed_system is not a boolean".into()),
        };
        let mut set = ManagedSet {
            system,
            ..Default::default()
        };
        set.read_lists(item, "managed_resources", "managed_entities")?;
        Ok(set)
    }

    /// Adds the resource list `resources` and the entity map `entities` of `item`.
    fn read_lists(
        &mut self,
        item: &Item,
        resources: &str,
        entities: &str,
    ) -> Result<(), Unreadable> {
        match item.get(resources) {
            None | Some(AttrValue::Null) => {}
            Some(v) => self.resources.extend(
                string_list(v).ok_or_else(|| format!("{resources} is not a list of strings"))?,
            ),
        }
        match item.get(entities) {
            None | Some(AttrValue::Null) => {}
            Some(AttrValue::M(m)) => {
                for (e, v) in m {
                    let rs = string_list(v)
                        .ok_or_else(|| format!("{entities}.{e} is not a list of strings"))?;
                    if !rs.is_empty() {
                        self.entities.entry(e.clone()).or_default().extend(rs);
                    }
                }
            }
            Some(_) => return Err(format!("{entities} is not a map").into()),
        }
        Ok(())
    }
}

fn string_list(v: &AttrValue) -> Option<BTreeSet<String>> {
    match v {
        AttrValue::L(items) => items.iter().map(|x| x.as_s().map(str::to_string)).collect(),
        AttrValue::Ss(s) => Some(s.clone()),
        _ => None,
    }
}

/// Reads the record (strongly consistent; the reference reads it eventually
/// consistent, but `--no-refresh` trusts digests only for the record they were
/// written with) and our overflow and writing items. No record means nothing
/// is managed.
pub fn read(store: &dyn Store, ns: &str) -> Result<ProvisionerRecord, StoreError> {
    let key = record_key(ns);
    let corrupt = |k: &Key, reason: Unreadable| StoreError::Corrupt {
        pk: k.pk.clone(),
        sk: k.sk.clone(),
        reason: reason.to_string(),
    };
    let mut out = ProvisionerRecord::default();
    // Consistent (the reference reads it eventually consistent): `--no-refresh`
    // trusts digests only for the record they were written with.
    let item = store.get(&key, true)?;
    out.identity = RecordIdentity::of(item.as_ref());
    if let Some(item) = item {
        out.managed = ManagedSet::from_item(&item).map_err(|r| corrupt(&key, r))?;
        if let Some(AttrValue::L(entries)) = item.get("cascade_pending") {
            for e in entries {
                if let AttrValue::M(m) = e {
                    let level = m.get("level").and_then(|v| v.as_s());
                    let target = m.get("target").and_then(|v| v.as_s()).unwrap_or("");
                    if let Some(level) = level {
                        out.cascade_pending
                            .push((level.to_string(), target.to_string()));
                    }
                }
            }
        }
        let text = |name: &str| item.get(name).and_then(AttrValue::as_s).unwrap_or_default();
        out.counts_left = item
            .get(COUNTS_ATTR)
            .and_then(AttrValue::as_s)
            .map(str::to_string);
        out.stamp = Some(crate::plan::digests::stamp(
            text("applied_hash"),
            text("last_applied"),
        ));
    }
    let pk = keys::system_pk(ns);
    // The overflow, by generation: the one naming this record is part of the
    // managed set; any other is unconfirmed.
    let mut generations: BTreeMap<String, (Option<String>, ManagedSet)> = BTreeMap::new();
    for item in store.query(&pk, OVERFLOW_SK_PREFIX, true)? {
        let k = Key::of(&item).unwrap_or_else(|| Key::new(&pk, OVERFLOW_SK_PREFIX));
        let generation = k.sk[OVERFLOW_SK_PREFIX.len()..]
            .rsplit_once('#')
            .map(|(g, _)| g.to_string())
            .unwrap_or_default();
        let entry = generations.entry(generation).or_default();
        if let Some(stamp) = item.get("provisioner").and_then(AttrValue::as_s) {
            entry.0 = Some(stamp.to_string());
        }
        decode_part(&item, &mut entry.1).map_err(|r| corrupt(&k, r))?;
        out.extra_keys.push(k);
    }
    let ours = generations
        .values()
        .any(|(stamp, _)| stamp.is_some() && *stamp == out.stamp);
    let mut foreign = ManagedSet::default();
    for (stamp, set) in generations.into_values() {
        if stamp.is_some() && stamp == out.stamp {
            out.managed.extend(&set);
        } else {
            if !ours {
                foreign.extend(&set);
            }
            out.unconfirmed.extend(&set);
        }
    }
    for item in store.query(&pk, WRITING_SK_PREFIX, true)? {
        let k = Key::of(&item).unwrap_or_else(|| Key::new(&pk, WRITING_SK_PREFIX));
        decode_part(&item, &mut out.unconfirmed).map_err(|r| corrupt(&k, r))?;
        out.extra_keys.push(k);
    }
    // What the record already holds is not unconfirmed.
    out.unconfirmed.subtract(&out.managed);
    foreign.subtract(&out.managed);
    out.beyond_foreign_record = foreign.len();
    Ok(out)
}

/// Adds the levels of one overflow or writing item to `set`.
fn decode_part(item: &Item, set: &mut ManagedSet) -> Result<(), Unreadable> {
    set.system |= item.get("system").and_then(AttrValue::as_bool) == Some(true);
    set.read_lists(item, "resources", "entities")
}

/// The most bytes the `#PROVISIONER` record may hold.
pub fn record_limit() -> usize {
    std::env::var(RECORD_LIMIT_ENV)
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .unwrap_or(chunked::LIMIT)
        .min(chunked::LIMIT)
}

fn list(s: &BTreeSet<String>) -> AttrValue {
    AttrValue::L(s.iter().map(AttrValue::s).collect())
}

/// The `#PROVISIONER` record for `managed`, holding as much of it as fits
/// `limit` bytes (the system flag, then resources, then entities, in order),
/// and the levels that did not fit.
pub fn record_item(
    ns: &str,
    managed: &ManagedSet,
    last_applied: &str,
    applied_hash: &str,
    limit: usize,
    extra: &[(&str, AttrValue)],
) -> (Item, ManagedSet) {
    let mut item = keys::namespaced_item(ns, record_key(ns));
    item.extend(crate::store::item::from_pairs(extra));
    item.insert("managed_system".into(), AttrValue::Bool(managed.system));
    item.insert("managed_resources".into(), AttrValue::L(vec![]));
    item.insert("managed_entities".into(), AttrValue::M(BTreeMap::new()));
    item.insert("last_applied".into(), AttrValue::s(last_applied));
    item.insert("applied_hash".into(), AttrValue::s(applied_hash));
    let mut room = chunked::room(&item, limit);
    let mut rest = ManagedSet::default();
    let mut resources = BTreeSet::new();
    let mut full = false;
    for r in &managed.resources {
        let size = chunked::list_element_size(&AttrValue::s(r));
        if full || size > room {
            full = true;
            rest.resources.insert(r.clone());
        } else {
            room -= size;
            resources.insert(r.clone());
        }
    }
    let mut entities = BTreeMap::new();
    for (e, rs) in &managed.entities {
        let value = list(rs);
        let size = chunked::map_entry_size(e, &value);
        if full || size > room {
            full = true;
            rest.entities.insert(e.clone(), rs.clone());
        } else {
            room -= size;
            entities.insert(e.clone(), value);
        }
    }
    item.insert("managed_resources".into(), list(&resources));
    item.insert("managed_entities".into(), AttrValue::M(entities));
    (item, rest)
}

/// One resource or entity entry of an overflow or writing item.
enum Part<'a> {
    Resource(&'a String),
    Entity(&'a String, AttrValue),
}

/// The items holding `set` under `{prefix}{name}#{nnnn}`, split below the item
/// limit; chunk 0 carries `system`, `chunks` and `extra` (the record stamp).
pub fn set_items(
    ns: &str,
    prefix: &str,
    name: &str,
    set: &ManagedSet,
    extra: &[(&str, AttrValue)],
) -> Vec<Item> {
    let pk = keys::system_pk(ns);
    let base = |i: usize| {
        let mut it = keys::namespaced_item(ns, Key::new(&pk, format!("{prefix}{name}#{i:04}")));
        it.insert("resources".into(), AttrValue::L(vec![]));
        it.insert("entities".into(), AttrValue::M(BTreeMap::new()));
        it
    };
    let mut first = base(0);
    first.insert("system".into(), AttrValue::Bool(set.system));
    first.insert("chunks".into(), AttrValue::n(9999));
    for (k, v) in extra {
        first.insert((*k).to_string(), v.clone());
    }
    let room = chunked::room(&first, chunked::LIMIT);
    let parts = set
        .resources
        .iter()
        .map(Part::Resource)
        .chain(set.entities.iter().map(|(e, rs)| Part::Entity(e, list(rs))));
    let split = chunked::split(parts, room, |p| match p {
        Part::Resource(r) => chunked::list_element_size(&AttrValue::s(*r)),
        Part::Entity(e, v) => chunked::map_entry_size(e, v),
    });
    let n = split.len();
    split
        .into_iter()
        .enumerate()
        .map(|(i, parts)| {
            let mut it = if i == 0 { first.clone() } else { base(i) };
            if i == 0 {
                it.insert("chunks".into(), AttrValue::n(n));
            }
            let mut resources = Vec::new();
            let mut entities = BTreeMap::new();
            for p in parts {
                match p {
                    Part::Resource(r) => resources.push(AttrValue::s(r)),
                    Part::Entity(e, v) => {
                        entities.insert(e.clone(), v);
                    }
                }
            }
            it.insert("resources".into(), AttrValue::L(resources));
            it.insert("entities".into(), AttrValue::M(entities));
            it
        })
        .collect()
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
    use crate::store::emulate::item_size;
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

    fn big(entities: usize) -> ManagedSet {
        let mut s = ManagedSet {
            system: true,
            ..Default::default()
        };
        s.resources.insert("gpt-4".into());
        for e in 0..entities {
            for r in ["model-0", "model-1", "_default_"] {
                s.insert(&Level::Entity(format!("tenant-{e:06}"), r.into()));
            }
        }
        s
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
        assert_eq!(s.len(), 5);
    }

    #[test]
    fn record_round_trips_through_the_store() {
        let store = MemoryStore::new();
        assert_eq!(read(&store, "ns").unwrap(), ProvisionerRecord::default());
        let s = ManagedSet::from_manifest(&manifest());
        let (item, rest) =
            record_item("ns", &s, &iso_timestamp(0), "sha256:x", chunked::LIMIT, &[]);
        assert!(rest.is_empty());
        store.put(item);
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
    fn a_set_too_large_for_the_record_keeps_a_readable_prefix_there() {
        let s = big(20_000);
        let (item, rest) = record_item("ns", &s, "t", "sha256:x", chunked::LIMIT, &[]);
        assert!(item_size(&item) <= chunked::LIMIT);
        assert!(!rest.is_empty());
        // The record alone is a valid managed set: a prefix of the entities.
        let head = ManagedSet::from_item(&item).unwrap();
        assert!(head.system && head.resources.contains("gpt-4"));
        let last = head.entities.keys().next_back().unwrap();
        assert!(rest.entities.keys().all(|e| e > last));
        let mut union = head.clone();
        union.extend(&rest);
        assert_eq!(union, s);
        // The rest splits into items below the limit that read back whole.
        let items = set_items("ns", OVERFLOW_SK_PREFIX, "g1", &rest, &[]);
        assert!(items.len() > 1);
        let mut back = ManagedSet::default();
        for i in &items {
            assert!(item_size(i) <= chunked::LIMIT, "{}", item_size(i));
            decode_part(i, &mut back).unwrap();
        }
        assert_eq!(back, rest);
    }

    #[test]
    fn overflow_of_this_record_is_managed_and_any_other_is_unconfirmed() {
        let store = MemoryStore::new();
        let s = big(300);
        let limit = 4_000;
        let stamp = crate::plan::digests::stamp("sha256:x", "t1");
        let (item, rest) = record_item("ns", &s, "t1", "sha256:x", limit, &[]);
        assert!(!rest.is_empty());
        store.put(item);
        for i in set_items(
            "ns",
            OVERFLOW_SK_PREFIX,
            "g1",
            &s,
            &[("provisioner", AttrValue::s(&stamp))],
        ) {
            store.put(i);
        }
        let r = read(&store, "ns").unwrap();
        assert_eq!(r.managed, s);
        assert!(r.unconfirmed.is_empty());
        assert_eq!(r.beyond_foreign_record, 0);

        // An apply died after writing what it was about to create.
        let mut writing = ManagedSet::default();
        writing.insert(&Level::Entity("new".into(), "r".into()));
        writing.insert(&Level::Resource("gpt-4".into()));
        for i in set_items("ns", WRITING_SK_PREFIX, "t9", &writing, &[]) {
            store.put(i);
        }
        let r = read(&store, "ns").unwrap();
        assert_eq!(r.managed, s);
        assert_eq!(
            r.unconfirmed.entity_pairs(),
            vec![("new".into(), "r".into())]
        );
        assert!(r.unconfirmed.resources.is_empty(), "already managed");

        // The reference's provisioner rewrote the record: everything of ours
        // is unconfirmed, nothing is lost.
        let mut theirs = ManagedSet::default();
        theirs.insert(&Level::Resource("other".into()));
        let (item, _) = record_item("ns", &theirs, "t2", "sha256:y", chunked::LIMIT, &[]);
        store.put(item);
        let r = read(&store, "ns").unwrap();
        assert_eq!(r.managed, theirs);
        assert_eq!(r.beyond_foreign_record, s.len());
        let mut want = s.clone();
        want.extend(&theirs);
        want.extend(&writing);
        assert_eq!(r.all(), want);
    }

    #[test]
    fn legacy_cascade_pending_is_read_and_bad_shapes_are_corrupt() {
        let store = MemoryStore::new();
        let (mut item, _) =
            record_item("ns", &ManagedSet::default(), "t", "h", chunked::LIMIT, &[]);
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
