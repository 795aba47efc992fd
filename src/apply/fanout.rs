//! Bucket fan-out after a config write (spec manifest-cli.md §3.4): push the new
//! limits and flags into existing bucket items so running limiters enforce them.
//!
//! CONTRACT between apply (which decides what is owed, writes pending items
//! ahead and releases them) and this module (which performs one owed fan-out).

mod bucket;
mod levels;

use std::collections::{BTreeSet, HashSet};

use self::bucket::{bucket_limits, stamp_deadline, sync_actions, BucketId};
use self::levels::{meta_key, Levels, Source};
use crate::store::{
    AttrValue, Condition, Index, Item, Key, Store, StoreError, UpdateAction, WriteOp,
};

/// Kinds in execution order: `disabled`, `cascade`, `soft`, `sync`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FanOutKind {
    Disabled,
    Cascade,
    Soft,
    Sync,
}

impl FanOutKind {
    /// The name used in pending-item keys: `disabled`, `cascade`, `soft`, `sync`.
    pub fn as_str(self) -> &'static str {
        match self {
            FanOutKind::Disabled => "disabled",
            FanOutKind::Cascade => "cascade",
            FanOutKind::Soft => "soft",
            FanOutKind::Sync => "sync",
        }
    }
}

/// A config level. Resource sorts before entity, as the reference runs them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LevelKind {
    System,
    Resource,
    Entity,
}

impl LevelKind {
    pub fn as_str(self) -> &'static str {
        match self {
            LevelKind::System => "system",
            LevelKind::Resource => "resource",
            LevelKind::Entity => "entity",
        }
    }
}

/// One owed fan-out. `target` is "" for system, the resource name, or `entity/resource`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Owed {
    pub kind: FanOutKind,
    pub level: LevelKind,
    pub target: String,
}

/// Performs one owed fan-out against the buckets that exist now, reading the
/// level's live config item. `Err` is the one-line reason, reported by apply as
/// `… (retried on the next apply)`.
///
/// Buckets are discovered twice (the second pass catches buckets created
/// meanwhile); every write is an UpdateItem conditioned on the bucket still
/// existing, so a vanished shard is skipped and nothing is ever created.
pub fn run(store: &dyn Store, ns_id: &str, owed: &Owed, now_ms: i64) -> Result<(), String> {
    let Some(scope) = Scope::parse(owed.level, &owed.target) else {
        return Err(format!(
            "cannot fan out {} {} '{}': malformed target",
            owed.kind.as_str(),
            owed.level.as_str(),
            owed.target
        ));
    };
    let job = match (owed.kind, &scope) {
        (FanOutKind::Sync, Scope::Entity(..)) => Job::Sync,
        (FanOutKind::Disabled, Scope::Entity(..) | Scope::Resource(_)) => Job::Disabled,
        (FanOutKind::Cascade, Scope::Entity(..) | Scope::Resource(_)) => Job::Cascade,
        (FanOutKind::Soft, Scope::System | Scope::Resource(_)) => Job::Soft,
        // Resource/system limit changes reach buckets through their TTL (§3.4);
        // entity soft-ness travels with the sync; there are no system flags.
        _ => return Ok(()),
    };
    let mut seen: HashSet<Key> = HashSet::new();
    for _pass in 0..2 {
        let found = discover(store, ns_id, &scope).map_err(|e| e.to_string())?;
        let fresh: Vec<(Key, BucketId)> = found
            .into_iter()
            .filter(|(k, _)| seen.insert(k.clone()))
            .collect();
        if !fresh.is_empty() {
            fan_out(store, ns_id, &scope, job, &fresh, now_ms)?;
        }
    }
    Ok(())
}

/// What one fan-out does to each bucket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Job {
    Sync,
    Disabled,
    Cascade,
    Soft,
}

/// The level a fan-out starts from.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Scope {
    System,
    Resource(String),
    Entity(String, String),
}

impl Scope {
    fn parse(level: LevelKind, target: &str) -> Option<Scope> {
        match level {
            LevelKind::System => Some(Scope::System),
            LevelKind::Resource if !target.is_empty() => Some(Scope::Resource(target.into())),
            LevelKind::Entity => {
                let (e, r) = target.split_once('/')?;
                (!e.is_empty() && !r.is_empty()).then(|| Scope::Entity(e.into(), r.into()))
            }
            _ => None,
        }
    }
}

/// Bucket shards under the scope, via GSI3 (entity), GSI2 (resource) or GSI4 (system).
fn discover(
    store: &dyn Store,
    ns: &str,
    scope: &Scope,
) -> Result<Vec<(Key, BucketId)>, StoreError> {
    let keys = match scope {
        Scope::Entity(e, r) => {
            let prefix = if r == "_default_" {
                "BUCKET#".to_string()
            } else {
                format!("BUCKET#{r}#")
            };
            store.query_index(Index::Gsi3, &format!("{ns}/ENTITY#{e}"), &prefix)?
        }
        Scope::Resource(r) => {
            store.query_index(Index::Gsi2, &format!("{ns}/RESOURCE#{r}"), "BUCKET#")?
        }
        Scope::System => store.query_index(Index::Gsi4, ns, "BUCKET#")?,
    };
    Ok(keys
        .into_iter()
        .filter(|k| k.sk == "#STATE")
        .filter_map(|k| BucketId::parse(ns, &k.pk).map(|id| (k, id)))
        .collect())
}

/// Reads what the buckets resolve from (one batched, consistent read), builds
/// one conditional update per bucket and runs them concurrently.
fn fan_out(
    store: &dyn Store,
    ns: &str,
    scope: &Scope,
    job: Job,
    buckets: &[(Key, BucketId)],
    now_ms: i64,
) -> Result<(), String> {
    let mut config_keys: BTreeSet<Key> = BTreeSet::new();
    for (_, id) in buckets {
        config_keys.extend(Levels::keys_for(ns, &id.entity, &id.resource));
        if job == Job::Cascade {
            config_keys.insert(meta_key(ns, &id.entity));
        }
    }
    let mut read: Vec<Key> = config_keys.into_iter().collect();
    let n_config = read.len();
    read.extend(buckets.iter().map(|(k, _)| k.clone()));
    let items = store.batch_get(&read, true).map_err(|e| e.to_string())?;
    let (config_items, bucket_items) = items.split_at(n_config);
    let fetched: Vec<(Key, Option<Item>)> = read[..n_config]
        .iter()
        .cloned()
        .zip(config_items.iter().cloned())
        .collect();
    let metas: std::collections::HashMap<Key, Item> = fetched
        .iter()
        .filter(|(k, _)| k.sk == "#META")
        .filter_map(|(k, i)| i.clone().map(|i| (k.clone(), i)))
        .collect();
    let levels = Levels::new(
        ns,
        fetched
            .into_iter()
            .filter(|(k, _)| k.sk != "#META")
            .collect(),
    )?;

    let mut ops = vec![];
    for ((key, id), current) in buckets.iter().zip(bucket_items) {
        // Gone since discovery: nothing to update (and never create it).
        let Some(current) = current else { continue };
        let planned = match job {
            Job::Sync => plan_sync(&levels, id, current, now_ms)?,
            Job::Disabled => plan_disabled(&levels, scope, id, current, now_ms),
            Job::Cascade => plan_cascade(&levels, ns, id, &metas),
            Job::Soft => plan_soft(&levels, scope, id, current, now_ms),
        };
        if let Some((actions, extra)) = planned {
            if actions.is_empty() {
                continue;
            }
            let condition = match extra {
                Some(c) => Condition::And(vec![Condition::Exists, c]),
                None => Condition::Exists,
            };
            ops.push(WriteOp::Update {
                key: key.clone(),
                actions,
                condition: Some(condition),
            });
        }
    }
    let mut first_error = None;
    let mut failed = 0usize;
    for res in store.write_many(ops) {
        match res {
            Ok(_) | Err(StoreError::ConditionFailed { .. }) => {}
            Err(e) => {
                failed += 1;
                first_error.get_or_insert(e.to_string());
            }
        }
    }
    match first_error {
        None => Ok(()),
        Some(e) if failed == 1 => Err(e),
        Some(e) => Err(format!("{failed} bucket updates failed; first: {e}")),
    }
}

type Planned = Option<(Vec<UpdateAction>, Option<Condition>)>;

/// The limits resolved for the bucket's own (entity, resource), so a
/// `_default_` sync never clobbers an entity+resource config.
fn plan_sync(
    levels: &Levels,
    id: &BucketId,
    current: &Item,
    now_ms: i64,
) -> Result<Planned, String> {
    let Some((source, cfg)) = levels.resolve_limits(&id.entity, &id.resource) else {
        return Ok(None);
    };
    let actions = sync_actions(cfg, source, current, now_ms)
        .map_err(|e| format!("bucket {}/{}: {e}", id.entity, id.resource))?;
    Ok(Some((actions, None)))
}

/// `SET disabled=true REMOVE bypass`, `SET bypass=<deadline> REMOVE disabled`,
/// or `REMOVE disabled, bypass`. A resource-level directive skips buckets whose
/// entity sets its own value, and buckets already stamped correctly.
fn plan_disabled(
    levels: &Levels,
    scope: &Scope,
    id: &BucketId,
    current: &Item,
    now_ms: i64,
) -> Planned {
    let resolved = levels.resolve_disabled(&id.entity, &id.resource);
    if matches!(scope, Scope::Resource(_))
        && resolved.as_ref().is_some_and(|(src, _)| src.is_entity())
    {
        return None;
    }
    let has = |a: &str| current.contains_key(a);
    let actions = match resolved.map(|(_, v)| v) {
        Some(AttrValue::Bool(true)) => {
            if current.get("disabled") == Some(&AttrValue::Bool(true)) && !has("bypass") {
                return None;
            }
            let mut a = vec![UpdateAction::Set("disabled".into(), AttrValue::Bool(true))];
            if has("bypass") {
                a.push(UpdateAction::Remove("bypass".into()));
            }
            a
        }
        Some(AttrValue::S(s)) if s == "bypass" => {
            let mut a = vec![UpdateAction::Set(
                "bypass".into(),
                AttrValue::n(stamp_deadline(now_ms)),
            )];
            if has("disabled") {
                a.push(UpdateAction::Remove("disabled".into()));
            }
            a
        }
        _ => {
            let a: Vec<UpdateAction> = ["disabled", "bypass"]
                .into_iter()
                .filter(|n| has(n))
                .map(|n| UpdateAction::Remove(n.into()))
                .collect();
            if a.is_empty() {
                return None;
            }
            a
        }
    };
    Some((actions, None))
}

/// `SET cascade, parent_id[, pgen, pinc]` from the owner's META, conditioned on
/// the bucket not carrying a newer parent generation. Owners without META are skipped.
fn plan_cascade(
    levels: &Levels,
    ns: &str,
    id: &BucketId,
    metas: &std::collections::HashMap<Key, Item>,
) -> Planned {
    let meta = metas.get(&meta_key(ns, &id.entity))?;
    let policy = levels
        .resolve_cascade(&id.entity, &id.resource)
        .map(|(_, v)| v)
        .or_else(|| meta.get("cascade").and_then(AttrValue::as_bool))
        .unwrap_or(false);
    let mut actions = vec![UpdateAction::Set("cascade".into(), AttrValue::Bool(policy))];
    match meta.get("parent_id") {
        Some(AttrValue::S(p)) => {
            actions.push(UpdateAction::Set("parent_id".into(), AttrValue::s(p)))
        }
        _ => actions.push(UpdateAction::Remove("parent_id".into())),
    }
    let mut condition = None;
    if let Some(AttrValue::N(pgen)) = meta.get("pgen") {
        actions.push(UpdateAction::Set("pgen".into(), AttrValue::N(pgen.clone())));
        condition = Some(Condition::Or(vec![
            Condition::AttrNotExists("pgen".into()),
            Condition::AttrNumLe("pgen".into(), pgen.clone()),
        ]));
    }
    if let Some(AttrValue::S(pinc)) = meta.get("pinc") {
        actions.push(UpdateAction::Set("pinc".into(), AttrValue::s(pinc)));
    }
    Some((actions, condition))
}

/// Soft stamps for buckets whose limits resolve from this system/resource level.
fn plan_soft(
    levels: &Levels,
    scope: &Scope,
    id: &BucketId,
    current: &Item,
    now_ms: i64,
) -> Planned {
    let (source, cfg) = levels.resolve_limits(&id.entity, &id.resource)?;
    let from_here = match scope {
        Scope::System => source == Source::System,
        Scope::Resource(r) => source == Source::Resource && *r == id.resource,
        Scope::Entity(..) => false,
    };
    if !from_here {
        return None;
    }
    let deadline = stamp_deadline(now_ms);
    let mut actions = vec![];
    for n in bucket_limits(current) {
        let Some(l) = cfg.limits.get(&n) else {
            continue;
        };
        let attr = format!("b_{n}_soft");
        if l.soft {
            actions.push(UpdateAction::Set(attr, AttrValue::n(deadline)));
        } else if current.contains_key(&attr) {
            actions.push(UpdateAction::Remove(attr));
        }
    }
    Some((actions, None))
}

#[cfg(test)]
mod tests;
