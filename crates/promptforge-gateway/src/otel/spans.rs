//! One request's spans: recorded as the request goes, queued for export together when
//! the last holder lets go (the request's layer, or the stream it relays).
//!
//! The tree (every span in the caller's trace, the request span's parent the caller's
//! span from `traceparent`):
//!
//! ```text
//! gateway.request            (server) http.request.method, http.route, http.response.status_code, promptforge.model
//! ├─ gateway.validate        the chat contract and the model lookup
//! └─ gateway.attempt         one per failover attempt: promptforge.endpoint, outcome or error.type
//!    ├─ gateway.queue_wait   a dominion's admission wait: promptforge.dominion, promptforge.admission
//!    └─ gateway.upstream     (client) gen_ai.operation.name, gen_ai.request.model, gen_ai.response.model,
//!                            gen_ai.usage.*, server.address/port; a local model's child as
//!                            promptforge.local.model/port/pid
//! ```

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use axum::http::{HeaderMap, Method};
use opentelemetry::KeyValue;
use opentelemetry::trace::{
    SpanContext, SpanId, SpanKind, Status, TraceFlags, TraceId, TraceState,
};
use opentelemetry_sdk::trace::{IdGenerator, SpanData, SpanEvents, SpanLinks};
use serde_json::Value;

use super::{Tracing, traceparent};
use crate::admission::AdmissionError;
use crate::plan::{ApiPath, Endpoint};
use crate::relay::AttemptFailure;
use crate::relay::failover::FailoverReason;

/// The attribute names of the semantic conventions (v1.42.0) the spans use.
mod names {
    pub(super) const HTTP_METHOD: &str = "http.request.method";
    pub(super) const HTTP_ROUTE: &str = "http.route";
    pub(super) const HTTP_STATUS: &str = "http.response.status_code";
    pub(super) const ERROR_TYPE: &str = "error.type";
    pub(super) const SERVER_ADDRESS: &str = "server.address";
    pub(super) const SERVER_PORT: &str = "server.port";
    pub(super) const OPERATION: &str = "gen_ai.operation.name";
    pub(super) const REQUEST_MODEL: &str = "gen_ai.request.model";
    pub(super) const RESPONSE_MODEL: &str = "gen_ai.response.model";
    pub(super) const INPUT_TOKENS: &str = "gen_ai.usage.input_tokens";
    pub(super) const OUTPUT_TOKENS: &str = "gen_ai.usage.output_tokens";
}

/// A span being recorded.
#[derive(Debug)]
struct Open {
    id: SpanId,
    parent: SpanId,
    name: &'static str,
    kind: SpanKind,
    start: SystemTime,
    end: Option<SystemTime>,
    attrs: Vec<KeyValue>,
    status: Status,
}

impl Open {
    /// The span's identity and times, without attributes or status.
    fn clone_shape(&self) -> Self {
        Self {
            id: self.id,
            parent: self.parent,
            name: self.name,
            kind: self.kind.clone(),
            start: self.start,
            end: self.end,
            attrs: Vec::new(),
            status: Status::Unset,
        }
    }

    fn ended(&self) -> bool {
        self.end.is_some()
    }

    /// Ends the span in error: `error_type` is a code or label (the gateway's vocabulary, or
    /// a status number) and `description` fixed text. Error messages never go in: they
    /// can quote the request (a refused role, a tool name) or the upstream's answer (which
    /// may echo the prompt).
    fn fail(&mut self, error_type: &str, description: &'static str) {
        self.attrs
            .push(KeyValue::new(names::ERROR_TYPE, error_type.to_owned()));
        self.status = Status::error(description);
    }
}

/// What one request recorded so far.
#[derive(Debug)]
struct Recording {
    tracing: Arc<Tracing>,
    trace_id: TraceId,
    /// The caller's span (`traceparent`), `INVALID` for a request that starts its trace.
    remote_parent: SpanId,
    request: Open,
    /// Spans that are complete.
    done: Vec<Open>,
    /// The failover attempt being made.
    attempt: Option<Open>,
    /// The last upstream call, open for what its answer says.
    upstream: Option<Open>,
    /// `gen_ai.operation.name` and `gen_ai.request.model` of the upstream calls.
    operation: Option<(&'static str, String)>,
}

impl Recording {
    fn child(&self, parent: SpanId, name: &'static str, start: SystemTime) -> Open {
        Open {
            id: self.tracing.ids.new_span_id(),
            parent,
            name,
            kind: SpanKind::Internal,
            start,
            end: None,
            attrs: Vec::new(),
            status: Status::Unset,
        }
    }

    /// Ends and files the open attempt and upstream call.
    fn close_attempt(&mut self, now: SystemTime) {
        for mut span in [self.upstream.take(), self.attempt.take()]
            .into_iter()
            .flatten()
        {
            span.end.get_or_insert(now);
            self.done.push(span);
        }
    }

    fn export(&self, span: Open) -> SpanData {
        let parent_is_remote = span.id == self.request.id && self.remote_parent != SpanId::INVALID;
        SpanData {
            span_context: SpanContext::new(
                self.trace_id,
                span.id,
                TraceFlags::SAMPLED,
                false,
                TraceState::default(),
            ),
            parent_span_id: span.parent,
            parent_span_is_remote: parent_is_remote,
            span_kind: span.kind,
            name: span.name.into(),
            start_time: span.start,
            end_time: span.end.unwrap_or(span.start),
            attributes: span.attrs,
            dropped_attributes_count: 0,
            events: SpanEvents::default(),
            links: SpanLinks::default(),
            status: span.status,
            instrumentation_scope: self.tracing.scope.clone(),
        }
    }
}

impl Drop for Recording {
    fn drop(&mut self) {
        let now = SystemTime::now();
        self.close_attempt(now);
        self.request.end.get_or_insert(now);
        let done = std::mem::take(&mut self.done);
        let attrs = std::mem::take(&mut self.request.attrs);
        let request = Open {
            attrs,
            status: std::mem::replace(&mut self.request.status, Status::Unset),
            ..self.request.clone_shape()
        };
        let mut spans = Vec::with_capacity(done.len() + 1);
        spans.push(self.export(request));
        for span in done {
            spans.push(self.export(span));
        }
        self.tracing.queue(spans);
    }
}

/// The longest upstream `model` recorded as `gen_ai.response.model`.
pub(crate) const MAX_MODEL_ID_BYTES: usize = 128;

/// Whether the upstream's `model` is shaped like a model id (at most
/// [`MAX_MODEL_ID_BYTES`] of ASCII letters, digits and `-_.:/@+`): the upstream writes
/// it, so anything else (text, markup) is not exported.
fn is_model_id(model: &str) -> bool {
    !model.is_empty()
        && model.len() <= MAX_MODEL_ID_BYTES
        && model
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.:/@+".contains(&b))
}

/// `elapsed` before `now` (`now` itself if the clock cannot go back that far).
fn before(now: SystemTime, elapsed: Duration) -> SystemTime {
    now.checked_sub(elapsed).unwrap_or(now)
}

/// One request's spans (cheap to clone: clones share the recording).
#[derive(Debug, Clone)]
pub(crate) struct Spans {
    inner: Arc<Mutex<Recording>>,
}

impl Tracing {
    /// The spans of a request that just arrived: under the caller's span when `headers`
    /// carry a valid `traceparent`, else the root of a new trace. `None` when the caller's
    /// `traceparent` says it does not sample this trace.
    pub(crate) fn request(
        self: &Arc<Self>,
        headers: &HeaderMap,
        method: &Method,
        route: &'static str,
    ) -> Option<Spans> {
        let parent = headers
            .get("traceparent")
            .and_then(|value| traceparent::parse(value.as_bytes()));
        let (trace_id, remote_parent) = match parent {
            Some(parent) if !parent.sampled => return None,
            Some(parent) => (parent.trace_id, parent.span_id),
            None => (self.ids.new_trace_id(), SpanId::INVALID),
        };
        let request = Open {
            id: self.ids.new_span_id(),
            parent: remote_parent,
            name: "gateway.request",
            kind: SpanKind::Server,
            start: SystemTime::now(),
            end: None,
            attrs: vec![
                KeyValue::new(names::HTTP_METHOD, method.as_str().to_owned()),
                KeyValue::new(names::HTTP_ROUTE, route),
            ],
            status: Status::Unset,
        };
        Some(Spans {
            inner: Arc::new(Mutex::new(Recording {
                tracing: Arc::clone(self),
                trace_id,
                remote_parent,
                request,
                done: Vec::new(),
                attempt: None,
                upstream: None,
                operation: None,
            })),
        })
    }
}

impl Spans {
    fn with<R>(&self, f: impl FnOnce(&mut Recording) -> R) -> R {
        f(&mut self.inner.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// Validation ran from `start` until now; `refused` is its refusal's error code (its
    /// message, which quotes the request, is not recorded).
    pub(crate) fn validated(&self, start: SystemTime, refused: Option<&'static str>) {
        self.with(|r| {
            let mut span = r.child(r.request.id, "gateway.validate", start);
            span.end = Some(SystemTime::now());
            if let Some(code) = refused {
                span.fail(code, code);
            }
            r.done.push(span);
        });
    }

    /// The request resolved to the configured `model`, sent upstream as
    /// `upstream_model` on `path`.
    pub(crate) fn routed(&self, model: &str, upstream_model: &str, path: ApiPath) {
        let operation = match path {
            ApiPath::ChatCompletions => "chat",
            ApiPath::Embeddings => "embeddings",
            ApiPath::Rerank => "rerank",
        };
        self.with(|r| {
            r.request
                .attrs
                .push(KeyValue::new("promptforge.model", model.to_owned()));
            r.operation = Some((operation, upstream_model.to_owned()));
        });
    }

    /// `endpoint` is being tried: the previous attempt (if any) is over.
    pub(crate) fn trying(&self, endpoint: &Endpoint) {
        self.with(|r| {
            let now = SystemTime::now();
            r.close_attempt(now);
            let mut attempt = r.child(r.request.id, "gateway.attempt", now);
            attempt.attrs.push(KeyValue::new(
                "promptforge.endpoint",
                endpoint.id.to_string(),
            ));
            r.attempt = Some(attempt);
        });
    }

    /// The attempt waited `waited` for a slot of `dominion`; `outcome` is how the wait
    /// ended (recorded as `admitted`, or the refusal's error code).
    pub(crate) fn queued(
        &self,
        dominion: &str,
        waited: Duration,
        outcome: Result<(), &AdmissionError>,
    ) {
        let outcome = match outcome {
            Ok(()) => "admitted",
            Err(AdmissionError::Rejected { .. }) => "queue_rejected",
            Err(AdmissionError::Full { .. }) => "queue_full",
            Err(AdmissionError::Closed) => "queue_closed",
            Err(AdmissionError::StoreUnavailable { .. }) => "store_unavailable",
        };
        self.with(|r| {
            let now = SystemTime::now();
            let Some(attempt) = r.attempt.as_ref().map(|a| a.id) else {
                return;
            };
            let mut span = r.child(attempt, "gateway.queue_wait", before(now, waited));
            span.end = Some(now);
            span.attrs.extend([
                KeyValue::new("promptforge.dominion", dominion.to_owned()),
                KeyValue::new("promptforge.admission", outcome),
            ]);
            if outcome != "admitted" {
                span.fail(outcome, outcome);
                if let Some(attempt) = &mut r.attempt {
                    attempt.fail(outcome, outcome);
                    attempt.end = Some(now);
                }
            }
            r.done.push(span);
        });
    }

    /// The upstream call to `endpoint` took `elapsed`, until now (the whole body, or a
    /// stream's first chunk or head).
    pub(crate) fn attempted(&self, endpoint: &Endpoint, elapsed: Duration) {
        self.with(|r| {
            let now = SystemTime::now();
            let Some(attempt) = r.attempt.as_mut() else {
                return;
            };
            attempt.end = Some(now);
            attempt
                .attrs
                .push(KeyValue::new("promptforge.outcome", "answered"));
            let attempt = attempt.id;
            let mut span = r.child(attempt, "gateway.upstream", before(now, elapsed));
            span.kind = SpanKind::Client;
            span.end = Some(now);
            if let Some((operation, model)) = &r.operation {
                span.attrs.extend([
                    KeyValue::new(names::OPERATION, *operation),
                    KeyValue::new(names::REQUEST_MODEL, model.clone()),
                ]);
            }
            let url = endpoint.url(ApiPath::ChatCompletions);
            if let Some(host) = url.host_str() {
                span.attrs
                    .push(KeyValue::new(names::SERVER_ADDRESS, host.to_owned()));
            }
            if let Some(port) = url.port_or_known_default() {
                span.attrs
                    .push(KeyValue::new(names::SERVER_PORT, i64::from(port)));
            }
            if let Some(previous) = r.upstream.replace(span) {
                r.done.push(previous);
            }
        });
    }

    /// The attempt against the endpoint failed.
    pub(crate) fn failed(&self, failure: &AttemptFailure) {
        self.with(|r| {
            let label = failure.kind.label();
            if let Some(upstream) = &mut r.upstream {
                upstream.fail(label, label);
            }
            if let Some(attempt) = &mut r.attempt {
                attempt
                    .attrs
                    .retain(|kv| kv.key.as_str() != "promptforge.outcome");
                attempt.fail(label, label);
            }
        });
    }

    /// The request left the attempt's endpoint for the next one, for `reason`.
    pub(crate) fn failover(&self, reason: FailoverReason) {
        self.with(|r| {
            let now = SystemTime::now();
            if let Some(attempt) = &mut r.attempt {
                attempt
                    .attrs
                    .push(KeyValue::new("promptforge.failover.reason", reason.label()));
                if !attempt.ended() {
                    // A busy dominion passed the request on without an upstream call.
                    attempt.fail(reason.label(), "the endpoint's dominion had no free slot");
                    attempt.end = Some(now);
                }
            }
        });
    }

    /// The local child behind the attempt was respawned.
    pub(crate) fn respawned(&self) {
        self.with(|r| {
            if let Some(attempt) = &mut r.attempt {
                attempt
                    .attrs
                    .push(KeyValue::new("promptforge.local.respawned", true));
            }
        });
    }

    /// The local child that served the request: its model, port and server pid.
    pub(crate) fn local_child(&self, model: &str, port: u16, pid: Option<u32>) {
        self.with(|r| {
            let Some(span) = r.upstream.as_mut().or(r.attempt.as_mut()) else {
                return;
            };
            span.attrs.extend([
                KeyValue::new("promptforge.local.model", model.to_owned()),
                KeyValue::new("promptforge.local.port", i64::from(port)),
            ]);
            if let Some(pid) = pid {
                span.attrs
                    .push(KeyValue::new("promptforge.local.pid", i64::from(pid)));
            }
        });
    }

    /// What the upstream's answer said: its `model` (recorded when shaped like a model id,
    /// [`is_model_id`]) and `usage` (`prompt_tokens`, `completion_tokens`).
    pub(crate) fn answer(&self, model: Option<&str>, usage: Option<&Value>) {
        self.with(|r| {
            let Some(span) = &mut r.upstream else {
                return;
            };
            if let Some(model) = model.filter(|m| is_model_id(m)) {
                span.attrs
                    .push(KeyValue::new(names::RESPONSE_MODEL, model.to_owned()));
            }
            for (field, name) in [
                ("prompt_tokens", names::INPUT_TOKENS),
                ("completion_tokens", names::OUTPUT_TOKENS),
            ] {
                if let Some(n) = usage.and_then(|u| u.get(field)).and_then(Value::as_i64) {
                    span.attrs.push(KeyValue::new(name, n));
                }
            }
        });
    }

    /// A relayed stream ended now (the upstream call spans the whole stream).
    pub(crate) fn stream_ended(&self) {
        self.with(|r| {
            if let Some(span) = &mut r.upstream {
                span.end = Some(SystemTime::now());
            }
        });
    }

    /// The response head is ready with `status`: the request span ends (its stream, if
    /// any, goes on in the upstream span).
    pub(crate) fn answered(&self, status: u16) {
        self.with(|r| {
            let span = &mut r.request;
            span.attrs
                .push(KeyValue::new(names::HTTP_STATUS, i64::from(status)));
            if status >= 500 {
                span.fail(&status.to_string(), "the gateway answered an error");
            } else if status >= 400 {
                span.attrs
                    .push(KeyValue::new(names::ERROR_TYPE, status.to_string()));
            }
            span.end = Some(SystemTime::now());
        });
    }
}
