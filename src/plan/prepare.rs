//! The plan both `limits plan` and `limits apply` start from: the declared
//! changes, the item each would write, the live item it would replace, and which
//! of them actually change something.
//!
//! Levels are built, read and compared [`CHUNK`] at a time and each change is
//! handed to the caller as soon as it is known ([`prepare_each`]), so a plan
//! holds one chunk's items whatever the manifest's size; the caller keeps
//! what it needs of each change.

use crate::items::config::CodecError;
use crate::manifest::Manifest;
use crate::plan::detail::{details, Detail};
use crate::plan::diff::{declared_changes, read_live, same_content};
use crate::plan::digests::{self, Digest, Recorded, Untrusted};
use crate::plan::kinds::{self, KindChanges};
use crate::plan::level::{Action, Change, Level};
use crate::plan::managed::{self, ProvisionerRecord};
use crate::progress::{Progress, Silent};
use crate::store::{Item, Store, StoreError};

/// Levels built, read and compared at a time: as many as the DynamoDB store
/// reads at once (16 requests of 100 keys in flight).
pub const CHUNK: usize = 1_600;

/// Builds the config item a declared level would be written as (the item codec).
/// `Err` is a level that cannot be built (e.g. two timezones on one item); such a
/// change is kept and fails at apply with that message.
pub type BuildFn<'a> = dyn Fn(&Level) -> Result<Item, BuildError> + 'a;

/// Why a declared level has no item to write.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BuildError {
    #[error("level {0} is not declared")]
    NotDeclared(String),
    #[error("{0}")]
    Codec(#[from] CodecError),
    /// The reason a saved plan recorded (`limits plan -o`), read back.
    #[error("{0}")]
    Saved(String),
}

/// The item codec for the levels manifest `m` declares, in namespace `ns`.
pub fn builder<'a>(
    ns: &'a str,
    m: &'a Manifest,
) -> impl Fn(&Level) -> Result<Item, BuildError> + 'a {
    move |level: &Level| level.build(ns, m)
}

/// The item a change would write: `None` for a delete, `Err` when it cannot be built.
pub type Desired = Option<Result<Item, BuildError>>;

/// One change that survives `drop_unchanged`.
#[derive(Debug, Clone)]
pub struct PlannedChange {
    pub change: Change,
    /// The item to write; `None` for a delete.
    pub desired: Desired,
    /// The live item read before any write (`None` = absent).
    pub live: Option<Item>,
    pub details: Vec<Detail>,
}

impl PlannedChange {
    /// Its rolling windows whose length changes ([`kinds::restarts`]).
    pub fn restarts(&self) -> Vec<String> {
        let desired = self.desired.as_ref().and_then(|d| d.as_ref().ok());
        kinds::restarts(&self.change.level, self.live.as_ref(), desired)
    }

    /// A change with its attribute-level detail computed from the two items
    /// (or the reason the desired item cannot be built).
    pub fn new(change: Change, desired: Desired, live: Option<Item>) -> Self {
        let details = match &desired {
            Some(Err(e)) => vec![Detail::error(e.to_string())],
            Some(Ok(item)) => details(live.as_ref(), Some(item)),
            None => details(live.as_ref(), None),
        };
        PlannedChange {
            change,
            desired,
            live,
            details,
        }
    }

    /// The change without its items (what output needs): a plan of many
    /// levels keeps only this.
    pub fn without_items(mut self) -> Self {
        self.live = None;
        if matches!(self.desired, Some(Ok(_))) {
            self.desired = None;
        }
        self
    }
}

#[derive(Debug, Clone)]
pub struct Prepared {
    pub record: ProvisionerRecord,
    /// Changes to carry out, in the reference's order.
    pub changes: Vec<PlannedChange>,
    /// Declared changes dropped because the live item already matches.
    pub unchanged: usize,
    /// The digests of those unchanged levels (apply records them again).
    pub unchanged_digests: Vec<Digest>,
    /// `--no-refresh` could not use the recorded digests, so every level was read.
    pub fallback: Option<Untrusted>,
    /// Deletes dropped because only an unconfirmed set held the level and it
    /// does not exist.
    pub forgotten: Vec<Level>,
}

/// What [`prepare_each`] found besides the changes it handed out.
#[derive(Debug, Clone, Default)]
pub struct Summary {
    pub unchanged: usize,
    pub unchanged_digests: Vec<Digest>,
    pub fallback: Option<Untrusted>,
    pub forgotten: Vec<Level>,
    /// Rolling windows whose length changes: [`kinds::restarts`].
    pub restarts: Vec<String>,
}

/// Why there is no plan: the store failed, or the manifest changes a limit's
/// kind (refused before anything is written; see [`crate::plan::kinds`]).
#[derive(Debug, thiserror::Error)]
pub enum PrepareError {
    #[error("{0}")]
    Store(#[from] StoreError),
    #[error("{0}")]
    KindChange(#[from] KindChanges),
}

/// How plan and apply learn what the levels hold now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refresh {
    /// Read every declared level (the reference's behaviour).
    All,
    /// `--no-refresh`: take a level whose desired content matches a digest the
    /// last apply recorded as unchanged, without reading it ([`digests`]).
    Trust,
}

/// Reads the managed set and the live items and keeps the changes that
/// matter, with their items. With `full`, nothing is dropped. A limit that
/// would change to or from a concurrency limit refuses the whole plan.
pub fn prepare(
    store: &dyn Store,
    ns: &str,
    manifest: &Manifest,
    full: bool,
    build: &BuildFn<'_>,
    refresh: Refresh,
) -> Result<Prepared, PrepareError> {
    let record = managed::read(store, ns)?;
    let recorded = match refresh {
        Refresh::All => None,
        Refresh::Trust => Some(digests::read(store, ns, record.stamp.as_deref())?),
    };
    let mut changes = Vec::new();
    let summary = prepare_each(
        store,
        ns,
        manifest,
        full,
        build,
        &record,
        recorded.as_ref(),
        &Silent,
        &mut |pc| changes.push(pc),
    )?;
    Ok(Prepared {
        record,
        changes,
        unchanged: summary.unchanged,
        unchanged_digests: summary.unchanged_digests,
        fallback: summary.fallback,
        forgotten: summary.forgotten,
    })
}

/// [`prepare`] with the `#PROVISIONER` record already read (apply reads it
/// first) and, for `--no-refresh`, the recorded digests: hands each change
/// to `sink` in the reference's order as soon as its chunk is read, and
/// reports progress as levels are read. On `Err` the changes handed out are
/// no plan (a kind change is found only once every level was read).
#[allow(clippy::too_many_arguments)]
pub fn prepare_each(
    store: &dyn Store,
    ns: &str,
    manifest: &Manifest,
    full: bool,
    build: &BuildFn<'_>,
    record: &ProvisionerRecord,
    recorded: Option<&Recorded>,
    progress: &dyn Progress,
    sink: &mut dyn FnMut(PlannedChange),
) -> Result<Summary, PrepareError> {
    let declared = declared_changes(manifest, &record.managed, &record.all());
    let mut summary = Summary {
        fallback: recorded.and_then(|r| r.digests.as_ref().err().cloned()),
        ..Default::default()
    };
    let trusted = recorded.and_then(|r| r.digests.as_ref().ok());
    // `--no-refresh`: a level whose digest was recorded is not read.
    let known = |d: &Option<Digest>| {
        !full && matches!((trusted, d), (Some(set), Some(d)) if set.contains(d))
    };
    progress.phase("reading levels", declared.len() as u64);
    let mut kind_changes = Vec::new();
    for chunk in declared.chunks(CHUNK) {
        // The item each change would write, and its digest when it has one.
        let desired: Vec<(Desired, Option<Digest>)> = chunk
            .iter()
            .map(|change| match change.action {
                Action::Delete => (None, None),
                Action::Create | Action::Update => {
                    let item = build(&change.level);
                    let d = item
                        .as_ref()
                        .ok()
                        .map(|i| digests::digest(&change.level.key(ns), i));
                    (Some(item), d)
                }
            })
            .collect();
        let to_read: Vec<Change> = chunk
            .iter()
            .zip(&desired)
            .filter(|(_, (_, d))| !known(d))
            .map(|(c, _)| c.clone())
            .collect();
        let mut read = read_live(store, ns, &to_read)?.into_iter();
        for (change, (desired, digest)) in chunk.iter().zip(desired) {
            if known(&digest) {
                summary.unchanged += 1;
                summary.unchanged_digests.extend(digest);
                continue;
            }
            let live = read.next().flatten();
            if change.action == Action::Delete
                && live.is_none()
                && !record.managed.contains(&change.level)
            {
                // Only an apply that died (or a record since rewritten)
                // named it, and it was never written: nothing to delete.
                summary.forgotten.push(change.level.clone());
                continue;
            }
            if let Some(Ok(item)) = &desired {
                kind_changes.extend(kinds::check(&change.level, live.as_ref(), Some(item)));
            }
            let unchanged =
                !full && matches!((&desired, &live), (Some(Ok(d)), Some(l)) if same_content(d, l));
            if unchanged {
                summary.unchanged += 1;
                summary.unchanged_digests.extend(digest);
                continue;
            }
            let pc = PlannedChange::new(change.clone(), desired, live);
            summary.restarts.extend(pc.restarts());
            sink(pc);
        }
        progress.advance(chunk.len() as u64);
    }
    if !kind_changes.is_empty() {
        return Err(KindChanges(kind_changes).into());
    }
    Ok(summary)
}
