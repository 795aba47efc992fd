//! `limits plan` / `diff`, and the first half of `apply`: reads what the table
//! holds and compares it with what the manifest declares, writing nothing.
//! The declared changes come from the managed set in the `#PROVISIONER` record
//! ([`managed`], [`diff`]); each level's desired item is read against the live
//! one ([`prepare`]), with attribute-level [`detail`], the kind-change refusal
//! ([`kinds`]), the `--no-refresh` digests ([`digests`]) and the version gates
//! ([`version`]). [`crate::apply`] carries a plan out.

pub mod detail;
pub mod diff;
pub mod digests;
pub mod discover;
pub mod identity;
pub mod kinds;
pub mod level;
pub mod managed;
pub mod output;
pub mod prepare;
pub mod saved;
pub mod version;
