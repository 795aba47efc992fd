//! Test-only fault injection: with `ZAEL_FAULT_ABORT_AFTER_WRITES=N` set, the
//! process aborts (no unwinding, no cleanup — like `kill -9`) right after the
//! Nth successful store write or transaction. The crash-safety tests loop N over
//! every write of an apply. Unset, the wrapper is not installed at all.

use std::cell::Cell;

use crate::store::{Index, Item, Key, Store, StoreError, WriteOp};

/// The environment variable that arms the fault.
pub const ENV: &str = "ZAEL_FAULT_ABORT_AFTER_WRITES";

/// Wraps `inner` when the environment asks for a fault; otherwise returns it as is.
pub fn wrap(inner: Box<dyn Store>) -> Box<dyn Store> {
    match std::env::var(ENV)
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
    {
        Some(n) => Box::new(AbortAfter {
            inner,
            left: Cell::new(n),
        }),
        None => inner,
    }
}

struct AbortAfter {
    inner: Box<dyn Store>,
    left: Cell<usize>,
}

impl AbortAfter {
    fn count<T>(&self, r: Result<T, StoreError>) -> Result<T, StoreError> {
        if r.is_ok() {
            let left = self.left.get().saturating_sub(1);
            self.left.set(left);
            if left == 0 {
                eprintln!("{ENV}: aborting after the planned write");
                std::process::abort();
            }
        }
        r
    }
}

impl Store for AbortAfter {
    fn table_name(&self) -> &str {
        self.inner.table_name()
    }
    fn get(&self, key: &Key, consistent: bool) -> Result<Option<Item>, StoreError> {
        self.inner.get(key, consistent)
    }
    fn batch_get(&self, keys: &[Key], consistent: bool) -> Result<Vec<Option<Item>>, StoreError> {
        self.inner.batch_get(keys, consistent)
    }
    fn query(&self, pk: &str, sk_prefix: &str, consistent: bool) -> Result<Vec<Item>, StoreError> {
        self.inner.query(pk, sk_prefix, consistent)
    }
    fn query_index(&self, index: Index, pk: &str, sk_prefix: &str) -> Result<Vec<Key>, StoreError> {
        self.inner.query_index(index, pk, sk_prefix)
    }
    fn write(&self, op: WriteOp) -> Result<Option<Item>, StoreError> {
        let r = self.inner.write(op);
        self.count(r)
    }
    fn transact(&self, ops: Vec<WriteOp>) -> Result<(), StoreError> {
        let r = self.inner.transact(ops);
        self.count(r)
    }
}
