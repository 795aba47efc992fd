//! Helpers shared by the CLI tests: the real binary, isolated from the
//! caller's environment, and its outcome as (exit code, stdout, stderr).
#![allow(dead_code)] // every test binary uses some of them

use std::collections::{BTreeMap, BTreeSet};
use std::process::{Command, Output};

use zae_limiter::store::{Item, Key};

pub mod manifest;

/// The `zae-limiter` binary with the variables that would redirect it to
/// another store or table removed.
#[allow(dead_code)] // not every test binary runs it this way
pub fn zae_limiter() -> Command {
    isolated(Command::new(env!("CARGO_BIN_EXE_zae-limiter")))
}

/// `cmd` (which runs the binary, maybe through another program) without the
/// variables that would redirect it to another store or table, or arm a fault.
#[allow(dead_code)] // not every test binary wraps the binary
pub fn isolated(mut cmd: Command) -> Command {
    for var in [
        "ZAEL_STACK",
        "ZAEL_LOCAL_STORE",
        "AWS_ENDPOINT_URL",
        "ZAEL_FAULT_ABORT_AFTER_WRITES",
        "ZAEL_FAULT_FAIL_WRITES",
        "ZAEL_TEST_CLOCK_OFFSET_MS",
        "ZAEL_TEST_RECORD_LIMIT_BYTES",
    ] {
        cmd.env_remove(var);
    }
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

/// Asserts that `out` (of `what`) exited `want`, showing the whole outcome if not.
#[allow(dead_code)]
pub fn assert_exit(out: &Output, want: i32, what: impl std::fmt::Display) {
    assert_eq!(out.status.code(), Some(want), "{what}:\n{}", describe(out));
}

/// Every command started, output captured, before any is waited for (so
/// they race); their outputs in order.
#[allow(dead_code)]
pub fn run_together(cmds: impl IntoIterator<Item = Command>) -> Vec<Output> {
    let children: Vec<std::process::Child> = cmds
        .into_iter()
        .map(|mut cmd| {
            cmd.stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("spawn")
        })
        .collect();
    children
        .into_iter()
        .map(|c| c.wait_with_output().expect("wait"))
        .collect()
}

/// Exit code (-1 when killed by a signal), stdout and stderr as text.
#[allow(dead_code)] // not every test binary reads outcomes
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

/// What differs between two equal applies: the record's timestamp, counts
/// fingerprint and write id, the digests' generation and stamp, the counts'
/// recount stamp.
#[allow(dead_code)] // not every test binary compares dumps
pub const VOLATILE: [&str; 6] = [
    "last_applied",
    "generation",
    "provisioner",
    "zael#recount",
    "zael_counts",
    "zael_write",
];

/// A store dump without what differs between two equal applies ([`VOLATILE`]).
#[allow(dead_code)] // not every test binary compares dumps
pub fn comparable(mut d: BTreeMap<Key, Item>) -> BTreeMap<Key, Item> {
    for item in d.values_mut() {
        for volatile in VOLATILE {
            item.remove(volatile);
        }
    }
    d
}

/// The keys whose items differ between two dumps, with both sides.
#[allow(dead_code)] // not every test binary compares dumps
pub fn differences(a: &BTreeMap<Key, Item>, b: &BTreeMap<Key, Item>) -> String {
    let keys: BTreeSet<&Key> = a.keys().chain(b.keys()).collect();
    keys.into_iter()
        .filter(|k| a.get(*k) != b.get(*k))
        .map(|k| {
            format!(
                "{} / {}:\n  got  {:?}\n  want {:?}\n",
                k.pk,
                k.sk,
                a.get(k),
                b.get(k)
            )
        })
        .collect()
}

/// `--local=PATH`: the store path must be attached, or it would be read as the
/// command's next argument.
pub fn local_flag(path: &std::path::Path) -> std::ffi::OsString {
    let mut flag = std::ffi::OsString::from("--local=");
    flag.push(path);
    flag
}

/// The binary with `args` on the local store at `store`, table `table`:
/// (code, stdout, stderr).
#[allow(dead_code)]
pub fn run_local(store: &std::path::Path, table: &str, args: &[&str]) -> (i32, String, String) {
    outcome(
        zae_limiter()
            .args(args)
            .arg(local_flag(store))
            .args(["-n", table])
            .output()
            .expect("run zae-limiter"),
    )
}

/// Asserts that an outcome is a refusal: exit 1, nothing on stdout, and
/// stderr starting with `prefix`; its stderr, for what else it should say.
#[allow(dead_code)]
pub fn assert_refused(outcome: (i32, String, String), prefix: &str) -> String {
    let (code, out, err) = outcome;
    assert_eq!(code, 1, "{out}{err}");
    assert_eq!(out, "", "nothing on stdout");
    assert!(err.starts_with(prefix), "{err}");
    err
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

/// `text` written to `name` in `dir`: its path.
#[allow(dead_code)]
pub fn write_in(dir: &std::path::Path, name: &str, text: impl AsRef<[u8]>) -> std::path::PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write file");
    path
}

/// [`write_in`], its path as a command-line argument.
#[allow(dead_code)]
pub fn write_arg(dir: &std::path::Path, name: &str, text: impl AsRef<[u8]>) -> String {
    write_in(dir, name, text).display().to_string()
}

/// Whether `program --version` runs: a test that needs a tool the machine
/// lacks says so and skips.
#[allow(dead_code)]
pub fn have(program: &str) -> bool {
    Command::new(program).arg("--version").output().is_ok()
}

/// Asserts that `stream` (of `out`) contains `needle`, showing the whole outcome if not.
fn assert_stream_has(out: &Output, stream: &[u8], needle: &str) {
    let text = String::from_utf8_lossy(stream);
    assert!(text.contains(needle), "{}", describe(out));
}

/// [`assert_stream_has`] on stdout.
#[allow(dead_code)]
pub fn assert_stdout_has(out: &Output, needle: &str) {
    assert_stream_has(out, &out.stdout, needle);
}

/// [`assert_stream_has`] on stderr.
#[allow(dead_code)]
pub fn assert_stderr_has(out: &Output, needle: &str) {
    assert_stream_has(out, &out.stderr, needle);
}

/// The text between `from` and the next `until` after it, in `text`.
pub fn between<'a>(text: &'a str, from: &str, until: char) -> &'a str {
    let start = text
        .find(from)
        .unwrap_or_else(|| panic!("no {from:?} in\n{text}"))
        + from.len();
    let rest = &text[start..];
    &rest[..rest.find(until).unwrap_or(rest.len())]
}

/// Runs a suggested command line as printed, through `sh` (its quoting must
/// be the shell's), in `dir` and without any store variable: it must reach
/// the store by itself.
pub fn run_suggested(dir: &std::path::Path, line: &str) -> (i32, String, String) {
    let rest = line
        .strip_prefix("zae-limiter ")
        .unwrap_or_else(|| panic!("not a zae-limiter command: {line}"));
    let mut sh = isolated(Command::new("sh"));
    sh.current_dir(dir)
        .arg("-c")
        .arg(format!("\"$ZAEL_BIN\" {rest}"))
        .env("ZAEL_BIN", env!("CARGO_BIN_EXE_zae-limiter"));
    outcome(sh.output().unwrap())
}
