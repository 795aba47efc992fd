use crate::cli::args::TableCommand;
use crate::cli::CliError;

pub fn run(_cmd: TableCommand) -> Result<i32, CliError> {
    Err(CliError::NotYet {
        command: "table create",
        tracking: "issue #8",
    })
}
