//! One lane per state item: an instance decides for one (entity, resource)
//! — or one cooldown scope — one request at a time. Requests on the same
//! item wait their turn in the async queue instead of racing each other to
//! the store and losing conditional writes (a lost race costs a read, a
//! write and a backoff sleep). Other instances on the same table still race,
//! and the conditional write keeps them correct: lanes save work, they do
//! not provide the safety.
//!
//! Keys hash onto a fixed set of async mutexes, so memory does not grow with
//! the number of items (two items on one lane merely wait for each other).

use std::hash::{BuildHasher, Hasher};
use std::sync::Arc;

use tokio::sync::{Mutex, OwnedMutexGuard};

/// Lanes in all; a power of two.
const LANES: usize = 256;

pub struct Lanes {
    lanes: Vec<Arc<Mutex<()>>>,
    hasher: std::collections::hash_map::RandomState,
}

impl Default for Lanes {
    fn default() -> Self {
        Lanes {
            lanes: (0..LANES).map(|_| Arc::new(Mutex::new(()))).collect(),
            hasher: Default::default(),
        }
    }
}

impl Lanes {
    /// Waits for the lane of `key`; the guard holds it until dropped.
    pub async fn enter(&self, key: &str) -> OwnedMutexGuard<()> {
        let mut h = self.hasher.build_hasher();
        h.write(key.as_bytes());
        let lane = (h.finish() as usize) & (LANES - 1);
        self.lanes[lane].clone().lock_owned().await
    }
}
