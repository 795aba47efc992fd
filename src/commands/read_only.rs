//! The refusals every read-only command shares (docs/manifest.md, "Plan, diff
//! and apply output"): no table, no usable version record, a client below
//! `client_min_version`, an unregistered namespace. Nothing here writes.

use crate::cli::args::NamespacedArgs;
use crate::cli::CliError;
use crate::items::namespace;
use crate::plan::version;
use crate::store::Store;

/// Checks the table's version record and resolves the namespace `args` name
/// to its id; one that is not registered is refused with the command that
/// registers it on the same table ([`NamespacedArgs::flags`]).
pub fn resolve_namespace(store: &dyn Store, args: &NamespacedArgs) -> Result<String, CliError> {
    let rec = version::read(store)?;
    version::check_usable(rec.as_ref(), store)?;
    let name = &args.namespace;
    namespace::resolve(store, name)?.ok_or_else(|| {
        CliError::Failed(format!(
            "Namespace '{name}' not found. Register it with `{}`.",
            args.table.register_command(name)
        ))
    })
}

/// [`resolve_namespace`] for plan and diff, which show what apply would do:
/// a namespace not registered yet is no refusal (apply registers it), and
/// `None` says so; a deleted or purging one is refused as apply refuses it.
pub fn planned_namespace(store: &dyn Store, name: &str) -> Result<Option<String>, CliError> {
    let rec = version::read(store)?;
    version::check_usable(rec.as_ref(), store)?;
    Ok(namespace::registered(store, name)?)
}
