//! `schedule` and `reset_schedule` entries: cron, time zone and modifiers.

use zae_limiter_engine::cron::{CronError, CronSpec};
use zae_limiter_engine::zone::{zone, ZoneError};

use super::diagnostic::Severity;
use super::fields::{fields, join, known_fields, Place};
use super::model::{Modifier, ResetEntry, ScheduleEntry};
use super::report::Reporter;
use super::values::{
    as_map, describe, scale, string_or, whole, Unit, MAX_PERIOD_SECONDS, MAX_TOKENS,
};
use super::yaml::{Kind, Node, Style};

pub const SCHEDULE_KEYS: &[&str] = &[
    "cron",
    "tz",
    "scale",
    "capacity",
    "refill_amount",
    "refill_period_seconds",
];
pub const RESET_KEYS: &[&str] = &["cron", "tz"];

/// Where a time zone came from on an entry, for the one-zone-per-item rule.
pub struct TzUse<'n> {
    pub tz: String,
    /// The `tz` value, or the entry itself when `tz` is omitted (UTC).
    pub node: &'n Node,
    /// The manifest path of the value (`…tz`, or the entry when omitted).
    pub path: String,
    /// The manifest path of the entry, e.g. `resources.r.limits.rpm.schedule[0]`.
    pub entry_path: String,
    pub explicit: bool,
}

/// A schedule entry plus where its `refill_amount` override is (for the reset rule).
pub struct ParsedScheduleEntry<'n> {
    pub entry: ScheduleEntry,
    pub refill_amount_node: Option<&'n Node>,
}

/// Read the `schedule` list. `None` list node or null → no entries.
///
/// An entry with errors is reported and left out, and the others are still
/// returned: the limit's own rules (a drip beside a reset) must see them too,
/// so every error of every entry is reported at once. The caller refuses the
/// limit when anything was reported (`Reporter::errors_since`).
pub fn schedule_list<'n>(
    r: &mut Reporter,
    node: &'n Node,
    path: &str,
    tz_uses: &mut Vec<TzUse<'n>>,
) -> Option<Vec<ParsedScheduleEntry<'n>>> {
    let items = list(r, node, path, "schedule")?;
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let label = format!("schedule[{i}]");
        let p = format!("{path}[{i}]");
        out.extend(schedule_entry(r, item, &p, &label, tz_uses));
    }
    Some(out)
}

/// Read the `reset_schedule` list.
pub fn reset_list<'n>(
    r: &mut Reporter,
    node: &'n Node,
    path: &str,
    tz_uses: &mut Vec<TzUse<'n>>,
) -> Option<Vec<ResetEntry>> {
    let items = list(r, node, path, "reset_schedule")?;
    let mut out = Vec::with_capacity(items.len());
    let mut ok = true;
    for (i, item) in items.iter().enumerate() {
        let label = format!("reset_schedule[{i}]");
        let p = format!("{path}[{i}]");
        match reset_entry(r, item, &p, &label, tz_uses) {
            Some(e) => out.push(e),
            None => ok = false,
        }
    }
    ok.then_some(out)
}

fn list<'n>(r: &mut Reporter, node: &'n Node, path: &str, name: &str) -> Option<&'n [Node]> {
    match &node.kind {
        Kind::Seq(items) => Some(items),
        _ if node.is_null() => Some(&[]),
        _ => {
            r.error(
                node,
                path,
                format!("{name} must be a list of entries, got {}", describe(node)),
                Some(if name == "schedule" {
                    "write each window as a list item: `schedule: [{cron: \"* 9-17 * * MON-FRI\", scale: 0.5}]`".to_string()
                } else {
                    "write each reset as a list item: `reset_schedule: [{cron: \"0 0 * * *\", tz: UTC}]`".to_string()
                }),
            );
            None
        }
    }
}

fn schedule_entry<'n>(
    r: &mut Reporter,
    node: &'n Node,
    path: &str,
    label: &str,
    tz_uses: &mut Vec<TzUse<'n>>,
) -> Option<ParsedScheduleEntry<'n>> {
    let Some(entries) = as_map(node) else {
        r.error(
            node,
            path,
            format!("{label} must be a mapping, got {}", describe(node)),
            Some(
                "write the entry as `- cron: \"* 9-17 * * MON-FRI\"` with `scale:` or absolute overrides on the lines below"
                    .to_string(),
            ),
        );
        return None;
    };
    let before = r.diags.len();
    let f = known_fields(r, entries, SCHEDULE_KEYS, "schedule entry", label, path);
    let (cron, tz) = cron_and_tz(r, node, &f, path, label, false, tz_uses);

    // Modifiers: exactly one of `scale` or the absolute overrides. Null means absent.
    let present = |k: &str| f.get(k).filter(|n| !n.is_null());
    let scale_node = present("scale");
    let abs_keys: Vec<&str> = ["capacity", "refill_amount", "refill_period_seconds"]
        .into_iter()
        .filter(|k| present(k).is_some())
        .collect();
    let exactly_one = "a schedule entry must set exactly one of `scale` or the absolute fields (`capacity`/`refill_amount`/`refill_period_seconds`)";
    let modifier = match (scale_node, abs_keys.is_empty()) {
        (Some(sn), false) => {
            r.error(
                f.key("scale").unwrap_or(sn),
                &join(path, "scale"),
                format!("{label}: {exactly_one}"),
                Some(format!(
                    "remove `scale` or remove {}: a window either scales the base parameters or replaces them",
                    abs_keys.iter().map(|k| format!("`{k}`")).collect::<Vec<_>>().join(", ")
                )),
            );
            None
        }
        (None, true) => {
            r.error(
                f.key("cron").unwrap_or(node),
                path,
                format!("{label}: {exactly_one}"),
                Some("add `scale: 0.5` (half the base parameters) or an override such as `capacity: 2000`".to_string()),
            );
            None
        }
        (Some(sn), true) => scale(r, sn, &join(path, "scale")).map(Modifier::Scale),
        (None, false) => {
            // Each override present is a whole number from 1 (`Some(None)`: present, invalid).
            let mut override_of = |key: &str, max: u64, unit: Unit| {
                present(key).map(|n| whole(r, n, &join(path, key), key, 1, max, unit))
            };
            let cap = override_of("capacity", MAX_TOKENS, Unit::Tokens);
            let ra = override_of("refill_amount", MAX_TOKENS, Unit::Tokens);
            let rp = override_of("refill_period_seconds", MAX_PERIOD_SECONDS, Unit::Seconds);
            let bad = [cap, ra, rp].iter().any(|v| matches!(v, Some(None)));
            (!bad).then_some(Modifier::Absolute {
                capacity: cap.flatten(),
                refill_amount: ra.flatten(),
                refill_period_seconds: rp.flatten(),
            })
        }
    };
    if r.errors_since(before) {
        return None;
    }
    Some(ParsedScheduleEntry {
        entry: ScheduleEntry {
            cron: cron?,
            tz: tz?,
            modifier: modifier?,
        },
        refill_amount_node: present("refill_amount"),
    })
}

fn reset_entry<'n>(
    r: &mut Reporter,
    node: &'n Node,
    path: &str,
    label: &str,
    tz_uses: &mut Vec<TzUse<'n>>,
) -> Option<ResetEntry> {
    let Some(entries) = as_map(node) else {
        r.error(
            node,
            path,
            format!("{label} must be a mapping, got {}", describe(node)),
            Some("write the entry as `- cron: \"0 0 * * *\"` with an optional `tz:`".to_string()),
        );
        return None;
    };
    let before = r.diags.len();
    let f = fields(
        r,
        entries,
        RESET_KEYS,
        &Place {
            context: "reset entry",
            label,
            path,
            unknown_help: Some(
                "A reset entry carries `cron` and `tz` only: it names the instant the balance goes back to the effective capacity and overrides no parameters.",
            ),
        },
        |_| false,
    );
    let (cron, tz) = cron_and_tz(r, node, &f, path, label, true, tz_uses);
    if r.errors_since(before) {
        return None;
    }
    Some(ResetEntry {
        cron: cron?,
        tz: tz?,
    })
}

/// `cron` (required) and `tz` (default UTC), both checked; records the zone use.
fn cron_and_tz<'n>(
    r: &mut Reporter,
    entry: &'n Node,
    f: &super::fields::Fields<'n>,
    path: &str,
    label: &str,
    is_reset: bool,
    tz_uses: &mut Vec<TzUse<'n>>,
) -> (Option<String>, Option<String>) {
    let tz = match f.get("tz") {
        None => {
            tz_uses.push(TzUse {
                tz: "UTC".into(),
                node: f.key("cron").unwrap_or(entry),
                path: path.to_string(),
                entry_path: path.to_string(),
                explicit: false,
            });
            Some("UTC".to_string())
        }
        Some(n) => {
            let p = join(path, "tz");
            let help = "a time zone is an IANA name such as UTC or Europe/Paris; omit `tz` for UTC";
            match string_or(r, n, &p, "tz", Some(help)) {
                None => None,
                Some(name) => match zone(name) {
                    Ok(_) => {
                        tz_uses.push(TzUse {
                            tz: name.to_string(),
                            node: n,
                            path: p,
                            entry_path: path.to_string(),
                            explicit: true,
                        });
                        Some(name.to_string())
                    }
                    Err(e) => {
                        let (msg, help) = zone_message(&e);
                        r.error(n, &p, format!("{label}: {msg}"), Some(help));
                        None
                    }
                },
            }
        }
    };
    let cron = match f.get("cron") {
        None => {
            r.error(
                entry,
                path,
                format!("{label} is missing the required `cron` field"),
                Some(if is_reset {
                    "add `cron: \"0 0 * * *\"` (the instant the quota resets; here midnight)".to_string()
                } else {
                    "add `cron: \"* 9-17 * * MON-FRI\"` (every minute the window is active; here business hours)".to_string()
                }),
            );
            None
        }
        Some(n) => {
            let p = join(path, "cron");
            let help =
                "a cron pattern is a quoted string of 5 fields, e.g. cron: \"0 9 * * MON-FRI\"";
            match string_or(r, n, &p, "cron", Some(help)) {
                None => None,
                Some(text) => check_cron(r, n, &p, label, text, is_reset).then(|| text.to_string()),
            }
        }
    };
    (cron, tz)
}

fn zone_message(e: &ZoneError) -> (String, String) {
    let help_iana =
        "use an IANA time zone name such as UTC, Europe/Paris or America/New_York; names are case-sensitive; omit `tz` for UTC";
    match e {
        ZoneError::Empty => (
            "tz is empty".to_string(),
            "omit `tz` for UTC, or write a zone name such as Europe/Paris".to_string(),
        ),
        ZoneError::Path(name) => (
            format!("unknown timezone '{name}': a zone is a name, not a file path"),
            help_iana.to_string(),
        ),
        ZoneError::Unknown {
            name,
            suggestion: Some(s),
        } => (
            format!("unknown timezone '{name}'"),
            format!("did you mean '{s}'? zone names are case-sensitive"),
        ),
        ZoneError::Unknown { name, .. } => {
            (format!("unknown timezone '{name}'"), help_iana.to_string())
        }
    }
}

/// Parse the pattern with the engine; on failure point the caret at the bad field
/// inside the string when the source text maps 1:1 onto it.
fn check_cron(
    r: &mut Reporter,
    node: &Node,
    path: &str,
    label: &str,
    text: &str,
    is_reset: bool,
) -> bool {
    match CronSpec::parse(text) {
        Ok(_) => {
            if is_reset && text.split_whitespace().all(|f| f == "*") {
                r.error(
                    node,
                    path,
                    format!(
                        "{label}: a reset at `{text}` never fires: it matches every minute, so there is no edge into matching, and it would be stored as an empty schedule that no reader can decode"
                    ),
                    Some("name the instant the quota resets, e.g. `0 0 * * *` (midnight) or `0 0 1 * *` (the first of the month)".to_string()),
                );
                return false;
            }
            true
        }
        Err(e) => {
            report_cron_error(r, node, path, label, text, &e);
            false
        }
    }
}

fn report_cron_error(
    r: &mut Reporter,
    node: &Node,
    path: &str,
    label: &str,
    text: &str,
    e: &CronError,
) {
    let message = format!("{label}: invalid cron expression '{text}': {}", e.message);
    let help = e.help.clone();
    // Column of the string's first character, when the source spells it exactly.
    let content_col = content_column(r, node, text);
    match (content_col, e.span.is_empty()) {
        (Some(col), false) if e.span.end <= text.len() => {
            let before = text[..e.span.start].chars().count();
            let width = text[e.span.clone()].chars().count();
            r.at(
                Severity::Error,
                node.start.line,
                col + before,
                width,
                path,
                message,
                help,
            );
        }
        _ => r.error(node, path, message, help),
    }
}

/// The 1-based column where the scalar's content starts, if its source text on
/// that line is exactly the content (plain, or quoted without escapes).
pub(crate) fn content_column(r: &Reporter, node: &Node, text: &str) -> Option<usize> {
    let Kind::Scalar(s) = &node.kind else {
        return None;
    };
    let offset = match s.style {
        Style::Plain => 0,
        Style::Quoted => 1,
        Style::Block => return None,
    };
    let line = r.source_line(node.start.line);
    let start = node.start.col - 1 + offset;
    let source: String = line
        .chars()
        .skip(start)
        .take(text.chars().count())
        .collect();
    (source == text).then_some(node.start.col + offset)
}
