//! The refusals every read-only command shares (docs/manifest.md, "Plan, diff
//! and apply output"): no table, no usable version record, a client below
//! `client_min_version`, an unregistered namespace. Nothing here writes.

use crate::cli::shell::quote;
use crate::cli::CliError;
use crate::items::namespace;
use crate::plan::version;
use crate::store::Store;

/// Checks the table's version record and resolves namespace `name` to its id.
/// `flags`: how this command reached the table ([`TableArgs::flags`]), so the
/// suggested `namespace register` reaches it too.
///
/// [`TableArgs::flags`]: crate::cli::args::TableArgs::flags
pub fn resolve_namespace(store: &dyn Store, name: &str, flags: &str) -> Result<String, CliError> {
    let rec = version::read(store)?;
    version::check_usable(rec.as_ref(), store.table_name())?;
    namespace::resolve(store, name)?.ok_or_else(|| {
        CliError::Failed(format!(
            "Namespace '{name}' not found. Register it with `zae-limiter namespace register {}{flags}`.",
            quote(name)
        ))
    })
}

/// [`resolve_namespace`] for plan and diff, which show what apply would do:
/// a namespace not registered yet is no refusal (apply registers it), and
/// `None` says so; a deleted or purging one is refused as apply refuses it.
pub fn planned_namespace(store: &dyn Store, name: &str) -> Result<Option<String>, CliError> {
    let rec = version::read(store)?;
    version::check_usable(rec.as_ref(), store.table_name())?;
    Ok(namespace::registered(store, name)?)
}
