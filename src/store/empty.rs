//! A table that does not exist yet, read as empty: what `limits plan` and
//! `limits diff` compare a manifest with when the local store has no such
//! table (an apply would create it). Reads find nothing; writes are refused.

use super::{Index, Item, Key, Store, StoreError, WriteOp};

#[derive(Debug)]
pub struct EmptyStore {
    table: String,
}

impl EmptyStore {
    pub fn new(table: &str) -> Self {
        EmptyStore {
            table: table.to_string(),
        }
    }

    fn refuse(&self) -> StoreError {
        StoreError::Backend(format!(
            "table '{}' does not exist yet and this command does not create it",
            self.table
        ))
    }
}

impl Store for EmptyStore {
    fn table_name(&self) -> &str {
        &self.table
    }
    fn get(&self, _key: &Key, _consistent: bool) -> Result<Option<Item>, StoreError> {
        Ok(None)
    }
    fn batch_get(&self, keys: &[Key], _consistent: bool) -> Result<Vec<Option<Item>>, StoreError> {
        Ok(vec![None; keys.len()])
    }
    fn query(&self, _pk: &str, _sk: &str, _consistent: bool) -> Result<Vec<Item>, StoreError> {
        Ok(Vec::new())
    }
    fn query_index(&self, _i: Index, _pk: &str, _sk: &str) -> Result<Vec<Key>, StoreError> {
        Ok(Vec::new())
    }
    fn write(&self, _op: WriteOp) -> Result<Option<Item>, StoreError> {
        Err(self.refuse())
    }
    fn transact(&self, _ops: Vec<WriteOp>) -> Result<(), StoreError> {
        Err(self.refuse())
    }
}
