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

/// `limits validate --format FORMAT NAME` run in the directory of fixture `f`
/// (NAME its file name), so the output names the file as a user would.
fn validate_fixture(f: &Path, format: &str) -> Output {
    let name = f.file_name().expect("a file").to_string_lossy();
    validate_in(f.parent().expect("dir"), &["--format", format, &name])
}

/// [`validate_fixture`] on GitHub: it exits `code`, its first annotation
/// starts with `starts` and the output has `has` (the message or its help).
fn assert_github(f: &Path, code: i32, starts: &str, has: &str) {
    let s = stdout_after(&validate_fixture(f, "github"), code);
    assert!(s.starts_with(starts), "{s}");
    assert!(s.contains(has), "{s}");
}

/// [`validate_fixture`] in JSON: the exit code and the file's diagnostics.
fn json_diagnostics(f: &Path) -> (Option<i32>, Vec<serde_json::Value>) {
    let out = validate_fixture(f, "json");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let diags = v["files"][0]["diagnostics"]
        .as_array()
        .expect("diagnostics");
    (out.status.code(), diags.clone())
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The stdout of `out`, which must have exited `code`.
fn stdout_after(out: &Output, code: i32) -> String {
    let s = stdout(out);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "{s}{err}");
    s
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
fn every_lint_fixture_warns_with_its_golden_output() {
    run_goldens("lint", 0);
}

/// Each code has a fixture `ZLnnn-*.yaml` that warns with that code and no
/// other, and fails under `--deny-warnings`; the `allowed*.yaml` fixtures
/// set every trap again, silenced with `lint: {allow: [...]}`, and say nothing.
#[test]
fn each_lint_warns_in_its_fixture_and_is_silenced_when_marked() {
    let dir = root().join("fixtures/manifests/lint");
    let files = fixtures("lint");
    for lint in zae_limiter::manifest::lint::LINTS {
        let f = files
            .iter()
            .find(|f| {
                f.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with(lint.code))
            })
            .unwrap_or_else(|| panic!("no fixture for {}", lint.code));
        let name = f.file_name().unwrap().to_string_lossy().into_owned();
        let (code, diags) = json_diagnostics(f);
        assert_eq!(code, Some(0), "{name}");
        assert!(!diags.is_empty(), "{name} warns");
        for d in &diags {
            assert_eq!(d["code"], lint.code, "{name}: {d}");
            assert_eq!(d["severity"], "warning", "{name}: {d}");
        }
        let denied = validate_in(&dir, &["--deny-warnings", &name]);
        assert_eq!(denied.status.code(), Some(1), "{name} --deny-warnings");
    }
    for name in ["allowed.yaml", "allowed-zl104.yaml"] {
        let out = validate_in(&dir, &["--deny-warnings", name]);
        assert_eq!(out.status.code(), Some(0), "{name}: {}", stdout(&out));
        assert_eq!(stdout(&out), "", "{name} is silent");
    }
    // The valid fixtures have none of the traps: no lint fires on them.
    for f in fixtures("valid") {
        for d in json_diagnostics(&f).1 {
            assert!(d["code"].is_null(), "{}: {d}", f.display());
        }
    }
}

#[test]
fn lints_are_annotations_with_their_code_on_github() {
    let dir = root().join("fixtures/manifests/lint");
    assert_github(
        &dir.join("ZL101-fixed-minute-window.yaml"),
        0,
        "::warning file=ZL101-fixed-minute-window.yaml,line=10,col=20,endColumn=21,title=limits validate (ZL101)::",
        "help: write `* 9-17 * * MON-FRI`",
    );
    let out = validate_in(
        &dir,
        &[
            "--format",
            "github",
            "--deny-warnings",
            "ZL101-fixed-minute-window.yaml",
        ],
    );
    assert_eq!(out.status.code(), Some(1));
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
            "no fixture for row {row} of the reference's bad-input table"
        );
    }
}

#[test]
fn invalid_fixture_errors_are_located_on_real_lines() {
    // Every diagnostic points at a line of its file, and its caret lies on that line.
    for f in fixtures("invalid") {
        let text = std::fs::read_to_string(&f).expect("read");
        let lines = text.lines().count().max(1);
        let (_, diags) = json_diagnostics(&f);
        assert!(!diags.is_empty(), "{}: no diagnostics", f.display());
        for d in &diags {
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
    assert_eq!(stdout_after(&out, 0), "");
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
    let s = stdout_after(&out, 1);
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
    let s = stdout_after(&out, 1);
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
    let v: serde_json::Value =
        serde_json::from_str(&stdout_after(&out, 1)).expect("one JSON document");
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
    let invalid = root().join("fixtures/manifests/invalid");
    assert_github(
        &invalid.join("row-12-capacity-zero.yaml"),
        1,
        "::error file=row-12-capacity-zero.yaml,line=10,col=19,",
        "::capacity must be positive, got 0",
    );
}

#[test]
fn warnings_alone_keep_exit_0() {
    let valid = root().join("fixtures/manifests/valid");
    assert_github(
        &valid.join("cascade-warning.yaml"),
        0,
        "::warning file=cascade-warning.yaml,",
        "resources.gpt-4 sets cascade: true, but no entity in this manifest has its own limits for 'gpt-4'",
    );
}

#[test]
fn cron_caret_points_inside_the_quoted_pattern() {
    let invalid = root().join("fixtures/manifests/invalid");
    let (_, diags) = json_diagnostics(&invalid.join("row-59-cron-hour-backwards.yaml"));
    let d = &diags[0];
    // `          - cron: "* 17-9 * * *"`: the quote is column 19, `17-9` starts at 22.
    assert_eq!(d["column"], 22, "{d}");
    assert_eq!(d["end_column"], 26, "{d}");
}

/// The reference's venv python, or `None` (skip) unless ZAEL_REQUIRE_INTEROP=1.
fn python() -> Option<String> {
    match std::env::var("ZAEL_PYTHON") {
        Ok(p) if !p.is_empty() => Some(p),
        _ => {
            assert!(
                std::env::var_os("ZAEL_REQUIRE_INTEROP").is_none(),
                "ZAEL_REQUIRE_INTEROP is set but ZAEL_PYTHON is not"
            );
            eprintln!("skipped: ZAEL_PYTHON is not set");
            None
        }
    }
}

fn run_python(py: &str, script: &str, stdin: &str) -> String {
    use std::io::Write;
    let mut child = Command::new(py)
        .arg("-c")
        .arg(script)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start python");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(stdin.as_bytes())
        .expect("write stdin");
    let out = child.wait_with_output().expect("python");
    assert!(
        out.status.success(),
        "python failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn normalised_form_and_applied_hash_match_the_reference() {
    let Some(py) = python() else { return };
    // Rolling windows and concurrency limits (issue #7) are not in 0.17's
    // manifest format: its parser fails on them, so such fixtures are left out.
    // The lint fixtures are in: their `lint: {allow: [...]}` keys must leave
    // the reference's reading (and hash) unchanged.
    let files: Vec<PathBuf> = fixtures("valid")
        .into_iter()
        .chain(fixtures("lint"))
        .filter(|f| {
            let m = zae_limiter::manifest::load_file(f).expect("valid fixture loads");
            let limits = m
                .manifest
                .system
                .iter()
                .flat_map(|s| s.limits.values())
                .chain(
                    m.manifest
                        .resources
                        .values()
                        .flat_map(|l| l.limits.values()),
                )
                .chain(
                    m.manifest
                        .entities
                        .values()
                        .flat_map(|rs| rs.values().flat_map(|l| l.limits.values())),
                )
                .collect::<Vec<_>>();
            limits
                .iter()
                .all(|l| l.kind == zae_limiter::manifest::model::LimitKind::Bucket)
        })
        .collect();
    let docs: serde_json::Map<String, serde_json::Value> = files
        .iter()
        .map(|f| {
            (
                f.display().to_string(),
                serde_json::Value::String(std::fs::read_to_string(f).expect("read")),
            )
        })
        .collect();
    // The reference's own parser and normalisation (public behaviour only).
    let script = r#"
import hashlib, json, sys
from zae_limiter_provisioner.manifest import LimitsManifest
out = {}
for name, text in json.load(sys.stdin).items():
    d = LimitsManifest.from_yaml(text).to_dict()
    s = json.dumps(d, sort_keys=True)
    out[name] = {"dumps": s, "hash": "sha256:" + hashlib.sha256(s.encode()).hexdigest()}
print(json.dumps(out))
"#;
    let reference: serde_json::Value = serde_json::from_str(&run_python(
        &py,
        script,
        &serde_json::Value::Object(docs).to_string(),
    ))
    .expect("reference output");
    for f in &files {
        let loaded = zae_limiter::manifest::load_file(f).expect("valid fixture loads");
        let ours = zae_limiter::manifest::normalize::python_dumps_sorted(
            &zae_limiter::manifest::normalised_json(&loaded.manifest),
        );
        let want = &reference[f.display().to_string()];
        assert_eq!(
            ours,
            want["dumps"].as_str().expect("dumps"),
            "{}",
            f.display()
        );
        assert_eq!(
            zae_limiter::manifest::applied_hash(&loaded.manifest),
            want["hash"].as_str().expect("hash"),
            "{}",
            f.display()
        );
    }
}

/// A YAML document as JSON, read with the tool's own YAML 1.2 reader.
fn yaml_to_json(node: &zae_limiter::manifest::yaml::Node) -> serde_json::Value {
    use zae_limiter::manifest::yaml::{Kind, Value as Y};
    match &node.kind {
        Kind::Scalar(s) => match s.value {
            Y::Null => serde_json::Value::Null,
            Y::Bool(b) => serde_json::Value::Bool(b),
            Y::Int(i) => i64::try_from(i)
                .map(serde_json::Value::from)
                .unwrap_or_else(|_| serde_json::Value::from(i as f64)),
            Y::HugeInt => serde_json::Value::from(f64::MAX),
            // JSON has no NaN or infinity; a string fails every number rule, as it should.
            Y::Float(f) => serde_json::Number::from_f64(f)
                .map(serde_json::Value::Number)
                .unwrap_or_else(|| serde_json::Value::String(s.text.clone())),
            Y::Str => serde_json::Value::String(s.text.clone()),
        },
        Kind::Seq(items) => serde_json::Value::Array(items.iter().map(yaml_to_json).collect()),
        Kind::Map(entries) => serde_json::Value::Object(
            entries
                .iter()
                .map(|(k, v)| {
                    let key = k.scalar().map(|s| s.text.clone()).unwrap_or_default();
                    (key, yaml_to_json(v))
                })
                .collect(),
        ),
    }
}

#[test]
fn json_schema_accepts_valid_fixtures_and_rejects_schema_level_invalid_ones() {
    let Some(py) = python() else { return };
    let schema: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root().join("schemas/limits.schema.json")).expect("schema"),
    )
    .expect("schema is JSON");
    // name → (document, expected to pass the schema)
    let mut cases = serde_json::Map::new();
    let mut expect = std::collections::BTreeMap::new();
    for kind in ["valid", "invalid", "lint"] {
        for f in fixtures(kind) {
            let text = std::fs::read_to_string(&f).expect("read");
            let marker = text
                .lines()
                .find_map(|l| l.strip_prefix("# schema: "))
                .map(str::trim);
            let passes = match (kind, marker) {
                ("valid" | "lint", _) => true,
                (_, Some("rejects")) => false,
                (_, Some(m)) if m.starts_with("accepts") => true,
                (_, Some("n/a")) => continue,
                _ => panic!("{}: no `# schema: rejects|accepts|n/a` line", f.display()),
            };
            let doc = zae_limiter::manifest::yaml::parse(&text)
                .unwrap_or_else(|e| panic!("{}: {}", f.display(), e.message));
            let json = doc.root.as_ref().map(yaml_to_json).unwrap_or_default();
            let name = f
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned();
            cases.insert(name.clone(), json);
            expect.insert(name, passes);
        }
    }
    let script = r#"
import json, sys
from jsonschema import Draft202012Validator
data = json.load(sys.stdin)
Draft202012Validator.check_schema(data["schema"])
v = Draft202012Validator(data["schema"])
print(json.dumps({n: [e.message for e in v.iter_errors(d)] for n, d in data["docs"].items()}))
"#;
    let input = serde_json::json!({"schema": schema, "docs": cases}).to_string();
    let result: serde_json::Value =
        serde_json::from_str(&run_python(&py, script, &input)).expect("python output");
    let mut wrong = Vec::new();
    for (name, passes) in &expect {
        let errors = result[name].as_array().expect("errors");
        if errors.is_empty() != *passes {
            wrong.push(format!(
                "{name}: expected the schema to {}, errors: {errors:?}",
                if *passes { "accept it" } else { "reject it" }
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// `zae-limiter ARGS` with `stdin` on standard input: (code, stdout, stderr).
fn with_stdin(args: &[&str], stdin: &[u8]) -> (i32, String, String) {
    use std::io::Write;
    let mut child = Command::new(bin())
        .env_remove("ZAEL_LOCAL_STORE")
        .env_remove("ZAEL_STACK")
        .current_dir(root())
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    // A command that refuses before reading closes its end: ignore the error.
    let _ = child.stdin.take().expect("stdin").write_all(stdin);
    let out = child.wait_with_output().expect("wait");
    (
        out.status.code().unwrap_or(-1),
        stdout(&out),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `-` (as FILE or `-f -`) reads the manifest from standard input, named
/// `<stdin>` in every format; the commands that take `-f` read it too; `-`
/// twice is a usage error.
#[test]
fn a_manifest_is_read_from_standard_input() {
    let bad = b"namespace: default\nsystem:\n  limits:\n    rpm: {capacity: x}\n";
    for args in [
        &["limits", "validate", "-"][..],
        &["limits", "validate", "-f", "-"],
    ] {
        let (code, out, err) = with_stdin(args, bad);
        assert_eq!(code, 1, "{args:?}: {out}{err}");
        assert!(out.starts_with("<stdin>:4:21: error: "), "{args:?}: {out}");
    }
    let (code, out, _) = with_stdin(&["limits", "validate", "--format", "json", "-"], bad);
    assert_eq!(code, 1);
    let v: serde_json::Value = serde_json::from_str(&out).expect("json");
    assert_eq!(v["files"][0]["path"], "<stdin>");
    let (_, out, _) = with_stdin(&["limits", "validate", "--format", "github", "-"], bad);
    assert!(out.starts_with("::error file=<stdin>,line=4,"), "{out}");

    let quickstart =
        std::fs::read(root().join("fixtures/manifests/valid/quickstart.yaml")).unwrap();
    let (code, out, err) = with_stdin(&["limits", "validate", "-"], &quickstart);
    assert_eq!((code, out.as_str()), (0, ""), "{err}");
    let (code, out, err) = with_stdin(
        &["limits", "cfn-template", "-n", "demo", "-f", "-"],
        &quickstart,
    );
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("AWSTemplateFormatVersion"), "{out}");
    let (code, out, err) = with_stdin(
        &[
            "limits",
            "explain",
            "-f",
            "-",
            "-e",
            "user-premium",
            "-r",
            "gpt-4",
            "--at",
            "2026-12-07T13:00:00Z",
        ],
        &quickstart,
    );
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("user-premium on gpt-4"), "{out}");

    // Standard input is read once.
    for args in [
        &["limits", "validate", "-", "-"][..],
        &["limits", "validate", "-f", "-", "-"],
        &[
            "limits", "simulate", "-f", "-", "--trace", "-", "-e", "a", "-r", "b",
        ],
    ] {
        let (code, out, err) = with_stdin(args, &quickstart);
        assert_eq!((code, out.as_str()), (2, ""), "{args:?}: {err}");
        assert!(err.contains("can be read only once"), "{args:?}: {err}");
    }
}
