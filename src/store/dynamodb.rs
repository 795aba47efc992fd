//! The DynamoDB store (aws-sdk-dynamodb). (Being implemented; see issue #8.)

use super::{Store, StoreError};

/// Connects to `table` through the standard AWS configuration chain.
pub fn connect(
    table: &str,
    _region: Option<&str>,
    _endpoint_url: Option<&str>,
) -> Result<Box<dyn Store>, StoreError> {
    Err(StoreError::Backend(format!(
        "the DynamoDB store is not implemented yet (table '{table}'); use --local"
    )))
}
