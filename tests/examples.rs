//! Every example a user can copy runs: those of every command's `--help`
//! (found by walking the clap command tree, so a new command's examples are
//! picked up without touching this file) and every command of the README's
//! `sh` blocks.
//!
//! Each example runs as written, through `sh -c`, in a fresh directory that
//! holds what the examples name (`limits.yaml`, `a.yaml`, `body.json`, the
//! repository's `fixtures/`), with HOME in it, our binary first on PATH, in
//! the order `--help` and the README show them; its exit code is checked
//! against [`EXPECT`] (0 unless listed). The README's `cargo run -q --` is
//! the same binary.
//!
//! Examples that talk to DynamoDB run against moto in
//! `dynamodb_examples_run_against_moto` (the examples' table `mystack` and
//! endpoint `http://127.0.0.1:5000` are replaced by a fresh table and the
//! test server); examples that need what no test has are listed in [`EXPECT`]
//! as skipped, with the reason.

mod common;
mod interop_support;

use std::path::{Path, PathBuf};
use std::process::Command;

use zae_limiter::cli::help::examples_in;

/// How an example is run and what it must exit with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    /// On the local store (or touching no store), exiting with this code.
    Local(i32),
    /// Against DynamoDB (moto), exiting with this code.
    Dynamo(i32),
    /// Not run, for this reason.
    Skip(&'static str),
}

use Expect::{Dynamo, Local, Skip};

/// Examples that are not "runs locally and exits 0", by their text (after
/// `\` continuations are joined). An entry that matches no example fails the
/// test, so the list cannot go stale.
const EXPECT: &[(&str, Expect)] = &[
    (
        "zae-limiter limits plan -n mystack -f limits.yaml --detailed-exitcode",
        Dynamo(2),
    ),
    (
        "zae-limiter limits plan -n mystack -f limits.yaml --no-refresh",
        Dynamo(0),
    ),
    ("zae-limiter limits diff -n mystack -f limits.yaml -q", Dynamo(0)),
    (
        "zae-limiter limits apply -n mystack -f limits.yaml --full",
        Dynamo(0),
    ),
    (
        "zae-limiter limits apply -n mystack -f limits.yaml --no-refresh",
        Dynamo(0),
    ),
    (
        "aws cloudformation deploy --stack-name mystack-limits --template-file limits.cfn.yaml",
        Skip("needs the AWS CLI and an AWS account with the reference's provisioner stack"),
    ),
    (
        "zae-limiter entity get-limits user-premium   # DynamoDB, _default_",
        Dynamo(0),
    ),
    (
        "zae-limiter limits export -n mystack -o mystack.yaml   # DynamoDB",
        Dynamo(0),
    ),
    (
        "zae-limiter cooldown record anthropic/acct-7 --status 401  # DynamoDB",
        Dynamo(0),
    ),
    (
        "AWS_REGION=us-east-1 AWS_ACCESS_KEY_ID=x AWS_SECRET_ACCESS_KEY=x zae-limiter table create -n mystack --endpoint-url http://127.0.0.1:5000",
        Dynamo(0),
    ),
    // The README's second command is the test suite itself.
    ("scripts/test", Skip("the whole test suite, which runs this test")),
    (
        "cargo install --locked --path .",
        Skip("a release build (minutes); the tests run the same binary from target/"),
    ),
    (
        "zae-limiter limits validate fixtures/manifests/invalid/harmful-capacity-bool.yaml --format github",
        Local(1),
    ),
    (
        "zae-limiter limits validate fixtures/manifests/lint/ZL101-fixed-minute-window.yaml --deny-warnings",
        Local(1),
    ),
    ("zae-limiter table create -n mystack --region us-east-1", Dynamo(0)),
    // A server runs until it is stopped: tests/serve.rs
    // (the_help_examples_of_serve_run) starts each on a free port, asks it
    // /healthz and stops it with SIGTERM.
    (
        "zae-limiter serve --local -n jobs --listen 127.0.0.1:8080",
        Skip("a server runs until stopped: tests/serve.rs the_help_examples_of_serve_run runs it"),
    ),
    (
        "zae-limiter serve --local -n jobs --listen 127.0.0.1:0 --config-ttl 0",
        Skip("a server runs until stopped: tests/serve.rs the_help_examples_of_serve_run runs it"),
    ),
    (
        "ZAEL_API_TOKEN=$(cat token.txt) zae-limiter serve -n mystack --listen 0.0.0.0:8080 --config-ttl 30s",
        Skip("a server runs until stopped: tests/serve.rs the_help_examples_of_serve_run runs it on moto"),
    ),
    (
        "zae-limiter limits apply -n mystack -f limits.yaml --lock-timeout 5m",
        Dynamo(0),
    ),
    // An operator's command: only the id a refused apply printed removes a
    // lock, and no apply holds one here.
    (
        "zae-limiter limits force-unlock 3f2a9c0d5e6b4a718293a4b5c6d7e8f9 --local -n demo",
        Local(1),
    ),
    // The record examples before it left a cooldown 2 days long: far beyond 10 s.
    (
        "zae-limiter cooldown check openai/acct-42/gpt-4 --local --wait-up-to 10s --holder worker-1",
        Local(75),
    ),
];

fn expect(example: &str) -> Expect {
    EXPECT
        .iter()
        .find(|(text, _)| *text == example)
        .map_or(Local(0), |(_, e)| *e)
}

/// One example and where it was shown.
#[derive(Debug, Clone)]
struct Example {
    source: String,
    text: String,
}

fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_zae-limiter"))
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The examples of every command's `--help`, as the binary prints them, in
/// the order of the command tree.
fn help_examples() -> Vec<Example> {
    fn walk(cmd: &clap::Command, path: &mut Vec<String>, out: &mut Vec<Example>) {
        let (code, help, err) = common::outcome(
            common::zae_limiter()
                .args(path.iter())
                .arg("--help")
                .output()
                .unwrap(),
        );
        assert_eq!(code, 0, "zae-limiter {} --help: {err}", path.join(" "));
        let source = format!("zae-limiter {} --help", path.join(" "));
        out.extend(examples_in(&help).into_iter().map(|text| Example {
            source: source.clone(),
            text,
        }));
        for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
            path.push(sub.get_name().to_string());
            walk(sub, path, out);
            path.pop();
        }
    }
    let mut out = Vec::new();
    walk(&zae_limiter::cli::command(), &mut Vec::new(), &mut out);
    out
}

/// The commands of the README's `sh` blocks: each line (with `\`
/// continuations joined), comments and blank lines left out, `cargo run -q --`
/// read as the installed binary.
fn readme_examples() -> Vec<Example> {
    let text = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let mut out = Vec::new();
    let mut in_sh = false;
    let mut current = String::new();
    for (n, line) in text.lines().enumerate() {
        let fence = line.trim_start().starts_with("```");
        if fence {
            in_sh = !in_sh && line.trim() == "```sh";
            continue;
        }
        if !in_sh {
            continue;
        }
        let trimmed = line.trim();
        if current.is_empty() && (trimmed.is_empty() || trimmed.starts_with('#')) {
            continue;
        }
        match trimmed.strip_suffix('\\') {
            Some(part) => {
                current.push_str(part.trim_end());
                current.push(' ');
            }
            None => {
                current.push_str(trimmed);
                out.push(Example {
                    source: format!("README.md:{}", n + 1),
                    text: current.replace("cargo run -q --", "zae-limiter"),
                });
                current.clear();
            }
        }
    }
    assert!(current.is_empty(), "README ends inside a continued line");
    out
}

/// A directory holding what the examples name.
fn workdir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::os::unix::fs::symlink(repo().join("fixtures"), d.join("fixtures")).unwrap();
    let valid = repo().join("fixtures/manifests/valid");
    let copy = |from: &str, to: &str| {
        let to = d.join(to);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(valid.join(from), to).unwrap();
    };
    copy("quickstart.yaml", "limits.yaml");
    copy("reference-example-1.yaml", "a.yaml");
    copy("reference-example-2.yaml", "b.yaml");
    copy("quickstart.yaml", "manifests/quickstart.yaml");
    copy("saas-tenants.yaml", "manifests/saas-tenants.yaml");
    // A provider's 429 body whose reset has long passed (60 s after the
    // --received-at of the example that records it).
    std::fs::write(
        d.join("body.json"),
        r#"{"error": {"type": "usage_limit_reached", "resets_in_seconds": 60}}"#,
    )
    .unwrap();
    std::fs::create_dir(d.join("home")).unwrap();
    std::fs::create_dir(d.join("tmp")).unwrap();
    dir
}

/// `sh -c EXAMPLE` in `dir` with our binary first on PATH and nothing of the
/// caller's store or AWS settings; DynamoDB is `endpoint`.
fn shell(dir: &Path, example: &str, endpoint: &str, stack: Option<&str>) -> Command {
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(example)
        .current_dir(dir)
        .env(
            "PATH",
            format!(
                "{}:/usr/local/bin:/usr/bin:/bin",
                bin().parent().unwrap().display()
            ),
        )
        .env("HOME", dir.join("home"))
        .env("TMPDIR", dir.join("tmp"))
        .env_remove("ZAEL_LOCAL_STORE")
        .env_remove("ZAEL_STACK")
        .env_remove("ZAEL_NOW")
        .env_remove("ZAEL_COOLDOWN_CEILING")
        .env_remove("ZAEL_COOLDOWN_JITTER")
        .env_remove("AWS_PROFILE")
        .env("AWS_ENDPOINT_URL", endpoint)
        .env("AWS_ACCESS_KEY_ID", "testing")
        .env("AWS_SECRET_ACCESS_KEY", "testing")
        .env("AWS_REGION", interop_support::REGION)
        .env("AWS_CONFIG_FILE", "/dev/null")
        .env("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")
        .env("AWS_EC2_METADATA_DISABLED", "true");
    if let Some(stack) = stack {
        cmd.env("ZAEL_STACK", stack);
    }
    cmd
}

/// Runs the examples `select` picks, in order; returns the failures.
fn run_all(
    examples: &[Example],
    dir: &Path,
    endpoint: &str,
    stack: Option<&str>,
    select: impl Fn(Expect) -> Option<i32>,
    rewrite: impl Fn(&str) -> String,
) -> (usize, Vec<String>) {
    let mut ran = 0;
    let mut failures = Vec::new();
    for ex in examples {
        let Some(want) = select(expect(&ex.text)) else {
            continue;
        };
        let text = rewrite(&ex.text);
        let (code, out, err) =
            common::outcome(shell(dir, &text, endpoint, stack).output().unwrap());
        ran += 1;
        if code != want {
            failures.push(format!(
                "{}: `{text}` exited {code}, expected {want}\n--- stdout (first lines)\n{}\n--- stderr\n{err}",
                ex.source,
                out.lines().take(15).collect::<Vec<_>>().join("\n")
            ));
        }
    }
    (ran, failures)
}

/// The local run: DynamoDB is an address where nothing listens, so an
/// example that needs it and is not listed as such fails quickly.
fn run_locally(examples: &[Example]) {
    let dir = workdir();
    let (ran, failures) = run_all(
        examples,
        dir.path(),
        "http://127.0.0.1:9",
        None,
        |e| match e {
            Local(code) => Some(code),
            _ => None,
        },
        str::to_string,
    );
    for ex in examples {
        match expect(&ex.text) {
            Skip(why) => eprintln!("skipped {}: `{}`: {why}", ex.source, ex.text),
            Dynamo(_) => eprintln!(
                "{}: `{}` runs against moto in dynamodb_examples_run_against_moto",
                ex.source, ex.text
            ),
            Local(_) => {}
        }
    }
    eprintln!("ran {ran} examples locally");
    assert!(
        failures.is_empty(),
        "{} of {ran} examples failed:\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}

#[test]
fn every_help_example_runs() {
    let examples = help_examples();
    let commands: std::collections::BTreeSet<&str> =
        examples.iter().map(|e| e.source.as_str()).collect();
    assert!(
        commands.len() >= 20,
        "examples found in only {} commands' help: {commands:?}",
        commands.len()
    );
    run_locally(&examples);
}

#[test]
fn every_readme_example_runs() {
    let examples = readme_examples();
    assert!(examples.len() >= 10, "{examples:#?}");
    run_locally(&examples);
}

/// Every [`EXPECT`] entry names an example that exists.
#[test]
fn the_expectations_name_existing_examples() {
    let mut all = help_examples();
    all.extend(readme_examples());
    for (text, _) in EXPECT {
        assert!(
            all.iter().any(|e| e.text == *text),
            "EXPECT lists `{text}`, which no --help or README shows"
        );
    }
}

#[test]
fn dynamodb_examples_run_against_moto() {
    let Some(it) = interop_support::interop("examples") else {
        return;
    };
    let mut examples = help_examples();
    examples.extend(readme_examples());
    let dir = workdir();
    let rewrite = |text: &str| {
        text.replace("mystack", &it.table)
            .replace("http://127.0.0.1:5000", &it.endpoint)
    };
    let (code, _, err) = common::outcome(
        shell(
            dir.path(),
            &format!("zae-limiter table create -n {}", it.table),
            &it.endpoint,
            None,
        )
        .output()
        .unwrap(),
    );
    assert_eq!(code, 0, "{err}");
    let (ran, failures) = run_all(
        &examples,
        dir.path(),
        &it.endpoint,
        Some(&it.table),
        |e| match e {
            Dynamo(code) => Some(code),
            _ => None,
        },
        rewrite,
    );
    assert!(ran >= 5, "only {ran} DynamoDB examples");
    assert!(
        failures.is_empty(),
        "{} of {ran} examples failed:\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}
