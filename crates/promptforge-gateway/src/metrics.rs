//! Operations: the Prometheus registry behind `GET /metrics` (the OpenMetrics text format,
//! through the Prometheus project's own `prometheus-client` crate) and the per-request
//! [`Trace`] that feeds it and the overhead headers.
//!
//! Failover reports to it through [`RequestObserver`] (the relay's narrow
//! [`Observer`] interface); a relayed stream's chunks reach it through [`UsageTap`].
//!
//! Every label value comes from the configuration or from a fixed set in the code (route
//! patterns, status codes, error codes, failover reasons), never from client input: a
//! request for an unknown model is counted under `model=""`, so series stay bounded by
//! the catalog.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use serde_json::Value;

use crate::admission::AdmissionError;
use crate::admission::shared::Shared;
use crate::otel::Spans;
use crate::plan::{Endpoint, Plan};
use crate::relay::AttemptFailure;
use crate::relay::failover::{FailoverReason, Observer};
use crate::relay::sse::ChunkTap;

/// Labels of `requests`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    route: &'static str,
    model: String,
    endpoint: String,
    status: u16,
}

/// A route pattern.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RouteLabels {
    route: &'static str,
}

/// The dominion store's address (never with credentials).
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StoreLabels {
    url: String,
}

/// An endpoint id.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct EndpointLabels {
    endpoint: String,
}

/// A dominion id.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DominionLabels {
    dominion: String,
}

/// A model name.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ModelLabels {
    model: String,
}

/// One failover: the model, the endpoint left behind, and why.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FailoverLabels {
    model: String,
    endpoint: String,
    reason: &'static str,
}

/// An upstream error by endpoint and envelope code.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ErrorLabels {
    endpoint: String,
    code: &'static str,
}

/// Token usage by model and kind (`prompt`, `completion`).
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TokenLabels {
    model: String,
    kind: &'static str,
}

type Histograms<L> = Family<L, Histogram, fn() -> Histogram>;

/// Latency buckets in seconds: 0.1 ms to about 105 s.
fn latency_histogram() -> Histogram {
    Histogram::new(prometheus_client::metrics::histogram::exponential_buckets(
        0.0001, 4.0, 11,
    ))
}

/// Overhead buckets in seconds: 10 µs to about 2.6 s.
fn overhead_histogram() -> Histogram {
    Histogram::new(prometheus_client::metrics::histogram::exponential_buckets(
        0.00001, 4.0, 10,
    ))
}

#[derive(Debug)]
struct Inner {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    request_seconds: Histograms<RouteLabels>,
    overhead_seconds: Histograms<RouteLabels>,
    upstream_seconds: Histograms<EndpointLabels>,
    admission_wait_seconds: Histograms<DominionLabels>,
    dominion_in_flight: Family<DominionLabels, Gauge>,
    dominion_waiting: Family<DominionLabels, Gauge>,
    dominion_global_in_flight: Family<DominionLabels, Gauge>,
    dominion_global_waiting: Family<DominionLabels, Gauge>,
    store_up: Family<StoreLabels, Gauge>,
    store_replicas: Family<StoreLabels, Gauge>,
    store_outages: Family<StoreLabels, Counter>,
    failovers: Family<FailoverLabels, Counter>,
    upstream_errors: Family<ErrorLabels, Counter>,
    tokens: Family<TokenLabels, Counter>,
    local_up: Family<ModelLabels, Gauge>,
    local_respawns: Family<ModelLabels, Counter>,
}

/// The gateway's metrics (cheap to clone; one set per process, kept across profile
/// switches).
#[derive(Debug, Clone)]
pub(crate) struct Metrics {
    inner: Arc<Inner>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// A fresh registry with every family registered under `promptforge_gateway_`.
    pub(crate) fn new() -> Self {
        let mut registry = Registry::with_prefix("promptforge_gateway");
        let requests = Family::<RequestLabels, Counter>::default();
        let request_seconds: Histograms<RouteLabels> =
            Family::new_with_constructor(latency_histogram);
        let overhead_seconds: Histograms<RouteLabels> =
            Family::new_with_constructor(overhead_histogram);
        let upstream_seconds: Histograms<EndpointLabels> =
            Family::new_with_constructor(latency_histogram);
        let admission_wait_seconds: Histograms<DominionLabels> =
            Family::new_with_constructor(latency_histogram);
        let dominion_in_flight = Family::<DominionLabels, Gauge>::default();
        let dominion_waiting = Family::<DominionLabels, Gauge>::default();
        let dominion_global_in_flight = Family::<DominionLabels, Gauge>::default();
        let dominion_global_waiting = Family::<DominionLabels, Gauge>::default();
        let store_up = Family::<StoreLabels, Gauge>::default();
        let store_replicas = Family::<StoreLabels, Gauge>::default();
        let store_outages = Family::<StoreLabels, Counter>::default();
        let failovers = Family::<FailoverLabels, Counter>::default();
        let upstream_errors = Family::<ErrorLabels, Counter>::default();
        let tokens = Family::<TokenLabels, Counter>::default();
        let local_up = Family::<ModelLabels, Gauge>::default();
        let local_respawns = Family::<ModelLabels, Counter>::default();
        registry.register(
            "requests",
            "Requests answered, by route pattern, model, endpoint that answered and HTTP status",
            requests.clone(),
        );
        registry.register(
            "request_duration_seconds",
            "Time from the request's arrival to its response head",
            request_seconds.clone(),
        );
        registry.register(
            "overhead_seconds",
            "The gateway's own time per request: total minus upstream wait and dominion queue wait",
            overhead_seconds.clone(),
        );
        registry.register(
            "upstream_duration_seconds",
            "One upstream attempt: from sending to the whole body (buffered) or the first chunk (stream)",
            upstream_seconds.clone(),
        );
        registry.register(
            "dominion_admission_wait_seconds",
            "Time a request waited for a dominion slot",
            admission_wait_seconds.clone(),
        );
        registry.register(
            "dominion_in_flight",
            "Requests holding a dominion slot",
            dominion_in_flight.clone(),
        );
        registry.register(
            "dominion_waiting",
            "Requests waiting in a dominion's queue",
            dominion_waiting.clone(),
        );
        registry.register(
            "dominion_global_in_flight",
            "Slots held by every replica of a dominion shared through the dominion store (as of this replica's last store round trip)",
            dominion_global_in_flight.clone(),
        );
        registry.register(
            "dominion_global_waiting",
            "Requests of every replica waiting in a shared dominion's queue (as of this replica's last store round trip)",
            dominion_global_waiting.clone(),
        );
        registry.register(
            "dominion_store_up",
            "Whether the dominion store answers (1, shared mode) or not (0, degraded mode)",
            store_up.clone(),
        );
        registry.register(
            "dominion_store_replicas",
            "Live gateway replicas sharing the dominion store, as the last heartbeat counted them",
            store_replicas.clone(),
        );
        registry.register(
            "dominion_store_outages",
            "Times the dominion store became unreachable (a switch to degraded mode)",
            store_outages.clone(),
        );
        registry.register(
            "failovers",
            "Requests moved from an endpoint to the next one, by model, endpoint left and reason",
            failovers.clone(),
        );
        registry.register(
            "upstream_errors",
            "Failed upstream attempts by endpoint and error code",
            upstream_errors.clone(),
        );
        registry.register(
            "tokens",
            "Tokens the upstream reported in usage, by model and kind (prompt, completion)",
            tokens.clone(),
        );
        registry.register(
            "local_children_up",
            "Whether a local model's llama-server child is running (1) or not (0)",
            local_up.clone(),
        );
        registry.register(
            "local_respawns",
            "Local children respawned after they died",
            local_respawns.clone(),
        );
        Self {
            inner: Arc::new(Inner {
                registry,
                requests,
                request_seconds,
                overhead_seconds,
                upstream_seconds,
                admission_wait_seconds,
                dominion_in_flight,
                dominion_waiting,
                dominion_global_in_flight,
                dominion_global_waiting,
                store_up,
                store_replicas,
                store_outages,
                failovers,
                upstream_errors,
                tokens,
                local_up,
                local_respawns,
            }),
        }
    }

    /// Adds the `usage` object of an upstream answer (`prompt_tokens`,
    /// `completion_tokens`; absent or non-numeric fields count nothing).
    pub(crate) fn usage(&self, model: &str, usage: &Value) {
        for (field, kind) in [
            ("prompt_tokens", "prompt"),
            ("completion_tokens", "completion"),
        ] {
            if let Some(n) = usage.get(field).and_then(Value::as_u64) {
                self.inner
                    .tokens
                    .get_or_create(&TokenLabels {
                        model: model.to_owned(),
                        kind,
                    })
                    .inc_by(n);
            }
        }
    }

    /// One answered request: counted under its route pattern, model, endpoint and status,
    /// its total time and the gateway's own share (`overhead`) observed.
    pub(crate) fn request(
        &self,
        route: &'static str,
        trace: TraceData,
        status: u16,
        total: Duration,
        overhead: Duration,
    ) {
        let inner = &self.inner;
        inner
            .requests
            .get_or_create(&RequestLabels {
                route,
                model: trace.model.as_deref().unwrap_or_default().to_owned(),
                endpoint: trace.endpoint.as_deref().unwrap_or_default().to_owned(),
                status,
            })
            .inc();
        let labels = RouteLabels { route };
        inner
            .request_seconds
            .get_or_create(&labels)
            .observe(total.as_secs_f64());
        inner
            .overhead_seconds
            .get_or_create(&labels)
            .observe(overhead.as_secs_f64());
    }

    /// The exposition: live gauges (dominions, local children, the dominion store)
    /// refreshed from `plan` and `shared`.
    pub(crate) fn render(&self, plan: &Plan, shared: Option<&Shared>) -> String {
        let inner = &self.inner;
        inner.dominion_in_flight.clear();
        inner.dominion_waiting.clear();
        inner.dominion_global_in_flight.clear();
        inner.dominion_global_waiting.clear();
        if let Some(shared) = shared {
            let labels = StoreLabels {
                url: shared.status().url,
            };
            inner
                .store_up
                .get_or_create(&labels)
                .set(i64::from(shared.is_up()));
            inner
                .store_replicas
                .get_or_create(&labels)
                .set(i64::from(shared.replicas()));
            let outages = inner.store_outages.get_or_create(&labels);
            let seen = outages.get();
            if shared.outages() > seen {
                outages.inc_by(shared.outages() - seen);
            }
        }
        for dominion in plan.dominions() {
            let Some(admission) = &dominion.admission else {
                continue;
            };
            let (in_flight, waiting) = admission.load();
            let labels = DominionLabels {
                dominion: dominion.config.id.clone(),
            };
            inner
                .dominion_in_flight
                .get_or_create(&labels)
                .set(i64::from(in_flight));
            inner
                .dominion_waiting
                .get_or_create(&labels)
                .set(i64::try_from(waiting).unwrap_or(i64::MAX));
            if let Some(global) = admission.global() {
                inner
                    .dominion_global_in_flight
                    .get_or_create(&labels)
                    .set(i64::from(global.in_flight));
                inner
                    .dominion_global_waiting
                    .get_or_create(&labels)
                    .set(i64::from(global.waiting));
            }
        }
        inner.local_up.clear();
        for local in plan.local() {
            inner
                .local_up
                .get_or_create(&ModelLabels {
                    model: local.name.clone(),
                })
                .set(i64::from(!local.running.child.is_dead()));
        }
        let mut out = String::new();
        if let Err(err) = prometheus_client::encoding::text::encode(&mut out, &inner.registry) {
            tracing::error!(error = %err, "cannot encode metrics");
        }
        out
    }
}

/// What the handlers and the relay learn about one request, read once its response head
/// is ready, and the request's spans when OTLP export is on (cheap to clone: clones share
/// the data).
#[derive(Debug, Clone, Default)]
pub(crate) struct Trace {
    inner: Arc<Mutex<TraceData>>,
    spans: Option<Spans>,
}

/// One request's trace, taken when its response head is ready.
#[derive(Debug, Default)]
pub(crate) struct TraceData {
    /// The configured model the request resolved to.
    pub model: Option<Arc<str>>,
    /// The endpoint that answered, or was tried last.
    pub endpoint: Option<Arc<str>>,
    /// Time spent waiting on upstreams.
    pub upstream: Duration,
    /// Time spent waiting in dominion queues.
    pub queue: Duration,
}

impl Trace {
    /// A fresh trace recording into `spans` (`None`: export is off, nothing is recorded).
    pub(crate) fn new(spans: Option<Spans>) -> Self {
        Self {
            inner: Arc::default(),
            spans,
        }
    }

    /// The request's spans, when export is on.
    pub(crate) fn spans(&self) -> Option<&Spans> {
        self.spans.as_ref()
    }

    fn with<R>(&self, f: impl FnOnce(&mut TraceData) -> R) -> R {
        f(&mut self.inner.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// The configured model the request resolved to.
    pub(crate) fn set_model(&self, model: &Arc<str>) {
        self.with(|t| t.model = Some(model.clone()));
    }

    /// Takes what was learnt (once the response head is ready).
    pub(crate) fn take(&self) -> TraceData {
        self.with(std::mem::take)
    }
}

/// Failover's events for one request: into the process's metrics and the request's trace.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RequestObserver<'a> {
    /// The process's metrics.
    pub metrics: &'a Metrics,
    /// The request's trace.
    pub trace: &'a Trace,
}

impl Observer for RequestObserver<'_> {
    fn trying(&self, endpoint: &Endpoint) {
        self.trace.with(|t| t.endpoint = Some(endpoint.id.clone()));
        if let Some(spans) = self.trace.spans() {
            spans.trying(endpoint);
        }
    }

    fn queued(&self, dominion: &str, waited: Duration, outcome: Result<(), &AdmissionError>) {
        self.trace.with(|t| t.queue += waited);
        if let Some(spans) = self.trace.spans() {
            spans.queued(dominion, waited, outcome);
        }
        self.metrics
            .inner
            .admission_wait_seconds
            .get_or_create(&DominionLabels {
                dominion: dominion.to_owned(),
            })
            .observe(waited.as_secs_f64());
    }

    fn attempted(&self, endpoint: &Endpoint, elapsed: Duration) {
        self.trace.with(|t| t.upstream += elapsed);
        if let Some(spans) = self.trace.spans() {
            spans.attempted(endpoint, elapsed);
        }
        self.metrics
            .inner
            .upstream_seconds
            .get_or_create(&EndpointLabels {
                endpoint: endpoint.id.to_string(),
            })
            .observe(elapsed.as_secs_f64());
    }

    fn failed(&self, endpoint: &Endpoint, failure: &AttemptFailure) {
        if let Some(spans) = self.trace.spans() {
            spans.failed(failure);
        }
        self.metrics
            .inner
            .upstream_errors
            .get_or_create(&ErrorLabels {
                endpoint: endpoint.id.to_string(),
                code: failure.kind.label(),
            })
            .inc();
    }

    fn failover(&self, model: &str, endpoint: &Endpoint, reason: FailoverReason) {
        if let Some(spans) = self.trace.spans() {
            spans.failover(reason);
        }
        self.metrics
            .inner
            .failovers
            .get_or_create(&FailoverLabels {
                model: model.to_owned(),
                endpoint: endpoint.id.to_string(),
                reason: reason.label(),
            })
            .inc();
    }

    fn respawned(&self, model: &str) {
        if let Some(spans) = self.trace.spans() {
            spans.respawned();
        }
        self.metrics
            .inner
            .local_respawns
            .get_or_create(&ModelLabels {
                model: model.to_owned(),
            })
            .inc();
    }
}

/// Watches a relayed stream's chunks for `usage` and counts the last one seen when the
/// stream is gone (some servers repeat a running total in every chunk), into the metrics
/// and, when export is on, the request's upstream span (which then ends with the stream).
/// Clones share one tally, counted once.
#[derive(Debug, Clone)]
pub(crate) struct UsageTap {
    inner: Arc<UsageTally>,
}

#[derive(Debug)]
struct UsageTally {
    metrics: Metrics,
    model: String,
    last: Mutex<Option<Value>>,
    spans: Option<Spans>,
}

impl UsageTap {
    /// A tap counting into `metrics` under `model`, and into `spans` when export is on.
    pub(crate) fn new(metrics: Metrics, model: &str, spans: Option<Spans>) -> Self {
        Self {
            inner: Arc::new(UsageTally {
                metrics,
                model: model.to_owned(),
                last: Mutex::new(None),
                spans,
            }),
        }
    }
}

impl ChunkTap for UsageTap {
    fn observe(&self, chunk: &str) {
        if !chunk.contains("\"usage\"") {
            return;
        }
        if let Ok(Value::Object(mut map)) = serde_json::from_str::<Value>(chunk)
            && let Some(usage) = map.remove("usage").filter(Value::is_object)
        {
            *self
                .inner
                .last
                .lock()
                .unwrap_or_else(PoisonError::into_inner) = Some(usage);
        }
    }
}

impl Drop for UsageTally {
    fn drop(&mut self) {
        let last = self
            .last
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(spans) = &self.spans {
            spans.answer(None, last.as_ref());
            spans.stream_ended();
        }
        if let Some(usage) = last {
            self.metrics.usage(&self.model, &usage);
        }
    }
}
