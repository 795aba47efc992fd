//! DynamoDB's typed JSON (`{"S": "x"}`, `{"N": "1"}`, …): the local store's
//! on-disk form of an item, and the form of the reference's item dumps, so
//! fixtures copied from a real table load as they are.

use serde_json::{Map, Value};

use super::item::{AttrValue, Item};

/// Why a JSON value is not a typed attribute.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a DynamoDB typed value: {0}")]
pub struct TypedJsonError(pub String);

pub fn value_to_json(v: &AttrValue) -> Value {
    let (tag, inner) = match v {
        AttrValue::S(s) => ("S", Value::String(s.clone())),
        AttrValue::N(n) => ("N", Value::String(n.clone())),
        AttrValue::Bool(b) => ("BOOL", Value::Bool(*b)),
        AttrValue::Null => ("NULL", Value::Bool(true)),
        AttrValue::M(m) => ("M", item_to_json(m)),
        AttrValue::L(l) => ("L", Value::Array(l.iter().map(value_to_json).collect())),
        AttrValue::Ss(ss) => (
            "SS",
            Value::Array(ss.iter().map(|s| Value::String(s.clone())).collect()),
        ),
    };
    let mut m = Map::new();
    m.insert(tag.to_string(), inner);
    Value::Object(m)
}

pub fn item_to_json(item: &Item) -> Value {
    Value::Object(
        item.iter()
            .map(|(k, v)| (k.clone(), value_to_json(v)))
            .collect(),
    )
}

pub fn value_from_json(v: &Value) -> Result<AttrValue, TypedJsonError> {
    let bad = || TypedJsonError(v.to_string());
    let obj = v.as_object().ok_or_else(bad)?;
    if obj.len() != 1 {
        return Err(bad());
    }
    let (tag, inner) = obj.iter().next().ok_or_else(bad)?;
    Ok(match (tag.as_str(), inner) {
        ("S", Value::String(s)) => AttrValue::S(s.clone()),
        ("N", Value::String(n)) => AttrValue::N(n.clone()),
        ("BOOL", Value::Bool(b)) => AttrValue::Bool(*b),
        ("NULL", Value::Bool(true)) => AttrValue::Null,
        ("M", m @ Value::Object(_)) => AttrValue::M(item_from_json(m)?),
        ("L", Value::Array(a)) => {
            AttrValue::L(a.iter().map(value_from_json).collect::<Result<_, _>>()?)
        }
        ("SS", Value::Array(a)) => AttrValue::Ss(
            a.iter()
                .map(|s| s.as_str().map(str::to_string).ok_or_else(bad))
                .collect::<Result<_, _>>()?,
        ),
        _ => return Err(bad()),
    })
}

pub fn item_from_json(v: &Value) -> Result<Item, TypedJsonError> {
    let obj = v.as_object().ok_or_else(|| TypedJsonError(v.to_string()))?;
    obj.iter()
        .map(|(k, v)| Ok((k.clone(), value_from_json(v)?)))
        .collect()
}

/// Parses one item from a line of typed JSON (as in the spec's dumps).
pub fn item_from_str(text: &str) -> Result<Item, TypedJsonError> {
    let v: Value = serde_json::from_str(text).map_err(|e| TypedJsonError(e.to_string()))?;
    item_from_json(&v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_type_round_trips() {
        let line = r#"{"PK":{"S":"a"},"n":{"N":"1.50"},"b":{"BOOL":false},"z":{"NULL":true},"m":{"M":{"x":{"L":[{"S":"y"},{"N":"2"}]}}},"ss":{"SS":["b","a"]}}"#;
        let item = item_from_str(line).unwrap();
        assert_eq!(item["n"], AttrValue::N("1.50".into()));
        assert_eq!(item_from_json(&item_to_json(&item)).unwrap(), item);
    }

    #[test]
    fn rejects_untyped_values() {
        for bad in [
            r#"{"a":"x"}"#,
            r#"{"a":{"S":1}}"#,
            r#"{"a":{"S":"x","N":"1"}}"#,
            r#"{"a":{"Q":"x"}}"#,
        ] {
            assert!(item_from_str(bad).is_err(), "{bad}");
        }
    }
}
