//! `limits export`: every level a namespace holds, written as a manifest
//! (docs/adopt.md). The levels are found as the Python client's listing
//! commands find them, plus the ones those miss ([`crate::plan::discover`]); each is read
//! by the one decoder of stored levels ([`decode_level`]) and written in the
//! manifest format ([`write`]). A level is exported only when its text loads
//! back through the manifest loader to an item with exactly the stored
//! limit content (what `limits plan` compares), so a plan of the export
//! against the same table shows no change; any other level is reported, with
//! why, and left out, never silently changed.

pub mod write;

use crate::items::config::{self, decode_level, limit_content};
use crate::manifest;
use crate::manifest::emit::{emit_indented, Node};
use crate::plan::level::Level;
use crate::store::{AttrValue, Item, Store, StoreError};

/// Where the levels were read, for the header comment.
#[derive(Debug, Clone)]
pub struct Origin<'a> {
    /// The namespace's name (the manifest's `namespace`).
    pub namespace: &'a str,
    /// Its opaque id (keys are built with it).
    pub namespace_id: &'a str,
    /// The table, e.g. `table 'demo' (local store .zae-limiter/local.sqlite)`.
    pub table: &'a str,
}

/// A level that cannot be written as a manifest, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Omitted {
    pub level: Level,
    pub reason: String,
    /// The last apply managed it: applying the export would delete it.
    pub managed: bool,
}

impl Omitted {
    /// Where the level would be in a manifest: `system`, `resources.gpt-4`,
    /// `entities.user-1.resources._default_`.
    pub fn path(&self) -> String {
        self.level.manifest_path()
    }

    /// `path: reason`, and the warning a managed level needs.
    pub fn describe(&self) -> String {
        let mut s = format!(
            "{}: {}",
            self.path(),
            self.reason.replace(['\n', '\r'], " ")
        );
        if self.managed {
            s.push_str(" (the last apply managed this level: applying the export as it is would delete it)");
        }
        s
    }
}

/// The export: the manifest text and the levels left out of it.
#[derive(Debug, Clone)]
pub struct Exported {
    pub text: String,
    /// Levels written.
    pub levels: usize,
    pub omitted: Vec<Omitted>,
}

/// Why the export could not be made at all.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error("{0}")]
    Store(#[from] StoreError),
    /// The assembled manifest failed to load although each level did alone: a
    /// bug, reported rather than written.
    #[error("the exported manifest does not load back ({0}); nothing was written")]
    NotReloadable(String),
}

/// Reads every level of the namespace and writes the manifest.
pub fn export(store: &dyn Store, origin: &Origin<'_>) -> Result<Exported, ExportError> {
    let ns = origin.namespace_id;
    let managed = crate::plan::managed::read(store, ns)?.managed;
    let levels = crate::plan::discover::levels(store, ns)?;
    let keys: Vec<_> = levels.iter().map(|l| l.key(ns)).collect();
    let items = store.batch_get(&keys, true)?;
    let mut written: Vec<(Level, Node)> = Vec::new();
    let mut omitted = Vec::new();
    for (level, item) in levels.into_iter().zip(items) {
        let Some(item) = item else { continue };
        match level_node(&level, &item, ns) {
            Ok(node) => written.push((level, node)),
            Err(reason) => omitted.push(Omitted {
                managed: managed.contains(&level),
                level,
                reason,
            }),
        }
    }
    let text = document(origin, &written, &omitted);
    // Every level loaded alone; the whole must too.
    manifest::load_str("export", &text).map_err(|diags| {
        ExportError::NotReloadable(
            diags
                .first()
                .map_or_else(String::new, |d| format!("line {}: {}", d.line, d.message)),
        )
    })?;
    Ok(Exported {
        text,
        levels: written.len(),
        omitted,
    })
}

/// A level as manifest YAML, once its text is known to load back to the
/// stored limit content; `Err` says why it cannot be.
fn level_node(level: &Level, item: &Item, ns: &str) -> Result<Node, String> {
    let stored = decode_level(item).map_err(|e| match e {
        config::CodecError::Unreadable { reason, .. } => format!("unreadable: {reason}"),
        other => other.to_string(),
    })?;
    let node = write::level(level, &stored)?;
    // The level alone, in a manifest of its own: what the loader makes of it.
    let alone = wrap(level, node.clone(), "export");
    let text = emit_indented(&alone);
    let loaded = manifest::load_str("level", &text).map_err(|diags| {
        let errors: Vec<String> = diags
            .iter()
            .filter(|d| d.severity == manifest::Severity::Error)
            .map(|d| d.message.clone())
            .collect();
        format!(
            "the manifest format cannot express it: {}",
            errors.join("; ")
        )
    })?;
    let rebuilt = level
        .build(ns, &loaded.manifest)
        .map_err(|e| e.to_string())?;
    let (want, got) = (limit_content(item), limit_content(&rebuilt));
    if want != got {
        return Err(differences(&want, &got));
    }
    Ok(node)
}

/// What the written level would change, attribute by attribute.
fn differences(stored: &Item, written: &Item) -> String {
    let mut out = Vec::new();
    for (k, v) in stored {
        match written.get(k) {
            None => out.push(format!(
                "the stored attribute {k} = {} has no manifest form",
                show(v)
            )),
            Some(w) if w != v => out.push(format!(
                "{k} would be written as {} (stored: {})",
                show(w),
                show(v)
            )),
            Some(_) => {}
        }
    }
    for (k, v) in written {
        if !stored.contains_key(k) {
            out.push(format!("{k} = {} would be added", show(v)));
        }
    }
    format!("a manifest cannot reproduce it exactly: {}", out.join("; "))
}

fn show(v: &AttrValue) -> String {
    match v {
        AttrValue::S(s) => format!("'{s}'"),
        AttrValue::N(n) => n.clone(),
        AttrValue::Bool(b) => b.to_string(),
        other => format!("{other:?}"),
    }
}

/// A manifest holding just `node` at `level`'s place.
fn wrap(level: &Level, node: Node, namespace: &str) -> Node {
    let top = |key: &str, value: Node| {
        Node::Map(vec![
            ("namespace".to_string(), Node::Str(namespace.to_string())),
            (key.to_string(), value),
        ])
    };
    match level {
        Level::System => top("system", node),
        Level::Resource(r) => top("resources", Node::Map(vec![(r.clone(), node)])),
        Level::Entity(e, r) => top(
            "entities",
            Node::Map(vec![(
                e.clone(),
                Node::Map(vec![(
                    "resources".to_string(),
                    Node::Map(vec![(r.clone(), node)]),
                )]),
            )]),
        ),
    }
}

/// The whole manifest: the header comment, then the levels in order (they
/// arrive sorted: system, resources by name, entities by id, each entity's
/// `_default_` first).
fn document(origin: &Origin<'_>, levels: &[(Level, Node)], omitted: &[Omitted]) -> String {
    let mut top = vec![(
        "namespace".to_string(),
        Node::Str(origin.namespace.to_string()),
    )];
    let mut resources = Vec::new();
    let mut entities: Vec<(String, Node)> = Vec::new();
    for (level, node) in levels {
        match level {
            Level::System => top.push(("system".to_string(), node.clone())),
            Level::Resource(r) => resources.push((r.clone(), node.clone())),
            Level::Entity(e, r) => {
                if entities.last().is_none_or(|(last, _)| last != e) {
                    entities.push((e.clone(), Node::Map(Vec::new())));
                }
                if let Some((_, Node::Map(rs))) = entities.last_mut() {
                    rs.push((r.clone(), node.clone()));
                }
            }
        }
    }
    if !resources.is_empty() {
        top.push(("resources".to_string(), Node::Map(resources)));
    }
    if !entities.is_empty() {
        let entities = entities
            .into_iter()
            .map(|(e, rs)| (e, Node::Map(vec![("resources".to_string(), rs)])))
            .collect();
        top.push(("entities".to_string(), Node::Map(entities)));
    }
    let mut text = format!(
        "# Exported by `zae-limiter limits export` from namespace '{}' of {}.\n\
         # `zae-limiter limits plan` of this file against that table shows no change to any\n\
         # level; `limits apply` then records these levels as managed by the manifest.\n",
        origin.namespace, origin.table
    );
    if !omitted.is_empty() {
        text.push_str(
            "# Levels that could not be written as a manifest, left out (and as they are):\n",
        );
        for o in omitted {
            text.push_str(&format!(
                "#   {}: {}\n",
                o.path(),
                o.reason.replace('\n', " ")
            ));
        }
    }
    text.push_str(&emit_indented(&Node::Map(top)));
    text
}
