//! Rolling windows and concurrency limits (issue #7) through the binary on the
//! local store: a manifest using every kind validates, plans, applies, plans
//! again with no changes, and renders in `get-limits` / `get-defaults` (text
//! and JSON); `plan` and `apply` refuse a limit that changes to or from a
//! concurrency limit, naming the level and the limit, and write nothing.

mod common;

use std::path::{Path, PathBuf};

use zae_limiter::items::config::decode_level;
use zae_limiter::items::keys;
use zae_limiter::items::namespace;
use zae_limiter::store::local::LocalStore;
use zae_limiter::store::{Key, Store};

const TABLE: &str = "kinds";

fn every_kind() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/manifests/valid/every-kind.yaml")
}

struct Env {
    dir: tempfile::TempDir,
}

impl Env {
    fn new() -> Env {
        Env {
            dir: tempfile::tempdir().expect("tempdir"),
        }
    }

    /// A store `manifest` (saved as `before.yaml`) was applied to.
    fn applied(manifest: &str) -> Env {
        let env = Env::new();
        let file = env.write("before.yaml", manifest);
        let (code, out, err) = env.run(&["limits", "apply", "-f", &file]);
        assert_eq!(code, 0, "{out}{err}");
        env
    }

    fn store_path(&self) -> PathBuf {
        self.dir.path().join("local.sqlite")
    }

    fn run(&self, args: &[&str]) -> (i32, String, String) {
        common::run_local(&self.store_path(), TABLE, args)
    }

    fn write(&self, name: &str, text: &str) -> String {
        common::write_arg(self.dir.path(), name, text)
    }

    fn store(&self) -> LocalStore {
        LocalStore::open(&self.store_path(), TABLE).expect("open store")
    }

    /// Every config item of namespace `default`, as stored.
    fn configs(&self) -> Vec<zae_limiter::store::Item> {
        let s = self.store();
        let ns = namespace::resolve(&s, "default")
            .expect("resolve")
            .expect("namespace registered");
        let mut out = Vec::new();
        let mut pks: Vec<String> = s
            .query_index(zae_limiter::store::Index::Gsi4, &ns, "")
            .expect("gsi4")
            .into_iter()
            .map(|k: Key| k.pk)
            .collect();
        pks.push(keys::system_pk(&ns));
        pks.sort();
        pks.dedup();
        for pk in pks {
            for item in s.query(&pk, "#CONFIG", true).expect("query") {
                out.push(item);
            }
        }
        out
    }
}

#[test]
fn every_kind_validates_applies_and_then_plans_no_changes() {
    let env = Env::new();
    let f = every_kind().to_string_lossy().into_owned();
    let (code, out, err) = common::outcome(
        common::zae_limiter()
            .args(["limits", "validate", &f])
            .output()
            .expect("run zae-limiter"),
    );
    assert_eq!((code, out.as_str()), (0, ""), "{err}");
    let (code, out, err) = env.run(&["limits", "apply", "-f", &f]);
    assert_eq!(code, 0, "{out}{err}");
    let (code, out, err) = env.run(&["limits", "plan", "-f", &f, "--detailed-exitcode"]);
    assert_eq!(code, 0, "no changes after apply: {out}{err}");

    // Every written level reads back with the declared kinds.
    let configs = env.configs();
    assert_eq!(configs.len(), 3, "system, gpt-4, user-1/gpt-4");
    for item in &configs {
        decode_level(item).expect("our items read back");
        for attr in item.keys() {
            if attr.starts_with("r_") || attr.starts_with("c_") {
                assert!(!attr.ends_with("_cp"), "{attr} would be found by 0.17");
            }
        }
    }
}

#[test]
fn get_limits_and_get_defaults_render_every_kind() {
    let env = Env::new();
    let f = every_kind().to_string_lossy().into_owned();
    let (code, out, err) = env.run(&["limits", "apply", "-f", &f]);
    assert_eq!(code, 0, "{out}{err}");

    let (code, out, err) = env.run(&["entity", "get-limits", "user-1", "-r", "gpt-4"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out,
        "Limits for entity 'user-1' on resource 'gpt-4':\n  burst_guard: 30 per rolling minute\n  in_flight: 2 concurrent (holds expire after 2m)\n  rpm: 60/min\n  session: 5,000 quota (resets 5h after first use)\n"
    );
    let (code, out, err) = env.run(&["resource", "get-defaults", "gpt-4"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out,
        "Defaults for resource 'gpt-4':\n  in_flight: 20 concurrent (holds expire after 5m)\n  rpm: 500/min\n    Schedule:\n      \"* 9-17 * * MON-FRI\" America/New_York  → scale 50%\n  tokens_per_hour: 400,000 per rolling hour (soft)\n  tpd: 2,000,000 quota (resets \"0 0 * * *\" America/New_York)\n"
    );
    let (code, out, err) = env.run(&["system", "get-defaults"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out,
        "System-wide defaults:\n  Limits:\n    requests_per_day: 100,000 per rolling day\n    rpm: 1,000/min\n"
    );

    let (code, out, err) = env.run(&[
        "entity",
        "get-limits",
        "user-1",
        "-r",
        "gpt-4",
        "--format",
        "json",
    ]);
    assert_eq!(code, 0, "{err}");
    let doc: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(
        doc["limits"][0],
        serde_json::json!({"name": "burst_guard", "kind": "rolling", "capacity": 30, "window": "minute", "soft": false})
    );
    assert_eq!(
        doc["limits"][1],
        serde_json::json!({"name": "in_flight", "kind": "concurrency", "concurrency": 2, "hold_ttl_seconds": 120, "soft": false})
    );
    assert_eq!(doc["limits"][2]["kind"], "rate");
    assert_eq!(doc["limits"][3]["kind"], "session_quota");
}

const BEFORE: &str = "namespace: default\nresources:\n  gpt-4:\n    limits:\n      rpm: {capacity: 100}\n      jobs: {concurrency: 3}\nentities:\n  user-1:\n    resources:\n      gpt-4:\n        limits:\n          rpd: {capacity: 1000, window: day, rolling: true}\n";

#[test]
fn plan_and_apply_refuse_a_change_to_or_from_concurrency_and_write_nothing() {
    let env = Env::applied(BEFORE);
    let stored = env.configs();

    // jobs: concurrency → bucket; rpd: rolling → concurrency; rpm stays.
    let changed = env.write(
        "changed.yaml",
        &BEFORE
            .replace("jobs: {concurrency: 3}", "jobs: {capacity: 3}")
            .replace(
                "rpd: {capacity: 1000, window: day, rolling: true}",
                "rpd: {concurrency: 5}",
            )
            .replace("rpm: {capacity: 100}", "rpm: {capacity: 200}"),
    );
    for command in ["plan", "apply"] {
        let (code, out, err) = env.run(&["limits", command, "-f", &changed]);
        assert_eq!(code, 1, "{command}: {out}{err}");
        assert!(out.is_empty(), "{command} prints no plan: {out}");
        assert_eq!(
            err,
            "Error: resource 'gpt-4': limit 'jobs' cannot change from a concurrent limit to a limit that counts use (one counts use, the other open holds): create a new limit instead\n\
             entity 'user-1' on resource 'gpt-4': limit 'rpd' cannot change from a limit that counts use to a concurrent limit (one counts use, the other open holds): create a new limit instead\n",
            "{command}"
        );
        assert_eq!(env.configs(), stored, "{command} wrote nothing");
    }

    // A new limit under a new name is the way: accepted, and so is bucket ↔ rolling.
    let renamed = env.write(
        "renamed.yaml",
        &BEFORE
            .replace("jobs: {concurrency: 3}", "jobs_v2: {capacity: 3}")
            .replace(
                "rpd: {capacity: 1000, window: day, rolling: true}",
                "rpd: {capacity: 1000, reset_schedule: [{cron: \"0 0 * * *\"}]}",
            ),
    );
    let (code, out, err) = env.run(&["limits", "apply", "-f", &renamed]);
    assert_eq!(code, 0, "{out}{err}");
    let (code, out, _) = env.run(&["entity", "get-limits", "user-1", "-r", "gpt-4"]);
    assert_eq!(code, 0);
    assert_eq!(
        out,
        "Limits for entity 'user-1' on resource 'gpt-4':\n  rpd: 1,000 quota (resets \"0 0 * * *\" UTC)\n"
    );
}

#[test]
fn a_changed_rolling_window_or_hold_ttl_is_a_planned_update() {
    let env = Env::applied(BEFORE);
    for (from, to, detail) in [
        (
            "window: day",
            "window: hour",
            "~ update entity: user-1/gpt-4\n      rpd.window: day → hour\n",
        ),
        (
            "{concurrency: 3}",
            "{concurrency: 3, hold_ttl_seconds: 60}",
            "~ update resource: gpt-4\n      jobs.hold_ttl_seconds: 300 → 60\n",
        ),
        (
            "{concurrency: 3}",
            "{concurrency: 3, soft: true}",
            "~ update resource: gpt-4\n      jobs.soft: false → true\n",
        ),
        (
            "rpm: {capacity: 100}",
            "rpm: {capacity: 100, window: minute, rolling: true}",
            "~ update resource: gpt-4\n      rpm - capacity 100, refill_amount 100, refill_period 60\n      rpm + capacity 100, window minute\n",
        ),
    ] {
        let changed = env.write("changed.yaml", &BEFORE.replace(from, to));
        let (code, out, err) = env.run(&["limits", "plan", "-f", &changed, "--detailed-exitcode"]);
        assert_eq!(code, 2, "{to}: {out}{err}");
        assert!(out.contains(detail), "{to}: {out}");
    }
}
