//! One module per command group. Each turns parsed arguments into calls on the
//! manifest, engine and store layers and prints the result; [`run`] dispatches
//! a parsed command line to them.

use crate::cli::args::*;
use crate::cli::{completions, output, Cli, CliError};

pub mod acquire;
pub mod cfn_template;
pub mod cooldown;
pub mod cron_check;
pub mod explain;
pub mod export;
pub mod gen_trace;
pub mod lock;
pub mod namespace;
pub mod plan;
pub mod read_only;
pub mod reservation;
pub mod runtime;
pub mod saved_plan;
pub mod serve;
pub mod show;
pub mod simulate;
pub mod table;
pub mod validate;

/// Runs one parsed command line and returns the process exit code.
pub fn run(cli: Cli) -> i32 {
    dispatch(cli).unwrap_or_else(CliError::report)
}

fn dispatch(cli: Cli) -> Result<i32, CliError> {
    match cli.command {
        Command::Limits(cmd) => match cmd {
            LimitsCommand::Validate(a) => validate::run(a),
            LimitsCommand::Plan(a) => plan::plan(a),
            LimitsCommand::Diff(a) => plan::diff(a),
            LimitsCommand::Apply(a) => plan::apply(a),
            LimitsCommand::ShowPlan(a) => plan::show_plan(a),
            LimitsCommand::ForceUnlock(a) => lock::force_unlock(a),
            LimitsCommand::CfnTemplate(a) => cfn_template::run(a),
            LimitsCommand::Simulate(a) => simulate::run(a),
            LimitsCommand::GenTrace(a) => gen_trace::run(a),
            LimitsCommand::Export(a) => export::run(a),
            LimitsCommand::Explain(a) => explain::run(a),
        },
        Command::Entity(EntityCommand::GetLimits {
            entity_id,
            resource,
            read,
        }) => show::entity(&entity_id, &resource, read),
        Command::Resource(ResourceCommand::GetDefaults {
            resource_name,
            read,
        }) => show::resource(&resource_name, read),
        Command::System(SystemCommand::GetDefaults { read }) => show::system(read),
        Command::Namespace(cmd) => namespace::run(cmd),
        Command::Cron(CronCommand::Check(a)) => cron_check::run(a),
        Command::Cooldown(cmd) => cooldown::run(cmd),
        Command::Table(cmd) => table::run(cmd),
        Command::Acquire(a) => acquire::run(a),
        Command::Reservation(cmd) => reservation::run(cmd),
        Command::Runtime(cmd) => runtime::run(cmd),
        Command::Serve(a) => serve::run(a),
        Command::Completions { shell } => {
            output::print(completions::script(shell))?;
            Ok(crate::exit_codes::OK)
        }
    }
}
