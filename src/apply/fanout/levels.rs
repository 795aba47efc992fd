//! The levels a bucket's limits and flags resolve from, read with the item
//! codec ([`decode_level`]) and walked in the reference's order (see
//! [`Source`] and docs/storage.md, "Resolution").

use std::collections::HashMap;

use crate::items::config::{decode_level, CodecError, StoredLevel};
use crate::manifest::model::Disabled;
use crate::store::{Item, Key};

pub use crate::items::source::Source;

pub use crate::items::keys::{
    entity_config_key as entity_key, meta_key, resource_config_key as resource_key,
    system_config_key as system_key,
};

/// Config items fetched for a set of buckets; a missing item is `None`.
#[derive(Debug, Default)]
pub struct Levels {
    pub ns: String,
    items: HashMap<Key, Option<StoredLevel>>,
}

impl Levels {
    /// Builds the view from fetched items, each as zae-limiter 0.17 reads it:
    /// its token buckets and quotas (rolling windows and concurrency limits
    /// never reach a bucket, and a level holding only those defines no limits
    /// for one). An unreadable item is an error naming it (the reference
    /// refuses such a level too).
    pub fn new(ns: &str, fetched: Vec<(Key, Option<Item>)>) -> Result<Levels, CodecError> {
        let mut items = HashMap::new();
        for (key, item) in fetched {
            let level = match item {
                Some(i) => {
                    let mut level = decode_level(&i)?;
                    let buckets = level.buckets().cloned().collect();
                    level.limits = buckets;
                    Some(level)
                }
                None => None,
            };
            items.insert(key, level);
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

    fn get(&self, key: &Key) -> Option<&StoredLevel> {
        self.items.get(key).and_then(Option::as_ref)
    }

    /// The first level along entity(r) → entity(`_default_`) → resource → system
    /// that defines at least one limit; its limits are used as a whole.
    pub fn resolve_limits(&self, e: &str, r: &str) -> Option<(Source, &StoredLevel)> {
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
        pick: impl Fn(&StoredLevel) -> Option<T>,
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
    pub fn resolve_disabled(&self, e: &str, r: &str) -> Option<(Source, Disabled)> {
        self.walk_flag(e, r, |c| c.disabled)
    }

    /// The explicit cascade policy, if any level sets one.
    pub fn resolve_cascade(&self, e: &str, r: &str) -> Option<(Source, bool)> {
        self.walk_flag(e, r, |c| c.cascade)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::AttrValue;

    use crate::store::item::from_pairs as item;

    #[test]
    fn resolution_takes_the_first_level_with_limits_and_flags_separately() {
        let ns = "ns";
        let lim = |n: i64| {
            item(&[
                ("l_rpm_cp", AttrValue::n(n)),
                ("l_rpm_ra", AttrValue::n(n)),
                ("l_rpm_rp", AttrValue::n(60)),
            ])
        };
        let mut stub = item(&[("disabled", AttrValue::Bool(true))]);
        stub.insert("cascade".into(), AttrValue::Bool(true));
        // A level holding only kinds 0.17 does not read defines no limits for a bucket.
        let rolling = item(&[
            ("r_rpd_amt", AttrValue::n(5)),
            ("r_rpd_win", AttrValue::s("day")),
        ]);
        let lv = Levels::new(
            ns,
            vec![
                (entity_key(ns, "e", "r"), Some(stub)),
                (entity_key(ns, "e", "_default_"), Some(rolling)),
                (resource_key(ns, "r"), Some(lim(5))),
                (system_key(ns), Some(lim(9))),
            ],
        )
        .unwrap();
        let (src, cfg) = lv.resolve_limits("e", "r").unwrap();
        assert_eq!(src, Source::Resource, "a stub level is skipped for limits");
        assert_eq!(cfg.limits[0].capacity, 5);
        assert_eq!(
            lv.resolve_disabled("e", "r"),
            Some((Source::Entity, Disabled::Disabled))
        );
        assert_eq!(lv.resolve_cascade("e", "r"), Some((Source::Entity, true)));
        assert_eq!(
            lv.resolve_limits("x", "other").map(|(s, _)| s),
            Some(Source::System)
        );
    }

    #[test]
    fn an_unreadable_level_names_itself() {
        let key = entity_key("ns", "e", "r");
        let mut both = item(&[
            ("l_x_cp", AttrValue::n(1)),
            ("w_x_cp", AttrValue::n(1)),
            ("w_x_rsa", AttrValue::n(1)),
        ]);
        both.insert("PK".into(), AttrValue::s(&key.pk));
        both.insert("SK".into(), AttrValue::s(&key.sk));
        let err = Levels::new("ns", vec![(key, Some(both))]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "config item ns/ENTITY#e / #CONFIG#r is unreadable: limit 'x' is stored under both l_ and w_"
        );
    }
}
