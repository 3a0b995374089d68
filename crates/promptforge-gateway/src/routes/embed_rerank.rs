//! `POST /v1/embeddings` and `POST /v1/rerank`.

use axum::Json;
use axum::extract::State;
use axum::http::HeaderMap;
use serde_json::{Map, Value};

use super::{RawBody, admit, lookup, parse_body, send_routed};
use crate::config::ModelKind;
use crate::error::ApiError;
use crate::relay::{self, UpstreamCall};
use crate::state::{AppState, Route};

/// Embeddings: `input` is a string or an array of strings; `encoding_format` is float or
/// base64; everything else passes through.
pub(super) async fn embeddings(
    State(state): State<AppState>,
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
    let route = runtime.route(model)?;
    let Route {
        upstream,
        model: upstream_model,
        admission,
        ..
    } = route;
    let _permit = admit(admission, headers).await?;
    request.insert("model".into(), Value::String(upstream_model.to_owned()));
    let call = UpstreamCall {
        upstream,
        path,
        body: &request,
        streaming: false,
        capability_route: true,
    };
    let response = send_routed(&route, call).await?;
    let mut reply = relay::read_json_object(upstream, response).await?;
    if !reply.get(payload).is_some_and(Value::is_array) {
        return Err(ApiError::upstream_protocol(format!(
            "endpoint {} answered without a {payload} array",
            upstream.id
        )));
    }
    reply.insert("model".into(), Value::String(caller_model));
    Ok(Json(Value::Object(reply)))
}
