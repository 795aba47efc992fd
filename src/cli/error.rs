//! The one place where failures become text and an exit code.
//!
//! Library layers return their own typed errors (manifest diagnostics, store
//! errors, engine errors); commands convert them into a [`CliError`], and
//! `main` renders it once as `Error: …` on stderr.

use crate::exit_codes;

#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// The command line was well-formed for clap but still unusable.
    #[error("{0}")]
    Usage(String),
    /// The command was understood but could not be carried out.
    #[error("{0}")]
    Failed(String),
    /// The command exists in the tree but its implementation has not landed.
    #[error("`zae-limiter {command}` is not implemented yet ({tracking}); nothing was done")]
    NotYet {
        command: &'static str,
        tracking: &'static str,
    },
    /// Errors already printed in full by the command (e.g. diagnostics); only the exit code remains.
    #[error("")]
    Reported(i32),
}

impl CliError {
    pub fn exit_code(&self) -> i32 {
        match self {
            CliError::Usage(_) | CliError::NotYet { .. } => exit_codes::USAGE,
            CliError::Failed(_) => exit_codes::FAILURE,
            CliError::Reported(code) => *code,
        }
    }

    /// Whether `main` still has something to print.
    pub fn has_message(&self) -> bool {
        !matches!(self, CliError::Reported(_))
    }

    /// Renders the error once (`Error: …` on stderr, unless the command
    /// already printed it) and returns the exit code.
    pub fn report(self) -> i32 {
        if self.has_message() {
            super::output::eprintln(format!("Error: {self}"));
        }
        self.exit_code()
    }
}

impl From<crate::store::StoreError> for CliError {
    /// Store errors are already one-line explanations.
    fn from(e: crate::store::StoreError) -> Self {
        CliError::Failed(e.to_string())
    }
}

impl From<crate::plan::prepare::PrepareError> for CliError {
    /// Both are one-line (per refusal) explanations: exit 1, like other refusals.
    fn from(e: crate::plan::prepare::PrepareError) -> Self {
        match e {
            crate::plan::prepare::PrepareError::Store(e) => e.into(),
            crate::plan::prepare::PrepareError::KindChange(e) => CliError::Failed(e.to_string()),
        }
    }
}
