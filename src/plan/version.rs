//! The version record's role in plan and apply (docs/storage.md, "The version
//! record"): read-only commands refuse a table this client may not use; the
//! gates say which limits need which Lambda version, which apply enforces
//! ([`crate::apply::gate`]).

use crate::manifest::model::Disabled;
use crate::manifest::Manifest;
use crate::store::{Key, Store};

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

/// Why this client may not use a table at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unusable {
    /// The CLI adds the command that writes the record (with the store
    /// flags that reach `target`).
    #[error("table '{table}' has no version record (_/SYSTEM# #VERSION), so it was not set up for zae-limiter")]
    NoRecord {
        table: String,
        target: Option<crate::store::open::Target>,
    },
    #[error("table '{table}' has schema {schema}; this client (zae-limiter {CLIENT_VERSION} layout) reads schema 0.x only. A schema migration is needed before this tool can use it.")]
    Schema { table: String, schema: String },
    #[error("table '{table}' requires clients of version {min} or later (client_min_version); this client writes the {CLIENT_VERSION} layout and must not use it.")]
    ClientTooOld { table: String, min: String },
}

/// Why plan/diff (and apply) may not use `store`'s table at all.
pub fn check_usable(rec: Option<&VersionRecord>, store: &dyn Store) -> Result<(), Unusable> {
    let table = store.table_name().to_string();
    let Some(rec) = rec else {
        return Err(Unusable::NoRecord {
            table,
            target: store.target(),
        });
    };
    if parse(&rec.schema_version).0 != SCHEMA_MAJOR {
        return Err(Unusable::Schema {
            table,
            schema: rec.schema_version.clone(),
        });
    }
    if let Some(min) = &rec.client_min_version {
        if parse(CLIENT_VERSION) < parse(min) {
            return Err(Unusable::ClientTooOld {
                table,
                min: min.clone(),
            });
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

    pub fn what(self) -> &'static str {
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

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::manifest::model::{LevelConfig, LimitSpec};
    use crate::store::AttrValue;
    use crate::store::Item;

    pub(crate) fn version_item(lambda: Option<&str>, min: Option<&str>) -> Item {
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

    pub(crate) fn manifest(cascade: bool, session: bool, soft: bool) -> Manifest {
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

    #[test]
    fn gates_are_found_in_every_level() {
        assert_eq!(gates(&manifest(false, false, false)), vec![]);
        assert_eq!(
            gates(&manifest(true, true, true)),
            vec![Gate::ResetAfter, Gate::Cascade, Gate::SoftOrBypass]
        );
    }

    #[test]
    fn read_only_refusals() {
        let store = crate::store::memory::MemoryStore::new();
        let refusal =
            |rec: Option<&VersionRecord>| check_usable(rec, &store).unwrap_err().to_string();
        assert!(refusal(None).contains("no version record"));
        let mut rec = VersionRecord {
            schema_version: "0.10.0".into(),
            lambda_version: None,
            client_min_version: Some("0.17.0".into()),
            updated_at: None,
            updated_by: None,
        };
        assert_eq!(check_usable(Some(&rec), &store), Ok(()));
        rec.client_min_version = Some("0.18.0".into());
        assert!(refusal(Some(&rec)).contains("0.18.0"));
        rec.client_min_version = None;
        rec.schema_version = "1.0.0".into();
        assert!(refusal(Some(&rec)).contains("migration"));
    }
}
