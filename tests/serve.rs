//! `zae-limiter serve` through real HTTP: a `serve` process on 127.0.0.1 (a
//! random port) on every store available (the local store always, DynamoDB on
//! moto when `ZAEL_TEST_DYNAMODB_ENDPOINT` is set), real concurrent clients
//! (a thread and a connection each), two instances on one table, SIGTERM, and
//! the README's curl and Python examples run as written against a live server.

mod backends;
mod common;

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use backends::{backends, describe, Backend};
use serde_json::{json, Value};

const TOKEN: &str = "test-token-0123456789abcdef";
/// The scenarios' epoch, for the servers that run on `ZAEL_NOW`.
const T0: &str = "2026-12-02T10:00:00Z";

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// `limits apply` of a manifest text to this store.
fn apply(b: &Backend, manifest: &str) {
    b.apply_at(T0, manifest);
}

fn slots_level(resource: &str, n: u64) -> String {
    format!(
        "namespace: default\nresources:\n  {resource}:\n    limits:\n      in_flight: {{concurrency: {n}, hold_ttl_seconds: 120}}\n"
    )
}

fn window_level(resource: &str, amount: u64) -> String {
    format!(
        "namespace: default\nresources:\n  {resource}:\n    limits:\n      per_hour: {{capacity: {amount}, window: hour, rolling: true}}\n"
    )
}

/// A running `serve`; killed (and reaped) when dropped, whatever happened.
struct Server {
    child: Option<Child>,
    url: String,
    label: &'static str,
    stderr: Arc<Mutex<String>>,
    reader: Option<std::thread::JoinHandle<()>>,
}

/// How a server is started.
#[derive(Default)]
struct Opts<'a> {
    /// `ZAEL_NOW` for the server (default: the real clock).
    now: Option<&'a str>,
    token: Option<&'a str>,
    args: &'a [&'a str],
    env: &'a [(&'a str, &'a str)],
}

impl Server {
    fn start(b: &Backend, o: Opts) -> Server {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_zae-limiter"));
        b.isolate(&mut cmd, o.now.unwrap_or(T0));
        if o.now.is_none() {
            cmd.env_remove("ZAEL_NOW");
        }
        cmd.env_remove("ZAEL_API_TOKEN")
            .env_remove("ZAEL_FAULT_SERVE_DELAY_MS")
            .env("ZAEL_COOLDOWN_JITTER", "0");
        if let Some(t) = o.token {
            cmd.env("ZAEL_API_TOKEN", t);
        }
        cmd.envs(o.env.iter().copied())
            .args(b.with_flags(&["serve", "--listen", "127.0.0.1:0"]))
            .args(o.args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("start serve");
        let stderr = Arc::new(Mutex::new(String::new()));
        let mut err_pipe = child.stderr.take().expect("stderr");
        let sink = stderr.clone();
        let reader = std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = err_pipe.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        let mut line = String::new();
        let mut out = BufReader::new(child.stdout.take().expect("stdout"));
        out.read_line(&mut line).expect("read the startup line");
        let mut server = Server {
            child: Some(child),
            url: String::new(),
            label: b.label,
            stderr,
            reader: Some(reader),
        };
        let Some(addr) = line.trim().strip_prefix("listening on ") else {
            let status = server.child.as_mut().unwrap().wait();
            panic!(
                "[{}] serve did not start ({status:?}): {line:?}\n{}",
                b.label,
                server.stderr()
            );
        };
        server.url = format!("http://{addr}");
        server
    }

    fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id()
    }

    /// Sends SIGTERM and waits for the exit code.
    fn terminate(&mut self) -> Option<i32> {
        signal(self.pid(), "TERM");
        self.exit_code()
    }

    /// Waits for the exit code, and for the rest of stderr.
    fn exit_code(&mut self) -> Option<i32> {
        let status = self.child.take().unwrap().wait().expect("wait for serve");
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
        status.code()
    }
}

impl Server {
    /// A server on `b` that requires [`TOKEN`], on the real clock.
    fn with_token(b: &Backend) -> Server {
        Server::with_args(b, &[])
    }

    /// [`Server::with_token`] with more `serve` flags.
    fn with_args(b: &Backend, args: &[&str]) -> Server {
        Server::start(
            b,
            Opts {
                token: Some(TOKEN),
                args,
                ..Opts::default()
            },
        )
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn signal(pid: u32, sig: &str) {
    let ok = Command::new("kill")
        .args([format!("-{sig}"), pid.to_string()])
        .status()
        .expect("kill");
    assert!(ok.success(), "kill -{sig} {pid}");
}

/// An HTTP client with its own connection (one per client thread).
fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(60)))
        .build()
        .into()
}

/// An answer: status, JSON body (`null` when it is not JSON), raw text, `Retry-After`.
#[derive(Debug)]
struct Reply {
    status: u16,
    json: Value,
    text: String,
    retry_after: Option<String>,
}

fn send(
    agent: &ureq::Agent,
    method: &str,
    url: &str,
    token: Option<&str>,
    body: Option<&str>,
) -> Result<Reply, ureq::Error> {
    let mut req = ureq::http::Request::builder().method(method).uri(url);
    if let Some(t) = token {
        req = req.header("Authorization", format!("Bearer {t}"));
    }
    let req = req.body(body.unwrap_or("").to_string()).expect("request");
    let mut resp = agent.run(req)?;
    let status = resp.status().as_u16();
    let retry_after = resp
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap_or_default().to_string());
    let text = resp.body_mut().read_to_string()?;
    Ok(Reply {
        status,
        json: serde_json::from_str(&text).unwrap_or(Value::Null),
        text,
        retry_after,
    })
}

impl Server {
    fn call(&self, agent: &ureq::Agent, method: &str, path: &str, body: Option<Value>) -> Reply {
        let body = body.map(|b| b.to_string());
        send(
            agent,
            method,
            &format!("{}{path}", self.url),
            Some(TOKEN),
            body.as_deref(),
        )
        .unwrap_or_else(|e| panic!("[{}] {method} {path}: {e}\n{}", self.label, self.stderr()))
    }

    /// `POST path` that must answer 200; its JSON.
    fn ok(&self, agent: &ureq::Agent, path: &str, body: Value) -> Value {
        let r = self.call(agent, "POST", path, Some(body));
        assert_eq!(r.status, 200, "[{}] POST {path}: {}", self.label, r.text);
        r.json
    }

    fn get(&self, agent: &ureq::Agent, path: &str) -> Reply {
        self.call(agent, "GET", path, None)
    }

    /// A store-call counter of `/metrics`.
    fn metric(&self, agent: &ureq::Agent, series: &str) -> u64 {
        let text = self.get(agent, "/metrics").text;
        text.lines()
            .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
            .unwrap_or(0)
    }
}

/// `client(i, its agent)` for each of `n` clients at once, each on its own
/// thread with its own agent (connections); returns when all are done.
fn clients(n: usize, client: impl Fn(usize, &ureq::Agent) + Sync) {
    std::thread::scope(|s| {
        for i in 0..n {
            let client = &client;
            s.spawn(move || client(i, &agent()));
        }
    });
}

fn check_body(entity: &str, resource: &str, mode: &str) -> Value {
    json!({"subject": {"id": entity}, "action": resource, "mode": mode})
}

/// The answer's limit `name`.
fn limit<'a>(answer: &'a Value, name: &str) -> &'a Value {
    answer["limits"]
        .as_array()
        .and_then(|l| l.iter().find(|l| l["name"] == name))
        .unwrap_or_else(|| panic!("limit {name} in {answer}"))
}

#[test]
fn sixty_four_clients_reserving_five_slots_never_hold_more_than_five() {
    for b in backends("sv-slots") {
        apply(&b, &slots_level("batch", 5));
        let server = Server::with_token(&b);
        // How many reservations the clients hold by their own answers: counted
        // up when a grant arrives and down before its release is sent, so
        // never more than the store holds.
        let holding = AtomicI64::new(0);
        let most = AtomicI64::new(0);
        let granted = AtomicUsize::new(0);
        let refused = AtomicUsize::new(0);
        clients(64, |c, agent| {
            for round in 0..4 {
                let mut body = check_body("worker", "batch", "reserve");
                body["holder"] = json!(format!("client-{c}/{round}"));
                let a = server.ok(agent, "/v1/checks", body);
                if a["allowed"] != true {
                    assert!(a["retryAfterSeconds"].as_u64().is_some(), "{a}");
                    refused.fetch_add(1, Ordering::SeqCst);
                    std::thread::sleep(Duration::from_millis(5));
                    continue;
                }
                let free = limit(&a, "in_flight")["remaining"].as_u64().unwrap();
                assert!(free < 5, "{a}");
                let now = holding.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                granted.fetch_add(1, Ordering::SeqCst);
                std::thread::sleep(Duration::from_millis(10));
                holding.fetch_sub(1, Ordering::SeqCst);
                let id = a["reservation"]["id"].as_str().unwrap();
                let r = server.ok(agent, &format!("/v1/reservations/{id}/release"), json!({}));
                assert_eq!(r["result"], "released", "{r}");
            }
        });
        let (most, granted, refused) = (
            most.into_inner(),
            granted.into_inner(),
            refused.into_inner(),
        );
        eprintln!(
            "[{}] 64 clients: {granted} granted, {refused} refused, at most {most} held at once",
            b.label
        );
        assert!(most <= 5, "[{}] {most} held at once", b.label);
        assert!(
            granted > 5,
            "[{}] releases let others in: {granted}",
            b.label
        );
        assert!(refused > 0, "[{}] the slots were contended", b.label);
        // Everything was released: five fit again, a sixth does not.
        let agent = agent();
        for i in 0..6 {
            let a = server.ok(
                &agent,
                "/v1/checks",
                check_body("worker", "batch", "reserve"),
            );
            assert_eq!(a["allowed"], i < 5, "[{}] reservation {i}: {a}", b.label);
        }
    }
}

#[test]
fn a_burst_of_300_consumes_against_a_window_of_100_admits_exactly_100() {
    for b in backends("sv-burst") {
        apply(&b, &window_level("search", 100));
        let server = Server::with_token(&b);
        let allowed = AtomicUsize::new(0);
        clients(30, |_, agent| {
            for _ in 0..10 {
                let r = server.call(
                    agent,
                    "POST",
                    "/v1/checks",
                    Some(check_body("tenant", "search", "consume")),
                );
                assert_eq!(r.status, 200, "{}", r.text);
                if r.json["allowed"] == true {
                    allowed.fetch_add(1, Ordering::SeqCst);
                } else {
                    // A refusal says when, in the body and the header.
                    let secs = r.json["retryAfterSeconds"]
                        .as_u64()
                        .expect("retryAfterSeconds");
                    assert_eq!(r.retry_after, Some(secs.to_string()));
                    assert_eq!(limit(&r.json, "per_hour")["allowed"], false);
                }
            }
        });
        assert_eq!(allowed.into_inner(), 100, "[{}]", b.label);
        let agent = agent();
        let metrics = server.get(&agent, "/metrics").text;
        assert!(
            metrics.contains("zael_decisions_total{mode=\"consume\",outcome=\"allowed\"} 100"),
            "{metrics}"
        );
        assert!(
            metrics.contains("zael_decisions_total{mode=\"consume\",outcome=\"refused\"} 200"),
            "{metrics}"
        );
        assert!(
            metrics.contains("zael_refusals_total{limit=\"per_hour\"} 200"),
            "{metrics}"
        );
        // The event loop's probe has been waking every 10 ms since startup.
        let wakes: u64 = metrics
            .lines()
            .find_map(|l| l.strip_prefix("zael_event_loop_lag_seconds_count "))
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no zael_event_loop_lag_seconds_count in\n{metrics}"));
        assert!(wakes > 0, "{metrics}");
    }
}

#[test]
fn two_instances_on_one_table_agree() {
    for b in backends("sv-two") {
        apply(
            &b,
            &format!(
                "{}      per_hour: {{capacity: 20, window: hour, rolling: true}}\n",
                slots_level("jobs", 3)
            ),
        );
        let servers = [Server::with_token(&b), Server::with_token(&b)];
        // 16 clients, alternating instances, one reservation each, none released.
        let ids = Mutex::new(Vec::new());
        clients(16, |c, agent| {
            let a = servers[c % 2].ok(agent, "/v1/checks", check_body("tenant", "jobs", "reserve"));
            if a["allowed"] == true {
                ids.lock()
                    .unwrap()
                    .push(a["reservation"]["id"].as_str().unwrap().to_string());
            }
        });
        let mut ids = ids.into_inner().unwrap();
        assert_eq!(ids.len(), 3, "[{}] {ids:?}", b.label);
        if b.local.is_some() {
            // Two processes on one file: each decision reads and writes in
            // one transaction, so neither ever loses a write to the other.
            let agent = agent();
            for s in &servers {
                let text = s.get(&agent, "/metrics").text;
                assert!(
                    text.lines().any(|l| l == "zael_store_conflicts_total 0"),
                    "{text}"
                );
            }
        }
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), 3, "[{}] distinct ids", b.label);
        // A reservation taken on one instance is released on the other.
        let agent = agent();
        let r = servers[1].ok(
            &agent,
            &format!("/v1/reservations/{}/release", ids[0]),
            json!({}),
        );
        assert_eq!(r["result"], "released");
        let again = servers[0].ok(
            &agent,
            &format!("/v1/reservations/{}/release", ids[0]),
            json!({}),
        );
        assert_eq!(again["result"], "already_closed", "{again}");
        // The rolling window counted the 3 granted reservations, whichever
        // instance decided them (a refusal counts nothing); a preview shows
        // what is left before its own cost.
        let p = servers[0].ok(
            &agent,
            "/v1/checks",
            check_body("tenant", "jobs", "preview"),
        );
        assert_eq!(
            limit(&p, "per_hour")["remaining"],
            20 - 3,
            "[{}] {p}",
            b.label
        );
    }
}

#[test]
fn refusals_are_200_and_errors_have_their_status() {
    for b in backends("sv-errors") {
        apply(&b, &slots_level("batch", 1));
        let server = Server::with_token(&b);
        let agent = agent();
        let url = |p: &str| format!("{}{p}", server.url);
        let body = check_body("w", "batch", "reserve").to_string();
        // 401: no token, a wrong one, another scheme; on every endpoint.
        for (token, path) in [
            (None, "/v1/checks"),
            (Some("wrong-token-0123456789"), "/v1/checks"),
            (None, "/healthz"),
            (None, "/metrics"),
        ] {
            let method = if path == "/v1/checks" { "POST" } else { "GET" };
            let r = send(&agent, method, &url(path), token, Some(&body)).unwrap();
            assert_eq!(r.status, 401, "{path}: {}", r.text);
            assert_eq!(r.json["error"]["code"], "unauthorized");
        }
        // A refusal is a successful check: 200, allowed false, Retry-After.
        let first = server.ok(&agent, "/v1/checks", check_body("w", "batch", "reserve"));
        assert_eq!(first["allowed"], true);
        let second = server.call(
            &agent,
            "POST",
            "/v1/checks",
            Some(check_body("w", "batch", "reserve")),
        );
        assert_eq!(
            (second.status, &second.json["allowed"]),
            (200, &json!(false)),
            "{}",
            second.text
        );
        assert!(second.retry_after.is_some(), "{second:?}");
        // 400 naming the field.
        let bad = |body: &str| {
            let r = send(&agent, "POST", &url("/v1/checks"), Some(TOKEN), Some(body)).unwrap();
            assert_eq!(r.status, 400, "{body}: {}", r.text);
            r.json["error"]["message"].as_str().unwrap().to_string()
        };
        assert!(
            bad(r#"{"subject": {"id": "w"}, "action": "batch", "cost": {"in_flight": -1}}"#)
                .contains("`cost.in_flight`")
        );
        assert!(bad(r#"{"subject": {"id": 7}, "action": "batch"}"#).contains("`subject.id`"));
        assert!(bad(r#"{"subject": {"id": "w"}}"#).contains("missing field `action`"));
        assert!(
            bad(r#"{"subject": {"id": "w"}, "action": "batch", "ttlSecond": 5}"#)
                .contains("unknown field `ttlSecond`")
        );
        assert!(
            bad(r#"{"subject": {"id": "w"}, "action": "batch", "mode": "hold"}"#)
                .contains("`mode`")
        );
        assert!(bad("{\"subject\": ").contains("not valid JSON"));
        // One document per body: a second one (here a reserve) is refused,
        // not ignored behind the first.
        assert!(bad(
            r#"{"subject": {"id": "w"}, "action": "batch"} {"subject": {"id": "x"}, "action": "batch", "mode": "reserve"}"#
        )
        .contains("not one JSON document"));
        assert!(
            bad(r#"{"subject": {"id": "w"}, "action": "batch", "ttlSeconds": 60}"#)
                .contains("go with \"mode\": \"reserve\"")
        );
        assert!(bad(
            r#"{"subject": {"id": "w"}, "action": "batch", "mode": "reserve", "ttlSeconds": 7200}"#
        )
        .contains("ttlSeconds must be between 1 and 3600"));
        assert!(
            bad(r#"{"subject": {"id": "w"}, "action": "batch", "cost": {"nope": 1}}"#)
                .contains("cost names 'nope'")
        );
        // 404: a well-formed id that is not open, an unknown endpoint, no limits.
        let id = first["reservation"]["id"].as_str().unwrap();
        let forged = format!("{}AAAAAAAAAAAAAAAAAAAAAA", &id[..id.len() - 22]);
        let r = server.call(
            &agent,
            "POST",
            &format!("/v1/reservations/{forged}/release"),
            None,
        );
        assert_eq!(r.status, 404, "{}", r.text);
        assert!(
            r.json["error"]["message"]
                .as_str()
                .unwrap()
                .contains("is not open"),
            "{}",
            r.text
        );
        assert_eq!(
            server
                .call(&agent, "POST", "/v1/reservations/not-an-id/release", None)
                .status,
            400
        );
        // A path parameter that does not parse is a 400 with our body, and it
        // is named before the request body is read.
        for (path, says) in [
            (
                "/v1/reservations/not-an-id/commit",
                "\"not-an-id\" is not a reservation id",
            ),
            ("/v1/cooldowns/a%23b/record", "invalid scope \"a#b\""),
        ] {
            let r = send(&agent, "POST", &url(path), Some(TOKEN), Some("{")).unwrap();
            assert_eq!(r.status, 400, "{path}: {}", r.text);
            assert_eq!(r.json["error"]["code"], "bad_request", "{path}: {}", r.text);
            let message = r.json["error"]["message"].as_str().unwrap_or_default();
            assert!(message.contains(says), "{path}: {}", r.text);
        }
        assert_eq!(server.get(&agent, "/v1/nothing").status, 404);
        assert_eq!(
            server
                .get(&agent, "/v1/limits?entity=w&resource=elsewhere")
                .status,
            404
        );
        // Every other 400 is our JSON too, in our words: a path segment that
        // is not UTF-8 once decoded, a missing or unknown query parameter.
        for (method, path, says) in [
            (
                "GET",
                "/v1/cooldowns/%FF%FE",
                "the {scope} in the path /v1/cooldowns/%FF%FE is not UTF-8",
            ),
            (
                "POST",
                "/v1/cooldowns/%FF/record",
                "the {scope} in the path /v1/cooldowns/%FF/record is not UTF-8",
            ),
            (
                "POST",
                "/v1/reservations/%C3%28/release",
                "the {id} in the path",
            ),
            (
                "GET",
                "/v1/limits?entity=w",
                "missing query parameter `resource` in GET /v1/limits",
            ),
            ("GET", "/v1/limits", "missing query parameter `entity`"),
            (
                "GET",
                "/v1/limits?entity=w&resource=batch&resorce=x",
                "unknown query parameter `resorce`",
            ),
        ] {
            let r = send(&agent, method, &url(path), Some(TOKEN), None).unwrap();
            assert_eq!(r.status, 400, "{path}: {}", r.text);
            assert_eq!(r.json["version"], 1, "{path}: {}", r.text);
            assert_eq!(r.json["error"]["code"], "bad_request", "{path}: {}", r.text);
            let message = r.json["error"]["message"].as_str().unwrap_or_default();
            assert!(message.contains(says), "{path}: {}", r.text);
        }
        assert_eq!(
            server.call(&agent, "DELETE", "/v1/checks", None).status,
            405
        );
        // 413: a body over 64 KiB, however well-formed.
        let mut big = check_body("w", "batch", "consume");
        big["holder"] = json!("x".repeat(70_000));
        let r = server.call(&agent, "POST", "/v1/checks", Some(big));
        assert_eq!(r.status, 413, "{}", &r.text[..r.text.len().min(300)]);
        // Extend and commit of the open reservation still work; a second
        // release says so.
        let x = server.ok(
            &agent,
            &format!("/v1/reservations/{id}/extend"),
            json!({"ttlSeconds": 600}),
        );
        assert_eq!(x["result"], "extended");
        let c = server.ok(&agent, &format!("/v1/reservations/{id}/commit"), json!({}));
        assert_eq!(c["result"], "committed");
        let r = server.call(
            &agent,
            "POST",
            &format!("/v1/reservations/{id}/extend"),
            Some(json!({"ttlSeconds": 60})),
        );
        assert_eq!(r.status, 404, "{}", r.text);
        // Every error is JSON with a message; none carries a backtrace.
        let log = server.stderr();
        assert!(!log.contains("panicked"), "[{}] {log}", b.label);
    }
}

/// `on_unavailable: allow` answering over HTTP names no store detail (the
/// state item's key, a file, an SDK error); the server's log has it.
#[test]
fn an_unchecked_allow_names_no_store_detail_and_the_log_says_why() {
    use zae_limiter::store::{AttrValue, Key, WriteOp};
    let b = backends::local();
    apply(
        &b,
        "namespace: default\nsystem:\n  on_unavailable: allow\nresources:\n  api:\n    limits:\n      rpm: {capacity: 5, window: minute, rolling: true}\n",
    );
    let server = Server::with_token(&b);
    let agent = agent();
    server.ok(&agent, "/v1/checks", check_body("c", "api", "consume"));
    // Damage the state item: unreadable, so on_unavailable answers.
    let ns = b.namespace_id("default");
    let key = Key::new(format!("{ns}/RUNTIME#c#api"), "#STATE");
    let mut item = b.store().get(&key, true).unwrap().expect("state");
    item.insert("rw_rpm".into(), AttrValue::s("fortnight/1/0:1"));
    b.store()
        .write(WriteOp::Put {
            item,
            condition: None,
        })
        .unwrap();
    let d = server.ok(&agent, "/v1/checks", check_body("c", "api", "consume"));
    assert_eq!(d["allowed"], true, "{d}");
    assert_eq!(
        d["unavailable"],
        "the runtime state of this entity and resource is unreadable (the server's log says where); an operator must clear it",
        "{d}"
    );
    let log = server.stderr();
    assert!(
        log.contains("on_unavailable answered c on api: the runtime state")
            && log.contains("RUNTIME#c#api")
            && log.contains("`zae-limiter runtime clear c -r api`"),
        "{log}"
    );
}

/// The local store deleted and created again under a running server (a
/// reset by hand): the server does not go on deciding on the deleted file
/// beside processes that use the new one. The request that finds out is
/// answered by `on_unavailable` (here `block`: refused), the store that
/// found out is dropped, and the next request decides on the new file.
#[test]
fn a_store_file_replaced_under_the_server_is_not_used_any_more() {
    let b = backends::local();
    let m = "namespace: default\nsystem:\n  on_unavailable: block\nresources:\n  batch:\n    limits:\n      slots: {concurrency: 3}\n";
    apply(&b, m);
    // No config cache: the new file's namespace id is read at once (with a
    // cache, within its TTL, as for any change of the namespace).
    let server = Server::with_args(&b, &["--config-ttl", "0"]);
    let agent = agent();
    let d = server.ok(&agent, "/v1/checks", check_body("w", "batch", "reserve"));
    assert_eq!(d["allowed"], true, "{d}");
    let path = b.local.clone().unwrap();
    for suffix in ["", "-wal", "-shm"] {
        let mut p = path.clone().into_os_string();
        p.push(suffix);
        let _ = std::fs::remove_file(p);
    }
    apply(&b, m);
    std::thread::sleep(Duration::from_millis(150));
    let d = server.ok(&agent, "/v1/checks", check_body("w", "batch", "reserve"));
    assert_eq!(
        (d["allowed"].as_bool(), d["unavailable"].is_string()),
        (Some(false), true),
        "{d}"
    );
    assert!(
        server
            .stderr()
            .contains("was removed or replaced since this process opened it"),
        "{}",
        server.stderr()
    );
    let d = server.ok(&agent, "/v1/checks", check_body("w", "batch", "reserve"));
    assert_eq!(d["allowed"], true, "{d}");
    let health = send(
        &agent,
        "GET",
        &format!("{}/healthz", server.url),
        Some(TOKEN),
        None,
    )
    .unwrap();
    assert_eq!(health.status, 200, "{}", health.text);
    // The hold is on the file at the path: the CLI sees it.
    let mut args = b.with_flags(&[
        "acquire", "w", "-r", "batch", "--mode", "preview", "--format", "json",
    ]);
    args.extend(["-n", &b.table]);
    // (The server runs on the real clock: so does this preview.)
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let out = b.run(&zae_limiter::clock::rfc3339(now_ms), &args);
    let v: Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|_| panic!("{}", describe(&out)));
    assert_eq!(v["limits"][0]["remaining"], 2, "{v}");
}

/// Sends a request's head alone on a fresh connection (its body never
/// comes) and returns the whole answer, up to the end of the connection.
fn head_only(addr: &str, head: &str) -> String {
    let mut conn = std::net::TcpStream::connect(addr).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    std::io::Write::write_all(&mut conn, head.as_bytes()).unwrap();
    let mut answer = String::new();
    conn.read_to_string(&mut answer).unwrap();
    answer
}

/// An error answered before the request's body was read tells the client
/// the connection ends (`Connection: close`) and ends it: a keep-alive
/// client must not send its next request on a connection the server drops.
/// The body is sent only after the answer, so it is unread for certain.
#[test]
fn an_error_before_the_body_is_read_closes_the_connection_and_says_so() {
    let b = backends::local();
    apply(&b, &slots_level("batch", 1));
    let server = Server::with_token(&b);
    let addr = server.url.trim_start_matches("http://").to_string();
    let body = check_body("w", "batch", "consume").to_string();
    for (auth, path, status) in [
        ("", "/v1/checks", "401"),
        (
            "Authorization: Bearer wrong-token-0123456789\r\n",
            "/v1/checks",
            "401",
        ),
        ("", "/v1/nothing", "401"),
        (
            &*format!("Authorization: Bearer {TOKEN}\r\n"),
            "/v1/nothing",
            "404",
        ),
    ] {
        let answer = head_only(
            &addr,
            &format!(
                "POST {path} HTTP/1.1\r\nHost: {addr}\r\n{auth}Content-Type: application/json\r\nContent-Length: {}\r\n\r\n",
                body.len()
            ),
        );
        let lower = answer.to_ascii_lowercase();
        assert!(
            lower.starts_with(&format!("http/1.1 {status}"))
                && lower.contains("\r\nconnection: close\r\n"),
            "{path}: {answer}"
        );
    }
    // A body declared over the limit: 413 at once (was: read until the
    // request timed out, then 503), and the connection ends.
    let answer = head_only(
        &addr,
        &format!(
            "POST /v1/checks HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\nContent-Length: 99999999999\r\n\r\n"
        ),
    );
    let lower = answer.to_ascii_lowercase();
    assert!(
        lower.starts_with("http/1.1 413")
            && lower.contains("\r\nconnection: close\r\n")
            && lower.contains("payload_too_large"),
        "{answer}"
    );
    // A request whose body was read keeps its connection (no header).
    let agent = agent();
    let r = send(
        &agent,
        "POST",
        &format!("{}/v1/checks", server.url),
        Some(TOKEN),
        Some(&body),
    )
    .unwrap();
    assert_eq!(r.status, 200, "{}", r.text);
}

#[test]
fn startup_refuses_what_it_cannot_serve() {
    let b = backends::local();
    apply(&b, &slots_level("batch", 1));
    let run = |env: &[(&str, &str)], args: &[&str]| {
        let mut cmd = b.command(T0, &b.with_flags(&["serve"]));
        cmd.env_remove("ZAEL_API_TOKEN")
            .envs(env.iter().copied())
            .args(args);
        let out = cmd.output().expect("serve");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, err) = run(&[], &["--listen", "0.0.0.0:0"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("refusing to listen on 0.0.0.0:0 without a token"),
        "{err}"
    );
    let (code, err) = run(&[("ZAEL_API_TOKEN", "short")], &["--listen", "0.0.0.0:0"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("at least 16"), "{err}");
    let (code, err) = run(&[], &["--listen", "127.0.0.1:0", "-N", "nope"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("namespace 'nope' is not registered"), "{err}");
    let (code, err) = run(&[], &["--listen", "127.0.0.1:0", "--config-ttl", "soon"]);
    assert_eq!(code, Some(2), "{err}");
    let (code, err) = run(&[], &["--listen", "127.0.0.1:0", "--workers", "0"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--workers"), "{err}");
    let (code, err) = run(&[], &["--listen", "127.0.0.1:0", "--busy-poll-us", "10001"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--busy-poll-us"), "{err}");
    // A token file wins over the environment.
    let file = b.dir.path().join("token");
    std::fs::write(&file, "file-token-0123456789abcdef\n").unwrap();
    let file_flag = file.display().to_string();
    let mut server = Server::with_args(&b, &["--token-file", &file_flag]);
    // Its port, taken: the error says what to do.
    let taken = server.url.trim_start_matches("http://").to_string();
    let (code, err) = run(&[], &["--listen", &taken]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains(&format!("cannot listen on {taken}"))
            && err.contains("127.0.0.1:0 picks a free one"),
        "{err}"
    );
    let agent = agent();
    let with = |t: &str| {
        send(
            &agent,
            "GET",
            &format!("{}/healthz", server.url),
            Some(t),
            None,
        )
        .unwrap()
        .status
    };
    assert_eq!(
        (with("file-token-0123456789abcdef"), with(TOKEN)),
        (200, 401)
    );
    assert_eq!(server.terminate(), Some(0));
}

/// A client that never finishes its headers (no token is checked before
/// they are complete), and one that connects and sends nothing, are cut
/// off by the header read timeout (10 s) instead of holding a connection
/// for ever; meanwhile others are served, and SIGTERM still ends the server
/// with 0 rather than waiting on them.
#[test]
fn clients_that_never_finish_their_headers_are_cut_off_and_do_not_hold_up_sigterm() {
    let b = backends::local();
    apply(&b, &slots_level("batch", 1));
    let mut server = Server::with_token(&b);
    let addr = server.url.trim_start_matches("http://").to_string();
    let open = |head: &str| {
        let mut conn = std::net::TcpStream::connect(&addr).unwrap();
        conn.set_read_timeout(Some(Duration::from_secs(40)))
            .unwrap();
        std::io::Write::write_all(&mut conn, head.as_bytes()).unwrap();
        conn
    };
    let (partial, idle) = (open("GET /healthz HTTP/1.1\r\nHost: x\r\n"), open(""));
    let started = Instant::now();
    let r = server.get(&agent(), "/healthz");
    assert_eq!(r.status, 200, "{}", r.text);
    // Each is closed by the server, with nothing sent (hyper's timeout).
    for mut conn in [partial, idle] {
        let mut answer = Vec::new();
        let read = conn.read_to_end(&mut answer);
        assert!(
            matches!(read, Ok(0)),
            "{read:?} {:?}",
            String::from_utf8_lossy(&answer)
        );
    }
    assert!(
        started.elapsed() >= Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    // Another half-sent request, then SIGTERM: the server still stops.
    let _stuck = open("POST /v1/checks HTTP/1.1\r\nHost: x\r\n");
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(server.terminate(), Some(0), "{}", server.stderr());
}

#[test]
fn sigterm_finishes_the_requests_in_flight_and_exits_0() {
    for b in backends("sv-term") {
        apply(&b, &slots_level("batch", 2));
        let mut server = Server::start(
            &b,
            Opts {
                token: Some(TOKEN),
                env: &[("ZAEL_FAULT_SERVE_DELAY_MS", "1500")],
                ..Opts::default()
            },
        );
        let url = server.url.clone();
        let started = Instant::now();
        let slow = std::thread::spawn(move || {
            let body = check_body("w", "batch", "reserve").to_string();
            send(
                &agent(),
                "POST",
                &format!("{url}/v1/checks"),
                Some(TOKEN),
                Some(&body),
            )
        });
        std::thread::sleep(Duration::from_millis(400));
        signal(server.pid(), "TERM");
        std::thread::sleep(Duration::from_millis(300));
        // No new connections once stopping.
        let late = send(
            &agent(),
            "GET",
            &format!("{}/healthz", server.url),
            Some(TOKEN),
            None,
        );
        assert!(
            late.is_err(),
            "[{}] a request after SIGTERM was answered: {late:?}",
            b.label
        );
        let r = slow
            .join()
            .unwrap()
            .expect("the request in flight is answered");
        assert_eq!(
            (r.status, &r.json["allowed"]),
            (200, &json!(true)),
            "[{}] {}",
            b.label,
            r.text
        );
        assert!(started.elapsed() >= Duration::from_millis(1500));
        assert_eq!(
            server.exit_code(),
            Some(0),
            "[{}] {}",
            b.label,
            server.stderr()
        );
        assert!(server.stderr().contains("stopped"), "{}", server.stderr());
    }
}

#[test]
fn eight_concurrent_probes_of_one_scope_give_exactly_one_winner() {
    for b in backends("sv-probe") {
        apply(&b, &slots_level("batch", 1));
        let servers = [Server::with_token(&b), Server::with_token(&b)];
        let scope = "openai%2Facct-42%2Fgpt-4";
        let client = agent();
        // A 429 received a minute ago that asked for 20 s: the deadline has passed.
        let received = zae_limiter::clock::rfc3339(chrono::Utc::now().timestamp_millis() - 60_000);
        let rec = servers[0].ok(
            &client,
            &format!("/v1/cooldowns/{scope}/record"),
            json!({
                "status": 429, "headers": {"Retry-After": "20", "x-ratelimit-reset": "soon"},
                "body": "{\"error\": {\"type\": \"rate_limit_exceeded\"}}", "receivedAt": received,
            }),
        );
        assert_eq!(rec["recorded"]["state"], "cooling", "{rec}");
        assert_eq!(rec["warnings"].as_array().unwrap().len(), 1, "{rec}");
        let winners = Mutex::new(Vec::new());
        let waits = AtomicUsize::new(0);
        clients(8, |w, agent| {
            let holder = format!("worker-{w}");
            let a = servers[w % 2].ok(
                agent,
                &format!("/v1/cooldowns/{scope}/probe"),
                json!({"holder": holder, "leaseSeconds": 60}),
            );
            match a["verdict"].as_str() {
                Some("won") => winners.lock().unwrap().push(holder),
                Some("wait") => {
                    assert_eq!(a["exitCode"], 75, "{a}");
                    waits.fetch_add(1, Ordering::SeqCst);
                }
                _ => panic!("{a}"),
            }
        });
        let winners = winners.into_inner().unwrap();
        assert_eq!(winners.len(), 1, "[{}] {winners:?}", b.label);
        assert_eq!(waits.into_inner(), 7);
        // Only the winner settles (409 for another); ok clears the cooldown.
        let loser = if winners[0] == "worker-0" {
            "worker-1"
        } else {
            "worker-0"
        };
        let r = servers[1].call(
            &client,
            "POST",
            &format!("/v1/cooldowns/{scope}/settle"),
            Some(json!({"holder": loser, "outcome": "ok"})),
        );
        assert_eq!(r.status, 409, "{}", r.text);
        let check = servers[1].get(&client, &format!("/v1/cooldowns/{scope}"));
        assert_eq!(check.json["verdict"], "wait", "{}", check.text);
        assert_eq!(check.json["state"]["probe"]["holder"], winners[0].as_str());
        let r = servers[1].ok(
            &client,
            &format!("/v1/cooldowns/{scope}/settle"),
            json!({"holder": winners[0], "outcome": "ok"}),
        );
        assert_eq!(r["result"], "cleared", "{r}");
        assert_eq!(
            servers[0]
                .get(&client, &format!("/v1/cooldowns/{scope}"))
                .json["verdict"],
            "go"
        );
    }
}

/// The CLI's `--format json` document with camelCase keys.
fn cli_json(b: &Backend, now: &str, args: &[&str]) -> Value {
    let out = b.run(now, &b.with_flags(args));
    let doc: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{args:?}: {e}\n{}", describe(&out)));
    zae_limiter::runtime::answer::camel_case(doc)
}

#[test]
fn http_answers_are_the_clis_json_in_camel_case() {
    for b in backends("sv-same") {
        apply(&b, &format!(
            "{}      per_hour: {{capacity: 20, window: hour, rolling: true}}\n  gpt-4:\n    limits:\n      rpm: {{capacity: 100}}\n",
            slots_level("jobs", 3)
        ));
        let server = Server::start(
            &b,
            Opts {
                now: Some(T0),
                token: Some(TOKEN),
                ..Opts::default()
            },
        );
        let agent = agent();
        // A consume, then the same preview through both.
        let mut body = check_body("tenant", "jobs", "consume");
        body["cost"] = json!({"per_hour": 4});
        server.ok(&agent, "/v1/checks", body);
        let http = server.ok(
            &agent,
            "/v1/checks",
            check_body("tenant", "jobs", "preview"),
        );
        let cli = cli_json(
            &b,
            T0,
            &[
                "acquire", "tenant", "-r", "jobs", "--mode", "preview", "--format", "json",
            ],
        );
        assert_eq!(http, cli, "[{}]", b.label);
        assert_eq!(limit(&http, "per_hour")["remaining"], 20 - 4);
        // A cooldown recorded over HTTP reads the same through `cooldown check`.
        server.ok(
            &agent,
            "/v1/cooldowns/acme%2Fapi/record",
            json!({"status": 429, "retryAfter": 120}),
        );
        let http = server.get(&agent, "/v1/cooldowns/acme%2Fapi").json;
        let cli = cli_json(
            &b,
            T0,
            &["cooldown", "check", "acme/api", "--format", "json"],
        );
        assert_eq!(http, cli, "[{}]", b.label);
        assert_eq!(http["verdict"], "wait");
        let http = server.get(&agent, "/v1/cooldowns").json;
        let cli = cli_json(&b, T0, &["cooldown", "list", "--format", "json"]);
        assert_eq!(http, cli, "[{}]", b.label);
        // The limits that apply are get-limits' document of the level.
        let http = server
            .get(&agent, "/v1/limits?entity=tenant&resource=gpt-4")
            .json;
        let cli = cli_json(
            &b,
            T0,
            &["resource", "get-defaults", "gpt-4", "--format", "json"],
        );
        for key in [
            "level",
            "limits",
            "configured",
            "disabled",
            "cascade",
            "namespace",
            "resource",
        ] {
            assert_eq!(http[key], cli[key], "[{}] {key}", b.label);
        }
        assert_eq!(
            http["inForce"],
            json!({"disabled": null, "onUnavailable": "block"})
        );
    }
}

#[test]
fn a_warm_decision_reads_the_state_once_and_writes_once_and_the_ttl_bounds_staleness() {
    for b in backends("sv-cache") {
        apply(&b, &window_level("search", 5));
        let cached = Server::with_token(&b);
        let uncached = Server::with_args(&b, &["--config-ttl", "0"]);
        let agent = agent();
        cached.ok(&agent, "/v1/checks", check_body("t", "search", "consume"));
        // The store requests (get, batch_get, write) that `step` made on `s`.
        let requests = |s: &Server, step: &dyn Fn()| {
            let count = || {
                ["get", "batch_get", "write"].map(|op| {
                    s.metric(&agent, &format!("zael_store_requests_total{{op=\"{op}\"}}"))
                })
            };
            let before = count();
            step();
            let after = count();
            [0, 1, 2].map(|i| after[i] - before[i])
        };
        let warm = requests(&cached, &|| {
            for _ in 0..3 {
                cached.ok(&agent, "/v1/checks", check_body("t", "search", "consume"));
            }
        });
        assert_eq!(
            warm,
            [3, 0, 3],
            "[{}] get, batch_get, write per 3 warm decisions",
            b.label
        );
        // Uncached: the namespace records, then the config and state in one batch, one write.
        let cold = requests(&uncached, &|| {
            uncached.ok(&agent, "/v1/checks", check_body("t2", "search", "consume"));
        });
        assert_eq!(cold, [0, 2, 1], "[{}]", b.label);
        // A lowered limit: the uncached instance enforces it at once, the
        // cached one after its TTL (60 s here, so not yet).
        apply(&b, &window_level("search", 2));
        let c = cached.ok(&agent, "/v1/checks", check_body("t", "search", "preview"));
        let u = uncached.ok(&agent, "/v1/checks", check_body("t", "search", "preview"));
        assert_eq!(
            (
                limit(&c, "per_hour")["amount"].as_u64(),
                limit(&u, "per_hour")["amount"].as_u64()
            ),
            (Some(5), Some(2)),
            "[{}]",
            b.label
        );
        assert_eq!(u["allowed"], false);
    }
}

// ---------------------------------------------------------------- docs

/// The first fenced block of `lang` in the README's serve section.
fn readme_block(lang: &str) -> String {
    let readme = std::fs::read_to_string(root().join("README.md")).expect("README.md");
    let section = &readme[readme
        .find("### Serve checks over HTTP: `serve`")
        .expect("the serve section")..];
    let fence = format!("```{lang}\n");
    let start = section
        .find(&fence)
        .unwrap_or_else(|| panic!("a {lang} block"))
        + fence.len();
    let len = section[start..].find("```\n").expect("a closing fence");
    section[start..start + len].to_string()
}

/// The commands of a `console` block: the `$ ` lines, `\` continuations joined.
fn console_commands(block: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut continued = false;
    for line in block.lines() {
        let piece = match line.strip_prefix("$ ") {
            Some(cmd) => Some(cmd),
            None if continued => Some(line.trim_start()),
            None => None,
        };
        let Some(piece) = piece else { continue };
        let (piece, more) = match piece.strip_suffix('\\') {
            Some(p) => (p.trim_end(), true),
            None => (piece, false),
        };
        if continued {
            let last = out.last_mut().unwrap();
            last.push(' ');
            last.push_str(piece);
        } else {
            out.push(piece.to_string());
        }
        continued = more;
    }
    out
}

/// A free port on 127.0.0.1 (bound and let go).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[test]
fn the_readme_examples_run_against_a_live_server() {
    let python = std::env::var("ZAEL_PYTHON").ok().filter(|p| !p.is_empty());
    for b in backends("sv-readme") {
        let dir = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(root().join("fixtures"), dir.path().join("fixtures")).unwrap();
        let bin = Path::new(env!("CARGO_BIN_EXE_zae-limiter"));
        let path = format!(
            "{}:{}",
            bin.parent().unwrap().display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let addr = format!("127.0.0.1:{}", free_port());
        // The curl walk-through, as one script: on DynamoDB, `--local` is this
        // backend's flags; the harness waits for the server before the first
        // request and for its exit (0) at the end.
        let mut script = vec!["set -e".to_string()];
        for cmd in console_commands(&readme_block("console")) {
            let mut cmd = cmd.replace("127.0.0.1:8080", &addr);
            if b.endpoint.is_some() {
                cmd = cmd.replace(
                    "--local -n jobs",
                    &format!(
                        "-n {} --endpoint-url {}",
                        b.table,
                        b.endpoint.as_deref().unwrap()
                    ),
                );
            }
            let serving = cmd.starts_with("zae-limiter serve");
            let stopping = cmd.starts_with("kill ");
            script.push(cmd);
            if serving {
                script.push(format!(
                    "until curl -s -o /dev/null http://{addr}/healthz; do sleep 0.1; done"
                ));
            }
            if stopping {
                script.push("wait $server".into());
            }
        }
        let mut cmd = b.shell(T0, &script.join("\n"));
        cmd.env_remove("ZAEL_NOW")
            .env("PATH", &path)
            .current_dir(dir.path());
        let out = cmd.output().expect("sh");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(
            out.status.code(),
            Some(0),
            "[{}] the README's curl walk-through:\n{}\n{}",
            b.label,
            script.join("\n"),
            describe(&out)
        );
        assert!(!stdout.contains("\"error\""), "[{}] {stdout}", b.label);
        for want in [
            "\"allowed\":true",
            "\"result\":\"released\"",
            "\"level\":\"resource\"",
            "\"verdict\":\"wait\"",
        ] {
            assert!(stdout.contains(want), "[{}] {want} in\n{stdout}", b.label);
        }

        // The Python snippet against a live server (the reference's venv, or python3).
        let Some(python) = python.clone().or_else(|| Some("python3".into())) else {
            continue;
        };
        apply(
            &b,
            &std::fs::read_to_string(root().join("fixtures/runtime/jobs.yaml")).unwrap(),
        );
        let server = Server::with_token(&b);
        let snippet = readme_block("python");
        let out = Command::new(&python)
            .args(["-c", &snippet])
            .env("ZAEL_URL", &server.url)
            .env("ZAEL_API_TOKEN", TOKEN)
            .output()
            .expect("run python");
        b.assert_exit(&out, 0, "the README's Python");
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("exporting"),
            "{}",
            describe(&out)
        );
        // It released its slot: all three are free.
        let p = server.ok(
            &agent(),
            "/v1/checks",
            check_body("nightly-report", "exports", "preview"),
        );
        assert_eq!(limit(&p, "in_flight")["remaining"], 3, "[{}] {p}", b.label);
    }
}

#[test]
fn the_help_examples_of_serve_run() {
    let dir = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(root().join("fixtures"), dir.path().join("fixtures")).unwrap();
    std::fs::write(dir.path().join("token.txt"), format!("{TOKEN}\n")).unwrap();
    let help = Command::new(env!("CARGO_BIN_EXE_zae-limiter"))
        .args(["serve", "--help"])
        .output()
        .unwrap();
    let examples = zae_limiter::cli::help::examples_in(&String::from_utf8_lossy(&help.stdout));
    assert!(examples.len() >= 4, "{examples:?}");
    let bin = Path::new(env!("CARGO_BIN_EXE_zae-limiter"));
    let path = format!(
        "{}:{}",
        bin.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let all = backends("sv-help");
    let mut ran = 0;
    for example in &examples {
        let dynamo = example.contains("-n mystack");
        let Some(b) = all.iter().find(|b| b.endpoint.is_some() == dynamo) else {
            eprintln!("skipped (no DynamoDB endpoint): {example}");
            continue;
        };
        let mut text = example.replace(":8080", ":0");
        if let Some(endpoint) = &b.endpoint {
            text = text.replace(
                "-n mystack",
                &format!("-n {} --endpoint-url {endpoint}", b.table),
            );
            if text.contains("zae-limiter serve") {
                apply(b, &slots_level("batch", 1));
            }
        }
        // `exec` after any leading assignments (`VAR=… exec zae-limiter …`), so
        // the signal reaches the server itself.
        let at = text.find("zae-limiter ").expect("a zae-limiter command");
        let mut cmd = b.shell(T0, &format!("{}exec {}", &text[..at], &text[at..]));
        cmd.env_remove("ZAEL_NOW")
            .env_remove("ZAEL_API_TOKEN")
            .env("PATH", &path)
            .current_dir(dir.path());
        if !text.contains("zae-limiter serve") {
            let out = cmd.output().unwrap();
            assert_eq!(out.status.code(), Some(0), "{example}:\n{}", describe(&out));
            ran += 1;
            continue;
        }
        // A server: it starts, answers /healthz, and stops on SIGTERM with 0.
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let Some(addr) = line.trim().strip_prefix("listening on ") else {
            let _ = child.kill();
            panic!(
                "{example}: {line:?}\n{}",
                describe(&child.wait_with_output().unwrap())
            )
        };
        let url = format!("http://{}/healthz", addr.replace("0.0.0.0", "127.0.0.1"));
        let token = text.contains("ZAEL_API_TOKEN").then_some(TOKEN);
        let r = send(&agent(), "GET", &url, token, None).expect("healthz");
        signal(child.id(), "TERM");
        let out = child.wait_with_output().unwrap();
        assert_eq!(
            (r.status, out.status.code()),
            (200, Some(0)),
            "{example}: {}\n{}",
            r.text,
            describe(&out)
        );
        ran += 1;
    }
    assert!(ran >= 3, "{ran} of {examples:?}");
}

/// The server's writes never run SQLite's checkpoints (a request would wait
/// for their syncs); its own thread does, and restarts the write-ahead log
/// once it passes 4,000 pages (`serve::checkpoints::RESTART_FRAMES`).
/// Without that thread the log of 4,000 decisions (two pages or more each)
/// would pass 8,000 pages; with it, it stays within the restart size and
/// what 100 ms of writes add.
#[test]
fn the_local_stores_log_is_checkpointed_off_the_request_path() {
    let b = backends::local();
    apply(&b, &window_level("search", 1_000_000));
    let server = Server::with_token(&b);
    clients(4, |t, agent| {
        for i in 0..1_000 {
            let entity = format!("tenant-{t}-{}", i % 3);
            let r = server.ok(
                agent,
                "/v1/checks",
                check_body(&entity, "search", "consume"),
            );
            assert_eq!(r["allowed"], true, "{r}");
        }
    });
    let store = b.local.as_ref().expect("a local store");
    let wal = store.with_extension("sqlite-wal");
    let frame = 4096 + 24; // a frame: its header and one default page
    let len = std::fs::metadata(&wal)
        .unwrap_or_else(|e| panic!("{}: {e}", wal.display()))
        .len();
    assert!(
        len < 6_000 * frame,
        "the log grew to {len} bytes (~{} pages) in 4,000 decisions\n{}",
        len / frame,
        server.stderr()
    );
}

/// `zael_busy_poll_seconds_total`, a float.
fn busy_polled(server: &Server, agent: &ureq::Agent) -> f64 {
    let text = server.get(agent, "/metrics").text;
    text.lines()
        .find_map(|l| {
            l.strip_prefix("zael_busy_poll_seconds_total ")?
                .parse()
                .ok()
        })
        .unwrap_or_else(|| panic!("no zael_busy_poll_seconds_total in\n{text}"))
}

/// Busy polling (`--busy-poll-us`) runs after answers to requests that came
/// close together, and never while the server is asked now and then; 0
/// turns it off.
#[test]
fn busy_polling_runs_between_close_requests_only() {
    let b = backends::local();
    apply(&b, &window_level("search", 1_000_000));
    let back_to_back = |server: &Server, agent: &ureq::Agent| {
        for _ in 0..50 {
            let r = server.ok(agent, "/v1/checks", check_body("t", "search", "consume"));
            assert_eq!(r["allowed"], true, "{r}");
        }
    };
    let idle = Duration::from_millis(60); // longer than the 10 ms window
    let server = Server::with_args(&b, &["--busy-poll-us", "10000"]);
    // The startup line (stderr, written after the address on stdout) says so.
    let started = Instant::now();
    while !server.stderr().contains("1 worker, busy polling 10000 µs") {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{}",
            server.stderr()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let agent = agent();
    assert_eq!(busy_polled(&server, &agent), 0.0, "nothing asked yet");
    back_to_back(&server, &agent);
    // The poller stops one window after the last close answer; on a busy
    // machine that may take a while: read until two reads agree.
    let started = Instant::now();
    let mut after_burst = busy_polled(&server, &agent);
    loop {
        std::thread::sleep(idle);
        let now = busy_polled(&server, &agent);
        if now == after_burst {
            break;
        }
        after_burst = now;
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "polling never stopped"
        );
    }
    assert!(
        after_burst > 0.0,
        "no polling after 50 requests back to back"
    );
    // Asked now and then (each request more than the window after the last
    // answer): no polling at all.
    for _ in 0..3 {
        std::thread::sleep(idle);
        assert_eq!(busy_polled(&server, &agent), after_burst);
    }
    drop(server);

    let server = Server::with_args(&b, &["--busy-poll-us", "0"]);
    back_to_back(&server, &agent);
    std::thread::sleep(idle);
    assert_eq!(busy_polled(&server, &agent), 0.0, "--busy-poll-us 0 polled");
}

/// `/healthz` has a store of its own: it answers while every pooled store
/// waits for the write lock another process holds (six checks, four pooled
/// stores), instead of queueing behind them until their busy timeout.
#[test]
fn healthz_answers_while_the_checks_wait_for_a_lock_another_process_holds() {
    let b = backends::local();
    apply(&b, &window_level("search", 1_000));
    let server = Server::with_token(&b);
    let holder = rusqlite::Connection::open(b.local.as_ref().expect("a local store")).unwrap();
    holder.execute_batch("BEGIN IMMEDIATE").unwrap();
    let done = AtomicUsize::new(0);
    std::thread::scope(|s| {
        for t in 0..6 {
            let (server, done) = (&server, &done);
            s.spawn(move || {
                let body = check_body(&format!("tenant-{t}"), "search", "consume");
                let r = server.ok(&agent(), "/v1/checks", body);
                assert_eq!(r["allowed"], true, "{r}");
                done.fetch_add(1, Ordering::SeqCst);
            });
        }
        // Let the checks reach the lock (were they slower, the health check
        // would only be easier).
        std::thread::sleep(Duration::from_millis(300));
        let health = server.get(&agent(), "/healthz");
        assert_eq!(health.status, 200, "{}", health.text);
        assert_eq!(health.json["status"], "ok", "{}", health.text);
        // The lock is still held, so no check can have been decided yet.
        assert_eq!(done.load(Ordering::SeqCst), 0);
        holder.execute_batch("COMMIT").unwrap();
    });
    assert_eq!(done.into_inner(), 6);
}

/// A local row that is not JSON at all is its scope's one unreadable row:
/// the list still answers, other scopes record as before, that scope answers
/// as any unreadable state (never permission) and `DELETE` clears it.
#[test]
fn an_undecodable_cooldown_row_is_one_unreadable_row() {
    let b = backends::local();
    apply(&b, &window_level("search", 10));
    let server = Server::with_token(&b);
    let agent = agent();
    for scope in ["p%2Fa", "p%2Fb"] {
        server.ok(
            &agent,
            &format!("/v1/cooldowns/{scope}/record"),
            json!({"status": 429, "retryAfter": 120}),
        );
    }
    let db = rusqlite::Connection::open(b.local.as_ref().expect("a local store")).unwrap();
    let n = db
        .execute(
            "UPDATE items SET item = 'not json' WHERE pk LIKE '%/COOLDOWN#p/a'",
            [],
        )
        .unwrap();
    assert_eq!(n, 1);
    drop(db);
    let list = server.get(&agent, "/v1/cooldowns");
    assert_eq!(list.status, 200, "{}", list.text);
    let rows = list.json["cooldowns"].as_array().expect("rows");
    assert_eq!(rows.len(), 2, "{}", list.text);
    assert_eq!(
        (&rows[0]["scope"], &rows[0]["status"]),
        (&json!("p/a"), &json!("unreadable")),
        "{}",
        list.text
    );
    assert_eq!(rows[1]["status"], "cooling", "{}", list.text);
    server.ok(
        &agent,
        "/v1/cooldowns/p%2Fc/record",
        json!({"status": 429, "retryAfter": 120}),
    );
    let check = server.get(&agent, "/v1/cooldowns/p%2Fa");
    assert_eq!(check.json["verdict"], "unreadable", "{}", check.text);
    // Recording on it: the unreadable-state 503, which retrying does not cure.
    let r = server.call(
        &agent,
        "POST",
        "/v1/cooldowns/p%2Fa/record",
        Some(json!({"status": 429, "retryAfter": 120})),
    );
    assert_eq!(r.status, 503, "{}", r.text);
    assert_eq!(r.retry_after, None, "{r:?}");
    let cleared = server.call(&agent, "DELETE", "/v1/cooldowns/p%2Fa", None);
    assert_eq!(cleared.status, 200, "{}", cleared.text);
    assert_eq!(cleared.json["cleared"], true, "{}", cleared.text);
    assert_eq!(
        server.get(&agent, "/v1/cooldowns/p%2Fa").json["verdict"],
        "go"
    );
}

/// A reset past 9999 over HTTP needs an operator, in every form: a number
/// too large even for a float (which serde_json would refuse, with a 400 that
/// recorded nothing), a date with a five-digit or `+` year, in the body, the
/// headers or the hint fields. Garbage still records the backoff.
#[test]
fn a_reset_past_9999_over_http_needs_an_operator() {
    let b = backends::local();
    apply(&b, &window_level("search", 10));
    let server = Server::with_token(&b);
    let agent = agent();
    let url = |p: &str| format!("{}{p}", server.url);
    for (scope, body) in [
        (
            "big1",
            r#"{"status":429,"body":{"error":{"resets_in_seconds":1e400}}}"#,
        ),
        ("big2", r#"{"status":429,"resetsInSeconds":1e400}"#),
        (
            "big3",
            r#"{"status":429,"headers":{"retry-after":[1e400]}}"#,
        ),
        (
            "big4",
            r#"{"status":429,"body":"{\"resets_at\":\"10000-01-01T00:00:00Z\"}"}"#,
        ),
        (
            "big5",
            r#"{"status":429,"resetsAt":"+10000-01-01T00:00:00Z"}"#,
        ),
        (
            "big6",
            r#"{"status":429,"headers":{"Retry-After":"Sat, 01 Jan 10000 00:00:00 GMT"}}"#,
        ),
        (
            "big7",
            r#"{"status":429,"retryAfter":"Fri, 01 Jan 10000 00:00:00 GMT"}"#,
        ),
    ] {
        let path = format!("/v1/cooldowns/{scope}/record");
        let r = send(&agent, "POST", &url(&path), Some(TOKEN), Some(body)).unwrap();
        assert_eq!(r.status, 200, "{body}: {}", r.text);
        assert_eq!(r.json["warnings"], json!([]), "{body}: {}", r.text);
        let check = server.get(&agent, &format!("/v1/cooldowns/{scope}"));
        assert_eq!(
            check.json["verdict"], "needs_operator",
            "{body}: {}",
            check.text
        );
    }
    // Garbage with a far year is not a date: a warning, and the backoff.
    let r = server.call(
        &agent,
        "POST",
        "/v1/cooldowns/bad/record",
        Some(json!({"status": 429, "resetsAt": "10000-13-01T00:00:00Z"})),
    );
    assert_eq!(r.status, 200, "{}", r.text);
    assert!(r.text.contains("cannot be read"), "{}", r.text);
    assert_eq!(
        server.get(&agent, "/v1/cooldowns/bad").json["verdict"],
        "wait"
    );
    // A hint of the wrong type is still a 400 that names the field.
    let r = server.call(
        &agent,
        "POST",
        "/v1/cooldowns/bad2/record",
        Some(json!({"status": 429, "resetsAt": true})),
    );
    assert_eq!(r.status, 400, "{}", r.text);
    assert!(
        r.text.contains("resetsAt") && r.text.contains("a boolean"),
        "{}",
        r.text
    );
    assert_eq!(
        server.get(&agent, "/v1/cooldowns/bad2").json["verdict"],
        "go"
    );
}
