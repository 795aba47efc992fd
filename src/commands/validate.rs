use crate::cli::args::ValidateArgs;
use crate::cli::CliError;

pub fn run(_args: ValidateArgs) -> Result<i32, CliError> {
    Err(CliError::NotYet {
        command: "limits validate",
        tracking: "issue #4",
    })
}
