//! Helpers shared by the CLI tests: the real binary, isolated from the
//! caller's environment, and its outcome as (exit code, stdout, stderr).
#![allow(dead_code)] // every test binary uses some of them

use std::process::{Command, Output};

/// The `zae-limiter` binary with the variables that would redirect it to
/// another store or table removed.
pub fn zae_limiter() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_zae-limiter"));
    cmd.env_remove("ZAEL_STACK")
        .env_remove("ZAEL_LOCAL_STORE")
        .env_remove("AWS_ENDPOINT_URL");
    cmd
}

/// Exit code, stdout and stderr, for a failed assertion's message.
pub fn describe(out: &Output) -> String {
    format!(
        "status {:?}\n--- stdout\n{}\n--- stderr\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Exit code (-1 when killed by a signal), stdout and stderr as text.
pub fn outcome(out: Output) -> (i32, String, String) {
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The string `key` of every element of the JSON array `v` (`names` of a
/// listing, `kinds` of a report), in order.
pub fn column<'a>(v: &'a serde_json::Value, key: &str) -> Vec<&'a str> {
    v.as_array()
        .expect("an array")
        .iter()
        .map(|e| e[key].as_str().expect("a string"))
        .collect()
}

/// `--local=PATH`: the store path must be attached, or it would be read as the
/// command's next argument.
pub fn local_flag(path: &std::path::Path) -> std::ffi::OsString {
    let mut flag = std::ffi::OsString::from("--local=");
    flag.push(path);
    flag
}

/// The binary run in `dir` with `args` (and no `ZAEL_NOW`): (code, stdout, stderr).
#[allow(dead_code)]
pub fn run_in(dir: &std::path::Path, args: &[&str]) -> (i32, String, String) {
    outcome(
        zae_limiter()
            .current_dir(dir)
            .env_remove("ZAEL_NOW")
            .args(args)
            .output()
            .expect("run zae-limiter"),
    )
}

/// [`run_in`], which must exit 0; its stdout.
#[allow(dead_code)]
pub fn ok_in(dir: &std::path::Path, args: &[&str]) -> String {
    let (code, out, err) = run_in(dir, args);
    assert_eq!(code, 0, "{args:?}\n{out}\n{err}");
    out
}
