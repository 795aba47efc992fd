//! The runtime's state items next to Python zae-limiter 0.17 on a real
//! DynamoDB API (moto): while `acquire` and `reservation` keep state for
//! rolling windows and concurrency limits, Python still resolves every
//! level's bucket limits exactly as before (including for a level of new
//! kinds only, which it falls through and we do not), still acquires on its
//! buckets, and a namespace purge removes our state items with the rest.

mod common;
mod interop_support;

use interop_support::interop;
use serde_json::Value;

const MANIFEST: &str = include_str!("../fixtures/interop/runtime.yaml");

/// (pair, the level we resolve, whether it has a concurrency limit).
const PAIRS: &[(&str, &str, bool)] = &[
    ("user-1/gpt-4", "entity", true),
    ("user-2/gpt-4", "entity", true),
    ("other/gpt-4", "resource", true),
    ("user-1/claude-3", "system", false),
];

#[test]
fn python_resolves_the_same_bucket_limits_while_our_state_items_exist() {
    let Some(it) = interop("runtime") else { return };
    it.with_applied("limits.yaml", MANIFEST);
    let t = it.table.as_str();
    let mut resolve: Vec<&str> = vec!["resolve", t, "default"];
    resolve.extend(PAIRS.iter().map(|p| p.0));
    let before = it.reference(&resolve);
    // user-2/gpt-4 declares new kinds only: Python falls through to the resource level.
    assert_eq!(before["user-2/gpt-4"]["source"], "resource", "{before}");

    let store = ["--endpoint-url", it.endpoint.as_str(), "-n", t];
    for (pair, level, slots) in PAIRS {
        let (e, r) = pair.split_once('/').unwrap();
        let mut modes = vec!["consume", "consume"];
        if *slots {
            modes.push("reserve");
        }
        for mode in modes {
            let mut args = vec!["acquire", e, "-r", r, "--mode", mode, "--format", "json"];
            args.extend_from_slice(&store);
            let d: Value = serde_json::from_str(&it.ours_ok(&args)).expect("JSON");
            assert_eq!(d["level"], *level, "{pair}: {d}");
            assert_eq!(d["allowed"], true, "{pair}: {d}");
        }
    }

    let ns = it.reference(&["nsid", t, "default"])["namespace_id"]
        .as_str()
        .expect("namespace id")
        .to_string();
    let prefix = format!("{ns}/RUNTIME#");
    let ours: Vec<Value> = it
        .dump()
        .into_iter()
        .filter(|i| {
            i["PK"]["S"]
                .as_str()
                .is_some_and(|pk| pk.starts_with(&prefix))
        })
        .collect();
    assert_eq!(ours.len(), PAIRS.len(), "one state item per pair: {ours:?}");
    for item in &ours {
        assert_eq!(item["SK"]["S"], "#STATE");
        assert_eq!(item["GSI4PK"]["S"], ns.as_str());
        assert_eq!(item["GSI4SK"], item["PK"]);
        assert!(item["ttl"]["N"].is_string(), "{item}");
        let keys: Vec<&String> = item.as_object().unwrap().keys().collect();
        assert!(
            !keys
                .iter()
                .any(|k| k.starts_with("GSI1") || k.starts_with("GSI2") || k.starts_with("GSI3")),
            "no index Python queries: {keys:?}"
        );
    }

    let answers = it.reference_many(&[
        &resolve,
        &["acquire", t, "default", "user-1", "gpt-4", "rpm", "1"],
        &["acquire", t, "default", "other", "gpt-4", "rpm", "1"],
    ]);
    assert_eq!(
        answers[0], before,
        "resolve_limits changed while our state items exist"
    );
    assert_eq!(answers[1]["admitted"], true);
    assert_eq!(answers[2]["admitted"], true);

    // A namespace purge (GSI4) removes our state items with everything else.
    it.reference(&["purge", t, "default"]);
    let left: Vec<Value> = it
        .dump()
        .into_iter()
        .filter(|i| {
            i["PK"]["S"]
                .as_str()
                .is_some_and(|pk| pk.starts_with(&format!("{ns}/")))
        })
        .collect();
    assert!(left.is_empty(), "left after the purge: {left:?}");
}
