//! Shell completion scripts, generated from the command tree.
//!
//! clap_complete's bash generator names the current command `zae__limiter…` but
//! writes its case labels from the hyphenated binary name as
//! `zae__subcmd__limiter…`, so no label ever matches and nothing past the first
//! word completes (`zae-limiter limits v<TAB>` offered nothing). The labels are
//! rewritten to the names the script sets; `tests/completions.rs` drives the
//! scripts in real bash, zsh and fish.

use clap_complete::Shell;

/// The binary name completions are registered for.
const BIN: &str = "zae-limiter";

/// The completion script for `shell`.
pub fn script(shell: Shell) -> Vec<u8> {
    let mut cmd = super::command();
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut cmd, BIN, &mut out);
    match shell {
        Shell::Bash => fix_bash_case_labels(&String::from_utf8_lossy(&out)).into_bytes(),
        _ => out,
    }
}

/// Rewrites clap_complete's case labels (`zae__subcmd__limiter…`) to the
/// command names its script assigns (`zae__limiter…`).
fn fix_bash_case_labels(script: &str) -> String {
    let wrong = BIN.replace('-', "__subcmd__");
    let right = BIN.replace('-', "__");
    script.replace(&wrong, &right)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every command name the bash script assigns has a case label, and no
    /// label is left that nothing assigns.
    #[test]
    fn bash_case_labels_match_the_assigned_command_names() {
        let text = String::from_utf8(script(Shell::Bash)).unwrap();
        let assigned: std::collections::BTreeSet<&str> = text
            .lines()
            .filter_map(|l| l.trim().strip_prefix("cmd=\""))
            .filter_map(|l| l.strip_suffix('"'))
            .filter(|c| !c.is_empty())
            .collect();
        let labels: std::collections::BTreeSet<&str> = text
            .lines()
            .filter(|l| l.starts_with("        zae") && l.ends_with(')'))
            .map(|l| l.trim().trim_end_matches(')'))
            .collect();
        assert!(assigned.contains("zae__limiter__subcmd__limits__subcmd__validate"));
        assert_eq!(assigned, labels);
    }
}
