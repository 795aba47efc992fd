//! `zae-limiter cooldown …` across process boundaries: every step is a new
//! process, "now" comes from `ZAEL_NOW`, and each scenario runs on every store
//! available — the local store always, DynamoDB (moto) when
//! `ZAEL_TEST_DYNAMODB_ENDPOINT` is set (required when `ZAEL_REQUIRE_INTEROP=1`).

mod common;
mod interop_support;

use std::process::Output;

use serde_json::Value;
use zae_limiter::store::{AttrValue, Key, WriteOp};
use zae_limiter_engine::cooldown::{jitter_ms, seed_of, DEFAULT_MAX_JITTER_MS};

/// When the 429 arrives in every scenario.
const T0: &str = "2026-12-02T10:00:00Z";
const T0_MS: i64 = 1_796_205_600_000;
/// 2.35 days, as in the issue.
const RESETS_IN: i64 = 202_825;
/// T0 + 202825 s + the default 5 s margin.
const DEADLINE_MS: i64 = T0_MS + (RESETS_IN + 5) * 1000;
const DEADLINE: &str = "2026-12-04T18:20:30Z";

mod backends;

use backends::{backends, describe, local, Backend};

/// The cooldown commands on a [`Backend`].
impl Backend {
    /// `zae-limiter cooldown ARGS… <store flags>` at `now`.
    fn cooldown(&self, now: &str, args: &[&str]) -> Output {
        let mut all = vec!["cooldown"];
        all.extend_from_slice(args);
        self.run(now, &self.with_flags(&all))
    }

    /// Like [`cooldown`], asserting the exit code; returns stdout.
    /// `cooldown ARGS` at `now`, which must exit `code`.
    fn exits(&self, code: i32, now: &str, args: &[&str]) -> Output {
        let out = self.cooldown(now, args);
        self.assert_exit(&out, code, format_args!("cooldown {args:?} at {now}"));
        out
    }

    /// [`Backend::exits`]' standard output.
    fn expect(&self, code: i32, now: &str, args: &[&str]) -> String {
        String::from_utf8_lossy(&self.exits(code, now, args).stdout).into_owned()
    }

    /// [`Backend::exits`]' standard error.
    fn stderr_of(&self, code: i32, now: &str, args: &[&str]) -> String {
        String::from_utf8_lossy(&self.exits(code, now, args).stderr).into_owned()
    }

    fn json(&self, code: i32, now: &str, args: &[&str]) -> Value {
        let mut all = args.to_vec();
        all.extend(["--format", "json"]);
        let text = self.expect(code, now, &all);
        serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("[{}] {args:?}: not JSON ({e}):\n{text}", self.label))
    }

    /// The stored state item of `scope` (namespace `default`).
    fn state_item(&self, scope: &str) -> zae_limiter::store::Item {
        let key = self.cooldown_key(scope);
        let item = self.store().get(&key, true).expect("read");
        item.expect("recorded item")
    }

    /// Writes `item` as it is, over whatever is stored.
    fn overwrite(&self, item: zae_limiter::store::Item) {
        let put = WriteOp::Put {
            item,
            condition: None,
        };
        self.store().write(put).expect("write the item");
    }

    fn cooldown_key(&self, scope: &str) -> Key {
        let ns = self.namespace_id("default");
        Key::new(format!("{ns}/COOLDOWN#{scope}"), "#STATE")
    }
}

/// `settle SCOPE --holder HOLDER --outcome OUTCOME EXTRA…`, for any runner.
fn settle<'a>(
    scope: &'a str,
    holder: &'a str,
    outcome: &'a str,
    extra: &[&'a str],
) -> Vec<&'a str> {
    let mut args = vec!["settle", scope, "--holder", holder, "--outcome", outcome];
    args.extend_from_slice(extra);
    args
}

fn record_issue_429(b: &Backend, scope: &str) {
    // Recorded ten minutes after the response arrived: the reset counts from receipt.
    let out = b.json(
        0,
        "2026-12-02T10:10:00Z",
        &[
            "record",
            scope,
            "--status",
            "429",
            "--resets-in-seconds",
            &RESETS_IN.to_string(),
            "--received-at",
            T0,
        ],
    );
    assert_eq!(
        out["recorded"]["not_before_ms"], DEADLINE_MS,
        "[{}] {out}",
        b.label
    );
    assert_eq!(out["recorded"]["not_before"], DEADLINE);
}

/// A 429 recorded for `scope`, whose probe `w1` holds (2 minutes from the
/// instant returned, after the deadline).
fn probing(b: &Backend, scope: &str) -> &'static str {
    record_issue_429(b, scope);
    let at = "2026-12-04T18:21:00Z";
    b.expect(0, at, &["probe", scope, "--holder", "w1", "--lease", "2m"]);
    at
}

#[test]
fn a_recorded_reset_makes_later_processes_wait_until_it() {
    for b in backends("wait") {
        let scope = "openai/acct-42/gpt-4";
        record_issue_429(&b, scope);
        // A new process an hour later is told to wait, with the instant and the span.
        let text = b.expect(75, "2026-12-02T11:00:00Z", &["check", scope]);
        assert!(text.contains(DEADLINE), "[{}] {text}", b.label);
        assert!(text.contains("in 2d 7h"), "[{}] {text}", b.label);
        let at_t0 = b.expect(75, T0, &["check", scope]);
        assert!(at_t0.contains("in 2d 8h"), "[{}] {at_t0}", b.label);
        // One millisecond before the deadline: still wait; at it: go.
        let v = b.json(75, "2026-12-04T18:20:29.999Z", &["check", scope]);
        assert_eq!(v["verdict"], "wait");
        assert_eq!(v["until_ms"], DEADLINE_MS);
        assert_eq!(b.json(0, DEADLINE, &["check", scope])["verdict"], "go");
        // A later, shorter Retry-After does not shorten the cooldown.
        b.expect(
            0,
            "2026-12-02T10:20:00Z",
            &["record", scope, "--retry-after", "3000"],
        );
        let v = b.json(75, "2026-12-02T11:00:00Z", &["check", scope]);
        assert_eq!(v["until_ms"], DEADLINE_MS, "[{}] {v}", b.label);
        // Another scope is unaffected.
        b.expect(
            0,
            "2026-12-02T11:00:00Z",
            &["check", "openai/acct-43/gpt-4"],
        );
        // A refusal recorded after its cooldown ended says it has passed.
        let late = b.expect(
            0,
            "2026-12-02T11:00:00Z",
            &[
                "record",
                "openai/acct-44",
                "--retry-after",
                "60",
                "--received-at",
                "2026-12-02T10:00:00Z",
            ],
        );
        assert!(
            late.contains("(passed 58m 55s ago)"),
            "[{}] {late}",
            b.label
        );
    }
}

#[test]
fn exactly_one_of_several_concurrent_workers_wins_the_probe() {
    for b in backends("probe") {
        let scope = "openai/acct-42/gpt-4";
        record_issue_429(&b, scope);
        // Before the deadline nobody may probe.
        b.expect(
            75,
            "2026-12-04T18:20:29Z",
            &["probe", scope, "--holder", "early", "--lease", "5m"],
        );
        let workers: Vec<String> = (0..8).map(|i| format!("worker-{i}")).collect();
        let outs = common::run_together(workers.iter().map(|w| {
            let mut args = vec!["cooldown", "probe", scope, "--holder", w, "--lease", "5m"];
            args.extend(b.flags.iter().map(String::as_str));
            let mut cmd = b.command(DEADLINE, &args);
            cmd.env("ZAEL_COOLDOWN_JITTER", "0");
            cmd
        }));
        let winners: Vec<&String> = workers
            .iter()
            .zip(&outs)
            .filter(|(_, o)| o.status.code() == Some(0))
            .map(|(w, _)| w)
            .collect();
        assert_eq!(winners.len(), 1, "[{}] winners {winners:?}", b.label);
        for o in &outs {
            assert!(
                matches!(o.status.code(), Some(0) | Some(75)),
                "[{}] {}",
                b.label,
                describe(o)
            );
        }
        let winner = winners[0].as_str();
        // Everyone else (and `check`) is told to wait for the winner's lease.
        let v = b.json(75, "2026-12-04T18:21:00Z", &["check", scope]);
        assert_eq!(v["state"]["probe"]["holder"], winner, "[{}] {v}", b.label);
        assert_eq!(v["until"], "2026-12-04T18:25:30Z");
        let list = b.json(0, "2026-12-04T18:21:00Z", &["list"]);
        assert_eq!(list["cooldowns"][0]["status"], "probing", "{list}");
        assert_eq!(list["cooldowns"][0]["probe"]["holder"], winner);
        // When the lease lapses without a settle, the probe is up for grabs again.
        b.expect(
            0,
            "2026-12-04T18:26:00Z",
            &["probe", scope, "--holder", "late", "--lease", "1m"],
        );
    }
}

#[test]
fn jitter_spreads_workers_after_the_deadline() {
    for b in backends("jitter") {
        let scope = "openai/acct-42/gpt-4";
        record_issue_429(&b, scope);
        let holder = "worker-7";
        let jitter = jitter_ms(holder, seed_of(scope), DEFAULT_MAX_JITTER_MS);
        assert!(jitter > 0, "pick a holder whose jitter is not 0");
        let v = b.json(
            75,
            DEADLINE,
            &["probe", scope, "--holder", holder, "--lease", "1m"],
        );
        assert_eq!(v["until_ms"], DEADLINE_MS + jitter, "[{}] {v}", b.label);
        // After the largest jitter every worker is eligible.
        b.expect(
            0,
            "2026-12-04T18:21:00Z",
            &["probe", scope, "--holder", holder, "--lease", "1m"],
        );
    }
}

#[test]
fn settle_records_a_new_quota_deadline_or_clears() {
    for b in backends("settle") {
        let scope = "openai/acct-42/gpt-4";
        let at = probing(&b, scope);
        // Only the holder may settle.
        let err = b.stderr_of(1, at, &settle(scope, "w2", "ok", &[]));
        assert!(err.contains("does not hold"));
        // The probe is refused again: one more hour (+ 5 s margin) from now.
        let v = b.json(
            0,
            at,
            &settle(scope, "w1", "quota", &["--resets-in-seconds", "3600"]),
        );
        assert_eq!(v["result"], "recorded", "[{}] {v}", b.label);
        let new_deadline = DEADLINE_MS + 30_000 + 3_605_000;
        assert_eq!(v["state"]["not_before_ms"], new_deadline);
        assert_eq!(v["state"]["probe"], Value::Null);
        // A fresh process sees the stored deadline.
        let c = b.json(75, "2026-12-04T19:00:00Z", &["check", scope]);
        assert_eq!(c["until_ms"], new_deadline, "[{}] {c}", b.label);
        assert_eq!(c["until"], "2026-12-04T19:21:05Z");
        let list = b.json(0, "2026-12-04T19:00:00Z", &["list"]);
        assert_eq!(list["cooldowns"][0]["not_before_ms"], new_deadline);
        assert!(list["cooldowns"][0]["reason"]
            .as_str()
            .unwrap_or_default()
            .starts_with("recovery probe refused; resets_in_seconds 3600"));
        // Next probe succeeds: the cooldown is gone for everyone.
        let later = "2026-12-04T19:22:00Z";
        b.expect(
            0,
            later,
            &["probe", scope, "--holder", "w2", "--lease", "1m"],
        );
        b.expect(0, later, &settle(scope, "w2", "ok", &[]));
        let c = b.json(0, later, &["check", scope]);
        assert_eq!(c["state"], Value::Null);
        assert_eq!(
            b.json(0, later, &["list"])["cooldowns"],
            serde_json::json!([])
        );
    }
}

#[test]
fn corrupt_state_is_never_permission() {
    for b in backends("corrupt") {
        let scope = "openai/acct-42/gpt-4";
        record_issue_429(&b, scope);
        let mut item = b.state_item(scope);
        item.insert("not_before".into(), AttrValue::s("soon"));
        b.overwrite(item);
        // Long after any deadline, the unreadable state still refuses.
        let later = "2027-06-01T00:00:00Z";
        let err = b.stderr_of(76, later, &["check", scope]);
        assert!(
            err.contains("unreadable") && err.contains("not_before"),
            "{err}"
        );
        assert_eq!(
            b.json(76, later, &["check", scope])["verdict"],
            "unreadable"
        );
        b.expect(
            76,
            later,
            &["probe", scope, "--holder", "w", "--lease", "1m"],
        );
        // Recording on top of it refuses too (the old deadline cannot be merged).
        b.expect(1, later, &["record", scope, "--retry-after", "60"]);
        let list = b.json(0, later, &["list"]);
        assert_eq!(list["cooldowns"][0]["status"], "unreadable", "{list}");
        // An operator clears it; then calls may resume.
        b.expect(0, later, &["clear", scope]);
        b.expect(0, later, &["check", scope]);
    }
}

#[test]
fn an_undecodable_local_row_is_refused() {
    let b = local();
    let scope = "openai/acct-42/gpt-4";
    record_issue_429(&b, scope);
    assert_eq!(b.corrupt_local_rows("%/COOLDOWN#%", "{not json"), 1);
    let later = "2027-06-01T00:00:00Z";
    let out = b.cooldown(later, &["check", scope]);
    assert_eq!(out.status.code(), Some(76), "{}", describe(&out));
    // A row that is not JSON at all is that one unreadable row, like one
    // that is JSON but wrong: the list goes on, other scopes are unaffected.
    b.expect(0, T0, &["record", "other/a", "--retry-after", "60"]);
    b.corrupt_local_rows("%/COOLDOWN#openai/%", "not json");
    let list = b.json(0, later, &["list"]);
    let rows = list["cooldowns"].as_array().expect("rows");
    assert_eq!(rows.len(), 2, "{list}");
    assert_eq!(rows[0]["scope"], scope, "{list}");
    assert_eq!(rows[0]["status"], "unreadable", "{list}");
    assert!(
        rows[0]["error"]
            .as_str()
            .unwrap_or_default()
            .contains("cannot be decoded"),
        "{list}"
    );
    assert_eq!(rows[1]["scope"], "other/a", "{list}");
    assert!(b.expect(0, later, &["list"]).contains("unreadable"));
    assert_eq!(
        b.json(76, later, &["check", scope])["verdict"],
        "unreadable"
    );
    // Recording on it refuses as on any unreadable state; elsewhere it works.
    let err = b.stderr_of(1, later, &["record", scope, "--retry-after", "60"]);
    assert!(
        err.contains("is unreadable") && err.contains("cooldown clear"),
        "{err}"
    );
    b.expect(0, later, &["record", "other/b", "--retry-after", "60"]);
    // The operator's remedy works on it.
    b.expect(0, later, &["clear", scope]);
    b.expect(0, later, &["check", scope]);
}

/// The message of an unreadable state names the command that clears it: the
/// scope shell-quoted, the table's flags and the namespace, so the line
/// copied into a shell clears that very row.
#[test]
fn an_unreadable_state_names_the_clear_command_that_works() {
    let b = local();
    let scope = "p/acct 42's";
    b.expect(
        0,
        T0,
        &["record", scope, "--retry-after", "60", "-N", "team"],
    );
    assert_eq!(b.corrupt_local_rows("%/COOLDOWN#p/%", "not json"), 1);
    let hint = |err: &str| {
        let start = err
            .find("(`")
            .unwrap_or_else(|| panic!("no command in {err}"))
            + 2;
        err[start..start + err[start..].find("`)").expect("closed")].to_string()
    };
    let want = format!(
        "zae-limiter cooldown clear 'p/acct 42'\\''s' -n zae-limiter {} -N team",
        b.flags.join(" ")
    );
    for args in [
        vec!["record", scope, "--retry-after", "60"],
        vec!["check", scope],
        vec!["probe", scope, "--holder", "w"],
        vec!["settle", scope, "--holder", "w", "--outcome", "ok"],
    ] {
        let mut args = args.clone();
        args.extend(["-N", "team"]);
        let out = b.cooldown(T0, &args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(hint(&err), want, "{args:?}: {err}");
    }
    let line = want.replacen("zae-limiter", "\"$ZL\"", 1);
    let out = b.shell(T0, &line).output().expect("run the hint");
    common::assert_exit(&out, 0, format_args!("{line}"));
    b.expect(0, T0, &["check", scope, "-N", "team"]);
}

#[test]
fn auth_rejections_and_implausible_resets_need_an_operator() {
    for b in backends("auth") {
        b.expect(0, T0, &["record", "anthropic/acct-7", "--status", "401"]);
        let err = b.stderr_of(76, "2030-01-01T00:00:00Z", &["check", "anthropic/acct-7"]);
        assert!(err.contains("needs an operator"));
        b.expect(
            76,
            "2030-01-01T00:00:00Z",
            &[
                "probe",
                "anthropic/acct-7",
                "--holder",
                "w",
                "--lease",
                "1m",
            ],
        );
        // A 40-day reset is kept whole and escalated, not slept on.
        let v = b.json(
            0,
            T0,
            &["record", "openai/acct-9", "--resets-in-seconds", "3456000"],
        );
        assert_eq!(v["recorded"]["state"], "needs_operator", "{v}");
        assert_eq!(v["recorded"]["not_before_ms"], T0_MS + 3_456_005_000);
        b.expect(76, T0, &["check", "openai/acct-9"]);
        // A reset past the last instant the tool can represent lies beyond
        // every ceiling: escalated the same way, in every form, never read as
        // garbage and answered with the one-minute backoff.
        for (scope, flag, value) in [
            ("far/in", "--resets-in-seconds", "99999999999999"),
            ("far/retry", "--retry-after", "1e40"),
            ("far/at", "--resets-at", "99999999999999999"),
            ("far/rfc", "--resets-at", "9999-12-31T23:59:59Z"),
        ] {
            let out = b.exits(0, T0, &["record", scope, flag, value, "--format", "json"]);
            let v: Value = serde_json::from_slice(&out.stdout).expect("JSON");
            assert_eq!(
                v["recorded"]["state"], "needs_operator",
                "[{}] {flag} {v}",
                b.label
            );
            let reason = v["recorded"]["reason"].as_str().unwrap_or_default();
            assert!(
                reason.contains("the last instant the tool can represent")
                    && reason.ends_with("confirm with the provider, then clear it"),
                "{reason}"
            );
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(!err.contains("backoff"), "[{}] {flag}: {err}", b.label);
            b.expect(76, "2027-06-01T00:00:00Z", &["check", scope]);
            b.expect(0, T0, &["clear", scope]);
        }
        // A configured ceiling accepts it.
        let mut cmd = b.command(
            T0,
            &[
                "cooldown",
                "record",
                "openai/acct-10",
                "--resets-in-seconds",
                "3456000",
            ],
        );
        cmd.args(&b.flags).env("ZAEL_COOLDOWN_CEILING", "60d");
        assert_eq!(cmd.output().expect("run").status.code(), Some(0));
        b.expect(75, T0, &["check", "openai/acct-10"]);
        // The operator's table shows every deferred scope and when it is eligible.
        let table = b.expect(0, T0, &["list"]);
        for want in [
            "anthropic/acct-7",
            "needs operator",
            "openai/acct-9",
            "openai/acct-10",
            "cooling",
            "40d",
            "2027-01-11T10:00:05Z",
        ] {
            assert!(
                table.contains(want),
                "[{}] {want} missing:\n{table}",
                b.label
            );
        }
        b.expect(0, T0, &["clear", "anthropic/acct-7"]);
        b.expect(0, T0, &["check", "anthropic/acct-7"]);
    }
}

#[test]
fn a_response_body_and_http_dates_are_read() {
    for b in backends("body") {
        let body = b.dir.path().join("body.json");
        std::fs::write(
            &body,
            r#"{"error":{"type":"usage_limit_reached","message":"The usage limit has been reached","resets_in_seconds":202825}}"#,
        )
        .expect("write body");
        let v = b.json(
            0,
            "2026-12-02T12:00:00Z",
            &[
                "record",
                "openai/acct-42",
                "--response",
                &body.display().to_string(),
                "--received-at",
                T0,
                "--status",
                "429",
            ],
        );
        assert_eq!(v["recorded"]["not_before_ms"], DEADLINE_MS, "{v}");
        assert!(v["recorded"]["reason"]
            .as_str()
            .unwrap_or_default()
            .contains("usage_limit_reached"));
        let v = b.json(
            0,
            T0,
            &[
                "record",
                "other",
                "--retry-after",
                "Wed, 02 Dec 2026 11:00:00 GMT",
                "--margin",
                "0",
            ],
        );
        assert_eq!(v["recorded"]["not_before"], "2026-12-02T11:00:00Z", "{v}");
        // A body that is not JSON (a proxy's error page) still records the 429:
        // from the other hints, or with backoff.
        let html = b.dir.path().join("body.html");
        std::fs::write(&html, "<html>429 Too Many Requests</html>").expect("write body");
        let html = html.display().to_string();
        let out = b.cooldown(
            T0,
            &["record", "proxied", "--status", "429", "--response", &html],
        );
        assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
        assert!(String::from_utf8_lossy(&out.stderr).contains("recording without it"));
        let v = b.json(75, T0, &["check", "proxied"]);
        assert_eq!(v["until_ms"], T0_MS + 65_000, "{v}");
        // A known field with a bad value is left out, named, and the refusal
        // still recorded (with backoff: nothing else was usable).
        std::fs::write(&body, r#"{"resets_in_seconds": -3}"#).expect("write body");
        let err = b.stderr_of(
            0,
            T0,
            &["record", "neg", "--response", &body.display().to_string()],
        );
        assert!(err.contains("'-3' is negative"), "{err}");
        assert_eq!(
            b.json(75, T0, &["check", "neg"])["until_ms"],
            T0_MS + 65_000
        );
    }
}

/// A refusal given to `record` always leaves the scope deferred: unusable
/// values are named on stderr and left out; with nothing usable, the backoff.
#[test]
fn a_refusal_is_always_recorded_from_what_is_usable() {
    let b = local();
    let dir = b.dir.path();
    let record = |scope: &str, extra: &[&str]| {
        let mut args = vec!["record", scope, "--status", "429"];
        args.extend_from_slice(extra);
        let out = b.cooldown(T0, &args);
        assert_eq!(out.status.code(), Some(0), "{extra:?}: {}", describe(&out));
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let until = |scope: &str| b.json(75, T0, &["check", scope])["until_ms"].clone();
    // A body that is not UTF-8 is ignored; --retry-after still counts.
    let binary = dir.join("body.bin");
    std::fs::write(&binary, b"{\"resets_in_seconds\": \xff\xfe}").expect("write body");
    let err = record(
        "binary",
        &[
            "--retry-after",
            "3600",
            "--response",
            binary.to_str().unwrap(),
        ],
    );
    assert!(
        err.contains("not UTF-8") && err.contains("recording without it"),
        "{err}"
    );
    assert_eq!(until("binary"), T0_MS + 3_605_000);
    // A byte-order mark is skipped and the JSON read.
    let bom = dir.join("bom.json");
    std::fs::write(&bom, "\u{feff}{\"resets_in_seconds\": 7200}").expect("write body");
    let err = record("bom", &["--response", bom.to_str().unwrap()]);
    assert!(err.is_empty(), "{err}");
    assert_eq!(until("bom"), T0_MS + 7_205_000);
    // Garbage flags are named; nothing usable left: the backoff applies.
    let err = record(
        "garbage",
        &["--retry-after", "garbage", "--resets-at", "tomorrow"],
    );
    assert!(
        err.contains("Retry-After: 'garbage' cannot be read"),
        "{err}"
    );
    assert!(err.contains("resets_at: 'tomorrow'"), "{err}");
    assert!(err.contains("recording with the backoff"), "{err}");
    assert_eq!(until("garbage"), T0_MS + 65_000);
    // One garbage value does not discard a usable one.
    let err = record(
        "mixed",
        &["--retry-after", "garbage", "--resets-in-seconds", "600"],
    );
    assert!(err.contains("'garbage'"), "{err}");
    assert_eq!(until("mixed"), T0_MS + 605_000);
    // A reset past year 9999 (10^14 would be epoch milliseconds, year 5138;
    // 10^17 ms is past 9999) is not garbage: it needs an operator.
    let err = record("far", &["--resets-at", "99999999999999999"]);
    assert!(err.is_empty(), "{err}");
    b.expect(76, T0, &["check", "far"]);
    // So is a well-formed date past 9999, in every form a reset takes (a
    // five-digit or `+` year; a far date's weekday is not checked), and a
    // body's number too large for any float: never a 1-minute backoff.
    let headers = dir.join("far.h");
    std::fs::write(
        &headers,
        "HTTP/1.1 429\r\nRetry-After: Sat, 01 Jan 10000 00:00:00 GMT\r\n",
    )
    .expect("write headers");
    let at_body = dir.join("far-at.json");
    std::fs::write(&at_body, r#"{"resets_at":"10000-01-01T00:00:00Z"}"#).expect("write body");
    let huge_body = dir.join("far-huge.json");
    std::fs::write(&huge_body, r#"{"error":{"resets_in_seconds":1e400}}"#).expect("write body");
    for (scope, extra) in [
        (
            "far-imf",
            ["--retry-after", "Fri, 01 Jan 10000 00:00:00 GMT"],
        ),
        ("far-5y", ["--resets-at", "10000-01-01T00:00:00Z"]),
        ("far-plus", ["--resets-at", "+10000-01-01T00:00:00Z"]),
        ("far-body", ["--response", at_body.to_str().unwrap()]),
        ("far-huge", ["--response", huge_body.to_str().unwrap()]),
        ("far-hdr", ["--headers", headers.to_str().unwrap()]),
    ] {
        let err = record(scope, &extra);
        assert!(err.is_empty(), "{extra:?}: {err}");
        let err = b.stderr_of(76, T0, &["check", scope]);
        assert!(err.contains("needs an operator"), "{extra:?}: {err}");
    }
    // Garbage with a far year stays garbage: the backoff.
    let err = record("far-bad", &["--resets-at", "10000-13-01T00:00:00Z"]);
    assert!(err.contains("recording with the backoff"), "{err}");
    assert_eq!(until("far-bad"), T0_MS + 65_000);
    // An endless body is read only up to its cap.
    let err = record("zero", &["--retry-after", "60", "--response", "/dev/zero"]);
    assert!(err.contains("larger than 1 MiB"), "{err}");
    assert_eq!(until("zero"), T0_MS + 65_000);
    // A body that cannot be opened, a receipt in the future: named, and recorded.
    let err = record("missing", &["--response", "/nonexistent/body.json"]);
    assert!(err.contains("cannot read the response body"), "{err}");
    let err = record(
        "future",
        &[
            "--retry-after",
            "60",
            "--received-at",
            "2026-12-03T10:00:00Z",
        ],
    );
    assert!(err.contains("cannot be received in the future"), "{err}");
    assert_eq!(until("future"), T0_MS + 65_000);
    let err = record("badtime", &["--retry-after", "60", "--received-at", "noon"]);
    assert!(err.contains("counts as received now"), "{err}");
    // A margin past the maximum is capped (one day), never overflowing.
    let err = record("margin", &["--margin", "9223372036854775"]);
    assert!(err.contains("--margin 9223372036854775 is above"), "{err}");
    assert_eq!(until("margin"), T0_MS + 60_000 + 86_400_000);
    for args in [
        vec!["check", "margin"],
        vec!["probe", "margin", "--holder", "w"],
    ] {
        b.expect(75, T0, &args);
    }
    b.expect(0, T0, &["list"]);
    b.json(0, T0, &["list"]);
    // A bad ceiling variable does not stop a refusal from being recorded.
    let mut cmd = b.command(
        T0,
        &["cooldown", "record", "ceiling", "--retry-after", "60"],
    );
    cmd.args(&b.flags)
        .env("ZAEL_COOLDOWN_CEILING", "99999999999d");
    let out = cmd.output().expect("run");
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("ZAEL_COOLDOWN_CEILING"));
    b.expect(75, T0, &["check", "ceiling"]);
}

/// A misspelt `-N` is never "go": the namespace's cooldowns cannot be read.
#[test]
fn an_unknown_namespace_is_never_permission() {
    for b in backends("ns") {
        let scope = "openai/acct-42/gpt-4";
        record_issue_429(&b, scope);
        let err = b.stderr_of(76, T0, &["check", scope, "-N", "defualt"]);
        assert!(
            err.contains("namespace 'defualt' is not registered")
                && err.contains("did you mean 'default'?")
                && err.contains("no call is permitted"),
            "{err}"
        );
        let v = b.json(76, T0, &["check", scope, "-N", "defualt"]);
        assert_eq!(v["verdict"], "unreadable", "{v}");
        b.expect(76, T0, &["probe", scope, "--holder", "w", "-N", "nope"]);
        b.expect(1, T0, &["list", "-N", "nope"]);
        b.expect(1, T0, &["clear", scope, "-N", "nope"]);
        // The registered namespace still answers.
        b.expect(75, T0, &["check", scope, "-N", "default"]);
    }
}

/// A stored deadline (or lease) outside 1970..9999 is corruption, never "go".
#[test]
fn out_of_range_state_is_corruption() {
    for b in backends("range") {
        let scope = "openai/acct-42/gpt-4";
        record_issue_429(&b, scope);
        let good = b.state_item(scope);
        for (attr, v) in [
            ("not_before", "-1"),
            ("not_before", "0"),
            ("not_before", "-9223372036854775808"),
            ("not_before", "9223372036854775807"),
            ("probe_expires", "-9223372036854775808"),
        ] {
            let mut item = good.clone();
            item.insert(attr.into(), AttrValue::N(v.into()));
            if attr == "probe_expires" {
                item.insert("probe_holder".into(), AttrValue::s("w"));
            }
            b.overwrite(item);
            let later = "2027-06-01T00:00:00Z";
            let err = b.stderr_of(76, later, &["check", scope]);
            assert!(err.contains(attr) && err.contains("out of range"), "{err}");
            b.expect(76, later, &["probe", scope, "--holder", "w"]);
            let list = b.json(0, later, &["list"]);
            assert_eq!(list["cooldowns"][0]["status"], "unreadable", "{list}");
            let table = b.expect(0, later, &["list"]);
            assert!(table.contains("unreadable"), "{table}");
        }
    }
}

#[test]
fn absurd_durations_are_refused() {
    let b = local();
    b.expect(0, T0, &["record", "s", "--retry-after", "60"]);
    for (lease, needle) in [
        ("99999999999d", "must be at most 1d"),
        ("2d", "must be at most 1d"),
        ("0s", "must be at least 1ms"),
    ] {
        let out = b.cooldown(T0, &["probe", "s", "--holder", "w", "--lease", lease]);
        assert_eq!(out.status.code(), Some(2), "{lease}: {}", describe(&out));
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(needle),
            "{}",
            describe(&out)
        );
    }
    for (var, value) in [
        ("ZAEL_COOLDOWN_JITTER", "99999999999d"),
        ("ZAEL_COOLDOWN_JITTER", "2h"),
        ("ZAEL_COOLDOWN_CEILING", "99999999999d"),
    ] {
        let mut cmd = b.command(T0, &["cooldown", "probe", "s", "--holder", "w"]);
        cmd.args(&b.flags).env(var, value);
        let out = cmd.output().expect("run");
        common::assert_exit(&out, 2, format_args!("{var}={value}"));
        common::assert_stderr_has(&out, var);
    }
    // A clock override outside 1970..9999 is refused.
    let out = b.cooldown("1969-12-31T23:59:59Z", &["check", "s"]);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("out of range"));
}

#[test]
fn bad_input_is_refused_and_nothing_is_written() {
    let b = local();
    for (args, needle) in [
        (vec!["record", "a#b"], "'#' is reserved"),
        (vec!["record", ""], "empty"),
    ] {
        let err = b.stderr_of(1, T0, &args);
        assert!(err.contains(needle), "{args:?}: {err}");
    }
    let out = b.cooldown(T0, &["record", "s", "--status", "200"]);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    // Nothing was written: the local store file was never even created.
    assert!(!b.local.as_ref().expect("local").exists());
    // A store that does not exist is unreadable, never permission.
    b.expect(76, T0, &["check", "s"]);
    // A bad clock override is a usage error.
    let err = b.stderr_of(2, "yesterday", &["check", "s"]);
    assert!(err.contains("ZAEL_NOW"));
}

#[test]
fn hintless_refusals_back_off_exponentially() {
    let b = local();
    let v = b.json(0, T0, &["record", "s", "--status", "503"]);
    assert_eq!(v["recorded"]["not_before_ms"], T0_MS + 65_000, "{v}");
    let v = b.json(
        0,
        "2026-12-02T10:01:05Z",
        &["record", "s", "--status", "503"],
    );
    assert_eq!(
        v["recorded"]["not_before_ms"],
        T0_MS + 65_000 + 125_000,
        "{v}"
    );
}

#[test]
fn concurrent_recorders_keep_the_latest_deadline() {
    for b in backends("race") {
        let scope = "openai/acct-42/gpt-4";
        // Create the table and namespace first so every racer contends on the item.
        b.expect(0, T0, &["record", "warm-up", "--retry-after", "1"]);
        let resets = ["60", "5000", "202825", "3000", "100", "7200"];
        let outs = common::run_together(resets.iter().map(|r| {
            let mut args = vec![
                "cooldown",
                "record",
                scope,
                "--resets-in-seconds",
                r,
                "--received-at",
                T0,
                "--format",
                "json",
            ];
            args.extend(b.flags.iter().map(String::as_str));
            b.command(T0, &args)
        }));
        // Each racer wrote once, on the version before it: six versions in
        // a row (the first is random), none lost, the last one stored.
        let mut written: Vec<u64> = outs
            .iter()
            .map(|out| {
                b.assert_exit(out, 0, "record");
                let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
                r["recorded"]["version"].as_u64().unwrap()
            })
            .collect();
        written.sort_unstable();
        let first = written[0];
        let in_a_row: Vec<u64> = (first..first + resets.len() as u64).collect();
        assert_eq!(written, in_a_row, "[{}]", b.label);
        let v = b.json(75, T0, &["check", scope]);
        assert_eq!(v["until_ms"], DEADLINE_MS, "[{}] {v}", b.label);
        assert_eq!(v["state"]["version"], written[5], "[{}] {v}", b.label);
    }
}

/// The Python library ignores cooldown items: with one recorded in a table,
/// it still resolves the namespace we registered, writes and reads limits, and
/// admits requests; the item has the documented layout.
#[test]
fn the_python_library_ignores_cooldown_items() {
    let Some(env) = interop_support::interop("cdpy") else {
        return;
    };
    env.create_table();
    let rec = env.ours(&[
        "cooldown",
        "record",
        "openai/acct-42",
        "--resets-in-seconds",
        "202825",
        "-n",
        &env.table,
        "--endpoint-url",
        &env.endpoint,
    ]);
    assert_eq!(rec.status.code(), Some(0), "{}", describe(&rec));
    let ns = env.reference(&["nsid", &env.table, "default"])["namespace_id"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(!ns.is_empty());
    let item = env
        .dump()
        .into_iter()
        .find(|i| i["PK"]["S"] == format!("{ns}/COOLDOWN#openai/acct-42"))
        .expect("cooldown item under the namespace id");
    assert_eq!(item["SK"]["S"], "#STATE");
    assert_eq!(item["GSI4PK"]["S"], ns.as_str());
    assert_eq!(item["GSI4SK"], item["PK"]);
    env.reference(&["set-fixture", &env.table, "default"]);
    let got = env.reference(&["get-limits", &env.table, "default", "user-1", "gpt-4"]);
    assert!(got.as_array().is_some_and(|l| !l.is_empty()), "{got}");
    let admitted = env.reference(&[
        "acquire", &env.table, "default", "user-1", "gpt-4", "rpm", "1",
    ]);
    assert_eq!(admitted["admitted"], Value::Bool(true), "{admitted}");
}

/// Every JSON document the cooldown commands print carries the top-level
/// `"version": 1` of the other JSON outputs.
#[test]
fn every_json_document_is_versioned() {
    let b = local();
    let later = "2026-12-02T10:05:00Z";
    let docs = [
        b.json(0, T0, &["record", "p/a", "--resets-in-seconds", "60"]),
        b.json(75, T0, &["check", "p/a"]),
        b.json(0, T0, &["list"]),
        b.json(0, later, &["probe", "p/a", "--holder", "w"]),
        b.json(0, later, &settle("p/a", "w", "ok", &[])),
        b.json(0, later, &["clear", "p/a"]),
    ];
    for doc in docs {
        assert_eq!(doc["version"], 1, "{doc}");
    }
}

/// Every answer that wrote the state reports the version it wrote: the one
/// a fresh `check` reads next.
#[test]
fn answers_report_the_version_they_wrote() {
    for b in backends("written-version") {
        let scope = "v/1";
        let stored = |now: &str| b.json(75, now, &["check", scope])["state"]["version"].clone();
        // A new item's version is random (no ABA after a delete); every
        // write after counts up from it.
        let r = b.json(0, T0, &["record", scope, "--retry-after", "100"]);
        let v0 = r["recorded"]["version"].as_u64().unwrap();
        assert_eq!(stored(T0), v0, "[{}]", b.label);
        let r = b.json(0, T0, &["record", scope, "--retry-after", "100"]);
        assert_eq!(r["recorded"]["version"], v0 + 1, "[{}] {r}", b.label);
        assert_eq!(stored(T0), v0 + 1, "[{}]", b.label);
        let later = "2026-12-02T10:05:00Z";
        let p = b.json(
            0,
            later,
            &["probe", scope, "--holder", "w", "--lease", "1m"],
        );
        assert_eq!(p["verdict"], "won", "[{}] {p}", b.label);
        assert_eq!(p["state"]["version"], v0 + 2, "[{}] {p}", b.label);
        assert_eq!(stored(later), v0 + 2);
        let s = b.json(
            0,
            later,
            &settle(scope, "w", "quota", &["--retry-after", "60"]),
        );
        assert_eq!(s["result"], "recorded", "[{}] {s}", b.label);
        assert_eq!(s["state"]["version"], v0 + 3, "[{}] {s}", b.label);
        assert_eq!(stored(later), v0 + 3);
        // A probe, then credentials rejected while it is held: settling it
        // keeps the cooldown for an operator and lets the probe go.
        let at = "2026-12-02T10:07:00Z";
        b.expect(0, at, &["probe", scope, "--holder", "w", "--lease", "1m"]);
        b.expect(0, at, &["record", scope, "--status", "401"]);
        let k = b.json(0, at, &settle(scope, "w", "ok", &[]));
        assert_eq!(k["result"], "operator_kept", "[{}] {k}", b.label);
        assert_eq!(k["state"]["version"], v0 + 6, "[{}] {k}", b.label);
        assert_eq!(
            b.json(76, at, &["check", scope])["state"]["version"],
            v0 + 6
        );
    }
}

// ------------------------------------------------ provider headers (issue 22)

impl Backend {
    /// Writes `text` to a file in the backend's temp dir; returns its path.
    fn file(&self, name: &str, text: &str) -> String {
        common::write_arg(self.dir.path(), name, text)
    }

    /// [`Backend::record_at`] with `--headers` a file holding `text`.
    fn record_headers(&self, now: &str, scope: &str, text: &str) -> (String, String) {
        let h = self.file(&format!("{}.h", scope.replace('/', "-")), text);
        self.record_at(now, scope, &["--headers", &h])
    }

    /// `record SCOPE ARGS… --margin 0 --format json` at `now`: the recorded
    /// deadline and stderr.
    fn record_at(&self, now: &str, scope: &str, args: &[&str]) -> (String, String) {
        let mut all = vec!["record", scope, "--margin", "0", "--format", "json"];
        all.extend_from_slice(args);
        let out = self.exits(0, now, &all);
        let v: Value = serde_json::from_slice(&out.stdout).expect("JSON");
        let at = v["recorded"]["not_before"].as_str().unwrap_or_default();
        (
            at.to_string(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }
}

/// Recorded shapes of each provider's 429, as `curl -D` writes them, each
/// read with its JSON body; dates chosen to cross a month end and a DST change.
#[test]
fn provider_headers_are_read_from_a_curl_dump() {
    for b in backends("hdr") {
        // OpenAI: a 100 Continue before the 429 (curl keeps both blocks; the
        // last counts), CRLF lines, both reset durations; the latest crosses
        // the month end.
        let h = b.file(
            "openai.h",
            "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 429 Too Many Requests\r\ndate: Sat, 31 Jan 2026 23:58:00 GMT\r\ncontent-type: application/json\r\nx-ratelimit-limit-requests: 500\r\nx-ratelimit-limit-tokens: 30000\r\nx-ratelimit-remaining-requests: 499\r\nx-ratelimit-remaining-tokens: 0\r\nx-ratelimit-reset-requests: 1s\r\nx-ratelimit-reset-tokens: 6m0s\r\n\r\n",
        );
        let body = b.file(
            "openai.json",
            r#"{"error":{"message":"Rate limit reached for gpt-4 on tokens per min (TPM)","type":"tokens","param":null,"code":"rate_limit_exceeded"}}"#,
        );
        let (at, err) = b.record_at(
            "2026-01-31T23:58:30Z",
            "openai/tpm",
            &[
                "--headers",
                &h,
                "--response",
                &body,
                "--received-at",
                "2026-01-31T23:58:00Z",
            ],
        );
        assert_eq!(at, "2026-02-01T00:04:00Z", "[{}] {err}", b.label);
        assert!(err.is_empty(), "[{}] {err}", b.label);
        let v = b.json(75, "2026-02-01T00:00:00Z", &["check", "openai/tpm"]);
        let reason = v["state"]["reason"].as_str().unwrap_or_default();
        assert_eq!(
            reason,
            "status 429; tokens; x-ratelimit-reset-requests 1s; x-ratelimit-reset-tokens 6m0s"
        );
        // Go's longest form, across a month end and into April.
        let (at, _) = b.record_headers(
            "2026-03-31T22:00:00Z",
            "openai/rpd",
            "HTTP/2 429\r\nx-ratelimit-reset-requests: 2h10m3.5s\r\nx-ratelimit-reset-tokens: 20ms\r\nretry-after-ms: 1500\r\n\r\n",
        );
        assert_eq!(at, "2026-04-01T00:10:03.500Z", "[{}]", b.label);
    }
}

#[test]
fn anthropic_and_retry_after_headers_across_dst_changes() {
    let b = local();
    // Anthropic, just before the US spring-forward (2026-03-08 02:00 PST →
    // 03:00 PDT): resets are instants with offsets, the skipped hour does not
    // stretch them; the latest (tokens) wins over retry-after.
    let h = b.file(
        "anthropic.h",
        concat!(
            "HTTP/2 429 \r\n",
            "date: Sun, 08 Mar 2026 09:59:30 GMT\r\n",
            "content-type: application/json\r\n",
            "retry-after: 31\r\n",
            "anthropic-ratelimit-requests-limit: 50\r\n",
            "anthropic-ratelimit-requests-remaining: 49\r\n",
            "anthropic-ratelimit-requests-reset: 2026-03-08T10:00:00Z\r\n",
            "anthropic-ratelimit-tokens-limit: 40000\r\n",
            "anthropic-ratelimit-tokens-remaining: 0\r\n",
            "anthropic-ratelimit-tokens-reset: 2026-03-08T03:00:30-07:00\r\n",
            "anthropic-ratelimit-input-tokens-reset: 2026-03-08T01:59:59-08:00\r\n",
            "anthropic-ratelimit-output-tokens-reset: 2026-03-08T10:00:12Z\r\n",
            "request-id: req_018EeWyXxfu5pfWkrYcMdjWG\r\n",
            "\r\n",
        ),
    );
    let body = b.file(
        "anthropic.json",
        r#"{"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit"}}"#,
    );
    let (at, err) = b.record_at(
        "2026-03-08T09:59:31Z",
        "anthropic/acct-7",
        &[
            "--headers",
            &h,
            "--response",
            &body,
            "--received-at",
            "2026-03-08T09:59:30Z",
        ],
    );
    assert_eq!(at, "2026-03-08T10:00:30Z", "{err}");
    assert!(err.is_empty(), "{err}");
    let v = b.json(75, "2026-03-08T10:00:00Z", &["check", "anthropic/acct-7"]);
    assert!(
        v["state"]["reason"]
            .as_str()
            .unwrap_or_default()
            .starts_with("status 429; rate_limit_error; Retry-After 31; "),
        "{v}"
    );
    // Retry-After as an HTTP-date across a month end, the night after the EU
    // fall-back: GMT throughout, so no local clock enters.
    let (at, _) = b.record_headers(
        "2026-10-31T23:30:00Z",
        "svc/a",
        "HTTP/1.1 503 Service Unavailable\nRetry-After: Sun, 01 Nov 2026 00:30:00 GMT\n\n",
    );
    assert_eq!(at, "2026-11-01T00:30:00Z");
    // Delta-seconds count from the receipt, not from when it is recorded.
    let h = b.file(
        "secs.h",
        "HTTP/1.1 429 Too Many Requests\nRetry-After: 3600\n\n",
    );
    let (at, _) = b.record_at(
        "2026-10-25T01:10:00Z",
        "svc/b",
        &["--headers", &h, "--received-at", "2026-10-25T00:30:00Z"],
    );
    assert_eq!(at, "2026-10-25T01:30:00Z");
    // retry-after-ms beside a body whose resets_at is in epoch milliseconds.
    let h = b.file(
        "ms.h",
        "HTTP/1.1 429 Too Many Requests\nretry-after-ms: 1500\n\n",
    );
    let body = b.file("ms.json", r#"{"error":{"resets_at":1796205660000}}"#);
    let (at, err) = b.record_at(T0, "svc/c", &["--headers", &h, "--response", &body]);
    assert_eq!(at, "2026-12-02T10:01:00Z", "{err}");
    assert!(err.is_empty(), "{err}");
}

#[test]
fn a_malformed_or_unknown_header_never_loses_the_refusal() {
    let b = local();
    // A malformed header beside a good one: the good one counts.
    let (at, err) = b.record_headers(
        T0,
        "mixed",
        "HTTP/1.1 429 Too Many Requests\r\nx-ratelimit-reset-tokens: soon\r\nx-ratelimit-reset-requests: 20s\r\nX-RateLimit-Reset: 1796205900\r\nnot a header line\r\n\r\n",
    );
    assert_eq!(at, "2026-12-02T10:00:20Z", "{err}");
    assert!(
        err.contains("x-ratelimit-reset-tokens: 'soon' cannot be read; expected a duration such as 1s, 6m0s, 2h10m3.5s or 20ms; recording without it"),
        "{err}"
    );
    assert!(
        err.contains("header 'X-RateLimit-Reset: 1796205900' is not read"),
        "{err}"
    );
    assert!(
        err.contains("line 5 is not a header ('Name: value'): not a header line"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 3, "{err}");
    // (scope, headers, the deadline recorded, what stderr says)
    for (scope, headers, want, says) in [
        // Nothing usable: the backoff (1 minute), never "go".
        (
            "bad",
            "HTTP/1.1 429 Too Many Requests\r\nretry-after: later\r\n\r\n",
            "2026-12-02T10:01:00Z",
            "no usable reset: recording with the backoff",
        ),
        // A success in the file is not a refusal: named, and the refusal recorded.
        (
            "ok",
            "HTTP/1.1 200 OK\r\nRetry-After: 30\r\n\r\n",
            "2026-12-02T10:00:30Z",
            "status 200 is not a refusal",
        ),
    ] {
        let (at, err) = b.record_headers(T0, scope, headers);
        assert_eq!(at, want, "{err}");
        assert!(err.contains(says), "{err}");
    }
    // A headers file that cannot be read, or is endless: named, recorded.
    for (scope, path, says) in [
        ("missing", "/nonexistent/h", "cannot read the headers"),
        ("zero", "/dev/zero", "larger than 1 MiB"),
    ] {
        let (at, err) = b.record_at(T0, scope, &["--headers", path, "--retry-after", "60"]);
        assert_eq!(at, "2026-12-02T10:01:00Z", "{err}");
        assert!(
            err.contains(says) && err.contains("recording without them"),
            "{err}"
        );
    }
}

#[test]
fn curl_dump_details_status_blocks_case_and_repeats() {
    let b = local();
    // A redirect followed with -L: the redirect's Retry-After does not count.
    let (at, _) = b.record_headers(
        T0,
        "redirect",
        "HTTP/1.1 302 Found\r\nLocation: https://api.example.com/v2\r\nRetry-After: 7200\r\n\r\nHTTP/1.1 429 Too Many Requests\r\nRetry-After: 30\r\n\r\n",
    );
    assert_eq!(at, "2026-12-02T10:00:30Z");
    // Names without regard to case; a repeated header: every value counts.
    let (at, _) = b.record_headers(
        T0,
        "repeat",
        "HTTP/1.1 429 Too Many Requests\r\nRETRY-AFTER: 20\r\nretry-after: 40\r\nRetry-After: 20\r\n\r\n",
    );
    assert_eq!(at, "2026-12-02T10:00:40Z");
    // The status line decides without --status: a 401 needs an operator.
    let h = b.file("auth.h", "HTTP/2 401\r\nwww-authenticate: Bearer\r\n\r\n");
    b.expect(0, T0, &["record", "auth", "--headers", &h]);
    b.expect(76, T0, &["check", "auth"]);
    // An explicit --status wins over the file's, with a warning.
    let h = b.file(
        "503.h",
        "HTTP/1.1 503 Service Unavailable\r\nRetry-After: 10\r\n\r\n",
    );
    let (_, err) = b.record_at(T0, "conflict", &["--headers", &h, "--status", "429"]);
    assert!(
        err.contains("status 503 differs from the status given (429); recording 429"),
        "{err}"
    );
    // `curl -i` output on standard input: headers and body in one stream.
    let mut cmd = b.command(
        T0,
        &[
            "cooldown",
            "record",
            "stdin",
            "--headers",
            "-",
            "--margin",
            "0",
            "--format",
            "json",
        ],
    );
    cmd.args(&b.flags)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().expect("spawn");
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().expect("stdin");
        stdin
            .write_all(b"HTTP/1.1 429 Too Many Requests\r\nretry-after: 5\r\n\r\n{\"error\":{\"type\":\"usage_limit_reached\",\"resets_in_seconds\":90}}")
            .expect("write stdin");
    }
    let out = child.wait_with_output().expect("wait");
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let v: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(v["recorded"]["not_before"], "2026-12-02T10:01:30Z", "{v}");
    assert!(v["recorded"]["reason"]
        .as_str()
        .unwrap_or_default()
        .contains("usage_limit_reached"));
    // Standard input cannot feed both files.
    let err = b.stderr_of(
        2,
        T0,
        &["record", "both", "--headers", "-", "--response", "-"],
    );
    assert!(
        err.contains(
            "--headers -, --response - both name standard input, and it can be read only once"
        ) && err.contains("pass --headers - alone"),
        "{err}"
    );
}

#[test]
fn settle_reads_headers_like_record() {
    for b in backends("settle-hdr") {
        let scope = "openai/acct-42/gpt-4";
        let at = probing(&b, scope);
        let h = b.file(
            "again.h",
            "HTTP/1.1 429 Too Many Requests\r\nx-ratelimit-reset-tokens: 1h0m0s\r\nretry-after: nonsense\r\n\r\n",
        );
        let body = b.file("again.json", r#"{"error":{"type":"tokens"}}"#);
        // Received a minute before it is settled; no margin.
        let out = b.exits(
            0,
            at,
            &settle(
                scope,
                "w1",
                "quota",
                &[
                    "--headers",
                    &h,
                    "--response",
                    &body,
                    "--received-at",
                    "2026-12-04T18:20:00Z",
                    "--margin",
                    "0",
                    "--format",
                    "json",
                ],
            ),
        );
        let v: Value = serde_json::from_slice(&out.stdout).expect("JSON");
        assert_eq!(
            v["state"]["not_before"], "2026-12-04T19:20:00Z",
            "[{}] {v}",
            b.label
        );
        assert_eq!(
            v["state"]["reason"],
            "recovery probe refused; tokens; x-ratelimit-reset-tokens 1h0m0s"
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("Retry-After: 'nonsense' cannot be read"),
            "{err}"
        );
        // With --outcome ok the files are not read: a script passes them always.
        let later = "2026-12-04T19:21:00Z";
        b.expect(0, later, &["probe", scope, "--holder", "w2"]);
        let ok = b.file("ok.h", "HTTP/1.1 200 OK\r\n\r\n");
        let out = b.cooldown(later, &settle(scope, "w2", "ok", &["--headers", &ok]));
        assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
        assert!(out.stderr.is_empty(), "{}", describe(&out));
        b.expect(0, later, &["check", scope]);
    }
}

// ------------------------------------------------ check --wait-up-to (issue 22)

/// `check --wait-up-to` at `now` with a jitter bound, in JSON: (exit code,
/// output, real time taken).
fn check_waiting(
    b: &Backend,
    now: &str,
    jitter: &str,
    args: &[&str],
) -> (i32, Value, std::time::Duration) {
    let mut cmd = b.command(now, &["cooldown", "check"]);
    cmd.args(args)
        .args(["--format", "json"])
        .args(&b.flags)
        .env("ZAEL_COOLDOWN_JITTER", jitter);
    let started = std::time::Instant::now();
    let out = cmd.output().expect("run");
    let took = started.elapsed();
    let v = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", describe(&out)));
    (out.status.code().unwrap_or(-1), v, took)
}

#[test]
fn wait_up_to_sleeps_through_a_near_deadline() {
    let b = local();
    let scope = "openai/acct-42/rpm";
    // Retry-After 1 s at T0, no margin: the deadline is T0 + 1 s.
    b.record_at(T0, scope, &["--retry-after", "1"]);
    // 0.4 s before it, without jitter: sleeps the 0.6 s, then go.
    let (code, v, took) = check_waiting(
        &b,
        "2026-12-02T10:00:00.400Z",
        "0",
        &[scope, "--wait-up-to", "5s"],
    );
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["verdict"], "go", "{v}");
    let waited = v["waited_ms"].as_i64().expect("waited_ms");
    assert!(waited >= 600, "{v}");
    assert!(took.as_millis() >= 600, "{took:?}");
    // With jitter, this worker also waits its own share after the deadline,
    // the same share `probe --holder` gives it.
    let jitter = jitter_ms("w1", seed_of(scope), 1000);
    let (code, v, took) = check_waiting(
        &b,
        "2026-12-02T10:00:00.400Z",
        "1s",
        &[scope, "--wait-up-to", "5s", "--holder", "w1"],
    );
    assert_eq!(code, 0, "{v}");
    let waited = v["waited_ms"].as_i64().expect("waited_ms");
    assert!(waited >= 600 + jitter, "jitter {jitter}: {v}");
    assert!(took.as_millis() >= (600 + jitter) as u128, "{took:?}");
    // Far (beyond --wait-up-to): 75 at once, as without it.
    let (code, v, _) = check_waiting(&b, T0, "0", &[scope, "--wait-up-to", "500ms"]);
    assert_eq!(code, 75, "{v}");
    assert_eq!(v["verdict"], "wait");
    assert_eq!(v["waited_ms"], 0);
    // The deadline is near, but this worker's jitter carries it past the bound.
    let (code, v, _) = check_waiting(
        &b,
        "2026-12-02T10:00:00.999Z",
        "1h",
        &[scope, "--wait-up-to", "1s", "--holder", "w-far"],
    );
    let far_jitter = jitter_ms("w-far", seed_of(scope), 3_600_000);
    assert!(far_jitter > 1_000, "pick another worker id: {far_jitter}");
    assert_eq!(code, 75, "{v}");
    // Hours away: 75, however long --wait-up-to (within the ceiling).
    b.record_at(T0, "daily", &["--retry-after", "7200"]);
    let (code, _, _) = check_waiting(&b, T0, "0", &["daily", "--wait-up-to", "1h"]);
    assert_eq!(code, 75);
    // Nothing recorded: go at once.
    let (code, v, _) = check_waiting(&b, T0, "0", &["nothing", "--wait-up-to", "1h"]);
    assert_eq!((code, &v["verdict"]), (0, &Value::from("go")));
}

#[test]
fn wait_up_to_is_bounded_and_needs_operator_stays_76() {
    let b = local();
    b.record_at(T0, "s", &["--retry-after", "1"]);
    // Beyond the plausibility ceiling (default 31d, or ZAEL_COOLDOWN_CEILING).
    for (ceiling, wait) in [("", "32d"), ("1h", "2h")] {
        let mut cmd = b.command(T0, &["cooldown", "check", "s", "--wait-up-to", wait]);
        cmd.args(&b.flags).env("ZAEL_COOLDOWN_CEILING", ceiling);
        let out = cmd.output().expect("run");
        assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
        assert!(
            String::from_utf8_lossy(&out.stderr)
                .contains("must be at most the plausibility ceiling"),
            "{}",
            describe(&out)
        );
    }
    for bad in [
        vec!["check", "s", "--wait-up-to", "soon"],
        vec!["check", "s", "--holder", "w1"],
    ] {
        let out = b.cooldown(T0, &bad);
        assert_eq!(out.status.code(), Some(2), "{bad:?}: {}", describe(&out));
    }
    // An operator's matter is never waited out.
    let h = b.file("auth.h", "HTTP/1.1 403 Forbidden\r\n\r\n");
    b.expect(0, T0, &["record", "auth", "--headers", &h]);
    b.expect(76, T0, &["check", "auth", "--wait-up-to", "1h"]);
}

/// While one worker holds the recovery probe, a waiting check looks again when
/// the lease ends: the prober's new refusal (written meanwhile, by another
/// process) is what it sees.
#[test]
fn wait_up_to_looks_again_after_a_probe() {
    let b = local();
    let scope = "svc/probe";
    b.record_at(T0, scope, &["--retry-after", "60"]);
    // Past the deadline and the most jitter (30 s) any worker adds to it.
    let deadline = "2026-12-02T10:01:31Z";
    b.expect(
        0,
        deadline,
        &["probe", scope, "--holder", "prober", "--lease", "5s"],
    );
    let mut cmd = b.command(
        deadline,
        &["cooldown", "check", scope, "--wait-up-to", "10s"],
    );
    cmd.args(["--format", "json"])
        .args(&b.flags)
        .stdout(std::process::Stdio::piped());
    let started = std::time::Instant::now();
    let waiting = cmd.spawn().expect("spawn check");
    // Once the check has opened the store (and so read the state, a moment
    // later), the probe is refused again, well before its lease ends.
    let store = std::fs::canonicalize(b.local.as_ref().expect("local store")).unwrap();
    let fds = format!("/proc/{}/fd", waiting.id());
    while !std::fs::read_dir(&fds).is_ok_and(|mut d| {
        d.any(|e| e.is_ok_and(|e| std::fs::read_link(e.path()).is_ok_and(|l| l == store)))
    }) {
        assert!(
            started.elapsed().as_secs() < 4,
            "the check never opened the store"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    std::thread::sleep(std::time::Duration::from_millis(300));
    b.expect(
        0,
        deadline,
        &settle(scope, "prober", "quota", &["--retry-after", "3600"]),
    );
    assert!(
        started.elapsed().as_millis() < 5000,
        "settle took longer than the lease; the check may have looked after it ended"
    );
    let out = waiting.wait_with_output().expect("wait for check");
    let v: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(out.status.code(), Some(75), "{v}");
    assert_eq!(v["verdict"], "wait");
    assert!(v["waited_ms"].as_i64().unwrap_or_default() >= 5000, "{v}");
    assert_eq!(v["until"], "2026-12-02T11:01:36Z", "{v}");
    // Without the new refusal the same wait ends in go: the lease expires.
    b.record_at(T0, "svc/quiet", &["--retry-after", "60"]);
    b.expect(
        0,
        deadline,
        &["probe", "svc/quiet", "--holder", "prober", "--lease", "1s"],
    );
    let (code, v, _) = check_waiting(&b, deadline, "0", &["svc/quiet", "--wait-up-to", "5s"]);
    assert_eq!(code, 0, "{v}");
    assert!(v["waited_ms"].as_i64().unwrap_or_default() >= 1000, "{v}");
}

// ------------------------------------------------ the README's cron job

/// The cron-job script of docs/cooldowns.md, run as written (only the store path
/// changed) with a stand-in `curl` that answers as a provider would.
#[test]
fn the_documented_cron_job_runs_as_written() {
    if !common::have("jq") {
        eprintln!("skipped: the README's cron job needs jq");
        return;
    }
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/cooldowns.md"))
        .expect("read docs/cooldowns.md");
    let section = readme
        .split("# Provider cooldowns in a cron job")
        .nth(1)
        .expect("the cron-job section");
    let script = section
        .split("```sh\n")
        .nth(1)
        .and_then(|s| s.split("\n```").next())
        .expect("the cron-job script");
    let b = local();
    let dir = b.dir.path();
    let store_line = "STORE=\"--local=/var/lib/jobs/cooldowns.sqlite\"";
    assert!(script.contains(store_line), "{script}");
    let store = b.local.as_ref().expect("local store").display().to_string();
    let script = script.replace(store_line, &format!("STORE=\"--local={store}\""));
    let job = b.file("job.sh", &script);
    // `curl -sS -o BODY -D HEADERS -w '%{http_code}' …`: writes the canned
    // answer and logs the call.
    let bin = dir.join("bin");
    std::fs::create_dir(&bin).expect("bin dir");
    let curl = bin.join("curl");
    std::fs::write(
        &curl,
        "#!/bin/sh\nwhile [ $# -gt 0 ]; do\n  case $1 in\n    -o) body=$2; shift ;;\n    -D) headers=$2; shift ;;\n  esac\n  shift\ndone\ncp \"$FAKE/headers\" \"$headers\"\ncp \"$FAKE/body\" \"$body\"\necho called >> \"$FAKE/calls\"\ncat \"$FAKE/status\"\n",
    )
    .expect("write curl");
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&curl, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    let exe = std::path::Path::new(env!("CARGO_BIN_EXE_zae-limiter"));
    let path = format!(
        "{}:{}:{}",
        bin.display(),
        exe.parent().expect("bin dir").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let answer = |status: &str, headers: &str, body: &str| {
        std::fs::write(dir.join("status"), status).expect("status");
        std::fs::write(dir.join("headers"), headers).expect("headers");
        std::fs::write(dir.join("body"), body).expect("body");
    };
    let calls = || {
        std::fs::read_to_string(dir.join("calls"))
            .unwrap_or_default()
            .lines()
            .count()
    };
    // At `now`, or on the real clock (a sleep carries into the next command).
    let run = |now: &str| {
        let mut sh = std::process::Command::new("sh");
        sh.arg(&job).env_clear();
        if !now.is_empty() {
            sh.env("ZAEL_NOW", now);
        }
        let out = sh
            .env("PATH", &path)
            .env("HOME", dir)
            .env("ZAEL_COOLDOWN_JITTER", "0")
            .env("FAKE", dir)
            .env("API_KEY", "sk-test")
            .output()
            .expect("run the job");
        common::assert_exit(&out, 0, format_args!("job at {now}"));
        out
    };
    // "Create the store once".
    let mut create = vec!["table", "create"];
    create.extend(b.flags.iter().map(String::as_str));
    let out = b.run(T0, &create);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    // 1. The provider refuses: OpenAI's tokens reset in 6 minutes.
    answer(
        "429",
        "HTTP/1.1 429 Too Many Requests\r\nx-ratelimit-remaining-tokens: 0\r\nx-ratelimit-reset-tokens: 6m0s\r\n\r\n",
        r#"{"error":{"type":"tokens","code":"rate_limit_exceeded"}}"#,
    );
    run(T0);
    assert_eq!(calls(), 1);
    let scope = "openai/acct-42/gpt-4";
    let v = b.json(75, T0, &["check", scope]);
    assert_eq!(v["until"], "2026-12-02T10:06:05Z", "{v}");
    // 2. A tick a minute later skips quietly, without calling.
    run("2026-12-02T10:01:00Z");
    assert_eq!(calls(), 1);
    // 3. On the real clock: a 429 asking for 1 s (+ the 5 s margin) is
    //    recorded; the next tick sleeps through that short wait, wins the
    //    probe, calls, and the success clears the cooldown for everyone.
    b.expect(0, T0, &["clear", scope]);
    answer("429", "HTTP/2 429\r\nretry-after: 1\r\n\r\n", "");
    let out = run("");
    assert!(out.stderr.is_empty(), "{}", describe(&out));
    answer("200", "HTTP/2 200\r\n\r\n", "{}");
    let started = std::time::Instant::now();
    run("");
    assert!(started.elapsed().as_secs() >= 4, "{:?}", started.elapsed());
    assert_eq!(calls(), 3);
    let v = b.json(0, "", &["check", scope]);
    assert_eq!(v["state"], Value::Null, "{v}");
    // 4. Credentials rejected: recorded from the status line alone; 76 after.
    answer(
        "401",
        "HTTP/2 401\r\n\r\n",
        r#"{"error":{"type":"authentication_error"}}"#,
    );
    run("2026-12-02T10:15:00Z");
    assert_eq!(calls(), 4);
    b.expect(76, "2026-12-02T10:30:00Z", &["check", scope]);
}
