//! Team-safe applies on the local store, through the binary with real
//! processes: the namespace lock (concurrent applies, every failure path
//! releases it, a killed holder's lock expires, signals stop at a safe point,
//! force-unlock), saved plans (exact, or refused as stale), and an apply whose
//! record changed under it leaving nothing outside the managed set.

mod common;
mod lock_support;

use std::path::PathBuf;
use std::process::{Command, Output};

use lock_support::{concurrent_rounds, level_of, round_files, side_a, spawn, Running, Target};
use zae_limiter::items::{keys, namespace, version};
use zae_limiter::plan::managed;
use zae_limiter::store::local::LocalStore;
use zae_limiter::store::{AttrValue, Index, Key, Store, UpdateAction, WriteOp};

const TABLE: &str = "locks";

/// A directory with one store file and the manifests of a test.
struct Env {
    dir: tempfile::TempDir,
}

impl Env {
    fn new(name: &str) -> Env {
        let dir = tempfile::Builder::new()
            .prefix(&format!("zael-lock-{name}-"))
            .tempdir()
            .unwrap();
        Env { dir }
    }

    fn store_path(&self) -> PathBuf {
        self.dir.path().join("store.sqlite")
    }

    fn store(&self) -> LocalStore {
        LocalStore::open(&self.store_path(), TABLE).unwrap()
    }

    /// Writes `text` to `name` in the directory; returns its path as text.
    fn file(&self, name: &str, text: &str) -> String {
        common::write_arg(self.dir.path(), name, text)
    }

    /// `zae-limiter ARGS --local=STORE -n locks` with `env`.
    fn cmd(&self, args: &[&str], env: &[(&str, &str)]) -> Command {
        self.cmd_on(TABLE, args, env)
    }

    /// [`Env::cmd`] on another table of the store file.
    fn cmd_on(&self, table: &str, args: &[&str], env: &[(&str, &str)]) -> Command {
        let mut cmd = common::zae_limiter();
        cmd.args(args)
            .arg(format!("--local={}", self.store_path().display()))
            .args(["-n", table])
            .env_remove("ZAEL_TEST_PAUSE_AT")
            .env_remove("ZAEL_TEST_CLOCK_OFFSET_MS")
            .env_remove("ZAEL_FAULT_ABORT_AFTER_WRITES");
        cmd.envs(env.iter().copied());
        cmd
    }

    fn run(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        self.cmd(args, env).output().unwrap()
    }

    /// Runs and expects `code`; returns (stdout, stderr).
    fn expect(&self, args: &[&str], code: i32) -> (String, String) {
        let out = self.run(args, &[]);
        let (got, stdout, stderr) = common::outcome(out);
        assert_eq!(
            got, code,
            "{args:?}\n--- stdout\n{stdout}--- stderr\n{stderr}"
        );
        (stdout, stderr)
    }

    /// `limits apply -q -f MANIFEST`, which must succeed; (stdout, stderr).
    fn apply(&self, manifest: &str) -> (String, String) {
        self.expect(&["limits", "apply", "-q", "-f", manifest], 0)
    }

    /// A new [`Env`] with `m1.yaml` (M1) and `m2.yaml` (M2) written and M1
    /// applied; returns it and the two manifests' paths.
    fn with_m1_applied(name: &str) -> (Env, String, String) {
        let env = Env::new(name);
        let m1 = env.file("m1.yaml", M1);
        let m2 = env.file("m2.yaml", M2);
        env.apply(&m1);
        (env, m1, m2)
    }

    /// An apply paused at `step`, holding the lock.
    fn paused(&self, args: &[&str], step: &str) -> Running {
        let r = spawn(self.cmd(args, &[("ZAEL_TEST_PAUSE_AT", step)]));
        r.wait_for(&format!("paused at {step}"));
        r
    }

    fn ns(&self) -> String {
        namespace::resolve(&self.store(), "default")
            .unwrap()
            .expect("registered")
    }

    /// The lock item, if any.
    fn lock(&self) -> Option<zae_limiter::store::Item> {
        self.store()
            .get(&Key::new(keys::system_pk(&self.ns()), "#APPLY#LOCK"), true)
            .unwrap()
    }

    /// The namespace's config items, as (PK after the id, SK), sorted.
    fn config_items(&self) -> Vec<(String, String)> {
        let ns = self.ns();
        let mut out: Vec<(String, String)> = self
            .store()
            .query_index(Index::Gsi4, &ns, "")
            .unwrap()
            .into_iter()
            .filter(|k| k.sk.starts_with("#CONFIG"))
            .map(|k| (k.pk[ns.len()..].to_string(), k.sk))
            .collect();
        out.sort();
        out.dedup();
        out
    }

    /// The namespace's config items are exactly `levels` (sorted), all managed.
    fn holds_only(&self, levels: &[(&str, &str)]) {
        self.nothing_unmanaged();
        let want: Vec<(String, String)> = levels
            .iter()
            .map(|(pk, sk)| (pk.to_string(), sk.to_string()))
            .collect();
        assert_eq!(self.config_items(), want);
    }

    /// Every config item is in the managed set of the record.
    fn nothing_unmanaged(&self) {
        let ns = self.ns();
        let rec = managed::read(&self.store(), &ns).unwrap();
        for (pk, sk) in self.config_items() {
            let level = level_of(&pk, &sk);
            assert!(
                rec.managed.contains(&level),
                "{pk} {sk} is outside the managed set {:?}",
                rec.managed
            );
        }
    }
}

impl Target for Env {
    fn file(&self, name: &str, text: &str) -> String {
        Env::file(self, name, text)
    }
    fn cmd(&self, args: &[&str]) -> Command {
        Env::cmd(self, args, &[])
    }
    fn config_items(&self) -> Vec<(String, String)> {
        Env::config_items(self)
    }
    fn locked(&self) -> bool {
        self.lock().is_some()
    }
}

const M1: &str = "namespace: default\nresources:\n  gpt-4:\n    limits:\n      rpm:\n        capacity: 5\nentities:\n  u1:\n    resources:\n      gpt-4:\n        limits:\n          rpm:\n            capacity: 3\n";
const M2: &str = "namespace: default\nresources:\n  gpt-4:\n    limits:\n      rpm:\n        capacity: 7\n  claude:\n    limits:\n      rpm:\n        capacity: 9\nentities:\n  u2:\n    resources:\n      claude:\n        limits:\n          rpm:\n            capacity: 4\n";

/// 20 rounds of two applies of different manifests started together: each
/// round ends with the store equal to exactly one of them (its plan says no
/// changes, the other's does not), with no config item but the winner's
/// levels, and the other apply either failed naming the holder or waited for
/// the lock and applied on top.
#[test]
fn concurrent_applies_end_as_exactly_one_manifest() {
    let env = Env::new("rounds");
    let a0 = env.file("init.yaml", &side_a(99).yaml);
    env.apply(&a0);
    assert!(concurrent_rounds(&env, 20) > 0, "the applies never met");
}

/// A saved plan applied unchanged makes exactly the planned changes (the same
/// store as applying the manifest); applied after another apply changed the
/// namespace, it is refused as stale and writes nothing; the lock is released
/// either way. show-plan prints it as plan did.
#[test]
fn a_saved_plan_applies_exactly_or_is_refused_as_stale() {
    let (env, m1, m2) = Env::with_m1_applied("saved");
    let plan = env.dir.path().join("next.plan").display().to_string();
    let (planned, _) = env.expect(&["limits", "plan", "-f", &m2, "-o", &plan], 0);
    assert!(planned.ends_with(&format!(
        "\nSaved the plan to {plan}. To carry out exactly these changes: zae-limiter limits apply -n {TABLE} --local={} {plan}\n",
        env.store_path().display()
    )));
    // show-plan prints what plan printed (text and JSON).
    let show = |format: &str| {
        let out = common::zae_limiter()
            .args(["limits", "show-plan", &plan, "--format", format])
            .output()
            .unwrap();
        let (code, stdout, stderr) = common::outcome(out);
        assert_eq!(code, 0, "{stderr}");
        (stdout, stderr)
    };
    let (shown, note) = show("text");
    assert!(planned.starts_with(&shown), "{planned}\n---\n{shown}");
    assert!(
        note.starts_with("Saved plan for table 'locks', namespace 'default', made "),
        "{note}"
    );
    let (json_plan, _) = env.expect(&["limits", "plan", "-f", &m2, "--format", "json"], 0);
    let (json_shown, _) = show("json");
    assert_eq!(json_shown, json_plan);
    let file: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&plan).unwrap()).unwrap();
    assert_eq!(file["format"], "zae-limiter-plan");
    assert_eq!(file["version"], 1);
    assert_eq!(file["table"], TABLE);
    assert_eq!(file["record"]["exists"], true);

    // Another apply changes the namespace: the saved plan is stale.
    let snapshot = |env: &Env| -> Vec<(Key, zae_limiter::store::Item)> {
        let ns = env.ns();
        let s = env.store();
        let mut keys = s.query_index(Index::Gsi4, &ns, "").unwrap();
        keys.sort();
        keys.dedup();
        keys.into_iter()
            .map(|k| {
                let item = s.get(&k, true).unwrap().unwrap();
                (k, item)
            })
            .collect()
    };
    // Applying the saved plan is refused as stale for `why` and writes nothing.
    let refused_as_stale = |why: &str| {
        let before = snapshot(&env);
        let (_, err) = env.expect(&["limits", "apply", &plan], 1);
        let want = format!("Error: saved plan is stale: {why}");
        assert!(err.starts_with(&want), "{err}");
        assert_eq!(snapshot(&env), before, "a stale plan writes nothing");
        err
    };
    let m1b = env.file("m1b.yaml", &M1.replace("capacity: 3", "capacity: 2"));
    env.apply(&m1b);
    let err = refused_as_stale("it was made against the #PROVISIONER record written at ");
    assert!(
        err.contains("(another apply ran since); nothing was written."),
        "{err}"
    );
    // The lock was released: an apply right after does not wait.
    env.apply(&m1);

    // A level the plan changes, changed behind its back (the record did not move).
    let (_, _) = env.expect(&["limits", "plan", "-q", "-f", &m2, "-o", &plan], 0);
    let ns = env.ns();
    let s = env.store();
    let key = keys::resource_config_key(&ns, "gpt-4");
    s.write(WriteOp::Update {
        key,
        actions: vec![UpdateAction::Set("l_rpm_cp".into(), AttrValue::n(6))],
        condition: None,
    })
    .unwrap();
    refused_as_stale("resource gpt-4 changed since the plan was made");

    // Unchanged since: exactly the planned changes, the same store as applying m2.
    env.apply(&m1);
    let (_, _) = env.expect(&["limits", "plan", "-q", "-f", &m2, "-o", &plan], 0);
    let (applied, _) = env.expect(&["limits", "apply", &plan, "--format", "json"], 0);
    let applied: serde_json::Value = serde_json::from_str(&applied).unwrap();
    let planned: serde_json::Value = serde_json::from_str(&json_plan).unwrap();
    assert_eq!(applied["changes"], planned["changes"]);
    assert_eq!(applied["errors"], serde_json::json!([]));
    let (after, _) = env.expect(&["limits", "plan", "-q", "-f", &m2], 0);
    assert_eq!(after, "No changes. Infrastructure is up-to-date.\n");
    let by_plan = comparable(snapshot(&env));
    let direct = Env::new("saved-direct");
    let (d1, d2) = (direct.file("m1.yaml", M1), direct.file("m2.yaml", M2));
    direct.apply(&d1);
    direct.apply(&d2);
    let mut want = comparable(snapshot(&direct));
    let ids = (direct.ns(), env.ns());
    for (k, item) in want.iter_mut() {
        *k = k.replace(&ids.0, &ids.1);
        *item = item.replace(&ids.0, &ids.1);
    }
    assert_eq!(
        by_plan, want,
        "a saved plan ends where its manifest's apply ends"
    );
    // It recorded the level digests as an apply does: --no-refresh trusts them.
    let (out, err) = env.expect(&["limits", "plan", "-q", "--no-refresh", "-f", &m2], 0);
    assert_eq!(
        (out.as_str(), err.as_str()),
        ("No changes. Infrastructure is up-to-date.\n", "")
    );

    // Applying it again: the record moved (this plan's own apply), so stale.
    refused_as_stale("it was made against the #PROVISIONER record");
    // Not a plan file, another table: refused before anything is opened.
    let (_, err) = env.expect(&["limits", "apply", &m2], 1);
    assert!(err.contains("is not a saved plan"), "{err}");
    let out = env
        .cmd_on("other-table", &["limits", "apply", &plan], &[])
        .output()
        .unwrap();
    let (code, _, err) = common::outcome(out);
    assert_eq!(code, 1);
    assert!(
        err.starts_with(&format!(
            "Error: {plan} is a plan for table 'locks', not 'other-table'; nothing was written"
        )),
        "{err}"
    );
}

/// Item keys and bodies as text, without what differs between two equal
/// applies (timestamps, tokens).
fn comparable(items: Vec<(Key, zae_limiter::store::Item)>) -> Vec<(String, String)> {
    items
        .into_iter()
        .map(|(k, mut item)| {
            // The digests hash keys, which hold the namespace id.
            for volatile in common::VOLATILE.iter().chain(&["digests"]) {
                item.remove(*volatile);
            }
            (
                format!("{} {}", k.pk, k.sk),
                zae_limiter::store::typed_json::item_to_json(&item).to_string(),
            )
        })
        .collect()
}

/// Every way an apply can fail after taking the lock releases it: a refused
/// plan (a limit changing kind), a refused version gate, a store error (a
/// corrupt record), a stale saved plan (above), a stop on a signal (below).
/// Each is followed by an apply that must not wait.
#[test]
fn every_failure_path_releases_the_lock() {
    let (env, m1, _) = Env::with_m1_applied("failures");
    let ok_again = |why: &str| {
        assert!(env.lock().is_none(), "{why}: the lock is left");
        let out = env.run(&["limits", "apply", "-q", "-f", &m1], &[]);
        let (code, _, err) = common::outcome(out);
        assert_eq!(code, 0, "{why}: the next apply failed:\n{err}");
    };

    // Applying manifest `text` (written as `name`) fails saying `says`.
    let refused = |name: &str, text: &str, says: &str| {
        let f = env.file(name, text);
        let (_, err) = env.expect(&["limits", "apply", "-f", &f], 1);
        assert!(err.contains(says), "{err}");
    };

    // A refused plan: rpm would change from a bucket to a concurrency limit.
    refused(
        "kind.yaml",
        &M1.replace("rpm:\n        capacity: 5", "rpm:\n        concurrency: 3"),
        "limit 'rpm' cannot change from",
    );
    ok_again("a refused plan");

    // A refused version gate: a soft limit on a table whose Lambdas are 0.16.
    let s = env.store();
    let set_lambda = |v: &str| {
        s.write(WriteOp::Update {
            key: keys::version_key(),
            actions: vec![UpdateAction::Set("lambda_version".into(), AttrValue::s(v))],
            condition: None,
        })
        .unwrap();
    };
    set_lambda("0.16.0");
    refused(
        "soft.yaml",
        &M1.replace("capacity: 3", "capacity: 3\n            soft: true"),
        "Version mismatch",
    );
    ok_again("a refused version gate");
    set_lambda("0.17.0");

    // A store error: the #PROVISIONER record cannot be read.
    let ns = env.ns();
    let rec_key = keys::provisioner_key(&ns);
    let good = s.get(&rec_key, true).unwrap().unwrap();
    let mut bad = good.clone();
    bad.insert("managed_resources".into(), AttrValue::s("not a list"));
    s.write(WriteOp::Put {
        item: bad,
        condition: None,
    })
    .unwrap();
    let (_, err) = env.expect(&["limits", "apply", "-f", &m1], 1);
    assert!(err.contains("corrupt item"), "{err}");
    s.write(WriteOp::Put {
        item: good,
        condition: None,
    })
    .unwrap();
    ok_again("a store error");

    // A plan file that is not one, and a bad --lock-timeout: refused before the lock.
    let (_, err) = env.expect(&["limits", "apply", &m1, "--lock-timeout", "5"], 1);
    assert!(err.contains("is not a saved plan"), "{err}");
    let (_, err) = env.expect(&["limits", "apply", "-f", &m1, "--lock-timeout", "soon"], 2);
    assert!(
        err.contains("--lock-timeout: 'soon' is not a duration"),
        "{err}"
    );
    ok_again("refusals before the lock");
}

/// An apply that holds the lock: a second one fails at once naming it (exit 1,
/// nothing written), `--lock-timeout` waits for it, plan and diff take no lock,
/// force-unlock refuses another id, and removing the lock stops the holder at
/// its next safe point.
#[test]
fn a_held_lock_names_its_holder_and_only_its_id_removes_it() {
    let (env, m1, m2) = Env::with_m1_applied("held");
    let holder = env.paused(&["limits", "apply", "-q", "-f", &m2], "write_levels");
    let lock = env.lock().expect("the lock item");
    let id = lock["lock_id"].as_s().unwrap().to_string();
    assert_eq!(lock["pid"], AttrValue::n(holder.pid));
    assert_eq!(
        lock["operation"],
        AttrValue::s(format!("limits apply -f {m2}"))
    );
    assert_eq!(
        lock["GSI4PK"],
        AttrValue::s(env.ns()),
        "a namespace purge removes it"
    );

    let started = std::time::Instant::now();
    let (_, err) = env.expect(&["limits", "apply", "-f", &m1], 1);
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
    for part in [
        "Error: namespace 'default' of table 'locks' is locked by another apply:\n",
        &format!("  Lock ID:   {id}\n"),
        &format!(" (pid {})\n", holder.pid),
        &format!("  Operation: limits apply -f {m2}\n"),
        "Nothing was written. Wait for it with --lock-timeout DURATION",
        &format!(
            "zae-limiter limits force-unlock {id} -n locks --local={} -N default",
            env.store_path().display()
        ),
    ] {
        assert!(err.contains(part), "missing {part:?} in\n{err}");
    }
    let (_, err) = env.expect(&["limits", "apply", "-f", &m1, "--lock-timeout", "1s"], 1);
    assert!(
        err.starts_with("Waiting up to 1s for the lock on namespace 'default'"),
        "{err}"
    );
    assert!(
        err.contains("Error: gave up after waiting 1s: namespace 'default'"),
        "{err}"
    );
    // Ctrl-C while waiting ends the wait, nothing written.
    let waiter = spawn(env.cmd(
        &["limits", "apply", "-f", &m1, "--lock-timeout", "60s"],
        &[],
    ));
    waiter.wait_for("Waiting up to 1m for the lock");
    waiter.signal("INT");
    let (code, _, err) = waiter.finish();
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains(
            "Error: interrupted by SIGINT while waiting for the lock; nothing was written"
        ),
        "{err}"
    );

    // plan and diff read while an apply holds the lock.
    let (out, _) = env.expect(&["limits", "plan", "-q", "-f", &m2], 0);
    assert!(out.starts_with("Plan: "), "{out}");
    env.expect(&["limits", "diff", "-q", "-f", &m2], 0);

    // force-unlock: another id is refused, the current one removes it.
    let (_, err) = env.expect(&["limits", "force-unlock", "0123"], 1);
    assert!(
        err.starts_with(&format!("Error: lock ID 0123 is not the current lock of namespace 'default'; nothing was removed. The current lock is {id}")),
        "{err}"
    );
    assert!(env.lock().is_some());
    let (out, _) = env.expect(&["limits", "force-unlock", &id], 0);
    assert!(
        out.starts_with(&format!("Removed lock {id} of namespace 'default'")),
        "{out}"
    );
    assert!(env.lock().is_none());
    let (_, err) = env.expect(&["limits", "force-unlock", &id], 1);
    assert!(err.contains("is not locked"), "{err}");
    // The holder resumes: it finds its lock gone and stops before writing.
    let (code, _, err) = holder.finish();
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("Error: the apply lock was removed (force-unlock) or taken over by another apply: stopped before writing any level; nothing was changed"),
        "{err}"
    );
    let (out, _) = env.expect(&["limits", "plan", "-q", "-f", &m1], 0);
    assert_eq!(out, "No changes. Infrastructure is up-to-date.\n");
}

/// A held lock made by a process killed with `kill -9` stays until its lease
/// runs out (a following apply fails naming the dead pid), then the next
/// apply takes it over (the clock hook stands in for the minute of waiting).
/// The dead apply had written its levels but not its record; they were
/// already in the managed set, so an apply of another manifest removes them.
#[test]
fn a_killed_holders_lock_expires_with_its_lease() {
    let (env, m1, m2) = Env::with_m1_applied("kill9");
    let mut holder = env.paused(&["limits", "apply", "-q", "-f", &m2], "fan_out");
    let pid = holder.pid;
    holder.kill9();
    let (code, _, _) = holder.finish();
    assert_eq!(code, None, "killed by a signal");
    let lock = env.lock().expect("a killed apply leaves its lock");
    assert_eq!(lock["pid"], AttrValue::n(pid));
    let (_, err) = env.expect(&["limits", "apply", "-f", &m1], 1);
    assert!(err.contains(&format!("(pid {pid})")), "{err}");
    assert!(env
        .config_items()
        .contains(&("/ENTITY#u2".into(), "#CONFIG#claude".into())));
    env.nothing_unmanaged();
    // 59 s later the lease still runs; 61 s later it is taken over.
    for (offset, want) in [("59000", 1), ("61000", 0)] {
        let out = env.run(
            &["limits", "apply", "-q", "-f", &m1],
            &[("ZAEL_TEST_CLOCK_OFFSET_MS", offset)],
        );
        let (code, _, err) = common::outcome(out);
        assert_eq!(code, want, "offset {offset}: {err}");
    }
    assert!(env.lock().is_none());
    // In force (the dead apply's fan-outs wait for their own, longer, lease),
    // and nothing the dead apply wrote is left.
    env.expect(
        &["limits", "plan", "-q", "--detailed-exitcode", "-f", &m1],
        0,
    );
    env.holds_only(&[
        ("/ENTITY#u1", "#CONFIG#gpt-4"),
        ("/RESOURCE#gpt-4", "#CONFIG"),
    ]);
}

/// Without the lock (`--lock=false` on both), two applies started together
/// can interleave their writes, but no round leaves a config item outside the
/// managed set, and the next apply of either manifest converges to it.
#[test]
fn unlocked_concurrent_applies_leave_nothing_unmanaged() {
    let env = Env::new("unlocked");
    let a0 = env.file("init.yaml", &side_a(99).yaml);
    env.apply(&a0);
    let mut conflicts = 0;
    for i in 0..8 {
        let (sides, files) = round_files(&env, i, "u");
        let procs: Vec<Running> = files
            .iter()
            .map(|f| spawn(env.cmd(&["limits", "apply", "-q", "-f", f, "--lock=false"], &[])))
            .collect();
        for (code, out, err) in procs.into_iter().map(Running::finish) {
            assert!(err.starts_with("Warning: --lock=false"), "{err}");
            match code {
                Some(0) => {}
                Some(1) if err.contains("#PROVISIONER record changed") => conflicts += 1,
                _ => panic!("round {i}: {code:?}\n{out}{err}"),
            }
        }
        env.nothing_unmanaged();
        let last = &files[i % 2];
        env.apply(last);
        assert_eq!(env.config_items(), sides[i % 2].levels, "round {i}");
    }
    eprintln!("{conflicts} applies of 8 rounds found the record changed");
}

/// The holder renews its lease while it works (a thread on its own store
/// handle; the test shortens the 15 s period) and releases it at the end.
#[test]
fn the_lease_is_renewed_while_the_apply_works() {
    let (env, _, m2) = Env::with_m1_applied("renew");
    let lease = |env: &Env| {
        env.lock().expect("held")["lease_until_ms"]
            .as_n()
            .unwrap()
            .parse::<i64>()
            .unwrap()
    };
    let holder = spawn(env.cmd(
        &["limits", "apply", "-q", "-f", &m2],
        &[
            ("ZAEL_TEST_PAUSE_AT", "fan_out"),
            ("ZAEL_TEST_LOCK_RENEW_MS", "50"),
        ],
    ));
    holder.wait_for("paused at fan_out");
    let first = lease(&env);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while lease(&env) == first {
        assert!(
            std::time::Instant::now() < deadline,
            "the lease was never renewed"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let (code, _, err) = holder.finish();
    assert_eq!(code, Some(0), "{err}");
    assert!(env.lock().is_none());
}

/// SIGTERM and SIGINT during an apply stop it at its next safe point and
/// release the lock: before the config writes nothing changes; after them the
/// record is written and the fan-outs are left for the next apply.
#[test]
fn signals_stop_at_a_safe_point_and_release_the_lock() {
    let (env, m1, m2) = Env::with_m1_applied("signals");
    for (signal, step) in [("TERM", "write_levels"), ("INT", "plan")] {
        let p = env.paused(&["limits", "apply", "-q", "-f", &m2], step);
        p.signal(signal);
        let (code, out, err) = p.finish();
        assert_eq!(code, Some(1), "SIG{signal}: {out}{err}");
        assert!(
            err.contains(&format!(
                "SIG{signal} received: stopping at the next safe point"
            )),
            "{err}"
        );
        assert!(
            err.contains(&format!(
                "Error: interrupted by SIG{signal}: stopped before"
            )),
            "{err}"
        );
        assert!(env.lock().is_none(), "SIG{signal}: the lock is left");
        let (out, _) = env.expect(&["limits", "plan", "-q", "-f", &m1], 0);
        assert_eq!(
            out, "No changes. Infrastructure is up-to-date.\n",
            "SIG{signal} changed levels"
        );
    }
    // After the config writes: the record follows them, nothing is outside it,
    // and the fan-outs said to be left are the ones the next plan shows.
    let p = env.paused(&["limits", "apply", "-q", "-f", &m2], "fan_out");
    p.signal("TERM");
    let (code, _, err) = p.finish();
    assert_eq!(code, Some(1), "{err}");
    let said = "interrupted by SIGTERM: stopped after the config writes; the #PROVISIONER record is written, and ";
    let left = err[err.find(said).expect(&err) + said.len()..]
        .split(' ')
        .next()
        .unwrap()
        .to_string();
    assert!(env.lock().is_none());
    env.nothing_unmanaged();
    let (out, _) = env.expect(&["limits", "plan", "-q", "-f", &m2], 0);
    assert_eq!(
        out,
        format!("No config changes; {left} bucket fan-out(s) an earlier apply did not finish will be retried by the next apply.\n"),
        "{err}"
    );
    let (out, _) = env.apply(&m2);
    assert!(out.starts_with("No c"), "{out}");
}

/// A stop after the config writes counts the fan-outs it really leaves: with
/// many owed, the buckets are listed first and a level without a bucket gets
/// no pending item, so on a namespace without buckets none is left, and the
/// next plan shows nothing owed.
#[test]
fn a_stop_after_the_config_writes_counts_only_the_fanouts_it_leaves() {
    let env = Env::new("stop-count");
    let mut yaml = String::from(
        "namespace: default\nresources:\n  gpt-4:\n    limits:\n      rpm:\n        capacity: 100\nentities:\n",
    );
    // More entity levels than the bulk-discovery threshold (32).
    for i in 0..40 {
        yaml.push_str(&format!(
            "  u{i}:\n    resources:\n      gpt-4:\n        limits:\n          rpm:\n            capacity: {}\n",
            i + 1
        ));
    }
    let m = env.file("many.yaml", &yaml);
    let p = env.paused(&["limits", "apply", "-q", "-f", &m], "fan_out");
    p.signal("INT");
    let (code, _, err) = p.finish();
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("interrupted by SIGINT: stopped after the config writes; the #PROVISIONER record is written, and no bucket fan-out is left for the next apply"),
        "{err}"
    );
    let (out, _) = env.expect(
        &["limits", "plan", "-q", "-f", &m, "--detailed-exitcode"],
        0,
    );
    assert_eq!(out, "No changes. Infrastructure is up-to-date.\n");
}

/// An apply whose record changed before its own record write (a writer that
/// bypassed the lock) does not overwrite it: it says so, exits 1, and the
/// levels it wrote join the record found, so no config item is outside the
/// managed set; the next apply of either manifest converges.
#[test]
fn a_record_changed_under_an_apply_leaves_nothing_outside_the_managed_set() {
    let (env, _, m2) = Env::with_m1_applied("bypass");
    let first = env.paused(&["limits", "apply", "-q", "-f", &m2], "record");
    // A writer without the lock: it warns what it risks, and applies m1 + a new level.
    let m3 = env.file(
        "m3.yaml",
        &format!("{M1}  u3:\n    resources:\n      gpt-4:\n        limits:\n          rpm:\n            capacity: 1\n"),
    );
    let (_, err) = env.expect(&["limits", "apply", "-q", "-f", &m3, "--lock=false"], 0);
    assert!(
        err.starts_with("Warning: --lock=false: applying without the namespace lock."),
        "{err}"
    );
    let (code, _, err) = first.finish();
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("the #PROVISIONER record changed while this apply ran (another apply that did not take the lock, or the reference's provisioner, wrote it), so this apply did not write its record over it"),
        "{err}"
    );
    assert!(
        err.contains(
            "level(s) this apply wrote that it did not manage were added to its managed set"
        ),
        "{err}"
    );
    env.nothing_unmanaged();
    // m2's levels are managed now, so applying m3 again removes them.
    env.apply(&m3);
    env.holds_only(&[
        ("/ENTITY#u1", "#CONFIG#gpt-4"),
        ("/ENTITY#u3", "#CONFIG#gpt-4"),
        ("/RESOURCE#gpt-4", "#CONFIG"),
    ]);
}

/// The namespace id in a plan file must still be the namespace's.
#[test]
fn a_plan_for_a_namespace_registered_again_is_stale() {
    let (env, m1, _) = Env::with_m1_applied("reregistered");
    let plan = env.dir.path().join("p.plan").display().to_string();
    env.expect(&["limits", "plan", "-q", "-f", &m1, "-o", &plan], 0);
    let text = std::fs::read_to_string(&plan).unwrap();
    let ns = env.ns();
    std::fs::write(&plan, text.replace(&ns, "AAAAAAAAAAA")).unwrap();
    let (_, err) = env.expect(&["limits", "apply", &plan], 1);
    assert!(
        err.contains("saved plan is stale: namespace 'default' is registered under id"),
        "{err}"
    );
    assert!(version::read(&env.store()).unwrap().is_some());
    assert!(env.lock().is_none(), "refused before the lock was taken");
}
