//! The namespace lock at the command line (docs/storage.md, "The apply
//! lock"): taking it for `limits apply` (with `--lock-timeout` and
//! `--lock=false`), turning Ctrl-C / SIGTERM into a stop at the apply's next
//! safe point, saying who holds a lock, and `limits force-unlock`.
//!
//! Test-only: `ZAEL_TEST_PAUSE_AT=STEP` (a [`Step`] name such as
//! `write_levels`) pauses the apply at that step boundary, after printing
//! `paused at STEP` on stderr, until its standard input closes or a signal
//! arrives, so tests can act on a namespace while an apply holds it;
//! `ZAEL_TEST_LOCK_RENEW_MS=MS` renews the lock that often instead of every
//! 15 s, so tests can see the renewal thread at work.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use zae_limiter_engine::duration::{human_duration, parse_duration_ms};

use crate::apply::lock::{self, ForceUnlockError, Held, LockError, LockInfo, Wait};
use crate::apply::run::Step;
use crate::cli::args::{store_flags, ForceUnlockArgs, LockArgs, TextOrJson};
use crate::cli::interrupt::Interrupt;
use crate::cli::shell::quote;
use crate::cli::{output, CliError};
use crate::clock::rfc3339;
use crate::exit_codes;
use crate::store::open::{self, Target};
use crate::store::Store;

/// The environment variable of the test-only pause.
pub const PAUSE_ENV: &str = "ZAEL_TEST_PAUSE_AT";
/// Test-only: renew the lock every this many ms instead of every 15 s.
pub const RENEW_ENV: &str = "ZAEL_TEST_LOCK_RENEW_MS";

/// What an apply needs to take the lock.
pub struct Request<'a> {
    pub table: &'a str,
    /// The namespace's name (messages) and id (the lock's key).
    pub name: &'a str,
    pub ns: &'a str,
    /// The command line, recorded in the lock.
    pub operation: String,
    pub args: &'a LockArgs,
    /// Where the renewal thread opens its own store handle.
    pub target: &'a Target,
    pub now: fn() -> i64,
}

/// `--lock-timeout`, in ms (a usage error when it is not a duration).
pub fn timeout_ms(args: &LockArgs) -> Result<i64, CliError> {
    parse_duration_ms(&args.lock_timeout)
        .map_err(|e| CliError::Usage(format!("--lock-timeout: {e}")))
}

/// Takes the lock as `req.args` says (`None` with `--lock=false`, after a
/// warning). The lock is released when the returned guard drops.
pub fn take<'s>(
    store: &'s dyn Store,
    req: &Request<'_>,
    interrupt: &Interrupt,
) -> Result<Option<Held<'s>>, CliError> {
    if !req.args.lock {
        output::eprintln(
            "Warning: --lock=false: applying without the namespace lock. An apply running at the same time can interleave its writes with this one, leaving a mix of both manifests until the next apply. Use it only when the lock cannot be taken or removed.",
        );
        return Ok(None);
    }
    let timeout = timeout_ms(req.args)?;
    let waiting = |h: &LockInfo| {
        output::eprintln(format!(
            "Waiting up to {} for the lock on namespace '{}' (held by {}, pid {}, `{}`, ID {})...",
            human_duration(timeout),
            req.name,
            h.who,
            h.pid,
            h.operation,
            h.id
        ));
    };
    let stop = || interrupt.requested();
    let wait = Wait {
        timeout_ms: timeout,
        now: req.now,
        stop: &stop,
        waiting: &waiting,
    };
    let (target, table) = (req.target.clone(), req.table.to_string());
    let opener: lock::Opener = Box::new(move || open::open(&target, &table));
    match lock::acquire(store, req.ns, &req.operation, &wait, opener, renew_every()) {
        Ok(mut held) => {
            held.on_release_failure(|msg| output::eprintln(format!("Warning: {msg}")));
            Ok(Some(held))
        }
        Err(LockError::Held { holder, waited_ms }) => {
            let mut msg = String::new();
            if waited_ms > 0 {
                msg.push_str(&format!(
                    "gave up after waiting {}: ",
                    human_duration(timeout)
                ));
            }
            msg.push_str(&held_by(req, &holder, (req.now)()));
            Err(CliError::Failed(msg))
        }
        Err(LockError::Interrupted(why)) => Err(CliError::Failed(format!(
            "{why} while waiting for the lock; nothing was written"
        ))),
        Err(e @ LockError::Store(_)) => Err(CliError::failed(&e, |e| {
            format!("{e}; nothing was written")
        })),
    }
}

/// [`lock::RENEW_EVERY`], or (tests only) `ZAEL_TEST_LOCK_RENEW_MS`.
fn renew_every() -> Duration {
    std::env::var(RENEW_ENV)
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map_or(lock::RENEW_EVERY, Duration::from_millis)
}

/// Says who holds the lock and what to do about it (Terraform's lock info).
fn held_by(req: &Request<'_>, h: &LockInfo, now_ms: i64) -> String {
    let (table, name) = (req.table, req.name);
    format!(
        "namespace '{name}' of table '{table}' is locked by another apply:\n\
         \x20 Lock ID:   {id}\n\
         \x20 Who:       {who} (pid {pid})\n\
         \x20 Operation: {op}\n\
         \x20 Since:     {since} ({ago} ago)\n\
         \x20 Lease:     until {lease} (renewed while that apply runs)\n\
         \x20 Version:   zae-limiter {version}\n\
         Nothing was written. Wait for it with --lock-timeout DURATION (e.g. --lock-timeout 5m). \
         If that apply is gone, its lock expires when the lease ends; to remove it at once: \
         zae-limiter limits force-unlock {id} -n {qtable}{store} -N {qname}",
        id = h.id,
        who = h.who,
        pid = h.pid,
        op = h.operation,
        since = rfc3339(h.created_ms),
        ago = human_duration(now_ms - h.created_ms),
        lease = rfc3339(h.lease_until_ms),
        version = h.version,
        qtable = quote(table),
        store = store_flags(req.target),
        qname = quote(name),
    )
}

/// The stop check an apply asks at each step boundary: a signal, or the
/// lock lost (checked with a renewal before the writes; the record write is
/// conditioned on its own anyway).
pub fn stop_check<'a>(
    interrupt: &'a Interrupt,
    held: Option<&'a Held<'a>>,
) -> impl Fn(Step) -> Option<String> + 'a {
    let pause = Pause::from_env();
    move |step: Step| {
        if let Some(p) = &pause {
            p.at(step, interrupt);
        }
        if let Some(why) = interrupt.requested() {
            return Some(why);
        }
        let held = held?;
        match step {
            // The last point before the writes: prove the lock is ours (and renew it).
            Step::WriteLevels => held.check(),
            _ => held.lost(),
        }
    }
}

/// The test-only pause ([`PAUSE_ENV`]).
struct Pause {
    step: String,
    /// Set when standard input reaches its end.
    released: Arc<AtomicBool>,
}

impl Pause {
    fn from_env() -> Option<Pause> {
        let step = std::env::var(PAUSE_ENV).ok().filter(|s| !s.is_empty())?;
        let released = Arc::new(AtomicBool::new(false));
        let flag = released.clone();
        std::thread::spawn(move || {
            let _ = std::io::copy(&mut std::io::stdin(), &mut std::io::sink());
            flag.store(true, Ordering::SeqCst);
        });
        Some(Pause { step, released })
    }

    fn at(&self, step: Step, interrupt: &Interrupt) {
        if step.as_str() != self.step {
            return;
        }
        output::eprintln(format!("paused at {}", self.step));
        let give_up = Instant::now() + Duration::from_secs(120);
        while !self.released.load(Ordering::SeqCst)
            && interrupt.requested().is_none()
            && Instant::now() < give_up
        {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// `limits force-unlock LOCK_ID`.
pub fn force_unlock(args: ForceUnlockArgs) -> Result<i32, CliError> {
    let read = &args.read;
    let store = read.target.open()?;
    let ns = super::read_only::resolve_namespace(store.as_ref(), &read.target)?;
    let name = &read.target.namespace;
    match lock::force_unlock(store.as_ref(), &ns, &args.lock_id) {
        Ok(info) => {
            match read.format {
                TextOrJson::Text => output::println(format!(
                    "Removed lock {} of namespace '{name}' (held by {}, pid {}, `{}` since {}). An apply still running under it stops at its next step.",
                    info.id,
                    info.who,
                    info.pid,
                    info.operation,
                    rfc3339(info.created_ms)
                ))?,
                TextOrJson::Json => output::println(
                    serde_json::json!({
                        "version": 1,
                        "namespace": name,
                        "removed": lock_json(&info),
                    })
                    .to_string(),
                )?,
            }
            Ok(exit_codes::OK)
        }
        Err(ForceUnlockError::NotLocked) => Err(CliError::Failed(format!(
            "namespace '{name}' of table '{}' is not locked; nothing was removed",
            read.target.table.name
        ))),
        Err(ForceUnlockError::OtherLock { given, current }) => Err(CliError::Failed(format!(
            "lock ID {given} is not the current lock of namespace '{name}'; nothing was removed. The current lock is {} (held by {}, pid {}, `{}` since {})",
            current.id,
            current.who,
            current.pid,
            current.operation,
            rfc3339(current.created_ms)
        ))),
        Err(ForceUnlockError::Store(e)) => Err(e.into()),
    }
}

fn lock_json(i: &LockInfo) -> serde_json::Value {
    serde_json::json!({
        "id": i.id,
        "who": i.who,
        "pid": i.pid,
        "operation": i.operation,
        "version": i.version,
        "created": rfc3339(i.created_ms),
        "lease_until": rfc3339(i.lease_until_ms),
    })
}
