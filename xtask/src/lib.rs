//! Generators for committed files (see `main.rs`).

pub mod man;
pub mod schema;
