//! Failover across a model's routes.
//!
//! The routes are tried in the configured order. Until the first byte of an answer is
//! committed to the client (a buffered request: the whole upstream body has been read; a
//! stream: the first upstream body chunk has arrived; on the last route a stream is
//! committed at its response head, as there is nothing left to try), a retryable
//! [`AttemptFailure`] (a transport failure or timeout, a 5xx or a 429, a stream ending
//! before its first chunk) moves the request to the next route; any other failure (a 4xx
//! the caller caused, an undecodable body) is returned at once. When every route failed,
//! the caller gets the last failure. An endpoint that failed that way is skipped for its
//! `failover_cooldown` unless no route after it is out of cooldown (so a cooldown alone
//! never turns a request away). Each attempt passes its own route's admission: a route
//! that is not the last has to have a free slot right now (a busy one is passed over, no
//! cooldown); the last waits in its dominion's queue as its policy says.
//!
//! What happens is reported to an [`Observer`] (metrics, the request's trace), never
//! returned as an HTTP answer: mapping failures to envelopes is `routes/`'s job.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use futures::StreamExt;

use super::transport::{
    Answer, AttemptFailure, FailureKind, Outgoing, Phase, Transport, UpstreamBytes,
};
use crate::admission::{self, AdmissionError, Permit};
use crate::plan::{ApiPath, Endpoint, Route, Routes};

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
    /// The API route below each endpoint's base URL.
    pub path: ApiPath,
    /// The JSON body (the same for every endpoint: the backend's model string is the
    /// model's, not the endpoint's).
    pub body: &'a Bytes,
    /// A streaming request.
    pub streaming: bool,
    /// The caller's fair-scheduling label (`X-PromptForge-Client`).
    pub client: Option<&'a str>,
}

/// Why a request left an endpoint for the next one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FailoverReason {
    /// A connection failure.
    Transport,
    /// A deadline.
    Timeout,
    /// A 5xx.
    Status,
    /// A 429.
    RateLimited,
    /// A stream that ended before its first chunk.
    Protocol,
    /// The endpoint's dominion had no free slot.
    DominionBusy,
}

impl FailoverReason {
    /// The metric label (`failovers_total{reason}`).
    pub(crate) fn label(self) -> &'static str {
        match self {
            Self::Transport => "transport",
            Self::Timeout => "timeout",
            Self::Status => "status",
            Self::RateLimited => "rate_limited",
            Self::Protocol => "protocol",
            Self::DominionBusy => "dominion_busy",
        }
    }

    fn of(failure: &AttemptFailure) -> Self {
        match failure.kind {
            FailureKind::Transport => Self::Transport,
            FailureKind::Timeout => Self::Timeout,
            FailureKind::RateLimited => Self::RateLimited,
            FailureKind::Protocol => Self::Protocol,
            FailureKind::Rejected | FailureKind::Status | FailureKind::Unavailable => Self::Status,
        }
    }
}

/// Where failover reports what happens to one request (the narrow interface to metrics
/// and the request's trace).
pub(crate) trait Observer: Sync {
    /// `endpoint` is being tried (the last one reported answered, or failed last).
    fn trying(&self, endpoint: &Endpoint);
    /// The request waited `waited` in `dominion`'s queue; `outcome` is how the wait ended.
    fn queued(&self, dominion: &str, waited: Duration, outcome: Result<(), &AdmissionError>);
    /// One attempt against `endpoint` took `elapsed` (until the answer was committed or
    /// failed).
    fn attempted(&self, endpoint: &Endpoint, elapsed: Duration);
    /// An attempt against `endpoint` failed.
    fn failed(&self, endpoint: &Endpoint, failure: &AttemptFailure);
    /// The request for `model` left `endpoint` for the next route.
    fn failover(&self, model: &str, endpoint: &Endpoint, reason: FailoverReason);
    /// `model`'s local child was respawned after it was found dead.
    fn respawned(&self, model: &str);
}

/// Why no route answered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum RelayError {
    /// The last attempt's failure (or the first that may not be retried).
    #[error("{0}")]
    Upstream(AttemptFailure),
    /// The last route's dominion turned the request away.
    #[error("{0}")]
    Admission(AdmissionError),
}

/// What the answering endpoint sent.
pub(crate) enum Reply {
    /// A buffered request: the whole body as received (its slot is already released).
    Whole(Vec<u8>),
    /// A stream: the body from its first chunk on, and the slot it holds until it ends.
    Stream(UpstreamBytes, Option<Permit>),
}

impl std::fmt::Debug for Reply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Whole(bytes) => f.debug_tuple("Whole").field(&bytes.len()).finish(),
            Self::Stream(_, permit) => f.debug_tuple("Stream").field(permit).finish(),
        }
    }
}

/// A successful answer and the endpoint that gave it.
#[derive(Debug)]
pub(crate) struct Answered<'a> {
    /// The endpoint that answered.
    pub endpoint: &'a Endpoint,
    /// Its answer.
    pub reply: Reply,
}

/// How one attempt on a route ended.
enum Outcome<'a> {
    /// It answered.
    Answered(Answered<'a>),
    /// It failed; `retry` says whether the next route may succeed where it did not.
    Failed { error: RelayError, retry: bool },
}

/// The process-wide context failover runs in.
#[derive(Clone, Copy)]
pub(crate) struct Relay<'a> {
    /// Sends each attempt.
    pub transport: &'a dyn Transport,
    /// The cooldown table.
    pub cooldowns: &'a Cooldowns,
    /// Where the request's events go.
    pub observer: &'a dyn Observer,
}

/// Tries `routes` in order as the module documentation says.
pub(crate) async fn send<'a>(
    routes: &'a Routes,
    attempt: Attempt<'_>,
    relay: Relay<'_>,
) -> Result<Answered<'a>, RelayError> {
    if !routes.before.is_empty() {
        let now = Instant::now();
        let cooling: Vec<bool> = routes
            .iter()
            .map(|r| relay.cooldowns.cooling(&r.endpoint.id, now))
            .collect();
        for (i, route) in routes.before.iter().enumerate() {
            let later_ready = cooling.get(i + 1..).is_some_and(|c| c.iter().any(|c| !c));
            if cooling.get(i).copied().unwrap_or(false) && later_ready {
                continue;
            }
            let endpoint = &*route.endpoint;
            relay.observer.trying(endpoint);
            // Not the last route: a busy dominion passes the request on at once.
            let permit = match &route.admission {
                None => None,
                Some(admission) => match admission.try_acquire().await {
                    Some(permit) => Some(permit),
                    None => {
                        relay.observer.failover(
                            attempt.model,
                            endpoint,
                            FailoverReason::DominionBusy,
                        );
                        continue;
                    }
                },
            };
            match run(route, permit, false, attempt, relay).await {
                Outcome::Answered(answered) => return Ok(answered),
                Outcome::Failed { retry: true, .. } => {}
                Outcome::Failed { error, .. } => return Err(error),
            }
        }
    }
    let route = &routes.last;
    relay.observer.trying(&route.endpoint);
    // The last route waits in its dominion's queue as the policy says.
    let permit = match &route.admission {
        None => None,
        Some(admission) => {
            let label = admission::client_label(attempt.client);
            let waited = Instant::now();
            let permit = admission.acquire(&label).await;
            relay.observer.queued(
                admission.id(),
                waited.elapsed(),
                permit.as_ref().map(|_| ()),
            );
            Some(permit.map_err(RelayError::Admission)?)
        }
    };
    match run(route, permit, true, attempt, relay).await {
        Outcome::Answered(answered) => Ok(answered),
        Outcome::Failed { error, .. } => Err(error),
    }
}

/// One attempt on `route`, holding `permit`, and its bookkeeping: the cooldown table, the
/// observer, the slot (released unless a stream keeps it).
async fn run<'a>(
    route: &'a Route,
    permit: Option<Permit>,
    last: bool,
    attempt: Attempt<'_>,
    relay: Relay<'_>,
) -> Outcome<'a> {
    let endpoint = &*route.endpoint;
    let started = Instant::now();
    let result = attempt_one(route, attempt, relay, last).await;
    relay.observer.attempted(endpoint, started.elapsed());
    match result {
        Ok(body) => {
            relay.cooldowns.succeeded(&endpoint.id);
            let reply = match body {
                Answer::Whole(bytes) => {
                    drop(permit);
                    Reply::Whole(bytes)
                }
                Answer::Stream(stream) => Reply::Stream(stream, permit),
            };
            Outcome::Answered(Answered { endpoint, reply })
        }
        Err(failed) => {
            drop(permit);
            relay.observer.failed(endpoint, &failed);
            let retry = failed.retryable;
            if retry {
                relay
                    .cooldowns
                    .failed(&endpoint.id, endpoint.limits.failover_cooldown);
                if !last {
                    relay
                        .observer
                        .failover(attempt.model, endpoint, FailoverReason::of(&failed));
                    tracing::warn!(endpoint = %endpoint.id, model = attempt.model, error = %failed, "endpoint failed; trying the next one");
                }
            }
            Outcome::Failed {
                error: RelayError::Upstream(failed),
                retry,
            }
        }
    }
}

/// One route: send (with a local child's respawn-once), then read up to the point of no
/// return. A stream on the `last` route is committed at its response head (there is
/// nowhere left to fail over to, so the client gets its headers at once and a failure as
/// an error event, as without failover).
async fn attempt_one(
    route: &Route,
    attempt: Attempt<'_>,
    relay: Relay<'_>,
    last: bool,
) -> Result<Answer, AttemptFailure> {
    let endpoint = &*route.endpoint;
    let request = Outgoing {
        path: attempt.path,
        body: attempt.body,
        streaming: attempt.streaming,
    };
    let answer = match &route.child {
        None => relay.transport.send(endpoint, request).await?,
        Some(running) => {
            // A transport failure before any answer, against a dead child, respawns it
            // once (same port and bearer) and retries the request once.
            let child = &running.child;
            let seen = child.respawn_count();
            match relay.transport.send(endpoint, request).await {
                Err(failed)
                    if failed.kind == FailureKind::Transport
                        && failed.phase == Phase::BeforeHead =>
                {
                    match child.respawn_if_dead(seen).await {
                        Ok(true) => {
                            relay.observer.respawned(attempt.model);
                            relay.transport.send(endpoint, request).await?
                        }
                        Ok(false) => return Err(failed),
                        Err(respawn) => {
                            return Err(AttemptFailure::transport(
                                format!("{failed}; respawning the child failed: {respawn}"),
                                Phase::BeforeHead,
                            ));
                        }
                    }
                }
                other => other?,
            }
        }
    };
    let mut stream = match answer {
        Answer::Stream(stream) if !last => stream,
        committed => return Ok(committed),
    };
    let idle = endpoint.limits.stream_idle_timeout;
    let id = &endpoint.id;
    let first: Bytes = match tokio::time::timeout(idle, stream.next()).await {
        Ok(Some(Ok(bytes))) => bytes,
        Ok(Some(Err(failed))) => return Err(failed),
        Ok(None) => {
            return Err(AttemptFailure::protocol(
                format!("endpoint {id} ended the stream before its first chunk"),
                true,
            ));
        }
        Err(_) => {
            return Err(AttemptFailure::timeout(
                format!(
                    "endpoint {id} sent no stream chunk within {} (stream_idle_timeout)",
                    humantime::format_duration(idle)
                ),
                Phase::AfterHead,
            ));
        }
    };
    let chained = futures::stream::once(async move { Ok(first) }).chain(stream);
    Ok(Answer::Stream(Box::pin(chained)))
}

#[cfg(test)]
mod tests {
    //! Failover over a scripted transport: no socket, no timer.

    #![allow(clippy::unwrap_used)]

    use std::sync::{Arc, Mutex};

    use super::*;
    use crate::admission::Admission;
    use crate::config::{DominionConfig, DominionKind, QueuePolicy};
    use crate::plan::Limits;
    use crate::tests::scripted::{Act, Scripted, completion, refused};

    /// Every event, as `what endpoint detail`.
    #[derive(Debug, Default)]
    struct Events(Mutex<Vec<String>>);

    impl Events {
        fn push(&self, event: String) {
            self.0.lock().unwrap().push(event);
        }
        fn take(&self) -> Vec<String> {
            std::mem::take(&mut self.0.lock().unwrap())
        }
    }

    impl Observer for Events {
        fn trying(&self, endpoint: &Endpoint) {
            self.push(format!("trying {}", endpoint.id));
        }
        fn queued(&self, dominion: &str, _: Duration, _: Result<(), &AdmissionError>) {
            self.push(format!("queued {dominion}"));
        }
        fn attempted(&self, _: &Endpoint, _: Duration) {}
        fn failed(&self, endpoint: &Endpoint, failure: &AttemptFailure) {
            self.push(format!("failed {} {}", endpoint.id, failure.kind.label()));
        }
        fn failover(&self, model: &str, endpoint: &Endpoint, reason: FailoverReason) {
            self.push(format!(
                "failover {model} {} {}",
                endpoint.id,
                reason.label()
            ));
        }
        fn respawned(&self, model: &str) {
            self.push(format!("respawned {model}"));
        }
    }

    fn route(id: &str, admission: Option<Admission>) -> Route {
        let limits = Limits {
            connect_timeout: Duration::from_secs(1),
            timeout: Duration::from_secs(1),
            stream_first_byte_timeout: Duration::from_secs(1),
            stream_idle_timeout: Duration::from_secs(60),
            max_response_bytes: 1024,
            max_stream_event_bytes: 1024,
            failover_cooldown: Duration::from_secs(3600),
        };
        let url = reqwest::Url::parse("http://127.0.0.1:9/v1").unwrap();
        Route {
            endpoint: Arc::new(Endpoint::new(id, &url, None, limits)),
            admission,
            child: None,
        }
    }

    fn routes(ids: &[&str]) -> Routes {
        let mut all: Vec<Route> = ids.iter().map(|id| route(id, None)).collect();
        let last = all.pop().unwrap();
        Routes {
            before: all.into_boxed_slice(),
            last,
        }
    }

    fn dominion(slots: u32, policy: QueuePolicy) -> Admission {
        Admission::new(&DominionConfig {
            id: "pool".into(),
            kind: DominionKind::Remote,
            max_concurrency: Some(slots),
            max_queue: 1,
            policy,
            fair_scheduling: true,
            vram_gb: None,
            on_store_failure: crate::config::StoreFailure::default(),
        })
        .unwrap()
    }

    struct Fixture {
        scripted: Scripted,
        cooldowns: Cooldowns,
        events: Events,
    }

    impl Fixture {
        fn new() -> Self {
            Self {
                scripted: Scripted::default(),
                cooldowns: Cooldowns::default(),
                events: Events::default(),
            }
        }

        async fn send<'a>(
            &self,
            routes: &'a Routes,
            streaming: bool,
        ) -> Result<Answered<'a>, RelayError> {
            let body = Bytes::from_static(b"{}");
            let attempt = Attempt {
                model: "m",
                path: ApiPath::ChatCompletions,
                body: &body,
                streaming,
                client: None,
            };
            let relay = Relay {
                transport: &self.scripted,
                cooldowns: &self.cooldowns,
                observer: &self.events,
            };
            send(routes, attempt, relay).await
        }
    }

    fn status(code: u16) -> Act {
        Act::Fail(AttemptFailure::status(
            "x",
            axum::http::StatusCode::from_u16(code).unwrap(),
            b"",
            false,
        ))
    }

    #[tokio::test]
    async fn retryable_failures_move_on_and_others_stop() {
        let f = Fixture::new();
        let routes = routes(&["a", "b"]);
        f.scripted.then("a", refused("a"));
        f.scripted.always("b", completion("up", "hi"));
        let answered = f.send(&routes, false).await.unwrap();
        assert_eq!(&*answered.endpoint.id, "b");
        assert_eq!(
            f.events.take(),
            [
                "trying a",
                "failed a upstream_transport",
                "failover m a transport",
                "trying b"
            ]
        );
        // A 400 is the caller's: returned at once, `b` never tried, no cooldown for `a`.
        let f = Fixture::new();
        f.scripted.then("a", status(400));
        let error = f.send(&routes, false).await.unwrap_err();
        assert!(matches!(&error, RelayError::Upstream(e) if e.kind == FailureKind::Rejected));
        assert_eq!(f.scripted.tried(), ["a"]);
        f.scripted.then("a", completion("up", "hi"));
        assert_eq!(&*f.send(&routes, false).await.unwrap().endpoint.id, "a");
        // Every route failing: the last failure.
        let f = Fixture::new();
        f.scripted.then("a", status(503));
        f.scripted.then("b", status(429));
        let error = f.send(&routes, false).await.unwrap_err();
        assert!(matches!(&error, RelayError::Upstream(e) if e.kind == FailureKind::RateLimited));
        assert_eq!(f.scripted.tried(), ["a", "b"]);
    }

    #[tokio::test]
    async fn a_cooling_endpoint_is_skipped_unless_nothing_after_it_is_ready() {
        let f = Fixture::new();
        let routes = routes(&["a", "b"]);
        f.scripted.then("a", status(500));
        f.scripted.always("b", completion("up", "hi"));
        f.send(&routes, false).await.unwrap();
        // `a` cools down: the next request goes straight to `b`.
        f.send(&routes, false).await.unwrap();
        assert_eq!(f.scripted.tried(), ["a", "b", "b"]);
        // With `b` cooling too, both are tried in order: a cooldown alone never turns a
        // request away.
        f.scripted.then("b", status(500));
        f.send(&routes, false).await.unwrap_err();
        f.scripted.then("a", completion("up", "back"));
        let answered = f.send(&routes, false).await.unwrap();
        assert_eq!(&*answered.endpoint.id, "a");
        assert_eq!(f.scripted.tried(), ["a", "b", "b", "b", "a"]);
        // A success clears the cooldown.
        assert!(!f.cooldowns.cooling("a", std::time::Instant::now()));
    }

    #[tokio::test]
    async fn a_full_dominion_passes_the_request_on_unless_it_is_the_last() {
        let f = Fixture::new();
        let pool = dominion(1, QueuePolicy::Reject);
        let held = pool.try_acquire().await.unwrap();
        let routes = Routes {
            before: vec![route("a", Some(pool.clone()))].into_boxed_slice(),
            last: route("b", None),
        };
        f.scripted.always("b", completion("up", "hi"));
        let answered = f.send(&routes, false).await.unwrap();
        assert_eq!(&*answered.endpoint.id, "b");
        assert_eq!(f.scripted.tried(), ["b"]);
        assert!(
            f.events
                .take()
                .contains(&"failover m a dominion_busy".to_owned())
        );
        // On the last route the dominion's policy answers.
        let only = Routes {
            before: Box::new([]),
            last: route("a", Some(pool.clone())),
        };
        let error = f.send(&only, false).await.unwrap_err();
        assert!(matches!(error, RelayError::Admission(_)));
        drop(held);
        f.scripted.always("a", completion("up", "hi"));
        f.send(&only, false).await.unwrap();
        assert_eq!(
            pool.load(),
            (0, 0),
            "the slot went back after the buffered answer"
        );
    }

    #[tokio::test]
    async fn a_stream_fails_over_until_its_first_chunk_and_holds_its_slot() {
        let f = Fixture::new();
        let pool = dominion(1, QueuePolicy::Queue);
        let routes = Routes {
            before: vec![route("a", None)].into_boxed_slice(),
            last: route("b", Some(pool.clone())),
        };
        // `a` ends its stream before any chunk: retryable.
        f.scripted.then("a", Act::Stream(Vec::new()));
        f.scripted
            .then("b", Act::Stream(vec!["data: [DONE]\n\n".into()]));
        let answered = f.send(&routes, true).await.unwrap();
        assert_eq!(&*answered.endpoint.id, "b");
        assert!(
            f.events
                .take()
                .contains(&"failover m a protocol".to_owned())
        );
        let Reply::Stream(_, permit) = answered.reply else {
            panic!("not a stream")
        };
        assert!(permit.is_some());
        assert_eq!(pool.load(), (1, 0), "the stream holds its slot");
        drop(permit);
        assert_eq!(pool.load(), (0, 0));
        // On the last route a stream is committed at its head, even an empty one.
        let last = Routes {
            before: Box::new([]),
            last: route("c", None),
        };
        f.scripted.then("c", Act::Stream(Vec::new()));
        assert!(matches!(
            f.send(&last, true).await.unwrap().reply,
            Reply::Stream(..)
        ));
    }
}
