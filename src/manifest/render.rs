//! Diagnostics as text (for people), JSON (for tools) and GitHub workflow
//! annotations (for pull requests). Rendering happens once, at the edge.

use super::diagnostic::{Diagnostic, Severity};

/// `file:line:col: error: message`, the source line with a caret underline, the help.
pub fn render_text(diags: &[Diagnostic]) -> String {
    let mut out = String::new();
    for d in diags {
        render_one(&mut out, d);
    }
    out
}

fn render_one(out: &mut String, d: &Diagnostic) {
    out.push_str(&format!(
        "{}:{}:{}: {}: {}\n",
        d.file,
        d.line,
        d.column,
        severity_label(d),
        d.message
    ));
    let num = d.line.to_string();
    let pad = " ".repeat(num.len());
    if !d.source_line.is_empty() {
        let (line, column, width) = snippet(&d.source_line, d.column, d.width.max(1));
        out.push_str(&format!("{pad} |\n"));
        out.push_str(&format!("{num} | {line}\n"));
        // Keep tabs so the caret lines up under the same characters.
        let lead: String = line
            .chars()
            .take(column.saturating_sub(1))
            .map(|c| if c == '\t' { '\t' } else { ' ' })
            .collect();
        let lead_len = lead.chars().count();
        let missing = column.saturating_sub(1).saturating_sub(lead_len);
        let caret = if d.severity == Severity::Error {
            '^'
        } else {
            '-'
        };
        let label = if d.path.is_empty() {
            String::new()
        } else {
            format!(" {}", d.path)
        };
        out.push_str(&format!(
            "{pad} | {lead}{}{}{label}\n",
            " ".repeat(missing),
            caret.to_string().repeat(width)
        ));
    } else if !d.path.is_empty() {
        out.push_str(&format!("{pad} = at {}\n", d.path));
    }
    if let Some(help) = &d.help {
        out.push_str(&format!("{pad} = help: {help}\n"));
    }
    out.push('\n');
}

/// `error`, `warning`, or a lint's `warning[ZL101]`.
fn severity_label(d: &Diagnostic) -> String {
    match d.code {
        Some(code) => format!("{}[{code}]", d.severity.as_str()),
        None => d.severity.as_str().to_string(),
    }
}

/// Characters of a source line shown on each side of the caret: a 5 MB line
/// is shown as the part around the error, not echoed whole.
const SNIPPET_CONTEXT: usize = 60;
/// Lines up to this many characters are shown whole.
const SNIPPET_MAX: usize = 160;

/// The part of `line` to show, and the caret's column and width in it: the
/// whole line when it is short, else a window around the caret with `…` where
/// it was cut. Control characters (a NUL byte…) are shown as their visible
/// symbols (␀), tabs kept.
fn snippet(line: &str, column: usize, width: usize) -> (String, usize, usize) {
    let chars: Vec<char> = line.chars().collect();
    let visible = |c: char| match c {
        '\t' => c,
        c if (c as u32) < 0x20 => char::from_u32(0x2400 + c as u32).unwrap_or('?'),
        '\u{7f}' => '\u{2421}',
        c => c,
    };
    if chars.len() <= SNIPPET_MAX {
        return (chars.into_iter().map(visible).collect(), column, width);
    }
    let at = column.saturating_sub(1).min(chars.len());
    let width = width.min(SNIPPET_CONTEXT);
    let start = at.saturating_sub(SNIPPET_CONTEXT);
    let end = (at + width + SNIPPET_CONTEXT).min(chars.len());
    let mut shown = String::new();
    if start > 0 {
        shown.push('…');
    }
    shown.extend(chars[start..end].iter().copied().map(visible));
    if end < chars.len() {
        shown.push('…');
    }
    let column = at - start + 1 + usize::from(start > 0);
    (shown, column, width.min(end.saturating_sub(at)).max(1))
}

/// One file's result for the JSON document.
pub struct FileResult<'a> {
    pub path: &'a str,
    pub diagnostics: &'a [Diagnostic],
}

impl FileResult<'_> {
    pub fn valid(&self) -> bool {
        !self
            .diagnostics
            .iter()
            .any(|d| d.severity == Severity::Error)
    }
}

/// `{"version": 1, "files": [{"path", "valid", "diagnostics": [{"severity", "code", "line",
/// "column", "end_column", "path", "message", "help"}]}]}` with 1-based lines
/// and columns; `code` is a lint's code, or null.
pub fn render_json(files: &[FileResult<'_>]) -> serde_json::Value {
    let files: Vec<serde_json::Value> = files
        .iter()
        .map(|f| {
            let diags: Vec<serde_json::Value> = f
                .diagnostics
                .iter()
                .map(|d| {
                    serde_json::json!({
                        "severity": d.severity.as_str(),
                        "code": d.code,
                        "line": d.line,
                        "column": d.column,
                        "end_column": d.column + d.width.max(1),
                        "path": d.path,
                        "message": d.message,
                        "help": d.help,
                    })
                })
                .collect();
            serde_json::json!({
                "path": f.path,
                "valid": f.valid(),
                "diagnostics": diags,
            })
        })
        .collect();
    serde_json::json!({ "version": 1, "files": files })
}

/// GitHub Actions workflow commands: `::error file=…,line=…,col=…::message`
/// (a lint's title names its code: `limits validate (ZL101)`).
pub fn render_github(diags: &[Diagnostic]) -> String {
    let mut out = String::new();
    for d in diags {
        let mut msg = d.message.clone();
        if !d.path.is_empty() {
            msg.push_str(&format!(" (at {})", d.path));
        }
        if let Some(h) = &d.help {
            msg.push_str(&format!("\nhelp: {h}"));
        }
        out.push_str(&format!(
            "::{} file={},line={},col={},endColumn={},title={}::{}\n",
            d.severity.as_str(),
            escape_property(&d.file),
            d.line,
            d.column,
            d.column + d.width.max(1),
            escape_property(&match d.code {
                Some(code) => format!("limits validate ({code})"),
                None => "limits validate".to_string(),
            }),
            escape_data(&msg)
        ));
    }
    out
}

fn escape_data(s: &str) -> String {
    s.replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

fn escape_property(s: &str) -> String {
    escape_data(s).replace(':', "%3A").replace(',', "%2C")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn diag() -> Diagnostic {
        Diagnostic {
            severity: Severity::Error,
            file: "a,b.yaml".into(),
            line: 3,
            column: 19,
            width: 1,
            source_line: "        capacity: 0".into(),
            path: "resources.r.limits.rpm.capacity".into(),
            message: "capacity must be positive, got 0".into(),
            help: Some("100% sure".into()),
            code: None,
        }
    }

    #[test]
    fn long_lines_are_shown_around_the_caret_only() {
        let line = format!("key: {}{}", "a".repeat(5_000_000), "BAD");
        let (shown, column, width) = snippet(&line, 5_000_006, 3);
        assert!(
            shown.chars().count() <= 2 * SNIPPET_CONTEXT + 5,
            "{}",
            shown.len()
        );
        assert!(shown.starts_with('…') && shown.ends_with("BAD"));
        let under: String = shown.chars().skip(column - 1).take(width).collect();
        assert_eq!(under, "BAD");
        // Short lines are whole; control characters become visible symbols.
        assert_eq!(
            snippet("a\u{0}b\tc", 2, 1),
            ("a\u{2400}b\tc".to_string(), 2, 1)
        );
    }

    #[test]
    fn text_has_location_snippet_caret_and_help() {
        let t = render_text(&[diag()]);
        assert!(t.starts_with("a,b.yaml:3:19: error: capacity must be positive, got 0\n"));
        assert!(t.contains("3 |         capacity: 0\n"));
        assert!(
            t.contains("  |                   ^ resources.r.limits.rpm.capacity\n"),
            "{t}"
        );
        assert!(t.contains("= help: 100% sure"));
    }

    #[test]
    fn github_escapes_properties_and_data() {
        let g = render_github(&[diag()]);
        assert!(
            g.starts_with("::error file=a%2Cb.yaml,line=3,col=19,"),
            "{g}"
        );
        assert!(g.contains("%0Ahelp: 100%25 sure"), "{g}");
    }

    #[test]
    fn json_marks_files_with_errors_invalid() {
        let d = [diag()];
        let v = render_json(&[FileResult {
            path: "a.yaml",
            diagnostics: &d,
        }]);
        assert_eq!(v["files"][0]["valid"], false);
        assert_eq!(v["files"][0]["diagnostics"][0]["line"], 3);
        assert_eq!(v["files"][0]["diagnostics"][0]["column"], 19);
    }
}
