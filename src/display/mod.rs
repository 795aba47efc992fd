//! Human-readable renderings of stored data, kept apart from the commands so
//! tests can check the exact text without a store.

pub mod limits;
pub mod numbers;
