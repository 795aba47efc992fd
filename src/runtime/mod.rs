//! The runtime: rolling windows and concurrency limits enforced at run time,
//! across processes and hosts, through the store (`zae-limiter acquire`,
//! `zae-limiter reservation …`, and a Rust service calling these functions).
//!
//! The shape is the cooldown module's: the engine decides, one module does
//! the conditional writes, the command prints.
//!
//! * [`level`] — *resolve the level*: the four config items of (entity,
//!   resource), read in one batch and resolved by the one rule of
//!   [`crate::items::source::resolve`]. Config only, so a server may cache a
//!   [`ResolvedLevel`] for a while.
//! * [`decide`] — *decide*: pure functions of a level, the state, a request
//!   and `now` (the engine's [`zae_limiter_engine::rolling`] and
//!   [`zae_limiter_engine::concurrency`] state machines); no I/O.
//! * [`ops`] — the store loop: read the state item (strongly consistent),
//!   decide, write it back with one conditional put on the version read,
//!   retry on a lost race with the stores' jittered backoff. State is never
//!   cached.
//! * [`state`] — the state item: one per (entity, resource), holding every
//!   rolling window's counters and every open reservation of that pair.
//! * [`id`] — reservation ids, which name the state item they live in.
//! * [`answer`] — the answers as versioned JSON (snake_case for the CLI, the
//!   camelCase twin for HTTP).
//!
//! Every call takes `&dyn Store` and keeps nothing between calls, so a server
//! can run calls on blocking threads with one store handle each. The layout
//! of the state item and the semantics are in `docs/runtime.md`.
//!
//! # Example
//!
//! A worker that reserves before an export and commits its real size after
//! (the README shows the same code; a test keeps them equal):
//!
//! ```rust
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let dir = tempfile::tempdir()?;
//! # let tmp = dir.path().join("local.sqlite");
//! # {
//! #     use zae_limiter::{items, manifest, store::{Store, WriteOp}};
//! #     let store = zae_limiter::store::local::LocalStore::open(&tmp, "demo")?;
//! #     items::version::ensure_initialized(&store)?;
//! #     let ns = items::namespace::register(&store, "default")?.id;
//! #     let m = manifest::load_str("jobs.yaml", include_str!("../../fixtures/runtime/jobs.yaml"))
//! #         .map_err(|_| "invalid manifest")?
//! #         .manifest;
//! #     let item = items::config::build_resource(&ns, "exports", &m.resources["exports"])?;
//! #     store.write(WriteOp::Put { item, condition: None })?;
//! # }
//! use zae_limiter::runtime::{self, Mode, Request};
//! use zae_limiter::store::local::LocalStore; // or store::dynamodb::connect("my-table", None, None)?
//!
//! let path = std::path::Path::new(".zae-limiter/local.sqlite");
//! # let path = tmp.as_path();
//! let store = LocalStore::open(path, "demo")?;
//! let ns = runtime::namespace_id(&store, "default")?;
//! // Config only: a server may keep this for a while (state is never cached).
//! let level = runtime::resolve(&store, &ns, "nightly-report", "exports")?;
//! let now = || chrono::Utc::now().timestamp_millis();
//!
//! let mut request = Request::new(Mode::Reserve);
//! request.costs.insert("rows_per_hour".into(), 5_000); // the estimate
//! let decision = runtime::decide(&store, &ns, &level, &request, now())?;
//! if !decision.allowed {
//!     println!("refused; retry in {:?} ms", decision.retry_after_ms);
//!     return Ok(());
//! }
//! // ... the export runs; a long one heartbeats with runtime::extend ...
//! // (No reservation when on_unavailable let the call through unchecked.)
//! if let Some(reservation) = decision.reservation {
//!     let actual = [("rows_per_hour".to_string(), 4_200)].into();
//!     runtime::commit(&store, &ns, &reservation.id, &actual, now())?;
//! }
//! # Ok(())
//! # }
//! ```

pub mod answer;
pub mod decide;
pub mod id;
pub mod level;
pub mod ops;
pub mod state;

pub use decide::{Closure, Decision, Extended, LimitAnswer, Mode, Request};
pub use id::ReservationId;
pub use level::{OnUnavailable, ResolvedLevel};
pub use ops::{
    acquire, clear, commit, decide, extend, inspect, namespace_id, refusal_for, release, resolve,
    Cleared, Namespace,
};

use crate::items::config::CodecError;
use crate::items::keys::IdentifierError;
use crate::store::StoreError;

/// What a runtime call can fail with. [`RuntimeError::is_unavailable`] says
/// which failures the system level's `on_unavailable` answers.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error("{0}")]
    Store(#[from] StoreError),
    #[error("{0}")]
    Identifier(#[from] IdentifierError),
    #[error("namespace '{0}' is not registered; register it with `zae-limiter namespace register {0}` (or apply a manifest to it)")]
    NamespaceNotFound(String),
    /// The table may not be used by this client (no or a newer version record).
    #[error("{0}")]
    Table(#[from] crate::plan::version::Unusable),
    /// A config item the reference would refuse too: an operator must fix it.
    #[error("{0}")]
    Config(#[from] CodecError),
    #[error("no limits are defined for entity '{entity}' on resource '{resource}': the entity+resource, entity _default_, resource and system levels are all empty")]
    NoLimits { entity: String, resource: String },
    #[error("limit '{name}' is not a limit of the {level} level (its limits: {known}); check the --cost name")]
    UnknownCost {
        name: String,
        level: &'static str,
        known: String,
    },
    #[error("a cost of {cost} for '{name}' is above the largest amount a limit can have (10^15)")]
    CostTooLarge { name: String, cost: u64 },
    #[error("the {level} level of entity '{entity}' on resource '{resource}' has no concurrency limit, so there is no slot to reserve; use --mode consume")]
    NothingToReserve {
        entity: String,
        resource: String,
        level: &'static str,
    },
    #[error("{what} must be between 1 and 3600 seconds, got {seconds} s")]
    TtlOutOfRange { what: &'static str, seconds: i64 },
    #[error("holder {0:?}: expected a worker or job name of 1 to {max} bytes, no control characters", max = decide::MAX_HOLDER_BYTES)]
    BadHolder(String),
    #[error("{0}")]
    InvalidId(#[from] id::IdError),
    /// The reservation is not open: never made here, expired, or closed so
    /// long ago that it is no longer remembered.
    #[error("reservation {id} is not open in namespace '{namespace}': {why}")]
    NotOpen {
        id: String,
        namespace: String,
        why: String,
    },
    #[error("reservation {id} did not count limit '{name}' (it counted: {counted}); commit corrects only what the reservation counted")]
    NotCounted {
        id: String,
        name: String,
        counted: String,
    },
    /// The state item exists but cannot be read: never treated as empty.
    #[error("the runtime state {pk} / {sk} is unreadable: {reason}")]
    StateUnreadable {
        pk: String,
        sk: String,
        reason: String,
    },
    /// The state after this request would not fit in one stored item (too
    /// many open holds, or rolling windows with long names): the store
    /// refused the write ([`StoreError::ItemTooLarge`]), and so is the
    /// request, never admitted unchecked. Holds released or expired make
    /// room again.
    #[error("the runtime state of '{entity}' on '{resource}' would exceed the 400 KB one stored item may hold{}: refused, nothing was written. Too many open holds, or rolling windows with long names: release holds (or let them expire), or give the level fewer concurrency slots or rolling windows with shorter names", bytes.map(|b| format!(" ({b} bytes)")).unwrap_or_default())]
    StateTooLarge {
        entity: String,
        resource: String,
        bytes: Option<usize>,
    },
    /// Other writers kept winning; nothing was written by this call.
    #[error("the runtime state of '{entity}' on '{resource}' kept changing under {attempts} attempts; nothing was written, try again")]
    Contended {
        entity: String,
        resource: String,
        attempts: u32,
    },
    #[error("cannot draw random bytes for a reservation id: {0}")]
    Random(#[from] crate::random::RandomError),
}

impl RuntimeError {
    /// Whether the system level's `on_unavailable` answers this failure: the
    /// store could not be reached (or throttled past its retries) or the state
    /// item is unreadable. A missing table, missing permissions or a bad
    /// request are errors whatever the policy (they never heal by waiting,
    /// and `allow` would admit without limit).
    pub fn is_unavailable(&self) -> bool {
        match self {
            RuntimeError::Store(e) => {
                matches!(e, StoreError::Backend(_) | StoreError::Corrupt { .. })
            }
            RuntimeError::StateUnreadable { .. } => true,
            _ => false,
        }
    }
}
