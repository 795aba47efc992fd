//! Durable provider cooldowns: a not-before deadline per exhausted quota
//! (scope), stored in the limits table so every worker sharing the quota —
//! in any process, on any host — consults it before calling.
//!
//! The engine ([`zae_limiter_engine::cooldown`]) decides deadlines; this module
//! keeps them in a [`Store`](crate::store::Store) with conditional writes, so it
//! works unchanged on the local store and on DynamoDB.
//!
//! # Item layout
//!
//! One item per scope, in the namespace's id space (`{ns}` = opaque namespace
//! id from the `_/SYSTEM#` registry):
//!
//! | attribute | type | meaning |
//! |---|---|---|
//! | `PK` | S | `{ns}/COOLDOWN#{scope}` |
//! | `SK` | S | `#STATE` |
//! | `GSI4PK` / `GSI4SK` | S | `{ns}` / the PK (how `list` finds them; a namespace purge removes them) |
//! | `kind` | S | `cooldown` |
//! | `scope` | S | the scope as given |
//! | `state` | S | `cooling` (timed) or `needs_operator` (auth rejection, implausible reset) |
//! | `not_before` | N | epoch ms: no call before this instant |
//! | `reason` | S | the last refusal in words |
//! | `backoff_attempt` | N | consecutive refusals without a usable reset (next backoff step) |
//! | `received_at` | N | epoch ms the last recorded response was received |
//! | `updated_at` | N | epoch ms of the last write |
//! | `version` | N | incremented by every write; the condition of the next one; a new item starts at a random value below 2^53 ([`crate::store::first_version`]: no ABA after a clear or a settle) |
//! | `probe_holder` / `probe_expires` | S / N | the recovery-probe lease, when held |
//!
//! The Python library never reads `COOLDOWN#` keys (it reads entities,
//! resources, system config, buckets, audit and the registry), so these items
//! are invisible to it.
//!
//! # Writes
//!
//! Every change reads the item (strongly consistent), computes the new state,
//! and writes it conditioned on the version it read (`attribute_not_exists(PK)`
//! for a new scope). A failed condition means another worker wrote first: the
//! change is recomputed from the fresh state and retried, so concurrent
//! recorders keep the latest deadline and exactly one prober wins a lease.

pub mod answer;
pub mod dump;
pub mod evidence;
pub mod headers;
pub mod ops;
pub mod response;
pub mod scope;
pub mod state;

pub use ops::{Cooldowns, ProbeResult, Refusal, SettleResult, Settlement};
pub use scope::{Scope, ScopeError};
pub use state::{CooldownState, Lease, Phase, Verdict};

use crate::store::StoreError;
use zae_limiter_engine::cooldown::HintError;

/// What a cooldown operation can fail with.
#[derive(Debug, thiserror::Error)]
pub enum CooldownError {
    #[error("{0}")]
    Store(#[from] StoreError),
    #[error("{0}")]
    Scope(#[from] ScopeError),
    #[error("{0}")]
    Hint(#[from] HintError),
    #[error("cannot draw random bytes for a new cooldown's version: {0}")]
    Random(#[from] crate::random::RandomError),
    /// The stored item exists but cannot be read: never treated as "no cooldown".
    /// The command that clears it is the CLI's to name (with the table's
    /// flags); `serve` has its own remedy (`DELETE`).
    #[error("the cooldown state of '{scope}' is unreadable ({pk} / {sk}): {reason}; an operator must inspect it, then clear it")]
    Corrupt {
        scope: String,
        pk: String,
        sk: String,
        reason: String,
    },
    /// Other writers kept changing the state; nothing was written by this call.
    #[error("the cooldown state of '{scope}' kept changing under {attempts} attempts; nothing was written, try again")]
    Contended { scope: String, attempts: u32 },
    /// `settle` by a worker that does not hold the probe.
    #[error(
        "'{holder}' does not hold the recovery probe of '{scope}' ({held}); nothing was changed"
    )]
    NotHolder {
        scope: String,
        holder: String,
        held: String,
    },
}
