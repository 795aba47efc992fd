//! Which of a manifest's limits apply to one (entity, resource): the one
//! resolution rule of [`crate::items::source::resolve`] (entity + resource,
//! entity `_default_`, resource, system — the first level that defines at
//! least one limit of any kind, used as a whole; `disabled` walked separately
//! over the first three levels), applied to the validated manifest, so a
//! simulation needs no store. The runtime applies the same rule to stored
//! levels.

use indexmap::IndexMap;

use crate::items::source::{self, Level};
use crate::manifest::model::{Disabled, LevelConfig, LimitSpec, Manifest};
use crate::manifest::names::DEFAULT_RESOURCE;

pub use crate::items::source::Source;

impl Source {
    /// Where in the manifest that level is written, for messages.
    pub fn manifest_path(self, entity: &str, resource: &str) -> String {
        match self {
            Source::Entity => format!("entities.{entity}.resources.{resource}"),
            Source::EntityDefault => format!("entities.{entity}.resources.{DEFAULT_RESOURCE}"),
            Source::Resource => format!("resources.{resource}"),
            Source::System => "system".to_string(),
        }
    }
}

/// The limits in force for one (entity, resource).
#[derive(Debug, Clone, PartialEq)]
pub struct Resolved<'m> {
    pub source: Source,
    pub limits: &'m IndexMap<String, LimitSpec>,
    /// The first explicit `disabled` along entity → entity default → resource.
    pub disabled: Option<(Source, Disabled)>,
}

/// One manifest level as resolution sees it.
struct ManifestLevel<'m> {
    limits: &'m IndexMap<String, LimitSpec>,
    disabled: Option<Disabled>,
}

impl Level for ManifestLevel<'_> {
    fn has_limits(&self) -> bool {
        !self.limits.is_empty()
    }
    fn disabled(&self) -> Option<Disabled> {
        self.disabled
    }
}

/// `None` when no level defines a limit (the reference's acquire then fails).
pub fn resolve<'m>(m: &'m Manifest, entity: &str, resource: &str) -> Option<Resolved<'m>> {
    let of = |l: &'m LevelConfig| ManifestLevel {
        limits: &l.limits,
        disabled: l.disabled,
    };
    let entity_level = |r: &str| m.entities.get(entity).and_then(|e| e.get(r)).map(of);
    let r = source::resolve(resource, |src| match src {
        Source::Entity => entity_level(resource),
        Source::EntityDefault => entity_level(DEFAULT_RESOURCE),
        Source::Resource => m.resources.get(resource).map(of),
        Source::System => m.system.as_ref().map(|s| ManifestLevel {
            limits: &s.limits,
            disabled: None,
        }),
    })?;
    Some(Resolved {
        source: r.source,
        limits: r.level.limits,
        disabled: r.disabled,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::load_str;

    const MANIFEST: &str = "\
namespace: default
system:
  limits:
    rpm: {capacity: 1000}
resources:
  gpt-4:
    disabled: bypass
    limits:
      rpm: {capacity: 500}
      tpm: {capacity: 90000}
  claude:
    disabled: false
entities:
  user-1:
    resources:
      _default_:
        limits:
          rph: {capacity: 3000, refill_amount: 3000, refill_period: 3600}
      gpt-4:
        disabled: true
        limits:
          rpm: {capacity: 60}
  user-2:
    resources:
      claude:
        disabled: true
";

    fn manifest() -> Manifest {
        load_str("m.yaml", MANIFEST).unwrap().manifest
    }

    fn names<'a>(r: &Resolved<'a>) -> Vec<&'a str> {
        r.limits.keys().map(String::as_str).collect()
    }

    #[test]
    fn the_reference_walk() {
        let m = manifest();
        let at = |e, r| resolve(&m, e, r).unwrap();
        // The four sources of docs/storage.md, "Resolution".
        let r = at("user-1", "gpt-4");
        assert_eq!((r.source, names(&r)), (Source::Entity, vec!["rpm"]));
        assert_eq!(r.disabled, Some((Source::Entity, Disabled::Disabled)));
        let r = at("user-1", "claude");
        assert_eq!((r.source, names(&r)), (Source::EntityDefault, vec!["rph"]));
        assert_eq!(r.disabled, Some((Source::Resource, Disabled::Enforced)));
        let r = at("user-2", "gpt-4");
        assert_eq!(
            (r.source, names(&r)),
            (Source::Resource, vec!["rpm", "tpm"])
        );
        assert_eq!(r.disabled, Some((Source::Resource, Disabled::Bypass)));
        // A level with flags only is skipped for limits but not for `disabled`.
        let r = at("user-2", "claude");
        assert_eq!((r.source, names(&r)), (Source::System, vec!["rpm"]));
        assert_eq!(r.disabled, Some((Source::Entity, Disabled::Disabled)));
        let r = at("nobody", "other");
        assert_eq!((r.source, r.disabled), (Source::System, None));
    }

    #[test]
    fn nothing_defined_is_none() {
        let m = load_str(
            "m.yaml",
            "namespace: default\nresources:\n  gpt-4:\n    limits:\n      rpm: {capacity: 5}\n",
        )
        .unwrap()
        .manifest;
        assert!(resolve(&m, "u", "claude").is_none());
        assert_eq!(
            resolve(&m, "u", "gpt-4").map(|r| r.source),
            Some(Source::Resource)
        );
        assert_eq!(
            Source::EntityDefault.manifest_path("u", "gpt-4"),
            "entities.u.resources._default_"
        );
    }
}
