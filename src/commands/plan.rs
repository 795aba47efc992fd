//! `limits plan`, `limits diff`, `limits apply [--full]` (docs/manifest.md,
//! docs/storage.md "Apply").
//!
//! Every command validates the manifest first and writes nothing when it is
//! invalid. plan and diff are read-only and refuse a store this client may not
//! use; apply initialises the store and registers the namespace when needed, as
//! the reference's `Repository.open` does, and plan and diff say so. `-N` is honoured (the reference ignores
//! it) and must agree with the manifest's `namespace`.
//!
//! Test-only environment variables, honoured only when set:
//! `ZAEL_FAULT_ABORT_AFTER_WRITES=N` (abort after the Nth store write, see
//! [`crate::apply::fault`]), `ZAEL_FAULT_FANOUT_ERROR=MSG` (every fan-out fails
//! with MSG), `ZAEL_TEST_CLOCK_OFFSET_MS=MS` ([`crate::clock::system_ms`]: so
//! an interrupted apply's leases and a dead apply's lock can expire without
//! waiting) and `ZAEL_TEST_PAUSE_AT=STEP` (pause at a step boundary; see
//! [`super::lock`]).
//!
//! apply takes the namespace's lock before it reads anything it plans from
//! ([`super::lock`]); `apply PLANFILE` carries out a saved plan
//! ([`super::saved_plan`]).

use std::path::Path;

use crate::apply::{counts, fault, pending, record, run, ApplyError};
use crate::cli::args::{ApplyArgs, PlanArgs, PlanCmdArgs, RefreshArg, TextOrJson};
use crate::cli::interrupt::Interrupt;
use crate::cli::output::FileArg;
use crate::cli::{progress, CliError};
use crate::exit_codes;
use crate::items::namespace;
use crate::manifest::{self, Manifest, Severity};
use crate::plan::digests::{self, Untrusted};
use crate::plan::level::Level;
use crate::plan::managed::{self, ManagedSet};
use crate::plan::output::{self, ApplyCounts, Command, Report, Setup};
use crate::plan::prepare::{builder, prepare_each, BuildFn, Prepared, Refresh};
use crate::plan::saved::{SavedPlan, StaleOr};
use crate::plan::version;
use crate::store::empty::EmptyStore;
use crate::store::{open, Store};

pub fn plan(args: PlanCmdArgs) -> Result<i32, CliError> {
    if let Some(out) = &args.out {
        let mut inputs = args.plan.store.input_files();
        inputs.extend(
            args.plan
                .file
                .as_deref()
                .map(|f| FileArg::new("-f/--file", "the manifest", f)),
        );
        crate::cli::output::refuse_overwriting_inputs(
            &[FileArg::new("-o/--out", "the plan", out.as_path())],
            &inputs,
        )?;
    }
    let out = args.out.clone();
    read_only(
        args.plan,
        Command::Plan,
        refresh(&args.refresh),
        out.as_deref(),
    )
}

pub fn diff(args: PlanArgs) -> Result<i32, CliError> {
    read_only(args, Command::Diff, Refresh::All, None)
}

pub use super::saved_plan::show_plan;

/// The manifest path (`-f`; clap requires it wherever it is needed).
fn manifest_path(args: &PlanArgs) -> Result<&Path, CliError> {
    args.file
        .as_deref()
        .ok_or_else(|| CliError::Usage("a manifest is required: -f FILE".into()))
}

/// Loads and validates the manifest; on errors prints the diagnostics and stops.
fn load(args: &PlanArgs) -> Result<(Manifest, Vec<String>), CliError> {
    match manifest::load_file(manifest_path(args)?) {
        Ok(loaded) => {
            let warnings = loaded
                .warnings
                .iter()
                .filter(|d| d.severity == Severity::Warning)
                .map(|d| d.message.clone())
                .collect();
            Ok((loaded.manifest, warnings))
        }
        Err(diags) => {
            crate::cli::output::eprint(manifest::render_text(&diags));
            Err(CliError::Reported(exit_codes::FAILURE))
        }
    }
}

/// The namespace to use: the manifest's, which `-N` (when given) must match.
fn namespace_name(args: &PlanArgs, m: &Manifest) -> Result<String, CliError> {
    match &args.namespace.namespace {
        Some(n) if *n != m.namespace => Err(CliError::Failed(format!(
            "-N/--namespace is '{n}' but the manifest {} declares namespace '{}'; they must agree",
            manifest_path(args)?.display(),
            m.namespace
        ))),
        _ => Ok(m.namespace.clone()),
    }
}

fn read_only(
    args: PlanArgs,
    command: Command,
    refresh: Refresh,
    save_to: Option<&Path>,
) -> Result<i32, CliError> {
    let (m, warnings) = load(&args)?;
    let name = namespace_name(&args, &m)?;
    // A local store without this table (or without a file at all) is compared
    // as empty: apply would create both, so every level is a create. So is a
    // namespace not registered yet, under the id a saved plan registers it
    // with. Nothing is created here.
    let (store, ns, setup): (Box<dyn Store>, String, Setup) = match open::open_for_plan(
        &args.store.target(),
        &args.name,
    )? {
        Some(store) => match super::read_only::planned_namespace(store.as_ref(), &name)? {
            Some(ns) => (store, ns, Setup::Ready),
            // Nothing is keyed by a fresh id yet: read nothing for it.
            None => (
                Box::new(EmptyStore::new(&args.name)),
                namespace::new_id()?,
                Setup::Namespace,
            ),
        },
        None => {
            // A saved plan names the namespace id its items are keyed by; a
            // store that does not exist yet has none to plan for.
            if save_to.is_some() {
                return Err(CliError::Failed(format!(
                    "table '{}' does not exist in the local store yet, so there is no namespace to save a plan for; create it first (`zae-limiter table create{}`, or apply once), then plan with -o",
                    args.name,
                    args.flags()
                )));
            }
            (
                Box::new(EmptyStore::new(&args.name)),
                namespace::new_id()?,
                Setup::Table(args.name.clone()),
            )
        }
    };
    let store = store.as_ref();
    let build = builder(&ns, &m);
    let build: &BuildFn<'_> = &build;
    let record = managed::read(store, &ns)?;
    let recorded = match refresh {
        Refresh::All => None,
        Refresh::Trust => Some(digests::read(store, &ns, record.stamp.as_deref())?),
    };
    // Only what output needs is kept of each change, unless the plan is
    // saved (the file holds the items).
    let mut changes = Vec::new();
    let bar = progress::Bar::stderr();
    let summary = prepare_each(
        store,
        &ns,
        &m,
        false,
        build,
        &record,
        recorded.as_ref(),
        &bar,
        &mut |pc| {
            changes.push(if save_to.is_some() {
                pc
            } else {
                pc.without_items()
            })
        },
    )?;
    drop(bar);
    let mut warnings = if command == Command::Plan {
        warnings
    } else {
        Vec::new()
    };
    warnings.extend(fallback_warning(summary.fallback.as_ref()));
    warnings.extend(summary.restarts.iter().cloned());
    // What the manifest declares and what its applies own.
    let mut known = ManagedSet::from_manifest(&m);
    known.extend(&record.all());
    if command == Command::Plan {
        warnings.extend(record.warnings());
        warnings.extend(record_size_warning(&ns, &m));
        if refresh == Refresh::All {
            let resources = known.entity_resources();
            let wrong = counts::check(store, &ns, &resources, record.counts_left.as_deref())?;
            warnings.extend(
                wrong
                    .iter()
                    .map(|r| format!("{r}; the next apply repairs it")),
            );
        }
    }
    // Stored levels this manifest leaves alone: Python enforces them, and no
    // change line would show them (docs/plan-apply.md).
    if refresh == Refresh::All && setup == Setup::Ready {
        let unknown = crate::plan::discover::unknown_levels(store, &ns, |l| known.contains(l))?;
        warnings.extend(unknown_levels_warning(&name, &unknown));
    }
    let left = pending::left(store, &ns, crate::clock::system_ms())?;
    let pending = left.count + record.cascade_pending.len();
    let report = Report {
        command,
        namespace: &name,
        changes: &changes,
        unchanged: summary.unchanged,
        pending,
        pending_leased_until: left.leased_until,
        full: false,
        resumed: false,
        warnings: warnings.clone(),
        setup: setup.clone(),
        applied: None,
    };
    if let Some(path) = save_to {
        let saved = SavedPlan {
            created_ms: crate::clock::system_ms(),
            tool_version: env!("CARGO_PKG_VERSION").into(),
            table: args.name.clone(),
            namespace: name.clone(),
            namespace_id: ns.clone(),
            register_namespace: setup == Setup::Namespace,
            manifest_file: manifest_path(&args)?.display().to_string(),
            manifest_hash: manifest::applied_hash(&m),
            manifest: m.clone(),
            no_refresh: refresh == Refresh::Trust,
            pending,
            warnings,
            prepared: Prepared {
                record,
                changes: changes.clone(),
                unchanged: summary.unchanged,
                unchanged_digests: summary.unchanged_digests,
                fallback: summary.fallback,
                forgotten: summary.forgotten,
            },
        };
        super::saved_plan::save(&saved, path)?;
    }
    emit(&report, args.format, args.quiet)?;
    if let Some(path) = save_to {
        super::saved_plan::saved_note(path, &args)?;
    }
    // Registering the namespace is a change even when no level is.
    Ok(exit_code(
        &args,
        !changes.is_empty() || setup != Setup::Ready,
        false,
    ))
}

/// Says so when the managed set the manifest declares does not fit the
/// `#PROVISIONER` record (docs/storage.md, "The managed set beyond the record").
fn record_size_warning(ns: &str, m: &Manifest) -> Option<String> {
    let declared = ManagedSet::from_manifest(m);
    let (fits, size) = record::record_size(ns, &declared);
    (!fits).then(|| {
        format!(
            "the {} levels this manifest manages need a #PROVISIONER record of {} KB, more than the {} KB one item holds: the record keeps what fits and this tool keeps the whole managed set in its own items; the reference's provisioner sees only the levels in the record (docs/storage.md, \"The managed set beyond the record\")",
            declared.len(),
            size / 1024,
            managed::record_limit() / 1024
        )
    })
}

pub fn apply(args: ApplyArgs) -> Result<i32, CliError> {
    // A bad --lock-timeout is a usage error before anything is read.
    super::lock::timeout_ms(&args.lock)?;
    if let Some(path) = args.plan_file.clone() {
        return super::saved_plan::apply(args, &path);
    }
    let full = args.full;
    let refresh = refresh(&args.refresh);
    let (m, _warnings) = load(&args.plan)?;
    let name = namespace_name(&args.plan, &m)?;
    let store = fault::wrap(open::open(&args.plan.store.target(), &args.plan.name)?);
    let store = store.as_ref();
    crate::items::version::ensure_initialized(store).map_err(|e| {
        CliError::failed(&e, |e| {
            format!("initialising the table (the version record and the default namespace): {e}")
        })
    })?;
    let rec = version::read(store)?;
    version::check_usable(rec.as_ref(), store)?;
    let registered = namespace::register(store, &name)
        .map_err(|e| CliError::failed(&e, |e| format!("registering namespace '{name}': {e}")))?;
    let ns = registered.id;
    let build = builder(&ns, &m);
    let hash = manifest::applied_hash(&m);
    let operation = format!("limits apply -f {}", manifest_path(&args.plan)?.display());
    let target = Target {
        name: &name,
        ns: &ns,
        operation,
        registered: registered.created,
    };
    let what = What {
        manifest: &m,
        build: &build,
        applied_hash: &hash,
        full,
        refresh,
        saved: None,
    };
    carry_out(store, &args, target, what)
}

/// Where an apply writes: the namespace's name (messages) and id, and the
/// command line the lock records.
pub(super) struct Target<'a> {
    pub name: &'a str,
    pub ns: &'a str,
    pub operation: String,
    /// This apply registered the namespace (the report says so).
    pub registered: bool,
}

/// What an apply carries out: a manifest, or a saved plan (with its manifest).
pub(super) struct What<'a> {
    pub manifest: &'a Manifest,
    pub build: &'a BuildFn<'a>,
    pub applied_hash: &'a str,
    pub full: bool,
    pub refresh: Refresh,
    pub saved: Option<Saved<'a>>,
}

/// A saved plan and the file it was read from.
#[derive(Clone, Copy)]
pub(super) struct Saved<'a> {
    pub plan: &'a SavedPlan,
    pub file: &'a Path,
}

/// The locked part of an apply, shared by manifests and saved plans: take
/// the lock (released on every path when its guard drops), check that a
/// saved plan is still fresh, run the steps (stopping at a safe point on a
/// signal or a lost lock), print the report.
pub(super) fn carry_out(
    store: &dyn Store,
    args: &ApplyArgs,
    target: Target<'_>,
    what: What<'_>,
) -> Result<i32, CliError> {
    let interrupt = Interrupt::install(
        "stopping at the next safe point, then releasing the lock (press Ctrl-C again to quit at once)",
    );
    let held = super::lock::take(
        store,
        &super::lock::Request {
            table: &args.plan.name,
            name: target.name,
            ns: target.ns,
            operation: target.operation,
            args: &args.lock,
            target: &args.plan.store.target(),
            now: crate::clock::system_ms,
        },
        &interrupt,
    )?;
    if let Some(saved) = what.saved {
        crate::plan::saved::check_fresh(store, target.ns, saved.plan).map_err(|e| match e {
            StaleOr::Stale(e) => super::saved_plan::renew(e, saved, args),
            StaleOr::Store(e) => CliError::failed(&e, |e| format!("checking the saved plan: {e}")),
        })?;
    }
    let token = crate::apply::new_token();
    let stop = super::lock::stop_check(&interrupt, held.as_ref());
    let bar = progress::Bar::stderr();
    let req = run::ApplyRequest {
        ns: target.ns,
        manifest: what.manifest,
        full: what.full,
        now_ms: crate::clock::system_ms(),
        token: &token,
        applied_hash: what.applied_hash,
        build: what.build,
        refresh: what.refresh,
        stop: &stop,
        saved: what.saved.map(|s| &s.plan.prepared),
        progress: &bar,
    };
    let done = run::apply(store, &req).map_err(|e| match (e, what.saved) {
        (ApplyError::Stale(e), Some(saved)) => super::saved_plan::renew(e, saved, args),
        (e, _) => e.into(),
    })?;
    drop(bar);
    let mut warnings: Vec<String> = fallback_warning(done.fallback.as_ref())
        .into_iter()
        .collect();
    warnings.extend(record_size_warning(target.ns, what.manifest));
    warnings.extend(done.warnings.iter().cloned());
    let report = Report {
        command: Command::Apply,
        namespace: target.name,
        changes: &done.changes,
        unchanged: done.unchanged,
        pending: done.pending.count,
        pending_leased_until: done.pending.leased_until,
        full: done.full,
        resumed: done.resumed,
        warnings,
        setup: if target.registered {
            Setup::Namespace
        } else {
            Setup::Ready
        },
        applied: Some(ApplyCounts {
            created: done.created,
            updated: done.updated,
            deleted: done.deleted,
            errors: done.errors.clone(),
        }),
    };
    emit(&report, args.plan.format, args.plan.quiet)?;
    Ok(exit_code(
        &args.plan,
        !done.changes.is_empty(),
        !done.errors.is_empty(),
    ))
}

fn refresh(args: &RefreshArg) -> Refresh {
    if args.no_refresh {
        Refresh::Trust
    } else {
        Refresh::All
    }
}

/// The stored levels that neither the manifest declares nor an apply of a
/// manifest wrote, a few by name.
fn unknown_levels_warning(namespace: &str, levels: &[Level]) -> Option<String> {
    const NAMED: usize = 5;
    if levels.is_empty() {
        return None;
    }
    let mut names: Vec<String> = levels
        .iter()
        .take(NAMED)
        .map(Level::manifest_path)
        .collect();
    if levels.len() > NAMED {
        names.push(format!("and {} more", levels.len() - NAMED));
    }
    Some(format!(
        "namespace '{namespace}' holds {} level(s) that this manifest does not declare and no apply of a manifest wrote: {}. Python clients enforce them; apply leaves them as they are. To manage them, add them to the manifest (`limits export` writes every stored level)",
        levels.len(),
        names.join(", ")
    ))
}

/// Says so when `--no-refresh` had to read every level after all.
fn fallback_warning(fallback: Option<&Untrusted>) -> Option<String> {
    fallback.map(|why| format!("--no-refresh: {why}; every declared level was read"))
}

pub(super) fn emit(report: &Report<'_>, format: TextOrJson, quiet: bool) -> Result<(), CliError> {
    match format {
        TextOrJson::Text => {
            let r = output::text(report, quiet);
            crate::cli::output::print(&r.stdout)?;
            crate::cli::output::eprint(&r.stderr);
        }
        TextOrJson::Json => {
            crate::cli::output::print_json(&output::json(report))?;
        }
    }
    Ok(())
}

/// 1 on errors; with `--detailed-exitcode` 2 when there are changes; else 0.
fn exit_code(args: &PlanArgs, changes: bool, errors: bool) -> i32 {
    if errors {
        exit_codes::FAILURE
    } else if args.detailed_exitcode && changes {
        exit_codes::CHANGES_PRESENT
    } else {
        exit_codes::OK
    }
}
