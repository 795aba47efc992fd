//! `-n NAME` follows DynamoDB's table-name rule on both stores: an empty
//! name, a control character or more than 255 characters is refused before
//! anything is opened or written.

mod common;

use common::{outcome, zae_limiter};

#[test]
fn absurd_table_names_are_refused_on_the_local_store() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store.sqlite");
    let manifest = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/fixtures/manifests/valid/quickstart.yaml"
    );
    let long = "t".repeat(300);
    for name in ["", "a\nb", "ab", long.as_str()] {
        for (args, code) in [
            (vec!["limits", "apply", "-f", manifest], 1),
            (vec!["limits", "plan", "-f", manifest], 1),
            (vec!["namespace", "register", "other"], 1),
            (vec!["system", "get-defaults"], 1),
            (vec!["cooldown", "record", "s", "--retry-after", "60"], 1),
            // check never says "go" on a store it cannot open.
            (vec!["cooldown", "check", "s"], 76),
        ] {
            let (got, _, err) = outcome(
                zae_limiter()
                    .args(&args)
                    .args(["-n", name])
                    .arg(common::local_flag(&store))
                    .output()
                    .unwrap(),
            );
            assert_eq!(got, code, "{args:?} -n {name:?}: {err}");
            assert!(
                err.contains("invalid table name") && err.contains("3 to 255 characters"),
                "{args:?} -n {name:?}: {err}"
            );
        }
    }
    assert!(!store.exists(), "nothing may be written");
}
