//! One decorator that forwards every [`Store`] call and shows each to an
//! [`Observer`]: the request statistics ([`super::stats`]) and `serve`'s
//! metrics are observers, so neither forwards the trait itself.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{Index, Item, Key, Known, NextWrite, Store, StoreError, WriteOp};

/// Sees every call made through [`wrap`], once it returned.
pub trait Observer: Send + Sync {
    /// A call of the trait method `op`, carrying `items` keys or writes (1
    /// for a get and a write, 0 for the queries); `error`: what it failed
    /// with (for the calls with one result per write: the first failure).
    fn call(&self, op: &'static str, items: usize, took: Duration, error: Option<&StoreError>);
    /// A [`Store::read_then_write`]; by default a call of one item.
    fn read_then_write(&self, _steps: Steps, took: Duration, error: Option<&StoreError>) {
        self.call("read_then_write", 1, took, error)
    }
}

/// How far a [`Store::read_then_write`] went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Steps {
    /// The item was not `known`: the store was asked to read it.
    pub reads: bool,
    /// The item was shown to `next` (not when the call failed before, e.g.
    /// the local store's write lock was not granted in time).
    pub shown: bool,
    /// `next` returned a write.
    pub wrote: bool,
}

/// `inner`, with every call shown to `observer`.
pub fn wrap(inner: Box<dyn Store>, observer: Arc<dyn Observer>) -> Box<dyn Store> {
    Box::new(Observed { observer, inner })
}

struct Observed {
    /// Dropped before `inner`: an observer that reports on drop (the
    /// statistics) does so before the store closes, as it always did.
    observer: Arc<dyn Observer>,
    inner: Box<dyn Store>,
}

/// The failure a call's result carries, if any.
trait Failure {
    fn failure(&self) -> Option<&StoreError>;
}

impl<T> Failure for Result<T, StoreError> {
    fn failure(&self) -> Option<&StoreError> {
        self.as_ref().err()
    }
}

impl<T> Failure for Vec<Result<T, StoreError>> {
    fn failure(&self) -> Option<&StoreError> {
        self.iter().find_map(|r| r.as_ref().err())
    }
}

impl Observed {
    fn observe<T: Failure>(&self, op: &'static str, items: usize, call: impl FnOnce() -> T) -> T {
        let started = Instant::now();
        let out = call();
        self.observer
            .call(op, items, started.elapsed(), out.failure());
        out
    }
}

impl Store for Observed {
    fn table_name(&self) -> &str {
        self.inner.table_name()
    }
    fn target(&self) -> Option<crate::store::open::Target> {
        self.inner.target()
    }
    fn usable(&self) -> bool {
        self.inner.usable()
    }
    fn get(&self, key: &Key, consistent: bool) -> Result<Option<Item>, StoreError> {
        self.observe("get", 1, || self.inner.get(key, consistent))
    }
    fn batch_get(&self, keys: &[Key], consistent: bool) -> Result<Vec<Option<Item>>, StoreError> {
        self.observe("batch_get", keys.len(), || {
            self.inner.batch_get(keys, consistent)
        })
    }
    fn query(&self, pk: &str, sk_prefix: &str, consistent: bool) -> Result<Vec<Item>, StoreError> {
        self.observe("query", 0, || self.inner.query(pk, sk_prefix, consistent))
    }
    fn query_index(&self, index: Index, pk: &str, sk_prefix: &str) -> Result<Vec<Key>, StoreError> {
        self.observe("query_index", 0, || {
            self.inner.query_index(index, pk, sk_prefix)
        })
    }
    fn count_index(&self, index: Index, pk: &str, sk_prefix: &str) -> Result<usize, StoreError> {
        self.observe("count_index", 0, || {
            self.inner.count_index(index, pk, sk_prefix)
        })
    }
    fn index_lags(&self) -> bool {
        self.inner.index_lags()
    }
    fn write(&self, op: WriteOp) -> Result<Option<Item>, StoreError> {
        self.observe("write", 1, || self.inner.write(op))
    }
    fn write_many(&self, ops: Vec<WriteOp>) -> Vec<Result<Option<Item>, StoreError>> {
        self.observe("write_many", ops.len(), || self.inner.write_many(ops))
    }
    fn batch_write(&self, ops: Vec<WriteOp>) -> Vec<Result<(), StoreError>> {
        self.observe("batch_write", ops.len(), || self.inner.batch_write(ops))
    }
    fn transact(&self, ops: Vec<WriteOp>) -> Result<(), StoreError> {
        self.observe("transact", ops.len(), || self.inner.transact(ops))
    }
    fn read_then_write(
        &self,
        key: &Key,
        known: Known,
        next: &mut NextWrite,
    ) -> Result<(), StoreError> {
        let (reads, mut shown, mut wrote) = (known.is_none(), false, false);
        let started = Instant::now();
        let out = self.inner.read_then_write(key, known, &mut |item| {
            shown = true;
            let op = next(item);
            wrote = op.is_some();
            op
        });
        let steps = Steps {
            reads,
            shown,
            wrote,
        };
        self.observer
            .read_then_write(steps, started.elapsed(), out.as_ref().err());
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::empty::EmptyStore;
    use crate::store::item::from_pairs;
    use crate::store::memory::MemoryStore;
    use crate::store::AttrValue;
    use std::sync::Mutex;

    /// A call seen: the method, its items, a read-then-write's steps, whether it failed.
    type Call = (&'static str, usize, Option<Steps>, bool);

    #[derive(Default)]
    struct Seen(Mutex<Vec<Call>>);

    impl Observer for Seen {
        fn call(&self, op: &'static str, items: usize, _: Duration, error: Option<&StoreError>) {
            let call = (op, items, None, error.is_some());
            self.0.lock().unwrap().push(call);
        }
        fn read_then_write(&self, steps: Steps, _: Duration, error: Option<&StoreError>) {
            let rtw = ("read_then_write", 1, Some(steps), error.is_some());
            self.0.lock().unwrap().push(rtw);
        }
    }

    fn put(pk: &str) -> WriteOp {
        let (pk, sk) = (AttrValue::S(pk.into()), AttrValue::S("#A".into()));
        WriteOp::Put {
            item: from_pairs(&[("PK", pk), ("SK", sk)]),
            condition: None,
        }
    }

    #[test]
    fn a_read_then_write_shows_whether_it_read_showed_the_item_and_wrote() {
        let seen = Arc::new(Seen::default());
        let key = Key::new("a", "#A");
        let memory = wrap(Box::new(MemoryStore::new()), seen.clone());
        memory
            .read_then_write(&key, None, &mut |_| Some(put("a")))
            .unwrap();
        memory
            .read_then_write(&key, Some(None), &mut |_| None)
            .unwrap();
        // Another item: refused once shown, after `next` chose the write.
        memory
            .read_then_write(&key, Some(None), &mut |_| Some(put("b")))
            .unwrap_err();
        let empty = wrap(Box::new(EmptyStore::new("t")), seen.clone());
        empty
            .read_then_write(&key, None, &mut |_| Some(put("a")))
            .unwrap_err();
        // The first failure of a call with one result per write.
        empty.batch_write(vec![put("a"), put("b")]);
        let rtw = |reads, shown, wrote, failed| {
            let steps = Steps {
                reads,
                shown,
                wrote,
            };
            ("read_then_write", 1, Some(steps), failed)
        };
        // Only the calls made through the wrapper: not the inner store's own
        // get and write.
        assert_eq!(
            *seen.0.lock().unwrap(),
            [
                rtw(true, true, true, false),
                rtw(false, true, false, false),
                rtw(false, true, true, true),
                rtw(true, true, true, true),
                ("batch_write", 2, None, true),
            ]
        );
    }
}
