//! Lints: traps a valid manifest can hide, reported by `limits validate` as
//! warnings with stable codes (docs/manifest.md, "Lints"), each located on the
//! line that sets the trap, with the fix. They run on a manifest that passed
//! every check, over its located tree and its model together.
//!
//! A limit silences a code on purpose with `lint: {allow: [ZL101]}`; a level
//! (`system`, `resources.<r>`, `entities.<e>.resources.<r>`) with the same key
//! silences it for the level and all its limits. zae-limiter 0.17 ignores
//! unknown keys outside schedule entries, so such a manifest still reads the
//! same there.

use std::collections::{BTreeSet, HashMap, HashSet};

use zae_limiter_engine::cron::{one_value_steps, python_split, CronSpec, OneValueStep};
use zae_limiter_engine::schedule::{Entry, Schedule};
use zae_limiter_engine::zone::zone;

use super::entries::content_column;
use super::fields::join;
use super::model::{LevelConfig, LimitKind, LimitSpec, Manifest};
use super::names::DEFAULT_RESOURCE;
use super::report::Reporter;
use super::values::{as_map, describe};
use super::yaml::{Kind, Node};

/// One lint: its stable code and what it finds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lint {
    pub code: &'static str,
    pub name: &'static str,
    pub summary: &'static str,
}

/// A schedule window whose minute field keeps each window one minute long.
pub const FIXED_MINUTE: &str = "ZL101";
/// A schedule entry an earlier entry always matches first.
pub const SHADOWED_ENTRY: &str = "ZL102";
/// A reset pattern that fires less than once a year, or never.
pub const RARE_RESET: &str = "ZL103";
/// A level of rolling windows or concurrency limits only.
pub const PYTHON_SEES_EMPTY: &str = "ZL104";
/// An entity limit name no resource or system level uses, close to one that does.
pub const UNKNOWN_LIMIT_NAME: &str = "ZL105";
/// A cron range of one value with a step, which cronsim versions read two ways.
pub const ONE_VALUE_STEP: &str = "ZL106";

/// Every lint, in code order (the table in docs/manifest.md).
pub const LINTS: [Lint; 6] = [
    Lint {
        code: FIXED_MINUTE,
        name: "fixed-minute window",
        summary: "a schedule entry whose minute field is fixed (`0 9-17 * * MON-FRI`) is active one minute at a time, not for whole hours",
    },
    Lint {
        code: SHADOWED_ENTRY,
        name: "shadowed schedule entry",
        summary: "an earlier entry matches every minute this one does, and the first match wins, so it never applies",
    },
    Lint {
        code: RARE_RESET,
        name: "rare or never-firing reset",
        summary: "a reset pattern that leaves a year or more without a reset (`0 0 29 2 *`), or never fires (a time a DST change always skips)",
    },
    Lint {
        code: PYTHON_SEES_EMPTY,
        name: "level Python sees as empty",
        summary: "a level holding only rolling windows or concurrency limits: Python 0.17 falls through it to a lower level's buckets, while this tool's runtime resolves it",
    },
    Lint {
        code: UNKNOWN_LIMIT_NAME,
        name: "unknown limit name",
        summary: "an entity limit name no resource or system level uses, close to one that does (`rpn` beside `rpm`)",
    },
    Lint {
        code: ONE_VALUE_STEP,
        name: "one-value range with a step",
        summary: "a cron part such as `5-5/10`: cronsim 2.8 (and this tool) read it as `5/10`, cronsim 2.9 and later as `5` alone, so Python limiters may disagree with this tool",
    },
];

/// The key that carries allow lists, on a limit or a level.
pub const KEY: &str = "lint";

/// Checks a `lint:` value while the manifest loads: a mapping with one key,
/// `allow`, a list of known codes. Every problem is an error.
pub(crate) fn check_allow(r: &mut Reporter, node: &Node, path: &str) {
    let example = "write `lint: {allow: [ZL101]}`";
    let Some(entries) = as_map(node) else {
        r.error(
            node,
            path,
            format!(
                "`lint` must be a mapping with `allow`, got {}",
                describe(node)
            ),
            Some(example.to_string()),
        );
        return;
    };
    for (k, v) in entries {
        let key = k.scalar().map(|s| s.text.as_str()).unwrap_or("");
        if key != "allow" {
            r.error(
                k,
                &join(path, key),
                format!("unknown key `{key}` in `lint`"),
                Some(format!("the only key is `allow`: {example}")),
            );
            continue;
        }
        let p = join(path, "allow");
        let Kind::Seq(items) = &v.kind else {
            r.error(
                v,
                &p,
                format!("`lint.allow` must be a list of codes, got {}", describe(v)),
                Some(example.to_string()),
            );
            continue;
        };
        for (i, item) in items.iter().enumerate() {
            let code = item.scalar().map(|s| s.text.as_str()).unwrap_or("");
            if !LINTS.iter().any(|l| l.code == code) {
                let known: Vec<&str> = LINTS.iter().map(|l| l.code).collect();
                r.error(
                    item,
                    &format!("{p}[{i}]"),
                    format!("`{code}` is not a lint code"),
                    Some(format!("the codes are {}", known.join(", "))),
                );
            }
        }
    }
}

/// The codes a `lint:` value allows (the value was checked on load).
fn allowed(entries: Option<&[(Node, Node)]>) -> BTreeSet<&'static str> {
    let mut out = BTreeSet::new();
    let Some(lint) = entries.and_then(|e| get(e, KEY)).map(|(_, v)| v) else {
        return out;
    };
    let Some(allow) = as_map(lint).and_then(|e| get(e, "allow")).map(|(_, v)| v) else {
        return out;
    };
    if let Kind::Seq(items) = &allow.kind {
        for item in items {
            if let Some(l) = LINTS
                .iter()
                .find(|l| item.scalar().is_some_and(|s| s.text == l.code))
            {
                out.insert(l.code);
            }
        }
    }
    out
}

/// The entry of `key` in a mapping, as (key node, value node).
fn get<'n>(entries: &'n [(Node, Node)], key: &str) -> Option<(&'n Node, &'n Node)> {
    entries
        .iter()
        .find(|(k, _)| k.scalar().is_some_and(|s| s.text == key))
        .map(|(k, v)| (k, v))
}

fn text(n: &Node) -> &str {
    n.scalar().map(|s| s.text.as_str()).unwrap_or("")
}

/// What the lints of one manifest share: the limit names the resource and
/// system levels use, and results per pattern (large manifests repeat a few).
struct Linter<'m> {
    manifest: &'m Manifest,
    /// Limit names of resource and system levels.
    known: HashSet<&'m str>,
    crons: HashMap<&'m str, Option<CronSpec>>,
    rare: HashMap<(&'m str, &'m str), Option<Rarity>>,
}

/// Runs every lint over a manifest that loaded without errors.
pub(crate) fn run(r: &mut Reporter, root: &Node, m: &Manifest) {
    let Some(top) = as_map(root) else { return };
    let mut known: HashSet<&str> = m.resources.values().flat_map(limit_names).collect();
    if let Some(sys) = &m.system {
        known.extend(sys.limits.keys().map(String::as_str));
    }
    let mut l = Linter {
        manifest: m,
        known,
        crons: HashMap::new(),
        rare: HashMap::new(),
    };
    let before = r.diags.len();
    if let (Some((_, node)), Some(sys)) = (get(top, "system"), &m.system) {
        l.level(r, node, "system", &sys.limits, None);
    }
    if let Some(entries) = get(top, "resources").and_then(|(_, v)| as_map(v)) {
        for (k, v) in entries {
            if let Some(cfg) = m.resources.get(text(k)) {
                l.level(r, v, &join("resources", text(k)), &cfg.limits, None);
            }
        }
    }
    if let Some(entries) = get(top, "entities").and_then(|(_, v)| as_map(v)) {
        for (ek, ev) in entries {
            let id = text(ek);
            let Some(levels) = m.entities.get(id) else {
                continue;
            };
            let Some(res) = as_map(ev)
                .and_then(|e| get(e, "resources"))
                .and_then(|(_, v)| as_map(v))
            else {
                continue;
            };
            for (rk, rv) in res {
                let resource = text(rk);
                if let Some(cfg) = levels.get(resource) {
                    let path = format!("entities.{id}.resources.{resource}");
                    l.level(r, rv, &path, &cfg.limits, Some((id, resource)));
                }
            }
        }
    }
    // A limit reached through a YAML alias is linted once per use; report it once.
    let mut seen = HashSet::new();
    let mut i = before;
    while i < r.diags.len() {
        let d = &r.diags[i];
        if seen.insert((d.line, d.column, d.code)) {
            i += 1;
        } else {
            r.diags.remove(i);
        }
    }
}

fn limit_names(cfg: &LevelConfig) -> impl Iterator<Item = &str> {
    cfg.limits.keys().map(String::as_str)
}

impl<'m> Linter<'m> {
    /// One level: its own lint, then each limit's.
    fn level(
        &mut self,
        r: &mut Reporter,
        node: &Node,
        path: &str,
        limits: &'m indexmap::IndexMap<String, LimitSpec>,
        entity: Option<(&str, &str)>,
    ) {
        let entries = as_map(node);
        let level_allow = allowed(entries);
        let Some((limits_key, limits_node)) = entries.and_then(|e| get(e, "limits")) else {
            return;
        };
        // Paths are built only for a warning: most limits have none.
        let limit_path = |name: &str, rest: &str| format!("{path}.limits.{name}{rest}");
        if !limits.is_empty()
            && limits.values().all(|l| l.kind != LimitKind::Bucket)
            && !level_allow.contains(PYTHON_SEES_EMPTY)
        {
            python_sees_empty(r, limits_key, &join(path, "limits"));
        }
        let Some(limit_entries) = as_map(limits_node) else {
            return;
        };
        // The model keeps the tree's order, so the two are walked side by side.
        for (i, (k, v)) in limit_entries.iter().enumerate() {
            let name = text(k);
            let spec = match limits.get_index(i) {
                Some((n, spec)) if n == name => spec,
                _ => match limits.get(name) {
                    Some(spec) => spec,
                    None => continue,
                },
            };
            // Most limits have nothing to check: skip them before any lookup.
            let unknown = entity.is_some() && !self.known.is_empty() && !self.known.contains(name);
            let scheduled = spec.kind == LimitKind::Bucket
                && !(spec.schedule.is_empty() && spec.reset_schedule.is_empty());
            if !unknown && !scheduled {
                continue;
            }
            let fields = as_map(v).unwrap_or(&[]);
            let mut allow = allowed(Some(fields));
            allow.extend(level_allow.iter().copied());
            if let (true, Some((entity, resource))) = (unknown, entity) {
                if !allow.contains(UNKNOWN_LIMIT_NAME) {
                    self.unknown_name(
                        r,
                        k,
                        &|| limit_path(name, ""),
                        name,
                        limits,
                        entity,
                        resource,
                    );
                }
            }
            if !scheduled {
                continue;
            }
            if let Some(Kind::Seq(items)) = get(fields, "schedule").map(|(_, n)| &n.kind) {
                self.schedule(r, items, &|| limit_path(name, ".schedule"), spec, &allow);
            }
            if let Some(Kind::Seq(items)) = get(fields, "reset_schedule").map(|(_, n)| &n.kind) {
                self.resets(
                    r,
                    items,
                    &|| limit_path(name, ".reset_schedule"),
                    spec,
                    &allow,
                );
            }
        }
    }

    /// ZL101, ZL102 and ZL106 over one parameter schedule.
    fn schedule(
        &mut self,
        r: &mut Reporter,
        items: &[Node],
        path: &dyn Fn() -> String,
        spec: &'m LimitSpec,
        allow: &BTreeSet<&'static str>,
    ) {
        let specs: Vec<Option<CronSpec>> = spec
            .schedule
            .iter()
            .map(|e| {
                self.crons
                    .entry(e.cron.as_str())
                    .or_insert_with(|| CronSpec::parse(&e.cron).ok())
                    .clone()
            })
            .collect();
        for (i, (item, entry)) in items.iter().zip(&spec.schedule).enumerate() {
            let Some(cron_node) = as_map(item).and_then(|e| get(e, "cron")).map(|(_, v)| v) else {
                continue;
            };
            let Some(cs) = &specs[i] else { continue };
            let p = || format!("{}[{i}].cron", path());
            if !allow.contains(FIXED_MINUTE) && fixed_minute(cs) {
                report_fixed_minute(r, cron_node, &p(), i, &entry.cron, cs);
            }
            if !allow.contains(ONE_VALUE_STEP) {
                report_one_value_steps(r, cron_node, &p(), ("schedule", i), &entry.cron);
            }
            if allow.contains(SHADOWED_ENTRY) {
                continue;
            }
            let earlier = specs[..i]
                .iter()
                .position(|e| e.as_ref().is_some_and(|e| covers(e, cs)));
            if let Some(k) = earlier {
                r.lint(
                    SHADOWED_ENTRY,
                    cron_node.start.line,
                    cron_node.start.col,
                    span_width(cron_node),
                    &p(),
                    format!(
                        "schedule[{i}] never applies: schedule[{k}] (`{}`) matches every minute `{}` does, and the first matching entry wins",
                        spec.schedule[k].cron, entry.cron
                    ),
                    format!(
                        "move schedule[{i}] before schedule[{k}] if it should win where both match, or remove it"
                    ),
                );
            }
        }
    }

    /// ZL103 and ZL106 over one reset schedule.
    fn resets(
        &mut self,
        r: &mut Reporter,
        items: &[Node],
        path: &dyn Fn() -> String,
        spec: &'m LimitSpec,
        allow: &BTreeSet<&'static str>,
    ) {
        for (i, (item, entry)) in items.iter().zip(&spec.reset_schedule).enumerate() {
            let Some(cron_node) = as_map(item).and_then(|e| get(e, "cron")).map(|(_, v)| v) else {
                continue;
            };
            if !allow.contains(ONE_VALUE_STEP) {
                let p = format!("{}[{i}].cron", path());
                report_one_value_steps(r, cron_node, &p, ("reset_schedule", i), &entry.cron);
            }
            if allow.contains(RARE_RESET) {
                continue;
            }
            let key = (entry.cron.as_str(), entry.tz.as_str());
            let rarity = self
                .rare
                .entry(key)
                .or_insert_with(|| rarity(&entry.cron, &entry.tz))
                .clone();
            let Some(rarity) = rarity else { continue };
            let (message, help) = match rarity {
                Rarity::Never => (
                    format!(
                        "reset_schedule[{i}]: `{}` never fires in {}: every instant it names is one a daylight-saving change skips, so the quota would never reset",
                        entry.cron, entry.tz
                    ),
                    "name a wall time that exists every year (e.g. 03:30 instead of 02:30), or check the pattern with `zae-limiter cron check`".to_string(),
                ),
                Rarity::Rare { first, then } => {
                    let years = ((then - first) as f64 / (365.25 * 86_400_000.0)).round();
                    let every = if years >= 2.0 {
                        format!("about once in {years} years")
                    } else {
                        "with more than a year between resets".to_string()
                    };
                    (
                        format!(
                            "reset_schedule[{i}]: `{}` resets {every} (next {}, then {}), so a quota spent early stays spent that long",
                            entry.cron,
                            crate::clock::rfc3339(first),
                            crate::clock::rfc3339(then)
                        ),
                        "check the pattern with `zae-limiter cron check`; for a yearly reset use a date every year has (`0 0 1 1 *`); add `lint: {allow: [ZL103]}` to the limit if this is meant".to_string(),
                    )
                }
            };
            r.lint(
                RARE_RESET,
                cron_node.start.line,
                cron_node.start.col,
                span_width(cron_node),
                &format!("{}[{i}].cron", path()),
                message,
                help,
            );
        }
    }

    /// ZL105: an entity limit name that no resource or system level uses,
    /// within a typo of one this level leaves out.
    #[allow(clippy::too_many_arguments)]
    fn unknown_name(
        &self,
        r: &mut Reporter,
        key: &Node,
        path: &dyn Fn() -> String,
        name: &str,
        level: &indexmap::IndexMap<String, LimitSpec>,
        entity: &str,
        resource: &str,
    ) {
        if self.known.is_empty() || self.known.contains(name) {
            return;
        }
        // Names of the level this one replaces come first, then the rest, sorted.
        let below: Vec<&str> = self.below(entity, resource);
        let mut others: Vec<&str> = self
            .known
            .iter()
            .copied()
            .filter(|n| !below.contains(n))
            .collect();
        others.sort_unstable();
        let best = below
            .iter()
            .chain(&others)
            .filter(|c| self.known.contains(**c) && !level.contains_key(**c))
            .filter_map(|c| typo_distance(name, c).map(|d| (d, *c)))
            .min_by_key(|(d, _)| *d);
        let Some((_, candidate)) = best else { return };
        let scope = if resource == DEFAULT_RESOURCE {
            format!("entity `{entity}` on every resource without its own level")
        } else {
            format!("entity `{entity}` on `{resource}`")
        };
        r.lint(
            UNKNOWN_LIMIT_NAME,
            key.start.line,
            key.start.col,
            span_width(key),
            &path(),
            format!(
                "limit `{name}` is not a limit of any resource or system level; did you mean `{candidate}`? This level replaces the levels below it as a whole, so `{candidate}` does not apply to {scope}"
            ),
            format!(
                "rename it to `{candidate}`, or add `lint: {{allow: [ZL105]}}` to the limit if `{name}` is meant"
            ),
        );
    }

    /// The limit names of the level an entity level hides, in the order
    /// resolution reads them (the entity's `_default_`, the resource, the system).
    fn below(&self, entity: &str, resource: &str) -> Vec<&'m str> {
        let m = self.manifest;
        let mut out = Vec::new();
        if resource != DEFAULT_RESOURCE {
            if let Some(d) = m.entities.get(entity).and_then(|e| e.get(DEFAULT_RESOURCE)) {
                out.extend(limit_names(d));
            }
            if let Some(res) = m.resources.get(resource) {
                out.extend(limit_names(res));
            }
        }
        if let Some(sys) = &m.system {
            out.extend(sys.limits.keys().map(String::as_str));
        }
        out
    }
}

fn python_sees_empty(r: &mut Reporter, limits_key: &Node, path: &str) {
    r.lint(
        PYTHON_SEES_EMPTY,
        limits_key.start.line,
        limits_key.start.col,
        span_width(limits_key),
        path,
        "this level holds only rolling windows and concurrency limits, which Python 0.17 does not read: to a Python limiter it defines no limits, so it falls through to a lower level's token buckets (entity `_default_`, resource, system), while `zae-limiter acquire` resolves this level",
        "add the token buckets or quotas Python should enforce here too (e.g. the lower level's), or add `lint: {allow: [ZL104]}` to the level if falling through is meant".to_string(),
    );
}

/// The width of a node on its first line.
fn span_width(n: &Node) -> usize {
    if n.end.line == n.start.line && n.end.col > n.start.col {
        n.end.col - n.start.col
    } else {
        1
    }
}

/// All 60 minutes.
const EVERY_MINUTE: u64 = (1 << 60) - 1;

/// Whether every window of a pattern lasts one minute: its minute set is not
/// every minute and holds no two neighbouring minutes (59 and 0 included).
fn fixed_minute(cs: &CronSpec) -> bool {
    let m = cs.minutes;
    m != EVERY_MINUTE && m & (m << 1) == 0 && !(m & 1 != 0 && m & (1 << 59) != 0)
}

fn report_fixed_minute(
    r: &mut Reporter,
    node: &Node,
    path: &str,
    index: usize,
    cron: &str,
    cs: &CronSpec,
) {
    let fields = python_split(cron);
    let Some((range, _)) = fields.first().cloned() else {
        return;
    };
    let rest: Vec<&str> = fields[1..].iter().map(|(_, f)| *f).collect();
    let fixed = format!("* {}", rest.join(" "));
    let minutes = cs.field_values()[0].clone();
    let which = match minutes.as_slice() {
        [one] => format!("minute {one} of each matching hour"),
        _ => "one minute at a time".to_string(),
    };
    let message = format!(
        "schedule[{index}]: `{cron}` is active only at {which}, not for whole hours: a window applies during every minute its pattern matches"
    );
    let help = format!(
        "write `{fixed}` to cover every minute of the matching hours; add `lint: {{allow: [ZL101]}}` to the limit if one-minute windows are meant"
    );
    // The caret on the minute field.
    lint_on_part(r, FIXED_MINUTE, node, path, (cron, range), message, help);
}

/// Reports lint `code` with the caret on bytes `part` of the cron string
/// `cron` when the source spells the string exactly, else on the whole value.
fn lint_on_part(
    r: &mut Reporter,
    code: &'static str,
    node: &Node,
    path: &str,
    (cron, part): (&str, std::ops::Range<usize>),
    message: String,
    help: String,
) {
    let (col, width) = match content_column(r, node, cron) {
        Some(c) => (
            c + cron[..part.start].chars().count(),
            cron[part].chars().count(),
        ),
        None => (node.start.col, span_width(node)),
    };
    r.lint(code, node.start.line, col, width, path, message, help);
}

/// ZL106: each part of `cron` written as a range of one value with a step,
/// with the caret on the part (`at`: the list and index of the entry).
fn report_one_value_steps(
    r: &mut Reporter,
    node: &Node,
    path: &str,
    (list, index): (&str, usize),
    cron: &str,
) {
    for found in one_value_steps(cron) {
        let (message, help) = one_value_step_text(cron, &found);
        lint_on_part(
            r,
            ONE_VALUE_STEP,
            node,
            path,
            (cron, found.span),
            format!("{list}[{index}]: {message}"),
            help,
        );
    }
}

/// ZL106's message and help for one part of `cron`: shared by the manifest
/// lint and `cron check`, which warns about the same pattern on its own.
pub fn one_value_step_text(cron: &str, found: &OneValueStep<'_>) -> (String, String) {
    let (part, value, step) = (&cron[found.span.clone()], found.value, found.step);
    let message = format!(
        "`{part}` in the {} field of `{cron}` is read two ways: as `{value}/{step}` (every {step} from {value} to the field's end) by cronsim 2.8 and this tool, as `{value}` alone by cronsim 2.9 and later; zae-limiter 0.17 runs on either, so Python limiters may disagree with this tool",
        found.field.name()
    );
    let help = format!(
        "write `{value}/{step}` or `{value}`, whichever is meant: both read the same everywhere"
    );
    (message, help)
}

/// Whether pattern `a` matches at every wall-clock minute `b` matches: each
/// field set of `b` within `a`'s, and `a`'s day rule true wherever `b`'s is.
/// (Sufficient, not necessary: a month's length is not considered.)
fn covers(a: &CronSpec, b: &CronSpec) -> bool {
    let within = |x: u64, y: u64| x & !y == 0;
    within(b.minutes, a.minutes)
        && within(b.hours.into(), a.hours.into())
        && within(b.months.into(), a.months.into())
        && (1..=31).all(|d| (1..=7).all(|w| !b.day_matches(d, w) || a.day_matches(d, w)))
}

/// How often a reset pattern fires, when that is a trap.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Rarity {
    /// No edge in the engine's whole search horizon (450 years).
    Never,
    /// A year or more without an edge; the first two edges after [`LINT_FROM_MS`].
    Rare { first: i64, then: i64 },
}

/// Where the reset scans start: a fixed instant, so the lints of a manifest
/// never change with the date they run on (2026-01-01T00:00:00Z).
const LINT_FROM_MS: i64 = 1_767_225_600_000;
const DAY_MS: i64 = 86_400_000;
/// Spans checked for a reset: nine 366-day spans, two leap cycles and more.
const YEAR_SPANS: i64 = 9;

/// `Some` when the pattern leaves a 366-day span without a reset, or never fires.
fn rarity(cron: &str, tz: &str) -> Option<Rarity> {
    let sched = Schedule {
        tz: zone(tz).ok()?,
        entries: vec![Entry {
            cron: cron.to_string(),
            spec: CronSpec::parse(cron).ok()?,
            modifier: None,
        }],
    };
    let Some(first) = sched.next_reset_edge(LINT_FROM_MS) else {
        return Some(Rarity::Never);
    };
    let year = 366 * DAY_MS;
    let gap = (0..YEAR_SPANS).any(|k| {
        let from = LINT_FROM_MS + k * year;
        sched.next_reset_edge(from).is_none_or(|e| e - from > year)
    });
    if !gap {
        return None;
    }
    let then = sched.next_reset_edge(first).unwrap_or(first);
    Some(Rarity::Rare { first, then })
}

/// Units a limit name may end with (`rpm`, `rph`, `tokens_per_day`): two
/// names that differ only there are different limits on purpose.
const UNITS: [&str; 27] = [
    "seconds", "second", "secs", "sec", "minutes", "minute", "mins", "min", "hours", "hour", "hrs",
    "hr", "days", "day", "weeks", "week", "months", "month", "mo", "years", "year", "yr", "s", "m",
    "h", "d", "w",
];

/// The name without a trailing unit, when it ends with one.
fn stem(name: &str) -> Option<&str> {
    UNITS
        .iter()
        .find_map(|u| name.strip_suffix(u))
        .filter(|s| !s.is_empty())
}

/// The edit distance of a likely typo of `candidate`, or `None`: close for
/// the names' length (as "did you mean" for keys), and not a name built on
/// purpose from the same parts: the same stem with another unit (`rph` beside
/// `rpm`), or another short abbreviation with the same unit (`tpd` beside
/// `rpd`: tokens, not requests). A stem of a word or more (`requets_per_day`)
/// is still a typo.
fn typo_distance(name: &str, candidate: &str) -> Option<usize> {
    let d = strsim::damerau_levenshtein(name, candidate);
    let bound = (name.len().max(candidate.len()) / 3).max(1);
    if d == 0 || d > bound || d >= name.len() {
        return None;
    }
    if let (Some(a), Some(b)) = (stem(name), stem(candidate)) {
        if a == b || a.len().min(b.len()) < 4 {
            return None;
        }
    }
    Some(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(cron: &str) -> CronSpec {
        CronSpec::parse(cron).unwrap()
    }

    #[test]
    fn fixed_minute_windows() {
        for cron in [
            "0 9-17 * * MON-FRI",
            "30 * * * *",
            "0,30 9 * * *",
            "*/2 * * * *",
        ] {
            assert!(fixed_minute(&spec(cron)), "{cron}");
        }
        for cron in [
            "* 9-17 * * MON-FRI",
            "0-29 2 * * SUN",
            "0,1 * * * *",
            "0,59 * * * *",
        ] {
            assert!(!fixed_minute(&spec(cron)), "{cron}");
        }
    }

    #[test]
    fn coverage_follows_the_day_rule() {
        assert!(covers(&spec("* * * * *"), &spec("* 9-17 * * MON-FRI")));
        assert!(covers(&spec("* 9-17 * * MON-FRI"), &spec("* 10 * * MON")));
        assert!(!covers(
            &spec("* 9-17 * * MON-FRI"),
            &spec("* * * * SAT,SUN")
        ));
        // OR rule: the 1st or any Monday covers the 1st alone, not Mondays in general.
        assert!(covers(&spec("* * 1 * MON"), &spec("* * 1 * *")));
        assert!(!covers(&spec("* * 1 * *"), &spec("* * 1 * MON")));
        assert!(covers(&spec("* * * 12 *"), &spec("* 9 * 12 *")));
        assert!(!covers(&spec("0 9-17 * * *"), &spec("* 9-17 * * *")));
    }

    #[test]
    fn rare_and_never_firing_resets() {
        assert_eq!(rarity("0 0 * * *", "UTC"), None);
        assert_eq!(
            rarity("0 0 1 1 *", "America/New_York"),
            None,
            "yearly is fine"
        );
        match rarity("0 0 29 2 *", "UTC") {
            Some(Rarity::Rare { first, then }) => {
                assert_eq!(crate::clock::rfc3339(first), "2028-02-29T00:00:00Z");
                assert_eq!(crate::clock::rfc3339(then), "2032-02-29T00:00:00Z");
            }
            other => panic!("{other:?}"),
        }
        // The second Sunday of March at 02:30 is the hour New York skips.
        assert_eq!(
            rarity("30 2 8-14 3 */7", "America/New_York"),
            Some(Rarity::Never)
        );
        assert_eq!(rarity("30 2 8-14 3 */7", "UTC"), None);
    }

    #[test]
    fn typos_but_not_units() {
        assert_eq!(typo_distance("rpn", "rpm"), Some(1));
        assert_eq!(typo_distance("tokns_per_day", "tokens_per_day"), Some(1));
        assert_eq!(typo_distance("rph", "rpm"), None, "another unit");
        assert_eq!(typo_distance("tpd", "rpd"), None, "tokens, not requests");
        assert_eq!(
            typo_distance("requets_per_day", "requests_per_day"),
            Some(1)
        );
        assert_eq!(typo_distance("requests_per_hour", "requests_per_day"), None);
        assert_eq!(typo_distance("session", "rpm"), None);
        assert_eq!(typo_distance("a", "b"), None);
    }
}
