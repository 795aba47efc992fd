//! `zae-limiter limits gen-trace`: write a synthetic request trace (steady,
//! bursty or business-hours arrivals, per-limit costs, optional holds) for
//! `limits simulate`. Deterministic for a seed. To a file it is written whole
//! or not at all.

use std::io::{BufWriter, Write};

use crate::cli::args::{GenTraceArgs, GenTraceFormat, TraceShape};
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
    let format = match args.format {
        GenTraceFormat::Csv => OutFormat::Csv,
        GenTraceFormat::Jsonl => OutFormat::Jsonl,
    };
    let gen = Generator::new(plan);
    match &args.output {
        None => {
            let stdout = std::io::stdout();
            let mut out = BufWriter::with_capacity(1 << 16, stdout.lock());
            write_trace(&mut out, gen, format)?;
            out.flush()?;
        }
        Some(path) => {
            let cant = |e: std::io::Error| {
                CliError::Failed(format!("cannot write {}: {e}", path.display()))
            };
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| "trace".into());
            let tmp = path.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
            let result = (|| {
                let mut out = BufWriter::with_capacity(1 << 16, std::fs::File::create(&tmp)?);
                write_trace(&mut out, gen, format)?;
                out.into_inner().map_err(|e| e.into_error())?.sync_all()?;
                std::fs::rename(&tmp, path)
            })();
            if let Err(e) = result {
                let _ = std::fs::remove_file(&tmp);
                return Err(cant(e));
            }
        }
    }
    Ok(exit_codes::OK)
}
