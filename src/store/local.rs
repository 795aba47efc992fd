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
//! Checkpoints run in the commit that fills the log, or, for a server's
//! stores ([`Checkpoints::Deferred`]), wherever their owner calls
//! [`LocalStore::checkpoint`] (docs/stores.md).
//!
//! Concurrency: WAL journal, a busy timeout, and every write runs inside
//! `BEGIN IMMEDIATE`, so a condition is evaluated and the write applied under
//! one lock: two processes racing on a conditional write cannot both win.
//! Opening retries the WAL switch and schema setup SQLite refuses without
//! waiting (several processes opening a new file at once).
//! The file (and its directory) is created on the first write; reading a store
//! that does not exist yet reports the table as missing and creates nothing.
//! Read-only commands open the file read-only ([`LocalStore::open_read_only`]),
//! so they work on a store in a directory they may not write.
//! A file removed or replaced at its path while a store has it open (a
//! long-running `serve`) is an error from then on ([`FILE_CHECK_EVERY`]),
//! never writes to a file no other process reads.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rusqlite::{
    params, Connection, OpenFlags, OptionalExtension, Transaction, TransactionBehavior,
};

use super::backoff::{self, backoff};
use super::emulate::{self, index_keys, op_key, Change};
use super::typed_json::item_from_str;
use super::{BadPath, Index, Item, Key, Known, Missing, NextWrite, Store, StoreError, WriteOp};

/// How long a writer waits for another process's write lock before giving up.
const BUSY_TIMEOUT: Duration = Duration::from_secs(15);

/// The longest sleep between two tries for a busy database.
const BUSY_STEP_MAX: Duration = Duration::from_millis(2);

/// What to check when SQLite could not write or open the file. Its words
/// (`sqlite3_errstr`, stable across versions) name neither the cause nor the
/// files involved: a writer needs the file, its directory and the `-wal` and
/// `-shm` files SQLite keeps beside it.
fn permission_hint(sqlite_text: &str) -> &'static str {
    let text = sqlite_text.to_ascii_lowercase();
    if text.contains("readonly database") || text.contains("unable to open database file") {
        "; this user must be able to write the file, the -wal and -shm files beside it and their directory (check their permissions and immutable flags, `lsattr`)"
    } else {
        ""
    }
}

/// The wait before try `count + 1` for a lock another connection holds:
/// 50 µs, doubling to at most [`BUSY_STEP_MAX`]. SQLite's own handler
/// (`busy_timeout`) sleeps 1, 2, 5, 10, … up to 100 ms between tries, so a
/// writer arriving just after another waited tens of milliseconds for a lock
/// held a fraction of one (serve's p99, docs/serve.md "Speed").
fn busy_step(count: u32) -> Duration {
    Duration::from_micros(50u64 << count.min(6)).min(BUSY_STEP_MAX)
}

/// How long a restarting checkpoint waits for another connection's reader or
/// writer before it gives way (copying what it can, like a passive one): the
/// server's requests wait in line behind a restart (`serve::checkpoints`), so
/// a reader in another process must not hold them up for [`BUSY_TIMEOUT`].
pub const RESTART_BUSY: Duration = Duration::from_millis(100);

/// How many waits add up to `budget`: the first 6 steps are shorter than
/// [`BUSY_STEP_MAX`], so 6 more than the budget over the longest step.
fn busy_tries(budget: Duration) -> u128 {
    budget.as_micros() / BUSY_STEP_MAX.as_micros() + 6
}

/// One try of a busy handler: `true` to try again after [`busy_step`],
/// `false` (SQLITE_BUSY for the caller) once the steps add up to `budget`.
fn wait_within(count: i32, budget: Duration) -> bool {
    let count = u32::try_from(count).unwrap_or(0);
    if u128::from(count) >= busy_tries(budget) {
        return false;
    }
    backoff::pause(busy_step(count));
    true
}

/// SQLite's busy handler for every call: up to [`BUSY_TIMEOUT`].
fn busy_wait(count: i32) -> bool {
    wait_within(count, BUSY_TIMEOUT)
}

/// The busy handler while a checkpoint restarts the log: up to [`RESTART_BUSY`].
fn restart_busy_wait(count: i32) -> bool {
    wait_within(count, RESTART_BUSY)
}

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
    /// The file the connection has open, and when that was last checked.
    file: Mutex<FileCheck>,
    /// Opened by a read-only command: every write is refused.
    read_only: bool,
    checkpoints: Checkpoints,
}

/// How often a store looks whether its file is still the one at its path:
/// a stat, at most ten times a second.
pub const FILE_CHECK_EVERY: Duration = Duration::from_millis(100);

/// The identity (device, inode) of the file a connection has open.
#[derive(Debug, Default)]
struct FileCheck {
    id: Option<(u64, u64)>,
    at: Option<Instant>,
    /// Another file (or none) was seen at the path.
    replaced: bool,
}

/// Makes the first commit of a log that a restart has just emptied: the
/// file's schema version, written again unchanged (one page). SQLite syncs a
/// new log's header in that commit (against corruption on power loss); made
/// here, the sync is the checkpointer's, instead of holding up the next
/// writer — on `serve`'s worker, every request behind it (docs/serve.md#speed).
/// The caller restores its busy handler after.
fn begin_log(conn: &Connection) {
    // Best effort, and without waiting: a writer of another process that
    // takes the lock first makes that commit itself, and the restart is done
    // either way (any other failure shows again in the next write).
    if conn.busy_handler(None).is_err() || conn.execute_batch("BEGIN IMMEDIATE").is_err() {
        return;
    }
    let written = conn
        .query_row("PRAGMA user_version", [], |r| r.get::<_, i64>(0))
        .and_then(|v| conn.execute_batch(&format!("PRAGMA user_version = {v}; COMMIT")));
    if written.is_err() {
        let _ = conn.execute_batch("ROLLBACK");
    }
}

/// How far [`LocalStore::checkpoint`] goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CheckpointMode {
    Passive,
    Restart,
}

/// What a checkpoint did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Checkpointed {
    /// Frames (pages) the log holds; for a restart, the frames it held
    /// before it started over.
    pub frames: u64,
    /// Another connection's reader or writer was in the way (for a restart:
    /// longer than [`RESTART_BUSY`]), so not every frame was copied and the
    /// log was not started over.
    pub blocked: bool,
}

/// Who copies the write-ahead log back into the store file (a checkpoint,
/// which syncs the file: milliseconds on a slow disk).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Checkpoints {
    /// SQLite, inside the commit that grows the log past 1,000 pages: that
    /// write waits for the syncs. Right for a command that writes and exits.
    OnCommit,
    /// Someone else calls [`LocalStore::checkpoint`], e.g. a thread of the
    /// server, so that no request waits for a sync (docs/serve.md#speed).
    Deferred,
}

impl std::fmt::Debug for LocalStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalStore")
            .field("table", &self.table)
            .field("path", &self.path)
            .finish()
    }
}

/// Refuses a store path that cannot hold a store file: a directory, a
/// device or FIFO, a path below a file ([`BadPath`]). A path that does not
/// exist yet is fine (a write creates it).
fn usable_path(path: &Path) -> Result<(), StoreError> {
    use std::os::unix::fs::FileTypeExt;
    let bad = |why| {
        Err(StoreError::LocalStorePath {
            path: path.to_path_buf(),
            why,
        })
    };
    match std::fs::metadata(path) {
        Ok(meta) if meta.is_dir() => bad(BadPath::Directory),
        Ok(meta) if meta.is_file() => Ok(()),
        Ok(meta) => {
            let t = meta.file_type();
            bad(BadPath::NotAFile(
                if t.is_char_device() || t.is_block_device() {
                    "a device"
                } else if t.is_fifo() {
                    "a FIFO"
                } else if t.is_socket() {
                    "a socket"
                } else {
                    "not a regular file"
                },
            ))
        }
        // Below a file: the nearest ancestor that exists is not a directory.
        Err(e) if e.kind() == std::io::ErrorKind::NotADirectory => {
            let file = path
                .ancestors()
                .skip(1)
                .find(|a| a.exists())
                .filter(|a| !a.is_dir())
                .map(Path::to_path_buf);
            match file {
                Some(file) => bad(BadPath::BelowFile(file)),
                None => Ok(()),
            }
        }
        Err(_) => Ok(()),
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
        Self::open_with(path, table, Checkpoints::OnCommit)
    }

    /// [`LocalStore::open`], saying who runs the checkpoints.
    pub fn open_with(
        path: &Path,
        table: &str,
        checkpoints: Checkpoints,
    ) -> Result<Self, StoreError> {
        let mut store = Self::unopened(path, table, false);
        store.checkpoints = checkpoints;
        usable_path(path)?;
        if path.exists() {
            let conn = store.connect(false)?;
            *store.lock()? = Some(conn);
        }
        Ok(store)
    }

    /// Opens table `table` for reading only: SQLite opens the file read-only and
    /// nothing is set up, so a store in a directory (or a file) this process
    /// may not write can still be read. A missing file is reported as such
    /// ([`Missing::NoLocalFile`]), a directory too; every write is
    /// refused.
    pub fn open_read_only(path: &Path, table: &str) -> Result<Self, StoreError> {
        let store = Self::unopened(path, table, true);
        usable_path(path)?;
        if path.exists() {
            let conn = store.connect_read_only()?;
            *store.lock()? = conn;
        }
        Ok(store)
    }

    /// The store for `table` in `path`, not connected yet.
    fn unopened(path: &Path, table: &str, read_only: bool) -> Self {
        LocalStore {
            table: table.to_string(),
            path: path.to_path_buf(),
            conn: Mutex::new(None),
            file: Mutex::new(FileCheck::default()),
            read_only,
            checkpoints: Checkpoints::OnCommit,
        }
    }

    /// Copies what the write-ahead log holds back into the store file, for
    /// the owner of [`Checkpoints::Deferred`] stores; returns the frames
    /// (pages) the log holds. [`CheckpointMode::Passive`] waits for no one and
    /// makes no one wait, but a log that writers keep appending to is never
    /// started over; [`CheckpointMode::Restart`] holds new writers back while it
    /// copies the rest, so that the next write starts the log over. A file
    /// that does not exist yet has nothing to copy. A restart waits at most
    /// [`RESTART_BUSY`] for other connections ([`Checkpointed::blocked`]),
    /// and makes the new log's first commit itself ([`begin_log`]).
    pub fn checkpoint(&self, how: CheckpointMode) -> Result<Checkpointed, StoreError> {
        let mut guard = self.lock()?;
        let conn = match &mut *guard {
            Some(conn) => conn,
            _ if !self.path.exists() => {
                return Ok(Checkpointed {
                    frames: 0,
                    blocked: false,
                })
            }
            none => none.insert(self.connect(false)?),
        };
        let (sql, handler): (_, fn(i32) -> bool) = match how {
            CheckpointMode::Passive => ("PRAGMA wal_checkpoint(PASSIVE)", busy_wait),
            CheckpointMode::Restart => ("PRAGMA wal_checkpoint(RESTART)", restart_busy_wait),
        };
        conn.busy_handler(Some(handler))
            .map_err(|e| self.backend(e))?;
        // (busy, frames in the log, frames copied)
        let done = conn
            .query_row(sql, [], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .map(|(busy, log, _): (i64, i64, i64)| {
                if how == CheckpointMode::Restart && busy == 0 {
                    begin_log(conn);
                }
                (busy, log)
            });
        conn.busy_handler(Some(busy_wait))
            .map_err(|e| self.backend(e))?;
        let (busy, log) = done.map_err(|e| self.backend(e))?;
        Ok(Checkpointed {
            frames: u64::try_from(log).unwrap_or(0),
            blocked: busy != 0,
        })
    }

    /// The store file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The same store opened again: on the file at its path now (after this
    /// one's was replaced, [`Store::usable`]).
    pub fn reopened(&self) -> Result<LocalStore, StoreError> {
        LocalStore::open_with(&self.path, &self.table, self.checkpoints)
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
        let guard = self.conn.lock().map_err(|_| {
            StoreError::Backend("local store connection poisoned by a panic".into())
        })?;
        if guard.is_some() {
            self.same_file()?;
        }
        Ok(guard)
    }

    /// Records the file a connection was just opened on.
    fn opened_file(&self) {
        use std::os::unix::fs::MetadataExt;
        let id = std::fs::metadata(&self.path)
            .ok()
            .map(|m| (m.dev(), m.ino()));
        *self.file.lock().unwrap_or_else(|e| e.into_inner()) = FileCheck {
            id,
            at: Some(Instant::now()),
            replaced: false,
        };
    }

    /// The file at the path is still the one the connection has open
    /// ([`LocalStore::opened_file`]; looked at every [`FILE_CHECK_EVERY`] at
    /// most). A file removed, or replaced by another (a store deleted
    /// and created again), would take this process's writes where no other
    /// process reads them: enforcement split in two without a word.
    fn same_file(&self) -> Result<(), StoreError> {
        use std::os::unix::fs::MetadataExt;
        let mut check = self.file.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        let fresh = check
            .at
            .is_some_and(|at| now.duration_since(at) < FILE_CHECK_EVERY);
        if !fresh && !check.replaced {
            check.at = Some(now);
            let current = std::fs::metadata(&self.path)
                .ok()
                .map(|m| (m.dev(), m.ino()));
            // Once seen, for good: the connection stays on the old file.
            check.replaced = check.id.is_some() && current != check.id;
        }
        if check.replaced {
            return Err(StoreError::Backend(format!(
                "local store {} was removed or replaced since this process opened it: its reads and writes would go to a file no other process uses. Start the command again to use the file at that path now (`serve` opens it anew by itself)",
                self.path.display()
            )));
        }
        Ok(())
    }

    fn backend(&self, e: impl std::fmt::Display) -> StoreError {
        let text = e.to_string();
        StoreError::Backend(format!(
            "local store {}: {text}{}",
            self.path.display(),
            permission_hint(&text)
        ))
    }

    /// A read-only connection, or `None` for a file no zae-limiter has set up
    /// yet (empty: its first writer was interrupted before the schema).
    ///
    /// Reading a WAL database needs its `-shm` file; where it does not exist
    /// and cannot be created (a read-only directory: SQLite says "unable to
    /// open" or "readonly database") no process can be writing the store
    /// either, so it is opened immutable (no locks, no `-shm`).
    fn connect_read_only(&self) -> Result<Option<Connection>, StoreError> {
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = match Connection::open_with_flags(&self.path, flags)
            .and_then(|c| Self::check_readable(&c).map(|v| (c, v)))
        {
            Ok(ok) => ok,
            Err(e)
                if matches!(
                    e.sqlite_error_code(),
                    Some(rusqlite::ErrorCode::CannotOpen | rusqlite::ErrorCode::ReadOnly)
                ) =>
            {
                let uri = immutable_uri(&self.path);
                let c = Connection::open_with_flags(&uri, flags | OpenFlags::SQLITE_OPEN_URI)
                    .map_err(|e| self.backend(e))?;
                let v = Self::check_readable(&c).map_err(|e| self.backend(e))?;
                (c, v)
            }
            Err(e) => return Err(self.backend(e)),
        };
        let (conn, version) = conn;
        self.opened_file();
        conn.busy_handler(Some(busy_wait))
            .map_err(|e| self.backend(e))?;
        if version > SCHEMA_VERSION {
            return Err(self.backend(newer_schema(version)));
        }
        Ok((version == SCHEMA_VERSION).then_some(conn))
    }

    /// The file's schema version; reading it is the first real read, where
    /// SQLite finds out whether the file is a database and can be opened.
    fn check_readable(conn: &Connection) -> rusqlite::Result<i64> {
        conn.query_row("PRAGMA user_version", [], |r| r.get(0))
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
        self.opened_file();
        conn.busy_handler(Some(busy_wait))
            .map_err(|e| self.backend(e))?;
        // In WAL mode NORMAL syncs at checkpoints, not at every commit: a commit
        // survives any process crash (kill -9 included) and only the last ones
        // may be lost to a power failure or OS crash. FULL paid one fsync per
        // write: the runtime's decisions ran about 9x slower (benches/runtime.rs).
        conn.pragma_update(None, "synchronous", "NORMAL")
            .map_err(|e| self.backend(e))?;
        if self.checkpoints == Checkpoints::Deferred {
            conn.pragma_update(None, "wal_autocheckpoint", 0)
                .map_err(|e| self.backend(e))?;
        }
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
                    backoff::pause(backoff(round));
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
            return Err(Setup::Refused(newer_schema(version)));
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
        self.with_connection(|conn| {
            if !table_row_exists(conn, &self.table).map_err(|e| self.backend(e))? {
                return Err(self.table_not_found());
            }
            f(conn)
        })
    }

    /// Runs `f` on the connection; no connection yet means no table yet.
    fn with_connection<T>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let guard = self.lock()?;
        let Some(conn) = guard.as_ref() else {
            return Err(self.table_not_found());
        };
        f(conn)
    }

    /// The table is missing: the whole file when it does not exist (a
    /// mistyped path should not read as "create the table").
    fn table_not_found(&self) -> StoreError {
        let where_ = if self.path.exists() {
            Missing::Local(self.path.clone())
        } else {
            Missing::NoLocalFile(self.path.clone())
        };
        StoreError::TableNotFound {
            table: self.table.clone(),
            where_,
        }
    }

    fn writable(&self) -> Result<(), StoreError> {
        if self.read_only {
            return Err(self.backend("opened read-only; this command does not write"));
        }
        Ok(())
    }

    /// Runs `f` inside `BEGIN IMMEDIATE` (the file and table are created first when
    /// missing); commits when `f` succeeds, rolls back otherwise.
    fn with_write<T>(
        &self,
        f: impl FnOnce(&rusqlite::Transaction<'_>) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        self.writable()?;
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
        tx.prepare_cached(
            "INSERT OR IGNORE INTO tables (name, created_at) VALUES (?1, strftime('%Y-%m-%dT%H:%M:%SZ','now'))",
        )
        .and_then(|mut s| s.execute(params![self.table]))
        .map_err(|e| self.backend(e))?;
        let out = f(&tx)?;
        tx.commit().map_err(|e| self.backend(e))?;
        Ok(out)
    }

    /// The item at `key`, or the table reported missing, in one statement:
    /// one read and one round of file locks for both (the runtime reads a
    /// state item on every decision; two statements were 6% of serve's CPU).
    fn load_from_table(&self, conn: &Connection, key: &Key) -> Result<Option<Item>, StoreError> {
        let (table, body): (bool, Option<String>) = conn
            .prepare_cached(
                "SELECT EXISTS (SELECT 1 FROM tables WHERE name = ?1),
                        (SELECT item FROM items WHERE tbl = ?1 AND pk = ?2 AND sk = ?3)",
            )
            .and_then(|mut s| {
                s.query_row(params![self.table, key.pk, key.sk], |r| {
                    Ok((r.get(0)?, r.get(1)?))
                })
            })
            .map_err(|e| self.backend(e))?;
        if !table {
            return Err(self.table_not_found());
        }
        body.map(|b| self.decode(key, &b)).transpose()
    }

    fn load(&self, conn: &Connection, key: &Key) -> Result<Option<Item>, StoreError> {
        let body: Option<String> = conn
            .prepare_cached("SELECT item FROM items WHERE tbl = ?1 AND pk = ?2 AND sk = ?3")
            .and_then(|mut s| {
                s.query_row(params![self.table, key.pk, key.sk], |r| r.get(0))
                    .optional()
            })
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

    /// Stores an item [`emulate`] has checked and encoded, over `old` (the
    /// stored item, when the caller read it).
    fn save(
        &self,
        conn: &Connection,
        key: &Key,
        item: &Item,
        body: &str,
        old: Option<&Item>,
    ) -> Result<(), StoreError> {
        let same_index_keys = |old: &Item| {
            INDEXES
                .iter()
                .all(|&i| index_keys(old, i) == index_keys(item, i))
        };
        if old.is_some_and(same_index_keys) {
            // Only the item changes: its index entries are left as they are
            // (a replace would rewrite them too), so a write logs one page
            // rather than one more per index the item is in: the runtime's
            // state items are in one. `old` was read in this transaction, so
            // the row is there; were it not, the replace below writes it.
            let updated = conn
                .prepare_cached("UPDATE items SET item = ?4 WHERE tbl = ?1 AND pk = ?2 AND sk = ?3")
                .and_then(|mut s| s.execute(params![self.table, key.pk, key.sk, body]))
                .map_err(|e| self.backend(e))?;
            if updated == 1 {
                return Ok(());
            }
        }
        let gsi = |index: Index| index_keys(item, index).unzip();
        let [g1, g2, g3, g4] = INDEXES.map(gsi);
        conn.prepare_cached(
            "INSERT OR REPLACE INTO items
               (tbl, pk, sk, item, gsi1pk, gsi1sk, gsi2pk, gsi2sk, gsi3pk, gsi3sk, gsi4pk, gsi4sk)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
        )
        .and_then(|mut s| {
            s.execute(params![
                self.table, key.pk, key.sk, body, g1.0, g1.1, g2.0, g2.1, g3.0, g3.1, g4.0, g4.1
            ])
        })
        .map_err(|e| self.backend(e))?;
        Ok(())
    }

    fn remove(&self, conn: &Connection, key: &Key) -> Result<(), StoreError> {
        conn.prepare_cached("DELETE FROM items WHERE tbl = ?1 AND pk = ?2 AND sk = ?3")
            .and_then(|mut s| s.execute(params![self.table, key.pk, key.sk]))
            .map_err(|e| self.backend(e))?;
        Ok(())
    }

    /// The rows of `sql` (parameters: table, `pk`, `sk_prefix`; ordered by
    /// the sort key it compares) while that sort key starts with `sk_prefix`.
    /// `row` reads one as (its sort key, the value kept).
    fn prefix_rows<T>(
        &self,
        sql: &str,
        pk: &str,
        sk_prefix: &str,
        row: impl Fn(&rusqlite::Row<'_>) -> rusqlite::Result<(String, T)>,
    ) -> Result<Vec<T>, StoreError> {
        self.with_read(|conn| {
            let mut stmt = conn.prepare_cached(sql).map_err(|e| self.backend(e))?;
            let mut rows = stmt
                .query(params![self.table, pk, sk_prefix])
                .map_err(|e| self.backend(e))?;
            let mut out = Vec::new();
            while let Some(r) = rows.next().map_err(|e| self.backend(e))? {
                let (sort_key, value) = row(r).map_err(|e| self.backend(e))?;
                if !sort_key.starts_with(sk_prefix) {
                    break;
                }
                out.push(value);
            }
            Ok(out)
        })
    }

    /// Carries out a change [`emulate`] decided, over `old` (the stored
    /// item, when the caller read it).
    fn apply(
        &self,
        conn: &Connection,
        key: &Key,
        change: Change,
        old: Option<&Item>,
    ) -> Result<(), StoreError> {
        match change {
            Change::Put { item, body } => self.save(conn, key, &item, &body, old),
            Change::Delete => self.remove(conn, key),
            Change::Keep => Ok(()),
        }
    }

    /// One write inside an open transaction: the old item, or the write's own error.
    fn write_in(
        &self,
        tx: &Connection,
        key: &Key,
        op: &WriteOp,
    ) -> Result<Result<Option<Item>, StoreError>, StoreError> {
        let old = self.load(tx, key)?;
        match emulate::decide(op, key, old.as_ref()) {
            Ok(change) => {
                self.apply(tx, key, change, old.as_ref())?;
                Ok(Ok(old))
            }
            Err(e) => Ok(Err(e)),
        }
    }
}

impl LocalStore {
    /// Runs `each` on every op inside one SQLite transaction: an op's own
    /// error (`Ok(Err)`: a failed condition, an item DynamoDB would refuse)
    /// fails it alone; a storage error fails them all and commits nothing.
    fn each_in_one_transaction<T>(
        &self,
        ops: &[WriteOp],
        each: impl Fn(&Connection, &Key, &WriteOp) -> Result<Result<T, StoreError>, StoreError>,
    ) -> Vec<Result<T, StoreError>> {
        if ops.is_empty() {
            return Vec::new();
        }
        let outcome = self.with_write(|tx| {
            let mut out = Vec::with_capacity(ops.len());
            for op in ops {
                out.push(match op_key(op) {
                    Ok(key) => each(tx, &key, op)?,
                    Err(e) => Err(e),
                });
            }
            Ok(out)
        });
        match outcome {
            Ok(out) => out,
            Err(e) => ops.iter().map(|_| Err(e.clone())).collect(),
        }
    }
}

fn newer_schema(version: i64) -> String {
    format!(
        "written by a newer zae-limiter (store schema {version}, this build reads {SCHEMA_VERSION})"
    )
}

/// `file:PATH?immutable=1`, with the characters a URI path may not hold escaped.
fn immutable_uri(path: &Path) -> String {
    let mut uri = String::from("file:");
    for b in path.as_os_str().as_encoded_bytes() {
        match b {
            b'?' | b'#' | b'%' => uri.push_str(&format!("%{b:02X}")),
            _ => uri.push(char::from(*b)),
        }
    }
    uri.push_str("?immutable=1");
    uri
}

fn table_row_exists(conn: &Connection, table: &str) -> rusqlite::Result<bool> {
    conn.prepare_cached("SELECT 1 FROM tables WHERE name = ?1")?
        .query_row(params![table], |_| Ok(()))
        .optional()
        .map(|r| r.is_some())
}

impl Store for LocalStore {
    fn table_name(&self) -> &str {
        &self.table
    }
    fn target(&self) -> Option<super::open::Target> {
        Some(super::open::Target::Local(self.path.clone()))
    }
    fn usable(&self) -> bool {
        !self.file.lock().unwrap_or_else(|e| e.into_inner()).replaced
    }

    fn get(&self, key: &Key, _consistent: bool) -> Result<Option<Item>, StoreError> {
        self.with_connection(|conn| self.load_from_table(conn, key))
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
        let sql = "SELECT sk, item FROM items WHERE tbl = ?1 AND pk = ?2 AND sk >= ?3 ORDER BY sk";
        self.prefix_rows(sql, pk, sk_prefix, |row| {
            let sk: String = row.get(0)?;
            let body: String = row.get(1)?;
            Ok((sk.clone(), (Key::new(pk, sk), body)))
        })?
        .into_iter()
        .map(|(key, body)| self.decode(&key, &body))
        .collect()
    }

    fn query_index(&self, index: Index, pk: &str, sk_prefix: &str) -> Result<Vec<Key>, StoreError> {
        let (pcol, scol) = columns(index);
        let sql = format!(
            "SELECT pk, sk, {scol} FROM items WHERE tbl = ?1 AND {pcol} = ?2 AND {scol} >= ?3 ORDER BY {scol}, pk, sk"
        );
        self.prefix_rows(&sql, pk, sk_prefix, |row| {
            Ok((
                row.get(2)?,
                Key::new(row.get::<_, String>(0)?, row.get::<_, String>(1)?),
            ))
        })
    }

    /// `COUNT(*)` over the index partition: no row leaves SQLite.
    fn count_index(&self, index: Index, pk: &str, sk_prefix: &str) -> Result<usize, StoreError> {
        let (pcol, scol) = columns(index);
        let sql = format!(
            "SELECT COUNT(*) FROM items WHERE tbl = ?1 AND {pcol} = ?2 AND {scol} >= ?3 AND substr({scol}, 1, ?4) = ?3"
        );
        self.with_read(|conn| {
            let mut stmt = conn.prepare_cached(&sql).map_err(|e| self.backend(e))?;
            let n: i64 = stmt
                .query_row(
                    params![self.table, pk, sk_prefix, sk_prefix.chars().count() as i64],
                    |r| r.get(0),
                )
                .map_err(|e| self.backend(e))?;
            Ok(usize::try_from(n).unwrap_or(0))
        })
    }

    fn write(&self, op: WriteOp) -> Result<Option<Item>, StoreError> {
        let key = op_key(&op)?;
        self.with_write(|tx| self.write_in(tx, &key, &op)?)
    }

    /// All in one SQLite transaction (one commit, not one per write); each op
    /// succeeds or fails on its own, as separate requests would. A storage
    /// error fails every op: nothing is committed then.
    fn write_many(&self, ops: Vec<WriteOp>) -> Vec<Result<Option<Item>, StoreError>> {
        self.each_in_one_transaction(&ops, |tx, key, op| self.write_in(tx, key, op))
    }

    /// Unconditional puts and deletes need no old image: written without
    /// reading the stored item, in one SQLite transaction (anything else goes
    /// through [`Store::write_many`]).
    fn batch_write(&self, ops: Vec<WriteOp>) -> Vec<Result<(), StoreError>> {
        if !ops.iter().all(WriteOp::batchable) {
            return self
                .write_many(ops)
                .into_iter()
                .map(|r| r.map(|_| ()))
                .collect();
        }
        self.each_in_one_transaction(&ops, |tx, key, op| {
            Ok(match emulate::decide(op, key, None) {
                Ok(change) => self.apply(tx, key, change, None),
                Err(e) => Err(e),
            })
        })
    }

    fn transact(&self, ops: Vec<WriteOp>) -> Result<(), StoreError> {
        if ops.is_empty() {
            return Ok(());
        }
        let keys = emulate::transaction_keys(&ops)?;
        self.with_write(|tx| {
            let olds = keys
                .iter()
                .map(|k| self.load(tx, k))
                .collect::<Result<Vec<_>, _>>()?;
            // Returning Err drops the transaction: nothing is written.
            let changes = emulate::decide_transaction(&ops, &keys, &olds)?;
            for ((key, change), old) in keys.iter().zip(changes).zip(&olds) {
                self.apply(tx, key, change, old.as_ref())?;
            }
            Ok(())
        })
    }

    /// One transaction from the read to the write (`BEGIN IMMEDIATE`): no
    /// other writer comes between, so the condition `next` puts on its write
    /// holds, and a decision waits for the write lock instead of losing a race
    /// and deciding again (a decision that writes nothing holds the lock for
    /// its read too). A store file or table that does not exist is reported,
    /// as by a read, not created. A store opened read-only reads, and refuses
    /// only a write. What the caller read before (`known`) may be stale by
    /// now: the item is read again inside the transaction.
    fn read_then_write(
        &self,
        key: &Key,
        known: Known,
        next: &mut NextWrite,
    ) -> Result<(), StoreError> {
        if self.read_only {
            // Its write is refused: nothing to hold still.
            return super::read_then_write_apart(self, key, known, next);
        }
        self.with_connection(|conn| {
            let tx = Transaction::new_unchecked(conn, TransactionBehavior::Immediate)
                .map_err(|e| self.backend(e))?;
            let old = self.load_from_table(&tx, key)?;
            // Returning before the commit rolls the transaction back.
            let Some(op) = next(old.as_ref()) else {
                return Ok(());
            };
            super::same_item(key, &op)?;
            let change = emulate::decide(&op, key, old.as_ref())?;
            self.apply(&tx, key, change, old.as_ref())?;
            tx.commit().map_err(|e| self.backend(e))
        })
    }
}

/// Frames in the write-ahead log of the store file `path` (a frame: a
/// 24-byte header and one page of the default 4,096 bytes); for tests.
#[cfg(test)]
pub(crate) fn log_frames(path: &Path) -> u64 {
    let wal = path.with_extension("sqlite-wal");
    std::fs::metadata(wal).map_or(0, |m| m.len()) / (4096 + 24)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{AttrValue, Condition, UpdateAction};

    fn store() -> (tempfile::TempDir, LocalStore) {
        let dir = tempfile::tempdir().unwrap();
        let s = LocalStore::open(&dir.path().join("sub/dir/local.sqlite"), "t").unwrap();
        (dir, s)
    }

    use crate::store::item::keyed as item;

    /// SQLite's "cannot write" words get what to check; other failures none.
    #[test]
    fn a_store_that_cannot_be_written_says_what_to_check() {
        let (_dir, s) = store();
        // As SQLite reports it (its message, not the code's name).
        let readonly = rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_READONLY),
            Some("attempt to write a readonly database".into()),
        );
        let text = s.backend(readonly).to_string();
        assert!(
            text.contains("local.sqlite: attempt to write a readonly database; this user must be able to write the file, the -wal and -shm files"),
            "{text}"
        );
        let busy = rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_BUSY),
            None,
        );
        assert!(!s.backend(busy).to_string().contains("permissions"));
    }

    /// A store file's path in a new directory (that lives as long as the
    /// first value); nothing is created.
    fn new_file() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("local.sqlite");
        (dir, path)
    }

    /// Attribute `n` of the item at `key`, which must exist.
    fn n_at(s: &LocalStore, key: &Key) -> Option<AttrValue> {
        s.get(key, true).unwrap().unwrap().get("n").cloned()
    }

    #[test]
    fn busy_waits_start_short_and_add_up_to_the_timeout() {
        assert_eq!(busy_step(0), Duration::from_micros(50));
        assert_eq!(busy_step(3), Duration::from_micros(400));
        assert_eq!(busy_step(40), BUSY_STEP_MAX);
        // What busy_wait sleeps before it gives up, without sleeping it.
        for budget in [BUSY_TIMEOUT, RESTART_BUSY] {
            let total: Duration = (0..busy_tries(budget) as u32).map(busy_step).sum();
            assert!(total >= budget, "{total:?}");
            assert!(total < budget + Duration::from_millis(20), "{total:?}");
        }
    }

    /// Another process holding the write lock while this one switches a new
    /// file to WAL: SQLite answers SQLITE_BUSY without waiting (the switch
    /// upgrades a read lock), so opening must try again, not fail.
    #[test]
    fn opening_a_new_file_waits_for_another_processs_write_lock() {
        let (_dir, path) = new_file();
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

    /// 1,200 writes, each at least one page of the log.
    fn write_1200(s: &LocalStore) {
        for i in 0..1_200 {
            put(s, item("p", &format!("s{i}"), &[("n", AttrValue::n(i))]));
        }
    }

    #[test]
    fn deferred_checkpoints_are_left_to_whoever_calls_checkpoint() {
        let dir = tempfile::tempdir().unwrap();
        // SQLite's own: a commit that grows the log past 1,000 pages
        // checkpoints, and the log starts over.
        let own = dir.path().join("own.sqlite");
        write_1200(&LocalStore::open(&own, "t").unwrap());
        assert!(log_frames(&own) <= 1_010, "{}", log_frames(&own));
        // Deferred: no commit checkpoints, so the log grows...
        let path = dir.path().join("deferred.sqlite");
        let deferred = LocalStore::open_with(&path, "t", Checkpoints::Deferred).unwrap();
        write_1200(&deferred);
        let grown = log_frames(&path);
        assert!(grown > 1_100, "{grown}");
        // ...until a checkpoint (from another store on the file): the next
        // writes start the log over instead of growing it.
        let other = LocalStore::open(&path, "t").unwrap();
        assert!(other.checkpoint(CheckpointMode::Passive).unwrap().frames >= grown);
        for i in 0..100 {
            put(&deferred, item("q", &format!("s{i}"), &[]));
        }
        assert_eq!(log_frames(&path), grown);
        assert_eq!(
            deferred.query("p", "s", true).unwrap().len(),
            1_200,
            "every write is still there"
        );
    }

    thread_local! {
        static PAUSED: std::cell::Cell<Duration> = const { std::cell::Cell::new(Duration::ZERO) };
    }

    /// Adds up the busy handler's waits instead of sleeping them.
    fn add_up(d: Duration) {
        PAUSED.set(PAUSED.get() + d);
    }

    /// A reader in another connection keeps a restart from starting the log
    /// over: the restart gives way after [`RESTART_BUSY`], not the 15 s every
    /// other call may wait, and leaves the long wait in place for them.
    #[test]
    fn a_restart_gives_way_to_a_reader_after_its_short_budget() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("l.sqlite");
        let deferred = LocalStore::open_with(&path, "t", Checkpoints::Deferred).unwrap();
        write_1200(&deferred);
        let reader = Connection::open(&path).unwrap();
        reader
            .execute_batch("BEGIN; SELECT count(*) FROM sqlite_master;")
            .unwrap();
        let own = LocalStore::open(&path, "t").unwrap();
        let done = backoff::with_pauser(add_up, || own.checkpoint(CheckpointMode::Restart));
        let done = done.unwrap();
        assert!(done.blocked, "{done:?}");
        let waited = PAUSED.replace(Duration::ZERO);
        assert!(
            waited >= RESTART_BUSY && waited < RESTART_BUSY + Duration::from_millis(20),
            "{waited:?}"
        );
        // Every other call still waits up to BUSY_TIMEOUT for a lock.
        let locker = Connection::open(&path).unwrap();
        locker.execute_batch("BEGIN IMMEDIATE;").unwrap();
        let refused = backoff::with_pauser(add_up, || {
            own.write(WriteOp::Put {
                item: item("p", "x", &[]),
                condition: None,
            })
        });
        assert!(refused.is_err());
        assert!(PAUSED.replace(Duration::ZERO) >= BUSY_TIMEOUT);
        locker.execute_batch("ROLLBACK;").unwrap();
        // With the reader gone, the restart goes through: the next writes
        // start the log over (reuse its file) instead of growing it.
        reader.execute_batch("COMMIT;").unwrap();
        let done = own.checkpoint(CheckpointMode::Restart).unwrap();
        assert!(!done.blocked, "{done:?}");
        // The restart made the new log's first commit (and its header's
        // sync) itself: one frame, and the schema version is unchanged.
        assert_eq!(own.checkpoint(CheckpointMode::Passive).unwrap().frames, 1);
        let version: i64 = reader
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .unwrap();
        assert_eq!(version, SCHEMA_VERSION);
        let grown = log_frames(&path);
        for i in 0..100 {
            put(&deferred, item("q", &format!("s{i}"), &[]));
        }
        assert_eq!(log_frames(&path), grown, "the log grew: not started over");
    }

    /// The new log's first commit is best effort: with another process's
    /// writer in the way it waits for nothing (that writer's commit makes
    /// the header's sync instead) and leaves no transaction open.
    #[test]
    fn the_first_commit_of_a_new_log_gives_way_to_a_writer_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("l.sqlite");
        let own = LocalStore::open(&path, "t").unwrap();
        own.create_table().unwrap();
        let locker = Connection::open(&path).unwrap();
        locker.execute_batch("BEGIN IMMEDIATE;").unwrap();
        let guard = own.lock().unwrap();
        let conn = guard.as_ref().unwrap();
        backoff::with_pauser(add_up, || begin_log(conn));
        assert_eq!(PAUSED.replace(Duration::ZERO), Duration::ZERO);
        assert!(conn.is_autocommit());
        locker.execute_batch("ROLLBACK;").unwrap();
    }

    /// A store file removed, or deleted and created again, under a store
    /// that has it open: an error from the next look on, for reads and
    /// writes (they would go to a file no other process uses).
    #[test]
    fn a_file_replaced_under_an_open_store_is_an_error() {
        let (_dir, path) = new_file();
        let s = LocalStore::open(&path, "t").unwrap();
        put(&s, item("a", "b", &[]));
        assert!(s.get(&Key::new("a", "b"), true).unwrap().is_some());
        for suffix in ["", "-wal", "-shm"] {
            let mut p = path.clone().into_os_string();
            p.push(suffix);
            let _ = std::fs::remove_file(p);
        }
        let again = LocalStore::open(&path, "t").unwrap();
        put(&again, item("a", "c", &[]));
        std::thread::sleep(FILE_CHECK_EVERY);
        for err in [
            s.get(&Key::new("a", "b"), true).unwrap_err(),
            s.write(WriteOp::Put {
                item: item("a", "d", &[]),
                condition: None,
            })
            .unwrap_err(),
        ] {
            assert!(
                err.to_string()
                    .contains("was removed or replaced since this process opened it"),
                "{err}"
            );
        }
        // The file at the path is untouched by the old store.
        assert!(again.get(&Key::new("a", "d"), true).unwrap().is_none());
    }

    #[test]
    fn a_directory_is_not_a_store() {
        let dir = tempfile::tempdir().unwrap();
        for err in [
            LocalStore::open(dir.path(), "t").unwrap_err(),
            LocalStore::open_read_only(dir.path(), "t").unwrap_err(),
        ] {
            assert!(
                matches!(&err, StoreError::LocalStorePath { path, why: BadPath::Directory } if path == dir.path()),
                "{err}"
            );
        }
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn a_checkpoint_of_a_file_not_created_yet_does_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("none.sqlite");
        let s = LocalStore::open(&path, "t").unwrap();
        let done = s.checkpoint(CheckpointMode::Restart).unwrap();
        assert_eq!((done.frames, done.blocked), (0, false));
        assert!(!path.exists());
    }

    #[test]
    fn reads_before_the_first_write_report_a_missing_table_and_create_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nested/local.sqlite");
        let s = LocalStore::open(&path, "t").unwrap();
        let err = s.get(&Key::new("a", "b"), true).unwrap_err();
        // No file yet: the file is what is missing (its path named).
        assert!(
            matches!(&err, StoreError::TableNotFound { where_: Missing::NoLocalFile(p), table } if *p == path && table == "t"),
            "{err}"
        );
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
        // The same for a single read of a key that exists in the first table.
        assert!(matches!(
            other.get(&Key::new("a", "b"), true),
            Err(StoreError::TableNotFound { .. })
        ));
        assert!(other.create_table().unwrap());
        assert_eq!(other.query("a", "", true).unwrap(), vec![]);
        assert_eq!(other.get(&Key::new("a", "b"), true).unwrap(), None);
        assert!(s.get(&Key::new("a", "b"), true).unwrap().is_some());
    }

    #[test]
    fn index_queries_use_the_index() {
        let (_d, s) = store();
        s.create_table().unwrap();
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

    /// A store file (in a directory that lives as long as the first value)
    /// with table `t`, for stores of several connections.
    fn file_with_table() -> (tempfile::TempDir, PathBuf) {
        let (dir, path) = new_file();
        LocalStore::open(&path, "t")
            .unwrap()
            .create_table()
            .unwrap();
        (dir, path)
    }

    /// Conditional writes from separate connections (as two processes would
    /// hold) never both win, and no increment is lost.
    #[test]
    fn concurrent_conditional_writes_from_two_connections() {
        let (_dir, path) = file_with_table();
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
        assert_eq!(
            n_at(&s, &Key::new("cas", "x")),
            Some(AttrValue::n(total)),
            "no lost compare-and-swap update"
        );
        assert_eq!(
            n_at(&s, &Key::new("add", "x")),
            Some(AttrValue::n(total)),
            "no lost ADD"
        );
    }

    /// Adds one to `n` of (`pk`, `sk`) through [`Store::read_then_write`],
    /// conditioned on the `n` read, as after a plain read.
    fn increment(s: &LocalStore, key: &Key) -> Result<(), StoreError> {
        s.read_then_write(key, None, &mut |old| {
            let n = match old.and_then(|i| i.get("n")) {
                Some(AttrValue::N(n)) => n.parse::<u64>().unwrap(),
                _ => 0,
            };
            let condition = match old {
                None => Condition::NotExists,
                Some(_) => Condition::AttrEquals("n".into(), AttrValue::n(n)),
            };
            Some(WriteOp::Put {
                item: item(&key.pk, &key.sk, &[("n", AttrValue::n(n + 1))]),
                condition: Some(condition),
            })
        })
    }

    /// Separate connections (as processes hold them) incrementing one item:
    /// no write comes between another's read and write, so no condition ever
    /// fails (a read, then a write, would lose races) and no increment is lost.
    #[test]
    fn read_then_write_holds_the_item_still_from_the_read_to_the_write() {
        let (_dir, path) = file_with_table();
        let key = Key::new("counter", "x");
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let (path, key) = (path.clone(), key.clone());
                std::thread::spawn(move || {
                    let s = LocalStore::open(&path, "t").unwrap();
                    for _ in 0..50 {
                        increment(&s, &key).expect("never a lost race");
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let s = LocalStore::open(&path, "t").unwrap();
        assert_eq!(n_at(&s, &key), Some(AttrValue::n(200)));
    }

    #[test]
    fn read_then_write_reports_a_missing_table_refuses_what_it_may_not_write() {
        let (_dir, path) = new_file();
        let key = Key::new("a", "b");
        let s = LocalStore::open(&path, "t").unwrap();
        let err = increment(&s, &key).unwrap_err();
        assert!(
            matches!(
                err,
                StoreError::TableNotFound {
                    where_: Missing::NoLocalFile(_),
                    ..
                }
            ),
            "{err}"
        );
        assert!(!path.exists());
        // A file with another table: this one is still missing, and stays so.
        LocalStore::open(&path, "other")
            .unwrap()
            .create_table()
            .unwrap();
        let err = increment(&s, &key).unwrap_err();
        assert!(matches!(err, StoreError::TableNotFound { .. }), "{err}");
        assert!(!s.table_exists().unwrap());
        // A read-only store reads (a decision that writes nothing, e.g. a
        // preview, is answered) and refuses the write.
        s.create_table().unwrap();
        increment(&s, &key).unwrap();
        let read_only = LocalStore::open_read_only(&path, "t").unwrap();
        let mut shown = None;
        read_only
            .read_then_write(&key, None, &mut |item| {
                shown = item.and_then(|i| i.get("n")).cloned();
                None
            })
            .unwrap();
        assert_eq!(shown, Some(AttrValue::n(1)));
        let err = increment(&read_only, &key).unwrap_err();
        assert!(err.to_string().contains("read-only"), "{err}");
        // Another item than the one read is never written.
        let err = s
            .read_then_write(&key, None, &mut |_| {
                Some(WriteOp::Put {
                    item: item("a", "other", &[]),
                    condition: None,
                })
            })
            .unwrap_err();
        assert!(err.to_string().contains("another item"), "{err}");
        assert_eq!(s.get(&Key::new("a", "other"), true).unwrap(), None);
        // A condition that fails writes nothing and says so.
        let err = s
            .read_then_write(&key, None, &mut |_| {
                Some(WriteOp::Put {
                    item: item("a", "b", &[("n", AttrValue::n(7))]),
                    condition: Some(Condition::NotExists),
                })
            })
            .unwrap_err();
        assert!(matches!(err, StoreError::ConditionFailed { .. }), "{err}");
        assert_eq!(n_at(&s, &key), Some(AttrValue::n(1)));
    }

    /// An item rewritten with the same index keys (the runtime's state items,
    /// on every decision) leaves its index entries alone: one page of log per
    /// write, where a replace logs the index's page too. New index keys move
    /// the entry.
    #[test]
    fn rewriting_an_item_with_its_index_keys_unchanged_logs_one_page() {
        let (_dir, path) = new_file();
        let s = LocalStore::open_with(&path, "t", Checkpoints::Deferred).unwrap();
        let indexed = |n: i64, gsi: &str| {
            item(
                "p",
                "s",
                &[
                    ("n", AttrValue::n(n)),
                    ("GSI4PK", AttrValue::S(gsi.into())),
                    ("GSI4SK", AttrValue::S("x".into())),
                ],
            )
        };
        put(&s, indexed(0, "ns"));
        let before = log_frames(&path);
        for n in 1..=20 {
            s.write(WriteOp::Put {
                item: indexed(n, "ns"),
                condition: Some(Condition::AttrEquals("n".into(), AttrValue::n(n - 1))),
            })
            .unwrap();
        }
        assert_eq!(log_frames(&path) - before, 20);
        let at = |gsi: &str| s.query_index(Index::Gsi4, gsi, "").unwrap();
        assert_eq!(at("ns"), vec![Key::new("p", "s")]);
        assert_eq!(n_at(&s, &Key::new("p", "s")), Some(AttrValue::n(20)));
        // The same write with a new index key: the entry moves.
        s.write(WriteOp::Put {
            item: indexed(21, "other"),
            condition: Some(Condition::AttrEquals("n".into(), AttrValue::n(20))),
        })
        .unwrap();
        assert_eq!(at("ns"), vec![]);
        assert_eq!(at("other"), vec![Key::new("p", "s")]);
    }
}
