use crate::cli::args::ReadArgs;
use crate::cli::CliError;

pub fn entity(_entity_id: &str, _resource: &str, _read: ReadArgs) -> Result<i32, CliError> {
    Err(CliError::NotYet {
        command: "entity get-limits",
        tracking: "issue #5",
    })
}

pub fn resource(_resource: &str, _read: ReadArgs) -> Result<i32, CliError> {
    Err(CliError::NotYet {
        command: "resource get-defaults",
        tracking: "issue #5",
    })
}

pub fn system(_read: ReadArgs) -> Result<i32, CliError> {
    Err(CliError::NotYet {
        command: "system get-defaults",
        tracking: "issue #5",
    })
}
