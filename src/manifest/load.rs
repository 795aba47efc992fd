//! Reading a manifest: file → text (size-bounded) → YAML tree → validated model.

use std::path::Path;

use super::convert::convert;
use super::diagnostic::{Diagnostic, Severity};
use super::report::Reporter;
use super::yaml::{self, MAX_FILE_BYTES};
use super::Loaded;

/// Read, parse and validate one file. `Err` holds every error and warning found.
pub fn load_file(path: &Path) -> Result<Loaded, Vec<Diagnostic>> {
    read_file(path, false)
}

/// [`load_file`], then the lints ([`super::lint`]) over a valid manifest:
/// their warnings join the loader's, in reading order.
pub fn check_file(path: &Path) -> Result<Loaded, Vec<Diagnostic>> {
    read_file(path, true)
}

/// The path that names standard input (`-f -`, `limits validate -`).
pub const STDIN_PATH: &str = "-";

/// How diagnostics name the manifest at `path`: the path, or `<stdin>` for
/// [`STDIN_PATH`].
pub fn label(path: &Path) -> String {
    if path.as_os_str() == STDIN_PATH {
        "<stdin>".to_string()
    } else {
        path.display().to_string()
    }
}

fn read_file(path: &Path, lints: bool) -> Result<Loaded, Vec<Diagnostic>> {
    let label = label(path);
    let text = read_bounded(path).map_err(|(message, help)| {
        vec![Diagnostic {
            severity: Severity::Error,
            file: label.clone(),
            line: 1,
            column: 1,
            width: 1,
            source_line: String::new(),
            path: String::new(),
            message,
            help,
            code: None,
        }]
    })?;
    load_text(&label, &text, lints)
}

fn read_bounded(path: &Path) -> Result<String, (String, Option<String>)> {
    let stdin = path.as_os_str() == STDIN_PATH;
    let what = if stdin { "standard input" } else { "the file" };
    let too_big = || {
        (
            format!(
                "{what} is larger than {}; manifests that large are refused",
                crate::input::bytes(MAX_FILE_BYTES)
            ),
            Some("split the manifest or check that this is the right file".to_string()),
        )
    };
    let bounded = |e| match e {
        crate::input::BoundedError::TooLarge { .. } => too_big(),
        crate::input::BoundedError::Io(e) => (format!("cannot read {what}: {e}"), None),
    };
    let bytes = if stdin {
        crate::input::read_path(path, MAX_FILE_BYTES).map_err(bounded)?
    } else {
        let file =
            std::fs::File::open(path).map_err(|e| (format!("cannot read the file: {e}"), None))?;
        let mut bytes = Vec::new();
        if let Ok(meta) = file.metadata() {
            if meta.is_dir() {
                return Err((
                    "this is a directory, not a manifest file".to_string(),
                    Some("pass the YAML files inside it, e.g. `dir/*.yaml`".to_string()),
                ));
            }
            if meta.len() > MAX_FILE_BYTES {
                return Err(too_big());
            }
            // One allocation for the usual file whose size does not change while read.
            bytes.reserve_exact(usize::try_from(meta.len()).unwrap_or(0).saturating_add(1));
        }
        crate::input::read_to_end(file, MAX_FILE_BYTES, &mut bytes).map_err(bounded)?;
        bytes
    };
    String::from_utf8(bytes).map_err(|e| {
        (
            format!(
                "{what} is not UTF-8 text (invalid byte at offset {})",
                e.utf8_error().valid_up_to()
            ),
            Some("save the manifest as UTF-8".to_string()),
        )
    })
}

/// Parse and validate manifest text; `file_label` names it in diagnostics.
pub fn load_str(file_label: &str, text: &str) -> Result<Loaded, Vec<Diagnostic>> {
    load_text(file_label, text, false)
}

/// [`load_str`] plus the lints, as [`check_file`].
pub fn check_str(file_label: &str, text: &str) -> Result<Loaded, Vec<Diagnostic>> {
    load_text(file_label, text, true)
}

fn load_text(file_label: &str, text: &str, lints: bool) -> Result<Loaded, Vec<Diagnostic>> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut r = Reporter::new(file_label, text);
    match yaml::parse(text) {
        Err(problem) => {
            let unquoted = unquoted_crons(&mut r, text);
            if !unquoted.contains(&problem.start.line) {
                r.span(
                    Severity::Error,
                    problem.start,
                    problem.end,
                    "",
                    problem.message,
                    problem.help,
                );
            }
            Err(r.finish())
        }
        Ok(doc) => {
            for p in &doc.problems {
                r.span(
                    Severity::Error,
                    p.start,
                    p.end,
                    "",
                    p.message.clone(),
                    p.help.clone(),
                );
            }
            let manifest = convert(&mut r, doc.root.as_ref());
            if let (true, Some(m), Some(root)) = (lints, &manifest, doc.root.as_ref()) {
                if !r.has_errors() {
                    super::lint::run(&mut r, root, m);
                }
            }
            drop_in_background(doc, text.len());
            match manifest {
                Some(m) if !r.has_errors() => Ok(Loaded {
                    manifest: m,
                    warnings: r.finish(),
                }),
                _ => Err(r.finish()),
            }
        }
    }
}

/// Texts from this size on have their YAML tree freed on a helper thread.
const BACKGROUND_DROP_BYTES: usize = 1 << 20;

/// Freeing the tree of a large manifest (millions of small allocations) is a
/// tenth of its validation time, and nothing waits for it: a helper thread
/// frees it while the caller reports. A process that exits first leaves the
/// rest to the OS.
fn drop_in_background(doc: yaml::Document, text_len: usize) {
    if text_len >= BACKGROUND_DROP_BYTES {
        // Should no thread start, the closure, and the tree with it, drops here.
        let _ = std::thread::Builder::new().spawn(move || drop(doc));
    }
}

/// `cron: */5 * * * *` without quotes is a YAML error (`*` starts an alias), and
/// the parser's message does not say so. Find every such line and explain it.
/// Returns the lines reported.
fn unquoted_crons(r: &mut Reporter, text: &str) -> Vec<usize> {
    let mut lines = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        let body = trimmed
            .strip_prefix("- ")
            .map(str::trim_start)
            .unwrap_or(trimmed);
        let Some(rest) = body.strip_prefix("cron:") else {
            continue;
        };
        let value = rest.trim_start();
        if !(value.starts_with('*') || value.starts_with('&')) {
            continue;
        }
        let value = value.split(" #").next().unwrap_or(value).trim_end();
        let col = line.chars().count() - rest.trim_start().chars().count() + 1;
        r.at(
            Severity::Error,
            i + 1,
            col,
            value.chars().count(),
            "",
            "this cron pattern must be quoted: in YAML an unquoted `*` at the start of a value is an alias",
            Some(format!("write cron: \"{value}\"")),
        );
        lines.push(i + 1);
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unquoted_cron_is_explained_on_every_line() {
        let text = "namespace: d\nresources:\n  r:\n    limits:\n      rpm:\n        capacity: 1\n        schedule:\n          - cron: */5 * * * *\n            scale: 2\n          - cron: * 9-17 * * *\n            scale: 2\n";
        let diags = load_str("m.yaml", text).unwrap_err();
        assert_eq!(diags.len(), 2, "{diags:#?}");
        assert_eq!((diags[0].line, diags[0].column), (8, 19));
        assert_eq!(
            diags[0].help.as_deref(),
            Some("write cron: \"*/5 * * * *\"")
        );
        assert_eq!(diags[1].line, 10);
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]
        /// Any text gives a manifest or located diagnostics, never a panic.
        #[test]
        fn arbitrary_text_never_panics(text in "[a-z_:\\- \\n\\[\\]{},&*!'\"#0-9.]{0,200}") {
            let prefixed = format!("namespace: d\nresources:\n  r:\n    limits:\n      rpm:\n        {text}");
            for t in [text.as_str(), prefixed.as_str()] {
                if let Err(diags) = load_str("p.yaml", t) {
                    for d in diags {
                        proptest::prop_assert!(d.line >= 1 && d.column >= 1 && d.width >= 1);
                    }
                }
            }
        }
    }

    #[test]
    fn missing_file_is_one_clear_error() {
        let diags = load_file(Path::new("/nonexistent/x.yaml")).unwrap_err();
        assert_eq!(diags.len(), 1);
        assert!(diags[0].message.starts_with("cannot read the file"));
    }
}
