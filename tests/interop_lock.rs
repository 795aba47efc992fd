//! Team-safe applies on a real DynamoDB API (moto), with real processes: two
//! applies started together end as exactly one manifest with nothing outside
//! the managed set; saved plans apply exactly or are refused as stale; the
//! reference's provisioner (which knows nothing of our lock) rewriting the
//! record under a running apply leaves nothing unmanaged; a killed holder's
//! lock expires with its lease; SIGTERM releases it.

mod common;
mod interop_support;
mod lock_support;

use std::collections::BTreeSet;

use interop_support::{default_nsid, interop, Interop};
use lock_support::{concurrent_rounds, level_of, spawn, Running, Target};
use serde_json::Value;
use zae_limiter::plan::managed::ManagedSet;
use zae_limiter::store::typed_json::item_from_json;

const M1: &str = "namespace: default\nresources:\n  gpt-4:\n    limits:\n      rpm:\n        capacity: 5\nentities:\n  u1:\n    resources:\n      gpt-4:\n        limits:\n          rpm:\n            capacity: 3\n";
const M2: &str = "namespace: default\nresources:\n  gpt-4:\n    limits:\n      rpm:\n        capacity: 7\n  claude:\n    limits:\n      rpm:\n        capacity: 9\nentities:\n  u2:\n    resources:\n      claude:\n        limits:\n          rpm:\n            capacity: 4\n";

/// `zae-limiter ARGS -n TABLE` with the moto environment.
fn ours(it: &Interop, args: &[&str], envs: &[(&str, &str)]) -> (Option<i32>, String, String) {
    let mut all: Vec<&str> = args.to_vec();
    all.extend(["-n", &it.table]);
    let out = it.ours_env(&all, envs);
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Runs and expects exit `code`; returns (stdout, stderr).
fn expect(it: &Interop, args: &[&str], code: i32) -> (String, String) {
    let (got, out, err) = ours(it, args, &[]);
    assert_eq!(
        got,
        Some(code),
        "{args:?}\n--- stdout\n{out}--- stderr\n{err}"
    );
    (out, err)
}

fn spawn_ours(it: &Interop, args: &[&str], envs: &[(&str, &str)]) -> Running {
    let mut cmd = Moto(it).cmd(args);
    cmd.envs(envs.iter().copied());
    spawn(cmd)
}

/// An apply paused at `step`, holding the lock.
fn paused(it: &Interop, manifest: &str, step: &str) -> Running {
    let r = spawn_ours(
        it,
        &["limits", "apply", "-q", "-f", manifest],
        &[("ZAEL_TEST_PAUSE_AT", step)],
    );
    r.wait_for(&format!("paused at {step}"));
    r
}

/// A fresh table with M1 applied.
fn table(tag: &str) -> Option<(Interop, String, String)> {
    let it = interop(tag)?;
    it.create_table();
    let m1 = it.write_file("m1.yaml", M1).display().to_string();
    let m2 = it.write_file("m2.yaml", M2).display().to_string();
    expect(&it, &["limits", "apply", "-q", "-f", &m1], 0);
    Some((it, m1, m2))
}

/// The default namespace's items in a dump: (its id, config item keys as
/// (PK after the id, SK) sorted, the managed set, the lock item if any).
struct Namespace {
    config: Vec<(String, String)>,
    managed: ManagedSet,
    lock: Option<Value>,
}

fn namespace(it: &Interop) -> Namespace {
    let items = it.dump();
    let ns = default_nsid(&items);
    let mut config = BTreeSet::new();
    let mut managed = ManagedSet::default();
    let mut lock = None;
    for i in &items {
        let pk = i["PK"]["S"].as_str().unwrap_or_default();
        let sk = i["SK"]["S"].as_str().unwrap_or_default();
        let Some(rest) = pk.strip_prefix(ns.as_str()) else {
            continue;
        };
        if sk.starts_with("#CONFIG") {
            config.insert((rest.to_string(), sk.to_string()));
        } else if rest == "/SYSTEM#" && sk == "#PROVISIONER" {
            managed = ManagedSet::from_item(&item_from_json(i).unwrap()).unwrap();
        } else if rest == "/SYSTEM#" && sk == "#APPLY#LOCK" {
            lock = Some(i.clone());
        }
    }
    Namespace {
        config: config.into_iter().collect(),
        managed,
        lock,
    }
}

/// The rounds' view of a moto table.
struct Moto<'a>(&'a Interop);

impl Target for Moto<'_> {
    fn file(&self, name: &str, text: &str) -> String {
        self.0.write_file(name, text).display().to_string()
    }
    fn cmd(&self, args: &[&str]) -> std::process::Command {
        let mut all: Vec<&str> = args.to_vec();
        all.extend(["-n", &self.0.table]);
        self.0.ours_cmd(&all)
    }
    fn config_items(&self) -> Vec<(String, String)> {
        namespace(self.0).config
    }
    fn locked(&self) -> bool {
        namespace(self.0).lock.is_some()
    }
}

fn nothing_unmanaged(n: &Namespace) {
    for (pk, sk) in &n.config {
        assert!(
            n.managed.contains(&level_of(pk, sk)),
            "{pk} {sk} is outside the managed set {:?}",
            n.managed
        );
    }
}

/// 20 rounds of two applies of different manifests started together: every
/// round ends with the table equal to exactly one of them, no config item but
/// its levels, and the other apply failed naming the holder or waited and
/// applied on top.
#[test]
fn concurrent_applies_on_dynamodb_end_as_exactly_one_manifest() {
    let Some((it, _, _)) = table("lockrounds") else {
        return;
    };
    assert!(
        concurrent_rounds(&Moto(&it), 20) > 0,
        "the applies never met"
    );
}

/// A saved plan applied after another apply changed the namespace is refused
/// and writes nothing (and leaves no lock: the next apply does not wait);
/// applied unchanged it makes exactly the planned changes.
#[test]
fn saved_plans_on_dynamodb_apply_exactly_or_are_refused_as_stale() {
    let Some((it, m1, m2)) = table("lockplan") else {
        return;
    };
    let plan = it.write_file("next.plan", "").display().to_string();
    let (planned, _) = expect(
        &it,
        &["limits", "plan", "-f", &m2, "--format", "json", "-o", &plan],
        0,
    );
    let m1b = it
        .write_file("m1b.yaml", &M1.replace("capacity: 3", "capacity: 2"))
        .display()
        .to_string();
    expect(&it, &["limits", "apply", "-q", "-f", &m1b], 0);
    let before = it.dump();
    let (_, err) = expect(&it, &["limits", "apply", &plan], 1);
    assert!(err.starts_with("Error: saved plan is stale: "), "{err}");
    assert_eq!(it.dump(), before, "a stale plan writes nothing");
    expect(&it, &["limits", "apply", "-q", "-f", &m1], 0);

    expect(&it, &["limits", "plan", "-q", "-f", &m2, "-o", &plan], 0);
    let (applied, _) = expect(&it, &["limits", "apply", &plan, "--format", "json"], 0);
    let applied: Value = serde_json::from_str(&applied).unwrap();
    let planned: Value = serde_json::from_str(&planned).unwrap();
    assert_eq!(applied["changes"], planned["changes"]);
    assert_eq!(
        (applied["created"].as_u64(), applied["deleted"].as_u64()),
        (Some(2), Some(1))
    );
    let (out, _) = expect(&it, &["limits", "plan", "-q", "-f", &m2], 0);
    assert_eq!(out, "No changes. Infrastructure is up-to-date.\n");
    let n = namespace(&it);
    nothing_unmanaged(&n);
    assert_eq!(n.config.len(), 3);
}

/// The reference's provisioner rewrites the record while our apply (holding
/// our lock, which it does not know) is about to write its own: ours notices,
/// does not overwrite it, says what to do, and nothing is left outside the
/// managed set. Then SIGTERM during an apply releases the lock, and a lock
/// left by `kill -9` expires with its lease.
#[test]
fn a_provisioner_bypassing_the_lock_and_dead_or_stopped_holders_on_dynamodb() {
    let Some((it, m1, m2)) = table("lockbypass") else {
        return;
    };
    let ours_paused = paused(&it, &m2, "record");
    let m3 = it
        .write_file(
            "m3.yaml",
            &format!("{M1}  u3:\n    resources:\n      gpt-4:\n        limits:\n          rpm:\n            capacity: 1\n"),
        )
        .display()
        .to_string();
    it.reference(&["provision", &it.table, "apply", &m3]);
    let (code, _, err) = ours_paused.finish();
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("the #PROVISIONER record changed while this apply ran"),
        "{err}"
    );
    assert!(err.contains("were added to its managed set"), "{err}");
    let n = namespace(&it);
    nothing_unmanaged(&n);
    assert!(n.lock.is_none());
    // Ours had added its levels to the record before writing them, so the
    // provisioner saw them managed and deleted what its manifest does not
    // declare.
    assert!(!n
        .config
        .contains(&("/ENTITY#u2".into(), "#CONFIG#claude".into())));
    // The next apply of the provisioner's manifest removes what ours added.
    expect(&it, &["limits", "apply", "-q", "-f", &m3], 0);
    let n = namespace(&it);
    nothing_unmanaged(&n);
    assert_eq!(n.config.len(), 3);

    // The holder renews its lease while it works, on a DynamoDB handle of its
    // own (the test shortens the 15 s period).
    let holder = spawn_ours(
        &it,
        &["limits", "apply", "-q", "-f", &m2],
        &[
            ("ZAEL_TEST_PAUSE_AT", "fan_out"),
            ("ZAEL_TEST_LOCK_RENEW_MS", "50"),
        ],
    );
    holder.wait_for("paused at fan_out");
    let lease = || namespace(&it).lock.expect("held")["lease_until_ms"]["N"].clone();
    let first = lease();
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert_ne!(lease(), first, "the lease was not renewed");
    let (code, _, err) = holder.finish();
    assert_eq!(code, Some(0), "{err}");
    expect(&it, &["limits", "apply", "-q", "-f", &m3], 0);

    // SIGTERM before the config writes: nothing changes, the lock is released.
    let p = paused(&it, &m2, "write_levels");
    p.signal("TERM");
    let (code, _, err) = p.finish();
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("Error: interrupted by SIGTERM: stopped before writing any level"),
        "{err}"
    );
    assert!(namespace(&it).lock.is_none());
    expect(
        &it,
        &["limits", "plan", "-q", "--detailed-exitcode", "-f", &m3],
        0,
    );

    // kill -9 after the config writes: the lock stays until its lease runs out.
    let mut p = paused(&it, &m2, "fan_out");
    let pid = p.pid;
    p.kill9();
    assert_eq!(p.finish().0, None);
    let lock = namespace(&it).lock.expect("a killed apply leaves its lock");
    assert_eq!(lock["pid"]["N"], Value::String(pid.to_string()));
    let (_, err) = expect(&it, &["limits", "apply", "-f", &m1], 1);
    assert!(err.contains(&format!("(pid {pid})")), "{err}");
    let (code, _, err) = ours(
        &it,
        &["limits", "apply", "-q", "-f", &m1],
        &[("ZAEL_TEST_CLOCK_OFFSET_MS", "61000")],
    );
    assert_eq!(code, Some(0), "{err}");
    let n = namespace(&it);
    assert!(n.lock.is_none());
    nothing_unmanaged(&n);
    expect(
        &it,
        &["limits", "plan", "-q", "--detailed-exitcode", "-f", &m1],
        0,
    );
}
