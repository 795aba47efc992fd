//! Adoption against the real Python library on moto (docs/adopt.md): a
//! namespace filled by Python's `set_system_defaults`, `set_resource_defaults`
//! and `set_limits` (and levels its provisioner wrote, which no registry
//! lists) is exported by ours; the export validates; `limits plan` of it shows
//! no level change; `limits apply` adopts (writes no level, records the
//! managed set); a second plan is clean; and Python resolves every pair to
//! exactly what it resolved before.

mod common;
mod interop_support;

use interop_support::{interop, resolve_args, Interop};
use serde_json::Value;

const PROVISIONED: &str = "\
namespace: default
resources:
  legacy-api:
    limits:
      rph:
        capacity: 3000
        refill_period: 3600
entities:
  svc-1:
    resources:
      legacy-api:
        limits:
          rph:
            capacity: 100
            refill_period: 3600
            schedule:
              - cron: \"* 0-6 * * *\"
                scale: 2
";

/// The config items of the table (levels and registries), by key.
fn config_items(it: &Interop) -> Vec<Value> {
    it.dump()
        .into_iter()
        .filter(|i| {
            let sk = i["SK"]["S"].as_str().unwrap_or("");
            sk.starts_with("#CONFIG") || sk == "#RESOURCES" || sk == "#ENTITY_CONFIG_RESOURCES"
        })
        .collect()
}

fn ours(it: &Interop, args: &[&str]) -> (i32, String, String) {
    let mut a = args.to_vec();
    a.extend(["-n", &it.table, "--endpoint-url", &it.endpoint]);
    let out = it.ours(&a);
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_namespace_python_filled_is_exported_planned_clean_and_adopted() {
    let Some(it) = interop("export") else { return };
    let t = it.table.clone();
    it.reference(&["create-table", &t]);
    it.reference(&["set-fixture", &t, "default"]);
    // Levels the reference's provisioner wrote: no registry entry, no GSI3 keys.
    let provisioned = it.write_file("provisioned.yaml", PROVISIONED);
    it.reference(&["provision", &t, "apply", &provisioned.to_string_lossy()]);
    let pairs = [
        "user-1/gpt-4",
        "user-1/claude-3",
        "user-2/claude-3",
        "nobody/gpt-4",
        "svc-1/legacy-api",
        "nobody/legacy-api",
    ];
    let before_resolve = it.reference(&resolve_args(&t, &pairs));
    let before_items = config_items(&it);

    let out = it.write_file("exported.yaml", "");
    let out = out.to_string_lossy();
    let (code, _, err) = ours(&it, &["limits", "export", "-o", &out]);
    assert_eq!(code, 0, "{err}");
    let text = std::fs::read_to_string(&*out).unwrap();
    for level in [
        "system:",
        "on_unavailable: allow",
        "  gpt-4:",
        "  claude-3:",
        "  legacy-api:",
        "  user-1:",
        "      _default_:",
        "  user-2:",
        "  svc-1:",
        "cron: \"* 9-17 * * MON-FRI\"",
        "disabled: bypass",
        "cascade: true",
        "soft: true",
        "reset_after_seconds: 18000",
        "tz: Europe/Berlin",
    ] {
        assert!(
            text.contains(level),
            "{level} missing from the export:\n{text}"
        );
    }
    let (code, vout, _) = ours_local(&it, &["limits", "validate", &out]);
    assert_eq!(code, 0, "{vout}");

    // The plan changes no level (the #PROVISIONER record names only the
    // provisioner's two levels, so the rest are creates whose content matches).
    let (code, plan, err) = ours(&it, &["limits", "plan", "-f", &out, "--detailed-exitcode"]);
    assert_eq!(code, 0, "{plan}{err}");
    assert!(plan.starts_with("No changes."), "{plan}");

    // Apply adopts: no level is written, the record names every level.
    let (code, applied, err) = ours(&it, &["limits", "apply", "-f", &out]);
    assert_eq!(code, 0, "{applied}{err}");
    assert!(applied.starts_with("No changes."), "{applied}");
    assert_eq!(
        config_items(&it),
        before_items,
        "apply wrote no level or registry"
    );
    let record = it
        .dump()
        .into_iter()
        .find(|i| i["SK"]["S"] == "#PROVISIONER")
        .expect("the record");
    let resources = record["managed_resources"]["L"].to_string();
    for r in ["gpt-4", "claude-3", "legacy-api"] {
        assert!(resources.contains(r), "{r} not managed: {record}");
    }
    assert_eq!(record["managed_system"]["BOOL"], true, "{record}");

    // A second plan is clean; Python resolves as before.
    let (code, plan, err) = ours(&it, &["limits", "plan", "-f", &out, "--detailed-exitcode"]);
    assert_eq!(code, 0, "{plan}{err}");
    assert!(plan.starts_with("No changes."), "{plan}");
    assert_eq!(it.reference(&resolve_args(&t, &pairs)), before_resolve);
}

/// Ours, with no store flags (validate).
fn ours_local(it: &Interop, args: &[&str]) -> (i32, String, String) {
    let out = it.ours(args);
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}
