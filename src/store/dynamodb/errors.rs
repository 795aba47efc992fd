//! AWS SDK errors turned into one-line explanations ([`StoreError`]).

use aws_sdk_dynamodb::error::{ProvideErrorMetadata, SdkError};

use crate::store::StoreError;

/// What a local DynamoDB-compatible server needs that is easy to miss: the SDK
/// signs every request, so a region and credentials must be configured even
/// where any value is accepted.
pub const LOCAL_SERVER_HINT: &str = "a local DynamoDB server (moto, DynamoDB Local) needs a region and credentials too, any values, e.g. AWS_REGION=us-east-1 AWS_ACCESS_KEY_ID=x AWS_SECRET_ACCESS_KEY=x";

/// What an SDK failure means for us, before the table-specific hint is added.
#[derive(Debug)]
pub enum Failure {
    /// The table (or index) does not exist.
    NotFound,
    /// A conditional write's condition did not hold.
    ConditionFailed,
    /// A transaction was cancelled; the per-item reason codes, in request order.
    Cancelled(Vec<String>),
    /// The written item would exceed the 400 KB item size.
    TooLarge,
    /// Anything else, already a complete [`StoreError`].
    Other(StoreError),
}

/// Classifies an SDK error for `action` (the DynamoDB API name) on `table`.
pub fn classify<E, R>(err: SdkError<E, R>, action: &str, table: &str, endpoint: &str) -> Failure
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
    R: std::fmt::Debug + 'static,
{
    let code = err.code().map(str::to_string);
    let message = err.message().map(str::to_string);
    match &err {
        SdkError::ServiceError(_) => match code.as_deref() {
            Some("ResourceNotFoundException") => Failure::NotFound,
            Some("ConditionalCheckFailedException") => Failure::ConditionFailed,
            // "Item size has exceeded the maximum allowed size", "Item size
            // to update has exceeded …".
            Some("ValidationException")
                if message
                    .as_deref()
                    .is_some_and(|m| m.starts_with("Item size")) =>
            {
                Failure::TooLarge
            }
            Some("TransactionCanceledException") => Failure::Cancelled(
                cancellation_codes(message.as_deref().unwrap_or_default()),
            ),
            Some("AccessDeniedException") | Some("AccessDenied") => {
                Failure::Other(StoreError::AccessDenied {
                    action: action.to_string(),
                    table: table.to_string(),
                })
            }
            Some("UnrecognizedClientException")
            | Some("InvalidSignatureException")
            | Some("ExpiredTokenException") => Failure::Other(StoreError::Backend(format!(
                "AWS rejected the credentials for {action} on table '{table}': {}. Check your AWS profile or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY.",
                message.unwrap_or_else(|| code.clone().unwrap_or_default())
            ))),
            _ => Failure::Other(StoreError::Backend(format!(
                "DynamoDB {action} on table '{table}' failed: {}{}",
                code.unwrap_or_else(|| "error".into()),
                message.map(|m| format!(": {m}")).unwrap_or_default()
            ))),
        },
        SdkError::DispatchFailure(_) if no_credentials(&err) => {
            Failure::Other(StoreError::Backend(format!(
                "no AWS credentials found for {action} on table '{table}' (tried the environment, profiles, web identity, container and instance metadata): configure a profile or set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY{}",
                if endpoint.is_empty() {
                    String::new()
                } else {
                    format!("; {LOCAL_SERVER_HINT}")
                }
            )))
        }
        SdkError::DispatchFailure(_) => Failure::Other(StoreError::Backend(format!(
            "cannot reach DynamoDB{} for {action} on table '{table}': {}",
            if endpoint.is_empty() {
                String::new()
            } else {
                format!(" at {endpoint}")
            },
            one_line(&err)
        ))),
        SdkError::TimeoutError(_) => Failure::Other(StoreError::Backend(format!(
            "DynamoDB {action} on table '{table}' timed out (after retries); nothing more was tried"
        ))),
        _ => Failure::Other(StoreError::Backend(format!(
            "DynamoDB {action} on table '{table}' failed: {}",
            one_line(&err)
        ))),
    }
}

/// The cancellation reason codes from a TransactionCanceledException message,
/// e.g. `Transaction cancelled, please refer cancellation reasons for specific
/// reasons [ConditionalCheckFailed, None]`.
pub fn cancellation_codes(message: &str) -> Vec<String> {
    let Some(start) = message.rfind('[') else {
        return vec![];
    };
    let end = message[start..]
        .find(']')
        .map_or(message.len(), |e| start + e);
    message[start + 1..end]
        .split(',')
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect()
}

/// Whether the SDK gave up before sending because no credentials provider
/// found any (its error names no type we can match, only this text).
fn no_credentials(err: &(dyn std::error::Error + 'static)) -> bool {
    let text = one_line(err);
    text.contains("no credentials found") || text.contains("credential provider was not enabled")
}

/// An error and its sources on one line, each distinct message once.
pub fn one_line(err: &(dyn std::error::Error + 'static)) -> String {
    let mut parts: Vec<String> = vec![];
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(e) = cur {
        let text = e.to_string();
        let text = text.trim();
        if !text.is_empty() && !parts.iter().any(|p| p.contains(text)) {
            parts.push(text.to_string());
        }
        cur = e.source();
    }
    parts.join(": ").replace('\n', " ")
}

#[cfg(test)]
mod tests {
    use super::*;

    use aws_sdk_dynamodb::error::ErrorMetadata;
    use aws_sdk_dynamodb::operation::get_item::GetItemError;

    fn service(code: &str, message: &str) -> SdkError<GetItemError, ()> {
        let meta = ErrorMetadata::builder().code(code).message(message).build();
        SdkError::service_error(GetItemError::generic(meta), ())
    }

    #[test]
    fn service_errors_become_one_line_explanations() {
        let denied = service("AccessDeniedException", "User: x is not authorized");
        match classify(denied, "GetItem", "prod", "") {
            Failure::Other(e @ StoreError::AccessDenied { .. }) => {
                let text = e.to_string();
                assert!(
                    text.contains("GetItem") && text.contains("'prod'"),
                    "{text}"
                );
                assert!(!text.contains('\n'));
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            classify(
                service("ResourceNotFoundException", "no table"),
                "Query",
                "t",
                ""
            ),
            Failure::NotFound
        ));
        assert!(matches!(
            classify(
                service("ConditionalCheckFailedException", "x"),
                "PutItem",
                "t",
                ""
            ),
            Failure::ConditionFailed
        ));
        // Too large is not a passing failure (never `on_unavailable`'s).
        for message in [
            "Item size has exceeded the maximum allowed size",
            "Item size to update has exceeded the maximum allowed size",
        ] {
            assert!(matches!(
                classify(service("ValidationException", message), "PutItem", "t", ""),
                Failure::TooLarge
            ));
        }
        match classify(
            service("ValidationException", "bad key"),
            "PutItem",
            "t",
            "",
        ) {
            Failure::Other(StoreError::Backend(m)) => {
                assert_eq!(
                    m,
                    "DynamoDB PutItem on table 't' failed: ValidationException: bad key"
                )
            }
            other => panic!("{other:?}"),
        }
        match classify(
            service("UnrecognizedClientException", "bad token"),
            "GetItem",
            "t",
            "",
        ) {
            Failure::Other(StoreError::Backend(m)) => assert!(m.contains("credentials"), "{m}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn cancellation_codes_are_read_from_the_message() {
        assert_eq!(
            cancellation_codes(
                "Transaction cancelled, please refer cancellation reasons for specific reasons [ConditionalCheckFailed, None]"
            ),
            vec!["ConditionalCheckFailed", "None"]
        );
        assert!(cancellation_codes("no reasons").is_empty());
    }

    #[test]
    fn one_line_keeps_each_cause_once() {
        #[derive(Debug)]
        struct Outer(std::io::Error);
        impl std::fmt::Display for Outer {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, "io error")
            }
        }
        impl std::error::Error for Outer {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                Some(&self.0)
            }
        }
        let e = Outer(std::io::Error::new(
            std::io::ErrorKind::ConnectionRefused,
            "connection refused\n(os error 111)",
        ));
        assert_eq!(one_line(&e), "io error: connection refused (os error 111)");
    }
}
