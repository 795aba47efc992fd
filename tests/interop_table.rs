//! `table create` against a real DynamoDB API (moto): the layout equals the
//! reference's own create path, and the Python library accepts the table.

mod common;
mod interop_support;

use interop_support::{describe, interop, ours_and_reference};
use serde_json::Value;

#[test]
fn our_table_has_the_reference_layout_and_python_uses_it() {
    let Some((ours, theirs)) = ours_and_reference("tbl") else {
        return;
    };
    let out = ours.create_table();
    assert!(out.contains("created"), "{out}");
    let ns_line = out
        .lines()
        .find(|l| l.starts_with("namespace 'default' registered: "))
        .unwrap_or_else(|| panic!("no namespace line in:\n{out}"));
    let ns_id = ns_line.rsplit(' ').next().unwrap_or_default().to_string();

    let (t, o) = (theirs.table.as_str(), ours.table.as_str());
    let answers = ours.reference_many(&[
        &["create-table", t],
        &["describe", t],
        &["describe", o],
        &["nsid", o, "default"],
        &["set-fixture", o, "default"],
        &["get-limits", o, "default", "user-1", "gpt-4"],
    ]);
    let (b, a) = (&answers[1], &answers[2]);
    assert_eq!(a, b, "table layouts differ");
    assert_eq!(a["ttl"], serde_json::json!(["ENABLED", "ttl"]));
    assert_eq!(a["lsi"].as_array().map(Vec::len), Some(5));

    // The Python client connects read-only (needs the version record and the
    // namespace) and finds the id we registered; it writes and reads limits.
    assert_eq!(answers[3]["namespace_id"], Value::String(ns_id));
    let got = &answers[5];
    assert_eq!(got.as_array().map(Vec::len), Some(3), "{got}");

    // A second create changes nothing and says so.
    let before = ours.dump();
    let again = ours.create_table();
    assert!(
        again.contains("already exists") && again.contains("already registered"),
        "{again}"
    );
    assert_eq!(ours.dump(), before);
}

#[test]
fn unreachable_endpoints_and_bad_names_fail_in_one_line() {
    let Some(it) = interop("bad") else { return };
    let out = it.ours(&[
        "table",
        "create",
        "-n",
        "bad_name",
        "--endpoint-url",
        &it.endpoint,
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("invalid table name"));

    let out = it.ours(&[
        "table",
        "create",
        "-n",
        &it.table,
        "--endpoint-url",
        "http://127.0.0.1:9",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(
        err.starts_with("Error: cannot reach DynamoDB at http://127.0.0.1:9"),
        "{err}"
    );
}

/// The interop harness leaves nothing in the temp directory: a test's files
/// go with it, and `scripts/moto-server`'s log goes when its PID is killed.
#[test]
fn interop_files_and_moto_logs_are_removed() {
    let Some(it) = interop("clean") else { return };
    let file = it.write_file("m.yaml", "namespace: default\n");
    let dir = file.parent().unwrap().to_path_buf();
    assert!(dir.exists());
    drop(it);
    assert!(!dir.exists(), "{} left behind", dir.display());

    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let tmp = tempfile::tempdir().unwrap();
    // `output()` also proves the server holds none of the script's output.
    let out = std::process::Command::new(root.join("scripts/moto-server"))
        .env("TMPDIR", tmp.path())
        .stderr(std::process::Stdio::inherit())
        .output()
        .unwrap();
    assert!(out.status.success());
    let line = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let (pid, port) = line.split_once(' ').unwrap();
    let log = tmp.path().join(format!("zae-moto-{port}.log"));
    assert!(log.exists(), "moto writes its log while it runs");
    std::process::Command::new("kill")
        .arg(pid)
        .status()
        .unwrap();
    for _ in 0..50 {
        if !log.exists() {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    panic!("{} left behind after kill {pid}", log.display());
}

/// A missing DynamoDB table is named with the command that creates it, by
/// the read commands, a plan, and a cooldown check (which then refuses, 76).
#[test]
fn a_missing_table_names_table_create() {
    let Some(it) = interop("missing") else { return };
    let manifest = it.write_file(
        "m.yaml",
        "namespace: default\nsystem:\n  limits:\n    rpm:\n      capacity: 10\n",
    );
    let m = manifest.to_string_lossy().to_string();
    let hint = format!("Create it with `zae-limiter table create -n {}", it.table);
    for (args, code) in [
        (vec!["limits", "plan", "-f", &m], 1),
        (vec!["entity", "get-limits", "u"], 1),
        (vec!["cooldown", "check", "p/a"], 76),
        // The runtime reads through batch reads on the SDK's runtime: the
        // stack's status is asked after it (asking inside panicked).
        (vec!["acquire", "u", "-r", "gpt-4"], 1),
        (
            vec![
                "reservation",
                "release",
                "z1.dQ.Z3B0LTQ.AAAAAAAAAAAAAAAAAAAAAA",
            ],
            1,
        ),
    ] {
        let mut all = args.clone();
        all.extend(["-n", &it.table]);
        let out = it.ours(&all);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{args:?}: {err}");
        assert!(err.contains(&hint), "{args:?}: {err}");
    }
    // The command reaches the same region and endpoint by itself: run as
    // printed, through `sh`, without the AWS region and endpoint variables.
    let out = it.ours(&["entity", "get-limits", "u", "-n", &it.table]);
    let err = String::from_utf8_lossy(&out.stderr);
    let line = common::between(&err, "Create it with `", '`');
    // Our binary's environment (credentials, no profile), minus where.
    let env: Vec<_> = it
        .ours_cmd(&[])
        .get_envs()
        .filter_map(|(k, v)| Some((k.to_owned(), v?.to_owned())))
        .collect();
    let path = format!(
        "{}:{}",
        bin_dir(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(line)
        .envs(env)
        .env_remove("AWS_REGION")
        .env_remove("AWS_DEFAULT_REGION")
        .env_remove("AWS_ENDPOINT_URL")
        .env_remove("ZAEL_TEST_DYNAMODB_ENDPOINT")
        .env("PATH", path)
        .output()
        .unwrap();
    assert!(out.status.success(), "{line}: {}", describe(&out));
    it.ours_ok(&["entity", "get-limits", "u", "-n", &it.table]);
}

/// The directory of our binary, for a command line that names it.
fn bin_dir() -> String {
    std::path::Path::new(env!("CARGO_BIN_EXE_zae-limiter"))
        .parent()
        .unwrap()
        .display()
        .to_string()
}
