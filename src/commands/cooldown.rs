use crate::cli::args::CooldownCommand;
use crate::cli::CliError;

pub fn run(_cmd: CooldownCommand) -> Result<i32, CliError> {
    Err(CliError::NotYet {
        command: "cooldown",
        tracking: "issue #6",
    })
}
