//! Apply integrity through the binary on the local store (docs/storage.md,
//! "Apply", "Registries", "The managed set beyond the record"):
//! * entity counts (`#ENTITY_CONFIG_RESOURCES`) equal the entity levels stored
//!   after a kill at every write point (the fault hook, and a real `kill -9`),
//!   followed by an immediate re-apply, of the same manifest or the previous
//!   one, and by one after the dead apply's lease;
//! * a write of any kind that fails leaves its change planned (the record is
//!   written from what was written), and the next apply finishes it; the same
//!   on a really full filesystem;
//! * a wrong count is repaired, and said so;
//! * a managed set beyond the `#PROVISIONER` record (a lowered record size),
//!   and a record another provisioner rewrote since;
//! * the progress bar, on a terminal only.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Output;

use zae_limiter::items::{keys, namespace};
use zae_limiter::store::local::LocalStore;
use zae_limiter::store::{AttrValue, Index, Item, Key, Store, UpdateAction, WriteOp};

const TABLE: &str = "mystack";
/// Past every lease an apply takes (960 s).
const AFTER_LEASE: (&str, &str) = ("ZAEL_TEST_CLOCK_OFFSET_MS", "2000000");
/// A killed apply leaves the namespace's apply lock until its 60-second lease
/// ends (docs/plan-apply.md, "Team-safe applies"); the dead apply's own
/// leases (960 s) still run then, so an apply 61 s later is "at once" for
/// them.
const AFTER_LOCK: (&str, &str) = ("ZAEL_TEST_CLOCK_OFFSET_MS", "61000");

fn transcripts() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/transcripts")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// One store file in a fresh directory.
struct Env {
    dir: tempfile::TempDir,
}

impl Env {
    fn new() -> Env {
        Env {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn path(&self) -> PathBuf {
        self.dir.path().join("store.sqlite")
    }

    fn store(&self) -> LocalStore {
        LocalStore::open(&self.path(), TABLE).unwrap()
    }

    /// `zae-limiter ARGS --local=STORE -n mystack`, in the transcripts directory.
    fn run(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        let mut cmd = common::zae_limiter();
        cmd.current_dir(transcripts())
            .args(args)
            .arg(format!("--local={}", self.path().display()))
            .args(["-n", TABLE]);
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.output().unwrap()
    }

    /// `limits apply -f MANIFEST`, which must exit 0.
    fn apply_ok(&self, manifest: &str, env: &[(&str, &str)]) -> Output {
        let out = self.run(&["limits", "apply", "-f", manifest], env);
        common::assert_exit(&out, 0, format_args!("apply {manifest} {env:?}"));
        out
    }

    fn ns(&self) -> String {
        namespace::resolve(&self.store(), "default")
            .unwrap()
            .expect("namespace registered")
    }

    /// Every item of the namespace and the table-level records.
    fn dump(&self) -> BTreeMap<Key, Item> {
        let s = self.store();
        let ns = self.ns();
        let mut pks: BTreeSet<String> = [keys::TABLE_SYSTEM_PK.into(), keys::system_pk(&ns)].into();
        for k in s.query_index(Index::Gsi4, &ns, "").unwrap() {
            pks.insert(k.pk);
        }
        let mut out = BTreeMap::new();
        for pk in pks {
            for item in s.query(&pk, "", true).unwrap() {
                out.insert(Key::of(&item).unwrap(), item);
            }
        }
        out
    }

    /// A copy of this store, in a fresh directory.
    fn copy(&self) -> Env {
        let to = Env::new();
        copy_files(self.dir.path(), to.dir.path());
        to
    }
}

fn copy_files(from: &Path, to: &Path) {
    for e in std::fs::read_dir(from).unwrap() {
        let p = e.unwrap().path();
        std::fs::copy(&p, to.join(p.file_name().unwrap())).unwrap();
    }
}

/// Every count in `#ENTITY_CONFIG_RESOURCES` against the entity levels the
/// store actually holds (counted from the items, not from any index).
fn count_errors(env: &Env) -> Vec<String> {
    let ns = env.ns();
    let dump = env.dump();
    let mut stored: BTreeMap<String, i64> = BTreeMap::new();
    for k in dump.keys() {
        if k.pk.starts_with(&format!("{ns}/ENTITY#")) {
            if let Some(r) = k.sk.strip_prefix(keys::ENTITY_CONFIG_SK_PREFIX) {
                *stored.entry(r.to_string()).or_default() += 1;
            }
        }
    }
    let registry = dump
        .get(&keys::entity_config_registry_key(&ns))
        .cloned()
        .unwrap_or_default();
    // A count at zero is no count (a settle that died before dropping it;
    // the next apply drops it).
    let mut counted: BTreeMap<String, i64> = BTreeMap::new();
    for (name, v) in &registry {
        if let AttrValue::N(n) = v {
            let n: i64 = n.parse().unwrap();
            if n != 0 {
                counted.insert(name.clone(), n);
            }
        }
    }
    let names: BTreeSet<&String> = stored.keys().chain(counted.keys()).collect();
    names
        .into_iter()
        .filter(|r| stored.get(*r) != counted.get(*r))
        .map(|r| {
            format!(
                "{r}: counted {:?}, stored {:?}",
                counted.get(r),
                stored.get(r)
            )
        })
        .collect()
}

/// Exact counts, or a count journal left for the next apply, which recounts
/// at once (a failed settle).
fn assert_counts_exact_or_recounted_next(env: &Env, ctx: &str) {
    let journal = env
        .store()
        .query(&keys::system_pk(&env.ns()), "#APPLY#COUNTS#", true)
        .unwrap();
    if journal.is_empty() {
        assert_counts_exact(env, ctx);
    }
}

fn assert_counts_exact(env: &Env, ctx: &str) {
    let errors = count_errors(env);
    assert!(errors.is_empty(), "{ctx}: entity counts wrong: {errors:?}");
}

/// An entity level written the way the Python client writes one: with its
/// index keys, and counted.
fn put_client_level(env: &Env, entity: &str, resource: &str) {
    let s = env.store();
    let ns = env.ns();
    let key = keys::entity_config_key(&ns, entity, resource);
    let mut item = Item::new();
    for (k, v) in [
        ("PK", AttrValue::s(&key.pk)),
        ("SK", AttrValue::s(&key.sk)),
        ("entity_id", AttrValue::s(entity)),
        ("resource", AttrValue::s(resource)),
        ("config_version", AttrValue::n(1)),
        ("l_rpm_cp", AttrValue::n(3)),
        ("l_rpm_ra", AttrValue::n(3)),
        ("l_rpm_rp", AttrValue::n(60)),
        (
            "GSI3PK",
            AttrValue::s(keys::entity_config_gsi3pk(&ns, resource)),
        ),
        ("GSI3SK", AttrValue::s(entity)),
        ("GSI4PK", AttrValue::s(&ns)),
        ("GSI4SK", AttrValue::s(&key.pk)),
    ] {
        item.insert(k.to_string(), v);
    }
    let add = WriteOp::Update {
        key: keys::entity_config_registry_key(&ns),
        actions: vec![UpdateAction::AddNumber(resource.into(), "1".into())],
        condition: None,
    };
    s.transact(vec![
        WriteOp::Put {
            item,
            condition: None,
        },
        add,
    ])
    .unwrap();
}

/// crash-a applied, plus a level the Python client wrote on its own.
fn base() -> Env {
    let base = Env::new();
    base.apply_ok("crash-a.yaml", &[]);
    put_client_level(&base, "api-user", "gpt-4");
    assert_counts_exact(&base, "base");
    base
}

/// What a clean apply of `manifest` makes of `from`.
fn clean(from: &Env, manifest: &str) -> BTreeMap<Key, Item> {
    let env = from.copy();
    env.apply_ok(manifest, &[]);
    common::comparable(env.dump())
}

/// The version record's `client_min_version` (the gate crash-b raises).
fn min_version(env: &Env) -> Option<AttrValue> {
    env.dump()
        .into_iter()
        .find(|(k, _)| k.sk == "#VERSION")
        .and_then(|(_, item)| item.get("client_min_version").cloned())
}

/// The plan's text, which must be "nothing to change" (possibly with fan-outs
/// still owed, announced with the moment they will be retried).
fn assert_nothing_planned(env: &Env, manifest: &str, ctx: &str) -> String {
    let out = env.run(&["limits", "plan", "-f", manifest], &[]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{ctx}: {}", text(&out.stderr));
    assert!(
        stdout == "No changes. Infrastructure is up-to-date.\n"
            || stdout.starts_with("No config changes; "),
        "{ctx}: plan {manifest} says\n{stdout}"
    );
    stdout
}

/// A kill after ANY write of an apply, followed at once by another apply
/// (the dead apply's leases still running) of the same manifest or of the
/// previous one, then by one after the leases: every entity count is exact
/// after each, and the end state is a clean apply's.
#[test]
fn counts_are_exact_after_a_kill_at_any_write_and_an_immediate_reapply() {
    let base = base();
    let want_b = clean(&base, "crash-b.yaml");
    // Back to crash-a: as a clean apply of crash-b, then of crash-a, leaves it
    // (the version gate crash-b raised stays raised).
    let there = base.copy();
    there.apply_ok("crash-b.yaml", &[]);
    let want_a = clean(&there, "crash-a.yaml");
    // A kill before crash-b raised the gate (at its first write, the apply
    // lock) leaves the version record as crash-a left it.
    let want_a_ungated = clean(&base, "crash-a.yaml");
    let mut kills = 0;
    for n in 1.. {
        let killed = base.copy();
        let n_text = n.to_string();
        let out = killed.run(
            &["limits", "apply", "-f", "crash-b.yaml"],
            &[("ZAEL_FAULT_ABORT_AFTER_WRITES", &n_text)],
        );
        if out.status.code() == Some(0) {
            break; // fewer than n writes: every write point was tried
        }
        assert_eq!(out.status.code(), None, "write {n}: {}", text(&out.stderr));
        kills += 1;
        let gated = min_version(&killed) != min_version(&base);
        let want_a = if gated { &want_a } else { &want_a_ungated };
        for (manifest, want) in [("crash-b.yaml", &want_b), ("crash-a.yaml", want_a)] {
            let ctx = format!("kill at write {n}, then {manifest}");
            let env = killed.copy();
            env.apply_ok(manifest, &[AFTER_LOCK]);
            assert_counts_exact(&env, &format!("{ctx} at once"));
            let plan = assert_nothing_planned(&env, manifest, &ctx);
            if plan.starts_with("No config changes; ") {
                // Fan-outs the dead apply owes: not the next apply, but the
                // first one after its lease takes them, and the plan says so.
                assert!(
                    plan.contains("will be retried by the first apply after "),
                    "{ctx}: {plan}"
                );
            }
            env.apply_ok(manifest, &[AFTER_LEASE]);
            assert_counts_exact(&env, &format!("{ctx} after the lease"));
            let got = common::comparable(env.dump());
            assert!(got == *want, "{ctx}:\n{}", common::differences(&got, want));
        }
    }
    // Gate, write-ahead, journal, batched writes, settle, releases, record, digests.
    assert!(kills >= 8, "only {kills} write points exercised");
}

/// Writes a manifest of `entities` entities on two resources into `dir`.
fn many_entities(dir: &Path, name: &str, entities: usize) -> String {
    let mut m = String::from("namespace: default\nresources:\n  gpt-4:\n    limits:\n      rpm:\n        capacity: 500\nentities:\n");
    for e in 0..entities {
        m.push_str(&format!(
            "  tenant-{e:05}:\n    resources:\n      gpt-4:\n        limits:\n          rpm:\n            capacity: {}\n      _default_:\n        limits:\n          rph:\n            capacity: 100\n            refill_period: 3600\n",
            10 + e % 7
        ));
    }
    common::write_arg(dir, name, m)
}

/// A real `kill -9` in the middle of writing levels, then an immediate
/// re-apply and one after the lease: the counts are exact after each.
#[test]
fn counts_are_exact_after_a_real_kill_mid_apply() {
    let work = tempfile::tempdir().unwrap();
    let manifest = many_entities(work.path(), "many.yaml", 3_000);
    let mut caught = 0;
    for attempt in 0..4 {
        let env = Env::new();
        env.apply_ok("crash-a.yaml", &[]);
        let ns = env.ns();
        let mut child = common::zae_limiter()
            .args(["limits", "apply", "-q", "-f", &manifest])
            .arg(format!("--local={}", env.path().display()))
            .args(["-n", TABLE])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        // Kill once some, not all, of the levels are written.
        let store = env.store();
        let started = std::time::Instant::now();
        let mut mid = false;
        loop {
            if child.try_wait().unwrap().is_some() {
                break;
            }
            let n = store
                .count_index(Index::Gsi3, &keys::entity_config_gsi3pk(&ns, "gpt-4"), "")
                .unwrap_or(0);
            if n > 2 || started.elapsed() > std::time::Duration::from_secs(60) {
                child.kill().unwrap();
                mid = n < 3_000;
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        let status = child.wait().unwrap();
        if status.code().is_some() {
            continue; // finished before the kill: try again
        }
        caught += usize::from(mid);
        env.apply_ok(&manifest, &[AFTER_LOCK]);
        assert_counts_exact(&env, &format!("attempt {attempt}, at once"));
        env.apply_ok(&manifest, &[AFTER_LEASE]);
        assert_counts_exact(&env, &format!("attempt {attempt}, after the lease"));
        assert_nothing_planned(&env, &manifest, "after the lease");
        if caught >= 2 {
            break;
        }
    }
    assert!(
        caught >= 1,
        "no kill landed while levels were being written"
    );
}

/// A write of each kind fails (as a full disk or a throttled table fails
/// it). The apply exits 1 naming what it was writing; the store keeps exact
/// counts; whatever did not happen is still planned; and the next apply
/// finishes the job.
#[test]
fn a_failed_write_of_any_kind_stays_planned_and_the_next_apply_finishes_it() {
    let base = base();
    let want = clean(&base, "crash-b.yaml");
    let configs = |d: &BTreeMap<Key, Item>| -> BTreeMap<Key, Item> {
        d.iter()
            .filter(|(k, _)| k.sk.starts_with(keys::CONFIG_SK))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    };
    // (rule, what the error names, exit code)
    let cases: &[(&str, &str, i32)] = &[
        (
            "put:#CONFIG",
            "update system (system defaults): injected fault",
            1,
        ),
        (
            "delete:RESOURCE#claude-3 #CONFIG",
            "delete resource claude-3: injected fault",
            1,
        ),
        (
            "delete:ENTITY#user-2",
            "delete entity user-2/gpt-4: injected fault",
            1,
        ),
        (
            "put:ENTITY#user-3",
            "create entity user-3/mistral: injected fault",
            1,
        ),
        (
            "put:RESOURCE#mistral",
            "create resource mistral: injected fault",
            1,
        ),
        ("update:#RESOURCES", "#RESOURCES registry", 1),
        ("update:#ENTITY_CONFIG_RESOURCES", "entity-config counts", 1),
        ("put:#APPLY#COUNTS", "recording the entity-count journal before the first config write (nothing was written)", 1),
        ("put:#APPLY#WRITING", "recording the levels about to be created before the first config write", 1),
        ("delete:#APPLY#DIGESTS", "recording that the level digests are out of date", 1),
        ("put:#PROVISIONER#PENDING", "pending fan-outs", 1),
        (
            "delete:#PROVISIONER#PENDING",
            "releasing finished fan-outs",
            1,
        ),
        ("put:#PROVISIONER$", "#PROVISIONER record", 1),
        ("put:#APPLY#DIGESTS", "recording the level digests", 0),
    ];
    for (rule, names, code) in cases {
        let env = base.copy();
        let out = env.run(
            &["limits", "apply", "-f", "crash-b.yaml"],
            &[("ZAEL_FAULT_FAIL_WRITES", rule)],
        );
        let stderr = text(&out.stderr);
        assert_eq!(
            out.status.code(),
            Some(*code),
            "{rule}: {}{stderr}",
            text(&out.stdout)
        );
        assert!(
            stderr.contains(names),
            "{rule}: the error should name {names:?}:\n{stderr}"
        );
        assert_counts_exact_or_recounted_next(&env, rule);
        // Whatever config item differs from a clean apply is still planned.
        let now = configs(&env.dump());
        let plan = env.run(&["limits", "plan", "-f", "crash-b.yaml"], &[]);
        let plan = text(&plan.stdout);
        for k in common::differences(&now, &configs(&want))
            .lines()
            .filter(|l| !l.starts_with(' '))
        {
            assert!(
                !plan.starts_with("No changes") && !plan.starts_with("No config changes"),
                "{rule}: {k} differs from a clean apply, yet plan says\n{plan}"
            );
        }
        // The next apply finishes it, at once for the levels; fan-outs whose
        // release failed wait for the lease.
        env.apply_ok("crash-b.yaml", &[]);
        assert_counts_exact(&env, &format!("{rule}, repaired"));
        assert_eq!(
            configs(&env.dump()),
            configs(&want),
            "{rule}: levels after the next apply"
        );
        env.apply_ok("crash-b.yaml", &[AFTER_LEASE]);
        let got = common::comparable(env.dump());
        assert!(got == want, "{rule}:\n{}", common::differences(&got, &want));
    }
}

/// The case of the issue: a delete that did not happen is not forgotten.
#[test]
fn a_failed_delete_is_retried_not_forgotten() {
    let env = base();
    let out = env.run(
        &["limits", "apply", "-f", "crash-b.yaml"],
        &[("ZAEL_FAULT_FAIL_WRITES", "delete:RESOURCE#claude-3 #CONFIG")],
    );
    assert_eq!(out.status.code(), Some(1));
    let plan = env.run(&["limits", "plan", "-f", "crash-b.yaml"], &[]);
    let plan = text(&plan.stdout);
    assert!(plan.starts_with("Plan: 1 change(s)"), "{plan}");
    assert!(plan.contains("  - delete resource: claude-3"), "{plan}");
    let shown = env.run(&["resource", "get-defaults", "claude-3"], &[]);
    assert!(
        text(&shown.stdout).contains("rpm"),
        "{}",
        text(&shown.stdout)
    );
    env.apply_ok("crash-b.yaml", &[]);
    assert_nothing_planned(&env, "crash-b.yaml", "after the retry");
    let shown = env.run(&["resource", "get-defaults", "claude-3"], &[]);
    assert!(
        text(&shown.stdout).starts_with("No defaults configured"),
        "{}",
        text(&shown.stdout)
    );
    let resources = env
        .store()
        .get(&keys::resources_registry_key(&env.ns()), true)
        .unwrap()
        .unwrap();
    assert_eq!(
        resources.get("resources"),
        Some(&AttrValue::Ss(
            ["gpt-4".to_string(), "mistral".to_string()].into()
        ))
    );
}

/// A small tmpfs mounted at a fresh directory, unmounted on drop.
struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    /// `None` (and a note) where mounting is not permitted (not root, or a
    /// container without the capability); CI runs as root.
    fn mount(size: &str) -> Option<Tmpfs> {
        let dir = tempfile::tempdir().ok()?;
        let out = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .output()
            .ok()?;
        if !out.status.success() {
            eprintln!(
                "SKIPPED: cannot mount a tmpfs to fill up ({}); run as root to test a full filesystem",
                text(&out.stderr).trim()
            );
            return None;
        }
        Some(Tmpfs { dir })
    }

    fn free_bytes(&self) -> u64 {
        let out = std::process::Command::new("df")
            .args(["--output=avail", "-B1"])
            .arg(self.dir.path())
            .output()
            .unwrap();
        text(&out.stdout)
            .lines()
            .nth(1)
            .and_then(|l| l.trim().parse().ok())
            .unwrap()
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg(self.dir.path())
            .status();
    }
}

/// A filesystem that fills up during an apply: whatever the apply manages
/// to write, the counts stay exact, what it did not write stays planned, and
/// once there is room again the next apply finishes the job.
#[test]
fn a_full_filesystem_loses_no_change() {
    let Some(fs) = Tmpfs::mount("2m") else {
        return;
    };
    let base = base();
    let want = clean(&base, "crash-b.yaml");
    let mut failed_runs = 0;
    // Leave less and less room: the apply fails earlier and earlier.
    for keep in (0..24).map(|i| 8_192 * i) {
        let env = Env {
            dir: tempfile::TempDir::new_in(fs.dir.path()).unwrap(),
        };
        copy_files(base.dir.path(), env.dir.path());
        let filler = fs.dir.path().join("filler");
        let room = fs.free_bytes().saturating_sub(keep);
        let _ = std::fs::write(&filler, vec![0u8; room as usize]);
        let out = env.run(&["limits", "apply", "-f", "crash-b.yaml"], &[]);
        let stderr = text(&out.stderr);
        if out.status.code() != Some(0) {
            failed_runs += 1;
            assert_eq!(out.status.code(), Some(1), "keep {keep}: {stderr}");
            assert!(
                !stderr.contains(" None:"),
                "keep {keep}: an error names no level:\n{stderr}"
            );
        }
        std::fs::remove_file(&filler).unwrap();
        assert_counts_exact_or_recounted_next(&env, &format!("keep {keep}"));
        env.apply_ok("crash-b.yaml", &[AFTER_LEASE]);
        let got = common::comparable(env.dump());
        assert!(
            got == want,
            "keep {keep}:\n{}",
            common::differences(&got, &want)
        );
        assert_counts_exact(&env, &format!("keep {keep}, repaired"));
        drop(env);
    }
    assert!(failed_runs > 0, "the filesystem never filled up");
}

/// A count that disagrees with the stored levels (left by an older build, or
/// edited by hand) is reported by plan and repaired by apply, which says so.
#[test]
fn a_wrong_count_is_reported_and_repaired() {
    let env = base();
    let ns = env.ns();
    env.store()
        .write(WriteOp::Update {
            key: keys::entity_config_registry_key(&ns),
            actions: vec![UpdateAction::Set("gpt-4".into(), AttrValue::n(3000))],
            condition: None,
        })
        .unwrap();
    let plan = env.run(&["limits", "plan", "-f", "crash-a.yaml"], &[]);
    assert_eq!(
        text(&plan.stdout),
        "No changes. Infrastructure is up-to-date.\n"
    );
    assert!(
        text(&plan.stderr).contains(
            "Warning: the entity-config count of 'gpt-4' (#ENTITY_CONFIG_RESOURCES) was 3000 for 3 stored entity level(s); the next apply repairs it"
        ),
        "{}",
        text(&plan.stderr)
    );
    let out = env.apply_ok("crash-a.yaml", &[]);
    assert!(
        text(&out.stderr).contains("was 3000 for 3 stored entity level(s); repaired"),
        "{}",
        text(&out.stderr)
    );
    assert_counts_exact(&env, "repaired");
    let plan = env.run(&["limits", "plan", "-f", "crash-a.yaml"], &[]);
    // Only the Python client's level is still named (no manifest owns it).
    assert_eq!(
        text(&plan.stderr),
        "Warning: namespace 'default' holds 1 level(s) that this manifest does not declare and no apply of a manifest wrote: entities.api-user.resources.gpt-4. Python clients enforce them; apply leaves them as they are. To manage them, add them to the manifest (`limits export` writes every stored level)\n"
    );
}

fn sks(env: &Env, prefix: &str) -> Vec<String> {
    env.store()
        .query(&keys::system_pk(&env.ns()), prefix, true)
        .unwrap()
        .iter()
        .filter_map(|i| i.get("SK").and_then(AttrValue::as_s).map(str::to_string))
        .collect()
}

/// With the record held to 2 KB, 60 entities do not fit: the record keeps a
/// prefix the reference's provisioner can read, our items the rest, and
/// nothing is lost — not when the manifest shrinks, and not when another
/// provisioner rewrites the record.
#[test]
fn a_managed_set_beyond_the_record_loses_track_of_no_level() {
    let small = ("ZAEL_TEST_RECORD_LIMIT_BYTES", "2000");
    let env = Env::new();
    let work = tempfile::tempdir().unwrap();
    let big = many_entities(work.path(), "big.yaml", 60);
    let few = many_entities(work.path(), "few.yaml", 5);
    let plan = env.run(&["limits", "plan", "-f", &big], &[small]);
    // No store yet: plan shows every level as a create and creates nothing.
    assert_eq!(plan.status.code(), Some(0), "{}", text(&plan.stderr));
    assert!(!env.path().exists());
    let out = env.apply_ok(&big, &[small]);
    assert!(
        text(&out.stderr).contains("need a #PROVISIONER record of"),
        "{}",
        text(&out.stderr)
    );
    let plan = env.run(&["limits", "plan", "-f", &big], &[small]);
    assert_eq!(
        text(&plan.stdout),
        "No changes. Infrastructure is up-to-date.\n"
    );
    assert!(
        text(&plan.stderr).contains("the record keeps what fits"),
        "{}",
        text(&plan.stderr)
    );
    let ns = env.ns();
    let record = env
        .store()
        .get(&keys::provisioner_key(&ns), true)
        .unwrap()
        .unwrap();
    assert!(zae_limiter::store::emulate::item_size(&record) <= 2000);
    let in_record = match record.get("managed_entities") {
        Some(AttrValue::M(m)) => m.len(),
        other => panic!("{other:?}"),
    };
    assert!(
        in_record > 0 && in_record < 60,
        "{in_record} entities in the record"
    );
    assert!(!sks(&env, "#APPLY#MANAGED#").is_empty());
    assert!(
        sks(&env, "#APPLY#WRITING#").is_empty(),
        "forgotten after the record"
    );
    assert_counts_exact(&env, "big");

    // Shrinking deletes every level no longer declared, in the record or not.
    env.apply_ok(&few, &[small]);
    assert_nothing_planned(&env, &few, "few");
    let entities: BTreeSet<String> = env
        .dump()
        .keys()
        .filter_map(|k| {
            k.pk.strip_prefix(&format!("{ns}/ENTITY#"))
                .map(str::to_string)
        })
        .collect();
    assert_eq!(entities.len(), 5, "{entities:?}");
    assert!(
        sks(&env, "#APPLY#MANAGED#").is_empty(),
        "the record holds it all again"
    );
    assert_counts_exact(&env, "few");

    // Another provisioner rewrites the record of a large namespace with what
    // it manages: our next apply says so and still deletes what we wrote.
    env.apply_ok(&big, &[small]);
    let mut theirs = env
        .store()
        .get(&keys::provisioner_key(&ns), true)
        .unwrap()
        .unwrap();
    theirs.insert(
        "managed_entities".into(),
        AttrValue::M(BTreeMap::from([(
            "tenant-00000".to_string(),
            AttrValue::L(vec![AttrValue::s("gpt-4")]),
        )])),
    );
    theirs.insert(
        "last_applied".into(),
        AttrValue::s("2030-01-01T00:00:00.000000+00:00"),
    );
    theirs.insert("applied_hash".into(), AttrValue::s("sha256:theirs"));
    env.store()
        .write(WriteOp::Put {
            item: theirs,
            condition: None,
        })
        .unwrap();
    let plan = env.run(&["limits", "plan", "-f", &few], &[small]);
    assert!(
        text(&plan.stderr).contains("rewritten by another provisioner"),
        "{}",
        text(&plan.stderr)
    );
    assert!(
        text(&plan.stdout).starts_with("Plan: 110 change(s)"),
        "{}",
        text(&plan.stdout)
    );
    env.apply_ok(&few, &[small]);
    assert_nothing_planned(&env, &few, "few, after the foreign record");
    let left = env
        .dump()
        .keys()
        .filter(|k| k.pk.starts_with(&format!("{ns}/ENTITY#")))
        .count();
    assert_eq!(left, 10, "5 entities × 2 levels");
    assert_counts_exact(&env, "after the foreign record");
}

/// The bar shows the phases on a terminal (a pseudo-terminal here), and
/// nothing at all when stderr is not one.
#[test]
fn the_progress_bar_shows_on_a_terminal_only() {
    if !common::have("script") {
        eprintln!("SKIPPED: `script` (util-linux) is needed for a pseudo-terminal");
        return;
    }
    let env = Env::new();
    let now = ("ZAEL_PROGRESS_AFTER_MS", "0");
    let out = env.run(&["limits", "apply", "-f", "crash-a.yaml"], &[now]);
    assert!(
        !text(&out.stderr).contains("levels"),
        "{}",
        text(&out.stderr)
    );
    let command = format!(
        "{} limits plan -f crash-b.yaml --local={} -n {TABLE}",
        env!("CARGO_BIN_EXE_zae-limiter"),
        env.path().display()
    );
    let shown = common::isolated(std::process::Command::new("script"))
        .current_dir(transcripts())
        .args(["-qefc", &command, "/dev/null"])
        .env(now.0, now.1)
        .output()
        .unwrap();
    let all = text(&shown.stdout);
    assert!(all.contains("reading levels"), "{all}");
    assert!(all.contains("Plan: "), "{all}");
}
