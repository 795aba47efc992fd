//! A located problem in a manifest. Everything needed to render it (file, position,
//! the source line) travels with it, so any command can print it the same way.
//!
//! CONTRACT: used by `limits validate` and by every command that loads a manifest.

/// Error or warning.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Severity {
    Error,
    Warning,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    pub severity: Severity,
    /// The file as the user named it.
    pub file: String,
    /// 1-based line of the offending value (or of its key when the value is missing).
    pub line: usize,
    /// 1-based column (in characters).
    pub column: usize,
    /// Width of the caret underline in characters (at least 1).
    pub width: usize,
    /// The full source line the position is on, without its newline.
    pub source_line: String,
    /// Manifest path, e.g. `resources.gpt-4.limits.rpm.schedule[0].cron`.
    pub path: String,
    /// What is wrong.
    pub message: String,
    /// How to fix it.
    pub help: Option<String>,
    /// A lint's stable code (`ZL101`…; docs/manifest.md, "Lints"); `None`
    /// for the loader's own errors and warnings.
    pub code: Option<&'static str>,
}
