//! `zae-limiter acquire` and `reservation release|commit|extend` across real
//! processes on every store available (the local store always, DynamoDB on
//! moto when `ZAEL_TEST_DYNAMODB_ENDPOINT` is set): many processes at once
//! against concurrency and rolling limits, a holder killed with `kill -9`,
//! heartbeats, retry-after, limits changed by `limits apply`, errors and
//! `on_unavailable`. "Now" is `ZAEL_NOW` in every process.

mod backends;
mod common;

use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use backends::{backends, describe, Backend};
use common::manifest::manifest;
use common::{assert_stderr_has, assert_stdout_has};
use serde_json::Value;
use zae_limiter::clock::rfc3339;
use zae_limiter::store::{AttrValue, Key, WriteOp};

/// The scenarios' epoch: 2026-12-02T10:00:00Z.
const T0_MS: i64 = 1_796_205_600_000;

/// `ZAEL_NOW` at `offset_ms` after the epoch.
fn at(offset_ms: i64) -> String {
    rfc3339(T0_MS + offset_ms)
}

fn code(out: &Output) -> i32 {
    out.status.code().unwrap_or(-1)
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The runtime commands on a [`Backend`].
impl Backend {
    /// `limits apply` of a manifest text to this store.
    fn apply(&self, manifest: &str) {
        self.apply_at(&at(0), manifest);
    }

    /// `ARGS… <store flags>` at `now_ms` after the epoch.
    fn zl(&self, now_ms: i64, args: &[&str]) -> Output {
        self.run(&at(now_ms), &self.with_flags(args))
    }

    /// Like [`Backend::zl`], asserting the exit code.
    fn expect(&self, want: i32, now_ms: i64, args: &[&str]) -> Output {
        let out = self.zl(now_ms, args);
        self.assert_exit(&out, want, format_args!("{args:?} at {}", at(now_ms)));
        out
    }

    /// `acquire ENTITY -r RESOURCE EXTRA… --format json`, asserting the exit code.
    fn acquire(
        &self,
        want: i32,
        now_ms: i64,
        entity: &str,
        resource: &str,
        extra: &[&str],
    ) -> Value {
        let mut args = vec!["acquire", entity, "-r", resource, "--format", "json"];
        args.extend_from_slice(extra);
        let out = self.expect(want, now_ms, &args);
        serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("[{}] not JSON ({e}):\n{}", self.label, describe(&out)))
    }

    /// `n` processes of `ARGS… <store flags>` started together at `now_ms`.
    fn at_once(&self, n: usize, now_ms: i64, args: &[&str]) -> Vec<Output> {
        let now = at(now_ms);
        common::run_together((0..n).map(|_| self.command(&now, &self.with_flags(args))))
    }

    /// The state item of (entity, resource), as stored.
    fn state_item(&self, entity: &str, resource: &str) -> Option<zae_limiter::store::Item> {
        let ns = self.namespace_id("default");
        let key = Key::new(format!("{ns}/RUNTIME#{entity}#{resource}"), "#STATE");
        self.store().get(&key, true).expect("read state")
    }
}

/// The reservation ids of the processes that got one (exit 0, the id alone on stdout).
fn granted(b: &Backend, outs: &[Output]) -> Vec<String> {
    for o in outs {
        assert!(
            matches!(code(o), 0 | 75),
            "[{}] a reservation neither granted nor refused:\n{}",
            b.label,
            describe(o)
        );
    }
    outs.iter()
        .filter(|o| code(o) == 0)
        .map(|o| stdout(o).trim().to_string())
        .collect()
}

/// `n` slots held `ttl` seconds on `resource`.
fn slots_level(resource: &str, n: u64, ttl: u64) -> String {
    let slots = format!("in_flight: {{concurrency: {n}, hold_ttl_seconds: {ttl}}}");
    manifest(&[(resource, &[&slots])])
}

#[test]
fn sixteen_processes_reserving_three_slots_get_exactly_three() {
    for b in backends("rt-slots") {
        b.apply(&slots_level("batch", 3, 60));
        let reserve = ["acquire", "worker", "-r", "batch", "--mode", "reserve"];
        let outs = b.at_once(16, 0, &reserve);
        let mut ids = granted(&b, &outs);
        assert_eq!(ids.len(), 3, "[{}] ids {ids:?}", b.label);
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), 3, "[{}] the ids are distinct", b.label);
        for o in outs.iter().filter(|o| code(o) == 75) {
            let why = stderr(o);
            assert!(
                why.contains(
                    "in_flight (concurrency): 0 of 3 slots free: REFUSED, admits it again in 60 s"
                ),
                "[{}] {why}",
                b.label
            );
            assert!(stdout(o).is_empty(), "a refusal prints no id");
        }
        // One release: exactly one more of eight.
        let out = b.expect(0, 1_000, &["reservation", "release", &ids[0]]);
        assert!(
            stdout(&out).starts_with("released z1."),
            "{}",
            describe(&out)
        );
        let more = granted(&b, &b.at_once(8, 2_000, &reserve));
        assert_eq!(more.len(), 1, "[{}] after one release: {more:?}", b.label);
        // Releasing twice is harmless and says so.
        let again = b.expect(0, 3_000, &["reservation", "release", &ids[0]]);
        assert_stdout_has(&again, "already released at 2026-12-02T10:00:01Z");
    }
}

#[test]
fn a_holder_killed_with_kill_9_frees_its_slot_at_its_ttl_and_not_before() {
    use std::os::unix::process::CommandExt;
    for b in backends("rt-kill") {
        b.apply(&slots_level("job", 1, 30));
        let id_file = b.dir.path().join("id");
        // The README's recipe: reserve, release in a trap, work. kill -9 skips the trap.
        let script = format!(
            "id=$(\"$ZL\" acquire worker -r job --mode reserve $FLAGS) || exit 75\n\
             trap '\"$ZL\" reservation release \"$id\" $FLAGS' EXIT\n\
             echo \"$id\" > {}\n\
             sleep 600\n",
            id_file.display()
        );
        let mut holder = b
            .shell(&at(0), &script)
            .process_group(0)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start the holder");
        let started = Instant::now();
        let id = loop {
            let text = std::fs::read_to_string(&id_file).unwrap_or_default();
            if text.ends_with('\n') {
                break text.trim().to_string();
            }
            if let Ok(Some(status)) = holder.try_wait() {
                panic!("[{}] the holder exited early: {status}", b.label);
            }
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "no reservation"
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        let pgid = holder.id().to_string();
        let killed = std::process::Command::new("kill")
            .args(["-9", "--", &format!("-{pgid}")])
            .status()
            .expect("kill");
        assert!(killed.success());
        let status = holder.wait().expect("reap the holder");
        assert_eq!(
            std::os::unix::process::ExitStatusExt::signal(&status),
            Some(9)
        );
        // The trap never ran: the slot stays held until the hold's TTL, and not longer.
        let d = b.acquire(75, 1, "worker", "job", &["--mode", "reserve"]);
        assert_eq!(d["retry_after_ms"], 29_999, "[{}] {d}", b.label);
        b.acquire(75, 29_999, "worker", "job", &["--mode", "reserve"]);
        b.acquire(0, 30_000, "worker", "job", &["--mode", "reserve"]);
        // The dead holder's reservation is gone: releasing it is an error, not a success.
        let out = b.expect(1, 30_001, &["reservation", "release", &id]);
        assert_stderr_has(&out, "is not open");
    }
}

#[test]
fn extend_keeps_a_slot_past_its_first_ttl() {
    for b in backends("rt-extend") {
        b.apply(&slots_level("job", 1, 30));
        let d = b.acquire(
            0,
            0,
            "worker",
            "job",
            &["--mode", "reserve", "--ttl", "10s"],
        );
        let id = d["reservation"]["id"].as_str().expect("an id").to_string();
        assert_eq!(d["reservation"]["expires_at"], at(10_000));
        let out = b.expect(
            0,
            8_000,
            &[
                "reservation",
                "extend",
                &id,
                "--ttl",
                "10s",
                "--format",
                "json",
            ],
        );
        let x: Value = serde_json::from_slice(&out.stdout).expect("JSON");
        assert_eq!(x["expires_at"], at(18_000), "{x}");
        // Past its first TTL the slot is still held, until the heartbeat's.
        let refused = b.acquire(75, 12_000, "worker", "job", &["--mode", "reserve"]);
        assert_eq!(refused["retry_after_ms"], 6_000);
        b.expect(0, 17_000, &["reservation", "extend", &id, "--ttl", "5s"]);
        b.acquire(75, 18_000, "worker", "job", &["--mode", "reserve"]);
        b.acquire(0, 22_000, "worker", "job", &["--mode", "reserve"]);
        // A heartbeat cannot revive an expired hold; a TTL over an hour is refused.
        let out = b.expect(1, 22_001, &["reservation", "extend", &id, "--ttl", "10s"]);
        assert_stderr_has(&out, "expired");
        // An expired hold still in the state names its instant in RFC 3339,
        // as every other message does.
        let d = b.acquire(
            0,
            30_000,
            "w2",
            "job",
            &["--mode", "reserve", "--ttl", "10s"],
        );
        let id = d["reservation"]["id"].as_str().expect("an id").to_string();
        let out = b.expect(1, 40_001, &["reservation", "extend", &id, "--ttl", "10s"]);
        let when = format!("it expired at {}, so a heartbeat", at(40_000));
        assert_stderr_has(&out, &when);
        for verb in ["release", "commit"] {
            let out = b.expect(1, 40_001, &["reservation", verb, &id]);
            assert_stderr_has(&out, &format!("it expired at {};", at(40_000)));
        }
        let d = b.acquire(0, 50_000, "w3", "job", &["--mode", "reserve"]);
        let id = d["reservation"]["id"].as_str().expect("an id").to_string();
        b.expect(0, 51_000, &["reservation", "release", &id]);
        let out = b.expect(1, 52_000, &["reservation", "extend", &id, "--ttl", "10s"]);
        assert_stderr_has(&out, &format!("it was released at {}", at(51_000)));
        b.expect(2, 22_001, &["reservation", "extend", &id, "--ttl", "61m"]);
    }
}

/// A rolling minute of 30 on resource `api`.
fn rolling() -> String {
    manifest(&[(
        "api",
        &["rpm: {capacity: 30, window: minute, rolling: true}"],
    )])
}

#[test]
fn a_rolling_window_under_eight_processes_never_admits_more_than_its_amount() {
    for b in backends("rt-rolling") {
        b.apply(&rolling());
        let mut calls: Vec<(i64, bool)> = Vec::new();
        // Two minutes in steps that land all over the one-second slices.
        for k in 0..=40i64 {
            let t = k * 3_000 + (k % 3) * 370;
            for o in b.at_once(8, t, &["acquire", "client", "-r", "api"]) {
                assert!(matches!(code(&o), 0 | 75), "[{}] {}", b.label, describe(&o));
                calls.push((t, code(&o) == 0));
            }
        }
        let admitted: Vec<i64> = calls.iter().filter(|c| c.1).map(|c| c.0).collect();
        let in_span = |from_excl: i64, to: i64| {
            admitted
                .iter()
                .filter(|&&a| a > from_excl && a <= to)
                .count()
        };
        // No 60-second window holds more than 30 (the fullest ends at an admission).
        for &t in &admitted {
            assert!(
                in_span(t - 60_000, t) <= 30,
                "[{}] {} in the minute to {t}",
                b.label,
                in_span(t - 60_000, t)
            );
        }
        // No refusal comes more than one slice early: exact counting over the
        // last 61 s (the window plus the oldest slice, counted whole) is full.
        for &(t, ok) in &calls {
            if !ok {
                assert!(
                    in_span(t - 61_000, t) >= 30,
                    "[{}] refused at {t} with {} counted",
                    b.label,
                    in_span(t - 61_000, t)
                );
            }
        }
        // The window rolled: more than one minute's worth over two minutes.
        assert!(
            admitted.len() > 30 && admitted.len() <= 90,
            "[{}] {} admitted",
            b.label,
            admitted.len()
        );
    }
}

/// On the local store a decision reads and writes the state in one SQLite
/// transaction, so processes deciding on one item at once never lose a
/// write to each other: each makes exactly one read-then-write and no other
/// write (a lost race would make more), though `acquire` read the state
/// with the config before.
#[test]
fn eight_processes_on_one_local_item_each_decide_once() {
    let Some(b) = backends("rt-once").into_iter().find(|b| b.local.is_some()) else {
        panic!("the local store is always among the backends");
    };
    b.apply(&rolling());
    for round in 0..5i64 {
        let now = at(round * 1_000);
        let args = b.with_flags(&["acquire", "client", "-r", "api"]);
        let outs = common::run_together((0..8).map(|_| {
            let mut cmd = b.command(&now, &args);
            cmd.env("ZAEL_REQUEST_STATS", "1");
            cmd
        }));
        for o in &outs {
            assert!(matches!(code(o), 0 | 75), "{}", describe(o));
            // The namespace records, the config with the state, one
            // read-then-write: nothing decided twice.
            assert_stderr_has(o, "3 store operations (local)");
            assert_stderr_has(o, "read_then_write: 1 calls");
        }
    }
}

#[test]
fn retrying_at_the_retry_after_instant_succeeds() {
    for b in backends("rt-retry") {
        b.apply(&manifest(&[
            (
                "api",
                &["rpm: {capacity: 5, window: minute, rolling: true}"],
            ),
            (
                "job",
                &["in_flight: {concurrency: 1, hold_ttl_seconds: 30}"],
            ),
        ]));
        for i in 0..5 {
            b.acquire(0, i * 10_300, "client", "api", &[]);
        }
        let d = b.acquire(75, 45_500, "client", "api", &[]);
        let ra = d["retry_after_ms"].as_i64().expect("a retry-after");
        assert_eq!(d["retry_after_seconds"], (ra + 999) / 1000);
        assert_eq!(d["limits"][0]["name"], "rpm");
        assert_eq!(d["limits"][0]["allowed"], false);
        // The use at 0 leaves when slice 61 begins: 61 s.
        assert_eq!(45_500 + ra, 61_000, "[{}] {d}", b.label);
        b.acquire(75, 45_500 + ra - 1, "client", "api", &["--mode", "preview"]);
        let ok = b.acquire(0, 45_500 + ra, "client", "api", &[]);
        assert_eq!(ok["limits"][0]["remaining"], 0);
        // The same for a slot: the earliest hold's expiry.
        b.acquire(0, 0, "worker", "job", &["--mode", "reserve"]);
        let d = b.acquire(75, 5_500, "worker", "job", &["--mode", "reserve"]);
        let ra = d["retry_after_ms"].as_i64().expect("a retry-after");
        assert_eq!((ra, d["retry_after_seconds"].as_i64()), (24_500, Some(25)));
        b.acquire(75, 5_500 + ra - 1, "worker", "job", &[]);
        b.acquire(0, 5_500 + ra, "worker", "job", &["--mode", "reserve"]);
    }
}

/// A rolling minute of `rpm` and `slots` concurrent on resource `api`.
fn api_level(rpm: u64, slots: u64) -> String {
    let rpm = format!("rpm: {{capacity: {rpm}, window: minute, rolling: true}}");
    let slots = format!("in_flight: {{concurrency: {slots}}}");
    manifest(&[("api", &[&rpm, &slots])])
}

#[test]
fn a_limit_lowered_by_apply_is_enforced_by_the_next_acquire() {
    for b in backends("rt-lower") {
        b.apply(&api_level(10, 3));
        for i in 0..4 {
            b.acquire(0, i * 100, "client", "api", &[]);
        }
        let r1 = b.acquire(0, 1_000, "client", "api", &["--mode", "reserve"]);
        b.acquire(0, 1_000, "client", "api", &["--mode", "reserve"]);
        // 6 counted of 10, 2 of 3 slots held: one more of each would fit.
        b.apply(&api_level(5, 2));
        let d = b.acquire(75, 2_000, "client", "api", &[]);
        let refused: Vec<&str> = d["limits"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|l| l["allowed"] == false)
            .map(|l| l["name"].as_str().unwrap())
            .collect();
        assert_eq!(refused, ["in_flight", "rpm"], "[{}] {d}", b.label);
        assert_eq!(d["limits"][1]["amount"], 5);
        // A limit removed stops mattering, and its state is cleaned up on the next write.
        b.apply(&manifest(&[(
            "api",
            &["rph: {capacity: 100, window: hour, rolling: true}"],
        )]));
        let d = b.acquire(0, 3_000, "client", "api", &[]);
        assert_eq!(d["limits"][0]["name"], "rph");
        let item = b.state_item("client", "api").expect("state");
        assert!(
            item.contains_key("rw_rph") && !item.contains_key("rw_rpm"),
            "[{}] {item:?}",
            b.label
        );
        // A reservation whose limit was removed still releases (it holds no slot now).
        let id = r1["reservation"]["id"].as_str().unwrap();
        let out = b.expect(0, 4_000, &["reservation", "release", id]);
        assert!(stdout(&out).contains("held no slot"), "{}", describe(&out));
    }
}

/// Changing a rolling window's length starts its count over: plan and apply
/// say so (a warning naming the level, the limit and both lengths).
#[test]
fn a_window_that_changes_length_is_said_to_start_over() {
    for b in backends("rt-window") {
        let level = |window: &str| {
            manifest(&[(
                "exports",
                &[&*format!(
                    "per_min: {{capacity: 5, window: {window}, rolling: true}}"
                )],
            )])
        };
        b.apply(&level("minute"));
        b.acquire(0, 0, "u1", "exports", &["--cost", "per_min=5"]);
        let hour = common::write_arg(b.dir.path(), "hour.yaml", level("hour"));
        let limits = |command: &'static str, now_ms: i64| {
            let mut args = vec!["limits", command, "-f", &hour];
            if b.endpoint.is_none() {
                args.extend(["-n", &b.table]);
            }
            b.expect(0, now_ms, &args)
        };
        let says = "Warning: resource 'exports': rolling limit 'per_min' changes its window (minute → hour): the use it counted is forgotten, and the new window starts empty";
        for command in ["plan", "apply"] {
            assert_stderr_has(&limits(command, 1_000), says);
        }
        // As said: the hour starts empty.
        b.acquire(0, 2_000, "u1", "exports", &[]);
        // A plan without a length change says nothing of it.
        let out = limits("plan", 3_000);
        assert!(
            !stderr(&out).contains("changes its window"),
            "[{}]",
            b.label
        );
    }
}

#[test]
fn commit_corrects_the_counted_cost_within_its_window() {
    for b in backends("rt-commit") {
        b.apply(&manifest(&[(
            "llm",
            &[
                "tokens: {capacity: 1000, window: minute, rolling: true}",
                "in_flight: {concurrency: 2}",
            ],
        )]));
        let r = b.acquire(
            0,
            0,
            "svc",
            "llm",
            &["--mode", "reserve", "--cost", "tokens=800"],
        );
        let id = r["reservation"]["id"].as_str().unwrap().to_string();
        let first_id = id.clone();
        b.acquire(75, 1_000, "svc", "llm", &["--cost", "tokens=300"]);
        let out = b.expect(
            0,
            2_000,
            &[
                "reservation",
                "commit",
                &id,
                "--cost",
                "tokens=250",
                "--format",
                "json",
            ],
        );
        let c: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(c["result"], "committed");
        assert_eq!(
            c["corrections"][0],
            serde_json::json!({"name": "tokens", "counted": 800, "actual": 250, "applied": true})
        );
        let d = b.acquire(0, 3_000, "svc", "llm", &["--cost", "tokens=750"]);
        assert_eq!(d["limits"][1]["remaining"], 0, "[{}] {d}", b.label);
        // Committing again is harmless; a cost for a limit it did not count is an error.
        let again = b.expect(0, 4_000, &["reservation", "commit", &id]);
        assert_stdout_has(&again, "already committed");
        let r = b.acquire(
            0,
            5_000,
            "svc",
            "llm",
            &["--mode", "reserve", "--cost", "tokens=0"],
        );
        let id = r["reservation"]["id"].as_str().unwrap();
        let out = b.expect(
            1,
            6_000,
            &["reservation", "commit", id, "--cost", "in_flight=1"],
        );
        assert_stderr_has(&out, "did not count limit 'in_flight'");
        // A commit retried with its costs after it went through is harmless;
        // a correction after a release is refused, not dropped in silence.
        let again = b.expect(
            0,
            6_500,
            &["reservation", "commit", &first_id, "--cost", "tokens=250"],
        );
        assert_stdout_has(&again, "already committed");
        b.expect(0, 7_000, &["reservation", "release", id]);
        let out = b.expect(
            1,
            8_000,
            &["reservation", "commit", id, "--cost", "tokens=0"],
        );
        assert_stderr_has(
            &out,
            "was released at 2026-12-02T10:00:07Z, and a released reservation keeps what it counted: the correction was not made",
        );
    }
}

/// A reservation's holder and a cooldown probe's worker id follow one rule
/// (1 to 256 bytes, no control characters), refused alike (exit 1, the same
/// words) and accepted alike at the longest.
#[test]
fn a_holder_follows_one_rule_for_reservations_and_probes() {
    for b in backends("rt-holder") {
        b.apply(&slots_level("gpt", 2, 60));
        let longest = "h".repeat(256);
        let too_long = "h".repeat(257);
        for bad in ["", too_long.as_str(), "a\tb"] {
            for args in [
                &[
                    "acquire", "c", "-r", "gpt", "--mode", "reserve", "--holder", bad,
                ][..],
                &["cooldown", "probe", "p/a", "--holder", bad][..],
            ] {
                let out = b.expect(1, 0, args);
                assert_stderr_has(
                    &out,
                    "expected a worker or job name of 1 to 256 bytes, no control characters",
                );
            }
        }
        let reserve = ["acquire", "c", "-r", "gpt", "--mode", "reserve"];
        b.expect(0, 0, &[&reserve[..], &["--holder", &longest]].concat());
        b.expect(0, 0, &["cooldown", "probe", "p/a", "--holder", &longest]);
    }
}

/// A state that would outgrow the 400 KB of one stored item (many holds,
/// each counted in many long-named windows) refuses the request that would
/// overflow it — an error naming the state, never an unchecked "allow" by
/// `on_unavailable: allow` — and takes requests again once holds are released.
/// The runtime measures the state before it writes, the same on every store,
/// so the local store shows it (filling an item on moto takes a minute; the
/// DynamoDB refusal of a too-large item is classified in `store::dynamodb`).
#[test]
fn a_state_too_large_for_one_item_refuses_and_never_allows_unchecked() {
    use zae_limiter::runtime::{self, Mode, Request, RuntimeError};
    for b in [backends::local()] {
        let windows: Vec<String> = (0..40)
            .map(|i| {
                format!(
                    "w{i:02}_{}: {{capacity: 1000000, window: hour, rolling: true}}",
                    "x".repeat(56)
                )
            })
            .collect();
        let mut lines: Vec<&str> = windows.iter().map(String::as_str).collect();
        lines.push("in_flight: {concurrency: 1000, hold_ttl_seconds: 3600}");
        let m = manifest(&[("big", &lines)]).replace(
            "namespace: default\n",
            "namespace: default\nsystem:\n  on_unavailable: allow\n",
        );
        b.apply(&m);
        let store = b.store();
        let ns = runtime::namespace_id(store.as_ref(), "default").unwrap();
        let mut req = Request::new(Mode::Reserve);
        req.holder = Some("h".repeat(256));
        let mut granted = Vec::new();
        let refusal = loop {
            match runtime::acquire(store.as_ref(), &ns, "e", "big", &req, T0_MS) {
                Ok(d) => {
                    assert!(d.allowed && d.unavailable.is_none(), "[{}] {d:?}", b.label);
                    granted.push(d.reservation.expect("a hold").id);
                    assert!(granted.len() < 1000, "[{}] never too large", b.label);
                }
                Err(e) => break e,
            }
        };
        assert!(
            matches!(refusal, RuntimeError::StateTooLarge { bytes: Some(b), .. } if b > 400_000),
            "[{}] {refusal}",
            b.label
        );
        // Through the CLI: exit 1, nothing allowed.
        let out = b.expect(1, 0, &["acquire", "e", "-r", "big", "--mode", "reserve"]);
        assert_stderr_has(&out, "would exceed the 400 KB one stored item may hold");
        // A release makes room again.
        let id = granted.pop().unwrap().to_string();
        b.expect(0, 0, &["reservation", "release", &id]);
        b.expect(0, 0, &["acquire", "e", "-r", "big", "--mode", "reserve"]);
    }
}

#[test]
fn bad_requests_are_errors_and_never_an_allow() {
    for b in backends("rt-errors") {
        b.apply(&rolling());
        let cases: [(&[&str], i32, &str); 8] = [
            (
                &["acquire", "c", "-r", "api", "-N", "nope"],
                1,
                "namespace 'nope' is not registered",
            ),
            (
                &["acquire", "c", "-r", "nothing-here"],
                1,
                "no limits are defined for entity 'c' on resource 'nothing-here'",
            ),
            (
                &["acquire", "c", "-r", "api", "--cost", "rmp=1"],
                1,
                "'rmp' is not a limit of the resource level (its limits: rpm)",
            ),
            (
                &["acquire", "c", "-r", "api", "--mode", "reserve"],
                1,
                "has no concurrency limit",
            ),
            (
                &["acquire", "c", "-r", "api", "--ttl", "5m"],
                2,
                "--ttl and --holder go with --mode reserve",
            ),
            (&["acquire", "bad#id", "-r", "api"], 1, "invalid entity id"),
            (
                &[
                    "reservation",
                    "release",
                    "z1.Yw.YXBp.AAAAAAAAAAAAAAAAAAAAAA",
                ],
                1,
                "is not open",
            ),
            (
                &["reservation", "release", "not-an-id"],
                1,
                "is not a reservation id",
            ),
        ];
        for (args, want, says) in cases {
            let out = b.expect(want, 0, args);
            assert!(
                stderr(&out).contains(says),
                "[{}] {args:?}:\n{}",
                b.label,
                describe(&out)
            );
            assert!(stdout(&out).is_empty(), "[{}] {args:?}", b.label);
        }
        assert!(
            b.state_item("c", "api").is_none(),
            "[{}] nothing was written",
            b.label
        );
    }
}

#[test]
fn unreadable_state_follows_on_unavailable_and_says_so() {
    for b in backends("rt-unavail") {
        let manifest = |policy: &str| {
            format!("namespace: default\nsystem:\n  on_unavailable: {policy}\nresources:\n  api:\n    limits:\n      rpm: {{capacity: 5, window: minute, rolling: true}}\n      slots: {{concurrency: 2, hold_ttl_seconds: 60}}\n")
        };
        b.apply(&manifest("block"));
        b.acquire(0, 0, "c", "api", &[]);
        let mut item = b.state_item("c", "api").expect("state");
        item.insert("rw_rpm".into(), AttrValue::s("fortnight/1/0:1"));
        b.store()
            .write(WriteOp::Put {
                item: item.clone(),
                condition: None,
            })
            .expect("damage the state");
        let out = b.expect(
            75,
            1_000,
            &["acquire", "c", "-r", "api", "--format", "json"],
        );
        let d: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(
            (d["allowed"].as_bool(), d["level"].as_str()),
            (Some(false), Some("resource")),
            "{d}"
        );
        assert!(
            d["unavailable"].as_str().unwrap().contains("unreadable"),
            "{d}"
        );
        assert_stderr_has(&out, "on_unavailable blocks it");
        b.apply(&manifest("allow"));
        let out = b.expect(0, 2_000, &["acquire", "c", "-r", "api"]);
        assert_stderr_has(&out, "on_unavailable allows the call unchecked");
        // A reserve admitted unchecked says why it holds no slot: the state,
        // not full soft limits.
        let out = b.expect(
            0,
            2_000,
            &["acquire", "c", "-r", "api", "--mode", "reserve"],
        );
        let text = stderr(&out);
        assert!(
            text.contains("no reservation: the limits could not be checked")
                && !text.contains("soft or bypassed"),
            "[{}] {text}",
            b.label
        );
        // Nothing was written over the damaged state.
        assert_eq!(b.state_item("c", "api"), Some(item), "[{}]", b.label);
        // Every command on the pair names the remedy; `runtime show`
        // refuses to show what it cannot read.
        let clear = "`zae-limiter runtime clear c -r api";
        assert_stderr_has(&out, clear);
        let shown = b.expect(1, 2_000, &["runtime", "show", "c", "-r", "api"]);
        assert_stderr_has(&shown, "is unreadable");
        assert_stderr_has(&shown, clear);
        let cleared = b.expect(0, 2_000, &["runtime", "clear", "c", "-r", "api"]);
        assert_stdout_has(&cleared, "cleared the unreadable runtime state of c on api");
        assert_eq!(b.state_item("c", "api"), None, "[{}]", b.label);
        // Checked again, from an empty window.
        let d = b.acquire(0, 3_000, "c", "api", &[]);
        assert_eq!(d["unavailable"], Value::Null, "[{}] {d}", b.label);
        assert_eq!(d["limits"][0]["remaining"], 4, "[{}] {d}", b.label);
    }
}

/// A state row the local store cannot decode at all (not JSON): the config
/// is still read, so the level's `on_unavailable` answers (here `allow`), as
/// for a state that decodes but is unreadable, on every store alike.
#[test]
fn an_undecodable_local_state_row_follows_the_levels_policy_until_cleared() {
    let b = backends::local();
    b.apply("namespace: default\nsystem:\n  on_unavailable: allow\nresources:\n  api:\n    limits:\n      rpm: {capacity: 5, window: minute, rolling: true}\n");
    b.acquire(0, 0, "c", "api", &[]);
    assert_eq!(b.corrupt_local_rows("%/RUNTIME#c#api", "{not json"), 1);
    let d = b.acquire(0, 1_000, "c", "api", &[]);
    assert_eq!(
        (d["allowed"].as_bool(), d["level"].as_str()),
        (Some(true), Some("resource")),
        "{d}"
    );
    b.expect(1, 1_000, &["runtime", "show", "c", "-r", "api"]);
    let out = b.expect(
        0,
        1_000,
        &["runtime", "clear", "c", "-r", "api", "--format", "json"],
    );
    let c: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(c["result"], "cleared", "{c}");
    assert!(
        c["unreadable"].as_str().unwrap().contains("typed value"),
        "{c}"
    );
    let d = b.acquire(0, 2_000, "c", "api", &[]);
    assert_eq!(d["unavailable"], Value::Null, "{d}");
}

/// `runtime show` lists what each window counted and who holds which slot;
/// a state written by a clock far ahead (a `ZAEL_NOW` rehearsal on the real
/// table) is flagged, and `runtime clear` lets every hold go and starts
/// the windows empty.
#[test]
fn runtime_show_and_clear_on_every_store() {
    for b in backends("rt-show") {
        b.apply(&api_level(10, 2));
        b.expect(0, 0, &["runtime", "show", "w", "-r", "api"]);
        let none = b.expect(
            0,
            0,
            &["runtime", "show", "w", "-r", "api", "--format", "json"],
        );
        let none: Value = serde_json::from_slice(&none.stdout).unwrap();
        assert_eq!(
            (none["version"].as_u64(), none["stored"].as_bool()),
            (Some(1), Some(false)),
            "{none}"
        );
        // A rehearsal a year ahead counts in the state the real clock uses.
        b.acquire(0, 365 * 86_400_000, "w", "api", &["--cost", "rpm=6"]);
        let d = b.acquire(
            0,
            1_000,
            "w",
            "api",
            &[
                "--mode", "reserve", "--holder", "worker-3", "--cost", "rpm=4",
            ],
        );
        let id = d["reservation"]["id"].as_str().unwrap().to_string();
        let out = b.expect(
            0,
            1_000,
            &["runtime", "show", "w", "-r", "api", "--format", "json"],
        );
        let st: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(st["ahead_of_clock"], true, "[{}] {st}", b.label);
        assert_eq!(st["holds"][0]["id"], id.as_str(), "[{}] {st}", b.label);
        assert_eq!(st["holds"][0]["holder"], "worker-3", "[{}] {st}", b.label);
        assert_eq!(st["holds"][0]["counted"]["rpm"], 4, "[{}] {st}", b.label);
        // An earlier clock counts in the newest slice seen: both uses.
        assert_eq!(st["windows"][0]["used"], 10, "[{}] {st}", b.label);
        let text = b.expect(0, 1_000, &["runtime", "show", "w", "-r", "api"]);
        assert_stdout_has(
            &text,
            "written by a clock more than a minute ahead of this one",
        );
        assert_stdout_has(&text, "holder \"worker-3\"");
        // Nothing fits until a minute after the rehearsal's instant.
        b.acquire(75, 2_000, "w", "api", &["--cost", "rpm=1"]);
        let out = b.expect(0, 2_000, &["runtime", "clear", "w", "-r", "api"]);
        assert_stdout_has(&out, "1 rolling window emptied, 1 open reservation let go");
        assert_stdout_has(&out, &id);
        b.acquire(0, 3_000, "w", "api", &["--cost", "rpm=10"]);
        // The hold that was let go is unknown now, not "already released".
        let out = b.expect(1, 3_000, &["reservation", "release", &id]);
        assert_stderr_has(&out, "is not open");
        let again = b.expect(0, 3_000, &["runtime", "clear", "nobody", "-r", "api"]);
        assert_stdout_has(&again, "nothing to clear");
        b.expect(1, 3_000, &["runtime", "clear", "bad#id", "-r", "api"]);
    }
}

/// `acquire c -r api ARGS` at 0, which must block (the outage answer).
fn blocked(b: &Backend, args: &[&str]) -> Output {
    let mut all = vec!["acquire", "c", "-r", "api"];
    all.extend_from_slice(args);
    let out = b.run(&at(0), &all);
    assert_eq!(code(&out), 75, "{}", describe(&out));
    assert_stderr_has(&out, "on_unavailable blocks it");
    out
}

#[test]
fn an_unreachable_store_blocks() {
    // Nothing listens on port 9: the SDK's retries fail, the answer is block.
    let b = backends::local();
    let out = blocked(
        &b,
        &["-n", "outage", "--endpoint-url", "http://127.0.0.1:9"],
    );
    assert!(stdout(&out).is_empty(), "{}", describe(&out));
}

#[test]
fn an_unreadable_local_store_blocks() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.sqlite");
    std::fs::write(&path, "this is not a database, just some bytes of text").unwrap();
    let b = backends::local();
    blocked(&b, &[&format!("--local={}", path.display())]);
    // A store that does not exist is an error, not an outage.
    let missing = dir.path().join("missing.sqlite");
    let local = format!("--local={}", missing.display());
    let out = b.run(&at(0), &["acquire", "c", "-r", "api", &local]);
    assert_eq!(code(&out), 1, "{}", describe(&out));
}
