//! `POST /v1/embeddings` and `POST /v1/rerank`.

use axum::extract::State;
use axum::http::HeaderMap;
use axum::{Extension, Json};
use serde_json::{Map, Value};

use super::{RawBody, client_header, lookup, parse_body, send_failover};
use crate::config::{ModelBackend, ModelKind};
use crate::error::ApiError;
use crate::metrics::Trace;
use crate::relay::failover::{self, Answer};
use crate::relay::{Payload, parse_json_object};
use crate::state::AppState;

/// Embeddings: `input` is a string or an array of strings; `encoding_format` is float or
/// base64; everything else passes through.
pub(super) async fn embeddings(
    State(state): State<AppState>,
    Extension(trace): Extension<Trace>,
    headers: HeaderMap,
    body: RawBody,
) -> Result<Json<Value>, ApiError> {
    let request: Map<String, Value> = parse_body(body)?;
    let input_ok = match request.get("input") {
        Some(Value::String(_)) => true,
        Some(Value::Array(items)) => !items.is_empty() && items.iter().all(Value::is_string),
        _ => false,
    };
    if !input_ok {
        return Err(ApiError::invalid_request(
            "input must be a string or a non-empty array of strings",
        ));
    }
    match request.get("encoding_format") {
        None | Some(Value::Null) => {}
        Some(Value::String(f)) if f == "float" || f == "base64" => {}
        Some(_) => {
            return Err(ApiError::invalid_request(
                "encoding_format must be float or base64",
            ));
        }
    }
    forward(
        &state,
        &trace,
        &headers,
        request,
        ModelKind::Embedding,
        "/embeddings",
        "data",
    )
    .await
}

/// Rerank: a non-empty `query`, a non-empty `documents` array, optional `top_n` >= 1.
pub(super) async fn rerank(
    State(state): State<AppState>,
    Extension(trace): Extension<Trace>,
    headers: HeaderMap,
    body: RawBody,
) -> Result<Json<Value>, ApiError> {
    let request: Map<String, Value> = parse_body(body)?;
    if request
        .get("query")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        return Err(ApiError::invalid_request(
            "query must be a non-empty string",
        ));
    }
    if request
        .get("documents")
        .and_then(Value::as_array)
        .is_none_or(|d| d.is_empty())
    {
        return Err(ApiError::invalid_request(
            "documents must be a non-empty array",
        ));
    }
    match request.get("top_n") {
        None | Some(Value::Null) => {}
        Some(n) if n.as_u64().is_some_and(|n| n >= 1) => {}
        Some(_) => {
            return Err(ApiError::invalid_request(
                "top_n must be a positive integer",
            ));
        }
    }
    forward(
        &state,
        &trace,
        &headers,
        request,
        ModelKind::Classifier,
        "/rerank",
        "results",
    )
    .await
}

/// Shared routing: lookup, kind check, rewrite, send, restore the caller's name.
async fn forward(
    state: &AppState,
    trace: &Trace,
    headers: &HeaderMap,
    mut request: Map<String, Value>,
    kind: ModelKind,
    path: &str,
    payload: &str,
) -> Result<Json<Value>, ApiError> {
    let caller_model = request
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let runtime = state.runtime();
    let model = lookup(&runtime, &caller_model, kind)?;
    let upstream_model = match &model.backend {
        ModelBackend::Remote { upstream, .. } => upstream.as_str(),
        ModelBackend::Local(_) => model.name.as_str(),
    };
    request.insert("model".into(), Value::String(upstream_model.to_owned()));
    let attempt = failover::Attempt {
        model: &model.name,
        path,
        body: Payload::Json(&request),
        streaming: false,
        capability_route: true,
        client: client_header(headers),
    };
    let answered = send_failover(state, &runtime, model, trace, attempt).await?;
    let upstream = answered.upstream;
    let Answer::Buffered(bytes) = answered.answer else {
        return Err(ApiError::upstream_protocol(format!(
            "endpoint {} answered a stream to a buffered request",
            upstream.id
        )));
    };
    let mut reply = parse_json_object(upstream, &bytes)?;
    if !reply.get(payload).is_some_and(Value::is_array) {
        return Err(ApiError::upstream_protocol(format!(
            "endpoint {} answered without a {payload} array",
            upstream.id
        )));
    }
    if let Some(usage) = reply.get("usage") {
        state.metrics().usage(&model.name, usage);
    }
    reply.insert("model".into(), Value::String(caller_model));
    Ok(Json(Value::Object(reply)))
}
