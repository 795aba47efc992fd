//! `zae-limiter limits explain` through the binary: goldens for the shipped
//! manifests across DST changes and quota resets; the same answer from the
//! store as from the manifest; and its numbers against `cron check` (window
//! and reset edges) and `limits simulate` (effective capacity) at the same
//! instants.
//!
//! Goldens: `fixtures/explain/NAME.txt` is the stdout of the case's command
//! line run from the repository root; `ZAEL_BLESS=1 cargo test --test
//! cli_explain` rewrites them.

mod common;

use std::path::{Path, PathBuf};

use common::{ok_in as ok, run_in};

use serde_json::Value;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn json(dir: &Path, args: &[&str]) -> Value {
    let mut a = args.to_vec();
    a.extend(["--format", "json"]);
    serde_json::from_str(&ok(dir, &a)).expect("json")
}

/// (golden name, arguments after `limits explain`, split at spaces).
const CASES: &[(&str, &str)] = &[
    // New York's DST ends on 2026-11-01: business hours move from 13:00Z to
    // 14:00Z, the midnight quota reset from 04:00Z to 05:00Z.
    (
        "quickstart-resource-dst-end",
        "-f fixtures/manifests/valid/quickstart.yaml -e somebody -r gpt-4 --at 2026-10-30T12:00:00Z --until 2026-11-03T00:00:00Z",
    ),
    // The entity's own level shadows the resource's; a session quota.
    (
        "quickstart-entity-session",
        "-f fixtures/manifests/valid/quickstart.yaml -e user-premium -r gpt-4 --at 2026-10-30T12:00:00Z --until 2026-11-03T00:00:00Z --cost rpm=1500 --cost session=600",
    ),
    // New York's DST starts on 2027-03-14; a rolling hour and slots beside.
    (
        "gateway-dst-start",
        "-f fixtures/simulate/gateway.yaml -e acme -r gpt-4 --at 2027-03-12T12:00:00Z --until 2027-03-16T00:00:00Z --cost tpm=5000",
    ),
    // A monthly quota that resets as its December window opens.
    (
        "reference-example-2-month-end",
        "-f fixtures/manifests/valid/reference-example-2.yaml -e team-a -r gpt-4 --at 2026-11-30T12:00:00Z --until 2026-12-02T00:00:00Z",
    ),
    // Berlin's DST ends on 2026-10-25; a tier through an anchor, `_default_`.
    (
        "llm-gateway-default-dst-end",
        "-f fixtures/manifests/valid/llm-gateway.yaml -e user-7 -r anthropic/claude-3.5 --at 2026-10-24T12:00:00Z --until 2026-10-27T00:00:00Z",
    ),
    // A nightly quota with a night-time scale, weekday resets at 22:00 UTC.
    (
        "llm-gateway-nightly",
        "-f fixtures/manifests/valid/llm-gateway.yaml -e svc:batch-worker -r anthropic/claude-3.5 --at 2026-12-04T12:00:00Z --until 2026-12-08T00:00:00Z",
    ),
    // Three windows on one limit (first match wins) and a bypassed resource.
    (
        "llm-gateway-windows",
        "-f fixtures/manifests/valid/llm-gateway.yaml -e anyone -r openai/gpt-4o --at 2026-12-05T00:00:00Z --until 36h",
    ),
    (
        "llm-gateway-bypass",
        "-f fixtures/manifests/valid/llm-gateway.yaml -e anyone -r mistral:large --at 2026-12-05T00:00:00Z --until 1d",
    ),
    // A level with a flag and no limits: skipped for limits, not for `disabled`.
    (
        "llm-gateway-carve-out",
        "-f fixtures/manifests/valid/llm-gateway.yaml -e internal-monitor -r anthropic/claude-3.5 --at 2026-12-05T00:00:00Z --until 1d",
    ),
    // `disabled: true`: every request refused, whatever the limits say.
    (
        "llm-gateway-disabled",
        "-f fixtures/manifests/valid/llm-gateway.yaml -e internal-monitor -r openai/gpt-4o --at 2026-12-05T00:00:00Z --until 1d",
    ),
    // A level of rolling windows and slots only: Python resolves the one below.
    (
        "python-sees-empty",
        "-f fixtures/manifests/lint/ZL104-python-sees-empty.yaml -e user-1 -r gpt-4 --at 2026-12-05T00:00:00Z --until 1d",
    ),
];

#[test]
fn shipped_manifests_explain_as_their_goldens() {
    let mut failures = Vec::new();
    for (name, args) in CASES {
        for (suffix, format) in [("txt", "text"), ("json", "json")] {
            let mut a = vec!["limits", "explain"];
            a.extend(args.split(' '));
            a.extend(["--format", format]);
            let out = ok(&root(), &a);
            let path = root()
                .join("fixtures/explain")
                .join(format!("{name}.{suffix}"));
            if std::env::var_os("ZAEL_BLESS").is_some() {
                std::fs::create_dir_all(path.parent().unwrap()).unwrap();
                std::fs::write(&path, &out).unwrap();
                continue;
            }
            let want = std::fs::read_to_string(&path).unwrap_or_default();
            if want != out {
                failures.push(format!(
                    "{}:\n--- want\n{want}\n--- got\n{out}",
                    path.display()
                ));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "ZAEL_BLESS=1 rewrites the goldens\n{}",
        failures.join("\n")
    );
}

#[test]
fn the_store_explains_what_the_manifest_explains() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let manifest = root().join("fixtures/manifests/valid/llm-gateway.yaml");
    let m = manifest.to_str().unwrap();
    ok(
        dir,
        &["limits", "apply", "--local=s.sqlite", "-n", "tbl", "-f", m],
    );
    for (entity, resource) in [
        ("user-42@acme.example", "openai/gpt-4o"),
        ("user-7", "anthropic/claude-3.5"),
        ("org-acme", "embeddings.v3"),
        ("internal-monitor", "openai/gpt-4o"),
        ("nobody", "mistral:large"),
    ] {
        let common = [
            "limits",
            "explain",
            "-e",
            entity,
            "-r",
            resource,
            "--at",
            "2026-12-05T08:00:00Z",
            "--until",
            "3d",
            "--cost",
            "rpm=700",
        ];
        let mut from_file = common.to_vec();
        from_file.extend(["-f", m]);
        let mut from_store = common.to_vec();
        from_store.extend(["--local=s.sqlite", "-n", "tbl", "-N", "gateway-prod"]);
        assert_eq!(
            ok(dir, &from_store),
            ok(dir, &from_file),
            "{entity} on {resource}"
        );
    }
}

/// Explain's window and reset edges are `cron check`'s, across both DST
/// changes of a year.
#[test]
fn edges_agree_with_cron_check() {
    let r = root();
    for (at, until) in [
        ("2026-10-28T00:00:00Z", "2026-11-05T00:00:00Z"),
        ("2027-03-10T00:00:00Z", "2027-03-18T00:00:00Z"),
    ] {
        let x = json(
            &r,
            &[
                "limits",
                "explain",
                "-f",
                "fixtures/manifests/valid/quickstart.yaml",
                "-e",
                "somebody",
                "-r",
                "gpt-4",
                "--at",
                at,
                "--until",
                until,
            ],
        );
        // `cron check CRON` of the manifest's zone from `at`.
        let cron_check = |cron: &str| {
            let next = ["--tz", "America/New_York", "--from", at, "--next", "20"];
            let mut args = vec!["cron", "check", cron];
            args.extend(next);
            json(&r, &args)
        };
        let limit = |name: &str| {
            x["limits"]
                .as_array()
                .unwrap()
                .iter()
                .find(|l| l["name"] == name)
                .unwrap()
                .clone()
        };
        // rpm's one window: explain's starts and ends are cron check's windows.
        let rpm = limit("rpm");
        let starts: Vec<&str> = changes(&rpm, |c| c["window"]["to"] == 0);
        let ends: Vec<&str> = changes(&rpm, |c| c["window"]["from"] == 0);
        let check = cron_check("* 9-17 * * MON-FRI");
        let windows: Vec<(&str, &str)> = check["windows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| (w["start"].as_str().unwrap(), w["end"].as_str().unwrap()))
            .filter(|(s, _)| *s <= until)
            .collect();
        assert!(windows.len() >= 5, "{windows:?}");
        assert_eq!(starts, windows.iter().map(|w| w.0).collect::<Vec<_>>());
        assert_eq!(
            ends,
            windows
                .iter()
                .map(|w| w.1)
                .filter(|e| *e <= until)
                .collect::<Vec<_>>()
        );
        // tpd's resets are cron check's reset edges.
        let tpd = limit("tpd");
        let resets: Vec<&str> = changes(&tpd, |c| c["reset"] == true);
        let check = cron_check("0 0 * * *");
        let edges: Vec<&str> = check["edges"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e.as_str().unwrap())
            .filter(|e| *e <= until)
            .collect();
        assert_eq!(resets, edges);
        assert_eq!(resets.len(), 8);
    }
}

fn changes(limit: &Value, pick: impl Fn(&Value) -> bool) -> Vec<&str> {
    limit["changes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| pick(c))
        .map(|c| c["at"].as_str().unwrap())
        .collect()
}

/// At `--at` and 30 s before and after every change explain lists, `limits simulate`
/// of one request (cost 0) at that instant finds each limit's availability
/// of a fresh bucket, window or slot set equal to explain's capacity there.
#[test]
fn capacities_agree_with_simulate() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    for (manifest, entity, resource, at, until) in [
        (
            "fixtures/simulate/gateway.yaml",
            "acme",
            "gpt-4",
            "2027-03-12T12:00:00Z",
            "2027-03-16T00:00:00Z",
        ),
        (
            "fixtures/manifests/valid/llm-gateway.yaml",
            "anyone",
            "openai/gpt-4o",
            "2026-12-05T00:00:00Z",
            "2026-12-07T12:00:00Z",
        ),
        (
            "fixtures/manifests/valid/reference-example-2.yaml",
            "team-a",
            "gpt-4",
            "2026-11-30T12:00:00Z",
            "2026-12-02T00:00:00Z",
        ),
    ] {
        let m = root().join(manifest);
        let m = m.to_str().unwrap();
        let explain_at = |t: &str| {
            json(
                dir,
                &[
                    "limits", "explain", "-f", m, "-e", entity, "-r", resource, "--at", t,
                    "--until", "1h",
                ],
            )
        };
        let x = json(
            dir,
            &[
                "limits", "explain", "-f", m, "-e", entity, "-r", resource, "--at", at, "--until",
                until,
            ],
        );
        let mut instants = vec![at.to_string()];
        for l in x["limits"].as_array().unwrap() {
            for c in l["changes"].as_array().into_iter().flatten() {
                let t = chrono::DateTime::parse_from_rfc3339(c["at"].as_str().unwrap()).unwrap();
                for delta in [-30, 30] {
                    let t = t + chrono::Duration::seconds(delta);
                    instants.push(
                        t.to_utc()
                            .to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
                    );
                }
            }
        }
        instants.sort();
        instants.dedup();
        assert!(instants.len() >= 3, "{manifest}: {instants:?}");
        for t in &instants {
            let x = explain_at(t);
            let names: Vec<&str> = x["limits"]
                .as_array()
                .unwrap()
                .iter()
                .map(|l| l["name"].as_str().unwrap())
                .collect();
            let trace = format!(
                "timestamp,{}\n{t},{}\n",
                names.join(","),
                vec!["0"; names.len()].join(",")
            );
            std::fs::write(dir.join("t.csv"), trace).unwrap();
            let sim = json(
                dir,
                &[
                    "limits", "simulate", "-f", m, "-e", entity, "-r", resource, "--trace", "t.csv",
                ],
            );
            for l in x["limits"].as_array().unwrap() {
                let name = l["name"].as_str().unwrap();
                let capacity = match l["kind"].as_str().unwrap() {
                    "concurrency" => l["concurrency"].as_i64().unwrap(),
                    "rolling" => l["capacity"].as_i64().unwrap(),
                    _ => l["at"]["capacity"].as_f64().unwrap().floor() as i64,
                };
                let simulated = sim["limits"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|s| s["name"] == name)
                    .unwrap()["lowest_available"]
                    .as_i64()
                    .unwrap();
                assert_eq!(capacity, simulated, "{manifest} {name} at {t}");
            }
        }
    }
}

#[test]
fn svg_draws_each_limits_capacity_over_the_horizon() {
    let tmp = tempfile::tempdir().unwrap();
    let m = root().join("fixtures/simulate/gateway.yaml");
    ok(
        tmp.path(),
        &[
            "limits",
            "explain",
            "-f",
            m.to_str().unwrap(),
            "-e",
            "acme",
            "-r",
            "gpt-4",
            "--at",
            "2027-03-12T00:00:00Z",
            "--until",
            "7d",
            "--svg",
            "week.svg",
        ],
    );
    let svg = std::fs::read_to_string(tmp.path().join("week.svg")).unwrap();
    assert!(svg.starts_with("<svg"));
    for text in [
        "acme on gpt-4: effective capacity from 2027-03-12T00:00:00Z to 2027-03-19T00:00:00Z",
        "rpm: 600/min",
        "tpd: 150,000,000 quota",
        "in_flight: 60 concurrent",
        "times in America/New_York",
        "quota reset",
    ] {
        assert!(svg.contains(text), "missing {text}");
    }
}

#[test]
fn bad_input_is_refused_with_the_reason() {
    let r = root();
    // `limits explain -f MANIFEST -e u -r gpt-4 EXTRA...` in the repository.
    let explain = |manifest: &str, resource: &str, extra: &[&str]| {
        let mut a = vec![
            "limits", "explain", "-f", manifest, "-e", "u", "-r", resource,
        ];
        a.extend_from_slice(extra);
        run_in(&r, &a)
    };
    let q = "fixtures/manifests/valid/quickstart.yaml";
    // (manifest, resource, extra arguments, exit code, in stderr)
    let cases: [(&str, &str, &[&str], i32, &str); 6] = [
        (
            "fixtures/manifests/valid/reference-example-2.yaml",
            "claude",
            &[],
            1,
            "no limits apply to entity 'u' on resource 'claude'",
        ),
        (
            q,
            "gpt-4",
            &[
                "--at",
                "2026-12-01T00:00:00Z",
                "--until",
                "2026-11-01T00:00:00Z",
            ],
            2,
            "is not after --at",
        ),
        (q, "gpt-4", &["--until", "soon"], 2, "--until"),
        (q, "gpt-4", &["--until", "400d"], 2, "--until"),
        (
            q,
            "gpt-4",
            &["--cost", "rpx=5"],
            0,
            "Warning: --cost for rpx: no limit of that name applies",
        ),
        (
            "fixtures/manifests/invalid/row-12-capacity-zero.yaml",
            "gpt-4",
            &[],
            1,
            "capacity must be positive",
        ),
    ];
    for (manifest, resource, extra, want_code, want_err) in cases {
        let (code, _, err) = explain(manifest, resource, extra);
        assert_eq!(code, want_code, "{manifest} {resource} {extra:?}: {err}");
        assert!(err.contains(want_err), "{extra:?}: {err}");
    }
    // "Now" is ZAEL_NOW when set.
    let out = common::outcome(
        common::zae_limiter()
            .current_dir(&r)
            .env("ZAEL_NOW", "2026-12-07T15:00:00Z")
            .args([
                "limits", "explain", "-f", q, "-e", "u", "-r", "gpt-4", "--format", "json",
            ])
            .output()
            .unwrap(),
    );
    let v: Value = serde_json::from_str(&out.1).unwrap();
    assert_eq!(v["at"], "2026-12-07T15:00:00Z");
    assert_eq!(v["until"], "2026-12-14T15:00:00Z");
    assert_eq!(v["version"], 1);
}
