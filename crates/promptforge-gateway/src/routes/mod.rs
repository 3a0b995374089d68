//! The HTTP surface: router, bearer auth and the handlers.

mod admin;
mod catalog;
mod chat;
mod chat_fast;
mod direct;
mod embed_rerank;
#[cfg(test)]
mod tests;
mod web_search;

use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::de::DeserializeOwned;
use serde_json::json;

use crate::admission::AdmissionError;
use crate::config::{ModelConfig, ModelKind};
use crate::error::{ApiError, ErrorCode};
use crate::metrics::Trace;
use crate::relay::failover;
use crate::secret::SecretMatch;
use crate::state::{AppState, RouteError, Runtime};

pub(crate) use direct::App;

/// Largest request body accepted (images travel inline as base64).
pub(crate) const MAX_BODY_BYTES: usize = 32 * 1024 * 1024;

/// Builds the router. Auth is layered over everything; only `GET /health` is exempt, by
/// being registered outside the auth layer.
pub(crate) fn app(state: AppState) -> Router {
    Router::new()
        .route("/v1/chat/completions", post(chat::chat_completions))
        .route("/v1/models", get(catalog::list_models))
        .route("/v1/embeddings", post(embed_rerank::embeddings))
        .route("/v1/rerank", post(embed_rerank::rerank))
        .route("/v1/tools/web_search", post(web_search::web_search))
        .route("/admin/status", get(admin::status))
        .route("/admin/switch-profile", post(admin::switch_profile))
        .route("/metrics", get(crate::metrics::scrape))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(middleware::from_fn_with_state(
            state.clone(),
            require_bearer,
        ))
        .route("/health", get(health).fallback(method_not_allowed))
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(middleware::from_fn(refuse_declared_oversize))
        .layer(middleware::from_fn_with_state(
            state.clone(),
            end_on_shutdown,
        ))
        .layer(middleware::from_fn_with_state(
            state.clone(),
            crate::metrics::observe,
        ))
        .with_state(state)
}

/// A body whose declared `Content-Length` is over the cap is refused at once (413), before
/// a byte of it is read; an undeclared (chunked) body is cut at the cap while reading.
async fn refuse_declared_oversize(request: Request, next: Next) -> Response {
    match declared_oversize(request.headers()) {
        Some(refusal) => refusal.into_response(),
        None => next.run(request).await,
    }
}

/// The 413 for a declared `Content-Length` over [`MAX_BODY_BYTES`], if `headers` has one.
fn declared_oversize(headers: &HeaderMap) -> Option<ApiError> {
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    match declared {
        Some(length) if length > MAX_BODY_BYTES as u64 => Some(ApiError::new(
            ErrorCode::PayloadTooLarge,
            format!(
                "the request body declares {length} bytes; the limit is {MAX_BODY_BYTES} bytes"
            ),
        )),
        _ => None,
    }
}

/// A request still being handled when shutdown's drain ends gets 503 `shutting_down`
/// instead of a bare connection close. (A stream already under way ends with a
/// `shutting_down` error event, in the relay.)
async fn end_on_shutdown(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let mut shutdown = state.shutdown();
    tokio::select! {
        response = next.run(request) => response,
        () = shutdown.fired() => crate::shutdown::shutting_down().into_response(),
    }
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

/// Checks `Authorization: Bearer <key>` in constant time; 401 with no detail otherwise.
async fn require_bearer(State(state): State<AppState>, request: Request, next: Next) -> Response {
    if bearer_matches(&state, request.headers()) {
        next.run(request).await
    } else {
        ApiError::unauthorized().into_response()
    }
}

/// Whether `headers` carry `Authorization: Bearer <the gateway's key>` (constant time).
fn bearer_matches(state: &AppState, headers: &HeaderMap) -> bool {
    let presented = headers
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| {
            let (scheme, token) = value.split_once(' ')?;
            scheme
                .eq_ignore_ascii_case("bearer")
                .then_some(token.trim())
        });
    presented.is_some_and(|token| state.api_key().matches(token.as_bytes()))
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
fn lookup<'a>(
    runtime: &'a Runtime,
    name: &str,
    want: ModelKind,
) -> Result<&'a ModelConfig, ApiError> {
    if name.is_empty() {
        return Err(ApiError::invalid_request(
            "model must be a non-empty string",
        ));
    }
    let model = runtime
        .config
        .model(name)
        .ok_or_else(|| ApiError::model_not_found(name))?;
    if model.kind != want {
        let route = match want {
            ModelKind::Chat => "/v1/chat/completions",
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

impl From<AdmissionError> for ApiError {
    fn from(error: AdmissionError) -> Self {
        ApiError::new(error.error_code(), error.to_string())
    }
}

impl From<RouteError> for ApiError {
    fn from(error: RouteError) -> Self {
        ApiError::new(error.error_code(), error.to_string())
    }
}

/// The header naming the caller for fair scheduling.
const CLIENT_HEADER: &str = "x-promptforge-client";

/// The caller's `X-PromptForge-Client` header, if it is text.
fn client_header(headers: &HeaderMap) -> Option<&str> {
    headers.get(CLIENT_HEADER).and_then(|v| v.to_str().ok())
}

/// Sends `attempt` to `model`'s endpoints with failover (see [`crate::relay::failover`]),
/// recording the model, the endpoints tried and the waits in the request's trace.
async fn send_failover<'a>(
    state: &AppState,
    runtime: &'a Runtime,
    model: &'a ModelConfig,
    trace: &Trace,
    attempt: failover::Attempt<'_>,
) -> Result<failover::Answered<'a>, ApiError> {
    trace.set_model(&model.name);
    let routes = runtime.routes(model)?;
    let observers = failover::Observers {
        metrics: state.metrics(),
        cooldowns: state.cooldowns(),
        trace,
    };
    failover::send(&routes, attempt, observers).await
}
