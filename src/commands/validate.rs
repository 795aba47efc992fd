//! `zae-limiter limits validate [-f] FILE... [--format text|json|github]`:
//! check manifests on the client only (no network, no store) and report every
//! problem in every file in one run.
//!
//! Exit status: 0 when every file is valid (warnings alone keep 0, unless
//! `--deny-warnings`), 1 when any file is invalid or unreadable (or warns,
//! with `--deny-warnings`), 2 when no file is given. Valid files are linted
//! too ([`crate::manifest::lint`]).

use crate::cli::args::{ValidateArgs, ValidateFormat};
use crate::cli::output::FileArg;
use crate::cli::{output, CliError};
use crate::exit_codes;
use crate::manifest::render::{render_github, render_json, FileResult};
use crate::manifest::{self, check_file, render_text, Diagnostic, Severity};

pub fn run(args: ValidateArgs) -> Result<i32, CliError> {
    let mut files = args.file_flags;
    files.extend(args.files);
    let named: Vec<FileArg<'_>> = files
        .iter()
        .map(|f| FileArg::new("FILE", "a manifest", f.as_path()))
        .collect();
    output::one_stdin(&named)?;
    if files.is_empty() {
        return Err(CliError::Usage(
            "no manifest given: pass one or more files, e.g. `zae-limiter limits validate limits.yaml`"
                .into(),
        ));
    }

    let results: Vec<(String, Vec<Diagnostic>)> = files
        .iter()
        .map(|path| {
            let label = manifest::label(path);
            let diags = match check_file(path) {
                Ok(loaded) => loaded.warnings,
                Err(diags) => diags,
            };
            (label, diags)
        })
        .collect();

    let count = |sev: Severity| {
        results
            .iter()
            .flat_map(|(_, d)| d)
            .filter(|d| d.severity == sev)
            .count()
    };
    let errors = count(Severity::Error);
    let warnings = count(Severity::Warning);
    let invalid = results
        .iter()
        .filter(|(_, d)| d.iter().any(|d| d.severity == Severity::Error))
        .count();

    let json_text = match args.format {
        ValidateFormat::Json => {
            let files: Vec<FileResult<'_>> = results
                .iter()
                .map(|(path, diags)| FileResult {
                    path,
                    diagnostics: diags,
                })
                .collect();
            let doc = render_json(&files);
            Some(
                serde_json::to_string_pretty(&doc)
                    .map_err(|e| CliError::Failed(format!("cannot render JSON: {e}")))?,
            )
        }
        _ => None,
    };
    output::stream(|out| {
        match args.format {
            ValidateFormat::Text => {
                for (_, diags) in &results {
                    out.write_all(render_text(diags).as_bytes())?;
                }
                if errors + warnings > 0 {
                    let files_word = if results.len() == 1 { "file" } else { "files" };
                    writeln!(
                        out,
                        "{} {files_word} checked: {invalid} invalid, {errors} {}, {warnings} {}",
                        results.len(),
                        plural(errors, "error", "errors"),
                        plural(warnings, "warning", "warnings"),
                    )?;
                }
            }
            ValidateFormat::Json => {
                writeln!(out, "{}", json_text.as_deref().unwrap_or_default())?;
            }
            ValidateFormat::Github => {
                for (_, diags) in &results {
                    out.write_all(render_github(diags).as_bytes())?;
                }
            }
        }
        Ok(())
    })?;
    Ok(if invalid > 0 || (args.deny_warnings && warnings > 0) {
        exit_codes::FAILURE
    } else {
        exit_codes::OK
    })
}

fn plural<'a>(n: usize, one: &'a str, many: &'a str) -> &'a str {
    if n == 1 {
        one
    } else {
        many
    }
}
