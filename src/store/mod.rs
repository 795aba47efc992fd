//! Stores: the DynamoDB table and the embedded local store behind one seam.
//!
//! The store layer knows items, not manifests. Both backends implement
//! [`Store`] with DynamoDB's semantics (full-replace puts, conditional writes,
//! all-or-nothing transactions, begins_with queries), so plan/apply code is
//! written once. The local store and the in-memory store used by tests
//! ([`memory::MemoryStore`]) share one emulation of those rules ([`emulate`]).

pub mod backoff;
#[cfg(feature = "dynamodb")]
pub mod dynamodb;
pub mod empty;
pub mod emulate;
pub mod item;
pub mod local;
pub mod memory;
pub mod number;
pub mod observe;
pub mod open;
pub mod stats;
pub mod typed_json;

#[cfg(test)]
mod conformance;

pub use item::{AttrValue, Item, Key};

/// Environment variable: when set, the store's requests (DynamoDB) or
/// operations (local store) are printed on stderr when it is dropped (used by
/// the benchmarks).
pub const REQUEST_STATS_ENV: &str = "ZAEL_REQUEST_STATS";

/// What a store operation can fail with. Rendered once, at the CLI edge.
#[derive(Debug, Clone, thiserror::Error)]
pub enum StoreError {
    /// A write's condition did not hold; nothing was written.
    #[error("conditional write failed on {pk} / {sk}")]
    ConditionFailed { pk: String, sk: String },
    /// A transaction was cancelled because one of its conditions failed; nothing was written.
    #[error("transaction cancelled: {0}")]
    TransactionCanceled(String),
    /// The table does not exist (where: [`Missing`]). The facts only: the
    /// CLI adds the command that creates it (`cli::error`).
    #[error("{}", missing_table(table, where_))]
    TableNotFound { table: String, where_: Missing },
    /// The local store path cannot hold a store file.
    #[error("{}", unusable_path(path, why))]
    LocalStorePath {
        path: std::path::PathBuf,
        why: BadPath,
    },
    /// The caller may not perform `action` on `table`.
    #[error("access denied: {action} on table '{table}'. Grant the caller dynamodb:{action} on the table and its indexes.")]
    AccessDenied { action: String, table: String },
    /// A write was refused because the item would exceed DynamoDB's 400 KB
    /// item size ([`emulate::MAX_ITEM_BYTES`]): nothing was written. Not a
    /// passing failure: the same write fails again.
    #[error("item {pk} / {sk} would exceed the 400 KB a stored item may hold{}; nothing was written", bytes.map(|b| format!(" ({b} bytes)")).unwrap_or_default())]
    ItemTooLarge {
        pk: String,
        sk: String,
        bytes: Option<usize>,
    },
    /// A stored item cannot be read (wrong type, undecodable value).
    #[error("corrupt item {pk} / {sk}: {reason}")]
    Corrupt {
        pk: String,
        sk: String,
        reason: String,
    },
    /// Anything else the backend reported, already explained in one line.
    #[error("{0}")]
    Backend(String),
    /// `--endpoint-url` (or `AWS_ENDPOINT_URL`) is not an http(s) URL with a host.
    #[error("invalid --endpoint-url (or AWS_ENDPOINT_URL) '{url}': {why}; expected http://HOST[:PORT] or https://HOST[:PORT], e.g. http://127.0.0.1:8000")]
    InvalidEndpoint { url: String, why: &'static str },
    /// The name breaks DynamoDB's table-name rules (checked for both stores).
    #[error("invalid table name {name:?}: a table name is {MIN_TABLE_NAME} to {MAX_TABLE_NAME} characters of letters, digits, '_', '-' and '.' (DynamoDB's rule, applied to the local store too)")]
    InvalidTableName { name: String },
}

/// Where a missing table was looked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Missing {
    /// In a local store file that exists.
    Local(std::path::PathBuf),
    /// The local store file itself does not exist (a command that only
    /// reads never creates it; one that writes creates it on its first
    /// write): a mistyped path must not read as "create the table".
    NoLocalFile(std::path::PathBuf),
    /// In DynamoDB: the region and endpoint asked, and the status of a
    /// CloudFormation stack of the table's name, if there is one.
    DynamoDb {
        region: String,
        endpoint_url: Option<String>,
        stack: Option<String>,
    },
}

impl Missing {
    /// The store the table was looked for in.
    pub fn target(&self) -> open::Target {
        match self {
            Missing::Local(path) | Missing::NoLocalFile(path) => open::Target::Local(path.clone()),
            Missing::DynamoDb {
                region,
                endpoint_url,
                ..
            } => open::Target::DynamoDb {
                region: Some(region.clone()),
                endpoint_url: endpoint_url.clone(),
            },
        }
    }
}

/// Why a local store path cannot hold a store file (SQLite would say "unable
/// to open database file" or "disk I/O error").
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BadPath {
    Directory,
    /// A device, a FIFO, a socket: what it is.
    NotAFile(&'static str),
    /// Lies below this file (as if it were a directory).
    BelowFile(std::path::PathBuf),
}

fn unusable_path(path: &std::path::Path, why: &BadPath) -> String {
    let path_ = path.display();
    match why {
        BadPath::Directory => format!(
            "local store {path_} is a directory, not a store file; name a file, e.g. {}",
            path.join("local.sqlite").display()
        ),
        BadPath::NotAFile(kind) => format!(
            "local store {path_} is {kind}, not a store file; name a regular file (or one that does not exist yet)"
        ),
        BadPath::BelowFile(file) => format!(
            "local store {path_} cannot be created or read: {} is a file, not a directory; check the path",
            file.display()
        ),
    }
}

fn missing_table(table: &str, missing: &Missing) -> String {
    match missing {
        Missing::Local(path) => format!(
            "table '{table}' not found in local store {}",
            path.display()
        ),
        Missing::NoLocalFile(path) => format!(
            "local store {} does not exist (no such file), so it has no table '{table}'",
            path.display()
        ),
        Missing::DynamoDb {
            region,
            stack: None,
            ..
        } => format!("table '{table}' not found in {region}"),
        Missing::DynamoDb {
            region,
            stack: Some(status),
            ..
        } => format!("table '{table}' not found in {region}; the CloudFormation stack '{table}' exists with status {status}"),
    }
}

/// Shortest table name DynamoDB accepts.
pub const MIN_TABLE_NAME: usize = 3;
/// Longest table name DynamoDB accepts.
pub const MAX_TABLE_NAME: usize = 255;

/// DynamoDB's table-name rule: `[a-zA-Z0-9_.-]{3,255}`. Applied to the local
/// store too, so a name that works there works on DynamoDB (and an empty
/// `-n ''`, a newline or 300 characters are refused before anything is opened).
pub fn check_table_name(name: &str) -> Result<(), StoreError> {
    let ok = (MIN_TABLE_NAME..=MAX_TABLE_NAME).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
    if ok {
        Ok(())
    } else {
        Err(StoreError::InvalidTableName {
            name: name.to_string(),
        })
    }
}

/// A secondary index that can be queried by partition key and sort-key prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Index {
    Gsi1,
    Gsi2,
    Gsi3,
    Gsi4,
}

impl Index {
    /// The (partition, sort) attribute names of the index.
    pub fn key_attrs(self) -> (&'static str, &'static str) {
        match self {
            Index::Gsi1 => ("GSI1PK", "GSI1SK"),
            Index::Gsi2 => ("GSI2PK", "GSI2SK"),
            Index::Gsi3 => ("GSI3PK", "GSI3SK"),
            Index::Gsi4 => ("GSI4PK", "GSI4SK"),
        }
    }
}

/// A write condition, evaluated against the item currently stored under the key.
#[derive(Debug, Clone, PartialEq)]
pub enum Condition {
    /// `attribute_exists(PK)`
    Exists,
    /// `attribute_not_exists(PK)`
    NotExists,
    /// `attribute_exists(name)`
    AttrExists(String),
    /// `attribute_not_exists(name)`
    AttrNotExists(String),
    /// `name = value`
    AttrEquals(String, AttrValue),
    /// `name <= value` (numbers)
    AttrNumLe(String, String),
    /// `name < value` (numbers)
    AttrNumLt(String, String),
    And(Vec<Condition>),
    Or(Vec<Condition>),
}

/// One clause of an UpdateItem.
#[derive(Debug, Clone, PartialEq)]
pub enum UpdateAction {
    /// `SET name = value`
    Set(String, AttrValue),
    /// `SET name = if_not_exists(name, value)`
    SetIfNotExists(String, AttrValue),
    /// `REMOVE name`
    Remove(String),
    /// `ADD name :n` on a number (created as 0 when absent); `n` is a decimal string.
    AddNumber(String, String),
    /// `ADD name :set` on a string set
    AddToSet(String, Vec<String>),
    /// `DELETE name :set` on a string set (the attribute disappears when empty)
    DeleteFromSet(String, Vec<String>),
}

/// One write. Every variant may carry a condition; when it fails nothing changes.
#[derive(Debug, Clone, PartialEq)]
pub enum WriteOp {
    /// Full-replace PutItem.
    Put {
        item: Item,
        condition: Option<Condition>,
    },
    /// DeleteItem (deleting a missing item succeeds unless the condition says otherwise).
    Delete {
        key: Key,
        condition: Option<Condition>,
    },
    /// UpdateItem (creates the item when absent unless the condition says otherwise).
    Update {
        key: Key,
        actions: Vec<UpdateAction>,
        condition: Option<Condition>,
    },
}

impl WriteOp {
    /// An unconditional put or delete: what a batched write (BatchWriteItem)
    /// may carry.
    pub fn batchable(&self) -> bool {
        matches!(
            self,
            WriteOp::Put {
                condition: None,
                ..
            } | WriteOp::Delete {
                condition: None,
                ..
            }
        )
    }

    pub fn key(&self) -> Key {
        match self {
            WriteOp::Put { item, .. } => Key::of(item).unwrap_or_else(|| Key::new("", "")),
            WriteOp::Delete { key, .. } | WriteOp::Update { key, .. } => key.clone(),
        }
    }
}

/// The operations plan, apply, display and cooldowns need. Synchronous on purpose:
/// the DynamoDB backend owns its async runtime, so commands that never touch AWS
/// never start one. `Send + Sync`: `serve` keeps a pool of stores and lends
/// each to one blocking thread at a time (never to an async task: the DynamoDB
/// store blocks on its own runtime), and independent reads can overlap on
/// scoped threads (apply checks the entity counts while it reads the levels).
pub trait Store: Send + Sync {
    /// The table this store reads and writes.
    fn table_name(&self) -> &str;
    /// Where the table lives (the file, the region and endpoint), for an
    /// error to name and a suggested command to reach; `None` for stores
    /// that live nowhere else (in memory, in tests).
    fn target(&self) -> Option<open::Target> {
        None
    }
    /// False once the store knows it cannot be used any more (a local
    /// store whose file was removed or replaced at its path): whoever keeps
    /// stores (`serve`'s pool) drops it and opens another.
    fn usable(&self) -> bool {
        true
    }
    /// GetItem. `consistent` asks for a strongly consistent read.
    fn get(&self, key: &Key, consistent: bool) -> Result<Option<Item>, StoreError>;
    /// Many GetItems; the result has one entry per key, in the same order.
    fn batch_get(&self, keys: &[Key], consistent: bool) -> Result<Vec<Option<Item>>, StoreError>;
    /// Query the table: items with this PK whose SK begins with `sk_prefix`, in SK order.
    fn query(&self, pk: &str, sk_prefix: &str, consistent: bool) -> Result<Vec<Item>, StoreError>;
    /// Query an index: keys (PK, SK) of items whose index PK is `pk` and index SK begins with `sk_prefix`.
    fn query_index(&self, index: Index, pk: &str, sk_prefix: &str) -> Result<Vec<Key>, StoreError>;
    /// How many items an index query would return (DynamoDB's `Select=COUNT`:
    /// nothing but the number comes back). The default counts the keys.
    fn count_index(&self, index: Index, pk: &str, sk_prefix: &str) -> Result<usize, StoreError> {
        self.query_index(index, pk, sk_prefix)
            .map(|keys| keys.len())
    }
    /// Whether index queries may trail the writes (DynamoDB's global
    /// secondary indexes are eventually consistent; the emulating stores
    /// update their indexes with the write).
    fn index_lags(&self) -> bool {
        false
    }
    /// One write; returns the item as it was before (ALL_OLD), if any.
    fn write(&self, op: WriteOp) -> Result<Option<Item>, StoreError>;
    /// Many independent writes, one result per op in the same order; a failure
    /// does not stop the others. Backends may run them concurrently (the
    /// DynamoDB store keeps a bounded number in flight); the default is sequential.
    fn write_many(&self, ops: Vec<WriteOp>) -> Vec<Result<Option<Item>, StoreError>> {
        ops.into_iter().map(|op| self.write(op)).collect()
    }
    /// Many independent, unconditional puts and deletes, one result per op in the
    /// same order; no old images. The DynamoDB store sends them 25 a call
    /// (BatchWriteItem), far cheaper than one request or one transaction each.
    /// Ops with a condition, and updates, run as [`Store::write`]s. The default
    /// is [`Store::write_many`].
    fn batch_write(&self, ops: Vec<WriteOp>) -> Vec<Result<(), StoreError>> {
        self.write_many(ops)
            .into_iter()
            .map(|r| r.map(|_| ()))
            .collect()
    }
    /// All-or-nothing writes (TransactWriteItems, at most 100 ops).
    fn transact(&self, ops: Vec<WriteOp>) -> Result<(), StoreError>;
    /// Read-modify-write of one item: reads the item at `key` strongly
    /// consistent, shows it to `next` and writes the op `next` returns (at
    /// `key`), if any. `next` conditions its write as after a plain read,
    /// since another writer may come between the two (the default: a GetItem,
    /// then the write). A store that can hold the item still from the read
    /// to the write does so (the local store: one transaction); the condition
    /// then always holds, and a decision costs one transaction, not two.
    ///
    /// `known`: the item as the caller read it already (with other items in
    /// one batch), if it did; the default shows that instead of reading
    /// again, a store that holds the item still reads it again in its
    /// transaction.
    fn read_then_write(
        &self,
        key: &Key,
        known: Known,
        next: &mut NextWrite,
    ) -> Result<(), StoreError> {
        read_then_write_apart(self, key, known, next)
    }
}

/// What the caller of a [`Store::read_then_write`] read of the item already:
/// `None`, nothing; `Some(item)`, the item or its absence.
pub type Known = Option<Option<Item>>;

/// What a [`Store::read_then_write`] makes of the item it read: the write
/// at the same key, if any.
pub type NextWrite<'a> = dyn FnMut(Option<&Item>) -> Option<WriteOp> + 'a;

/// [`Store::read_then_write`] as two calls, a (consistent) read unless the
/// item is `known`, then the write: another writer may come between them.
pub fn read_then_write_apart<S: Store + ?Sized>(
    store: &S,
    key: &Key,
    known: Known,
    next: &mut NextWrite,
) -> Result<(), StoreError> {
    let item = match known {
        Some(item) => item,
        None => store.get(key, true)?,
    };
    match next(item.as_ref()) {
        Some(op) => {
            same_item(key, &op)?;
            store.write(op).map(drop)
        }
        None => Ok(()),
    }
}

/// A [`Store::read_then_write`] writes the item it read, nothing else.
pub fn same_item(key: &Key, op: &WriteOp) -> Result<(), StoreError> {
    if op.key() == *key {
        return Ok(());
    }
    Err(StoreError::Backend(format!(
        "a read-then-write of {} / {} would write another item",
        key.pk, key.sk
    )))
}

/// The `version` of an item written where none was, for the items whose
/// every write is conditioned on the version it read (the runtime state,
/// cooldowns): random, not 1. An item can be deleted (an operator's clear,
/// a settled cooldown, DynamoDB's TTL) while another writer holds what it
/// read of it; had the next item started at 1 again, that writer's write
/// could match the new item and put the old content back over the new (an
/// ABA race). Below 2^53, so every JSON reader reads it exactly.
pub fn first_version() -> Result<u64, crate::random::RandomError> {
    let bytes = crate::random::bytes::<8>()?;
    Ok((u64::from_le_bytes(bytes) >> 11).max(1))
}

/// What [`remove`] took away.
#[derive(Debug, Clone, PartialEq)]
pub enum Removed {
    /// There was no item.
    Nothing,
    /// The item as it was.
    Item(Item),
    /// An item the store cannot decode ([`StoreError::Corrupt`]: `reason`).
    Undecodable(String),
}

/// Deletes the item at `key` unconditionally, readable or not: the remedy
/// an operator runs on a state item nothing else will overwrite. A delete
/// returns the old image, which the store cannot decode for a corrupt item;
/// that one goes with a batch delete, which asks for none.
pub fn remove(store: &dyn Store, key: &Key) -> Result<Removed, StoreError> {
    let delete = || WriteOp::Delete {
        key: key.clone(),
        condition: None,
    };
    match store.write(delete()) {
        Ok(old) => Ok(old.map_or(Removed::Nothing, Removed::Item)),
        Err(StoreError::Corrupt { reason, .. }) => {
            for r in store.batch_write(vec![delete()]) {
                r?;
            }
            Ok(Removed::Undecodable(reason))
        }
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn table_names_follow_dynamodbs_rule() {
        for ok in ["abc", "zae-limiter", "my_table.v2", &"x".repeat(255)] {
            assert!(check_table_name(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "ab",
            "a\nb",
            "tab\tle",
            "café",
            "a b",
            "a/b",
            &"x".repeat(256),
        ] {
            let err = check_table_name(bad).unwrap_err().to_string();
            assert!(err.starts_with("invalid table name"), "{bad:?}: {err}");
        }
    }

    proptest! {
        #[test]
        fn a_name_passes_exactly_when_dynamodb_would_take_it(name in "\\PC{0,300}|[a-zA-Z0-9_.-]{0,260}") {
            let want = (3..=255).contains(&name.len())
                && name.chars().all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c));
            prop_assert_eq!(check_table_name(&name).is_ok(), want);
        }
    }
}
