//! Command-line layer: argument definitions, dispatch, and rendering of errors.

pub mod args;
pub mod completions;
pub mod error;
pub mod help;
pub mod interrupt;
pub mod output;
pub mod progress;

pub use args::{command, Cli, Command};
pub use error::CliError;

use crate::commands;

/// Runs one parsed command line and returns the process exit code.
pub fn run(cli: Cli) -> i32 {
    match dispatch(cli) {
        Ok(code) => code,
        Err(err) => {
            if err.has_message() {
                output::eprintln(format!("Error: {err}"));
            }
            err.exit_code()
        }
    }
}

fn dispatch(cli: Cli) -> Result<i32, CliError> {
    use args::*;
    match cli.command {
        Command::Limits(cmd) => match cmd {
            LimitsCommand::Validate(a) => commands::validate::run(a),
            LimitsCommand::Plan(a) => commands::plan::plan(a),
            LimitsCommand::Diff(a) => commands::plan::diff(a),
            LimitsCommand::Apply(a) => commands::plan::apply(a),
            LimitsCommand::ShowPlan(a) => commands::plan::show_plan(a),
            LimitsCommand::ForceUnlock(a) => commands::lock::force_unlock(a),
            LimitsCommand::CfnTemplate(a) => commands::cfn_template::run(a),
            LimitsCommand::Simulate(a) => commands::simulate::run(a),
            LimitsCommand::GenTrace(a) => commands::gen_trace::run(a),
            LimitsCommand::Export(a) => commands::export::run(a),
            LimitsCommand::Explain(a) => commands::explain::run(a),
        },
        Command::Entity(EntityCommand::GetLimits {
            entity_id,
            resource,
            read,
        }) => commands::show::entity(&entity_id, &resource, read),
        Command::Resource(ResourceCommand::GetDefaults {
            resource_name,
            read,
        }) => commands::show::resource(&resource_name, read),
        Command::System(SystemCommand::GetDefaults { read }) => commands::show::system(read),
        Command::Namespace(cmd) => commands::namespace::run(cmd),
        Command::Cron(CronCommand::Check(a)) => commands::cron_check::run(a),
        Command::Cooldown(cmd) => commands::cooldown::run(cmd),
        Command::Table(cmd) => commands::table::run(cmd),
        Command::Acquire(a) => commands::acquire::run(a),
        Command::Reservation(cmd) => commands::reservation::run(cmd),
        Command::Serve(a) => commands::serve::run(a),
        Command::Completions { shell } => {
            output::print(completions::script(shell))?;
            Ok(crate::exit_codes::OK)
        }
    }
}
