//! `limits simulate` and `limits gen-trace` through the binary.
//!
//! Golden: `fixtures/simulate/every-kind.expected.txt` is the exact report of
//! `every-kind.csv` against `every-kind.yaml` (every limit kind refuses, or,
//! soft, goes over, at a line the trace's comments make easy to follow).
//! `ZAEL_BLESS=1 cargo test --test cli_simulate` rewrites it.

mod common;

use std::path::{Path, PathBuf};

use common::{outcome, write_in, zae_limiter};
use serde_json::Value;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/simulate")
        .join(name)
}

fn run(args: &[&str]) -> (i32, String, String) {
    outcome(zae_limiter().args(args).output().unwrap())
}

fn simulate(entity: &str, trace: &Path, extra: &[&str]) -> (i32, String, String) {
    simulate_with(&fixture("every-kind.yaml"), entity, "gpt-4", trace, extra)
}

/// `limits simulate` of `manifest` for (entity, resource) over `trace`.
fn simulate_with(
    manifest: &Path,
    entity: &str,
    resource: &str,
    trace: &Path,
    extra: &[&str],
) -> (i32, String, String) {
    let mut args = vec![
        "limits",
        "simulate",
        "-f",
        manifest.to_str().unwrap(),
        "--entity",
        entity,
        "--resource",
        resource,
        "--trace",
        trace.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    run(&args)
}

fn json(stdout: &str) -> Value {
    serde_json::from_str(stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}"))
}

fn limit<'a>(doc: &'a Value, name: &str) -> &'a Value {
    doc["limits"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["name"] == name)
        .unwrap_or_else(|| panic!("no limit {name} in {doc}"))
}

/// A run that exits 1 and says `says` on stderr.
fn assert_fails((code, _, err): (i32, String, String), says: &str) {
    assert_eq!(code, 1, "{err}");
    assert!(err.contains(says), "{err}");
}

#[test]
fn every_kind_report_matches_the_golden() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let (code, out, err) = zae_limiter()
        .current_dir(dir)
        .args([
            "limits",
            "simulate",
            "-f",
            "fixtures/simulate/every-kind.yaml",
            "-e",
            "u1",
            "-r",
            "gpt-4",
            "--trace",
            "fixtures/simulate/every-kind.csv",
        ])
        .output()
        .map(outcome)
        .unwrap();
    assert_eq!(
        (code, err.as_str()),
        (0, ""),
        "no progress bar off a terminal"
    );
    let golden = fixture("every-kind.expected.txt");
    if std::env::var_os("ZAEL_BLESS").is_some() {
        std::fs::write(&golden, &out).unwrap();
    }
    let expected = std::fs::read_to_string(&golden).unwrap_or_default();
    if expected != out {
        let diff = similar::TextDiff::from_lines(expected.as_str(), out.as_str());
        panic!(
            "report differs from {} (ZAEL_BLESS=1 rewrites it):\n{}",
            golden.display(),
            diff.unified_diff()
        );
    }
}

#[test]
fn every_kind_json_counts_what_the_trace_does() {
    let (code, out, err) = simulate("u1", &fixture("every-kind.csv"), &["--format", "json"]);
    assert_eq!(code, 0, "{err}");
    let doc = json(&out);
    assert_eq!(doc["version"], 1);
    assert_eq!(doc["source"], "entity");
    assert_eq!(
        (&doc["requests"], &doc["admitted"], &doc["refused"]),
        (&Value::from(19), &Value::from(11), &Value::from(8))
    );
    // Lines 6-7: the bucket is empty for two requests in a row.
    let rpm = limit(&doc, "rpm");
    assert_eq!(
        (&rpm["refused"], &rpm["kind"]),
        (&Value::from(2), &Value::from("bucket"))
    );
    assert_eq!(
        rpm["longest_refusal_streak"]["from"],
        "2026-12-07T09:00:03Z"
    );
    assert_eq!(rpm["longest_refusal_streak"]["requests"], 2);
    // Line 17: the daily quota is spent; line 25, after midnight, it is back.
    let rpd = limit(&doc, "rpd");
    assert_eq!(
        (&rpd["refused"], &rpd["kind"]),
        (&Value::from(1), &Value::from("quota"))
    );
    assert_eq!(rpd["last_refusal"], "2026-12-07T09:00:39Z");
    // Line 14: no burst past 2 in a rolling minute.
    let burst = limit(&doc, "burst");
    assert_eq!(
        (&burst["refused"], &burst["kind"]),
        (&Value::from(1), &Value::from("rolling"))
    );
    // Soft: over the limit but never refusing.
    let tokens = limit(&doc, "tokens");
    assert_eq!(tokens["refused"], 0);
    assert!(tokens["over_but_admitted"].as_u64().unwrap() >= 1);
    assert_eq!(tokens["lowest_available"], -5);
    // Lines 9, 10, 19 and 23: the one slot is held (a consume only looks).
    let slots = limit(&doc, "slots");
    assert_eq!(
        (&slots["refused"], &slots["refused_alone"]),
        (&Value::from(4), &Value::from(4))
    );
    assert_eq!(
        (&slots["kind"], &slots["peak_holds"]),
        (&Value::from("concurrency"), &Value::from(1))
    );
    // Line 26 releases h5, whose reservation was refused: expected, not a mistake.
    assert_eq!(
        (
            &doc["hold_ops"],
            &doc["hold_ops_not_open"],
            &doc["hold_ops_for_refused"]
        ),
        (&Value::from(5), &Value::from(2), &Value::from(1))
    );
    assert_eq!(doc["trace"]["out_of_order"], 1);
    assert_eq!(doc["trace"]["unknown_costs"], serde_json::json!(["other"]));
}

#[test]
fn json_lines_and_stdin_give_the_same_answer() {
    let dir = tempfile::tempdir().unwrap();
    // The CSV fixture as JSON lines.
    let csv = std::fs::read_to_string(fixture("every-kind.csv")).unwrap();
    let mut lines = csv.lines().filter(|l| !l.starts_with('#'));
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let mut jsonl = String::new();
    for line in lines {
        let mut obj = serde_json::Map::new();
        let mut cost = serde_json::Map::new();
        for (col, field) in header.iter().zip(line.split(',')) {
            match (*col, field) {
                (_, "") => {}
                ("timestamp" | "op" | "hold", v) => {
                    obj.insert(col.to_string(), v.into());
                }
                ("ttl", v) => {
                    obj.insert("ttl".into(), v.parse::<i64>().unwrap().into());
                }
                (name, v) => {
                    cost.insert(name.into(), v.parse::<u64>().unwrap().into());
                }
            }
        }
        if !cost.is_empty() {
            obj.insert("cost".into(), cost.into());
        }
        jsonl.push_str(&Value::from(obj).to_string());
        jsonl.push('\n');
    }
    let path = write_in(dir.path(), "t.jsonl", &jsonl);
    let strip = |mut v: Value| {
        v["trace"].as_object_mut().unwrap().remove("path");
        v["trace"].as_object_mut().unwrap().remove("format");
        v["trace"].as_object_mut().unwrap().remove("lines");
        v
    };
    let (_, from_csv, _) = simulate("u1", &fixture("every-kind.csv"), &["--format", "json"]);
    let (code, from_jsonl, err) = simulate("u1", &path, &["--format", "json"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(json(&from_jsonl)["trace"]["format"], "jsonl");
    assert_eq!(strip(json(&from_csv)), strip(json(&from_jsonl)));

    let manifest = fixture("every-kind.yaml");
    let out = zae_limiter()
        .args(["limits", "simulate", "-f", manifest.to_str().unwrap()])
        .args([
            "-e", "u1", "-r", "gpt-4", "--trace", "-", "--format", "json",
        ])
        .stdin(std::fs::File::open(&path).unwrap())
        .output()
        .unwrap();
    let (code, from_stdin, err) = outcome(out);
    assert_eq!(code, 0, "{err}");
    assert_eq!(strip(json(&from_jsonl)), strip(json(&from_stdin)));
}

#[test]
fn disabled_admits_everything_and_bypass_counts() {
    // Five requests a second against the resource's 1 per minute.
    let dir = tempfile::tempdir().unwrap();
    let mut trace = String::from("timestamp,rpm\n");
    for i in 0..5 {
        trace.push_str(&format!("2026-12-07T09:00:0{i}Z,1\n"));
    }
    let path = write_in(dir.path(), "t.csv", trace);

    let (_, out, _) = simulate("someone", &path, &["--format", "json"]);
    let doc = json(&out);
    assert_eq!(
        (&doc["source"], &doc["refused"]),
        (&Value::from("resource"), &Value::from(4))
    );

    let (code, out, _) = simulate("blocked", &path, &["--format", "json"]);
    let doc = json(&out);
    assert_eq!(code, 0);
    assert_eq!(
        (&doc["disabled"], &doc["admitted"]),
        (&Value::from("disabled"), &Value::from(5))
    );
    assert_eq!(limit(&doc, "rpm")["checked"], 0);
    let (_, text, _) = simulate("blocked", &path, &[]);
    assert!(
        text.contains("every request is admitted and nothing is counted"),
        "{text}"
    );

    let (_, out, _) = simulate("vip", &path, &["--format", "json"]);
    let doc = json(&out);
    assert_eq!(
        (&doc["disabled"], &doc["refused"]),
        (&Value::from("bypass"), &Value::from(0))
    );
    assert_eq!(limit(&doc, "rpm")["over_but_admitted"], 4);
}

#[test]
fn svg_chart_is_written_whole() {
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("chart.svg");
    let (code, _, err) = simulate(
        "u1",
        &fixture("every-kind.csv"),
        &["--svg", svg.to_str().unwrap(), "--tz", "America/New_York"],
    );
    assert_eq!(code, 0, "{err}");
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.starts_with("<svg"));
    for label in [
        "u1 on gpt-4",
        "rpm: bucket 3",
        "slots: 1 at once",
        "America/New_York",
    ] {
        assert!(text.contains(label), "chart lacks {label:?}");
    }
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert_eq!(left.len(), 1, "no temporary file left behind");
}

#[test]
fn bad_input_is_a_located_error_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("chart.svg");
    let bad = write_in(
        dir.path(),
        "bad.csv",
        "timestamp,rpm\n2026-12-07T09:00:00Z,1\n2026-12-07T09:00:01Z,lots\n",
    );
    let (code, out, err) = simulate("u1", &bad, &["--svg", svg.to_str().unwrap()]);
    assert_eq!((code, out.as_str()), (1, ""));
    assert!(
        err.starts_with("Error: ") && err.contains("bad.csv: line 3: cost \"lots\" for \"rpm\""),
        "{err}"
    );
    assert!(!svg.exists());

    std::fs::write(&bad, "timestamp,op,rpm\n2026-12-07T09:00:00Z,reserve,1\n").unwrap();
    assert_fails(
        simulate("u1", &bad, &[]),
        "line 2: a reserve needs a hold id",
    );

    assert_fails(
        simulate("u1", &dir.path().join("missing.csv"), &[]),
        "cannot read the trace",
    );

    // No level defines limits for this pair.
    let manifest = write_in(
        dir.path(),
        "m.yaml",
        "namespace: default\nresources:\n  gpt-4:\n    limits:\n      rpm: {capacity: 5}\n",
    );
    assert_fails(
        simulate_with(&manifest, "u", "claude", &fixture("every-kind.csv"), &[]),
        "no limits apply to entity 'u' on resource 'claude'",
    );

    // An invalid manifest prints its located diagnostics.
    std::fs::write(
        &manifest,
        "namespace: default\nresources:\n  gpt-4:\n    limits:\n      rpm: {capacity: -5}\n",
    )
    .unwrap();
    assert_fails(
        simulate_with(&manifest, "u", "gpt-4", &fixture("every-kind.csv"), &[]),
        "m.yaml:5:",
    );
}

#[test]
fn gen_trace_is_deterministic_and_replays() {
    let dir = tempfile::tempdir().unwrap();
    let args = |seed: &str, out: &Path| {
        vec![
            "limits".to_string(),
            "gen-trace".into(),
            "--shape".into(),
            "business-hours".into(),
            "--rate".into(),
            "120/min".into(),
            "--duration".into(),
            "1d".into(),
            "--start".into(),
            "2026-12-07T00:00:00Z".into(),
            "--tz".into(),
            "America/New_York".into(),
            "--costs".into(),
            "rpm=1,tokens=0..3".into(),
            "--hold".into(),
            "1s..40s".into(),
            "--seed".into(),
            seed.into(),
            "-o".into(),
            out.to_str().unwrap().into(),
        ]
    };
    let (a, b, c) = (
        dir.path().join("a.csv"),
        dir.path().join("b.csv"),
        dir.path().join("c.csv"),
    );
    for (seed, path) in [("5", &a), ("5", &b), ("6", &c)] {
        let (code, out, err) = outcome(zae_limiter().args(args(seed, path)).output().unwrap());
        assert_eq!((code, out.as_str(), err.as_str()), (0, "", ""));
    }
    let a_text = std::fs::read_to_string(&a).unwrap();
    assert_eq!(
        a_text,
        std::fs::read_to_string(&b).unwrap(),
        "same seed, same trace"
    );
    assert_ne!(a_text, std::fs::read_to_string(&c).unwrap());
    assert!(
        a_text.starts_with("timestamp,op,hold,rpm,tokens\n"),
        "{}",
        &a_text[..80]
    );
    // 8 busy hours at 2/s and 16 quiet ones at 0.2/s: about 69,000 reservations.
    let reserves = a_text.lines().filter(|l| l.contains(",reserve,")).count();
    assert!((64_000..74_000).contains(&reserves), "{reserves}");
    assert_eq!(
        reserves,
        a_text.lines().filter(|l| l.contains(",release,")).count()
    );

    let (code, out, err) = simulate("u1", &a, &["--format", "json"]);
    assert_eq!(code, 0, "{err}");
    let doc = json(&out);
    assert_eq!(doc["requests"].as_u64().unwrap() as usize, reserves);
    // One slot for work lasting 1-40 s at up to 2 a second: mostly refused.
    assert!(limit(&doc, "slots")["refused"].as_u64().unwrap() > 1000);

    // JSON lines to stdout read back the same.
    let (code, out, _) = run(&[
        "limits",
        "gen-trace",
        "--rate",
        "2/s",
        "--duration",
        "1m",
        "--start",
        "0",
        "--format",
        "jsonl",
        "--costs",
        "rpm=1",
    ]);
    assert_eq!(code, 0);
    let first: Value = serde_json::from_str(out.lines().next().unwrap()).unwrap();
    assert_eq!(first["cost"]["rpm"], 1);
}

#[test]
fn gen_trace_refuses_bad_options_as_usage_errors() {
    for (flag, value, says) in [
        ("--rate", "fast", "--rate \"fast\""),
        ("--duration", "1.5h", "not a duration"),
        ("--start", "noon", "not an instant"),
        ("--costs", "rpm=5..1", "--costs"),
        ("--tz", "Mars/Olympus", "--tz"),
        ("--hold", "9m..1m", "--hold"),
        ("--start", "9223372036854775807", "out of range"),
        ("--duration", "99999999999d", "would end after 9999-12-30"),
    ] {
        let mut args = vec!["limits", "gen-trace"];
        for (f, v) in [("--rate", "1/s"), ("--duration", "1m"), ("--start", "0")] {
            if f != flag {
                args.extend([f, v]);
            }
        }
        args.extend([flag, value]);
        let (code, out, err) = run(&args);
        assert_eq!((code, out.as_str()), (2, ""), "{flag} {value}: {err}");
        assert!(
            err.starts_with("Error: ") && err.contains(says),
            "{flag} {value}: {err}"
        );
    }
}

/// Epoch-ms at i64's limits and endless lines are located errors, never a
/// crash or unbounded memory; the first and last supported instants replay.
#[test]
fn extreme_instants_and_endless_lines_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    let csv = write_in(
        dir.path(),
        "extreme.csv",
        "timestamp,rpm\n-9223372036854775808,1\n9223372036854775807,1\n",
    );
    let svg = dir.path().join("chart.svg");
    let (code, out, err) = simulate("u1", &csv, &["--svg", svg.to_str().unwrap()]);
    assert_eq!((code, out.as_str()), (1, ""), "{err}");
    assert!(
        err.contains("line 2: \"-9223372036854775808\" is out of range"),
        "{err}"
    );
    assert!(!svg.exists());
    let jsonl = write_in(
        dir.path(),
        "extreme.jsonl",
        "{\"timestamp\": 9223372036854775807, \"cost\": {\"rpm\": 1}}\n",
    );
    assert_fails(
        simulate("u1", &jsonl, &[]),
        "line 1: \"9223372036854775807\" is out of range",
    );
    // The edges of the range are fine, chart included.
    std::fs::write(
        &csv,
        "timestamp,rpm\n-62135510400000,1\n253402214399999,1\n",
    )
    .unwrap();
    let (code, out, err) = simulate("u1", &csv, &["--svg", svg.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("from 0001-01-02T00:00:00Z to 9999-12-30T23:59:59.999Z"),
        "{out}"
    );
    assert!(std::fs::read_to_string(&svg).unwrap().starts_with("<svg"));
    // A line without an end is refused once it passes the cap.
    let mut text = String::from("timestamp,rpm\n");
    text.push_str(&"9".repeat(2 * 1024 * 1024));
    let long = write_in(dir.path(), "long.csv", text);
    assert_fails(
        simulate("u1", &long, &[]),
        "line 2: the line is larger than 1 MiB; a trace line that long is refused",
    );
}

#[test]
fn help_teaches_with_examples() {
    for cmd in ["simulate", "gen-trace"] {
        let (code, out, _) = run(&["limits", cmd, "--help"]);
        assert_eq!(code, 0);
        assert!(
            out.contains("Examples:") && out.contains("zae-limiter limits gen-trace"),
            "{out}"
        );
    }
}

#[test]
fn the_shared_every_kind_manifest_simulates() {
    // fixtures/manifests/valid/every-kind.yaml (validated, planned, applied and
    // rendered by the other suites): user-1 on gpt-4 resolves every kind.
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.csv");
    let (code, _, err) = run(&[
        "limits",
        "gen-trace",
        "--shape",
        "bursty",
        "--rate",
        "2/s",
        "--duration",
        "10m",
        "--start",
        "2026-12-07T14:00:00Z",
        "--costs",
        "rpm=1,session=1..20,burst_guard=1",
        "-o",
        trace.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let manifest =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/manifests/valid/every-kind.yaml");
    let (code, out, err) =
        simulate_with(&manifest, "user-1", "gpt-4", &trace, &["--format", "json"]);
    assert_eq!(code, 0, "{err}");
    let doc = json(&out);
    let kinds = common::column(&doc["limits"], "kind");
    assert_eq!(kinds, ["bucket", "quota", "rolling", "concurrency"]);
    // 60 requests a minute against rpm 60 and a rolling 30 a minute: the
    // rolling guard binds first.
    assert!(
        limit(&doc, "burst_guard")["refused"].as_u64().unwrap() > 0,
        "{doc}"
    );
    let checked = doc["requests"].as_u64().unwrap();
    assert_eq!(limit(&doc, "in_flight")["checked"].as_u64(), Some(checked));
}
