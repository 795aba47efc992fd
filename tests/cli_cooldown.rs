//! `zae-limiter cooldown …` across process boundaries: every step is a new
//! process, "now" comes from `ZAEL_NOW`, and each scenario runs on every store
//! available — the local store always, DynamoDB (moto) when
//! `ZAEL_TEST_DYNAMODB_ENDPOINT` is set (required when `ZAEL_REQUIRE_INTEROP=1`).

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
    fn expect(&self, code: i32, now: &str, args: &[&str]) -> String {
        let out = self.cooldown(now, args);
        assert_eq!(
            out.status.code(),
            Some(code),
            "[{}] cooldown {args:?} at {now}:\n{}",
            self.label,
            describe(&out)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn json(&self, code: i32, now: &str, args: &[&str]) -> Value {
        let mut all = args.to_vec();
        all.extend(["--format", "json"]);
        let text = self.expect(code, now, &all);
        serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("[{}] {args:?}: not JSON ({e}):\n{text}", self.label))
    }

    fn cooldown_key(&self, scope: &str) -> Key {
        let ns = self.namespace_id("default");
        Key::new(format!("{ns}/COOLDOWN#{scope}"), "#STATE")
    }
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
        let children: Vec<_> = workers
            .iter()
            .map(|w| {
                let mut args = vec!["cooldown", "probe", scope, "--holder", w, "--lease", "5m"];
                args.extend(b.flags.iter().map(String::as_str));
                let mut cmd = b.command(DEADLINE, &args);
                cmd.env("ZAEL_COOLDOWN_JITTER", "0");
                cmd.stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .expect("spawn probe")
            })
            .collect();
        let outs: Vec<Output> = children
            .into_iter()
            .map(|c| c.wait_with_output().expect("wait for probe"))
            .collect();
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
        record_issue_429(&b, scope);
        let at = "2026-12-04T18:21:00Z";
        b.expect(0, at, &["probe", scope, "--holder", "w1", "--lease", "2m"]);
        // Only the holder may settle.
        let out = b.cooldown(at, &["settle", scope, "--holder", "w2", "--outcome", "ok"]);
        assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
        assert!(String::from_utf8_lossy(&out.stderr).contains("does not hold"));
        // The probe is refused again: one more hour (+ 5 s margin) from now.
        let v = b.json(
            0,
            at,
            &[
                "settle",
                scope,
                "--holder",
                "w1",
                "--outcome",
                "quota",
                "--resets-in-seconds",
                "3600",
            ],
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
        b.expect(
            0,
            later,
            &["settle", scope, "--holder", "w2", "--outcome", "ok"],
        );
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
        let key = b.cooldown_key(scope);
        let store = b.store();
        let mut item = store.get(&key, true).expect("read").expect("recorded item");
        item.insert("not_before".into(), AttrValue::s("soon"));
        store
            .write(WriteOp::Put {
                item,
                condition: None,
            })
            .expect("write malformed item");
        // Long after any deadline, the unreadable state still refuses.
        let later = "2027-06-01T00:00:00Z";
        let out = b.cooldown(later, &["check", scope]);
        assert_eq!(
            out.status.code(),
            Some(76),
            "[{}] {}",
            b.label,
            describe(&out)
        );
        let err = String::from_utf8_lossy(&out.stderr);
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
    let path = b.local.clone().expect("local store");
    let conn = rusqlite::Connection::open(&path).expect("open sqlite");
    let n = conn
        .execute(
            "UPDATE items SET item = '{not json' WHERE pk LIKE '%/COOLDOWN#%'",
            [],
        )
        .expect("corrupt row");
    assert_eq!(n, 1);
    drop(conn);
    let out = b.cooldown("2027-06-01T00:00:00Z", &["check", scope]);
    assert_eq!(out.status.code(), Some(76), "{}", describe(&out));
}

#[test]
fn auth_rejections_and_implausible_resets_need_an_operator() {
    for b in backends("auth") {
        b.expect(0, T0, &["record", "anthropic/acct-7", "--status", "401"]);
        let out = b.cooldown("2030-01-01T00:00:00Z", &["check", "anthropic/acct-7"]);
        assert_eq!(out.status.code(), Some(76), "{}", describe(&out));
        assert!(String::from_utf8_lossy(&out.stderr).contains("needs an operator"));
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
        // A known field with a bad value is refused.
        std::fs::write(&body, r#"{"resets_in_seconds": -3}"#).expect("write body");
        let out = b.cooldown(
            T0,
            &["record", "neg", "--response", &body.display().to_string()],
        );
        assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
        b.expect(0, T0, &["check", "neg"]);
    }
}

#[test]
fn bad_input_is_refused_and_nothing_is_written() {
    let b = local();
    for (args, needle) in [
        (
            vec!["record", "s", "--resets-in-seconds", "NaN"],
            "not a finite number",
        ),
        (vec!["record", "s", "--retry-after=-5"], "negative"),
        (vec!["record", "s", "--resets-at", "tomorrow"], "resets_at"),
        (vec!["record", "a#b"], "'#' is reserved"),
        (vec!["record", ""], "empty"),
    ] {
        let out = b.cooldown(T0, &args);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {}", describe(&out));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(needle), "{args:?}: {err}");
    }
    let out = b.cooldown(
        T0,
        &[
            "record",
            "s",
            "--retry-after",
            "60",
            "--received-at",
            "2026-12-03T10:00:00Z",
        ],
    );
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot be received in the future"));
    // Nothing was written: the local store file was never even created.
    assert!(!b.local.as_ref().expect("local").exists());
    // A store that does not exist is unreadable, never permission.
    b.expect(76, T0, &["check", "s"]);
    // A bad clock override is a usage error.
    let out = b.cooldown("yesterday", &["check", "s"]);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("ZAEL_NOW"));
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
        let children: Vec<_> = resets
            .iter()
            .map(|r| {
                let mut args = vec![
                    "cooldown",
                    "record",
                    scope,
                    "--resets-in-seconds",
                    r,
                    "--received-at",
                    T0,
                ];
                args.extend(b.flags.iter().map(String::as_str));
                b.command(T0, &args)
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .expect("spawn record")
            })
            .collect();
        for c in children {
            let out = c.wait_with_output().expect("wait for record");
            assert_eq!(
                out.status.code(),
                Some(0),
                "[{}] {}",
                b.label,
                describe(&out)
            );
        }
        let v = b.json(75, T0, &["check", scope]);
        assert_eq!(v["until_ms"], DEADLINE_MS, "[{}] {v}", b.label);
        assert_eq!(v["state"]["version"], resets.len(), "[{}] {v}", b.label);
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
