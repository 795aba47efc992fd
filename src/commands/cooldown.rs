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
//! recordable on a fresh table); the other commands never write the registry.
//! `check` and `probe` refuse (76) a namespace that is not registered: its
//! cooldowns cannot be read, and a misspelt `-N` must never read as "go".
//!
//! Never fail open: a refusal given to `record` always leaves the scope
//! deferred. Values that cannot be used (a garbage `--retry-after`, a body that
//! is not UTF-8, too large or not JSON, a malformed or unknown reset header, a
//! `--received-at` in the future) are named in a warning on stderr and left
//! out; with nothing usable the bounded backoff applies. Flags, `--headers`
//! and `--response` become one refusal through [`crate::cooldown::evidence`],
//! the path the HTTP API shares (docs/cooldowns.md, docs/serve.md).
//!
//! `check --wait-up-to` sleeps through a wait that ends (with this worker's
//! jitter) within the bound, then looks again; its clock starts at "now" and
//! moves on in real time while it sleeps.
//!
//! Bounds: instants lie in 1970..=9999 ([`crate::clock::parse_instant`]), `--margin` at
//! most a day (larger is capped, with a warning), `--lease` at most a day,
//! the jitter at most an hour, the ceiling at most ten years.

use std::path::Path;
use std::time::{Duration, Instant};

use comfy_table::{presets::UTF8_FULL_CONDENSED, ContentArrangement, Table};
use serde_json::{json, Value};
use zae_limiter_engine::cooldown::{
    resume_at, seed_of, EpochMs, Hint, Policy, DEFAULT_CEILING_MS, DEFAULT_MARGIN_MS,
    DEFAULT_MAX_JITTER_MS, MAX_CEILING_MS, MAX_JITTER_MS, MAX_LEASE_MS, MAX_MARGIN_MS, SECOND_MS,
};
use zae_limiter_engine::duration::{human_duration, parse_duration_ms};

use crate::cli::args::{
    CooldownCheckArgs, CooldownCommand, CooldownProbeArgs, CooldownRecordArgs, CooldownScopeArgs,
    CooldownSettleArgs, NamespacedArgs, ProbeOutcome, RefusalArgs, TextOrJson,
};
use crate::cli::error::with_advice;
use crate::cli::output::{self, FileArg};
use crate::cli::shell::quote;
use crate::cli::CliError;
use crate::clock::rfc3339;
use crate::cooldown::answer;
use crate::cooldown::dump::read_dump_file;
use crate::cooldown::evidence::{Evidence, Warning};
use crate::cooldown::ops::Listed;
use crate::cooldown::response::read_response_file;
use crate::cooldown::{
    CooldownError, CooldownState, Cooldowns, Phase, ProbeResult, Scope, SettleResult, Settlement,
    Verdict,
};
use crate::exit_codes;
use crate::items::{namespace, version};
use crate::store::Store;

/// Plausibility ceiling override (a duration such as `31d`).
pub const CEILING_ENV: &str = "ZAEL_COOLDOWN_CEILING";
/// Jitter bound override (a duration; `0` disables jitter).
pub const JITTER_ENV: &str = "ZAEL_COOLDOWN_JITTER";

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
    if let Some(s) = a.status.filter(|s| *s < 400) {
        return Err(CliError::Usage(format!(
            "--status {s} is not a refusal (expected 4xx or 5xx, e.g. 429, 401, 403)"
        )));
    }
    one_stdin(&a.refusal)?;
    let now = crate::clock::now_ms()?;
    let policy = policy(margin_ms(a.refusal.margin), Strictness::Warn)?;
    let mut evidence = Evidence::default();
    if let Some(s) = a.status {
        evidence.status("--status", s);
    }
    let received_at = read_refusal(&a.refusal, &mut evidence, now);
    let (refusal, warnings) = evidence.refusal(received_at);
    warn_all(&warnings);
    let store = a.store.open()?;
    let ns = init_namespace(store.as_ref(), &a.store.namespace)?;
    let st = Cooldowns::new(store.as_ref(), ns, policy)
        .record(&scope, &refusal, now)
        .map_err(|e| {
            CliError::Failed(format!(
                "{}; nothing was recorded",
                cooldown_failure(e, &a.store)
            ))
        })?;
    match a.format {
        TextOrJson::Json => print_json(&answer::record_json(&st, now))?,
        TextOrJson::Text => output::println(recorded_line(&scope, &st, now, "recorded"))?,
    }
    Ok(exit_codes::OK)
}

/// What a recorded refusal means, in one line; `escalated` is the verb for a
/// scope that now needs an operator.
fn recorded_line(scope: &Scope, st: &CooldownState, now: EpochMs, escalated: &str) -> String {
    match st.phase {
        Phase::Cooling => format!(
            "recorded {scope}: no call before {}: {}",
            when(st.not_before, now),
            st.reason
        ),
        Phase::NeedsOperator => format!("{escalated} {scope}: needs an operator: {}", st.reason),
    }
}

/// `--margin` in ms, capped at [`MAX_MARGIN_MS`] with a warning.
fn margin_ms(seconds: u64) -> i64 {
    match i64::try_from(seconds)
        .ok()
        .and_then(|m| m.checked_mul(SECOND_MS))
    {
        Some(ms) if ms <= MAX_MARGIN_MS => ms,
        _ => {
            warn(format!(
                "--margin {seconds} is above the {}s maximum; using {}s",
                MAX_MARGIN_MS / SECOND_MS,
                MAX_MARGIN_MS / SECOND_MS
            ));
            MAX_MARGIN_MS
        }
    }
}

/// `--received-at` (default now); one that cannot be read, or lies in the
/// future, counts as now, with a warning.
fn received_at(evidence: &mut Evidence, given: Option<&str>, now: EpochMs) -> EpochMs {
    let given = given.and_then(|t| match crate::clock::parse_instant(t, "--received-at") {
        Ok(at) => Some(at),
        Err(e) => {
            warn(format!("{e}; it counts as received now"));
            None
        }
    });
    evidence.received_at(given, now)
}

/// What the provider said (flags, then `--headers` and `--response`), into
/// `evidence`; returns when it was received. A proxy's HTML error page, a
/// truncated or binary body, an unknown header say nothing usable about the
/// quota: the refusal is still recorded (from the other hints, or with backoff).
fn read_refusal(r: &RefusalArgs, evidence: &mut Evidence, now: EpochMs) -> EpochMs {
    for h in flag_hints(r) {
        evidence.hint(h);
    }
    read_response_files(evidence, r.headers.as_deref(), r.response.as_deref());
    received_at(evidence, r.received_at.as_deref(), now)
}

/// Standard input can feed one of `--headers -` and `--response -`.
fn one_stdin(r: &RefusalArgs) -> Result<(), CliError> {
    let inputs: Vec<FileArg<'_>> = [("--headers", &r.headers), ("--response", &r.response)]
        .into_iter()
        .filter_map(|(flag, path)| Some(FileArg::new(flag, "a response file", path.as_deref()?)))
        .collect();
    output::one_stdin(&inputs).map_err(|e| {
        CliError::Usage(format!(
            "{e} (for `curl -i` output, which has both, pass --headers - alone)"
        ))
    })
}

/// The `--headers` and `--response` files, into `evidence`.
fn read_response_files(evidence: &mut Evidence, headers: Option<&Path>, response: Option<&Path>) {
    let origin = |p: &Path| {
        if p.as_os_str() == "-" {
            "standard input".to_string()
        } else {
            p.display().to_string()
        }
    };
    if let Some(p) = headers {
        evidence.dump(&origin(p), read_dump_file(p));
    }
    if let Some(p) = response {
        evidence.body(&origin(p), read_response_file(p));
    }
}

fn warn_all(warnings: &[Warning]) {
    for w in warnings {
        warn(w.to_string());
    }
}

/// A warning on stderr.
fn warn(text: impl AsRef<str>) {
    output::eprintln(format!("warning: {}", text.as_ref()));
}

// ---------------------------------------------------------------- check

fn check(a: CooldownCheckArgs) -> Result<i32, CliError> {
    let CooldownCheckArgs {
        target: a,
        wait_up_to,
        holder,
    } = a;
    let scope = parse_scope(&a.scope)?;
    let clock = Clock::start()?;
    let policy = policy(DEFAULT_MARGIN_MS, Strictness::Refuse)?;
    let wait = match &wait_up_to {
        None => None,
        Some(text) => {
            let worker = holder.unwrap_or_else(|| format!("pid-{}", std::process::id()));
            parse_holder(&worker)?;
            Some(Wait {
                until: clock
                    .start
                    .saturating_add(wait_up_to_ms(text, policy.ceiling_ms)?),
                worker,
            })
        }
    };
    let opened = a
        .store
        .open_read_only()
        .map_err(CliError::from)
        .and_then(|store| {
            let ns = registered_namespace(store.as_ref(), &a.store)?;
            Ok((store, ns))
        });
    let (store, ns) = match opened {
        Ok(o) => o,
        Err(e) => return unreadable(a.format, &scope, &e.to_string(), clock.start),
    };
    let cooldowns = Cooldowns::new(store.as_ref(), ns, policy);
    // The first look is at the start instant exactly (a `ZAEL_NOW` rehearsal
    // is deterministic); after a sleep, at the moved-on clock.
    let mut now = clock.start;
    loop {
        let st = match cooldowns.load(&scope) {
            Ok(st) => st,
            Err(e) => return unreadable(a.format, &scope, &cooldown_failure(e, &a.store), now),
        };
        // Within --wait-up-to: sleep until this worker may call, then look again
        // (another worker may have recorded a new refusal meanwhile).
        if let (
            Some(w),
            Some(Verdict::Wait {
                until,
                probe_holder,
            }),
        ) = (&wait, st.as_ref().map(|s| s.verdict(now)))
        {
            let resume = match probe_holder {
                // After the deadline, this worker's jitter, as `probe` adds it.
                None => resume_at(
                    until,
                    &w.worker,
                    seed_of(scope.as_str()),
                    policy.max_jitter_ms,
                ),
                // A live probe: look again when its lease ends.
                Some(_) => until,
            };
            if resume <= w.until {
                std::thread::sleep(Duration::from_millis(
                    resume.saturating_sub(now).max(1).unsigned_abs(),
                ));
                now = clock.now();
                continue;
            }
        }
        let waited = wait.as_ref().map(|_| now.saturating_sub(clock.start));
        return print_check(a.format, &scope, st.as_ref(), (now, waited), &a.store);
    }
}

/// `check --wait-up-to`: this worker, and the last instant it may sleep until.
struct Wait {
    worker: String,
    until: EpochMs,
}

/// `--wait-up-to`: a duration up to the plausibility ceiling.
fn wait_up_to_ms(text: &str, ceiling_ms: i64) -> Result<i64, CliError> {
    let ms = bounded_duration("--wait-up-to", text, 0, i64::MAX)?;
    if ms > ceiling_ms {
        return Err(CliError::Usage(format!(
            "--wait-up-to {text}: must be at most the plausibility ceiling, {} ({CEILING_ENV})",
            human_duration(ceiling_ms)
        )));
    }
    Ok(ms)
}

/// "Now" for a command that sleeps: the start ([`now_ms`]) plus the real time
/// elapsed since, so a `ZAEL_NOW` rehearsal moves on as the process waits.
struct Clock {
    start: EpochMs,
    at: Instant,
}

impl Clock {
    fn start() -> Result<Clock, CliError> {
        Ok(Clock {
            start: crate::clock::now_ms()?,
            at: Instant::now(),
        })
    }

    fn now(&self) -> EpochMs {
        let elapsed = i64::try_from(self.at.elapsed().as_millis()).unwrap_or(i64::MAX);
        self.start.saturating_add(elapsed)
    }
}

/// Prints `check`'s verdict at `now`; returns its exit code. `waited` is set
/// under `--wait-up-to` (how long this process slept).
fn print_check(
    format: TextOrJson,
    scope: &Scope,
    st: Option<&CooldownState>,
    (now, waited): (EpochMs, Option<i64>),
    store: &NamespacedArgs,
) -> Result<i32, CliError> {
    let slept = match waited {
        Some(ms) if ms > 0 => format!("waited {}; ", human_duration(ms)),
        _ => String::new(),
    };
    let (mut v, code) = answer::check_json(scope, st, now);
    if format == TextOrJson::Json {
        if let Some(ms) = waited {
            v["waited_ms"] = json!(ms);
        }
        print_json(&v)?;
        return Ok(code);
    }
    let Some(st) = st else {
        output::println(format!("go: {slept}no cooldown recorded for {scope}"))?;
        return Ok(code);
    };
    match st.verdict(now) {
        Verdict::Go => output::println(format!(
            "go: {slept}the cooldown of {scope} ended at {} ({})",
            rfc3339(st.not_before),
            st.reason
        ))?,
        Verdict::Wait {
            until,
            probe_holder: None,
        } => output::println(format!(
            "wait: no call to {scope} before {}: {}",
            when(until, now),
            st.reason
        ))?,
        Verdict::Wait {
            until,
            probe_holder: Some(h),
        } => output::println(probe_held(&h, scope, until, now))?,
        Verdict::NeedsOperator => output::eprintln(format!(
            "Error: {scope} needs an operator: {} (after fixing it: {})",
            st.reason,
            clear_command(scope.as_str(), store)
        )),
    }
    Ok(code)
}

/// "wait": another worker's live probe lease.
fn probe_held(holder: &str, scope: &Scope, until: EpochMs, now: EpochMs) -> String {
    format!(
        "wait: {holder} holds the recovery probe of {scope} until {}",
        when(until, now)
    )
}

/// An instant and how far off it is, as every cooldown line gives a deadline:
/// `2026-01-01T00:00:00Z (in 5m)`.
fn when(at: EpochMs, now: EpochMs) -> String {
    if at <= now {
        // A refusal recorded late (`--received-at` in the past).
        return format!("{} (passed {} ago)", rfc3339(at), human_duration(now - at));
    }
    format!("{} (in {})", rfc3339(at), human_duration(at - now))
}

/// The command that clears `scope`'s cooldown on this table, for a message
/// to suggest.
fn clear_command(scope: &str, store: &NamespacedArgs) -> String {
    format!(
        "zae-limiter cooldown clear {}{}",
        quote(scope),
        store.flags()
    )
}

/// A cooldown failure in words; an unreadable state also names the command
/// that clears it, for this scope (shell-quoted) on this table.
fn cooldown_failure(e: CooldownError, store: &NamespacedArgs) -> String {
    match &e {
        CooldownError::Corrupt { scope, .. } => format!("{e} (`{}`)", clear_command(scope, store)),
        _ => with_advice(&e),
    }
}

/// The state cannot be read: say so and refuse (76), never permit.
fn unreadable(format: TextOrJson, scope: &Scope, why: &str, now: EpochMs) -> Result<i32, CliError> {
    let code = exit_codes::NEEDS_OPERATOR;
    match format {
        TextOrJson::Json => print_json(&answer::unreadable_json(scope, why, now))?,
        TextOrJson::Text => output::eprintln(format!(
            "Error: cannot read the cooldown state of {scope}, so no call is permitted: {why}"
        )),
    }
    Ok(code)
}

// ---------------------------------------------------------------- probe

fn probe(a: CooldownProbeArgs) -> Result<i32, CliError> {
    let scope = parse_scope(&a.scope)?;
    let holder = parse_holder(&a.holder)?;
    let lease_ms = bounded_duration("--lease", &a.lease, 1, MAX_LEASE_MS)?;
    let now = crate::clock::now_ms()?;
    let policy = policy(DEFAULT_MARGIN_MS, Strictness::Refuse)?;
    let outcome = a.store.open().map_err(CliError::from).and_then(|store| {
        let ns = registered_namespace(store.as_ref(), &a.store)?;
        Cooldowns::new(store.as_ref(), ns, policy)
            .probe(&scope, holder, lease_ms, now)
            .map_err(|e| match e {
                CooldownError::Contended { .. } => CliError::Reported(exit_codes::TEMPFAIL),
                other => CliError::Failed(cooldown_failure(other, &a.store)),
            })
    });
    let outcome = match outcome {
        Ok(o) => o,
        Err(CliError::Reported(code)) => {
            output::eprintln(format!(
                "wait: other workers are changing the cooldown of {scope}; try again later"
            ));
            return Ok(code);
        }
        Err(e) => return unreadable(a.format, &scope, &e.to_string(), now),
    };
    let (v, code) = answer::probe_json(&scope, holder, &outcome, now);
    if a.format == TextOrJson::Json {
        print_json(&v)?;
        return Ok(code);
    }
    match outcome {
        ProbeResult::NoCooldown => output::println(format!(
            "go: no cooldown recorded for {scope}; no probe is needed"
        ))?,
        ProbeResult::Won { lease, .. } => output::println(format!(
            "won: {holder} holds the recovery probe of {scope} until {} (lease {}); make one call, then `zae-limiter cooldown settle {} --holder {} --outcome ok|quota|auth{}`",
            rfc3339(lease.expires_at),
            human_duration(lease.expires_at.saturating_sub(now)),
            quote(&scope.to_string()),
            quote(holder),
            a.store.flags()
        ))?,
        ProbeResult::Wait {
            until,
            probe_holder: Some(h),
            ..
        } => output::println(probe_held(&h, &scope, until, now))?,
        ProbeResult::Wait {
            until,
            probe_holder: None,
            state,
        } => output::println(format!(
            "wait: {holder} may probe {scope} from {}: {}",
            when(until, now),
            state.reason
        ))?,
        ProbeResult::NeedsOperator { state } => output::eprintln(format!(
            "Error: {scope} needs an operator: {}",
            state.reason
        )),
    }
    Ok(code)
}

// ---------------------------------------------------------------- settle

fn settle(a: CooldownSettleArgs) -> Result<i32, CliError> {
    let scope = parse_scope(&a.scope)?;
    let holder = parse_holder(&a.holder)?;
    one_stdin(&a.refusal)?;
    let now = crate::clock::now_ms()?;
    // The files are read only for a quota refusal: a script may pass them
    // whatever the outcome.
    let settlement = match a.outcome {
        ProbeOutcome::Quota => {
            let mut evidence = Evidence::default();
            let received_at = read_refusal(&a.refusal, &mut evidence, now);
            let (settlement, warnings) = evidence.settlement(received_at);
            warn_all(&warnings);
            settlement
        }
        _ if !flag_hints(&a.refusal).is_empty() => {
            return Err(CliError::Usage(
                "--retry-after, --resets-in-seconds and --resets-at go with --outcome quota".into(),
            ))
        }
        ProbeOutcome::Ok => Settlement::Ok,
        ProbeOutcome::Auth => Settlement::Auth,
    };
    let policy = policy(margin_ms(a.refusal.margin), Strictness::Warn)?;
    let store = a.store.open()?;
    let ns = registered_namespace(store.as_ref(), &a.store)?;
    let result = Cooldowns::new(store.as_ref(), ns, policy)
        .settle(&scope, holder, &settlement, now)
        .map_err(|e| CliError::Failed(cooldown_failure(e, &a.store)))?;
    if a.format == TextOrJson::Json {
        print_json(&answer::settle_json(&scope, &result, now))?;
        return Ok(exit_codes::OK);
    }
    match &result {
        SettleResult::Cleared => {
            output::println(format!("cleared: the cooldown of {scope} is over"))?
        }
        SettleResult::Recorded(st) => output::println(recorded_line(&scope, st, now, "escalated"))?,
        SettleResult::OperatorKept(st) => output::println(format!(
            "released the probe of {scope}; it still needs an operator: {}",
            st.reason
        ))?,
    }
    Ok(exit_codes::OK)
}

// ---------------------------------------------------------------- list

fn list(format: TextOrJson, store_args: NamespacedArgs) -> Result<i32, CliError> {
    let now = crate::clock::now_ms()?;
    let policy = policy(DEFAULT_MARGIN_MS, Strictness::Refuse)?;
    let store = store_args.open_read_only()?;
    let ns = registered_namespace(store.as_ref(), &store_args)?;
    let rows = Cooldowns::new(store.as_ref(), ns, policy).list()?;
    if format == TextOrJson::Json {
        print_json(&answer::list_json(&store_args.namespace, &rows, now))?;
        return Ok(exit_codes::OK);
    }
    if rows.is_empty() {
        output::println(format!(
            "no cooldowns recorded in namespace '{}'",
            store_args.namespace
        ))?;
        return Ok(exit_codes::OK);
    }
    output::println(render_table(&rows, now).to_string())?;
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
                let left = st.not_before.saturating_sub(now);
                let probe = match st.live_lease(now) {
                    Some(l) => format!("{} (until {})", l.holder, rfc3339(l.expires_at)),
                    None => "-".into(),
                };
                table.add_row(vec![
                    st.scope.clone(),
                    answer::status_word(st, now).replace('_', " "),
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
                    why.to_string(),
                    "-".into(),
                ]);
            }
        }
    }
    table
}

// ---------------------------------------------------------------- clear

fn clear(a: CooldownScopeArgs) -> Result<i32, CliError> {
    let scope = parse_scope(&a.scope)?;
    let store = a.store.open()?;
    let ns = registered_namespace(store.as_ref(), &a.store)?;
    let existed = Cooldowns::new(store.as_ref(), ns, Policy::default()).clear(&scope)?;
    match a.format {
        TextOrJson::Json => print_json(&answer::clear_json(&scope, existed))?,
        TextOrJson::Text if existed => output::println(format!("cleared the cooldown of {scope}"))?,
        TextOrJson::Text => output::println(format!(
            "no cooldown recorded for {scope}; nothing to clear"
        ))?,
    }
    Ok(exit_codes::OK)
}

// ---------------------------------------------------------------- helpers

fn parse_scope(text: &str) -> Result<Scope, CliError> {
    Ok(Scope::parse(text)?)
}

fn parse_holder(text: &str) -> Result<&str, CliError> {
    crate::runtime::decide::check_holder(text)?;
    Ok(text)
}

fn flag_hints(r: &RefusalArgs) -> Vec<Hint> {
    let mut hints = Vec::new();
    hints.extend(r.retry_after.clone().map(Hint::retry_after));
    hints.extend(r.resets_in_seconds.clone().map(Hint::resets_in_seconds));
    hints.extend(r.resets_at.clone().map(Hint::resets_at));
    hints
}

/// The namespace id for reading. A name that is not registered is an error
/// (a misspelt `-N` must not read as "nothing recorded"), with the nearest
/// registered name when there is one.
fn registered_namespace(store: &dyn Store, args: &NamespacedArgs) -> Result<String, CliError> {
    let name = &args.namespace;
    if let Some(id) = namespace::resolve(store, name)? {
        return Ok(id);
    }
    let names: Vec<String> = namespace::list(store)?
        .into_iter()
        .map(|r| r.name)
        .collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let hint = match crate::manifest::suggest::suggest("namespace", name, &refs) {
        Some((s, _)) => format!("did you mean '{s}'? "),
        None => String::new(),
    };
    Err(CliError::Failed(format!(
        "namespace '{name}' is not registered in table '{}', so its cooldowns cannot be read ({hint}register it with `{}`)",
        store.table_name(),
        args.table.register_command(name)
    )))
}

/// The namespace id for `record`: initialises the table (version record,
/// `default` namespace) and registers `name` when missing, as `limits apply` does.
fn init_namespace(store: &dyn Store, name: &str) -> Result<String, CliError> {
    let words = |e: String| format!("{e}; nothing was recorded");
    version::ensure_initialized(store).map_err(|e| CliError::failed(&e, words))?;
    Ok(namespace::register(store, name)
        .map_err(|e| CliError::failed(&e, words))?
        .id)
}

/// A duration flag or variable within `min..=max` ms.
fn bounded_duration(what: &str, text: &str, min: i64, max: i64) -> Result<i64, CliError> {
    let ms = parse_duration_ms(text).map_err(|e| CliError::Usage(format!("{what}: {e}")))?;
    if ms < min {
        return Err(CliError::Usage(format!(
            "{what} {text}: must be at least {}",
            human_duration(min)
        )));
    }
    if ms > max {
        return Err(CliError::Usage(format!(
            "{what} {text}: must be at most {}",
            human_duration(max)
        )));
    }
    Ok(ms)
}

/// What a bad policy variable does: refuse the command, or (where refusing
/// would leave a refusal unrecorded) warn and use the default.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Strictness {
    Refuse,
    Warn,
}

/// The policy with `margin_ms` and the environment's ceiling and jitter
/// (`serve` reads it once at startup).
pub(crate) fn policy(margin_ms: i64, strictness: Strictness) -> Result<Policy, CliError> {
    let env_duration = |name: &str, default: i64, max: i64| -> Result<i64, CliError> {
        let Some(v) = std::env::var(name).ok().filter(|v| !v.is_empty()) else {
            return Ok(default);
        };
        match (bounded_duration(name, &v, 0, max), strictness) {
            (Ok(ms), _) => Ok(ms),
            (Err(e), Strictness::Refuse) => Err(e),
            (Err(e), Strictness::Warn) => {
                warn(format!(
                    "{e}; using the default {}",
                    human_duration(default)
                ));
                Ok(default)
            }
        }
    };
    Ok(Policy {
        margin_ms,
        ceiling_ms: env_duration(CEILING_ENV, DEFAULT_CEILING_MS, MAX_CEILING_MS)?,
        max_jitter_ms: env_duration(JITTER_ENV, DEFAULT_MAX_JITTER_MS, MAX_JITTER_MS)?,
        ..Policy::default()
    })
}

/// Prints one JSON document with the top-level `"version": 1` every JSON
/// output carries (fields are only ever added within a version).
fn print_json(v: &Value) -> Result<(), CliError> {
    output::print_json(&answer::versioned(v.clone()))
}
