//! What a newcomer meets first: where `--local` may stand, read-only commands
//! on a read-only directory, and errors that say what is wrong in one line
//! (DynamoDB setup, manifests with huge lines or a NUL byte, bad traces).

mod common;

use std::path::Path;
use std::process::Command;

use common::{between, outcome, run_suggested, write_in, zae_limiter};

fn quickstart() -> String {
    std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/manifests/valid/quickstart.yaml"),
    )
    .unwrap()
}

/// A fresh directory holding the quickstart manifest as `name`.
fn quickstart_dir(name: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    write_in(dir.path(), name, quickstart());
    dir
}

/// A command line's words (no word here has a space).
fn words(line: &str) -> Vec<&str> {
    line.split_whitespace().collect()
}

fn run_in(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let mut cmd = zae_limiter();
    cmd.current_dir(dir).args(args).envs(env.iter().copied());
    outcome(cmd.output().unwrap())
}

/// `--local` takes a path only as `--local=PATH`, so it may stand before or
/// after positionals without swallowing one; ZAEL_LOCAL_STORE is the default
/// for a bare `--local` and selects the local store alone; `--local=PATH` wins.
#[test]
fn local_may_stand_anywhere_and_never_swallows_an_argument() {
    let dir = quickstart_dir("a.yaml");
    let d = dir.path();
    write_in(
        d,
        "b.yaml",
        quickstart().replace("capacity: 2000", "capacity: 3000"),
    );
    // The default store gets b.yaml (burst 3,000), a.sqlite gets a.yaml (2,000).
    for line in [
        "limits apply -n demo -f b.yaml --local",
        "limits apply -n demo -f a.yaml --local=a.sqlite",
    ] {
        let (code, _, err) = run_in(d, &words(line), &[]);
        assert_eq!(code, 0, "{line}: {err}");
    }
    assert!(d.join(".zae-limiter/local.sqlite").exists() && d.join("a.sqlite").exists());
    let default_store = "rpm: 1,000/min (burst: 3,000)";
    let a_store = "rpm: 1,000/min (burst: 2,000)";
    let env_a: &[(&str, &str)] = &[("ZAEL_LOCAL_STORE", "a.sqlite")];
    // Arguments, environment, and the store the output must come from.
    for (line, env, want) in [
        ("--local user-premium -r gpt-4", &[][..], default_store),
        ("user-premium --local -r gpt-4", &[], default_store),
        ("user-premium -r gpt-4 --local", &[], default_store),
        ("--local=a.sqlite user-premium -r gpt-4", &[], a_store),
        ("user-premium -r gpt-4 --local=a.sqlite", &[], a_store),
        ("user-premium -r gpt-4", env_a, a_store),
        ("--local user-premium -r gpt-4", env_a, a_store),
        (
            "--local=.zae-limiter/local.sqlite user-premium -r gpt-4",
            env_a,
            default_store,
        ),
    ] {
        let line = format!("entity get-limits {line} -n demo");
        let (code, out, err) = run_in(d, &words(&line), env);
        assert_eq!(code, 0, "{line} {env:?}: {err}");
        assert!(
            out.contains(want),
            "{line} {env:?}: read the wrong store:\n{out}"
        );
    }
    // A scope right after --local is the scope, not a store path.
    let (code, out, err) = run_in(
        d,
        &words("cooldown check --local openai/acct-42 -n demo"),
        &[],
    );
    assert_eq!((code, err.as_str()), (0, ""), "{out}");
    assert_eq!(out, "go: no cooldown recorded for openai/acct-42\n");
    // The spaced form is refused as a usage error, never read as a path.
    let (code, _, err) = run_in(
        d,
        &words("entity get-limits user-premium -n demo --local a.sqlite"),
        &[],
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("unexpected argument 'a.sqlite'"), "{err}");
    assert!(!d.join("user-premium").exists());
}

/// `--local=` with nothing after it (`--local=$STORE`, STORE unset) is a
/// usage error, never the default store: a write must not land there.
#[test]
fn an_empty_local_path_is_refused() {
    let dir = quickstart_dir("a.yaml");
    let d = dir.path();
    for line in [
        "limits apply -n demo -f a.yaml --local=",
        "table create -n demo --local=",
        "namespace list -n demo --local=",
    ] {
        let (code, out, err) = run_in(d, &words(line), &[]);
        assert_eq!((code, out.as_str()), (2, ""), "{line}: {err}");
        assert!(
            err.contains("--local= needs a path; write --local alone for the default"),
            "{line}: {err}"
        );
    }
    assert!(
        !d.join(".zae-limiter").exists(),
        "the default store was created"
    );
}

/// A store in a directory this process may not write: every read-only
/// command still reads it (SQLite opens it read-only, immutable when it cannot
/// create its -shm file), and nothing is written there. As root, whom
/// permissions do not stop, the commands run as `nobody` through setpriv.
#[test]
fn read_only_commands_work_on_a_store_in_a_read_only_directory() {
    let dir = quickstart_dir("limits.yaml");
    let store_dir = dir.path().join("ro");
    std::fs::create_dir(&store_dir).unwrap();
    let store = store_dir.join("limits.sqlite");
    let manifest = dir.path().join("limits.yaml");
    let local = format!("--local={}", store.display());
    let m = manifest.to_str().unwrap();
    let (code, _, err) = run_in(
        dir.path(),
        &["limits", "apply", "-n", "demo", "-f", m, &local],
        &[],
    );
    assert_eq!(code, 0, "{err}");
    let mut record = words("cooldown record p/a --resets-in-seconds 60 -n demo");
    record.push(&local);
    let (code, _, err) = run_in(dir.path(), &record, &[]);
    assert_eq!(code, 0, "{err}");
    // Read-only for the commands below.
    use std::os::unix::fs::PermissionsExt;
    let root = running_as_root();
    let as_reader = |args: &[&str]| -> Command {
        let mut cmd = if root {
            let mut c = Command::new("setpriv");
            c.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
                .arg(env!("CARGO_BIN_EXE_zae-limiter"));
            c
        } else {
            Command::new(env!("CARGO_BIN_EXE_zae-limiter"))
        };
        cmd.args(args)
            .arg(&local)
            .current_dir("/")
            .env_remove("ZAEL_LOCAL_STORE")
            .env_remove("ZAEL_STACK");
        cmd
    };
    if root {
        if !common::have("setpriv") {
            assert!(
                std::env::var("ZAEL_REQUIRE_INTEROP").as_deref() != Ok("1"),
                "setpriv (util-linux) is needed to run as nobody"
            );
            eprintln!("skipped: running as root without setpriv");
            return;
        }
        // nobody may enter and read, not write.
        for p in [dir.path(), &store_dir] {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        std::fs::set_permissions(&store, std::fs::Permissions::from_mode(0o644)).unwrap();
    } else {
        std::fs::set_permissions(&store_dir, std::fs::Permissions::from_mode(0o555)).unwrap();
    }
    let before: Vec<_> = std::fs::read_dir(&store_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    let plan = format!("limits plan -n demo -f {m}");
    let diff = format!("limits diff -n demo -f {m}");
    for (line, want_code, want) in [
        (
            "entity get-limits user-premium -r gpt-4 -n demo",
            0,
            "burst: 2,000",
        ),
        ("resource get-defaults gpt-4 -n demo", 0, "rpm"),
        ("system get-defaults -n demo", 0, "rpm"),
        ("namespace list -n demo", 0, "default"),
        (&plan, 0, "No changes."),
        (&diff, 0, "No drift detected."),
        ("cooldown check p/a -n demo", 75, "wait"),
        ("cooldown list -n demo", 0, "p/a"),
    ] {
        let (code, out, err) = outcome(as_reader(&words(line)).output().unwrap());
        assert_eq!(code, want_code, "{line}: {err}");
        assert!(out.contains(want), "{line}: {out}");
    }
    // A write is refused with an error, not a panic or a partial write.
    let (code, _, err) = outcome(
        as_reader(&words("cooldown record p/b --resets-in-seconds 60 -n demo"))
            .output()
            .unwrap(),
    );
    assert_eq!(code, 1, "{err}");
    let after: Vec<_> = std::fs::read_dir(&store_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(before, after);
    std::fs::set_permissions(&store_dir, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn running_as_root() -> bool {
    // `id -u` rather than libc: the test crate has no libc dependency.
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// Misconfigured DynamoDB access is one line that says what to set, and for
/// a local server that it needs a region and credentials too.
#[cfg(feature = "dynamodb")]
#[test]
fn dynamodb_setup_errors_are_one_clear_line() {
    let dir = tempfile::tempdir().unwrap();
    let base = |cmd: &mut Command| {
        cmd.current_dir(dir.path())
            .env_remove("AWS_REGION")
            .env_remove("AWS_DEFAULT_REGION")
            .env_remove("AWS_ACCESS_KEY_ID")
            .env_remove("AWS_SECRET_ACCESS_KEY")
            .env_remove("AWS_SESSION_TOKEN")
            .env_remove("AWS_PROFILE")
            .env("AWS_CONFIG_FILE", "/dev/null")
            .env("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")
            .env("AWS_EC2_METADATA_DISABLED", "true");
    };
    let run = |args: &[&str], env: &[(&str, &str)]| {
        let mut cmd = zae_limiter();
        base(&mut cmd);
        cmd.args(args).envs(env.iter().copied());
        outcome(cmd.output().unwrap())
    };
    let endpoint = ["--endpoint-url", "http://127.0.0.1:9"];
    let create = ["table", "create", "-n", "dev", endpoint[0], endpoint[1]];
    let (code, _, err) = run(&create, &[]);
    assert_eq!(code, 1);
    assert!(err.starts_with("Error: no AWS region configured"), "{err}");
    assert!(
        err.contains("local DynamoDB server") && err.contains("AWS_ACCESS_KEY_ID=x"),
        "{err}"
    );
    let (code, _, err) = run(&create, &[("AWS_REGION", "us-east-1")]);
    assert_eq!(code, 1);
    assert!(
        err.starts_with("Error: no AWS credentials found for CreateTable"),
        "{err}"
    );
    assert!(err.contains("AWS_SECRET_ACCESS_KEY=x"), "{err}");
    for (url, why) in [
        ("not a url", "http:// or https://"),
        ("http://h:99999", "port"),
    ] {
        let (code, _, err) = run(
            &["entity", "get-limits", "u", "--endpoint-url", url],
            &[
                ("AWS_REGION", "us-east-1"),
                ("AWS_ACCESS_KEY_ID", "x"),
                ("AWS_SECRET_ACCESS_KEY", "x"),
            ],
        );
        assert_eq!(code, 1, "{err}");
        assert!(
            err.starts_with("Error: invalid --endpoint-url") && err.contains(why),
            "{err}"
        );
        assert_eq!(err.lines().count(), 1, "{err}");
    }
    for (_, _, err) in [
        run(&create, &[]),
        run(&create, &[("AWS_REGION", "us-east-1")]),
    ] {
        assert_eq!(err.lines().count(), 1, "{err}");
    }
}

/// A 5 MB line is shown around the error, not echoed whole; a NUL byte is
/// named as a control character (no advice about tabs) and shown visibly.
#[test]
fn manifest_errors_stay_readable_on_huge_lines_and_control_characters() {
    let dir = tempfile::tempdir().unwrap();
    write_in(
        dir.path(),
        "huge.yaml",
        format!(
            "namespace: default\nresources:\n  gpt-4:\n    limits:\n      rpm: {{capacity: 0, x: \"{}\"}}\n",
            "a".repeat(5_000_000)
        ),
    );
    let (code, out, _) = run_in(dir.path(), &["limits", "validate", "huge.yaml"], &[]);
    assert_eq!(code, 1);
    assert!(out.len() < 4_000, "{} bytes of output", out.len());
    assert!(
        out.contains("unknown key `x`") && out.contains('…'),
        "{out}"
    );

    write_in(
        dir.path(),
        "nul.yaml",
        b"namespace: default\nresources:\n  gp\0t: {}\n",
    );
    let (code, out, _) = run_in(dir.path(), &["limits", "validate", "nul.yaml"], &[]);
    assert_eq!(code, 1);
    assert!(!out.contains("indentation"), "{out}");
    assert!(
        out.contains("control character") && out.contains("gp\u{2400}t"),
        "{out}"
    );
}

/// Trace errors in the trace's own terms.
#[test]
fn trace_errors_name_the_problem_not_the_parser() {
    let dir = quickstart_dir("limits.yaml");
    let d = dir.path();
    write_in(
        d,
        "frac.jsonl",
        "{\"timestamp\": 1796292556430.5, \"cost\": {\"rpm\": 1}}\n",
    );
    write_in(d, "empty.csv", "");
    let sim = |trace: &str| {
        let line = format!("limits simulate -f limits.yaml -e u -r gpt-4 --trace {trace}");
        run_in(d, &words(&line), &[])
    };
    let (code, _, err) = sim("frac.jsonl");
    assert_eq!(code, 1);
    assert!(
        err.contains("line 1: timestamp 1796292556430.5 is not a whole number of milliseconds"),
        "{err}"
    );
    assert!(
        !err.contains("untagged") && !err.contains("variant"),
        "{err}"
    );
    let (code, _, err) = sim("empty.csv");
    assert_eq!(code, 1);
    assert_eq!(
        err,
        "Error: empty.csv: the CSV trace is empty (no header, no request): start it with a header line such as `timestamp,op,hold,rpm,tpm`, then one line per request\n"
    );
}

/// Every command that takes --detailed-exitcode documents its 2 in the
/// exit status of its --help.
#[test]
fn detailed_exitcode_2_is_documented_where_it_applies() {
    for cmd in ["plan", "diff", "apply"] {
        let (code, help, _) = outcome(
            zae_limiter()
                .args(["limits", cmd, "--help"])
                .output()
                .unwrap(),
        );
        assert_eq!(code, 0);
        let status = help
            .split("Exit status:")
            .nth(1)
            .unwrap_or_else(|| panic!("limits {cmd} --help has no exit status:\n{help}"));
        let status = status.split("\n\n").next().unwrap().replace('\n', " ");
        assert!(
            status.contains("--detailed-exitcode") && status.contains(" 2 "),
            "limits {cmd}: {status}"
        );
    }
}

/// A command, its exit code, the text around its suggestion, the suggestion.
type Suggests = (
    &'static [&'static str],
    i32,
    (&'static str, char),
    &'static str,
);

/// Every command a message suggests repeats the table and store flags it was
/// given, so the copied line reaches the same store instead of falling back
/// to DynamoDB (which has no region here) or the default file.
#[test]
fn suggested_commands_run_as_printed_reach_the_same_store() {
    let dir = quickstart_dir("q.yaml");
    let d = dir.path();
    let store = ["--local=s.sqlite", "-n", "demo"];
    let with = |args: &[&'static str]| [args, &store[..]].concat();
    let (code, _, err) = run_in(d, &with(&["limits", "apply", "-f", "q.yaml"]), &[]);
    assert_eq!(code, 0, "{err}");
    write_in(
        d,
        "q2.yaml",
        quickstart().replacen("capacity: 1000", "capacity: 900", 1),
    );
    let (code, _, err) = run_in(
        d,
        &with(&[
            "cooldown", "record", "p $x/a b", "--status", "401", "-N", "jobs",
        ]),
        &[],
    );
    assert_eq!(code, 0, "{err}");

    let cases: [Suggests; 5] = [
        // A saved plan's "carry out" line.
        (
            // A plan file whose name starts with `-` is not read as an option.
            &["limits", "plan", "-f", "q2.yaml", "-o=-p.plan"],
            0,
            ("To carry out exactly these changes: ", '\n'),
            "zae-limiter limits apply -n demo --local=s.sqlite ./-p.plan",
        ),
        // Reading a namespace that is not registered.
        (
            &["entity", "get-limits", "user-1", "-N", "team"],
            1,
            ("Register it with `", '`'),
            "zae-limiter namespace register team -n demo --local=s.sqlite",
        ),
        // acquire on a namespace that is not registered.
        (
            &["acquire", "u", "-r", "gpt-4", "-N", "jobs2"],
            1,
            ("register it with `", '`'),
            "zae-limiter namespace register jobs2 -n demo --local=s.sqlite",
        ),
        // serve refuses to start on a namespace that is not registered.
        (
            &["serve", "-N", "nope9", "--listen", "127.0.0.1:0"],
            1,
            ("register it with `", '`'),
            "zae-limiter namespace register nope9 -n demo --local=s.sqlite",
        ),
        // A cooldown that needs an operator (in another namespace: -N).
        (
            &["cooldown", "check", "p $x/a b", "-N", "jobs"],
            76,
            ("after fixing it: ", ')'),
            "zae-limiter cooldown clear 'p $x/a b' -n demo --local=s.sqlite -N jobs",
        ),
    ];
    for (args, exit, (from, until), want) in cases {
        let (code, out, err) = run_in(d, &with(args), &[]);
        assert_eq!(code, exit, "{args:?}: {out}{err}");
        let line = between(&format!("{out}{err}"), from, until).to_string();
        assert_eq!(line, want, "{args:?}");
        let (code, out, err) = run_suggested(d, &line);
        assert_eq!(code, 0, "{line}: {out}{err}");
    }
    // A stale saved plan: the command that makes a new one, into the same
    // file, for the same namespace.
    let ok = |args: &[&'static str]| {
        let (code, out, err) = run_in(d, &with(args), &[]);
        assert_eq!(code, 0, "{args:?}: {out}{err}");
    };
    let team = |text: String| text.replacen("namespace: default", "namespace: team", 1);
    write_in(d, "t.yaml", team(quickstart()));
    write_in(
        d,
        "t2.yaml",
        team(quickstart().replacen("capacity: 1000", "capacity: 900", 1)),
    );
    ok(&["limits", "plan", "-q", "-f", "t.yaml", "-o=-s.plan"]);
    ok(&["limits", "apply", "-f", "t2.yaml"]);
    let stale = ["limits", "apply", "./-s.plan"];
    let (code, out, err) = run_in(d, &with(&stale), &[]);
    assert_eq!(code, 1, "{out}{err}");
    let line = between(&err, "Make a new plan (`", '`').to_string();
    assert_eq!(
        line,
        "zae-limiter limits plan -f t.yaml -n demo --local=s.sqlite -N team -o ./-s.plan"
    );
    let (code, out, err) = run_suggested(d, &line);
    assert_eq!(code, 0, "{line}: {out}{err}");
    ok(&stale);

    // The suggestions did what they say.
    let (code, out, _) = run_in(
        d,
        &with(&["cooldown", "check", "p $x/a b", "-N", "jobs"]),
        &[],
    );
    assert_eq!(code, 0, "cleared: {out}");
    let (code, out, err) = run_in(d, &with(&["namespace", "list"]), &[]);
    assert_eq!(code, 0, "{err}");
    assert!(
        ["team", "jobs2", "nope9"].iter().all(|n| out.contains(n)),
        "{out}"
    );
}

/// A store path that is a directory, or a file that does not exist, is
/// named as such (not "disk I/O error", not "table not found"), and nothing
/// is created.
#[test]
fn store_path_errors_say_what_is_wrong_with_the_path() {
    let dir = quickstart_dir("a.yaml");
    let d = dir.path();
    std::fs::create_dir(d.join("adir")).unwrap();
    let env_dir: &[(&str, &str)] = &[("ZAEL_LOCAL_STORE", "adir")];
    for (line, env) in [
        ("namespace list -n demo --local=adir", &[][..]),
        ("namespace list -n demo --local", env_dir),
        ("entity get-limits x -n demo --local=adir", &[]),
        ("table create -n demo --local=adir", &[]),
        ("limits apply -n demo -f a.yaml --local=adir", &[]),
    ] {
        let (code, out, err) = run_in(d, &words(line), env);
        assert_eq!((code, out.as_str()), (1, ""), "{line}: {err}");
        assert_eq!(
            err,
            "Error: local store adir is a directory, not a store file; name a file, e.g. adir/local.sqlite\n",
            "{line} {env:?}"
        );
    }
    assert_eq!(std::fs::read_dir(d.join("adir")).unwrap().count(), 0);

    for line in [
        "entity get-limits x -n demo --local=nodir/x.sqlite",
        "namespace list -n demo --local=nodir/x.sqlite",
        "limits export -n demo --local=nodir/x.sqlite",
    ] {
        let (code, _, err) = run_in(d, &words(line), &[]);
        assert_eq!(code, 1, "{line}: {err}");
        assert!(
            err.starts_with("Error: local store nodir/x.sqlite does not exist (no such file), so it has no table 'demo'. Check the path"),
            "{line}: {err}"
        );
    }
    assert!(!d.join("nodir").exists());

    // Below a file, or a device: said so, for reads and writes alike (was a
    // "table create" hint that could not work, or "disk I/O error").
    for (store, says) in [
        (
            "a.yaml/s.sqlite",
            "Error: local store a.yaml/s.sqlite cannot be created or read: a.yaml is a file, not a directory; check the path\n",
        ),
        (
            "a.yaml/x/s.sqlite",
            "Error: local store a.yaml/x/s.sqlite cannot be created or read: a.yaml is a file, not a directory; check the path\n",
        ),
        (
            "/dev/null",
            "Error: local store /dev/null is a device, not a store file; name a regular file (or one that does not exist yet)\n",
        ),
    ] {
        for cmd in [
            "entity get-limits x -n demo",
            "table create -n demo",
            "limits plan -n demo -f a.yaml",
            "limits apply -n demo -f a.yaml",
        ] {
            let line = format!("{cmd} --local={store}");
            let (code, out, err) = run_in(d, &words(&line), &[]);
            assert_eq!((code, out.as_str(), err.as_str()), (1, "", says), "{line}");
        }
    }
    assert_eq!(
        quickstart(),
        std::fs::read_to_string(d.join("a.yaml")).unwrap()
    );
}
