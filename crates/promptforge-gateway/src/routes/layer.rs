//! The one layer function around every route, for the router and the direct dispatch
//! alike, in this order (outermost first):
//!
//! 1. a fresh [`Trace`] (with the request's spans when OTLP export is on and the caller
//!    may use the route: under the caller's `traceparent`, or a new trace) and the start
//!    time; once the response head is ready, the metrics (counted under the route
//!    pattern), the request span's end and the `X-PromptForge-Overhead-Ms` /
//!    `X-PromptForge-Endpoint` headers;
//! 2. the race against the end of the shutdown drain (503 `shutting_down`);
//! 3. a declared `Content-Length` over [`MAX_BODY_BYTES`] refused with 413 before a byte
//!    is read;
//! 4. the constant-time bearer check (401), unless the route is open;
//! 5. the body limit for the body extractor, then the handler;
//! 6. a body of known length gets its `Content-Length`.

use std::future::Future;
use std::time::{Duration, Instant};

use axum::extract::{DefaultBodyLimit, Request};
use axum::http::{HeaderMap, HeaderName, HeaderValue, header};
use axum::response::{IntoResponse, Response};

use super::error::{ApiError, ErrorCode, shutting_down};
use super::{Ctx, MAX_BODY_BYTES};
use crate::metrics::Trace;
use crate::secret::{Secret, SecretMatch};

/// The header carrying the gateway's own time for a request, in milliseconds.
pub(crate) const OVERHEAD_HEADER: HeaderName = HeaderName::from_static("x-promptforge-overhead-ms");
/// The header naming the endpoint that answered (or was tried last).
pub(crate) const ENDPOINT_HEADER: HeaderName = HeaderName::from_static("x-promptforge-endpoint");

/// Who may call a route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Access {
    /// Anyone (`GET /health`).
    Open,
    /// Only a caller with the gateway's bearer key.
    Bearer,
}

/// Runs `handler` for `request` inside the steps of the module documentation; `route` is
/// the route pattern the request is counted under.
pub(crate) async fn around<F, Fut>(
    ctx: &Ctx,
    route: &'static str,
    access: Access,
    mut request: Request,
    handler: F,
) -> Response
where
    F: FnOnce(Request, Trace) -> Fut,
    Fut: Future<Output = Response>,
{
    let start = Instant::now();
    // Spans only for callers who may use the route: an unauthenticated request cannot
    // put spans into a trace (checked here only when export is on).
    let spans = ctx
        .tracing
        .as_ref()
        .filter(|_| access == Access::Open || bearer_matches(&ctx.api_key, request.headers()))
        .and_then(|tracing| tracing.request(request.headers(), request.method(), route));
    let trace = Trace::new(spans);
    let mut shutdown = ctx.shutdown.clone();
    let guarded = async {
        if let Some(refusal) = declared_oversize(request.headers()) {
            return refusal.into_response();
        }
        if access == Access::Bearer && !bearer_matches(&ctx.api_key, request.headers()) {
            return ApiError::unauthorized().into_response();
        }
        DefaultBodyLimit::max(MAX_BODY_BYTES).apply(&mut request);
        handler(request, trace.clone()).await
    };
    let mut response = tokio::select! {
        response = guarded => response,
        () = shutdown.fired() => shutting_down().into_response(),
    };
    let total = start.elapsed();
    let data = trace.take();
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
    if !headers.contains_key(header::CONTENT_LENGTH)
        && let Some(size) = http_body::Body::size_hint(response.body()).exact()
    {
        response
            .headers_mut()
            .insert(header::CONTENT_LENGTH, HeaderValue::from(size));
    }
    let status = response.status().as_u16();
    if let Some(spans) = trace.spans() {
        spans.answered(status);
    }
    ctx.metrics.request(route, data, status, total, overhead);
    response
}

/// The value of [`OVERHEAD_HEADER`] for `overhead`: milliseconds with three decimals.
pub(crate) fn overhead_ms(overhead: Duration) -> String {
    format!("{:.3}", overhead.as_secs_f64() * 1000.0)
}

/// The 413 for a declared `Content-Length` over [`MAX_BODY_BYTES`], if `headers` has one
/// (an undeclared, chunked body is cut at the cap while reading).
fn declared_oversize(headers: &HeaderMap) -> Option<ApiError> {
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    match declared {
        Some(length) if length > MAX_BODY_BYTES as u64 => Some(ApiError::new(
            ErrorCode::PayloadTooLarge,
            format!(
                "the request body declares {length} bytes; the limit is {MAX_BODY_BYTES} bytes"
            ),
        )),
        _ => None,
    }
}

/// Whether `headers` carry `Authorization: Bearer <key>` (constant time).
fn bearer_matches(key: &Secret, headers: &HeaderMap) -> bool {
    let presented = headers
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| {
            let (scheme, token) = value.split_once(' ')?;
            scheme
                .eq_ignore_ascii_case("bearer")
                .then_some(token.trim())
        });
    presented.is_some_and(|token| key.matches(token.as_bytes()))
}
