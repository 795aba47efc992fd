//! `zae-limiter serve`: the runtime's checks and reservations, and the
//! provider cooldowns, over HTTP (axum on hyper, on tokio), for services in
//! any language. The server keeps no state of its own but a config cache:
//! every decision reads and conditionally writes the state item in the store,
//! so any number of instances share one DynamoDB table (or, on one host, one
//! local store file) and agree. `docs/serve.md` is the user's guide.
//!
//! The shape of a request:
//!
//! * [`router`] — the routes in one place, and the middleware every route
//!   goes through: metrics and latency ([`metrics`]), the bearer token
//!   ([`auth`]), a request timeout, the body limit (413).
//! * A handler ([`api`], [`cooldowns`]) parses its JSON ([`body`]: a 400
//!   names the field), then calls one library function — `runtime::decide`,
//!   `runtime::release`, `Cooldowns::probe`, … — with a store from the
//!   [`pool`] (on the worker for the local store, on a blocking thread for
//!   DynamoDB: [`App::blocking`]), one request at a time per
//!   state item in this instance ([`lanes`]), and renders the library's JSON
//!   (`runtime::answer`, `cooldown::answer`) with camelCase keys.
//! * Failures are typed (`RuntimeError`, `CooldownError`) and become a status
//!   in one `IntoResponse` ([`error`]).
//! * Resolved levels and the namespace id are cached for `--config-ttl`
//!   ([`cache`]); the state never is.
//! * [`run`] stops on SIGTERM or Ctrl-C: no new connections, requests in
//!   flight finish, then it returns.

pub mod api;
pub mod auth;
pub mod body;
pub mod busy_poll;
pub mod cache;
pub mod checkpoints;
pub mod cooldowns;
pub mod error;
pub mod lag;
pub mod lanes;
pub mod metrics;
pub mod path;
pub mod pool;
pub mod query;

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::{DefaultBodyLimit, MatchedPath, Request, State};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use zae_limiter_engine::cooldown::Policy;

use self::auth::Token;
use self::busy_poll::BusyPoll;
use self::cache::ConfigCache;
use self::error::ApiError;
use self::lanes::Lanes;
use self::metrics::Metrics;
use self::pool::StorePool;
use crate::store::{backoff, Store};

/// Test-only: with `ZAEL_FAULT_SERVE_DELAY_MS=N` set, every `POST /v1/checks`
/// waits N ms before it decides, so a test can hold a request in flight
/// (the SIGTERM drain test). Unset, nothing waits.
pub const DELAY_FAULT_ENV: &str = "ZAEL_FAULT_SERVE_DELAY_MS";

/// How long a request may take before it is answered 503 (the store's own
/// retries end well before).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// What the server was started with.
pub struct Settings {
    /// The namespace every request is answered in (`-N`).
    pub namespace: String,
    /// `--config-ttl`; zero turns the cache off.
    pub config_ttl: Duration,
    /// `None`: no token (loopback only, checked before binding).
    pub token: Option<Token>,
    /// The cooldowns' policy (ceiling, jitter, default margin).
    pub cooldown_policy: Policy,
    /// The [`DELAY_FAULT_ENV`] hook.
    pub check_delay: Duration,
    pub request_timeout: Duration,
    /// Run the store work on the async worker itself rather than on a
    /// blocking thread: set for the local store (see [`App::blocking`]).
    pub in_place: bool,
    /// `--busy-poll-us`; zero: never ([`busy_poll`]).
    pub busy_poll: Duration,
}

/// Everything a request may use, behind one `Arc`.
pub struct App {
    pub settings: Settings,
    pub pool: StorePool,
    pub cache: ConfigCache,
    pub metrics: Arc<Metrics>,
    pub lanes: Lanes,
    pub busy_poll: Arc<BusyPoll>,
}

impl App {
    pub fn new(settings: Settings, pool: StorePool, metrics: Arc<Metrics>) -> App {
        let cache = ConfigCache::new(settings.config_ttl, &settings.namespace, metrics.clone());
        App {
            busy_poll: BusyPoll::new(settings.busy_poll, metrics.clone()),
            settings,
            pool,
            cache,
            metrics,
            lanes: Lanes::default(),
        }
    }

    /// Runs `work` with a store of the pool, where blocking is allowed; with
    /// a `lane`, after the requests of this instance on the same lane.
    ///
    /// With [`Settings::in_place`] (the local store) the work runs right
    /// here on the async worker: a decision is tens of microseconds of
    /// SQLite, and handing it to a blocking thread and back cost more than
    /// the decision itself and made the p99 (docs/serve.md#speed). What could
    /// block longer is kept off this path: the checkpoints' syncs run on a
    /// thread of their own ([`checkpoints`]), and a wait for a lock another
    /// process holds first hands the worker's other tasks to another thread
    /// ([`hand_off_and_sleep`]). Otherwise (DynamoDB, whose store blocks on a
    /// runtime of its own) the work runs on a blocking thread.
    pub async fn blocking<T: Send + 'static>(
        self: &Arc<Self>,
        lane: Option<String>,
        work: impl FnOnce(&App, &dyn Store) -> Result<T, ApiError> + Send + 'static,
    ) -> Result<T, ApiError> {
        let guard = match &lane {
            Some(key) => Some(self.lanes.enter(key).await),
            None => None,
        };
        let permit = self.pool.permit().await;
        self.run((guard, permit), |app| app.with_store(work)).await
    }

    /// Runs `work` with the server's own store for health checks, outside
    /// the pool and the lanes: `/healthz` answers whether the store can be
    /// reached even while every pooled store waits (e.g. for a lock another
    /// process holds), where [`App::blocking`] would queue it behind them.
    pub async fn health<T: Send + 'static>(
        self: &Arc<Self>,
        work: impl FnOnce(&App, &dyn Store) -> Result<T, ApiError> + Send + 'static,
    ) -> Result<T, ApiError> {
        self.run((), |app| {
            app.pool
                .with_own(|store| work(app, store))
                .map_err(unopened)?
        })
        .await
    }

    /// Runs `work` where a store call may block (see [`App::blocking`]),
    /// keeping `held` until it is done.
    async fn run<T: Send + 'static, H: Send + 'static>(
        self: &Arc<Self>,
        held: H,
        work: impl FnOnce(&App) -> Result<T, ApiError> + Send + 'static,
    ) -> Result<T, ApiError> {
        if self.settings.in_place {
            let _held = held;
            let done = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                backoff::with_pauser(hand_off_and_sleep, || work(self))
            }));
            return done.unwrap_or_else(|_| Err(failed("a request's work panicked")));
        }
        let app = self.clone();
        let task = tokio::task::spawn_blocking(move || {
            // Held until the work is done, even when the request gave up waiting.
            let _held = held;
            work(&app)
        });
        task.await
            .unwrap_or_else(|e| Err(failed(&format!("a request's work failed: {e}"))))
    }

    /// `work` with a store lent by the pool (opened when none is idle).
    fn with_store<T>(
        &self,
        work: impl FnOnce(&App, &dyn Store) -> Result<T, ApiError>,
    ) -> Result<T, ApiError> {
        let store = self.pool.take().map_err(unopened)?;
        let out = work(self, store.as_ref());
        self.pool.give(store);
        out
    }
}

/// A store that could not be opened: logged, and a 503 to try again.
fn unopened(e: crate::store::StoreError) -> ApiError {
    error::log(&format!("cannot open a store: {e}"));
    ApiError::Unavailable {
        message: "the store cannot be opened right now (the server's log says why)".into(),
        retry_after_seconds: Some(1),
    }
}

/// A store call's pause on an async worker (a busy database, a write lost to
/// another process): the worker's other tasks move to another thread
/// (`block_in_place`) while this one sleeps, so only this request waits.
fn hand_off_and_sleep(d: Duration) {
    tokio::task::block_in_place(|| std::thread::sleep(d));
}

/// Logs why a request's work failed; the client learns only that it did.
fn failed(why: &str) -> ApiError {
    error::log(why);
    ApiError::Internal("the request failed on the server".into())
}

/// "Now" for a decision: the one clock (`ZAEL_NOW` when set).
pub fn now_ms() -> Result<i64, ApiError> {
    crate::clock::now_ms().map_err(|e| ApiError::Internal(e.to_string()))
}

/// The lane of the state item of (entity, resource).
pub fn item_lane(entity: &str, resource: &str) -> String {
    format!("runtime\0{entity}\0{resource}")
}

/// Every route, and the middleware around them.
pub fn router(app: Arc<App>) -> Router {
    let reservations = "/v1/reservations/{id}";
    Router::new()
        .route("/v1/checks", post(api::check))
        .route(&format!("{reservations}/release"), post(api::release))
        .route(&format!("{reservations}/commit"), post(api::commit))
        .route(&format!("{reservations}/extend"), post(api::extend))
        .route("/v1/limits", get(api::limits))
        .route("/v1/cooldowns", get(cooldowns::list))
        .route(
            "/v1/cooldowns/{scope}",
            get(cooldowns::check).delete(cooldowns::clear),
        )
        .route("/v1/cooldowns/{scope}/record", post(cooldowns::record))
        .route("/v1/cooldowns/{scope}/probe", post(cooldowns::probe))
        .route("/v1/cooldowns/{scope}/settle", post(cooldowns::settle))
        .route("/healthz", get(api::healthz))
        .route("/metrics", get(api::metrics))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        // Innermost first: the body limit, the timeout, the token, metrics.
        .layer(DefaultBodyLimit::max(body::MAX_BODY_BYTES))
        .layer(middleware::from_fn_with_state(app.clone(), timeout))
        .layer(middleware::from_fn_with_state(
            app.clone(),
            auth::require_token,
        ))
        .layer(middleware::from_fn_with_state(app.clone(), measure))
        .layer(middleware::from_fn(close_after_unread_body))
        .with_state(app)
}

/// Middleware: an error answer to a request with a body says `Connection:
/// close`. The body may be left unread (a 401, 404, 405 or 413 answers
/// before reading it), and hyper then closes the connection after the answer
/// rather than read the rest: a client not told so sends its next request on
/// the closed connection and fails it (a POST, which it may not retry).
async fn close_after_unread_body(req: Request, next: Next) -> Response {
    use axum::http::header::{CONNECTION, CONTENT_LENGTH, TRANSFER_ENCODING};
    let headers = req.headers();
    let has_body = headers.contains_key(TRANSFER_ENCODING)
        || headers
            .get(CONTENT_LENGTH)
            .is_some_and(|n| n.as_bytes() != b"0");
    let mut response = next.run(req).await;
    let status = response.status();
    if has_body && (status.is_client_error() || status.is_server_error()) {
        response
            .headers_mut()
            .insert(CONNECTION, axum::http::HeaderValue::from_static("close"));
    }
    response
}

async fn not_found(req: Request) -> ApiError {
    ApiError::NotFound(format!(
        "no endpoint {} {}; see docs/serve.md for the API",
        req.method(),
        req.uri().path()
    ))
}

async fn method_not_allowed() -> ApiError {
    ApiError::MethodNotAllowed
}

/// Middleware: answers 503 when a request takes longer than the timeout.
async fn timeout(State(app): State<Arc<App>>, req: Request, next: Next) -> Response {
    match tokio::time::timeout(app.settings.request_timeout, next.run(req)).await {
        Ok(response) => response,
        Err(_) => ApiError::Timeout.into_response(),
    }
}

/// Middleware: counts every request and its latency, by route template.
async fn measure(State(app): State<Arc<App>>, req: Request, next: Next) -> Response {
    let started = Instant::now();
    let close = app.busy_poll.arrived();
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map_or("unmatched", |p| p.as_str())
        .to_string();
    let response = next.run(req).await;
    app.metrics
        .request(&route, response.status().as_u16(), started.elapsed());
    app.busy_poll.answered(close);
    response
}

/// Resolves on SIGTERM or Ctrl-C (SIGINT). The handlers are installed when
/// this is called, before the future is first polled: a signal that arrives
/// right after startup is not lost.
pub fn shutdown_signal() -> std::io::Result<impl Future<Output = ()> + Send> {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    let mut int = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())?;
    Ok(async move {
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
        error::log("stopping: no new connections; finishing the requests in flight");
    })
}

/// How long a client may take to send a request's headers, and how long a
/// kept-alive connection may sit idle before its next request: then hyper
/// closes it. Without it a client that never finishes its headers (no
/// token is checked before they are complete) holds a connection, a file
/// descriptor and its buffered bytes for ever, and holds up the shutdown.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// How long the shutdown waits for the connections still open (the
/// requests in flight end within the request timeout; a client still
/// sending its headers, within [`HEADER_READ_TIMEOUT`]) before it closes
/// them.
fn drain_limit(settings: &Settings) -> Duration {
    settings.request_timeout.max(HEADER_READ_TIMEOUT) + Duration::from_secs(5)
}

/// Serves on `listener` until `shutdown` resolves, then stops accepting,
/// lets the requests in flight finish (closing idle connections at once)
/// and returns. Connections are served by hyper's HTTP/1 with a timer, so
/// [`HEADER_READ_TIMEOUT`] holds.
pub async fn run(
    listener: tokio::net::TcpListener,
    app: Arc<App>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    use axum::serve::Listener;
    use hyper_util::rt::{TokioIo, TokioTimer};
    use hyper_util::service::TowerToHyperService;

    let drain = drain_limit(&app.settings);
    let service = TowerToHyperService::new(router(app));
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT);
    let (stop, stopping) = tokio::sync::watch::channel(());
    let mut connections = tokio::task::JoinSet::new();
    let mut listener = listener;
    let mut shutdown = std::pin::pin!(shutdown);
    // Every answer is one small write the client waits for: sent at once,
    // not held back for the acknowledgement of the last one (Nagle).
    static WARNED: std::sync::Once = std::sync::Once::new();
    loop {
        // axum's accept: a connection error is skipped, running out of file
        // descriptors pauses accepting a moment instead of ending the server.
        let (tcp, _) = tokio::select! {
            accepted = Listener::accept(&mut listener) => accepted,
            () = &mut shutdown => break,
        };
        if let Err(e) = tcp.set_nodelay(true) {
            // Once: it would fail the same way on every connection.
            WARNED.call_once(|| error::log(&format!("cannot set TCP_NODELAY: {e}")));
        }
        let conn = http.serve_connection(TokioIo::new(tcp), service.clone());
        let mut stopping = stopping.clone();
        connections.spawn(async move {
            let mut conn = std::pin::pin!(conn);
            tokio::select! {
                _ = conn.as_mut() => return,
                _ = stopping.changed() => conn.as_mut().graceful_shutdown(),
            }
            // A failed connection (a timeout, a reset) is the client's end.
            let _ = conn.await;
        });
        // Forget the connections that ended.
        while connections.try_join_next().is_some() {}
    }
    drop(listener);
    drop(stop);
    let drained = tokio::time::timeout(drain, async {
        while connections.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        error::log(&format!(
            "closing {} connections still open {} s after the shutdown began",
            connections.len(),
            drain.as_secs()
        ));
        connections.shutdown().await;
    }
    Ok(())
}
