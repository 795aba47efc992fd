//! Bucket fan-out after a config write (docs/storage.md, "Bucket items"): push the new
//! limits and flags into existing bucket items so running limiters enforce them.
//!
//! CONTRACT between apply (which decides what is owed, writes pending items
//! ahead and releases them) and this module (which performs one owed fan-out).

mod bucket;
mod levels;

use std::collections::{BTreeSet, HashMap, HashSet};

use self::bucket::{stamp_deadline, sync_actions, BucketId};
use self::levels::{meta_key, Levels, Source};
use crate::items::attrs::{self, bucket_item, bucket_limits, BucketField};
use crate::items::config::CodecError;
use crate::items::keys;
use crate::manifest::model::Disabled;
use crate::plan::level::Level;
pub use crate::plan::level::LevelKind;
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

/// One owed fan-out. `target` is "" for system, the resource name, or `entity/resource`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Owed {
    pub kind: FanOutKind,
    pub level: LevelKind,
    pub target: String,
}

impl Owed {
    pub fn new(kind: FanOutKind, level: LevelKind, target: impl Into<String>) -> Owed {
        Owed {
            kind,
            level,
            target: target.into(),
        }
    }

    /// The fan-out of `kind` that a change to `level` owes.
    pub fn of(kind: FanOutKind, level: &Level) -> Owed {
        Owed::new(kind, level.kind(), level.target())
    }
}

/// Performs one owed fan-out against the buckets that exist now, reading the
/// level's live config item. `Err` is the one-line reason, reported by apply as
/// `… (retried on the next apply)`.
///
/// Buckets are discovered twice (the second pass catches buckets created
/// meanwhile); every write is an UpdateItem conditioned on the bucket still
/// existing, so a vanished shard is skipped and nothing is ever created.
/// Why a fan-out did not finish (the apply reports it; the next apply retries).
#[derive(Debug, Clone, thiserror::Error)]
pub enum FanOutError {
    #[error("cannot fan out {kind} {level} '{target}': malformed target")]
    MalformedTarget {
        kind: &'static str,
        level: &'static str,
        target: String,
    },
    #[error("{0}")]
    Store(#[from] StoreError),
    /// A level the buckets resolve from cannot be read.
    #[error("{0}")]
    Config(#[from] CodecError),
    #[error("{failed} bucket updates failed; first: {first}")]
    Buckets { failed: usize, first: StoreError },
    /// `ZAEL_FAULT_FANOUT_ERROR` (tests only).
    #[error("{0}")]
    Injected(String),
}

pub fn run(store: &dyn Store, ns_id: &str, owed: &Owed, now_ms: i64) -> Result<(), FanOutError> {
    run_many(store, ns_id, std::slice::from_ref(owed), now_ms)
        .pop()
        .unwrap_or(Ok(()))
}

/// At or above this many fan-outs, buckets are discovered with one listing of
/// the namespace (GSI4) instead of two index queries per fan-out.
pub const BULK_DISCOVERY_AT: usize = 32;
/// The most buckets one round of reads and updates handles: a fan-out over a
/// large namespace holds one round's items, whatever the namespace's size.
const BUCKETS_PER_ROUND: usize = 2_000;

/// Every bucket of a namespace, from one listing (GSI4), found by the levels
/// that govern it.
#[derive(Debug, Default)]
pub struct Listing {
    all: Vec<(Key, BucketId)>,
    by_entity: HashMap<String, Vec<usize>>,
    by_resource: HashMap<String, Vec<usize>>,
}

impl Listing {
    /// Lists the namespace's buckets (keys only).
    pub fn of(store: &dyn Store, ns: &str) -> Result<Listing, StoreError> {
        let all = discover(store, ns, &Scope::System)?;
        let mut listing = Listing::default();
        for (i, (_, id)) in all.iter().enumerate() {
            listing
                .by_entity
                .entry(id.entity.clone())
                .or_default()
                .push(i);
            listing
                .by_resource
                .entry(id.resource.clone())
                .or_default()
                .push(i);
        }
        listing.all = all;
        Ok(listing)
    }

    /// The buckets under `scope`, as its index query would find them.
    fn under(&self, scope: &Scope) -> Vec<(Key, BucketId)> {
        let pick = |ix: Option<&Vec<usize>>| -> Vec<(Key, BucketId)> {
            ix.into_iter()
                .flatten()
                .map(|i| &self.all[*i])
                .filter(|(_, id)| scope.covers(id))
                .cloned()
                .collect()
        };
        match scope {
            Scope::System => self.all.clone(),
            Scope::Resource(r) => pick(self.by_resource.get(r)),
            Scope::Entity(e, _) => pick(self.by_entity.get(e)),
        }
    }

    /// Whether the level `owed` fans out from governs any listed bucket (a
    /// malformed target governs none).
    pub fn governs(&self, owed: &Owed) -> bool {
        Scope::parse(owed.level, &owed.target).is_some_and(|s| !self.under(&s).is_empty())
    }
}

/// Performs many owed fan-outs at once, with the same effect as [`run`] on each
/// in turn: config items and buckets are read in batches (100 keys a request),
/// the bucket updates run concurrently, and with many fan-outs the buckets are
/// found by listing the namespace once per pass. One result per `owed`, in order.
pub fn run_many(
    store: &dyn Store,
    ns_id: &str,
    owed: &[Owed],
    now_ms: i64,
) -> Vec<Result<(), FanOutError>> {
    run_listed(store, ns_id, owed, now_ms, None)
        .into_iter()
        .map(|r| r.map(|_| ()))
        .collect()
}

/// [`run_many`], taking the first pass's listing as given when there is one
/// (a caller that listed the buckets before its config writes), and telling
/// for each fan-out whether any bucket was under it (`false`: nothing was
/// there to update, in either pass).
pub fn run_listed(
    store: &dyn Store,
    ns_id: &str,
    owed: &[Owed],
    now_ms: i64,
    mut first: Option<Listing>,
) -> Vec<Result<bool, FanOutError>> {
    let mut results: Vec<Result<(), FanOutError>> = vec![Ok(()); owed.len()];
    let mut touched = vec![false; owed.len()];
    let mut work: Vec<(usize, Scope, Job)> = vec![];
    for (i, o) in owed.iter().enumerate() {
        let Some(scope) = Scope::parse(o.level, &o.target) else {
            results[i] = Err(FanOutError::MalformedTarget {
                kind: o.kind.as_str(),
                level: o.level.as_str(),
                target: o.target.clone(),
            });
            continue;
        };
        let job = match (o.kind, &scope) {
            (FanOutKind::Sync, Scope::Entity(..)) => Job::Sync,
            (FanOutKind::Disabled, Scope::Entity(..) | Scope::Resource(_)) => Job::Disabled,
            (FanOutKind::Cascade, Scope::Entity(..) | Scope::Resource(_)) => Job::Cascade,
            (FanOutKind::Soft, Scope::System | Scope::Resource(_)) => Job::Soft,
            // Resource/system limit changes reach buckets through their TTL (docs/storage.md);
            // entity soft-ness travels with the sync; there are no system flags.
            _ => continue,
        };
        work.push((i, scope, job));
    }
    let bulk = work.len() >= BULK_DISCOVERY_AT;
    let mut seen: Vec<HashSet<Key>> = vec![HashSet::new(); work.len()];
    for _pass in 0..2 {
        let all = if bulk {
            match first.take().map_or_else(|| Listing::of(store, ns_id), Ok) {
                Ok(listing) => Some(listing),
                Err(e) => {
                    for (i, ..) in &work {
                        results[*i] = Err(e.clone().into());
                    }
                    return results.into_iter().map(|r| r.map(|_| false)).collect();
                }
            }
        } else {
            None
        };
        let mut batch: Vec<Task> = vec![];
        for (w, (i, scope, job)) in work.iter().enumerate() {
            if results[*i].is_err() {
                continue;
            }
            let found = match &all {
                Some(all) => Ok(all.under(scope)),
                None => discover(store, ns_id, scope),
            };
            match found {
                Ok(found) => {
                    touched[*i] |= !found.is_empty();
                    let fresh: Vec<(Key, BucketId)> = found
                        .into_iter()
                        .filter(|(k, _)| seen[w].insert(k.clone()))
                        .collect();
                    if !fresh.is_empty() {
                        batch.push(Task {
                            index: *i,
                            scope: scope.clone(),
                            job: *job,
                            buckets: fresh,
                        });
                    }
                }
                Err(e) => results[*i] = Err(e.into()),
            }
        }
        // A round at a time: a task's buckets, and whole tasks, up to a
        // bounded number of buckets per round.
        let mut round: Vec<Task> = vec![];
        let mut in_round = 0;
        let mut tasks = batch.into_iter().flat_map(split_task).peekable();
        while let Some(t) = tasks.next() {
            in_round += t.buckets.len();
            round.push(t);
            if in_round >= BUCKETS_PER_ROUND || tasks.peek().is_none() {
                for (i, res) in fan_out(store, ns_id, &round, now_ms) {
                    if let Err(e) = res {
                        results[i] = Err(e);
                    }
                }
                round.clear();
                in_round = 0;
            }
        }
    }
    results
        .into_iter()
        .zip(touched)
        .map(|(r, t)| r.map(|()| t))
        .collect()
}

/// A task cut into tasks of at most [`BUCKETS_PER_ROUND`] buckets.
fn split_task(t: Task) -> Vec<Task> {
    if t.buckets.len() <= BUCKETS_PER_ROUND {
        return vec![t];
    }
    t.buckets
        .chunks(BUCKETS_PER_ROUND)
        .map(|part| Task {
            index: t.index,
            scope: t.scope.clone(),
            job: t.job,
            buckets: part.to_vec(),
        })
        .collect()
}

/// One fan-out's share of a batch: the buckets it still has to update.
struct Task {
    index: usize,
    scope: Scope,
    job: Job,
    buckets: Vec<(Key, BucketId)>,
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
    /// Whether a bucket belongs to this level's discovery (as its index query would find it).
    fn covers(&self, id: &BucketId) -> bool {
        match self {
            Scope::System => true,
            Scope::Resource(r) => id.resource == *r,
            Scope::Entity(e, r) => id.entity == *e && (r == "_default_" || id.resource == *r),
        }
    }

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
            let prefix = if r == keys::DEFAULT_RESOURCE {
                "BUCKET#".to_string()
            } else {
                format!("BUCKET#{r}#")
            };
            store.query_index(Index::Gsi3, &keys::entity_pk(ns, e), &prefix)?
        }
        Scope::Resource(r) => {
            store.query_index(Index::Gsi2, &keys::resource_pk(ns, r), "BUCKET#")?
        }
        Scope::System => store.query_index(Index::Gsi4, ns, "BUCKET#")?,
    };
    Ok(keys
        .into_iter()
        .filter(|k| k.sk == "#STATE")
        .filter_map(|k| BucketId::parse(ns, &k.pk).map(|id| (k, id)))
        .collect())
}

/// Reads what the buckets resolve from (batched, consistent reads), builds one
/// conditional update per bucket and task, and runs them all concurrently.
/// Returns the outcome per task index.
fn fan_out(
    store: &dyn Store,
    ns: &str,
    tasks: &[Task],
    now_ms: i64,
) -> Vec<(usize, Result<(), FanOutError>)> {
    if tasks.is_empty() {
        return vec![];
    }
    let mut config_keys: BTreeSet<Key> = BTreeSet::new();
    let mut bucket_keys: BTreeSet<Key> = BTreeSet::new();
    for t in tasks {
        for (k, id) in &t.buckets {
            config_keys.extend(Levels::keys_for(ns, &id.entity, &id.resource));
            if t.job == Job::Cascade {
                config_keys.insert(meta_key(ns, &id.entity));
            }
            bucket_keys.insert(k.clone());
        }
    }
    let fail_all = |e: FanOutError| tasks.iter().map(|t| (t.index, Err(e.clone()))).collect();
    let read: Vec<Key> = config_keys
        .iter()
        .chain(bucket_keys.iter())
        .cloned()
        .collect();
    let items = match store.batch_get(&read, true) {
        Ok(items) => items,
        Err(e) => return fail_all(e.into()),
    };
    let fetched: HashMap<Key, Option<Item>> = read.into_iter().zip(items).collect();
    let metas: HashMap<Key, Item> = fetched
        .iter()
        .filter(|(k, _)| k.sk == "#META")
        .filter_map(|(k, i)| i.clone().map(|i| (k.clone(), i)))
        .collect();
    let config: Vec<(Key, Option<Item>)> = config_keys
        .iter()
        .filter(|k| k.sk != "#META")
        .map(|k| (k.clone(), fetched.get(k).cloned().flatten()))
        .collect();
    let levels = match Levels::new(ns, config) {
        Ok(l) => l,
        Err(e) => return fail_all(e.into()),
    };

    let mut outcome: Vec<(usize, Result<(), FanOutError>)> = vec![];
    let mut ops = vec![];
    let mut owner = vec![];
    for (t_ix, t) in tasks.iter().enumerate() {
        for (key, id) in &t.buckets {
            // Gone since discovery: nothing to update (and never create it).
            let Some(Some(current)) = fetched.get(key) else {
                continue;
            };
            let b = Bucket {
                levels: &levels,
                scope: &t.scope,
                id,
                current,
                now_ms,
            };
            let planned = match t.job {
                Job::Sync => plan_sync(&b),
                Job::Disabled => plan_disabled(&b),
                Job::Cascade => plan_cascade(&b, ns, &metas),
                Job::Soft => plan_soft(&b),
            };
            if let Some((actions, extra)) = planned.filter(|(a, _)| !a.is_empty()) {
                let condition = match extra {
                    Some(c) => Condition::And(vec![Condition::Exists, c]),
                    None => Condition::Exists,
                };
                ops.push(WriteOp::Update {
                    key: key.clone(),
                    actions,
                    condition: Some(condition),
                });
                owner.push(t_ix);
            }
        }
        outcome.push((t.index, Ok(())));
    }
    let mut failures: Vec<(usize, Option<StoreError>)> = vec![(0, None); tasks.len()];
    for (res, t_ix) in store.write_many(ops).into_iter().zip(owner) {
        match res {
            Ok(_) | Err(StoreError::ConditionFailed { .. }) => {}
            Err(e) => {
                let f = &mut failures[t_ix];
                f.0 += 1;
                f.1.get_or_insert(e);
            }
        }
    }
    for ((_, res), (failed, first)) in outcome.iter_mut().zip(failures) {
        if let (true, Some(first)) = (res.is_ok(), first) {
            *res = Err(if failed == 1 {
                first.into()
            } else {
                FanOutError::Buckets { failed, first }
            });
        }
    }
    outcome
}

type Planned = Option<(Vec<UpdateAction>, Option<Condition>)>;

/// One bucket a task updates, with what its update is planned from.
struct Bucket<'a> {
    levels: &'a Levels,
    scope: &'a Scope,
    id: &'a BucketId,
    /// The bucket as read.
    current: &'a Item,
    now_ms: i64,
}

/// The limits resolved for the bucket's own (entity, resource), so a
/// `_default_` sync never clobbers an entity+resource config.
fn plan_sync(b: &Bucket<'_>) -> Planned {
    let (source, cfg) = b.levels.resolve_limits(&b.id.entity, &b.id.resource)?;
    Some((sync_actions(cfg, source, b.current, b.now_ms), None))
}

/// `SET disabled=true REMOVE bypass`, `SET bypass=<deadline> REMOVE disabled`,
/// or `REMOVE disabled, bypass`. A resource-level directive skips buckets whose
/// entity sets its own value, and buckets already stamped correctly.
fn plan_disabled(b: &Bucket<'_>) -> Planned {
    let (scope, current, now_ms) = (b.scope, b.current, b.now_ms);
    let resolved = b.levels.resolve_disabled(&b.id.entity, &b.id.resource);
    if matches!(scope, Scope::Resource(_))
        && resolved.as_ref().is_some_and(|(src, _)| src.is_entity())
    {
        return None;
    }
    let has = |a: &str| current.contains_key(a);
    let (disabled, bypass) = (bucket_item::DISABLED, bucket_item::BYPASS);
    let actions = match resolved.map(|(_, v)| v) {
        Some(Disabled::Disabled) => {
            if current.get(disabled) == Some(&AttrValue::Bool(true)) && !has(bypass) {
                return None;
            }
            let mut a = vec![UpdateAction::Set(disabled.into(), AttrValue::Bool(true))];
            if has(bypass) {
                a.push(UpdateAction::Remove(bypass.into()));
            }
            a
        }
        Some(Disabled::Bypass) => {
            let mut a = vec![UpdateAction::Set(
                bypass.into(),
                AttrValue::n(stamp_deadline(now_ms)),
            )];
            if has(disabled) {
                a.push(UpdateAction::Remove(disabled.into()));
            }
            a
        }
        Some(Disabled::Enforced) | None => {
            let a: Vec<UpdateAction> = [disabled, bypass]
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
fn plan_cascade(b: &Bucket<'_>, ns: &str, metas: &HashMap<Key, Item>) -> Planned {
    let (levels, id) = (b.levels, b.id);
    let meta = metas.get(&meta_key(ns, &id.entity))?;
    let policy = levels
        .resolve_cascade(&id.entity, &id.resource)
        .map(|(_, v)| v)
        .or_else(|| meta.get(attrs::CASCADE).and_then(AttrValue::as_bool))
        .unwrap_or(false);
    let mut actions = vec![UpdateAction::Set(
        bucket_item::CASCADE.into(),
        AttrValue::Bool(policy),
    )];
    match meta.get(bucket_item::PARENT_ID) {
        Some(AttrValue::S(p)) => actions.push(UpdateAction::Set(
            bucket_item::PARENT_ID.into(),
            AttrValue::s(p),
        )),
        _ => actions.push(UpdateAction::Remove(bucket_item::PARENT_ID.into())),
    }
    let mut condition = None;
    if let Some(AttrValue::N(pgen)) = meta.get(bucket_item::PARENT_GENERATION) {
        actions.push(UpdateAction::Set(
            bucket_item::PARENT_GENERATION.into(),
            AttrValue::N(pgen.clone()),
        ));
        condition = Some(Condition::Or(vec![
            Condition::AttrNotExists(bucket_item::PARENT_GENERATION.into()),
            Condition::AttrNumLe(bucket_item::PARENT_GENERATION.into(), pgen.clone()),
        ]));
    }
    if let Some(AttrValue::S(pinc)) = meta.get(bucket_item::PARENT_INCARNATION) {
        actions.push(UpdateAction::Set(
            bucket_item::PARENT_INCARNATION.into(),
            AttrValue::s(pinc),
        ));
    }
    Some((actions, condition))
}

/// Soft stamps for buckets whose limits resolve from this system/resource level.
fn plan_soft(b: &Bucket<'_>) -> Planned {
    let (scope, id, current) = (b.scope, b.id, b.current);
    let (source, cfg) = b.levels.resolve_limits(&id.entity, &id.resource)?;
    let from_here = match scope {
        Scope::System => source == Source::System,
        Scope::Resource(r) => source == Source::Resource && *r == id.resource,
        Scope::Entity(..) => false,
    };
    if !from_here {
        return None;
    }
    let deadline = stamp_deadline(b.now_ms);
    let mut actions = vec![];
    for n in bucket_limits(current) {
        let Some(l) = cfg.buckets().find(|l| l.name == n) else {
            continue;
        };
        let attr = BucketField::Soft.of(&n);
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
