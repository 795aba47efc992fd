//! Shared by the lock tests on both stores (tests/cli_lock.rs on the local
//! store, tests/interop_lock.rs on moto): applies running as real processes
//! that a test can pause at a step (`ZAEL_TEST_PAUSE_AT`), resume, signal or
//! kill, and the small manifests the concurrent rounds apply.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read};

use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use zae_limiter::plan::level::Level;

/// A running `zae-limiter` whose stderr is watched line by line.
pub struct Running {
    child: Child,
    pub pid: u32,
    lines: Receiver<String>,
    stderr: Arc<Mutex<String>>,
    stdout: Option<std::thread::JoinHandle<String>>,
}

/// Starts `cmd` with piped standard streams. Its standard input stays open
/// until [`Running::resume`] (a paused apply waits for it to close).
pub fn spawn(mut cmd: Command) -> Running {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start zae-limiter");
    let pid = child.id();
    let (tx, lines) = mpsc::channel();
    let stderr = Arc::new(Mutex::new(String::new()));
    let mut err = BufReader::new(child.stderr.take().expect("stderr"));
    let all = stderr.clone();
    std::thread::spawn(move || {
        let mut line = String::new();
        while matches!(err.read_line(&mut line), Ok(n) if n > 0) {
            all.lock().unwrap().push_str(&line);
            let _ = tx.send(line.clone());
            line.clear();
        }
    });
    let mut out = child.stdout.take().expect("stdout");
    let stdout = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    Running {
        child,
        pid,
        lines,
        stderr,
        stdout: Some(stdout),
    }
}

impl Running {
    /// Waits (at most 60 s) until a stderr line contains `needle`.
    pub fn wait_for(&self, needle: &str) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) if line.contains(needle) => return,
                Ok(_) => {}
                Err(_) => panic!(
                    "no stderr line with {needle:?} within 60 s; stderr so far:\n{}",
                    self.stderr.lock().unwrap()
                ),
            }
        }
    }

    /// Lets a paused apply go on (closes its standard input).
    pub fn resume(&mut self) {
        drop(self.child.stdin.take());
    }

    /// Sends `signal` (`TERM`, `INT`) to the process.
    pub fn signal(&self, signal: &str) {
        let ok = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(self.pid.to_string())
            .status()
            .expect("run kill")
            .success();
        assert!(ok, "kill -{signal} {} failed", self.pid);
    }

    /// `kill -9`: no cleanup at all.
    pub fn kill9(&mut self) {
        self.child.kill().expect("kill -9");
    }

    /// Waits for the end: (exit code, None when killed by a signal; stdout; stderr).
    pub fn finish(mut self) -> (Option<i32>, String, String) {
        self.resume();
        let status = self.child.wait().expect("wait");
        let stdout = self
            .stdout
            .take()
            .map(|t| t.join().unwrap())
            .unwrap_or_default();
        // The stderr thread ends with the pipe; give it a moment to drain.
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline
            && self.lines.recv_timeout(Duration::from_millis(50)).is_ok()
        {}
        let stderr = self.stderr.lock().unwrap().clone();
        (status.code(), stdout, stderr)
    }
}

/// One side of a concurrent round: a small manifest of its own levels.
pub struct Side {
    pub yaml: String,
    /// The config items it declares, as (PK suffix after the namespace id, SK).
    pub levels: Vec<(String, String)>,
}

/// Round `i`, side A: resource `r` and three entities on it (4 levels).
pub fn side_a(i: usize) -> Side {
    side(&format!("a{i}x"), &["r"], 3, 10 + i)
}

/// Round `i`, side B: resources `r` and `s`, two entities on each (6 levels).
pub fn side_b(i: usize) -> Side {
    side(&format!("b{i}x"), &["r", "s"], 2, 100 + i)
}

fn side(prefix: &str, resources: &[&str], entities: usize, capacity: usize) -> Side {
    let mut yaml = String::from("namespace: default\nresources:\n");
    let mut levels = Vec::new();
    for r in resources {
        yaml.push_str(&format!(
            "  {r}:\n    limits:\n      rpm:\n        capacity: {capacity}\n"
        ));
        levels.push((format!("/RESOURCE#{r}"), "#CONFIG".to_string()));
    }
    yaml.push_str("entities:\n");
    for k in 0..entities {
        yaml.push_str(&format!("  {prefix}{k}:\n    resources:\n"));
        for r in resources {
            yaml.push_str(&format!(
                "      {r}:\n        limits:\n          rpm:\n            capacity: {}\n",
                capacity + k
            ));
            levels.push((format!("/ENTITY#{prefix}{k}"), format!("#CONFIG#{r}")));
        }
    }
    levels.sort();
    Side { yaml, levels }
}

/// How a round's two applies ended, judged from their outcomes: which
/// manifest must be in force, and whether they contended for the lock.
#[derive(Debug, PartialEq, Eq)]
pub enum Round {
    /// `winner` (0 or 1) applied; the other failed naming it.
    Refused { winner: usize },
    /// Both applied; `last` waited for the other's lock and applied on top.
    Waited { last: usize },
    /// Both applied one after the other without meeting (no contention).
    Apart,
}

/// Judges a round from the two outcomes `(code, stderr)` and pids; panics on
/// anything the lock must prevent.
pub fn judge(out: [&(Option<i32>, String, String); 2], pids: [u32; 2]) -> Round {
    let ok = |i: usize| out[i].0 == Some(0);
    let locked = |i: usize| {
        let (code, _, err) = out[i];
        *code == Some(1)
            && err.contains("is locked by another apply")
            && err.contains(&format!("(pid {})", pids[1 - i]))
    };
    let waited = |i: usize| out[i].2.contains("Waiting up to");
    match (ok(0), ok(1)) {
        (true, false) if locked(1) => Round::Refused { winner: 0 },
        (false, true) if locked(0) => Round::Refused { winner: 1 },
        (true, true) if waited(0) && !waited(1) => Round::Waited { last: 0 },
        (true, true) if waited(1) && !waited(0) => Round::Waited { last: 1 },
        (true, true) if !waited(0) && !waited(1) => Round::Apart,
        _ => panic!(
            "unexpected outcomes:\n--- first\n{:?}\n--- second\n{:?}",
            out[0], out[1]
        ),
    }
}

/// A store the rounds run against, through the binary.
pub trait Target {
    /// Writes a manifest file; returns its path.
    fn file(&self, name: &str, text: &str) -> String;
    /// `zae-limiter ARGS` on this store's table, not started.
    fn cmd(&self, args: &[&str]) -> Command;
    /// The namespace's config items, as (PK after the namespace id, SK), sorted.
    fn config_items(&self) -> Vec<(String, String)>;
    /// Whether the namespace's lock item exists.
    fn locked(&self) -> bool;
}

/// Round `i`'s two manifests ([`side_a`], [`side_b`]) and their files.
pub fn round_files(t: &impl Target, i: usize, tag: &str) -> ([Side; 2], [String; 2]) {
    let sides = [side_a(i), side_b(i)];
    let files = [0, 1].map(|k| t.file(&format!("{tag}{i}-{k}.yaml"), &sides[k].yaml));
    (sides, files)
}

/// `rounds` rounds of two applies of different manifests started together
/// (odd rounds with `--lock-timeout 60s`, even ones failing at once). Each
/// must end with exactly one manifest in force (its plan reports no changes,
/// the other's does not), with no config item but its levels and no lock
/// left, the other apply having failed naming the holder, or waited and
/// applied on top. Returns how many rounds met at the lock.
pub fn concurrent_rounds(t: &impl Target, rounds: usize) -> usize {
    let mut contended = 0;
    for i in 0..rounds {
        let (sides, files) = round_files(t, i, "r");
        let timeout = if i % 2 == 1 { "60s" } else { "0" };
        let procs = files
            .clone()
            .map(|f| spawn(t.cmd(&["limits", "apply", "-q", "-f", &f, "--lock-timeout", timeout])));
        let pids = [procs[0].pid, procs[1].pid];
        let [a, b] = procs.map(Running::finish);
        let round = judge([&a, &b], pids);
        let in_force = files.clone().map(|f| {
            let args = ["limits", "plan", "-q", "--detailed-exitcode", "-f", &f];
            t.cmd(&args).output().expect("run plan").status.code() == Some(0)
        });
        let winner = match round {
            Round::Refused { winner } | Round::Waited { last: winner } => {
                contended += 1;
                winner
            }
            Round::Apart => in_force
                .iter()
                .position(|b| *b)
                .expect("one manifest in force"),
        };
        assert!(
            in_force[winner] && !in_force[1 - winner],
            "round {i} ({round:?}): plans in force {in_force:?}"
        );
        assert_eq!(
            t.config_items(),
            sides[winner].levels,
            "round {i}: the namespace holds exactly the winner's levels"
        );
        assert!(!t.locked(), "round {i}: the lock was released");
    }
    eprintln!("{contended} of {rounds} rounds contended for the lock");
    contended
}

/// The level of a config item key (PK without the namespace id, SK).
pub fn level_of(pk: &str, sk: &str) -> Level {
    if pk == "/SYSTEM#" {
        Level::System
    } else if let Some(r) = pk.strip_prefix("/RESOURCE#") {
        Level::Resource(r.to_string())
    } else {
        let e = pk.strip_prefix("/ENTITY#").expect("an entity level");
        Level::Entity(e.to_string(), sk["#CONFIG#".len()..].to_string())
    }
}
