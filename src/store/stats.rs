//! Operation counts for the local store, the counterpart of the DynamoDB
//! store's request statistics: with `ZAEL_REQUEST_STATS` set, the calls and
//! the items they carried are printed on stderr when the store is dropped
//! (`zae-limiter: 412 store operations (local), 300,004 items`), so the
//! benchmarks can show a cost linear in levels on both stores.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::{Index, Item, Key, Known, NextWrite, Store, StoreError, WriteOp};

/// Wraps `inner` when the statistics are asked for.
pub fn wrap(inner: Box<dyn Store>) -> Box<dyn Store> {
    if std::env::var_os(super::REQUEST_STATS_ENV).is_none() {
        return inner;
    }
    Box::new(Counted {
        inner,
        seen: Mutex::default(),
    })
}

/// Per operation: calls, items, time.
type Seen = BTreeMap<&'static str, (u64, u64, Duration)>;

struct Counted {
    inner: Box<dyn Store>,
    seen: Mutex<Seen>,
}

impl Counted {
    fn count<T>(&self, op: &'static str, items: usize, f: impl FnOnce() -> T) -> T {
        let started = Instant::now();
        let out = f();
        if let Ok(mut seen) = self.seen.lock() {
            let e = seen.entry(op).or_default();
            e.0 += 1;
            e.1 += items as u64;
            e.2 += started.elapsed();
        }
        out
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

impl Store for Counted {
    fn table_name(&self) -> &str {
        self.inner.table_name()
    }
    fn get(&self, key: &Key, consistent: bool) -> Result<Option<Item>, StoreError> {
        self.count("get", 1, || self.inner.get(key, consistent))
    }
    fn batch_get(&self, keys: &[Key], consistent: bool) -> Result<Vec<Option<Item>>, StoreError> {
        self.count("batch_get", keys.len(), || {
            self.inner.batch_get(keys, consistent)
        })
    }
    fn query(&self, pk: &str, sk_prefix: &str, consistent: bool) -> Result<Vec<Item>, StoreError> {
        self.count("query", 0, || self.inner.query(pk, sk_prefix, consistent))
    }
    fn query_index(&self, index: Index, pk: &str, sk_prefix: &str) -> Result<Vec<Key>, StoreError> {
        self.count("query_index", 0, || {
            self.inner.query_index(index, pk, sk_prefix)
        })
    }
    fn count_index(&self, index: Index, pk: &str, sk_prefix: &str) -> Result<usize, StoreError> {
        self.count("count_index", 0, || {
            self.inner.count_index(index, pk, sk_prefix)
        })
    }
    fn index_lags(&self) -> bool {
        self.inner.index_lags()
    }
    fn write(&self, op: WriteOp) -> Result<Option<Item>, StoreError> {
        self.count("write", 1, || self.inner.write(op))
    }
    fn write_many(&self, ops: Vec<WriteOp>) -> Vec<Result<Option<Item>, StoreError>> {
        self.count("write_many", ops.len(), || self.inner.write_many(ops))
    }
    fn batch_write(&self, ops: Vec<WriteOp>) -> Vec<Result<(), StoreError>> {
        self.count("batch_write", ops.len(), || self.inner.batch_write(ops))
    }
    fn transact(&self, ops: Vec<WriteOp>) -> Result<(), StoreError> {
        self.count("transact", ops.len(), || self.inner.transact(ops))
    }
    fn read_then_write(
        &self,
        key: &Key,
        known: Known,
        next: &mut NextWrite,
    ) -> Result<(), StoreError> {
        self.count("read_then_write", 1, || {
            self.inner.read_then_write(key, known, next)
        })
    }
}
