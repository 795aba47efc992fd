//! Located YAML tree → validated [`Manifest`], by hand, checking every rule of
//! the reference's rules plus the fixes for what it accepts but should not
//! (docs/manifest.md, "Decisions"). Every problem is reported; conversion carries on past
//! each one so a single run shows them all.

use indexmap::IndexMap;

use super::entries::{reset_list, schedule_list, TzUse};
use super::fields::{fields, join, key_name, known_fields, Fields, Place};
use super::kinds::{self, Declared};
use super::lint;
use super::model::{Disabled, LevelConfig, LimitSpec, Manifest, OnUnavailable, SystemLevel};
use super::names::{
    check_entity_id, check_limit_name, check_namespace, check_resource_name, NameProblem,
    DEFAULT_RESOURCE,
};
use super::report::Reporter;
use super::values::{
    as_map, boolean, describe, describe_scalar, is_yaml11_bool, string, whole, Unit,
    MAX_PERIOD_SECONDS, MAX_TOKENS,
};
use super::yaml::{Kind, Node, Scalar, Style, Value};
use zae_limiter_engine::limit::{self as limit_rules, LimitError};

const TOP_KEYS: &[&str] = &["namespace", "system", "resources", "entities"];
const SYSTEM_KEYS: &[&str] = &["limits", "on_unavailable", "cascade", "disabled", "lint"];
const LEVEL_KEYS: &[&str] = &["limits", "disabled", "cascade", "lint"];
const ENTITY_KEYS: &[&str] = &["resources"];
pub(crate) const LIMIT_KEYS: &[&str] = &[
    "capacity",
    "burst",
    "refill_amount",
    "refill_period",
    "schedule",
    "reset_schedule",
    "reset_after_seconds",
    "soft",
    "window",
    "rolling",
    "concurrency",
    "hold_ttl_seconds",
    "lint",
];

/// Default `refill_period` in seconds.
pub const DEFAULT_REFILL_PERIOD: u64 = 60;

/// Convert the document root. Returns the manifest only when no error was found
/// (warnings may have been reported).
pub(crate) fn convert(r: &mut Reporter, root: Option<&Node>) -> Option<Manifest> {
    let Some(root) = root else {
        r.at(
            super::diagnostic::Severity::Error,
            1,
            1,
            1,
            "",
            "the manifest is empty",
            Some("a manifest needs at least `namespace: <name>`".into()),
        );
        return None;
    };
    let Some(entries) = as_map(root) else {
        r.error(
            root,
            "",
            format!(
                "a manifest must be a mapping with `namespace` at the top, got {}",
                describe(root)
            ),
            Some("start the file with `namespace: default`".to_string()),
        );
        return None;
    };
    let f = fields(
        r,
        entries,
        TOP_KEYS,
        &Place {
            context: "top level",
            label: "the manifest",
            path: "",
            unknown_help: Some("Keys starting with `x-` are ignored (a place for YAML anchors)."),
        },
        |k| k.starts_with("x-"),
    );

    let namespace = match f.get("namespace") {
        None => {
            r.at(
                super::diagnostic::Severity::Error,
                root.start.line,
                root.start.col,
                1,
                "namespace",
                "'namespace' is required in limits manifest",
                Some("add `namespace: <name>` at the top level, e.g. `namespace: default`".into()),
            );
            None
        }
        Some(n) => namespace(r, n),
    };

    let system = f.get("system").and_then(|n| {
        let key = f.key("system").unwrap_or(n);
        system(r, key, n)
    });
    let resources = match f.get("resources") {
        None => Some(IndexMap::new()),
        Some(n) => resources(r, f.key("resources").unwrap_or(n), n),
    };
    let entities = match f.get("entities") {
        None => Some(IndexMap::new()),
        Some(n) => entities(r, f.key("entities").unwrap_or(n), n),
    };

    if let (Some(res_node), Some(resources)) = (f.get("resources"), resources.as_ref()) {
        cascade_warnings(r, res_node, resources, entities.as_ref(), f.get("entities"));
    }

    if r.has_errors() {
        return None;
    }
    Some(Manifest {
        namespace: namespace?,
        system: match f.get("system") {
            Some(_) => Some(system?),
            None => None,
        },
        resources: resources?,
        entities: entities?,
    })
}

fn namespace(r: &mut Reporter, n: &Node) -> Option<String> {
    let name = match &n.kind {
        Kind::Scalar(Scalar {
            value: Value::Null, ..
        }) => {
            r.error(
                n,
                "namespace",
                "'namespace' is required in limits manifest",
                Some("write the namespace name, e.g. `namespace: default`".to_string()),
            );
            return None;
        }
        _ => string(r, n, "namespace", "namespace")?,
    };
    if let Some(p) = check_namespace(name) {
        r.error(n, "namespace", p.message, Some(p.help));
        return None;
    }
    warn_yaml11_name(r, n, "namespace", "namespace");
    Some(name.to_string())
}

/// A container key given as null or a wrong type.
fn container<'n>(
    r: &mut Reporter,
    key: &Node,
    node: &'n Node,
    path: &str,
    what: &str,
    example: &str,
) -> Option<&'n [(Node, Node)]> {
    if let Some(entries) = as_map(node) {
        return Some(entries);
    }
    if node.is_null() {
        r.error(
            key,
            path,
            format!("`{path}` is empty (null); it must be {what}"),
            Some(format!(
                "write `{}: {{}}` for none, or remove the key; {example}",
                last(path)
            )),
        );
    } else {
        r.error(
            node,
            path,
            format!("`{path}` must be {what}, got {}", describe(node)),
            Some(example.to_string()),
        );
    }
    None
}

fn last(path: &str) -> &str {
    path.rsplit('.').next().unwrap_or(path)
}

fn system(r: &mut Reporter, key: &Node, n: &Node) -> Option<SystemLevel> {
    let entries = container(
        r,
        key,
        n,
        "system",
        "a mapping",
        "e.g. `system: {limits: {rpm: {capacity: 1000}}, on_unavailable: allow}`",
    )?;
    let before = r.diags.len();
    let f = known_fields(r, entries, SYSTEM_KEYS, "system", "system", "system");
    for flag in ["cascade", "disabled"] {
        if let Some(k) = f.key(flag) {
            r.error(
                k,
                &format!("system.{flag}"),
                format!("system: '{flag}' is not supported at the system level"),
                Some(
                    "set it on resources.<name> or entities.<id>.resources.<name>, or remove it"
                        .to_string(),
                ),
            );
        }
    }
    let mut tz_uses = Vec::new();
    let limits = match f.get("limits") {
        None => Some(IndexMap::new()),
        Some(l) => limits(
            r,
            f.key("limits").unwrap_or(l),
            l,
            "system.limits",
            &mut tz_uses,
        ),
    };
    check_one_zone(r, &tz_uses, "system");
    if let Some(n) = f.get(lint::KEY) {
        lint::check_allow(r, n, "system.lint");
    }
    let on_unavailable = match f.get("on_unavailable") {
        None => None,
        Some(v) if v.is_null() => None,
        Some(v) => on_unavailable(r, v),
    };
    if r.errors_since(before) {
        return None;
    }
    Some(SystemLevel {
        limits: limits?,
        on_unavailable,
    })
}

fn on_unavailable(r: &mut Reporter, v: &Node) -> Option<OnUnavailable> {
    let path = "system.on_unavailable";
    let help = "`allow` admits requests when the table cannot be read; `block` refuses them";
    match v.scalar() {
        Some(Scalar {
            text,
            value: Value::Str,
            ..
        }) => match text.as_str() {
            "allow" => Some(OnUnavailable::Allow),
            "block" => Some(OnUnavailable::Block),
            other => {
                let lower = other.trim().to_ascii_lowercase();
                let fix = if lower == "allow" || lower == "block" {
                    format!("write `{lower}` (lower case); {help}")
                } else {
                    help.to_string()
                };
                r.error(
                    v,
                    path,
                    format!("on_unavailable must be `allow` or `block`, got '{other}'"),
                    Some(fix),
                );
                None
            }
        },
        _ => {
            r.error(
                v,
                path,
                format!(
                    "on_unavailable must be `allow` or `block`, got {}",
                    describe(v)
                ),
                Some(help.to_string()),
            );
            None
        }
    }
}

fn resources(r: &mut Reporter, key: &Node, n: &Node) -> Option<IndexMap<String, LevelConfig>> {
    let entries = container(
        r,
        key,
        n,
        "resources",
        "a mapping of resource name to its settings",
        "e.g. `resources: {gpt-4: {limits: {rpm: {capacity: 500}}}}`",
    )?;
    named(r, entries, "resources", |r, (k, v), name, path| {
        let name_ok = if name == DEFAULT_RESOURCE {
            r.error(
                k,
                path,
                "`_default_` is not a resource: it names an entity's limits on every resource",
                Some("put it under an entity: `entities.<id>.resources._default_`".to_string()),
            );
            false
        } else {
            good_name(r, k, path, check_resource_name(name), "resource name")
        };
        let cfg = level(r, k, v, path, &format!("resource `{name}`"), "resource");
        (name_ok, cfg)
    })
}

type EntityMap = IndexMap<String, IndexMap<String, LevelConfig>>;

fn entities(r: &mut Reporter, key: &Node, n: &Node) -> Option<EntityMap> {
    let entries = container(
        r,
        key,
        n,
        "entities",
        "a mapping of entity id to its settings",
        "e.g. `entities: {user-1: {resources: {gpt-4: {limits: {rpm: {capacity: 50}}}}}}`",
    )?;
    named(r, entries, "entities", |r, (k, v), id, path| {
        let name_ok = good_name(r, k, path, check_entity_id(id), "entity id");
        (name_ok, entity(r, k, v, path, id))
    })
}

fn entity(
    r: &mut Reporter,
    key: &Node,
    v: &Node,
    path: &str,
    id: &str,
) -> Option<IndexMap<String, LevelConfig>> {
    let example = format!(
        "write `{id}: {{resources: {{gpt-4: {{limits: {{rpm: {{capacity: 50}}}}}}}}}}` (or `_default_` for every resource)"
    );
    let entries = settings(
        r,
        (key, v),
        path,
        &format!("entity `{id}`"),
        "`resources`",
        (example.clone(), example),
    )?;
    let f = known_fields(
        r,
        entries,
        ENTITY_KEYS,
        "entity",
        &format!("entity `{id}`"),
        path,
    );
    let Some(res) = f.get("resources") else {
        return Some(IndexMap::new());
    };
    let res_path = join(path, "resources");
    let entries = container(
        r,
        f.key("resources").unwrap_or(res),
        res,
        &res_path,
        "a mapping of resource name (or `_default_`) to its settings",
        "e.g. `resources: {_default_: {limits: {rpm: {capacity: 50}}}}`",
    )?;
    named(r, entries, &res_path, |r, (k, v), name, p| {
        let name_ok = name == DEFAULT_RESOURCE
            || good_name(r, k, p, check_resource_name(name), "resource name");
        let label = format!("entities.{id}.resources.{name}");
        (name_ok, level(r, k, v, p, &label, "entity resource"))
    })
}

/// The entries of a mapping of names at `path`, each converted by `each`
/// (given its key and value, its name and path), which also says whether the
/// name is acceptable. Every entry is converted, so every error is reported;
/// `None` when any name or value was refused.
fn named<'n, T>(
    r: &mut Reporter,
    entries: &'n [(Node, Node)],
    path: &str,
    mut each: impl FnMut(&mut Reporter, (&'n Node, &'n Node), &str, &str) -> (bool, Option<T>),
) -> Option<IndexMap<String, T>> {
    let mut out = IndexMap::with_capacity(entries.len());
    let mut ok = true;
    for (k, v) in entries {
        let Some(name) = key_name(r, k, path) else {
            ok = false;
            continue;
        };
        let (name_ok, value) = each(r, (k, v), name, &join(path, name));
        ok &= name_ok;
        match value {
            Some(value) => {
                out.insert(name.to_string(), value);
            }
            None => ok = false,
        }
    }
    ok.then_some(out)
}

/// Reports `problem` with the name at `key`, or warns when the name reads as
/// a YAML 1.1 boolean; whether the name is acceptable.
fn good_name(
    r: &mut Reporter,
    key: &Node,
    path: &str,
    problem: Option<NameProblem>,
    what: &str,
) -> bool {
    match problem {
        Some(p) => {
            r.error(key, path, p.message, Some(p.help));
            false
        }
        None => {
            warn_yaml11_name(r, key, path, what);
            true
        }
    }
}

/// The settings of `label` (the value `v` of `key`): a mapping with `keys`.
/// Null and anything else are errors, with `help` (for null, for the rest).
fn settings<'n>(
    r: &mut Reporter,
    (key, v): (&Node, &'n Node),
    path: &str,
    label: &str,
    keys: &str,
    help: (String, String),
) -> Option<&'n [(Node, Node)]> {
    if let Some(entries) = as_map(v) {
        return Some(entries);
    }
    if v.is_null() {
        let message = format!("{label} has no settings (null)");
        r.error(key, path, message, Some(help.0));
    } else {
        let message = format!("{label} must be a mapping with {keys}, got {}", describe(v));
        r.error(v, path, message, Some(help.1));
    }
    None
}

/// A resource level or an entity-resource level.
fn level(
    r: &mut Reporter,
    key: &Node,
    v: &Node,
    path: &str,
    label: &str,
    context: &'static str,
) -> Option<LevelConfig> {
    let entries = settings(
        r,
        (key, v),
        path,
        label,
        "`limits`, `disabled` or `cascade`",
        (
            format!(
                "write `{}: {{}}` to manage it with no limits, or give it `limits:`",
                last(path)
            ),
            "e.g. `{limits: {rpm: {capacity: 500}}}`".to_string(),
        ),
    )?;
    let before = r.diags.len();
    let f = known_fields(r, entries, LEVEL_KEYS, context, label, path);
    let mut tz_uses = Vec::new();
    let limits = match f.get("limits") {
        None => Some(IndexMap::new()),
        Some(l) => limits(
            r,
            f.key("limits").unwrap_or(l),
            l,
            &join(path, "limits"),
            &mut tz_uses,
        ),
    };
    check_one_zone(r, &tz_uses, path);
    if let Some(n) = f.get(lint::KEY) {
        lint::check_allow(r, n, &join(path, lint::KEY));
    }
    let disabled = f
        .get("disabled")
        .and_then(|n| disabled(r, n, &join(path, "disabled")));
    let cascade = match f.get("cascade") {
        None => None,
        Some(n) if n.is_null() => None,
        Some(n) => Some(boolean(r, n, &join(path, "cascade"), "cascade")),
    };
    if r.errors_since(before) {
        return None;
    }
    Some(LevelConfig {
        limits: limits?,
        disabled: disabled.flatten(),
        cascade: cascade.flatten(),
    })
}

/// `disabled`: Some(None) for null (inherit), Some(Some(..)) for a value, None on error.
fn disabled(r: &mut Reporter, n: &Node, path: &str) -> Option<Option<Disabled>> {
    let msg = |got: String| format!("disabled: must be true, false or 'bypass', got {got}");
    let help = "true stops enforcing, false enforces (an explicit carve-out), bypass admits everything but still counts";
    match n.scalar() {
        Some(Scalar {
            value: Value::Null, ..
        }) => Some(None),
        Some(Scalar {
            value: Value::Bool(true),
            ..
        }) => Some(Some(Disabled::Disabled)),
        Some(Scalar {
            value: Value::Bool(false),
            ..
        }) => Some(Some(Disabled::Enforced)),
        Some(Scalar {
            text,
            value: Value::Str,
            ..
        }) if text == "bypass" => Some(Some(Disabled::Bypass)),
        Some(s) => {
            let fix = if let Some(b) = is_yaml11_bool(s) {
                format!(
                    "write `{b}`: `{}` is a boolean only in YAML 1.1; YAML 1.2 reads it as a string",
                    s.text
                )
            } else if s.text.eq_ignore_ascii_case("bypass") {
                "write `bypass` in lower case".to_string()
            } else if s.style == Style::Quoted && (s.text == "true" || s.text == "false") {
                format!("remove the quotes: disabled: {}", s.text)
            } else {
                help.to_string()
            };
            let got = if is_yaml11_bool(s).is_some() {
                format!("`{}`", s.text)
            } else {
                describe_scalar(s)
            };
            r.error(n, path, msg(got), Some(fix));
            None
        }
        None => {
            r.error(n, path, msg(describe(n)), Some(help.to_string()));
            None
        }
    }
}

fn limits<'n>(
    r: &mut Reporter,
    key: &Node,
    n: &'n Node,
    path: &str,
    tz_uses: &mut Vec<TzUse<'n>>,
) -> Option<IndexMap<String, LimitSpec>> {
    let entries = container(
        r,
        key,
        n,
        path,
        "a mapping of limit name to limit",
        "e.g. `limits: {rpm: {capacity: 100}}`",
    )?;
    limits_entries(r, entries, path, tz_uses)
}

fn limits_entries<'n>(
    r: &mut Reporter,
    entries: &'n [(Node, Node)],
    path: &str,
    tz_uses: &mut Vec<TzUse<'n>>,
) -> Option<IndexMap<String, LimitSpec>> {
    named(r, entries, path, |r, (k, v), name, p| {
        let problem = check_limit_name(name);
        let name_ok = problem.is_none();
        if let Some(problem) = problem {
            r.error(k, p, problem.message, Some(problem.help));
        }
        (name_ok, limit(r, k, v, p, name, tz_uses))
    })
}

fn limit<'n>(
    r: &mut Reporter,
    key: &'n Node,
    v: &'n Node,
    path: &str,
    name: &str,
    tz_uses: &mut Vec<TzUse<'n>>,
) -> Option<LimitSpec> {
    let Some(entries) = as_map(v) else {
        let example = match v.scalar() {
            Some(Scalar {
                value: Value::Int(i),
                ..
            }) if *i > 0 => format!("write `{name}: {{capacity: {i}}}` ({i} per minute)"),
            _ => format!("write `{name}: {{capacity: 100}}` (100 per minute)"),
        };
        r.error(
            v,
            path,
            format!(
                "limit `{name}` must be a mapping with at least `capacity`, got {}",
                describe(v)
            ),
            Some(example),
        );
        return None;
    };
    let before = r.diags.len();
    let f = known_fields(
        r,
        entries,
        LIMIT_KEYS,
        "limit",
        &format!("limit `{name}`"),
        path,
    );
    if let Some(n) = f.get(lint::KEY) {
        lint::check_allow(r, n, &join(path, lint::KEY));
    }
    let declared = kinds::declared(r, &f, path, name);
    if !matches!(declared, Declared::Bucket) {
        return counted_otherwise(r, key, &f, path, name, &declared, before);
    }
    let tokens = |r: &mut Reporter, k: &str, min: u64| {
        f.get(k)
            .map(|n| whole(r, n, &join(path, k), k, min, MAX_TOKENS, Unit::Tokens))
    };

    let capacity = match tokens(r, "capacity", 1) {
        Some(c) => c,
        None => {
            let help = if f.has("burst") {
                "`burst` is a legacy alias that overrides `capacity`, but `capacity` is still required: rename `burst` to `capacity`"
            } else {
                "every limit needs `capacity`, the bucket ceiling in whole tokens, e.g. `capacity: 100` (100 per minute)"
            };
            r.error(
                key,
                path,
                format!("limit `{name}` has no `capacity`"),
                Some(help.to_string()),
            );
            None
        }
    };
    let burst = tokens(r, "burst", 1);
    let refill_amount = tokens(r, "refill_amount", 0);
    let refill_period = f.get("refill_period").map(|n| {
        whole(
            r,
            n,
            &join(path, "refill_period"),
            "refill_period",
            1,
            MAX_PERIOD_SECONDS,
            Unit::Seconds,
        )
    });
    let reset_after = match f.get("reset_after_seconds") {
        Some(n) if !n.is_null() => Some(whole(
            r,
            n,
            &join(path, "reset_after_seconds"),
            "reset_after_seconds",
            1,
            MAX_PERIOD_SECONDS,
            Unit::Seconds,
        )),
        _ => None,
    };
    let schedule = match f.get("schedule") {
        None => Some(Vec::new()),
        Some(n) => schedule_list(r, n, &join(path, "schedule"), tz_uses),
    };
    let reset_schedule = match f.get("reset_schedule") {
        None => Some(Vec::new()),
        Some(n) => reset_list(r, n, &join(path, "reset_schedule"), tz_uses),
    };
    let soft = match f.get("soft") {
        None => Some(false),
        Some(n) => boolean(r, n, &join(path, "soft"), "soft"),
    };

    let has_reset_schedule = reset_schedule.as_ref().is_some_and(|s| !s.is_empty())
        || f.get("reset_schedule")
            .is_some_and(|n| matches!(&n.kind, Kind::Seq(items) if !items.is_empty()));
    let has_reset_after = f.get("reset_after_seconds").is_some_and(|n| !n.is_null());
    // The recovery rules are the engine's; this reports each where it applies.
    let given_ra = match (refill_amount, f.get("refill_amount")) {
        (Some(Some(ra)), Some(_)) => Some(i128::from(ra)),
        _ => None,
    };
    let broken = limit_rules::recovery_problems(given_ra, has_reset_schedule, has_reset_after);
    if broken.contains(&LimitError::BothResets) {
        if let Some(n) = f.get("reset_after_seconds") {
            r.error(
                n,
                &join(path, "reset_after_seconds"),
                "a limit has one recovery mechanism: `reset_after_seconds` names a window anchored to the entity's own first use and `reset_schedule` names fixed calendar instants. Use one.",
                Some("remove `reset_after_seconds` for a calendar quota, or `reset_schedule` for a session quota".to_string()),
            );
        }
    }
    let resets = has_reset_schedule || has_reset_after;
    let mechanism = if has_reset_after {
        "reset_after_seconds"
    } else {
        "reset_schedule"
    };

    if let (Some(Some(ra)), Some(n)) = (refill_amount, f.get("refill_amount")) {
        let p = join(path, "refill_amount");
        if broken.contains(&LimitError::NoRecovery) {
            r.error(
                n,
                &p,
                "refill_amount=0 means the limit does not drip, which is only valid on a quota that resets; otherwise the bucket can never recover",
                Some("add `reset_schedule` (a calendar quota) or `reset_after_seconds` (a session quota), or give a positive refill_amount (omitted, it defaults to capacity)".to_string()),
            );
        } else if broken.contains(&LimitError::DripsAndResets) {
            r.error(
                n,
                &p,
                format!(
                    "a limit drips or resets, never both: a positive refill_amount ({ra}) alongside {mechanism} grants roughly twice the intended allowance per period"
                ),
                Some("omit refill_amount: on a quota it defaults to 0".to_string()),
            );
        }
    }
    if let Some(entries) = schedule.as_ref() {
        for (i, e) in entries.iter().enumerate() {
            if let (
                Some(n),
                super::model::Modifier::Absolute {
                    refill_amount: Some(ra),
                    ..
                },
            ) = (e.refill_amount_node, &e.entry.modifier)
            {
                if limit_rules::check_window_refill(resets, Some(i128::from(*ra))).is_ok() {
                    continue;
                }
                r.error(
                    n,
                    &format!("{path}.schedule[{i}].refill_amount"),
                    format!(
                        "schedule[{i}] sets refill_amount={ra} on a limit that also has {mechanism}. A limit drips or resets, never both, and that holds inside every scheduled window as well as at the base"
                    ),
                    Some("remove refill_amount from the entry; override capacity or refill_period_seconds instead".to_string()),
                );
            }
        }
    }

    if r.errors_since(before) {
        return None;
    }
    let capacity = match burst {
        Some(b) => b?,
        None => capacity?,
    };
    let refill_amount = match refill_amount {
        Some(v) => v?,
        None if resets => 0,
        None => capacity,
    };
    Some(LimitSpec {
        capacity,
        refill_amount,
        refill_period: refill_period.unwrap_or(Some(DEFAULT_REFILL_PERIOD))?,
        schedule: schedule?.into_iter().map(|e| e.entry).collect(),
        reset_schedule: reset_schedule?,
        reset_after_seconds: reset_after.flatten(),
        soft: soft?,
        kind: Default::default(),
    })
}

/// A rolling window or a concurrency limit (the kind keys are checked by
/// [`kinds::declared`]): the amount and `soft`. The bucket fields it does not
/// use hold inert values (no refill, the default period, no schedules).
fn counted_otherwise(
    r: &mut Reporter,
    key: &Node,
    f: &Fields<'_>,
    path: &str,
    name: &str,
    declared: &Declared,
    before: usize,
) -> Option<LimitSpec> {
    let capacity = match declared {
        Declared::Concurrency(c) => c.map(|(slots, _)| slots),
        Declared::Rolling(_) | Declared::Bucket => match f.get("capacity") {
            Some(n) => whole(
                r,
                n,
                &join(path, "capacity"),
                "capacity",
                1,
                MAX_TOKENS,
                Unit::Tokens,
            ),
            None => {
                r.error(
                    key,
                    path,
                    format!("limit `{name}` has no `capacity`"),
                    Some("a rolling window's amount is `capacity`: the most allowed in any window-length span, e.g. `capacity: 1000`".to_string()),
                );
                None
            }
        },
    };
    let soft = match f.get("soft") {
        None => Some(false),
        Some(n) => boolean(r, n, &join(path, "soft"), "soft"),
    };
    if r.errors_since(before) {
        return None;
    }
    Some(LimitSpec {
        capacity: capacity?,
        refill_amount: 0,
        refill_period: DEFAULT_REFILL_PERIOD,
        schedule: Vec::new(),
        reset_schedule: Vec::new(),
        reset_after_seconds: None,
        soft: soft?,
        kind: kinds::kind_of(declared)?,
    })
}

/// All schedule and reset entries on one config item share one zone (stored once as
/// `sched_tz`). The first entry's zone is the item's; every other zone is an error.
fn check_one_zone(r: &mut Reporter, uses: &[TzUse<'_>], item: &str) {
    let Some(first) = uses.first() else { return };
    for u in &uses[1..] {
        if u.tz == first.tz {
            continue;
        }
        let this = if u.explicit {
            format!("'{}'", u.tz)
        } else {
            "'UTC' (tz omitted)".to_string()
        };
        let other = if first.explicit {
            format!("'{}'", first.tz)
        } else {
            "'UTC' (tz omitted)".to_string()
        };
        r.error(
            u.node,
            &u.path,
            format!(
                "all scheduled limits on one config item must share a timezone: this entry uses {this}, but {} uses {other}",
                first.entry_path
            ),
            Some(format!(
                "the timezone is stored once per item (`sched_tz`), not per limit: give every schedule and reset_schedule entry of `{}` the same `tz`",
                if item.is_empty() { "the item" } else { item }
            )),
        );
    }
}

/// Names that YAML 1.1 reads as booleans differ between readers: warn.
fn warn_yaml11_name(r: &mut Reporter, n: &Node, path: &str, what: &str) {
    if let Some(s) = n.scalar() {
        if let Some(b) = is_yaml11_bool(s) {
            if matches!(
                s.text.to_ascii_lowercase().as_str(),
                "yes" | "no" | "on" | "off"
            ) {
                r.warning(
                    n,
                    path,
                    format!(
                        "{what} `{}` is read as the string '{}' here, but as the boolean {b} by YAML 1.1 tools (the Python zae-limiter CLI)",
                        s.text, s.text
                    ),
                    Some(format!("quote it (\"{}\") so every reader agrees", s.text)),
                );
            }
        }
    }
}

/// The cascade warning (docs/manifest.md, "Decisions"): `resources.{name}` with
/// `cascade: true` and no entity declaring that resource (or `_default_`)
/// limits parents by the per-user resource defaults.
fn cascade_warnings(
    r: &mut Reporter,
    res_node: &Node,
    resources: &IndexMap<String, LevelConfig>,
    entities: Option<&EntityMap>,
    entities_node: Option<&Node>,
) {
    let declared = |name: &str| -> bool {
        match entities {
            Some(e) => e
                .values()
                .any(|res| res.contains_key(name) || res.contains_key(DEFAULT_RESOURCE)),
            // Entities failed to convert: fall back to the raw keys.
            None => raw_entity_resources(entities_node)
                .iter()
                .any(|k| k == name || k == DEFAULT_RESOURCE),
        }
    };
    let Some(entries) = as_map(res_node) else {
        return;
    };
    for (name, cfg) in resources {
        if cfg.cascade != Some(true) || declared(name) {
            continue;
        }
        let node = entries
            .iter()
            .find(|(k, _)| k.scalar().is_some_and(|s| &s.text == name))
            .and_then(|(_, v)| as_map(v))
            .and_then(|e| {
                e.iter()
                    .find(|(k, _)| k.scalar().is_some_and(|s| s.text == "cascade"))
            })
            .map(|(_, v)| v);
        if let Some(node) = node {
            r.warning(
                node,
                &format!("resources.{name}.cascade"),
                format!(
                    "resources.{name} sets cascade: true, but no entity in this manifest has its own limits for '{name}', so parents will be limited by the per-user resource defaults"
                ),
                Some(format!(
                    "give the parent entities their own limits under `entities.<id>.resources.{name}` (or `_default_`), or remove `cascade: true`"
                )),
            );
        }
    }
}

fn raw_entity_resources(entities: Option<&Node>) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(entries) = entities.and_then(as_map) {
        for (_, e) in entries {
            if let Some(res) = as_map(e)
                .and_then(|m| {
                    m.iter()
                        .find(|(k, _)| k.scalar().is_some_and(|s| s.text == "resources"))
                })
                .and_then(|(_, v)| as_map(v))
            {
                out.extend(
                    res.iter()
                        .filter_map(|(k, _)| k.scalar().map(|s| s.text.clone())),
                );
            }
        }
    }
    out
}
