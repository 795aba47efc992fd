//! Repository generators, each with a check mode that the tests run so the
//! committed output can never drift from its source.
//!
//! `cargo run -p xtask -- man [--check]`: one man page per command in `man/`.
//! `cargo run -p xtask -- schema [--check]`: `schemas/limits.schema.json`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let check = args.iter().any(|a| a == "--check");
    match args.first().map(String::as_str) {
        Some("man") => report(xtask::man::run(&repo_root().join("man"), check)),
        Some("schema") => report(xtask::schema::run(&repo_root(), check)),
        _ => {
            eprintln!("usage: cargo run -p xtask -- man|schema [--check]");
            ExitCode::from(2)
        }
    }
}

fn report(result: Result<(), String>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{e}");
            ExitCode::FAILURE
        }
    }
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}
