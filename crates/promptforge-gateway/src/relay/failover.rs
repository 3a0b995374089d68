//! Failover across a model's endpoints.
//!
//! The endpoints are tried in the configured order. Until the first byte of an answer is
//! committed to the client (a buffered request: the whole upstream body has been read; a
//! stream: the first upstream body chunk has arrived; on the last endpoint a stream is
//! committed at its response head, as there is nothing left to try), a transport failure
//! or timeout, a 5xx or a 429 moves the request to the next endpoint; any other error (a
//! 4xx the caller caused) is returned at once. When every endpoint failed, the caller gets the
//! last error. An endpoint that failed that way is skipped for its `failover_cooldown`
//! unless no endpoint after it is out of cooldown (so a cooldown alone never turns a
//! request away). Each attempt passes its own endpoint's dominion admission: an endpoint
//! that is not the last has to have a free slot right now (a busy one is passed over, no
//! cooldown); the last waits in its dominion's queue as its policy says.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use futures::StreamExt;

use crate::admission::{self, Permit};
use crate::error::{ApiError, ErrorCode};
use crate::metrics::{Metrics, Trace};
use crate::relay::sse::UpstreamBytes;
use crate::relay::upstream::too_large;
use crate::relay::{
    AttemptError, Capped, Payload, UpstreamCall, h1, read_capped, send_attempt, timeout_error,
    transport_error,
};
use crate::state::{Route, Upstream};

/// When each endpoint that failed may be tried again (one table per process, keyed by
/// endpoint id, so a profile switch keeps it).
#[derive(Debug, Default)]
pub(crate) struct Cooldowns {
    until: Mutex<HashMap<String, Instant>>,
}

impl Cooldowns {
    fn cooling(&self, endpoint: &str, now: Instant) -> bool {
        let guard = self.until.lock().unwrap_or_else(PoisonError::into_inner);
        !guard.is_empty() && guard.get(endpoint).is_some_and(|until| *until > now)
    }

    fn failed(&self, endpoint: &str, cooldown: Duration) {
        if let Some(until) = Instant::now().checked_add(cooldown) {
            self.until
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(endpoint.to_owned(), until);
        }
    }

    fn succeeded(&self, endpoint: &str) {
        let mut guard = self.until.lock().unwrap_or_else(PoisonError::into_inner);
        if !guard.is_empty() {
            guard.remove(endpoint);
        }
    }
}

/// The request being routed.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Attempt<'a> {
    /// The configured model name (for metric labels).
    pub model: &'a str,
    /// Path below the base URL.
    pub path: &'a str,
    /// The JSON body (the same for every endpoint: the backend's model string is the
    /// model's, not the endpoint's).
    pub body: Payload<'a>,
    /// A streaming request.
    pub streaming: bool,
    /// Map 404/405/501 to `model_unavailable`.
    pub capability_route: bool,
    /// The caller's fair-scheduling label (`X-PromptForge-Client`).
    pub client: Option<&'a str>,
}

/// Where the per-request observations go.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Observers<'a> {
    /// The process's metrics.
    pub metrics: &'a Metrics,
    /// The process's cooldown table.
    pub cooldowns: &'a Cooldowns,
    /// The request's trace.
    pub trace: &'a Trace,
}

/// What the answering endpoint sent.
pub(crate) enum Answer {
    /// A buffered request: the whole body as received (its slot is already released);
    /// the route parses it (see [`parse_json_object`]).
    Buffered(Vec<u8>),
    /// A stream: the body from its first chunk on, and the slot it holds.
    Stream(UpstreamBytes, Option<Permit>),
}

impl std::fmt::Debug for Answer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Buffered(bytes) => f.debug_tuple("Buffered").field(&bytes.len()).finish(),
            Self::Stream(_, permit) => f.debug_tuple("Stream").field(permit).finish(),
        }
    }
}

/// A successful answer and the endpoint that gave it.
#[derive(Debug)]
pub(crate) struct Answered<'a> {
    /// The endpoint that answered.
    pub upstream: &'a Upstream,
    /// Its answer.
    pub answer: Answer,
}

/// A failover reason label for a failed attempt.
fn reason(error: &ApiError) -> &'static str {
    match error.error_code() {
        ErrorCode::UpstreamTransport => "transport",
        ErrorCode::UpstreamTimeout => "timeout",
        ErrorCode::UpstreamRateLimited => "rate_limited",
        ErrorCode::UpstreamProtocol => "protocol",
        _ => "status",
    }
}

/// Tries `routes` in order as the module documentation says.
pub(crate) async fn send<'a>(
    routes: &[Route<'a>],
    attempt: Attempt<'_>,
    observers: Observers<'_>,
) -> Result<Answered<'a>, ApiError> {
    let now = Instant::now();
    let many = routes.len() > 1;
    let cooling: Vec<bool> = routes
        .iter()
        .map(|r| many && observers.cooldowns.cooling(&r.upstream.id, now))
        .collect();
    let label = admission::client_label(attempt.client);
    let mut last_error = None;
    for (i, route) in routes.iter().enumerate() {
        let endpoint = route.upstream.id.as_str();
        let later_ready = cooling.get(i + 1..).is_some_and(|c| c.iter().any(|c| !c));
        if cooling.get(i).copied().unwrap_or(false) && later_ready {
            continue;
        }
        let last = i + 1 == routes.len();
        observers.trace.set_endpoint(endpoint);
        let permit = match route.admission {
            None => None,
            Some(admission) if !last => match admission.try_acquire() {
                Some(permit) => Some(permit),
                None => {
                    observers
                        .metrics
                        .failover(attempt.model, endpoint, "dominion_busy");
                    continue;
                }
            },
            Some(admission) => {
                let waited = Instant::now();
                let permit = admission.acquire(&label).await;
                let elapsed = waited.elapsed();
                observers.trace.add_queue(elapsed);
                observers.metrics.admission_wait(&admission.id(), elapsed);
                Some(permit?)
            }
        };
        let started = Instant::now();
        let result = attempt_one(route, attempt, observers.metrics, last).await;
        let elapsed = started.elapsed();
        observers.trace.add_upstream(elapsed);
        observers.metrics.upstream_attempt(endpoint, elapsed);
        match result {
            Ok(body) => {
                observers.cooldowns.succeeded(endpoint);
                let answer = match body {
                    Body::Whole(bytes) => {
                        drop(permit);
                        Answer::Buffered(bytes)
                    }
                    Body::Stream(stream) => Answer::Stream(stream, permit),
                };
                return Ok(Answered {
                    upstream: route.upstream,
                    answer,
                });
            }
            Err(failed) => {
                drop(permit);
                observers
                    .metrics
                    .upstream_error(endpoint, failed.error.code());
                if !failed.retryable {
                    return Err(failed.error);
                }
                observers
                    .cooldowns
                    .failed(endpoint, route.upstream.failover_cooldown);
                if !last {
                    observers
                        .metrics
                        .failover(attempt.model, endpoint, reason(&failed.error));
                    tracing::warn!(endpoint, model = attempt.model, error = %failed.error, "endpoint failed; trying the next one");
                }
                last_error = Some(failed.error);
            }
        }
    }
    Err(last_error.unwrap_or_else(|| ApiError::upstream_transport("model has no usable endpoint")))
}

/// An answer before it is committed to the client.
enum Body {
    /// The whole buffered body.
    Whole(Vec<u8>),
    /// A stream, its first chunk included.
    Stream(UpstreamBytes),
}

/// What one send produced.
enum Sent {
    /// A buffered answer the inline client read whole ([`h1`]).
    Whole(Vec<u8>),
    /// The inline client failed after the response head (an error status, a cut or
    /// oversized body): final for this endpoint, never a reason to respawn a child (a
    /// failed reqwest body read is not either).
    Failed(AttemptError),
    /// A success response head from reqwest, its body unread.
    Head(reqwest::Response),
}

/// Sends `call` once: a buffered request to a plain `http://` endpoint through the inline
/// client ([`h1`]), anything else (and an attempt the inline client could not connect
/// for) through reqwest. An error is a failure before any response head.
async fn send_once(call: UpstreamCall<'_>) -> Result<Sent, AttemptError> {
    if !call.streaming
        && let Some(plain) = call.upstream.plain()
    {
        match h1::exchange(
            call.upstream,
            plain,
            call.path,
            call.body,
            call.capability_route,
        )
        .await
        {
            h1::Exchange::Whole(bytes) => return Ok(Sent::Whole(bytes)),
            h1::Exchange::AfterHead(failed) => return Ok(Sent::Failed(failed)),
            h1::Exchange::BeforeHead(failed) => return Err(failed),
            h1::Exchange::Unconnected => {}
        }
    }
    send_attempt(call).await.map(Sent::Head)
}

/// One endpoint: send (with a local child's respawn-once), then read up to the point of
/// no return. A stream on the `last` endpoint is committed at its response head (there is
/// nowhere left to fail over to, so the client gets its headers at once and a failure as
/// an error event, as without failover).
async fn attempt_one(
    route: &Route<'_>,
    attempt: Attempt<'_>,
    metrics: &Metrics,
    last: bool,
) -> Result<Body, AttemptError> {
    let call = UpstreamCall {
        upstream: route.upstream,
        path: attempt.path,
        body: attempt.body,
        streaming: attempt.streaming,
        capability_route: attempt.capability_route,
    };
    let sent = match route.child {
        None => send_once(call).await?,
        Some(child) => {
            // A transport failure against a dead child respawns it once (same port and
            // bearer) and retries the request once.
            let seen = child.respawn_count();
            match send_once(call).await {
                Err(failed) if failed.error.error_code() == ErrorCode::UpstreamTransport => {
                    match child.respawn_if_dead(seen).await {
                        Ok(true) => {
                            metrics.local_respawn(attempt.model);
                            send_once(call).await?
                        }
                        Ok(false) => return Err(failed),
                        Err(respawn) => {
                            return Err(AttemptError::transport(ApiError::upstream_transport(
                                format!("{}; respawning the child failed: {respawn}", failed.error),
                            )));
                        }
                    }
                }
                other => other?,
            }
        }
    };
    let response = match sent {
        Sent::Whole(bytes) => return Ok(Body::Whole(bytes)),
        Sent::Failed(failed) => return Err(failed),
        Sent::Head(response) => response,
    };
    let upstream = route.upstream;
    if !attempt.streaming {
        let cap = upstream.max_response_bytes;
        return match read_capped(response, cap).await {
            Ok(Capped::Whole(bytes)) => Ok(Body::Whole(bytes)),
            Ok(Capped::Cut(_)) => Err(AttemptError {
                error: too_large(upstream, cap),
                retryable: false,
            }),
            Err(err) => Err(AttemptError::transport(transport_error(&upstream.id, &err))),
        };
    }
    let mut stream: UpstreamBytes = Box::pin(response.bytes_stream());
    if last {
        return Ok(Body::Stream(stream));
    }
    let idle = upstream.stream_idle_timeout;
    let first: Bytes = match tokio::time::timeout(idle, stream.next()).await {
        Ok(Some(Ok(bytes))) => bytes,
        Ok(Some(Err(err))) => {
            return Err(AttemptError::transport(transport_error(&upstream.id, &err)));
        }
        Ok(None) => {
            return Err(AttemptError::transport(ApiError::upstream_protocol(
                format!(
                    "endpoint {} ended the stream before its first chunk",
                    upstream.id
                ),
            )));
        }
        Err(_) => {
            return Err(AttemptError::transport(timeout_error(format!(
                "endpoint {} sent no stream chunk within {} (stream_idle_timeout)",
                upstream.id,
                humantime::format_duration(idle)
            ))));
        }
    };
    let chained = futures::stream::once(async move { Ok(first) }).chain(stream);
    Ok(Body::Stream(Box::pin(chained)))
}
