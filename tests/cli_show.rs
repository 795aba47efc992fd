//! `entity get-limits`, `resource get-defaults`, `system get-defaults` through
//! the binary on a local store: the reference's verified text (docs/manifest.md,
//! "Showing stored limits") for the same stored items, listed by name; the
//! read-only refusals.

mod common;

use std::path::{Path, PathBuf};

use zae_limiter::apply::writes;
use zae_limiter::items::{config, keys, namespace, version};
use zae_limiter::manifest::model::LevelConfig;
use zae_limiter::plan::level::Level;
use zae_limiter::store::local::LocalStore;
use zae_limiter::store::typed_json::item_from_str;
use zae_limiter::store::{Item, Store, WriteOp};

const TABLE: &str = "demo";

fn run(store: &Path, args: &[&str]) -> (i32, String, String) {
    common::run_local(store, TABLE, args)
}

/// [`run`], which must exit 0; its stdout.
fn ok(store: &Path, args: &[&str]) -> String {
    let (code, out, err) = run(store, args);
    assert_eq!(code, 0, "{args:?}: {err}");
    out
}

/// Writes `entity` as team-a's level on gpt-4.
fn put_team_a(store: &dyn zae_limiter::store::Store, ns: &str, entity: &LevelConfig) {
    let item = config::build_entity(ns, "team-a", "gpt-4", entity).unwrap();
    let level = Level::Entity("team-a".into(), "gpt-4".into());
    writes::put_level(store, ns, &level, item, false).unwrap();
}

/// A fresh local store with the version record and the `default` namespace;
/// returns (tempdir guard, store path, store, namespace id).
fn setup() -> (tempfile::TempDir, PathBuf, LocalStore, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("local.sqlite");
    let store = LocalStore::open(&path, TABLE).unwrap();
    let init = version::ensure_initialized(&store).unwrap();
    (dir, path, store, init.default_namespace.id)
}

fn put(store: &LocalStore, item: Item) {
    store
        .write(WriteOp::Put {
            item,
            condition: None,
        })
        .unwrap();
}

/// Puts a raw config item given as typed JSON with `{ns}` standing for the namespace id.
fn put_raw(store: &LocalStore, ns: &str, json: &str) {
    put(store, item_from_str(&json.replace("{ns}", ns)).unwrap());
}

/// The levels of `fixtures/manifests/valid/reference-example-2.yaml` as the
/// manifest loader reads them: (resource `gpt-4`, entity `team-a` on `gpt-4`).
fn example2() -> (LevelConfig, LevelConfig) {
    let file = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/manifests/valid/reference-example-2.yaml");
    let m = zae_limiter::manifest::load_file(&file)
        .unwrap_or_else(|_| panic!("{} loads", file.display()))
        .manifest;
    (
        m.resources["gpt-4"].clone(),
        m.entities["team-a"]["gpt-4"].clone(),
    )
}

/// Groups the verified limit lines into per-limit blocks (a limit line and its
/// Schedule block) and sorts them by name: the one intended difference from the
/// reference, which prints DynamoDB's attribute order.
fn by_name(verified: &str) -> String {
    let mut blocks: Vec<(String, String)> = Vec::new();
    for line in verified.lines() {
        let indent = line.len() - line.trim_start().len();
        let min = verified
            .lines()
            .map(|l| l.len() - l.trim_start().len())
            .min()
            .unwrap();
        if indent == min {
            let name = line.trim_start().split(':').next().unwrap().to_string();
            blocks.push((name, format!("{line}\n")));
        } else {
            blocks.last_mut().unwrap().1.push_str(&format!("{line}\n"));
        }
    }
    blocks.sort_by(|a, b| a.0.cmp(&b.0));
    blocks.into_iter().map(|b| b.1).collect()
}

#[test]
fn example_2_round_trip_matches_the_verified_display() {
    let (_d, path, store, ns) = setup();
    let (resource, entity) = example2();
    writes::put_level(
        &store,
        &ns,
        &Level::Resource("gpt-4".into()),
        config::build_resource(&ns, "gpt-4", &resource).unwrap(),
        false,
    )
    .unwrap();
    put_team_a(&store, &ns, &entity);

    // The reference's round trip of Example 2, first half (resource).
    let verified_resource = "  rpm: 1,000/min
    Schedule:
      \"* 9-17 * * MON-FRI\" America/New_York  → scale 50%
      \"* * * * SAT,SUN\" America/New_York  → capacity 2,000, refill_amount 2,000, refill_period_seconds 60
  rpd: 10,000 quota (resets \"0 0 * * *\" America/New_York)
";
    let out = ok(&path, &["resource", "get-defaults", "gpt-4"]);
    assert_eq!(
        out,
        format!(
            "Defaults for resource 'gpt-4':\n{}",
            by_name(verified_resource)
        )
    );

    // Second half (entity), with its Cascade line.
    let verified_entity = "  session: 500 quota (resets 5h after first use) (soft)
  monthly: 1,000,000 quota (resets \"0 0 1 * *\" UTC)
    Schedule:
      \"* * * DEC *\" UTC  → scale 200%
";
    let out = ok(&path, &["entity", "get-limits", "team-a", "-r", "gpt-4"]);
    assert_eq!(
        out,
        format!(
            "Limits for entity 'team-a' on resource 'gpt-4':\n{}Cascade: off (explicit)\n",
            by_name(verified_entity)
        )
    );
}

#[test]
fn the_verified_limit_lines_for_every_kind_of_limit() {
    let (_d, path, store, ns) = setup();
    // The reference's verified block, stored as items. One item holds one timezone, so
    // the America/New_York limits and the UTC limits are two levels.
    put_raw(
        &store,
        &ns,
        r##"{"PK":{"S":"{ns}/ENTITY#user-1"},"SK":{"S":"#CONFIG#gpt-4"},"sched_tz":{"S":"America/New_York"},
        "l_rpm_cp":{"N":"1000"},"l_rpm_ra":{"N":"1000"},"l_rpm_rp":{"N":"60"},
        "l_tpm_cp":{"N":"15000"},"l_tpm_ra":{"N":"10000"},"l_tpm_rp":{"N":"60"},
        "l_rph_cp":{"N":"500"},"l_rph_ra":{"N":"500"},"l_rph_rp":{"N":"3600"},
        "l_rps_cp":{"N":"10"},"l_rps_ra":{"N":"10"},"l_rps_rp":{"N":"1"},
        "l_rpd_drip_cp":{"N":"100000"},"l_rpd_drip_ra":{"N":"100000"},"l_rpd_drip_rp":{"N":"86400"},
        "l_c5_cp":{"N":"100"},"l_c5_ra":{"N":"100"},"l_c5_rp":{"N":"300"},
        "l_c90_cp":{"N":"100"},"l_c90_ra":{"N":"100"},"l_c90_rp":{"N":"90"},
        "l_c7200_cp":{"N":"1"},"l_c7200_ra":{"N":"1"},"l_c7200_rp":{"N":"7200"},
        "l_c2d_cp":{"N":"1"},"l_c2d_ra":{"N":"1"},"l_c2d_rp":{"N":"172800"},
        "l_big_cp":{"N":"2000000"},"l_big_ra":{"N":"1234567"},"l_big_rp":{"N":"60"},
        "l_biz_cp":{"N":"1000"},"l_biz_ra":{"N":"1000"},"l_biz_rp":{"N":"60"},
        "l_biz_sched":{"S":"1h9-17w1-5s500;w6,7c2000;M12c3000a1500p120;h0-5s125;h6s2000;h8s1500"},
        "l_rpd_cp":{"N":"10000"},"l_rpd_ra":{"N":"0"},"l_rpd_rp":{"N":"1"},"l_rpd_rsched":{"S":"1m0h0"},
        "w_session_cp":{"N":"500"},"w_session_ra":{"N":"0"},"w_session_rp":{"N":"1"},"w_session_rsa":{"N":"18000"},
        "w_s2_cp":{"N":"500"},"w_s2_ra":{"N":"0"},"w_s2_rp":{"N":"1"},"w_s2_rsa":{"N":"19815"},
        "w_s3_cp":{"N":"500"},"w_s3_ra":{"N":"0"},"w_s3_rp":{"N":"1"},"w_s3_rsa":{"N":"86490"},
        "l_softy_cp":{"N":"10"},"l_softy_ra":{"N":"10"},"l_softy_rp":{"N":"60"},"l_softy_soft":{"BOOL":true},
        "l_tworeset_cp":{"N":"50"},"l_tworeset_ra":{"N":"0"},"l_tworeset_rp":{"N":"60"},"l_tworeset_rsched":{"S":"1m0h0w1-5;m0h12w6"}}"##,
    );
    let verified_ny = "  rpm: 1,000/min
  tpm: 10,000/min (burst: 15,000)
  rph: 500/hour
  rps: 10/sec
  rpd_drip: 100,000/day
  c5: 100/5min
  c90: 100/90sec
  c7200: 1/2hour
  c2d: 1/2day
  big: 1,234,567/min (burst: 2,000,000)
  biz: 1,000/min
    Schedule:
      \"* 9-17 * * MON-FRI\" America/New_York  → scale 50%
      \"* * * * SAT,SUN\" America/New_York  → capacity 2,000
      \"* * * DEC *\" America/New_York  → capacity 3,000, refill_amount 1,500, refill_period_seconds 120
      \"* 0-5 * * *\" America/New_York  → scale 12.5%
      \"* 6 * * *\" America/New_York  → scale 200%
      \"* 8 * * *\" America/New_York  → scale 150%
  rpd: 10,000 quota (resets \"0 0 * * *\" America/New_York)
  session: 500 quota (resets 5h after first use)
  s2: 500 quota (resets 5h30m15s after first use)
  s3: 500 quota (resets 1d1m30s after first use)
  softy: 10/min (soft)
  tworeset: 50 quota (resets \"0 0 * * MON-FRI\" America/New_York, \"0 12 * * SAT\" America/New_York)
";
    let out = ok(&path, &["entity", "get-limits", "user-1", "-r", "gpt-4"]);
    assert_eq!(
        out,
        format!(
            "Limits for entity 'user-1' on resource 'gpt-4':\n{}",
            by_name(verified_ny)
        )
    );

    put_raw(
        &store,
        &ns,
        r##"{"PK":{"S":"{ns}/ENTITY#user-1"},"SK":{"S":"#CONFIG#claude-3"},"sched_tz":{"S":"UTC"},
        "l_monthly_cp":{"N":"1000000"},"l_monthly_ra":{"N":"0"},"l_monthly_rp":{"N":"60"},"l_monthly_rsched":{"S":"1m0h0D1"},
        "l_wk_cp":{"N":"7000"},"l_wk_ra":{"N":"0"},"l_wk_rp":{"N":"60"},"l_wk_rsched":{"S":"1m0h0w1"},"l_wk_sched":{"S":"1M1,7s500"},
        "l_softq_cp":{"N":"10"},"l_softq_ra":{"N":"0"},"l_softq_rp":{"N":"60"},"l_softq_rsched":{"S":"1m0h0"},"l_softq_soft":{"BOOL":true}}"##,
    );
    let verified_utc = "  monthly: 1,000,000 quota (resets \"0 0 1 * *\" UTC)
  wk: 7,000 quota (resets \"0 0 * * MON\" UTC)
    Schedule:
      \"* * * JAN,JUL *\" UTC  → scale 50%
  softq: 10 quota (resets \"0 0 * * *\" UTC) (soft)
";
    let out = ok(&path, &["entity", "get-limits", "user-1", "-r", "claude-3"]);
    assert_eq!(
        out,
        format!(
            "Limits for entity 'user-1' on resource 'claude-3':\n{}",
            by_name(verified_utc)
        )
    );
}

#[test]
fn flags_and_empty_levels() {
    let (_d, path, store, ns) = setup();
    put_raw(
        &store,
        &ns,
        r##"{"PK":{"S":"{ns}/ENTITY#user-1"},"SK":{"S":"#CONFIG#_default_"},"disabled":{"BOOL":true},"cascade":{"BOOL":true}}"##,
    );
    put_raw(
        &store,
        &ns,
        r##"{"PK":{"S":"{ns}/ENTITY#user-1"},"SK":{"S":"#CONFIG#gpt-4"},"l_rpm_cp":{"N":"5"},"l_rpm_ra":{"N":"5"},"l_rpm_rp":{"N":"60"},"disabled":{"S":"bypass"},"cascade":{"BOOL":false}}"##,
    );
    let (code, out, _) = run(&path, &["entity", "get-limits", "user-1"]);
    assert_eq!(code, 0);
    assert_eq!(out, "No limits configured for entity 'user-1' on resource '_default_'\nStatus: DISABLED\nCascade: on (explicit)\n");
    let (_, out, _) = run(&path, &["entity", "get-limits", "user-1", "-r", "gpt-4"]);
    assert_eq!(out, "Limits for entity 'user-1' on resource 'gpt-4':\n  rpm: 5/min\nStatus: BYPASSED\nCascade: off (explicit)\n");
    let (_, out, _) = run(&path, &["entity", "get-limits", "nobody", "-r", "gpt-4"]);
    assert_eq!(
        out,
        "No limits configured for entity 'nobody' on resource 'gpt-4'\n"
    );
    let (_, out, _) = run(&path, &["resource", "get-defaults", "gpt-4"]);
    assert_eq!(out, "No defaults configured for resource 'gpt-4'\n");
    let (_, out, _) = run(&path, &["system", "get-defaults"]);
    assert_eq!(out, "No system defaults configured\n");
    put_raw(
        &store,
        &ns,
        r##"{"PK":{"S":"{ns}/SYSTEM#"},"SK":{"S":"#CONFIG"},"on_unavailable":{"S":"block"}}"##,
    );
    let (_, out, _) = run(&path, &["system", "get-defaults"]);
    assert_eq!(out, "System-wide defaults:\n  on_unavailable: block\n");
    put_raw(
        &store,
        &ns,
        r##"{"PK":{"S":"{ns}/RESOURCE#gpt-4"},"SK":{"S":"#CONFIG"},"disabled":{"BOOL":false}}"##,
    );
    let (_, out, _) = run(&path, &["resource", "get-defaults", "gpt-4"]);
    assert_eq!(
        out,
        "No defaults configured for resource 'gpt-4'\nStatus: enabled (explicit override)\n"
    );
}

#[test]
fn system_defaults_with_limits() {
    let (_d, path, store, ns) = setup();
    put_raw(
        &store,
        &ns,
        r##"{"PK":{"S":"{ns}/SYSTEM#"},"SK":{"S":"#CONFIG"},"config_version":{"N":"1"},"sched_tz":{"S":"America/New_York"},
        "l_rpm_cp":{"N":"1000"},"l_rpm_ra":{"N":"1000"},"l_rpm_rp":{"N":"60"},
        "l_tpm_cp":{"N":"15000"},"l_tpm_ra":{"N":"10000"},"l_tpm_rp":{"N":"60"},
        "l_biz_cp":{"N":"1000"},"l_biz_ra":{"N":"1000"},"l_biz_rp":{"N":"60"},"l_biz_sched":{"S":"1h9-17w1-5s500"},
        "l_rpd_cp":{"N":"10000"},"l_rpd_ra":{"N":"0"},"l_rpd_rp":{"N":"60"},"l_rpd_rsched":{"S":"1m0h0"},
        "on_unavailable":{"S":"allow"}}"##,
    );
    let verified = "    rpm: 1,000/min
    tpm: 10,000/min (burst: 15,000)
    biz: 1,000/min
      Schedule:
        \"* 9-17 * * MON-FRI\" America/New_York  → scale 50%
    rpd: 10,000 quota (resets \"0 0 * * *\" America/New_York)
";
    let out = ok(&path, &["system", "get-defaults"]);
    assert_eq!(
        out,
        format!(
            "System-wide defaults:\n  Limits:\n{}  on_unavailable: allow\n",
            by_name(verified)
        )
    );
}

#[test]
fn items_from_the_python_dump_display() {
    // fixtures/items/reference-dump.jsonl: user-1's two levels as the Python client wrote them.
    let (_d, path, store, _) = setup();
    let ns = "lum6SW9LwCI";
    put_raw(
        &store,
        ns,
        r##"{"PK":{"S":"_/SYSTEM#"},"SK":{"S":"#NAMESPACE#tenant-x"},"GSI4PK":{"S":"_"},"GSI4SK":{"S":"_/SYSTEM#"},"created_at":{"S":"2026-12-02T13:32:15Z"},"namespace_id":{"S":"lum6SW9LwCI"},"namespace_name":{"S":"tenant-x"},"status":{"S":"active"}}"##,
    );
    put_raw(
        &store,
        ns,
        r##"{"PK":{"S":"lum6SW9LwCI/ENTITY#user-1"},"SK":{"S":"#CONFIG#gpt-4"},"GSI3PK":{"S":"lum6SW9LwCI/ENTITY_CONFIG#gpt-4"},"GSI3SK":{"S":"user-1"},"GSI4PK":{"S":"lum6SW9LwCI"},"GSI4SK":{"S":"lum6SW9LwCI/ENTITY#user-1"},"config_version":{"N":"1"},"entity_id":{"S":"user-1"},"l_rpm_cp":{"N":"60"},"l_rpm_ra":{"N":"60"},"l_rpm_rp":{"N":"60"},"l_tpm_cp":{"N":"20000"},"l_tpm_ra":{"N":"20000"},"l_tpm_rp":{"N":"60"},"l_tpm_soft":{"BOOL":true},"resource":{"S":"gpt-4"},"w_session_cp":{"N":"2000"},"w_session_ra":{"N":"0"},"w_session_rp":{"N":"1"},"w_session_rsa":{"N":"18000"}}"##,
    );
    put_raw(
        &store,
        ns,
        r##"{"PK":{"S":"lum6SW9LwCI/ENTITY#user-1"},"SK":{"S":"#CONFIG#_default_"},"GSI3PK":{"S":"lum6SW9LwCI/ENTITY_CONFIG#_default_"},"GSI3SK":{"S":"user-1"},"GSI4PK":{"S":"lum6SW9LwCI"},"GSI4SK":{"S":"lum6SW9LwCI/ENTITY#user-1"},"config_version":{"N":"1"},"entity_id":{"S":"user-1"},"l_rph_cp":{"N":"3000"},"l_rph_ra":{"N":"3000"},"l_rph_rp":{"N":"3600"},"resource":{"S":"_default_"}}"##,
    );
    let (code, out, err) = run(
        &path,
        &[
            "entity",
            "get-limits",
            "user-1",
            "-r",
            "gpt-4",
            "-N",
            "tenant-x",
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out,
        "Limits for entity 'user-1' on resource 'gpt-4':\n  rpm: 60/min\n  session: 2,000 quota (resets 5h after first use)\n  tpm: 20,000/min (soft)\n"
    );
    let (_, out, _) = run(&path, &["entity", "get-limits", "user-1", "-N", "tenant-x"]);
    assert_eq!(
        out,
        "Limits for entity 'user-1' on resource '_default_':\n  rph: 3,000/hour\n"
    );
}

#[test]
fn json_format() {
    let (_d, path, store, ns) = setup();
    let (_, entity) = example2();
    put_team_a(&store, &ns, &entity);
    let (code, out, err) = run(
        &path,
        &[
            "entity",
            "get-limits",
            "team-a",
            "-r",
            "gpt-4",
            "--format",
            "json",
        ],
    );
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["version"], 1);
    assert_eq!(v["level"], "entity");
    assert_eq!(v["configured"], true);
    assert_eq!(v["cascade"], false);
    assert_eq!(v["disabled"], serde_json::Value::Null);
    let names = common::column(&v["limits"], "name");
    assert_eq!(names, ["monthly", "session"]);
    assert_eq!(v["limits"][0]["kind"], "calendar_quota");
    assert_eq!(
        v["limits"][0]["schedule"][0],
        serde_json::json!({"cron": "* * * DEC *", "tz": "UTC", "scale": 2.0})
    );
    assert_eq!(v["limits"][1]["kind"], "session_quota");
    assert_eq!(v["limits"][1]["reset_after_seconds"], 18000);
    assert_eq!(v["limits"][1]["soft"], true);
    let (_, out, _) = run(&path, &["system", "get-defaults", "--format", "json"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["configured"], false);
    assert_eq!(v["limits"], serde_json::json!([]));
}

#[test]
fn read_only_refusals() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("missing/local.sqlite");
    common::assert_refused(
        run(&path, &["entity", "get-limits", "user-1"]),
        &format!("Error: local store {} does not exist", path.display()),
    );
    assert!(!path.exists(), "a read never creates the store");

    // A table without a version record.
    let store = LocalStore::open(&path, TABLE).unwrap();
    store.create_table().unwrap();
    let (code, _, err) = run(&path, &["resource", "get-defaults", "gpt-4"]);
    assert_eq!(code, 1);
    assert!(err.contains("no version record"), "{err}");
    // The command it suggests reaches this store and writes the record.
    let line = common::between(&err, "Run `", '`').to_string();
    assert_eq!(
        line,
        format!(
            "zae-limiter table create -n {TABLE} --local={}",
            path.display()
        )
    );
    let (code, out, err) = common::run_suggested(dir.path(), &line);
    assert_eq!(code, 0, "{line}: {out}{err}");
    let (code, _, err) = run(&path, &["resource", "get-defaults", "gpt-4"]);
    assert_eq!(code, 0, "{err}");

    // An unregistered namespace.
    version::ensure_initialized(&store).unwrap();
    let (code, _, err) = run(&path, &["system", "get-defaults", "-N", "prod"]);
    assert_eq!(code, 1);
    assert_eq!(
        err,
        format!(
            "Error: Namespace 'prod' not found. Register it with `zae-limiter namespace register prod -n demo --local={}`.\n",
            path.display()
        )
    );
    namespace::register(&store, "prod").unwrap();
    let (code, _, err) = run(&path, &["system", "get-defaults", "-N", "prod"]);
    assert_eq!(code, 0, "{err}");

    // Invalid identifiers are refused before touching the store.
    let (code, _, err) = run(&path, &["entity", "get-limits", "bad#id"]);
    assert_eq!(code, 1);
    assert_eq!(
        err,
        "Error: invalid entity id 'bad#id': cannot contain '#' (the key delimiter)\n"
    );
    let (code, _, err) = run(&path, &["resource", "get-defaults", "_default_"]);
    assert_eq!(code, 1);
    assert!(
        err.starts_with("Error: invalid resource name '_default_'"),
        "{err}"
    );
}

#[test]
fn an_unreadable_item_is_an_error_not_a_guess() {
    let (_d, path, store, ns) = setup();
    put_raw(
        &store,
        &ns,
        r##"{"PK":{"S":"{ns}/RESOURCE#gpt-4"},"SK":{"S":"#CONFIG"},"w_s_cp":{"N":"5"},"w_s_ra":{"N":"0"},"w_s_rp":{"N":"60"}}"##,
    );
    let err = common::assert_refused(
        run(&path, &["resource", "get-defaults", "gpt-4"]),
        "Error: Failed to get resource defaults: config item",
    );
    assert!(err.contains("without w_s_rsa"), "{err}");
    // Nothing was changed by the failed read.
    assert!(store
        .get(&keys::resource_config_key(&ns, "gpt-4"), true)
        .unwrap()
        .is_some());
}
