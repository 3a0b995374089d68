//! `POST /v1/chat/completions`, buffered and streaming.
//!
//! A request is read by the fast path ([`fast`]) when it is the plain case, else by the
//! general path ([`General`]); both check it against the one [`contract`].

pub(crate) mod contract;
mod fast;

use std::convert::Infallible;
use std::time::SystemTime;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use futures::StreamExt;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::error::ApiError;
use super::{Ctx, RawBody, body_bytes, client_header, json_object, lookup, parse_json};
use crate::config::{ModelKind, ToolDialect};
use crate::dialect::gemma;
use crate::metrics::{Trace, UsageTap};
use crate::plan::{ApiPath, Model, Plan};
use crate::relay::failover::{Attempt, Reply};
use crate::relay::sse::{self, StreamError};
use fast::{FastReply, FastRequest};

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

/// A request the general path read and checked against the contract.
#[derive(Debug)]
pub(super) struct General {
    /// The caller's model name.
    pub model: String,
    /// `stream: true`.
    pub streaming: bool,
    /// The function `tool_choice` names (its object form), checked to be in `tools`.
    pub named_tool: Option<String>,
    request: ChatRequest,
}

impl General {
    /// Parses `body` into a tree and checks it (400 `invalid_request` naming the problem).
    pub(super) fn parse(body: &[u8]) -> Result<Self, ApiError> {
        let request: ChatRequest = parse_json(body)?;
        let model = contract::model(request.model.as_str())?.to_owned();
        let messages = request.messages.as_array();
        contract::messages(messages.map(Vec::len))?;
        for (i, message) in messages.into_iter().flatten().enumerate() {
            let object = message.as_object();
            let present = |key: &str| {
                object
                    .and_then(|o| o.get(key))
                    .is_some_and(|v| !v.is_null())
            };
            contract::message(
                i,
                &contract::Message {
                    object: object.is_some(),
                    role: object.and_then(|o| o.get("role")).and_then(Value::as_str),
                    content: present("content"),
                    tool_calls: present("tool_calls"),
                    function_call: present("function_call"),
                },
            )?;
        }
        let named_tool = match contract::tool_choice(request.rest.get("tool_choice"))? {
            contract::ToolChoice::Named(name) => {
                contract::named_tool_offered(name, request.rest.get("tools"))?;
                Some(name.to_owned())
            }
            contract::ToolChoice::Unset | contract::ToolChoice::Mode(_) => None,
        };
        Ok(Self {
            model,
            streaming: request.stream == Some(true),
            named_tool,
            request,
        })
    }

    /// The body to send upstream: every field as it came (re-serialised), `model` set to
    /// `upstream_model`, `max_tokens` set to `default_max_tokens` when the caller set no
    /// limit.
    pub(super) fn outgoing(
        self,
        upstream_model: &str,
        default_max_tokens: Option<u64>,
    ) -> Map<String, Value> {
        let request = self.request;
        let mut out = request.rest;
        out.insert("model".into(), Value::String(upstream_model.to_owned()));
        out.insert("messages".into(), request.messages);
        if let Some(stream) = request.stream {
            out.insert("stream".into(), Value::Bool(stream));
        }
        if let Some(default) = default_max_tokens
            && !out.contains_key("max_tokens")
            && !out.contains_key("max_completion_tokens")
        {
            out.insert("max_tokens".into(), json!(default));
        }
        out
    }
}

/// Translates the object form of `tool_choice` for a local `llama-server` child, which
/// ignores it (with a warning) and is not held to one tool by `"required"` either: the
/// named function becomes the only entry of `tools` and `tool_choice` becomes
/// `"required"`, so the child can call that tool and nothing else. The contract already
/// checked that `tools` offers `name`.
fn force_named_tool(out: &mut Map<String, Value>, name: &str) {
    if let Some(Value::Array(tools)) = out.get_mut("tools") {
        tools.retain(|tool| contract::tool_name(tool) == Some(name));
    }
    out.insert("tool_choice".into(), Value::from("required"));
}

/// A buffered reply read as a tree: a JSON object with a `choices` array, its `model` set
/// to the caller's name (502 `upstream_protocol` otherwise).
pub(super) fn general_reply(
    endpoint: &str,
    body: &[u8],
    caller_model: &str,
) -> Result<Map<String, Value>, ApiError> {
    let mut reply = json_object(endpoint, body)?;
    if !reply.get("choices").is_some_and(Value::is_array) {
        return Err(ApiError::upstream_protocol(format!(
            "endpoint {endpoint} answered a chat completion without a choices array"
        )));
    }
    reply.insert("model".into(), Value::String(caller_model.to_owned()));
    Ok(reply)
}

/// The handler (through the router).
pub(super) async fn chat_completions(
    State(ctx): State<std::sync::Arc<Ctx>>,
    Extension(trace): Extension<Trace>,
    headers: HeaderMap,
    body: RawBody,
) -> Response {
    handle(&ctx, &trace, &headers, body).await
}

/// What the handler does, for the router and for the direct dispatch alike.
pub(super) async fn handle(
    ctx: &Ctx,
    trace: &Trace,
    headers: &HeaderMap,
    body: RawBody,
) -> Response {
    match chat(ctx, trace, headers, body).await {
        Ok(response) => response,
        Err(error) => error.into_response(),
    }
}

async fn chat(
    ctx: &Ctx,
    trace: &Trace,
    headers: &HeaderMap,
    body: RawBody,
) -> Result<Response, ApiError> {
    let plan = ctx.plans.load();
    let started = trace.spans().map(|_| SystemTime::now());
    let checked = check(&plan, body);
    if let (Some(spans), Some(started)) = (trace.spans(), started) {
        spans.validated(started, checked.as_ref().err().map(ApiError::code));
    }
    let Checked {
        model,
        caller_model,
        streaming,
        outgoing,
        emulated_tools,
    } = checked?;

    let attempt = Attempt {
        model: &model.name,
        path: ApiPath::ChatCompletions,
        body: &outgoing,
        streaming,
        client: client_header(headers),
    };
    // The slot is held until the response is complete: for a stream, until it ends or the
    // client goes away (the permit lives inside the relay).
    let answered = ctx.send(model, trace, attempt).await?;
    let endpoint = answered.endpoint;
    let bytes = match answered.reply {
        Reply::Stream(body, permit) => {
            let tap = UsageTap::new(ctx.metrics.clone(), &model.name, trace.spans().cloned());
            let settings = sse::StreamSettings {
                endpoint: endpoint.id.to_string(),
                caller_model,
                idle_timeout: endpoint.limits.stream_idle_timeout,
                max_event_bytes: endpoint.limits.max_stream_event_bytes,
                tap: Some(Box::new(tap)),
            };
            let events = sse::relay_body(body, settings, ctx.shutdown.clone(), permit)
                .map(|event| Ok::<_, Infallible>(event.unwrap_or_else(error_event)));
            let mut reply = Body::from_stream(events).into_response();
            let headers = reply.headers_mut();
            headers.insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/event-stream"),
            );
            headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
            return Ok(reply);
        }
        Reply::Whole(bytes) => bytes,
    };
    if let Some(spans) = trace.spans() {
        // Read again only when spans are recorded: the fast path never parses `model`.
        let facts = serde_json::from_slice::<AnswerFacts>(&bytes).unwrap_or_default();
        spans.answer(facts.model.as_deref(), facts.usage.as_ref());
    }
    if !emulated_tools && let Some(fast) = FastReply::parse(&bytes) {
        if let Some(usage) = &fast.usage {
            ctx.metrics.usage(&model.name, usage);
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
    let mut reply = general_reply(&endpoint.id, &bytes, &caller_model)?;
    if let Some(usage) = reply.get("usage") {
        ctx.metrics.usage(&model.name, usage);
    }
    if emulated_tools {
        gemma::inbound(&mut reply, &caller_model);
    }
    Ok(Json(Value::Object(reply)).into_response())
}

/// A request that passed the contract and the model lookup, with the body to send.
struct Checked<'p> {
    model: &'p Model,
    caller_model: String,
    streaming: bool,
    outgoing: Bytes,
    /// Tool calls are emulated (`gemma3_tool_code`): the reply is scanned for fences.
    emulated_tools: bool,
}

/// Reads `body` against the contract (the fast path, else the general one), looks the
/// model up in `plan` and writes the body to send upstream.
fn check(plan: &Plan, body: RawBody) -> Result<Checked<'_>, ApiError> {
    let bytes = body_bytes(body)?;
    // The plain case skips the JSON tree both ways (see `fast`); anything else, and
    // tool-call emulation, takes the general path.
    let fast = FastRequest::parse(&bytes);
    let mut general = None;
    let (caller_model, streaming) = match &fast {
        Some(fast) => (fast.model.clone(), fast.streaming),
        None => {
            let request = General::parse(&bytes)?;
            let read = (request.model.clone(), request.streaming);
            general = Some(request);
            read
        }
    };
    let model = lookup(plan, &caller_model, ModelKind::Chat)?;
    let emulate = model.dialect == ToolDialect::Gemma3ToolCode && !streaming;

    let mut emulated_tools = false;
    let outgoing = match fast.filter(|_| !emulate) {
        Some(fast) => Bytes::from(fast.outgoing(&model.upstream_model, model.default_max_tokens)),
        None => {
            let mut request = match general {
                Some(request) => request,
                None => General::parse(&bytes)?,
            };
            let named_tool = request.named_tool.take();
            let mut out = request.outgoing(&model.upstream_model, model.default_max_tokens);
            if emulate {
                // The dialect reads `tool_choice` itself (a named function is the only
                // tool its guide offers) and strips it.
                emulated_tools = gemma::outbound(&mut out)?;
            } else if let Some(name) = named_tool.filter(|_| model.is_local()) {
                force_named_tool(&mut out, &name);
            }
            Bytes::from(Value::Object(out).to_string())
        }
    };
    Ok(Checked {
        model,
        caller_model,
        streaming,
        outgoing,
        emulated_tools,
    })
}

/// What a buffered answer says of itself, for the upstream span (read only when spans
/// are recorded; an answer that does not read this way records neither).
#[derive(Debug, Default, Deserialize)]
struct AnswerFacts {
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    usage: Option<Value>,
}

/// The event that ends a stream early: one `data:` line carrying the error envelope.
fn error_event(error: StreamError) -> Bytes {
    sse::frame(&ApiError::from(error).envelope().to_string())
}
