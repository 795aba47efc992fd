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

use crate::cli::args::{NamespaceCommand, StoreArgs, TextOrJson};
use crate::cli::CliError;
use crate::items::{namespace, version};
use crate::store::open;
use crate::store::Store;

fn open_store(store: &StoreArgs, table: &str) -> Result<Box<dyn Store>, CliError> {
    open::open(&store.target(), table).map_err(|e| CliError::Failed(e.to_string()))
}

pub fn run(cmd: NamespaceCommand) -> Result<i32, CliError> {
    match cmd {
        NamespaceCommand::Register {
            name_arg,
            name,
            store,
        } => register(&name_arg, &name, &store),
        NamespaceCommand::List {
            name,
            format,
            store,
        } => list(&name, format, &store),
    }
}

fn register(ns: &str, table: &str, args: &StoreArgs) -> Result<i32, CliError> {
    crate::items::keys::validate_namespace_name(ns).map_err(|e| CliError::Failed(e.to_string()))?;
    let store = open_store(args, table)?;
    if args.target().is_local() {
        version::ensure_initialized(store.as_ref()).map_err(|e| CliError::Failed(e.to_string()))?;
    } else {
        // The table must exist; registering never creates one on AWS.
        store
            .get(&crate::items::keys::version_key(), true)
            .map_err(|e| CliError::Failed(e.to_string()))?;
    }
    let reg =
        namespace::register(store.as_ref(), ns).map_err(|e| CliError::Failed(e.to_string()))?;
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

fn list(table: &str, format: TextOrJson, args: &StoreArgs) -> Result<i32, CliError> {
    let store =
        open::open_read_only(&args.target(), table).map_err(|e| CliError::Failed(e.to_string()))?;
    let records = namespace::list(store.as_ref()).map_err(|e| CliError::Failed(e.to_string()))?;
    if format == TextOrJson::Json {
        let doc = serde_json::json!({"version": 1, "namespaces": records});
        let text =
            serde_json::to_string_pretty(&doc).map_err(|e| CliError::Failed(e.to_string()))?;
        output::println(text)?;
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
