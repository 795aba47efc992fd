//! The raw view of config items that fan-out needs: each limit's stored
//! attributes (whole units, compact schedules copied verbatim) and the
//! `disabled`/`cascade` flags, plus the hierarchy walk of dynamodb.md §10.
//!
//! Fan-out never interprets schedules, so it reads attributes directly instead
//! of decoding them into the manifest model.

use std::collections::{BTreeMap, HashMap};

use crate::store::{AttrValue, Item, Key};

/// One limit as stored on a config item (whole tokens, whole seconds).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredLimit {
    pub cp: String,
    pub ra: String,
    pub rp: String,
    pub sched: Option<String>,
    pub rsched: Option<String>,
    /// `reset_after` seconds (the `w_` prefix).
    pub rsa: Option<String>,
    pub soft: bool,
}

/// A config item's limits and flags.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LevelConfig {
    pub limits: BTreeMap<String, StoredLimit>,
    pub sched_tz: Option<String>,
    pub disabled: Option<AttrValue>,
    pub cascade: Option<bool>,
}

pub use crate::items::source::Source;

/// Reads a config item. Like the reference, a limit under both prefixes or a
/// `w_` limit without `rsa` makes the whole item unreadable.
pub fn decode(item: &Item) -> Result<LevelConfig, String> {
    let mut limits = BTreeMap::new();
    for attr in item.keys() {
        let Some(rest) = attr.strip_suffix("_cp") else {
            continue;
        };
        let (prefix, name) = if let Some(n) = rest.strip_prefix("l_") {
            ("l_", n)
        } else if let Some(n) = rest.strip_prefix("w_") {
            ("w_", n)
        } else {
            continue;
        };
        if name.is_empty() {
            continue;
        }
        if limits.contains_key(name) {
            return Err(format!("limit '{name}' is stored under both l_ and w_"));
        }
        let num = |field: &str| -> Result<String, String> {
            match item.get(&format!("{prefix}{name}_{field}")) {
                None => Ok("0".into()),
                Some(AttrValue::N(n)) => Ok(n.clone()),
                Some(_) => Err(format!("{prefix}{name}_{field} is not a number")),
            }
        };
        let text = |field: &str| -> Result<Option<String>, String> {
            match item.get(&format!("{prefix}{name}_{field}")) {
                None => Ok(None),
                Some(AttrValue::S(s)) => Ok(Some(s.clone())),
                Some(_) => Err(format!("{prefix}{name}_{field} is not a string")),
            }
        };
        let rsa = match (prefix, item.get(&format!("w_{name}_rsa"))) {
            ("w_", Some(AttrValue::N(n))) => Some(n.clone()),
            ("w_", _) => return Err(format!("w_{name} has no numeric w_{name}_rsa")),
            _ => None,
        };
        let soft = matches!(
            item.get(&format!("{prefix}{name}_soft")),
            Some(AttrValue::Bool(true))
        );
        limits.insert(
            name.to_string(),
            StoredLimit {
                cp: num("cp")?,
                ra: num("ra")?,
                rp: num("rp")?,
                sched: text("sched")?,
                rsched: text("rsched")?,
                rsa,
                soft,
            },
        );
    }
    Ok(LevelConfig {
        limits,
        sched_tz: item
            .get("sched_tz")
            .and_then(AttrValue::as_s)
            .map(str::to_string),
        disabled: item.get("disabled").cloned(),
        cascade: item.get("cascade").and_then(AttrValue::as_bool),
    })
}

pub use crate::items::keys::{
    entity_config_key as entity_key, meta_key, resource_config_key as resource_key,
    system_config_key as system_key,
};

/// Config items fetched for a set of buckets; a missing item is `None`.
#[derive(Debug, Default)]
pub struct Levels {
    pub ns: String,
    items: HashMap<Key, Option<LevelConfig>>,
}

impl Levels {
    /// Builds the view from fetched items; an unreadable item is an error
    /// naming it (the reference refuses such a level too).
    pub fn new(ns: &str, fetched: Vec<(Key, Option<Item>)>) -> Result<Levels, String> {
        let mut items = HashMap::new();
        for (key, item) in fetched {
            let cfg = match item {
                Some(i) => Some(decode(&i).map_err(|e| {
                    format!("config item {} / {} is unreadable: {e}", key.pk, key.sk)
                })?),
                None => None,
            };
            items.insert(key, cfg);
        }
        Ok(Levels {
            ns: ns.to_string(),
            items,
        })
    }

    /// The keys resolution of (entity, resource) may read, system included.
    pub fn keys_for(ns: &str, e: &str, r: &str) -> Vec<Key> {
        vec![
            entity_key(ns, e, r),
            entity_key(ns, e, "_default_"),
            resource_key(ns, r),
            system_key(ns),
        ]
    }

    fn get(&self, key: &Key) -> Option<&LevelConfig> {
        self.items.get(key).and_then(Option::as_ref)
    }

    /// The first level along entity(r) → entity(`_default_`) → resource → system
    /// that defines at least one limit; its limits are used as a whole.
    pub fn resolve_limits(&self, e: &str, r: &str) -> Option<(Source, &LevelConfig)> {
        Source::order(r).find_map(|src| {
            self.get(&src.key(&self.ns, e, r))
                .filter(|c| !c.limits.is_empty())
                .map(|c| (src, c))
        })
    }

    /// The first explicit flag along entity(r) → entity(`_default_`) → resource.
    fn walk_flag<T>(
        &self,
        e: &str,
        r: &str,
        pick: impl Fn(&LevelConfig) -> Option<T>,
    ) -> Option<(Source, T)> {
        Source::order(r)
            .filter(|src| *src != Source::System)
            .find_map(|src| {
                self.get(&src.key(&self.ns, e, r))
                    .and_then(&pick)
                    .map(|v| (src, v))
            })
    }

    /// The effective `disabled` value and where it came from.
    pub fn resolve_disabled(&self, e: &str, r: &str) -> Option<(Source, AttrValue)> {
        self.walk_flag(e, r, |c| c.disabled.clone())
    }

    /// The explicit cascade policy, if any level sets one.
    pub fn resolve_cascade(&self, e: &str, r: &str) -> Option<(Source, bool)> {
        self.walk_flag(e, r, |c| c.cascade)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(attrs: &[(&str, AttrValue)]) -> Item {
        attrs
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect()
    }

    #[test]
    fn decodes_the_dump_entity_item() {
        let it = item(&[
            ("l_rpm_cp", AttrValue::n(60)),
            ("l_rpm_ra", AttrValue::n(60)),
            ("l_rpm_rp", AttrValue::n(60)),
            ("l_tpm_cp", AttrValue::n(20000)),
            ("l_tpm_soft", AttrValue::Bool(true)),
            ("w_session_cp", AttrValue::n(2000)),
            ("w_session_ra", AttrValue::n(0)),
            ("w_session_rp", AttrValue::n(1)),
            ("w_session_rsa", AttrValue::n(18000)),
            ("l_rpd_cp", AttrValue::n(10)),
            ("l_rpd_rsched", AttrValue::s("1m0h0")),
            ("sched_tz", AttrValue::s("UTC")),
            ("disabled", AttrValue::s("bypass")),
        ]);
        let c = decode(&it).unwrap();
        assert_eq!(c.limits.len(), 4);
        assert_eq!(c.limits["tpm"].ra, "0", "missing numbers read as 0");
        assert!(c.limits["tpm"].soft);
        assert_eq!(c.limits["session"].rsa.as_deref(), Some("18000"));
        assert_eq!(c.limits["rpd"].rsched.as_deref(), Some("1m0h0"));
        assert_eq!(c.sched_tz.as_deref(), Some("UTC"));
        assert_eq!(c.disabled, Some(AttrValue::s("bypass")));
    }

    #[test]
    fn corrupt_items_are_refused() {
        let both = item(&[
            ("l_x_cp", AttrValue::n(1)),
            ("w_x_cp", AttrValue::n(1)),
            ("w_x_rsa", AttrValue::n(1)),
        ]);
        assert!(decode(&both).unwrap_err().contains("both"));
        let no_rsa = item(&[("w_x_cp", AttrValue::n(1))]);
        assert!(decode(&no_rsa).unwrap_err().contains("rsa"));
    }

    #[test]
    fn resolution_takes_the_first_level_with_limits_and_flags_separately() {
        let ns = "ns";
        let lim = |n: i64| item(&[("l_rpm_cp", AttrValue::n(n))]);
        let mut stub = item(&[("disabled", AttrValue::Bool(true))]);
        stub.insert("cascade".into(), AttrValue::Bool(true));
        let lv = Levels::new(
            ns,
            vec![
                (entity_key(ns, "e", "r"), Some(stub)),
                (entity_key(ns, "e", "_default_"), None),
                (resource_key(ns, "r"), Some(lim(5))),
                (system_key(ns), Some(lim(9))),
            ],
        )
        .unwrap();
        let (src, cfg) = lv.resolve_limits("e", "r").unwrap();
        assert_eq!(src, Source::Resource, "a stub level is skipped for limits");
        assert_eq!(cfg.limits["rpm"].cp, "5");
        assert_eq!(
            lv.resolve_disabled("e", "r"),
            Some((Source::Entity, AttrValue::Bool(true)))
        );
        assert_eq!(lv.resolve_cascade("e", "r"), Some((Source::Entity, true)));
        assert_eq!(
            lv.resolve_limits("x", "other").map(|(s, _)| s),
            Some(Source::System)
        );
    }
}
