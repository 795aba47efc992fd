//! Config levels and declared changes: the vocabulary plan, diff and apply share.

use std::fmt;

use crate::items::{config, keys};
use crate::manifest::Manifest;
use crate::plan::prepare::BuildError;
use crate::store::{Item, Key};

/// A config level. Resource sorts before entity, as the reference runs them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LevelKind {
    System,
    Resource,
    Entity,
}

impl LevelKind {
    pub fn as_str(self) -> &'static str {
        match self {
            LevelKind::System => "system",
            LevelKind::Resource => "resource",
            LevelKind::Entity => "entity",
        }
    }
}

/// One config item: the system level, a resource level or an (entity, resource) pair.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Level {
    System,
    Resource(String),
    /// (entity id, resource name or `_default_`)
    Entity(String, String),
}

impl Level {
    pub fn kind(&self) -> LevelKind {
        match self {
            Level::System => LevelKind::System,
            Level::Resource(_) => LevelKind::Resource,
            Level::Entity(..) => LevelKind::Entity,
        }
    }

    /// `""` for system, the resource name, or `entity/resource` (the reference's target).
    pub fn target(&self) -> String {
        match self {
            Level::System => String::new(),
            Level::Resource(r) => r.clone(),
            Level::Entity(e, r) => format!("{e}/{r}"),
        }
    }

    /// Where the level stands in a manifest (`entities.u-1.resources.gpt-4`).
    pub fn manifest_path(&self) -> String {
        match self {
            Level::System => "system".to_string(),
            Level::Resource(r) => format!("resources.{r}"),
            Level::Entity(e, r) => format!("entities.{e}.resources.{r}"),
        }
    }

    /// The key of the level's config item in namespace `ns`.
    pub fn key(&self, ns: &str) -> Key {
        match self {
            Level::System => keys::system_config_key(ns),
            Level::Resource(r) => keys::resource_config_key(ns, r),
            Level::Entity(e, r) => keys::entity_config_key(ns, e, r),
        }
    }

    /// The config item `limits apply` writes for this level of `m` in
    /// namespace `ns` (the item codec); a level `m` does not declare is an error.
    pub fn build(&self, ns: &str, m: &Manifest) -> Result<Item, BuildError> {
        let missing = || BuildError::NotDeclared(self.target());
        let built = match self {
            Level::System => config::build_system(ns, m.system.as_ref().ok_or_else(missing)?),
            Level::Resource(r) => {
                config::build_resource(ns, r, m.resources.get(r).ok_or_else(missing)?)
            }
            Level::Entity(e, r) => config::build_entity(
                ns,
                e,
                r,
                m.entities
                    .get(e)
                    .and_then(|rs| rs.get(r))
                    .ok_or_else(missing)?,
            ),
        };
        Ok(built?)
    }

    /// Rebuilds a level from a pending item's (level, target) pair. The entity
    /// target splits on the first `/` (entity ids cannot contain `/`).
    pub fn from_parts(level: &str, target: &str) -> Option<Level> {
        match level {
            "system" => Some(Level::System),
            "resource" if !target.is_empty() => Some(Level::Resource(target.to_string())),
            "entity" => {
                let (e, r) = target.split_once('/')?;
                Some(Level::Entity(e.to_string(), r.to_string()))
            }
            _ => None,
        }
    }
}

/// What apply does to a level. The label comes from the managed set only
/// (docs/storage.md, "The `#PROVISIONER` record").
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Action {
    Create,
    Update,
    Delete,
}

impl Action {
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Create => "create",
            Action::Update => "update",
            Action::Delete => "delete",
        }
    }

    /// The plan symbol: `+`, `~`, `-`.
    pub fn symbol(self) -> &'static str {
        match self {
            Action::Create => "+",
            Action::Update => "~",
            Action::Delete => "-",
        }
    }
}

/// One declared change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub action: Action,
    pub level: Level,
}

impl Change {
    pub fn new(action: Action, level: Level) -> Self {
        Change { action, level }
    }
}

impl fmt::Display for Change {
    /// The per-change error prefix, `{action} {level} {target}`, naming the
    /// level it was writing (the reference prints the system level's target
    /// as `None`; we name it as plan does).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let target = match &self.level {
            Level::System => "(system defaults)".to_string(),
            other => other.target(),
        };
        write!(
            f,
            "{} {} {}",
            self.action.as_str(),
            self.level.kind().as_str(),
            target
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_follow_the_table_layout() {
        assert_eq!(Level::System.key("ns"), Key::new("ns/SYSTEM#", "#CONFIG"));
        assert_eq!(
            Level::Resource("gpt-4".into()).key("ns"),
            Key::new("ns/RESOURCE#gpt-4", "#CONFIG")
        );
        assert_eq!(
            Level::Entity("u1".into(), "_default_".into()).key("ns"),
            Key::new("ns/ENTITY#u1", "#CONFIG#_default_")
        );
    }

    #[test]
    fn targets_round_trip_through_pending_parts() {
        for level in [
            Level::System,
            Level::Resource("a/b".into()),
            Level::Entity("u1".into(), "r/x".into()),
        ] {
            let back = Level::from_parts(level.kind().as_str(), &level.target());
            assert_eq!(back, Some(level));
        }
        assert_eq!(Level::from_parts("entity", "nodelimiter"), None);
        assert_eq!(Level::from_parts("bogus", "x"), None);
    }

    #[test]
    fn change_error_prefix_names_the_level() {
        assert_eq!(
            Change::new(Action::Create, Level::System).to_string(),
            "create system (system defaults)"
        );
        assert_eq!(
            Change::new(Action::Delete, Level::Entity("u".into(), "r".into())).to_string(),
            "delete entity u/r"
        );
    }
}
