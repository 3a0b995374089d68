//! `POST /v1/embeddings` and `POST /v1/rerank`.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::{Extension, Json};
use serde_json::{Map, Value};

use super::error::ApiError;
use super::{Ctx, RawBody, client_header, json_object, lookup, parse_body};
use crate::config::ModelKind;
use crate::metrics::Trace;
use crate::plan::ApiPath;
use crate::relay::failover::{Attempt, Reply};

/// Embeddings: `input` is a string or an array of strings; `encoding_format` is float or
/// base64; everything else passes through.
pub(super) async fn embeddings(
    State(ctx): State<Arc<Ctx>>,
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
        &ctx,
        &trace,
        &headers,
        request,
        ModelKind::Embedding,
        ApiPath::Embeddings,
        "data",
    )
    .await
}

/// Rerank: a non-empty `query`, a non-empty `documents` array, optional `top_n` >= 1.
pub(super) async fn rerank(
    State(ctx): State<Arc<Ctx>>,
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
        &ctx,
        &trace,
        &headers,
        request,
        ModelKind::Classifier,
        ApiPath::Rerank,
        "results",
    )
    .await
}

/// Shared routing: lookup, kind check, rewrite, send, restore the caller's name.
async fn forward(
    ctx: &Ctx,
    trace: &Trace,
    headers: &HeaderMap,
    mut request: Map<String, Value>,
    kind: ModelKind,
    path: ApiPath,
    payload: &str,
) -> Result<Json<Value>, ApiError> {
    let caller_model = request
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let plan = ctx.plans.load();
    let model = lookup(&plan, &caller_model, kind)?;
    request.insert("model".into(), Value::String(model.upstream_model.clone()));
    let body = Bytes::from(Value::Object(request).to_string());
    let attempt = Attempt {
        model: &model.name,
        path,
        body: &body,
        streaming: false,
        client: client_header(headers),
    };
    let answered = ctx.send(model, trace, attempt).await?;
    let endpoint = &answered.endpoint.id;
    let Reply::Whole(bytes) = answered.reply else {
        return Err(ApiError::upstream_protocol(format!(
            "endpoint {endpoint} answered a stream to a buffered request"
        )));
    };
    let mut reply = json_object(endpoint, &bytes)?;
    if !reply.get(payload).is_some_and(Value::is_array) {
        return Err(ApiError::upstream_protocol(format!(
            "endpoint {endpoint} answered without a {payload} array"
        )));
    }
    if let Some(usage) = reply.get("usage") {
        ctx.metrics.usage(&model.name, usage);
    }
    reply.insert("model".into(), Value::String(caller_model));
    Ok(Json(Value::Object(reply)))
}
