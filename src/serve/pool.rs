//! Stores for the server's calls. The [`Store`] trait is synchronous: the
//! DynamoDB store blocks on a runtime of its own inside every call, so it is
//! used on a blocking thread (`spawn_blocking`); the local store's calls are
//! microseconds of SQLite and run on the async worker (see
//! [`super::App::blocking`]). A pool keeps up to `size` stores (a SQLite
//! connection each, or a DynamoDB client each) and lends each to one call at
//! a time; a semaphore, taken asynchronously before the call starts, keeps
//! more calls than stores waiting without occupying threads.

use std::sync::{Arc, Mutex};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::store::{Store, StoreError};

/// Opens one more store like the others.
pub type Opener = Box<dyn Fn() -> Result<Box<dyn Store>, StoreError> + Send + Sync>;

pub struct StorePool {
    open: Opener,
    idle: Mutex<Vec<Box<dyn Store>>>,
    permits: Arc<Semaphore>,
    /// One more store, outside the permits: see [`StorePool::with_own`].
    own: Mutex<Option<Box<dyn Store>>>,
}

impl StorePool {
    /// A pool of at most `size` stores, starting with `first` (opened by the
    /// caller, e.g. to check the table at startup).
    pub fn new(open: Opener, size: usize, first: Option<Box<dyn Store>>) -> StorePool {
        StorePool {
            open,
            idle: Mutex::new(first.into_iter().collect()),
            permits: Arc::new(Semaphore::new(size.max(1))),
            own: Mutex::new(None),
        }
    }

    /// The right to use one store; waits (asynchronously) while all are lent.
    pub async fn permit(&self) -> OwnedSemaphorePermit {
        // The semaphore is never closed, so this cannot fail.
        self.permits
            .clone()
            .acquire_owned()
            .await
            .expect("the pool's semaphore is never closed")
    }

    /// The right to use one store, taken from a thread outside the async
    /// runtime (the checkpoint thread): waits in line with the requests.
    pub fn permit_blocking(&self, rt: &tokio::runtime::Handle) -> OwnedSemaphorePermit {
        rt.block_on(self.permit())
    }

    /// A store for this call (where blocking is allowed: opening one may block).
    pub fn take(&self) -> Result<Box<dyn Store>, StoreError> {
        let idle = self.idle.lock().ok().and_then(|mut v| v.pop());
        match idle {
            Some(s) => Ok(s),
            None => (self.open)(),
        }
    }

    /// `f` with a store kept apart from the pool (opened on first use), for
    /// calls that must not queue behind the pooled ones (health checks); one
    /// such call at a time.
    pub fn with_own<T>(&self, f: impl FnOnce(&dyn Store) -> T) -> Result<T, StoreError> {
        let mut own = match self.own.lock() {
            Ok(own) => own,
            // A call panicked while it held the store: use a fresh one, so
            // one panic does not fail every later health check.
            Err(poisoned) => {
                let mut own = poisoned.into_inner();
                *own = None;
                self.own.clear_poison();
                own
            }
        };
        if own.as_ref().is_some_and(|s| !s.usable()) {
            *own = None;
        }
        let store = match &mut *own {
            Some(store) => store,
            none => none.insert((self.open)()?),
        };
        Ok(f(store.as_ref()))
    }

    /// Gives a store back for the next call; one that cannot be used any
    /// more ([`Store::usable`]) is dropped, and the next call opens another.
    pub fn give(&self, store: Box<dyn Store>) {
        if !store.usable() {
            return;
        }
        if let Ok(mut v) = self.idle.lock() {
            v.push(store);
        }
    }

    /// Closes every idle store (on the calling thread, which must not be an
    /// async task: a DynamoDB store shuts its runtime down when dropped).
    pub fn close(&self) {
        let stores = self.idle.lock().map(|mut v| std::mem::take(&mut *v));
        drop(stores);
        let own = self.own.lock().map(|mut o| o.take());
        drop(own);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::memory::MemoryStore;

    /// A health call that panicked does not fail every later one: the next
    /// call gets a fresh store.
    #[test]
    fn a_panic_in_a_health_call_leaves_the_next_one_working() {
        let opened = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = opened.clone();
        let pool = StorePool::new(
            Box::new(move || {
                counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                Ok(Box::new(MemoryStore::new()) as Box<dyn Store>)
            }),
            1,
            None,
        );
        let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            pool.with_own(|_| panic!("a store call panicked"))
        }));
        assert!(panicked.is_err());
        assert_eq!(
            pool.with_own(|s| s.table_name().to_string())
                .ok()
                .as_deref(),
            Some("memory")
        );
        assert_eq!(opened.load(std::sync::atomic::Ordering::SeqCst), 2);
    }
}
