//! The reference's recorded answers, shared by the oracle tests.

use serde_json::Value;

/// The text of `fixtures/oracle/NAME` (made by the scripts in `scripts/oracle/`).
pub fn read(name: &str) -> String {
    let path = format!("{}/../fixtures/oracle/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("fixtures/oracle/{name}: {e}"))
}

/// The cases of section `name` of a vectors file; fails unless there are at
/// least `min`, so a regenerated fixture that lost cases is noticed.
pub fn section<'a>(v: &'a Value, name: &str, min: usize) -> &'a Vec<Value> {
    let cases = v[name]
        .as_array()
        .unwrap_or_else(|| panic!("section {name} is an array"));
    assert!(
        cases.len() >= min,
        "section {name} has {} cases, want at least {min}",
        cases.len()
    );
    cases
}
