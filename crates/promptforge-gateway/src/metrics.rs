//! Operations: `GET /metrics` (the OpenMetrics text format Prometheus scrapes, through
//! the Prometheus project's own `prometheus-client` crate), the per-request trace that
//! feeds it, and the `X-PromptForge-Overhead-Ms` / `X-PromptForge-Endpoint` headers.
//!
//! Every label value comes from the configuration or from a fixed set in the code (route
//! patterns, status codes, error codes, failover reasons), never from client input: a
//! request for an unknown model is counted under `model=""`, so series stay bounded by
//! the catalog.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use axum::extract::{MatchedPath, Request, State};
use axum::http::{HeaderName, HeaderValue, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use serde_json::Value;

use crate::state::AppState;

/// The header carrying the gateway's own time for a request, in milliseconds.
pub(crate) const OVERHEAD_HEADER: HeaderName = HeaderName::from_static("x-promptforge-overhead-ms");
/// The header naming the endpoint that answered (or was tried last).
pub(crate) const ENDPOINT_HEADER: HeaderName = HeaderName::from_static("x-promptforge-endpoint");

/// The route label of a request no route matched.
const UNMATCHED: &str = "unmatched";

/// Labels of `requests`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    route: String,
    model: String,
    endpoint: String,
    status: u16,
}

/// A route pattern.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RouteLabels {
    route: String,
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
                failovers,
                upstream_errors,
                tokens,
                local_up,
                local_respawns,
            }),
        }
    }

    /// One upstream attempt took `elapsed`.
    pub(crate) fn upstream_attempt(&self, endpoint: &str, elapsed: Duration) {
        self.inner
            .upstream_seconds
            .get_or_create(&EndpointLabels {
                endpoint: endpoint.to_owned(),
            })
            .observe(elapsed.as_secs_f64());
    }

    /// A request waited `elapsed` for a slot of `dominion`.
    pub(crate) fn admission_wait(&self, dominion: &str, elapsed: Duration) {
        self.inner
            .admission_wait_seconds
            .get_or_create(&DominionLabels {
                dominion: dominion.to_owned(),
            })
            .observe(elapsed.as_secs_f64());
    }

    /// A request for `model` left `endpoint` for the next one because of `reason`.
    pub(crate) fn failover(&self, model: &str, endpoint: &str, reason: &'static str) {
        self.inner
            .failovers
            .get_or_create(&FailoverLabels {
                model: model.to_owned(),
                endpoint: endpoint.to_owned(),
                reason,
            })
            .inc();
    }

    /// An attempt against `endpoint` failed with envelope code `code`.
    pub(crate) fn upstream_error(&self, endpoint: &str, code: &'static str) {
        self.inner
            .upstream_errors
            .get_or_create(&ErrorLabels {
                endpoint: endpoint.to_owned(),
                code,
            })
            .inc();
    }

    /// A local model's child was respawned.
    pub(crate) fn local_respawn(&self, model: &str) {
        self.inner
            .local_respawns
            .get_or_create(&ModelLabels {
                model: model.to_owned(),
            })
            .inc();
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

    /// The exposition: live gauges (dominions, local children) refreshed from `state`.
    pub(crate) fn render(&self, state: &AppState) -> String {
        let runtime = state.runtime();
        let inner = &self.inner;
        inner.dominion_in_flight.clear();
        inner.dominion_waiting.clear();
        for (id, admission) in runtime.admissions() {
            let (in_flight, waiting) = admission.load();
            let labels = DominionLabels {
                dominion: id.to_owned(),
            };
            inner
                .dominion_in_flight
                .get_or_create(&labels)
                .set(i64::from(in_flight));
            inner
                .dominion_waiting
                .get_or_create(&labels)
                .set(i64::try_from(waiting).unwrap_or(i64::MAX));
        }
        inner.local_up.clear();
        if let Some(local) = runtime.local() {
            for (name, model) in local.models() {
                inner
                    .local_up
                    .get_or_create(&ModelLabels {
                        model: name.to_owned(),
                    })
                    .set(i64::from(!model.child.is_dead()));
            }
        }
        let mut out = String::new();
        if let Err(err) = prometheus_client::encoding::text::encode(&mut out, &inner.registry) {
            tracing::error!(error = %err, "cannot encode metrics");
        }
        out
    }
}

/// What the handlers and the relay learn about one request, read by [`observe`] once the
/// response head is ready.
#[derive(Debug, Clone, Default)]
pub(crate) struct Trace {
    inner: Arc<Mutex<TraceData>>,
}

#[derive(Debug, Default)]
struct TraceData {
    model: Option<String>,
    endpoint: Option<String>,
    upstream: Duration,
    queue: Duration,
}

impl Trace {
    fn with<R>(&self, f: impl FnOnce(&mut TraceData) -> R) -> R {
        f(&mut self.inner.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// The configured model the request resolved to.
    pub(crate) fn set_model(&self, model: &str) {
        self.with(|t| t.model = Some(model.to_owned()));
    }

    /// The endpoint being tried (the last one set answered, or failed last).
    pub(crate) fn set_endpoint(&self, endpoint: &str) {
        self.with(|t| t.endpoint = Some(endpoint.to_owned()));
    }

    /// Time spent waiting on an upstream.
    pub(crate) fn add_upstream(&self, elapsed: Duration) {
        self.with(|t| t.upstream += elapsed);
    }

    /// Time spent waiting in a dominion queue.
    pub(crate) fn add_queue(&self, elapsed: Duration) {
        self.with(|t| t.queue += elapsed);
    }
}

/// Middleware around every route: hands each request a [`Trace`], and once the response
/// head is ready counts it, observes the latency histograms and sets
/// `X-PromptForge-Overhead-Ms` (every response) and `X-PromptForge-Endpoint` (when an
/// endpoint was tried).
pub(crate) async fn observe(
    State(state): State<AppState>,
    mut request: Request,
    next: Next,
) -> Response {
    let start = Instant::now();
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or(UNMATCHED, MatchedPath::as_str)
        .to_owned();
    let trace = Trace::default();
    request.extensions_mut().insert(trace.clone());
    let response = next.run(request).await;
    record(&state, route, start, &trace, response)
}

/// The value of [`OVERHEAD_HEADER`] for `overhead`: milliseconds with three decimals.
pub(crate) fn overhead_ms(overhead: Duration) -> String {
    format!("{:.3}", overhead.as_secs_f64() * 1000.0)
}

/// What [`observe`] does once the response head is ready, for a request of route
/// pattern `route` that arrived at `start`: counts it, observes the latency histograms
/// and sets the overhead and endpoint headers. The direct chat dispatch (see
/// [`crate::routes::App`]) calls it as the middleware does.
pub(crate) fn record(
    state: &AppState,
    route: String,
    start: Instant,
    trace: &Trace,
    mut response: Response,
) -> Response {
    let total = start.elapsed();
    let data = std::mem::take(&mut *trace.inner.lock().unwrap_or_else(PoisonError::into_inner));
    let overhead = total.saturating_sub(data.upstream + data.queue);
    let headers = response.headers_mut();
    if let Ok(value) = HeaderValue::from_str(&overhead_ms(overhead)) {
        headers.insert(OVERHEAD_HEADER, value);
    }
    if let Some(endpoint) = &data.endpoint
        && let Ok(value) = HeaderValue::from_str(endpoint)
    {
        headers.insert(ENDPOINT_HEADER, value);
    }
    let metrics = state.metrics();
    let status = response.status().as_u16();
    metrics
        .inner
        .requests
        .get_or_create(&RequestLabels {
            route: route.clone(),
            model: data.model.unwrap_or_default(),
            endpoint: data.endpoint.unwrap_or_default(),
            status,
        })
        .inc();
    let labels = RouteLabels { route };
    metrics
        .inner
        .request_seconds
        .get_or_create(&labels)
        .observe(total.as_secs_f64());
    metrics
        .inner
        .overhead_seconds
        .get_or_create(&labels)
        .observe(overhead.as_secs_f64());
    response
}

/// `GET /metrics`.
pub(crate) async fn scrape(State(state): State<AppState>) -> Response {
    let body = state.metrics().render(&state);
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/openmetrics-text; version=1.0.0; charset=utf-8"),
        )],
        body,
    )
        .into_response()
}

/// Watches a relayed stream's chunks for `usage` and counts the last one seen when the
/// stream is gone (some servers repeat a running total in every chunk). Clones share one
/// tally, counted once.
#[derive(Debug, Clone)]
pub(crate) struct UsageTap {
    inner: Arc<UsageTally>,
}

#[derive(Debug)]
struct UsageTally {
    metrics: Metrics,
    model: String,
    last: Mutex<Option<Value>>,
}

impl UsageTap {
    /// A tap counting into `metrics` under `model`.
    pub(crate) fn new(metrics: Metrics, model: &str) -> Self {
        Self {
            inner: Arc::new(UsageTally {
                metrics,
                model: model.to_owned(),
                last: Mutex::new(None),
            }),
        }
    }

    /// Looks at one relayed chunk (JSON text).
    pub(crate) fn observe(&self, chunk: &str) {
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
        if let Some(usage) = last {
            self.metrics.usage(&self.model, &usage);
        }
    }
}
