use crate::cli::args::CronCheckArgs;
use crate::cli::CliError;

pub fn run(_args: CronCheckArgs) -> Result<i32, CliError> {
    Err(CliError::NotYet {
        command: "cron check",
        tracking: "issue #3",
    })
}
