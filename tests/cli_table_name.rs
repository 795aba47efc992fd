//! `-n NAME` follows DynamoDB's table-name rule on both stores: an empty
//! name, a control character or more than 255 characters is refused before
//! anything is opened or written. `table create` also holds the name to the
//! stack rule (3 to 55 letters, digits and '-', a letter first).

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

/// A table `table create` makes is also a CloudFormation stack's name: a
/// letter, then letters, digits or '-', 3 to 55 in all. One or two letters
/// pass the stack pattern but not DynamoDB, so they are refused too.
#[test]
fn table_create_holds_names_to_the_stack_rule() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store.sqlite");
    for name in ["a", "ab", "a_b_c", "a.b.c", "1abc", &"t".repeat(56)] {
        let (got, _, err) = outcome(
            zae_limiter()
                .args(["table", "create", "-n", name])
                .arg(common::local_flag(&store))
                .output()
                .unwrap(),
        );
        assert_eq!(got, 2, "-n {name:?}: {err}");
        assert!(err.contains("3 to 55 characters"), "-n {name:?}: {err}");
    }
    assert!(!store.exists(), "nothing may be written");
    let (got, _, err) = outcome(
        zae_limiter()
            .args(["table", "create", "-n", "abc"])
            .arg(common::local_flag(&store))
            .output()
            .unwrap(),
    );
    assert_eq!(got, 0, "{err}");
}
