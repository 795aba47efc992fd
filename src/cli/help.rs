//! Examples in `--help` are printed verbatim, never reflowed.
//!
//! Commands write their examples in `after_help`, under a line `Examples:` (or
//! `Example:`), one command per indented line, long ones continued with a
//! trailing ` \`. clap wraps `after_help` at the terminal width, which splits a
//! long example between a flag and its value, or before its `\` (pasted, the
//! halves run as two commands). [`verbatim_examples`] therefore moves each
//! command's examples block out of `after_help` into its help template, whose
//! literal text clap prints as it is; the rest of `after_help` (prose, exit
//! status) is still wrapped. The man page generator (`xtask`) splits the same way
//! ([`split`]) and prints the examples in no-fill mode.

use clap::Command;

/// clap's default help template (`DEFAULT_TEMPLATE` in clap_builder), which
/// every command here uses: they all have arguments.
const DEFAULT_TEMPLATE: &str = "\
{before-help}{about-with-newline}
{usage-heading} {usage}

{all-args}{after-help}";

/// An `after_help` text cut in two: everything but the examples, and the
/// examples block (its heading and its indented lines).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Split {
    pub prose: String,
    pub examples: Option<String>,
}

/// Finds the examples block: a line `Examples:` or `Example:` and the indented
/// lines that follow it, up to the first blank or unindented line.
pub fn split(after_help: &str) -> Split {
    let lines: Vec<&str> = after_help.lines().collect();
    let Some(start) = lines
        .iter()
        .position(|l| matches!(l.trim_end(), "Examples:" | "Example:"))
    else {
        return Split {
            prose: after_help.to_string(),
            examples: None,
        };
    };
    let end = lines[start + 1..]
        .iter()
        .position(|l| l.trim().is_empty() || !l.starts_with(' '))
        .map_or(lines.len(), |n| start + 1 + n);
    let mut rest: Vec<&str> = lines[..start].to_vec();
    rest.extend_from_slice(&lines[end..]);
    let prose = rest.join("\n").replace("\n\n\n", "\n\n").trim().to_string();
    Split {
        prose,
        examples: Some(lines[start..end].join("\n")),
    }
}

/// The example command lines of an examples block (or of a whole help text):
/// each indented line after the heading, with ` \` continuations joined into one
/// command, indentation removed. Trailing `# comments` are kept (the shell
/// ignores them).
pub fn examples_in(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_block = false;
    let mut current: Option<String> = None;
    for line in text.lines() {
        if matches!(line.trim_end(), "Examples:" | "Example:") {
            in_block = true;
            continue;
        }
        if !in_block {
            continue;
        }
        if line.trim().is_empty() || !line.starts_with(' ') {
            in_block = false;
            out.extend(current.take());
            continue;
        }
        let piece = line.trim();
        let (piece, continued) = match piece.strip_suffix('\\') {
            Some(p) => (p.trim_end(), true),
            None => (piece, false),
        };
        let joined = match current.take() {
            Some(mut c) => {
                c.push(' ');
                c.push_str(piece);
                c
            }
            None => piece.to_string(),
        };
        if continued {
            current = Some(joined);
        } else {
            out.push(joined);
        }
    }
    out.extend(current);
    out
}

/// Applies [`split`] to `cmd` and every subcommand: the prose stays in
/// `after_help`, the examples go verbatim into the help template.
pub fn verbatim_examples(cmd: Command) -> Command {
    let mut cmd = cmd;
    if let Some(after) = cmd.get_after_help().map(|s| s.to_string()) {
        let Split { prose, examples } = split(&after);
        if let Some(examples) = examples {
            cmd = cmd.help_template(template(&examples));
            cmd = if prose.is_empty() {
                cmd.after_help(None::<&str>)
            } else {
                cmd.after_help(paragraphs(&prose))
            };
        }
    }
    let names: Vec<String> = cmd
        .get_subcommands()
        .map(|s| s.get_name().to_string())
        .collect();
    for name in names {
        cmd = cmd.mut_subcommand(name, verbatim_examples);
    }
    cmd
}

/// Joins the lines of each prose paragraph, so clap wraps a paragraph as a
/// whole instead of each source line on its own (which leaves a stub of a line
/// wherever a source line is longer than the terminal). Indented lines (samples,
/// tables) keep their own lines.
fn paragraphs(prose: &str) -> String {
    let mut out = String::new();
    let mut joinable = false;
    for line in prose.lines() {
        let plain = !line.trim().is_empty() && !line.starts_with(' ');
        if plain && joinable {
            out.push(' ');
        } else if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(line);
        joinable = plain;
    }
    out
}

/// clap's template followed by the examples as literal text. Literal `{` starts
/// a template tag, so the examples must not contain a `{` that is not closed
/// before the next one (a test renders every command's help to make sure).
fn template(examples: &str) -> String {
    format!("{DEFAULT_TEMPLATE}\n\n{examples}")
}

/// The widest example line (indent included): it fits an 80-column terminal,
/// and the man page, which indents by 7 instead of 2, too.
pub const MAX_EXAMPLE_WIDTH: usize = 74;

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "\
Some prose that clap may wrap.

Examples:
  zae-limiter a --long-flag value \\
      --other 1   # comment
  zae-limiter b

Exit status: 0 ok.";

    #[test]
    fn split_moves_the_examples_block_out_of_the_prose() {
        let s = split(TEXT);
        assert_eq!(
            s.prose,
            "Some prose that clap may wrap.\n\nExit status: 0 ok."
        );
        assert_eq!(
            s.examples.as_deref(),
            Some("Examples:\n  zae-limiter a --long-flag value \\\n      --other 1   # comment\n  zae-limiter b")
        );
        assert_eq!(split("no examples here").examples, None);
        let only = split("Example:\n  zae-limiter x");
        assert_eq!(only.prose, "");
        assert_eq!(only.examples.as_deref(), Some("Example:\n  zae-limiter x"));
    }

    #[test]
    fn prose_paragraphs_become_one_line_each() {
        assert_eq!(
            paragraphs("one\ntwo\n\nthree\n  sample 1\n  sample 2\nfour"),
            "one two\n\nthree\n  sample 1\n  sample 2\nfour"
        );
    }

    #[test]
    fn examples_join_continuations() {
        assert_eq!(
            examples_in(TEXT),
            [
                "zae-limiter a --long-flag value --other 1   # comment",
                "zae-limiter b"
            ]
        );
    }

    /// Every command's examples come out of `--help` line for line, at any
    /// width, and nothing of them is left in the wrapped part.
    #[test]
    fn help_prints_every_example_line_verbatim_at_any_width() {
        fn walk(raw: &Command, built: &Command, path: &str, checked: &mut usize) {
            if let Some(after) = raw.get_after_help().map(|s| s.to_string()) {
                if let Some(block) = split(&after).examples {
                    for width in [40, 80, 100, 200] {
                        let help = built
                            .clone()
                            .term_width(width)
                            .render_long_help()
                            .to_string();
                        assert!(
                            help.contains(&block),
                            "{path} at {width} columns:\n{help}\n--- expected verbatim:\n{block}"
                        );
                        let wrapped = built.get_after_help().map(|s| s.to_string());
                        assert!(
                            !wrapped
                                .unwrap_or_default()
                                .contains(block.lines().nth(1).unwrap()),
                            "{path}: an example was left in after_help"
                        );
                    }
                    // 74 columns: the man page replaces the two-space indent
                    // by its own seven, and must still fit in 80.
                    for line in block.lines() {
                        assert!(
                            line.chars().count() <= MAX_EXAMPLE_WIDTH,
                            "{path}: example line wider than {MAX_EXAMPLE_WIDTH} columns (continue it with \\):\n{line}"
                        );
                    }
                    *checked += 1;
                }
            }
            for sub in raw.get_subcommands() {
                let b = built.find_subcommand(sub.get_name()).expect("same tree");
                walk(sub, b, &format!("{path} {}", sub.get_name()), checked);
            }
        }
        let raw = <crate::cli::Cli as clap::CommandFactory>::command();
        let mut built = crate::cli::command();
        built.build();
        let mut checked = 0;
        walk(&raw, &built, "zae-limiter", &mut checked);
        assert!(checked > 10, "only {checked} commands have examples");
    }
}
