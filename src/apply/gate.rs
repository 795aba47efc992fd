//! Step 1 of an apply: the version gates ([`crate::plan::version::gates`]).
//! Refuses limits the table's Lambdas cannot enforce and ratchets
//! `client_min_version` so older clients stop writing (docs/storage.md,
//! "The version record").

use crate::manifest::Manifest;
use crate::plan::version::{gates, parse, read, record_key, CLIENT_VERSION};
use crate::store::{AttrValue, Condition, Store, StoreError, UpdateAction, WriteOp};

/// Why the gates refuse an apply (nothing was written).
#[derive(Debug, thiserror::Error)]
pub enum GateError {
    #[error("{0}")]
    Store(#[from] StoreError),
    #[error("reading the version record: {0}")]
    Read(StoreError),
    #[error("the version record (_/SYSTEM# #VERSION) is missing")]
    NoRecord,
    #[error("Version mismatch: client={CLIENT_VERSION}, schema={schema}, lambda={lambda}. Refusing to store {what}: the table's Lambdas must run {min} or later to enforce it; upgrade them first.")]
    Lambda {
        schema: String,
        lambda: String,
        what: &'static str,
        min: &'static str,
    },
    #[error("client_min_version kept changing; try again")]
    Contended,
    #[error("raising client_min_version to {want}: {source}")]
    Raise {
        want: &'static str,
        source: StoreError,
    },
}

/// Refuses when a gate is not met, then raises `client_min_version` to the highest
/// gate (never lowering it). Runs before any config write.
pub fn enforce(store: &dyn Store, m: &Manifest) -> Result<(), GateError> {
    let gates = gates(m);
    let Some(top) = gates.last().copied() else {
        return Ok(());
    };
    for attempt in 0..3 {
        let rec = read(store)
            .map_err(GateError::Read)?
            .ok_or(GateError::NoRecord)?;
        for g in &gates {
            let ok = match &rec.lambda_version {
                Some(v) => v == CLIENT_VERSION || parse(v) >= parse(g.min_version()),
                None => false,
            };
            if !ok {
                return Err(GateError::Lambda {
                    schema: rec.schema_version.clone(),
                    lambda: rec.lambda_version.as_deref().unwrap_or("unknown").into(),
                    what: g.what(),
                    min: g.min_version(),
                });
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
            Err(source) => return Err(GateError::Raise { want, source }),
        }
    }
    Err(GateError::Contended)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::version::tests::{manifest, version_item};
    use crate::store::memory::MemoryStore;

    fn min_of(s: &MemoryStore) -> Option<String> {
        read(s).unwrap().unwrap().client_min_version
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
        let err = enforce(&s, &manifest(false, false, true))
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("Version mismatch: client=0.17.0, schema=0.10.0, lambda=0.16.2. Refusing to store a soft limit or bypass"), "{err}");
        assert_eq!(min_of(&s).as_deref(), Some("0.10.0"));
        enforce(&s, &manifest(true, true, false)).unwrap();
        s.put(version_item(None, None));
        let err = enforce(&s, &manifest(false, true, false))
            .unwrap_err()
            .to_string();
        assert!(err.contains("lambda=unknown"), "{err}");
    }
}
