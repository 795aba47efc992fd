//! The runtime's documentation teaches with code that runs: the examples of
//! `acquire --help` and `reservation … --help` run in order, each as written;
//! the README's shell recipe (a whole script, in a `shell` block) runs as
//! written against a local store; and its Rust example is the doc test of
//! `src/runtime/mod.rs`, line for line.

mod common;

use std::path::Path;
use std::process::Command;

const HEADING: &str = "### Enforce rolling windows and concurrency limits: `acquire`";

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The first fenced block of `lang` in the README's acquire section.
/// `$PATH` with the directory of the binary under test first, so the docs'
/// `zae-limiter` commands run it.
fn path_with_the_binary() -> String {
    let bin = Path::new(env!("CARGO_BIN_EXE_zae-limiter"));
    format!(
        "{}:{}",
        bin.parent().expect("bin dir").display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

fn readme_block(lang: &str) -> String {
    let readme = std::fs::read_to_string(root().join("README.md")).expect("README.md");
    let section = &readme[readme.find(HEADING).expect("the acquire section")..];
    let fence = format!("```{lang}\n");
    let start = section.find(&fence).expect("a fenced block") + fence.len();
    let len = section[start..].find("```\n").expect("a closing fence");
    section[start..start + len].to_string()
}

#[test]
fn the_rust_example_is_the_doc_test() {
    let src = std::fs::read_to_string(root().join("src/runtime/mod.rs")).expect("mod.rs");
    let start = src.find("//! ```rust\n").expect("the doc test") + "//! ```rust\n".len();
    let end = start + src[start..].find("//! ```\n").expect("its end");
    let visible: Vec<&str> = src[start..end]
        .lines()
        .map(|l| {
            l.strip_prefix("//! ")
                .unwrap_or(l.trim_start_matches("//!"))
        })
        .filter(|l| !(l.starts_with("# ") || *l == "#"))
        .collect();
    assert_eq!(
        readme_block("rust").trim_end(),
        visible.join("\n").trim_end(),
        "README's Rust example and the doc test of src/runtime/mod.rs differ"
    );
}

#[test]
fn the_shell_recipe_runs_three_of_four_jobs_and_releases_every_slot() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = format!(
        "--local={} -n demo",
        dir.path().join("limits.sqlite").display()
    );
    let recipe = readme_block("shell");
    let store_line = recipe
        .lines()
        .find(|l| l.starts_with("STORE="))
        .expect("a STORE= line");
    let script = dir.path().join("export.sh");
    std::fs::write(
        &script,
        recipe.replace(store_line, &format!("STORE=\"{store}\"")),
    )
    .expect("write the recipe");
    let path = path_with_the_binary();
    let zl = |args: &str| {
        let out = Command::new("sh")
            .args(["-c", &format!("zae-limiter {args} {store}")])
            .env("PATH", &path)
            .env_remove("ZAEL_NOW")
            .env_remove("ZAEL_LOCAL_STORE")
            .current_dir(root())
            .output()
            .expect("run zae-limiter");
        assert!(out.status.success(), "zae-limiter {args}: {out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    zl("limits apply -f fixtures/runtime/jobs.yaml");

    // Four jobs at once for one account: three slots, so three do the work.
    let ran = dir.path().join("ran");
    let outs = common::run_together((0..4).map(|_| {
        let mut job = Command::new("sh");
        job.arg(&script)
            .args(["acct-1", "sh", "-c", "echo x >> \"$1\"; sleep 2", "work"])
            .arg(&ran)
            .env("PATH", &path)
            .env_remove("ZAEL_NOW")
            .env_remove("ZAEL_LOCAL_STORE");
        job
    }));
    for o in &outs {
        assert_eq!(o.status.code(), Some(0), "{o:?}");
    }
    let runs = std::fs::read_to_string(&ran)
        .unwrap_or_default()
        .lines()
        .count();
    assert_eq!(runs, 3, "jobs that did the work: {outs:?}");
    let refused: Vec<String> = outs
        .iter()
        .map(|o| String::from_utf8_lossy(&o.stderr).into_owned())
        .filter(|e| e.contains("refused"))
        .collect();
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert!(
        refused[0].contains("in_flight (concurrency): 0 of 3 slots free"),
        "{}",
        refused[0]
    );
    // Every trap released its slot.
    let now = zl("acquire acct-1 -r exports --mode preview --format json");
    assert_eq!(free_slots(&now), 3, "{now}");
    // A failing job's status comes through, and its slot is released too.
    let out = Command::new("sh")
        .arg(&script)
        .args(["acct-1", "sh", "-c", "exit 3"])
        .env("PATH", &path)
        .env_remove("ZAEL_NOW")
        .env_remove("ZAEL_LOCAL_STORE")
        .output()
        .expect("run a failing job");
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    let now = zl("acquire acct-1 -r exports --mode preview --format json");
    assert_eq!(free_slots(&now), 3, "{now}");
}

/// The free slots of `in_flight` in an acquire's JSON answer.
fn free_slots(answer: &str) -> u64 {
    let doc: serde_json::Value = serde_json::from_str(answer).expect("JSON");
    doc["limits"]
        .as_array()
        .expect("limits")
        .iter()
        .find(|l| l["name"] == "in_flight")
        .and_then(|l| l["remaining"].as_u64())
        .expect("in_flight's free slots")
}

/// The example lines of a help text (after "Examples:", up to a blank line),
/// `\` continuations joined.
fn help_examples(args: &[&str]) -> Vec<String> {
    let out = Command::new(env!("CARGO_BIN_EXE_zae-limiter"))
        .args(args)
        .arg("--help")
        .output()
        .expect("--help");
    let help = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut examples = Vec::new();
    let mut current = String::new();
    for line in help
        .lines()
        .skip_while(|l| *l != "Examples:")
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
    {
        match line.trim().strip_suffix('\\') {
            Some(part) => current.push_str(part),
            None => {
                current.push_str(line.trim());
                examples.push(std::mem::take(&mut current));
            }
        }
    }
    examples
}

#[test]
fn every_help_example_of_acquire_and_reservation_runs() {
    let dir = tempfile::tempdir().expect("temp dir");
    std::os::unix::fs::symlink(root().join("fixtures"), dir.path().join("fixtures"))
        .expect("link fixtures");
    let path = path_with_the_binary();
    let mut ran = 0;
    for cmd in [
        &["acquire"][..],
        &["reservation", "release"],
        &["reservation", "commit"],
        &["reservation", "extend"],
    ] {
        let examples = help_examples(cmd);
        assert!(examples.len() >= 2, "{cmd:?}: {examples:?}");
        for ex in examples {
            let out = Command::new("sh")
                .args(["-c", &ex])
                .current_dir(dir.path())
                .env("PATH", &path)
                .env_remove("ZAEL_NOW")
                .env_remove("ZAEL_LOCAL_STORE")
                .env_remove("ZAEL_STACK")
                .output()
                .expect("run the example");
            assert!(out.status.success(), "{cmd:?} example `{ex}`: {out:?}");
            ran += 1;
        }
    }
    assert_eq!(ran, 10);
}
