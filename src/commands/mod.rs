//! One module per command group. Each turns parsed arguments into calls on the
//! manifest, engine and store layers and prints the result.

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
pub mod saved_plan;
pub mod serve;
pub mod show;
pub mod simulate;
pub mod table;
pub mod validate;
