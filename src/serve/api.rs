//! The runtime's endpoints: `POST /v1/checks`, `POST
//! /v1/reservations/{id}/release|commit|extend`, `GET /v1/limits`, and
//! `GET /healthz`, `GET /metrics`. Each parses its request, calls one runtime
//! function and answers the runtime's JSON (`runtime::answer`) in camelCase —
//! the same decision and fields as `zae-limiter acquire --format json` and
//! `reservation … --format json`.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};

use super::body::JsonBody;
use super::error::ApiError;
use super::path::{FromPath, PathParam};
use super::query::QueryParams;
use super::{item_lane, now_ms, App};
use crate::display::limits::{self, Subject};
use crate::items::source::Source;
use crate::runtime::answer::{
    camel_case, closure_json, decision_json, disabled_json, extended_json,
};
use crate::runtime::decide::Unchecked;
use crate::runtime::state::Closing;
use crate::runtime::{self, Decision, Mode, Namespace, Request, ReservationId};
use crate::store::Store;

/// `{"subject": {"id": ENTITY}}`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SubjectField {
    pub id: String,
}

#[derive(Debug, Clone, Copy, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ModeField {
    #[default]
    Consume,
    Preview,
    Reserve,
}

/// `POST /v1/checks`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CheckBody {
    pub subject: SubjectField,
    /// The resource.
    pub action: String,
    #[serde(default)]
    pub mode: ModeField,
    /// Cost per limit name, whole units (rolling windows without one are charged 1).
    #[serde(default)]
    pub cost: BTreeMap<String, u64>,
    /// `reserve`: how long the hold lasts (1 to 3600; default the level's `hold_ttl_seconds`).
    pub ttl_seconds: Option<i64>,
    /// `reserve`: who holds it, for operators reading the state.
    pub holder: Option<String>,
}

impl CheckBody {
    fn request(self) -> Result<(String, String, Request), ApiError> {
        let mode = match self.mode {
            ModeField::Consume => Mode::Consume,
            ModeField::Preview => Mode::Preview,
            ModeField::Reserve => Mode::Reserve,
        };
        let mut req = Request::checked(mode, self.ttl_seconds.is_some(), self.holder.is_some())
            .ok_or_else(|| {
                ApiError::BadRequest(
                    "ttlSeconds and holder go with \"mode\": \"reserve\" (a consume or preview holds nothing)".into(),
                )
            })?;
        if let Some(s) = self.ttl_seconds {
            runtime::decide::check_ttl("ttlSeconds", s)?;
        }
        req.costs = self.cost;
        req.ttl_seconds = self.ttl_seconds;
        req.holder = self.holder;
        Ok((self.subject.id, self.action, req))
    }
}

/// Decides `req` for (entity, resource): with the config cache, the cached
/// level and one read and one write of the state; without it, the config and
/// the state in one batch read (as `acquire` does). A failure the runtime
/// answers as a refusal (store unreachable, lost races) is that refusal.
fn decide(
    app: &App,
    store: &dyn Store,
    entity: &str,
    resource: &str,
    req: &Request,
) -> Result<(Decision, String), ApiError> {
    let now = now_ms()?;
    let out = app.cache.namespace(store).and_then(|ns| {
        let d = if app.cache.enabled() {
            let level = app.cache.level(store, &ns, entity, resource)?;
            runtime::decide(store, &ns, &level, req, now)
        } else {
            runtime::acquire(store, &ns, entity, resource, req, now)
        };
        d.map(|d| (d, ns.name))
    });
    match out {
        Ok(out) => Ok(out),
        Err(e) => {
            let d = runtime::refusal_for(e, req.mode, now)?;
            Ok((d, app.settings.namespace.clone()))
        }
    }
}

/// `POST /v1/checks`: 200 with the decision, allowed or not.
pub async fn check(
    State(app): State<Arc<App>>,
    JsonBody(body): JsonBody<CheckBody>,
) -> Result<Response, ApiError> {
    let (entity, resource, req) = body.request()?;
    if !app.settings.check_delay.is_zero() {
        tokio::time::sleep(app.settings.check_delay).await;
    }
    let lane = item_lane(&entity, &resource);
    // The answer is rendered after the store is handed back: the store's
    // turn is the one thing requests wait for (docs/serve.md#speed).
    let (d, ns, entity, resource) = app
        .blocking(Some(lane), move |app, store| {
            let (d, ns) = decide(app, store, &entity, &resource, &req)?;
            Ok((d, ns, entity, resource))
        })
        .await?;
    app.metrics.decision(&d);
    // Why `on_unavailable` answered names the store (a file, a table, an
    // SDK error): logged in full, answered without it.
    let mut d = d;
    match &d.unavailable {
        Some(Unchecked::Unavailable(why)) => {
            super::error::log(&format!(
                "on_unavailable answered {entity} on {resource}: {why}"
            ));
            d.unavailable = Some(Unchecked::Unavailable(
                "the store could not be used (the server's log says why)".into(),
            ));
        }
        Some(Unchecked::StateUnreadable(why)) => {
            super::error::log(&format!(
                // Entity ids and resource names hold no character a shell
                // reads specially: the command is pasted as it is.
                "on_unavailable answered {entity} on {resource}: {why}; nothing overwrites it: look at it with `zae-limiter runtime show {entity} -r {resource}`, remove it with `zae-limiter runtime clear {entity} -r {resource}` (with this server's store flags)"
            ));
            d.unavailable = Some(Unchecked::StateUnreadable(
                "the runtime state of this entity and resource is unreadable (the server's log says where); an operator must clear it".into(),
            ));
        }
        _ => {}
    }
    let doc = decision_json(&d, &ns, &entity, &resource);
    let mut response = Json(camel_case(doc)).into_response();
    if let Some(ms) = d.retry_after_ms.filter(|_| !d.allowed) {
        let seconds = runtime::answer::ceil_seconds(ms);
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
    }
    Ok(response)
}

/// `POST /v1/reservations/{id}/commit`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CommitBody {
    /// The actual cost of a rolling limit the reservation counted, whole units.
    #[serde(default)]
    pub cost: BTreeMap<String, u64>,
}

/// `POST /v1/reservations/{id}/release`: no fields.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReleaseBody {}

/// `POST /v1/reservations/{id}/extend`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ExtendBody {
    /// Keep it open this long from now (1 to 3600; never shortened).
    pub ttl_seconds: i64,
}

impl FromPath for ReservationId {
    fn from_path(text: &str) -> Result<ReservationId, ApiError> {
        Ok(ReservationId::parse(text).map_err(runtime::RuntimeError::from)?)
    }
}

/// Runs `work` on the reservation's state item, in its lane.
async fn on_reservation(
    app: &Arc<App>,
    id: ReservationId,
    work: impl FnOnce(&dyn Store, &Namespace, &ReservationId, i64) -> Result<Value, ApiError>
        + Send
        + 'static,
) -> Result<Json<Value>, ApiError> {
    let lane = item_lane(&id.entity, &id.resource);
    let doc = app
        .blocking(Some(lane), move |app, store| {
            let ns = app.cache.namespace(store)?;
            work(store, &ns, &id, now_ms()?)
        })
        .await?;
    Ok(Json(camel_case(doc)))
}

/// Releases or commits: the slots go back (commit also corrects the cost).
async fn close(
    app: &Arc<App>,
    id: ReservationId,
    how: Closing,
    costs: BTreeMap<String, u64>,
) -> Result<Json<Value>, ApiError> {
    on_reservation(app, id, move |store, ns, id, now| {
        let c = match how {
            Closing::Released => runtime::release(store, ns, id, now)?,
            Closing::Committed => runtime::commit(store, ns, id, &costs, now)?,
        };
        Ok(closure_json(&c, &ns.name, now))
    })
    .await
}

pub async fn release(
    State(app): State<Arc<App>>,
    PathParam(id): PathParam<ReservationId>,
    JsonBody(_): JsonBody<ReleaseBody>,
) -> Result<Json<Value>, ApiError> {
    close(&app, id, Closing::Released, BTreeMap::new()).await
}

pub async fn commit(
    State(app): State<Arc<App>>,
    PathParam(id): PathParam<ReservationId>,
    JsonBody(body): JsonBody<CommitBody>,
) -> Result<Json<Value>, ApiError> {
    close(&app, id, Closing::Committed, body.cost).await
}

pub async fn extend(
    State(app): State<Arc<App>>,
    PathParam(id): PathParam<ReservationId>,
    JsonBody(body): JsonBody<ExtendBody>,
) -> Result<Json<Value>, ApiError> {
    runtime::decide::check_ttl("ttlSeconds", body.ttl_seconds)?;
    on_reservation(&app, id, move |store, ns, id, now| {
        let x = runtime::extend(store, ns, id, body.ttl_seconds, now)?;
        Ok(extended_json(&x, &ns.name, now))
    })
    .await
}

/// `GET /v1/limits?entity=E&resource=R`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitsQuery {
    pub entity: String,
    pub resource: String,
}

/// `GET /v1/limits`: the level that applies to (entity, resource) now — the
/// `entity get-limits --format json` document of that level — with what is
/// in force along the resolution (`inForce`: the `disabled` flag that
/// applies and the system's `on_unavailable`).
pub async fn limits(
    State(app): State<Arc<App>>,
    QueryParams(q): QueryParams<LimitsQuery>,
) -> Result<Json<Value>, ApiError> {
    let doc = app
        .blocking(None, move |app, store| {
            let ns = app.cache.namespace(store)?;
            let level = app.cache.level(store, &ns, &q.entity, &q.resource)?;
            let subject = match level.source {
                Source::Entity => Subject::Entity {
                    entity: &q.entity,
                    resource: &q.resource,
                },
                Source::EntityDefault => Subject::Entity {
                    entity: &q.entity,
                    resource: crate::items::keys::DEFAULT_RESOURCE,
                },
                Source::Resource => Subject::Resource(&q.resource),
                Source::System => Subject::System,
            };
            let mut doc = limits::to_json(&ns.name, subject, Some(&level.config));
            doc["query"] = json!({"entity": q.entity, "resource": q.resource});
            doc["in_force"] = json!({
                "disabled": disabled_json(level.disabled),
                "on_unavailable": match level.on_unavailable {
                    runtime::OnUnavailable::Allow => "allow",
                    runtime::OnUnavailable::Block => "block",
                },
            });
            Ok(doc)
        })
        .await?;
    Ok(Json(camel_case(doc)))
}

/// `GET /healthz`: 200 when the store answers and the namespace is
/// registered (read afresh, never from the cache), else 503.
pub async fn healthz(State(app): State<Arc<App>>) -> Result<Json<Value>, ApiError> {
    let doc = app
        .health(|app, store| {
            let ns = runtime::namespace_id(store, &app.settings.namespace)?;
            Ok(json!({
                "version": 1,
                "status": "ok",
                "table": store.table_name(),
                "namespace": ns.name,
            }))
        })
        .await?;
    Ok(Json(doc))
}

/// `GET /metrics`: Prometheus text.
pub async fn metrics(State(app): State<Arc<App>>) -> Response {
    (
        StatusCode::OK,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
        )],
        app.metrics.render(),
    )
        .into_response()
}
