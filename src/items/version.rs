//! The version record (`_/SYSTEM#` / `#VERSION`, docs/storage.md, "The version record") and
//! table initialisation: what `Repository.open` does on a new table, so a
//! local store that apply created is one the Python client would accept.

use super::keys;
use super::namespace::{self, NamespaceError, Registered};
use crate::store::{AttrValue, Condition, Item, Key, Store, StoreError, WriteOp};

/// The schema this layout is (zae-limiter 0.17 writes 0.10.0).
pub const SCHEMA_VERSION: &str = "0.10.0";
/// The client release whose layout we write; stamped as `lambda_version` when
/// no Lambda exists, as the Python client does.
pub const CLIENT_VERSION: &str = "0.17.0";
/// `client_min_version` of a new table (gated writes ratchet it upward).
pub const INITIAL_CLIENT_MIN_VERSION: &str = "0.0.0";
/// The namespace every new table has.
pub const DEFAULT_NAMESPACE: &str = "default";

/// Every field of the version record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionRecord {
    pub schema_version: String,
    /// `None` = unknown (NULL or absent).
    pub lambda_version: Option<String>,
    pub client_min_version: Option<String>,
    pub updated_at: Option<String>,
    pub updated_by: Option<String>,
}

/// Reads the version record (strongly consistent); `None` when absent.
pub fn read(store: &dyn Store) -> Result<Option<VersionRecord>, StoreError> {
    Ok(store
        .get(&keys::version_key(), true)?
        .as_ref()
        .map(from_item))
}

/// The version record in an item read with other keys (missing fields read as unknown).
pub fn from_item(item: &Item) -> VersionRecord {
    let s = |n: &str| item.get(n).and_then(AttrValue::as_s).map(str::to_string);
    VersionRecord {
        schema_version: s("schema_version").unwrap_or_default(),
        lambda_version: s("lambda_version"),
        client_min_version: s("client_min_version"),
        updated_at: s("updated_at"),
        updated_by: s("updated_by"),
    }
}

/// The record a new table gets.
pub fn initial_item() -> Item {
    let now = crate::clock::system_stamp();
    let key = Key::new(keys::TABLE_SYSTEM_PK, keys::VERSION_SK);
    let mut item = keys::namespaced_item(keys::TABLE_NS, key);
    item.extend(crate::store::item::from_pairs(&[
        ("schema_version", AttrValue::s(SCHEMA_VERSION)),
        ("lambda_version", AttrValue::s(CLIENT_VERSION)),
        (
            "client_min_version",
            AttrValue::s(INITIAL_CLIENT_MIN_VERSION),
        ),
        ("updated_at", AttrValue::S(now)),
        (
            "updated_by",
            AttrValue::S(format!("zae-limiter-rs:{}", env!("CARGO_PKG_VERSION"))),
        ),
    ]));
    item
}

/// What [`ensure_initialized`] found or did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Initialized {
    /// True when this call wrote the version record.
    pub version_created: bool,
    /// The `default` namespace (created when missing).
    pub default_namespace: Registered,
}

/// Makes the table usable by the Python client: writes the version record if
/// missing (`attribute_not_exists(PK)`, so a concurrent initialiser's record
/// wins and is kept) and registers the `default` namespace. Idempotent.
pub fn ensure_initialized(store: &dyn Store) -> Result<Initialized, NamespaceError> {
    let version_created = match store.write(WriteOp::Put {
        item: initial_item(),
        condition: Some(Condition::NotExists),
    }) {
        Ok(_) => true,
        Err(StoreError::ConditionFailed { .. }) => false,
        Err(e) => return Err(e.into()),
    };
    let default_namespace = namespace::register(store, DEFAULT_NAMESPACE)?;
    Ok(Initialized {
        version_created,
        default_namespace,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::local::LocalStore;

    #[test]
    fn initialisation_is_idempotent_and_keeps_a_ratcheted_minimum() {
        let dir = tempfile::tempdir().unwrap();
        let s = LocalStore::open(&dir.path().join("s.sqlite"), "t").unwrap();
        assert!(matches!(
            read(&s),
            Err(StoreError::TableNotFound {
                where_: crate::store::Missing::NoLocalFile(_),
                ..
            })
        ));
        let first = ensure_initialized(&s).unwrap();
        assert!(first.version_created && first.default_namespace.created);
        let rec = read(&s).unwrap().unwrap();
        assert_eq!(rec.schema_version, "0.10.0");
        assert_eq!(rec.lambda_version.as_deref(), Some("0.17.0"));
        assert_eq!(rec.client_min_version.as_deref(), Some("0.0.0"));
        // A later ratchet survives re-initialisation.
        s.write(WriteOp::Update {
            key: keys::version_key(),
            actions: vec![crate::store::UpdateAction::Set(
                "client_min_version".into(),
                AttrValue::s("0.17.0"),
            )],
            condition: None,
        })
        .unwrap();
        let second = ensure_initialized(&s).unwrap();
        assert!(!second.version_created && !second.default_namespace.created);
        assert_eq!(second.default_namespace.id, first.default_namespace.id);
        assert_eq!(
            read(&s).unwrap().unwrap().client_min_version.as_deref(),
            Some("0.17.0")
        );
        let item = s.get(&keys::version_key(), true).unwrap().unwrap();
        let attrs: Vec<&str> = item.keys().map(String::as_str).collect();
        assert_eq!(
            attrs,
            [
                "GSI4PK",
                "GSI4SK",
                "PK",
                "SK",
                "client_min_version",
                "lambda_version",
                "schema_version",
                "updated_at",
                "updated_by"
            ]
        );
    }
}
