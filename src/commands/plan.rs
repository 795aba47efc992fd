use crate::cli::args::{ApplyArgs, PlanArgs};
use crate::cli::CliError;

pub fn plan(_args: PlanArgs) -> Result<i32, CliError> {
    Err(CliError::NotYet {
        command: "limits plan",
        tracking: "issue #5",
    })
}

pub fn diff(_args: PlanArgs) -> Result<i32, CliError> {
    Err(CliError::NotYet {
        command: "limits diff",
        tracking: "issue #5",
    })
}

pub fn apply(_args: ApplyArgs) -> Result<i32, CliError> {
    Err(CliError::NotYet {
        command: "limits apply",
        tracking: "issue #5",
    })
}
