//! `zae-limiter limits explain -e ENTITY -r RESOURCE [-f MANIFEST | store flags]
//! [--at TIME] [--until TIME] [--cost NAME=N]... [--format text|json] [--svg FILE]`:
//! which level applies to one entity on one resource, its numbers at an
//! instant and every change in a horizon ([`crate::explain`]). Reads a
//! manifest, or the store read-only; writes nothing but `--svg`.

use chrono_tz::Tz;

use crate::cli::args::ExplainArgs;
use crate::cli::output::FileArg;
use crate::cli::{output, CliError};
use crate::exit_codes;
use crate::explain::report::{render_json, render_text};
use crate::explain::{self, Explanation, Kind, Request};
use crate::manifest;
use crate::simulate::chart::{render_capacity_svg, CapacityPanel};

/// The longest horizon: a year of changes is already more than a chart shows.
const MAX_HORIZON_MS: i64 = 366 * 86_400_000;

pub fn run(args: ExplainArgs) -> Result<i32, CliError> {
    if let Some(svg) = &args.svg {
        let inputs = match &args.file {
            Some(f) => vec![FileArg::new("-f/--file", "the manifest", f.as_path())],
            None => args.store.table.store.input_files(),
        };
        output::refuse_overwriting_inputs(
            &[FileArg::new("--svg", "the chart", svg.as_path())],
            &inputs,
        )?;
    }
    let usage = |e: String| CliError::Usage(e);
    let at_ms = match &args.at {
        Some(t) => crate::clock::parse_instant(t, "--at")?,
        None => crate::clock::now_ms()?,
    };
    let until_ms = until(&args.until, at_ms)?;
    let tz: Option<Tz> = args
        .tz
        .as_deref()
        .map(|z| zae_limiter_engine::zone::zone(z).map_err(|e| usage(format!("--tz {z:?}: {e}"))))
        .transpose()?;
    let costs = super::acquire::parse_costs(&args.costs)?;
    crate::runtime::level::validate(&args.entity, &args.resource)?;

    let levels = match &args.file {
        Some(path) => {
            let m = match manifest::load_file(path) {
                Ok(loaded) => loaded.manifest,
                Err(diags) => {
                    output::eprint(manifest::render_text(&diags));
                    return Err(CliError::Reported(exit_codes::FAILURE));
                }
            };
            explain::levels_from_manifest(&m, &args.entity, &args.resource)
        }
        None => {
            let store = args.store.open_read_only()?;
            let ns = super::read_only::resolve_namespace(store.as_ref(), &args.store)?;
            explain::levels_from_store(store.as_ref(), &ns, &args.entity, &args.resource)
        }
    }?;
    let req = Request {
        entity: &args.entity,
        resource: &args.resource,
        at_ms,
        until_ms,
        costs: &costs,
    };
    let x = explain::explain(&levels, &req)?;
    let unknown: Vec<&str> = costs
        .keys()
        .filter(|n| !x.limits.iter().any(|l| &l.stored.name == *n))
        .map(String::as_str)
        .collect();
    if !unknown.is_empty() {
        output::eprintln(format!(
            "Warning: --cost for {}: no limit of that name applies to {} on {}",
            unknown.join(", "),
            x.entity,
            x.resource
        ));
    }
    if let Some(path) = &args.svg {
        let chart_tz = tz
            .or_else(|| x.zone.as_deref().and_then(|z| z.parse().ok()))
            .unwrap_or(chrono_tz::UTC);
        let svg = chart(&x, chart_tz)?;
        output::write_file(path, |out| out.write_all(svg.as_bytes()))?;
    }
    output::text_or_json(args.format, || render_text(&x, tz), || render_json(&x))?;
    Ok(exit_codes::OK)
}

/// `--until`: an RFC 3339 instant after `at`, or a duration after it (`36h`, `7d`).
fn until(text: &str, at_ms: i64) -> Result<i64, CliError> {
    let t = match crate::simulate::clock::parse_duration(text) {
        Ok(d) => at_ms.saturating_add(d),
        Err(_) => crate::clock::parse_instant(text, "--until").map_err(|e| {
            CliError::Usage(format!(
                "{e}; or give a duration after --at such as 36h or 7d"
            ))
        })?,
    };
    if t <= at_ms {
        return Err(CliError::Usage(format!(
            "--until {text} is not after --at ({})",
            crate::clock::rfc3339(at_ms)
        )));
    }
    if t - at_ms > MAX_HORIZON_MS {
        return Err(CliError::Usage(format!(
            "--until {text} is more than 366 days after --at; explain a shorter span"
        )));
    }
    Ok(t)
}

/// Each limit's effective capacity from `at` to `until`, as steps.
fn chart(x: &Explanation, tz: Tz) -> Result<String, CliError> {
    let panels: Vec<CapacityPanel<'_>> = x
        .limits
        .iter()
        .map(|l| {
            let head = crate::display::limits::limit_lines(&l.stored, 0)
                .into_iter()
                .next()
                .unwrap_or_default();
            let description = head
                .split_once(": ")
                .map_or(head.clone(), |(_, d)| d.to_string());
            let (steps, resets) = match (&l.kind, &l.now) {
                (Kind::Bucket { .. }, Some(now)) => {
                    let mut steps = vec![(x.at_ms, now.numbers.capacity_milli as f64 / 1000.0)];
                    steps.extend(
                        l.changes
                            .iter()
                            .filter(|c| c.window.is_some())
                            .map(|c| (c.at_ms, c.numbers.capacity_milli as f64 / 1000.0)),
                    );
                    let resets = l
                        .changes
                        .iter()
                        .filter(|c| c.reset)
                        .map(|c| c.at_ms)
                        .collect();
                    (steps, resets)
                }
                _ => (vec![(x.at_ms, l.stored.capacity as f64)], Vec::new()),
            };
            CapacityPanel {
                name: &l.stored.name,
                description,
                steps,
                resets,
            }
        })
        .collect();
    let title = format!(
        "{} on {}: effective capacity from {} to {}",
        x.entity,
        x.resource,
        crate::clock::rfc3339(x.at_ms),
        crate::clock::rfc3339(x.until_ms)
    );
    Ok(render_capacity_svg(
        &title, &panels, x.at_ms, x.until_ms, tz,
    )?)
}
