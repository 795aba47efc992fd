//! Reading the items this tool keeps (cooldown and runtime state, the
//! `#PROVISIONER` record) strictly: an attribute that is missing or of the
//! wrong type makes the item [`Unreadable`], never a default, and the caller
//! says whose item it was.

use std::collections::BTreeMap;
use std::str::FromStr;

use crate::store::AttrValue;

/// What is wrong with a stored item, in one line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Unreadable(pub String);

impl Unreadable {
    /// `what`, prefixed with where it was found (`attribute 'x': …`).
    pub fn within(self, place: &str) -> Unreadable {
        Unreadable(format!("{place}: {}", self.0))
    }
}

impl From<String> for Unreadable {
    fn from(reason: String) -> Self {
        Unreadable(reason)
    }
}

impl From<&str> for Unreadable {
    fn from(reason: &str) -> Self {
        Unreadable(reason.to_string())
    }
}

/// The attribute `name` of `m`, which must be a string.
pub fn string(m: &BTreeMap<String, AttrValue>, name: &str) -> Result<String, Unreadable> {
    match m.get(name) {
        Some(AttrValue::S(v)) => Ok(v.clone()),
        Some(other) => Err(mistyped(name, other, "a string")),
        None => Err(missing(name)),
    }
}

/// The attribute `name` of `m`, which must be a number that parses as `T`.
pub fn integer<T: FromStr>(m: &BTreeMap<String, AttrValue>, name: &str) -> Result<T, Unreadable> {
    match m.get(name) {
        Some(AttrValue::N(v)) => v.parse().map_err(|_| {
            Unreadable(format!(
                "attribute '{name}' = {v} is not a valid integer here"
            ))
        }),
        Some(other) => Err(mistyped(name, other, "a number")),
        None => Err(missing(name)),
    }
}

fn missing(name: &str) -> Unreadable {
    Unreadable(format!("attribute '{name}' is missing"))
}

fn mistyped(name: &str, found: &AttrValue, expected: &str) -> Unreadable {
    Unreadable(format!(
        "attribute '{name}' is {}, expected {expected}",
        type_name(found)
    ))
}

/// How an error names the type of a stored value.
pub fn type_name(v: &AttrValue) -> &'static str {
    match v {
        AttrValue::S(_) => "a string",
        AttrValue::N(_) => "a number",
        AttrValue::Bool(_) => "a boolean",
        AttrValue::Null => "null",
        AttrValue::M(_) => "a map",
        AttrValue::L(_) => "a list",
        AttrValue::Ss(_) => "a string set",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attributes_are_read_strictly() {
        let m = BTreeMap::from([
            ("s".to_string(), AttrValue::s("x")),
            ("n".to_string(), AttrValue::n(7)),
            ("f".to_string(), AttrValue::n("1.5")),
        ]);
        assert_eq!(string(&m, "s"), Ok("x".into()));
        assert_eq!(integer::<i64>(&m, "n"), Ok(7));
        fn e<T: std::fmt::Debug>(r: Result<T, Unreadable>) -> String {
            r.unwrap_err().to_string()
        }
        assert_eq!(
            e(string(&m, "n")),
            "attribute 'n' is a number, expected a string"
        );
        assert_eq!(
            e(integer::<i64>(&m, "s")),
            "attribute 's' is a string, expected a number"
        );
        assert_eq!(
            e(integer::<i64>(&m, "f")),
            "attribute 'f' = 1.5 is not a valid integer here"
        );
        assert_eq!(e(string(&m, "x")), "attribute 'x' is missing");
    }
}
