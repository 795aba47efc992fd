//! Operation counts for the local store, the counterpart of the DynamoDB
//! store's request statistics: with `ZAEL_REQUEST_STATS` set, the calls and
//! the items they carried are printed on stderr when the store is dropped
//! (`zae-limiter: 412 store operations (local), 300,004 items`), so the
//! benchmarks can show a cost linear in levels on both stores.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::observe::{self, Observer};
use super::{Store, StoreError};

/// Wraps `inner` when the statistics are asked for.
pub fn wrap(inner: Box<dyn Store>) -> Box<dyn Store> {
    if std::env::var_os(super::REQUEST_STATS_ENV).is_none() {
        return inner;
    }
    observe::wrap(inner, Arc::new(Counted::default()))
}

/// Per operation: calls, items, time.
type Seen = BTreeMap<&'static str, (u64, u64, Duration)>;

#[derive(Default)]
struct Counted {
    seen: Mutex<Seen>,
}

impl Observer for Counted {
    fn call(&self, op: &'static str, items: usize, took: Duration, _error: Option<&StoreError>) {
        if let Ok(mut seen) = self.seen.lock() {
            let e = seen.entry(op).or_default();
            e.0 += 1;
            e.1 += items as u64;
            e.2 += took;
        }
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        let Ok(seen) = self.seen.lock() else { return };
        let calls: u64 = seen.values().map(|s| s.0).sum();
        let items: u64 = seen.values().map(|s| s.1).sum();
        eprintln!("zae-limiter: {calls} store operations (local), {items} items");
        for (op, (n, i, d)) in seen.iter() {
            eprintln!(
                "zae-limiter:   {op}: {n} calls, {i} items, {:.3} s",
                d.as_secs_f64()
            );
        }
    }
}
