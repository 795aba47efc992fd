//! Test-only fault injection through the binary, installed only when one of
//! its variables is set (unset, [`wrap`] returns the store as it is):
//!
//! * `ZAEL_FAULT_ABORT_AFTER_WRITES=N`: the process aborts (no unwinding, no
//!   cleanup — like `kill -9`) right after the Nth successful store write or
//!   transaction. The crash-safety tests loop N over every write of an apply.
//! * `ZAEL_FAULT_FAIL_WRITES=OP:TEXT[,OP:TEXT…]`: every write whose kind
//!   matches OP (`put`, `delete`, `update` or `*`) and whose `PK SK` contains
//!   TEXT (ends with it, when TEXT ends with `$`) fails, writing nothing, as a
//!   full disk or a throttled table would;
//!   a transaction holding such a write fails whole. The fault tests name
//!   one kind of write at a time (`delete:#CONFIG`, `put:#PROVISIONER`, …).
//!
//! Batched writes go through the wrapper one op at a time, so each counts
//! and each can fail on its own.

use std::sync::atomic::{AtomicUsize, Ordering};

use crate::store::{Index, Item, Key, Store, StoreError, WriteOp};

/// The environment variable that arms the abort.
pub const ENV: &str = "ZAEL_FAULT_ABORT_AFTER_WRITES";
/// The environment variable that names the writes that fail.
pub const FAIL_ENV: &str = "ZAEL_FAULT_FAIL_WRITES";

/// Wraps `inner` when the environment asks for a fault; otherwise returns it as is.
pub fn wrap(inner: Box<dyn Store>) -> Box<dyn Store> {
    let abort_after = std::env::var(ENV)
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok());
    let fail = std::env::var(FAIL_ENV)
        .ok()
        .map(|v| parse_rules(&v))
        .unwrap_or_default();
    if abort_after.is_none() && fail.is_empty() {
        return inner;
    }
    Box::new(Faulty {
        inner,
        left: abort_after.map(AtomicUsize::new),
        fail,
    })
}

/// One `OP:TEXT` rule.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Rule {
    /// `put`, `delete`, `update` or `*`.
    op: String,
    text: String,
}

fn parse_rules(spec: &str) -> Vec<Rule> {
    spec.split(',')
        .filter_map(|r| {
            let (op, text) = r.split_once(':')?;
            Some(Rule {
                op: op.trim().to_string(),
                text: text.to_string(),
            })
        })
        .collect()
}

fn op_name(op: &WriteOp) -> &'static str {
    match op {
        WriteOp::Put { .. } => "put",
        WriteOp::Delete { .. } => "delete",
        WriteOp::Update { .. } => "update",
    }
}

struct Faulty {
    inner: Box<dyn Store>,
    left: Option<AtomicUsize>,
    fail: Vec<Rule>,
}

impl Faulty {
    fn count<T>(&self, r: Result<T, StoreError>) -> Result<T, StoreError> {
        if let (Ok(_), Some(left)) = (&r, &self.left) {
            let n = left.fetch_sub(1, Ordering::SeqCst).saturating_sub(1);
            if n == 0 {
                eprintln!("{ENV}: aborting after the planned write");
                std::process::abort();
            }
        }
        r
    }

    /// The injected failure for `op`, if a rule names it.
    fn refused(&self, op: &WriteOp) -> Option<StoreError> {
        let key = op.key();
        let name = op_name(op);
        let subject = format!("{} {}", key.pk, key.sk);
        let names = |text: &str| match text.strip_suffix('$') {
            Some(end) => subject.ends_with(end),
            None => subject.contains(text),
        };
        self.fail
            .iter()
            .find(|r| (r.op == "*" || r.op == name) && names(&r.text))
            .map(|r| {
                StoreError::Backend(format!(
                    "injected fault ({FAIL_ENV}={}:{}) on {name} {} / {}",
                    r.op, r.text, key.pk, key.sk
                ))
            })
    }
}

impl Store for Faulty {
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
    fn count_index(&self, index: Index, pk: &str, sk_prefix: &str) -> Result<usize, StoreError> {
        self.inner.count_index(index, pk, sk_prefix)
    }
    fn index_lags(&self) -> bool {
        self.inner.index_lags()
    }
    fn write(&self, op: WriteOp) -> Result<Option<Item>, StoreError> {
        if let Some(e) = self.refused(&op) {
            return Err(e);
        }
        let r = self.inner.write(op);
        self.count(r)
    }
    fn transact(&self, ops: Vec<WriteOp>) -> Result<(), StoreError> {
        if let Some(e) = ops.iter().find_map(|op| self.refused(op)) {
            return Err(e);
        }
        let r = self.inner.transact(ops);
        self.count(r)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::store::memory::MemoryStore;
    use crate::store::AttrValue;

    /// An in-memory store whose writes named by `spec` (as in [`FAIL_ENV`]) fail.
    pub(crate) fn failing(spec: &str) -> Box<dyn Store> {
        Box::new(Faulty {
            inner: Box::new(MemoryStore::new()),
            left: None,
            fail: parse_rules(spec),
        })
    }

    fn put(pk: &str, sk: &str) -> WriteOp {
        WriteOp::Put {
            item: crate::store::item::keyed(pk, sk, &[("x", AttrValue::n(1))]),
            condition: None,
        }
    }

    #[test]
    fn a_rule_fails_the_writes_it_names_and_nothing_else() {
        let store = Faulty {
            inner: Box::new(MemoryStore::new()),
            left: None,
            fail: parse_rules("delete:#CONFIG,put:#PROVISIONER$"),
        };
        assert!(store.write(put("ns/RESOURCE#a", "#CONFIG")).is_ok());
        let del = WriteOp::Delete {
            key: Key::new("ns/RESOURCE#a", "#CONFIG"),
            condition: None,
        };
        let err = store.write(del.clone()).unwrap_err().to_string();
        assert!(
            err.contains("injected fault") && err.contains("ns/RESOURCE#a"),
            "{err}"
        );
        assert!(store.write(put("ns/SYSTEM#", "#PROVISIONER")).is_err());
        assert!(store
            .write(put("ns/SYSTEM#", "#PROVISIONER#PENDING#x"))
            .is_ok());
        // Batched: only the named op fails; a transaction fails whole.
        let results = store.batch_write(vec![put("a", "#X"), del.clone()]);
        assert!(results[0].is_ok() && results[1].is_err());
        assert!(store.transact(vec![put("b", "#X"), del]).is_err());
        assert!(store.get(&Key::new("b", "#X"), true).unwrap().is_none());
        assert!(store
            .get(&Key::new("ns/RESOURCE#a", "#CONFIG"), true)
            .unwrap()
            .is_some());
    }
}
