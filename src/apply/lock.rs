//! The namespace lock (docs/storage.md, "The apply lock"): one item per
//! namespace, `{ns}/SYSTEM#` / `#APPLY#LOCK`, that `limits apply` takes with a
//! conditional write before it reads the managed set, and releases on every
//! path. The shape is Terraform's state locker: the lock says who holds it,
//! doing what, since when; taking it returns its id, and only that id releases
//! it (or an operator's `limits force-unlock ID`).
//!
//! The lock has a lease ([`LEASE_MS`], much shorter than the 960 s lease of an
//! apply's pending fan-outs). A thread renews it every [`RENEW_EVERY`] on a
//! store handle of its own (the DynamoDB store blocks on a current-thread
//! runtime of its own, which another thread must not share), and apply renews
//! it again at its last safe point before writing ([`Held::check`]); a process
//! that dies stops renewing, and the next apply takes the lock over once the
//! lease has run out. Hosts' clocks must agree to well within the lease.
//!
//! The Python library never reads this item; it carries GSI4 keys so a
//! namespace purge removes it with the namespace's other items.

use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::items::keys;
use crate::store::{AttrValue, Condition, Item, Key, Store, StoreError, UpdateAction, WriteOp};

/// SK of the lock item, under the namespace's `SYSTEM#` partition.
pub const SK: &str = "#APPLY#LOCK";
/// How long a lock outlives its last renewal.
pub const LEASE_MS: i64 = 60_000;
/// How often the holder renews it (a quarter of the lease: three renewals
/// may fail before it runs out).
pub const RENEW_EVERY: Duration = Duration::from_millis((LEASE_MS / 4) as u64);

/// Who holds a lock, doing what, since when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockInfo {
    /// A random id: the only handle that releases the lock.
    pub id: String,
    /// `user@host`.
    pub who: String,
    pub pid: u32,
    /// The command line that holds it, e.g. `limits apply -f limits.yaml`.
    pub operation: String,
    /// The tool version of the holder.
    pub version: String,
    /// When it was taken, epoch ms.
    pub created_ms: i64,
    /// When it runs out unless renewed, epoch ms.
    pub lease_until_ms: i64,
}

impl LockInfo {
    /// A new lock for this process, taken at `now_ms`.
    pub fn new(operation: &str, now_ms: i64) -> LockInfo {
        LockInfo {
            id: crate::apply::new_token(),
            who: who(),
            pid: std::process::id(),
            operation: operation.to_string(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            created_ms: now_ms,
            lease_until_ms: now_ms.saturating_add(LEASE_MS),
        }
    }

    fn item(&self, ns: &str) -> Item {
        let mut item = keys::namespaced_item(ns, key(ns));
        item.extend(crate::store::item::from_pairs(&[
            ("lock_id", AttrValue::s(&self.id)),
            ("who", AttrValue::s(&self.who)),
            ("pid", AttrValue::n(self.pid)),
            ("operation", AttrValue::s(&self.operation)),
            ("version", AttrValue::s(&self.version)),
            ("created_ms", AttrValue::n(self.created_ms)),
            (LEASE, AttrValue::n(self.lease_until_ms)),
        ]));
        item
    }

    /// Reads a stored lock; what cannot be read shows as unknown (a lock is
    /// never ignored because it is malformed).
    fn from_item(item: &Item) -> LockInfo {
        let s = |n: &str| item.get(n).and_then(AttrValue::as_s).unwrap_or("unknown");
        let n = |n: &str| {
            item.get(n)
                .and_then(AttrValue::as_n)
                .and_then(|v| v.parse::<i64>().ok())
        };
        LockInfo {
            id: s("lock_id").to_string(),
            who: s("who").to_string(),
            pid: n("pid").and_then(|p| u32::try_from(p).ok()).unwrap_or(0),
            operation: s("operation").to_string(),
            version: s("version").to_string(),
            created_ms: n("created_ms").unwrap_or(0),
            lease_until_ms: n(LEASE).unwrap_or(0),
        }
    }
}

const LEASE: &str = "lease_until_ms";

/// `$USER@hostname` (each `unknown` when it cannot be found).
fn who() -> String {
    let user = ["USER", "LOGNAME", "USERNAME"]
        .iter()
        .find_map(|v| std::env::var(v).ok().filter(|u| !u.is_empty()))
        .unwrap_or_else(|| "unknown".into());
    let host = gethostname::gethostname().to_string_lossy().into_owned();
    let host = if host.is_empty() {
        "unknown".into()
    } else {
        host
    };
    format!("{user}@{host}")
}

/// The lock item's key in namespace `ns`.
pub fn key(ns: &str) -> Key {
    Key::new(keys::system_pk(ns), SK)
}

/// The lock as stored now, if any (expired or not).
pub fn read(store: &dyn Store, ns: &str) -> Result<Option<LockInfo>, StoreError> {
    Ok(store.get(&key(ns), true)?.map(|i| LockInfo::from_item(&i)))
}

/// One attempt to take the lock: `Ok(None)` when taken, `Ok(Some(holder))`
/// when another holds a lease that has not run out at `now_ms`.
pub fn try_take(
    store: &dyn Store,
    ns: &str,
    info: &LockInfo,
    now_ms: i64,
) -> Result<Option<LockInfo>, StoreError> {
    // Absent, without a lease, or with a lease that ran out.
    let free = Condition::Or(vec![
        Condition::NotExists,
        Condition::AttrNotExists(LEASE.into()),
        Condition::AttrNumLt(LEASE.into(), now_ms.to_string()),
    ]);
    for _ in 0..3 {
        match store.write(WriteOp::Put {
            item: info.item(ns),
            condition: Some(free.clone()),
        }) {
            Ok(_) => return Ok(None),
            Err(StoreError::ConditionFailed { .. }) => match read(store, ns)? {
                // A retried request whose first attempt landed: ours already.
                Some(holder) if holder.id == info.id => return Ok(None),
                Some(holder) => return Ok(Some(holder)),
                // Released in between: try again.
                None => continue,
            },
            Err(e) => return Err(e),
        }
    }
    Ok(read(store, ns)?.filter(|h| h.id != info.id))
}

/// Extends the lease of lock `id` to `lease_until_ms`; fails with
/// [`StoreError::ConditionFailed`] when `id` no longer holds it.
pub fn renew(store: &dyn Store, ns: &str, id: &str, lease_until_ms: i64) -> Result<(), StoreError> {
    store
        .write(WriteOp::Update {
            key: key(ns),
            actions: vec![UpdateAction::Set(
                LEASE.into(),
                AttrValue::n(lease_until_ms),
            )],
            condition: Some(holds(id)),
        })
        .map(|_| ())
}

/// Removes lock `id`; a lock that is gone or someone else's is left alone.
pub fn release(store: &dyn Store, ns: &str, id: &str) -> Result<(), StoreError> {
    match store.write(WriteOp::Delete {
        key: key(ns),
        condition: Some(holds(id)),
    }) {
        Ok(_) | Err(StoreError::ConditionFailed { .. }) => Ok(()),
        Err(e) => Err(e),
    }
}

fn holds(id: &str) -> Condition {
    Condition::AttrEquals("lock_id".into(), AttrValue::s(id))
}

/// Why `force-unlock` removed nothing.
#[derive(Debug, thiserror::Error)]
pub enum ForceUnlockError {
    #[error("the namespace is not locked")]
    NotLocked,
    #[error("lock ID {given} is not the current lock")]
    OtherLock {
        given: String,
        current: Box<LockInfo>,
    },
    #[error("{0}")]
    Store(#[from] StoreError),
}

/// Removes the lock when its id is `id` (an operator's `force-unlock`);
/// returns what was removed.
pub fn force_unlock(store: &dyn Store, ns: &str, id: &str) -> Result<LockInfo, ForceUnlockError> {
    let current = read(store, ns)?.ok_or(ForceUnlockError::NotLocked)?;
    if current.id != id {
        return Err(ForceUnlockError::OtherLock {
            given: id.to_string(),
            current: Box::new(current),
        });
    }
    match store.write(WriteOp::Delete {
        key: key(ns),
        condition: Some(holds(id)),
    }) {
        Ok(_) => Ok(current),
        // Released or taken over since it was read.
        Err(StoreError::ConditionFailed { .. }) => match read(store, ns)? {
            None => Err(ForceUnlockError::NotLocked),
            Some(current) => Err(ForceUnlockError::OtherLock {
                given: id.to_string(),
                current: Box::new(current),
            }),
        },
        Err(e) => Err(e.into()),
    }
}

/// Why the lock was not taken.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// Another apply holds it (after waiting `waited_ms`, when asked to wait).
    #[error("the namespace is locked by another apply")]
    Held {
        holder: Box<LockInfo>,
        waited_ms: i64,
    },
    /// A stop was requested (a signal) while waiting.
    #[error("{0} while waiting for the lock")]
    Interrupted(String),
    #[error("taking the apply lock: {0}")]
    Store(#[from] StoreError),
}

/// How [`acquire`] waits, and what it is told.
pub struct Wait<'a> {
    /// How long to wait for another holder (0: fail at once).
    pub timeout_ms: i64,
    /// The clock (epoch ms).
    pub now: fn() -> i64,
    /// `Some(reason)` when the wait must end (a signal).
    pub stop: &'a dyn Fn() -> Option<String>,
    /// Told the holder once, when the wait starts.
    pub waiting: &'a dyn Fn(&LockInfo),
}

/// Opens the store handle the renewal thread uses (lazily, at its first
/// renewal, so a short apply never opens it).
pub type Opener = Box<dyn FnOnce() -> Result<Box<dyn Store>, StoreError> + Send>;

/// Takes the lock for `operation`, waiting as `wait` says, and starts
/// renewing it every `renew_every` ([`RENEW_EVERY`] but in tests) on a store
/// handle `renew_with` opens.
pub fn acquire<'s>(
    store: &'s dyn Store,
    ns: &str,
    operation: &str,
    wait: &Wait<'_>,
    renew_with: Opener,
    renew_every: Duration,
) -> Result<Held<'s>, LockError> {
    let start = (wait.now)();
    let mut told = false;
    for round in 1u32.. {
        if let Some(why) = (wait.stop)() {
            return Err(LockError::Interrupted(why));
        }
        let now = (wait.now)();
        let info = LockInfo::new(operation, now);
        let Some(holder) = try_take(store, ns, &info, now)? else {
            return Ok(Held::start(
                store,
                ns,
                info,
                renew_with,
                wait.now,
                renew_every,
            ));
        };
        let waited = now - start;
        let left = wait.timeout_ms - waited;
        if left <= 0 {
            return Err(LockError::Held {
                holder: Box::new(holder),
                waited_ms: waited,
            });
        }
        if !told {
            (wait.waiting)(&holder);
            told = true;
        }
        // Poll: short at first, at most every 2 s, never past the deadline.
        let pause = crate::store::backoff::backoff(round).min(Duration::from_millis(left as u64));
        std::thread::sleep(pause);
    }
    unreachable!("the wait loop returns")
}

/// A lock this process holds: renewed by a thread until dropped, released on
/// drop (every exit path: success, refusal, error, a stop on a signal).
pub struct Held<'s> {
    store: &'s dyn Store,
    ns: String,
    info: LockInfo,
    now: fn() -> i64,
    renewer: Option<(mpsc::Sender<()>, JoinHandle<()>)>,
    /// Set by the renewal thread when the lock is no longer this process's.
    lost: Arc<Mutex<Option<String>>>,
    /// Told when the release on drop fails (the lock then expires with its lease).
    on_release_failure: Option<Box<dyn Fn(String) + 's>>,
}

impl<'s> Held<'s> {
    fn start(
        store: &'s dyn Store,
        ns: &str,
        info: LockInfo,
        renew_with: Opener,
        now: fn() -> i64,
        every: Duration,
    ) -> Held<'s> {
        let lost = Arc::new(Mutex::new(None));
        let (tx, rx) = mpsc::channel::<()>();
        let thread = {
            let (ns, id, lost) = (ns.to_string(), info.id.clone(), lost.clone());
            let lease = info.lease_until_ms;
            std::thread::Builder::new()
                .name("apply-lock-renewal".into())
                .spawn(move || renew_loop(&rx, renew_with, &ns, &id, lease, now, every, &lost))
        };
        let renewer = match thread {
            Ok(t) => Some((tx, t)),
            Err(e) => {
                set_lost(
                    &lost,
                    format!("the lock cannot be renewed (no thread: {e})"),
                );
                None
            }
        };
        Held {
            store,
            ns: ns.to_string(),
            info,
            now,
            renewer,
            lost,
            on_release_failure: None,
        }
    }

    pub fn info(&self) -> &LockInfo {
        &self.info
    }

    /// Calls `f` with a message if the release on drop fails.
    pub fn on_release_failure(&mut self, f: impl Fn(String) + 's) {
        self.on_release_failure = Some(Box::new(f));
    }

    /// Whether the lock is still this process's: `Some(why)` when not. Renews
    /// the lease on this thread's store too, so a safe point proves the lock
    /// is held before the writes that follow it.
    pub fn check(&self) -> Option<String> {
        if let Some(why) = self.lost() {
            return Some(why);
        }
        let until = (self.now)().saturating_add(LEASE_MS);
        match renew(self.store, &self.ns, &self.info.id, until) {
            Ok(()) => None,
            Err(StoreError::ConditionFailed { .. }) => {
                let why = lost_message();
                set_lost(&self.lost, why.clone());
                Some(why)
            }
            // The lease still runs; the renewal thread keeps trying.
            Err(_) => None,
        }
    }

    /// `Some(why)` once the renewal thread found the lock gone or could not
    /// renew it before its lease ran out.
    pub fn lost(&self) -> Option<String> {
        self.lost.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        if let Some((tx, thread)) = self.renewer.take() {
            drop(tx);
            let _ = thread.join();
        }
        if let Err(e) = release(self.store, &self.ns, &self.info.id) {
            if let Some(f) = &self.on_release_failure {
                f(format!(
                    "could not release the apply lock {} ({e}); it expires with its lease, or remove it with `zae-limiter limits force-unlock {}`",
                    self.info.id, self.info.id
                ));
            }
        }
    }
}

fn lost_message() -> String {
    "the apply lock was removed (force-unlock) or taken over by another apply".to_string()
}

fn set_lost(lost: &Mutex<Option<String>>, why: String) {
    let mut l = lost.lock().unwrap_or_else(|e| e.into_inner());
    l.get_or_insert(why);
}

#[allow(clippy::too_many_arguments)]
fn renew_loop(
    stop: &mpsc::Receiver<()>,
    open: Opener,
    ns: &str,
    id: &str,
    mut lease_until: i64,
    now: fn() -> i64,
    every: Duration,
    lost: &Mutex<Option<String>>,
) {
    let mut open = Some(open);
    let mut store: Option<Box<dyn Store>> = None;
    loop {
        match stop.recv_timeout(every) {
            Err(RecvTimeoutError::Timeout) => {}
            Ok(()) | Err(RecvTimeoutError::Disconnected) => return,
        }
        if store.is_none() {
            match open.take().map(|o| o()) {
                Some(Ok(s)) => store = Some(s),
                Some(Err(e)) => {
                    set_lost(lost, format!("the apply lock cannot be renewed: {e}"));
                    return;
                }
                None => return,
            }
        }
        let Some(s) = store.as_deref() else { return };
        let t = now();
        match renew(s, ns, id, t.saturating_add(LEASE_MS)) {
            Ok(()) => lease_until = t.saturating_add(LEASE_MS),
            Err(StoreError::ConditionFailed { .. }) => {
                set_lost(lost, lost_message());
                return;
            }
            Err(e) if t >= lease_until => {
                set_lost(
                    lost,
                    format!("the apply lock could not be renewed before its lease ran out: {e}"),
                );
                return;
            }
            // Tried again at the next tick, while the lease still runs.
            Err(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::memory::MemoryStore;
    use crate::store::Index;

    /// A second handle on one memory store, for the renewal thread.
    struct Shared(Arc<MemoryStore>);

    impl Store for Shared {
        fn table_name(&self) -> &str {
            self.0.table_name()
        }
        fn get(&self, key: &Key, consistent: bool) -> Result<Option<Item>, StoreError> {
            self.0.get(key, consistent)
        }
        fn batch_get(&self, keys: &[Key], c: bool) -> Result<Vec<Option<Item>>, StoreError> {
            self.0.batch_get(keys, c)
        }
        fn query(&self, pk: &str, sk: &str, c: bool) -> Result<Vec<Item>, StoreError> {
            self.0.query(pk, sk, c)
        }
        fn query_index(&self, i: Index, pk: &str, sk: &str) -> Result<Vec<Key>, StoreError> {
            self.0.query_index(i, pk, sk)
        }
        fn write(&self, op: WriteOp) -> Result<Option<Item>, StoreError> {
            self.0.write(op)
        }
        fn transact(&self, ops: Vec<WriteOp>) -> Result<(), StoreError> {
            self.0.transact(ops)
        }
    }

    /// A clock that stands still (leases are compared with explicit instants).
    fn now() -> i64 {
        1_000_000
    }

    fn opener(s: &Arc<MemoryStore>) -> Opener {
        let s = s.clone();
        Box::new(move || Ok(Box::new(Shared(s)) as Box<dyn Store>))
    }

    fn no_wait() -> Wait<'static> {
        Wait {
            timeout_ms: 0,
            now,
            stop: &|| None,
            waiting: &|_| {},
        }
    }

    #[test]
    fn one_holder_at_a_time_until_released_or_expired() {
        let s = Arc::new(MemoryStore::new());
        let held = acquire(
            &*s,
            "ns",
            "limits apply -f a.yaml",
            &no_wait(),
            opener(&s),
            RENEW_EVERY,
        )
        .unwrap();
        let id = held.info().id.clone();
        let stored = read(&*s, "ns").unwrap().unwrap();
        assert_eq!(stored, *held.info());
        assert_eq!(stored.operation, "limits apply -f a.yaml");
        assert!(stored.who.contains('@'));
        let item = s.item("ns/SYSTEM#", SK).unwrap();
        assert_eq!(
            item.get("GSI4PK"),
            Some(&AttrValue::s("ns")),
            "a purge finds it"
        );

        match acquire(&*s, "ns", "other", &no_wait(), opener(&s), RENEW_EVERY) {
            Err(LockError::Held { holder, .. }) => assert_eq!(holder.id, id),
            other => panic!("{:?}", other.err()),
        }
        drop(held);
        assert!(read(&*s, "ns").unwrap().is_none(), "released on drop");

        // A holder that died: its lease runs out, then the lock is taken over.
        let dead = LockInfo::new("dead", now());
        assert_eq!(try_take(&*s, "ns", &dead, now()).unwrap(), None);
        let fresh = LockInfo::new("next", now());
        assert_eq!(
            try_take(&*s, "ns", &fresh, now() + LEASE_MS - 1).unwrap(),
            Some(dead.clone())
        );
        assert_eq!(
            try_take(&*s, "ns", &fresh, now() + LEASE_MS + 1).unwrap(),
            None
        );
        // The dead holder's release leaves the new lock alone.
        release(&*s, "ns", &dead.id).unwrap();
        assert_eq!(read(&*s, "ns").unwrap().unwrap().id, fresh.id);
        // Taking it again with the same id (a retried request) succeeds.
        assert_eq!(try_take(&*s, "ns", &fresh, now()).unwrap(), None);
    }

    #[test]
    fn force_unlock_needs_the_current_id() {
        let s = Arc::new(MemoryStore::new());
        assert!(matches!(
            force_unlock(&*s, "ns", "x"),
            Err(ForceUnlockError::NotLocked)
        ));
        let held = acquire(&*s, "ns", "apply", &no_wait(), opener(&s), RENEW_EVERY).unwrap();
        match force_unlock(&*s, "ns", "not-it") {
            Err(ForceUnlockError::OtherLock { current, .. }) => {
                assert_eq!(current.id, held.info().id)
            }
            other => panic!("{other:?}"),
        }
        assert!(read(&*s, "ns").unwrap().is_some());
        let removed = force_unlock(&*s, "ns", &held.info().id).unwrap();
        assert_eq!(removed.id, held.info().id);
        assert_eq!(
            held.check(),
            Some(lost_message()),
            "the holder notices at its next safe point"
        );
    }

    #[test]
    fn the_lease_is_renewed_while_held_and_loss_is_reported() {
        let s = Arc::new(MemoryStore::new());
        let wait = Wait {
            now: crate::clock::system_ms,
            ..no_wait()
        };
        let held = acquire(
            &*s,
            "ns",
            "apply",
            &wait,
            opener(&s),
            Duration::from_millis(10),
        )
        .unwrap();
        let first = read(&*s, "ns").unwrap().unwrap().lease_until_ms;
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while read(&*s, "ns").unwrap().unwrap().lease_until_ms == first {
            assert!(std::time::Instant::now() < deadline, "never renewed");
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(held.lost(), None);
        // Someone removed it: the renewal thread notices.
        s.write(WriteOp::Delete {
            key: key("ns"),
            condition: None,
        })
        .unwrap();
        while held.lost().is_none() {
            assert!(std::time::Instant::now() < deadline, "loss never noticed");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn a_waiter_takes_the_lock_once_it_is_released_or_gives_up() {
        let s = Arc::new(MemoryStore::new());
        let held = acquire(&*s, "ns", "first", &no_wait(), opener(&s), RENEW_EVERY).unwrap();
        let told = Mutex::new(Vec::new());
        let stop_after = Mutex::new(0);
        let waiting = |h: &LockInfo| told.lock().unwrap().push(h.id.clone());
        // Stopped (a signal) while waiting.
        let stop = || {
            let mut n = stop_after.lock().unwrap();
            *n += 1;
            (*n > 2).then(|| "interrupted by SIGINT".to_string())
        };
        let wait = Wait {
            timeout_ms: 60_000,
            now,
            stop: &stop,
            waiting: &waiting,
        };
        match acquire(&*s, "ns", "second", &wait, opener(&s), RENEW_EVERY) {
            Err(LockError::Interrupted(why)) => assert_eq!(why, "interrupted by SIGINT"),
            other => panic!("{:?}", other.err()),
        }
        assert_eq!(
            *told.lock().unwrap(),
            vec![held.info().id.clone()],
            "told once"
        );
        // Released while another waits: the waiter gets it.
        let s2 = s.clone();
        let waiter = std::thread::spawn(move || {
            let wait = Wait {
                timeout_ms: 60_000,
                now,
                stop: &|| None,
                waiting: &|_| {},
            };
            let got = acquire(&*s2, "ns", "second", &wait, opener(&s2), RENEW_EVERY)
                .map(|h| h.info().clone());
            got.map(|i| i.operation)
        });
        std::thread::sleep(Duration::from_millis(50));
        drop(held);
        assert_eq!(waiter.join().unwrap().unwrap(), "second");
    }
}
