//! The one place where failures become text and an exit code.
//!
//! Library layers return their own typed errors (manifest diagnostics, store,
//! items, plan, apply, runtime, cooldown and engine errors); the `From` impls
//! below turn each into a [`CliError`], so commands use `?` and add context
//! only where a message needs it, and [`CliError::report`] renders it once as
//! `Error: …` on stderr.

use super::args::table_flags;
use super::shell::quote;
use crate::exit_codes;
use crate::plan::version::Unusable;
use crate::store::open::Target;
use crate::store::{Missing, StoreError};

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

    /// `e` as a failure, in the words `words` puts its message in (given
    /// with its [`advice`]): the one way a command adds context to an error
    /// without losing what to do about it.
    pub fn failed(
        e: &(dyn std::error::Error + 'static),
        words: impl FnOnce(String) -> String,
    ) -> CliError {
        CliError::Failed(words(with_advice(e)))
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
/// exit 1 with their own message (and [`advice`]).
macro_rules! failed_from {
    ($($error:ty),* $(,)?) => {$(
        impl From<$error> for CliError {
            fn from(e: $error) -> Self {
                CliError::Failed(with_advice(&e))
            }
        }
    )*};
}

/// `e`'s message and the [`advice`] for it.
pub fn with_advice(e: &(dyn std::error::Error + 'static)) -> String {
    format!("{e}{}", advice(e))
}

/// What to do about a failure, when a command can fix it: found in `e` or
/// the errors it wraps (each layer's error names the one it wraps as its
/// source). Lower layers state the facts; the command lines are the CLI's.
pub fn advice(e: &(dyn std::error::Error + 'static)) -> String {
    let mut next = Some(e);
    while let Some(e) = next {
        if let Some(StoreError::TableNotFound { table, where_ }) = e.downcast_ref() {
            return missing_table(table, where_);
        }
        if let Some(Unusable::NoRecord { table, target }) = e.downcast_ref() {
            return no_version_record(table, target.as_ref());
        }
        next = e.source();
    }
    String::new()
}

/// A table without the version record: `table create` writes it (and keeps
/// what the table holds), with the flags that reach the same store.
fn no_version_record(table: &str, target: Option<&Target>) -> String {
    format!(
        ". Run {} first: it writes the record and keeps the table's items",
        create_command(table, target)
    )
}

/// `table create` of `table` in `target`, where the store said it lives.
fn create_command(table: &str, target: Option<&Target>) -> String {
    match target {
        Some(target) => format!("`zae-limiter table create{}`", table_flags(table, target)),
        None => format!("`zae-limiter table create -n {}`", quote(table)),
    }
}

/// A missing table: the command that creates it, with the flags that reach
/// the same store (a missing local store file: the path to check).
fn missing_table(table: &str, missing: &Missing) -> String {
    let create = || create_command(table, Some(&missing.target()));
    // The Python library's CLI deploys the CloudFormation stack.
    let deploy = format!("`zae-limiter deploy -n {}`", quote(table));
    match missing {
        Missing::Local(_) => format!(". Create it with {}", create()),
        Missing::NoLocalFile(_) => ". Check the path; a command that writes (table create, limits apply) creates the file there".into(),
        Missing::DynamoDb { stack: None, .. } => format!(
            ". Create it with {} or deploy the stack with the Python CLI ({deploy})",
            create()
        ),
        Missing::DynamoDb { stack: Some(_), .. } => {
            format!(". Wait for the stack to finish, or redeploy it with {deploy}")
        }
    }
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
