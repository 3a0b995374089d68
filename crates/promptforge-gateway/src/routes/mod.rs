//! The HTTP surface: the router, the direct dispatch of the chat route, the one layer
//! function both share, the handlers, and the one map from domain errors to envelopes.
//!
//! Everything a handler needs comes from [`Ctx`]: the live plan, the transport, the
//! process's metrics and cooldown table, the shutdown signal, the bearer key, and the
//! profile switch behind the narrow [`Control`] interface (the app implements it; routes
//! know nothing of how a profile is built).

mod admin;
mod catalog;
mod chat;
mod embed_rerank;
pub(crate) mod error;
pub(crate) mod layer;
#[cfg(test)]
mod tests;
mod web_search;

use std::fmt;
use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{FromRequest, MatchedPath, Request, State};
use axum::http::{HeaderMap, Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use futures::future::BoxFuture;
use serde::de::DeserializeOwned;
use serde_json::json;
use tower::ServiceExt;

use crate::config::{ConfigError, ModelKind};
use crate::metrics::{Metrics, RequestObserver, Trace};
use crate::otel::Tracing;
use crate::plan::{Current, Model, Plan};
use crate::relay::Transport;
use crate::relay::failover::{self, Answered, Attempt, Cooldowns, Relay, RelayError};
use crate::secret::Secret;
use crate::shutdown::Shutdown;
use error::{ApiError, ErrorCode};
use layer::Access;

/// Largest request body accepted (images travel inline as base64).
pub(crate) const MAX_BODY_BYTES: usize = crate::config::MAX_REQUEST_BODY_BYTES;

/// The route the direct dispatch serves.
pub(crate) const CHAT_ROUTE: &str = "/v1/chat/completions";
/// The one route open without the bearer.
const HEALTH_ROUTE: &str = "/health";
/// Every route pattern (the `route` metric label); `unmatched` for none.
const ROUTES: [&str; 9] = [
    CHAT_ROUTE,
    "/v1/models",
    "/v1/embeddings",
    "/v1/rerank",
    "/v1/tools/web_search",
    "/admin/status",
    "/admin/switch-profile",
    "/metrics",
    HEALTH_ROUTE,
];
/// The route label of a request no route matched.
const UNMATCHED: &str = "unmatched";

/// The profile switch, as routes see it (the app implements it).
pub(crate) trait Control: Send + Sync + fmt::Debug {
    /// Builds, starts and swaps in profile `name`; on failure the live profile is exactly
    /// as it was.
    fn switch_profile<'a>(&'a self, name: &'a str)
    -> BoxFuture<'a, Result<Arc<Plan>, ConfigError>>;
}

/// What every request is served with (shared by all I/O threads).
#[derive(Debug)]
pub(crate) struct Ctx {
    /// The live plan.
    pub plans: Arc<Current>,
    /// Sends attempts upstream.
    pub transport: Arc<dyn Transport>,
    /// The process's failover cooldowns (kept across profile switches).
    pub cooldowns: Cooldowns,
    /// The process's metrics (kept across profile switches).
    pub metrics: Metrics,
    /// Fires when shutdown's drain ends.
    pub shutdown: Shutdown,
    /// The gateway's bearer key.
    pub api_key: Secret,
    /// The profile switch.
    pub control: Arc<dyn Control>,
    /// Request spans over OTLP (`None`: export is off, and nothing is recorded).
    pub tracing: Option<Arc<Tracing>>,
    /// The dominion store, with `[dominion_store]` (its state for `/admin/status` and
    /// `/metrics`).
    pub shared: Option<Arc<crate::admission::shared::Shared>>,
}

impl Ctx {
    /// Sends `attempt` to `model`'s routes with failover, recording the model, the
    /// endpoints tried and the waits in the request's `trace`.
    async fn send<'a>(
        &self,
        model: &'a Model,
        trace: &Trace,
        attempt: Attempt<'_>,
    ) -> Result<Answered<'a>, RelayError> {
        trace.set_model(&model.name);
        if let Some(spans) = trace.spans() {
            spans.routed(&model.name, &model.upstream_model, attempt.path);
        }
        let observer = RequestObserver {
            metrics: &self.metrics,
            trace,
        };
        let relay = Relay {
            transport: &*self.transport,
            cooldowns: &self.cooldowns,
            observer: &observer,
        };
        let answered = failover::send(&model.routes, attempt, relay).await;
        if let Some(spans) = trace.spans()
            && let Some(running) = &model.routes.last.child
        {
            let child = &running.child;
            spans.local_child(&model.name, child.spec().port, child.server_pid());
        }
        answered
    }
}

/// The gateway's HTTP application, what each connection serves (cheap to clone).
#[derive(Debug, Clone)]
pub(crate) struct Service {
    router: Router,
    ctx: Arc<Ctx>,
}

impl Service {
    /// The application over `ctx`.
    pub(crate) fn new(ctx: Arc<Ctx>) -> Self {
        Self {
            router: router(ctx.clone()),
            ctx,
        }
    }

    /// Serves one request: `POST /v1/chat/completions` (that method, that exact raw path:
    /// the router matches the raw path exactly, so the same comparison picks the same
    /// requests) straight to its handler, everything else through the router. Both run
    /// the same [`layer::around`].
    pub(crate) async fn handle(&self, request: Request) -> Response {
        if request.method() == Method::POST && request.uri().path() == CHAT_ROUTE {
            return self.chat(request).await;
        }
        match self.router.clone().oneshot(request).await {
            Ok(response) => response,
            Err(infallible) => match infallible {},
        }
    }

    /// The chat route, dispatched directly.
    async fn chat(&self, request: Request) -> Response {
        let ctx = &*self.ctx;
        layer::around(
            ctx,
            CHAT_ROUTE,
            Access::Bearer,
            request,
            |mut request, trace| async move {
                // The body extractor reads only the body (and the limit's extension), so the
                // headers can move out first.
                let headers = std::mem::take(request.headers_mut());
                let body: RawBody = Bytes::from_request(request, &()).await;
                chat::handle(ctx, &trace, &headers, body).await
            },
        )
        .await
    }

    /// The router alone (the tests compare it with the direct dispatch).
    #[cfg(test)]
    pub(crate) fn router(&self) -> Router {
        self.router.clone()
    }

    /// The context.
    #[cfg(test)]
    pub(crate) fn ctx(&self) -> &Arc<Ctx> {
        &self.ctx
    }
}

/// Builds the router. [`layer::around`] runs around every route, with the bearer check
/// for all but `GET /health`.
fn router(ctx: Arc<Ctx>) -> Router {
    Router::new()
        .route(CHAT_ROUTE, post(chat::chat_completions))
        .route("/v1/models", get(catalog::list_models))
        .route("/v1/embeddings", post(embed_rerank::embeddings))
        .route("/v1/rerank", post(embed_rerank::rerank))
        .route("/v1/tools/web_search", post(web_search::web_search))
        .route("/admin/status", get(admin::status))
        .route("/admin/switch-profile", post(admin::switch_profile))
        .route("/metrics", get(admin::scrape))
        .route(HEALTH_ROUTE, get(health).fallback(method_not_allowed))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(middleware::from_fn_with_state(ctx.clone(), routed))
        .with_state(ctx)
}

/// The router's one middleware: [`layer::around`] under the matched route pattern.
async fn routed(State(ctx): State<Arc<Ctx>>, request: Request, next: Next) -> Response {
    let matched = request
        .extensions()
        .get::<MatchedPath>()
        .map(MatchedPath::as_str);
    let route = matched
        .and_then(|m| ROUTES.iter().find(|r| **r == m))
        .copied()
        .unwrap_or(UNMATCHED);
    let access = if route == HEALTH_ROUTE {
        Access::Open
    } else {
        Access::Bearer
    };
    layer::around(&ctx, route, access, request, |mut request, trace| {
        request.extensions_mut().insert(trace);
        next.run(request)
    })
    .await
}

async fn health() -> impl IntoResponse {
    axum::Json(json!({"status": "serving"}))
}

async fn not_found() -> ApiError {
    ApiError::new(ErrorCode::NotFound, "no such route")
}

async fn method_not_allowed() -> ApiError {
    ApiError::new(
        ErrorCode::MethodNotAllowed,
        "method not allowed on this route",
    )
}

/// A request body as an extractor result; axum's own rejections (a body over the limit,
/// a broken transfer) become enveloped errors too.
type RawBody = Result<Bytes, BytesRejection>;

/// Parses a JSON request body, answering every failure with an envelope.
fn parse_body<T: DeserializeOwned>(body: RawBody) -> Result<T, ApiError> {
    parse_json(&body_bytes(body)?)
}

/// The request body's bytes, or the envelope for axum's rejection.
fn body_bytes(body: RawBody) -> Result<Bytes, ApiError> {
    body.map_err(|rejection| {
        let code = if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ErrorCode::PayloadTooLarge
        } else {
            ErrorCode::InvalidRequest
        };
        ApiError::new(code, rejection.body_text())
    })
}

/// Parses a JSON request body's bytes (400 `invalid_request` naming the problem).
fn parse_json<T: DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    serde_json::from_slice(body)
        .map_err(|err| ApiError::invalid_request(format!("invalid JSON body: {err}")))
}

/// Exact model lookup plus the kind check of the route.
fn lookup<'a>(plan: &'a Plan, name: &str, want: ModelKind) -> Result<&'a Model, ApiError> {
    if name.is_empty() {
        return Err(ApiError::invalid_request(
            "model must be a non-empty string",
        ));
    }
    let model = plan
        .model(name)
        .ok_or_else(|| ApiError::model_not_found(name))?;
    if model.kind != want {
        let route = match want {
            ModelKind::Chat => CHAT_ROUTE,
            ModelKind::Embedding => "/v1/embeddings",
            ModelKind::Classifier => "/v1/rerank",
        };
        return Err(ApiError::new(
            ErrorCode::KindMismatch,
            format!(
                "model {name} is a {} model; {route} serves {} models",
                model.kind.as_str(),
                want.as_str()
            ),
        ));
    }
    Ok(model)
}

/// The header naming the caller for fair scheduling.
const CLIENT_HEADER: &str = "x-promptforge-client";

/// The caller's `X-PromptForge-Client` header, if it is text.
fn client_header(headers: &HeaderMap) -> Option<&str> {
    headers.get(CLIENT_HEADER).and_then(|v| v.to_str().ok())
}

/// An upstream body that must be a JSON object (502 `upstream_protocol` otherwise).
fn json_object(
    endpoint: &str,
    bytes: &[u8],
) -> Result<serde_json::Map<String, serde_json::Value>, ApiError> {
    match serde_json::from_slice::<serde_json::Value>(bytes) {
        Ok(serde_json::Value::Object(map)) => Ok(map),
        Ok(_) => Err(ApiError::upstream_protocol(format!(
            "endpoint {endpoint} answered JSON that is not an object"
        ))),
        Err(err) => Err(ApiError::upstream_protocol(format!(
            "endpoint {endpoint} answered a body that is not JSON: {err}"
        ))),
    }
}
