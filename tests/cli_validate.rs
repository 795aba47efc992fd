//! `zae-limiter limits validate` through the real binary: golden diagnostics for
//! every fixture, exit codes, output formats, and the JSON Schema against the
//! fixtures.
//!
//! Goldens: `fixtures/manifests/{valid,invalid}/NAME.expected.txt` is the exact
//! stdout of `zae-limiter limits validate NAME.yaml` run in that directory.
//! `ZAEL_BLESS=1 cargo test --test cli_validate` rewrites them.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_zae-limiter")
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn validate_in(dir: &Path, args: &[&str]) -> Output {
    Command::new(bin())
        .current_dir(dir)
        .arg("limits")
        .arg("validate")
        .args(args)
        .output()
        .expect("run zae-limiter")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn fixtures(kind: &str) -> Vec<PathBuf> {
    let dir = root().join("fixtures/manifests").join(kind);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("fixture dir")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    files
}

/// Compare `actual` with the golden beside `fixture`; rewrite it under ZAEL_BLESS=1.
/// Returns a readable diff on mismatch.
fn check_golden(fixture: &Path, actual: &str) -> Option<String> {
    let golden = fixture.with_extension("expected.txt");
    if std::env::var_os("ZAEL_BLESS").is_some() {
        std::fs::write(&golden, actual).expect("write golden");
        return None;
    }
    let expected = std::fs::read_to_string(&golden).unwrap_or_default();
    if expected == actual {
        return None;
    }
    let diff = similar::TextDiff::from_lines(expected.as_str(), actual);
    let mut out = format!(
        "--- {} (expected)\n+++ actual\n",
        golden.file_name().unwrap_or_default().to_string_lossy()
    );
    for change in diff.iter_all_changes() {
        let sign = match change.tag() {
            similar::ChangeTag::Delete => "-",
            similar::ChangeTag::Insert => "+",
            similar::ChangeTag::Equal => " ",
        };
        out.push_str(&format!("{sign}{change}"));
    }
    Some(out)
}

fn run_goldens(kind: &str, want_code: i32) {
    let files = fixtures(kind);
    assert!(!files.is_empty(), "no fixtures in {kind}");
    let mut failures = Vec::new();
    for f in &files {
        let dir = f.parent().expect("dir");
        let name = f.file_name().expect("name").to_string_lossy().into_owned();
        let out = validate_in(dir, &[&name]);
        let code = out.status.code();
        if code != Some(want_code) {
            failures.push(format!(
                "{name}: exit {code:?}, want {want_code}\n{}{}",
                stdout(&out),
                String::from_utf8_lossy(&out.stderr)
            ));
            continue;
        }
        if let Some(diff) = check_golden(f, &stdout(&out)) {
            failures.push(diff);
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} {kind} fixtures differ (ZAEL_BLESS=1 rewrites the goldens):\n\n{}",
        failures.len(),
        files.len(),
        failures.join("\n")
    );
}

#[test]
fn every_invalid_fixture_fails_with_its_golden_diagnostics() {
    run_goldens("invalid", 1);
}

#[test]
fn every_valid_fixture_passes_with_its_golden_output() {
    run_goldens("valid", 0);
}

#[test]
fn every_reference_bad_input_row_has_a_fixture() {
    let names: Vec<String> = fixtures("invalid")
        .iter()
        .map(|p| {
            p.file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    for row in 1..=88 {
        let prefix = format!("row-{row:02}-");
        assert!(
            names.iter().any(|n| n.starts_with(&prefix)),
            "no fixture for §2.6 row {row}"
        );
    }
}

#[test]
fn invalid_fixture_errors_are_located_on_real_lines() {
    // Every diagnostic points at a line of its file, and its caret lies on that line.
    for f in fixtures("invalid") {
        let text = std::fs::read_to_string(&f).expect("read");
        let lines = text.lines().count().max(1);
        let out = validate_in(
            f.parent().expect("dir"),
            &[
                "--format",
                "json",
                &f.file_name().unwrap_or_default().to_string_lossy(),
            ],
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
        let diags = v["files"][0]["diagnostics"]
            .as_array()
            .expect("diagnostics");
        assert!(!diags.is_empty(), "{}: no diagnostics", f.display());
        for d in diags {
            let line = d["line"].as_u64().expect("line") as usize;
            assert!(line >= 1 && line <= lines, "{}: line {line}", f.display());
            assert!(d["column"].as_u64().expect("col") >= 1);
            assert!(
                d["message"].as_str().is_some_and(|m| !m.is_empty()),
                "{}: empty message",
                f.display()
            );
        }
    }
}

#[test]
fn valid_manifest_is_silent_with_exit_0() {
    let out = validate_in(&root(), &["fixtures/manifests/valid/quickstart.yaml"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(stdout(&out), "");
    assert!(out.stderr.is_empty());
}

#[test]
fn all_files_are_checked_in_one_run() {
    let out = validate_in(
        &root().join("fixtures/manifests"),
        &[
            "valid/quickstart.yaml",
            "-f",
            "invalid/row-12-capacity-zero.yaml",
            "invalid/row-61-tz-unknown.yaml",
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    let s = stdout(&out);
    assert!(s.contains("invalid/row-12-capacity-zero.yaml:"), "{s}");
    assert!(s.contains("invalid/row-61-tz-unknown.yaml:"), "{s}");
    assert!(!s.contains("quickstart"), "{s}");
    assert!(
        s.ends_with("3 files checked: 2 invalid, 2 errors, 0 warnings\n"),
        "{s}"
    );
}

#[test]
fn no_files_is_a_usage_error() {
    let out = validate_in(&root(), &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no manifest given"));
}

#[test]
fn unreadable_file_is_invalid_and_others_are_still_checked() {
    let out = validate_in(
        &root(),
        &[
            "does-not-exist.yaml",
            "fixtures/manifests/valid/quickstart.yaml",
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    let s = stdout(&out);
    assert!(
        s.starts_with("does-not-exist.yaml:1:1: error: cannot read the file:"),
        "{s}"
    );
}

#[test]
fn json_format_is_one_document_with_one_based_positions() {
    let out = validate_in(
        &root().join("fixtures/manifests"),
        &[
            "--format",
            "json",
            "valid/quickstart.yaml",
            "invalid/row-12-capacity-zero.yaml",
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
    let files = v["files"].as_array().expect("files");
    assert_eq!(files.len(), 2);
    assert_eq!(files[0]["path"], "valid/quickstart.yaml");
    assert_eq!(files[0]["valid"], true);
    assert_eq!(files[0]["diagnostics"], serde_json::json!([]));
    assert_eq!(files[1]["valid"], false);
    let d = &files[1]["diagnostics"][0];
    assert_eq!(d["severity"], "error");
    assert_eq!(d["path"], "resources.r.limits.rpm.capacity");
    assert_eq!(d["message"], "capacity must be positive, got 0");
    // `        capacity: 0` on line 10 (after the 4-line header): the value is in column 19.
    assert_eq!(d["line"], 10);
    assert_eq!(d["column"], 19);
    assert!(d["help"].is_string());
}

#[test]
fn github_format_prints_workflow_annotations() {
    let out = validate_in(
        &root().join("fixtures/manifests/invalid"),
        &["--format", "github", "row-12-capacity-zero.yaml"],
    );
    assert_eq!(out.status.code(), Some(1));
    let s = stdout(&out);
    assert!(
        s.starts_with("::error file=row-12-capacity-zero.yaml,line=10,col=19,"),
        "{s}"
    );
    assert!(s.contains("::capacity must be positive, got 0"), "{s}");
}

#[test]
fn warnings_alone_keep_exit_0() {
    let dir = root().join("fixtures/manifests/valid");
    let out = validate_in(&dir, &["--format", "github", "cascade-warning.yaml"]);
    assert_eq!(out.status.code(), Some(0));
    let s = stdout(&out);
    assert!(s.starts_with("::warning file=cascade-warning.yaml,"), "{s}");
    assert!(
        s.contains("resources.gpt-4 sets cascade: true, but no entity in this manifest has its own limits for 'gpt-4'"),
        "{s}"
    );
}

#[test]
fn cron_caret_points_inside_the_quoted_pattern() {
    let out = validate_in(
        &root().join("fixtures/manifests/invalid"),
        &["--format", "json", "row-59-cron-hour-backwards.yaml"],
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let d = &v["files"][0]["diagnostics"][0];
    // `          - cron: "* 17-9 * * *"`: the quote is column 19, `17-9` starts at 22.
    assert_eq!(d["column"], 22, "{d}");
    assert_eq!(d["end_column"], 26, "{d}");
}
