use crate::cli::args::CfnTemplateArgs;
use crate::cli::CliError;

pub fn run(_args: CfnTemplateArgs) -> Result<i32, CliError> {
    Err(CliError::NotYet {
        command: "limits cfn-template",
        tracking: "issue #5",
    })
}
