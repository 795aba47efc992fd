//! `zae-limiter cooldown …`: record a provider's refusal, check before calling,
//! take and settle the single recovery probe, list and clear.
//!
//! Exit codes: 0 go / done, 75 wait (EX_TEMPFAIL), 76 an operator must act or
//! the state cannot be read (never treated as permission), 1 invalid input or
//! a refused operation.
//!
//! Clock: every command reads "now" from `ZAEL_NOW` (RFC 3339) when it is set,
//! else from the system clock — so a cron wrapper can be rehearsed at any
//! instant and tests can cross process boundaries deterministically.
//! `ZAEL_COOLDOWN_CEILING` (a duration, default 31d) sets the plausibility
//! ceiling and `ZAEL_COOLDOWN_JITTER` (default 30s, `0` disables) the bound of
//! the per-worker jitter `probe` adds after the deadline.
//!
//! Namespaces: `record` registers a missing namespace (a refusal must be
//! recordable on a fresh table); the other commands never write the registry
//! and read a missing namespace as "nothing recorded".

use std::path::Path;

use comfy_table::{presets::UTF8_FULL_CONDENSED, ContentArrangement, Table};
use serde_json::{json, Value};
use zae_limiter_engine::cooldown::{
    human_duration, parse_duration_ms, EpochMs, Hint, Policy, DEFAULT_CEILING_MS,
    DEFAULT_MAX_JITTER_MS, SECOND_MS,
};

use crate::cli::args::{
    CooldownCommand, CooldownProbeArgs, CooldownRecordArgs, CooldownScopeArgs, CooldownSettleArgs,
    CooldownStoreArgs, ProbeOutcome, TextOrJson,
};
use crate::cli::CliError;
use crate::clock::rfc3339;
use crate::cooldown::ops::Listed;
use crate::cooldown::response::{read_response, ResponseError};
use crate::cooldown::{
    CooldownError, CooldownState, Cooldowns, Phase, ProbeResult, Refusal, Scope, SettleResult,
    Settlement, Verdict,
};
use crate::exit_codes;
use crate::items::{namespace, version};
use crate::store::Store;

/// Plausibility ceiling override (a duration such as `31d`).
pub const CEILING_ENV: &str = "ZAEL_COOLDOWN_CEILING";
/// Jitter bound override (a duration; `0` disables jitter).
pub const JITTER_ENV: &str = "ZAEL_COOLDOWN_JITTER";
/// How far `--received-at` may lie after "now" (clock skew between hosts).
const RECEIPT_SKEW_MS: i64 = 5 * 60 * SECOND_MS;

pub fn run(cmd: CooldownCommand) -> Result<i32, CliError> {
    match cmd {
        CooldownCommand::Record(a) => record(a),
        CooldownCommand::Check(a) => check(a),
        CooldownCommand::Probe(a) => probe(a),
        CooldownCommand::Settle(a) => settle(a),
        CooldownCommand::List { format, store } => list(format, store),
        CooldownCommand::Clear(a) => clear(a),
    }
}

// ---------------------------------------------------------------- record

fn record(a: CooldownRecordArgs) -> Result<i32, CliError> {
    let scope = parse_scope(&a.scope)?;
    let now = now_ms()?;
    let received_at = match &a.received_at {
        Some(t) => parse_instant(t, "--received-at")?,
        None => now,
    };
    // A receipt in the future would also dodge the plausibility ceiling.
    if received_at > now.saturating_add(RECEIPT_SKEW_MS) {
        return Err(CliError::Usage(format!(
            "--received-at {} is after now ({}); a response cannot be received in the future",
            rfc3339(received_at),
            rfc3339(now)
        )));
    }
    let margin_ms = i64::try_from(a.margin)
        .ok()
        .and_then(|m| m.checked_mul(SECOND_MS))
        .ok_or_else(|| CliError::Usage(format!("--margin {} is too large", a.margin)))?;
    let policy = policy(margin_ms)?;
    let refusal = match a.status {
        Some(s) if s < 400 => {
            return Err(CliError::Usage(format!(
                "--status {s} is not a refusal (expected 4xx or 5xx, e.g. 429, 401, 403)"
            )))
        }
        Some(s @ (401 | 403)) => Refusal::Auth {
            status: s,
            received_at,
        },
        status => {
            let mut hints = flag_hints(&a.retry_after, &a.resets_in_seconds, &a.resets_at);
            let mut label = None;
            if let Some(path) = &a.response {
                let body = read_body(path)?;
                match read_response(&body) {
                    Ok(r) => {
                        hints.extend(r.hints);
                        label = r.label;
                    }
                    // A proxy's HTML error page says nothing about the quota: the
                    // refusal is still recorded (from the other hints, or backoff).
                    Err(e @ (ResponseError::NotJson(_) | ResponseError::NotObject)) => {
                        eprintln!("warning: {}: {e}; recording without it", path.display())
                    }
                    Err(e) => {
                        return Err(CliError::Failed(format!(
                            "{}: {e}; nothing was recorded",
                            path.display()
                        )))
                    }
                }
            }
            Refusal::Quota {
                status,
                hints,
                received_at,
                label,
            }
        }
    };
    // Refuse bad values before anything is written (the table is not even initialised).
    if let Refusal::Quota { hints, .. } = &refusal {
        for h in hints {
            h.deadline(received_at)
                .map_err(|e| CliError::Failed(format!("{e}; nothing was recorded")))?;
        }
    }
    let store = open_store(&a.store)?;
    let ns = init_namespace(store.as_ref(), &a.store.namespace)?;
    let st = Cooldowns::new(store.as_ref(), ns, policy)
        .record(&scope, &refusal, now)
        .map_err(|e| CliError::Failed(format!("{e}; nothing was recorded")))?;
    match a.format {
        TextOrJson::Json => print_json(&json!({"recorded": state_json(&st, now)})),
        TextOrJson::Text => match st.phase {
            Phase::Cooling => println!(
                "recorded {scope}: no call before {} (in {}): {}",
                rfc3339(st.not_before),
                human_duration(st.not_before - now),
                st.reason
            ),
            Phase::NeedsOperator => {
                println!("recorded {scope}: needs an operator: {}", st.reason)
            }
        },
    }
    Ok(exit_codes::OK)
}

// ---------------------------------------------------------------- check

fn check(a: CooldownScopeArgs) -> Result<i32, CliError> {
    let scope = parse_scope(&a.scope)?;
    let now = now_ms()?;
    let policy = policy(zae_limiter_engine::cooldown::DEFAULT_MARGIN_MS)?;
    let loaded = open_store(&a.store).and_then(|store| {
        let Some(ns) = lookup_namespace(store.as_ref(), &a.store.namespace)? else {
            return Ok(None);
        };
        Cooldowns::new(store.as_ref(), ns, policy)
            .load(&scope)
            .map_err(|e| CliError::Failed(e.to_string()))
    });
    let st = match loaded {
        Ok(st) => st,
        Err(e) => return Ok(unreadable(a.format, &scope, &e.to_string(), now)),
    };
    let Some(st) = st else {
        match a.format {
            TextOrJson::Json => print_json(&verdict_json(&scope, "go", exit_codes::OK, None, now)),
            TextOrJson::Text => println!("go: no cooldown recorded for {scope}"),
        }
        return Ok(exit_codes::OK);
    };
    let (word, code, until) = match st.verdict(now) {
        Verdict::Go => ("go", exit_codes::OK, None),
        Verdict::Wait { until, .. } => ("wait", exit_codes::TEMPFAIL, Some(until)),
        Verdict::NeedsOperator => ("needs_operator", exit_codes::NEEDS_OPERATOR, None),
    };
    match a.format {
        TextOrJson::Json => {
            let mut v = verdict_json(&scope, word, code, Some(&st), now);
            if let Some(until) = until {
                v["until"] = json!(rfc3339(until));
                v["until_ms"] = json!(until);
                v["remaining"] = json!(human_duration(until - now));
            }
            print_json(&v)
        }
        TextOrJson::Text => match st.verdict(now) {
            Verdict::Go => println!(
                "go: the cooldown of {scope} ended at {} ({})",
                rfc3339(st.not_before),
                st.reason
            ),
            Verdict::Wait {
                until,
                probe_holder: None,
            } => println!(
                "wait: no call to {scope} before {} (in {}): {}",
                rfc3339(until),
                human_duration(until - now),
                st.reason
            ),
            Verdict::Wait {
                until,
                probe_holder: Some(h),
            } => println!(
                "wait: {h} holds the recovery probe of {scope} until {} (in {})",
                rfc3339(until),
                human_duration(until - now)
            ),
            Verdict::NeedsOperator => eprintln!(
                "Error: {scope} needs an operator: {} (after fixing it: zae-limiter cooldown clear {scope})",
                st.reason
            ),
        },
    }
    Ok(code)
}

/// The state cannot be read: say so and refuse (76), never permit.
fn unreadable(format: TextOrJson, scope: &Scope, why: &str, now: EpochMs) -> i32 {
    let code = exit_codes::NEEDS_OPERATOR;
    match format {
        TextOrJson::Json => {
            let mut v = verdict_json(scope, "unreadable", code, None, now);
            v["error"] = json!(why);
            print_json(&v);
        }
        TextOrJson::Text => eprintln!(
            "Error: cannot read the cooldown state of {scope}, so no call is permitted: {why}"
        ),
    }
    code
}

// ---------------------------------------------------------------- probe

fn probe(a: CooldownProbeArgs) -> Result<i32, CliError> {
    let scope = parse_scope(&a.scope)?;
    let holder = parse_holder(&a.holder)?;
    let lease_ms =
        parse_duration_ms(&a.lease).map_err(|e| CliError::Usage(format!("--lease: {e}")))?;
    if lease_ms <= 0 {
        return Err(CliError::Usage("--lease must be longer than 0s".into()));
    }
    let now = now_ms()?;
    let policy = policy(zae_limiter_engine::cooldown::DEFAULT_MARGIN_MS)?;
    let outcome = open_store(&a.store).and_then(|store| {
        let Some(ns) = lookup_namespace(store.as_ref(), &a.store.namespace)? else {
            return Ok(ProbeResult::NoCooldown);
        };
        Cooldowns::new(store.as_ref(), ns, policy)
            .probe(&scope, holder, lease_ms, now)
            .map_err(|e| match e {
                CooldownError::Contended { .. } => CliError::Reported(exit_codes::TEMPFAIL),
                other => CliError::Failed(other.to_string()),
            })
    });
    let outcome = match outcome {
        Ok(o) => o,
        Err(CliError::Reported(code)) => {
            eprintln!("wait: other workers are changing the cooldown of {scope}; try again later");
            return Ok(code);
        }
        Err(e) => return Ok(unreadable(a.format, &scope, &e.to_string(), now)),
    };
    let json_out = |result: &str, code: i32, st: Option<&CooldownState>| {
        let mut v = verdict_json(&scope, result, code, st, now);
        v["holder"] = json!(holder);
        v
    };
    match outcome {
        ProbeResult::NoCooldown => {
            match a.format {
                TextOrJson::Json => print_json(&json_out("no_cooldown", 0, None)),
                TextOrJson::Text => {
                    println!("go: no cooldown recorded for {scope}; no probe is needed")
                }
            }
            Ok(exit_codes::OK)
        }
        ProbeResult::Won { lease, state } => {
            match a.format {
                TextOrJson::Json => print_json(&json_out("won", 0, Some(&state))),
                TextOrJson::Text => println!(
                    "won: {holder} holds the recovery probe of {scope} until {} (lease {}); make one call, then `zae-limiter cooldown settle {scope} --holder {holder} --outcome ok|quota|auth`",
                    rfc3339(lease.expires_at),
                    human_duration(lease.expires_at - now)
                ),
            }
            Ok(exit_codes::OK)
        }
        ProbeResult::Wait {
            until,
            probe_holder,
            state,
        } => {
            let code = exit_codes::TEMPFAIL;
            match a.format {
                TextOrJson::Json => {
                    let mut v = json_out("wait", code, Some(&state));
                    v["until"] = json!(rfc3339(until));
                    v["until_ms"] = json!(until);
                    print_json(&v);
                }
                TextOrJson::Text => match probe_holder {
                    Some(h) => println!(
                        "wait: {h} holds the recovery probe of {scope} until {} (in {})",
                        rfc3339(until),
                        human_duration(until - now)
                    ),
                    None => println!(
                        "wait: {holder} may probe {scope} from {} (in {}): {}",
                        rfc3339(until),
                        human_duration(until - now),
                        state.reason
                    ),
                },
            }
            Ok(code)
        }
        ProbeResult::NeedsOperator { state } => {
            let code = exit_codes::NEEDS_OPERATOR;
            match a.format {
                TextOrJson::Json => print_json(&json_out("needs_operator", code, Some(&state))),
                TextOrJson::Text => {
                    eprintln!("Error: {scope} needs an operator: {}", state.reason)
                }
            }
            Ok(code)
        }
    }
}

// ---------------------------------------------------------------- settle

fn settle(a: CooldownSettleArgs) -> Result<i32, CliError> {
    let scope = parse_scope(&a.scope)?;
    let holder = parse_holder(&a.holder)?;
    let hints = flag_hints(&a.retry_after, &a.resets_in_seconds, &a.resets_at);
    let settlement = match a.outcome {
        ProbeOutcome::Quota => Settlement::Quota { hints, label: None },
        _ if !hints.is_empty() => {
            return Err(CliError::Usage(
                "--retry-after, --resets-in-seconds and --resets-at go with --outcome quota".into(),
            ))
        }
        ProbeOutcome::Ok => Settlement::Ok,
        ProbeOutcome::Auth => Settlement::Auth,
    };
    let now = now_ms()?;
    let policy = policy(zae_limiter_engine::cooldown::DEFAULT_MARGIN_MS)?;
    let store = open_store(&a.store)?;
    let ns = lookup_namespace(store.as_ref(), &a.store.namespace)?.ok_or_else(|| {
        CliError::Failed(format!(
            "namespace '{}' is not registered, so no probe of {scope} is held; nothing was changed",
            a.store.namespace
        ))
    })?;
    let result = Cooldowns::new(store.as_ref(), ns, policy)
        .settle(&scope, holder, &settlement, now)
        .map_err(|e| CliError::Failed(e.to_string()))?;
    match (&result, a.format) {
        (SettleResult::Cleared, TextOrJson::Json) => {
            print_json(&json!({"scope": scope.as_str(), "result": "cleared"}))
        }
        (SettleResult::Cleared, TextOrJson::Text) => {
            println!("cleared: the cooldown of {scope} is over")
        }
        (SettleResult::Recorded(st) | SettleResult::OperatorKept(st), TextOrJson::Json) => {
            let word = match result {
                SettleResult::OperatorKept(_) => "operator_kept",
                _ => "recorded",
            };
            print_json(
                &json!({"scope": scope.as_str(), "result": word, "state": state_json(st, now)}),
            )
        }
        (SettleResult::Recorded(st), TextOrJson::Text) => match st.phase {
            Phase::Cooling => println!(
                "recorded {scope}: no call before {} (in {}): {}",
                rfc3339(st.not_before),
                human_duration(st.not_before - now),
                st.reason
            ),
            Phase::NeedsOperator => {
                println!("escalated {scope}: needs an operator: {}", st.reason)
            }
        },
        (SettleResult::OperatorKept(st), TextOrJson::Text) => println!(
            "released the probe of {scope}; it still needs an operator: {}",
            st.reason
        ),
    }
    Ok(exit_codes::OK)
}

// ---------------------------------------------------------------- list

fn list(format: TextOrJson, store_args: CooldownStoreArgs) -> Result<i32, CliError> {
    let now = now_ms()?;
    let policy = policy(zae_limiter_engine::cooldown::DEFAULT_MARGIN_MS)?;
    let store = open_store(&store_args)?;
    let rows = match lookup_namespace(store.as_ref(), &store_args.namespace)? {
        None => Vec::new(),
        Some(ns) => Cooldowns::new(store.as_ref(), ns, policy)
            .list()
            .map_err(|e| CliError::Failed(e.to_string()))?,
    };
    if format == TextOrJson::Json {
        let items: Vec<Value> = rows
            .iter()
            .map(|r| match &r.state {
                Ok(st) => {
                    let mut v = state_json(st, now);
                    v["status"] = json!(status_word(st, now));
                    v
                }
                Err(why) => json!({"scope": r.scope, "status": "unreadable", "error": why}),
            })
            .collect();
        print_json(&json!({"namespace": store_args.namespace, "cooldowns": items}));
        return Ok(exit_codes::OK);
    }
    if rows.is_empty() {
        println!(
            "no cooldowns recorded in namespace '{}'",
            store_args.namespace
        );
        return Ok(exit_codes::OK);
    }
    println!("{}", render_table(&rows, now));
    Ok(exit_codes::OK)
}

fn render_table(rows: &[Listed], now: EpochMs) -> Table {
    let mut table = Table::new();
    table
        .load_preset(UTF8_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Dynamic)
        .set_header(vec![
            "SCOPE",
            "STATE",
            "NOT BEFORE",
            "TIME LEFT",
            "LAST REASON",
            "PROBE HOLDER",
        ]);
    for r in rows {
        match &r.state {
            Ok(st) => {
                let left = st.not_before - now;
                let probe = match st.live_lease(now) {
                    Some(l) => format!("{} (until {})", l.holder, rfc3339(l.expires_at)),
                    None => "-".into(),
                };
                table.add_row(vec![
                    st.scope.clone(),
                    status_word(st, now).replace('_', " "),
                    if st.not_before > 0 {
                        rfc3339(st.not_before)
                    } else {
                        "-".into()
                    },
                    if left > 0 {
                        human_duration(left)
                    } else {
                        "-".into()
                    },
                    st.reason.clone(),
                    probe,
                ]);
            }
            Err(why) => {
                table.add_row(vec![
                    r.scope.clone(),
                    "unreadable".into(),
                    "-".into(),
                    "-".into(),
                    why.clone(),
                    "-".into(),
                ]);
            }
        }
    }
    table
}

/// One word for an operator: cooling, probing, eligible or needs_operator.
fn status_word(st: &CooldownState, now: EpochMs) -> &'static str {
    match st.verdict(now) {
        Verdict::NeedsOperator => "needs_operator",
        Verdict::Wait {
            probe_holder: Some(_),
            ..
        } => "probing",
        Verdict::Wait { .. } => "cooling",
        Verdict::Go => "eligible",
    }
}

// ---------------------------------------------------------------- clear

fn clear(a: CooldownScopeArgs) -> Result<i32, CliError> {
    let scope = parse_scope(&a.scope)?;
    let store = open_store(&a.store)?;
    let existed = match lookup_namespace(store.as_ref(), &a.store.namespace)? {
        None => false,
        Some(ns) => Cooldowns::new(store.as_ref(), ns, Policy::default())
            .clear(&scope)
            .map_err(|e| CliError::Failed(e.to_string()))?,
    };
    match a.format {
        TextOrJson::Json => print_json(&json!({"scope": scope.as_str(), "cleared": existed})),
        TextOrJson::Text if existed => println!("cleared the cooldown of {scope}"),
        TextOrJson::Text => println!("no cooldown recorded for {scope}; nothing to clear"),
    }
    Ok(exit_codes::OK)
}

// ---------------------------------------------------------------- helpers

fn parse_scope(text: &str) -> Result<Scope, CliError> {
    Scope::parse(text).map_err(|e| CliError::Failed(e.to_string()))
}

fn parse_holder(text: &str) -> Result<&str, CliError> {
    if text.is_empty() || text.len() > 256 || text.chars().any(char::is_control) {
        return Err(CliError::Usage(format!(
            "--holder {text:?}: expected a worker id of 1 to 256 printable characters"
        )));
    }
    Ok(text)
}

fn flag_hints(
    retry_after: &Option<String>,
    resets_in_seconds: &Option<String>,
    resets_at: &Option<String>,
) -> Vec<Hint> {
    let mut hints = Vec::new();
    hints.extend(retry_after.clone().map(Hint::RetryAfter));
    hints.extend(resets_in_seconds.clone().map(Hint::ResetsInSeconds));
    hints.extend(resets_at.clone().map(Hint::ResetsAt));
    hints
}

fn read_body(path: &Path) -> Result<String, CliError> {
    std::fs::read_to_string(path).map_err(|e| {
        CliError::Failed(format!(
            "cannot read --response {}: {e}; nothing was recorded",
            path.display()
        ))
    })
}

fn open_store(args: &CooldownStoreArgs) -> Result<Box<dyn Store>, CliError> {
    crate::store::open::open(&args.store, &args.name).map_err(|e| CliError::Failed(e.to_string()))
}

/// The namespace id for reading; `None` when the name is not registered.
fn lookup_namespace(store: &dyn Store, name: &str) -> Result<Option<String>, CliError> {
    namespace::resolve(store, name).map_err(|e| CliError::Failed(e.to_string()))
}

/// The namespace id for `record`: initialises the table (version record,
/// `default` namespace) and registers `name` when missing, as `limits apply` does.
fn init_namespace(store: &dyn Store, name: &str) -> Result<String, CliError> {
    let failed = |e: &dyn std::fmt::Display| CliError::Failed(format!("{e}; nothing was recorded"));
    version::ensure_initialized(store).map_err(|e| failed(&e))?;
    Ok(namespace::register(store, name).map_err(|e| failed(&e))?.id)
}

/// "Now", from the one clock ([`crate::clock`]).
fn now_ms() -> Result<EpochMs, CliError> {
    crate::clock::now_ms().map_err(|e| CliError::Usage(e.to_string()))
}

fn parse_instant(text: &str, what: &str) -> Result<EpochMs, CliError> {
    crate::clock::parse_instant(text, what).map_err(|e| CliError::Usage(e.to_string()))
}

fn policy(margin_ms: i64) -> Result<Policy, CliError> {
    let env_duration = |name: &str, default: i64| -> Result<i64, CliError> {
        match std::env::var(name) {
            Ok(v) if !v.is_empty() => {
                parse_duration_ms(&v).map_err(|e| CliError::Usage(format!("{name}: {e}")))
            }
            _ => Ok(default),
        }
    };
    Ok(Policy {
        margin_ms,
        ceiling_ms: env_duration(CEILING_ENV, DEFAULT_CEILING_MS)?,
        max_jitter_ms: env_duration(JITTER_ENV, DEFAULT_MAX_JITTER_MS)?,
        ..Policy::default()
    })
}

fn state_json(st: &CooldownState, now: EpochMs) -> Value {
    let left = (st.not_before - now).max(0);
    json!({
        "scope": st.scope,
        "state": st.phase.as_str(),
        "not_before": (st.not_before > 0).then(|| rfc3339(st.not_before)),
        "not_before_ms": st.not_before,
        "remaining": human_duration(left),
        "remaining_ms": left,
        "reason": st.reason,
        "backoff_attempt": st.backoff_attempt,
        "received_at": rfc3339(st.received_at),
        "updated_at": rfc3339(st.updated_at),
        "version": st.version,
        "probe": st.probe.as_ref().map(|l| json!({
            "holder": l.holder,
            "expires_at": rfc3339(l.expires_at),
            "expires_at_ms": l.expires_at,
            "live": l.expires_at > now,
        })),
    })
}

fn verdict_json(
    scope: &Scope,
    verdict: &str,
    code: i32,
    st: Option<&CooldownState>,
    now: EpochMs,
) -> Value {
    json!({
        "scope": scope.as_str(),
        "verdict": verdict,
        "exit_code": code,
        "now": rfc3339(now),
        "state": st.map(|s| state_json(s, now)),
    })
}

fn print_json(v: &Value) {
    println!(
        "{}",
        serde_json::to_string_pretty(v).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
    );
}
