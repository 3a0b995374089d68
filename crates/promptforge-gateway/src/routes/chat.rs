//! `POST /v1/chat/completions`, buffered and streaming.

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::chat_fast::{FastReply, FastRequest};
use super::{RawBody, body_bytes, client_header, lookup, parse_json, send_failover};
use crate::config::{ModelBackend, ModelKind, ToolDialect};
use crate::dialect::gemma;
use crate::error::ApiError;
use crate::metrics::{Trace, UsageTap};
use crate::relay::failover::{self, Answer};
use crate::relay::sse;
use crate::relay::{Payload, parse_json_object};
use crate::state::AppState;

/// Roles a message may carry.
pub(super) const ROLES: [&str; 6] = [
    "system",
    "user",
    "assistant",
    "tool",
    "function",
    "developer",
];

/// The fields the gateway reads; everything else rides in `rest`, verbatim.
#[derive(Debug, Deserialize)]
struct ChatRequest {
    #[serde(default)]
    model: Value,
    #[serde(default)]
    messages: Value,
    #[serde(default)]
    stream: Option<bool>,
    #[serde(flatten)]
    rest: Map<String, Value>,
}

/// Checks the request shape the guide names; returns the model name.
fn validate(request: &ChatRequest) -> Result<&str, ApiError> {
    let model = request
        .model
        .as_str()
        .filter(|m| !m.is_empty())
        .ok_or_else(|| ApiError::invalid_request("model must be a non-empty string"))?;
    let messages = request
        .messages
        .as_array()
        .filter(|m| !m.is_empty())
        .ok_or_else(|| ApiError::invalid_request("messages must be a non-empty array"))?;
    for (i, message) in messages.iter().enumerate() {
        let Some(obj) = message.as_object() else {
            return Err(ApiError::invalid_request(format!(
                "messages[{i}] must be an object"
            )));
        };
        match obj.get("role").and_then(Value::as_str) {
            Some(role) if ROLES.contains(&role) => {}
            Some(role) => {
                return Err(ApiError::invalid_request(format!(
                    "messages[{i}].role `{role}` is not one of {}",
                    ROLES.join(", ")
                )));
            }
            None => {
                return Err(ApiError::invalid_request(format!(
                    "messages[{i}].role is missing"
                )));
            }
        }
        let present = |key: &str| obj.get(key).is_some_and(|v| !v.is_null());
        if !(present("content") || present("tool_calls") || present("function_call")) {
            return Err(ApiError::invalid_request(format!(
                "messages[{i}] needs content or a tool/function call"
            )));
        }
    }
    Ok(model)
}

/// The handler (through the router).
pub(super) async fn chat_completions(
    State(state): State<AppState>,
    Extension(trace): Extension<Trace>,
    headers: HeaderMap,
    body: RawBody,
) -> Result<Response, ApiError> {
    chat(&state, &trace, &headers, body).await
}

/// What the handler does, for the router and for the direct dispatch alike (see
/// [`super::App`]).
pub(super) async fn chat(
    state: &AppState,
    trace: &Trace,
    headers: &HeaderMap,
    body: RawBody,
) -> Result<Response, ApiError> {
    let bytes = body_bytes(body)?;
    // The plain case skips the JSON tree both ways (see `chat_fast`); anything else, and
    // tool-call emulation, takes the general path below.
    let fast = FastRequest::parse(&bytes);
    let mut general = None;
    let (caller_model, streaming) = match &fast {
        Some(fast) => (fast.model.clone(), fast.streaming),
        None => {
            let request: ChatRequest = parse_json(&bytes)?;
            let model = validate(&request)?.to_owned();
            let streaming = request.stream == Some(true);
            general = Some(request);
            (model, streaming)
        }
    };
    let runtime = state.runtime();
    let model = lookup(&runtime, &caller_model, ModelKind::Chat)?;
    let upstream_model = match &model.backend {
        ModelBackend::Remote { upstream, .. } => upstream.as_str(),
        ModelBackend::Local(_) => model.name.as_str(),
    };
    let emulate = model.tool_dialect == ToolDialect::Gemma3ToolCode && !streaming;

    let mut raw_out = None;
    let mut out = Map::new();
    let mut emulated_tools = false;
    match fast.as_ref().filter(|_| !emulate) {
        Some(fast) => {
            raw_out = Some(Bytes::from(
                fast.outgoing(upstream_model, model.default_max_tokens),
            ));
        }
        None => {
            let request = match general {
                Some(request) => request,
                None => parse_json(&bytes)?,
            };
            out = request.rest;
            out.insert("model".into(), Value::String(upstream_model.to_owned()));
            out.insert("messages".into(), request.messages);
            if let Some(stream) = request.stream {
                out.insert("stream".into(), Value::Bool(stream));
            }
            if let Some(default) = model.default_max_tokens
                && !out.contains_key("max_tokens")
                && !out.contains_key("max_completion_tokens")
            {
                out.insert("max_tokens".into(), json!(default));
            }
            if emulate {
                emulated_tools = gemma::outbound(&mut out)?;
            }
        }
    }

    let attempt = failover::Attempt {
        model: &model.name,
        path: "/chat/completions",
        body: match &raw_out {
            Some(raw) => Payload::Raw(raw),
            None => Payload::Json(&out),
        },
        streaming,
        capability_route: false,
        client: client_header(headers),
    };
    // The slot is held until the response is complete: for a stream, until it ends or the
    // client goes away (the permit lives inside the relay).
    let answered = send_failover(state, &runtime, model, trace, attempt).await?;
    let upstream = answered.upstream;

    let bytes = match answered.answer {
        Answer::Stream(body, permit) => {
            let settings = sse::StreamSettings {
                endpoint: upstream.id.clone(),
                caller_model: caller_model.clone(),
                idle_timeout: upstream.stream_idle_timeout,
                max_event_bytes: upstream.max_stream_event_bytes,
                usage: Some(UsageTap::new(state.metrics().clone(), &model.name)),
            };
            let stream = sse::relay_body(body, settings, state.shutdown(), permit);
            let mut reply = Body::from_stream(stream).into_response();
            let headers = reply.headers_mut();
            headers.insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/event-stream"),
            );
            headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
            return Ok(reply);
        }
        Answer::Buffered(bytes) => bytes,
    };
    if !emulated_tools && let Some(fast) = FastReply::parse(&bytes) {
        if let Some(usage) = &fast.usage {
            state.metrics().usage(&model.name, usage);
        }
        let body = fast.with_model(&caller_model);
        return Ok((
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            )],
            body,
        )
            .into_response());
    }
    let mut reply = parse_json_object(upstream, &bytes)?;
    if !reply.get("choices").is_some_and(Value::is_array) {
        return Err(ApiError::upstream_protocol(format!(
            "endpoint {} answered a chat completion without a choices array",
            upstream.id
        )));
    }
    if let Some(usage) = reply.get("usage") {
        state.metrics().usage(&model.name, usage);
    }
    reply.insert("model".into(), Value::String(caller_model.clone()));
    if emulated_tools {
        gemma::inbound(&mut reply, &caller_model);
    }
    Ok(Json(Value::Object(reply)).into_response())
}
