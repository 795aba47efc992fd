//! Limits manifests: YAML with positions → typed, validated model → normalised form.
//!
//! `model` is the contract with the rest of the tool: plan/apply, the item codec
//! and `cfn-template` consume only [`model::Manifest`], never YAML.
//!
//! CONTRACT (implemented by the manifest loader):
//! `pub fn load_file(path: &Path) -> Result<Loaded, Vec<Diagnostic>>` — reads,
//! parses and validates one file; `Err` holds every error (and warning) found.
//! `pub fn render_text(diags: &[Diagnostic]) -> String` — `file:line:col`, the
//! snippet with a caret, the message and the help, as `limits validate` prints them.
//! `check_file` is `load_file` plus the lints (`lint`), what `limits validate` runs.

pub mod diagnostic;
pub mod model;

mod block_scan;
mod convert;
pub mod emit;
mod entries;
mod fields;
mod kinds;
pub mod lint;
mod load;
pub mod names;
pub mod normalize;
pub mod render;
mod report;
pub mod schema;
pub mod suggest;
mod values;
pub mod yaml;

pub use convert::DEFAULT_REFILL_PERIOD;
pub use diagnostic::{Diagnostic, Severity};
pub use kinds::MAX_SLOTS;
pub use load::{check_file, check_str, label, load_file, load_str, STDIN_PATH};
pub use model::Manifest;
pub use normalize::{applied_hash, normalised_json};
pub use render::render_text;
pub use values::{MAX_PERIOD_SECONDS, MAX_SCALE, MAX_TOKENS};

/// A manifest that passed validation, with any warnings found on the way.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub manifest: Manifest,
    pub warnings: Vec<Diagnostic>,
}
