//! DynamoDB's semantics, once, for the stores that emulate it (the local
//! SQLite store and the in-memory store): which items and keys it accepts,
//! how a condition is evaluated against the stored item, what an UpdateItem
//! does (ADD on exact decimal numbers, set arithmetic), and the rules of a
//! transaction. Pure functions of the stored item; the stores only load and
//! save, so a test on either store runs on the rules the other one keeps.

use std::collections::{BTreeSet, HashSet};

use super::number::{num_eq, NotANumber, Number};
use super::typed_json::item_to_json;
use super::{AttrValue, Condition, Index, Item, Key, StoreError, UpdateAction, WriteOp};

/// DynamoDB's item size limit, "400 KB", taken as 400,000 bytes and measured
/// here on the item's typed JSON, which is never smaller than DynamoDB's own
/// count (names and values in UTF-8, a few bytes per list or map element):
/// what fits here fits there, and on moto (which refuses above 405,000).
pub const MAX_ITEM_BYTES: usize = 400_000;
/// The most writes one transaction may hold.
pub const MAX_TRANSACT_OPS: usize = 100;

const INDEXES: [Index; 4] = [Index::Gsi1, Index::Gsi2, Index::Gsi3, Index::Gsi4];

/// What a write does to the item under its key once its condition held.
#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    /// The whole item afterwards, and its typed JSON (what the local store keeps).
    Put {
        item: Item,
        body: String,
    },
    Delete,
    /// Nothing: a transaction's condition check (an update without actions).
    Keep,
}

/// The condition a write carries, if any.
pub fn condition_of(op: &WriteOp) -> Option<&Condition> {
    match op {
        WriteOp::Put { condition, .. }
        | WriteOp::Delete { condition, .. }
        | WriteOp::Update { condition, .. } => condition.as_ref(),
    }
}

/// The key a write targets, checked as DynamoDB checks it (a put's item whole).
pub fn op_key(op: &WriteOp) -> Result<Key, StoreError> {
    match op {
        WriteOp::Put { item, .. } => validate_item(item),
        WriteOp::Delete { key, .. } | WriteOp::Update { key, .. } => {
            validate_key(key)?;
            Ok(key.clone())
        }
    }
}

fn validate_key(key: &Key) -> Result<(), StoreError> {
    if key.pk.is_empty() || key.sk.is_empty() {
        return Err(StoreError::Backend(
            "key attributes PK and SK must be non-empty strings".into(),
        ));
    }
    Ok(())
}

/// The checks DynamoDB makes on an item before storing it: string keys,
/// string index keys, well-formed numbers, no empty sets.
fn validate_item(item: &Item) -> Result<Key, StoreError> {
    let key = Key::of(item)
        .ok_or_else(|| StoreError::Backend("an item needs string attributes PK and SK".into()))?;
    validate_key(&key)?;
    for index in INDEXES {
        let (p, s) = index.key_attrs();
        for name in [p, s] {
            match item.get(name) {
                None => {}
                Some(AttrValue::S(v)) if !v.is_empty() => {}
                Some(_) => {
                    return Err(StoreError::Backend(format!(
                        "item {} / {}: index key attribute {name} must be a non-empty string",
                        key.pk, key.sk
                    )))
                }
            }
        }
    }
    for (name, v) in item {
        validate_value(v).map_err(|reason| {
            StoreError::Backend(format!("item {} / {}: {name}: {reason}", key.pk, key.sk))
        })?;
    }
    Ok(key)
}

/// Why DynamoDB would refuse a value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum InvalidValue {
    #[error("{0}")]
    Number(#[from] NotANumber),
    #[error("a string set cannot be empty")]
    EmptySet,
}

fn validate_value(v: &AttrValue) -> Result<(), InvalidValue> {
    match v {
        AttrValue::N(n) => Ok(Number::parse(n).map(drop)?),
        AttrValue::Ss(s) if s.is_empty() => Err(InvalidValue::EmptySet),
        AttrValue::M(m) => m.values().try_for_each(validate_value),
        AttrValue::L(l) => l.iter().try_for_each(validate_value),
        _ => Ok(()),
    }
}

/// An item's size as this emulation measures it against [`MAX_ITEM_BYTES`]:
/// the length of its typed JSON. Code that splits growing data into items
/// measures with this, so what it writes is never refused.
pub fn item_size(item: &Item) -> usize {
    item_to_json(item).to_string().len()
}

/// A valid item as it is stored: checked, encoded, within the size limit.
fn stored(item: Item) -> Result<Change, StoreError> {
    let key = validate_item(&item)?;
    let body = item_to_json(&item).to_string();
    if body.len() > MAX_ITEM_BYTES {
        return Err(StoreError::ItemTooLarge {
            pk: key.pk,
            sk: key.sk,
            bytes: Some(body.len()),
        });
    }
    Ok(Change::Put { item, body })
}

/// DynamoDB equality: numbers by value, everything else structurally.
fn values_equal(a: &AttrValue, b: &AttrValue) -> bool {
    match (a, b) {
        (AttrValue::N(x), AttrValue::N(y)) => num_eq(x, y),
        (AttrValue::M(x), AttrValue::M(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| values_equal(v, w)))
        }
        (AttrValue::L(x), AttrValue::L(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(v, w)| values_equal(v, w))
        }
        _ => a == b,
    }
}

fn parse_operand(text: &str) -> Result<Number, StoreError> {
    Number::parse(text).map_err(|e| StoreError::Backend(format!("condition operand: {e}")))
}

/// Evaluates a condition against the stored item (`None` when absent).
/// Numbers compare exactly, as decimals; a bad operand is an error.
pub fn evaluate(cond: &Condition, item: Option<&Item>) -> Result<bool, StoreError> {
    let attr = |name: &str| item.and_then(|i| i.get(name));
    let num_cmp = |name: &str, operand: &str| -> Result<Option<std::cmp::Ordering>, StoreError> {
        let rhs = parse_operand(operand)?;
        Ok(match attr(name) {
            Some(AttrValue::N(n)) => Number::parse(n).ok().map(|lhs| lhs.cmp(&rhs)),
            _ => None,
        })
    };
    Ok(match cond {
        Condition::Exists => item.is_some_and(|i| i.contains_key("PK")),
        Condition::NotExists => !item.is_some_and(|i| i.contains_key("PK")),
        Condition::AttrExists(name) => attr(name).is_some(),
        Condition::AttrNotExists(name) => attr(name).is_none(),
        Condition::AttrEquals(name, value) => attr(name).is_some_and(|v| values_equal(v, value)),
        Condition::AttrNumLe(name, operand) => num_cmp(name, operand)?.is_some_and(|o| o.is_le()),
        Condition::AttrNumLt(name, operand) => num_cmp(name, operand)?.is_some_and(|o| o.is_lt()),
        Condition::And(cs) => {
            for c in cs {
                if !evaluate(c, item)? {
                    return Ok(false);
                }
            }
            true
        }
        Condition::Or(cs) => {
            for c in cs {
                if evaluate(c, item)? {
                    return Ok(true);
                }
            }
            false
        }
    })
}

/// UpdateItem on a copy of the stored item (or a new item holding only the key).
fn apply_update(
    key: &Key,
    old: Option<&Item>,
    actions: &[UpdateAction],
) -> Result<Item, StoreError> {
    let mut item = old.cloned().unwrap_or_else(|| {
        Item::from([
            ("PK".to_string(), AttrValue::s(&key.pk)),
            ("SK".to_string(), AttrValue::s(&key.sk)),
        ])
    });
    let err = |name: &str, reason: String| {
        StoreError::Backend(format!(
            "update of {} / {}: {name}: {reason}",
            key.pk, key.sk
        ))
    };
    let mut touched = HashSet::new();
    for action in actions {
        let name = match action {
            UpdateAction::Set(n, _)
            | UpdateAction::SetIfNotExists(n, _)
            | UpdateAction::Remove(n)
            | UpdateAction::AddNumber(n, _)
            | UpdateAction::AddToSet(n, _)
            | UpdateAction::DeleteFromSet(n, _) => n.as_str(),
        };
        if name == "PK" || name == "SK" {
            return Err(err(name, "key attributes cannot be updated".into()));
        }
        if !touched.insert(name.to_string()) {
            return Err(err(
                name,
                "two actions on one attribute in one update".into(),
            ));
        }
        match action {
            UpdateAction::Set(n, v) => {
                item.insert(n.clone(), v.clone());
            }
            UpdateAction::SetIfNotExists(n, v) => {
                item.entry(n.clone()).or_insert_with(|| v.clone());
            }
            UpdateAction::Remove(n) => {
                item.remove(n);
            }
            UpdateAction::AddNumber(n, delta) => {
                let d = Number::parse(delta).map_err(|e| err(n, e.to_string()))?;
                let sum = match item.get(n) {
                    None => d,
                    Some(AttrValue::N(cur)) => Number::parse(cur)
                        .and_then(|c| c.add(&d))
                        .map_err(|e| err(n, e.to_string()))?,
                    Some(_) => return Err(err(n, "ADD needs a number attribute".into())),
                };
                item.insert(n.clone(), AttrValue::N(sum.canonical()));
            }
            UpdateAction::AddToSet(n, values) => {
                if values.is_empty() {
                    return Err(err(n, "ADD of an empty set".into()));
                }
                match item.get_mut(n) {
                    None => {
                        item.insert(n.clone(), AttrValue::Ss(values.iter().cloned().collect()));
                    }
                    Some(AttrValue::Ss(set)) => set.extend(values.iter().cloned()),
                    Some(_) => {
                        return Err(err(n, "ADD to a set needs a string set attribute".into()))
                    }
                }
            }
            UpdateAction::DeleteFromSet(n, values) => {
                if values.is_empty() {
                    return Err(err(n, "DELETE of an empty set".into()));
                }
                match item.get_mut(n) {
                    None => {}
                    Some(AttrValue::Ss(set)) => {
                        let gone: BTreeSet<&String> = values.iter().collect();
                        set.retain(|v| !gone.contains(v));
                        if set.is_empty() {
                            item.remove(n);
                        }
                    }
                    Some(_) => {
                        return Err(err(
                            n,
                            "DELETE from a set needs a string set attribute".into(),
                        ))
                    }
                }
            }
        }
    }
    Ok(item)
}

/// The change `op` makes to `old` (the item stored under `key`, which
/// [`op_key`] returned), whose condition is known to hold.
fn change(op: &WriteOp, key: &Key, old: Option<&Item>) -> Result<Change, StoreError> {
    match op {
        WriteOp::Put { item, .. } => stored(item.clone()),
        WriteOp::Delete { .. } => Ok(Change::Delete),
        WriteOp::Update { actions, .. } => stored(apply_update(key, old, actions)?),
    }
}

/// One write against the item stored under `key`: its condition, then its
/// change. A failed condition is [`StoreError::ConditionFailed`] and changes nothing.
pub fn decide(op: &WriteOp, key: &Key, old: Option<&Item>) -> Result<Change, StoreError> {
    if let Some(cond) = condition_of(op) {
        if !evaluate(cond, old)? {
            return Err(StoreError::ConditionFailed {
                pk: key.pk.clone(),
                sk: key.sk.clone(),
            });
        }
    }
    change(op, key, old)
}

/// The keys of a transaction's writes: at most [`MAX_TRANSACT_OPS`], each valid, no key twice.
pub fn transaction_keys(ops: &[WriteOp]) -> Result<Vec<Key>, StoreError> {
    if ops.len() > MAX_TRANSACT_OPS {
        return Err(StoreError::Backend(format!(
            "a transaction holds at most {MAX_TRANSACT_OPS} writes, got {}",
            ops.len()
        )));
    }
    let keys = ops.iter().map(op_key).collect::<Result<Vec<_>, _>>()?;
    let mut seen = HashSet::new();
    for k in &keys {
        if !seen.insert(k) {
            return Err(StoreError::Backend(format!(
                "a transaction cannot write {} / {} twice",
                k.pk, k.sk
            )));
        }
    }
    Ok(keys)
}

/// A transaction against the stored items (`olds`, one per op): every
/// condition is evaluated first, and one that fails cancels it all with the
/// per-write reasons DynamoDB reports; then every change, all or none.
pub fn decide_transaction(
    ops: &[WriteOp],
    keys: &[Key],
    olds: &[Option<Item>],
) -> Result<Vec<Change>, StoreError> {
    let mut reasons = Vec::with_capacity(ops.len());
    let mut failed = false;
    for (op, old) in ops.iter().zip(olds) {
        let ok = match condition_of(op) {
            Some(c) => evaluate(c, old.as_ref())?,
            None => true,
        };
        failed |= !ok;
        reasons.push(if ok { "None" } else { "ConditionalCheckFailed" });
    }
    if failed {
        return Err(StoreError::TransactionCanceled(format!(
            "[{}]",
            reasons.join(", ")
        )));
    }
    // An update without actions is a condition check, as the DynamoDB store
    // sends it (ConditionCheck): it writes nothing, not even an empty item.
    ops.iter()
        .zip(keys)
        .zip(olds)
        .map(|((op, key), old)| match op {
            WriteOp::Update { actions, .. } if actions.is_empty() => Ok(Change::Keep),
            _ => change(op, key, old.as_ref()),
        })
        .collect()
}

/// The index keys of an item, when it carries both (only then is it in the index).
pub fn index_keys(item: &Item, index: Index) -> Option<(&str, &str)> {
    let (p, s) = index.key_attrs();
    match (item.get(p), item.get(s)) {
        (Some(AttrValue::S(p)), Some(AttrValue::S(s))) => Some((p, s)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::store::item::keyed as item;

    #[test]
    fn conditions_follow_dynamodb() {
        let stored = item(
            "p",
            "s",
            &[
                ("v", AttrValue::s("0.15.0")),
                ("n", AttrValue::n("5")),
                ("flag", AttrValue::Bool(false)),
            ],
        );
        let some = Some(&stored);
        let ev = |c: Condition, i: Option<&Item>| evaluate(&c, i).unwrap();
        assert!(ev(Condition::Exists, some));
        assert!(!ev(Condition::Exists, None));
        assert!(ev(Condition::NotExists, None));
        assert!(!ev(Condition::NotExists, some));
        assert!(ev(Condition::AttrExists("n".into()), some));
        assert!(!ev(Condition::AttrExists("missing".into()), some));
        assert!(ev(Condition::AttrNotExists("missing".into()), some));
        assert!(ev(Condition::AttrNotExists("n".into()), None));
        assert!(ev(
            Condition::AttrEquals("v".into(), AttrValue::s("0.15.0")),
            some
        ));
        assert!(!ev(
            Condition::AttrEquals("v".into(), AttrValue::s("0.16.0")),
            some
        ));
        assert!(
            ev(Condition::AttrEquals("n".into(), AttrValue::n("5.0")), some),
            "numbers compare by value"
        );
        assert!(
            !ev(Condition::AttrEquals("n".into(), AttrValue::s("5")), some),
            "types must agree"
        );
        assert!(!ev(
            Condition::AttrEquals("flag".into(), AttrValue::Bool(true)),
            some
        ));
        assert!(ev(Condition::AttrNumLe("n".into(), "5".into()), some));
        assert!(!ev(Condition::AttrNumLt("n".into(), "5".into()), some));
        assert!(
            ev(Condition::AttrNumLt("n".into(), "10".into()), some),
            "numeric, not textual"
        );
        assert!(
            !ev(Condition::AttrNumLe("v".into(), "10".into()), some),
            "a string is not <= a number"
        );
        assert!(!ev(
            Condition::AttrNumLe("missing".into(), "10".into()),
            some
        ));
        assert!(ev(
            Condition::And(vec![
                Condition::Exists,
                Condition::Or(vec![
                    Condition::AttrEquals("v".into(), AttrValue::s("x")),
                    Condition::AttrNotExists("w".into()),
                ])
            ]),
            some
        ));
        assert!(!ev(
            Condition::And(vec![Condition::Exists, Condition::NotExists]),
            some
        ));
        assert!(!ev(Condition::Or(vec![]), some));
        assert!(evaluate(&Condition::AttrNumLe("n".into(), "abc".into()), some).is_err());
    }

    #[test]
    fn numbers_compare_and_add_exactly_beyond_f64() {
        // 2^53 + 1 is not an f64; a float comparison would call these equal.
        let stored = item("p", "s", &[("n", AttrValue::n("9007199254740993"))]);
        let le = Condition::AttrNumLe("n".into(), "9007199254740992".into());
        assert!(!evaluate(&le, Some(&stored)).unwrap());
        let add = WriteOp::Update {
            key: Key::new("p", "s"),
            actions: vec![UpdateAction::AddNumber("n".into(), "0.5".into())],
            condition: None,
        };
        let Change::Put { item, .. } = decide(&add, &Key::new("p", "s"), Some(&stored)).unwrap()
        else {
            panic!("an update puts");
        };
        assert_eq!(item["n"], AttrValue::n("9007199254740993.5"));
        // A bad ADD operand is an error, not a silent 0.
        let bad = WriteOp::Update {
            key: Key::new("p", "s"),
            actions: vec![UpdateAction::AddNumber("n".into(), "one".into())],
            condition: None,
        };
        assert!(decide(&bad, &Key::new("p", "s"), Some(&stored)).is_err());
    }
}
