//! The levels limits resolve from, in the reference's order (docs/storage.md, "Resolution"):
//! entity + resource, entity `_default_`, resource, system. Shared by the
//! bucket fan-out (over stored items) and `limits simulate` (over a manifest).

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
}
