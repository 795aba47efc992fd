//! `zae-limiter limits export [-N NAMESPACE] [-o FILE]`: every level of a
//! namespace as a manifest ([`crate::export`]). Read-only, with the refusals
//! of the other read-only commands. Levels the format cannot express are
//! named on stderr and left out; the rest is still written, and the exit
//! code is 1.

use crate::cli::args::ExportArgs;
use crate::cli::output::FileArg;
use crate::cli::{output, CliError};
use crate::exit_codes;
use crate::export::{self, Origin};
use crate::store::open::Target;

pub fn run(args: ExportArgs) -> Result<i32, CliError> {
    let a = &args.store;
    if let Some(path) = &args.output {
        output::refuse_overwriting_inputs(
            &[FileArg::new("-o/--output", "the manifest", path.as_path())],
            &a.table.store.input_files(),
        )?;
    }
    let store = a.open_read_only()?;
    let ns = super::read_only::resolve_namespace(store.as_ref(), a)?;
    let name = &a.table.name;
    let table = match a.table.store.target() {
        Target::Local(path) => format!("table '{name}' (local store {})", path.display()),
        Target::DynamoDb { .. } => format!("DynamoDB table '{name}'"),
    };
    let origin = Origin {
        namespace: &a.namespace,
        namespace_id: &ns,
        table: &table,
    };
    let exported = export::export(store.as_ref(), &origin)?;
    match &args.output {
        Some(path) => output::write_file(path, |out| out.write_all(exported.text.as_bytes()))?,
        None => output::print(&exported.text)?,
    }
    if exported.omitted.is_empty() {
        return Ok(exit_codes::OK);
    }
    let mut msg = format!(
        "{} of {} levels of namespace '{}' cannot be written as a manifest and were left out (they stay as they are; the others were exported):",
        exported.omitted.len(),
        exported.omitted.len() + exported.levels,
        a.namespace
    );
    for o in &exported.omitted {
        msg.push_str(&format!("\n  {}", o.describe()));
    }
    Err(CliError::Failed(msg))
}
