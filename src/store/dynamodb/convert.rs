//! Our item model ↔ the SDK's `AttributeValue`.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue as Av;

use crate::store::{AttrValue, Item, Key, StoreError};

/// Converts one of our values for the wire. DynamoDB rejects empty sets, so an
/// empty `Ss` is refused here instead of by the server.
pub fn to_av(v: &AttrValue) -> Result<Av, StoreError> {
    Ok(match v {
        AttrValue::S(s) => Av::S(s.clone()),
        AttrValue::N(n) => Av::N(n.clone()),
        AttrValue::Bool(b) => Av::Bool(*b),
        AttrValue::Null => Av::Null(true),
        AttrValue::M(m) => Av::M(
            m.iter()
                .map(|(k, v)| Ok((k.clone(), to_av(v)?)))
                .collect::<Result<_, StoreError>>()?,
        ),
        AttrValue::L(l) => Av::L(l.iter().map(to_av).collect::<Result<_, _>>()?),
        AttrValue::Ss(s) if s.is_empty() => {
            return Err(StoreError::Backend(
                "refusing to write an empty string set (DynamoDB rejects it)".into(),
            ))
        }
        AttrValue::Ss(s) => Av::Ss(s.iter().cloned().collect()),
    })
}

/// A value of a type this tool does not read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Unsupported(&'static str);

/// Converts a value read from the table; `Err` names the unsupported type.
pub fn from_av(v: &Av) -> Result<AttrValue, Unsupported> {
    Ok(match v {
        Av::S(s) => AttrValue::S(s.clone()),
        Av::N(n) => AttrValue::N(n.clone()),
        Av::Bool(b) => AttrValue::Bool(*b),
        Av::Null(_) => AttrValue::Null,
        Av::M(m) => AttrValue::M(
            m.iter()
                .map(|(k, v)| Ok((k.clone(), from_av(v)?)))
                .collect::<Result<_, Unsupported>>()?,
        ),
        Av::L(l) => AttrValue::L(l.iter().map(from_av).collect::<Result<_, _>>()?),
        Av::Ss(s) => AttrValue::Ss(s.iter().cloned().collect()),
        Av::Ns(_) => return Err(Unsupported("number sets are not supported")),
        Av::B(_) | Av::Bs(_) => return Err(Unsupported("binary attributes are not supported")),
        _ => return Err(Unsupported("an attribute type this tool does not know")),
    })
}

pub fn item_to_wire(item: &Item) -> Result<HashMap<String, Av>, StoreError> {
    item.iter()
        .map(|(k, v)| Ok((k.clone(), to_av(v)?)))
        .collect()
}

/// Converts a whole item; an unsupported attribute makes the item corrupt.
pub fn item_from_wire(raw: &HashMap<String, Av>) -> Result<Item, StoreError> {
    raw.iter()
        .map(|(k, v)| {
            from_av(v).map(|v| (k.clone(), v)).map_err(|reason| {
                let key = key_from_wire(raw).unwrap_or_else(|| Key::new("?", "?"));
                StoreError::Corrupt {
                    pk: key.pk,
                    sk: key.sk,
                    reason: format!("attribute '{k}': {reason}"),
                }
            })
        })
        .collect()
}

pub fn key_to_wire(key: &Key) -> HashMap<String, Av> {
    HashMap::from([
        ("PK".to_string(), Av::S(key.pk.clone())),
        ("SK".to_string(), Av::S(key.sk.clone())),
    ])
}

pub fn key_from_wire(raw: &HashMap<String, Av>) -> Option<Key> {
    match (raw.get("PK"), raw.get("SK")) {
        (Some(Av::S(pk)), Some(Av::S(sk))) => Some(Key::new(pk, sk)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::{BTreeMap, BTreeSet};

    #[test]
    fn round_trips_every_supported_type() {
        let v = AttrValue::M(BTreeMap::from([
            ("s".into(), AttrValue::s("x")),
            ("n".into(), AttrValue::n("1.50")),
            ("b".into(), AttrValue::Bool(false)),
            ("z".into(), AttrValue::Null),
            ("l".into(), AttrValue::L(vec![AttrValue::n(1)])),
            (
                "ss".into(),
                AttrValue::Ss(BTreeSet::from(["a".into(), "b".into()])),
            ),
        ]));
        assert_eq!(from_av(&to_av(&v).unwrap()).unwrap(), v);
    }

    #[test]
    fn empty_sets_and_binary_are_refused() {
        assert!(to_av(&AttrValue::Ss(BTreeSet::new())).is_err());
        let raw = HashMap::from([
            ("PK".to_string(), Av::S("p".into())),
            ("SK".to_string(), Av::S("s".into())),
            ("x".to_string(), Av::Ns(vec!["1".into()])),
        ]);
        let err = item_from_wire(&raw).unwrap_err().to_string();
        assert!(err.contains("p / s") && err.contains("'x'"), "{err}");
    }
}
