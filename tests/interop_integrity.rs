//! Apply integrity on a real DynamoDB API (moto), with the real Python
//! library (docs/storage.md, "Registries", "The managed set beyond the
//! record"):
//! * a kill (after a chosen write, and a real `kill -9`) followed by an
//!   immediate re-apply and one after the lease leaves every entity count
//!   (`#ENTITY_CONFIG_RESOURCES`) equal to the entity levels stored;
//! * a managed set larger than the `#PROVISIONER` record (the record held to
//!   3 KB here) keeps a record the reference's provisioner reads, Python
//!   resolves the entities as declared, and when the reference's provisioner
//!   rewrites the record our next apply says so and loses track of no level.

mod common;
mod interop_support;

use std::collections::BTreeMap;

use interop_support::{interop, resolve_args, Interop};
use serde_json::Value;

const AFTER_LEASE: i64 = 2_000_000;
/// A killed apply's namespace lock lasts 60 s (its lease); its own leases 960 s.
const AFTER_LOCK: i64 = 61_000;

fn s(v: &Value) -> &str {
    v["S"].as_str().unwrap_or_default()
}

/// Per resource: (the count in the registry, the entity levels stored that
/// the Python client registers: those with its index keys; the reference's
/// provisioner writes its levels without them, and nobody counts those).
fn counts(items: &[Value]) -> BTreeMap<String, (Option<i64>, i64)> {
    let mut out: BTreeMap<String, (Option<i64>, i64)> = BTreeMap::new();
    for i in items {
        let (pk, sk) = (s(&i["PK"]), s(&i["SK"]));
        if pk.contains("/ENTITY#") && i.get("GSI3PK").is_some() {
            if let Some(r) = sk.strip_prefix("#CONFIG#") {
                out.entry(r.to_string()).or_default().1 += 1;
            }
        }
        if sk == "#ENTITY_CONFIG_RESOURCES" {
            for (name, v) in i.as_object().into_iter().flatten() {
                if let Some(n) = v["N"].as_str() {
                    let n: i64 = n.parse().unwrap();
                    if n != 0 {
                        out.entry(name.clone()).or_default().0 = Some(n);
                    }
                }
            }
        }
    }
    out
}

fn assert_counts_exact(it: &Interop, ctx: &str) {
    let wrong: Vec<String> = counts(&it.dump())
        .into_iter()
        .filter(|(_, (counted, stored))| *counted != Some(*stored))
        .map(|(r, (c, n))| format!("{r}: counted {c:?}, stored {n}"))
        .collect();
    assert!(wrong.is_empty(), "{ctx}: {wrong:?}");
}

fn apply(it: &Interop, manifest: &str, env: &[(&str, &str)]) -> std::process::Output {
    it.ours_env(
        &[
            "limits",
            "apply",
            "-q",
            "-n",
            &it.table,
            "-f",
            manifest,
            "--endpoint-url",
            &it.endpoint,
        ],
        env,
    )
}

fn apply_ok(it: &Interop, manifest: &str, env: &[(&str, &str)]) -> String {
    let out = apply(it, manifest, env);
    common::assert_exit(&out, 0, format_args!("apply {manifest} {env:?}"));
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// `entities` tenants on gpt-4 and `_default_`, capacity from `cap`.
fn tenants(entities: usize, cap: usize) -> String {
    let mut m = String::from(
        "namespace: default\nresources:\n  gpt-4:\n    limits:\n      rpm:\n        capacity: 500\nentities:\n",
    );
    for e in 0..entities {
        m.push_str(&format!(
            "  tenant-{e:04}:\n    resources:\n      gpt-4:\n        limits:\n          rpm:\n            capacity: {}\n      _default_:\n        limits:\n          rph:\n            capacity: 100\n            refill_period: 3600\n",
            cap + e
        ));
    }
    m
}

#[test]
fn counts_stay_exact_after_kills_and_an_immediate_reapply() {
    let Some(it) = interop("counts") else {
        return;
    };
    it.create_table();
    let small = it.write_file("small.yaml", &tenants(20, 10));
    let other = it.write_file("other.yaml", &tenants(35, 50));
    let (small, other) = (small.to_string_lossy(), other.to_string_lossy());
    apply_ok(&it, &small, &[]);
    assert_counts_exact(&it, "first apply");
    let mut clock = 0i64;
    // Kills by the fault hook, early and late, alternating manifests.
    for (n, manifest) in [(4, &other), (9, &small), (14, &other), (22, &small)] {
        let (n_text, offset) = (n.to_string(), clock.to_string());
        let killed = apply(
            &it,
            manifest,
            &[
                ("ZAEL_FAULT_ABORT_AFTER_WRITES", &n_text),
                ("ZAEL_TEST_CLOCK_OFFSET_MS", &offset),
            ],
        );
        assert!(killed.status.code().is_none_or(|c| c == 0), "write {n}");
        // At once, once the dead apply's 60-second apply lock has expired:
        // its own (960 s) leases still run.
        let at_once = (clock + AFTER_LOCK).to_string();
        apply_ok(&it, manifest, &[("ZAEL_TEST_CLOCK_OFFSET_MS", &at_once)]);
        assert_counts_exact(&it, &format!("kill at write {n}, at once"));
        clock += AFTER_LEASE;
        let offset = clock.to_string();
        apply_ok(&it, manifest, &[("ZAEL_TEST_CLOCK_OFFSET_MS", &offset)]);
        assert_counts_exact(&it, &format!("kill at write {n}, after the lease"));
    }
    // A real kill -9 a moment into an apply.
    let big = it.write_file("big.yaml", &tenants(400, 7));
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_zae-limiter"));
    let offset = clock.to_string();
    child
        .args(["limits", "apply", "-q", "-n", &it.table, "-f"])
        .arg(&big)
        .args(["--endpoint-url", &it.endpoint])
        .env("ZAEL_TEST_CLOCK_OFFSET_MS", &offset)
        .env("AWS_ACCESS_KEY_ID", "testing")
        .env("AWS_SECRET_ACCESS_KEY", "testing")
        .env("AWS_REGION", interop_support::REGION)
        .env("AWS_CONFIG_FILE", "/dev/null")
        .env("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env_remove("ZAEL_FAULT_ABORT_AFTER_WRITES")
        .env_remove("ZAEL_LOCAL_STORE")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let mut child = child.spawn().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let _ = child.kill();
    let status = child.wait().unwrap();
    eprintln!("kill -9: {status:?}");
    let big = big.to_string_lossy();
    let at_once = (clock + AFTER_LOCK).to_string();
    apply_ok(&it, &big, &[("ZAEL_TEST_CLOCK_OFFSET_MS", &at_once)]);
    assert_counts_exact(&it, "kill -9, at once");
    clock += AFTER_LEASE;
    apply_ok(
        &it,
        &big,
        &[("ZAEL_TEST_CLOCK_OFFSET_MS", &clock.to_string())],
    );
    assert_counts_exact(&it, "kill -9, after the lease");
}

#[test]
fn a_managed_set_beyond_the_record_survives_the_reference_provisioner() {
    let Some(it) = interop("beyond") else {
        return;
    };
    let small = ("ZAEL_TEST_RECORD_LIMIT_BYTES", "3000");
    it.create_table();
    let big = it.write_file("big.yaml", &tenants(60, 10));
    let few = it.write_file("few.yaml", &tenants(4, 10));
    let theirs = it.write_file("theirs.yaml", &tenants(2, 90));
    let (big_s, few_s) = (big.to_string_lossy(), few.to_string_lossy());
    let said = apply_ok(&it, &big_s, &[small]);
    assert!(said.contains("need a #PROVISIONER record of"), "{said}");

    // The record stays within its size and readable by the reference; Python
    // resolves entities in the record and beyond it as declared.
    let items = it.dump();
    let record = items
        .iter()
        .find(|i| s(&i["SK"]) == "#PROVISIONER")
        .expect("record");
    let in_record = record["managed_entities"]["M"].as_object().unwrap().len();
    assert!(in_record > 0 && in_record < 60, "{in_record}");
    let answer = it.reference(&resolve_args(
        &it.table,
        &[
            "tenant-0000/gpt-4",
            "tenant-0059/gpt-4",
            "tenant-0030/other",
        ],
    ));
    let rpm = |pair: &str| answer[pair]["limits"][0]["capacity"].as_i64();
    assert_eq!(rpm("tenant-0000/gpt-4"), Some(10));
    assert_eq!(rpm("tenant-0059/gpt-4"), Some(69));
    assert_eq!(answer["tenant-0030/other"]["limits"][0]["name"], "rph");
    // The reference's provisioner reads our record, and sees only its part:
    // the levels beyond it look new to it.
    let plan = it.reference(&["provision", &it.table, "plan", &big_s]);
    let creates = plan["changes"]
        .as_array()
        .map_or(0, |c| c.iter().filter(|c| c["action"] == "create").count());
    assert_eq!(creates, 2 * (60 - in_record), "{plan}");
    assert_counts_exact(&it, "big");

    // The reference's provisioner applies its own manifest: it rewrites the
    // record with what it manages (and deletes what it saw in ours).
    let done = it.reference(&["provision", &it.table, "apply", &theirs.to_string_lossy()]);
    assert!(
        done["errors"].as_array().is_none_or(Vec::is_empty),
        "{done}"
    );
    let plan = it.ours(&[
        "limits",
        "plan",
        "-n",
        &it.table,
        "-f",
        &few_s,
        "--endpoint-url",
        &it.endpoint,
    ]);
    let warned = String::from_utf8_lossy(&plan.stderr);
    assert!(
        warned.contains("rewritten by another provisioner"),
        "{warned}"
    );
    apply_ok(&it, &few_s, &[small]);
    // Every entity level left is one the manifest declares.
    let mut left: Vec<String> = it
        .dump()
        .iter()
        .filter(|i| s(&i["PK"]).contains("/ENTITY#") && s(&i["SK"]).starts_with("#CONFIG#"))
        .map(|i| {
            format!(
                "{} {}",
                s(&i["PK"]).split('#').nth(1).unwrap_or(""),
                s(&i["SK"])
            )
        })
        .collect();
    left.sort();
    let want: Vec<String> = (0..4)
        .flat_map(|e| {
            [
                format!("tenant-{e:04} #CONFIG#_default_"),
                format!("tenant-{e:04} #CONFIG#gpt-4"),
            ]
        })
        .collect();
    assert_eq!(left, want);
    assert_counts_exact(&it, "after the reference's record");
}
