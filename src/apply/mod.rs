//! `limits apply`: carries out a plan ([`crate::plan`]) — the config writes and
//! their registries ([`writes`], with the entity-count journal [`counts`]),
//! the bucket fan-outs ([`fanout`], owed ahead as [`pending`] items), and the
//! `#PROVISIONER` record with the level digests at the end. [`run::apply`]
//! runs those steps in order.

/// How long an apply holds what it claims (its shares of pending fan-outs,
/// its entity-count journal): the reference's 900 s Lambda budget plus 60 s.
pub const LEASE_MS: i64 = 960_000;

/// Why an apply stopped before it wrote any config item (a refused gate, a
/// refused plan, or the store failed first). Failures after that are reported
/// per change in [`run::Applied::errors`].
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    #[error("{0}")]
    Gate(#[from] gate::GateError),
    #[error("{0}")]
    Plan(#[from] crate::plan::prepare::PrepareError),
    #[error("{0}")]
    Store(#[from] crate::store::StoreError),
    #[error("clearing the recorded level digests: {0}")]
    ClearDigests(crate::store::StoreError),
    /// Step 4a: the record is no longer the one planned against.
    #[error("{0}")]
    Changed(#[from] conflict::Changed),
    /// A saved plan made against another record.
    #[error("{0}")]
    Stale(#[from] crate::plan::saved::Stale),
    /// [`run::ApplyRequest::stop`] said stop (a signal, a lost lock) before
    /// any config write.
    #[error("{why}: {}", .before.stopped_before())]
    Stopped { why: String, before: run::Step },
    /// The store failed at a named step before any config write.
    #[error("{what}: {source}")]
    At {
        what: String,
        source: crate::store::StoreError,
    },
}

impl ApplyError {
    /// The store failed while `what` (before any config write).
    pub fn at(what: impl Into<String>) -> impl FnOnce(crate::store::StoreError) -> ApplyError {
        let what = what.into();
        move |source| ApplyError::At { what, source }
    }
}

/// A fresh apply token: 32 hex digits from the OS's random source (should it
/// fail, two draws of [`crate::random::jitter`]'s fallback stand in).
pub fn new_token() -> String {
    let buf = crate::random::bytes::<16>().unwrap_or_else(|_| {
        let (a, b) = (
            crate::random::jitter(u64::MAX),
            crate::random::jitter(u64::MAX),
        );
        let mut buf = [0u8; 16];
        buf[..8].copy_from_slice(&a.to_le_bytes());
        buf[8..].copy_from_slice(&b.to_le_bytes());
        buf
    });
    buf.iter().map(|b| format!("{b:02x}")).collect()
}

pub mod conflict;
pub mod counts;
#[cfg(test)]
mod dump_tests;
pub mod fanout;
pub mod fault;
pub mod gate;
pub mod lock;
pub mod pending;
pub mod record;
pub mod run;
pub mod writes;
