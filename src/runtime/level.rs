//! Resolving the level of (entity, resource): the four config items in the
//! Python client's order, read in one batch and decoded by the config codec
//! ([`crate::items::config::decode_level`]), then the one resolution rule of
//! [`crate::items::source::resolve`]: the first level that defines a limit of
//! any kind, as a whole. A level holding only rolling windows or concurrency
//! limits is a level here, while Python 0.17 falls through it for its buckets.
//!
//! This reads config only. A server may keep a [`ResolvedLevel`] for a while
//! (a limit changed by `limits apply` is then enforced after that while);
//! the CLI resolves on every call, so the next acquire after an apply uses
//! the new numbers.

use crate::items::config::{decode_level, StoredLevel, StoredLimit};
use crate::items::keys;
use crate::items::source::{self, Level, Source};
use crate::manifest::model::{Disabled, LimitKind};
use crate::store::{Item, Key, Store};

use super::RuntimeError;

pub use crate::manifest::model::OnUnavailable;

/// The answer when the store cannot be read or the state is unreadable and the
/// system level says nothing (or could not be read): block, as the
/// reference's limiter does.
pub const DEFAULT_ON_UNAVAILABLE: OnUnavailable = OnUnavailable::Block;

/// The stored `on_unavailable`; anything but `allow` blocks (the reference
/// only understands `allow` and `block`, and blocking is the safe reading).
fn on_unavailable(stored: Option<&str>) -> OnUnavailable {
    match stored {
        Some("allow") => OnUnavailable::Allow,
        _ => DEFAULT_ON_UNAVAILABLE,
    }
}

/// The limits in force for one (entity, resource), from config alone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedLevel {
    pub entity: String,
    pub resource: String,
    /// Which level the limits come from.
    pub source: Source,
    /// That level's config item as decoded: every limit of it, of every kind,
    /// sorted by name, and its own flags (what `entity get-limits` shows).
    pub config: StoredLevel,
    /// The first explicit `disabled` along entity → entity default → resource.
    pub disabled: Option<(Source, Disabled)>,
    pub on_unavailable: OnUnavailable,
}

impl ResolvedLevel {
    /// Every limit of the level, of every kind, sorted by name.
    pub fn limits(&self) -> &[StoredLimit] {
        &self.config.limits
    }

    /// Whether any limit is enforced here (a rolling window or a concurrency limit).
    pub fn enforces_anything(&self) -> bool {
        self.limits()
            .iter()
            .any(|l| !matches!(l.kind, LimitKind::Bucket))
    }

    /// The limit called `name`.
    pub fn limit(&self, name: &str) -> Option<&StoredLimit> {
        self.limits().iter().find(|l| l.name == name)
    }

    /// The names of the level's limits, for messages.
    pub fn names(&self) -> String {
        let names: Vec<&str> = self.limits().iter().map(|l| l.name.as_str()).collect();
        names.join(", ")
    }
}

impl Level for &StoredLevel {
    fn has_limits(&self) -> bool {
        !self.limits.is_empty()
    }
    fn disabled(&self) -> Option<Disabled> {
        self.disabled
    }
}

/// The config keys of (entity, resource), in resolution order.
pub fn config_keys(ns: &str, entity: &str, resource: &str) -> Vec<(Source, Key)> {
    Source::order(resource)
        .map(|s| (s, s.key(ns, entity, resource)))
        .collect()
}

/// Checks the entity id and resource name before they become keys.
pub fn validate(entity: &str, resource: &str) -> Result<(), RuntimeError> {
    keys::validate_entity_id(entity)?;
    keys::validate_resource_name(resource)?;
    Ok(())
}

/// Resolves from items already read (one per [`config_keys`] entry, in order).
pub fn from_items(
    entity: &str,
    resource: &str,
    levels: &[(Source, Key)],
    items: &[Option<Item>],
) -> Result<ResolvedLevel, RuntimeError> {
    let mut decoded: Vec<(Source, StoredLevel)> = Vec::with_capacity(levels.len());
    for ((source, _), item) in levels.iter().zip(items) {
        if let Some(item) = item {
            decoded.push((*source, decode_level(item)?));
        }
    }
    let at = |s: Source| decoded.iter().find(|(d, _)| *d == s).map(|(_, l)| l);
    let on_unavailable =
        on_unavailable(at(Source::System).and_then(|l| l.on_unavailable.as_deref()));
    let r = source::resolve(resource, at).ok_or_else(|| RuntimeError::NoLimits {
        entity: entity.to_string(),
        resource: resource.to_string(),
    })?;
    Ok(ResolvedLevel {
        entity: entity.to_string(),
        resource: resource.to_string(),
        source: r.source,
        config: r.level.clone(),
        disabled: r.disabled,
        on_unavailable,
    })
}

/// Reads the four config items in one batch (eventually consistent, as the
/// reference's resolution does) and resolves the level.
pub fn resolve(
    store: &dyn Store,
    ns: &str,
    entity: &str,
    resource: &str,
) -> Result<ResolvedLevel, RuntimeError> {
    validate(entity, resource)?;
    let levels = config_keys(ns, entity, resource);
    let keys: Vec<Key> = levels.iter().map(|(_, k)| k.clone()).collect();
    let items = store.batch_get(&keys, false)?;
    from_items(entity, resource, &levels, &items)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::items::config::{build_entity, build_resource, build_system};
    use crate::manifest::load_str;

    const MANIFEST: &str = "\
namespace: default
system:
  on_unavailable: allow
  limits:
    rpm: {capacity: 1000}
resources:
  gpt-4:
    disabled: bypass
    limits:
      rpm: {capacity: 500}
entities:
  user-1:
    resources:
      gpt-4:
        limits:
          burst: {capacity: 30, window: minute, rolling: true}
          jobs: {concurrency: 3}
      _default_:
        disabled: true
";

    /// The manifest's items, as `limits apply` writes them.
    fn items() -> Vec<(Key, Item)> {
        let m = load_str("m.yaml", MANIFEST).unwrap().manifest;
        let mut out = vec![];
        let sys = build_system("ns", m.system.as_ref().unwrap()).unwrap();
        out.push((Key::of(&sys).unwrap(), sys));
        for (r, l) in &m.resources {
            let i = build_resource("ns", r, l).unwrap();
            out.push((Key::of(&i).unwrap(), i));
        }
        for (e, levels) in &m.entities {
            for (r, l) in levels {
                let i = build_entity("ns", e, r, l).unwrap();
                out.push((Key::of(&i).unwrap(), i));
            }
        }
        out
    }

    fn resolve_in(entity: &str, resource: &str) -> Result<ResolvedLevel, RuntimeError> {
        let stored = items();
        let levels = config_keys("ns", entity, resource);
        let found: Vec<Option<Item>> = levels
            .iter()
            .map(|(_, k)| stored.iter().find(|(s, _)| s == k).map(|(_, i)| i.clone()))
            .collect();
        from_items(entity, resource, &levels, &found)
    }

    #[test]
    fn a_level_of_new_kinds_only_is_a_level_here() {
        let r = resolve_in("user-1", "gpt-4").unwrap();
        assert_eq!(r.source, Source::Entity);
        assert_eq!(r.names(), "burst, jobs");
        assert!(r.enforces_anything());
        // The flags walk on past the level with limits.
        assert_eq!(
            r.disabled,
            Some((Source::EntityDefault, Disabled::Disabled))
        );
        assert_eq!(r.on_unavailable, OnUnavailable::Allow);
        let r = resolve_in("user-2", "gpt-4").unwrap();
        assert_eq!((r.source, r.names().as_str()), (Source::Resource, "rpm"));
        assert!(!r.enforces_anything());
        assert_eq!(r.disabled, Some((Source::Resource, Disabled::Bypass)));
        let r = resolve_in("user-2", "claude").unwrap();
        assert_eq!(r.source, Source::System);
        assert_eq!(r.disabled, None);
    }

    #[test]
    fn nothing_defined_is_an_error_and_unreadable_config_is_not_empty() {
        let levels = config_keys("ns", "u", "r");
        let none = vec![None; levels.len()];
        assert!(matches!(
            from_items("u", "r", &levels, &none),
            Err(RuntimeError::NoLimits { .. })
        ));
        let mut bad = items()[0].1.clone();
        bad.insert("sched_tz".into(), crate::store::AttrValue::s("Mars/Base"));
        let mut found = none;
        found[3] = Some(bad);
        let e = from_items("u", "r", &levels, &found).unwrap_err();
        assert!(matches!(e, RuntimeError::Config(_)), "{e}");
        assert!(!e.is_unavailable());
        assert!(validate("bad#id", "gpt-4").is_err());
        assert!(validate("u", "_default_").is_err());
    }

    #[test]
    fn on_unavailable_blocks_unless_it_says_allow() {
        assert_eq!(on_unavailable(None), OnUnavailable::Block);
        assert_eq!(on_unavailable(Some("allow")), OnUnavailable::Allow);
        assert_eq!(on_unavailable(Some("ALLOW")), OnUnavailable::Block);
    }
}
