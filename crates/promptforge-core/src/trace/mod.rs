//! Run traces: what a run did, as a tree of spans, report-only like the [`Observer`].
//!
//! A [`Tracer`] records one run: the run itself, the H1 preamble, every section entry and
//! fanout arm (with its `sys.id`), `jump`s, `execute` chains and child walks, fanouts, each
//! model turn (the request as sent, the reply, finish reason, token usage, time to the first
//! response byte and in all), each tool call (name, alias, arguments, result or error), each
//! store operation (path, operation, the new bytes or the replaced text) and every `log`
//! checkpoint, each with its start and end time and the prompt line that caused it. Errors
//! are the status of the span they ended.
//!
//! Tracing never changes a result. It is bounded: every recorded string is cut to
//! [`TraceLimits::field_bytes`] with a `…[cut: N bytes in all]` marker, a trace holds at
//! most [`TraceLimits::trace_bytes`] of attribute data (later spans keep their structure
//! but not their attributes) and [`TraceLimits::max_spans`] spans (later ones are counted,
//! not kept). The gateway key is replaced by `<redacted>` in every recorded string.
//!
//! ```
//! use promptforge_core::trace::Tracer;
//! use promptforge_core::{NullObserver, Prompt, ResolutionContext, RunConfig, StoreRef, run};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let source = "---\nname: t\ndescription: d\npromptforge: 1\n---\n\n# T\n\n## A\n\n```lua\nstore.write(\"a.txt\", \"hi\")\nreturn args\n```\n";
//! let prompt = Prompt::parse(source, "x", &NullObserver)?;
//! let tracer = Tracer::builder().source("t.md", source).build();
//! let config = RunConfig::new("x").tracer(tracer.clone());
//! run(&prompt, "in", ResolutionContext::empty(), &StoreRef::memory(), config).await?;
//! let document = tracer.document();
//! assert_eq!(document["version"], promptforge_core::trace::SCHEMA_VERSION);
//! assert_eq!(document["spans"][1]["name"], "# T"); // the H1 preamble
//! assert_eq!(document["spans"][2]["name"], "## A");
//! # Ok(())
//! # }
//! ```
//!
//! [`Observer`]: crate::Observer

mod attrs;
mod ids;
mod scope;

use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::{Duration, Instant, SystemTime};

use serde_json::{Map, Value as Json, json};

use crate::error::RunError;

pub use attrs::{Attrs, REDACTED};
pub use ids::{SpanId, TraceId, traceparent};
pub(crate) use scope::{End, Scope, SpanGuard, UnitTrace};

/// The version of the trace file format this build writes (`version` in every file).
pub const SCHEMA_VERSION: &str = "1.0";

/// The JSON Schema of the trace file format (`trace.schema.json`).
pub const SCHEMA: &str = include_str!("../../trace.schema.json");

/// The `format` value of every trace file.
pub const FORMAT: &str = "promptforge-trace";

/// Bounds of one trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceLimits {
    field_bytes: usize,
    trace_bytes: u64,
    max_spans: usize,
}

impl Default for TraceLimits {
    fn default() -> Self {
        Self {
            field_bytes: 64 * 1024,
            trace_bytes: 64 * 1024 * 1024,
            max_spans: 250_000,
        }
    }
}

impl TraceLimits {
    /// The defaults: 64 KiB per recorded string, 64 MiB of attribute data per trace,
    /// 250,000 spans.
    pub fn new() -> Self {
        Self::default()
    }

    /// The longest string recorded, in bytes (at least 64); longer ones are cut with a
    /// marker.
    pub fn field_bytes(mut self, value: usize) -> Self {
        self.field_bytes = value.max(64);
        self
    }

    /// The attribute bytes one trace holds; past it, spans keep their structure (kind,
    /// name, times, status, line) but their attributes are replaced by `{"dropped": true}`.
    pub fn trace_bytes(mut self, value: u64) -> Self {
        self.trace_bytes = value;
        self
    }

    /// The most spans one trace holds; later spans are counted in `dropped.spans`.
    pub fn max_spans(mut self, value: usize) -> Self {
        self.max_spans = value.max(1);
        self
    }
}

/// What a span stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SpanKind {
    /// The whole run (the root).
    Run,
    /// The H1 region's blocks (execution unit 0).
    Preamble,
    /// One section entry.
    Section,
    /// One fanout arm (a section entry with an item).
    Arm,
    /// A child-level walk started by a `jump` to a child section.
    Walk,
    /// A `jump` (an instant).
    Jump,
    /// An `execute` chain.
    Execute,
    /// A `fanout` call; its arms are its children.
    Fanout,
    /// One model request (a prose round or an `infer`).
    ModelTurn,
    /// One tool call of a tool loop.
    ToolCall,
    /// One store operation (an instant).
    Store,
    /// A `log()` checkpoint (an instant).
    Log,
}

impl SpanKind {
    /// The kind's name in trace files.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Run => "run",
            Self::Preamble => "preamble",
            Self::Section => "section",
            Self::Arm => "arm",
            Self::Walk => "walk",
            Self::Jump => "jump",
            Self::Execute => "execute",
            Self::Fanout => "fanout",
            Self::ModelTurn => "model_turn",
            Self::ToolCall => "tool_call",
            Self::Store => "store",
            Self::Log => "log",
        }
    }
}

/// How a span ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SpanStatus {
    /// Still running.
    Running,
    /// Finished normally.
    Ok,
    /// Ended by an error (see [`Span::error`]).
    Error,
    /// Stopped before it finished: the run was cancelled, or a sibling fanout arm failed.
    Cancelled,
}

impl SpanStatus {
    /// The status's name in trace files.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Running => "running",
            Self::Ok => "ok",
            Self::Error => "error",
            Self::Cancelled => "cancelled",
        }
    }
}

/// One recorded span, as listeners and snapshots see it.
#[derive(Debug, Clone)]
pub struct Span {
    trace: TraceId,
    id: SpanId,
    parent: Option<SpanId>,
    kind: SpanKind,
    name: String,
    epoch: SystemTime,
    start: Duration,
    end: Option<Duration>,
    status: SpanStatus,
    line: Option<usize>,
    unit: Option<u64>,
    attrs: Map<String, Json>,
    error: Option<(String, String)>,
}

impl Span {
    /// The trace this span belongs to.
    pub fn trace_id(&self) -> TraceId {
        self.trace
    }

    /// The span's id.
    pub fn id(&self) -> SpanId {
        self.id
    }

    /// The parent span (`None` for the run).
    pub fn parent(&self) -> Option<SpanId> {
        self.parent
    }

    /// What the span stands for.
    pub fn kind(&self) -> SpanKind {
        self.kind
    }

    /// The span's name: a section heading, a model id, a tool name, a store path, …
    pub fn name(&self) -> &str {
        &self.name
    }

    /// When the span started, since the run started.
    pub fn start(&self) -> Duration {
        self.start
    }

    /// When the span ended, since the run started (`None` while it runs).
    pub fn end(&self) -> Option<Duration> {
        self.end
    }

    /// The wall-clock start.
    pub fn start_time(&self) -> SystemTime {
        self.epoch + self.start
    }

    /// The wall-clock end (`None` while it runs).
    pub fn end_time(&self) -> Option<SystemTime> {
        self.end.map(|end| self.epoch + end)
    }

    /// How the span ended.
    pub fn status(&self) -> SpanStatus {
        self.status
    }

    /// The 1-based line of the prompt (heading, prose block or Lua line) that caused it.
    pub fn line(&self) -> Option<usize> {
        self.line
    }

    /// The execution unit (`sys.id`) it ran in, for preamble, section and arm spans.
    pub fn unit(&self) -> Option<u64> {
        self.unit
    }

    /// The kind-specific attributes (see `trace.schema.json`).
    pub fn attrs(&self) -> &Map<String, Json> {
        &self.attrs
    }

    /// The error that ended the span: `(kind, message)`.
    pub fn error(&self) -> Option<(&str, &str)> {
        self.error.as_ref().map(|(k, m)| (k.as_str(), m.as_str()))
    }

    /// The span as it appears in a trace file's `spans` array.
    pub fn to_json(&self) -> Json {
        let micros = |d: Duration| u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        let mut span = Map::new();
        span.insert("id".into(), json!(self.id.to_string()));
        span.insert(
            "parent".into(),
            self.parent.map_or(Json::Null, |p| json!(p.to_string())),
        );
        span.insert("kind".into(), json!(self.kind.as_str()));
        span.insert("name".into(), json!(self.name));
        span.insert("start_us".into(), json!(micros(self.start)));
        span.insert(
            "end_us".into(),
            self.end.map_or(Json::Null, |e| json!(micros(e))),
        );
        span.insert("status".into(), json!(self.status.as_str()));
        span.insert("line".into(), self.line.map_or(Json::Null, |l| json!(l)));
        span.insert("unit".into(), self.unit.map_or(Json::Null, |u| json!(u)));
        span.insert("attrs".into(), Json::Object(self.attrs.clone()));
        if let Some((kind, message)) = &self.error {
            span.insert("error".into(), json!({"kind": kind, "message": message}));
        }
        Json::Object(span)
    }
}

/// Receives spans as they start and end (the live viewer, the OTLP exporter).
/// Implementations must be cheap and must not block: they run on the run's tasks.
pub trait SpanListener: Send + Sync {
    /// A span started (its end-time attributes are not there yet).
    fn span_started(&self, span: &Span);
    /// A span ended. The run span ends last.
    fn span_ended(&self, span: &Span);
}

/// Builds a [`Tracer`].
#[derive(Default)]
pub struct TraceBuilder {
    limits: TraceLimits,
    listeners: Vec<Arc<dyn SpanListener>>,
    source: Option<(String, String)>,
}

impl std::fmt::Debug for TraceBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TraceBuilder")
            .field("limits", &self.limits)
            .field("listeners", &self.listeners.len())
            .finish_non_exhaustive()
    }
}

impl TraceBuilder {
    /// Replaces the default bounds.
    pub fn limits(mut self, limits: TraceLimits) -> Self {
        self.limits = limits;
        self
    }

    /// Adds a listener that sees every span start and end.
    pub fn listener(mut self, listener: Arc<dyn SpanListener>) -> Self {
        self.listeners.push(listener);
        self
    }

    /// The prompt file (as the user named it) and its text, so a viewer can show the line
    /// each span points at. The text is redacted like every recorded string, but not cut.
    pub fn source(mut self, path: &str, text: &str) -> Self {
        self.source = Some((path.to_owned(), text.to_owned()));
        self
    }

    /// The tracer.
    pub fn build(self) -> Tracer {
        Tracer {
            inner: Arc::new(Recorder {
                trace: TraceId::random(),
                limits: self.limits,
                listeners: self.listeners,
                secrets: RwLock::new(Arc::from(Vec::new())),
                source: self.source,
                state: Mutex::new(State::default()),
            }),
        }
    }
}

/// Records the trace of one run. Cheap to clone; hand a clone to
/// [`RunConfig::tracer`](crate::RunConfig::tracer) and read [`Tracer::document`] after.
///
/// A tracer records one run: a second run handed the same tracer runs untraced (and the
/// document says so in `warnings`).
#[derive(Clone)]
pub struct Tracer {
    inner: Arc<Recorder>,
}

impl std::fmt::Debug for Tracer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tracer")
            .field("trace_id", &self.inner.trace)
            .finish_non_exhaustive()
    }
}

impl Default for Tracer {
    fn default() -> Self {
        Self::new()
    }
}

impl Tracer {
    /// A tracer with the default bounds, no listener and no source.
    pub fn new() -> Self {
        Self::builder().build()
    }

    /// A builder: bounds, listeners, the prompt's source.
    pub fn builder() -> TraceBuilder {
        TraceBuilder::default()
    }

    /// The trace id (also in every `traceparent` the run sends).
    pub fn trace_id(&self) -> TraceId {
        self.inner.trace
    }

    /// The run's status so far: `running` until the run ends.
    pub fn status(&self) -> SpanStatus {
        self.inner.lock().run_status.unwrap_or(SpanStatus::Running)
    }

    /// A snapshot of every span recorded so far, in start order.
    pub fn spans(&self) -> Vec<Span> {
        self.inner.lock().spans.clone()
    }

    /// The trace file: the document `trace.schema.json` describes.
    pub fn document(&self) -> Json {
        self.inner.document()
    }

    /// Starts recording a run; `None` when this tracer already recorded one.
    pub(crate) fn begin_run(
        &self,
        prompt: &crate::Prompt,
        execution: &str,
        input: &str,
        store: &crate::StoreRef,
    ) -> Option<SpanGuard> {
        {
            let mut state = self.inner.lock();
            if state.epoch.is_some() {
                state
                    .warnings
                    .push("a second run was handed this tracer and was not recorded".into());
                return None;
            }
            state.epoch = Some((SystemTime::now(), Instant::now()));
            state.run_info = Some(RunInfo {
                execution: execution.to_owned(),
                prompt: prompt.name().to_owned(),
                origin: prompt.origin().to_owned(),
            });
        }
        let root = Scope::root(Arc::clone(&self.inner));
        Some(
            root.start(SpanKind::Run, prompt.name(), None, None, |attrs| {
                attrs.text("execution", execution);
                attrs.text("prompt", prompt.name());
                attrs.text("origin", prompt.origin());
                attrs.text("input", input);
                let mut files = Map::new();
                for path in store.paths().unwrap_or_default() {
                    if let Ok(text) = store.read(&path) {
                        files.insert(path, Json::String(text));
                    }
                }
                attrs.json("store", &Json::Object(files));
            }),
        )
    }

    /// Adds a text every recorded string is redacted of (the gateway key).
    pub(crate) fn add_secret(&self, secret: &str) {
        self.inner.add_secret(secret);
    }

    /// Ends the run: spans still open are recorded as cancelled, then the run span ends
    /// with the result or the error.
    pub(crate) fn end_run(&self, span: SpanGuard, result: &Result<String, RunError>) {
        self.inner.close_open();
        match result {
            Ok(value) => {
                self.inner.finish_run(SpanStatus::Ok, Some(value), None);
                span.end(End::Ok, |attrs| attrs.text("result", value));
            }
            Err(error) => {
                let status = if error.is_cancelled() {
                    SpanStatus::Cancelled
                } else {
                    SpanStatus::Error
                };
                let kind = error.kind().as_str().to_owned();
                self.inner
                    .finish_run(status, None, Some((kind, error.to_string())));
                span.end(End::Error(error), |_| {});
            }
        }
    }
}

#[derive(Debug, Clone)]
struct RunInfo {
    execution: String,
    prompt: String,
    origin: String,
}

#[derive(Default)]
struct State {
    /// The run's start: wall clock and monotonic.
    epoch: Option<(SystemTime, Instant)>,
    run_info: Option<RunInfo>,
    /// `None` while the run runs.
    run_status: Option<SpanStatus>,
    run_result: Option<String>,
    run_error: Option<(String, String)>,
    spans: Vec<Span>,
    bytes: u64,
    dropped_spans: u64,
    dropped_attrs: u64,
    cut_fields: u64,
    warnings: Vec<String>,
}

pub(crate) struct Recorder {
    trace: TraceId,
    limits: TraceLimits,
    listeners: Vec<Arc<dyn SpanListener>>,
    secrets: RwLock<Arc<[String]>>,
    source: Option<(String, String)>,
    state: Mutex<State>,
}

/// A span's place in the recorder (its index), or `None` when it was not kept.
pub(crate) type Slot = Option<usize>;

impl Recorder {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn add_secret(&self, secret: &str) {
        if secret.is_empty() {
            return;
        }
        let mut secrets = self.secrets.write().unwrap_or_else(PoisonError::into_inner);
        if secrets.iter().any(|s| s == secret) {
            return;
        }
        let mut list: Vec<String> = secrets.iter().cloned().collect();
        list.push(secret.to_owned());
        *secrets = Arc::from(list);
    }

    pub(crate) fn attrs(&self) -> Attrs {
        Attrs::new(attrs::Rules {
            field_bytes: self.limits.field_bytes,
            secrets: Arc::clone(&self.secrets.read().unwrap_or_else(PoisonError::into_inner)),
        })
    }

    fn elapsed(state: &State) -> Duration {
        state
            .epoch
            .map_or(Duration::ZERO, |(_, start)| start.elapsed())
    }

    /// Records a span start; returns its slot (or `None` past `max_spans`) and notifies
    /// the listeners.
    pub(crate) fn start(
        &self,
        parent: Slot,
        kind: SpanKind,
        name: &str,
        line: Option<usize>,
        unit: Option<u64>,
        attrs: Attrs,
    ) -> Slot {
        let (name, _) = self.attrs_rules_text(name);
        let snapshot;
        let slot;
        {
            let mut state = self.lock();
            if state.spans.len() >= self.limits.max_spans {
                state.dropped_spans += 1;
                return None;
            }
            let attrs = Self::admit(&mut state, self.limits.trace_bytes, attrs, name.len());
            let epoch = state.epoch.map_or(SystemTime::UNIX_EPOCH, |(wall, _)| wall);
            let parent = parent.and_then(|p| state.spans.get(p)).map(|p| p.id);
            let span = Span {
                trace: self.trace,
                id: SpanId::random(),
                parent,
                kind,
                name,
                epoch,
                start: Self::elapsed(&state),
                end: None,
                status: SpanStatus::Running,
                line,
                unit,
                attrs,
                error: None,
            };
            snapshot = (!self.listeners.is_empty()).then(|| span.clone());
            slot = state.spans.len();
            state.spans.push(span);
        }
        if let Some(span) = snapshot {
            for listener in &self.listeners {
                listener.span_started(&span);
            }
        }
        Some(slot)
    }

    /// Records a span end with its end-time attributes.
    pub(crate) fn end(
        &self,
        slot: usize,
        status: SpanStatus,
        error: Option<(String, String)>,
        attrs: Attrs,
    ) {
        let snapshot;
        {
            let mut state = self.lock();
            let now = Self::elapsed(&state);
            let admitted = Self::admit(&mut state, self.limits.trace_bytes, attrs, 0);
            let error = error.map(|(kind, message)| (kind, self.attrs_rules_text(&message).0));
            let Some(span) = state.spans.get_mut(slot) else {
                return;
            };
            if span.end.is_some() {
                return;
            }
            span.end = Some(now);
            span.status = status;
            span.error = error;
            let ended_run = span.kind == SpanKind::Run;
            for (key, value) in admitted {
                span.attrs.insert(key, value);
            }
            snapshot = (!self.listeners.is_empty()).then(|| span.clone());
            if ended_run && state.run_status.is_none() {
                // The run's future was dropped before it ended.
                state.run_status = Some(status);
            }
        }
        if let Some(span) = snapshot {
            for listener in &self.listeners {
                listener.span_ended(&span);
            }
        }
    }

    /// The span's id, for `traceparent`.
    pub(crate) fn span_id(&self, slot: usize) -> Option<SpanId> {
        self.lock().spans.get(slot).map(|s| s.id)
    }

    pub(crate) fn trace_id(&self) -> TraceId {
        self.trace
    }

    /// Records the run's outcome (called when the run span ends).
    pub(crate) fn finish_run(
        &self,
        status: SpanStatus,
        result: Option<&str>,
        error: Option<(String, String)>,
    ) {
        let result = result.map(|r| self.attrs_rules_text(r).0);
        let error = error.map(|(kind, message)| (kind, self.attrs_rules_text(&message).0));
        let mut state = self.lock();
        state.run_status = Some(status);
        state.run_result = result;
        state.run_error = error;
    }

    /// Every span still running, ended as cancelled (the run is over).
    pub(crate) fn close_open(&self) {
        let open: Vec<usize> = {
            let state = self.lock();
            state
                .spans
                .iter()
                .enumerate()
                .filter(|(_, s)| s.end.is_none() && s.kind != SpanKind::Run)
                .map(|(i, _)| i)
                .collect()
        };
        for slot in open.into_iter().rev() {
            self.end(slot, SpanStatus::Cancelled, None, self.attrs());
        }
    }

    fn attrs_rules_text(&self, text: &str) -> (String, bool) {
        attrs::Rules {
            field_bytes: self.limits.field_bytes,
            secrets: Arc::clone(&self.secrets.read().unwrap_or_else(PoisonError::into_inner)),
        }
        .text(text)
    }

    /// Counts `attrs` against the trace budget; past it, they become `{"dropped": true}`.
    fn admit(state: &mut State, budget: u64, attrs: Attrs, extra: usize) -> Map<String, Json> {
        const SPAN_OVERHEAD: u64 = 160;
        let bytes = attrs.bytes as u64 + extra as u64 + SPAN_OVERHEAD;
        state.cut_fields += attrs.cut;
        if attrs.map.is_empty() {
            state.bytes += SPAN_OVERHEAD;
            return attrs.map;
        }
        if state.bytes.saturating_add(bytes) > budget {
            state.dropped_attrs += 1;
            state.bytes += SPAN_OVERHEAD;
            let mut map = Map::new();
            map.insert("dropped".into(), Json::Bool(true));
            return map;
        }
        state.bytes += bytes;
        attrs.map
    }

    fn document(&self) -> Json {
        let (source_path, source_text) = match &self.source {
            Some((path, text)) => {
                let rules = attrs::Rules {
                    field_bytes: usize::MAX,
                    secrets: Arc::clone(
                        &self.secrets.read().unwrap_or_else(PoisonError::into_inner),
                    ),
                };
                (json!(path), json!(rules.text(text).0))
            }
            None => (Json::Null, Json::Null),
        };
        let state = self.lock();
        let started_at = state.epoch.map_or(Json::Null, |(wall, _)| {
            json!(humantime::format_rfc3339_micros(wall).to_string())
        });
        let info = state.run_info.clone();
        let duration = state
            .spans
            .first()
            .and_then(|s| s.end)
            .map_or(Json::Null, |d| {
                json!(u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
            });
        let mut run = Map::new();
        run.insert(
            "execution".into(),
            json!(info.as_ref().map(|i| i.execution.as_str())),
        );
        run.insert(
            "prompt".into(),
            json!(info.as_ref().map(|i| i.prompt.as_str())),
        );
        run.insert(
            "origin".into(),
            json!(info.as_ref().map(|i| i.origin.as_str())),
        );
        run.insert(
            "status".into(),
            json!(state.run_status.unwrap_or(SpanStatus::Running).as_str()),
        );
        run.insert("duration_us".into(), duration);
        run.insert("result".into(), json!(state.run_result));
        run.insert(
            "error".into(),
            state
                .run_error
                .as_ref()
                .map_or(Json::Null, |(k, m)| json!({"kind": k, "message": m})),
        );
        json!({
            "format": FORMAT,
            "version": SCHEMA_VERSION,
            "trace_id": self.trace.to_string(),
            "started_at": started_at,
            "run": run,
            "source": {"path": source_path, "text": source_text},
            "limits": {
                "field_bytes": self.limits.field_bytes,
                "trace_bytes": self.limits.trace_bytes,
                "max_spans": self.limits.max_spans,
            },
            "dropped": {
                "spans": state.dropped_spans,
                "attributes": state.dropped_attrs,
                "cut_fields": state.cut_fields,
            },
            "warnings": state.warnings,
            "spans": state.spans.iter().map(Span::to_json).collect::<Vec<_>>(),
        })
    }
}
