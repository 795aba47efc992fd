//! The cooldown endpoints, the HTTP twins of `zae-limiter cooldown …`: the
//! same operations ([`Cooldowns`]), the same decisions and the same JSON
//! ([`crate::cooldown::answer`], in camelCase), behind the same token.
//!
//! | endpoint | CLI |
//! |---|---|
//! | `GET /v1/cooldowns/{scope}` | `cooldown check` |
//! | `POST /v1/cooldowns/{scope}/record` | `cooldown record` |
//! | `POST /v1/cooldowns/{scope}/probe` | `cooldown probe` |
//! | `POST /v1/cooldowns/{scope}/settle` | `cooldown settle` |
//! | `DELETE /v1/cooldowns/{scope}` | `cooldown clear` |
//! | `GET /v1/cooldowns` | `cooldown list` |
//!
//! A scope holds `/`: it is one path segment, percent-encoded
//! (`openai%2Facct-42%2Fgpt-4`). A refused response reaches a refusal through
//! the one adapter of the CLI ([`Evidence`]): its status, its headers as a
//! JSON object (`{"retry-after": "20"}`; a list for a repeated header), its
//! body (the text, or the JSON already parsed) and `receivedAt`. What cannot
//! be used is named in `warnings` and never loses the refusal.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{json, Value};
use zae_limiter_engine::cooldown::{EpochMs, Hint, Policy, MAX_LEASE_MS, MAX_MARGIN_MS, SECOND_MS};
use zae_limiter_engine::duration::human_duration;

use super::body::JsonBody;
use super::error::{log, ApiError};
use super::path::{FromPath, PathParam};
use super::{now_ms, App};
use crate::clock::parse_instant;
use crate::cooldown::answer::{self, versioned};
use crate::cooldown::evidence::Evidence;
use crate::cooldown::response::{read_response, scalar};
use crate::cooldown::{Cooldowns, Scope, Settlement};
use crate::runtime::answer::camel_case;
use crate::runtime::decide::check_holder;
use crate::store::Store;

/// A hint given as a string or a number. A number is kept as written, so
/// one too large for a float (`1e400`) is a reset past every year we
/// represent (escalated), not a request serde_json refuses whole.
#[derive(Debug, Clone)]
pub struct Text(String);

impl<'de> Deserialize<'de> for Text {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = Box::<RawValue>::deserialize(d)?;
        match scalar(&raw) {
            Ok(Some(text)) => Ok(Text(text)),
            Ok(None) => Err(serde::de::Error::custom("expected a string or a number")),
            Err(found) => Err(serde::de::Error::custom(format!(
                "{found}; expected a string or a number"
            ))),
        }
    }
}

impl Text {
    fn text(&self) -> String {
        self.0.clone()
    }
}

/// The body of `record` and `settle`: what a refused response said, and
/// for `settle` the holder and what its probe found.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ResponseParts {
    /// `record`: the refusal's HTTP status (401/403 escalate to an operator).
    pub status: Option<u16>,
    /// `settle`: the worker that holds the probe.
    pub holder: Option<String>,
    /// `settle`: what the probe found.
    pub outcome: Option<Outcome>,
    /// Header name → value (a string or number, or a list of them). Raw,
    /// like `body`: a number past every float must not refuse the request.
    #[serde(default)]
    pub headers: BTreeMap<String, Box<RawValue>>,
    /// The response body: its text, or its JSON (raw: read as a `--response`
    /// file is, so `1e400` in it is a far reset, not a 400 that records nothing).
    pub body: Option<Box<RawValue>>,
    /// When the response was received (RFC 3339; default now).
    pub received_at: Option<String>,
    pub retry_after: Option<Text>,
    pub resets_in_seconds: Option<Text>,
    pub resets_at: Option<Text>,
    /// Safety margin after the deadline, in seconds (default 5).
    pub margin_seconds: Option<u64>,
}

/// `POST /v1/cooldowns/{scope}/probe`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ProbeBody {
    /// This worker's id.
    pub holder: String,
    /// How long the probe is held, seconds (default 60, at most a day).
    pub lease_seconds: Option<i64>,
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    Ok,
    Quota,
    Auth,
}

impl FromPath for Scope {
    fn from_path(text: &str) -> Result<Scope, ApiError> {
        Scope::parse(text).map_err(|e| ApiError::BadRequest(e.to_string()))
    }
}

fn holder(text: &str) -> Result<(), ApiError> {
    check_holder(text).map_err(ApiError::from)
}

fn lane(scope: &Scope) -> String {
    format!("cooldown\0{scope}")
}

fn answer(doc: Value) -> Json<Value> {
    Json(camel_case(versioned(doc)))
}

impl ResponseParts {
    fn has_hints(&self) -> bool {
        self.retry_after.is_some() || self.resets_in_seconds.is_some() || self.resets_at.is_some()
    }

    /// The policy with this request's margin (capped at a day, with a warning).
    fn policy(&self, base: &Policy, warnings: &mut Vec<String>) -> Policy {
        let margin_ms = match self.margin_seconds {
            None => base.margin_ms,
            Some(s) => match i64::try_from(s).ok().and_then(|s| s.checked_mul(SECOND_MS)) {
                Some(ms) if ms <= MAX_MARGIN_MS => ms,
                _ => {
                    warnings.push(format!(
                        "marginSeconds {s} is above the {}s maximum; using {}s",
                        MAX_MARGIN_MS / SECOND_MS,
                        MAX_MARGIN_MS / SECOND_MS
                    ));
                    MAX_MARGIN_MS
                }
            },
        };
        Policy { margin_ms, ..*base }
    }

    /// The evidence of the response and when it was received, as
    /// `cooldown record` reads its flags and files.
    fn evidence(
        self,
        now: EpochMs,
        warnings: &mut Vec<String>,
    ) -> Result<(Evidence, EpochMs), ApiError> {
        let mut e = Evidence::default();
        if let Some(s) = self.status {
            e.status("status", s);
        }
        let hints = [
            self.retry_after.map(|t| Hint::retry_after(t.text())),
            self.resets_in_seconds
                .map(|t| Hint::resets_in_seconds(t.text())),
            self.resets_at.map(|t| Hint::resets_at(t.text())),
        ];
        for h in hints.into_iter().flatten() {
            e.hint(h);
        }
        let mut pairs = Vec::new();
        for (name, value) in &self.headers {
            let bad = || {
                ApiError::BadRequest(format!(
                    "invalid field `headers.{name}`: expected a string, a number or a list of them"
                ))
            };
            let values: Vec<Box<RawValue>> = if value.get().starts_with('[') {
                serde_json::from_str(value.get()).map_err(|_| bad())?
            } else {
                vec![value.clone()]
            };
            for v in &values {
                match scalar(v) {
                    Ok(Some(text)) => pairs.push((name.clone(), text)),
                    _ => return Err(bad()),
                }
            }
        }
        e.headers("headers", &pairs);
        if let Some(raw) = &self.body {
            match serde_json::from_str::<Option<String>>(raw.get()) {
                Ok(None) => {}
                Ok(Some(text)) => e.body("body", read_response(&text)),
                Err(_) => e.body("body", read_response(raw.get())),
            }
        }
        let given = self
            .received_at
            .and_then(|t| match parse_instant(&t, "receivedAt") {
                Ok(ms) => Some(ms),
                // Not RFC 3339, or outside 1970..=9999 (the one clock's range).
                Err(err) => {
                    warnings.push(format!("{err}; it counts as received now"));
                    None
                }
            });
        let received_at = e.received_at(given, now);
        Ok((e, received_at))
    }
}

/// `GET /v1/cooldowns/{scope}`: `go`, `wait` (with `until`) or
/// `needs_operator`, 200; `unreadable` (never a permission) with 503.
pub async fn check(
    State(app): State<Arc<App>>,
    PathParam(scope): PathParam<Scope>,
) -> Result<Response, ApiError> {
    let s = scope.clone();
    let out = app
        .blocking(None, move |app, store| {
            let now = now_ms()?;
            let st =
                cooldowns(app, store, &app.settings.cooldown_policy).and_then(|c| Ok(c.load(&s)?));
            Ok((st, now))
        })
        .await?;
    match out {
        (Ok(st), now) => Ok(answer(answer::check_json(&scope, st.as_ref(), now).0).into_response()),
        (Err(e), now) => Ok(unreadable(&scope, &e, now)),
    }
}

/// The cooldowns of the served namespace.
fn cooldowns<'a>(
    app: &App,
    store: &'a dyn Store,
    policy: &Policy,
) -> Result<Cooldowns<'a>, ApiError> {
    let ns = app.cache.namespace(store)?;
    Ok(Cooldowns::new(store, ns.id, *policy))
}

/// 503 with the `unreadable` verdict: the state could not be read, so no call
/// is permitted. The reason is logged, not sent.
fn unreadable(scope: &Scope, e: &ApiError, now: EpochMs) -> Response {
    log(&format!("cooldown {scope}: {}", e.message()));
    let why = "the cooldown state cannot be read (the server's log says why)";
    (
        StatusCode::SERVICE_UNAVAILABLE,
        answer(answer::unreadable_json(scope, why, now)),
    )
        .into_response()
}

/// `doc` with the `warnings` about what of the request could not be used.
fn warned(mut doc: Value, warnings: Vec<String>) -> Value {
    doc["warnings"] = json!(warnings);
    doc
}

/// `POST /v1/cooldowns/{scope}/record`: the state after the refusal, and the
/// warnings about what could not be used.
pub async fn record(
    State(app): State<Arc<App>>,
    PathParam(scope): PathParam<Scope>,
    JsonBody(body): JsonBody<ResponseParts>,
) -> Result<Json<Value>, ApiError> {
    if body.holder.is_some() || body.outcome.is_some() {
        return Err(ApiError::BadRequest(
            "holder and outcome go with /settle; /record takes the refusal's status, headers, body and receivedAt".into(),
        ));
    }
    if let Some(s) = body.status.filter(|s| *s < 400) {
        return Err(ApiError::BadRequest(format!(
            "status {s} is not a refusal (expected 4xx or 5xx, e.g. 429, 401, 403)"
        )));
    }
    let lane = lane(&scope);
    let doc = app
        .blocking(Some(lane), move |app, store| {
            let now = now_ms()?;
            let mut warnings = Vec::new();
            let policy = body.policy(&app.settings.cooldown_policy, &mut warnings);
            let (evidence, received_at) = body.evidence(now, &mut warnings)?;
            let (refusal, more) = evidence.refusal(received_at);
            warnings.extend(more.iter().map(ToString::to_string));
            let st = cooldowns(app, store, &policy)?.record(&scope, &refusal, now)?;
            Ok(warned(answer::record_json(&st, now), warnings))
        })
        .await?;
    Ok(answer(doc))
}

/// `POST /v1/cooldowns/{scope}/probe`: `won` (this worker holds the single
/// probe), `no_cooldown`, `wait` (with `until`) or `needs_operator`, all 200.
pub async fn probe(
    State(app): State<Arc<App>>,
    PathParam(scope): PathParam<Scope>,
    JsonBody(body): JsonBody<ProbeBody>,
) -> Result<Response, ApiError> {
    holder(&body.holder)?;
    let lease_s = body.lease_seconds.unwrap_or(60);
    if !(1..=MAX_LEASE_MS / SECOND_MS).contains(&lease_s) {
        return Err(ApiError::BadRequest(format!(
            "leaseSeconds must be between 1 and {} ({}), got {lease_s}",
            MAX_LEASE_MS / SECOND_MS,
            human_duration(MAX_LEASE_MS)
        )));
    }
    let s = scope.clone();
    let out = app
        .blocking(Some(lane(&scope)), move |app, store| {
            let now = now_ms()?;
            let policy = &app.settings.cooldown_policy;
            let result = cooldowns(app, store, policy)
                .and_then(|c| Ok(c.probe(&s, &body.holder, lease_s * SECOND_MS, now)?));
            Ok((
                result.map(|r| answer::probe_json(&s, &body.holder, &r, now).0),
                now,
            ))
        })
        .await?;
    match out {
        (Ok(doc), _) => Ok(answer(doc).into_response()),
        (
            Err(
                e @ ApiError::Unavailable {
                    retry_after_seconds: Some(_),
                    ..
                },
            ),
            _,
        ) => Err(e),
        (Err(e), now) => Ok(unreadable(&scope, &e, now)),
    }
}

/// `POST /v1/cooldowns/{scope}/settle`: only the holder ends its probe —
/// `ok` clears, `quota` records the new deadline from what the response
/// said, `auth` escalates. Another worker's settle is a 409.
pub async fn settle(
    State(app): State<Arc<App>>,
    PathParam(scope): PathParam<Scope>,
    JsonBody(body): JsonBody<ResponseParts>,
) -> Result<Json<Value>, ApiError> {
    let (Some(who), Some(outcome)) = (body.holder.clone(), body.outcome) else {
        return Err(ApiError::BadRequest(
            "settle needs `holder` (the worker that holds the probe) and `outcome` (ok, quota or auth)".into(),
        ));
    };
    holder(&who)?;
    if body.status.is_some() {
        return Err(ApiError::BadRequest(
            "status goes with /record; /settle says what the probe found in `outcome`".into(),
        ));
    }
    if !matches!(outcome, Outcome::Quota) && body.has_hints() {
        return Err(ApiError::BadRequest(
            "retryAfter, resetsInSeconds and resetsAt go with \"outcome\": \"quota\"".into(),
        ));
    }
    let doc = app
        .blocking(Some(lane(&scope)), move |app, store| {
            let now = now_ms()?;
            let mut warnings = Vec::new();
            let policy = body.policy(&app.settings.cooldown_policy, &mut warnings);
            // What the response said is read only for a quota refusal.
            let settlement = match outcome {
                Outcome::Ok => Settlement::Ok,
                Outcome::Auth => Settlement::Auth,
                Outcome::Quota => {
                    let (evidence, received_at) = body.evidence(now, &mut warnings)?;
                    let (settlement, more) = evidence.settlement(received_at);
                    warnings.extend(more.iter().map(ToString::to_string));
                    settlement
                }
            };
            let r = cooldowns(app, store, &policy)?.settle(&scope, &who, &settlement, now)?;
            Ok(warned(answer::settle_json(&scope, &r, now), warnings))
        })
        .await?;
    Ok(answer(doc))
}

/// `DELETE /v1/cooldowns/{scope}`: an operator clears the scope (readable or not).
pub async fn clear(
    State(app): State<Arc<App>>,
    PathParam(scope): PathParam<Scope>,
) -> Result<Json<Value>, ApiError> {
    let doc = app
        .blocking(Some(lane(&scope)), move |app, store| {
            let existed = cooldowns(app, store, &app.settings.cooldown_policy)?.clear(&scope)?;
            Ok(answer::clear_json(&scope, existed))
        })
        .await?;
    Ok(answer(doc))
}

/// `GET /v1/cooldowns`: every cooldown of the namespace, as `cooldown list --format json`.
pub async fn list(State(app): State<Arc<App>>) -> Result<Json<Value>, ApiError> {
    let doc = app
        .blocking(None, |app, store| {
            let now = now_ms()?;
            let rows = cooldowns(app, store, &app.settings.cooldown_policy)?.list()?;
            Ok(answer::list_json(&app.settings.namespace, &rows, now))
        })
        .await?;
    Ok(answer(doc))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::rfc3339;

    #[test]
    fn headers_body_and_receipt_make_one_refusal() {
        let parts: ResponseParts = super::super::body::parse(
            br#"{"status": 429, "headers": {"retry-after": 20, "x-ratelimit-reset-tokens": ["6m0s"], "x-ratelimit-reset": "99"},
                 "body": {"error": {"type": "usage_limit_reached"}},
                 "receivedAt": "2026-12-02T10:00:00Z"}"#,
        )
        .unwrap();
        let now = 1_796_205_660_000;
        let mut warnings = vec![];
        let (e, at) = parts.evidence(now, &mut warnings).unwrap();
        assert_eq!(rfc3339(at), "2026-12-02T10:00:00Z");
        let (r, w) = e.refusal(at);
        let crate::cooldown::Refusal::Quota {
            hints,
            label,
            status,
            ..
        } = r
        else {
            panic!("{r:?}")
        };
        assert_eq!(status, Some(429));
        assert_eq!(label.as_deref(), Some("usage_limit_reached"));
        assert_eq!(hints.len(), 2);
        assert_eq!(w.len(), 1, "{w:?}");
        let bad: ResponseParts =
            super::super::body::parse(br#"{"headers": {"retry-after": {}}}"#).unwrap();
        assert!(bad.evidence(now, &mut warnings).is_err());
    }

    #[test]
    fn a_received_at_out_of_range_counts_as_now_with_a_warning() {
        let parts: ResponseParts =
            super::super::body::parse(br#"{"status": 429, "receivedAt": "1969-12-31T23:59:59Z"}"#)
                .unwrap();
        let now = 1_796_205_660_000;
        let mut warnings = vec![];
        let (_, at) = parts.evidence(now, &mut warnings).unwrap();
        assert_eq!(at, now);
        assert_eq!(
            warnings,
            ["receivedAt '1969-12-31T23:59:59Z' is out of range: instants from 1970-01-01 to 9999-12-30T23:59:59.999Z are accepted; it counts as received now"]
        );
    }
}
