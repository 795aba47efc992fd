//! The plan both `limits plan` and `limits apply` start from: the declared
//! changes, the item each would write, the live item it would replace, and which
//! of them actually change something.

use crate::apply::detail::{details, Detail};
use crate::apply::diff::{compute_diff, read_live, same_content};
use crate::apply::kinds::{self, KindChanges};
use crate::apply::level::{Action, Change, Level};
use crate::apply::managed::{self, ProvisionerRecord};
use crate::manifest::Manifest;
use crate::store::{Item, Store, StoreError};

/// Builds the config item a declared level would be written as (the item codec).
/// `Err` is a level that cannot be built (e.g. two timezones on one item); such a
/// change is kept and fails at apply with that message.
pub type BuildFn<'a> = dyn Fn(&Level) -> Result<Item, String> + 'a;

/// One change that survives `drop_unchanged`.
#[derive(Debug, Clone)]
pub struct PlannedChange {
    pub change: Change,
    /// The item to write; `None` for a delete.
    pub desired: Option<Result<Item, String>>,
    /// The live item read before any write (`None` = absent).
    pub live: Option<Item>,
    pub details: Vec<Detail>,
}

#[derive(Debug, Clone)]
pub struct Prepared {
    pub record: ProvisionerRecord,
    /// Changes to carry out, in the reference's order.
    pub changes: Vec<PlannedChange>,
    /// Declared changes dropped because the live item already matches.
    pub unchanged: usize,
}

/// Why there is no plan: the store failed, or the manifest changes a limit's
/// kind (refused before anything is written; see [`crate::apply::kinds`]).
#[derive(Debug, thiserror::Error)]
pub enum PrepareError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    KindChange(#[from] KindChanges),
}

impl From<PrepareError> for crate::cli::CliError {
    /// Both are one-line (per refusal) explanations: exit 1, like other refusals.
    fn from(e: PrepareError) -> Self {
        match e {
            PrepareError::Store(e) => e.into(),
            PrepareError::KindChange(e) => crate::cli::CliError::Failed(e.to_string()),
        }
    }
}

/// Reads the managed set and the live items (one batched read) and keeps the
/// changes that matter. With `full`, nothing is dropped. A limit that would
/// change to or from a concurrency limit refuses the whole plan.
pub fn prepare(
    store: &dyn Store,
    ns: &str,
    manifest: &Manifest,
    full: bool,
    build: &BuildFn<'_>,
) -> Result<Prepared, PrepareError> {
    let record = managed::read(store, ns)?;
    prepare_with_record(store, ns, manifest, full, build, record)
}

/// [`prepare`] with the `#PROVISIONER` record already read (apply reads it
/// first; on a large manifest it is a large item).
pub fn prepare_with_record(
    store: &dyn Store,
    ns: &str,
    manifest: &Manifest,
    full: bool,
    build: &BuildFn<'_>,
    record: crate::apply::managed::ProvisionerRecord,
) -> Result<Prepared, PrepareError> {
    let declared = compute_diff(manifest, &record.managed);
    let live = read_live(store, ns, &declared)?;
    let total = declared.len();
    let mut changes = Vec::new();
    let mut kind_changes = Vec::new();
    for (change, live) in declared.into_iter().zip(live) {
        let desired = match change.action {
            Action::Delete => None,
            Action::Create | Action::Update => Some(build(&change.level)),
        };
        if let Some(Ok(item)) = &desired {
            kind_changes.extend(kinds::check(&change.level, live.as_ref(), Some(item)));
        }
        let unchanged =
            !full && matches!((&desired, &live), (Some(Ok(d)), Some(l)) if same_content(d, l));
        if unchanged {
            continue;
        }
        let new_item = match &desired {
            Some(Ok(item)) => Some(item),
            _ => None,
        };
        let mut d = if matches!(desired, Some(Err(_))) {
            Vec::new()
        } else {
            let mut d = details(live.as_ref(), new_item);
            kinds::merge_details(&mut d, kinds::details(live.as_ref(), new_item));
            d
        };
        if let Some(Err(e)) = &desired {
            d.push(Detail::error(e.clone()));
        }
        changes.push(PlannedChange {
            change,
            desired,
            live,
            details: d,
        });
    }
    if !kind_changes.is_empty() {
        return Err(KindChanges(kind_changes).into());
    }
    let unchanged = total - changes.len();
    Ok(Prepared {
        record,
        changes,
        unchanged,
    })
}
