//! `zae-limiter limits gen-trace`: write a synthetic request trace (steady,
//! bursty or business-hours arrivals, per-limit costs, optional holds) for
//! `limits simulate`. Deterministic for a seed. To a file it is written whole
//! or not at all.

use crate::cli::args::{GenTraceArgs, GenTraceFormat, TraceShape};
use crate::cli::output;
use crate::cli::CliError;
use crate::exit_codes;
use crate::simulate::clock::{parse_duration, parse_instant};
use crate::simulate::generate::{
    parse_costs, parse_hold, parse_rate, write_trace, Generator, OutFormat, Plan, Shape,
};

pub fn run(args: GenTraceArgs) -> Result<i32, CliError> {
    let usage = |e: &dyn std::fmt::Display| CliError::Usage(e.to_string());
    let plan = Plan {
        shape: match args.shape {
            TraceShape::Steady => Shape::Steady,
            TraceShape::Bursty => Shape::Bursty,
            TraceShape::BusinessHours => Shape::BusinessHours,
        },
        rate_per_s: parse_rate(&args.rate).map_err(|e| usage(&e))?,
        start_ms: parse_instant(&args.start).map_err(|e| usage(&format!("--start: {e}")))?,
        duration_ms: parse_duration(&args.duration)
            .map_err(|e| usage(&format!("--duration: {e}")))?,
        seed: args.seed,
        tz: zae_limiter_engine::zone::zone(&args.tz)
            .map_err(|e| usage(&format!("--tz {:?}: {e}", args.tz)))?,
        costs: parse_costs(&args.costs).map_err(|e| usage(&e))?,
        hold_ms: args
            .hold
            .as_deref()
            .map(parse_hold)
            .transpose()
            .map_err(|e| usage(&e))?,
    };
    // Every generated instant must be one `limits simulate` accepts.
    if crate::simulate::clock::checked_instant(plan.start_ms.saturating_add(plan.duration_ms))
        .is_none()
    {
        return Err(usage(&format!(
            "--duration {}: a trace starting at {} would end after 9999-12-30",
            args.duration, args.start
        )));
    }
    let format = match args.format {
        GenTraceFormat::Csv => OutFormat::Csv,
        GenTraceFormat::Jsonl => OutFormat::Jsonl,
    };
    let gen = Generator::new(plan);
    match &args.output {
        None => output::stream(|mut out| write_trace(&mut out, gen, format).map(drop))?,
        Some(path) => {
            output::write_file(path, |mut out| write_trace(&mut out, gen, format).map(drop))?
        }
    }
    Ok(exit_codes::OK)
}
