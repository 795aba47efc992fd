//! `zae-limiter limits simulate -f MANIFEST -e ENTITY -r RESOURCE --trace FILE
//! [--svg OUT.svg] [--format text|json]`: replay a trace through the limits
//! the manifest gives one entity on one resource, and report what was refused,
//! by which limit, when and for how long. No store is read or written.
//!
//! The trace streams: one line in memory at a time, the chart aggregated into
//! a bounded number of time buckets. A progress bar is drawn on stderr only
//! when stderr is a terminal.

use std::fs::File;
use std::io::{BufRead, BufReader, IsTerminal};
use std::path::Path;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::cli::args::{SimulateArgs, TraceFormatArg};
use crate::cli::output::FileArg;
use crate::cli::{output, CliError};
use crate::exit_codes;
use crate::manifest::{self, model::Disabled};
use crate::simulate::chart::{render_svg, Panel};
use crate::simulate::counters::{describe, Counter};
use crate::simulate::replay::Replay;
use crate::simulate::report::{render_json, render_text, Context};
use crate::simulate::resolve::resolve;
use crate::simulate::trace::{detect_format, Event, ReadError, TraceFormat, TraceReader};

/// Time buckets kept for the chart, whatever the trace's length.
const CHART_BUCKETS: usize = 720;
/// Lines between progress-bar updates.
const PROGRESS_EVERY: u64 = 16_384;

pub fn run(args: SimulateArgs) -> Result<i32, CliError> {
    output::one_stdin(&[
        FileArg::new("-f/--file", "the manifest", args.file.as_path()),
        FileArg::new("--trace", "the trace", args.trace.as_path()),
    ])?;
    if let Some(svg) = &args.svg {
        output::refuse_overwriting_inputs(
            &[FileArg::new("--svg", "the chart", svg.as_path())],
            &[
                FileArg::new("-f/--file", "the manifest", args.file.as_path()),
                FileArg::new("--trace", "the trace", args.trace.as_path()),
            ],
        )?;
    }
    let tz = zae_limiter_engine::zone::zone(&args.tz)
        .map_err(|e| CliError::Usage(format!("--tz {:?}: {e}", args.tz)))?;
    let manifest = match manifest::load_file(&args.file) {
        Ok(loaded) => loaded.manifest,
        Err(diags) => {
            output::eprint(manifest::render_text(&diags));
            return Err(CliError::Reported(exit_codes::FAILURE));
        }
    };
    let resolved = resolve(&manifest, &args.entity, &args.resource).ok_or_else(|| {
        CliError::Failed(format!(
            "no limits apply to entity '{}' on resource '{}': the manifest defines none at entities.{0}.resources.{1}, entities.{0}.resources._default_, resources.{1} or system",
            args.entity, args.resource
        ))
    })?;
    let bypass = matches!(resolved.disabled, Some((_, Disabled::Bypass)));
    let disabled = matches!(resolved.disabled, Some((_, Disabled::Disabled)));
    let counters = resolved
        .limits
        .iter()
        .map(|(name, spec)| Counter::build(name, spec, bypass))
        .collect::<Result<Vec<_>, _>>()?;

    let label = args.trace.display().to_string();
    let (mut src, size): (Box<dyn BufRead>, Option<u64>) = if args.trace == Path::new("-") {
        (
            Box::new(BufReader::with_capacity(1 << 16, std::io::stdin())),
            None,
        )
    } else {
        let f = File::open(&args.trace)
            .map_err(|e| CliError::Failed(format!("cannot read the trace {label}: {e}")))?;
        let size = f.metadata().ok().map(|m| m.len());
        (Box::new(BufReader::with_capacity(1 << 16, f)), size)
    };
    let format = match args.trace_format {
        TraceFormatArg::Csv => TraceFormat::Csv,
        TraceFormatArg::Jsonl => TraceFormat::Jsonl,
        TraceFormatArg::Auto => {
            let head = src
                .fill_buf()
                .map_err(|e| CliError::Failed(format!("cannot read the trace {label}: {e}")))?;
            detect_format(Some(&label), head)
        }
    };

    let progress = progress_bar(size);
    let mut replay = Replay::new(counters, disabled, CHART_BUCKETS);
    let mut reader = TraceReader::new(src, format);
    let mut ev = Event::default();
    let trace_err = |e: ReadError| CliError::Failed(format!("{label}: {e}"));
    loop {
        if !reader.next_event(&mut ev).map_err(trace_err)? {
            break;
        }
        replay
            .step(&ev, reader.names())
            .map_err(|e| CliError::Failed(format!("{label}: {e}")))?;
        if reader.lines_read() % PROGRESS_EVERY == 0 {
            progress.set_position(reader.bytes_read());
        }
    }
    progress.finish_and_clear();

    let limits: Vec<(&str, &manifest::model::LimitSpec)> = resolved
        .limits
        .iter()
        .map(|(n, s)| (n.as_str(), s))
        .collect();
    let ctx = Context {
        entity: &args.entity,
        resource: &args.resource,
        source: resolved.source,
        disabled: resolved.disabled,
        trace: &label,
        format,
        lines: reader.lines_read(),
        limits,
    };

    if let Some(path) = &args.svg {
        let panels: Vec<Panel<'_>> = ctx
            .limits
            .iter()
            .map(|(name, spec)| Panel {
                name,
                description: describe(spec),
            })
            .collect();
        let title = format!(
            "{} on {}: {} requests, {} refused",
            ctx.entity,
            ctx.resource,
            crate::display::numbers::thousands(replay.tally.requests),
            crate::display::numbers::thousands(replay.tally.refused)
        );
        let svg = render_svg(&replay.series, &title, &panels, tz)?;
        output::write_file(path, |out| out.write_all(svg.as_bytes()))?;
    }

    output::text_or_json(
        args.format,
        || render_text(&ctx, &replay.tally, replay.counters()),
        || render_json(&ctx, &replay.tally, replay.counters()),
    )?;
    Ok(exit_codes::OK)
}

/// A byte-position bar on stderr when it is a terminal, hidden otherwise
/// (and for standard input, whose size is unknown: a spinner).
fn progress_bar(size: Option<u64>) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = match size {
        Some(n) => ProgressBar::with_draw_target(Some(n), ProgressDrawTarget::stderr()),
        None => ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr()),
    };
    let style = ProgressStyle::with_template("{spinner} {bytes}/{total_bytes} {wide_bar} {eta}")
        .unwrap_or_else(|_| ProgressStyle::default_bar());
    bar.set_style(style);
    bar
}
