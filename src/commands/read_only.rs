//! The refusals every read-only command shares (docs/manifest.md, "Plan, diff
//! and apply output"): no table, no usable version record, a client below
//! `client_min_version`, an unregistered namespace. Nothing here writes.

use crate::cli::CliError;
use crate::items::namespace;
use crate::plan::version;
use crate::store::Store;

/// Checks the table's version record and resolves namespace `name` to its id.
pub fn resolve_namespace(store: &dyn Store, name: &str) -> Result<String, CliError> {
    let rec = version::read(store)?;
    version::check_usable(rec.as_ref(), store.table_name())?;
    namespace::resolve(store, name)?.ok_or_else(|| {
        CliError::Failed(format!(
            "Namespace '{name}' not found. Register it with 'zae-limiter namespace register {name}'."
        ))
    })
}
