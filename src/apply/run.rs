//! `limits apply`, step by step (docs/storage.md, "Apply"), numbered as the
//! reference numbers them:
//! * 1: refuse limits the table's Lambdas cannot enforce ([`gate`]);
//! * 2–3: claim the fan-outs earlier applies abandoned, then plan: read and
//!   compare ([`crate::plan::prepare`]), a chunk at a time, while a second
//!   thread recounts the entity counts a dead apply left (and, refreshing,
//!   checks every count);
//! * 4a: check that the `#PROVISIONER` record is still the one planned
//!   against ([`conflict`]);
//! * 4: write ahead a pending item for every fan-out the changes owe;
//! * 5: write the levels and their registries ([`writes`]), a chunk at a
//!   time, with the entity-count journal ([`counts`]);
//! * 7: re-assert explicit `disabled`;
//! * 8–9: run every owed fan-out, release what finished, expire what failed;
//! * 10: write the `#PROVISIONER` record from what was written, then the
//!   level digests ([`record`]);
//! * 11: count what is still owed.
//!
//! Between steps the apply asks [`ApplyRequest::stop`] whether to go on (a
//! signal, a lost lock): before any config write it stops and hands back what
//! it claimed; after them it skips the fan-outs (left pending for the next
//! apply) and still writes its record. The record is written only over the
//! one the plan read ([`conflict`]).
//!
//! (Step 6 of the reference, fan-outs only the `ALL_OLD` images reveal, is
//! folded into 4; see below.)
//!
//! Memory: the plan keeps, per change, what output and the writes need (the
//! detail, a few flags), never the items; the writes rebuild each item from
//! the manifest a chunk at a time. So an apply holds the manifest, one chunk
//! of items and a few bytes per level, whatever the manifest's size.
//!
//! Crash safety: every step is either idempotent or recorded before it runs. A
//! process killed at any point leaves (a) config items that are each either old or
//! new, (b) pending items for every fan-out a finished write made necessary,
//! (c) the previous `#PROVISIONER` record and the levels the apply was about
//! to create ([`record::before_writes`]), so the next apply recomputes the same
//! changes, skips the ones already written and deletes what is still left to
//! delete, whichever manifest it applies, and (d) the count journal, so the next
//! apply recounts at once.
//!
//! Where this differs from the reference, on purpose:
//! * Config writes keep the Python client's registries (`#RESOURCES`,
//!   `#ENTITY_CONFIG_RESOURCES`; see [`writes`], [`counts`]); the reference
//!   provisioner never updates them.
//! * Step 6 (fan-outs only the `ALL_OLD` images reveal) is not separate: batched
//!   writes return no old image, so fan-outs are predicted once, from the
//!   strongly consistent pre-read. A concurrent writer between that read and
//!   our write is the only case this misses.
//! * A delete of an item that is already gone writes nothing (it is still listed
//!   and counted, as in the reference).
//! * The record holds what was written: a failed create, update or delete is
//!   planned again by the next apply (the reference records the manifest).

use std::collections::{BTreeSet, HashMap};

use crate::apply::fanout::{self, FanOutError, FanOutKind, LevelKind, Owed};
use crate::apply::pending::{self, Share};
use crate::apply::record::Outcome;
use crate::apply::{conflict, counts, gate, record, writes, ApplyError, LEASE_MS};
use crate::items::{attrs, config};
use crate::manifest::Manifest;
use crate::plan::digests::{self, Digest, Recorded, Untrusted};
use crate::plan::identity::RecordIdentity;
use crate::plan::level::{Action, Level};
use crate::plan::managed::{self, ManagedSet, ProvisionerRecord};
use crate::plan::prepare::{
    prepare_each, BuildError, BuildFn, PlannedChange, PrepareError, Prepared, Refresh, Summary,
    CHUNK,
};
use crate::progress::Progress;
use crate::store::{Item, Key, Store, StoreError};

const FANOUT_ROUNDS: usize = 3;

/// What an apply did.
#[derive(Debug, Clone)]
pub struct Applied {
    pub changes: Vec<PlannedChange>,
    pub created: usize,
    pub updated: usize,
    pub deleted: usize,
    pub unchanged: usize,
    pub full: bool,
    pub resumed: bool,
    /// Pending fan-out items left after the apply.
    pub pending: pending::Left,
    pub errors: Vec<String>,
    /// Problems that do not make the apply fail (recording the level
    /// digests), and what the apply repaired (entity counts).
    pub warnings: Vec<String>,
    /// `--no-refresh` could not use the recorded digests, so every level was read.
    pub fallback: Option<Untrusted>,
}

pub struct ApplyRequest<'a> {
    pub ns: &'a str,
    pub manifest: &'a Manifest,
    pub full: bool,
    pub now_ms: i64,
    /// A fresh random token naming this apply's pending shares.
    pub token: &'a str,
    /// `sha256:…` of the normalised manifest (informational, stored in the record).
    pub applied_hash: &'a str,
    pub build: &'a BuildFn<'a>,
    /// `--no-refresh`: trust the digests the last apply recorded.
    pub refresh: Refresh,
    /// Told each step's progress (a bar on a terminal).
    pub progress: &'a dyn Progress,
    /// Asked at each step boundary with the step about to run; `Some(why)`
    /// stops the apply there (a signal, a lost lock).
    pub stop: &'a dyn Fn(Step) -> Option<String>,
    /// `limits apply PLANFILE`: a saved plan, carried out as it is instead of
    /// planning; refused when the record is not the one it was made against
    /// ([`crate::plan::saved`]).
    pub saved: Option<&'a Prepared>,
}

/// The step boundaries where an apply may stop ([`ApplyRequest::stop`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Before claiming abandoned fan-outs and planning: nothing written yet.
    Plan,
    /// After planning, before the fan-outs are written ahead and the levels
    /// written: the last point where a stop leaves the table as it was.
    WriteLevels,
    /// After the config writes, before the fan-outs: a stop leaves them pending.
    FanOut,
    /// Before the record: never stops (the record is the safe end), but a
    /// safe point for the lock.
    Record,
}

impl Step {
    pub fn as_str(self) -> &'static str {
        match self {
            Step::Plan => "plan",
            Step::WriteLevels => "write_levels",
            Step::FanOut => "fan_out",
            Step::Record => "record",
        }
    }

    /// What a stop at this step (before any config write) left undone.
    pub fn stopped_before(self) -> &'static str {
        match self {
            Step::Plan => "stopped before planning; nothing was written",
            _ => "stopped before writing any level; nothing was changed",
        }
    }
}

/// A [`ApplyRequest::stop`] that never stops.
pub fn never_stop(_: Step) -> Option<String> {
    None
}

/// Runs one apply, in the steps the module doc lists. `Err` means nothing was
/// written to any config item (a refused version gate, or the store failed
/// before the first config write).
pub fn apply(store: &dyn Store, req: &ApplyRequest<'_>) -> Result<Applied, ApplyError> {
    // 1. Gates over every declared level, before any write.
    gate::enforce(store, req.manifest)?;
    if let Some(why) = (req.stop)(Step::Plan) {
        return Err(ApplyError::Stopped {
            why,
            before: Step::Plan,
        });
    }
    let mut run = Run {
        store,
        req,
        lease: req.now_ms + LEASE_MS,
        owed: BTreeSet::new(),
        held: BTreeSet::new(),
        listing: None,
    };
    // 2–3. Claim what earlier applies left behind once their leases ran out.
    let (record, resumed) = run.claim_abandoned()?;
    // A resumed full apply continues change-only instead of starting over.
    let full = req.full && !resumed;
    let (plan, recorded) = run.plan(&record, full).map_err(|e| run.abandon(e))?;
    run.stop_before(Step::WriteLevels)?;
    // 4a. The record must still be the one planned against; when it can, it
    // now manages every declared level too, so a crash leaves nothing outside it.
    let overflow = record
        .extra_keys
        .iter()
        .any(|k| k.sk.starts_with(managed::OVERFLOW_SK_PREFIX));
    let planned = conflict::widen(
        store,
        req.ns,
        &record.identity,
        overflow,
        &ManagedSet::from_manifest(req.manifest),
        req.now_ms,
        req.applied_hash,
    )
    .map_err(|e| run.abandon(e.into()))?;
    // 4. Write ahead every fan-out the changes make necessary.
    run.write_ahead(&plan.changes, full)
        .map_err(|e| run.abandon(e))?;
    let mut out = Applied {
        changes: Vec::new(),
        created: 0,
        updated: 0,
        deleted: 0,
        unchanged: plan.summary.unchanged,
        full: req.full,
        resumed,
        pending: pending::Left::default(),
        errors: Vec::new(),
        warnings: record.warnings(),
        fallback: plan.summary.fallback.clone(),
    };
    out.warnings.extend(plan.summary.restarts.iter().cloned());
    match &plan.repairs {
        Ok(repairs) => out
            .warnings
            .extend(repairs.iter().map(|r| format!("{r}; repaired"))),
        Err(e) => out.errors.push(format!(
            "checking the entity-config counts (#ENTITY_CONFIG_RESOURCES): {e} (the next apply checks them again)"
        )),
    }
    // 5. Config writes.
    let written = run
        .write_levels(&record, &plan, &mut out)
        .map_err(|e| run.abandon(e))?;
    out.changes = plan.changes.into_iter().map(|p| p.pc).collect();
    if let Some(why) = (req.stop)(Step::FanOut) {
        // Stopped after the config writes: the fan-outs go to the next apply.
        // Only those with a pending item are left to it; an owed fan-out the
        // bucket listing found no bucket for has nothing to do and no item.
        run.hand_back();
        let left = match run.held.len() {
            0 => "no bucket fan-out is left for the next apply".to_string(),
            n => format!("{n} bucket fan-out(s) are left for the next apply"),
        };
        out.errors.push(format!(
            "{why}: stopped after the config writes; the #PROVISIONER record is written, and {left}"
        ));
    } else {
        // 7. Re-assert explicit `disabled` on declared levels not already being fanned out.
        run.reassert_disabled(&mut out);
        // 8–9. Every owed fan-out; what fails is handed to the next apply.
        run.fan_out(&written.fanout_before, &mut out);
    }
    // A safe point only: the record is written whatever it says.
    let _ = (req.stop)(Step::Record);
    // 10. The record of what was written, then the digests of what the levels now hold.
    run.record(
        &record,
        &planned,
        &recorded,
        &plan.summary,
        &written,
        &mut out,
    );
    // 11. What is still owed.
    match pending::left(store, req.ns, req.now_ms) {
        Ok(left) => out.pending = left,
        Err(e) => out.errors.push(format!("counting pending fan-outs: {e}")),
    }
    Ok(out)
}

/// One apply in progress: the fan-outs it owes (claimed or written ahead).
struct Run<'a> {
    store: &'a dyn Store,
    req: &'a ApplyRequest<'a>,
    /// The deadline of this apply's shares and journal entries.
    lease: i64,
    owed: BTreeSet<Owed>,
    /// The owed fan-outs whose pending item holds a share of ours.
    held: BTreeSet<Owed>,
    /// The namespace's buckets, listed before the config writes when many
    /// fan-outs are owed (the fan-out's first pass).
    listing: Option<fanout::Listing>,
}

/// One planned change, without its items: what output, the write-ahead and
/// the writes need.
struct Planned {
    pc: PlannedChange,
    /// The pre-read found the level.
    existed: bool,
    /// The pre-read found it in the entity-config index.
    indexed: bool,
    /// The fan-outs the change makes necessary.
    owed: Vec<FanOutKind>,
}

/// The plan: the changes in order, what the read found besides, and the
/// entity counts repaired meanwhile.
struct Plan {
    changes: Vec<Planned>,
    summary: Summary,
    repairs: Result<Vec<counts::Repair>, String>,
}

/// What step 5 wrote: the digests of the levels now as declared, what became
/// of each change, the fan-outs' first "before" image of each level written
/// (its digest; `None`: deleted), and the items recording what it was about
/// to create.
#[derive(Default)]
struct Written {
    digests: Vec<Digest>,
    outcomes: Vec<(Level, Action, Outcome)>,
    fanout_before: HashMap<Key, Option<Digest>>,
    writing: Vec<Key>,
}

impl Run<'_> {
    fn share(&self, full: bool) -> Share {
        Share {
            lease: self.lease,
            full,
        }
    }

    /// Claims the pending fan-outs whose leases ran out, and turns legacy
    /// (0.16) `cascade_pending` entries on the record into pending items
    /// before the record, which drops them, is rewritten. Returns the record
    /// and whether an interrupted full apply is being resumed.
    fn claim_abandoned(&mut self) -> Result<(ProvisionerRecord, bool), ApplyError> {
        let (store, req) = (self.store, self.req);
        let mut resumed = false;
        let listed =
            pending::list(store, req.ns).map_err(ApplyError::at("reading pending fan-outs"))?;
        for p in listed {
            if !p.claimable(req.now_ms) {
                continue;
            }
            let was_full = p.owners.values().any(|s| s.full);
            let claimed =
                pending::claim(store, req.ns, &p, req.token, self.share(false), req.now_ms)
                    .map_err(ApplyError::at("claiming a pending fan-out"))?;
            if claimed {
                resumed |= req.full && was_full;
                self.held.insert(p.owed.clone());
                self.owed.insert(p.owed);
            }
        }
        let record = managed::read(store, req.ns)
            .map_err(ApplyError::at("reading the #PROVISIONER record"))?;
        for (level, target) in &record.cascade_pending {
            let Some(level) = Level::from_parts(level, target) else {
                continue;
            };
            let o = Owed::of(FanOutKind::Cascade, &level);
            pending::write_ahead(store, req.ns, &o, req.token, self.share(false), req.now_ms)
                .map_err(ApplyError::at("writing ahead a legacy cascade fan-out"))?;
            self.held.insert(o.clone());
            self.owed.insert(o);
        }
        Ok((record, resumed))
    }

    /// Before a step that comes ahead of any config write: stops (handing
    /// back what was claimed) when [`ApplyRequest::stop`] says so.
    fn stop_before(&self, step: Step) -> Result<(), ApplyError> {
        match (self.req.stop)(step) {
            Some(why) => Err(self.abandon(ApplyError::Stopped { why, before: step })),
            None => Ok(()),
        }
    }

    /// Hands what this apply took over back at once (refused, or the store
    /// failed before the first config write); returns `e`.
    fn abandon(&self, e: ApplyError) -> ApplyError {
        self.hand_back();
        e
    }

    /// Expires this apply's shares of what it owes, for the next apply.
    fn hand_back(&self) {
        for o in &self.owed {
            let _ = pending::expire(self.store, self.req.ns, o, self.req.token, self.req.now_ms);
        }
    }

    /// The plan, from the record just read (and the digests, for
    /// `--no-refresh`), kept without its items. Meanwhile, on a second
    /// thread, the entity counts a dead apply may have left wrong are
    /// recounted and (unless `--no-refresh`) every count is checked against
    /// the stored entity levels and repaired where it disagrees.
    fn plan(&self, record: &ProvisionerRecord, full: bool) -> Result<(Plan, Recorded), ApplyError> {
        let (store, req) = (self.store, self.req);
        let mut check = BTreeSet::new();
        if req.refresh == Refresh::All {
            check = ManagedSet::from_manifest(req.manifest).entity_resources();
            check.extend(record.all().entity_resources());
        }
        let (ns, now_ms) = (req.ns, req.now_ms);
        // A `--full` apply checks every count, left as they were or not.
        let left = (!full).then_some(record.counts_left.as_deref()).flatten();
        std::thread::scope(|s| {
            let counting = s.spawn(move || {
                counts::recover(store, ns, now_ms, &check, left).map_err(|e| e.to_string())
            });
            let planned = self.read_plan(record, full);
            let repairs = counting
                .join()
                .unwrap_or_else(|_| Err("the count check stopped unexpectedly".into()));
            planned.map(|(mut plan, recorded)| {
                plan.repairs = repairs;
                (plan, recorded)
            })
        })
    }

    /// The plan's reads and comparisons.
    fn read_plan(
        &self,
        record: &ProvisionerRecord,
        full: bool,
    ) -> Result<(Plan, Recorded), ApplyError> {
        let (store, req) = (self.store, self.req);
        let recorded = digests::read(store, req.ns, record.stamp.as_deref())
            .map_err(ApplyError::at("reading the level digests"))?;
        let mut changes = Vec::new();
        let mut keep = |pc: PlannedChange| {
            let owed = owed_kinds(&pc, full);
            let existed = pc.live.is_some();
            let indexed = pc.live.as_ref().is_some_and(writes::indexed);
            changes.push(Planned {
                pc: pc.without_items(),
                existed,
                indexed,
                owed,
            });
        };
        if let Some(saved) = req.saved {
            // A saved plan: its changes, when the record is still the one it
            // was made against.
            let p = crate::plan::saved::resume(saved, record.clone())?;
            let restarts = p.changes.iter().flat_map(PlannedChange::restarts).collect();
            p.changes.into_iter().for_each(&mut keep);
            let summary = Summary {
                unchanged: p.unchanged,
                unchanged_digests: p.unchanged_digests,
                fallback: p.fallback,
                forgotten: p.forgotten,
                restarts,
            };
            let plan = Plan {
                changes,
                summary,
                repairs: Ok(Vec::new()),
            };
            return Ok((plan, recorded));
        }
        let trust = (req.refresh == Refresh::Trust).then_some(&recorded);
        let summary = prepare_each(
            store,
            req.ns,
            req.manifest,
            full,
            req.build,
            record,
            trust,
            req.progress,
            &mut keep,
        )
        .map_err(|e| match e {
            PrepareError::Store(e) => ApplyError::at("reading the stored levels")(e),
            other => ApplyError::Plan(other),
        })?;
        Ok((
            Plan {
                changes,
                summary,
                repairs: Ok(Vec::new()),
            },
            recorded,
        ))
    }

    /// Writes a pending item for every fan-out the changes make necessary
    /// that has buckets to update. With many fan-outs owed, the namespace's
    /// buckets are listed once first (the fan-out's first pass): a fan-out
    /// with no bucket under it gets no pending item (it still runs after the
    /// writes, and finds the buckets created meanwhile; only an apply that
    /// dies in between leaves those to their TTL or the next change).
    fn write_ahead(&mut self, changes: &[Planned], full: bool) -> Result<(), ApplyError> {
        let mut ahead = BTreeSet::new();
        for p in changes {
            for kind in &p.owed {
                ahead.insert(Owed::of(*kind, &p.pc.change.level));
            }
        }
        let req = self.req;
        if ahead.len() >= fanout::BULK_DISCOVERY_AT {
            let listing = fanout::Listing::of(self.store, req.ns).map_err(ApplyError::at(
                "listing the namespace's buckets (nothing was written)",
            ))?;
            self.listing = Some(listing);
        }
        let pended: Vec<Owed> = ahead
            .iter()
            .filter(|o| self.may_touch(o))
            .cloned()
            .collect();
        pending::write_ahead_many(
            self.store,
            req.ns,
            &pended,
            req.token,
            self.share(full),
            req.now_ms,
        )
        .map_err(ApplyError::at(
            "writing ahead the pending fan-outs (nothing else was written)",
        ))?;
        self.held.extend(pended);
        self.owed.extend(ahead);
        Ok(())
    }

    /// Whether `owed` may have buckets to update: any, unless the buckets
    /// were listed and none is under its level.
    fn may_touch(&self, owed: &Owed) -> bool {
        self.listing.as_ref().is_none_or(|l| l.governs(owed))
    }

    /// Writes the levels a chunk at a time, rebuilding each item from the
    /// manifest (order inside one apply is invisible to the end state); a
    /// level that cannot be built or written is reported, by name, and the
    /// rest go on. `Err` only when the recorded digests or the levels about
    /// to be created could not be recorded, before any config write.
    fn write_levels(
        &self,
        record: &ProvisionerRecord,
        plan: &Plan,
        out: &mut Applied,
    ) -> Result<Written, ApplyError> {
        let (store, req) = (self.store, self.req);
        let ns = req.ns;
        let mut written = Written {
            digests: plan.summary.unchanged_digests.clone(),
            ..Default::default()
        };
        let buildable = |p: &Planned| !matches!(p.pc.desired, Some(Err(_)));
        let held = record.all();
        let mut creates = ManagedSet::default();
        let mut counted = BTreeSet::new();
        for p in plan.changes.iter().filter(|p| buildable(p)) {
            let (level, action) = (&p.pc.change.level, p.pc.change.action);
            if action == Action::Create && !held.contains(level) {
                creates.insert(level);
            }
            // Writes that may change an entity count: into the index, or out.
            let moves = match action {
                Action::Delete => p.existed && p.indexed,
                Action::Create | Action::Update => !p.indexed,
            };
            if let (Level::Entity(_, r), true) = (level, moves) {
                counted.insert(r.clone());
            }
        }
        let mut journal = counts::Journal::default();
        if plan.changes.iter().any(buildable) {
            // One batch before the first config write: the digests made
            // unusable, the levels about to be created, the count journal.
            let (mut ops, writing) = record::before_writes(ns, req.token, &creates);
            let (j, journal_ops) = counts::journal(store, ns, req.token, self.lease, counted)
                .map_err(ApplyError::at(
                    "reading the entity counts (nothing was written)",
                ))?;
            ops.extend(journal_ops);
            let what: Vec<&str> = ops.iter().map(|op| before_write_label(&op.key())).collect();
            for (r, what) in store.batch_write(ops).into_iter().zip(what) {
                r.map_err(ApplyError::at(format!(
                    "recording {what} before the first config write (nothing was written)"
                )))?;
            }
            written.writing = writing;
            journal = j;
        }
        req.progress
            .phase("writing levels", plan.changes.len() as u64);
        let mut deltas = std::collections::BTreeMap::new();
        for chunk in plan.changes.chunks(CHUNK) {
            let items: Vec<Option<Result<Item, BuildError>>> = chunk
                .iter()
                .map(|p| match (&p.pc.desired, p.pc.change.action) {
                    (_, Action::Delete) => None,
                    (Some(Err(e)), _) => Some(Err(e.clone())),
                    _ => Some((req.build)(&p.pc.change.level)),
                })
                .collect();
            let mut writes_of = Vec::new();
            for (p, item) in chunk.iter().zip(&items) {
                let level = &p.pc.change.level;
                match item {
                    None => writes_of.push(writes::LevelWrite::Delete {
                        level,
                        existed: p.existed,
                        indexed: p.indexed,
                    }),
                    Some(Ok(item)) => writes_of.push(writes::LevelWrite::Put {
                        level,
                        item,
                        existed: p.existed,
                        indexed: p.indexed,
                    }),
                    Some(Err(_)) => {}
                }
            }
            let done = writes::write_levels(store, ns, &writes_of);
            for (r, d) in done.deltas {
                *deltas.entry(r).or_insert(0) += d;
            }
            let mut results = done.results.into_iter();
            for (p, item) in chunk.iter().zip(items) {
                let (level, action) = (&p.pc.change.level, p.pc.change.action);
                let r = match &item {
                    Some(Err(e)) => Err(e.to_string()),
                    _ => results
                        .next()
                        .unwrap_or_else(|| Err("the write was not run".into())),
                };
                let outcome = match r {
                    Ok(()) => {
                        count(out, action);
                        let key = level.key(ns);
                        let digest = match &item {
                            Some(Ok(item)) => Some(digests::digest(&key, item)),
                            _ => None,
                        };
                        written.digests.extend(digest);
                        let level_owes =
                            p.owed.iter().any(|k| self.may_touch(&Owed::of(*k, level)));
                        if level_owes {
                            written.fanout_before.insert(key, digest);
                        }
                        Outcome::Done
                    }
                    Err(e) => {
                        out.errors.push(format!("{}: {e}", p.pc.change));
                        Outcome::Failed
                    }
                };
                // The record needs what left the set or failed to join it.
                let telling = matches!(
                    (action, outcome),
                    (Action::Delete, _)
                        | (Action::Create, Outcome::Failed)
                        | (_, Outcome::Forgotten)
                );
                if telling {
                    written.outcomes.push((level.clone(), action, outcome));
                }
            }
            req.progress.advance(chunk.len() as u64);
        }
        // A resource an apply that died was about to create, never written:
        // its name may be in `#RESOURCES` already, so it goes from there.
        let names: Vec<&Level> = plan
            .summary
            .forgotten
            .iter()
            .filter(|l| matches!(l, Level::Resource(_)))
            .collect();
        let unlisted: Vec<writes::LevelWrite<'_>> = names
            .iter()
            .map(|level| writes::LevelWrite::Delete {
                level,
                existed: false,
                indexed: false,
            })
            .collect();
        let done = writes::write_levels(store, ns, &unlisted);
        for (level, r) in names.into_iter().zip(done.results) {
            let outcome = match r {
                Ok(()) => Outcome::Forgotten,
                Err(e) => {
                    out.errors
                        .push(format!("delete resource {}: {e}", level.target()));
                    Outcome::Failed
                }
            };
            written
                .outcomes
                .push((level.clone(), Action::Delete, outcome));
        }
        if let Err(e) = counts::settle(store, ns, &journal, &deltas) {
            out.errors.push(format!(
                "updating the entity-config counts (#ENTITY_CONFIG_RESOURCES): {e} (the next apply recounts them)"
            ));
        }
        Ok(written)
    }

    /// Fans out `disabled` again for every declared level that sets it and is
    /// not already owed a fan-out.
    fn reassert_disabled(&self, out: &mut Applied) {
        let req = self.req;
        let reassert: Vec<Owed> = declared_disabled(req.manifest)
            .into_iter()
            .map(|level| Owed::of(FanOutKind::Disabled, &level))
            .filter(|o| !self.owed.contains(o))
            .collect();
        for (o, r) in reassert
            .iter()
            .zip(run_fanouts(self.store, req.ns, &reassert, req.now_ms, None))
        {
            if let Err(e) = r {
                out.errors.push(fanout_error(o, &e));
            }
        }
    }

    /// Every owed fan-out, from the live config item, redone (up to 3 rounds)
    /// while the item changes under it; a stable one releases its share, a
    /// failed one is handed to the next apply at once (its share expired, or
    /// an expired item written for it). `known` holds what step 5 wrote (a
    /// digest, `None` when deleted): the first round reads only the levels it
    /// did not write. A fan-out that found no bucket is done, whatever its level.
    fn fan_out(&mut self, known: &HashMap<Key, Option<Digest>>, out: &mut Applied) {
        let (store, req) = (self.store, self.req);
        let ns = req.ns;
        let mut remaining: Vec<Owed> = std::mem::take(&mut self.owed).into_iter().collect();
        remaining.sort_by(pending::run_order);
        req.progress.phase("fan-out", remaining.len() as u64);
        let mut released = Vec::new();
        let mut failed: Vec<(Owed, String)> = Vec::new();
        let mut known = Some(known);
        for _ in 0..FANOUT_ROUNDS {
            if remaining.is_empty() {
                break;
            }
            let keys: Vec<Option<Key>> = remaining
                .iter()
                .map(|o| Level::from_parts(o.level.as_str(), &o.target).map(|l| l.key(ns)))
                .collect();
            let empty = HashMap::new();
            // Only a fan-out that updates buckets depends on its level staying
            // put: those the listing (if any) shows buckets under are watched.
            let watched: Vec<Option<Key>> = keys
                .iter()
                .zip(&remaining)
                .map(|(k, o)| k.clone().filter(|_| self.may_touch(o)))
                .collect();
            let before = read_digests(store, &watched, known.take().unwrap_or(&empty));
            let results = run_fanouts(store, ns, &remaining, req.now_ms, self.listing.take());
            let watched: Vec<Option<Key>> = watched
                .into_iter()
                .zip(&results)
                .map(|(k, r)| k.filter(|_| matches!(r, Ok(true))))
                .collect();
            let after = read_digests(store, &watched, &empty);
            let mut next = Vec::new();
            let done_before = released.len() + failed.len();
            for (i, (o, r)) in remaining.into_iter().zip(results).enumerate() {
                match r {
                    Err(e) => {
                        let msg = fanout_error(&o, &e);
                        failed.push((o, msg));
                    }
                    Ok(false) => released.push(o),
                    Ok(true) => {
                        let stable = matches!((&before, &after), (Ok(a), Ok(b)) if a[i] == b[i]);
                        if stable {
                            released.push(o);
                        } else {
                            next.push(o);
                        }
                    }
                }
            }
            req.progress
                .advance((released.len() + failed.len() - done_before) as u64);
            remaining = next;
        }
        for o in remaining {
            let msg = format!(
                "retry {} {} {}: the config item kept changing during the fan-out (retried on the next apply)",
                o.kind.as_str(),
                o.level.as_str(),
                o.target
            );
            failed.push((o, msg));
        }
        released.retain(|o| self.held.contains(o));
        if let Err(e) = pending::release(store, ns, &released, req.token, req.now_ms) {
            out.errors.push(format!(
                "releasing finished fan-outs: {e} (the next apply after this one's lease, {}, runs them again)",
                managed::iso_timestamp(self.lease)
            ));
        }
        failed.sort_by(|a, b| pending::run_order(&a.0, &b.0));
        for (o, msg) in failed {
            out.errors.push(msg);
            // Claimable at once by the next apply.
            let handed = if self.held.contains(&o) {
                pending::expire(store, ns, &o, req.token, req.now_ms)
            } else {
                let share = Share {
                    lease: req.now_ms,
                    full: req.full,
                };
                pending::write_ahead(store, ns, &o, req.token, share, req.now_ms)
            };
            if let Err(e) = handed {
                out.errors.push(format!(
                    "recording the failed fan-out {} {} {} for the next apply: {e}",
                    o.kind.as_str(),
                    o.level.as_str(),
                    o.target
                ));
            }
        }
    }

    /// The `#PROVISIONER` record of what was written (a failed change is
    /// planned again by the next apply), then the level digests for
    /// `--no-refresh`, then the levels this apply recorded it was about to
    /// create are forgotten.
    fn record(
        &self,
        before: &ProvisionerRecord,
        planned: &RecordIdentity,
        recorded: &Recorded,
        summary: &Summary,
        written: &Written,
        out: &mut Applied,
    ) {
        let (store, req) = (self.store, self.req);
        req.progress.phase("record", 0);
        let forgotten = summary
            .forgotten
            .iter()
            .filter(|l| !matches!(l, Level::Resource(_))) // step 5 took those
            .map(|l| (l.clone(), Action::Delete, Outcome::Forgotten));
        let managed = record::managed_after(
            before,
            &ManagedSet::from_manifest(req.manifest),
            written.outcomes.iter().cloned().chain(forgotten),
        );
        let mut stale = before.extra_keys.clone();
        stale.extend(written.writing.iter().cloned());
        stale.extend(recorded.keys.iter().cloned());
        // The counts as this apply leaves them (none: the next one checks them all).
        let counts_left = counts::fingerprint_now(store, req.ns).ok();
        let done = record::write(
            store,
            req.ns,
            req.token,
            &managed,
            req.now_ms,
            req.applied_hash,
            counts_left.as_deref(),
            &written.digests,
            &stale,
            planned,
        );
        match done.record {
            Err(StoreError::ConditionFailed { .. }) => {
                let wrote = written_levels(&out.changes, written);
                let kept =
                    conflict::keep_written(store, req.ns, &wrote, req.now_ms, req.applied_hash);
                out.errors.push(conflict::message(planned, &kept));
            }
            Err(e) => out.errors.push(format!(
                "writing the #PROVISIONER record: {e} (the next apply plans these changes again)"
            )),
            Ok(_) => {
                if let Err(e) = done.digests {
                    out.warnings.push(format!(
                        "recording the level digests: {e} (the next --no-refresh run reads every level)"
                    ));
                }
            }
        }
    }
}

/// What one of the writes before the first config write is, for its error.
fn before_write_label(key: &Key) -> &'static str {
    if key.sk.starts_with(counts::SK_PREFIX) {
        "the entity-count journal"
    } else if key.sk.starts_with(managed::WRITING_SK_PREFIX) {
        "the levels about to be created"
    } else {
        "that the level digests are out of date"
    }
}

/// The levels this apply created or updated: the changes that were not
/// deletes and did not fail (the record's conflict path adds them to a record
/// another writer left, [`conflict::keep_written`]).
fn written_levels(changes: &[PlannedChange], written: &Written) -> Vec<Level> {
    let failed: BTreeSet<&Level> = written
        .outcomes
        .iter()
        .filter(|(_, _, o)| *o == Outcome::Failed)
        .map(|(l, _, _)| l)
        .collect();
    changes
        .iter()
        .filter(|pc| pc.change.action != Action::Delete && !matches!(pc.desired, Some(Err(_))))
        .map(|pc| &pc.change.level)
        .filter(|l| !failed.contains(l))
        .cloned()
        .collect()
}

fn count(out: &mut Applied, action: Action) {
    match action {
        Action::Create => out.created += 1,
        Action::Update => out.updated += 1,
        Action::Delete => out.deleted += 1,
    }
}

/// Test-only: with `ZAEL_FAULT_FANOUT_ERROR=MESSAGE` set, every fan-out fails with
/// MESSAGE (as a throttled table would), so tests can drive the pending-item
/// machinery through the binary. Unset, fan-outs run normally.
pub const FANOUT_FAULT_ENV: &str = "ZAEL_FAULT_FANOUT_ERROR";

/// Runs the fan-outs (see [`fanout::run_listed`]): `Ok(true)` when one
/// updated or found buckets, `Ok(false)` when there were none to update.
fn run_fanouts(
    store: &dyn Store,
    ns: &str,
    owed: &[Owed],
    now_ms: i64,
    listing: Option<fanout::Listing>,
) -> Vec<Result<bool, FanOutError>> {
    if owed.is_empty() {
        return Vec::new();
    }
    match std::env::var(FANOUT_FAULT_ENV) {
        Ok(msg) if !msg.is_empty() => owed
            .iter()
            .map(|_| Err(FanOutError::Injected(msg.clone())))
            .collect(),
        _ => fanout::run_listed(store, ns, owed, now_ms, listing),
    }
}

/// The digest of each config item behind the fan-outs (`None`: absent, or a
/// malformed target), read a chunk at a time (batched, consistent), taking
/// the levels in `known` as they are instead of reading them.
fn read_digests(
    store: &dyn Store,
    keys: &[Option<Key>],
    known: &HashMap<Key, Option<Digest>>,
) -> Result<Vec<Option<Digest>>, String> {
    let mut out = Vec::with_capacity(keys.len());
    for chunk in keys.chunks(CHUNK) {
        let wanted: Vec<Key> = chunk
            .iter()
            .flatten()
            .filter(|k| !known.contains_key(*k))
            .cloned()
            .collect();
        let mut got = store
            .batch_get(&wanted, true)
            .map_err(|e| e.to_string())?
            .into_iter();
        for k in chunk {
            out.push(match k {
                None => None,
                Some(k) => match known.get(k) {
                    Some(d) => *d,
                    None => got.next().flatten().map(|item| digests::digest(k, &item)),
                },
            });
        }
    }
    Ok(out)
}

/// The reference's wording for a failed fan-out (docs/manifest.md, "Plan,
/// diff and apply output"); a failed share is expired at once, so the next
/// apply does retry it.
pub fn fanout_error(o: &Owed, e: &FanOutError) -> String {
    let (level, target) = (o.level.as_str(), &o.target);
    match o.kind {
        FanOutKind::Disabled => {
            format!("disable fan-out {level} {target}: {e} (retried on the next apply)")
        }
        FanOutKind::Cascade => {
            format!("cascade fan-out {level} {target}: {e} (retried on the next apply)")
        }
        FanOutKind::Soft => format!("soft fan-out {level} {target}: {e}"),
        FanOutKind::Sync => {
            format!("bucket param sync entity {target}: {e} (retried on the next apply)")
        }
    }
}

/// Resource and entity levels the manifest gives an explicit `disabled` (bypass included).
fn declared_disabled(m: &Manifest) -> Vec<Level> {
    let mut out: Vec<Level> = m
        .resources
        .iter()
        .filter(|(_, c)| c.disabled.is_some())
        .map(|(r, _)| Level::Resource(r.clone()))
        .collect();
    for (e, rs) in &m.entities {
        for (r, c) in rs {
            if c.disabled.is_some() {
                out.push(Level::Entity(e.clone(), r.clone()));
            }
        }
    }
    out
}

/// Which fan-outs a change owes, predicted from the pre-read live item.
pub fn owed_kinds(pc: &PlannedChange, full: bool) -> Vec<FanOutKind> {
    let live = pc.live.as_ref();
    let desired = match &pc.desired {
        Some(Ok(item)) => Some(item),
        Some(Err(_)) => return Vec::new(), // nothing will be written
        None => None,
    };
    let full = full && pc.change.action != Action::Delete;
    let attr = |i: Option<&Item>, n: &str| i.and_then(|i| i.get(n)).cloned();
    let changed = |n: &str| attr(live, n) != attr(desired, n);
    let soft_changed = soft_set(live) != soft_set(desired);
    let level = pc.change.level.kind();
    let mut out = Vec::new();
    if level != LevelKind::System {
        // The flags live on resource and entity levels only.
        if full || changed(attrs::DISABLED) {
            out.push(FanOutKind::Disabled);
        }
        if full || changed(attrs::CASCADE) {
            out.push(FanOutKind::Cascade);
        }
    }
    match level {
        LevelKind::System => {
            let involved = !soft_set(live).is_empty() || !soft_set(desired).is_empty();
            if soft_changed || (full && involved) {
                out.push(FanOutKind::Soft);
            }
        }
        LevelKind::Resource => {
            if full || soft_changed {
                out.push(FanOutKind::Soft);
            }
        }
        LevelKind::Entity => {
            let deleted = pc.change.action == Action::Delete && live.is_some();
            if full || deleted || bucket_content(live) != bucket_content(desired) {
                out.push(FanOutKind::Sync);
            }
        }
    }
    out
}

fn soft_set(item: Option<&Item>) -> BTreeSet<String> {
    item.map(config::soft_buckets).unwrap_or_default()
}

fn bucket_content(item: Option<&Item>) -> Item {
    item.map(config::bucket_content).unwrap_or_default()
}

pub use super::new_token;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::model::{LevelConfig, LimitSpec};
    use crate::plan::level::Change;
    use crate::plan::managed::ManagedSet;
    use crate::store::item::keyed;
    use crate::store::memory::MemoryStore;
    use crate::store::AttrValue;

    const NOW: i64 = 1_700_000_000_000;

    #[test]
    fn written_levels_are_the_creates_and_updates_that_did_not_fail() {
        let e = |n: &str| Level::Entity(n.into(), "r".into());
        let change = |action, level: Level, desired| PlannedChange {
            change: Change::new(action, level),
            desired,
            live: None,
            details: vec![],
        };
        let changes = vec![
            change(Action::Create, e("a"), None),
            change(Action::Update, e("b"), None),
            change(Action::Delete, e("c"), None),
            change(Action::Create, e("failed"), None),
            change(
                Action::Create,
                e("unbuildable"),
                Some(Err(BuildError::Saved("two zones".into()))),
            ),
        ];
        let written = Written {
            outcomes: vec![
                (e("c"), Action::Delete, Outcome::Done),
                (e("failed"), Action::Create, Outcome::Failed),
            ],
            ..Default::default()
        };
        assert_eq!(written_levels(&changes, &written), vec![e("a"), e("b")]);
    }

    fn item(level: &Level, attrs: &[(&str, AttrValue)]) -> Item {
        let k = level.key("ns");
        keyed(&k.pk, &k.sk, attrs)
    }

    fn pc(
        action: Action,
        level: Level,
        live: Option<Item>,
        desired: Option<Item>,
    ) -> PlannedChange {
        PlannedChange {
            change: Change::new(action, level),
            desired: desired.map(Ok),
            live,
            details: vec![],
        }
    }

    #[test]
    fn fanouts_are_predicted_from_what_changes() {
        let e = Level::Entity("u".into(), "r".into());
        let cap = |n: u32| ("l_rpm_cp", AttrValue::n(n));
        // A new entity level with limits: its buckets need the new params.
        let c = pc(Action::Create, e.clone(), None, Some(item(&e, &[cap(5)])));
        assert_eq!(owed_kinds(&c, false), vec![FanOutKind::Sync]);
        // Only flags changed: disabled and cascade, no sync.
        let c = pc(
            Action::Update,
            e.clone(),
            Some(item(&e, &[cap(5)])),
            Some(item(
                &e,
                &[
                    cap(5),
                    ("disabled", AttrValue::Bool(true)),
                    ("cascade", AttrValue::Bool(false)),
                ],
            )),
        );
        assert_eq!(
            owed_kinds(&c, false),
            vec![FanOutKind::Disabled, FanOutKind::Cascade]
        );
        // Bookkeeping only: nothing owed.
        let c = pc(
            Action::Update,
            e.clone(),
            Some(item(&e, &[cap(5), ("config_version", AttrValue::n(1))])),
            Some(item(&e, &[cap(5)])),
        );
        assert_eq!(owed_kinds(&c, false), vec![]);
        // A deleted entity level re-syncs its buckets, unless it was already gone.
        let c = pc(Action::Delete, e.clone(), Some(item(&e, &[cap(5)])), None);
        assert_eq!(owed_kinds(&c, false), vec![FanOutKind::Sync]);
        let c = pc(Action::Delete, e.clone(), None, None);
        assert_eq!(owed_kinds(&c, true), vec![]);
        // Soft-ness at resource and system levels.
        let r = Level::Resource("r".into());
        let soft = ("l_rpm_soft", AttrValue::Bool(true));
        let c = pc(
            Action::Update,
            r.clone(),
            Some(item(&r, &[cap(5)])),
            Some(item(&r, &[cap(5), soft.clone()])),
        );
        assert_eq!(owed_kinds(&c, false), vec![FanOutKind::Soft]);
        let same = item(&Level::System, &[cap(5)]);
        let c = pc(
            Action::Update,
            Level::System,
            Some(same.clone()),
            Some(same.clone()),
        );
        assert_eq!(
            owed_kinds(&c, true),
            vec![],
            "full: system soft only when involved"
        );
        let with_soft = item(&Level::System, &[cap(5), soft]);
        let c = pc(
            Action::Update,
            Level::System,
            Some(with_soft.clone()),
            Some(with_soft),
        );
        assert_eq!(owed_kinds(&c, true), vec![FanOutKind::Soft]);
        // --full owes every kind of the level.
        let c = pc(Action::Update, r.clone(), None, Some(item(&r, &[cap(5)])));
        assert_eq!(
            owed_kinds(&c, true),
            vec![FanOutKind::Disabled, FanOutKind::Cascade, FanOutKind::Soft]
        );
    }

    fn manifest() -> Manifest {
        let mut m = Manifest::new("d");
        let level = LevelConfig::with_limit("rpm", LimitSpec::bucket(5, 5, 60));
        m.resources.insert("r".into(), level.clone());
        m.entities
            .entry("u".into())
            .or_default()
            .insert("r".into(), level);
        m
    }

    /// A stand-in codec: one limit attribute per level.
    fn build(level: &Level) -> Result<Item, BuildError> {
        Ok(item(level, &[("l_rpm_cp", AttrValue::n(5))]))
    }

    /// Applies `m` in namespace "ns", items made by `build`.
    fn apply_with(
        s: &dyn Store,
        m: &Manifest,
        build: &BuildFn<'_>,
        (full, refresh): (bool, Refresh),
        token: &str,
        now_ms: i64,
    ) -> Applied {
        let req = ApplyRequest {
            ns: "ns",
            manifest: m,
            full,
            now_ms,
            token,
            applied_hash: "sha256:test",
            build,
            refresh,
            progress: &crate::progress::Silent,
            stop: &never_stop,
            saved: None,
        };
        apply(s, &req).unwrap()
    }

    fn apply_once(s: &MemoryStore, full: bool, token: &str, now_ms: i64) -> Applied {
        apply_with(s, &manifest(), &build, (full, Refresh::All), token, now_ms)
    }

    fn leftover(s: &MemoryStore, owed: &Owed, token: &str, lease: i64, full: bool) {
        pending::write_ahead(s, "ns", owed, token, Share { lease, full }, NOW - 10).unwrap();
    }

    #[test]
    fn an_apply_writes_levels_record_and_releases_what_it_owed() {
        let s = MemoryStore::new();
        let done = apply_once(&s, false, "t1", NOW);
        assert_eq!(
            (done.created, done.errors.len(), done.pending.count),
            (2, 0, 0)
        );
        assert!(s.item("ns/ENTITY#u", "#CONFIG#r").is_some());
        let rec = managed::read(&s, "ns").unwrap();
        assert_eq!(rec.managed, ManagedSet::from_manifest(&manifest()));
        // The second apply finds nothing to do.
        let again = apply_once(&s, false, "t2", NOW);
        assert_eq!((again.changes.len(), again.unchanged), (0, 2));
    }

    #[test]
    fn abandoned_fanouts_are_claimed_only_after_their_lease() {
        let s = MemoryStore::new();
        apply_once(&s, false, "t0", NOW);
        let owed = Owed::new(FanOutKind::Sync, LevelKind::Entity, "u/r");
        leftover(&s, &owed, "dead", NOW + 5_000, false);
        let done = apply_once(&s, false, "t1", NOW);
        assert_eq!(done.pending.count, 1, "a live lease is left alone");
        let done = apply_once(&s, false, "t2", NOW + 10_000);
        assert_eq!(
            done.pending.count, 0,
            "an expired lease is claimed, run and released"
        );
        assert!(!done.resumed);
    }

    #[test]
    fn a_full_apply_resumes_an_interrupted_full_apply_change_only() {
        let s = MemoryStore::new();
        apply_once(&s, false, "t0", NOW);
        let owed = Owed::new(FanOutKind::Cascade, LevelKind::Resource, "r");
        leftover(&s, &owed, "dead", NOW - 1, true);
        let done = apply_once(&s, true, "t1", NOW);
        assert!(done.resumed && done.full);
        assert_eq!((done.changes.len(), done.unchanged), (0, 2), "change-only");
        assert_eq!(done.pending.count, 0);
        // Without an interrupted full apply, --full rewrites every level.
        let done = apply_once(&s, true, "t2", NOW);
        assert!(!done.resumed);
        assert_eq!((done.updated, done.unchanged), (2, 0));
    }

    #[test]
    fn legacy_cascade_pending_is_retried_then_dropped_from_the_record() {
        let s = MemoryStore::new();
        apply_once(&s, false, "t0", NOW);
        let key = managed::record_key("ns");
        let mut rec = s.item(&key.pk, &key.sk).unwrap();
        let entry: std::collections::BTreeMap<String, AttrValue> = [
            ("level".to_string(), AttrValue::s("resource")),
            ("target".to_string(), AttrValue::s("r")),
        ]
        .into();
        rec.insert(
            "cascade_pending".into(),
            AttrValue::L(vec![AttrValue::M(entry)]),
        );
        s.put(rec);
        assert_eq!(managed::read(&s, "ns").unwrap().cascade_pending.len(), 1);
        let done = apply_once(&s, false, "t1", NOW);
        assert_eq!((done.errors.len(), done.pending.count), (0, 0));
        let rec = s.item(&key.pk, &key.sk).unwrap();
        assert!(!rec.contains_key("cascade_pending"));
    }

    #[test]
    fn a_failed_fanout_stays_pending_and_expires_for_the_next_apply() {
        let s = MemoryStore::new();
        // The fan-out of a malformed target fails; its item must stay, claimable at once.
        let bad = Owed::new(FanOutKind::Sync, LevelKind::Entity, "no-slash");
        leftover(&s, &bad, "dead", NOW - 1, false);
        let done = apply_once(&s, false, "t1", NOW);
        assert_eq!(done.pending.count, 1);
        assert_eq!(done.errors.len(), 1);
        assert!(
            done.errors[0].starts_with("bucket param sync entity no-slash: ")
                && done.errors[0].ends_with("(retried on the next apply)"),
            "{:?}",
            done.errors
        );
        let p = pending::list(&s, "ns").unwrap().remove(0);
        assert!(p.claimable(NOW), "expired for the next apply");
    }

    /// Builds each level with `l_rpm_cp` from `caps` (5 for a level not listed).
    fn caps_build<'a>(
        caps: &'a [(&'a Level, i64)],
    ) -> impl Fn(&Level) -> Result<Item, BuildError> + 'a {
        move |level: &Level| {
            let cap = caps
                .iter()
                .find(|(l, _)| *l == level)
                .map_or(5, |(_, c)| *c);
            Ok(item(level, &[("l_rpm_cp", AttrValue::n(cap))]))
        }
    }

    /// Applies manifest() built by [`caps_build`].
    fn run_caps(s: &MemoryStore, caps: &[(&Level, i64)], refresh: Refresh, token: &str) -> Applied {
        let build = caps_build(caps);
        apply_with(s, &manifest(), &build, (false, refresh), token, NOW)
    }

    /// Plans manifest() built by [`caps_build`].
    fn plan_caps(
        s: &MemoryStore,
        caps: &[(&Level, i64)],
        refresh: Refresh,
    ) -> crate::plan::prepare::Prepared {
        let build = caps_build(caps);
        crate::plan::prepare::prepare(s, "ns", &manifest(), false, &build, refresh).unwrap()
    }

    #[test]
    fn no_refresh_skips_levels_the_last_apply_recorded_and_reads_the_rest() {
        let s = MemoryStore::new();
        let entity = Level::Entity("u".into(), "r".into());
        let resource = Level::Resource("r".into());
        run_caps(&s, &[], Refresh::All, "t1");
        // A change behind the manifest's back: a normal plan sees it, a
        // --no-refresh plan (which does not read the level) does not.
        s.put(item(&entity, &[("l_rpm_cp", AttrValue::n(9))]));
        let refreshed = plan_caps(&s, &[], Refresh::All);
        assert_eq!(refreshed.changes.len(), 1);
        let trusted = plan_caps(&s, &[], Refresh::Trust);
        assert_eq!(
            (trusted.changes.len(), trusted.unchanged, trusted.fallback),
            (0, 2, None)
        );
        // A level the manifest changes is read, so its detail shows the live value.
        let p = plan_caps(&s, &[(&entity, 7)], Refresh::Trust);
        assert_eq!(p.changes.len(), 1);
        assert_eq!(
            p.changes[0].live.as_ref().and_then(|i| i.get("l_rpm_cp")),
            Some(&AttrValue::n(9))
        );
        // An apply with --no-refresh writes it and records it.
        let done = run_caps(&s, &[(&entity, 7), (&resource, 6)], Refresh::Trust, "t2");
        assert_eq!((done.updated, done.unchanged, done.errors.len()), (2, 0, 0));
        let p = plan_caps(&s, &[(&entity, 7), (&resource, 6)], Refresh::Trust);
        assert_eq!((p.changes.len(), p.unchanged, p.fallback), (0, 2, None));
        // Going back to the old content is a change again (its digest was replaced).
        let p = plan_caps(&s, &[], Refresh::Trust);
        assert_eq!(p.changes.len(), 2);
    }

    #[test]
    fn no_refresh_reads_everything_after_an_unfinished_or_foreign_apply() {
        let s = MemoryStore::new();
        let entity = Level::Entity("u".into(), "r".into());
        run_caps(&s, &[], Refresh::All, "t1");
        // Another provisioner rewrote the record (new timestamp): digests unusable.
        let key = managed::record_key("ns");
        let mut rec = s.item(&key.pk, &key.sk).unwrap();
        rec.insert(
            "last_applied".into(),
            AttrValue::s("2030-01-01T00:00:00.000000+00:00"),
        );
        s.put(rec);
        s.put(item(&entity, &[("l_rpm_cp", AttrValue::n(9))]));
        let p = plan_caps(&s, &[], Refresh::Trust);
        assert_eq!(p.fallback, Some(Untrusted::OtherApply));
        assert_eq!(p.changes.len(), 1, "the drift is found by the full read");
        // The apply that fixes it records fresh digests.
        let done = run_caps(&s, &[], Refresh::Trust, "t2");
        assert_eq!(
            (done.updated, done.fallback),
            (1, Some(Untrusted::OtherApply))
        );
        assert_eq!(plan_caps(&s, &[], Refresh::Trust).fallback, None);
        // An apply that died after clearing the digests leaves none to trust.
        for r in s.batch_write(record::before_writes("ns", "t", &ManagedSet::default()).0) {
            r.unwrap();
        }
        assert_eq!(
            plan_caps(&s, &[], Refresh::Trust).fallback,
            Some(Untrusted::Missing)
        );
    }

    /// Forwards to a memory store, counting pending-item writes; puts a
    /// bucket of `late` once the first config write lands (after the
    /// apply listed the buckets), and fails every bucket update when `fail`.
    struct Spy {
        inner: MemoryStore,
        pending_writes: std::sync::atomic::AtomicUsize,
        late: Option<Item>,
        fail_buckets: bool,
    }

    impl Spy {
        fn new(late: Option<Item>, fail_buckets: bool) -> Spy {
            Spy {
                inner: MemoryStore::new(),
                pending_writes: Default::default(),
                late,
                fail_buckets,
            }
        }

        fn note(&self, ops: &[crate::store::WriteOp]) {
            let pending = ops
                .iter()
                .filter(|op| {
                    op.key()
                        .sk
                        .starts_with(crate::items::keys::PENDING_SK_PREFIX)
                })
                .count();
            self.pending_writes
                .fetch_add(pending, std::sync::atomic::Ordering::SeqCst);
            let config = ops.iter().any(|op| op.key().sk.starts_with("#CONFIG#"));
            if let (true, Some(late)) = (config, &self.late) {
                if self
                    .inner
                    .item(late["PK"].as_s().unwrap(), "#STATE")
                    .is_none()
                {
                    self.inner.put(late.clone());
                }
            }
        }
    }

    impl Store for Spy {
        fn table_name(&self) -> &str {
            "spy"
        }
        fn get(&self, key: &Key, c: bool) -> Result<Option<Item>, crate::store::StoreError> {
            self.inner.get(key, c)
        }
        fn batch_get(
            &self,
            keys: &[Key],
            c: bool,
        ) -> Result<Vec<Option<Item>>, crate::store::StoreError> {
            self.inner.batch_get(keys, c)
        }
        fn query(&self, pk: &str, p: &str, c: bool) -> Result<Vec<Item>, crate::store::StoreError> {
            self.inner.query(pk, p, c)
        }
        fn query_index(
            &self,
            i: crate::store::Index,
            pk: &str,
            p: &str,
        ) -> Result<Vec<Key>, crate::store::StoreError> {
            self.inner.query_index(i, pk, p)
        }
        fn write(
            &self,
            op: crate::store::WriteOp,
        ) -> Result<Option<Item>, crate::store::StoreError> {
            let mut out = self.write_many(vec![op]);
            out.remove(0)
        }
        fn write_many(
            &self,
            ops: Vec<crate::store::WriteOp>,
        ) -> Vec<Result<Option<Item>, crate::store::StoreError>> {
            self.note(&ops);
            ops.into_iter()
                .map(|op| {
                    if self.fail_buckets && op.key().pk.contains("/BUCKET#") {
                        return Err(crate::store::StoreError::Backend("throttled".into()));
                    }
                    self.inner.write(op)
                })
                .collect()
        }
        fn transact(
            &self,
            ops: Vec<crate::store::WriteOp>,
        ) -> Result<(), crate::store::StoreError> {
            self.note(&ops);
            self.inner.transact(ops)
        }
    }

    /// `n` entities with a level on resource `r`.
    fn many(n: usize) -> Manifest {
        let mut m = manifest();
        let level = m.entities["u"]["r"].clone();
        for e in 0..n {
            m.entities
                .entry(format!("e{e:03}"))
                .or_default()
                .insert("r".into(), level.clone());
        }
        m
    }

    /// A bucket of entity `e` on `r` with an `rpm` limit of capacity 1.
    fn a_bucket(e: &str) -> Item {
        let pk = format!("ns/BUCKET#{e}#r#0");
        keyed(
            &pk,
            "#STATE",
            &[
                ("entity_id", AttrValue::s(e)),
                ("resource", AttrValue::s("r")),
                ("GSI3PK", AttrValue::s(format!("ns/ENTITY#{e}"))),
                ("GSI3SK", AttrValue::s("BUCKET#r#0")),
                ("GSI4PK", AttrValue::s("ns")),
                ("GSI4SK", AttrValue::s(format!("BUCKET#{e}#r#0"))),
                ("b_rpm_cp", AttrValue::n(1000)),
                ("b_rpm_tk", AttrValue::n(1000)),
                ("shard_count", AttrValue::n(1)),
            ],
        )
    }

    fn apply_many(s: &dyn Store, m: &Manifest, token: &str, now_ms: i64) -> Applied {
        let build = |level: &Level| {
            Ok(item(
                level,
                &[
                    ("l_rpm_cp", AttrValue::n(5)),
                    ("l_rpm_ra", AttrValue::n(5)),
                    ("l_rpm_rp", AttrValue::n(60)),
                ],
            ))
        };
        apply_with(s, m, &build, (false, Refresh::All), token, now_ms)
    }

    #[test]
    fn with_many_fanouts_only_those_with_buckets_get_pending_items() {
        let s = Spy::new(None, false);
        s.inner.put(a_bucket("e001"));
        s.inner.put(a_bucket("e007"));
        let done = apply_many(&s, &many(40), "t1", NOW);
        assert_eq!(
            (done.created, done.errors.len(), done.pending.count),
            (42, 0, 0)
        );
        // Written ahead and released: two items, each written twice.
        assert_eq!(
            s.pending_writes.load(std::sync::atomic::Ordering::SeqCst),
            4
        );
        let b = s.inner.item("ns/BUCKET#e007#r#0", "#STATE").unwrap();
        assert_eq!(b.get("b_rpm_cp"), Some(&AttrValue::n(5000)), "synced");
    }

    #[test]
    fn a_failed_fanout_without_a_pending_item_is_handed_to_the_next_apply() {
        // The bucket appears after the listing: the fan-out finds it, and fails.
        let s = Spy::new(Some(a_bucket("e003")), true);
        let done = apply_many(&s, &many(40), "t1", NOW);
        assert_eq!(done.errors.len(), 1, "{:?}", done.errors);
        assert!(
            done.errors[0].starts_with("bucket param sync entity e003/r: ")
                && done.errors[0].ends_with("(retried on the next apply)"),
            "{:?}",
            done.errors
        );
        let left = pending::list(&s, "ns").unwrap();
        assert_eq!(left.len(), 1);
        assert_eq!(left[0].owed.target, "e003/r");
        assert!(left[0].claimable(NOW), "the next apply takes it at once");
        assert_eq!(done.pending.leased_until, None);
    }
}
