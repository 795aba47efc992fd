//! Reading what the Python library stored: (4) Python's CLI `entity
//! get-limits` / `resource get-defaults` / `system get-defaults` and ours print
//! the same text for the same items (ours lists limits by name, a documented
//! fix: the reference prints them in storage order); (5) limits written with
//! the Python client's `set_limits` / `set_resource_defaults` /
//! `set_system_defaults` read back here identically (JSON, field by field).

mod common;
mod interop_support;

use interop_support::{interop, Interop};
use serde_json::Value;

const FIXTURE: &str = include_str!("../scripts/interop/manifests/fixture.yaml");

/// (ours, the Python CLI) argument lists for the same question.
fn questions() -> Vec<(Vec<&'static str>, Vec<&'static str>)> {
    vec![
        (
            vec!["entity", "get-limits", "user-1", "-r", "gpt-4"],
            vec!["entity", "get-limits", "user-1", "--resource", "gpt-4"],
        ),
        (
            vec!["entity", "get-limits", "user-1"],
            vec!["entity", "get-limits", "user-1"],
        ),
        (
            vec!["entity", "get-limits", "user-2", "-r", "claude-3"],
            vec!["entity", "get-limits", "user-2", "--resource", "claude-3"],
        ),
        (
            vec!["entity", "get-limits", "team-a", "-r", "gpt-4"],
            vec!["entity", "get-limits", "team-a", "--resource", "gpt-4"],
        ),
        (
            vec!["entity", "get-limits", "api-key-123", "-r", "gpt-4"],
            vec!["entity", "get-limits", "api-key-123", "--resource", "gpt-4"],
        ),
        (
            vec!["entity", "get-limits", "nobody", "-r", "gpt-4"],
            vec!["entity", "get-limits", "nobody", "--resource", "gpt-4"],
        ),
        (
            vec!["resource", "get-defaults", "gpt-4"],
            vec!["resource", "get-defaults", "gpt-4"],
        ),
        (
            vec!["resource", "get-defaults", "claude-3"],
            vec!["resource", "get-defaults", "claude-3"],
        ),
        (
            vec!["system", "get-defaults"],
            vec!["system", "get-defaults"],
        ),
    ]
}

/// The limit lines (`    name: …`) must be sorted by name in ours.
fn limit_names(text: &str) -> Vec<String> {
    text.lines()
        .filter(|l| l.starts_with("    ") && !l.starts_with("     "))
        .filter_map(|l| l.trim().split(':').next().map(str::to_string))
        .collect()
}

fn compare_cli(it: &Interop, only: Option<&[usize]>) {
    for (i, (ours_args, their_args)) in questions().into_iter().enumerate() {
        if only.is_some_and(|o| !o.contains(&i)) {
            continue;
        }
        let mut a: Vec<&str> = ours_args.clone();
        a.extend(["-n", &it.table, "--endpoint-url", &it.endpoint]);
        let mut b: Vec<&str> = their_args.clone();
        b.extend(["--name", &it.table, "--endpoint-url", &it.endpoint]);
        // Both at once: each costs a process start-up, Python's a slow one.
        let (ours, theirs) = std::thread::scope(|sc| {
            let theirs = sc.spawn(|| it.python_cli(&b));
            let ours = it.ours(&a);
            (ours, theirs.join().expect("python CLI thread"))
        });
        assert_eq!(ours.status.code(), theirs.status.code(), "{ours_args:?}");
        let (o, t) = (
            String::from_utf8_lossy(&ours.stdout),
            String::from_utf8_lossy(&theirs.stdout),
        );
        if o != t {
            let mut lo: Vec<&str> = o.lines().collect();
            let mut lt: Vec<&str> = t.lines().collect();
            lo.sort_unstable();
            lt.sort_unstable();
            assert_eq!(
                lo, lt,
                "{ours_args:?}: different lines\n--- ours\n{o}--- reference\n{t}"
            );
            let names = limit_names(&o);
            let mut sorted = names.clone();
            sorted.sort();
            assert_eq!(
                names, sorted,
                "{ours_args:?}: only the order may differ, and ours is by name"
            );
        }
    }
}

#[test]
fn python_cli_and_ours_print_the_same_limits() {
    let Some(it) = interop("show") else { return };
    it.create_table();
    it.reference(&["set-fixture", &it.table, "default"]);
    // The same questions on items written by our apply.
    let Some(applied) = interop("showapply") else {
        return;
    };
    applied.create_table();
    let manifest = applied.write_file("fixture.yaml", FIXTURE);
    applied.ours_ok(&[
        "limits",
        "apply",
        "-n",
        &applied.table,
        "-f",
        &manifest.to_string_lossy(),
        "--endpoint-url",
        &applied.endpoint,
    ]);
    compare_cli(&it, Some(&[0, 1, 2, 5, 6, 7, 8]));
    // (A subset: each question costs a Python start-up.)
    compare_cli(&applied, Some(&[0, 3, 4, 6, 8]));
}

/// Python's limit JSON without the keys it sets to null (ours omits them), and
/// every cron in its canonical stored form: Python returns `1-5` where we
/// render `MON-FRI`, the same pattern.
fn without_nulls(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| {
                    (
                        k.clone(),
                        if k == "cron" {
                            canonical_cron(v)
                        } else {
                            without_nulls(v)
                        },
                    )
                })
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(without_nulls).collect()),
        other => other.clone(),
    }
}

fn canonical_cron(v: &Value) -> Value {
    let cron = v.as_str().unwrap_or_default();
    let compact = zae_limiter_engine::encoding::encode_cron(cron)
        .unwrap_or_else(|e| panic!("cron {cron:?} does not parse: {e:?}"));
    Value::String(compact)
}

/// Our JSON limits without our extra `kind` label, crons canonical.
fn our_limits(doc: &Value) -> Value {
    let mut limits = doc["limits"].clone();
    if let Value::Array(ls) = &mut limits {
        for l in ls {
            if let Value::Object(m) = l {
                m.remove("kind");
            }
        }
    }
    without_nulls(&limits)
}

#[test]
fn limits_set_by_the_python_client_read_back_identically() {
    let Some(it) = interop("readback") else {
        return;
    };
    it.create_table();
    let t = it.table.as_str();
    let answers = it.reference_many(&[
        &["set-fixture", t, "default"],
        &["get-entity-level", t, "default", "user-1", "gpt-4"],
        &["get-entity-level", t, "default", "user-1", "_default_"],
        &["get-entity-level", t, "default", "user-2", "claude-3"],
        &["get-resource-defaults", t, "default", "gpt-4"],
        &["get-resource-defaults", t, "default", "claude-3"],
        &["get-system-defaults", t, "default"],
    ]);
    let read = |args: &[&str]| -> Value {
        let mut a = args.to_vec();
        a.extend(["-n", t, "--endpoint-url", &it.endpoint, "--format", "json"]);
        let out = it.ours_ok(&a);
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("{args:?}: {e}\n{out}"))
    };
    let cases: [(&[&str], &Value); 6] = [
        (
            &["entity", "get-limits", "user-1", "-r", "gpt-4"],
            &answers[1],
        ),
        (&["entity", "get-limits", "user-1"], &answers[2]),
        (
            &["entity", "get-limits", "user-2", "-r", "claude-3"],
            &answers[3],
        ),
        (&["resource", "get-defaults", "gpt-4"], &answers[4]),
        (&["resource", "get-defaults", "claude-3"], &answers[5]),
        (&["system", "get-defaults"], &answers[6]),
    ];
    for (args, theirs) in cases {
        let ours = read(args);
        assert_eq!(
            our_limits(&ours),
            without_nulls(&theirs["limits"]),
            "{args:?}"
        );
        assert!(
            ours["limits"].as_array().is_some_and(|l| !l.is_empty()),
            "{args:?}: the fixture sets limits here"
        );
        for flag in ["disabled", "cascade", "on_unavailable"] {
            if let Some(v) = theirs.get(flag) {
                assert_eq!(&ours[flag], v, "{args:?}: {flag}");
            }
        }
    }
}
