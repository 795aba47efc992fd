//! `zae-limiter limits export` through the binary, on the local store:
//! apply → export → the export validates, equals its golden, and plans with
//! no change, for every valid fixture (every limit kind, flags, schedules,
//! quotas); a table the Python client wrote (the reference's raw dump); and
//! levels the manifest format cannot express, which are named and left out.
//! (Against DynamoDB and the Python library itself: tests/interop_export.rs.)
//!
//! Goldens: `fixtures/export/NAME.yaml` is the export of
//! `fixtures/manifests/valid/NAME.yaml` after applying it;
//! `ZAEL_BLESS=1 cargo test --test cli_export` rewrites them.

mod common;

use std::path::{Path, PathBuf};

use common::{ok_in as ok, run_in as run};

use zae_limiter::store::local::LocalStore;
use zae_limiter::store::typed_json::item_from_str;
use zae_limiter::store::{Store, WriteOp};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn golden(name: &str, actual: &str) {
    let path = root().join("fixtures/export").join(name);
    if std::env::var_os("ZAEL_BLESS").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        want == actual,
        "{} differs (ZAEL_BLESS=1 rewrites it):\n--- want\n{want}\n--- got\n{actual}",
        path.display()
    );
}

/// Export `namespace` of table `tbl` in `dir` to `out.yaml`, check that it
/// validates (without a warning when `silent`) and that a plan of it reports
/// no change; returns its text.
fn export_and_plan(dir: &Path, namespace: &str, silent: bool) -> String {
    let (code, _, err) = export(dir, &["-N", namespace, "-o", "out.yaml"]);
    assert_eq!(code, 0, "{err}");
    let text = std::fs::read_to_string(dir.join("out.yaml")).unwrap();
    let deny = if silent {
        "--deny-warnings"
    } else {
        "--format=text"
    };
    let (code, out, err) = run(dir, &["limits", "validate", "out.yaml", deny]);
    assert_eq!(
        code, 0,
        "the export validates without warnings:\n{out}{err}\n{text}"
    );
    let (code, out, err) = plan_export(dir);
    assert_eq!(
        code, 0,
        "the plan of the export changes nothing:\n{out}{err}\n{text}"
    );
    assert!(out.starts_with("No changes."), "{out}");
    text
}

/// `limits apply` of `manifest` to table `tbl`, which must succeed; its stdout.
fn apply(dir: &Path, manifest: &str) -> String {
    ok(
        dir,
        &[
            "limits",
            "apply",
            "--local=s.sqlite",
            "-n",
            "tbl",
            "-f",
            manifest,
        ],
    )
}

/// `limits apply` of `out.yaml` to table `tbl`, which must succeed; its stdout.
fn apply_export(dir: &Path) -> String {
    apply(dir, "out.yaml")
}

/// `limits export` of table `tbl` with `extra` arguments.
fn export(dir: &Path, extra: &[&str]) -> (i32, String, String) {
    let mut args = vec!["limits", "export", "--local=s.sqlite", "-n", "tbl"];
    args.extend_from_slice(extra);
    run(dir, &args)
}

/// `limits plan --detailed-exitcode` of `out.yaml` against table `tbl`.
fn plan_export(dir: &Path) -> (i32, String, String) {
    run(
        dir,
        &[
            "limits",
            "plan",
            "--local=s.sqlite",
            "-n",
            "tbl",
            "-f",
            "out.yaml",
            "--detailed-exitcode",
        ],
    )
}

#[test]
fn every_valid_fixture_round_trips_apply_export_plan() {
    let dir = root().join("fixtures/manifests/valid");
    let mut names: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    names.sort();
    assert!(names.len() >= 8);
    for fixture in names {
        let tmp = tempfile::tempdir().unwrap();
        let m = zae_limiter::manifest::load_file(&fixture).unwrap().manifest;
        let f = fixture.to_str().unwrap();
        apply(tmp.path(), f);
        // An export warns exactly when its source does (the cascade warning).
        let silent = run(tmp.path(), &["limits", "validate", f, "--deny-warnings"]).0 == 0;
        let text = export_and_plan(tmp.path(), &m.namespace, silent);
        let name = fixture.file_name().unwrap().to_str().unwrap();
        golden(name, &text);
        // The export declares the same levels with the same stored limits.
        let exported = zae_limiter::manifest::load_str("out.yaml", &text)
            .unwrap()
            .manifest;
        assert_eq!(stored(&exported), stored(&m), "{name}");
        assert_eq!(exported.system.is_some(), m.system.is_some(), "{name}");
        // Applying it adopts (nothing to write); the plan stays clean.
        let out = apply_export(tmp.path());
        assert!(out.starts_with("No changes."), "{name}: {out}");
    }
}

/// Every level of `m` as the items `limits apply` writes, by key, limit
/// content only: two manifests that store the same limits compare equal
/// however they spell a cron (`12` or `DEC`) or order their keys.
fn stored(
    m: &zae_limiter::manifest::Manifest,
) -> std::collections::BTreeMap<zae_limiter::store::Key, zae_limiter::store::Item> {
    use zae_limiter::items::config::{build_entity, build_resource, build_system, limit_content};
    let mut items = Vec::new();
    items.extend(m.system.as_ref().map(|s| build_system("ns", s).unwrap()));
    for (r, l) in &m.resources {
        items.push(build_resource("ns", r, l).unwrap());
    }
    for (e, rs) in &m.entities {
        for (r, l) in rs {
            items.push(build_entity("ns", e, r, l).unwrap());
        }
    }
    items
        .iter()
        .map(|i| (zae_limiter::store::Key::of(i).unwrap(), limit_content(i)))
        .collect()
}

/// Writes raw items (DynamoDB typed JSON, one per line) into table `tbl`.
fn load_items(dir: &Path, lines: &str) {
    let store = LocalStore::open(&dir.join("s.sqlite"), "tbl").unwrap();
    for line in lines.lines().filter(|l| !l.trim().is_empty()) {
        let item = item_from_str(line).unwrap();
        store
            .write(WriteOp::Put {
                item,
                condition: None,
            })
            .unwrap();
    }
}

/// A namespace the Python client and its provisioner wrote (set_limits,
/// set_resource_defaults, set_system_defaults, and two levels the
/// provisioner wrote without registry entries): every level is exported,
/// including those the listing commands miss, and the plan is clean.
#[test]
fn a_table_the_python_client_wrote_exports_and_plans_clean() {
    let tmp = tempfile::tempdir().unwrap();
    load_items(
        tmp.path(),
        &std::fs::read_to_string(root().join("fixtures/items/reference-dump.jsonl")).unwrap(),
    );
    let text = export_and_plan(tmp.path(), "default", true);
    golden("reference-dump.yaml", &text);
    for level in [
        "claude-3:", // provisioner-written: in no registry
        "user-3:",   // provisioner-written: no GSI3 keys
        "gpt-4:",
        "_default_:",
        "on_unavailable: block",
    ] {
        assert!(text.contains(level), "{level}\n{text}");
    }
    // Apply adopts: the record now names every level, and the plan stays clean.
    let out = apply_export(tmp.path());
    assert!(out.starts_with("No changes."), "{out}");
    export_and_plan(tmp.path(), "default", true);
}

/// A plan or diff of a manifest that leaves stored levels out (written by
/// the Python client, never by an apply of a manifest; the provisioner's
/// record owns claude-3 and user-3, so those are deletes) names them: Python
/// enforces them and no change line would show them. Once an apply owns
/// them, they are its to change or delete, and the warning is gone.
#[test]
fn plan_and_diff_name_the_stored_levels_a_manifest_leaves_alone() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    load_items(
        dir,
        &std::fs::read_to_string(root().join("fixtures/items/reference-dump.jsonl")).unwrap(),
    );
    std::fs::write(
        dir.join("partial.yaml"),
        "namespace: default\nsystem:\n  limits:\n    rpm: {capacity: 1000}\n    tpm: {capacity: 100000}\n  on_unavailable: block\n",
    )
    .unwrap();
    let store = ["--local=s.sqlite", "-n", "tbl", "-f", "partial.yaml"];
    for command in ["plan", "diff"] {
        let (code, out, err) = run(dir, &[&["limits", command][..], &store].concat());
        assert_eq!(code, 0, "{command}: {out}{err}");
        assert!(
            err.contains("Warning: namespace 'default' holds 3 level(s) that this manifest does not declare and no apply of a manifest wrote: resources.gpt-4, entities.user-1.resources._default_, entities.user-1.resources.gpt-4. Python clients enforce them"),
            "{command}: {err}"
        );
        let (_, out, _) = run(
            dir,
            &[&["limits", command, "--format", "json"][..], &store].concat(),
        );
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert!(
            v["warnings"][0]
                .as_str()
                .unwrap()
                .contains("holds 3 level(s)"),
            "{v}"
        );
    }
    // Adopted by an apply of the export: a plan of the partial manifest now
    // deletes them, and names nothing.
    let (code, _, err) = export(dir, &["-o", "out.yaml"]);
    assert_eq!(code, 0, "{err}");
    apply_export(dir);
    let (code, out, err) = run(dir, &[&["limits", "plan"][..], &store].concat());
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("Plan: 5 change(s)"), "{out}");
    assert!(!err.contains("does not declare"), "{err}");
}

#[test]
fn levels_a_manifest_cannot_express_are_named_and_left_out() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let quickstart = root().join("fixtures/manifests/valid/quickstart.yaml");
    apply(dir, quickstart.to_str().unwrap());
    let store = LocalStore::open(&dir.join("s.sqlite"), "tbl").unwrap();
    let ns = zae_limiter::items::namespace::resolve(&store, "default")
        .unwrap()
        .unwrap();
    let items = format!(
        r##"{{"PK":{{"S":"{ns}/RESOURCE#odd"}},"SK":{{"S":"#CONFIG"}},"GSI4PK":{{"S":"{ns}"}},"GSI4SK":{{"S":"{ns}/RESOURCE#odd"}},"l_rpm_cp":{{"N":"10"}},"l_rpm_ra":{{"N":"10"}},"l_rpm_rp":{{"N":"60"}},"audit_retention_days":{{"N":"90"}}}}
{{"PK":{{"S":"{ns}/RESOURCE#broken"}},"SK":{{"S":"#CONFIG"}},"GSI4PK":{{"S":"{ns}"}},"GSI4SK":{{"S":"{ns}/RESOURCE#broken"}},"w_s_cp":{{"N":"5"}},"w_s_ra":{{"N":"0"}},"w_s_rp":{{"N":"60"}}}}
{{"PK":{{"S":"{ns}/RESOURCE#9lives"}},"SK":{{"S":"#CONFIG"}},"GSI4PK":{{"S":"{ns}"}},"GSI4SK":{{"S":"{ns}/RESOURCE#9lives"}},"l_rpm_cp":{{"N":"10"}},"l_rpm_ra":{{"N":"10"}},"l_rpm_rp":{{"N":"60"}}}}
{{"PK":{{"S":"{ns}/ENTITY#u"}},"SK":{{"S":"#CONFIG#gpt-4"}},"GSI4PK":{{"S":"{ns}"}},"GSI4SK":{{"S":"{ns}/ENTITY#u"}},"l_rpm_cp":{{"N":"10.5"}},"l_rpm_ra":{{"N":"10"}},"l_rpm_rp":{{"N":"60"}}}}
{{"PK":{{"S":"{ns}/ENTITY#u"}},"SK":{{"S":"#CONFIG#_default_"}},"GSI4PK":{{"S":"{ns}"}},"GSI4SK":{{"S":"{ns}/ENTITY#u"}},"l_rpm_cp":{{"N":"10"}},"l_rpm_ra":{{"N":"10"}},"l_rpm_rp":{{"N":"60"}},"sched_tz":{{"S":"Europe/Paris"}}}}
{{"PK":{{"S":"{ns}/ENTITY#v"}},"SK":{{"S":"#CONFIG#gpt-4"}},"GSI4PK":{{"S":"{ns}"}},"GSI4SK":{{"S":"{ns}/ENTITY#v"}},"l_q_cp":{{"N":"10"}},"l_q_ra":{{"N":"0"}},"l_q_rp":{{"N":"60"}},"l_q_rsched":{{"S":"1m0h0"}},"l_q_sched":{{"S":"1h9a5"}},"sched_tz":{{"S":"UTC"}}}}
{{"PK":{{"S":"{ns}/SYSTEM#"}},"SK":{{"S":"#CONFIG"}},"GSI4PK":{{"S":"{ns}"}},"GSI4SK":{{"S":"{ns}/SYSTEM#"}},"l_rpm_cp":{{"N":"1000"}},"l_rpm_ra":{{"N":"1000"}},"l_rpm_rp":{{"N":"60"}},"on_unavailable":{{"S":"maybe"}}}}
"##
    );
    load_items(dir, &items);
    let (code, out, err) = export(dir, &["-o", "out.yaml"]);
    assert_eq!(code, 1, "{out}\n{err}");
    assert!(
        err.contains("7 of 10 levels of namespace 'default' cannot be written as a manifest"),
        "{err}"
    );
    for (path, why) in [
        (
            "resources.odd",
            "audit_retention_days = 90 has no manifest form",
        ),
        (
            "resources.broken",
            "unreadable: limit 's' is a w_ limit without w_s_rsa",
        ),
        ("resources.9lives", "resource name"),
        ("entities.u.resources.gpt-4", "unreadable"),
        (
            "entities.u.resources._default_",
            "sched_tz = 'Europe/Paris' has no manifest form",
        ),
        (
            "entities.v.resources.gpt-4",
            "sets refill_amount=5 on a limit that also has reset_schedule",
        ),
        (
            "system",
            "on_unavailable must be `allow` or `block`, got 'maybe' (the last apply managed this level: applying the export as it is would delete it)",
        ),
    ] {
        let line = err
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("{path}:")))
            .unwrap_or_else(|| panic!("{path} not named:\n{err}"));
        assert!(line.contains(why), "{line}");
    }
    // The rest is written and names the omissions; its plan changes nothing
    // but the managed system level it could not declare, as stderr warned.
    let text = std::fs::read_to_string(dir.join("out.yaml")).unwrap();
    assert!(text.contains("#   resources.odd: "), "{text}");
    assert!(!text.contains("  odd:"), "{text}");
    assert!(text.contains("user-premium:"), "{text}");
    let (code, out, _) = plan_export(dir);
    assert_eq!(code, 2, "{out}");
    assert!(out.starts_with("Plan: 1 change(s) (3 unchanged)"), "{out}");
    assert!(out.contains("- delete system"), "{out}");
}

#[test]
fn export_is_read_only_and_refuses_what_the_readers_refuse() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    // No store file: nothing is created.
    let (code, _, err) = export(dir, &[]);
    assert_eq!(code, 1, "{err}");
    assert!(!dir.join("s.sqlite").exists());
    ok(dir, &["table", "create", "-n", "tbl", "--local=s.sqlite"]);
    let (code, _, err) = export(dir, &["-N", "nope"]);
    assert_eq!(code, 1);
    assert!(err.contains("Namespace 'nope' not found"), "{err}");
    // An empty namespace exports as just its name.
    let (code, out, err) = export(dir, &[]);
    assert_eq!(code, 0, "{err}");
    assert!(out.ends_with("namespace: default\n"), "{out}");
    assert!(out.starts_with("# Exported by `zae-limiter limits export` from namespace 'default' of table 'tbl' (local store s.sqlite).\n"), "{out}");
}
