//! Rolling windows and concurrency limits (issue #7) next to token buckets, on
//! a real DynamoDB API (moto), with Python zae-limiter 0.17 as the other client.
//! Our apply stores the new kinds under attributes 0.17 ignores, so:
//! (1) Python's `resolve_limits` answers exactly what it answers for the same
//!     manifest without the new kinds (applied by the reference provisioner),
//!     including for a level that declares only new kinds (0.17 resolves the
//!     next level, as for an empty one);
//! (2) our `plan` then says no changes;
//! (3) a Python limiter consumes normally, and our fan-out to its bucket after
//!     a change writes bucket limits only (no `b_` attribute for the new kinds).

mod common;
mod interop_support;

use interop_support::{assert_same_resolution, interop, ours_and_reference, resolve_args};
use serde_json::Value;
use zae_limiter::manifest::model::LimitKind;

/// Every kind; user-2 declares new kinds only.
const KINDS: &str = include_str!("../fixtures/interop/kinds.yaml");

/// [`KINDS`] without the rolling windows and concurrency limits.
const BUCKETS: &str = include_str!("../fixtures/interop/buckets.yaml");

const PAIRS: &[&str] = &[
    "user-1/gpt-4",
    "user-2/gpt-4",
    "other/gpt-4",
    "user-1/claude-3",
];

/// `BUCKETS` is `KINDS` with every non-bucket limit removed.
#[test]
fn the_bucket_manifest_is_the_kinds_manifest_without_the_new_kinds() {
    let mut kinds = zae_limiter::manifest::load_str("kinds.yaml", KINDS)
        .expect("KINDS is valid")
        .manifest;
    let buckets = zae_limiter::manifest::load_str("buckets.yaml", BUCKETS)
        .expect("BUCKETS is valid")
        .manifest;
    let keep = |l: &zae_limiter::manifest::model::LimitSpec| l.kind == LimitKind::Bucket;
    if let Some(s) = kinds.system.as_mut() {
        s.limits.retain(|_, l| keep(l));
    }
    for level in kinds.resources.values_mut() {
        level.limits.retain(|_, l| keep(l));
    }
    for levels in kinds.entities.values_mut() {
        for level in levels.values_mut() {
            level.limits.retain(|_, l| keep(l));
        }
    }
    assert_eq!(kinds, buckets);
}

#[test]
fn python_resolves_exactly_the_bucket_limits_of_our_items() {
    let Some((ours, theirs)) = ours_and_reference("kinds") else {
        return;
    };
    let kinds = ours.with_applied("kinds.yaml", KINDS);
    let buckets = theirs.write_file("buckets.yaml", BUCKETS);

    let (o, t) = (ours.table.as_str(), theirs.table.as_str());
    let (resolve_o, resolve_t) = (resolve_args(o, PAIRS), resolve_args(t, PAIRS));
    let b = buckets.to_string_lossy();
    let answers = ours.reference_many(&[
        &["create-table", t],
        &["provision", t, "apply", &b],
        &resolve_o,
        &resolve_t,
    ]);
    assert_eq!(answers[1]["errors"], Value::Array(vec![]), "{}", answers[1]);
    assert_same_resolution(&answers[2], &answers[3], PAIRS);
    let names = |pair: &str| -> Vec<String> {
        answers[2][pair]["limits"]
            .as_array()
            .expect("limits")
            .iter()
            .map(|l| l["name"].as_str().unwrap_or_default().to_string())
            .collect()
    };
    assert_eq!(names("user-1/gpt-4"), ["rpm", "session"]);
    assert_eq!(answers[2]["user-1/gpt-4"]["source"], "entity");
    // user-2's level holds new kinds only: 0.17 sees no limits there.
    assert_eq!(answers[2]["user-2/gpt-4"]["source"], "resource");
    assert_eq!(names("user-2/gpt-4"), ["rpm", "tpd"]);
    assert_eq!(answers[2]["user-1/claude-3"]["source"], "system");
    assert_eq!(names("user-1/claude-3"), ["rpm"]);

    // (2) And our plan has nothing to do.
    ours.assert_plan_is_empty(&kinds);
}

#[test]
fn buckets_get_bucket_limits_only_and_python_keeps_enforcing() {
    let Some(it) = interop("kindsfan") else {
        return;
    };
    it.with_applied("kinds.yaml", KINDS);

    // A Python limiter creates user-1's gpt-4 bucket from our items.
    let mut limiter = it.limiter("default");
    assert!(limiter.acquire("user-1", "gpt-4", "rpm", 5));

    // Lower user-1's rpm and change its rolling window: the fan-out syncs the bucket.
    let lowered_text = KINDS
        .replacen("rpm: {capacity: 60}", "rpm: {capacity: 2}", 1)
        .replacen(
            "burst_guard: {capacity: 30, window: minute, rolling: true}",
            "burst_guard: {capacity: 30, window: hour, rolling: true}",
            1,
        );
    assert!(
        lowered_text.contains("rpm: {capacity: 2}")
            && lowered_text.contains("{capacity: 30, window: hour"),
        "both replacements happened"
    );
    let lowered = it.write_file("lowered.yaml", &lowered_text);
    it.apply(&lowered);
    let bucket = it
        .dump()
        .into_iter()
        .find(|i| {
            let pk = i["PK"]["S"].as_str().unwrap_or_default();
            pk.contains("/BUCKET#user-1#gpt-4#")
        })
        .expect("user-1's gpt-4 bucket");
    let attrs: Vec<&String> = bucket
        .as_object()
        .expect("item")
        .keys()
        .filter(|k| k.starts_with("b_"))
        .collect();
    assert!(
        attrs
            .iter()
            .all(|k| !k.contains("burst_guard") && !k.contains("in_flight")),
        "{attrs:?}"
    );
    assert_eq!(
        bucket["b_rpm_cp"]["N"], "2000",
        "the lowered rpm reached the bucket"
    );
    // The limiter's config cache (60 s) still holds rpm 60; the bucket does not.
    assert!(
        !limiter.acquire("user-1", "gpt-4", "rpm", 5),
        "5 > the new capacity 2"
    );
    assert!(limiter.acquire("user-1", "gpt-4", "rpm", 1));
}
