//! Bucket fan-out after a config write (spec manifest-cli.md §3.4): push the new
//! limits and flags into existing bucket items so running limiters enforce them.
//!
//! CONTRACT between apply (which decides what is owed, writes pending items
//! ahead and releases them) and this module (which performs one owed fan-out).

use crate::store::Store;

/// Kinds in execution order: `disabled`, `cascade`, `soft`, `sync`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FanOutKind {
    Disabled,
    Cascade,
    Soft,
    Sync,
}

impl FanOutKind {
    /// The name used in pending-item keys: `disabled`, `cascade`, `soft`, `sync`.
    pub fn as_str(self) -> &'static str {
        match self {
            FanOutKind::Disabled => "disabled",
            FanOutKind::Cascade => "cascade",
            FanOutKind::Soft => "soft",
            FanOutKind::Sync => "sync",
        }
    }
}

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

/// One owed fan-out. `target` is "" for system, the resource name, or `entity/resource`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Owed {
    pub kind: FanOutKind,
    pub level: LevelKind,
    pub target: String,
}

/// Performs one owed fan-out against the buckets that exist now, reading the
/// level's live config item. `Err` is the one-line reason, reported by apply as
/// `… (retried on the next apply)`.
pub fn run(store: &dyn Store, ns_id: &str, owed: &Owed, now_ms: i64) -> Result<(), String> {
    // Being implemented (issue #8): until then nothing is pushed into buckets.
    let _ = (store, ns_id, owed, now_ms);
    Ok(())
}
