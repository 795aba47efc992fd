//! The embedded local store: one SQLite file holding the same items as the
//! DynamoDB table, with DynamoDB's write semantics (full-replace puts,
//! conditional writes, all-or-nothing transactions, ALL_OLD returns).
//!
//! One file may hold several tables (the `-n` name); each item is a row keyed by
//! (table, PK, SK) whose body is the item in DynamoDB's typed JSON, so nothing is
//! lost between the two backends. The GSI key attributes are copied into indexed
//! columns, so index queries are real index lookups.
//!
//! Durability: WAL with `synchronous = NORMAL` (a commit survives a killed
//! process; a power failure may lose the last commits, never corrupt the file).
//!
//! Concurrency: WAL journal, a busy timeout, and every write runs inside
//! `BEGIN IMMEDIATE`, so a condition is evaluated and the write applied under
//! one lock: two processes racing on a conditional write cannot both win.
//! Opening retries the WAL switch and schema setup SQLite refuses without
//! waiting (several processes opening a new file at once).
//! The file (and its directory) is created on the first write; reading a store
//! that does not exist yet reports the table as missing and creates nothing.

use std::collections::{BTreeSet, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use rusqlite::{params, Connection, OpenFlags, OptionalExtension, TransactionBehavior};

use super::backoff::backoff;
use super::number::Number;
use super::typed_json::{item_from_str, item_to_json};
use super::{AttrValue, Condition, Index, Item, Key, Store, StoreError, UpdateAction, WriteOp};

/// DynamoDB's limits, kept so a write that would fail there fails here too.
const MAX_ITEM_BYTES: usize = 400 * 1024;
const MAX_TRANSACT_OPS: usize = 100;
/// How long a writer waits for another process's write lock before giving up.
const BUSY_TIMEOUT: Duration = Duration::from_secs(15);
const SCHEMA_VERSION: i64 = 1;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS tables (
    name TEXT PRIMARY KEY,
    created_at TEXT NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS items (
    tbl TEXT NOT NULL,
    pk TEXT NOT NULL,
    sk TEXT NOT NULL,
    item TEXT NOT NULL,
    gsi1pk TEXT, gsi1sk TEXT,
    gsi2pk TEXT, gsi2sk TEXT,
    gsi3pk TEXT, gsi3sk TEXT,
    gsi4pk TEXT, gsi4sk TEXT,
    PRIMARY KEY (tbl, pk, sk)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS items_gsi1 ON items (tbl, gsi1pk, gsi1sk) WHERE gsi1pk IS NOT NULL;
CREATE INDEX IF NOT EXISTS items_gsi2 ON items (tbl, gsi2pk, gsi2sk) WHERE gsi2pk IS NOT NULL;
CREATE INDEX IF NOT EXISTS items_gsi3 ON items (tbl, gsi3pk, gsi3sk) WHERE gsi3pk IS NOT NULL;
CREATE INDEX IF NOT EXISTS items_gsi4 ON items (tbl, gsi4pk, gsi4sk) WHERE gsi4pk IS NOT NULL;
";

const INDEXES: [Index; 4] = [Index::Gsi1, Index::Gsi2, Index::Gsi3, Index::Gsi4];

fn columns(index: Index) -> (&'static str, &'static str) {
    match index {
        Index::Gsi1 => ("gsi1pk", "gsi1sk"),
        Index::Gsi2 => ("gsi2pk", "gsi2sk"),
        Index::Gsi3 => ("gsi3pk", "gsi3sk"),
        Index::Gsi4 => ("gsi4pk", "gsi4sk"),
    }
}

/// A table inside one local store file.
pub struct LocalStore {
    table: String,
    path: PathBuf,
    /// `None` until the file exists (it is created by the first write).
    conn: Mutex<Option<Connection>>,
}

impl std::fmt::Debug for LocalStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalStore")
            .field("table", &self.table)
            .field("path", &self.path)
            .finish()
    }
}

/// Why opening a store file failed: SQLite said so (maybe busy, worth a
/// retry), or the file is not one this build can use.
enum Setup {
    Sqlite(rusqlite::Error),
    Refused(String),
}

impl From<rusqlite::Error> for Setup {
    fn from(e: rusqlite::Error) -> Self {
        Setup::Sqlite(e)
    }
}

impl LocalStore {
    /// Opens table `table` in the store file at `path`. Creates nothing: the file
    /// and its directory appear on the first write.
    pub fn open(path: &Path, table: &str) -> Result<Self, StoreError> {
        let store = LocalStore {
            table: table.to_string(),
            path: path.to_path_buf(),
            conn: Mutex::new(None),
        };
        if path.exists() {
            let conn = store.connect(false)?;
            *store.lock()? = Some(conn);
        }
        Ok(store)
    }

    /// The store file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Creates the table (and the file) if missing. Returns whether it was created.
    pub fn create_table(&self) -> Result<bool, StoreError> {
        let existed = self.table_exists()?;
        self.with_write(|_| Ok(()))?;
        Ok(!existed)
    }

    /// Whether the table has been created in this store file.
    pub fn table_exists(&self) -> Result<bool, StoreError> {
        let guard = self.lock()?;
        let Some(conn) = guard.as_ref() else {
            return Ok(false);
        };
        table_row_exists(conn, &self.table).map_err(|e| self.backend(e))
    }

    fn lock(&self) -> Result<std::sync::MutexGuard<'_, Option<Connection>>, StoreError> {
        self.conn
            .lock()
            .map_err(|_| StoreError::Backend("local store connection poisoned by a panic".into()))
    }

    fn backend(&self, e: impl std::fmt::Display) -> StoreError {
        StoreError::Backend(format!("local store {}: {e}", self.path.display()))
    }

    fn connect(&self, create: bool) -> Result<Connection, StoreError> {
        if create {
            if let Some(dir) = self.path.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::create_dir_all(dir).map_err(|e| {
                    StoreError::Backend(format!("cannot create directory {}: {e}", dir.display()))
                })?;
            }
        }
        let mut flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        if create {
            flags |= OpenFlags::SQLITE_OPEN_CREATE;
        }
        let conn = Connection::open_with_flags(&self.path, flags).map_err(|e| self.backend(e))?;
        conn.busy_timeout(BUSY_TIMEOUT)
            .map_err(|e| self.backend(e))?;
        // In WAL mode NORMAL syncs at checkpoints, not at every commit: a commit
        // survives any process crash (kill -9 included) and only the last ones
        // may be lost to a power failure or OS crash. FULL paid one fsync per
        // write: the runtime's decisions ran about 9x slower (benches/runtime.rs).
        conn.pragma_update(None, "synchronous", "NORMAL")
            .map_err(|e| self.backend(e))?;
        // Switching a new file to WAL upgrades a read lock to a write lock, and
        // SQLite refuses that upgrade with SQLITE_BUSY at once, without the busy
        // timeout (waiting could deadlock), while another process writes: seen
        // when processes open a new file together. Tried again until the timeout.
        let deadline = std::time::Instant::now() + BUSY_TIMEOUT;
        let mut round = 0;
        loop {
            round += 1;
            match self.set_up(&conn) {
                Err(Setup::Sqlite(e))
                    if e.sqlite_error_code() == Some(rusqlite::ErrorCode::DatabaseBusy)
                        && std::time::Instant::now() < deadline =>
                {
                    std::thread::sleep(backoff(round));
                }
                Err(Setup::Sqlite(e)) => return Err(self.backend(e)),
                Err(Setup::Refused(why)) => return Err(self.backend(why)),
                Ok(()) => return Ok(conn),
            }
        }
    }

    /// Checks the schema version, switches to WAL and creates the schema.
    fn set_up(&self, conn: &Connection) -> Result<(), Setup> {
        let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
        if version > SCHEMA_VERSION {
            return Err(Setup::Refused(format!(
                "written by a newer zae-limiter (store schema {version}, this build reads {SCHEMA_VERSION})"
            )));
        }
        // journal_mode is persistent; setting it needs a moment of exclusive access.
        let mode: String = conn.query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(Setup::Refused(format!(
                "cannot switch to WAL journal (got {mode})"
            )));
        }
        if version < SCHEMA_VERSION {
            // A failed batch can leave its transaction open; end it before a retry.
            let done = conn.execute_batch(&format!(
                "BEGIN IMMEDIATE; {SCHEMA} PRAGMA user_version = {SCHEMA_VERSION}; COMMIT;"
            ));
            if done.is_err() && !conn.is_autocommit() {
                let _ = conn.execute_batch("ROLLBACK");
            }
            done?;
        }
        Ok(())
    }

    /// Runs `f` on a read connection, or reports the table missing.
    fn with_read<T>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let guard = self.lock()?;
        let Some(conn) = guard.as_ref() else {
            return Err(self.table_not_found());
        };
        if !table_row_exists(conn, &self.table).map_err(|e| self.backend(e))? {
            return Err(self.table_not_found());
        }
        f(conn)
    }

    fn table_not_found(&self) -> StoreError {
        StoreError::TableNotFound {
            table: self.table.clone(),
            hint: format!(
                " in local store {} (`zae-limiter limits apply --local` or `namespace register --local` creates it)",
                self.path.display()
            ),
        }
    }

    /// Runs `f` inside `BEGIN IMMEDIATE` (the file and table are created first when
    /// missing); commits when `f` succeeds, rolls back otherwise.
    fn with_write<T>(
        &self,
        f: impl FnOnce(&rusqlite::Transaction<'_>) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let mut guard = self.lock()?;
        if guard.is_none() {
            *guard = Some(self.connect(true)?);
        }
        let Some(conn) = guard.as_mut() else {
            return Err(self.backend("no connection"));
        };
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|e| self.backend(e))?;
        tx.execute(
            "INSERT OR IGNORE INTO tables (name, created_at) VALUES (?1, strftime('%Y-%m-%dT%H:%M:%SZ','now'))",
            params![self.table],
        )
        .map_err(|e| self.backend(e))?;
        let out = f(&tx)?;
        tx.commit().map_err(|e| self.backend(e))?;
        Ok(out)
    }

    fn load(&self, conn: &Connection, key: &Key) -> Result<Option<Item>, StoreError> {
        let body: Option<String> = conn
            .query_row(
                "SELECT item FROM items WHERE tbl = ?1 AND pk = ?2 AND sk = ?3",
                params![self.table, key.pk, key.sk],
                |r| r.get(0),
            )
            .optional()
            .map_err(|e| self.backend(e))?;
        body.map(|b| self.decode(key, &b)).transpose()
    }

    fn decode(&self, key: &Key, body: &str) -> Result<Item, StoreError> {
        item_from_str(body).map_err(|e| StoreError::Corrupt {
            pk: key.pk.clone(),
            sk: key.sk.clone(),
            reason: e.to_string(),
        })
    }

    fn save(&self, conn: &Connection, item: &Item) -> Result<(), StoreError> {
        let key = validate_item(item)?;
        let body = item_to_json(item).to_string();
        if body.len() > MAX_ITEM_BYTES {
            return Err(StoreError::Backend(format!(
                "item {} / {} is {} bytes; items are limited to 400 KB",
                key.pk,
                key.sk,
                body.len()
            )));
        }
        let gsi = |index: Index| -> (Option<&str>, Option<&str>) {
            let (p, s) = index.key_attrs();
            match (item.get(p), item.get(s)) {
                (Some(AttrValue::S(p)), Some(AttrValue::S(s))) => (Some(p), Some(s)),
                _ => (None, None),
            }
        };
        let [g1, g2, g3, g4] = INDEXES.map(gsi);
        conn.execute(
            "INSERT OR REPLACE INTO items
               (tbl, pk, sk, item, gsi1pk, gsi1sk, gsi2pk, gsi2sk, gsi3pk, gsi3sk, gsi4pk, gsi4sk)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
            params![
                self.table, key.pk, key.sk, body, g1.0, g1.1, g2.0, g2.1, g3.0, g3.1, g4.0, g4.1
            ],
        )
        .map_err(|e| self.backend(e))?;
        Ok(())
    }

    fn remove(&self, conn: &Connection, key: &Key) -> Result<(), StoreError> {
        conn.execute(
            "DELETE FROM items WHERE tbl = ?1 AND pk = ?2 AND sk = ?3",
            params![self.table, key.pk, key.sk],
        )
        .map_err(|e| self.backend(e))?;
        Ok(())
    }

    /// Applies one write whose condition has already been checked against `old`.
    fn apply(&self, conn: &Connection, op: &WriteOp, old: Option<&Item>) -> Result<(), StoreError> {
        match op {
            WriteOp::Put { item, .. } => self.save(conn, item),
            WriteOp::Delete { key, .. } => self.remove(conn, key),
            WriteOp::Update { key, actions, .. } => {
                let new = apply_update(key, old, actions)?;
                self.save(conn, &new)
            }
        }
    }
}

fn table_row_exists(conn: &Connection, table: &str) -> rusqlite::Result<bool> {
    conn.query_row(
        "SELECT 1 FROM tables WHERE name = ?1",
        params![table],
        |_| Ok(()),
    )
    .optional()
    .map(|r| r.is_some())
}

fn condition_of(op: &WriteOp) -> Option<&Condition> {
    match op {
        WriteOp::Put { condition, .. }
        | WriteOp::Delete { condition, .. }
        | WriteOp::Update { condition, .. } => condition.as_ref(),
    }
}

fn op_key(op: &WriteOp) -> Result<Key, StoreError> {
    match op {
        WriteOp::Put { item, .. } => validate_item(item),
        WriteOp::Delete { key, .. } | WriteOp::Update { key, .. } => {
            validate_key(key)?;
            Ok(key.clone())
        }
    }
}

fn validate_key(key: &Key) -> Result<(), StoreError> {
    if key.pk.is_empty() || key.sk.is_empty() {
        return Err(StoreError::Backend(
            "key attributes PK and SK must be non-empty strings".into(),
        ));
    }
    Ok(())
}

/// The checks DynamoDB makes on an item before storing it.
fn validate_item(item: &Item) -> Result<Key, StoreError> {
    let key = Key::of(item)
        .ok_or_else(|| StoreError::Backend("an item needs string attributes PK and SK".into()))?;
    validate_key(&key)?;
    for index in INDEXES {
        let (p, s) = index.key_attrs();
        for name in [p, s] {
            match item.get(name) {
                None => {}
                Some(AttrValue::S(v)) if !v.is_empty() => {}
                Some(_) => {
                    return Err(StoreError::Backend(format!(
                        "item {} / {}: index key attribute {name} must be a non-empty string",
                        key.pk, key.sk
                    )))
                }
            }
        }
    }
    for (name, v) in item {
        validate_value(v).map_err(|reason| {
            StoreError::Backend(format!("item {} / {}: {name}: {reason}", key.pk, key.sk))
        })?;
    }
    Ok(key)
}

fn validate_value(v: &AttrValue) -> Result<(), String> {
    match v {
        AttrValue::N(n) => Number::parse(n).map(|_| ()).map_err(|e| e.to_string()),
        AttrValue::Ss(s) if s.is_empty() => Err("a string set cannot be empty".into()),
        AttrValue::M(m) => m.values().try_for_each(validate_value),
        AttrValue::L(l) => l.iter().try_for_each(validate_value),
        _ => Ok(()),
    }
}

/// DynamoDB equality: numbers by value, everything else structurally.
fn values_equal(a: &AttrValue, b: &AttrValue) -> bool {
    match (a, b) {
        (AttrValue::N(x), AttrValue::N(y)) => super::number::num_eq(x, y),
        (AttrValue::M(x), AttrValue::M(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| values_equal(v, w)))
        }
        (AttrValue::L(x), AttrValue::L(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(v, w)| values_equal(v, w))
        }
        _ => a == b,
    }
}

fn parse_operand(text: &str) -> Result<Number, StoreError> {
    Number::parse(text).map_err(|e| StoreError::Backend(format!("condition operand: {e}")))
}

/// Evaluates a condition against the stored item (`None` when absent).
pub(crate) fn evaluate(cond: &Condition, item: Option<&Item>) -> Result<bool, StoreError> {
    let attr = |name: &str| item.and_then(|i| i.get(name));
    let num_cmp = |name: &str, operand: &str| -> Result<Option<std::cmp::Ordering>, StoreError> {
        let rhs = parse_operand(operand)?;
        Ok(match attr(name) {
            Some(AttrValue::N(n)) => Number::parse(n).ok().map(|lhs| lhs.cmp(&rhs)),
            _ => None,
        })
    };
    Ok(match cond {
        Condition::Exists => item.is_some_and(|i| i.contains_key("PK")),
        Condition::NotExists => !item.is_some_and(|i| i.contains_key("PK")),
        Condition::AttrExists(name) => attr(name).is_some(),
        Condition::AttrNotExists(name) => attr(name).is_none(),
        Condition::AttrEquals(name, value) => attr(name).is_some_and(|v| values_equal(v, value)),
        Condition::AttrNumLe(name, operand) => num_cmp(name, operand)?.is_some_and(|o| o.is_le()),
        Condition::AttrNumLt(name, operand) => num_cmp(name, operand)?.is_some_and(|o| o.is_lt()),
        Condition::And(cs) => {
            for c in cs {
                if !evaluate(c, item)? {
                    return Ok(false);
                }
            }
            true
        }
        Condition::Or(cs) => {
            for c in cs {
                if evaluate(c, item)? {
                    return Ok(true);
                }
            }
            false
        }
    })
}

/// UpdateItem on a copy of the stored item (or a new item holding only the key).
fn apply_update(
    key: &Key,
    old: Option<&Item>,
    actions: &[UpdateAction],
) -> Result<Item, StoreError> {
    let mut item = old.cloned().unwrap_or_else(|| {
        Item::from([
            ("PK".to_string(), AttrValue::s(&key.pk)),
            ("SK".to_string(), AttrValue::s(&key.sk)),
        ])
    });
    let err = |name: &str, reason: String| {
        StoreError::Backend(format!(
            "update of {} / {}: {name}: {reason}",
            key.pk, key.sk
        ))
    };
    let mut touched = HashSet::new();
    for action in actions {
        let name = match action {
            UpdateAction::Set(n, _)
            | UpdateAction::SetIfNotExists(n, _)
            | UpdateAction::Remove(n)
            | UpdateAction::AddNumber(n, _)
            | UpdateAction::AddToSet(n, _)
            | UpdateAction::DeleteFromSet(n, _) => n.as_str(),
        };
        if name == "PK" || name == "SK" {
            return Err(err(name, "key attributes cannot be updated".into()));
        }
        if !touched.insert(name.to_string()) {
            return Err(err(
                name,
                "two actions on one attribute in one update".into(),
            ));
        }
        match action {
            UpdateAction::Set(n, v) => {
                item.insert(n.clone(), v.clone());
            }
            UpdateAction::SetIfNotExists(n, v) => {
                item.entry(n.clone()).or_insert_with(|| v.clone());
            }
            UpdateAction::Remove(n) => {
                item.remove(n);
            }
            UpdateAction::AddNumber(n, delta) => {
                let d = Number::parse(delta).map_err(|e| err(n, e.to_string()))?;
                let sum = match item.get(n) {
                    None => d,
                    Some(AttrValue::N(cur)) => Number::parse(cur)
                        .and_then(|c| c.add(&d))
                        .map_err(|e| err(n, e.to_string()))?,
                    Some(_) => return Err(err(n, "ADD needs a number attribute".into())),
                };
                item.insert(n.clone(), AttrValue::N(sum.canonical()));
            }
            UpdateAction::AddToSet(n, values) => {
                if values.is_empty() {
                    return Err(err(n, "ADD of an empty set".into()));
                }
                match item.get_mut(n) {
                    None => {
                        item.insert(n.clone(), AttrValue::Ss(values.iter().cloned().collect()));
                    }
                    Some(AttrValue::Ss(set)) => set.extend(values.iter().cloned()),
                    Some(_) => {
                        return Err(err(n, "ADD to a set needs a string set attribute".into()))
                    }
                }
            }
            UpdateAction::DeleteFromSet(n, values) => {
                if values.is_empty() {
                    return Err(err(n, "DELETE of an empty set".into()));
                }
                match item.get_mut(n) {
                    None => {}
                    Some(AttrValue::Ss(set)) => {
                        let gone: BTreeSet<&String> = values.iter().collect();
                        set.retain(|v| !gone.contains(v));
                        if set.is_empty() {
                            item.remove(n);
                        }
                    }
                    Some(_) => {
                        return Err(err(
                            n,
                            "DELETE from a set needs a string set attribute".into(),
                        ))
                    }
                }
            }
        }
    }
    Ok(item)
}

impl Store for LocalStore {
    fn table_name(&self) -> &str {
        &self.table
    }

    fn get(&self, key: &Key, _consistent: bool) -> Result<Option<Item>, StoreError> {
        self.with_read(|conn| self.load(conn, key))
    }

    fn batch_get(&self, keys: &[Key], _consistent: bool) -> Result<Vec<Option<Item>>, StoreError> {
        self.with_read(|conn| {
            // One read transaction: every key is read from the same snapshot.
            conn.execute_batch("BEGIN DEFERRED")
                .map_err(|e| self.backend(e))?;
            let out: Result<Vec<_>, _> = keys.iter().map(|k| self.load(conn, k)).collect();
            let end = conn.execute_batch("COMMIT").map_err(|e| self.backend(e));
            let out = out?;
            end?;
            Ok(out)
        })
    }

    fn query(&self, pk: &str, sk_prefix: &str, _consistent: bool) -> Result<Vec<Item>, StoreError> {
        self.with_read(|conn| {
            let mut stmt = conn
                .prepare_cached(
                    "SELECT sk, item FROM items WHERE tbl = ?1 AND pk = ?2 AND sk >= ?3 ORDER BY sk",
                )
                .map_err(|e| self.backend(e))?;
            let mut rows = stmt
                .query(params![self.table, pk, sk_prefix])
                .map_err(|e| self.backend(e))?;
            let mut out = Vec::new();
            while let Some(row) = rows.next().map_err(|e| self.backend(e))? {
                let sk: String = row.get(0).map_err(|e| self.backend(e))?;
                if !sk.starts_with(sk_prefix) {
                    break;
                }
                let body: String = row.get(1).map_err(|e| self.backend(e))?;
                out.push(self.decode(&Key::new(pk, sk), &body)?);
            }
            Ok(out)
        })
    }

    fn query_index(&self, index: Index, pk: &str, sk_prefix: &str) -> Result<Vec<Key>, StoreError> {
        let (pcol, scol) = columns(index);
        self.with_read(|conn| {
            let sql = format!(
                "SELECT pk, sk, {scol} FROM items WHERE tbl = ?1 AND {pcol} = ?2 AND {scol} >= ?3 ORDER BY {scol}, pk, sk"
            );
            let mut stmt = conn.prepare_cached(&sql).map_err(|e| self.backend(e))?;
            let mut rows = stmt
                .query(params![self.table, pk, sk_prefix])
                .map_err(|e| self.backend(e))?;
            let mut out = Vec::new();
            while let Some(row) = rows.next().map_err(|e| self.backend(e))? {
                let isk: String = row.get(2).map_err(|e| self.backend(e))?;
                if !isk.starts_with(sk_prefix) {
                    break;
                }
                let pk: String = row.get(0).map_err(|e| self.backend(e))?;
                let sk: String = row.get(1).map_err(|e| self.backend(e))?;
                out.push(Key::new(pk, sk));
            }
            Ok(out)
        })
    }

    fn write(&self, op: WriteOp) -> Result<Option<Item>, StoreError> {
        let key = op_key(&op)?;
        self.with_write(|tx| {
            let old = self.load(tx, &key)?;
            if let Some(cond) = condition_of(&op) {
                if !evaluate(cond, old.as_ref())? {
                    return Err(StoreError::ConditionFailed {
                        pk: key.pk.clone(),
                        sk: key.sk.clone(),
                    });
                }
            }
            self.apply(tx, &op, old.as_ref())?;
            Ok(old)
        })
    }

    /// All in one SQLite transaction (one commit, not one per write); each op's
    /// condition is still its own, so a failed one does not stop the others.
    /// A storage error fails every op: nothing is committed then.
    fn write_many(&self, ops: Vec<WriteOp>) -> Vec<Result<Option<Item>, StoreError>> {
        if ops.is_empty() {
            return Vec::new();
        }
        let n = ops.len();
        let outcome = self.with_write(|tx| {
            let mut out = Vec::with_capacity(n);
            for op in &ops {
                let key = match op_key(op) {
                    Ok(k) => k,
                    Err(e) => {
                        out.push(Err(e));
                        continue;
                    }
                };
                let old = self.load(tx, &key)?;
                if let Some(cond) = condition_of(op) {
                    if !evaluate(cond, old.as_ref())? {
                        out.push(Err(StoreError::ConditionFailed {
                            pk: key.pk,
                            sk: key.sk,
                        }));
                        continue;
                    }
                }
                self.apply(tx, op, old.as_ref())?;
                out.push(Ok(old));
            }
            Ok(out)
        });
        match outcome {
            Ok(out) => out,
            Err(e) => (0..n).map(|_| Err(e.clone())).collect(),
        }
    }

    fn transact(&self, ops: Vec<WriteOp>) -> Result<(), StoreError> {
        if ops.is_empty() {
            return Ok(());
        }
        if ops.len() > MAX_TRANSACT_OPS {
            return Err(StoreError::Backend(format!(
                "a transaction holds at most {MAX_TRANSACT_OPS} writes, got {}",
                ops.len()
            )));
        }
        let keys = ops.iter().map(op_key).collect::<Result<Vec<_>, _>>()?;
        let mut seen = HashSet::new();
        for k in &keys {
            if !seen.insert(k) {
                return Err(StoreError::Backend(format!(
                    "a transaction cannot write {} / {} twice",
                    k.pk, k.sk
                )));
            }
        }
        self.with_write(|tx| {
            let olds = keys
                .iter()
                .map(|k| self.load(tx, k))
                .collect::<Result<Vec<_>, _>>()?;
            let mut reasons = Vec::with_capacity(ops.len());
            let mut failed = false;
            for (op, old) in ops.iter().zip(&olds) {
                let ok = match condition_of(op) {
                    Some(c) => evaluate(c, old.as_ref())?,
                    None => true,
                };
                failed |= !ok;
                reasons.push(if ok { "None" } else { "ConditionalCheckFailed" });
            }
            if failed {
                // Returning Err drops the transaction: nothing is written.
                return Err(StoreError::TransactionCanceled(format!(
                    "[{}]",
                    reasons.join(", ")
                )));
            }
            for (op, old) in ops.iter().zip(&olds) {
                self.apply(tx, op, old.as_ref())?;
            }
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store() -> (tempfile::TempDir, LocalStore) {
        let dir = tempfile::tempdir().unwrap();
        let s = LocalStore::open(&dir.path().join("sub/dir/local.sqlite"), "t").unwrap();
        (dir, s)
    }

    fn item(pk: &str, sk: &str, extra: &[(&str, AttrValue)]) -> Item {
        let mut i = Item::from([
            ("PK".to_string(), AttrValue::s(pk)),
            ("SK".to_string(), AttrValue::s(sk)),
        ]);
        for (k, v) in extra {
            i.insert(k.to_string(), v.clone());
        }
        i
    }

    /// Another process holding the write lock while this one switches a new
    /// file to WAL: SQLite answers SQLITE_BUSY without waiting (the switch
    /// upgrades a read lock), so opening must try again, not fail.
    #[test]
    fn opening_a_new_file_waits_for_another_processs_write_lock() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("local.sqlite");
        let other = Connection::open(&path).unwrap();
        other
            .execute_batch("BEGIN IMMEDIATE; CREATE TABLE held (x);")
            .unwrap();
        let release = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            other.execute_batch("COMMIT").unwrap();
        });
        let s = LocalStore::open(&path, "t").unwrap();
        put(&s, item("a", "b", &[]));
        release.join().unwrap();
        assert!(s.get(&Key::new("a", "b"), true).unwrap().is_some());
    }

    fn put(s: &LocalStore, i: Item) -> Option<Item> {
        s.write(WriteOp::Put {
            item: i,
            condition: None,
        })
        .unwrap()
    }

    #[test]
    fn reads_before_the_first_write_report_a_missing_table_and_create_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nested/local.sqlite");
        let s = LocalStore::open(&path, "t").unwrap();
        let err = s.get(&Key::new("a", "b"), true).unwrap_err();
        assert!(matches!(err, StoreError::TableNotFound { .. }), "{err}");
        assert!(!path.exists());
        assert!(!s.table_exists().unwrap());
        put(&s, item("a", "b", &[]));
        assert!(path.exists());
        assert!(s.table_exists().unwrap());
        // Another table in the same file is still missing.
        let other = LocalStore::open(&path, "other").unwrap();
        assert!(matches!(
            other.query("a", "", true),
            Err(StoreError::TableNotFound { .. })
        ));
        assert!(other.create_table().unwrap());
        assert_eq!(other.query("a", "", true).unwrap(), vec![]);
    }

    #[test]
    fn put_replaces_the_whole_item_and_returns_the_old_one() {
        let (_d, s) = store();
        let first = item(
            "p",
            "s",
            &[("a", AttrValue::n(1)), ("b", AttrValue::s("x"))],
        );
        assert_eq!(put(&s, first.clone()), None);
        let second = item("p", "s", &[("c", AttrValue::Bool(true))]);
        assert_eq!(put(&s, second.clone()), Some(first));
        assert_eq!(s.get(&Key::new("p", "s"), false).unwrap(), Some(second));
    }

    #[test]
    fn every_attribute_type_survives_storage() {
        let (_d, s) = store();
        let i = item(
            "p",
            "s",
            &[
                ("n", AttrValue::n("1.50")),
                ("z", AttrValue::Null),
                (
                    "m",
                    AttrValue::M(Item::from([(
                        "k".into(),
                        AttrValue::L(vec![AttrValue::s("v"), AttrValue::Bool(false)]),
                    )])),
                ),
                (
                    "ss",
                    AttrValue::Ss(["b".to_string(), "a".to_string()].into()),
                ),
            ],
        );
        put(&s, i.clone());
        assert_eq!(s.get(&Key::new("p", "s"), true).unwrap(), Some(i));
    }

    #[test]
    fn invalid_items_are_refused() {
        let (_d, s) = store();
        for bad in [
            Item::from([("PK".to_string(), AttrValue::s("p"))]),
            item("", "s", &[]),
            item("p", "s", &[("n", AttrValue::N("True".into()))]),
            item("p", "s", &[("ss", AttrValue::Ss(BTreeSet::new()))]),
            item(
                "p",
                "s",
                &[("GSI4PK", AttrValue::n(1)), ("GSI4SK", AttrValue::s("x"))],
            ),
        ] {
            assert!(
                s.write(WriteOp::Put {
                    item: bad.clone(),
                    condition: None
                })
                .is_err(),
                "{bad:?}"
            );
        }
        let huge = item(
            "p",
            "s",
            &[("big", AttrValue::s("x".repeat(MAX_ITEM_BYTES)))],
        );
        assert!(s
            .write(WriteOp::Put {
                item: huge,
                condition: None
            })
            .is_err());
    }

    #[test]
    fn delete_is_idempotent_unless_conditioned() {
        let (_d, s) = store();
        put(&s, item("p", "s", &[]));
        let key = Key::new("p", "s");
        let old = s
            .write(WriteOp::Delete {
                key: key.clone(),
                condition: None,
            })
            .unwrap();
        assert!(old.is_some());
        assert_eq!(s.get(&key, true).unwrap(), None);
        assert_eq!(
            s.write(WriteOp::Delete {
                key: key.clone(),
                condition: None
            })
            .unwrap(),
            None
        );
        let err = s
            .write(WriteOp::Delete {
                key,
                condition: Some(Condition::Exists),
            })
            .unwrap_err();
        assert!(matches!(err, StoreError::ConditionFailed { .. }));
    }

    #[test]
    fn update_applies_every_action() {
        let (_d, s) = store();
        let key = Key::new("p", "s");
        let upd = |actions: Vec<UpdateAction>| {
            s.write(WriteOp::Update {
                key: key.clone(),
                actions,
                condition: None,
            })
        };
        // Creates the item when absent.
        assert_eq!(
            upd(vec![
                UpdateAction::Set("a".into(), AttrValue::s("x")),
                UpdateAction::AddNumber("cnt".into(), "1".into()),
                UpdateAction::AddToSet("set".into(), vec!["r1".into(), "r2".into()]),
                UpdateAction::SetIfNotExists("g".into(), AttrValue::s("first")),
            ])
            .unwrap(),
            None
        );
        upd(vec![
            UpdateAction::SetIfNotExists("g".into(), AttrValue::s("second")),
            UpdateAction::AddNumber("cnt".into(), "2".into()),
            UpdateAction::AddToSet("set".into(), vec!["r3".into()]),
            UpdateAction::Remove("a".into()),
        ])
        .unwrap();
        let got = s.get(&key, true).unwrap().unwrap();
        assert_eq!(got.get("g"), Some(&AttrValue::s("first")));
        assert_eq!(got.get("cnt"), Some(&AttrValue::n(3)));
        assert_eq!(got.get("a"), None);
        assert_eq!(
            got.get("set"),
            Some(&AttrValue::Ss(["r1", "r2", "r3"].map(String::from).into()))
        );
        upd(vec![UpdateAction::DeleteFromSet(
            "set".into(),
            vec!["r1".into(), "r2".into(), "r3".into()],
        )])
        .unwrap();
        upd(vec![UpdateAction::AddNumber("cnt".into(), "-3".into())]).unwrap();
        let got = s.get(&key, true).unwrap().unwrap();
        assert_eq!(got.get("set"), None, "an emptied set disappears");
        assert_eq!(got.get("cnt"), Some(&AttrValue::n(0)));
        // Type errors and key updates are refused and change nothing.
        assert!(upd(vec![UpdateAction::AddNumber("g".into(), "1".into())]).is_err());
        assert!(upd(vec![UpdateAction::AddToSet("cnt".into(), vec!["x".into()])]).is_err());
        assert!(upd(vec![UpdateAction::Set("PK".into(), AttrValue::s("q"))]).is_err());
        assert!(upd(vec![
            UpdateAction::Set("x".into(), AttrValue::n(1)),
            UpdateAction::Remove("x".into())
        ])
        .is_err());
        assert_eq!(s.get(&key, true).unwrap().unwrap(), got);
        // A conditioned update of a missing item does not create it.
        let err = s
            .write(WriteOp::Update {
                key: Key::new("p", "missing"),
                actions: vec![UpdateAction::Set("a".into(), AttrValue::n(1))],
                condition: Some(Condition::Exists),
            })
            .unwrap_err();
        assert!(matches!(err, StoreError::ConditionFailed { .. }));
        assert_eq!(s.get(&Key::new("p", "missing"), true).unwrap(), None);
    }

    #[test]
    fn conditions_follow_dynamodb() {
        let stored = item(
            "p",
            "s",
            &[
                ("v", AttrValue::s("0.15.0")),
                ("n", AttrValue::n("5")),
                ("flag", AttrValue::Bool(false)),
            ],
        );
        let some = Some(&stored);
        let ev = |c: Condition, i: Option<&Item>| evaluate(&c, i).unwrap();
        assert!(ev(Condition::Exists, some));
        assert!(!ev(Condition::Exists, None));
        assert!(ev(Condition::NotExists, None));
        assert!(!ev(Condition::NotExists, some));
        assert!(ev(Condition::AttrExists("n".into()), some));
        assert!(!ev(Condition::AttrExists("missing".into()), some));
        assert!(ev(Condition::AttrNotExists("missing".into()), some));
        assert!(ev(Condition::AttrNotExists("n".into()), None));
        assert!(ev(
            Condition::AttrEquals("v".into(), AttrValue::s("0.15.0")),
            some
        ));
        assert!(!ev(
            Condition::AttrEquals("v".into(), AttrValue::s("0.16.0")),
            some
        ));
        assert!(
            ev(Condition::AttrEquals("n".into(), AttrValue::n("5.0")), some),
            "numbers compare by value"
        );
        assert!(
            !ev(Condition::AttrEquals("n".into(), AttrValue::s("5")), some),
            "types must agree"
        );
        assert!(!ev(
            Condition::AttrEquals("flag".into(), AttrValue::Bool(true)),
            some
        ));
        assert!(ev(Condition::AttrNumLe("n".into(), "5".into()), some));
        assert!(!ev(Condition::AttrNumLt("n".into(), "5".into()), some));
        assert!(
            ev(Condition::AttrNumLt("n".into(), "10".into()), some),
            "numeric, not textual"
        );
        assert!(
            !ev(Condition::AttrNumLe("v".into(), "10".into()), some),
            "a string is not <= a number"
        );
        assert!(!ev(
            Condition::AttrNumLe("missing".into(), "10".into()),
            some
        ));
        assert!(ev(
            Condition::And(vec![
                Condition::Exists,
                Condition::Or(vec![
                    Condition::AttrEquals("v".into(), AttrValue::s("x")),
                    Condition::AttrNotExists("w".into()),
                ])
            ]),
            some
        ));
        assert!(!ev(
            Condition::And(vec![Condition::Exists, Condition::NotExists]),
            some
        ));
        assert!(!ev(Condition::Or(vec![]), some));
        assert!(evaluate(&Condition::AttrNumLe("n".into(), "abc".into()), some).is_err());
    }

    #[test]
    fn a_failed_condition_writes_nothing() {
        let (_d, s) = store();
        put(&s, item("p", "s", &[("v", AttrValue::n(1))]));
        let err = s
            .write(WriteOp::Put {
                item: item("p", "s", &[("v", AttrValue::n(2))]),
                condition: Some(Condition::NotExists),
            })
            .unwrap_err();
        assert!(matches!(err, StoreError::ConditionFailed { ref pk, .. } if pk == "p"));
        assert_eq!(
            s.get(&Key::new("p", "s"), true).unwrap().unwrap().get("v"),
            Some(&AttrValue::n(1))
        );
    }

    #[test]
    fn write_many_keeps_each_condition_its_own() {
        let (_d, s) = store();
        put(&s, item("p", "exists", &[("v", AttrValue::n(1))]));
        let out = s.write_many(vec![
            WriteOp::Put {
                item: item("p", "new", &[]),
                condition: Some(Condition::NotExists),
            },
            WriteOp::Put {
                item: item("p", "exists", &[("v", AttrValue::n(2))]),
                condition: Some(Condition::NotExists),
            },
            WriteOp::Update {
                key: Key::new("p", "counter"),
                actions: vec![UpdateAction::AddNumber("c".into(), "1".into())],
                condition: None,
            },
        ]);
        assert!(matches!(out[0], Ok(None)));
        assert!(matches!(out[1], Err(StoreError::ConditionFailed { .. })));
        assert!(matches!(out[2], Ok(None)));
        let get = |sk: &str| s.get(&Key::new("p", sk), true).unwrap();
        assert!(get("new").is_some());
        assert_eq!(get("exists").unwrap().get("v"), Some(&AttrValue::n(1)));
        assert_eq!(get("counter").unwrap().get("c"), Some(&AttrValue::n(1)));
        assert!(s.write_many(Vec::new()).is_empty());
    }

    #[test]
    fn transactions_are_all_or_nothing() {
        let (_d, s) = store();
        put(&s, item("p", "exists", &[]));
        let ops = vec![
            WriteOp::Put {
                item: item("p", "new", &[]),
                condition: Some(Condition::NotExists),
            },
            WriteOp::Update {
                key: Key::new("p", "counter"),
                actions: vec![UpdateAction::AddNumber("c".into(), "1".into())],
                condition: None,
            },
            WriteOp::Put {
                item: item("p", "exists", &[("x", AttrValue::n(1))]),
                condition: Some(Condition::NotExists),
            },
        ];
        let err = s.transact(ops).unwrap_err();
        match err {
            StoreError::TransactionCanceled(r) => {
                assert_eq!(r, "[None, None, ConditionalCheckFailed]")
            }
            other => panic!("{other}"),
        }
        assert_eq!(s.query("p", "", true).unwrap().len(), 1, "nothing written");
        s.transact(vec![
            WriteOp::Put {
                item: item("p", "new", &[]),
                condition: Some(Condition::NotExists),
            },
            WriteOp::Delete {
                key: Key::new("p", "exists"),
                condition: Some(Condition::Exists),
            },
            WriteOp::Update {
                key: Key::new("p", "counter"),
                actions: vec![UpdateAction::AddNumber("c".into(), "1".into())],
                condition: None,
            },
        ])
        .unwrap();
        let sks: Vec<String> = s
            .query("p", "", true)
            .unwrap()
            .iter()
            .map(|i| Key::of(i).unwrap().sk)
            .collect();
        assert_eq!(sks, ["counter", "new"]);
        // A write error inside the transaction (ADD on a string) rolls back the rest.
        let err = s.transact(vec![
            WriteOp::Delete {
                key: Key::new("p", "new"),
                condition: None,
            },
            WriteOp::Update {
                key: Key::new("p", "counter"),
                actions: vec![UpdateAction::AddToSet("c".into(), vec!["x".into()])],
                condition: None,
            },
        ]);
        assert!(err.is_err());
        assert!(s.get(&Key::new("p", "new"), true).unwrap().is_some());
        // Two writes to one key and oversized transactions are refused.
        assert!(s
            .transact(vec![
                WriteOp::Delete {
                    key: Key::new("p", "a"),
                    condition: None
                },
                WriteOp::Delete {
                    key: Key::new("p", "a"),
                    condition: None
                },
            ])
            .is_err());
        let many = (0..101)
            .map(|i| WriteOp::Delete {
                key: Key::new("p", format!("{i}")),
                condition: None,
            })
            .collect();
        assert!(s.transact(many).is_err());
    }

    #[test]
    fn query_returns_a_prefix_in_sk_order() {
        let (_d, s) = store();
        for sk in [
            "#CONFIG#gpt-4",
            "#META",
            "#CONFIG#_default_",
            "#CONFIG",
            "#CONFIH",
            "#CONFIG#é",
        ] {
            put(&s, item("E", sk, &[]));
        }
        put(&s, item("F", "#CONFIG#x", &[]));
        let sks = |p: &str| -> Vec<String> {
            s.query("E", p, false)
                .unwrap()
                .iter()
                .map(|i| Key::of(i).unwrap().sk)
                .collect()
        };
        assert_eq!(
            sks("#CONFIG#"),
            ["#CONFIG#_default_", "#CONFIG#gpt-4", "#CONFIG#é"]
        );
        assert_eq!(
            sks("#CONFIG"),
            ["#CONFIG", "#CONFIG#_default_", "#CONFIG#gpt-4", "#CONFIG#é"]
        );
        assert_eq!(sks("").len(), 6);
        assert_eq!(sks("#NOPE"), Vec::<String>::new());
    }

    #[test]
    fn index_queries_find_items_by_their_gsi_keys() {
        let (_d, s) = store();
        let gsi3 = |e: &str| {
            item(
                &format!("ns/ENTITY#{e}"),
                "#CONFIG#gpt-4",
                &[
                    ("GSI3PK", AttrValue::s("ns/ENTITY_CONFIG#gpt-4")),
                    ("GSI3SK", AttrValue::s(e)),
                ],
            )
        };
        put(&s, gsi3("user-2"));
        put(&s, gsi3("user-1"));
        put(&s, gsi3("admin"));
        // Only GSI3PK, no GSI3SK: not in the index.
        put(
            &s,
            item(
                "ns/ENTITY#x",
                "#CONFIG#gpt-4",
                &[("GSI3PK", AttrValue::s("ns/ENTITY_CONFIG#gpt-4"))],
            ),
        );
        let keys = s
            .query_index(Index::Gsi3, "ns/ENTITY_CONFIG#gpt-4", "user-")
            .unwrap();
        assert_eq!(
            keys,
            [
                Key::new("ns/ENTITY#user-1", "#CONFIG#gpt-4"),
                Key::new("ns/ENTITY#user-2", "#CONFIG#gpt-4")
            ]
        );
        assert_eq!(
            s.query_index(Index::Gsi3, "ns/ENTITY_CONFIG#gpt-4", "")
                .unwrap()
                .len(),
            3
        );
        assert!(s
            .query_index(Index::Gsi1, "ns/ENTITY_CONFIG#gpt-4", "")
            .unwrap()
            .is_empty());
        // Replacing the item without its index keys takes it out of the index.
        put(&s, item("ns/ENTITY#admin", "#CONFIG#gpt-4", &[]));
        assert_eq!(
            s.query_index(Index::Gsi3, "ns/ENTITY_CONFIG#gpt-4", "")
                .unwrap()
                .len(),
            2
        );
        // The index really is used.
        let guard = s.lock().unwrap();
        let plan: String = guard
            .as_ref()
            .unwrap()
            .query_row(
                "EXPLAIN QUERY PLAN SELECT pk, sk, gsi3sk FROM items WHERE tbl = ?1 AND gsi3pk = ?2 AND gsi3sk >= ?3 ORDER BY gsi3sk, pk, sk",
                params!["t", "x", ""],
                |r| r.get(3),
            )
            .unwrap();
        assert!(plan.contains("items_gsi3"), "{plan}");
    }

    #[test]
    fn batch_get_answers_in_key_order() {
        let (_d, s) = store();
        put(&s, item("a", "1", &[]));
        put(&s, item("b", "2", &[]));
        let got = s
            .batch_get(
                &[Key::new("b", "2"), Key::new("x", "x"), Key::new("a", "1")],
                false,
            )
            .unwrap();
        assert_eq!(
            got.iter().map(Option::is_some).collect::<Vec<_>>(),
            [true, false, true]
        );
        assert_eq!(
            Key::of(got[0].as_ref().unwrap()).unwrap(),
            Key::new("b", "2")
        );
    }

    #[test]
    fn a_file_that_is_not_a_store_is_an_error_not_a_panic() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("junk");
        std::fs::write(
            &path,
            "this is not sqlite, just text that is long enough to matter",
        )
        .unwrap();
        let res = LocalStore::open(&path, "t").and_then(|s| s.get(&Key::new("a", "b"), true));
        assert!(matches!(res, Err(StoreError::Backend(_))), "{res:?}");
    }

    /// Conditional writes from separate connections (as two processes would
    /// hold) never both win, and no increment is lost.
    #[test]
    fn concurrent_conditional_writes_from_two_connections() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("local.sqlite");
        LocalStore::open(&path, "t")
            .unwrap()
            .create_table()
            .unwrap();
        const THREADS: usize = 4;
        const ROUNDS: usize = 25;
        let handles: Vec<_> = (0..THREADS)
            .map(|t| {
                let path = path.clone();
                std::thread::spawn(move || {
                    let s = LocalStore::open(&path, "t").unwrap();
                    let mut wins_create = 0;
                    let mut cas_wins = 0;
                    for round in 0..ROUNDS {
                        // Everybody races to create the same item; exactly one wins.
                        let r = s.write(WriteOp::Put {
                            item: item("race", &format!("{round}"), &[("owner", AttrValue::n(t))]),
                            condition: Some(Condition::NotExists),
                        });
                        match r {
                            Ok(_) => wins_create += 1,
                            Err(StoreError::ConditionFailed { .. }) => {}
                            Err(e) => panic!("{e}"),
                        }
                        // Compare-and-swap increment: read, then write if unchanged.
                        loop {
                            let cur = s.get(&Key::new("cas", "x"), true).unwrap();
                            let (n, cond) = match cur.as_ref().and_then(|i| i.get("n")) {
                                Some(AttrValue::N(n)) => (
                                    n.parse::<u64>().unwrap(),
                                    Condition::AttrEquals("n".into(), AttrValue::N(n.clone())),
                                ),
                                _ => (0, Condition::NotExists),
                            };
                            let r = s.write(WriteOp::Put {
                                item: item("cas", "x", &[("n", AttrValue::n(n + 1))]),
                                condition: Some(cond),
                            });
                            match r {
                                Ok(_) => {
                                    cas_wins += 1;
                                    break;
                                }
                                Err(StoreError::ConditionFailed { .. }) => continue,
                                Err(e) => panic!("{e}"),
                            }
                        }
                        s.write(WriteOp::Update {
                            key: Key::new("add", "x"),
                            actions: vec![UpdateAction::AddNumber("n".into(), "1".into())],
                            condition: None,
                        })
                        .unwrap();
                    }
                    (wins_create, cas_wins)
                })
            })
            .collect();
        let results: Vec<(usize, usize)> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        let s = LocalStore::open(&path, "t").unwrap();
        assert_eq!(
            results.iter().map(|r| r.0).sum::<usize>(),
            ROUNDS,
            "one creator per round"
        );
        assert_eq!(s.query("race", "", true).unwrap().len(), ROUNDS);
        let total = (THREADS * ROUNDS) as u64;
        assert_eq!(results.iter().map(|r| r.1 as u64).sum::<u64>(), total);
        let n = |pk: &str| s.get(&Key::new(pk, "x"), true).unwrap().unwrap()["n"].clone();
        assert_eq!(
            n("cas"),
            AttrValue::n(total),
            "no lost compare-and-swap update"
        );
        assert_eq!(n("add"), AttrValue::n(total), "no lost ADD");
    }
}
