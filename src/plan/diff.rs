//! The diff (docs/storage.md, "The `#PROVISIONER` record"): the declared change list, in the
//! reference's order, then `drop_unchanged` against the live items.
//!
//! Deliberate difference from the reference: an unchanged level is recognised by
//! its *limit-relevant content* ([`same_content`]), not by every attribute. The
//! reference compares whole items, so a level written by the Python API (which adds
//! `config_version` and the entity `GSI3PK/GSI3SK`) always shows as a spurious
//! `~ update` once; here it does not. The live items are read with ONE batched,
//! strongly consistent read instead of one GetItem per level.

use crate::manifest::Manifest;
use crate::plan::level::{Action, Change, Level};
use crate::plan::managed::ManagedSet;
use crate::store::{Item, Store, StoreError};

/// The declared changes, in order: system; resources sorted by name, then deleted
/// resources sorted; entity pairs sorted by the (entity, resource) tuple, then deleted
/// pairs sorted the same way. Create vs update comes from `previous` only.
pub fn compute_diff(m: &Manifest, previous: &ManagedSet) -> Vec<Change> {
    declared_changes(m, previous, previous)
}

/// [`compute_diff`] where the levels to delete are those of `held` (the
/// managed set and any unconfirmed levels) no longer declared, and create vs
/// update still comes from `managed` alone.
pub fn declared_changes(m: &Manifest, managed: &ManagedSet, held: &ManagedSet) -> Vec<Change> {
    let previous = held;
    let label = |level: &Level| {
        if managed.contains(level) {
            Action::Update
        } else {
            Action::Create
        }
    };
    let mut out = Vec::new();
    if m.system.is_some() {
        out.push(Change::new(label(&Level::System), Level::System));
    } else if previous.system {
        out.push(Change::new(Action::Delete, Level::System));
    }

    let mut resources: Vec<&String> = m.resources.keys().collect();
    resources.sort();
    for r in &resources {
        let level = Level::Resource((*r).clone());
        out.push(Change::new(label(&level), level));
    }
    for r in &previous.resources {
        if !m.resources.contains_key(r) {
            out.push(Change::new(Action::Delete, Level::Resource(r.clone())));
        }
    }

    let mut pairs: Vec<(&String, &String)> = m
        .entities
        .iter()
        .flat_map(|(e, rs)| rs.keys().map(move |r| (e, r)))
        .collect();
    pairs.sort();
    for (e, r) in pairs {
        let level = Level::Entity(e.clone(), r.clone());
        out.push(Change::new(label(&level), level));
    }
    for (e, r) in previous.entity_pairs() {
        let declared = m.entities.get(&e).is_some_and(|rs| rs.contains_key(&r));
        if !declared {
            out.push(Change::new(Action::Delete, Level::Entity(e, r)));
        }
    }
    out
}

/// Reads the live config item of every change with one batched consistent read.
pub fn read_live(
    store: &dyn Store,
    ns: &str,
    changes: &[Change],
) -> Result<Vec<Option<Item>>, StoreError> {
    if changes.is_empty() {
        return Ok(Vec::new());
    }
    let keys: Vec<_> = changes.iter().map(|c| c.level.key(ns)).collect();
    store.batch_get(&keys, true)
}

/// Whether writing `desired` would change nothing that matters for enforcement
/// compared to `live`: the item codec's limit-relevant content
/// ([`crate::items::config::limit_content`]: limit attributes, `sched_tz`, flags,
/// `on_unavailable`, numbers compared numerically, bookkeeping ignored).
pub fn same_content(desired: &Item, live: &Item) -> bool {
    crate::items::config::same_limits(desired, live)
}

/// Canonical decimal text: no leading `+`, no leading zeros, no trailing fractional
/// zeros, exponent folded in, `-0` → `0`. Unparseable text is kept as is.
pub fn normalise_number(n: &str) -> String {
    match crate::store::number::Number::parse(n.trim()) {
        Ok(num) => num.canonical(),
        Err(_) => n.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::model::{LevelConfig, SystemLevel};
    use crate::store::AttrValue;
    use indexmap::IndexMap;

    fn m(system: bool, resources: &[&str], pairs: &[(&str, &str)]) -> Manifest {
        let mut man = Manifest {
            namespace: "d".into(),
            system: system.then(SystemLevel::default),
            resources: IndexMap::new(),
            entities: IndexMap::new(),
        };
        for r in resources {
            man.resources.insert(r.to_string(), LevelConfig::default());
        }
        for (e, r) in pairs {
            man.entities
                .entry(e.to_string())
                .or_default()
                .insert(r.to_string(), LevelConfig::default());
        }
        man
    }

    fn render(changes: &[Change]) -> Vec<String> {
        changes
            .iter()
            .map(|c| format!("{} {}", c.action.as_str(), c.level.target()))
            .collect()
    }

    #[test]
    fn first_apply_creates_in_reference_order() {
        let man = m(
            true,
            &["gpt-4", "claude-3"],
            &[("user-1", "gpt-4"), ("a", "z"), ("a", "_default_")],
        );
        let got = compute_diff(&man, &ManagedSet::default());
        assert_eq!(
            render(&got),
            [
                "create ",
                "create claude-3",
                "create gpt-4",
                "create a/_default_",
                "create a/z",
                "create user-1/gpt-4"
            ]
        );
    }

    #[test]
    fn entity_pairs_sort_by_tuple_not_by_joined_string() {
        // "a-b/x" < "a/x" as strings ('-' < '/'), but ("a", ..) < ("a-b", ..) as tuples.
        let man = m(false, &[], &[("a-b", "x"), ("a", "x")]);
        let got = compute_diff(&man, &ManagedSet::default());
        assert_eq!(render(&got), ["create a/x", "create a-b/x"]);
    }

    #[test]
    fn second_manifest_updates_creates_and_deletes_like_the_transcript() {
        let m1 = m(true, &["gpt-4", "claude-3"], &[("user-1", "gpt-4")]);
        let prev = ManagedSet::from_manifest(&m1);
        let m2 = m(false, &["gpt-4", "mistral"], &[("user-1", "gpt-4")]);
        let got = compute_diff(&m2, &prev);
        assert_eq!(
            render(&got),
            [
                "delete ",
                "update gpt-4",
                "create mistral",
                "delete claude-3",
                "update user-1/gpt-4"
            ]
        );
        let m3 = m(false, &[], &[]);
        let got = compute_diff(&m3, &ManagedSet::from_manifest(&m2));
        assert_eq!(
            render(&got),
            ["delete gpt-4", "delete mistral", "delete user-1/gpt-4"]
        );
    }

    #[test]
    fn an_entity_losing_one_resource_deletes_that_pair_only() {
        let prev = ManagedSet::from_manifest(&m(false, &[], &[("u", "a"), ("u", "b")]));
        let got = compute_diff(&m(false, &[], &[("u", "b")]), &prev);
        assert_eq!(render(&got), ["update u/b", "delete u/a"]);
    }

    use crate::store::item::from_pairs as item;

    #[test]
    fn api_bookkeeping_does_not_count_as_a_change() {
        let desired = item(&[
            ("PK", AttrValue::s("ns/ENTITY#u")),
            ("SK", AttrValue::s("#CONFIG#r")),
            ("l_rpm_cp", AttrValue::n(500)),
            ("GSI4PK", AttrValue::s("ns")),
        ]);
        let mut live = desired.clone();
        live.insert("config_version".into(), AttrValue::n(1));
        live.insert("GSI3PK".into(), AttrValue::s("ns/ENTITY_CONFIG#r"));
        live.insert("l_rpm_cp".into(), AttrValue::N("500.0".into()));
        assert!(same_content(&desired, &live));
        live.insert("l_rpm_cp".into(), AttrValue::n(600));
        assert!(!same_content(&desired, &live));
        live.insert("l_rpm_cp".into(), AttrValue::n(500));
        live.insert("cascade".into(), AttrValue::Bool(true));
        assert!(!same_content(&desired, &live));
    }

    #[test]
    fn a_quota_refill_period_is_inert_but_a_drip_period_is_not() {
        let quota = |rp: u32| {
            item(&[
                ("PK", AttrValue::s("p")),
                ("SK", AttrValue::s("s")),
                ("l_q_cp", AttrValue::n(10)),
                ("l_q_ra", AttrValue::n(0)),
                ("l_q_rp", AttrValue::n(rp)),
                ("l_q_rsched", AttrValue::s("1m0h0")),
            ])
        };
        assert!(same_content(&quota(60), &quota(1)));
        let drip = |rp: u32| {
            item(&[
                ("l_d_cp", AttrValue::n(10)),
                ("l_d_ra", AttrValue::n(10)),
                ("l_d_rp", AttrValue::n(rp)),
            ])
        };
        assert!(!same_content(&drip(60), &drip(1)));
    }

    #[test]
    fn numbers_normalise_to_one_text() {
        for (a, b) in [
            ("500", "500"),
            ("500.0", "500"),
            ("0500", "500"),
            ("5e2", "500"),
            ("1.50", "1.5"),
            ("-0", "0"),
            ("0.000", "0"),
            ("1.5E-3", "0.0015"),
            ("+7", "7"),
            ("abc", "abc"),
        ] {
            assert_eq!(normalise_number(a), b, "{a}");
        }
    }
}
