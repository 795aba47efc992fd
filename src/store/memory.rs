//! An in-memory [`Store`] for tests of any layer (plan and apply, the
//! runtime, locks): the same DynamoDB rules as the local store
//! ([`super::emulate`]), without a file. Safe to share between threads.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};

use super::emulate::{self, index_keys, op_key, Change};
use super::{Index, Item, Key, Store, StoreError, WriteOp};

/// One table in memory.
#[derive(Debug, Default)]
pub struct MemoryStore {
    items: Mutex<BTreeMap<Key, Item>>,
}

impl MemoryStore {
    pub fn new() -> Self {
        Self::default()
    }

    fn items(&self) -> MutexGuard<'_, BTreeMap<Key, Item>> {
        // A panic while holding the lock cannot leave a half-applied write:
        // every change is decided before the map is touched.
        self.items.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Puts `item` unconditionally, as a test's setup; panics on an item
    /// DynamoDB would refuse (a broken test, not a store error).
    pub fn put(&self, item: Item) {
        if let Err(e) = self.write(WriteOp::Put {
            item,
            condition: None,
        }) {
            panic!("test item refused: {e}");
        }
    }

    /// The item under (pk, sk), if any.
    pub fn item(&self, pk: &str, sk: &str) -> Option<Item> {
        self.items().get(&Key::new(pk, sk)).cloned()
    }

    /// Every item, by key.
    pub fn snapshot(&self) -> BTreeMap<Key, Item> {
        self.items().clone()
    }
}

fn apply(items: &mut BTreeMap<Key, Item>, key: Key, change: Change) {
    match change {
        Change::Put { item, .. } => {
            items.insert(key, item);
        }
        Change::Delete => {
            items.remove(&key);
        }
        Change::Keep => {}
    }
}

fn write_one(items: &mut BTreeMap<Key, Item>, op: &WriteOp) -> Result<Option<Item>, StoreError> {
    let key = op_key(op)?;
    let old = items.get(&key).cloned();
    let change = emulate::decide(op, &key, old.as_ref())?;
    apply(items, key, change);
    Ok(old)
}

impl Store for MemoryStore {
    fn table_name(&self) -> &str {
        "memory"
    }

    fn get(&self, key: &Key, _consistent: bool) -> Result<Option<Item>, StoreError> {
        Ok(self.items().get(key).cloned())
    }

    fn batch_get(&self, keys: &[Key], _consistent: bool) -> Result<Vec<Option<Item>>, StoreError> {
        let items = self.items();
        Ok(keys.iter().map(|k| items.get(k).cloned()).collect())
    }

    fn query(&self, pk: &str, sk_prefix: &str, _consistent: bool) -> Result<Vec<Item>, StoreError> {
        Ok(self
            .items()
            .iter()
            .filter(|(k, _)| k.pk == pk && k.sk.starts_with(sk_prefix))
            .map(|(_, v)| v.clone())
            .collect())
    }

    fn query_index(&self, index: Index, pk: &str, sk_prefix: &str) -> Result<Vec<Key>, StoreError> {
        let items = self.items();
        let mut found: Vec<(&str, &Key)> = items
            .iter()
            .filter_map(|(k, item)| {
                let (ipk, isk) = index_keys(item, index)?;
                (ipk == pk && isk.starts_with(sk_prefix)).then_some((isk, k))
            })
            .collect();
        found.sort();
        Ok(found.into_iter().map(|(_, k)| k.clone()).collect())
    }

    fn write(&self, op: WriteOp) -> Result<Option<Item>, StoreError> {
        write_one(&mut self.items(), &op)
    }

    /// Under one lock, each op on its own (as the local store does).
    fn write_many(&self, ops: Vec<WriteOp>) -> Vec<Result<Option<Item>, StoreError>> {
        let mut items = self.items();
        ops.iter().map(|op| write_one(&mut items, op)).collect()
    }

    fn transact(&self, ops: Vec<WriteOp>) -> Result<(), StoreError> {
        if ops.is_empty() {
            return Ok(());
        }
        let keys = emulate::transaction_keys(&ops)?;
        let mut items = self.items();
        let olds: Vec<Option<Item>> = keys.iter().map(|k| items.get(k).cloned()).collect();
        let changes = emulate::decide_transaction(&ops, &keys, &olds)?;
        for (key, change) in keys.into_iter().zip(changes) {
            apply(&mut items, key, change);
        }
        Ok(())
    }
}
