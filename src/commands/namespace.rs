use crate::cli::args::NamespaceCommand;
use crate::cli::CliError;

pub fn run(_cmd: NamespaceCommand) -> Result<i32, CliError> {
    Err(CliError::NotYet {
        command: "namespace",
        tracking: "issue #5",
    })
}
