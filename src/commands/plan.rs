//! `limits plan`, `limits diff`, `limits apply [--full]` (docs/manifest.md,
//! docs/storage.md "Apply").
//!
//! Every command validates the manifest first and writes nothing when it is
//! invalid. plan and diff are read-only and refuse a store this client may not
//! use; apply initialises the store and registers the namespace when needed, as
//! the reference's `Repository.open` does. `-N` is honoured (the reference ignores
//! it) and must agree with the manifest's `namespace`.
//!
//! Test-only environment variables, honoured only when set:
//! `ZAEL_FAULT_ABORT_AFTER_WRITES=N` (abort after the Nth store write, see
//! [`crate::apply::fault`]), `ZAEL_FAULT_FANOUT_ERROR=MSG` (every fan-out fails
//! with MSG) and `ZAEL_TEST_CLOCK_OFFSET_MS=MS` ([`crate::clock::system_ms`]).

use crate::apply::{fault, pending, run};
use crate::cli::args::{ApplyArgs, PlanArgs, PlanCmdArgs, RefreshArg, TextOrJson};
use crate::cli::CliError;
use crate::exit_codes;
use crate::items::namespace;
use crate::manifest::{self, Manifest, Severity};
use crate::plan::digests::Untrusted;
use crate::plan::output::{self, ApplyCounts, Command, Report};
use crate::plan::prepare::{builder, prepare, BuildFn, Refresh};
use crate::plan::version;
use crate::store::empty::EmptyStore;
use crate::store::{open, Store};

pub fn plan(args: PlanCmdArgs) -> Result<i32, CliError> {
    read_only(args.plan, Command::Plan, refresh(&args.refresh))
}

pub fn diff(args: PlanArgs) -> Result<i32, CliError> {
    read_only(args, Command::Diff, Refresh::All)
}

/// Loads and validates the manifest; on errors prints the diagnostics and stops.
fn load(args: &PlanArgs) -> Result<(Manifest, Vec<String>), CliError> {
    match manifest::load_file(&args.file) {
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
            args.file.display(),
            m.namespace
        ))),
        _ => Ok(m.namespace.clone()),
    }
}

fn read_only(args: PlanArgs, command: Command, refresh: Refresh) -> Result<i32, CliError> {
    let (m, warnings) = load(&args)?;
    let name = namespace_name(&args, &m)?;
    // A local store without this table (or without a file at all) is compared
    // as empty: apply would create both, so every level is a create. Nothing is
    // created here.
    let (store, ns): (Box<dyn Store>, String) =
        match open::open_for_plan(&args.store.target(), &args.name)? {
            Some(store) => {
                let ns = super::read_only::resolve_namespace(store.as_ref(), &name)?;
                (store, ns)
            }
            None => (Box::new(EmptyStore::new(&args.name)), namespace::new_id()?),
        };
    let build = builder(&ns, &m);
    let build: &BuildFn<'_> = &build;
    let prepared = prepare(store.as_ref(), &ns, &m, false, build, refresh)?;
    let mut warnings = if command == Command::Plan {
        warnings
    } else {
        Vec::new()
    };
    warnings.extend(fallback_warning(prepared.fallback.as_ref()));
    let pending = pending::count(store.as_ref(), &ns)? + prepared.record.cascade_pending.len();
    let report = Report {
        command,
        namespace: &name,
        changes: &prepared.changes,
        unchanged: prepared.unchanged,
        pending,
        full: false,
        resumed: false,
        warnings,
        applied: None,
    };
    emit(&report, &args)?;
    Ok(exit_code(&args, !prepared.changes.is_empty(), false))
}

pub fn apply(args: ApplyArgs) -> Result<i32, CliError> {
    let full = args.full;
    let refresh = refresh(&args.refresh);
    let args = args.plan;
    let (m, _warnings) = load(&args)?;
    let name = namespace_name(&args, &m)?;
    let store = fault::wrap(open::open(&args.store.target(), &args.name)?);
    let store = store.as_ref();
    crate::items::version::ensure_initialized(store)?;
    let rec = version::read(store)?;
    version::check_usable(rec.as_ref(), store.table_name())?;
    let ns = namespace::register(store, &name)?.id;
    let build = builder(&ns, &m);
    let token = run::new_token();
    let hash = manifest::applied_hash(&m);
    let req = run::ApplyRequest {
        ns: &ns,
        manifest: &m,
        full,
        now_ms: crate::clock::system_ms(),
        token: &token,
        applied_hash: &hash,
        build: &build,
        refresh,
    };
    let done = run::apply(store, &req)?;
    let mut warnings: Vec<String> = fallback_warning(done.fallback.as_ref())
        .into_iter()
        .collect();
    warnings.extend(done.warnings.iter().cloned());
    let report = Report {
        command: Command::Apply,
        namespace: &name,
        changes: &done.changes,
        unchanged: done.unchanged,
        pending: done.pending,
        full: done.full,
        resumed: done.resumed,
        warnings,
        applied: Some(ApplyCounts {
            created: done.created,
            updated: done.updated,
            deleted: done.deleted,
            errors: done.errors.clone(),
        }),
    };
    emit(&report, &args)?;
    Ok(exit_code(
        &args,
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

/// Says so when `--no-refresh` had to read every level after all.
fn fallback_warning(fallback: Option<&Untrusted>) -> Option<String> {
    fallback.map(|why| format!("--no-refresh: {why}; every declared level was read"))
}

fn emit(report: &Report<'_>, args: &PlanArgs) -> Result<(), CliError> {
    match args.format {
        TextOrJson::Text => {
            let r = output::text(report, args.quiet);
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
