//! Rendering plan, diff and apply results.
//!
//! **Text** keeps the reference's lines word for word (spec manifest-cli.md
//! docs/manifest.md, "Plan, diff and apply output": `Plan:`, `Drift detected:`,
//! `Applied:`, `No changes…`, `Note:`, `Errors (K):`, the `+ ~ -` symbols and
//! two-space indents) and adds, under each change, its attribute-level detail
//! indented six spaces (`      rpm.capacity: 500 → 600`); `-q` hides the change
//! list and the detail.
//!
//! **JSON** (`--format json`) is one document, version 1:
//!
//! ```json
//! {
//!   "version": 1,
//!   "command": "plan" | "diff" | "apply",
//!   "status": "planned" | "applied",
//!   "namespace": "prod",
//!   "changes": [
//!     {"action": "create" | "update" | "delete",
//!      "level": "system" | "resource" | "entity",
//!      "target": null | "gpt-4" | "user-1/gpt-4",
//!      "details": [{"op": "+" | "-" | "~" | "!", "path": "rpm.capacity",
//!                   "old": "500", "new": "600"}]}
//!   ],
//!   "unchanged": 1,
//!   "pending": 0,
//!   "pending_retry_after": null | "2026-12-03T11:32:34Z",
//!   "full": false,
//!   "resumed": false,
//!   "warnings": ["…"],
//!   "register_namespace": false,
//!   "created": 1, "updated": 0, "deleted": 0,   // apply only
//!   "errors": ["…"]                              // apply only
//! }
//! ```
//!
//! `old` is absent for `+`, `new` for `-`; `!` marks a level whose item cannot
//! be built (its message in `new`). `register_namespace` is true when the
//! namespace is not registered yet (plan and diff: apply registers it before
//! its changes; apply: this apply registered it). Fields are only ever added within version 1.

use serde_json::{json, Value};

use crate::plan::prepare::PlannedChange;

/// Which command is rendering.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    Plan,
    Diff,
    Apply,
}

impl Command {
    pub fn as_str(self) -> &'static str {
        match self {
            Command::Plan => "plan",
            Command::Diff => "diff",
            Command::Apply => "apply",
        }
    }
}

/// What an apply sets up before its changes, as plan and diff find it: they
/// must say so, since apply does it (docs/plan-apply.md, "A plan before the
/// first apply").
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Setup {
    /// The table and the namespace exist.
    #[default]
    Ready,
    /// The namespace is not registered yet: apply registers it.
    Namespace,
    /// The local store has no such table (name) yet: apply creates it and
    /// registers the namespace.
    Table(String),
}

/// Counts and errors only an apply has.
#[derive(Debug, Clone, Default)]
pub struct ApplyCounts {
    pub created: usize,
    pub updated: usize,
    pub deleted: usize,
    pub errors: Vec<String>,
}

/// Everything any of the three commands reports.
#[derive(Debug, Clone)]
pub struct Report<'a> {
    pub command: Command,
    pub namespace: &'a str,
    pub changes: &'a [PlannedChange],
    pub unchanged: usize,
    pub pending: usize,
    /// Some pending fan-outs are leased until then (epoch ms): no apply takes
    /// them before it.
    pub pending_leased_until: Option<i64>,
    pub full: bool,
    pub resumed: bool,
    pub warnings: Vec<String>,
    /// What apply sets up first (plan and diff), or set up (apply: at most
    /// [`Setup::Namespace`], when it registered the namespace).
    pub setup: Setup,
    /// `Some` for apply.
    pub applied: Option<ApplyCounts>,
}

/// What to print where.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rendered {
    pub stdout: String,
    pub stderr: String,
}

fn target(pc: &PlannedChange) -> String {
    let t = pc.change.level.target();
    if t.is_empty() {
        "(system defaults)".to_string()
    } else {
        t
    }
}

fn suffix(unchanged: usize) -> String {
    if unchanged > 0 {
        format!(" ({unchanged} unchanged)")
    } else {
        String::new()
    }
}

/// When the pending fan-outs are retried: by the next apply (the
/// reference's words), or, while the lease of the apply that left them runs,
/// by the first apply after it ends.
fn retry_when(r: &Report<'_>) -> String {
    match r.pending_leased_until {
        None => "the next apply".to_string(),
        Some(ms) => format!(
            "the first apply after {} (when the lease of the apply that left them runs out)",
            crate::clock::rfc3339(ms.saturating_add(999) / 1000 * 1000)
        ),
    }
}

fn retried_line(r: &Report<'_>) -> String {
    format!(
        "No config changes; {} bucket fan-out(s) an earlier apply did not finish will be retried by {}.\n",
        r.pending,
        retry_when(r)
    )
}

fn note_line(r: &Report<'_>) -> String {
    let when = retry_when(r);
    let when = when.strip_prefix("the ").unwrap_or(&when);
    format!(
        "Note: {} bucket fan-out(s) an earlier apply did not finish; the {when} retries them.\n",
        r.pending
    )
}

/// Plan's and diff's line on what apply sets up first, if anything; apply's
/// on what it set up.
fn setup_line(r: &Report<'_>) -> Option<String> {
    let ns = r.namespace;
    match &r.setup {
        Setup::Ready => None,
        Setup::Namespace if r.command == Command::Apply => {
            Some(format!("Registered namespace '{ns}'.\n"))
        }
        Setup::Namespace => Some(format!(
            "Note: namespace '{ns}' is not registered yet; apply registers it first.\n"
        )),
        Setup::Table(table) => Some(format!(
            "Note: table '{table}' does not exist in the local store yet; apply creates it and registers namespace '{ns}' first.\n"
        )),
    }
}

/// Plan's and diff's summary line when no level changes but apply still
/// sets something up: the exit code (2 with `--detailed-exitcode`) counts it
/// as a change, so the summary must not say there is none.
fn setup_only_line(r: &Report<'_>) -> Option<String> {
    let ns = r.namespace;
    let line = match (&r.setup, r.command) {
        (Setup::Ready, _) | (_, Command::Apply) => return None,
        (Setup::Namespace, Command::Plan) => {
            format!("Plan: no level changes; apply registers namespace '{ns}'.\n")
        }
        (Setup::Namespace, Command::Diff) => format!(
            "Drift detected: namespace '{ns}' is not registered yet (apply registers it).\n"
        ),
        (Setup::Table(table), Command::Plan) => format!(
            "Plan: no level changes; apply creates table '{table}' in the local store and registers namespace '{ns}'.\n"
        ),
        (Setup::Table(table), Command::Diff) => format!(
            "Drift detected: table '{table}' does not exist in the local store yet (apply creates it and registers namespace '{ns}').\n"
        ),
    };
    Some(line)
}

fn change_lines(out: &mut String, r: &Report<'_>) {
    for pc in r.changes {
        let c = &pc.change;
        match r.command {
            Command::Diff => out.push_str(&format!(
                "  {} {}: {}\n",
                c.action.symbol(),
                c.level.kind().as_str(),
                target(pc)
            )),
            _ => out.push_str(&format!(
                "  {} {} {}: {}\n",
                c.action.symbol(),
                c.action.as_str(),
                c.level.kind().as_str(),
                target(pc)
            )),
        }
        for d in &pc.details {
            out.push_str("      ");
            out.push_str(&d.render());
            out.push('\n');
        }
    }
}

/// After a plan's or diff's summary line: the note on pending fan-outs, then
/// (unless `quiet`) a blank line and the changes.
fn note_then_changes(out: &mut String, r: &Report<'_>, quiet: bool) {
    out.extend(setup_line(r));
    if r.pending > 0 {
        out.push_str(&note_line(r));
    }
    if !quiet {
        out.push('\n');
        change_lines(out, r);
    }
}

/// The text form. `quiet` (`-q`) prints only the summary lines.
pub fn text(r: &Report<'_>, quiet: bool) -> Rendered {
    let mut out = String::new();
    let mut err = String::new();
    let n = r.changes.len();
    for w in &r.warnings {
        err.push_str(&format!("Warning: {w}\n"));
    }
    match r.command {
        Command::Plan => {
            if n == 0 {
                if let Some(line) = setup_only_line(r) {
                    // No level changes, but apply still writes.
                    out.push_str(&line);
                    if r.pending > 0 {
                        out.push_str(&note_line(r));
                    }
                } else if r.pending > 0 {
                    out.push_str(&retried_line(r));
                } else {
                    out.push_str("No changes. Infrastructure is up-to-date.\n");
                }
            } else {
                out.push_str(&format!("Plan: {n} change(s){}\n", suffix(r.unchanged)));
                note_then_changes(&mut out, r, quiet);
            }
        }
        Command::Diff => {
            if n == 0 {
                out.push_str(
                    &setup_only_line(r)
                        .unwrap_or_else(|| "No drift detected. Live state matches YAML.\n".into()),
                );
                if r.pending > 0 {
                    out.push_str(&note_line(r));
                }
            } else {
                out.push_str(&format!(
                    "Drift detected: {n} difference(s){}\n",
                    suffix(r.unchanged)
                ));
                note_then_changes(&mut out, r, quiet);
            }
        }
        Command::Apply => {
            let counts = r.applied.clone().unwrap_or_default();
            // What this apply set up, unless its summary line says it.
            let mut setup = setup_line(r);
            if n == 0 {
                if !counts.errors.is_empty() {
                    out.push_str(
                        "No config changes; retried fan-outs did not finish (see errors).\n",
                    );
                } else if r.pending > 0 {
                    out.push_str(&retried_line(r));
                } else if r.setup == Setup::Namespace {
                    setup = None;
                    out.push_str(&format!(
                        "Registered namespace '{}'; no level changes.\n",
                        r.namespace
                    ));
                } else {
                    out.push_str("No changes. Infrastructure is up-to-date.\n");
                }
            } else {
                if !quiet {
                    change_lines(&mut out, r);
                    out.push('\n');
                }
                out.push_str(&format!(
                    "Applied: {} created, {} updated, {} deleted{}.\n",
                    counts.created,
                    counts.updated,
                    counts.deleted,
                    suffix(r.unchanged)
                ));
                if r.pending > 0 {
                    out.push_str(&note_line(r));
                }
            }
            out.extend(setup);
            if r.resumed {
                out.push_str("Note: resumed the fan-outs an earlier full apply did not finish, instead of starting over.\n");
            }
            if !counts.errors.is_empty() {
                err.push_str(&format!("\nErrors ({}):\n", counts.errors.len()));
                for e in &counts.errors {
                    err.push_str(&format!("  - {e}\n"));
                }
            }
        }
    }
    Rendered {
        stdout: out,
        stderr: err,
    }
}

/// One change as the JSON document lists it (a saved plan adds the items).
pub fn change_json(pc: &PlannedChange) -> Value {
    let t = pc.change.level.target();
    json!({
        "action": pc.change.action.as_str(),
        "level": pc.change.level.kind().as_str(),
        "target": if t.is_empty() { Value::Null } else { Value::String(t) },
        "details": pc.details,
    })
}

/// The JSON document (see the module doc for its shape).
pub fn json(r: &Report<'_>) -> Value {
    let changes: Vec<Value> = r.changes.iter().map(change_json).collect();
    let mut doc = json!({
        "version": 1,
        "command": r.command.as_str(),
        "status": if r.command == Command::Apply { "applied" } else { "planned" },
        "namespace": r.namespace,
        "changes": changes,
        "unchanged": r.unchanged,
        "pending": r.pending,
        "pending_retry_after": r.pending_leased_until.map(crate::clock::rfc3339),
        "full": r.full,
        "resumed": r.resumed,
        "warnings": r.warnings,
    });
    if let Some(obj) = doc.as_object_mut() {
        obj.insert("register_namespace".into(), json!(r.setup != Setup::Ready));
    }
    if let (Some(c), Some(obj)) = (&r.applied, doc.as_object_mut()) {
        obj.insert("created".into(), json!(c.created));
        obj.insert("updated".into(), json!(c.updated));
        obj.insert("deleted".into(), json!(c.deleted));
        obj.insert("errors".into(), json!(c.errors));
    }
    doc
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::detail::Detail;
    use crate::plan::level::{Action, Change, Level};

    fn pc(action: Action, level: Level) -> PlannedChange {
        PlannedChange {
            change: Change::new(action, level),
            desired: None,
            live: None,
            details: vec![],
        }
    }

    fn report<'a>(command: Command, changes: &'a [PlannedChange]) -> Report<'a> {
        Report {
            command,
            namespace: "d",
            changes,
            unchanged: 0,
            pending: 0,
            pending_leased_until: None,
            full: false,
            resumed: false,
            warnings: vec![],
            setup: Setup::Ready,
            applied: None,
        }
    }

    #[test]
    fn plan_and_diff_lines_match_the_reference() {
        let mut changes = vec![
            pc(Action::Delete, Level::System),
            pc(Action::Update, Level::Resource("gpt-4".into())),
        ];
        changes[1].details.push(Detail {
            op: "~",
            path: "rpm.capacity".into(),
            old: Some("500".into()),
            new: Some("600".into()),
        });
        let mut r = report(Command::Plan, &changes);
        r.unchanged = 1;
        assert_eq!(
            text(&r, false).stdout,
            "Plan: 2 change(s) (1 unchanged)\n\n  - delete system: (system defaults)\n  ~ update resource: gpt-4\n      rpm.capacity: 500 → 600\n"
        );
        assert_eq!(text(&r, true).stdout, "Plan: 2 change(s) (1 unchanged)\n");
        r.command = Command::Diff;
        r.pending = 1;
        assert_eq!(
            text(&r, false).stdout,
            "Drift detected: 2 difference(s) (1 unchanged)\nNote: 1 bucket fan-out(s) an earlier apply did not finish; the next apply retries them.\n\n  - system: (system defaults)\n  ~ resource: gpt-4\n      rpm.capacity: 500 → 600\n"
        );
    }

    /// What apply sets up first is said by plan and diff, with or without
    /// level changes, and in their JSON (apply's says whether it registered).
    #[test]
    fn plan_and_diff_say_what_apply_sets_up() {
        let changes = [pc(Action::Create, Level::System)];
        let mut r = report(Command::Plan, &changes);
        r.setup = Setup::Namespace;
        let note = "Note: namespace 'd' is not registered yet; apply registers it first.\n";
        assert_eq!(text(&r, true).stdout, format!("Plan: 1 change(s)\n{note}"));
        assert_eq!(json(&r)["register_namespace"], true);
        // No level changes: the summary line still says what apply does,
        // as the exit code (2 with --detailed-exitcode) counts it.
        r.changes = &[];
        assert_eq!(
            text(&r, false).stdout,
            "Plan: no level changes; apply registers namespace 'd'.\n"
        );
        r.command = Command::Diff;
        assert_eq!(
            text(&r, false).stdout,
            "Drift detected: namespace 'd' is not registered yet (apply registers it).\n"
        );
        r.setup = Setup::Table("t".into());
        assert_eq!(
            text(&r, false).stdout,
            "Drift detected: table 't' does not exist in the local store yet (apply creates it and registers namespace 'd').\n"
        );
        r.command = Command::Plan;
        assert_eq!(
            text(&r, true).stdout,
            "Plan: no level changes; apply creates table 't' in the local store and registers namespace 'd'.\n"
        );
        r.command = Command::Diff;
        r.changes = &changes;
        assert_eq!(
            text(&r, true).stdout,
            "Drift detected: 1 difference(s)\nNote: table 't' does not exist in the local store yet; apply creates it and registers namespace 'd' first.\n"
        );
        assert_eq!(json(&r)["register_namespace"], true);
        r.setup = Setup::Ready;
        assert_eq!(json(&r)["register_namespace"], false);
    }

    /// Apply says it registered the namespace: after its summary line, or
    /// as its summary line when no level changed (not "No changes").
    #[test]
    fn apply_says_it_registered_the_namespace() {
        let changes = [pc(Action::Create, Level::System)];
        let mut r = report(Command::Apply, &changes);
        r.setup = Setup::Namespace;
        r.applied = Some(ApplyCounts {
            created: 1,
            ..Default::default()
        });
        assert_eq!(
            text(&r, true).stdout,
            "Applied: 1 created, 0 updated, 0 deleted.\nRegistered namespace 'd'.\n"
        );
        assert_eq!(json(&r)["register_namespace"], true);
        r.changes = &[];
        r.applied = Some(ApplyCounts::default());
        assert_eq!(
            text(&r, false).stdout,
            "Registered namespace 'd'; no level changes.\n"
        );
        r.setup = Setup::Ready;
        assert_eq!(
            text(&r, false).stdout,
            "No changes. Infrastructure is up-to-date.\n"
        );
        assert_eq!(json(&r)["register_namespace"], false);
    }

    #[test]
    fn no_change_lines() {
        let r = report(Command::Plan, &[]);
        assert_eq!(
            text(&r, false).stdout,
            "No changes. Infrastructure is up-to-date.\n"
        );
        let mut r = report(Command::Diff, &[]);
        assert_eq!(
            text(&r, false).stdout,
            "No drift detected. Live state matches YAML.\n"
        );
        r.command = Command::Plan;
        r.pending = 1;
        assert_eq!(
            text(&r, false).stdout,
            "No config changes; 1 bucket fan-out(s) an earlier apply did not finish will be retried by the next apply.\n"
        );
        // While the lease of the apply that left them runs, not the next apply.
        r.pending_leased_until = Some(1_796_218_335_001);
        assert_eq!(
            text(&r, false).stdout,
            "No config changes; 1 bucket fan-out(s) an earlier apply did not finish will be retried by the first apply after 2026-12-02T13:32:16Z (when the lease of the apply that left them runs out).\n"
        );
        assert_eq!(json(&r)["pending_retry_after"], "2026-12-02T13:32:15.001Z");
        let changes = [pc(Action::Create, Level::System)];
        let mut planned = r.clone();
        planned.changes = &changes;
        assert!(text(&planned, true).stdout.contains(
            "Note: 1 bucket fan-out(s) an earlier apply did not finish; the first apply after 2026-12-02T13:32:16Z (when the lease of the apply that left them runs out) retries them.\n"
        ));
        r.pending_leased_until = None;
        assert_eq!(json(&r)["pending_retry_after"], Value::Null);
        r.command = Command::Apply;
        r.applied = Some(ApplyCounts {
            errors: vec!["bucket param sync entity u/r: boom (retried on the next apply)".into()],
            ..Default::default()
        });
        let t = text(&r, false);
        assert_eq!(
            t.stdout,
            "No config changes; retried fan-outs did not finish (see errors).\n"
        );
        assert_eq!(
            t.stderr,
            "\nErrors (1):\n  - bucket param sync entity u/r: boom (retried on the next apply)\n"
        );
    }

    #[test]
    fn apply_lines_and_json() {
        let changes = vec![pc(
            Action::Create,
            Level::Entity("user-1".into(), "gpt-4".into()),
        )];
        let mut r = report(Command::Apply, &changes);
        r.applied = Some(ApplyCounts {
            created: 1,
            ..Default::default()
        });
        r.resumed = true;
        assert_eq!(
            text(&r, false).stdout,
            "  + create entity: user-1/gpt-4\n\nApplied: 1 created, 0 updated, 0 deleted.\nNote: resumed the fan-outs an earlier full apply did not finish, instead of starting over.\n"
        );
        let j = json(&r);
        assert_eq!(j["version"], 1);
        assert_eq!(j["status"], "applied");
        assert_eq!(j["changes"][0]["target"], "user-1/gpt-4");
        assert_eq!(j["created"], 1);
        let plan = json(&report(Command::Plan, &[pc(Action::Create, Level::System)]));
        assert_eq!(plan["changes"][0]["target"], Value::Null);
        assert!(plan.get("errors").is_none());
    }
}
