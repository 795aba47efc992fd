//! The stores a CLI scenario runs against: the local store always, DynamoDB
//! (moto) when `ZAEL_TEST_DYNAMODB_ENDPOINT` is set (required when
//! `ZAEL_REQUIRE_INTEROP=1`). Every step is a new process of the real binary,
//! and "now" comes from `ZAEL_NOW`, so scenarios cross process boundaries
//! deterministically.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Command, Output};

use zae_limiter::store::open::Target;
use zae_limiter::store::Store;

pub const REGION: &str = "us-east-1";

/// A store to run against: the flags every command gets.
pub struct Backend {
    pub label: &'static str,
    pub flags: Vec<String>,
    pub endpoint: Option<String>,
    pub local: Option<PathBuf>,
    pub table: String,
    /// Scratch space of the scenario (the local store file lives here).
    pub dir: tempfile::TempDir,
}

fn interop_required() -> bool {
    std::env::var("ZAEL_REQUIRE_INTEROP").as_deref() == Ok("1")
}

/// A fresh local store file (created by the first write).
pub fn local() -> Backend {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("store.sqlite");
    Backend {
        label: "local",
        flags: vec![format!("--local={}", path.display())],
        endpoint: None,
        local: Some(path),
        table: "zae-limiter".into(),
        dir,
    }
}

/// The local store, and a fresh DynamoDB table when an endpoint is configured.
pub fn backends(tag: &str) -> Vec<Backend> {
    let mut out = vec![local()];
    match std::env::var("ZAEL_TEST_DYNAMODB_ENDPOINT")
        .ok()
        .filter(|v| !v.is_empty())
    {
        Some(endpoint) if cfg!(feature = "dynamodb") => {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.subsec_nanos())
                .unwrap_or(0);
            let table = format!("{tag}-{}-{nanos}", std::process::id());
            let b = Backend {
                label: "dynamodb",
                flags: vec![
                    "--endpoint-url".into(),
                    endpoint.clone(),
                    "-n".into(),
                    table.clone(),
                ],
                endpoint: Some(endpoint.clone()),
                local: None,
                table: table.clone(),
                dir: tempfile::tempdir().expect("temp dir"),
            };
            let created = b.run(
                "2026-12-02T10:00:00Z",
                &["table", "create", "-n", &table, "--endpoint-url", &endpoint],
            );
            crate::common::assert_exit(&created, 0, "table create");
            out.push(b);
        }
        Some(_) => {
            let msg = "the DynamoDB variant needs a binary built with the `dynamodb` feature";
            assert!(!interop_required(), "{msg} (ZAEL_REQUIRE_INTEROP=1)");
            eprintln!("skipped DynamoDB variant: {msg}");
        }
        None => {
            let msg = "ZAEL_TEST_DYNAMODB_ENDPOINT is not set (scripts/test starts moto)";
            assert!(!interop_required(), "{msg} (ZAEL_REQUIRE_INTEROP=1)");
            eprintln!("skipped DynamoDB variant: {msg}");
        }
    }
    out
}

pub use crate::common::describe;

impl Backend {
    /// The binary at `now` with `args` (no store flags), isolated from the
    /// caller's environment.
    pub fn command(&self, now: &str, args: &[&str]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_zae-limiter"));
        self.isolate(&mut cmd, now);
        cmd.args(args);
        cmd
    }

    /// `sh -c SCRIPT` at `now`, with `$ZL` the binary and `$FLAGS` the store flags.
    pub fn shell(&self, now: &str, script: &str) -> Command {
        let mut cmd = Command::new("sh");
        self.isolate(&mut cmd, now);
        cmd.env("ZL", env!("CARGO_BIN_EXE_zae-limiter"))
            .env("FLAGS", self.flags.join(" "))
            .args(["-c", script]);
        cmd
    }

    /// The environment of every command: `ZAEL_NOW`, moto's credentials, and
    /// nothing of the caller's that would point elsewhere.
    pub fn isolate(&self, cmd: &mut Command, now: &str) {
        cmd.env("ZAEL_NOW", now)
            .env_remove("ZAEL_LOCAL_STORE")
            .env_remove("ZAEL_STACK")
            .env_remove("ZAEL_COOLDOWN_CEILING")
            .env_remove("ZAEL_COOLDOWN_JITTER")
            .env_remove("ZAEL_REQUEST_STATS")
            .env_remove("AWS_ENDPOINT_URL")
            .env("AWS_ACCESS_KEY_ID", "testing")
            .env("AWS_SECRET_ACCESS_KEY", "testing")
            .env("AWS_REGION", REGION)
            .env("AWS_DEFAULT_REGION", REGION)
            .env_remove("AWS_PROFILE")
            .env("AWS_CONFIG_FILE", "/dev/null")
            .env("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")
            .env("AWS_EC2_METADATA_DISABLED", "true");
    }

    /// A raw command line (no store flags).
    pub fn run(&self, now: &str, args: &[&str]) -> Output {
        self.command(now, args).output().expect("run zae-limiter")
    }

    /// `args` followed by this store's flags.
    pub fn with_flags<'a>(&'a self, args: &[&'a str]) -> Vec<&'a str> {
        let mut all = args.to_vec();
        all.extend(self.flags.iter().map(String::as_str));
        all
    }

    /// `limits apply` of a manifest text to this store at `now`, which must succeed.
    pub fn apply_at(&self, now: &str, manifest: &str) {
        let path = crate::common::write_arg(self.dir.path(), "limits.yaml", manifest);
        let mut args = self.with_flags(&["limits", "apply", "-f", &path]);
        if self.endpoint.is_none() {
            args.extend(["-n", &self.table]);
        }
        let out = self.run(now, &args);
        self.assert_exit(&out, 0, "apply");
    }

    /// Asserts that `out` (of `what` on this store) exited `want`, showing
    /// the store and the whole outcome if not.
    pub fn assert_exit(&self, out: &Output, want: i32, what: impl std::fmt::Display) {
        crate::common::assert_exit(out, want, format_args!("[{}] {what}", self.label));
    }

    /// The store itself, through the same trait the commands use.
    pub fn store(&self) -> Box<dyn Store> {
        // The DynamoDB client reads its credentials from the environment; every
        // test sets the same values, so concurrent tests agree.
        if self.endpoint.is_some() {
            std::env::set_var("AWS_ACCESS_KEY_ID", "testing");
            std::env::set_var("AWS_SECRET_ACCESS_KEY", "testing");
            std::env::set_var("AWS_EC2_METADATA_DISABLED", "true");
        }
        let target = match &self.local {
            Some(path) => Target::Local(path.clone()),
            None => Target::DynamoDb {
                region: Some(REGION.into()),
                endpoint_url: self.endpoint.clone(),
            },
        };
        zae_limiter::store::open::open(&target, &self.table).expect("open store")
    }

    /// Writes `text` (not a DynamoDB item: damage) over every row of the
    /// local store whose PK is `LIKE pk_like`, as a bad disk or a hand edit
    /// would; returns how many. Only the local store can hold such a row.
    pub fn corrupt_local_rows(&self, pk_like: &str, text: &str) -> usize {
        let path = self.local.as_ref().expect("a local store");
        let conn = rusqlite::Connection::open(path).expect("open sqlite");
        conn.execute(
            "UPDATE items SET item = ?1 WHERE pk LIKE ?2",
            [text, pk_like],
        )
        .expect("corrupt rows")
    }

    /// The id of namespace `name`.
    pub fn namespace_id(&self, name: &str) -> String {
        let store = self.store();
        zae_limiter::items::namespace::resolve(store.as_ref(), name)
            .expect("resolve namespace")
            .expect("namespace registered")
    }
}
