//! A tiny in-memory [`Store`] with DynamoDB's write semantics, for unit tests of
//! plan/apply logic that must not depend on a backend.

use std::cell::RefCell;
use std::collections::BTreeMap;

use crate::store::{
    AttrValue, Condition, Index, Item, Key, Store, StoreError, UpdateAction, WriteOp,
};

#[derive(Default)]
pub struct MemStore {
    pub items: RefCell<BTreeMap<Key, Item>>,
    /// Every successful write or transaction, counted (for write-budget assertions).
    pub writes: RefCell<usize>,
}

impl MemStore {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn put(&self, item: Item) {
        let key = Key::of(&item).expect("test items carry PK and SK");
        self.items.borrow_mut().insert(key, item);
    }

    pub fn item(&self, pk: &str, sk: &str) -> Option<Item> {
        self.items.borrow().get(&Key::new(pk, sk)).cloned()
    }

    pub fn snapshot(&self) -> BTreeMap<Key, Item> {
        self.items.borrow().clone()
    }
}

fn num(v: &AttrValue) -> Option<f64> {
    v.as_n().and_then(|n| n.parse().ok())
}

pub fn holds(cond: &Condition, cur: Option<&Item>) -> bool {
    match cond {
        Condition::Exists => cur.is_some(),
        Condition::NotExists => cur.is_none(),
        Condition::AttrExists(a) => cur.is_some_and(|i| i.contains_key(a)),
        Condition::AttrNotExists(a) => !cur.is_some_and(|i| i.contains_key(a)),
        Condition::AttrEquals(a, v) => cur.and_then(|i| i.get(a)) == Some(v),
        Condition::AttrNumLe(a, n) => cur
            .and_then(|i| i.get(a))
            .and_then(num)
            .zip(n.parse::<f64>().ok())
            .is_some_and(|(x, y)| x <= y),
        Condition::AttrNumLt(a, n) => cur
            .and_then(|i| i.get(a))
            .and_then(num)
            .zip(n.parse::<f64>().ok())
            .is_some_and(|(x, y)| x < y),
        Condition::And(cs) => cs.iter().all(|c| holds(c, cur)),
        Condition::Or(cs) => cs.iter().any(|c| holds(c, cur)),
    }
}

fn apply_op(items: &mut BTreeMap<Key, Item>, op: WriteOp) -> Result<Option<Item>, StoreError> {
    let key = op.key();
    let cur = items.get(&key).cloned();
    let cond = match &op {
        WriteOp::Put { condition, .. }
        | WriteOp::Delete { condition, .. }
        | WriteOp::Update { condition, .. } => condition.clone(),
    };
    if let Some(c) = cond {
        if !holds(&c, cur.as_ref()) {
            return Err(StoreError::ConditionFailed {
                pk: key.pk,
                sk: key.sk,
            });
        }
    }
    match op {
        WriteOp::Put { item, .. } => {
            items.insert(key, item);
        }
        WriteOp::Delete { .. } => {
            items.remove(&key);
        }
        WriteOp::Update { actions, .. } => {
            let mut it = cur.clone().unwrap_or_else(|| {
                let mut i = Item::new();
                i.insert("PK".into(), AttrValue::s(&key.pk));
                i.insert("SK".into(), AttrValue::s(&key.sk));
                i
            });
            for a in actions {
                match a {
                    UpdateAction::Set(n, v) => {
                        it.insert(n, v);
                    }
                    UpdateAction::SetIfNotExists(n, v) => {
                        it.entry(n).or_insert(v);
                    }
                    UpdateAction::Remove(n) => {
                        it.remove(&n);
                    }
                    UpdateAction::AddNumber(n, d) => {
                        let old: i64 = it
                            .get(&n)
                            .and_then(|v| v.as_n())
                            .and_then(|s| s.parse().ok())
                            .unwrap_or(0);
                        let d: i64 = d.parse().unwrap_or(0);
                        it.insert(n, AttrValue::n(old + d));
                    }
                    UpdateAction::AddToSet(n, vs) => {
                        let mut set = match it.get(&n) {
                            Some(AttrValue::Ss(s)) => s.clone(),
                            _ => Default::default(),
                        };
                        set.extend(vs);
                        it.insert(n, AttrValue::Ss(set));
                    }
                    UpdateAction::DeleteFromSet(n, vs) => {
                        if let Some(AttrValue::Ss(s)) = it.get(&n) {
                            let mut s = s.clone();
                            for v in vs {
                                s.remove(&v);
                            }
                            if s.is_empty() {
                                it.remove(&n);
                            } else {
                                it.insert(n, AttrValue::Ss(s));
                            }
                        }
                    }
                }
            }
            items.insert(key, it);
        }
    }
    Ok(cur)
}

impl Store for MemStore {
    fn table_name(&self) -> &str {
        "mem"
    }
    fn get(&self, key: &Key, _c: bool) -> Result<Option<Item>, StoreError> {
        Ok(self.items.borrow().get(key).cloned())
    }
    fn batch_get(&self, keys: &[Key], _c: bool) -> Result<Vec<Option<Item>>, StoreError> {
        let items = self.items.borrow();
        Ok(keys.iter().map(|k| items.get(k).cloned()).collect())
    }
    fn query(&self, pk: &str, prefix: &str, _c: bool) -> Result<Vec<Item>, StoreError> {
        Ok(self
            .items
            .borrow()
            .iter()
            .filter(|(k, _)| k.pk == pk && k.sk.starts_with(prefix))
            .map(|(_, v)| v.clone())
            .collect())
    }
    fn query_index(&self, index: Index, pk: &str, prefix: &str) -> Result<Vec<Key>, StoreError> {
        let (p, s) = index.key_attrs();
        Ok(self
            .items
            .borrow()
            .iter()
            .filter(|(_, v)| {
                v.get(p).and_then(|x| x.as_s()) == Some(pk)
                    && v.get(s)
                        .and_then(|x| x.as_s())
                        .is_some_and(|x| x.starts_with(prefix))
            })
            .map(|(k, _)| k.clone())
            .collect())
    }
    fn write(&self, op: WriteOp) -> Result<Option<Item>, StoreError> {
        let r = apply_op(&mut self.items.borrow_mut(), op)?;
        *self.writes.borrow_mut() += 1;
        Ok(r)
    }
    fn transact(&self, ops: Vec<WriteOp>) -> Result<(), StoreError> {
        let mut copy = self.items.borrow().clone();
        for op in ops {
            apply_op(&mut copy, op).map_err(|e| StoreError::TransactionCanceled(e.to_string()))?;
        }
        *self.items.borrow_mut() = copy;
        *self.writes.borrow_mut() += 1;
        Ok(())
    }
}
