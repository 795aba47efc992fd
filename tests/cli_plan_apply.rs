//! `limits plan / diff / apply` through the binary on the local store: the
//! reference's verified transcript (tests/transcripts/reference.transcript),
//! exit codes, JSON, refusals, version gates, and crash safety (a kill after any
//! write of an apply leaves a store the next apply repairs).

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use zae_limiter::items::{keys, namespace, version};
use zae_limiter::store::local::LocalStore;
use zae_limiter::store::{AttrValue, Index, Item, Key, Store, WriteOp};

const TABLE: &str = "mystack";

fn transcripts() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/transcripts")
}

/// A fresh directory holding one store file, removed on drop.
struct Env {
    dir: PathBuf,
}

impl Env {
    fn new(name: &str) -> Env {
        let dir = std::env::temp_dir().join(format!(
            "zael-plan-{name}-{}-{:?}",
            std::process::id(),
            std::time::SystemTime::now()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        Env { dir }
    }

    fn store_path(&self) -> PathBuf {
        self.dir.join("store.sqlite")
    }

    fn store(&self) -> LocalStore {
        LocalStore::open(&self.store_path(), TABLE).unwrap()
    }

    /// Runs `zae-limiter ARGS --local=STORE -n mystack` in the transcripts directory.
    fn run(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_zae-limiter"));
        cmd.current_dir(transcripts())
            .args(args)
            .arg(format!("--local={}", self.store_path().display()))
            .args(["-n", TABLE])
            .env_remove("ZAEL_LOCAL_STORE")
            .env_remove("ZAEL_STACK")
            .env_remove("ZAEL_FAULT_ABORT_AFTER_WRITES")
            .env_remove("ZAEL_TEST_CLOCK_OFFSET_MS");
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.output().unwrap()
    }

    /// [`Env::run`] without extra environment, which must exit 0.
    fn ok(&self, args: &[&str]) -> Output {
        let out = self.run(args, &[]);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        out
    }

    fn ns_id(&self, name: &str) -> String {
        namespace::resolve(&self.store(), name)
            .unwrap()
            .expect("namespace registered")
    }

    /// Every item of the table that plan/apply can touch in namespace `ns` plus the
    /// table-level records, keyed for comparison.
    fn dump(&self, ns: &str) -> BTreeMap<Key, Item> {
        let s = self.store();
        let mut out = BTreeMap::new();
        let mut pks: Vec<String> = vec![keys::TABLE_SYSTEM_PK.into(), keys::system_pk(ns)];
        for k in s.query_index(Index::Gsi4, ns, "").unwrap() {
            pks.push(k.pk);
        }
        pks.sort();
        pks.dedup();
        for pk in pks {
            for item in s.query(&pk, "", true).unwrap() {
                out.insert(Key::of(&item).unwrap(), item);
            }
        }
        out
    }
}

impl Drop for Env {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// `out` exited with `code` and its stderr says `says`.
fn assert_failed(out: &Output, code: i32, says: &str) {
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "{err}");
    assert!(err.contains(says), "{err}");
}

fn level_key(ns: &str, level: &str, target: &str) -> Key {
    match level {
        "system" => keys::system_config_key(ns),
        "resource" => keys::resource_config_key(ns, target),
        "entity" => {
            let (e, r) = target.split_once('/').unwrap();
            keys::entity_config_key(ns, e, r)
        }
        other => panic!("unknown level {other}"),
    }
}

/// Writes a resource config item the way `resource set-defaults` would (with the
/// API's bookkeeping), bypassing the manifest.
fn put_resource(s: &LocalStore, ns: &str, r: &str, capacity: u64) {
    let key = keys::resource_config_key(ns, r);
    let mut item = s.get(&key, true).unwrap().unwrap_or_else(|| {
        let mut i = Item::new();
        i.insert("PK".into(), AttrValue::s(&key.pk));
        i.insert("SK".into(), AttrValue::s(&key.sk));
        i.insert("resource".into(), AttrValue::s(r));
        i.insert("l_rpm_ra".into(), AttrValue::n(capacity));
        i.insert("l_rpm_rp".into(), AttrValue::n(60));
        i.insert("GSI4PK".into(), AttrValue::s(ns));
        i.insert("GSI4SK".into(), AttrValue::s(&key.pk));
        i
    });
    item.insert("config_version".into(), AttrValue::n(1));
    item.insert("l_rpm_cp".into(), AttrValue::n(capacity));
    s.write(WriteOp::Put {
        item,
        condition: None,
    })
    .unwrap();
}

fn store_files(env: &Env) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(&env.dir).unwrap() {
        let p = e.unwrap().path();
        out.push((p.display().to_string(), std::fs::read(&p).unwrap()));
    }
    out.sort();
    out
}

struct Step {
    line: usize,
    args: Vec<String>,
    stdout: Vec<String>,
    stderr: Vec<String>,
    stderr_contains: Vec<String>,
    exit: i32,
}

fn check_step(env: &Env, step: &Step, fault: &Option<String>) {
    let args: Vec<&str> = step.args.iter().map(String::as_str).collect();
    let vars: Vec<(&str, &str)> = fault
        .iter()
        .map(|m| ("ZAEL_FAULT_FANOUT_ERROR", m.as_str()))
        .collect();
    let out = env.run(&args, &vars);
    let ctx = format!(
        "transcript line {}: `{}`\n--- stdout\n{}--- stderr\n{}",
        step.line,
        step.args.join(" "),
        text(&out.stdout),
        text(&out.stderr)
    );
    let mut want = step.stdout.join("\n");
    if !step.stdout.is_empty() {
        want.push('\n');
    }
    assert_eq!(text(&out.stdout), want, "{ctx}");
    if step.stderr_contains.is_empty() {
        let mut want = step.stderr.join("\n");
        if !step.stderr.is_empty() {
            want.push('\n');
        }
        assert_eq!(text(&out.stderr), want, "{ctx}");
    }
    for s in &step.stderr_contains {
        assert!(
            text(&out.stderr).contains(s.as_str()),
            "stderr lacks {s:?}\n{ctx}"
        );
    }
    assert_eq!(out.status.code(), Some(step.exit), "{ctx}");
}

fn directive(
    env: &Env,
    line: usize,
    words: &[&str],
    snapshot: &mut Vec<(String, Vec<u8>)>,
    fault: &mut Option<String>,
) {
    let ctx = format!("transcript line {line}: % {}", words.join(" "));
    match words {
        ["init", name] => {
            let s = env.store();
            version::ensure_initialized(&s).unwrap();
            namespace::register(&s, name).unwrap();
        }
        ["put", "resource", r, cap] => {
            let cap: u64 = cap.strip_prefix("capacity=").unwrap().parse().unwrap();
            put_resource(&env.store(), &env.ns_id("default"), r, cap);
        }
        ["expect", level @ ("resource" | "entity"), target, presence] => {
            let want = *presence == "present";
            let key = level_key(&env.ns_id("default"), level, target);
            let got = env.store().get(&key, true).unwrap().is_some();
            assert_eq!(got, want, "{ctx}");
        }
        ["expect", "system", presence] => {
            let key = level_key(&env.ns_id("default"), "system", "");
            let got = env.store().get(&key, true).unwrap().is_some();
            assert_eq!(got, *presence == "present", "{ctx}");
        }
        ["expect", "registry", "resources", list] => {
            let ns = env.ns_id("default");
            let item = env
                .store()
                .get(&keys::resources_registry_key(&ns), true)
                .unwrap();
            let got = match item.as_ref().and_then(|i| i.get("resources")) {
                Some(AttrValue::Ss(s)) => s.iter().cloned().collect::<Vec<_>>().join(","),
                _ => String::new(),
            };
            assert_eq!(got, *list, "{ctx}");
        }
        ["expect", "registry", "entity", spec] => {
            let (r, want) = spec.split_once('=').unwrap();
            let ns = env.ns_id("default");
            let item = env
                .store()
                .get(&keys::entity_config_registry_key(&ns), true)
                .unwrap();
            let got = item
                .as_ref()
                .and_then(|i| i.get(r))
                .and_then(|v| v.as_n().map(str::to_string))
                .unwrap_or_else(|| "none".into());
            assert_eq!(got, *want, "{ctx}");
        }
        ["fail-fanouts", message @ ..] => *fault = Some(message.join(" ")),
        ["fix-fanouts"] => *fault = None,
        ["expect", "pending", what] => {
            let ns = env.ns_id("default");
            let items = env
                .store()
                .query(&keys::system_pk(&ns), keys::PENDING_SK_PREFIX, true)
                .unwrap();
            let got: Vec<String> = items
                .iter()
                .map(|i| i["SK"].as_s().unwrap()[keys::PENDING_SK_PREFIX.len()..].to_string())
                .collect();
            let want: Vec<String> = match *what {
                "none" => vec![],
                w => w.split(',').map(str::to_string).collect(),
            };
            assert_eq!(got, want, "{ctx}");
            for item in &items {
                // One owner share: {token: {lease, full}}.
                let Some(AttrValue::M(owners)) = item.get("owners") else {
                    panic!("{ctx}: no owners map in {item:?}")
                };
                assert_eq!(owners.len(), 1, "{ctx}");
                let Some(AttrValue::M(share)) = owners.values().next() else {
                    panic!("{ctx}: bad share")
                };
                assert!(share.get("lease").and_then(|v| v.as_n()).is_some(), "{ctx}");
                assert_eq!(share.get("full"), Some(&AttrValue::Bool(false)), "{ctx}");
            }
        }
        ["snapshot"] => *snapshot = store_files(env),
        ["expect", "unchanged"] => assert!(store_files(env) == *snapshot, "{ctx}: store changed"),
        _ => panic!("{ctx}: unknown directive"),
    }
}

/// Runs a transcript file: steps and directives in order.
fn replay(name: &str) {
    let path = transcripts().join(name);
    let script = std::fs::read_to_string(&path).unwrap();
    let env = Env::new(name);
    let mut snapshot = Vec::new();
    let mut fault = None;
    let mut step: Option<Step> = None;
    let lines: Vec<&str> = script.lines().collect();
    for (i, line) in lines.iter().enumerate() {
        let n = i + 1;
        let boundary = line.starts_with("$ ") || line.starts_with("% ") || line.starts_with('#');
        if boundary {
            if let Some(s) = step.take() {
                check_step(&env, &s, &fault);
            }
        }
        if let Some(rest) = line.strip_prefix("$ ") {
            step = Some(Step {
                line: n,
                args: rest.split_whitespace().map(str::to_string).collect(),
                stdout: vec![],
                stderr: vec![],
                stderr_contains: vec![],
                exit: 0,
            });
        } else if let Some(rest) = line.strip_prefix("% ") {
            let words: Vec<&str> = rest.split_whitespace().collect();
            directive(&env, n, &words, &mut snapshot, &mut fault);
        } else if line.starts_with('#') {
        } else if let Some(s) = step.as_mut() {
            if let Some(code) = line.strip_prefix("? exit ") {
                s.exit = code.trim().parse().unwrap();
            } else if let Some(t) = line.strip_prefix("!~ ") {
                s.stderr_contains.push(t.to_string());
            } else if *line == "!" {
                s.stderr.push(String::new());
            } else if let Some(t) = line.strip_prefix("! ") {
                s.stderr.push(t.to_string());
            } else {
                s.stdout.push(line.to_string());
            }
        } else {
            panic!("{}:{n}: output outside a step", path.display());
        }
    }
    if let Some(s) = step.take() {
        check_step(&env, &s, &fault);
    }
}

#[test]
fn reference_transcript_replays_on_the_local_store() {
    replay("reference.transcript");
}

#[test]
fn pending_fanout_transcript_replays_on_the_local_store() {
    replay("pending.transcript");
}

fn copy_store(from: &Env, to: &Env) {
    for e in std::fs::read_dir(&from.dir).unwrap() {
        let p = e.unwrap().path();
        std::fs::copy(&p, to.dir.join(p.file_name().unwrap())).unwrap();
    }
}

/// A kill after ANY write of an apply leaves a store that the next apply repairs:
/// the repaired store equals a clean apply's result, item for item, and the items
/// no manifest manages are untouched.
#[test]
fn a_kill_after_any_write_is_repaired_by_the_next_apply() {
    let base = Env::new("crash-base");
    base.ok(&["limits", "apply", "-f", "crash-a.yaml"]);
    let ns = base.ns_id("default");
    // Unmanaged items: an API-written resource and entity level.
    put_resource(&base.store(), &ns, "legacy", 7);
    let key = keys::entity_config_key(&ns, "api-user", "gpt-4");
    let mut api_item = Item::new();
    api_item.insert("PK".into(), AttrValue::s(&key.pk));
    api_item.insert("SK".into(), AttrValue::s(&key.sk));
    api_item.insert("entity_id".into(), AttrValue::s("api-user"));
    api_item.insert("resource".into(), AttrValue::s("gpt-4"));
    api_item.insert("l_rpm_cp".into(), AttrValue::n(3));
    api_item.insert("GSI4PK".into(), AttrValue::s(&ns));
    api_item.insert("GSI4SK".into(), AttrValue::s(&key.pk));
    base.store()
        .write(WriteOp::Put {
            item: api_item.clone(),
            condition: None,
        })
        .unwrap();
    let before = base.dump(&ns);

    let clean = Env::new("crash-clean");
    copy_store(&base, &clean);
    clean.ok(&["limits", "apply", "-f", "crash-b.yaml"]);
    let want = common::comparable(clean.dump(&ns));
    assert_ne!(
        want,
        common::comparable(before.clone()),
        "the apply must change something"
    );
    let again = clean.run(&["limits", "plan", "-f", "crash-b.yaml"], &[]);
    assert_eq!(
        text(&again.stdout),
        "No changes. Infrastructure is up-to-date.\n"
    );

    let mut crashes = 0;
    for n in 1.. {
        let env = Env::new(&format!("crash-{n}"));
        copy_store(&base, &env);
        let n_text = n.to_string();
        let out = env.run(
            &["limits", "apply", "-f", "crash-b.yaml"],
            &[("ZAEL_FAULT_ABORT_AFTER_WRITES", &n_text)],
        );
        if out.status.code() == Some(0) {
            // Fewer than n writes: the apply finished; every write point was tried.
            assert_eq!(common::comparable(env.dump(&ns)), want);
            break;
        }
        assert_eq!(
            out.status.code(),
            None,
            "write {n}: the apply should have been killed\n{}",
            text(&out.stderr)
        );
        crashes += 1;
        // The next apply runs after the dead apply's leases ran out. With
        // --no-refresh it must end the same, whether it finishes the manifest or
        // goes back to the previous one (where digests the dead apply left would
        // lie about the levels it wrote).
        let copy = |tag: &str| {
            let e = Env::new(&format!("crash-{n}-{tag}"));
            copy_store(&env, &e);
            e
        };
        let (trusting, back, back_trusting) = (copy("nr"), copy("back"), copy("back-nr"));
        let repair = |env: &Env, manifest: &str, flags: &[&str]| {
            let mut args = vec!["limits", "apply", "-f", manifest];
            args.extend(flags);
            let out = env.run(&args, &[("ZAEL_TEST_CLOCK_OFFSET_MS", "2000000")]);
            common::assert_exit(
                &out,
                0,
                format_args!("write {n}: apply {manifest} {flags:?}"),
            );
            common::comparable(env.dump(&ns))
        };
        for (env, flags) in [(&env, &[][..]), (&trusting, &["--no-refresh"][..])] {
            let got = repair(env, "crash-b.yaml", flags);
            assert!(
                got == want,
                "after a kill at write {n}, repaired with {flags:?}:\n{}",
                common::differences(&got, &want)
            );
            for k in [keys::resource_config_key(&ns, "legacy"), key.clone()] {
                assert_eq!(got.get(&k), before.get(&k), "unmanaged {k:?} touched");
            }
        }
        assert_eq!(
            repair(&back_trusting, "crash-a.yaml", &["--no-refresh"]),
            repair(&back, "crash-a.yaml", &[]),
            "after a kill at write {n}, going back to crash-a with --no-refresh"
        );
    }
    // Gate, write-ahead, batched puts, each delete, releases, record: at least 5.
    assert!(crashes >= 5, "only {crashes} write points exercised");
}

/// `--no-refresh` reads only what the manifest changes: drift made behind the
/// manifest's back is found by a normal plan only, and when the recorded digests
/// cannot be trusted every level is read and a warning says why.
#[test]
fn no_refresh_trusts_the_last_apply_and_says_when_it_cannot() {
    let env = Env::new("no-refresh");
    env.ok(&["limits", "apply", "-f", "m1.yaml"]);
    let ns = env.ns_id("default");
    put_resource(&env.store(), &ns, "gpt-4", 7);

    let plan = |flags: &[&str]| {
        let mut args = vec!["limits", "plan", "-q", "-f", "m1.yaml"];
        args.extend(flags);
        let out = env.ok(&args);
        (text(&out.stdout), text(&out.stderr))
    };
    assert_eq!(plan(&[]).0, "Plan: 1 change(s) (3 unchanged)\n");
    assert_eq!(
        plan(&["--no-refresh"]),
        (
            "No changes. Infrastructure is up-to-date.\n".into(),
            String::new()
        )
    );
    // A manifest change is seen (and read) with --no-refresh.
    let out = env.ok(&["limits", "plan", "-f", "m2.yaml", "--no-refresh"]);
    assert!(
        text(&out.stdout).starts_with("Plan: "),
        "{}",
        text(&out.stdout)
    );

    // Another provisioner's record: digests not trusted, the drift is found.
    let s = env.store();
    let rec_key = keys::provisioner_key(&ns);
    let mut rec = s.get(&rec_key, true).unwrap().unwrap();
    rec.insert(
        "last_applied".into(),
        AttrValue::s("2030-01-01T00:00:00+00:00"),
    );
    s.write(WriteOp::Put {
        item: rec,
        condition: None,
    })
    .unwrap();
    let (stdout, stderr) = plan(&["--no-refresh"]);
    assert_eq!(stdout, "Plan: 1 change(s) (3 unchanged)\n");
    assert_eq!(
        stderr,
        "Warning: --no-refresh: the #PROVISIONER record was written by another apply since the digests were recorded; every declared level was read\n"
    );
    // An apply (even with --no-refresh) repairs it and records fresh digests.
    let out = env.run(
        &["limits", "apply", "-q", "-f", "m1.yaml", "--no-refresh"],
        &[],
    );
    assert_eq!(
        text(&out.stdout),
        "Applied: 0 created, 1 updated, 0 deleted (3 unchanged).\n"
    );
    assert_eq!(
        plan(&["--no-refresh"]),
        (
            "No changes. Infrastructure is up-to-date.\n".into(),
            String::new()
        )
    );

    // diff has no --no-refresh (its job is the full read); --full excludes it.
    let out = env.run(&["limits", "diff", "-f", "m1.yaml", "--no-refresh"], &[]);
    assert_eq!(out.status.code(), Some(2));
    let out = env.run(
        &["limits", "apply", "-f", "m1.yaml", "--no-refresh", "--full"],
        &[],
    );
    assert_failed(&out, 2, "cannot be used with");
}

#[test]
fn detailed_exitcode_reports_changes_as_2() {
    let env = Env::new("exitcode");
    let de = "--detailed-exitcode";
    let plan = env.run(&["limits", "apply", "-f", "m1.yaml", de], &[]);
    assert_eq!(plan.status.code(), Some(2), "{}", text(&plan.stderr));
    for cmd in ["plan", "diff", "apply"] {
        let out = env.run(&["limits", cmd, "-f", "m1.yaml", de], &[]);
        assert_eq!(out.status.code(), Some(0), "{cmd} without changes");
        let out = env.run(&["limits", cmd, "-f", "m2.yaml", de, "-q"], &[]);
        assert_eq!(out.status.code(), Some(2), "{cmd} with changes");
    }
    let bad = env.run(&["limits", "plan", "-f", "bad.yaml", de], &[]);
    assert_eq!(bad.status.code(), Some(1));
    // Without the flag, changes are not an error.
    let out = env.run(&["limits", "diff", "-f", "m1.yaml"], &[]);
    assert_eq!(out.status.code(), Some(0));
}

#[test]
fn json_output_is_a_versioned_document() {
    let env = Env::new("json");
    let out = env.run(
        &["limits", "apply", "-f", "m1.yaml", "--format", "json"],
        &[],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["version"], 1);
    assert_eq!(doc["command"], "apply");
    assert_eq!(doc["status"], "applied");
    assert_eq!(doc["created"], 4);
    assert_eq!(doc["errors"], serde_json::json!([]));
    assert_eq!(doc["changes"][0]["level"], "system");
    assert_eq!(doc["changes"][0]["target"], serde_json::Value::Null);
    assert_eq!(doc["changes"][3]["target"], "user-1/gpt-4");

    let out = env.run(
        &["limits", "plan", "-f", "m2.yaml", "--format", "json"],
        &[],
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["command"], "plan");
    assert_eq!(doc["status"], "planned");
    assert_eq!(doc["unchanged"], 1);
    assert!(doc.get("errors").is_none());
    let gpt4 = &doc["changes"][1];
    assert_eq!(gpt4["action"], "update");
    assert_eq!(
        gpt4["details"][0],
        serde_json::json!({"op": "~", "path": "rpm.capacity", "old": "500", "new": "600"})
    );
}

#[test]
fn namespace_flag_must_agree_with_the_manifest() {
    let env = Env::new("ns-flag");
    let out = env.run(&["limits", "apply", "-f", "m1.yaml", "-N", "other"], &[]);
    assert_failed(&out, 1, "-N/--namespace is 'other' but the manifest");
    assert!(
        !env.store_path().exists(),
        "a refused apply must write nothing"
    );
    let out = env.run(
        &["limits", "apply", "-f", "m1.yaml", "-N", "default", "-q"],
        &[],
    );
    assert_eq!(
        text(&out.stdout),
        "Applied: 4 created, 0 updated, 0 deleted.\n"
    );
}

/// The seed's workflow plans before the first apply: on the local store a
/// missing file (or a file without this table) reads as empty, every level is
/// a create, and nothing is created, not even the directory.
#[test]
fn plan_on_a_missing_local_store_shows_every_level_as_a_create_and_creates_nothing() {
    let env = Env::new("missing");
    let nested = env.dir.join("not/yet/store.sqlite");
    let local = format!("--local={}", nested.display());
    let run = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_zae-limiter"))
            .current_dir(transcripts())
            .args(args)
            .args([local.as_str(), "-n", TABLE])
            .env_remove("ZAEL_LOCAL_STORE")
            .output()
            .unwrap();
        (out.status.code(), text(&out.stdout), text(&out.stderr))
    };
    let (code, plan, err) = run(&["limits", "plan", "-f", "m1.yaml", "--detailed-exitcode"]);
    assert_eq!((code, err.as_str()), (Some(2), ""), "{plan}");
    let summary = plan.lines().next().unwrap().to_string();
    assert_eq!(summary, "Plan: 4 change(s)");
    let creates: Vec<&str> = plan
        .lines()
        .filter(|l| l.starts_with("  + create "))
        .collect();
    assert_eq!(creates.len(), 4, "{plan}");
    assert!(
        !plan.contains("update") && !plan.contains("delete"),
        "{plan}"
    );
    let (code, json, _) = run(&["limits", "plan", "-f", "m1.yaml", "--format", "json"]);
    assert_eq!(code, Some(0));
    let doc: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(doc["unchanged"], 0);
    assert!(doc["changes"]
        .as_array()
        .unwrap()
        .iter()
        .all(|c| c["action"] == "create"));
    let (code, diff, _) = run(&["limits", "diff", "-f", "m1.yaml", "-q"]);
    let note = "Note: table 'mystack' does not exist in the local store yet; apply creates it and registers namespace 'default' first.\n";
    assert_eq!(
        (code, diff),
        (Some(0), format!("Drift detected: 4 difference(s)\n{note}"))
    );
    assert!(
        !env.dir.join("not").exists(),
        "plan and diff must create neither the store nor its directory"
    );

    // What apply then does is what the plan said.
    let (code, applied, err) = run(&["limits", "apply", "-f", "m1.yaml"]);
    assert_eq!(code, Some(0), "{err}");
    for line in &creates {
        assert!(applied.contains(line), "{line} missing from:\n{applied}");
    }
    assert!(nested.exists());

    // A file that exists but holds only another table: the same, and the
    // file is left as it was.
    let before = std::fs::read(&nested).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_zae-limiter"))
        .current_dir(transcripts())
        .args([
            "limits",
            "plan",
            "-f",
            "m1.yaml",
            "-q",
            local.as_str(),
            "-n",
            "other",
        ])
        .env_remove("ZAEL_LOCAL_STORE")
        .output()
        .unwrap();
    assert_eq!(
        text(&out.stdout),
        "Plan: 4 change(s)\nNote: table 'other' does not exist in the local store yet; apply creates it and registers namespace 'default' first.\n",
        "{}",
        text(&out.stderr)
    );
    assert_eq!(std::fs::read(&nested).unwrap(), before);
}

/// A namespace not registered yet is no refusal for plan and diff: apply
/// registers it, so they say so and show its creates (exit 2 with
/// `--detailed-exitcode`); a plan saved then applies exactly, registering the
/// namespace under the id its items were planned with.
#[test]
fn plan_and_diff_on_a_new_namespace_show_what_apply_does() {
    let env = Env::new("new-ns");
    env.ok(&["limits", "apply", "-f", "m1.yaml", "-q"]);
    let before = env.dump(&env.ns_id("default"));
    let note = "Note: namespace 'prod' is not registered yet; apply registers it first.\n";
    let de = "--detailed-exitcode";
    for cmd in ["plan", "diff"] {
        let out = env.run(&["limits", cmd, "-f", "sched.yaml", de], &[]);
        assert_eq!(out.status.code(), Some(2), "{cmd}: {}", text(&out.stderr));
        let stdout = text(&out.stdout);
        assert!(stdout.contains(note), "{cmd}: {stdout}");
        assert_eq!(stdout.matches("  + ").count(), 2, "{cmd}: {stdout}");
        let out = env.run(
            &["limits", cmd, "-f", "sched.yaml", "--format", "json"],
            &[],
        );
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(doc["register_namespace"], true, "{cmd}");
        assert_eq!(doc["namespace"], "prod", "{cmd}");
    }
    assert_eq!(namespace::resolve(&env.store(), "prod").unwrap(), None);
    assert_eq!(
        env.dump(&env.ns_id("default")),
        before,
        "plan and diff write nothing"
    );

    // A manifest without levels: no level changes, but apply registers the
    // namespace, so every summary line says so (exit 2 counts it).
    let empty = env.dir.join("empty.yaml");
    std::fs::write(&empty, "namespace: empty6\n").unwrap();
    let empty = empty.to_str().unwrap();
    for (cmd, says) in [
        (
            "plan",
            "Plan: no level changes; apply registers namespace 'empty6'.\n",
        ),
        (
            "diff",
            "Drift detected: namespace 'empty6' is not registered yet (apply registers it).\n",
        ),
    ] {
        let out = env.run(&["limits", cmd, "-f", empty, de], &[]);
        assert_eq!(out.status.code(), Some(2), "{cmd}: {}", text(&out.stderr));
        assert_eq!(text(&out.stdout), says, "{cmd}");
    }
    let out = env.ok(&["limits", "apply", "-f", empty]);
    assert_eq!(
        text(&out.stdout),
        "Registered namespace 'empty6'; no level changes.\n"
    );
    assert!(namespace::resolve(&env.store(), "empty6")
        .unwrap()
        .is_some());
    let out = env.ok(&["limits", "apply", "-f", empty]);
    assert_eq!(
        text(&out.stdout),
        "No changes. Infrastructure is up-to-date.\n"
    );
    for cmd in ["plan", "diff"] {
        let out = env.run(&["limits", cmd, "-f", empty, de], &[]);
        assert_eq!(out.status.code(), Some(0), "{cmd}: {}", text(&out.stdout));
    }

    // A saved plan registers the namespace and applies exactly its creates.
    let saved = env.dir.join("prod.plan");
    let saved = saved.to_str().unwrap();
    let out = env.ok(&["limits", "plan", "-f", "sched.yaml", "-o", saved, "-q"]);
    assert!(text(&out.stdout).contains(note));
    let planned: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(saved).unwrap()).unwrap();
    assert_eq!(planned["register_namespace"], true);
    let out = Command::new(env!("CARGO_BIN_EXE_zae-limiter"))
        .args(["limits", "show-plan", saved, "-q"])
        .output()
        .unwrap();
    assert!(text(&out.stdout).contains(note), "{}", text(&out.stderr));
    let out = env.ok(&["limits", "apply", saved, "-q"]);
    assert_eq!(
        text(&out.stdout),
        "Applied: 2 created, 0 updated, 0 deleted.\nRegistered namespace 'prod'.\n"
    );
    assert_eq!(env.ns_id("prod"), planned["namespace_id"]);
    let out = env.run(&["limits", "plan", "-f", "sched.yaml", de], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));

    // Registered meanwhile by another apply: the saved plan is stale.
    let other = Env::new("new-ns-race");
    other.ok(&["limits", "apply", "-f", "m1.yaml", "-q"]);
    other.ok(&["limits", "plan", "-f", "sched.yaml", "-o", saved, "-q"]);
    // A manifest's apply says it registered the namespace, once.
    let registered = |out: &std::process::Output| -> serde_json::Value {
        serde_json::from_str::<serde_json::Value>(&text(&out.stdout)).unwrap()["register_namespace"]
            .clone()
    };
    let json = ["limits", "apply", "-f", "sched.yaml", "--format", "json"];
    assert_eq!(registered(&other.ok(&json)), true);
    assert_eq!(registered(&other.ok(&json)), false);
    let out = other.run(&["limits", "apply", saved], &[]);
    assert_failed(
        &out,
        1,
        "saved plan is stale: namespace 'prod' is registered under id",
    );
}

#[test]
fn read_only_commands_refuse_missing_tables_and_namespaces() {
    let env = Env::new("refuse");
    let reads = [
        &["entity", "get-limits", "user-1"][..],
        &["namespace", "list"],
        &["cooldown", "list"],
    ];
    // No store file at all: the file is what is missing, not the table.
    for args in reads {
        let out = env.run(args, &[]);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let err = text(&out.stderr);
        let want = format!(
            "Error: local store {} does not exist (no such file), so it has no table 'mystack'. Check the path",
            env.store_path().display()
        );
        assert!(err.starts_with(&want), "{args:?}: {err}");
    }
    let out = env.run(&["cooldown", "check", "p/a"], &[]);
    assert_failed(&out, 76, "does not exist (no such file)");
    assert!(
        !env.store_path().exists(),
        "reads must not create the store"
    );
    // A store file holding another table.
    LocalStore::open(&env.store_path(), "other")
        .unwrap()
        .create_table()
        .unwrap();
    for args in reads {
        let out = env.run(args, &[]);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let err = text(&out.stderr);
        assert!(
            err.starts_with("Error: table 'mystack' not found in local store")
                && err.contains(&format!(
                    // Shell-quoted: the test's directory has spaces.
                    "Create it with `zae-limiter table create -n mystack --local='{}'`",
                    env.store_path().display()
                )),
            "{args:?}: {err}"
        );
    }
    // cooldown check refuses (76: state it cannot read is never permission).
    let out = env.run(&["cooldown", "check", "p/a"], &[]);
    assert_failed(
        &out,
        76,
        "Create it with `zae-limiter table create -n mystack",
    );

    let s = env.store();
    version::ensure_initialized(&s).unwrap();

    // A table that demands a newer client.
    s.write(WriteOp::Update {
        key: keys::version_key(),
        actions: vec![zae_limiter::store::UpdateAction::Set(
            "client_min_version".into(),
            AttrValue::s("0.18.0"),
        )],
        condition: None,
    })
    .unwrap();
    for cmd in ["plan", "apply"] {
        let out = env.run(&["limits", cmd, "-f", "m1.yaml"], &[]);
        assert_eq!(out.status.code(), Some(1), "{cmd}");
        assert!(text(&out.stderr).contains("client_min_version"), "{cmd}");
    }
}

#[test]
fn version_gates_refuse_old_lambdas_and_ratchet_the_minimum() {
    let env = Env::new("gates");
    let s = env.store();
    version::ensure_initialized(&s).unwrap();
    let set_lambda = |v: &str| {
        s.write(WriteOp::Update {
            key: keys::version_key(),
            actions: vec![zae_limiter::store::UpdateAction::Set(
                "lambda_version".into(),
                AttrValue::s(v),
            )],
            condition: None,
        })
        .unwrap();
    };
    set_lambda("0.16.0");
    let out = env.run(&["limits", "apply", "-f", "sched.yaml"], &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).starts_with(
            "Error: Version mismatch: client=0.17.0, schema=0.10.0, lambda=0.16.0. Refusing to store a soft limit or bypass"
        ),
        "{}",
        text(&out.stderr)
    );
    let ns = env.ns_id("prod");
    assert!(s
        .get(&keys::resource_config_key(&ns, "gpt-4"), true)
        .unwrap()
        .is_none());
    assert!(s.get(&keys::provisioner_key(&ns), true).unwrap().is_none());

    set_lambda("0.17.0");
    env.ok(&["limits", "apply", "-f", "sched.yaml", "-q"]);
    let min = version::read(&s).unwrap().unwrap().client_min_version;
    assert_eq!(min.as_deref(), Some("0.17.0"));
    // A manifest without gated features never lowers it.
    env.run(&["limits", "apply", "-f", "m1.yaml", "-q"], &[]);
    let min = version::read(&s).unwrap().unwrap().client_min_version;
    assert_eq!(min.as_deref(), Some("0.17.0"));
}

#[test]
fn plan_prints_the_cascade_warning_on_stderr() {
    let env = Env::new("warn");
    let dir = env.dir.join("m");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("cascade.yaml");
    std::fs::write(
        &file,
        "namespace: default\nresources:\n  gpt-4:\n    cascade: true\n    limits:\n      rpm:\n        capacity: 5\n",
    )
    .unwrap();
    let file = file.display().to_string();
    env.run(&["limits", "apply", "-f", "m3.yaml"], &[]);
    let out = env.run(&["limits", "plan", "-f", &file, "-q"], &[]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        text(&out.stderr),
        "Warning: resources.gpt-4 sets cascade: true, but no entity in this manifest has its own limits for 'gpt-4', so parents will be limited by the per-user resource defaults\n"
    );
    assert_eq!(text(&out.stdout), "Plan: 1 change(s)\n");
    for cmd in ["diff", "apply"] {
        let out = env.run(&["limits", cmd, "-f", &file, "-q"], &[]);
        assert_eq!(text(&out.stderr), "", "{cmd} prints no warnings");
    }
}

/// A scale the table cannot keep exactly (it stores thousandths) is a warning
/// on the plan's stderr, as in `limits validate`.
#[test]
fn plan_warns_when_a_scale_is_rounded() {
    let env = Env::new("scale");
    let file = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/manifests/valid/scale-rounded-to-thousandths.yaml")
        .display()
        .to_string();
    env.run(&["limits", "apply", "-f", "m3.yaml"], &[]);
    let out = env.ok(&["limits", "plan", "-f", &file, "-q"]);
    assert_eq!(
        text(&out.stderr),
        "Warning: scale 0.5004 is stored in thousandths: it is applied as 0.5\n\
         Warning: scale 1.0e-300 is stored in thousandths: it is applied as 0.001 (the smallest scale)\n"
    );
}
