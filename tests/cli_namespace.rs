//! `namespace register` / `namespace list` through the binary on a local store.

mod common;

use std::path::Path;

use zae_limiter::items::{keys, version};
use zae_limiter::store::local::LocalStore;
use zae_limiter::store::Store;

fn run(store: &Path, args: &[&str]) -> (i32, String, String) {
    common::run_local(store, "demo", args)
}

fn registered_id(line: &str) -> String {
    line.rsplit("(id: ")
        .next()
        .and_then(|s| s.strip_suffix(")\n"))
        .unwrap_or_else(|| panic!("no id in {line:?}"))
        .to_string()
}

#[test]
fn register_initialises_a_new_store_and_is_idempotent() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nested/dir/local.sqlite");
    let (code, out, err) = run(&path, &["namespace", "register", "prod"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.starts_with("Registered namespace 'prod' (id: "),
        "{out}"
    );
    let id = registered_id(&out);
    assert_eq!(id.len(), 11);
    assert!(path.exists(), "the store and its directory are created");

    let (code, out, _) = run(&path, &["namespace", "register", "prod"]);
    assert_eq!(code, 0);
    assert_eq!(
        out,
        format!("Namespace 'prod' already registered (id: {id})\n")
    );

    // The table is usable by the Python client: version record and `default`.
    let store = LocalStore::open(&path, "demo").unwrap();
    let rec = version::read(&store).unwrap().expect("version record");
    assert_eq!(rec.schema_version, "0.10.0");
    assert!(store
        .get(&keys::namespace_key("default"), true)
        .unwrap()
        .is_some());
    assert!(store.get(&keys::nsid_key(&id), true).unwrap().is_some());

    let (code, out, _) = run(&path, &["namespace", "list"]);
    assert_eq!(code, 0);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 3, "{out}");
    assert!(lines[0].starts_with("NAME "), "{out}");
    assert!(lines[1].starts_with("default "), "{out}");
    assert!(lines[2].starts_with(&format!("prod     {id}  ")), "{out}");

    let (code, out, _) = run(&path, &["namespace", "list", "--format", "json"]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["version"], 1);
    let names = common::column(&v["namespaces"], "name");
    assert_eq!(names, ["default", "prod"]);
    assert_eq!(v["namespaces"][1]["id"], id.as_str());
    assert_eq!(v["namespaces"][1]["status"], "active");
}

#[test]
fn bad_names_and_missing_stores_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("local.sqlite");
    common::assert_refused(
        run(&path, &["namespace", "register", "a/b"]),
        "Error: invalid namespace name 'a/b'",
    );
    assert!(!path.exists(), "nothing written for an invalid name");
    let (code, _, err) = run(&path, &["namespace", "list"]);
    assert_eq!(code, 1);
    let want = format!("Error: local store {} does not exist", path.display());
    assert!(err.starts_with(&want), "{err}");
}

#[test]
fn two_processes_registering_at_once_agree() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("local.sqlite");
    let children: Vec<_> = (0..4)
        .map(|_| {
            common::zae_limiter()
                .args(["namespace", "register", "shared", "-n", "demo"])
                .arg(common::local_flag(&path))
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut ids = Vec::new();
    for child in children {
        let out = child.wait_with_output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        ids.push(registered_id(&stdout));
    }
    assert!(ids.windows(2).all(|w| w[0] == w[1]), "{ids:?}");
    let store = LocalStore::open(&path, "demo").unwrap();
    // One id per name: exactly two reverse records (default + shared).
    assert_eq!(
        store
            .query(keys::TABLE_SYSTEM_PK, keys::NSID_SK_PREFIX, true)
            .unwrap()
            .len(),
        2
    );
}
