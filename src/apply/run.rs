//! `limits apply`, step by step (docs/storage.md, "Apply"), numbered as the
//! reference numbers them:
//! * 1: refuse limits the table's Lambdas cannot enforce ([`gate`]);
//! * 2–3: claim the fan-outs earlier applies abandoned, settle their entity
//!   counts, then plan: read and compare ([`crate::plan::prepare`]);
//! * 4a: check that the `#PROVISIONER` record is still the one planned
//!   against, and add every declared level to its managed set ([`conflict`]);
//! * 4: write ahead a pending item for every fan-out the changes owe;
//! * 5: write the levels and their registries ([`writes`]);
//! * 7: re-assert explicit `disabled`;
//! * 8–9: run every owed fan-out, release what finished, expire what failed;
//! * 10: write the `#PROVISIONER` record, then the level digests ([`record`]);
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
//! Crash safety: every step is either idempotent or recorded before it runs. A
//! process killed at any point leaves (a) config items that are each either old or
//! new, with their registry entry written in the same transaction, (b) pending
//! items for every fan-out a finished write made necessary, and (c) the previous
//! `#PROVISIONER` record, so the next apply recomputes the same changes, skips the
//! ones already written and deletes what is still left to delete.
//!
//! Where this differs from the reference, on purpose:
//! * Config writes keep the Python client's registries (`#RESOURCES`,
//!   `#ENTITY_CONFIG_RESOURCES`) in the same transaction (see [`writes`]); the
//!   reference provisioner never updates them.
//! * Step 6 (fan-outs only the `ALL_OLD` images reveal) is not separate: the
//!   registry transactions return no old image, so fan-outs are predicted once,
//!   from the strongly consistent pre-read. A concurrent writer between that read
//!   and our write is the only case this misses.
//! * A delete of an item that is already gone writes nothing (it is still listed
//!   and counted, as in the reference).

use std::collections::{BTreeSet, HashMap};

use crate::apply::fanout::{self, FanOutError, FanOutKind, LevelKind, Owed};
use crate::apply::pending::{self, Share};
use crate::apply::{conflict, counts, gate, record, writes, ApplyError, LEASE_MS};
use crate::items::{attrs, config};
use crate::manifest::Manifest;
use crate::plan::digests::{self, Digest, Recorded, Untrusted};
use crate::plan::identity::RecordIdentity;
use crate::plan::level::{Action, Level};
use crate::plan::managed::{self, ManagedSet, ProvisionerRecord};
use crate::plan::prepare::{
    prepare_with_record, BuildError, BuildFn, PlannedChange, Prepared, Refresh,
};
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
    pub pending: usize,
    pub errors: Vec<String>,
    /// Problems that do not make the apply fail (recording the level digests).
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
    };
    // 2–3. Claim what earlier applies left behind once their leases ran out.
    let (record, resumed) = run.claim_abandoned()?;
    // Entity counts a dead apply left half done, settled before the pre-read.
    let recovered = counts::recover(store, req.ns, req.now_ms);
    // A resumed full apply continues change-only instead of starting over.
    let full = req.full && !resumed;
    let (prepared, recorded) = run.plan(record, full).map_err(|e| run.abandon(e))?;
    run.stop_before(Step::WriteLevels)?;
    // 4a. The record must still be the one planned against; it now manages
    // every declared level too, so a crash leaves nothing outside it.
    let declares = conflict::levels_of(&ManagedSet::from_manifest(req.manifest));
    let planned = conflict::widen(
        store,
        req.ns,
        &prepared.record.identity,
        &declares,
        req.now_ms,
        req.applied_hash,
    )
    .map_err(|e| run.abandon(e.into()))?;
    // 4. Write ahead every fan-out the changes make necessary (one batch).
    run.write_ahead(&prepared.changes, full)?;
    let mut out = Applied {
        changes: Vec::new(),
        created: 0,
        updated: 0,
        deleted: 0,
        unchanged: prepared.unchanged,
        full: req.full,
        resumed,
        pending: 0,
        errors: Vec::new(),
        warnings: Vec::new(),
        fallback: prepared.fallback.clone(),
    };
    if let Err(e) = recovered {
        out.errors.push(format!(
            "settling the entity-config counts of an earlier apply: {e}"
        ));
    }
    // 5. Config writes.
    let written = run
        .write_levels(&prepared, &mut out)
        .map_err(|e| run.abandon(e))?;
    let wrote = conflict::written_levels(req.ns, &prepared.changes, &written.items);
    out.changes = prepared.changes;
    if let Some(why) = (req.stop)(Step::FanOut) {
        // Stopped after the config writes: the fan-outs go to the next apply.
        let left = run.owed.len();
        run.hand_back();
        out.errors.push(format!(
            "{why}: stopped after the config writes; the #PROVISIONER record is written, and {left} bucket fan-out(s) are left for the next apply"
        ));
    } else {
        // 7. Re-assert explicit `disabled` on declared levels not already being fanned out.
        run.reassert_disabled(&mut out);
        // 8–9. Every owed fan-out; what fails is handed to the next apply.
        run.fan_out(written.items, &mut out);
    }
    // A safe point only: the record is written whatever it says.
    let _ = (req.stop)(Step::Record);
    // 10. The record, then the digests of what the levels now hold.
    run.record(&planned, &wrote, &recorded, &written.digests, &mut out);
    // 11. What is still owed.
    match pending::count(store, req.ns) {
        Ok(n) => out.pending = n,
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
}

/// What step 5 wrote: each written level's new item (`None`: deleted), the
/// fan-outs' first "before" image; and the digests of the levels now as declared.
struct Written {
    items: HashMap<Key, Option<Item>>,
    digests: Vec<Digest>,
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
        for p in pending::list(store, req.ns)? {
            if !p.claimable(req.now_ms) {
                continue;
            }
            let was_full = p.owners.values().any(|s| s.full);
            let claimed =
                pending::claim(store, req.ns, &p, req.token, self.share(false), req.now_ms)?;
            if claimed {
                resumed |= req.full && was_full;
                self.owed.insert(p.owed);
            }
        }
        let record = managed::read(store, req.ns)?;
        for (level, target) in &record.cascade_pending {
            let Some(level) = Level::from_parts(level, target) else {
                continue;
            };
            let o = Owed {
                kind: FanOutKind::Cascade,
                level: level.kind(),
                target: level.target(),
            };
            pending::write_ahead(store, req.ns, &o, req.token, self.share(false), req.now_ms)?;
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

    /// The plan, from the record just read (and the digests, for `--no-refresh`).
    fn plan(
        &self,
        record: ProvisionerRecord,
        full: bool,
    ) -> Result<(Prepared, Recorded), ApplyError> {
        let (store, req) = (self.store, self.req);
        let recorded = digests::read(store, req.ns, record.stamp.as_deref())?;
        if let Some(saved) = req.saved {
            let prepared = crate::plan::saved::resume(saved, record)?;
            return Ok((prepared, recorded));
        }
        let trust = (req.refresh == Refresh::Trust).then_some(&recorded);
        let prepared =
            prepare_with_record(store, req.ns, req.manifest, full, req.build, record, trust)?;
        Ok((prepared, recorded))
    }

    /// Writes a pending item for every fan-out the changes make necessary.
    fn write_ahead(&mut self, changes: &[PlannedChange], full: bool) -> Result<(), ApplyError> {
        let mut ahead = Vec::new();
        for pc in changes {
            for kind in owed_kinds(pc, full) {
                let o = Owed {
                    kind,
                    level: pc.change.level.kind(),
                    target: pc.change.level.target(),
                };
                if !ahead.contains(&o) {
                    ahead.push(o);
                }
            }
        }
        let req = self.req;
        pending::write_ahead_many(
            self.store,
            req.ns,
            &ahead,
            req.token,
            self.share(full),
            req.now_ms,
        )?;
        self.owed.extend(ahead);
        Ok(())
    }

    /// Writes every level at once (order inside one apply is invisible to the
    /// end state); a level that cannot be built or written is reported and
    /// the rest go on. `Err` only when the recorded digests could not be
    /// cleared, before anything was written.
    fn write_levels(&self, prepared: &Prepared, out: &mut Applied) -> Result<Written, ApplyError> {
        let (store, ns) = (self.store, self.req.ns);
        let changes = &prepared.changes;
        let mut writes_of = Vec::new();
        let mut outcome: Vec<Option<Result<(), NotWritten>>> = Vec::with_capacity(changes.len());
        for pc in changes {
            let w = match (&pc.desired, pc.change.action) {
                (_, Action::Delete) => writes::LevelWrite::Delete {
                    level: &pc.change.level,
                    existed: pc.live.is_some(),
                },
                (Some(Ok(item)), _) => writes::LevelWrite::Put {
                    level: &pc.change.level,
                    item,
                    existed: pc.live.is_some(),
                },
                (Some(Err(e)), _) => {
                    outcome.push(Some(Err(e.clone().into())));
                    continue;
                }
                (None, _) => {
                    outcome.push(Some(Err(NotWritten::NoItem)));
                    continue;
                }
            };
            writes_of.push(w);
            outcome.push(None);
        }
        // The recorded digests stop being true with the first config write.
        if !writes_of.is_empty() {
            record::invalidate(store, ns).map_err(ApplyError::ClearDigests)?;
        }
        let written = writes::write_levels(store, ns, self.req.token, self.lease, &writes_of);
        let mut digests_now = prepared.unchanged_digests.clone();
        let mut results = written.results.into_iter();
        let mut items: HashMap<Key, Option<Item>> = HashMap::new();
        for (pc, o) in changes.iter().zip(outcome) {
            let r = o.unwrap_or_else(|| {
                results
                    .next()
                    .unwrap_or_else(|| Err(StoreError::Backend("not written".into())))
                    .map_err(NotWritten::from)
            });
            match r {
                Ok(()) => {
                    count(out, pc.change.action);
                    let item = match &pc.desired {
                        Some(Ok(item)) if pc.change.action != Action::Delete => Some(item.clone()),
                        _ => None,
                    };
                    if let Some(item) = &item {
                        digests_now.push(digests::digest(&pc.change.level.key(ns), item));
                    }
                    items.insert(pc.change.level.key(ns), item);
                }
                Err(e) => out.errors.push(format!("{}: {e}", pc.change)),
            }
        }
        if let Some(e) = written.counts {
            out.errors.push(format!(
                "updating the entity-config counts: {e} (settled by a later apply)"
            ));
        }
        Ok(Written {
            items,
            digests: digests_now,
        })
    }

    /// Fans out `disabled` again for every declared level that sets it and is
    /// not already owed a fan-out.
    fn reassert_disabled(&self, out: &mut Applied) {
        let req = self.req;
        let reassert: Vec<Owed> = declared_disabled(req.manifest)
            .into_iter()
            .map(|level| Owed {
                kind: FanOutKind::Disabled,
                level: level.kind(),
                target: level.target(),
            })
            .filter(|o| !self.owed.contains(o))
            .collect();
        for (o, r) in reassert
            .iter()
            .zip(run_fanouts(self.store, req.ns, &reassert, req.now_ms))
        {
            if let Err(e) = r {
                out.errors.push(fanout_error(o, &e));
            }
        }
    }

    /// Every owed fan-out, from the live config item, redone (up to 3 rounds)
    /// while the item changes under it; a stable one releases its share, a
    /// failed one is expired for the next apply at once. `wrote` is what step
    /// 5 wrote: the first round reads only the levels it did not write.
    fn fan_out(&mut self, mut wrote: HashMap<Key, Option<Item>>, out: &mut Applied) {
        let (store, req) = (self.store, self.req);
        let ns = req.ns;
        let mut remaining: Vec<Owed> = std::mem::take(&mut self.owed).into_iter().collect();
        remaining.sort_by(pending::run_order);
        let mut released = Vec::new();
        let mut failed: Vec<(Owed, String)> = Vec::new();
        for _ in 0..FANOUT_ROUNDS {
            if remaining.is_empty() {
                break;
            }
            let keys: Vec<Option<Key>> = remaining
                .iter()
                .map(|o| Level::from_parts(o.level.as_str(), &o.target).map(|l| l.key(ns)))
                .collect();
            let before = read_levels_except(store, &keys, &wrote);
            wrote.clear();
            let results = run_fanouts(store, ns, &remaining, req.now_ms);
            let after = read_levels(store, &keys);
            let mut next = Vec::new();
            for (i, (o, r)) in remaining.into_iter().zip(results).enumerate() {
                match r {
                    Err(e) => {
                        let msg = fanout_error(&o, &e);
                        failed.push((o, msg));
                    }
                    Ok(()) => {
                        let stable = matches!((&before, &after), (Ok(a), Ok(b)) if a[i] == b[i]);
                        if stable {
                            released.push(o);
                        } else {
                            next.push(o);
                        }
                    }
                }
            }
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
        if let Err(e) = pending::release_many(store, ns, &released, req.token, req.now_ms) {
            out.errors.push(format!("releasing finished fan-outs: {e}"));
        }
        failed.sort_by(|a, b| pending::run_order(&a.0, &b.0));
        for (o, msg) in failed {
            out.errors.push(msg);
            let _ = pending::expire(store, ns, &o, req.token, req.now_ms);
        }
    }

    /// The `#PROVISIONER` record (managed = what the manifest declares, even
    /// for failed writes), only over the record planned against (`planned`;
    /// when it changed, the levels this apply wrote, `wrote`, join the one
    /// found instead), then the level digests for `--no-refresh`.
    fn record(
        &self,
        planned: &RecordIdentity,
        wrote: &[Level],
        recorded: &Recorded,
        digests_now: &[Digest],
        out: &mut Applied,
    ) {
        let (store, req) = (self.store, self.req);
        let written = record::write_record(
            store,
            req.ns,
            req.manifest,
            req.now_ms,
            req.applied_hash,
            planned,
        );
        match written {
            Err(StoreError::ConditionFailed { .. }) => {
                let kept =
                    conflict::keep_written(store, req.ns, wrote, req.now_ms, req.applied_hash);
                out.errors.push(conflict::message(planned, &kept));
            }
            Err(e) => out
                .errors
                .push(format!("writing the #PROVISIONER record: {e}")),
            Ok(last_applied) => {
                let stamp = digests::stamp(req.applied_hash, &last_applied);
                let stale = &recorded.keys;
                if let Err(e) =
                    record::write_digests(store, req.ns, req.token, &stamp, digests_now, stale)
                {
                    out.warnings.push(format!(
                        "recording the level digests: {e} (the next --no-refresh run reads every level)"
                    ));
                }
            }
        }
    }
}

/// Why one level was not written (a report line; the other levels go on).
#[derive(Debug, thiserror::Error)]
enum NotWritten {
    #[error(transparent)]
    Build(#[from] BuildError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("no item to write")]
    NoItem,
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

fn run_fanouts(
    store: &dyn Store,
    ns: &str,
    owed: &[Owed],
    now_ms: i64,
) -> Vec<Result<(), FanOutError>> {
    if owed.is_empty() {
        return Vec::new();
    }
    match std::env::var(FANOUT_FAULT_ENV) {
        Ok(msg) if !msg.is_empty() => owed
            .iter()
            .map(|_| Err(FanOutError::Injected(msg.clone())))
            .collect(),
        _ => fanout::run_many(store, ns, owed, now_ms),
    }
}

/// [`read_levels`], taking the items in `known` as they are instead of reading them.
fn read_levels_except(
    store: &dyn Store,
    keys: &[Option<Key>],
    known: &HashMap<Key, Option<Item>>,
) -> Result<Vec<Option<Item>>, StoreError> {
    let unknown: Vec<Option<Key>> = keys
        .iter()
        .map(|k| k.clone().filter(|k| !known.contains_key(k)))
        .collect();
    let mut read = read_levels(store, &unknown)?.into_iter();
    Ok(keys
        .iter()
        .map(|k| {
            let fresh = read.next().flatten();
            match k.as_ref().and_then(|k| known.get(k)) {
                Some(item) => item.clone(),
                None => fresh,
            }
        })
        .collect())
}

/// The config items behind the fan-outs, in one batched consistent read
/// (`None` keys read as absent).
fn read_levels(store: &dyn Store, keys: &[Option<Key>]) -> Result<Vec<Option<Item>>, StoreError> {
    let wanted: Vec<Key> = keys.iter().flatten().cloned().collect();
    let mut got = store.batch_get(&wanted, true)?.into_iter();
    Ok(keys
        .iter()
        .map(|k| k.as_ref().and_then(|_| got.next().flatten()))
        .collect())
}

/// The reference's wording for a failed fan-out (docs/manifest.md, "Plan, diff and apply output").
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

/// A fresh apply token: 32 hex digits from the OS's random source (should it
/// fail, two draws of [`crate::random::jitter`]'s fallback stand in).
pub fn new_token() -> String {
    let buf = crate::random::bytes::<16>().unwrap_or_else(|_| {
        let (a, b) = (
            crate::random::jitter(u64::MAX),
            crate::random::jitter(u64::MAX),
        );
        let mut buf = [0u8; 16];
        buf[..8].copy_from_slice(&a.to_le_bytes());
        buf[8..].copy_from_slice(&b.to_le_bytes());
        buf
    });
    buf.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::model::{LevelConfig, LimitSpec};
    use crate::plan::level::Change;
    use crate::store::item::keyed;
    use crate::store::memory::MemoryStore;
    use crate::store::AttrValue;

    const NOW: i64 = 1_700_000_000_000;

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
        let mut m = Manifest {
            namespace: "d".into(),
            system: None,
            resources: Default::default(),
            entities: Default::default(),
        };
        let mut level = LevelConfig::default();
        level
            .limits
            .insert("rpm".into(), LimitSpec::bucket(5, 5, 60));
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

    fn apply_once(s: &MemoryStore, full: bool, token: &str, now_ms: i64) -> Applied {
        let m = manifest();
        let req = ApplyRequest {
            ns: "ns",
            manifest: &m,
            full,
            now_ms,
            token,
            applied_hash: "sha256:test",
            build: &build,
            refresh: Refresh::All,
            stop: &never_stop,
            saved: None,
        };
        apply(s, &req).unwrap()
    }

    fn leftover(s: &MemoryStore, owed: &Owed, token: &str, lease: i64, full: bool) {
        pending::write_ahead(s, "ns", owed, token, Share { lease, full }, NOW - 10).unwrap();
    }

    #[test]
    fn an_apply_writes_levels_record_and_releases_what_it_owed() {
        let s = MemoryStore::new();
        let done = apply_once(&s, false, "t1", NOW);
        assert_eq!((done.created, done.errors.len(), done.pending), (2, 0, 0));
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
        let owed = Owed {
            kind: FanOutKind::Sync,
            level: LevelKind::Entity,
            target: "u/r".into(),
        };
        leftover(&s, &owed, "dead", NOW + 5_000, false);
        let done = apply_once(&s, false, "t1", NOW);
        assert_eq!(done.pending, 1, "a live lease is left alone");
        let done = apply_once(&s, false, "t2", NOW + 10_000);
        assert_eq!(
            done.pending, 0,
            "an expired lease is claimed, run and released"
        );
        assert!(!done.resumed);
    }

    #[test]
    fn a_full_apply_resumes_an_interrupted_full_apply_change_only() {
        let s = MemoryStore::new();
        apply_once(&s, false, "t0", NOW);
        let owed = Owed {
            kind: FanOutKind::Cascade,
            level: LevelKind::Resource,
            target: "r".into(),
        };
        leftover(&s, &owed, "dead", NOW - 1, true);
        let done = apply_once(&s, true, "t1", NOW);
        assert!(done.resumed && done.full);
        assert_eq!((done.changes.len(), done.unchanged), (0, 2), "change-only");
        assert_eq!(done.pending, 0);
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
        assert_eq!((done.errors.len(), done.pending), (0, 0));
        let rec = s.item(&key.pk, &key.sk).unwrap();
        assert!(!rec.contains_key("cascade_pending"));
    }

    #[test]
    fn a_failed_fanout_stays_pending_and_expires_for_the_next_apply() {
        let s = MemoryStore::new();
        // The fan-out of a malformed target fails; its item must stay, claimable at once.
        let bad = Owed {
            kind: FanOutKind::Sync,
            level: LevelKind::Entity,
            target: "no-slash".into(),
        };
        leftover(&s, &bad, "dead", NOW - 1, false);
        let done = apply_once(&s, false, "t1", NOW);
        assert_eq!(done.pending, 1);
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
        let m = manifest();
        let build = caps_build(caps);
        let req = ApplyRequest {
            ns: "ns",
            manifest: &m,
            full: false,
            now_ms: NOW,
            token,
            applied_hash: "sha256:test",
            build: &build,
            refresh,
            stop: &never_stop,
            saved: None,
        };
        apply(s, &req).unwrap()
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
        record::invalidate(&s, "ns").unwrap();
        assert_eq!(
            plan_caps(&s, &[], Refresh::Trust).fallback,
            Some(Untrusted::Missing)
        );
    }
}
