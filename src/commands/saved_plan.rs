//! Saved plans at the command line ([`crate::plan::saved`]): `limits plan -o
//! FILE` writes one, `limits show-plan FILE` prints it as `plan` printed it,
//! and `limits apply PLANFILE` carries out exactly it.

use std::path::Path;

use crate::apply::fault;
use crate::cli::args::{namespace_flag, ApplyArgs, PlanArgs, ShowPlanArgs, TextOrJson};
use crate::cli::shell::quote;
use crate::cli::{output, CliError};
use crate::exit_codes;
use crate::items::namespace;
use crate::plan::output::{Command, Report, Setup};
use crate::plan::prepare::{builder, BuildFn, Refresh};
use crate::plan::saved::{SavedPlan, Stale};
use crate::plan::version;
use crate::store::open;

use super::plan::{carry_out, emit, Saved, Target, What};

/// The largest plan file read (a plan of 100,000 levels with both items is
/// well below it).
const MAX_PLAN_BYTES: u64 = 1024 * 1024 * 1024;

/// Writes `plan` to `path` (whole or not at all, through the one file writer).
pub fn save(plan: &SavedPlan, path: &Path) -> Result<(), CliError> {
    let text = plan.to_json();
    output::write_file(path, |w| w.write_all(text.as_bytes()))
}

/// After the plan's output: where it was saved and how to apply it.
pub fn saved_note(path: &Path, args: &PlanArgs) -> Result<(), CliError> {
    if args.format == TextOrJson::Text {
        output::println(format!(
            "\nSaved the plan to {}. To carry out exactly these changes: zae-limiter limits apply{} {}",
            path.display(),
            args.flags(),
            quote(&file_word(path)),
        ))?;
    }
    Ok(())
}

/// `path` as a file argument of a command line: one that starts with `-`
/// would read as an option, so it is written `./-…`.
fn file_word(path: &Path) -> String {
    let text = path.to_string_lossy();
    if text.starts_with('-') {
        format!("./{text}")
    } else {
        text.into_owned()
    }
}

/// A stale plan's error with the command that makes a new one: from the same
/// manifest, for the same table, store and namespace, into the same file.
pub(super) fn renew(e: Stale, saved: Saved<'_>, args: &ApplyArgs) -> CliError {
    let plan = saved.plan;
    // A manifest read from standard input has no file to name.
    let manifest = match plan.manifest_file.as_str() {
        "-" => "MANIFEST".to_string(),
        file => quote(&file_word(Path::new(file))).into_owned(),
    };
    CliError::Failed(format!(
        "{e}. Make a new plan (`zae-limiter limits plan -f {manifest}{}{} -o {}`) and apply that",
        args.plan.flags(),
        namespace_flag(&plan.namespace),
        quote(&file_word(saved.file)),
    ))
}

/// Reads and checks a plan file.
fn read(path: &Path) -> Result<SavedPlan, CliError> {
    let cant = |why: String| {
        CliError::Failed(format!(
            "cannot use {} as a saved plan: {why}",
            path.display()
        ))
    };
    let file = std::fs::File::open(path).map_err(|e| cant(e.to_string()))?;
    let mut bytes = Vec::new();
    crate::input::read_to_end(file, MAX_PLAN_BYTES, &mut bytes).map_err(|e| cant(e.to_string()))?;
    let text = String::from_utf8(bytes).map_err(|_| cant("it is not UTF-8 text".into()))?;
    SavedPlan::from_json(&text).map_err(|e| cant(e.to_string()))
}

/// `limits show-plan FILE`.
pub fn show_plan(args: ShowPlanArgs) -> Result<i32, CliError> {
    let plan = read(&args.file)?;
    let p = &plan.prepared;
    let report = Report {
        command: Command::Plan,
        namespace: &plan.namespace,
        changes: &p.changes,
        unchanged: p.unchanged,
        pending: plan.pending,
        pending_leased_until: None,
        full: false,
        resumed: false,
        warnings: plan.warnings.clone(),
        setup: if plan.register_namespace {
            Setup::Namespace
        } else {
            Setup::Ready
        },
        applied: None,
    };
    if args.format == TextOrJson::Text {
        output::eprintln(format!(
            "Saved plan for table '{}', namespace '{}', made {} from {} against {}",
            plan.table,
            plan.namespace,
            crate::clock::rfc3339(plan.created_ms),
            plan.manifest_file,
            p.record.identity.describe()
        ));
    }
    emit(&report, args.format, args.quiet)?;
    Ok(exit_codes::OK)
}

/// `limits apply PLANFILE`: the saved plan's changes, refused when stale.
pub fn apply(args: ApplyArgs, path: &Path) -> Result<i32, CliError> {
    let plan = read(path)?;
    let saved = Saved {
        plan: &plan,
        file: path,
    };
    if args.plan.name != plan.table {
        return Err(CliError::Failed(format!(
            "{} is a plan for table '{}', not '{}'; nothing was written",
            path.display(),
            plan.table,
            args.plan.name
        )));
    }
    if let Some(n) = args
        .plan
        .namespace
        .namespace
        .as_ref()
        .filter(|n| **n != plan.namespace)
    {
        return Err(CliError::Failed(format!(
            "-N/--namespace is '{n}' but {} is a plan for namespace '{}'; nothing was written",
            path.display(),
            plan.namespace
        )));
    }
    let store = fault::wrap(open::open(&args.plan.store.target(), &args.plan.name)?);
    let store = store.as_ref();
    let rec = version::read(store)?;
    version::check_usable(rec.as_ref(), store)?;
    let build = builder(&plan.namespace_id, &plan.manifest);
    let build: &BuildFn<'_> = &build;
    plan.verify(build).map_err(|e| {
        CliError::Failed(format!(
            "cannot use {} as a saved plan: {e}",
            path.display()
        ))
    })?;
    let (ns, registered) = match namespace::resolve(store, &plan.namespace)? {
        Some(ns) => (ns, false),
        // Planned before the namespace existed: register it, under the id
        // the plan's items are keyed by, as a manifest's apply would.
        None if plan.register_namespace => {
            let r = namespace::register_as(store, &plan.namespace, &plan.namespace_id).map_err(
                |e| {
                    CliError::failed(&e, |e| {
                        format!("registering namespace '{}': {e}", plan.namespace)
                    })
                },
            )?;
            (r.id, r.created)
        }
        None => {
            let e = Stale(format!(
                "namespace '{}' is not registered any more",
                plan.namespace
            ));
            return Err(renew(e, saved, &args));
        }
    };
    plan.same_namespace(&ns)
        .map_err(|e| renew(e, saved, &args))?;
    let target = Target {
        name: &plan.namespace,
        ns: &ns,
        operation: format!("limits apply {}", path.display()),
        registered,
    };
    let what = What {
        manifest: &plan.manifest,
        build,
        applied_hash: &plan.manifest_hash,
        full: false,
        refresh: Refresh::All,
        saved: Some(saved),
    };
    carry_out(store, &args, target, what)
}
