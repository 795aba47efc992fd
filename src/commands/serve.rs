//! `zae-limiter serve [--listen ADDR:PORT] [--config-ttl DURATION]
//! [--token-file FILE] <store flags> [-N NAMESPACE]`: checks everything it
//! can before it listens (the token, the address, the clock, the cooldown
//! policy, the table and the namespace), then runs [`crate::serve`] on a
//! multi-thread tokio runtime until SIGTERM or Ctrl-C, and exits 0 once the
//! requests in flight are answered.

use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::Arc;
use std::time::Duration;

use zae_limiter_engine::cooldown::{DAY_MS, DEFAULT_MARGIN_MS};
use zae_limiter_engine::duration::{human_duration, parse_duration_ms};

use super::cooldown::{policy, Strictness};
use crate::cli::args::ServeArgs;
use crate::cli::{output, CliError};
use crate::exit_codes;
use crate::serve::auth::Token;
use crate::serve::checkpoints::{self, Checkpointer, Hold};
use crate::serve::lag;
use crate::serve::metrics::Metrics;
use crate::serve::pool::{Opener, StorePool};
use crate::serve::{self, App, Settings, DELAY_FAULT_ENV, REQUEST_TIMEOUT};
use crate::store::local::LocalStore;
use crate::store::observe;
use crate::store::open::{open_for_server, Target};

/// The environment variable holding the bearer token (`--token-file` wins).
pub const TOKEN_ENV: &str = "ZAEL_API_TOKEN";

/// Stores in the pool. The local store: one SQLite connection, since every
/// decision is a write transaction and SQLite has one writer at a time (a
/// second connection only polled the lock the first held; with one,
/// requests wait their turn on the pool asynchronously: 0 to 26% more
/// decisions per second on 32 state items, docs/serve.md#speed). DynamoDB:
/// many clients, since requests wait on the network.
const LOCAL_STORES: usize = 1;
const DYNAMODB_STORES: usize = 32;

/// `--workers` on the local store: one. Its decisions take turns on one
/// connection, and a second worker only woke and slept around it and was
/// preempted holding it: 32 connections on 32 state items, p99 11.7–22.7 ms
/// with two workers, 5.9–10.7 ms with one in 8 runs of 9 (docs/serve.md#speed).
const LOCAL_WORKERS: usize = 1;

/// `--busy-poll-us` on the local store; DynamoDB answers in milliseconds,
/// which no polling shortens.
const LOCAL_BUSY_POLL: Duration = Duration::from_micros(250);

pub fn run(a: ServeArgs) -> Result<i32, CliError> {
    let config_ttl = config_ttl(&a.config_ttl)?;
    let token = token(a.token_file.as_deref())?;
    let addr = listen_addr(&a.listen, token.is_some())?;
    crate::clock::now_ms()?;
    // What differs between the stores, decided once: the local store's calls
    // run in place on the workers, on one connection, with the checkpoints
    // on a thread of their own (below); DynamoDB's run on blocking threads,
    // on many clients.
    let target = a.store.table.store.target();
    let (in_place, size, workers, busy_poll) = match target {
        Target::Local(_) => (true, LOCAL_STORES, Some(LOCAL_WORKERS), LOCAL_BUSY_POLL),
        Target::DynamoDb { .. } => (false, DYNAMODB_STORES, None, Duration::ZERO),
    };
    let workers = a.workers.map(usize::from).or(workers);
    let busy_poll = a.busy_poll_us.map_or(busy_poll, Duration::from_micros);
    let settings = Settings {
        namespace: a.store.namespace.clone(),
        config_ttl,
        token,
        cooldown_policy: policy(DEFAULT_MARGIN_MS, Strictness::Refuse)?,
        check_delay: delay_hook(),
        request_timeout: REQUEST_TIMEOUT,
        in_place,
        busy_poll,
    };

    let metrics = Arc::new(Metrics::default());
    let opener: Opener = {
        let (target, name, metrics) = (target.clone(), a.store.table.name.clone(), metrics.clone());
        Box::new(move || {
            let inner = open_for_server(&target, &name)?;
            Ok(observe::wrap(inner, metrics.clone()))
        })
    };
    // The table and the namespace, before listening: a server that cannot
    // answer anything should say why and stop, not answer 503 forever.
    let first = opener()?;
    super::acquire::namespace(first.as_ref(), &a.store)?;
    let app = Arc::new(App::new(
        settings,
        StorePool::new(opener, size, Some(first)),
        metrics,
    ));

    let listener = std::net::TcpListener::bind(addr)
        .and_then(|l| l.set_nonblocking(true).map(|()| l))
        .map_err(|e| {
            CliError::Failed(format!("cannot listen on {addr}: {e}{}", listen_advice(&e)))
        })?;
    let bound = listener
        .local_addr()
        .map_err(|e| CliError::Failed(format!("cannot listen on {addr}: {e}")))?;
    let mut rt = tokio::runtime::Builder::new_multi_thread();
    if let Some(n) = workers {
        rt.worker_threads(n);
    }
    let rt = rt
        .enable_all()
        .build()
        .map_err(|e| CliError::Failed(format!("cannot start the async runtime: {e}")))?;
    let checkpointer = match &target {
        Target::Local(path) => {
            let own = LocalStore::open(path, &a.store.table.name)?;
            let (app, rt) = (app.clone(), rt.handle().clone());
            let hold: Hold = Box::new(move || Box::new(app.pool.permit_blocking(&rt)));
            let started = Checkpointer::start(own, checkpoints::SCHEDULE, hold).map_err(|e| {
                CliError::Failed(format!("cannot start the checkpoint thread: {e}"))
            })?;
            Some(started)
        }
        Target::DynamoDb { .. } => None,
    };
    rt.spawn(lag::watch(
        lag::Probe::kernel(rt.metrics().num_workers()),
        app.metrics.clone(),
        |late| serve::error::log(&late.describe()),
    ));
    let failed = |e: std::io::Error| CliError::Failed(format!("serving on {bound} failed: {e}"));
    let served = rt.block_on(async {
        let shutdown = serve::shutdown_signal().map_err(failed)?;
        let listener = tokio::net::TcpListener::from_std(listener).map_err(failed)?;
        output::println(format!("listening on {bound}"))?;
        serve::error::log(&describe(
            &a,
            config_ttl,
            app.settings.token.is_some(),
            workers,
            busy_poll,
        ));
        serve::run(listener, app.clone(), shutdown)
            .await
            .map_err(failed)
    });
    // Work that outlived its request (a timed-out one) gets a moment to end.
    rt.shutdown_timeout(Duration::from_secs(10));
    // The stores close here, outside the async runtime (a DynamoDB store
    // shuts its own runtime down).
    app.pool.close();
    drop(app);
    if let Some(c) = checkpointer {
        c.stop();
    }
    served?;
    serve::error::log("stopped");
    Ok(exit_codes::OK)
}

/// What to do when the address cannot be bound, for the errors a user can act on.
fn listen_advice(e: &std::io::Error) -> &'static str {
    match e.kind() {
        std::io::ErrorKind::AddrInUse => "; another process listens there: stop it, or give another --listen port (127.0.0.1:0 picks a free one and prints it)",
        std::io::ErrorKind::PermissionDenied => "; ports below 1024 need privileges: use a port of 1024 or above",
        std::io::ErrorKind::AddrNotAvailable => "; the address is not one of this host's: use 127.0.0.1, 0.0.0.0 or an address of an interface here",
        _ => "",
    }
}

/// The startup line on stderr: what is served, from where.
fn describe(
    a: &ServeArgs,
    ttl: Duration,
    token: bool,
    workers: Option<usize>,
    busy_poll: Duration,
) -> String {
    let name = &a.store.table.name;
    let store = match a.store.table.store.target() {
        Target::Local(p) => format!("local store {} table '{name}'", p.display()),
        Target::DynamoDb { .. } => format!("DynamoDB table '{name}'"),
    };
    let ttl = if ttl.is_zero() {
        "config read on every request".to_string()
    } else {
        format!(
            "config cached {}",
            human_duration(i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX))
        )
    };
    let auth = if token {
        "bearer token required"
    } else {
        "no token (loopback only)"
    };
    let workers = match workers {
        Some(1) => "1 worker".to_string(),
        Some(n) => format!("{n} workers"),
        None => "tokio's default workers (one per CPU)".to_string(),
    };
    let polling = if busy_poll.is_zero() {
        String::new()
    } else {
        format!(", busy polling {} µs", busy_poll.as_micros())
    };
    format!(
        "namespace '{}' of the {store}; {ttl}; {auth}; {workers}{polling}",
        a.store.namespace
    )
}

/// `--config-ttl`: a duration from 0 to a day.
fn config_ttl(text: &str) -> Result<Duration, CliError> {
    let ms = parse_duration_ms(text).map_err(|e| CliError::Usage(format!("--config-ttl: {e}")))?;
    if !(0..=DAY_MS).contains(&ms) {
        return Err(CliError::Usage(format!(
            "--config-ttl {text}: must be from 0 (no cache) to 1d"
        )));
    }
    Ok(Duration::from_millis(ms.unsigned_abs()))
}

/// The token from `--token-file` or [`TOKEN_ENV`], if any.
fn token(file: Option<&std::path::Path>) -> Result<Option<Token>, CliError> {
    let (text, origin) = match file {
        Some(path) => {
            let text = std::fs::read_to_string(path).map_err(|e| {
                CliError::Failed(format!("cannot read --token-file {}: {e}", path.display()))
            })?;
            (text, format!("--token-file {}", path.display()))
        }
        None => match std::env::var(TOKEN_ENV) {
            Ok(t) if !t.is_empty() => (t, TOKEN_ENV.to_string()),
            _ => return Ok(None),
        },
    };
    Token::new(&text)
        .map(Some)
        .map_err(|e| CliError::Usage(format!("{origin}: {e}")))
}

/// `--listen`: an address and port (a name such as `localhost:8080` is
/// resolved; its first address is used). Without a token, loopback only.
fn listen_addr(text: &str, token: bool) -> Result<SocketAddr, CliError> {
    let addr = text
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .ok_or_else(|| {
            CliError::Usage(format!(
                "--listen {text:?}: expected ADDR:PORT, e.g. 127.0.0.1:8080, [::1]:8080 or 0.0.0.0:8080"
            ))
        })?;
    if !token && !addr.ip().is_loopback() {
        return Err(CliError::Usage(format!(
            "refusing to listen on {addr} without a token: anyone who can reach it could take and release slots. Set {TOKEN_ENV} or --token-file FILE (at least 16 random characters), or listen on 127.0.0.1"
        )));
    }
    Ok(addr)
}

/// The test-only [`DELAY_FAULT_ENV`] hook.
fn delay_hook() -> Duration {
    std::env::var(DELAY_FAULT_ENV)
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map_or(Duration::ZERO, Duration::from_millis)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags() {
        assert_eq!(config_ttl("0").unwrap(), Duration::ZERO);
        assert_eq!(config_ttl("90s").unwrap(), Duration::from_secs(90));
        assert!(config_ttl("2d").is_err());
        assert!(config_ttl("soon").is_err());
        assert!(listen_addr("127.0.0.1:0", false).is_ok());
        assert!(listen_addr("[::1]:8080", false).is_ok());
        let e = listen_addr("0.0.0.0:8080", false).unwrap_err().to_string();
        assert!(
            e.starts_with("refusing to listen on 0.0.0.0:8080 without a token"),
            "{e}"
        );
        assert!(listen_addr("0.0.0.0:8080", true).is_ok());
        assert!(listen_addr("8080", true).is_err());
    }
}
