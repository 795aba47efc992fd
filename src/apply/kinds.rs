//! A limit keeps its kind (issue #7): a concurrency limit counts open holds,
//! every other limit counts use, and the two states have nothing in common.
//! `plan` and `apply` compare each declared level's item with the live one and
//! refuse, before anything is written, a limit that would change from one to
//! the other (the engine's [`check_kind_change`]). Bucket ↔ rolling is allowed:
//! both count use, and a rolling window starts from an empty state.

use std::collections::BTreeMap;

use zae_limiter_engine::concurrency::{check_kind_change, KindChangeError};

use crate::apply::detail::Detail;
use crate::apply::diff::normalise_number;
use crate::apply::level::Level;
use crate::items::config::{counted_kinds, CONCURRENCY_PREFIX, ROLLING_PREFIX};
use crate::store::{AttrValue, Item};

/// One limit that would change kind, on one level.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{level}: {refusal}")]
pub struct KindChange {
    /// e.g. `resource 'gpt-4'`, `entity 'user-1' on resource 'gpt-4'`, `system`.
    pub level: String,
    pub refusal: KindChangeError,
}

/// Every change of kind a plan contains; nothing is written when there is one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KindChanges(pub Vec<KindChange>);

impl std::fmt::Display for KindChanges {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, c) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{c}")?;
        }
        Ok(())
    }
}

impl std::error::Error for KindChanges {}

/// How a level reads in a refusal.
pub fn describe(level: &Level) -> String {
    match level {
        Level::System => "system".to_string(),
        Level::Resource(r) => format!("resource '{r}'"),
        Level::Entity(e, r) => format!("entity '{e}' on resource '{r}'"),
    }
}

/// The limits of `desired` that `live` holds as the other kind, by name.
pub fn check(level: &Level, live: Option<&Item>, desired: Option<&Item>) -> Vec<KindChange> {
    let (Some(live), Some(desired)) = (live, desired) else {
        return Vec::new();
    };
    let before = counted_kinds(live);
    let mut out = Vec::new();
    for (name, to) in counted_kinds(desired) {
        let Some(from) = before.get(&name) else {
            continue;
        };
        if let Err(refusal) = check_kind_change(&name, *from, to) {
            out.push(KindChange {
                level: describe(level),
                refusal,
            });
        }
    }
    out
}

/// The fields of a rolling window (`r_`) and a concurrency limit (`c_`), as
/// (attribute tag, what the manifest calls it), in display order.
const KIND_FIELDS: [(&str, &[(&str, &str)]); 2] = [
    (
        ROLLING_PREFIX,
        &[("amt", "capacity"), ("win", "window"), ("soft", "soft")],
    ),
    (
        CONCURRENCY_PREFIX,
        &[
            ("slots", "concurrency"),
            ("ttl", "hold_ttl_seconds"),
            ("soft", "soft"),
        ],
    ),
];

/// Limit name → (prefix, field → value) for the new kinds on an item.
fn kind_views(item: &Item) -> BTreeMap<String, (&'static str, BTreeMap<&'static str, String>)> {
    let mut out: BTreeMap<String, (&'static str, BTreeMap<&'static str, String>)> = BTreeMap::new();
    for (prefix, fields) in KIND_FIELDS {
        let first = fields[0].0;
        for attr in item.keys() {
            let Some(name) = attr
                .strip_prefix(prefix)
                .and_then(|b| b.strip_suffix(&format!("_{first}")[..]))
            else {
                continue;
            };
            let mut view = BTreeMap::new();
            for (tag, label) in fields.iter() {
                let value = match item.get(&format!("{prefix}{name}_{tag}")) {
                    Some(AttrValue::N(n)) => normalise_number(n),
                    Some(AttrValue::S(s)) => s.clone(),
                    Some(AttrValue::Bool(b)) => b.to_string(),
                    Some(other) => format!("{other:?}"),
                    None if *tag == "soft" => "false".to_string(),
                    None => "(none)".to_string(),
                };
                view.insert(*label, value);
            }
            out.insert(name.to_string(), (prefix, view));
        }
    }
    out
}

fn summary(prefix: &str, view: &BTreeMap<&'static str, String>) -> String {
    let fields = KIND_FIELDS
        .iter()
        .find(|(p, _)| *p == prefix)
        .map(|(_, f)| *f)
        .unwrap_or(&[]);
    let mut parts: Vec<String> = fields
        .iter()
        .filter(|(tag, _)| *tag != "soft")
        .filter_map(|(_, label)| view.get(label).map(|v| format!("{label} {v}")))
        .collect();
    if view.get("soft").map(String::as_str) == Some("true") {
        parts.push("soft".into());
    }
    parts.join(", ")
}

/// Plan detail for the rolling windows and concurrency limits of a level
/// (`rpd + capacity 1000, window day`, `jobs.hold_ttl_seconds: 300 → 60`);
/// token buckets and flags are [`crate::apply::detail::details`]' job.
pub fn details(live: Option<&Item>, desired: Option<&Item>) -> Vec<Detail> {
    let empty = Item::new();
    let old = kind_views(live.unwrap_or(&empty));
    let new = kind_views(desired.unwrap_or(&empty));
    let mut names: Vec<&String> = old.keys().chain(new.keys()).collect();
    names.sort();
    names.dedup();
    let mut out = Vec::new();
    for name in names {
        match (old.get(name), new.get(name)) {
            (None, Some((p, n))) => out.push(Detail {
                op: "+",
                path: name.clone(),
                old: None,
                new: Some(summary(p, n)),
            }),
            (Some((p, o)), None) => out.push(Detail {
                op: "-",
                path: name.clone(),
                old: Some(summary(p, o)),
                new: None,
            }),
            (Some((po, o)), Some((pn, n))) if po == pn => {
                for (label, b) in n {
                    let a = o.get(label).cloned().unwrap_or_else(|| "(none)".into());
                    if &a != b {
                        out.push(Detail {
                            op: "~",
                            path: format!("{name}.{label}"),
                            old: Some(a),
                            new: Some(b.clone()),
                        });
                    }
                }
            }
            (Some((po, o)), Some((pn, n))) => {
                out.push(Detail {
                    op: "-",
                    path: name.clone(),
                    old: Some(summary(po, o)),
                    new: None,
                });
                out.push(Detail {
                    op: "+",
                    path: name.clone(),
                    old: None,
                    new: Some(summary(pn, n)),
                });
            }
            (None, None) => {}
        }
    }
    out
}

/// Adds `kinds` to the details of a level: limits stay sorted by name (a
/// limit's own lines keep their order), the level's flags stay last.
pub fn merge_details(all: &mut Vec<Detail>, kinds: Vec<Detail>) {
    if kinds.is_empty() {
        return;
    }
    let is_flag = |d: &Detail| matches!(d.path.as_str(), "disabled" | "cascade" | "on_unavailable");
    let flags: Vec<Detail> = all.iter().filter(|d| is_flag(d)).cloned().collect();
    all.retain(|d| !is_flag(d));
    all.extend(kinds);
    let limit = |d: &Detail| d.path.split('.').next().unwrap_or_default().to_string();
    all.sort_by_key(limit);
    all.extend(flags);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::AttrValue;

    fn item(attrs: &[(&str, u64)]) -> Item {
        attrs
            .iter()
            .map(|(k, v)| (k.to_string(), AttrValue::n(*v)))
            .collect()
    }

    #[test]
    fn counting_use_and_counting_holds_do_not_mix() {
        let bucket = item(&[("l_x_cp", 5), ("l_x_ra", 5), ("l_x_rp", 60)]);
        let session = item(&[("w_x_cp", 5), ("w_x_ra", 0), ("w_x_rsa", 60)]);
        let rolling = item(&[("r_x_amt", 5)]);
        let slots = item(&[("c_x_slots", 3), ("c_x_ttl", 300)]);
        let level = Level::Entity("u".into(), "gpt-4".into());
        for (from, to, refused) in [
            (&bucket, &rolling, false),
            (&rolling, &bucket, false),
            (&session, &rolling, false),
            (&slots, &slots, false),
            (&bucket, &slots, true),
            (&session, &slots, true),
            (&slots, &rolling, true),
            (&rolling, &slots, true),
        ] {
            let got = check(&level, Some(from), Some(to));
            assert_eq!(got.len(), usize::from(refused), "{from:?} -> {to:?}");
        }
        let got = check(&level, Some(&bucket), Some(&slots));
        assert_eq!(
            got[0].to_string(),
            "entity 'u' on resource 'gpt-4': limit 'x' cannot change from a limit that counts use to a concurrent limit (one counts use, the other open holds): create a new limit instead"
        );
    }

    #[test]
    fn new_removed_and_absent_levels_are_not_changes_of_kind() {
        let bucket = item(&[("l_x_cp", 5)]);
        let other = item(&[("c_y_slots", 3)]);
        let level = Level::System;
        assert!(check(&level, Some(&bucket), Some(&other)).is_empty());
        assert!(check(&level, None, Some(&other)).is_empty());
        assert!(check(&level, Some(&other), None).is_empty());
    }

    #[test]
    fn every_refusal_is_listed() {
        let live = item(&[("l_a_cp", 5), ("c_b_slots", 2), ("l_c_cp", 1)]);
        let desired = item(&[("c_a_slots", 5), ("r_b_amt", 2), ("l_c_cp", 2)]);
        let got = KindChanges(check(
            &Level::Resource("gpt-4".into()),
            Some(&live),
            Some(&desired),
        ));
        assert_eq!(got.0.len(), 2);
        let text = got.to_string();
        assert!(text.starts_with("resource 'gpt-4': limit 'a' cannot change from a limit that counts use to a concurrent limit"), "{text}");
        assert!(text.contains("\nresource 'gpt-4': limit 'b' cannot change from a concurrent limit to a limit that counts use"), "{text}");
    }

    fn rendered(d: &[Detail]) -> Vec<String> {
        d.iter()
            .map(|d| format!("{} {}", d.op, d.render()))
            .collect()
    }

    #[test]
    fn plan_detail_names_the_fields_of_the_new_kinds() {
        let mut a = item(&[("r_rpd_amt", 10), ("c_jobs_slots", 3), ("c_jobs_ttl", 300)]);
        a.insert("r_rpd_win".into(), AttrValue::s("day"));
        let mut b = item(&[("r_rpd_amt", 10), ("c_jobs_slots", 4), ("c_jobs_ttl", 60)]);
        b.insert("r_rpd_win".into(), AttrValue::s("hour"));
        b.insert("r_rpd_soft".into(), AttrValue::Bool(true));
        assert_eq!(
            rendered(&details(Some(&a), Some(&b))),
            [
                "~ jobs.concurrency: 3 → 4",
                "~ jobs.hold_ttl_seconds: 300 → 60",
                "~ rpd.soft: false → true",
                "~ rpd.window: day → hour",
            ]
        );
        assert_eq!(
            rendered(&details(None, Some(&b))),
            [
                "+ jobs + concurrency 4, hold_ttl_seconds 60",
                "+ rpd + capacity 10, window hour, soft"
            ]
        );
        assert_eq!(
            rendered(&details(Some(&a), None)),
            [
                "- jobs - concurrency 3, hold_ttl_seconds 300",
                "- rpd - capacity 10, window day"
            ]
        );
        assert!(details(Some(&a), Some(&a)).is_empty());
    }

    #[test]
    fn merged_details_keep_limits_by_name_and_flags_last() {
        let line = |op: &'static str, path: &str| Detail {
            op,
            path: path.into(),
            old: Some("a".into()),
            new: Some("b".into()),
        };
        let mut all = vec![
            line("-", "b"),
            line("~", "c.capacity"),
            line("~", "cascade"),
        ];
        merge_details(&mut all, vec![line("+", "a"), line("+", "b")]);
        let paths: Vec<(&str, &str)> = all.iter().map(|d| (d.op, d.path.as_str())).collect();
        assert_eq!(
            paths,
            [
                ("+", "a"),
                ("-", "b"),
                ("+", "b"),
                ("~", "c.capacity"),
                ("~", "cascade")
            ]
        );
    }
}
