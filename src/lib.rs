//! zae-limiter-rs: the command-line tool as a library, so integration tests and
//! generators (man pages, JSON Schema) share the exact definitions the binary uses.
//!
//! Data flows one way: file → parsed manifest (with spans) → validated model →
//! desired items → diff against stored items → writes.

pub mod apply;
pub mod cli;
pub mod clock;
pub mod commands;
pub mod cooldown;
pub mod display;
pub mod exit_codes;
pub mod explain;
pub mod export;
pub mod input;
pub mod items;
#[cfg(test)]
mod layers;
pub mod manifest;
pub mod plan;
pub mod progress;
pub mod random;
pub mod runtime;
pub mod serve;
pub mod simulate;
pub mod store;
