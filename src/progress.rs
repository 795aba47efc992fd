//! Progress of long work (reading levels, writing them, fanning out), told
//! to whoever shows it. The plan and apply layers report through this trait
//! and know nothing of terminals; the CLI draws a bar
//! ([`crate::cli::progress`]).

/// Receives progress. Every method does nothing by default.
pub trait Progress {
    /// A new phase begins, with `total` units of work (0: unknown).
    fn phase(&self, _name: &'static str, _total: u64) {}
    /// `n` more units of the current phase are done.
    fn advance(&self, _n: u64) {}
}

/// Shows nothing.
pub struct Silent;

impl Progress for Silent {}
