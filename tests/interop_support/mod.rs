//! Shared by the interop tests: the moto endpoint and the Python reference
//! (scripts/interop/ref.py), our binary pointed at the same endpoint, and a
//! fresh table per test so tests run in parallel.
//!
//! Without ZAEL_TEST_DYNAMODB_ENDPOINT / ZAEL_PYTHON a test prints why and
//! passes, unless ZAEL_REQUIRE_INTEROP=1 (scripts/test), where it fails.
#![allow(dead_code)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::Value;

pub const REGION: &str = "us-east-1";

pub struct Interop {
    pub endpoint: String,
    pub python: String,
    pub table: String,
    root: PathBuf,
}

/// The environment, or `None` (after saying why) when a test must skip.
pub fn interop(tag: &str) -> Option<Interop> {
    let endpoint = std::env::var("ZAEL_TEST_DYNAMODB_ENDPOINT")
        .ok()
        .filter(|v| !v.is_empty());
    let python = std::env::var("ZAEL_PYTHON").ok().filter(|v| !v.is_empty());
    let (Some(endpoint), Some(python)) = (endpoint, python) else {
        let msg = "interop test needs ZAEL_TEST_DYNAMODB_ENDPOINT (moto) and ZAEL_PYTHON (zae-limiter 0.17); run scripts/test";
        if std::env::var("ZAEL_REQUIRE_INTEROP").as_deref() == Ok("1") {
            panic!("{msg} (ZAEL_REQUIRE_INTEROP=1)");
        }
        eprintln!("skipped: {msg}");
        return None;
    };
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let table = format!("it-{tag}-{}-{}", std::process::id(), nanos % 1_000_000_000);
    Some(Interop {
        endpoint,
        python,
        table,
        root: PathBuf::from(env!("CARGO_MANIFEST_DIR")),
    })
}

/// Two tables for a test comparing us with the reference: ours (`tag`) and
/// one for the reference's side (`{tag}ref`); `None` when the test must skip.
pub fn ours_and_reference(tag: &str) -> Option<(Interop, Interop)> {
    Some((interop(tag)?, interop(&format!("{tag}ref"))?))
}

impl Drop for Interop {
    /// The files the test wrote ([`Interop::write_file`]) go with it.
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(std::env::temp_dir().join(&self.table));
    }
}

pub use crate::common::describe;

/// The id of the `default` namespace in a dump.
pub fn default_nsid(items: &[Value]) -> String {
    items
        .iter()
        .find(|i| i["SK"]["S"] == "#NAMESPACE#default")
        .and_then(|i| i["namespace_id"]["S"].as_str())
        .expect("default namespace record")
        .to_string()
}

/// Python's `resolve_limits` answers the same on both tables for every pair.
pub fn assert_same_resolution(ours: &Value, theirs: &Value, pairs: &[&str]) {
    for pair in pairs {
        assert_eq!(
            ours[pair], theirs[pair],
            "resolve_limits differs for {pair}"
        );
    }
}

/// The reference script's `resolve` command for `pairs` of `table` in the
/// `default` namespace.
pub fn resolve_args<'a>(table: &'a str, pairs: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["resolve", table, "default"];
    args.extend_from_slice(pairs);
    args
}

impl Interop {
    fn aws_env(&self, cmd: &mut Command) {
        cmd.env("AWS_ACCESS_KEY_ID", "testing")
            .env("AWS_SECRET_ACCESS_KEY", "testing")
            .env("AWS_REGION", REGION)
            .env("AWS_DEFAULT_REGION", REGION)
            .env("AWS_ENDPOINT_URL", &self.endpoint)
            .env("ZAEL_TEST_DYNAMODB_ENDPOINT", &self.endpoint)
            .env_remove("ZAEL_LOCAL_STORE")
            .env_remove("AWS_PROFILE")
            .env("AWS_CONFIG_FILE", "/dev/null")
            .env("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")
            .env("AWS_EC2_METADATA_DISABLED", "true");
    }

    /// Our binary with the AWS environment of the moto server.
    pub fn ours(&self, args: &[&str]) -> Output {
        self.ours_env(args, &[])
    }

    /// Ours with extra environment variables.
    pub fn ours_env(&self, args: &[&str], envs: &[(&str, &str)]) -> Output {
        let mut cmd = self.ours_cmd(args);
        cmd.envs(envs.iter().copied());
        cmd.output().expect("run zae-limiter")
    }

    /// Our binary with the AWS environment of the moto server, not started
    /// (the test hooks of the caller's environment removed).
    pub fn ours_cmd(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_zae-limiter"));
        self.aws_env(&mut cmd);
        cmd.env_remove("ZAEL_FAULT_ABORT_AFTER_WRITES")
            .env_remove("ZAEL_TEST_CLOCK_OFFSET_MS")
            .env_remove("ZAEL_TEST_PAUSE_AT")
            .args(args)
            .current_dir(&self.root);
        cmd
    }

    /// Ours, which must succeed (exit 0, or `ok_codes`); returns stdout.
    pub fn ours_ok(&self, args: &[&str]) -> String {
        let out = self.ours(args);
        assert!(
            out.status.success(),
            "zae-limiter {args:?} failed:\n{}",
            describe(&out)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// `limits COMMAND -f MANIFEST ARGS…` on this table, which must succeed; returns stdout.
    fn limits(&self, command: &str, manifest: &Path, args: &[&str]) -> String {
        let m = manifest.to_string_lossy();
        let mut all = vec!["limits", command, "-n", &self.table, "-f", &m];
        all.extend(["--endpoint-url", &self.endpoint]);
        all.extend_from_slice(args);
        self.ours_ok(&all)
    }

    /// `limits plan -f MANIFEST --detailed-exitcode` on this table says no changes.
    pub fn assert_plan_is_empty(&self, manifest: &Path) {
        self.limits("plan", manifest, &["--detailed-exitcode"]);
    }

    /// `limits apply -f MANIFEST` on this table, which must succeed; returns stdout.
    pub fn apply(&self, manifest: &Path) -> String {
        self.limits("apply", manifest, &[])
    }

    /// A Python command line with the same environment.
    pub fn python_cmd(&self, script: &str, args: &[&str]) -> Command {
        let mut cmd = Command::new(&self.python);
        self.aws_env(&mut cmd);
        cmd.arg(self.root.join("scripts/interop").join(script))
            .args(args)
            .current_dir(&self.root);
        cmd
    }

    /// `ref.py COMMAND ARGS…`, which must succeed; its JSON answer.
    pub fn reference(&self, args: &[&str]) -> Value {
        let out = self
            .python_cmd("ref.py", args)
            .output()
            .expect("run python");
        assert!(
            out.status.success(),
            "ref.py {args:?} failed:\n{}",
            describe(&out)
        );
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!("ref.py {args:?} printed no JSON ({e}):\n{}", describe(&out))
        })
    }

    /// Several `ref.py` commands in one interpreter; one answer each.
    pub fn reference_many(&self, commands: &[&[&str]]) -> Vec<Value> {
        let mut args: Vec<&str> = vec![];
        for (i, c) in commands.iter().enumerate() {
            if i > 0 {
                args.push("+");
            }
            args.extend_from_slice(c);
        }
        match self.reference(&args) {
            Value::Array(v) if commands.len() > 1 => v,
            one if commands.len() == 1 => vec![one],
            other => panic!("ref.py {args:?}: expected a list, got {other}"),
        }
    }

    /// The Python CLI (`zae-limiter` of the reference) with the moto endpoint.
    pub fn python_cli(&self, args: &[&str]) -> Output {
        let bin = Path::new(&self.python).with_file_name("zae-limiter");
        let mut cmd = Command::new(bin);
        self.aws_env(&mut cmd);
        cmd.args(args).current_dir(&self.root);
        cmd.output().expect("run the Python zae-limiter CLI")
    }

    /// Creates the table with ours (`table create`), which must succeed;
    /// returns stdout.
    pub fn create_table(&self) -> String {
        self.ours_ok(&[
            "table",
            "create",
            "-n",
            &self.table,
            "--endpoint-url",
            &self.endpoint,
        ])
    }

    /// The table created by ours with the manifest `text` (written as
    /// `name`) applied: the manifest's path, for a later plan or apply.
    pub fn with_applied(&self, name: &str, text: &str) -> PathBuf {
        let manifest = self.write_file(name, text);
        self.create_table();
        self.apply(&manifest);
        manifest
    }

    /// Every item of the table, sorted by key.
    pub fn dump(&self) -> Vec<Value> {
        match self.reference(&["dump", &self.table]) {
            Value::Array(items) => items,
            other => panic!("dump: {other}"),
        }
    }

    /// Writes a file under a fresh temp dir and returns its path.
    pub fn write_file(&self, name: &str, text: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(&self.table);
        std::fs::create_dir_all(&dir).expect("temp dir");
        let path = dir.join(name);
        std::fs::File::create(&path)
            .and_then(|mut f| f.write_all(text.as_bytes()))
            .expect("write temp file");
        path
    }

    /// A long-lived Python limiter (config cache 60 s) answering acquire lines.
    pub fn limiter(&self, namespace: &str) -> Limiter {
        let mut child = self
            .python_cmd("ref.py", &["serve", &self.table, namespace])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start the Python limiter");
        let stdout = std::io::BufReader::new(child.stdout.take().expect("stdout"));
        let mut l = Limiter { child, stdout };
        let ready = l.read_line();
        assert_eq!(
            ready["ready"],
            Value::Bool(true),
            "limiter did not start: {ready}"
        );
        l
    }
}

/// A running Python `SyncRateLimiter`.
pub struct Limiter {
    child: std::process::Child,
    stdout: std::io::BufReader<std::process::ChildStdout>,
}

impl Limiter {
    fn read_line(&mut self) -> Value {
        use std::io::BufRead;
        let mut line = String::new();
        self.stdout
            .read_line(&mut line)
            .expect("read limiter answer");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("limiter said {line:?}: {e}"))
    }

    /// Whether acquiring `n` of `limit` for (entity, resource) is admitted now.
    pub fn acquire(&mut self, entity: &str, resource: &str, limit: &str, n: u64) -> bool {
        let stdin = self.child.stdin.as_mut().expect("stdin");
        writeln!(stdin, "{entity} {resource} {limit} {n}").expect("send to limiter");
        stdin.flush().expect("flush");
        self.read_line()["admitted"]
            .as_bool()
            .expect("admitted flag")
    }
}

impl Drop for Limiter {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.wait();
    }
}
