//! The version record's role in plan and apply (spec dynamodb.md §4,
//! manifest-cli.md §3.1, §3.3 step 1): read-only commands refuse a table this
//! client may not use; apply refuses limits the table's Lambdas cannot enforce
//! and ratchets `client_min_version` so older clients stop writing.

use crate::manifest::model::Disabled;
use crate::manifest::Manifest;
use crate::store::{AttrValue, Condition, Key, Store, StoreError, UpdateAction, WriteOp};

pub use crate::items::version::{read, VersionRecord, CLIENT_VERSION};

/// Schema major this client reads (schema 0.10.0 in 0.17).
const SCHEMA_MAJOR: u64 = 0;

pub fn record_key() -> Key {
    crate::items::keys::version_key()
}

/// `"0.17.0"` → (0, 17, 0); missing or non-numeric parts count as 0.
pub fn parse(v: &str) -> (u64, u64, u64) {
    let mut it = v.trim().trim_start_matches('v').split('.').map(|p| {
        p.chars()
            .take_while(char::is_ascii_digit)
            .collect::<String>()
            .parse()
            .unwrap_or(0)
    });
    (
        it.next().unwrap_or(0),
        it.next().unwrap_or(0),
        it.next().unwrap_or(0),
    )
}

/// Why plan/diff (and apply) may not use this table at all.
pub fn check_usable(rec: Option<&VersionRecord>, table: &str) -> Result<(), String> {
    let Some(rec) = rec else {
        return Err(format!(
            "table '{table}' has no version record (_/SYSTEM# #VERSION), so it was not set up for zae-limiter. Run 'zae-limiter limits apply' (local store) or 'zae-limiter table create -n {table}' first."
        ));
    };
    if parse(&rec.schema_version).0 != SCHEMA_MAJOR {
        return Err(format!(
            "table '{table}' has schema {}; this client (zae-limiter {CLIENT_VERSION} layout) reads schema 0.x only. A schema migration is needed before this tool can use it.",
            rec.schema_version
        ));
    }
    if let Some(min) = &rec.client_min_version {
        if parse(CLIENT_VERSION) < parse(min) {
            return Err(format!(
                "table '{table}' requires clients of version {min} or later (client_min_version); this client writes the {CLIENT_VERSION} layout and must not use it."
            ));
        }
    }
    Ok(())
}

/// A feature that needs a minimum Lambda version to be enforced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Gate {
    ResetAfter,
    Cascade,
    SoftOrBypass,
}

impl Gate {
    pub fn min_version(self) -> &'static str {
        match self {
            Gate::ResetAfter => "0.15.0",
            Gate::Cascade => "0.16.0",
            Gate::SoftOrBypass => "0.17.0",
        }
    }

    fn what(self) -> &'static str {
        match self {
            Gate::ResetAfter => "a reset_after limit",
            Gate::Cascade => "a cascade policy",
            Gate::SoftOrBypass => "a soft limit or bypass",
        }
    }
}

/// The gates a manifest's declared levels need (all of them, changed or not).
pub fn gates(m: &Manifest) -> Vec<Gate> {
    let mut out = Vec::new();
    let mut limits: Vec<_> = Vec::new();
    if let Some(sys) = &m.system {
        limits.extend(sys.limits.values());
    }
    let mut levels: Vec<_> = m.resources.values().collect();
    levels.extend(m.entities.values().flat_map(|rs| rs.values()));
    for l in &levels {
        limits.extend(l.limits.values());
        if l.cascade.is_some() {
            out.push(Gate::Cascade);
        }
        if l.disabled == Some(Disabled::Bypass) {
            out.push(Gate::SoftOrBypass);
        }
    }
    for l in limits {
        if l.reset_after_seconds.is_some() {
            out.push(Gate::ResetAfter);
        }
        if l.soft {
            out.push(Gate::SoftOrBypass);
        }
    }
    out.sort();
    out.dedup();
    out
}

/// Refuses when a gate is not met, then raises `client_min_version` to the highest
/// gate (never lowering it). Runs before any config write.
pub fn enforce(store: &dyn Store, m: &Manifest) -> Result<(), String> {
    let gates = gates(m);
    let Some(top) = gates.last().copied() else {
        return Ok(());
    };
    for attempt in 0..3 {
        let rec = read(store)
            .map_err(|e| e.to_string())?
            .ok_or_else(|| "the version record (_/SYSTEM# #VERSION) is missing".to_string())?;
        for g in &gates {
            let ok = match &rec.lambda_version {
                Some(v) => v == CLIENT_VERSION || parse(v) >= parse(g.min_version()),
                None => false,
            };
            if !ok {
                return Err(format!(
                    "Version mismatch: client={CLIENT_VERSION}, schema={}, lambda={}. Refusing to store {}: the table's Lambdas must run {} or later to enforce it; upgrade them first.",
                    rec.schema_version,
                    rec.lambda_version.as_deref().unwrap_or("unknown"),
                    g.what(),
                    g.min_version()
                ));
            }
        }
        let want = top.min_version();
        if rec
            .client_min_version
            .as_deref()
            .is_some_and(|cur| parse(cur) >= parse(want))
        {
            return Ok(());
        }
        let stored = match &rec.client_min_version {
            Some(v) => Condition::AttrEquals("client_min_version".into(), AttrValue::s(v)),
            None => Condition::AttrNotExists("client_min_version".into()),
        };
        let op = WriteOp::Update {
            key: record_key(),
            actions: vec![UpdateAction::Set(
                "client_min_version".into(),
                AttrValue::s(want),
            )],
            condition: Some(Condition::And(vec![Condition::Exists, stored])),
        };
        match store.write(op) {
            Ok(_) => return Ok(()),
            Err(StoreError::ConditionFailed { .. }) if attempt < 2 => continue,
            Err(e) => return Err(format!("raising client_min_version to {want}: {e}")),
        }
    }
    Err("client_min_version kept changing; try again".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::model::{LevelConfig, LimitSpec};
    use crate::store::memory::MemoryStore;
    use crate::store::Item;

    fn version_item(lambda: Option<&str>, min: Option<&str>) -> Item {
        let mut i = Item::new();
        i.insert("PK".into(), AttrValue::s("_/SYSTEM#"));
        i.insert("SK".into(), AttrValue::s("#VERSION"));
        i.insert("schema_version".into(), AttrValue::s("0.10.0"));
        i.insert(
            "lambda_version".into(),
            lambda.map(AttrValue::s).unwrap_or(AttrValue::Null),
        );
        if let Some(m) = min {
            i.insert("client_min_version".into(), AttrValue::s(m));
        }
        i
    }

    fn limit() -> LimitSpec {
        LimitSpec::bucket(10, 10, 60)
    }

    fn manifest(cascade: bool, session: bool, soft: bool) -> Manifest {
        let mut level = LevelConfig::default();
        if cascade {
            level.cascade = Some(false);
        }
        let mut l = limit();
        if session {
            l.refill_amount = 0;
            l.reset_after_seconds = Some(3600);
        }
        l.soft = soft;
        level.limits.insert("rpm".into(), l);
        let mut m = Manifest {
            namespace: "d".into(),
            system: None,
            resources: Default::default(),
            entities: Default::default(),
        };
        m.resources.insert("r".into(), level);
        m
    }

    fn min_of(s: &MemoryStore) -> Option<String> {
        read(s).unwrap().unwrap().client_min_version
    }

    #[test]
    fn gates_are_found_in_every_level() {
        assert_eq!(gates(&manifest(false, false, false)), vec![]);
        assert_eq!(
            gates(&manifest(true, true, true)),
            vec![Gate::ResetAfter, Gate::Cascade, Gate::SoftOrBypass]
        );
    }

    #[test]
    fn ratchet_raises_but_never_lowers() {
        let s = MemoryStore::new();
        s.put(version_item(Some("0.17.0"), None));
        enforce(&s, &manifest(false, true, false)).unwrap();
        assert_eq!(min_of(&s).as_deref(), Some("0.15.0"));
        enforce(&s, &manifest(false, false, true)).unwrap();
        assert_eq!(min_of(&s).as_deref(), Some("0.17.0"));
        enforce(&s, &manifest(true, false, false)).unwrap();
        assert_eq!(min_of(&s).as_deref(), Some("0.17.0"));
    }

    #[test]
    fn old_or_unknown_lambdas_are_refused_without_writing() {
        let s = MemoryStore::new();
        s.put(version_item(Some("0.16.2"), Some("0.10.0")));
        let err = enforce(&s, &manifest(false, false, true)).unwrap_err();
        assert!(err.starts_with("Version mismatch: client=0.17.0, schema=0.10.0, lambda=0.16.2. Refusing to store a soft limit or bypass"), "{err}");
        assert_eq!(min_of(&s).as_deref(), Some("0.10.0"));
        enforce(&s, &manifest(true, true, false)).unwrap();
        s.put(version_item(None, None));
        let err = enforce(&s, &manifest(false, true, false)).unwrap_err();
        assert!(err.contains("lambda=unknown"), "{err}");
    }

    #[test]
    fn read_only_refusals() {
        assert!(check_usable(None, "t")
            .unwrap_err()
            .contains("no version record"));
        let mut rec = VersionRecord {
            schema_version: "0.10.0".into(),
            lambda_version: None,
            client_min_version: Some("0.17.0".into()),
            updated_at: None,
            updated_by: None,
        };
        assert_eq!(check_usable(Some(&rec), "t"), Ok(()));
        rec.client_min_version = Some("0.18.0".into());
        assert!(check_usable(Some(&rec), "t")
            .unwrap_err()
            .contains("0.18.0"));
        rec.client_min_version = None;
        rec.schema_version = "1.0.0".into();
        assert!(check_usable(Some(&rec), "t")
            .unwrap_err()
            .contains("migration"));
    }
}
