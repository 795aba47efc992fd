//! `table create`: a table the Python zae-limiter 0.17 library accepts — the
//! DynamoDB layout of docs/storage.md ("Table and indexes") (or a local store table), the version
//! record and the `default` namespace, as `Repository.open` leaves a new table.

use crate::cli::args::{StoreArgs, TableCommand};
use crate::cli::CliError;
use crate::items::version::{self, Initialized};
use crate::store::local::LocalStore;
use crate::store::open::Target;
use crate::store::Store;

pub fn run(cmd: TableCommand) -> Result<i32, CliError> {
    match cmd {
        TableCommand::Create { table } => create(&table.name, &table.store),
    }
}

/// A table name that cannot also be a CloudFormation stack name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid table name '{0}': use a letter followed by letters, digits or '-', 3 to 55 characters (it is also the CloudFormation stack name, and DynamoDB wants at least 3)")]
pub struct StackNameError(String);

/// The reference's stack-name rule (the table name is the stack name), and
/// DynamoDB's minimum of 3 characters, which the stack rule alone lets by.
pub fn validate_name(name: &str) -> Result<(), StackNameError> {
    let mut chars = name.chars();
    let starts_with_letter = chars.next().is_some_and(|c| c.is_ascii_alphabetic());
    if !starts_with_letter
        || !chars.all(|c| c.is_ascii_alphanumeric() || c == '-')
        || !(3..=55).contains(&name.len())
    {
        return Err(StackNameError(name.to_string()));
    }
    Ok(())
}

fn create(name: &str, args: &StoreArgs) -> Result<i32, CliError> {
    validate_name(name).map_err(|e| CliError::Usage(e.to_string()))?;
    let mut lines = vec![];
    let init = match args.target() {
        Target::Local(path) => {
            let store = LocalStore::open(&path, name)?;
            let created = store.create_table()?;
            lines.push(format!(
                "table '{name}' {} in local store {}",
                if created { "created" } else { "already exists" },
                path.display()
            ));
            initialize(&store)?
        }
        #[cfg(feature = "dynamodb")]
        Target::DynamoDb {
            region,
            endpoint_url,
        } => create_dynamodb(name, region.as_deref(), endpoint_url.as_deref(), &mut lines)?,
        #[cfg(not(feature = "dynamodb"))]
        Target::DynamoDb { .. } => return Err(crate::store::open::no_dynamodb().into()),
    };
    lines.push(if init.version_created {
        format!(
            "version record written (schema {})",
            version::SCHEMA_VERSION
        )
    } else {
        "version record already present".to_string()
    });
    lines.push(format!(
        "namespace '{}' {}: {}",
        version::DEFAULT_NAMESPACE,
        if init.default_namespace.created {
            "registered"
        } else {
            "already registered"
        },
        init.default_namespace.id
    ));
    crate::cli::output::println(lines.join("\n"))?;
    Ok(crate::exit_codes::OK)
}

fn initialize(store: &dyn Store) -> Result<Initialized, CliError> {
    Ok(version::ensure_initialized(store)?)
}

#[cfg(feature = "dynamodb")]
fn create_dynamodb(
    name: &str,
    region: Option<&str>,
    endpoint_url: Option<&str>,
    lines: &mut Vec<String>,
) -> Result<Initialized, CliError> {
    use crate::store::dynamodb::schema::Created;
    use crate::store::dynamodb::DynamoStore;

    let store = DynamoStore::connect(name, region, endpoint_url)?;
    let created = store.create_table()?;
    match created {
        Created::Created => lines.push(format!(
            "table '{name}' created in {} (PK/SK, GSI1-GSI4, LSI1-LSI5, stream NEW_AND_OLD_IMAGES, TTL on ttl)",
            store.region()
        )),
        Created::AlreadyExisted => {
            lines.push(format!(
                "table '{name}' already exists in {}; TTL on ttl ensured",
                store.region()
            ));
            // A stack-managed table: say what CloudFormation reports about it.
            if let Ok(Some(stack)) = store.stack_info() {
                lines.push(format!("stack '{name}': {}", stack.status));
                for (k, v) in &stack.outputs {
                    lines.push(format!("  {k} = {v}"));
                }
            }
        }
    }
    initialize(&store)
}

#[cfg(test)]
mod tests {
    use super::validate_name;

    #[test]
    fn names_follow_the_stack_rule() {
        for ok in ["zae-limiter", "abc", "Dev-2", &"a".repeat(55)] {
            assert!(validate_name(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "a",
            "ab",
            "1abc",
            "a_b",
            "a.b",
            "a b",
            "-a",
            &"a".repeat(56),
        ] {
            assert!(validate_name(bad).is_err(), "{bad}");
        }
    }
}
