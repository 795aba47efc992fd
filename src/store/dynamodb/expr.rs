//! Conditions and update clauses rendered as DynamoDB expressions. Every
//! attribute name and value goes through a placeholder (`#n0`, `:v0`), so names
//! with `-`, `.` or reserved words (`ttl`, `status`) need no special care.

use std::collections::{BTreeMap, HashMap};

use crate::store::{AttrValue, Condition, UpdateAction};

/// Placeholders collected while rendering one request's expressions.
#[derive(Debug, Default)]
pub struct Placeholders {
    names: BTreeMap<String, String>,
    values: Vec<AttrValue>,
}

impl Placeholders {
    pub fn new() -> Self {
        Self::default()
    }

    /// The placeholder for an attribute name; one per distinct name.
    pub fn name(&mut self, attr: &str) -> String {
        let next = self.names.len();
        self.names
            .entry(attr.to_string())
            .or_insert_with(|| format!("#n{next}"))
            .clone()
    }

    /// A fresh placeholder for a value.
    pub fn value(&mut self, v: AttrValue) -> String {
        self.values.push(v);
        format!(":v{}", self.values.len() - 1)
    }

    /// `ExpressionAttributeNames`, or `None` when no name was used.
    pub fn names_map(&self) -> Option<HashMap<String, String>> {
        (!self.names.is_empty()).then(|| {
            self.names
                .iter()
                .map(|(attr, ph)| (ph.clone(), attr.clone()))
                .collect()
        })
    }

    /// `ExpressionAttributeValues` as (placeholder, value) pairs.
    pub fn values(&self) -> impl Iterator<Item = (String, &AttrValue)> {
        self.values
            .iter()
            .enumerate()
            .map(|(i, v)| (format!(":v{i}"), v))
    }

    pub fn has_values(&self) -> bool {
        !self.values.is_empty()
    }

    /// Renders a condition.
    pub fn condition(&mut self, cond: &Condition) -> String {
        match cond {
            Condition::Exists => format!("attribute_exists({})", self.name("PK")),
            Condition::NotExists => format!("attribute_not_exists({})", self.name("PK")),
            Condition::AttrExists(a) => format!("attribute_exists({})", self.name(a)),
            Condition::AttrNotExists(a) => format!("attribute_not_exists({})", self.name(a)),
            Condition::AttrEquals(a, v) => {
                let n = self.name(a);
                format!("{n} = {}", self.value(v.clone()))
            }
            Condition::AttrNumLe(a, v) => {
                let n = self.name(a);
                format!("{n} <= {}", self.value(AttrValue::N(v.clone())))
            }
            Condition::AttrNumLt(a, v) => {
                let n = self.name(a);
                format!("{n} < {}", self.value(AttrValue::N(v.clone())))
            }
            Condition::And(cs) => self.join(cs, " AND ", true),
            Condition::Or(cs) => self.join(cs, " OR ", false),
        }
    }

    /// `(a) AND (b)`; an empty conjunction is always true, an empty disjunction never.
    fn join(&mut self, cs: &[Condition], op: &str, empty_is_true: bool) -> String {
        if cs.is_empty() {
            let pk = self.name("PK");
            return if empty_is_true {
                format!("(attribute_exists({pk}) OR attribute_not_exists({pk}))")
            } else {
                format!("(attribute_exists({pk}) AND attribute_not_exists({pk}))")
            };
        }
        let parts: Vec<String> = cs
            .iter()
            .map(|c| format!("({})", self.condition(c)))
            .collect();
        parts.join(op)
    }

    /// Renders update clauses as `SET … REMOVE … ADD … DELETE …`, or `None` when empty.
    pub fn update(&mut self, actions: &[UpdateAction]) -> Option<String> {
        let (mut set, mut remove, mut add, mut delete) = (vec![], vec![], vec![], vec![]);
        for action in actions {
            match action {
                UpdateAction::Set(a, v) => {
                    let n = self.name(a);
                    set.push(format!("{n} = {}", self.value(v.clone())));
                }
                UpdateAction::SetIfNotExists(a, v) => {
                    let n = self.name(a);
                    set.push(format!(
                        "{n} = if_not_exists({n}, {})",
                        self.value(v.clone())
                    ));
                }
                UpdateAction::Remove(a) => remove.push(self.name(a)),
                UpdateAction::AddNumber(a, v) => {
                    let n = self.name(a);
                    add.push(format!("{n} {}", self.value(AttrValue::N(v.clone()))));
                }
                UpdateAction::AddToSet(a, vs) => {
                    let n = self.name(a);
                    let v = AttrValue::Ss(vs.iter().cloned().collect());
                    add.push(format!("{n} {}", self.value(v)));
                }
                UpdateAction::DeleteFromSet(a, vs) => {
                    let n = self.name(a);
                    let v = AttrValue::Ss(vs.iter().cloned().collect());
                    delete.push(format!("{n} {}", self.value(v)));
                }
            }
        }
        let clauses: Vec<String> = [
            ("SET", set),
            ("REMOVE", remove),
            ("ADD", add),
            ("DELETE", delete),
        ]
        .into_iter()
        .filter(|(_, parts)| !parts.is_empty())
        .map(|(kw, parts)| format!("{kw} {}", parts.join(", ")))
        .collect();
        (!clauses.is_empty()).then(|| clauses.join(" "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_shared_and_values_fresh() {
        let mut p = Placeholders::new();
        let c = p.condition(&Condition::And(vec![
            Condition::Exists,
            Condition::Or(vec![
                Condition::AttrEquals("client_min_version".into(), AttrValue::s("0.15.0")),
                Condition::AttrNotExists("client_min_version".into()),
            ]),
        ]));
        assert_eq!(
            c,
            "(attribute_exists(#n0)) AND ((#n1 = :v0) OR (attribute_not_exists(#n1)))"
        );
        let names = p.names_map().unwrap();
        assert_eq!(names["#n0"], "PK");
        assert_eq!(names["#n1"], "client_min_version");
        assert_eq!(p.values().count(), 1);
    }

    #[test]
    fn update_groups_clauses_in_dynamodb_order() {
        let mut p = Placeholders::new();
        let u = p
            .update(&[
                UpdateAction::Remove("ttl".into()),
                UpdateAction::Set("vu".into(), AttrValue::n(0)),
                UpdateAction::AddNumber("gpt-4".into(), "1".into()),
                UpdateAction::SetIfNotExists("GSI4PK".into(), AttrValue::s("ns")),
                UpdateAction::DeleteFromSet("resources".into(), vec!["a".into()]),
            ])
            .unwrap();
        assert_eq!(
            u,
            "SET #n1 = :v0, #n3 = if_not_exists(#n3, :v2) REMOVE #n0 ADD #n2 :v1 DELETE #n4 :v3"
        );
        assert!(p.update(&[]).is_none());
    }

    #[test]
    fn empty_junctions_are_constant() {
        let mut p = Placeholders::new();
        assert!(p.condition(&Condition::And(vec![])).contains(" OR "));
        assert!(p.condition(&Condition::Or(vec![])).contains(" AND "));
    }
}
