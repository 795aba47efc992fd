//! Our `limits apply` against a real DynamoDB API (moto), checked with the
//! Python zae-limiter 0.17 library as the other client:
//! (1) `resolve_limits` answers the same as after the reference provisioner
//!     applied the same manifest; (2) the items equal the reference's attribute
//!     by attribute (documented differences aside) and our plan then says no
//!     changes; (3) a running Python limiter with an existing bucket enforces a
//!     lowered entity limit right after our apply.

mod common;
mod interop_support;

use std::collections::BTreeMap;

use interop_support::{
    assert_same_resolution, default_nsid, interop, ours_and_reference, resolve_args,
};
use serde_json::Value;

const FIXTURE: &str = include_str!("../scripts/interop/manifests/fixture.yaml");

/// (entity, resource) pairs covering every resolution source and flag.
const PAIRS: &[&str] = &[
    "user-1/gpt-4",
    "user-1/claude-3",
    "user-1/other",
    "team-a/gpt-4",
    "team-a/claude-3",
    "api-key-123/gpt-4",
    "user-2/gpt-4",
    "user-2/claude-3",
    "nobody/unknown",
];

/// Items keyed by (PK, SK) with the namespace id replaced by `{ns}`.
fn keyed(items: &[Value], ns: &str) -> BTreeMap<(String, String), Value> {
    items
        .iter()
        .map(|i| {
            let text = serde_json::to_string(i)
                .unwrap_or_default()
                .replace(ns, "{ns}");
            let v: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
            let pk = v["PK"]["S"].as_str().unwrap_or_default().to_string();
            let sk = v["SK"]["S"].as_str().unwrap_or_default().to_string();
            ((pk, sk), v)
        })
        .collect()
}

#[test]
fn apply_matches_the_reference_provisioner_and_resolution() {
    let Some((ours, theirs)) = ours_and_reference("apply") else {
        return;
    };
    let manifest = ours.with_applied("fixture.yaml", FIXTURE);
    let m = manifest.to_string_lossy();

    let (o, t) = (ours.table.as_str(), theirs.table.as_str());
    let (resolve_o, resolve_t) = (resolve_args(o, PAIRS), resolve_args(t, PAIRS));
    let answers = ours.reference_many(&[
        &["create-table", t],
        &["provision", t, "apply", &m],
        &["dump", o],
        &["dump", t],
        &resolve_o,
        &resolve_t,
    ]);
    let applied = &answers[1];
    assert_eq!(applied["errors"], Value::Array(vec![]), "{applied}");
    assert_eq!(applied["created"], Value::from(7), "{applied}");

    // (1) The Python client resolves the same limits, sources and flags.
    assert_same_resolution(&answers[4], &answers[5], PAIRS);
    assert_eq!(answers[4]["user-1/gpt-4"]["source"], "entity");
    assert_eq!(answers[4]["user-1/claude-3"]["source"], "entity_default");
    assert_eq!(answers[4]["team-a/claude-3"]["source"], "resource");
    assert_eq!(answers[4]["user-2/gpt-4"]["source"], "resource");
    assert_eq!(answers[4]["nobody/unknown"]["source"], "system");

    // (2) The items, attribute by attribute.
    let (ours_items, their_items) = (
        answers[2].as_array().unwrap(),
        answers[3].as_array().unwrap(),
    );
    let a = keyed(ours_items, &default_nsid(ours_items));
    let b = keyed(their_items, &default_nsid(their_items));
    let configs = |m: &BTreeMap<(String, String), Value>| -> BTreeMap<(String, String), Value> {
        m.iter()
            .filter(|((pk, sk), _)| pk.starts_with("{ns}/") && sk.starts_with("#CONFIG"))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    };
    let mut ca = configs(&a);
    let cb = configs(&b);
    assert_eq!(ca.len(), 7);
    // Documented: we write like the Python client (config_version 1, GSI3 keys on
    // entity items); the provisioner writes neither.
    for v in ca.values_mut() {
        if let Value::Object(o) = v {
            o.remove("config_version");
            o.remove("GSI3PK");
            o.remove("GSI3SK");
        }
    }
    assert_eq!(ca.keys().collect::<Vec<_>>(), cb.keys().collect::<Vec<_>>());
    for (k, v) in &ca {
        assert_eq!(v, &cb[k], "item {k:?} differs");
    }
    let state = ("{ns}/SYSTEM#".to_string(), "#PROVISIONER".to_string());
    for attr in [
        "managed_system",
        "managed_resources",
        "managed_entities",
        "applied_hash",
        "GSI4PK",
        "GSI4SK",
    ] {
        assert_eq!(a[&state][attr], b[&state][attr], "#PROVISIONER {attr}");
    }
    let version = ("_/SYSTEM#".to_string(), "#VERSION".to_string());
    assert_eq!(
        a[&version]["client_min_version"],
        b[&version]["client_min_version"]
    );
    assert!(
        !a.keys()
            .any(|(_, sk)| sk.starts_with("#PROVISIONER#PENDING#")),
        "no pending fan-out left"
    );

    // And our plan then has nothing to do.
    ours.assert_plan_is_empty(&manifest);
}

#[test]
fn a_running_python_limiter_enforces_a_lowered_entity_limit_at_once() {
    let Some(it) = interop("lower") else { return };
    let lowered_text = FIXTURE.replacen(
        "rpm:\n            capacity: 60",
        "rpm:\n            capacity: 2",
        1,
    );
    assert_ne!(
        lowered_text, FIXTURE,
        "the fixture declares user-1's gpt-4 rpm as 60"
    );
    let lowered = it.write_file("lowered.yaml", &lowered_text);
    it.with_applied("fixture.yaml", FIXTURE);

    let mut limiter = it.limiter("default");
    // The first acquire creates user-1's gpt-4 bucket with rpm 60.
    assert!(limiter.acquire("user-1", "gpt-4", "rpm", 5));
    assert!(limiter.acquire("user-1", "gpt-4", "rpm", 5));

    let out = it.apply(&lowered);
    assert!(out.contains("user-1/gpt-4"), "{out}");
    // The limiter's config cache (60 s) still holds rpm 60; the bucket does not.
    assert!(
        !limiter.acquire("user-1", "gpt-4", "rpm", 5),
        "5 > the new capacity 2"
    );
    assert!(limiter.acquire("user-1", "gpt-4", "rpm", 1));
    let bucket = it
        .dump()
        .into_iter()
        .find(|i| {
            i["PK"]["S"]
                .as_str()
                .is_some_and(|pk| pk.ends_with("/BUCKET#user-1#gpt-4#0"))
        })
        .expect("the bucket exists");
    assert_eq!(bucket["b_rpm_cp"]["N"], "2000");
    assert_eq!(bucket["b_rpm_ra"]["N"], "2000");
    assert!(bucket.get("ttl").is_none());
}
