//! The validated, normalised manifest (docs/manifest.md, "Normalised form"): every default
//! filled in, every value checked. Maps keep the manifest's order (`IndexMap`),
//! which is what the reference iterates in; consumers that need sorted order sort.

use indexmap::IndexMap;
pub use zae_limiter_engine::rolling::RollingWindow;

/// A whole validated manifest.
#[derive(Debug, Clone, PartialEq)]
pub struct Manifest {
    /// Namespace *name* (not the opaque id).
    pub namespace: String,
    /// `Some` when the manifest declares `system:` (even `{}`): the level is managed.
    pub system: Option<SystemLevel>,
    /// Resource defaults by resource name.
    pub resources: IndexMap<String, LevelConfig>,
    /// Entity id → resource name (or `_default_`) → config.
    pub entities: IndexMap<String, IndexMap<String, LevelConfig>>,
}

impl Manifest {
    /// A manifest of namespace `namespace` that declares nothing yet.
    pub fn new(namespace: &str) -> Manifest {
        Manifest {
            namespace: namespace.to_string(),
            system: None,
            resources: IndexMap::new(),
            entities: IndexMap::new(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct SystemLevel {
    pub limits: IndexMap<String, LimitSpec>,
    pub on_unavailable: Option<OnUnavailable>,
}

/// A resource level or an (entity, resource) level.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct LevelConfig {
    pub limits: IndexMap<String, LimitSpec>,
    /// `None` inherits.
    pub disabled: Option<Disabled>,
    /// `None` inherits.
    pub cascade: Option<bool>,
}

impl LevelConfig {
    /// A level with one limit and no flags.
    pub fn with_limit(name: &str, spec: LimitSpec) -> LevelConfig {
        let mut level = LevelConfig::default();
        level.limits.insert(name.to_string(), spec);
        level
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnUnavailable {
    Allow,
    Block,
}

impl OnUnavailable {
    pub fn as_str(self) -> &'static str {
        match self {
            OnUnavailable::Allow => "allow",
            OnUnavailable::Block => "block",
        }
    }
}

/// Tri-state `disabled` plus 0.17's `bypass`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Disabled {
    /// `disabled: true`
    Disabled,
    /// `disabled: false` — an explicit carve-out that enforces.
    Enforced,
    /// `disabled: bypass` — admit everything but count.
    Bypass,
}

/// One limit with defaults applied (`burst` already folded into `capacity`).
#[derive(Debug, Clone, PartialEq)]
pub struct LimitSpec {
    /// Whole tokens, 1..=10^15.
    pub capacity: u64,
    /// Whole tokens, 0..=10^15. 0 exactly when the limit resets.
    pub refill_amount: u64,
    /// Whole seconds, 1..=10^9.
    pub refill_period: u64,
    /// Parameter windows, first match wins.
    pub schedule: Vec<ScheduleEntry>,
    /// Calendar reset edges.
    pub reset_schedule: Vec<ResetEntry>,
    /// Session quota window in whole seconds, anchored to first use.
    pub reset_after_seconds: Option<u64>,
    pub soft: bool,
    /// What the limit counts. `capacity` is the amount for every kind: tokens for a
    /// bucket, the use allowed in any window-length span for a rolling window, the
    /// number of slots for a concurrency limit.
    pub kind: LimitKind,
}

/// The kind of a limit (issue #7). Python 0.17 knows only [`LimitKind::Bucket`];
/// the other kinds are stored under attribute names it ignores.
///
/// For [`LimitKind::Rolling`] and [`LimitKind::Concurrency`] the loader leaves
/// the bucket fields inert: `refill_amount` 0, `refill_period` 60, no
/// `schedule`, `reset_schedule` or `reset_after_seconds` (the manifest refuses
/// them there); `soft` applies to every kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LimitKind {
    /// A token bucket or a quota (calendar or session): the 0.17 model.
    #[default]
    Bucket,
    /// `window: minute|hour|day` + `rolling: true`: at most `capacity` in any
    /// span of the window.
    Rolling { window: RollingWindow },
    /// `concurrency: N`: at most N holds open at once (`capacity` = N).
    Concurrency { hold_ttl_seconds: u64 },
}

impl LimitSpec {
    /// A plain token bucket: no schedule, no reset, not soft. Callers that need
    /// more set the fields after.
    pub fn bucket(capacity: u64, refill_amount: u64, refill_period: u64) -> LimitSpec {
        LimitSpec {
            capacity,
            refill_amount,
            refill_period,
            schedule: Vec::new(),
            reset_schedule: Vec::new(),
            reset_after_seconds: None,
            soft: false,
            kind: LimitKind::Bucket,
        }
    }

    /// A quota resets (calendar or session) instead of dripping.
    pub fn resets(&self) -> bool {
        !self.reset_schedule.is_empty() || self.reset_after_seconds.is_some()
    }
}

/// A parameter window: active every minute `cron` matches in `tz`.
#[derive(Debug, Clone, PartialEq)]
pub struct ScheduleEntry {
    /// The cron text exactly as written (whitespace and case kept).
    pub cron: String,
    /// IANA zone name, `UTC` by default.
    pub tz: String,
    pub modifier: Modifier,
}

/// Exactly one of a scale or one or more absolute overrides.
#[derive(Debug, Clone, PartialEq)]
pub enum Modifier {
    /// The scale as written (finite, > 0, ≤ 10^6); stored quantised to per-mille.
    Scale(f64),
    Absolute {
        capacity: Option<u64>,
        refill_amount: Option<u64>,
        refill_period_seconds: Option<u64>,
    },
}

/// A calendar reset edge: the balance goes back to capacity when `cron` starts matching.
#[derive(Debug, Clone, PartialEq)]
pub struct ResetEntry {
    pub cron: String,
    pub tz: String,
}
