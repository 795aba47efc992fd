//! The item model: DynamoDB's attribute types, so both stores hold the same items.

use std::collections::{BTreeMap, BTreeSet};

/// One item: attribute name → value. `BTreeMap` keeps output and comparisons stable.
pub type Item = BTreeMap<String, AttrValue>;

/// A DynamoDB attribute value. Numbers stay decimal strings, as on the wire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AttrValue {
    S(String),
    /// A number in DynamoDB's decimal text form.
    N(String),
    Bool(bool),
    Null,
    M(BTreeMap<String, AttrValue>),
    L(Vec<AttrValue>),
    Ss(BTreeSet<String>),
}

impl AttrValue {
    pub fn s(v: impl Into<String>) -> Self {
        AttrValue::S(v.into())
    }

    pub fn n(v: impl std::fmt::Display) -> Self {
        AttrValue::N(v.to_string())
    }

    pub fn as_s(&self) -> Option<&str> {
        match self {
            AttrValue::S(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_n(&self) -> Option<&str> {
        match self {
            AttrValue::N(n) => Some(n),
            _ => None,
        }
    }

    pub fn as_bool(&self) -> Option<bool> {
        match self {
            AttrValue::Bool(b) => Some(*b),
            _ => None,
        }
    }
}

/// An item from (name, value) pairs, as tests and fixtures write one.
pub fn from_pairs(pairs: &[(&str, AttrValue)]) -> Item {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect()
}

/// An item stored under (`pk`, `sk`) with `extra` attributes.
pub fn keyed(pk: &str, sk: &str, extra: &[(&str, AttrValue)]) -> Item {
    let mut item = from_pairs(extra);
    item.insert("PK".into(), AttrValue::s(pk));
    item.insert("SK".into(), AttrValue::s(sk));
    item
}

/// The primary key of an item.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Key {
    pub pk: String,
    pub sk: String,
}

impl Key {
    pub fn new(pk: impl Into<String>, sk: impl Into<String>) -> Self {
        Key {
            pk: pk.into(),
            sk: sk.into(),
        }
    }

    /// The key of an item, when it has string `PK` and `SK` attributes.
    pub fn of(item: &Item) -> Option<Key> {
        Some(Key::new(item.get("PK")?.as_s()?, item.get("SK")?.as_s()?))
    }
}
