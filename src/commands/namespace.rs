//! `namespace register NAME` and `namespace list`.
//!
//! On the local store, `register` first initialises the table like the
//! reference's `Repository.open` (version record + `default` namespace), so a
//! store created this way is one the Python client accepts. On DynamoDB the
//! table must already exist.
//!
//! `list --format json` prints `{"version": 1, "namespaces": [{"name", "id",
//! "status", "created_at"}]}`, sorted by name.

use crate::cli::output;

use crate::cli::args::{NamespaceCommand, TableArgs, TextOrJson};
use crate::cli::CliError;
use crate::items::{namespace, version};

pub fn run(cmd: NamespaceCommand) -> Result<i32, CliError> {
    match cmd {
        NamespaceCommand::Register { name_arg, table } => register(&name_arg, &table),
        NamespaceCommand::List { format, table } => list(format, &table),
    }
}

fn register(ns: &str, table: &TableArgs) -> Result<i32, CliError> {
    crate::items::keys::validate_namespace_name(ns)?;
    let store = table.open()?;
    if table.store.target().is_local() {
        version::ensure_initialized(store.as_ref())?;
    } else {
        // The table must exist; registering never creates one on AWS.
        store.get(&crate::items::keys::version_key(), true)?;
    }
    let reg = namespace::register(store.as_ref(), ns)?;
    if reg.created {
        output::println(format!("Registered namespace '{ns}' (id: {})", reg.id))?;
    } else {
        output::println(format!(
            "Namespace '{ns}' already registered (id: {})",
            reg.id
        ))?;
    }
    Ok(crate::exit_codes::OK)
}

fn list(format: TextOrJson, table: &TableArgs) -> Result<i32, CliError> {
    let store = table.open_read_only()?;
    let records = namespace::list(store.as_ref())?;
    if format == TextOrJson::Json {
        output::print_json(&serde_json::json!({"version": 1, "namespaces": records}))?;
        return Ok(crate::exit_codes::OK);
    }
    output::stream(|out| {
        if records.is_empty() {
            return writeln!(out, "No namespaces registered");
        }
        let width = records
            .iter()
            .map(|r| r.name.len())
            .max()
            .unwrap_or(0)
            .max(4);
        writeln!(out, "{:<width$}  {:<11}  CREATED", "NAME", "ID")?;
        for r in &records {
            writeln!(
                out,
                "{:<width$}  {:<11}  {}",
                r.name,
                r.id,
                r.created_at.as_deref().unwrap_or("-")
            )?;
        }
        Ok(())
    })?;
    Ok(crate::exit_codes::OK)
}
