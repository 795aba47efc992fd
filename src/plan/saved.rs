//! Saved plans (docs/storage.md, "Saved plans"): `limits plan -o FILE`
//! writes the exact change set, `limits apply PLANFILE` carries out exactly it
//! without the manifest, and `limits show-plan FILE` prints it as `plan` did.
//!
//! The file is versioned JSON ([`FORMAT`], [`VERSION`]) that a CI job can
//! archive and a person can read: what it was made for (table, namespace and
//! its id, the tool version), the identity of the `#PROVISIONER` record it
//! was computed against ([`RecordIdentity`]), every change with its
//! attribute-level detail, the item read and the item to write, the digests
//! of the levels found unchanged, and the normalised manifest (which apply
//! needs for the version gates, the managed set and the `disabled`
//! re-assertion).
//!
//! A plan is **stale** ([`check_fresh`], [`resume`]) when the record is not
//! the one it was made against (another apply ran since), when a level it
//! changes no longer holds what was read, or when the namespace was
//! registered again under another id. A stale plan is refused before
//! anything is written.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::manifest::{self, Manifest};
use crate::plan::detail::Detail;
use crate::plan::digests::Digest;
use crate::plan::identity::RecordIdentity;
use crate::plan::level::{Action, Change, Level};
use crate::plan::managed::ProvisionerRecord;
use crate::plan::prepare::{BuildError, BuildFn, PlannedChange, Prepared};
use crate::store::typed_json::{item_from_json, item_to_json};
use crate::store::{Item, Store, StoreError};

/// The `format` field every plan file starts with.
pub const FORMAT: &str = "zae-limiter-plan";
/// The plan file version this build writes and reads.
pub const VERSION: u64 = 1;

/// A plan as saved: what it was made for, and the plan itself.
#[derive(Debug, Clone)]
pub struct SavedPlan {
    pub created_ms: i64,
    /// The zae-limiter version that made it (only that version applies it).
    pub tool_version: String,
    pub table: String,
    /// The namespace name and the id it resolved to.
    pub namespace: String,
    pub namespace_id: String,
    /// The namespace was not registered when the plan was made: apply
    /// registers it under `namespace_id` (the id its items are keyed by).
    pub register_namespace: bool,
    /// The manifest file it was made from (for people; never read again).
    pub manifest_file: String,
    pub manifest_hash: String,
    pub manifest: Manifest,
    pub no_refresh: bool,
    /// Pending fan-outs when it was made (shown by `show-plan`).
    pub pending: usize,
    pub warnings: Vec<String>,
    /// The changes; `record` holds only the identity it was made against.
    pub prepared: Prepared,
}

/// The file's top level, in the order it is written.
#[derive(Serialize, Deserialize)]
struct PlanFile {
    format: String,
    version: u64,
    tool_version: String,
    created: String,
    table: String,
    namespace: String,
    namespace_id: String,
    #[serde(default)]
    register_namespace: bool,
    manifest_file: String,
    manifest_hash: String,
    record: RecordIdentity,
    no_refresh: bool,
    summary: Summary,
    warnings: Vec<String>,
    changes: Vec<ChangeFile>,
    unchanged_digests: Vec<String>,
    manifest: Value,
}

#[derive(Serialize, Deserialize)]
struct Summary {
    changes: usize,
    unchanged: usize,
    pending: usize,
}

/// One change: the plan's JSON change (`action`, `level`, `target`,
/// `details`) plus the item read and the item to write (DynamoDB typed JSON),
/// or why the item cannot be built. The details are for people: they are
/// computed again from the two items when the file is read.
#[derive(Serialize, Deserialize)]
struct ChangeFile {
    action: String,
    level: String,
    target: Option<String>,
    #[serde(default, skip_deserializing)]
    details: Vec<Detail>,
    live: Option<Value>,
    desired: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

/// Why a file cannot be used as a saved plan.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SavedPlanError {
    #[error("it is not a saved plan: {0} (`limits plan -o FILE` writes one; to apply a manifest, use -f MANIFEST)")]
    NotAPlan(String),
    #[error("it is a plan file of version {0}; this zae-limiter reads version {VERSION}: make the plan again with this version")]
    Version(u64),
    #[error(
        "it was made by zae-limiter {found}; this is {this}: make the plan again with this version"
    )]
    ToolVersion { found: String, this: String },
    #[error("it is damaged or was edited: {0}")]
    Invalid(String),
}

/// Why a saved plan no longer applies.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
/// The CLI adds the command that makes a new plan (with the store flags).
#[error("saved plan is stale: {0}; nothing was written")]
pub struct Stale(pub String);

impl SavedPlan {
    /// The file's text (pretty JSON).
    pub fn to_json(&self) -> String {
        let p = &self.prepared;
        let file = PlanFile {
            format: FORMAT.into(),
            version: VERSION,
            tool_version: self.tool_version.clone(),
            created: crate::clock::rfc3339(self.created_ms),
            table: self.table.clone(),
            namespace: self.namespace.clone(),
            namespace_id: self.namespace_id.clone(),
            register_namespace: self.register_namespace,
            manifest_file: self.manifest_file.clone(),
            manifest_hash: self.manifest_hash.clone(),
            record: p.record.identity.clone(),
            no_refresh: self.no_refresh,
            summary: Summary {
                changes: p.changes.len(),
                unchanged: p.unchanged,
                pending: self.pending,
            },
            warnings: self.warnings.clone(),
            changes: p.changes.iter().map(change_file).collect(),
            unchanged_digests: p.unchanged_digests.iter().map(hex).collect(),
            manifest: manifest::normalised_json(&self.manifest),
        };
        let mut text = serde_json::to_string_pretty(&file).unwrap_or_default();
        text.push('\n');
        text
    }

    /// Reads a plan file's text. Refuses another format or version, a plan
    /// of another tool version, and a file whose parts disagree.
    pub fn from_json(text: &str) -> Result<SavedPlan, SavedPlanError> {
        let v: Value = serde_json::from_str(text)
            .map_err(|e| SavedPlanError::NotAPlan(format!("not JSON ({e})")))?;
        if v.get("format").and_then(Value::as_str) != Some(FORMAT) {
            return Err(SavedPlanError::NotAPlan(format!(
                "no \"format\": \"{FORMAT}\" field"
            )));
        }
        match v.get("version").and_then(Value::as_u64) {
            Some(VERSION) => {}
            Some(n) => return Err(SavedPlanError::Version(n)),
            None => return Err(SavedPlanError::Invalid("no version".into())),
        }
        let file: PlanFile =
            serde_json::from_value(v).map_err(|e| SavedPlanError::Invalid(e.to_string()))?;
        let this = env!("CARGO_PKG_VERSION");
        if file.tool_version != this {
            return Err(SavedPlanError::ToolVersion {
                found: file.tool_version,
                this: this.into(),
            });
        }
        let invalid = SavedPlanError::Invalid;
        let manifest_text = file.manifest.to_string();
        let m = manifest::load_str("the plan's manifest", &manifest_text)
            .map_err(|d| invalid(manifest::render_text(&d).trim().to_string()))?
            .manifest;
        if manifest::applied_hash(&m) != file.manifest_hash {
            return Err(invalid(
                "its manifest does not match its manifest_hash".into(),
            ));
        }
        if m.namespace != file.namespace {
            return Err(invalid(format!(
                "its manifest declares namespace '{}', the plan is for '{}'",
                m.namespace, file.namespace
            )));
        }
        let changes = file
            .changes
            .into_iter()
            .map(planned_change)
            .collect::<Result<Vec<_>, _>>()
            .map_err(invalid)?;
        let unchanged_digests = file
            .unchanged_digests
            .iter()
            .map(|h| unhex(h).ok_or_else(|| invalid(format!("bad digest {h:?}"))))
            .collect::<Result<Vec<_>, _>>()?;
        let created_ms = crate::clock::parse_instant(&file.created, "created").unwrap_or(0);
        Ok(SavedPlan {
            created_ms,
            tool_version: file.tool_version,
            table: file.table,
            namespace: file.namespace,
            namespace_id: file.namespace_id,
            register_namespace: file.register_namespace,
            manifest_file: file.manifest_file,
            manifest_hash: file.manifest_hash,
            manifest: m,
            no_refresh: file.no_refresh,
            pending: file.summary.pending,
            warnings: file.warnings,
            prepared: Prepared {
                record: ProvisionerRecord {
                    identity: file.record,
                    ..ProvisionerRecord::default()
                },
                changes,
                unchanged: file.summary.unchanged,
                unchanged_digests,
                fallback: None,
                // Levels the plan dropped because only an unconfirmed set
                // named them and they do not exist: not saved; the record
                // keeps them until the next plan drops them again.
                forgotten: Vec::new(),
            },
        })
    }

    /// Checks that every item the plan would write is under its level's key
    /// in the plan's namespace and is what the plan's manifest builds
    /// (`build`), and that the changes are exactly the ones that manifest
    /// declares: a file edited by hand is refused, not applied.
    pub fn verify(&self, build: &BuildFn<'_>) -> Result<(), SavedPlanError> {
        let ns = &self.namespace_id;
        let declared = crate::plan::managed::ManagedSet::from_manifest(&self.manifest);
        for pc in &self.prepared.changes {
            let level = &pc.change.level;
            let edited = |what: &str| {
                SavedPlanError::Invalid(format!("the change to {} {what}", describe(level)))
            };
            if (pc.change.action == Action::Delete) == declared.contains(level) {
                return Err(edited("disagrees with the plan's manifest"));
            }
            match (&pc.desired, build(level)) {
                (None, _) => {}
                (Some(Ok(item)), Ok(built)) if *item == built => {}
                (Some(Err(e)), Err(built)) if *e == built => {}
                _ => return Err(edited("is not what the plan's manifest builds")),
            }
            let live_key = pc.live.as_ref().and_then(crate::store::Key::of);
            if live_key.is_some_and(|k| k != level.key(ns)) {
                return Err(edited("holds an item of another key"));
            }
        }
        Ok(())
    }
}

impl SavedPlan {
    /// The namespace must still have the id the plan was made for (it was
    /// not deleted and registered again).
    pub fn same_namespace(&self, ns: &str) -> Result<(), Stale> {
        if ns == self.namespace_id {
            return Ok(());
        }
        Err(Stale(format!(
            "namespace '{}' is registered under id {ns} now; the plan was made for id {}",
            self.namespace, self.namespace_id
        )))
    }
}

fn describe(level: &Level) -> String {
    match level {
        Level::System => "the system level".into(),
        other => format!("{} {}", other.kind().as_str(), other.target()),
    }
}

fn change_file(pc: &PlannedChange) -> ChangeFile {
    let t = pc.change.level.target();
    let (desired, error) = match &pc.desired {
        Some(Ok(item)) => (Some(item_to_json(item)), None),
        Some(Err(e)) => (None, Some(e.to_string())),
        None => (None, None),
    };
    ChangeFile {
        action: pc.change.action.as_str().into(),
        level: pc.change.level.kind().as_str().into(),
        target: (!t.is_empty()).then_some(t),
        details: pc.details.clone(),
        live: pc.live.as_ref().map(item_to_json),
        desired,
        error,
    }
}

fn planned_change(c: ChangeFile) -> Result<PlannedChange, String> {
    let action = match c.action.as_str() {
        "create" => Action::Create,
        "update" => Action::Update,
        "delete" => Action::Delete,
        other => return Err(format!("unknown action {other:?}")),
    };
    let target = c.target.unwrap_or_default();
    let level = Level::from_parts(&c.level, &target)
        .ok_or_else(|| format!("unknown level {:?} {target:?}", c.level))?;
    let item = |v: &Value| item_from_json(v).map_err(|e| format!("{target}: {e}"));
    let live = c.live.as_ref().map(item).transpose()?;
    let desired = match (action, c.desired, c.error) {
        (Action::Delete, None, None) => None,
        (Action::Delete, _, _) => return Err(format!("a delete of {target:?} with an item")),
        (_, Some(v), None) => Some(Ok(item(&v)?)),
        (_, None, Some(e)) => Some(Err(BuildError::Saved(e))),
        _ => return Err(format!("{target:?}: neither an item nor an error")),
    };
    Ok(PlannedChange::new(
        Change::new(action, level),
        desired,
        live,
    ))
}

fn hex(d: &Digest) -> String {
    d.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(h: &str) -> Option<Digest> {
    let mut out = [0u8; 16];
    if h.len() != 32 || !h.is_ascii() {
        return None;
    }
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(&h[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(out)
}

/// Whether the table still is what `plan` was made against: the record's
/// identity, and the live items of the levels it changes. Reads only; runs
/// before anything is written (the apply's plan step checks the record again
/// with [`resume`]).
pub fn check_fresh(store: &dyn Store, ns: &str, plan: &SavedPlan) -> Result<(), StaleOr> {
    plan.same_namespace(ns)?;
    let record = crate::plan::managed::read(store, ns)?;
    identity_unchanged(&plan.prepared.record.identity, &record.identity)?;
    let changes = &plan.prepared.changes;
    let keys: Vec<_> = changes.iter().map(|pc| pc.change.level.key(ns)).collect();
    let live = store.batch_get(&keys, true)?;
    let moved: Vec<String> = changes
        .iter()
        .zip(live)
        .filter(|(pc, now)| !same_item(pc.live.as_ref(), now.as_ref()))
        .map(|(pc, _)| describe(&pc.change.level))
        .collect();
    if let Some(first) = moved.first() {
        let more = match moved.len() {
            1 => String::new(),
            n => format!(" (and {} more)", n - 1),
        };
        return Err(StaleOr::Stale(Stale(format!(
            "{first}{more} changed since the plan was made"
        ))));
    }
    Ok(())
}

/// Equal items; numbers compare by value (`500.0` = `500`), as DynamoDB does.
fn same_item(a: Option<&Item>, b: Option<&Item>) -> bool {
    let canon = |i: Option<&Item>| -> Option<BTreeMap<String, String>> {
        i.map(|i| {
            i.iter()
                .map(|(k, v)| {
                    (
                        k.clone(),
                        crate::store::typed_json::value_to_json(&canonical(v)).to_string(),
                    )
                })
                .collect()
        })
    };
    canon(a) == canon(b)
}

fn canonical(v: &crate::store::AttrValue) -> crate::store::AttrValue {
    use crate::store::AttrValue;
    match v {
        AttrValue::N(n) => AttrValue::N(crate::plan::diff::normalise_number(n)),
        AttrValue::M(m) => AttrValue::M(m.iter().map(|(k, v)| (k.clone(), canonical(v))).collect()),
        AttrValue::L(l) => AttrValue::L(l.iter().map(canonical).collect()),
        other => other.clone(),
    }
}

fn identity_unchanged(planned: &RecordIdentity, now: &RecordIdentity) -> Result<(), Stale> {
    if planned == now {
        return Ok(());
    }
    Err(Stale(format!(
        "it was made against {}, but the namespace now has {} (another apply ran since)",
        planned.describe(),
        now.describe()
    )))
}

/// A stale plan, or the store failed while checking.
#[derive(Debug, thiserror::Error)]
pub enum StaleOr {
    #[error("{0}")]
    Stale(#[from] Stale),
    #[error("{0}")]
    Store(#[from] StoreError),
}

/// The apply's plan step for a saved plan: the saved changes with the record
/// just read, when it is still the record the plan was made against.
pub fn resume(saved: &Prepared, record: ProvisionerRecord) -> Result<Prepared, Stale> {
    identity_unchanged(&saved.record.identity, &record.identity)?;
    Ok(Prepared {
        record,
        ..saved.clone()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::item::keyed;
    use crate::store::memory::MemoryStore;
    use crate::store::AttrValue;

    const M: &str = "namespace: default\nresources:\n  gpt-4:\n    limits:\n      rpm:\n        capacity: 5\nentities:\n  u:\n    resources:\n      gpt-4:\n        limits:\n          rpm:\n            capacity: 9\n";

    fn build_for(m: &Manifest) -> impl Fn(&Level) -> Result<Item, BuildError> + '_ {
        move |level: &Level| level.build("ns", m)
    }

    /// A plan of M against a store holding an older resource level.
    fn plan(s: &MemoryStore) -> SavedPlan {
        let m = manifest::load_str("m", M).unwrap().manifest;
        let build = build_for(&m);
        let prepared = crate::plan::prepare::prepare(
            s,
            "ns",
            &m,
            false,
            &build,
            crate::plan::prepare::Refresh::All,
        )
        .unwrap();
        SavedPlan {
            created_ms: 1_700_000_000_000,
            tool_version: env!("CARGO_PKG_VERSION").into(),
            table: "t".into(),
            namespace: "default".into(),
            namespace_id: "ns".into(),
            register_namespace: false,
            manifest_file: "m.yaml".into(),
            manifest_hash: manifest::applied_hash(&m),
            manifest: m.clone(),
            no_refresh: false,
            pending: 0,
            warnings: vec![],
            prepared,
        }
    }

    fn older_resource() -> Item {
        keyed(
            "ns/RESOURCE#gpt-4",
            "#CONFIG",
            &[("l_rpm_cp", AttrValue::n(3)), ("l_rpm_ra", AttrValue::n(3))],
        )
    }

    #[test]
    fn a_plan_round_trips_through_its_file() {
        let s = MemoryStore::new();
        s.put(older_resource());
        let p = plan(&s);
        assert_eq!(p.prepared.changes.len(), 2);
        let text = p.to_json();
        assert!(
            text.starts_with("{\n  \"format\": \"zae-limiter-plan\",\n  \"version\": 1,"),
            "{text}"
        );
        let back = SavedPlan::from_json(&text).unwrap();
        assert_eq!(back.manifest, p.manifest);
        assert_eq!(back.prepared.record.identity, p.prepared.record.identity);
        assert_eq!(back.created_ms, p.created_ms);
        let pairs = back.prepared.changes.iter().zip(&p.prepared.changes);
        for (a, b) in pairs {
            assert_eq!(
                (&a.change, &a.desired, &a.live, &a.details),
                (&b.change, &b.desired, &b.live, &b.details)
            );
        }
        back.verify(&build_for(&back.manifest)).unwrap();
        assert_eq!(back.to_json(), text, "writing it again gives the same file");
    }

    #[test]
    fn other_files_versions_and_edits_are_refused() {
        let s = MemoryStore::new();
        let text = plan(&s).to_json();
        let err = |t: &str| SavedPlan::from_json(t).unwrap_err();
        assert!(matches!(err(M), SavedPlanError::NotAPlan(_)));
        assert!(matches!(err("{\"a\": 1}"), SavedPlanError::NotAPlan(_)));
        assert_eq!(
            err(&text.replacen("\"version\": 1", "\"version\": 2", 1)),
            SavedPlanError::Version(2)
        );
        let other = text.replacen(
            &format!("\"tool_version\": \"{}\"", env!("CARGO_PKG_VERSION")),
            "\"tool_version\": \"0.0.1\"",
            1,
        );
        assert!(matches!(err(&other), SavedPlanError::ToolVersion { .. }));
        // The manifest edited: its hash no longer matches.
        let edited = text.replacen("\"capacity\": 9", "\"capacity\": 10", 1);
        assert_ne!(edited, text);
        assert!(matches!(err(&edited), SavedPlanError::Invalid(m) if m.contains("manifest_hash")));
        // An item edited: it is not what the manifest builds.
        let edited = text.replacen("\"N\": \"9\"", "\"N\": \"90\"", 1);
        assert_ne!(edited, text);
        let p = SavedPlan::from_json(&edited).unwrap();
        let e = p.verify(&build_for(&p.manifest)).unwrap_err();
        assert!(
            e.to_string()
                .contains("entity u/gpt-4 is not what the plan's manifest builds"),
            "{e}"
        );
    }

    #[test]
    fn a_plan_is_stale_when_the_record_or_a_level_it_changes_moved() {
        let s = MemoryStore::new();
        s.put(older_resource());
        let p = plan(&s);
        check_fresh(&s, "ns", &p).unwrap();
        assert!(matches!(
            check_fresh(&s, "other", &p),
            Err(StaleOr::Stale(_))
        ));
        // A level it changes, changed behind its back.
        let mut moved = older_resource();
        moved.insert("l_rpm_cp".into(), AttrValue::n(4));
        s.put(moved);
        let e = check_fresh(&s, "ns", &p).unwrap_err().to_string();
        assert!(e.starts_with("saved plan is stale: resource gpt-4 changed since the plan was made; nothing was written"), "{e}");
        // The same value written as 3.0: not a change.
        let mut same = older_resource();
        same.insert("l_rpm_cp".into(), AttrValue::N("3.0".into()));
        s.put(same);
        check_fresh(&s, "ns", &p).unwrap();
        // Another apply wrote the record.
        let (rec, _) = crate::plan::managed::record_item(
            "ns",
            &Default::default(),
            "t2",
            "sha256:x",
            usize::MAX,
            &[],
        );
        s.put(rec);
        let e = check_fresh(&s, "ns", &p).unwrap_err().to_string();
        assert!(e.contains("it was made against no #PROVISIONER record, but the namespace now has the #PROVISIONER record written at t2"), "{e}");
        let now = crate::plan::managed::read(&s, "ns").unwrap();
        assert!(resume(&p.prepared, now).is_err());
        let empty = ProvisionerRecord::default();
        assert_eq!(resume(&p.prepared, empty).unwrap().changes.len(), 2);
    }
}
