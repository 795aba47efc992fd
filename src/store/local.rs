//! The embedded local store: one file on disk holding the same items as the
//! DynamoDB table. (Being implemented; see issue #5.)

use std::path::Path;

use super::{Index, Item, Key, Store, StoreError, WriteOp};

pub struct LocalStore {
    table: String,
}

impl LocalStore {
    pub fn open(_path: &Path, table: &str) -> Result<Self, StoreError> {
        Err(StoreError::Backend(format!(
            "the local store is not implemented yet (table '{table}')"
        )))
    }
}

impl Store for LocalStore {
    fn table_name(&self) -> &str {
        &self.table
    }
    fn get(&self, _key: &Key, _consistent: bool) -> Result<Option<Item>, StoreError> {
        Err(StoreError::Backend("not implemented".into()))
    }
    fn batch_get(&self, _keys: &[Key], _c: bool) -> Result<Vec<Option<Item>>, StoreError> {
        Err(StoreError::Backend("not implemented".into()))
    }
    fn query(&self, _pk: &str, _p: &str, _c: bool) -> Result<Vec<Item>, StoreError> {
        Err(StoreError::Backend("not implemented".into()))
    }
    fn query_index(&self, _i: Index, _pk: &str, _p: &str) -> Result<Vec<Key>, StoreError> {
        Err(StoreError::Backend("not implemented".into()))
    }
    fn write(&self, _op: WriteOp) -> Result<Option<Item>, StoreError> {
        Err(StoreError::Backend("not implemented".into()))
    }
    fn transact(&self, _ops: Vec<WriteOp>) -> Result<(), StoreError> {
        Err(StoreError::Backend("not implemented".into()))
    }
}
