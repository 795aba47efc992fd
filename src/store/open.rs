//! Opening a store: a [`Target`] (the embedded local store file, or DynamoDB
//! with its region and endpoint) and a table name. The command line builds the
//! target from its flags (`--local`, `--local=PATH`, `--region`,
//! `--endpoint-url`; see `cli::args::StoreArgs`); the store knows nothing of
//! the command line.

use std::path::{Path, PathBuf};

use super::local::{Checkpoints, LocalStore};
use super::{Store, StoreError};

/// Environment variable naming the local store file; setting it selects the local store.
pub const LOCAL_STORE_ENV: &str = "ZAEL_LOCAL_STORE";
/// Where `--local` without a path puts the store, relative to the working directory.
pub const DEFAULT_LOCAL_PATH: &str = ".zae-limiter/local.sqlite";

/// Which backend a command will talk to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    Local(PathBuf),
    DynamoDb {
        region: Option<String>,
        endpoint_url: Option<String>,
    },
}

/// Where a local store's path came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LocalFrom {
    /// A path given with the request (`--local=PATH`).
    Given,
    /// [`LOCAL_STORE_ENV`].
    Env,
    /// [`DEFAULT_LOCAL_PATH`].
    Default,
}

/// The local store `local` and the environment select (as [`Target::resolve`]
/// reads `local`), and where its path came from; `None` for DynamoDB.
pub fn local_store(local: Option<&Path>) -> Option<(PathBuf, LocalFrom)> {
    let env_path = std::env::var_os(LOCAL_STORE_ENV).filter(|v| !v.is_empty());
    match (local, env_path) {
        (Some(p), _) if !p.as_os_str().is_empty() => Some((p.to_path_buf(), LocalFrom::Given)),
        (_, Some(p)) => Some((PathBuf::from(p), LocalFrom::Env)),
        (Some(_), None) => Some((PathBuf::from(DEFAULT_LOCAL_PATH), LocalFrom::Default)),
        (None, None) => None,
    }
}

impl Target {
    /// The backend chosen by what was asked for and the environment (what was
    /// asked for wins). `local`: `None` when the local store was not asked
    /// for, an empty path for "the local store at its usual place"
    /// (`$ZAEL_LOCAL_STORE`, else [`DEFAULT_LOCAL_PATH`]), else its file.
    /// Without `local`, `ZAEL_LOCAL_STORE` still selects the local store.
    pub fn resolve(
        local: Option<&Path>,
        region: Option<&str>,
        endpoint_url: Option<&str>,
    ) -> Target {
        match local_store(local) {
            Some((path, _)) => Target::Local(path),
            None => Target::DynamoDb {
                region: region.map(str::to_string),
                endpoint_url: endpoint_url.map(str::to_string),
            },
        }
    }

    /// Whether this is the embedded local store.
    pub fn is_local(&self) -> bool {
        matches!(self, Target::Local(_))
    }
}

/// Opens the store for a command that only reads: the local store file is
/// opened read-only (a store in a read-only directory can be read; nothing is
/// created). Only the DynamoDB branch builds an AWS client.
pub fn open_read_only(target: &Target, table: &str) -> Result<Box<dyn Store>, StoreError> {
    super::check_table_name(table)?;
    match target {
        Target::Local(path) => Ok(Box::new(super::local::LocalStore::open_read_only(
            path, table,
        )?)),
        Target::DynamoDb {
            region,
            endpoint_url,
        } => open_dynamodb(table, region.as_deref(), endpoint_url.as_deref()),
    }
}

/// Like [`open_read_only`], for `limits plan` and `diff`: `None` when the local
/// store has no such table yet (its file may not even exist), which a plan
/// reads as empty because an apply would create it. A missing DynamoDB table
/// stays an error: apply does not create one (`table create` does).
pub fn open_for_plan(target: &Target, table: &str) -> Result<Option<Box<dyn Store>>, StoreError> {
    super::check_table_name(table)?;
    match target {
        Target::Local(path) => {
            let store = super::local::LocalStore::open_read_only(path, table)?;
            Ok(store
                .table_exists()?
                .then(|| Box::new(store) as Box<dyn Store>))
        }
        Target::DynamoDb {
            region,
            endpoint_url,
        } => open_dynamodb(table, region.as_deref(), endpoint_url.as_deref()).map(Some),
    }
}

/// Opens the store for `table` (a name DynamoDB would accept, on both
/// stores). Only the DynamoDB branch builds an AWS client.
pub fn open(target: &Target, table: &str) -> Result<Box<dyn Store>, StoreError> {
    open_with(target, table, Checkpoints::OnCommit)
}

/// [`open`] for a long-running server: its local store leaves the
/// checkpoints to the caller ([`Checkpoints::Deferred`]; the caller runs
/// [`LocalStore::checkpoint`] on a store of its own, off the request path).
pub fn open_for_server(target: &Target, table: &str) -> Result<Box<dyn Store>, StoreError> {
    open_with(target, table, Checkpoints::Deferred)
}

fn open_with(
    target: &Target,
    table: &str,
    checkpoints: Checkpoints,
) -> Result<Box<dyn Store>, StoreError> {
    super::check_table_name(table)?;
    match target {
        Target::Local(path) => Ok(super::stats::wrap(Box::new(LocalStore::open_with(
            path,
            table,
            checkpoints,
        )?))),
        Target::DynamoDb {
            region,
            endpoint_url,
        } => open_dynamodb(table, region.as_deref(), endpoint_url.as_deref()),
    }
}

#[cfg(feature = "dynamodb")]
fn open_dynamodb(
    table: &str,
    region: Option<&str>,
    endpoint_url: Option<&str>,
) -> Result<Box<dyn Store>, StoreError> {
    super::dynamodb::connect(table, region, endpoint_url)
}

#[cfg(not(feature = "dynamodb"))]
fn open_dynamodb(
    _table: &str,
    _region: Option<&str>,
    _endpoint_url: Option<&str>,
) -> Result<Box<dyn Store>, StoreError> {
    Err(no_dynamodb())
}

/// What a build without the `dynamodb` feature answers when DynamoDB is asked for.
#[cfg(not(feature = "dynamodb"))]
pub fn no_dynamodb() -> StoreError {
    StoreError::Backend(
        "this build has no DynamoDB support (built without the `dynamodb` feature); use --local or --local=PATH".into(),
    )
}
