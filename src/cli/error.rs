//! The one place where failures become text and an exit code.
//!
//! Library layers return their own typed errors (manifest diagnostics, store,
//! items, plan, apply, runtime, cooldown and engine errors); the `From` impls
//! below turn each into a [`CliError`], so commands use `?` and add context
//! only where a message needs it, and [`CliError::report`] renders it once as
//! `Error: …` on stderr.

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

/// A bad `ZAEL_NOW` or instant flag is a usage error (exit 2).
impl From<crate::clock::InstantError> for CliError {
    fn from(e: crate::clock::InstantError) -> Self {
        CliError::Usage(e.to_string())
    }
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

/// Errors that are already one-line explanations of a refusal or failure:
/// exit 1 with their own message.
macro_rules! failed_from {
    ($($error:ty),* $(,)?) => {$(
        impl From<$error> for CliError {
            fn from(e: $error) -> Self {
                CliError::Failed(e.to_string())
            }
        }
    )*};
}

failed_from!(
    crate::store::StoreError,
    crate::items::keys::IdentifierError,
    crate::items::namespace::NamespaceError,
    crate::items::config::CodecError,
    crate::plan::version::Unusable,
    crate::plan::prepare::PrepareError,
    crate::apply::ApplyError,
    crate::runtime::RuntimeError,
    crate::runtime::id::IdError,
    crate::cooldown::CooldownError,
    crate::cooldown::ScopeError,
    crate::export::ExportError,
    crate::explain::ExplainError,
    crate::simulate::counters::BuildError,
    crate::simulate::chart::ChartError,
    zae_limiter_engine::encoding::EncodeError,
    zae_limiter_engine::encoding::DecodeError,
);
