//! Collects located diagnostics for one file while the checks run, so every
//! problem is reported (not just the first) with the source line it is on.

use std::cell::OnceCell;

use super::diagnostic::{Diagnostic, Severity};
use super::yaml::{Node, Pos};

pub(crate) struct Reporter<'a> {
    file: &'a str,
    text: &'a str,
    /// The text split into lines, on the first diagnostic (a valid manifest
    /// never needs it).
    lines: OnceCell<Vec<&'a str>>,
    pub diags: Vec<Diagnostic>,
}

impl<'a> Reporter<'a> {
    pub fn new(file: &'a str, text: &'a str) -> Self {
        Reporter {
            file,
            text,
            lines: OnceCell::new(),
            diags: Vec::new(),
        }
    }

    pub fn source_line(&self, line: usize) -> &str {
        let lines = self.lines.get_or_init(|| {
            self.text
                .split('\n')
                .map(|l| l.strip_suffix('\r').unwrap_or(l))
                .collect()
        });
        line.checked_sub(1)
            .and_then(|i| lines.get(i))
            .copied()
            .unwrap_or("")
    }

    /// Report at an explicit position and width.
    #[allow(clippy::too_many_arguments)]
    pub fn at(
        &mut self,
        severity: Severity,
        line: usize,
        column: usize,
        width: usize,
        path: &str,
        message: impl Into<String>,
        help: Option<String>,
    ) {
        let source_line = self.source_line(line).to_string();
        self.diags.push(Diagnostic {
            severity,
            file: self.file.to_string(),
            line: line.max(1),
            column: column.max(1),
            width: width.max(1),
            source_line,
            path: path.to_string(),
            message: message.into(),
            help,
            code: None,
        });
    }

    /// A lint's warning over a span of one line (`width` characters from
    /// `column`), with its code.
    #[allow(clippy::too_many_arguments)]
    pub fn lint(
        &mut self,
        code: &'static str,
        line: usize,
        column: usize,
        width: usize,
        path: &str,
        message: impl Into<String>,
        help: String,
    ) {
        self.at(
            Severity::Warning,
            line,
            column,
            width,
            path,
            message,
            Some(help),
        );
        if let Some(d) = self.diags.last_mut() {
            d.code = Some(code);
        }
    }

    /// Report over a span; a span running past its line is underlined to the line's end.
    pub fn span(
        &mut self,
        severity: Severity,
        start: Pos,
        end: Pos,
        path: &str,
        message: impl Into<String>,
        help: Option<String>,
    ) {
        let width = if end.line == start.line && end.col > start.col {
            end.col - start.col
        } else {
            let len = self.source_line(start.line).chars().count();
            (len + 1).saturating_sub(start.col).max(1)
        };
        self.at(severity, start.line, start.col, width, path, message, help);
    }

    pub fn error(
        &mut self,
        node: &Node,
        path: &str,
        message: impl Into<String>,
        help: impl Into<Option<String>>,
    ) {
        let help = help.into();
        self.span(Severity::Error, node.start, node.end, path, message, help);
    }

    pub fn warning(
        &mut self,
        node: &Node,
        path: &str,
        message: impl Into<String>,
        help: impl Into<Option<String>>,
    ) {
        let help = help.into();
        self.span(Severity::Warning, node.start, node.end, path, message, help);
    }

    /// Whether an error was reported after the first `before` diagnostics.
    pub fn errors_since(&self, before: usize) -> bool {
        self.diags[before.min(self.diags.len())..]
            .iter()
            .any(|d| d.severity == Severity::Error)
    }

    pub fn has_errors(&self) -> bool {
        self.diags.iter().any(|d| d.severity == Severity::Error)
    }

    /// Diagnostics in reading order (line, then column), stable for equal positions.
    pub fn finish(mut self) -> Vec<Diagnostic> {
        self.diags.sort_by_key(|d| (d.line, d.column));
        self.diags
    }
}
