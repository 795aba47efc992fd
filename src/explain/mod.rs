//! `limits explain`: why a limit is the number it is at an instant, and how
//! it will change (docs/explain.md). Pure: levels in, an [`Explanation`] out.
//!
//! The levels come from a manifest or the store and are read the same way:
//! a manifest's levels are built into the items `limits apply` would write
//! and decoded with the one decoder of stored levels ([`decode_level`]), so
//! the numbers are the stored ones (a scale quantised to per-mille, as every
//! limiter reads it). Which level applies is the one resolution rule
//! ([`crate::items::source::resolve`]); every number is the engine's:
//! effective parameters ([`effective_params`]), the first minute the active
//! schedule entry changes ([`Schedule::next_active_change`]), reset edges
//! ([`Schedule::next_reset_edge`]), and the wait of a request at an empty
//! bucket, window or set of slots (the limiter's retry-after).

pub mod report;

use std::collections::BTreeMap;

use chrono_tz::Tz;
use zae_limiter_engine::bucket::BucketState;
use zae_limiter_engine::concurrency::{ConcurrencyLimit, Holds};
use zae_limiter_engine::cron::CronSpec;
use zae_limiter_engine::params::{effective_params, Params};
use zae_limiter_engine::rolling::RollingLimit;
use zae_limiter_engine::schedule::{Entry, Schedule};
use zae_limiter_engine::zone::zone;

use crate::items::config::{self, decode_level, CodecError, StoredEntry, StoredLevel, StoredLimit};
use crate::items::source::{self, Source};
use crate::manifest::model::{Disabled, LevelConfig, LimitKind, Manifest};
use crate::manifest::names::DEFAULT_RESOURCE;
use crate::store::{Item, Store, StoreError};

const MINUTE_MS: i64 = 60_000;
/// Changes listed per limit; a longer horizon is cut there (and says so).
pub const MAX_CHANGES: usize = 500;

/// Why nothing could be explained.
#[derive(Debug, thiserror::Error)]
pub enum ExplainError {
    #[error("{0}")]
    Store(#[from] StoreError),
    /// A level cannot be read (or, from a manifest, built).
    #[error("{0}")]
    Level(#[from] CodecError),
    #[error("no limits apply to entity '{entity}' on resource '{resource}': no level defines one (entity+resource, the entity's _default_, the resource, the system)")]
    NoLimits { entity: String, resource: String },
    /// A stored schedule the engine cannot evaluate.
    #[error("limit '{limit}': {reason}")]
    Schedule { limit: String, reason: String },
}

/// The levels (entity, resource) resolves over, in order, each read or absent.
pub type Levels = Vec<(Source, Option<StoredLevel>)>;

/// A manifest's levels for (entity, resource), through the item codec.
pub fn levels_from_manifest(
    m: &Manifest,
    entity: &str,
    resource: &str,
) -> Result<Levels, ExplainError> {
    const NS: &str = "ns";
    let entity_level = |r: &str| m.entities.get(entity).and_then(|e| e.get(r));
    let item = |s: Source| -> Result<Option<Item>, CodecError> {
        let level: Option<&LevelConfig> = match s {
            Source::Entity => entity_level(resource),
            Source::EntityDefault => entity_level(DEFAULT_RESOURCE),
            Source::Resource => m.resources.get(resource),
            Source::System => {
                return m
                    .system
                    .as_ref()
                    .map(|sys| config::build_system(NS, sys))
                    .transpose()
            }
        };
        level
            .map(|l| match s {
                Source::Resource => config::build_resource(NS, resource, l),
                Source::EntityDefault => config::build_entity(NS, entity, DEFAULT_RESOURCE, l),
                _ => config::build_entity(NS, entity, resource, l),
            })
            .transpose()
    };
    Source::order(resource)
        .map(|s| Ok((s, item(s)?.map(|i| decode_level(&i)).transpose()?)))
        .collect()
}

/// The stored levels for (entity, resource): the four config items in one read.
pub fn levels_from_store(
    store: &dyn Store,
    ns: &str,
    entity: &str,
    resource: &str,
) -> Result<Levels, ExplainError> {
    let sources: Vec<Source> = Source::order(resource).collect();
    let keys: Vec<_> = sources
        .iter()
        .map(|s| s.key(ns, entity, resource))
        .collect();
    let items = store.batch_get(&keys, true)?;
    sources
        .into_iter()
        .zip(items)
        .map(|(s, item)| Ok((s, item.as_ref().map(decode_level).transpose()?)))
        .collect()
}

/// What to explain.
#[derive(Debug, Clone)]
pub struct Request<'a> {
    pub entity: &'a str,
    pub resource: &'a str,
    pub at_ms: i64,
    /// Changes are listed in `(at, until]`.
    pub until_ms: i64,
    /// Cost per limit name for the wait from empty; 1 where none is given.
    pub costs: &'a BTreeMap<String, u64>,
}

/// How one level takes part in resolution.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The first level with a limit: its limits apply, as a whole.
    Applies,
    /// It has limits, but a level before it applies.
    Shadowed,
    /// It exists with flags only: skipped for limits.
    NoLimits,
    /// No such level.
    Absent,
}

impl Role {
    /// The word JSON uses (`no_limits`); the text writes it with a space.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Applies => "applies",
            Role::Shadowed => "shadowed",
            Role::NoLimits => "no_limits",
            Role::Absent => "absent",
        }
    }
}

/// One level of the resolution order.
#[derive(Debug, Clone)]
pub struct LevelView {
    pub source: Source,
    pub role: Role,
    /// Its limit names, sorted.
    pub limits: Vec<String>,
    pub disabled: Option<Disabled>,
}

/// Capacity and refill in force, in millitokens and milliseconds.
pub type Numbers = Params;

/// What decides the numbers at an instant: a schedule entry, or the base.
#[derive(Debug, Clone, PartialEq)]
pub struct Active {
    /// The index of the active schedule entry; `None` is the base.
    pub entry: Option<usize>,
    pub numbers: Numbers,
}

/// A change inside the horizon.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    pub at_ms: i64,
    /// The active entry before and after, when the window changed.
    pub window: Option<(Option<usize>, Option<usize>)>,
    /// A calendar reset edge: the balance goes back to the capacity.
    pub reset: bool,
    /// The numbers from this instant on.
    pub numbers: Numbers,
}

/// What a limit counts, with what the engine needs to evaluate it.
#[derive(Debug, Clone)]
pub enum Kind {
    Bucket {
        base: Numbers,
        schedule: Schedule,
        resets: Schedule,
    },
    Rolling,
    Concurrency,
}

/// One limit of the level that applies.
#[derive(Debug, Clone)]
pub struct LimitView {
    pub stored: StoredLimit,
    pub kind: Kind,
    /// The numbers at `at` and the entry that produced them (buckets).
    pub now: Option<Active>,
    pub changes: Vec<Change>,
    /// More changes than [`MAX_CHANGES`] lie in the horizon.
    pub truncated: bool,
    pub cost: u64,
    /// The limiter's wait for `cost` at an empty bucket, a full window or
    /// every slot held, in seconds; `None` when the cost can never fit.
    pub wait_seconds: Option<f64>,
}

/// Everything `limits explain` reports.
#[derive(Debug, Clone)]
pub struct Explanation {
    pub entity: String,
    pub resource: String,
    pub at_ms: i64,
    pub until_ms: i64,
    pub levels: Vec<LevelView>,
    pub source: Source,
    /// The level Python 0.17 resolves for its token buckets: the first with a
    /// bucket or quota (it does not read rolling windows or concurrency
    /// limits); `None` when no level has one.
    pub python_source: Option<Source>,
    pub disabled: Option<(Source, Disabled)>,
    /// The level's zone (`sched_tz`), when it schedules anything.
    pub zone: Option<String>,
    pub limits: Vec<LimitView>,
}

/// Explains `req` over `levels`.
pub fn explain(levels: &Levels, req: &Request<'_>) -> Result<Explanation, ExplainError> {
    let at = |s: Source| {
        levels
            .iter()
            .find(|(l, _)| *l == s)
            .and_then(|(_, l)| l.as_ref())
    };
    let r = source::resolve(req.resource, at).ok_or_else(|| ExplainError::NoLimits {
        entity: req.entity.to_string(),
        resource: req.resource.to_string(),
    })?;
    let python_source = levels
        .iter()
        .find(|(_, l)| l.as_ref().is_some_and(|l| l.buckets().next().is_some()))
        .map(|(s, _)| *s);
    let views = levels
        .iter()
        .map(|(s, l)| LevelView {
            source: *s,
            role: match l {
                None => Role::Absent,
                Some(_) if *s == r.source => Role::Applies,
                Some(l) if l.limits.is_empty() => Role::NoLimits,
                Some(_) => Role::Shadowed,
            },
            limits: l
                .iter()
                .flat_map(|l| l.limits.iter().map(|x| x.name.clone()))
                .collect(),
            disabled: l.as_ref().and_then(|l| l.disabled),
        })
        .collect();
    let limits = r
        .level
        .limits
        .iter()
        .map(|l| limit(l, req))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Explanation {
        entity: req.entity.to_string(),
        resource: req.resource.to_string(),
        at_ms: req.at_ms,
        until_ms: req.until_ms,
        levels: views,
        source: r.source,
        python_source,
        disabled: r.disabled,
        zone: r.level.sched_tz.clone(),
        limits,
    })
}

/// The engine's schedule of stored entries (one zone per level).
fn schedule(name: &str, entries: &[StoredEntry]) -> Result<Schedule, ExplainError> {
    let bad = |reason: String| ExplainError::Schedule {
        limit: name.to_string(),
        reason,
    };
    let Some(first) = entries.first() else {
        return Ok(Schedule::empty());
    };
    let tz: Tz = zone(&first.tz).map_err(|e| bad(e.to_string()))?;
    let entries = entries
        .iter()
        .map(|e| {
            Ok(Entry {
                cron: e.cron.clone(),
                spec: CronSpec::parse(&e.cron).map_err(|err| bad(err.to_string()))?,
                modifier: e.modifier.map(|m| m.params()),
            })
        })
        .collect::<Result<_, ExplainError>>()?;
    Ok(Schedule { tz, entries })
}

fn limit(l: &StoredLimit, req: &Request<'_>) -> Result<LimitView, ExplainError> {
    let cost = req.costs.get(&l.name).copied().unwrap_or(1);
    let mut view = LimitView {
        stored: l.clone(),
        kind: Kind::Rolling,
        now: None,
        changes: Vec::new(),
        truncated: false,
        cost,
        wait_seconds: None,
    };
    match l.kind {
        LimitKind::Rolling { window } => {
            // A full window at `at`: the use ages out slice by slice.
            let limit = RollingLimit::new(window.window(), i128::from(l.capacity))
                .map_err(|e| schedule_err(l, e))?;
            let mut state = limit.empty_state();
            limit
                .record(&mut state, i128::from(l.capacity), req.at_ms)
                .map_err(|e| schedule_err(l, e))?;
            let check = limit
                .check(&state, i128::from(cost), req.at_ms)
                .map_err(|e| schedule_err(l, e))?;
            view.wait_seconds = match (check.allowed, check.retry_after_ms) {
                (true, _) => Some(0.0),
                (false, Some(ms)) => Some(ms as f64 / 1000.0),
                (false, None) => None,
            };
        }
        LimitKind::Concurrency { hold_ttl_seconds } => {
            // Every slot held from `at`, none released: the first frees at its TTL.
            view.kind = Kind::Concurrency;
            let ttl = i64::try_from(hold_ttl_seconds).unwrap_or(i64::MAX);
            let limit =
                ConcurrencyLimit::new(l.capacity, Some(ttl)).map_err(|e| schedule_err(l, e))?;
            let mut holds = Holds::new();
            for i in 0..l.capacity {
                limit
                    .reserve(&mut holds, &format!("h{i}"), None, req.at_ms)
                    .map_err(|e| schedule_err(l, e))?;
            }
            let check = limit.check(&holds, req.at_ms);
            view.wait_seconds = check.retry_after_ms.map(|ms| ms as f64 / 1000.0);
        }
        LimitKind::Bucket => {
            let base = Params::new(
                i128::from(l.capacity) * 1000,
                i128::from(l.refill_amount) * 1000,
                i128::from(l.refill_period) * 1000,
            );
            let sched = schedule(&l.name, &l.schedule)?;
            let resets = schedule(&l.name, &l.reset_schedule)?;
            view.now = Some(Active {
                entry: sched.active_index(req.at_ms),
                numbers: effective_params(base, &sched, req.at_ms),
            });
            let (changes, truncated) = changes(base, &sched, &resets, req.at_ms, req.until_ms);
            view.changes = changes;
            view.truncated = truncated;
            view.wait_seconds = Some(empty_bucket_wait(l, base, &sched, &resets, cost, req.at_ms));
            view.kind = Kind::Bucket {
                base,
                schedule: sched,
                resets,
            };
        }
    }
    Ok(view)
}

fn schedule_err(l: &StoredLimit, e: impl std::fmt::Display) -> ExplainError {
    ExplainError::Schedule {
        limit: l.name.clone(),
        reason: e.to_string(),
    }
}

/// Every window edge and reset edge in `(at, until]`, with the numbers after.
fn changes(
    base: Params,
    sched: &Schedule,
    resets: &Schedule,
    at: i64,
    until: i64,
) -> (Vec<Change>, bool) {
    let until_u = until.div_euclid(MINUTE_MS);
    let mut out = Vec::new();
    let mut cursor = at;
    loop {
        let window = (!sched.is_empty())
            .then(|| sched.next_active_change(cursor.div_euclid(MINUTE_MS), until_u))
            .flatten()
            .map(|u| u * MINUTE_MS);
        let reset = resets.next_reset_edge(cursor).filter(|&e| e <= until);
        let Some(next) = [window, reset].into_iter().flatten().min() else {
            return (out, false);
        };
        if out.len() == MAX_CHANGES {
            return (out, true);
        }
        let before = sched.active_index(next - MINUTE_MS);
        let after = sched.active_index(next);
        out.push(Change {
            at_ms: next,
            window: (window == Some(next)).then_some((before, after)),
            reset: reset == Some(next),
            numbers: effective_params(base, sched, next),
        });
        cursor = next;
    }
}

/// The limiter's wait for `cost` at an empty bucket at `at` (soft or not: the
/// wait a hard limit would give). A session quota's window is taken to have
/// opened at `at` and been spent.
fn empty_bucket_wait(
    l: &StoredLimit,
    base: Params,
    sched: &Schedule,
    resets: &Schedule,
    cost: u64,
    at: i64,
) -> f64 {
    let state = BucketState {
        total_consumed_milli: Some(0),
        sched: sched.clone(),
        reset_sched: resets.clone(),
        window_start_ms: l.reset_after_seconds.map(|_| at),
        reset_after_seconds: l
            .reset_after_seconds
            .map(|s| i64::try_from(s).unwrap_or(i64::MAX)),
        ..BucketState::empty(base, at)
    };
    state.try_consume(i128::from(cost), at).retry_after_seconds
}
