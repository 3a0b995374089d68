//! OTLP export of a run's spans, with the OpenTelemetry GenAI semantic conventions.
//!
//! Off unless the standard `OTEL_EXPORTER_OTLP_ENDPOINT` (or
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) is set, and off when `OTEL_SDK_DISABLED=true` or
//! `OTEL_TRACES_EXPORTER=none`. The exporter is `opentelemetry-otlp` over HTTP with protobuf
//! bodies (`OTEL_EXPORTER_OTLP_PROTOCOL` unset or `http/protobuf`; gRPC is not built in),
//! through the workspace's `reqwest`; `OTEL_EXPORTER_OTLP_HEADERS`, `OTEL_SERVICE_NAME` and
//! `OTEL_RESOURCE_ATTRIBUTES` are honoured.
//!
//! The conventions are pinned to one version, [`SEMCONV_VERSION`] (the `schema_url` of every
//! exported scope): model turns are `chat` client spans with `gen_ai.*` request, response
//! and usage attributes; tool calls are `execute_tool` spans; the run is an `invoke_agent`
//! span; the other spans are named by their core kind (`section`, `store`, `log`, …).
//! Span names are fixed vocabulary, never text from the run. Contents — what the input, the
//! store, the model or a tool said: `gen_ai.input.messages`, `gen_ai.output.messages`,
//! `gen_ai.tool.call.arguments`, `gen_ai.tool.call.result`, log text, store paths and
//! contents, section replies, error messages — are exported only with
//! `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`, as the conventions advise
//! (the crate README lists every exported attribute and its class).
//!
//! Spans are handed over on their end to a bounded queue ([`QUEUE_SPANS`]; a full queue
//! drops and counts) and exported in batches by a task on the caller's tokio runtime, so a
//! slow or absent collector never slows a run.

use std::borrow::Cow;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use opentelemetry::trace::{
    SpanContext, SpanId as OtelSpanId, SpanKind as OtelKind, Status, TraceFlags,
    TraceId as OtelTraceId, TraceState,
};
use opentelemetry::{Array, InstrumentationScope, KeyValue, StringValue, Value};
use opentelemetry_otlp::{WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{SpanData, SpanEvents, SpanExporter as _, SpanLinks};
use opentelemetry_semantic_conventions::attribute as semconv;
use promptforge_core::trace::{Span, SpanKind, SpanListener, SpanStatus};
use serde_json::{Map, Value as Json, json};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// The semantic-conventions version every exported span follows (`schema_url`).
pub const SEMCONV_VERSION: &str = "1.42.0";

/// Spans waiting for export at most; past it, spans are dropped and counted.
pub const QUEUE_SPANS: usize = 4096;

/// Spans per export request at most.
pub const BATCH_SPANS: usize = 512;

/// How long a span waits in the queue before its batch is sent anyway.
pub const BATCH_DELAY: Duration = Duration::from_secs(1);

/// The export timeout when `OTEL_EXPORTER_OTLP_TIMEOUT` does not say (the standard default).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// The environment variable that turns on message and tool content capture.
pub const CAPTURE_CONTENT_VAR: &str = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT";

/// The `gen_ai.provider.name` of model turns: the PromptForge gateway (which relays to the
/// real providers; it will say which in its own spans).
pub const PROVIDER_NAME: &str = "promptforge";

/// Reads the environment through a function (tests pass their own).
type Env<'a> = &'a dyn Fn(&str) -> Option<String>;

fn process_env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// What the environment asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OtlpConfig {
    /// The traces endpoint, `…/v1/traces`.
    pub endpoint: String,
    /// The export timeout.
    pub timeout: Duration,
    /// Whether message and tool contents are exported.
    pub capture_content: bool,
    /// `service.name`.
    pub service_name: String,
}

impl OtlpConfig {
    /// The configuration from the process environment: `Ok(None)` when export is off, an
    /// error naming the variable when it is set to something this build cannot do.
    pub fn from_env() -> Result<Option<Self>, String> {
        Self::from(&process_env)
    }

    fn from(env: Env<'_>) -> Result<Option<Self>, String> {
        if env("OTEL_SDK_DISABLED").is_some_and(|v| v.trim().eq_ignore_ascii_case("true")) {
            return Ok(None);
        }
        if let Some(exporter) = env("OTEL_TRACES_EXPORTER") {
            match exporter.trim() {
                "none" => return Ok(None),
                "otlp" => {}
                other => {
                    return Err(format!(
                        "OTEL_TRACES_EXPORTER={other} is not supported; use otlp (or none)"
                    ));
                }
            }
        }
        let endpoint = match (
            env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"),
            env("OTEL_EXPORTER_OTLP_ENDPOINT"),
        ) {
            (Some(traces), _) => traces.trim().to_owned(),
            (None, Some(base)) => format!("{}/v1/traces", base.trim().trim_end_matches('/')),
            (None, None) => return Ok(None),
        };
        for var in [
            "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
            "OTEL_EXPORTER_OTLP_PROTOCOL",
        ] {
            if let Some(protocol) = env(var) {
                if protocol.trim() != "http/protobuf" {
                    return Err(format!(
                        "{var}={} is not supported; this build exports http/protobuf only",
                        protocol.trim()
                    ));
                }
                break;
            }
        }
        let url = reqwest::Url::parse(&endpoint)
            .map_err(|e| format!("the OTLP endpoint `{endpoint}` is not a URL: {e}"))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(format!(
                "the OTLP endpoint `{endpoint}` must be http or https"
            ));
        }
        let mut timeout = DEFAULT_TIMEOUT;
        for var in [
            "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
            "OTEL_EXPORTER_OTLP_TIMEOUT",
        ] {
            if let Some(ms) = env(var) {
                let ms: u64 = ms
                    .trim()
                    .parse()
                    .map_err(|_| format!("{var} must be milliseconds, not `{ms}`"))?;
                timeout = Duration::from_millis(ms.clamp(1, 600_000));
                break;
            }
        }
        Ok(Some(Self {
            endpoint,
            timeout,
            capture_content: env(CAPTURE_CONTENT_VAR)
                .is_some_and(|v| v.trim().eq_ignore_ascii_case("true")),
            service_name: env("OTEL_SERVICE_NAME").unwrap_or_else(|| "promptforge".into()),
        }))
    }
}

/// What an export did, reported when it finishes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExportReport {
    /// Spans the collector accepted.
    pub exported: u64,
    /// Spans dropped because the queue was full.
    pub dropped: u64,
    /// Spans in batches the collector refused or could not be sent.
    pub failed: u64,
    /// The first few export errors.
    pub errors: Vec<String>,
}

/// A running OTLP export: a [`SpanListener`] for the tracer and the export task.
pub struct OtlpExport {
    listener: Arc<Listener>,
    worker: JoinHandle<ExportReport>,
    timeout: Duration,
}

impl std::fmt::Debug for OtlpExport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OtlpExport")
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl OtlpExport {
    /// Starts exporting per `config`. Must be called inside a tokio runtime (the export
    /// task runs on it).
    pub fn start(config: &OtlpConfig) -> Result<Self, String> {
        let http = reqwest::Client::builder()
            .no_proxy()
            .timeout(config.timeout)
            .build()
            .map_err(|e| format!("cannot build the OTLP HTTP client: {e}"))?;
        let mut exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_http_client(http)
            .with_endpoint(config.endpoint.clone())
            .with_timeout(config.timeout)
            .build()
            .map_err(|e| format!("cannot build the OTLP exporter: {e}"))?;
        exporter.set_resource(
            &Resource::builder()
                .with_service_name(config.service_name.clone())
                .with_attribute(KeyValue::new("service.version", env!("CARGO_PKG_VERSION")))
                .build(),
        );
        let (sender, receiver) = mpsc::channel(QUEUE_SPANS);
        let listener = Arc::new(Listener {
            sender: std::sync::Mutex::new(Some(sender)),
            dropped: AtomicU64::new(0),
            content: config.capture_content,
            scope: InstrumentationScope::builder("promptforge")
                .with_version(env!("CARGO_PKG_VERSION"))
                .with_schema_url(format!(
                    "https://opentelemetry.io/schemas/{SEMCONV_VERSION}"
                ))
                .build(),
        });
        let worker = tokio::spawn(export_loop(exporter, receiver));
        Ok(Self {
            listener,
            worker,
            timeout: config.timeout,
        })
    }

    /// The listener to hand to `TraceBuilder::listener`.
    pub fn listener(&self) -> Arc<dyn SpanListener> {
        Arc::clone(&self.listener) as Arc<dyn SpanListener>
    }

    /// Sends what is queued and stops; waits at most the export timeout plus a second.
    pub async fn finish(self) -> ExportReport {
        let Self {
            listener,
            worker,
            timeout,
        } = self;
        let dropped = listener.dropped.load(Ordering::Relaxed);
        // The tracer may still hold the listener, so the queue is closed explicitly.
        listener.close();
        let abort = worker.abort_handle();
        let mut report = match tokio::time::timeout(timeout + Duration::from_secs(1), worker).await
        {
            Ok(Ok(report)) => report,
            Ok(Err(error)) => ExportReport {
                errors: vec![format!("the export task stopped: {error}")],
                ..ExportReport::default()
            },
            Err(_) => {
                abort.abort();
                ExportReport {
                    errors: vec![format!(
                        "the collector did not take the spans within {} s",
                        timeout.as_secs_f64() + 1.0
                    )],
                    ..ExportReport::default()
                }
            }
        };
        report.dropped += dropped;
        report
    }
}

/// The tracer-side half: converts ended spans and queues them.
struct Listener {
    /// `None` once the export is finishing (the tracer may still hold the listener).
    sender: std::sync::Mutex<Option<mpsc::Sender<SpanData>>>,
    dropped: AtomicU64,
    content: bool,
    scope: InstrumentationScope,
}

impl Listener {
    /// Closes the queue: the export loop ends once it has sent what is in it.
    fn close(&self) {
        self.sender
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
    }
}

impl SpanListener for Listener {
    fn span_started(&self, _span: &Span) {}

    fn span_ended(&self, span: &Span) {
        let data = to_span_data(span, self.content, &self.scope);
        let sender = self
            .sender
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if sender.as_ref().is_none_or(|s| s.try_send(data).is_err()) {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
}

async fn export_loop(
    exporter: opentelemetry_otlp::SpanExporter,
    mut receiver: mpsc::Receiver<SpanData>,
) -> ExportReport {
    let mut report = ExportReport::default();
    let mut open = true;
    while open {
        let mut batch = Vec::new();
        match receiver.recv().await {
            Some(span) => batch.push(span),
            None => open = false,
        }
        if open {
            let deadline = tokio::time::Instant::now() + BATCH_DELAY;
            while batch.len() < BATCH_SPANS {
                match tokio::time::timeout_at(deadline, receiver.recv()).await {
                    Ok(Some(span)) => batch.push(span),
                    Ok(None) => {
                        open = false;
                        break;
                    }
                    Err(_) => break,
                }
            }
        }
        if batch.is_empty() {
            continue;
        }
        let count = batch.len() as u64;
        match exporter.export(batch).await {
            Ok(()) => report.exported += count,
            Err(error) => {
                report.failed += count;
                if report.errors.len() < 8 {
                    report.errors.push(error.to_string());
                }
            }
        }
    }
    let _ = exporter.shutdown();
    report
}

/// The GenAI attribute names, as the conventions of [`SEMCONV_VERSION`] define them (the
/// `opentelemetry-semantic-conventions` crate marks them deprecated since they moved to
/// their own repository; a test checks these against the crate's).
pub(crate) mod genai {
    pub(crate) const AGENT_NAME: &str = "gen_ai.agent.name";
    pub(crate) const CONVERSATION_ID: &str = "gen_ai.conversation.id";
    pub(crate) const INPUT_MESSAGES: &str = "gen_ai.input.messages";
    pub(crate) const OPERATION_NAME: &str = "gen_ai.operation.name";
    pub(crate) const OUTPUT_MESSAGES: &str = "gen_ai.output.messages";
    pub(crate) const PROVIDER_NAME: &str = "gen_ai.provider.name";
    pub(crate) const REQUEST_MAX_TOKENS: &str = "gen_ai.request.max_tokens";
    pub(crate) const REQUEST_MODEL: &str = "gen_ai.request.model";
    pub(crate) const REQUEST_TEMPERATURE: &str = "gen_ai.request.temperature";
    pub(crate) const RESPONSE_FINISH_REASONS: &str = "gen_ai.response.finish_reasons";
    pub(crate) const RESPONSE_ID: &str = "gen_ai.response.id";
    pub(crate) const RESPONSE_MODEL: &str = "gen_ai.response.model";
    pub(crate) const RESPONSE_TIME_TO_FIRST_CHUNK: &str = "gen_ai.response.time_to_first_chunk";
    pub(crate) const TOOL_CALL_ARGUMENTS: &str = "gen_ai.tool.call.arguments";
    pub(crate) const TOOL_CALL_ID: &str = "gen_ai.tool.call.id";
    pub(crate) const TOOL_CALL_RESULT: &str = "gen_ai.tool.call.result";
    pub(crate) const TOOL_DEFINITIONS: &str = "gen_ai.tool.definitions";
    pub(crate) const TOOL_NAME: &str = "gen_ai.tool.name";
    pub(crate) const TOOL_TYPE: &str = "gen_ai.tool.type";
    pub(crate) const USAGE_INPUT_TOKENS: &str = "gen_ai.usage.input_tokens";
    pub(crate) const USAGE_OUTPUT_TOKENS: &str = "gen_ai.usage.output_tokens";
}

fn micros_to_seconds(us: u64) -> f64 {
    us as f64 / 1e6
}

/// The longest provider-made identifier (a response id, a response model, a finish reason,
/// a tool call id) exported without content capture. Such a value comes from the upstream
/// (or the model) and is exported by default only when it is shaped like an identifier:
/// at most this many bytes of ASCII letters, digits and `-_.:/@+`. Anything else is
/// exported only with content capture.
pub const MAX_IDENTIFIER_BYTES: usize = 128;

/// Whether `value` is shaped like an identifier a provider makes ([`MAX_IDENTIFIER_BYTES`]).
fn is_identifier(value: &str) -> bool {
    !value.is_empty()
        && value.len() <= MAX_IDENTIFIER_BYTES
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.:/@+".contains(&b))
}

/// The core attributes exported as `promptforge.{key}` without content capture: fixed
/// vocabulary, counts and flags, ids the run made, and names the prompt's author wrote
/// (section headings, tool aliases). Every other attribute is content — it holds what the
/// input, the store, the model or a tool said — and is exported only with content capture,
/// so an attribute core adds later stays private until it is classified here.
fn exported_by_default(kind: SpanKind, key: &str) -> bool {
    match kind {
        SpanKind::Preamble | SpanKind::Section | SpanKind::Arm => {
            matches!(key, "depth" | "entered" | "index" | "end")
        }
        SpanKind::Jump => matches!(key, "target" | "relation"),
        SpanKind::Fanout => matches!(key, "items" | "concurrency" | "ok" | "exhausted"),
        SpanKind::ModelTurn => matches!(key, "turn" | "infer" | "traceparent"),
        SpanKind::ToolCall => matches!(key, "tool_id" | "trusted"),
        SpanKind::Store => matches!(key, "op" | "seq" | "bytes" | "matches" | "exists"),
        _ => false,
    }
}

/// The core attributes [`to_span_data`] maps to convention names itself (or drops), so
/// they are not repeated as `promptforge.{key}`.
fn mapped(kind: SpanKind, key: &str) -> bool {
    match kind {
        SpanKind::Run => matches!(key, "execution" | "prompt" | "origin"),
        SpanKind::ModelTurn => matches!(
            key,
            "model"
                | "request"
                | "reply"
                | "finish_reason"
                | "usage"
                | "first_byte_us"
                | "gateway"
                | "response_model"
                | "response_id"
        ),
        SpanKind::ToolCall => {
            matches!(
                key,
                "tool" | "call_id" | "alias" | "source" | "arguments" | "result"
            )
        }
        _ => false,
    }
}

/// The kinds whose span name is a section heading (exported as `promptforge.section`).
fn named_by_heading(kind: SpanKind) -> bool {
    matches!(
        kind,
        SpanKind::Preamble
            | SpanKind::Section
            | SpanKind::Arm
            | SpanKind::Walk
            | SpanKind::Execute
            | SpanKind::Fanout
    )
}

/// One core span as an OpenTelemetry span, with the GenAI conventions where they apply.
///
/// The span name is fixed vocabulary: the operation (`chat`, `execute_tool`,
/// `invoke_agent`) or the core kind (`section`, `store`, `log`, …), never text from the
/// run. Without `content`, only what the crate README's audit table marks as exported by
/// default leaves: what the input, the store, the model or a tool said (log text,
/// arguments, results, replies, store paths and contents, error messages) needs `content`.
pub fn to_span_data(span: &Span, content: bool, scope: &InstrumentationScope) -> SpanData {
    let attrs = span.attrs();
    let text = |key: &str| attrs.get(key).and_then(Json::as_str);
    // A provider-made identifier: as it is with content capture, else when shaped like one.
    let provided = |key: &str| {
        text(key)
            .filter(|v| content || is_identifier(v))
            .map(str::to_owned)
    };
    let mut out: Vec<KeyValue> = Vec::new();
    let (kind, name) = match span.kind() {
        SpanKind::ModelTurn => {
            let model = text("model").unwrap_or(span.name()).to_owned();
            out.push(KeyValue::new(genai::OPERATION_NAME, "chat"));
            out.push(KeyValue::new(genai::PROVIDER_NAME, PROVIDER_NAME));
            out.push(KeyValue::new(genai::REQUEST_MODEL, model));
            let request = attrs.get("request");
            if let Some(t) = request
                .and_then(|r| r.get("temperature"))
                .and_then(Json::as_f64)
            {
                out.push(KeyValue::new(genai::REQUEST_TEMPERATURE, t));
            }
            if let Some(m) = request
                .and_then(|r| r.get("max_tokens"))
                .and_then(Json::as_i64)
            {
                out.push(KeyValue::new(genai::REQUEST_MAX_TOKENS, m));
            }
            if let Some(m) = provided("response_model") {
                out.push(KeyValue::new(genai::RESPONSE_MODEL, m));
            }
            if let Some(id) = provided("response_id") {
                out.push(KeyValue::new(genai::RESPONSE_ID, id));
            }
            if let Some(reason) = provided("finish_reason") {
                out.push(KeyValue::new(
                    genai::RESPONSE_FINISH_REASONS,
                    Value::Array(Array::String(vec![StringValue::from(reason)])),
                ));
            }
            if let Some(usage) = attrs.get("usage") {
                if let Some(n) = usage.get("input_tokens").and_then(Json::as_i64) {
                    out.push(KeyValue::new(genai::USAGE_INPUT_TOKENS, n));
                }
                if let Some(n) = usage.get("output_tokens").and_then(Json::as_i64) {
                    out.push(KeyValue::new(genai::USAGE_OUTPUT_TOKENS, n));
                }
            }
            if let Some(us) = attrs.get("first_byte_us").and_then(Json::as_u64) {
                out.push(KeyValue::new(
                    genai::RESPONSE_TIME_TO_FIRST_CHUNK,
                    micros_to_seconds(us),
                ));
            }
            if let Some(url) = text("gateway").and_then(|g| reqwest::Url::parse(g).ok()) {
                if let Some(host) = url.host_str() {
                    out.push(KeyValue::new(semconv::SERVER_ADDRESS, host.to_owned()));
                }
                if let Some(port) = url.port_or_known_default() {
                    out.push(KeyValue::new(semconv::SERVER_PORT, i64::from(port)));
                }
            }
            if content {
                if let Some(request) = request {
                    out.push(KeyValue::new(
                        genai::INPUT_MESSAGES,
                        input_messages(request).to_string(),
                    ));
                    if let Some(tools) = request.get("tools").filter(|t| t.is_array()) {
                        out.push(KeyValue::new(genai::TOOL_DEFINITIONS, tools.to_string()));
                    }
                }
                if let Some(reply) = attrs.get("reply") {
                    out.push(KeyValue::new(
                        genai::OUTPUT_MESSAGES,
                        output_messages(reply, text("finish_reason")).to_string(),
                    ));
                }
            }
            (OtelKind::Client, "chat")
        }
        SpanKind::ToolCall => {
            out.push(KeyValue::new(genai::OPERATION_NAME, "execute_tool"));
            // The name the model called: one the prompt offered, unless `source` is
            // `unknown` (then it is whatever the model said).
            let offered = text("source").is_some_and(|s| s != "unknown");
            if offered || content {
                out.push(KeyValue::new(genai::TOOL_NAME, span.name().to_owned()));
            }
            out.push(KeyValue::new(genai::TOOL_TYPE, "function"));
            if let Some(id) = provided("call_id") {
                out.push(KeyValue::new(genai::TOOL_CALL_ID, id));
            }
            for (key, name) in [
                ("alias", "promptforge.tool.alias"),
                ("source", "promptforge.tool.source"),
            ] {
                if let Some(value) = text(key) {
                    out.push(KeyValue::new(name, value.to_owned()));
                }
            }
            if content {
                if let Some(arguments) = attrs.get("arguments") {
                    let arguments = match arguments {
                        Json::String(s) => s.clone(),
                        other => other.to_string(),
                    };
                    out.push(KeyValue::new(genai::TOOL_CALL_ARGUMENTS, arguments));
                }
                if let Some(result) = text("result") {
                    out.push(KeyValue::new(genai::TOOL_CALL_RESULT, result.to_owned()));
                }
            }
            (OtelKind::Internal, "execute_tool")
        }
        SpanKind::Run => {
            out.push(KeyValue::new(genai::OPERATION_NAME, "invoke_agent"));
            out.push(KeyValue::new(genai::AGENT_NAME, span.name().to_owned()));
            if let Some(execution) = text("execution") {
                out.push(KeyValue::new(genai::CONVERSATION_ID, execution.to_owned()));
            }
            if let Some(origin) = text("origin") {
                out.push(KeyValue::new(semconv::CODE_FILE_PATH, origin.to_owned()));
            }
            (OtelKind::Internal, "invoke_agent")
        }
        other => {
            if named_by_heading(other) {
                out.push(KeyValue::new("promptforge.section", span.name().to_owned()));
            }
            (OtelKind::Internal, other.as_str())
        }
    };
    out.push(KeyValue::new("promptforge.kind", span.kind().as_str()));
    if let Some(unit) = span.unit() {
        out.push(KeyValue::new(
            "promptforge.unit",
            i64::try_from(unit).unwrap_or(i64::MAX),
        ));
    }
    if let Some(line) = span.line() {
        out.push(KeyValue::new(
            semconv::CODE_LINE_NUMBER,
            i64::try_from(line).unwrap_or(i64::MAX),
        ));
    }
    other_attrs(span.kind(), attrs, content, &mut out);
    // The error's kind is core's fixed vocabulary; its message may quote anything the run
    // saw (a Lua error's text, a path, a tool's failure), so it is content.
    let status = match (span.status(), span.error()) {
        (SpanStatus::Error, Some((kind, message))) if content => {
            Status::error(format!("{kind}: {message}"))
        }
        (SpanStatus::Error, Some((kind, _))) => Status::error(kind.to_owned()),
        (SpanStatus::Error, None) => Status::error(""),
        (SpanStatus::Cancelled, _) => Status::error("cancelled"),
        _ => Status::Unset,
    };
    if let Some((kind, _)) = span.error() {
        out.push(KeyValue::new(semconv::ERROR_TYPE, kind.to_owned()));
    }
    SpanData {
        span_context: SpanContext::new(
            OtelTraceId::from_bytes(span.trace_id().to_bytes()),
            OtelSpanId::from_bytes(span.id().to_bytes()),
            TraceFlags::SAMPLED,
            false,
            TraceState::default(),
        ),
        parent_span_id: span.parent().map_or(OtelSpanId::INVALID, |p| {
            OtelSpanId::from_bytes(p.to_bytes())
        }),
        parent_span_is_remote: false,
        span_kind: kind,
        name: Cow::Borrowed(name),
        start_time: span.start_time(),
        end_time: span.end_time().unwrap_or_else(|| span.start_time()),
        attributes: out,
        dropped_attributes_count: 0,
        events: SpanEvents::default(),
        links: SpanLinks::default(),
        status,
        instrumentation_scope: scope.clone(),
    }
}

/// The attributes [`to_span_data`] does not map, as `promptforge.{key}`: those
/// [`exported_by_default`] always, every other one only with content capture (objects and
/// arrays as JSON text).
fn other_attrs(kind: SpanKind, attrs: &Map<String, Json>, content: bool, out: &mut Vec<KeyValue>) {
    for (key, value) in attrs {
        if mapped(kind, key) || !(content || exported_by_default(kind, key)) {
            continue;
        }
        let name = format!("promptforge.{key}");
        match value {
            Json::String(s) => out.push(KeyValue::new(name, s.clone())),
            Json::Bool(b) => out.push(KeyValue::new(name, *b)),
            Json::Number(n) => match n.as_i64() {
                Some(i) => out.push(KeyValue::new(name, i)),
                None => out.push(KeyValue::new(name, n.as_f64().unwrap_or(0.0))),
            },
            Json::Null => {}
            other => out.push(KeyValue::new(name, other.to_string())),
        }
    }
}

/// A request's messages in the conventions' shape: role and typed parts.
fn input_messages(request: &Json) -> Json {
    let messages = request.get("messages").and_then(Json::as_array);
    Json::Array(
        messages
            .into_iter()
            .flatten()
            .map(|m| {
                let role = m.get("role").and_then(Json::as_str).unwrap_or("user");
                let mut parts = Vec::new();
                if role == "tool" {
                    parts.push(json!({"type": "tool_call_response",
                        "id": m.get("tool_call_id"), "response": m.get("content")}));
                } else if let Some(content) = m.get("content").and_then(Json::as_str) {
                    parts.push(json!({"type": "text", "content": content}));
                }
                for call in m
                    .get("tool_calls")
                    .and_then(Json::as_array)
                    .into_iter()
                    .flatten()
                {
                    let function = call.get("function");
                    parts.push(json!({"type": "tool_call", "id": call.get("id"),
                        "name": function.and_then(|f| f.get("name")),
                        "arguments": function.and_then(|f| f.get("arguments"))}));
                }
                json!({"role": role, "parts": parts})
            })
            .collect(),
    )
}

/// A reply in the conventions' shape.
fn output_messages(reply: &Json, finish: Option<&str>) -> Json {
    let mut parts = Vec::new();
    if let Some(content) = reply.get("content").and_then(Json::as_str) {
        parts.push(json!({"type": "text", "content": content}));
    }
    for call in reply
        .get("tool_calls")
        .and_then(Json::as_array)
        .into_iter()
        .flatten()
    {
        parts.push(json!({"type": "tool_call", "id": call.get("id"),
            "name": call.get("name"), "arguments": call.get("arguments")}));
    }
    json!([{"role": "assistant", "parts": parts, "finish_reason": finish.unwrap_or("")}])
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn env(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |name| {
            pairs
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| (*v).to_owned())
        }
    }

    #[test]
    fn export_is_off_unless_an_endpoint_is_set() {
        assert_eq!(OtlpConfig::from(&env(&[])).unwrap(), None);
        let config = OtlpConfig::from(&env(&[(
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            "http://127.0.0.1:4318/",
        )]))
        .unwrap()
        .unwrap();
        assert_eq!(config.endpoint, "http://127.0.0.1:4318/v1/traces");
        assert_eq!(config.timeout, DEFAULT_TIMEOUT);
        assert!(!config.capture_content);
        assert_eq!(config.service_name, "promptforge");
        let config = OtlpConfig::from(&env(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://a:1"),
            ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://b:2/custom"),
            ("OTEL_EXPORTER_OTLP_TIMEOUT", "2500"),
            (CAPTURE_CONTENT_VAR, "true"),
            ("OTEL_SERVICE_NAME", "mine"),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!(config.endpoint, "http://b:2/custom");
        assert_eq!(config.timeout, Duration::from_millis(2500));
        assert!(config.capture_content);
        assert_eq!(config.service_name, "mine");
        for off in [
            &[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://a:1"),
                ("OTEL_SDK_DISABLED", "true"),
            ][..],
            &[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://a:1"),
                ("OTEL_TRACES_EXPORTER", "none"),
            ][..],
        ] {
            let pairs: &'static [(&str, &str)] = Box::leak(off.to_vec().into_boxed_slice());
            assert_eq!(OtlpConfig::from(&env(pairs)).unwrap(), None);
        }
    }

    #[test]
    fn unsupported_settings_are_refused_by_name() {
        let error = OtlpConfig::from(&env(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://a:1"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
        ]))
        .unwrap_err();
        assert!(
            error.contains("OTEL_EXPORTER_OTLP_PROTOCOL=grpc"),
            "{error}"
        );
        let error = OtlpConfig::from(&env(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://a:1"),
            ("OTEL_EXPORTER_OTLP_TIMEOUT", "soon"),
        ]))
        .unwrap_err();
        assert!(error.contains("OTEL_EXPORTER_OTLP_TIMEOUT"), "{error}");
        let error =
            OtlpConfig::from(&env(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "ftp://a")])).unwrap_err();
        assert!(error.contains("http or https"), "{error}");
    }

    #[test]
    fn the_pinned_version_is_the_conventions_crate_version() {
        assert_eq!(
            opentelemetry_semantic_conventions::SCHEMA_URL,
            format!("https://opentelemetry.io/schemas/{SEMCONV_VERSION}")
        );
    }

    #[test]
    #[allow(deprecated)]
    fn the_genai_names_are_the_pinned_conventions() {
        use opentelemetry_semantic_conventions::attribute as c;
        assert_eq!(genai::AGENT_NAME, c::GEN_AI_AGENT_NAME);
        assert_eq!(genai::CONVERSATION_ID, c::GEN_AI_CONVERSATION_ID);
        assert_eq!(genai::INPUT_MESSAGES, c::GEN_AI_INPUT_MESSAGES);
        assert_eq!(genai::OPERATION_NAME, c::GEN_AI_OPERATION_NAME);
        assert_eq!(genai::OUTPUT_MESSAGES, c::GEN_AI_OUTPUT_MESSAGES);
        assert_eq!(genai::PROVIDER_NAME, c::GEN_AI_PROVIDER_NAME);
        assert_eq!(genai::REQUEST_MAX_TOKENS, c::GEN_AI_REQUEST_MAX_TOKENS);
        assert_eq!(genai::REQUEST_MODEL, c::GEN_AI_REQUEST_MODEL);
        assert_eq!(genai::REQUEST_TEMPERATURE, c::GEN_AI_REQUEST_TEMPERATURE);
        assert_eq!(
            genai::RESPONSE_FINISH_REASONS,
            c::GEN_AI_RESPONSE_FINISH_REASONS
        );
        assert_eq!(genai::RESPONSE_ID, c::GEN_AI_RESPONSE_ID);
        assert_eq!(genai::RESPONSE_MODEL, c::GEN_AI_RESPONSE_MODEL);
        assert_eq!(
            genai::RESPONSE_TIME_TO_FIRST_CHUNK,
            c::GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK
        );
        assert_eq!(genai::TOOL_CALL_ARGUMENTS, c::GEN_AI_TOOL_CALL_ARGUMENTS);
        assert_eq!(genai::TOOL_CALL_ID, c::GEN_AI_TOOL_CALL_ID);
        assert_eq!(genai::TOOL_CALL_RESULT, c::GEN_AI_TOOL_CALL_RESULT);
        assert_eq!(genai::TOOL_DEFINITIONS, c::GEN_AI_TOOL_DEFINITIONS);
        assert_eq!(genai::TOOL_NAME, c::GEN_AI_TOOL_NAME);
        assert_eq!(genai::TOOL_TYPE, c::GEN_AI_TOOL_TYPE);
        assert_eq!(genai::USAGE_INPUT_TOKENS, c::GEN_AI_USAGE_INPUT_TOKENS);
        assert_eq!(genai::USAGE_OUTPUT_TOKENS, c::GEN_AI_USAGE_OUTPUT_TOKENS);
    }

    #[test]
    fn messages_take_the_conventions_shape() {
        let request = json!({"messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "r"}]});
        let messages = input_messages(&request);
        assert_eq!(
            messages[0],
            json!({"role": "user", "parts": [{"type": "text", "content": "hi"}]})
        );
        assert_eq!(messages[1]["parts"][0]["type"], "tool_call");
        assert_eq!(messages[1]["parts"][0]["name"], "f");
        assert_eq!(
            messages[2]["parts"][0],
            json!({"type": "tool_call_response", "id": "c1", "response": "r"})
        );
        let out = output_messages(&json!({"content": "done", "tool_calls": []}), Some("stop"));
        assert_eq!(out[0]["finish_reason"], "stop");
        assert_eq!(out[0]["parts"][0]["content"], "done");
    }
}
