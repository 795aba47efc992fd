//! `limits cfn-template`: a CloudFormation template whose custom resource
//! (`Custom::ZaeLimiterLimits`) makes the stack's provisioner apply the
//! manifest — the reference's template shape (docs/manifest.md, "`limits cfn-template`"), with
//! two fixes: the manifest is validated first (errors as `limits validate`
//! prints them, exit 1, no template), and a limit's `burst` is carried as its
//! capacity instead of being dropped.
//!
//! The template is built from the validated manifest, so values the user left
//! at their defaults are left out (`RefillAmount` equal to the capacity, or 0
//! for a quota; `RefillPeriod` 60; an entry's `Tz` UTC), exactly as the
//! reference leaves out keys the manifest does not write. The YAML is written
//! as PyYAML's `dump(default_flow_style=False, sort_keys=False)` writes it, and
//! like the reference's `click.echo` the output ends with a blank line.

use crate::cli::output;

use crate::cli::args::CfnTemplateArgs;
use crate::cli::CliError;
use crate::manifest::emit::{emit, map, s, Node};
use crate::manifest::model::{Disabled, LevelConfig, LimitSpec, Manifest, Modifier};
use crate::manifest::{load_file, render_text};

const DEFAULT_REFILL_PERIOD: u64 = 60;
const DEFAULT_TZ: &str = "UTC";

fn limit_node(l: &LimitSpec) -> Node {
    let mut m = vec![("Capacity", Node::Int(l.capacity))];
    let default_refill = if l.resets() { 0 } else { l.capacity };
    if l.refill_amount != default_refill {
        m.push(("RefillAmount", Node::Int(l.refill_amount)));
    }
    if l.refill_period != DEFAULT_REFILL_PERIOD {
        m.push(("RefillPeriod", Node::Int(l.refill_period)));
    }
    if let Some(rsa) = l.reset_after_seconds {
        m.push(("ResetAfterSeconds", Node::Int(rsa)));
    }
    if l.soft {
        m.push(("Soft", Node::Bool(true)));
    }
    if !l.schedule.is_empty() {
        let entries = l
            .schedule
            .iter()
            .map(|e| {
                let mut em = vec![("Cron", s(&e.cron))];
                if e.tz != DEFAULT_TZ {
                    em.push(("Tz", s(&e.tz)));
                }
                match &e.modifier {
                    Modifier::Scale(v) => em.push(("Scale", Node::Float(*v))),
                    Modifier::Absolute {
                        capacity,
                        refill_amount,
                        refill_period_seconds,
                    } => {
                        for (k, v) in [
                            ("Capacity", capacity),
                            ("RefillAmount", refill_amount),
                            ("RefillPeriodSeconds", refill_period_seconds),
                        ] {
                            if let Some(v) = v {
                                em.push((k, Node::Int(*v)));
                            }
                        }
                    }
                }
                map(em)
            })
            .collect();
        m.push(("Schedule", Node::List(entries)));
    }
    if !l.reset_schedule.is_empty() {
        let entries = l
            .reset_schedule
            .iter()
            .map(|e| {
                let mut em = vec![("Cron", s(&e.cron))];
                if e.tz != DEFAULT_TZ {
                    em.push(("Tz", s(&e.tz)));
                }
                map(em)
            })
            .collect();
        m.push(("ResetSchedule", Node::List(entries)));
    }
    map(m)
}

fn limits_node(limits: &indexmap::IndexMap<String, LimitSpec>) -> Node {
    Node::Map(
        limits
            .iter()
            .map(|(name, l)| (name.clone(), limit_node(l)))
            .collect(),
    )
}

fn level_node(level: &LevelConfig) -> Node {
    let mut m = vec![("Limits", limits_node(&level.limits))];
    if let Some(d) = level.disabled {
        m.push((
            "Disabled",
            match d {
                Disabled::Disabled => Node::Bool(true),
                Disabled::Enforced => Node::Bool(false),
                Disabled::Bypass => s("bypass"),
            },
        ));
    }
    if let Some(c) = level.cascade {
        m.push(("Cascade", Node::Bool(c)));
    }
    map(m)
}

/// The template for `manifest`, applied by stack `stack`'s provisioner.
fn template(manifest: &Manifest, stack: &str, full: bool) -> Node {
    let mut props = vec![
        (
            "ServiceToken",
            map(vec![(
                "Fn::ImportValue",
                Node::Str(format!("{stack}-ProvisionerArn")),
            )]),
        ),
        ("TableName", s(stack)),
        ("Namespace", s(&manifest.namespace)),
    ];
    if full {
        props.push(("FullApply", Node::Bool(true)));
    }
    if let Some(system) = &manifest.system {
        let mut m = Vec::new();
        if let Some(o) = system.on_unavailable {
            m.push(("OnUnavailable", s(o.as_str())));
        }
        if !system.limits.is_empty() {
            m.push(("Limits", limits_node(&system.limits)));
        }
        props.push(("System", map(m)));
    }
    if !manifest.resources.is_empty() {
        props.push((
            "Resources",
            Node::Map(
                manifest
                    .resources
                    .iter()
                    .map(|(r, level)| (r.clone(), level_node(level)))
                    .collect(),
            ),
        ));
    }
    if !manifest.entities.is_empty() {
        props.push((
            "Entities",
            Node::Map(
                manifest
                    .entities
                    .iter()
                    .map(|(e, resources)| {
                        let rs = Node::Map(
                            resources
                                .iter()
                                .map(|(r, level)| (r.clone(), level_node(level)))
                                .collect(),
                        );
                        (e.clone(), map(vec![("Resources", rs)]))
                    })
                    .collect(),
            ),
        ));
    }
    map(vec![
        ("AWSTemplateFormatVersion", s("2010-09-09")),
        (
            "Description",
            Node::Str(format!(
                "Declarative limits for namespace '{}'",
                manifest.namespace
            )),
        ),
        (
            "Resources",
            map(vec![(
                "TenantLimits",
                map(vec![
                    ("Type", s("Custom::ZaeLimiterLimits")),
                    ("Properties", map(props)),
                ]),
            )]),
        ),
    ])
}

/// Rolling windows and concurrency limits (issue #7), as `level: limit` names,
/// in manifest order. The 0.17 provisioner behind the template cannot express
/// them, so a template must not carry them.
fn non_bucket_limits(m: &Manifest) -> Vec<String> {
    let mut out = Vec::new();
    let mut scan = |level: String, limits: &indexmap::IndexMap<String, LimitSpec>| {
        for (name, l) in limits {
            if l.kind != crate::manifest::model::LimitKind::Bucket {
                out.push(format!("{level} limit '{name}'"));
            }
        }
    };
    if let Some(sys) = &m.system {
        scan("system".into(), &sys.limits);
    }
    for (r, c) in &m.resources {
        scan(format!("resource '{r}'"), &c.limits);
    }
    for (e, rs) in &m.entities {
        for (r, c) in rs {
            scan(format!("entity '{e}' resource '{r}'"), &c.limits);
        }
    }
    out
}

pub fn run(args: CfnTemplateArgs) -> Result<i32, CliError> {
    let loaded = match load_file(&args.file) {
        Ok(l) => l,
        Err(diags) => {
            output::eprint(render_text(&diags));
            return Err(CliError::Reported(crate::exit_codes::FAILURE));
        }
    };
    if !loaded.warnings.is_empty() {
        output::eprint(render_text(&loaded.warnings));
    }
    let foreign = non_bucket_limits(&loaded.manifest);
    if !foreign.is_empty() {
        return Err(CliError::Failed(format!(
            "{}: the reference's provisioner knows only token buckets and quotas, and would apply {} as broken buckets. Apply this manifest with 'zae-limiter limits apply' instead, or remove those limits from the template's manifest",
            args.file.display(),
            foreign.join(", ")
        )));
    }
    let yaml = emit(&template(&loaded.manifest, &args.name, args.full));
    output::println(yaml)?;
    Ok(crate::exit_codes::OK)
}
