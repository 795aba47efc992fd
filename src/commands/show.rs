//! `entity get-limits`, `resource get-defaults`, `system get-defaults`: read
//! one level's config item and print it (text as the reference prints it, or
//! the JSON document described in [`crate::display::limits`]).
//!
//! Read-only, with the reference's refusals: a missing table, a table without
//! a usable version record, or an unregistered namespace is an error (exit 1),
//! and nothing is ever written.

use crate::cli::output;

use crate::cli::args::ReadArgs;
use crate::cli::CliError;
use crate::display::limits::{self, Subject};
use crate::items::config::{decode_level, StoredLevel};
use crate::items::keys;
use crate::store::{Key, Store};

/// Opens the store and resolves the namespace, refusing like the reference's
/// read-only `connect()`.
fn connect(read: &ReadArgs) -> Result<(Box<dyn Store>, String), CliError> {
    let store = read.target.open_read_only()?;
    let id = super::read_only::resolve_namespace(store.as_ref(), &read.target)?;
    Ok((store, id))
}

/// Reads and decodes one level; `what` names it in errors (`entity limits`, …).
fn read_level(store: &dyn Store, key: &Key, what: &str) -> Result<Option<StoredLevel>, CliError> {
    let words = |e: String| format!("Failed to get {what}: {e}");
    let item = store
        .get(key, false)
        .map_err(|e| CliError::failed(&e, words))?;
    item.map(|i| decode_level(&i).map_err(|e| CliError::failed(&e, words)))
        .transpose()
}

fn print(
    read: &ReadArgs,
    text: impl FnOnce() -> String,
    json: impl FnOnce() -> serde_json::Value,
) -> Result<i32, CliError> {
    output::text_or_json(read.format, text, json)?;
    Ok(crate::exit_codes::OK)
}

pub fn entity(entity_id: &str, resource: &str, read: ReadArgs) -> Result<i32, CliError> {
    keys::validate_entity_id(entity_id)?;
    keys::validate_entity_resource(resource)?;
    let (store, ns) = connect(&read)?;
    let key = keys::entity_config_key(&ns, entity_id, resource);
    let level = read_level(store.as_ref(), &key, "entity limits")?;
    print(
        &read,
        || limits::entity_text(entity_id, resource, level.as_ref()),
        || {
            limits::to_json(
                &read.target.namespace,
                Subject::Entity {
                    entity: entity_id,
                    resource,
                },
                level.as_ref(),
            )
        },
    )
}

pub fn resource(resource: &str, read: ReadArgs) -> Result<i32, CliError> {
    keys::validate_resource_name(resource)?;
    let (store, ns) = connect(&read)?;
    let key = keys::resource_config_key(&ns, resource);
    let level = read_level(store.as_ref(), &key, "resource defaults")?;
    print(
        &read,
        || limits::resource_text(resource, level.as_ref()),
        || {
            limits::to_json(
                &read.target.namespace,
                Subject::Resource(resource),
                level.as_ref(),
            )
        },
    )
}

pub fn system(read: ReadArgs) -> Result<i32, CliError> {
    let (store, ns) = connect(&read)?;
    let key = keys::system_config_key(&ns);
    let level = read_level(store.as_ref(), &key, "system defaults")?;
    print(
        &read,
        || limits::system_text(level.as_ref()),
        || limits::to_json(&read.target.namespace, Subject::System, level.as_ref()),
    )
}
