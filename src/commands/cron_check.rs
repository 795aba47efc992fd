//! `zae-limiter cron check`: what a pattern means in a zone, across DST — its
//! stored and named forms, whether given minutes match, and the next windows
//! and reset edges, exactly as the engine (and so the limiter) evaluates them.

use chrono::{DateTime, SecondsFormat, TimeZone, Utc};
use chrono_tz::Tz;
use zae_limiter_engine::cron::{one_value_steps, CronError, CronSpec};
use zae_limiter_engine::encoding::encode_reset;
use zae_limiter_engine::render::to_cron;
use zae_limiter_engine::scan;
use zae_limiter_engine::schedule::{Entry, Schedule, EDGE_SEARCH_MINUTES};
use zae_limiter_engine::zone::zone;

use crate::cli::args::{CronCheckArgs, TextOrJson};
use crate::cli::CliError;
use crate::exit_codes;
use crate::manifest::lint::{one_value_step_text, ONE_VALUE_STEP};

/// One listed window: half-open `[start, end)`; `end` None when the pattern
/// still matches at the end of the search horizon.
struct Window {
    start: i64,
    end: Option<i64>,
}

/// Everything the command reports about a valid pattern.
struct Report {
    stored: String,
    rendered: String,
    matches: Vec<(i64, bool)>,
    windows: Vec<Window>,
    edges: Vec<i64>,
    /// Lints on the pattern itself (ZL106: Python limiters may read it
    /// otherwise), as `limits validate` reports them in a manifest.
    warnings: Vec<Warning>,
}

#[derive(serde::Serialize)]
struct Warning {
    code: &'static str,
    message: String,
    help: String,
}

pub fn run(args: CronCheckArgs) -> Result<i32, CliError> {
    let tz = zone(&args.tz).map_err(|e| CliError::Usage(e.to_string()))?;
    let at: Vec<i64> = args
        .at
        .iter()
        .map(|t| parse_time("--at", t))
        .collect::<Result<_, _>>()?;
    let from = args
        .from
        .as_deref()
        .map(|t| parse_time("--from", t))
        .transpose()?;

    let out = match CronSpec::parse(&args.expr) {
        Err(e) => {
            let text = match args.format {
                TextOrJson::Text => invalid_text(&args.expr, &e),
                TextOrJson::Json => pretty(&JsonReport {
                    version: 1,
                    valid: false,
                    error: Some(e.to_string()),
                    stored: None,
                    rendered: None,
                    matches: Vec::new(),
                    windows: Vec::new(),
                    edges: Vec::new(),
                    warnings: Vec::new(),
                }),
            };
            emit(&text)?;
            return Ok(exit_codes::FAILURE);
        }
        Ok(spec) => {
            let report = evaluate(&args.expr, spec, tz, &at, from, args.next)?;
            match args.format {
                TextOrJson::Text => valid_text(&args.expr, tz, from, &report),
                TextOrJson::Json => pretty(&report_json(report)),
            }
        }
    };
    emit(&out)?;
    Ok(exit_codes::OK)
}

fn emit(text: &str) -> Result<(), CliError> {
    crate::cli::output::print(text)
}

fn pretty(v: &JsonReport) -> String {
    let mut s = serde_json::to_string_pretty(v).unwrap_or_default();
    s.push('\n');
    s
}

/// An RFC 3339 instant (`2026-03-08T07:00:00Z`, `2026-03-08T02:00:00-05:00`) in epoch ms.
fn parse_time(flag: &str, text: &str) -> Result<i64, CliError> {
    DateTime::parse_from_rfc3339(text)
        .map(|t| t.timestamp_millis())
        .map_err(|e| {
            CliError::Usage(format!(
                "{flag} {text:?} is not an RFC 3339 instant ({e}); write e.g. 2026-03-08T07:00:00Z or 2026-03-08T02:00:00-05:00"
            ))
        })
}

fn evaluate(
    expr: &str,
    spec: CronSpec,
    tz: Tz,
    at: &[i64],
    from: Option<i64>,
    n: usize,
) -> Result<Report, CliError> {
    let stored = encode_reset(&[expr])?;
    let rendered = to_cron(&stored)?;
    let sched = Schedule {
        tz,
        entries: vec![Entry {
            cron: expr.to_string(),
            spec: spec.clone(),
            modifier: None,
        }],
    };
    let matches = at
        .iter()
        .map(|&t| (t, sched.active_index(t).is_some()))
        .collect();
    let mut windows = Vec::new();
    let mut edges = Vec::new();
    if let Some(from) = from {
        let mut cursor = from;
        while edges.len() < n {
            match sched.next_reset_edge(cursor) {
                Some(e) => {
                    edges.push(e);
                    cursor = e;
                }
                None => break,
            }
        }
        for &start in &edges {
            let u = start / 60_000;
            let end = scan::find_forward(&spec, tz, false, u + 1, u + EDGE_SEARCH_MINUTES)
                .map(|v| v * 60_000);
            windows.push(Window { start, end });
        }
    }
    let warnings = one_value_steps(expr)
        .iter()
        .map(|found| {
            let (message, help) = one_value_step_text(expr, found);
            Warning {
                code: ONE_VALUE_STEP,
                message,
                help,
            }
        })
        .collect();
    Ok(Report {
        stored,
        rendered,
        matches,
        windows,
        edges,
        warnings,
    })
}

fn utc(ms: i64) -> String {
    match Utc.timestamp_millis_opt(ms).single() {
        Some(t) => t.to_rfc3339_opts(SecondsFormat::AutoSi, true),
        None => ms.to_string(),
    }
}

fn local(ms: i64, tz: Tz) -> String {
    match Utc.timestamp_millis_opt(ms).single() {
        Some(t) => t
            .with_timezone(&tz)
            .format("%Y-%m-%d %H:%M %:z")
            .to_string(),
        None => ms.to_string(),
    }
}

/// The JSON report, fields in the documented order.
#[derive(serde::Serialize)]
struct JsonReport {
    /// The document's format version, as every JSON output has; fields are
    /// only ever added within it.
    version: u32,
    valid: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
    stored: Option<String>,
    rendered: Option<String>,
    matches: Vec<JsonMatch>,
    windows: Vec<JsonWindow>,
    edges: Vec<String>,
    warnings: Vec<Warning>,
}

#[derive(serde::Serialize)]
struct JsonMatch {
    at: String,
    matches: bool,
}

#[derive(serde::Serialize)]
struct JsonWindow {
    start: String,
    end: Option<String>,
}

fn report_json(r: Report) -> JsonReport {
    JsonReport {
        version: 1,
        valid: true,
        error: None,
        stored: Some(r.stored),
        rendered: Some(r.rendered),
        matches: r
            .matches
            .iter()
            .map(|&(t, m)| JsonMatch {
                at: utc(t),
                matches: m,
            })
            .collect(),
        windows: r
            .windows
            .iter()
            .map(|w| JsonWindow {
                start: utc(w.start),
                end: w.end.map(utc),
            })
            .collect(),
        edges: r.edges.iter().map(|&e| utc(e)).collect(),
        warnings: r.warnings,
    }
}

fn valid_text(expr: &str, tz: Tz, from: Option<i64>, r: &Report) -> String {
    let mut s = String::new();
    s.push_str(&format!("valid: {expr}\n"));
    s.push_str(&format!("zone:     {}\n", tz.name()));
    s.push_str(&format!("stored:   {}\n", r.stored));
    s.push_str(&format!("rendered: {}\n", r.rendered));
    for w in &r.warnings {
        s.push_str(&format!(
            "warning[{}]: {}\n  help: {}\n",
            w.code, w.message, w.help
        ));
    }
    if !r.matches.is_empty() {
        s.push('\n');
        for &(t, m) in &r.matches {
            let verdict = if m { "matches" } else { "does not match" };
            s.push_str(&format!("at {} ({}): {verdict}\n", utc(t), local(t, tz)));
        }
    }
    if let Some(from) = from {
        s.push_str(&format!(
            "\nwindows starting after {} ({}):\n",
            utc(from),
            local(from, tz)
        ));
        if r.windows.is_empty() {
            s.push_str("  none within the search horizon\n");
        }
        for w in &r.windows {
            let end = match w.end {
                Some(e) => format!("{} ({})", local(e, tz), utc(e)),
                None => "(still matching at the end of the search horizon)".to_string(),
            };
            s.push_str(&format!(
                "  {} ({}) -> {end}\n",
                local(w.start, tz),
                utc(w.start)
            ));
        }
        s.push_str(&format!("\nreset edges after {}:\n", utc(from)));
        if r.edges.is_empty() {
            s.push_str("  none within the search horizon\n");
        }
        for &e in &r.edges {
            s.push_str(&format!("  {} ({})\n", utc(e), local(e, tz)));
        }
    }
    s
}

fn invalid_text(expr: &str, e: &CronError) -> String {
    let start = expr.get(..e.span.start).map_or(0, |p| p.chars().count());
    let width = expr
        .get(e.span.clone())
        .map_or(1, |p| p.chars().count())
        .max(1);
    let mut s = format!(
        "invalid: {e}\n  {expr}\n  {}{}\n",
        " ".repeat(start),
        "^".repeat(width)
    );
    if let Some(help) = &e.help {
        s.push_str(&format!("help: {help}\n"));
    }
    s
}
