//! Command-line layer: argument definitions, help, output and the one place
//! errors become text and an exit code. It knows every library layer (to
//! convert their errors) and none of the commands: dispatch is
//! [`crate::commands::run`], which depends on this module, never the reverse.

pub mod args;
pub mod completions;
pub mod error;
pub mod help;
pub mod interrupt;
pub mod output;
pub mod progress;
pub mod shell;

pub use args::{command, Cli, Command};
pub use error::CliError;
