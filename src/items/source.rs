//! The levels limits resolve from, in the reference's order (docs/storage.md, "Resolution"):
//! entity + resource, entity `_default_`, resource, system — and the one
//! resolution rule, [`resolve`], applied to manifest levels (`limits
//! simulate`) and to stored levels (the runtime's `acquire`). The bucket
//! fan-out walks the same [`Source::order`] over the bucket limits Python sees.

use super::keys::{self, DEFAULT_RESOURCE};
use crate::manifest::model::Disabled;
use crate::store::Key;

/// Where an (entity, resource)'s limits come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Entity,
    EntityDefault,
    Resource,
    System,
}

impl Source {
    /// The reference's words for the level.
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Entity => "entity",
            Source::EntityDefault => "entity_default",
            Source::Resource => "resource",
            Source::System => "system",
        }
    }

    /// Entity-level limits keep buckets alive; defaults give them a TTL.
    pub fn is_entity(self) -> bool {
        matches!(self, Source::Entity | Source::EntityDefault)
    }

    /// The levels (entity, `resource`) resolves from, first to last; the
    /// entity's `_default_` level is skipped when `resource` is `_default_`
    /// itself (it would be read twice).
    pub fn order(resource: &str) -> impl Iterator<Item = Source> {
        let own_default = resource == DEFAULT_RESOURCE;
        [
            Source::Entity,
            Source::EntityDefault,
            Source::Resource,
            Source::System,
        ]
        .into_iter()
        .filter(move |s| *s != Source::EntityDefault || !own_default)
    }

    /// The config item of this level for (entity, resource).
    pub fn key(self, ns: &str, entity: &str, resource: &str) -> Key {
        match self {
            Source::Entity => keys::entity_config_key(ns, entity, resource),
            Source::EntityDefault => keys::entity_config_key(ns, entity, DEFAULT_RESOURCE),
            Source::Resource => keys::resource_config_key(ns, resource),
            Source::System => keys::system_config_key(ns),
        }
    }
}

/// What one level offers to resolution.
pub trait Level {
    /// Whether it defines at least one limit, of any kind (a rolling window or
    /// a concurrency limit counts: a level of those alone is a level here).
    fn has_limits(&self) -> bool;
    /// Its explicit `disabled` flag (`None` inherits).
    fn disabled(&self) -> Option<Disabled>;
}

/// The outcome of [`resolve`].
#[derive(Debug, Clone, PartialEq)]
pub struct Resolution<L> {
    /// The first level along [`Source::order`] that defines a limit, used as a
    /// whole (override, not merge).
    pub source: Source,
    pub level: L,
    /// The first explicit `disabled` along entity → entity default → resource
    /// (the system level has none), from any level, with limits or not.
    pub disabled: Option<(Source, Disabled)>,
}

/// Resolves (entity, `resource`) over the levels `at` returns (`None` for a
/// level that does not exist). `None` when no level defines a limit (the
/// reference's acquire then fails).
pub fn resolve<L: Level>(
    resource: &str,
    mut at: impl FnMut(Source) -> Option<L>,
) -> Option<Resolution<L>> {
    let mut found: Option<(Source, L)> = None;
    let mut disabled = None;
    for source in Source::order(resource) {
        let Some(level) = at(source) else { continue };
        if disabled.is_none() && source != Source::System {
            disabled = level.disabled().map(|d| (source, d));
        }
        if found.is_none() && level.has_limits() {
            found = Some((source, level));
        }
    }
    found.map(|(source, level)| Resolution {
        source,
        level,
        disabled,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    struct L(bool, Option<Disabled>);
    impl Level for &L {
        fn has_limits(&self) -> bool {
            self.0
        }
        fn disabled(&self) -> Option<Disabled> {
            self.1
        }
    }

    #[test]
    fn order_skips_the_default_level_for_the_default_resource() {
        let all: Vec<Source> = Source::order("gpt-4").collect();
        assert_eq!(
            all,
            [
                Source::Entity,
                Source::EntityDefault,
                Source::Resource,
                Source::System
            ]
        );
        assert!(!Source::order(DEFAULT_RESOURCE).any(|s| s == Source::EntityDefault));
        assert_eq!(
            Source::EntityDefault.key("ns", "u", "gpt-4"),
            Key::new("ns/ENTITY#u", "#CONFIG#_default_")
        );
    }

    #[test]
    fn first_level_with_limits_wins_and_flags_walk_separately() {
        let entity = L(false, Some(Disabled::Bypass));
        let resource = L(true, Some(Disabled::Disabled));
        let system = L(true, None);
        let r = resolve("gpt-4", |s| match s {
            Source::Entity => Some(&entity),
            Source::Resource => Some(&resource),
            Source::System => Some(&system),
            Source::EntityDefault => None,
        })
        .unwrap();
        assert_eq!(r.source, Source::Resource);
        assert_eq!(r.disabled, Some((Source::Entity, Disabled::Bypass)));
        let empty = L(false, None);
        assert!(resolve("gpt-4", |_| Some(&empty)).is_none());
    }
}
