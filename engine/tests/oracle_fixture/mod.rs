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

/// Fails with every disagreement collected by a section's test, one a line.
#[allow(dead_code)] // not every oracle test collects disagreements
pub fn assert_agrees(failures: &[String]) {
    assert!(
        failures.is_empty(),
        "{} disagreements:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Runs `check` on every case of section `name` (at least `min` of them); it
/// notes each disagreement in the list it is given, and the test then fails
/// with all of them at once rather than at the first.
#[allow(dead_code)] // not every oracle test collects disagreements
pub fn each_case(
    v: &Value,
    name: &str,
    min: usize,
    mut check: impl FnMut(&Value, &mut Vec<String>),
) {
    let mut failures = Vec::new();
    for c in section(v, name, min) {
        check(c, &mut failures);
    }
    assert_agrees(&failures);
}
