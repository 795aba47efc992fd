//! The namespace registry (docs/storage.md, "Namespaces"): a forward record name → id
//! and a reverse record id → name under `_/SYSTEM#`, written together.

use super::keys::{self, IdentifierError};
use crate::store::{AttrValue, Condition, Item, Key, Store, StoreError, WriteOp};

/// One registered namespace.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct NamespaceRecord {
    pub name: String,
    pub id: String,
    pub status: String,
    pub created_at: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum NamespaceError {
    #[error("{0}")]
    Identifier(#[from] IdentifierError),
    #[error("{0}")]
    Store(#[from] StoreError),
    #[error("cannot generate a namespace id: {0}")]
    Random(#[from] crate::random::RandomError),
    #[error("namespace '{name}' exists but is {status}; it cannot be registered again until it is purged")]
    NotActive { name: String, status: String },
}

/// A fresh id: 8 random bytes, URL-safe base64 without padding (11 characters),
/// drawn again while it starts with `-` (it would read as an option).
pub fn new_id() -> Result<String, NamespaceError> {
    loop {
        let bytes = crate::random::bytes::<8>()?;
        let id = super::base64url::encode(&bytes);
        if !id.starts_with('-') {
            return Ok(id);
        }
    }
}

fn record_item(sk: String, name: &str, id: &str, created_at: &str) -> Item {
    let mut item = keys::namespaced_item(keys::TABLE_NS, Key::new(keys::TABLE_SYSTEM_PK, sk));
    item.extend(crate::store::item::from_pairs(&[
        ("namespace_id", AttrValue::s(id)),
        ("namespace_name", AttrValue::s(name)),
        ("status", AttrValue::s("active")),
        ("created_at", AttrValue::s(created_at)),
    ]));
    item
}

fn record_of(item: &Item) -> Option<NamespaceRecord> {
    let s = |k: &str| item.get(k).and_then(AttrValue::as_s).map(str::to_string);
    Some(NamespaceRecord {
        name: s("namespace_name")?,
        id: s("namespace_id")?,
        status: s("status").unwrap_or_else(|| "active".into()),
        created_at: s("created_at"),
    })
}

/// Whether a namespace record counts as registered.
fn active(status: &str) -> bool {
    !matches!(status, "deleted" | "purging")
}

/// The id of namespace `name`, or `None` when it is not registered (no forward
/// record, or one marked deleted/purging).
pub fn resolve(store: &dyn Store, name: &str) -> Result<Option<String>, StoreError> {
    let item = store.get(&keys::namespace_key(name), false)?;
    Ok(item.as_ref().and_then(active_id))
}

/// The id a forward record (read with other keys) names, when it is registered.
pub fn active_id(item: &Item) -> Option<String> {
    record_of(item).filter(|r| active(&r.status)).map(|r| r.id)
}

/// What [`register`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Registered {
    pub id: String,
    /// False when the name was already registered (its existing id is returned).
    pub created: bool,
}

/// Registers `name` (idempotent): both records in one transaction, each
/// `attribute_not_exists(PK)`; if the name already exists its id is returned.
pub fn register(store: &dyn Store, name: &str) -> Result<Registered, NamespaceError> {
    register_as(store, name, &new_id()?)
}

/// [`register`] under a given id (a saved plan's items are keyed by the id
/// it was planned with): when the name is already registered, its existing
/// id is returned and the caller compares.
pub fn register_as(store: &dyn Store, name: &str, id: &str) -> Result<Registered, NamespaceError> {
    keys::validate_namespace_name(name)?;
    if let Some(id) = registered(store, name)? {
        return Ok(Registered { id, created: false });
    }
    let id = id.to_string();
    let now = crate::clock::system_stamp();
    let ops = vec![
        WriteOp::Put {
            item: record_item(keys::namespace_sk(name), name, &id, &now),
            condition: Some(Condition::NotExists),
        },
        WriteOp::Put {
            item: record_item(keys::nsid_sk(&id), name, &id, &now),
            condition: Some(Condition::NotExists),
        },
    ];
    match store.transact(ops) {
        Ok(()) => Ok(Registered { id, created: true }),
        Err(StoreError::TransactionCanceled(_)) => {
            // Somebody registered the name meanwhile: use theirs.
            match store.get(&keys::namespace_key(name), true)? {
                Some(item) => existing(name, &item),
                None => Err(NamespaceError::Store(StoreError::Backend(format!(
                    "registering namespace '{name}' conflicted with a concurrent change; try again"
                )))),
            }
        }
        Err(e) => Err(e.into()),
    }
}

/// The id of namespace `name`, `None` when it is not registered, or the
/// refusal [`register`] would give (a deleted or purging namespace): what a
/// plan needs to say what apply would do.
pub fn registered(store: &dyn Store, name: &str) -> Result<Option<String>, NamespaceError> {
    match store_get_or_none(store, name)? {
        Some(item) => existing(name, &item).map(|r| Some(r.id)),
        None => Ok(None),
    }
}

/// Reads the forward record; a missing table counts as "no record" (the
/// first write creates the local table).
fn store_get_or_none(store: &dyn Store, name: &str) -> Result<Option<Item>, StoreError> {
    match store.get(&keys::namespace_key(name), true) {
        Err(StoreError::TableNotFound { .. }) => Ok(None),
        other => other,
    }
}

fn existing(name: &str, item: &Item) -> Result<Registered, NamespaceError> {
    let rec = record_of(item).ok_or_else(|| StoreError::Corrupt {
        pk: keys::TABLE_SYSTEM_PK.into(),
        sk: keys::namespace_sk(name),
        reason: "namespace record without namespace_id/namespace_name".into(),
    })?;
    if !active(&rec.status) {
        return Err(NamespaceError::NotActive {
            name: name.into(),
            status: rec.status,
        });
    }
    Ok(Registered {
        id: rec.id,
        created: false,
    })
}

/// Every registered (active) namespace, by name.
pub fn list(store: &dyn Store) -> Result<Vec<NamespaceRecord>, StoreError> {
    let items = store.query(keys::TABLE_SYSTEM_PK, keys::NAMESPACE_SK_PREFIX, false)?;
    Ok(items
        .iter()
        .filter_map(record_of)
        .filter(|r| active(&r.status))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::local::LocalStore;

    #[test]
    fn ids_look_like_the_reference() {
        assert_eq!(super::super::base64url::encode(&[0xfb, 0xff, 0xbf]), "-_-_");
        assert_eq!(super::super::base64url::encode(b"Man"), "TWFu");
        assert_eq!(super::super::base64url::encode(b"Ma"), "TWE");
        for _ in 0..200 {
            let id = new_id().unwrap();
            assert_eq!(id.len(), 11);
            assert!(!id.starts_with('-'));
            assert!(id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'));
        }
    }

    #[test]
    fn registered_and_register_as_say_what_register_would_do() {
        let dir = tempfile::tempdir().unwrap();
        let s = LocalStore::open(&dir.path().join("s.sqlite"), "t").unwrap();
        assert_eq!(registered(&s, "a").unwrap(), None);
        let a = register_as(&s, "a", "fixedIdAAAA").unwrap();
        assert_eq!((a.id.as_str(), a.created), ("fixedIdAAAA", true));
        assert_eq!(registered(&s, "a").unwrap(), Some(a.id.clone()));
        // Already registered: its own id, whatever id was asked for.
        assert_eq!(
            register_as(&s, "a", "otherIdBBBB").unwrap(),
            Registered {
                id: a.id,
                created: false
            }
        );
        let mut fwd = s.get(&keys::namespace_key("a"), true).unwrap().unwrap();
        fwd.insert("status".into(), AttrValue::s("deleted"));
        s.write(WriteOp::Put {
            item: fwd,
            condition: None,
        })
        .unwrap();
        assert!(matches!(
            registered(&s, "a"),
            Err(NamespaceError::NotActive { .. })
        ));
    }

    #[test]
    fn register_resolve_and_list() {
        let dir = tempfile::tempdir().unwrap();
        let s = LocalStore::open(&dir.path().join("s.sqlite"), "t").unwrap();
        let a = register(&s, "tenant-a").unwrap();
        assert!(a.created);
        let again = register(&s, "tenant-a").unwrap();
        assert_eq!(
            again,
            Registered {
                id: a.id.clone(),
                created: false
            }
        );
        register(&s, "default").unwrap();
        assert_eq!(resolve(&s, "tenant-a").unwrap(), Some(a.id.clone()));
        assert_eq!(resolve(&s, "nope").unwrap(), None);
        let names: Vec<String> = list(&s).unwrap().into_iter().map(|r| r.name).collect();
        assert_eq!(names, ["default", "tenant-a"]);
        // Both records, shaped like the dump.
        let fwd = s
            .get(&keys::namespace_key("tenant-a"), true)
            .unwrap()
            .unwrap();
        let rev = s.get(&keys::nsid_key(&a.id), true).unwrap().unwrap();
        for item in [&fwd, &rev] {
            let attrs: Vec<&str> = item.keys().map(String::as_str).collect();
            assert_eq!(
                attrs,
                [
                    "GSI4PK",
                    "GSI4SK",
                    "PK",
                    "SK",
                    "created_at",
                    "namespace_id",
                    "namespace_name",
                    "status"
                ]
            );
            assert_eq!(item["GSI4PK"], AttrValue::s("_"));
            assert_eq!(item["status"], AttrValue::s("active"));
        }
        assert!(register(&s, "bad/name").is_err());
    }

    #[test]
    fn soft_deleted_namespaces_do_not_resolve() {
        let dir = tempfile::tempdir().unwrap();
        let s = LocalStore::open(&dir.path().join("s.sqlite"), "t").unwrap();
        let mut item = record_item(
            keys::namespace_sk("old"),
            "old",
            "abc",
            "2026-01-01T00:00:00Z",
        );
        item.insert("status".into(), AttrValue::s("deleted"));
        s.write(WriteOp::Put {
            item,
            condition: None,
        })
        .unwrap();
        assert_eq!(resolve(&s, "old").unwrap(), None);
        assert!(list(&s).unwrap().is_empty());
        assert!(matches!(
            register(&s, "old"),
            Err(NamespaceError::NotActive { .. })
        ));
    }

    #[test]
    fn concurrent_registrations_agree_on_one_id() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.sqlite");
        LocalStore::open(&path, "t")
            .unwrap()
            .create_table()
            .unwrap();
        let ids: Vec<String> = (0..4)
            .map(|_| {
                let path = path.clone();
                std::thread::spawn(move || {
                    let s = LocalStore::open(&path, "t").unwrap();
                    register(&s, "shared").unwrap().id
                })
            })
            .collect::<Vec<_>>()
            .into_iter()
            .map(|h| h.join().unwrap())
            .collect();
        assert!(ids.windows(2).all(|w| w[0] == w[1]), "{ids:?}");
        let s = LocalStore::open(&path, "t").unwrap();
        assert_eq!(
            s.query(keys::TABLE_SYSTEM_PK, keys::NSID_SK_PREFIX, true)
                .unwrap()
                .len(),
            1
        );
    }
}
