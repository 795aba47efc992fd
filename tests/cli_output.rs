//! Where output goes, for every command group: standard output that fails
//! (`> /dev/full`: exit 1 with a message), standard output that is a closed
//! pipe (`| head -c1`: a quiet stop, the command's own exit code, never a
//! panic), and output files that are not regular files (`-o` to a FIFO, a
//! symlink, `/dev/null`: written through, never replaced).

mod common;

use std::fs::File;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use common::{describe, outcome, zae_limiter};

fn root(rel: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(rel)
        .display()
        .to_string()
}

/// A local store with the quickstart manifest applied and a cooldown recorded,
/// so every read command has something to print.
struct Env {
    dir: tempfile::TempDir,
}

impl Env {
    fn new() -> Env {
        let env = Env {
            dir: tempfile::tempdir().expect("temp dir"),
        };
        let manifest = root("fixtures/manifests/valid/quickstart.yaml");
        for args in [
            vec!["limits", "apply", "-f", manifest.as_str()],
            vec!["cooldown", "record", "openai/a", "--retry-after", "3600"],
        ] {
            let out = env.cmd(&args).output().expect("run");
            assert_eq!(out.status.code(), Some(0), "{args:?}: {}", describe(&out));
        }
        env
    }

    fn store(&self) -> PathBuf {
        self.dir.path().join("store.sqlite")
    }

    fn cmd(&self, args: &[&str]) -> Command {
        let mut cmd = zae_limiter();
        cmd.args(args)
            .env("ZAEL_LOCAL_STORE", self.store())
            .env("ZAEL_STACK", "demo")
            .env("ZAEL_NOW", "2026-12-02T10:00:00Z")
            .current_dir(self.dir.path());
        cmd
    }

    /// [`Env::cmd`] started with piped standard output and error.
    fn spawn(&self, args: &[&str]) -> std::process::Child {
        self.cmd(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn")
    }
}

/// One command line per command group, each printing to standard output, with
/// the exit code it has when its output is fine.
fn every_group() -> Vec<(Vec<String>, i32)> {
    let manifest = root("fixtures/manifests/valid/quickstart.yaml");
    let invalid = root("fixtures/manifests/invalid");
    let invalid = std::fs::read_dir(&invalid)
        .expect("invalid fixtures")
        .map(|e| e.expect("entry").path())
        .find(|p| p.extension().is_some_and(|x| x == "yaml"))
        .expect("an invalid manifest")
        .display()
        .to_string();
    let sim = root("fixtures/simulate/every-kind.yaml");
    let trace = root("fixtures/simulate/every-kind.csv");
    let lines: Vec<(Vec<&str>, i32)> = vec![
        (vec!["limits", "validate", &manifest, "--format", "json"], 0),
        (vec!["limits", "validate", &invalid], 1),
        (vec!["limits", "plan", "-f", &manifest], 0),
        (vec!["limits", "diff", "-f", &manifest], 0),
        (vec!["limits", "apply", "-f", &manifest], 0),
        (vec!["limits", "cfn-template", "-f", &manifest], 0),
        (
            vec![
                "limits", "simulate", "-f", &sim, "-e", "u1", "-r", "gpt-4", "--trace", &trace,
            ],
            0,
        ),
        (
            vec![
                "limits",
                "gen-trace",
                "--rate",
                "5/s",
                "--duration",
                "1h",
                "--start",
                "2026-12-07T09:00:00Z",
            ],
            0,
        ),
        (
            vec!["entity", "get-limits", "user-premium", "-r", "gpt-4"],
            0,
        ),
        (vec!["resource", "get-defaults", "gpt-4"], 0),
        (vec!["system", "get-defaults"], 0),
        (vec!["namespace", "list"], 0),
        (vec!["namespace", "register", "other"], 0),
        (
            vec![
                "cron",
                "check",
                "* 9-17 * * 1-5",
                "--from",
                "2026-03-06T00:00:00Z",
                "--next",
                "3",
            ],
            0,
        ),
        (vec!["cooldown", "check", "openai/a"], 75),
        (vec!["cooldown", "check", "openai/free"], 0),
        (vec!["cooldown", "probe", "openai/a", "--holder", "w"], 75),
        (
            vec!["cooldown", "record", "openai/b", "--retry-after", "60"],
            0,
        ),
        (vec!["cooldown", "list"], 0),
        (vec!["cooldown", "list", "--format", "json"], 0),
        (vec!["table", "create", "--local"], 0),
        (vec!["completions", "bash"], 0),
        (vec!["completions", "zsh"], 0),
    ];
    lines
        .into_iter()
        .map(|(a, code)| (a.iter().map(|s| s.to_string()).collect(), code))
        .collect()
}

fn no_panic(args: &[String], out: &Output) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !err.contains("panicked") && out.status.code() != Some(101),
        "{args:?} panicked: {}",
        describe(out)
    );
}

#[test]
fn a_full_disk_is_exit_1_with_a_message() {
    let env = Env::new();
    for (args, _) in every_group() {
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let full = File::options()
            .write(true)
            .open("/dev/full")
            .expect("/dev/full");
        let out = env
            .cmd(&refs)
            .stdout(Stdio::from(full))
            .output()
            .expect("run");
        no_panic(&args, &out);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {}", describe(&out));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("cannot write to standard output: No space left on device"),
            "{args:?}: {err}"
        );
    }
}

/// Runs `cmd` with its standard output a pipe whose read end is closed
/// before the command writes anything (`… | head` at its quickest).
fn with_stdout_closed(cmd: &mut Command) -> Output {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    child.wait_with_output().unwrap()
}

#[test]
fn a_closed_pipe_is_a_quiet_stop_with_the_commands_own_exit_code() {
    let env = Env::new();
    for (args, code) in every_group() {
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        // The read end is closed before the command writes anything.
        let mut child = env.spawn(&refs);
        drop(child.stdout.take());
        let out = child.wait_with_output().expect("wait");
        no_panic(&args, &out);
        common::assert_exit(&out, code, format_args!("{args:?}"));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !err.contains("Broken pipe") && !err.contains("cannot write"),
            "{args:?}: {err}"
        );
    }
}

#[test]
fn head_c1_reads_one_byte_and_nothing_panics() {
    let env = Env::new();
    for args in [
        vec!["completions", "bash"],
        vec![
            "limits",
            "gen-trace",
            "--rate",
            "50/s",
            "--duration",
            "1d",
            "--start",
            "2026-12-07T09:00:00Z",
        ],
        vec!["cooldown", "check", "openai/a"],
    ] {
        let mut child = env.spawn(&args);
        let mut stdout = child.stdout.take().expect("stdout");
        let mut one = [0u8; 1];
        std::io::Read::read_exact(&mut stdout, &mut one).expect("one byte");
        drop(stdout);
        let out = child.wait_with_output().expect("wait");
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        no_panic(&args, &out);
    }
}

fn mkfifo(path: &Path) {
    let status = Command::new("mkfifo").arg(path).status().expect("mkfifo");
    assert!(status.success());
}

/// `-o` and `--svg` to each kind of path.
#[test]
fn output_files_are_written_through_to_what_is_not_a_regular_file() {
    let dir = tempfile::tempdir().expect("temp dir");
    let sim = root("fixtures/simulate/every-kind.yaml");
    let trace = root("fixtures/simulate/every-kind.csv");
    type Writer<'a> = Box<dyn Fn(&Path) -> Vec<String> + 'a>;
    let writers: Vec<Writer<'_>> = vec![
        Box::new(|p: &Path| {
            [
                "limits",
                "gen-trace",
                "--rate",
                "5/s",
                "--duration",
                "10s",
                "--start",
                "2026-12-07T09:00:00Z",
                "-o",
            ]
            .iter()
            .map(|s| s.to_string())
            .chain([p.display().to_string()])
            .collect()
        }),
        Box::new(|p: &Path| {
            [
                "limits", "simulate", "-f", &sim, "-e", "u1", "-r", "gpt-4", "--trace", &trace,
                "--svg",
            ]
            .iter()
            .map(|s| s.to_string())
            .chain([p.display().to_string()])
            .collect()
        }),
    ];
    for (i, args_for) in writers.iter().enumerate() {
        // A regular file: replaced whole.
        let file = dir.path().join(format!("out{i}"));
        std::fs::write(&file, "old").unwrap();
        let out = zae_limiter().args(args_for(&file)).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(text.len() > 3 && !text.starts_with("old"), "{text}");

        // A symlink: still a symlink; its target holds the output.
        let target = dir.path().join(format!("target{i}"));
        let link = dir.path().join(format!("link{i}"));
        std::fs::write(&target, "old").unwrap();
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let out = zae_limiter().args(args_for(&link)).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
        assert!(std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(
            std::fs::read_to_string(&target).unwrap(),
            std::fs::read_to_string(&file).unwrap()
        );

        // A FIFO: still a FIFO; the reader gets the output.
        let fifo = dir.path().join(format!("fifo{i}"));
        mkfifo(&fifo);
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || std::fs::read_to_string(fifo).unwrap())
        };
        let out = zae_limiter().args(args_for(&fifo)).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
        let got = reader.join().unwrap();
        assert_eq!(got, std::fs::read_to_string(&file).unwrap());
        assert!(std::fs::symlink_metadata(&fifo)
            .unwrap()
            .file_type()
            .is_fifo());

        // /dev/null: still the device (a regular file there would break the machine).
        let out = zae_limiter()
            .args(args_for(Path::new("/dev/null")))
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
        assert!(std::fs::symlink_metadata("/dev/null")
            .unwrap()
            .file_type()
            .is_char_device());

        // /dev/stdout: the descriptor the command was given (a pipe here,
        // a link to `pipe:[…]`, no path) gets the output…
        let stdout = Path::new("/dev/stdout");
        let out = zae_limiter().args(args_for(stdout)).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
        let want = std::fs::read_to_string(&file).unwrap();
        // (`simulate` prints its report there too.)
        let got = String::from_utf8_lossy(&out.stdout);
        assert!(got.contains(&want), "{i}: /dev/stdout lacks the output");
        // …a reader that left ends it quietly (`-o /dev/stdout | head`)…
        let mut cmd = zae_limiter();
        let out = with_stdout_closed(cmd.args(args_for(stdout)));
        assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
        assert!(out.stderr.is_empty(), "{}", describe(&out));
        // …and a file the shell opened for it gets the output in the
        // descriptor it holds (`-o /dev/stdout >> log`: appended).
        let log = dir.path().join(format!("log{i}"));
        std::fs::write(&log, "before\n").unwrap();
        let appending = File::options().append(true).open(&log).unwrap();
        let out = zae_limiter()
            .args(args_for(stdout))
            .stdout(Stdio::from(appending))
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
        let got = std::fs::read_to_string(&log).unwrap();
        assert!(
            got.starts_with("before\n") && got.contains(&want),
            "{i}: the log lost its line or lacks the output"
        );

        // A directory: refused with a message.
        let (code, _, err) = outcome(zae_limiter().args(args_for(dir.path())).output().unwrap());
        assert_eq!(code, 1, "{err}");
        assert!(err.contains("directory"), "{err}");
    }
}

/// An output file that is one of the command's inputs is refused before any
/// work (exit 2, both flags and the path named), and the input is unchanged.
#[test]
fn an_output_file_that_is_an_input_is_refused_and_left_unchanged() {
    let env = Env::new();
    let dir = env.dir.path();
    let manifest = dir.join("q.yaml");
    std::fs::copy(root("fixtures/manifests/valid/quickstart.yaml"), &manifest).unwrap();
    let sim = dir.join("sim.yaml");
    std::fs::copy(root("fixtures/simulate/every-kind.yaml"), &sim).unwrap();
    let trace = dir.join("trace.csv");
    std::fs::copy(root("fixtures/simulate/every-kind.csv"), &trace).unwrap();
    std::os::unix::fs::symlink("q.yaml", dir.join("link.yaml")).unwrap();
    let store_path = env.store();
    let store = store_path.display().to_string();
    let cases: Vec<(Vec<&str>, &Path, &str, &str)> = vec![
        (
            vec!["limits", "plan", "-f", "q.yaml", "-o", "q.yaml", "-q"],
            &manifest,
            "-o/--out q.yaml",
            "(-f/--file q.yaml)",
        ),
        (
            vec!["limits", "plan", "-f", "q.yaml", "-o", &store, "-q"],
            &store_path,
            "-o/--out",
            "the local store (ZAEL_LOCAL_STORE=",
        ),
        (
            vec![
                "limits", "explain", "-f", "q.yaml", "-e", "a", "-r", "gpt-4", "--svg", "q.yaml",
            ],
            &manifest,
            "--svg q.yaml",
            "(-f/--file q.yaml)",
        ),
        (
            // Through a symlink.
            vec![
                "limits",
                "explain",
                "-f",
                "q.yaml",
                "-e",
                "a",
                "-r",
                "gpt-4",
                "--svg",
                "link.yaml",
            ],
            &manifest,
            "--svg link.yaml",
            "(-f/--file q.yaml)",
        ),
        (
            vec![
                "limits",
                "simulate",
                "-f",
                "sim.yaml",
                "-e",
                "u1",
                "-r",
                "gpt-4",
                "--trace",
                "trace.csv",
                "--svg",
                "./trace.csv",
            ],
            &trace,
            "--svg ./trace.csv",
            "the trace (--trace trace.csv)",
        ),
        (
            vec!["limits", "export", "-o", &store],
            &store_path,
            "-o/--output",
            "the local store (ZAEL_LOCAL_STORE=",
        ),
    ];
    for (args, input, out_flag, in_flag) in cases {
        let before = std::fs::read(input).unwrap();
        let (code, stdout, err) = outcome(env.cmd(&args).output().unwrap());
        assert_eq!(code, 2, "{args:?}: {err}");
        assert_eq!(stdout, "", "{args:?}");
        assert!(
            err.starts_with("Error: ") && err.contains(out_flag),
            "{args:?}: {err}"
        );
        assert!(err.contains(in_flag), "{args:?}: {err}");
        assert!(
            err.contains("another path; nothing was written"),
            "{args:?}: {err}"
        );
        assert_eq!(
            std::fs::read(input).unwrap(),
            before,
            "{args:?} changed {input:?}"
        );
    }
    // The manifest read from standard input, redirected from the output.
    let before = std::fs::read(&manifest).unwrap();
    let out = env
        .cmd(&["limits", "plan", "-f", "-", "-o", "q.yaml", "-q"])
        .stdin(File::open(&manifest).unwrap())
        .output()
        .unwrap();
    let (code, _, err) = outcome(out);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("-o/--out q.yaml is the manifest (-f/--file -, standard input)"),
        "{err}"
    );
    assert_eq!(std::fs::read(&manifest).unwrap(), before);
    // The same commands with another output path work.
    let out = env
        .cmd(&["limits", "plan", "-f", "q.yaml", "-o", "q.plan", "-q"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let out = env
        .cmd(&["limits", "plan", "-f", "-", "-o", "q2.plan", "-q"])
        .stdin(File::open(&manifest).unwrap())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
}

/// `--help` and `--version` (the tool's, a command's, `help`) go through the
/// same output path: a full disk is exit 1 with a message, a closed pipe a
/// quiet 0.
#[test]
fn help_and_version_fail_on_a_full_disk_like_any_output() {
    for args in [
        vec!["--help"],
        vec!["-V"],
        vec!["--version"],
        vec!["limits", "plan", "--help"],
        vec!["cooldown", "check", "-h"],
        vec!["help", "limits"],
        vec!["limits", "--version"],
    ] {
        let full = File::options().write(true).open("/dev/full").unwrap();
        let out = zae_limiter()
            .args(&args)
            .stdout(Stdio::from(full))
            .output()
            .unwrap();
        common::assert_exit(&out, 1, format_args!("{args:?} > /dev/full"));
        common::assert_stderr_has(&out, "cannot write to standard output: No space left");

        let out = with_stdout_closed(zae_limiter().args(&args));
        common::assert_exit(&out, 0, format_args!("{args:?} | (closed)"));
        assert!(out.stderr.is_empty(), "{}", describe(&out));

        let out = zae_limiter().args(&args).output().unwrap();
        common::assert_exit(&out, 0, format_args!("{args:?}"));
        assert!(
            !out.stdout.is_empty() && out.stderr.is_empty(),
            "{}",
            describe(&out)
        );
    }
}
