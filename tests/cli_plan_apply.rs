//! `limits plan / diff / apply` through the binary on the local store: the
//! reference's verified transcript (tests/transcripts/reference.transcript),
//! exit codes, JSON, refusals, version gates, and crash safety (a kill after any
//! write of an apply leaves a store the next apply repairs).

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

    /// Runs `zae-limiter ARGS --local STORE -n mystack` in the transcripts directory.
    fn run(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_zae-limiter"));
        cmd.current_dir(transcripts())
            .args(args)
            .arg("--local")
            .arg(self.store_path())
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

fn check_step(env: &Env, step: &Step) {
    let args: Vec<&str> = step.args.iter().map(String::as_str).collect();
    let out = env.run(&args, &[]);
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

fn directive(env: &Env, line: usize, words: &[&str], snapshot: &mut Vec<(String, Vec<u8>)>) {
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
    let mut step: Option<Step> = None;
    let lines: Vec<&str> = script.lines().collect();
    for (i, line) in lines.iter().enumerate() {
        let n = i + 1;
        let boundary = line.starts_with("$ ") || line.starts_with("% ") || line.starts_with('#');
        if boundary {
            if let Some(s) = step.take() {
                check_step(&env, &s);
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
            directive(&env, n, &words, &mut snapshot);
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
        check_step(&env, &s);
    }
}

#[test]
fn reference_transcript_replays_on_the_local_store() {
    replay("reference.transcript");
}
