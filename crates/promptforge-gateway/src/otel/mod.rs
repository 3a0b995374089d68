//! Request spans over OTLP: the gateway's half of a run trace.
//!
//! The runner sends a W3C `traceparent` on each model request naming its `chat` span;
//! the gateway continues that trace (or starts one for a request without it) with its own
//! spans ([`spans`]): `gateway.request`, `gateway.validate`, one `gateway.attempt` per
//! failover attempt, `gateway.queue_wait` for a dominion's admission and
//! `gateway.upstream` for the call itself, with `gen_ai.*` attributes (semantic
//! conventions [`SEMCONV_VERSION`], as the runner's export).
//!
//! Off unless the standard `OTEL_EXPORTER_OTLP_ENDPOINT` (the base; `/v1/traces` is
//! appended) or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (as is) is set, read as the runner
//! reads them; `OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none` turn it off again.
//! Off costs nothing: no [`Tracing`] exists, a request's trace carries no spans, and each
//! hook is one `Option` check. On, a request's spans are kept in one small recording and
//! queued together when its last holder lets go (the request, or the stream it relays);
//! a task on the main runtime exports them in batches through `opentelemetry-otlp`
//! (HTTP, protobuf bodies), so a slow or absent collector never slows a request. A full
//! queue drops the request's spans and counts them (logged at shutdown). No header value,
//! key or message content is ever exported, nor any error message (a refusal quotes the
//! request, an upstream's error may echo the prompt): a failed span carries its error code
//! as `error.type` and status description. Span names are fixed (`gateway.*`); the
//! upstream's `model` is exported only when shaped like a model id
//! ([`spans::MAX_MODEL_ID_BYTES`]).

pub(crate) mod spans;
pub(crate) mod traceparent;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use opentelemetry::{InstrumentationScope, KeyValue};
use opentelemetry_otlp::{WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{RandomIdGenerator, SpanData, SpanExporter};
use promptforge_env::Env;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

pub(crate) use spans::Spans;

/// The semantic-conventions version of every exported span (its scope's `schema_url`),
/// the runner's (`promptforge-trace`) too.
pub(crate) const SEMCONV_VERSION: &str = "1.42.0";

/// Requests whose spans may wait for export at once; past it they are dropped and counted.
pub(crate) const QUEUE_REQUESTS: usize = 1024;

/// Spans per export request at most.
pub(crate) const BATCH_SPANS: usize = 512;

/// How long spans wait before their batch is sent anyway.
pub(crate) const BATCH_DELAY: Duration = Duration::from_secs(1);

/// The export timeout when `OTEL_EXPORTER_OTLP[_TRACES]_TIMEOUT` does not say.
pub(crate) const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// What the environment asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct OtlpConfig {
    /// The traces endpoint, `…/v1/traces`.
    pub endpoint: String,
    /// The export timeout.
    pub timeout: Duration,
    /// `service.name` (`OTEL_SERVICE_NAME`, default `promptforge-gateway`).
    pub service_name: String,
}

impl OtlpConfig {
    /// The configuration `env` asks for: `Ok(None)` when export is off, an error naming
    /// the variable when it asks for something this build cannot do.
    pub(crate) fn from_env(env: &Env) -> Result<Option<Self>, String> {
        let var = |name: &str| {
            env.lookup(name)
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty())
        };
        let off = var("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true"));
        match var("OTEL_TRACES_EXPORTER").as_deref() {
            _ if off => return Ok(None),
            Some("none") => return Ok(None),
            None | Some("otlp") => {}
            Some(other) => {
                return Err(format!(
                    "OTEL_TRACES_EXPORTER={other} is not supported; use otlp (or none)"
                ));
            }
        }
        let Some(endpoint) = var("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").or_else(|| {
            var("OTEL_EXPORTER_OTLP_ENDPOINT")
                .map(|base| format!("{}/v1/traces", base.trim_end_matches('/')))
        }) else {
            return Ok(None);
        };
        let first = |names: [&'static str; 2]| {
            names
                .into_iter()
                .find_map(|name| var(name).map(|value| (name, value)))
        };
        if let Some((name, protocol)) = first([
            "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
            "OTEL_EXPORTER_OTLP_PROTOCOL",
        ]) && protocol != "http/protobuf"
        {
            return Err(format!(
                "{name}={protocol} is not supported; this build exports http/protobuf only"
            ));
        }
        match reqwest::Url::parse(&endpoint) {
            Ok(url) if matches!(url.scheme(), "http" | "https") => {}
            Ok(_) => {
                return Err(format!(
                    "the OTLP endpoint `{endpoint}` must be http or https"
                ));
            }
            Err(err) => {
                return Err(format!(
                    "the OTLP endpoint `{endpoint}` is not a URL: {err}"
                ));
            }
        }
        let timeout = match first([
            "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
            "OTEL_EXPORTER_OTLP_TIMEOUT",
        ]) {
            None => DEFAULT_TIMEOUT,
            Some((name, ms)) => ms
                .parse::<u64>()
                .map(|ms| Duration::from_millis(ms.clamp(1, 600_000)))
                .map_err(|_| format!("{name} must be milliseconds, not `{ms}`"))?,
        };
        Ok(Some(Self {
            endpoint,
            timeout,
            service_name: var("OTEL_SERVICE_NAME")
                .unwrap_or_else(|| "promptforge-gateway".to_owned()),
        }))
    }
}

/// The process's span export, shared by every request (in `routes::Ctx`).
#[derive(Debug)]
pub(crate) struct Tracing {
    /// `None` once the export is finishing.
    queue: Mutex<Option<mpsc::Sender<Vec<SpanData>>>>,
    /// Spans dropped because the queue was full or closed.
    dropped: AtomicU64,
    scope: InstrumentationScope,
    ids: RandomIdGenerator,
}

impl Tracing {
    /// Queues one request's spans (dropped and counted when the queue is full).
    fn queue(&self, spans: Vec<SpanData>) {
        let count = spans.len() as u64;
        let queue = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
        if queue.as_ref().is_none_or(|q| q.try_send(spans).is_err()) {
            self.dropped.fetch_add(count, Ordering::Relaxed);
        }
    }
}

/// A running export: the shared [`Tracing`] and the task that sends its spans.
#[derive(Debug)]
pub(crate) struct Export {
    tracing: Arc<Tracing>,
    worker: JoinHandle<Report>,
    timeout: Duration,
}

/// What an export did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Report {
    /// Spans the collector accepted.
    pub exported: u64,
    /// Spans in batches that could not be sent or were refused.
    pub failed: u64,
    /// Spans dropped because the queue was full.
    pub dropped: u64,
    /// The first few export errors.
    pub errors: Vec<String>,
}

impl Export {
    /// Starts exporting per `config` over OTLP/HTTP (protobuf), on the current tokio
    /// runtime.
    pub(crate) fn start(config: &OtlpConfig) -> Result<Self, String> {
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
        Ok(Self::over(exporter, config.timeout))
    }

    /// Exports through `exporter` (the OTLP one, or a test's), on the current runtime.
    pub(crate) fn over<E: SpanExporter + 'static>(exporter: E, timeout: Duration) -> Self {
        let (sender, receiver) = mpsc::channel(QUEUE_REQUESTS);
        let tracing = Arc::new(Tracing {
            queue: Mutex::new(Some(sender)),
            dropped: AtomicU64::new(0),
            scope: InstrumentationScope::builder("promptforge-gateway")
                .with_version(env!("CARGO_PKG_VERSION"))
                .with_schema_url(format!(
                    "https://opentelemetry.io/schemas/{SEMCONV_VERSION}"
                ))
                .build(),
            ids: RandomIdGenerator::default(),
        });
        Self {
            tracing,
            worker: tokio::spawn(export_loop(exporter, receiver)),
            timeout,
        }
    }

    /// The shared handle requests record through.
    pub(crate) fn tracing(&self) -> Arc<Tracing> {
        Arc::clone(&self.tracing)
    }

    /// Closes the queue, sends what is in it and stops; waits at most the export timeout
    /// plus a second. Spans of requests still running are dropped (and counted).
    pub(crate) async fn finish(self) -> Report {
        self.tracing
            .queue
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        let abort = self.worker.abort_handle();
        let wait = self.timeout + Duration::from_secs(1);
        let mut report = match tokio::time::timeout(wait, self.worker).await {
            Ok(Ok(report)) => report,
            Ok(Err(err)) => Report {
                errors: vec![format!("the export task stopped: {err}")],
                ..Report::default()
            },
            Err(_) => {
                abort.abort();
                Report {
                    errors: vec![format!(
                        "the collector did not take the spans within {}",
                        humantime::format_duration(wait)
                    )],
                    ..Report::default()
                }
            }
        };
        report.dropped = self.tracing.dropped.load(Ordering::Relaxed);
        report
    }
}

/// Sends queued spans in batches of at most [`BATCH_SPANS`], each at most
/// [`BATCH_DELAY`] after its first span arrived, until the queue is closed and empty.
async fn export_loop<E: SpanExporter>(
    exporter: E,
    mut receiver: mpsc::Receiver<Vec<SpanData>>,
) -> Report {
    let mut report = Report::default();
    while let Some(mut batch) = receiver.recv().await {
        let deadline = tokio::time::Instant::now() + BATCH_DELAY;
        while batch.len() < BATCH_SPANS {
            match tokio::time::timeout_at(deadline, receiver.recv()).await {
                Ok(Some(more)) => batch.extend(more),
                Ok(None) | Err(_) => break,
            }
        }
        let count = batch.len() as u64;
        match exporter.export(batch).await {
            Ok(()) => report.exported += count,
            Err(err) => {
                report.failed += count;
                tracing::warn!(error = %err, spans = count, "OTLP export failed");
                if report.errors.len() < 8 {
                    report.errors.push(err.to_string());
                }
            }
        }
    }
    let _ = exporter.shutdown();
    report
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::collections::HashMap;

    use super::*;

    fn config(pairs: &[(&str, &str)]) -> Result<Option<OtlpConfig>, String> {
        let env = Env::fixed(
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect::<HashMap<_, _>>(),
        );
        OtlpConfig::from_env(&env)
    }

    #[test]
    fn export_is_off_unless_an_endpoint_is_set() {
        assert_eq!(config(&[]).unwrap(), None);
        let on = config(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318/")])
            .unwrap()
            .unwrap();
        assert_eq!(on.endpoint, "http://127.0.0.1:4318/v1/traces");
        assert_eq!(on.timeout, DEFAULT_TIMEOUT);
        assert_eq!(on.service_name, "promptforge-gateway");
        let on = config(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://a:1"),
            ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://b:2/custom"),
            ("OTEL_EXPORTER_OTLP_TIMEOUT", "2500"),
            ("OTEL_SERVICE_NAME", "edge"),
        ])
        .unwrap()
        .unwrap();
        assert_eq!(on.endpoint, "http://b:2/custom");
        assert_eq!(on.timeout, Duration::from_millis(2500));
        assert_eq!(on.service_name, "edge");
        for off in [
            ("OTEL_SDK_DISABLED", "true"),
            ("OTEL_TRACES_EXPORTER", "none"),
        ] {
            assert_eq!(
                config(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://a:1"), off]).unwrap(),
                None
            );
        }
    }

    #[test]
    fn what_this_build_cannot_do_is_refused_by_name() {
        for (pairs, expected) in [
            (
                &[("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")][..],
                "OTEL_EXPORTER_OTLP_PROTOCOL=grpc",
            ),
            (
                &[("OTEL_EXPORTER_OTLP_TIMEOUT", "soon")][..],
                "OTEL_EXPORTER_OTLP_TIMEOUT",
            ),
            (
                &[("OTEL_TRACES_EXPORTER", "zipkin")][..],
                "OTEL_TRACES_EXPORTER=zipkin",
            ),
        ] {
            let mut pairs = pairs.to_vec();
            pairs.push(("OTEL_EXPORTER_OTLP_ENDPOINT", "http://a:1"));
            let err = config(&pairs).unwrap_err();
            assert!(err.contains(expected), "{err}");
        }
        let err = config(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "ftp://a")]).unwrap_err();
        assert!(err.contains("http or https"), "{err}");
    }
}
