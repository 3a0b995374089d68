//! The pooled client: reqwest, for `https://` endpoints, streams, proxies, and any
//! buffered attempt the inline client could not open a connection for.
//!
//! Each I/O thread has its own reqwest clients (so a pooled upstream connection is a task
//! of the runtime of the thread whose requests use it, and a request never waits on
//! another thread), one pair per distinct `(connect_timeout, timeout)`: a buffered client
//! with the whole-request deadline and a streaming one with the connect deadline only.
//! Endpoints with the same deadlines share a pair, across profile switches too.

use std::cell::RefCell;
use std::collections::HashMap;
use std::time::Duration;

use axum::http::{HeaderValue, header};
use futures::StreamExt;

use super::transport::{AttemptFailure, MAX_ERROR_BODY_BYTES, Phase, UpstreamBytes};
use crate::plan::{ApiPath, Endpoint};

/// Most client pairs one thread keeps (the cache is emptied past this and refilled on
/// use).
const MAX_THREAD_CLIENTS: usize = 256;
/// How long an idle pooled connection is kept.
const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(90);

/// Buffered and streaming client of one `(connect_timeout, timeout)` pair.
#[derive(Debug, Clone)]
struct Clients {
    buffered: reqwest::Client,
    streaming: reqwest::Client,
}

type Key = (Duration, Duration);

thread_local! {
    static CLIENTS: RefCell<HashMap<Key, Clients>> = RefCell::new(HashMap::new());
}

fn builder(connect_timeout: Duration) -> reqwest::ClientBuilder {
    reqwest::Client::builder()
        .connect_timeout(connect_timeout)
        .tcp_nodelay(true)
        .pool_idle_timeout(POOL_IDLE_TIMEOUT)
}

fn build(key: Key) -> Result<Clients, reqwest::Error> {
    let (connect_timeout, timeout) = key;
    Ok(Clients {
        buffered: builder(connect_timeout).timeout(timeout).build()?,
        streaming: builder(connect_timeout).build()?,
    })
}

/// The calling thread's client for `endpoint` (built on first use).
fn client(endpoint: &Endpoint, streaming: bool) -> Result<reqwest::Client, reqwest::Error> {
    let key = (endpoint.limits.connect_timeout, endpoint.limits.timeout);
    let pick = |clients: &Clients| {
        if streaming {
            clients.streaming.clone()
        } else {
            clients.buffered.clone()
        }
    };
    CLIENTS.with_borrow_mut(|cache| {
        if let Some(clients) = cache.get(&key) {
            return Ok(pick(clients));
        }
        let clients = build(key)?;
        if cache.len() >= MAX_THREAD_CLIENTS {
            cache.clear();
        }
        let client = pick(&clients);
        cache.insert(key, clients);
        Ok(client)
    })
}

/// Builds the calling thread's clients for `endpoints` now (building one loads the system
/// root certificates, a few milliseconds the first request would otherwise pay).
pub(crate) fn warm<'a>(
    endpoints: impl Iterator<Item = &'a Endpoint>,
) -> Result<(), reqwest::Error> {
    for endpoint in endpoints {
        client(endpoint, false)?;
    }
    Ok(())
}

/// Sends `body` to `path` of `endpoint`: a buffered request reads the whole body (at most
/// `max_response_bytes`, a declared longer one refused unread) within `timeout`; a
/// streaming one waits `stream_first_byte_timeout` for a success head and answers the
/// body as it comes.
pub(crate) async fn send(
    endpoint: &Endpoint,
    path: ApiPath,
    body: &axum::body::Bytes,
    streaming: bool,
) -> Result<super::Answer, AttemptFailure> {
    let id = &*endpoint.id;
    let client = client(endpoint, streaming).map_err(|err| {
        AttemptFailure::transport(
            format!("endpoint {id} unreachable: cannot build an HTTP client: {err}"),
            Phase::BeforeHead,
        )
    })?;
    let mut request = client
        .post(endpoint.url(path).clone())
        .header(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )
        .body(body.clone());
    if let Some(key) = &endpoint.api_key {
        request = request.bearer_auth(key.expose());
    }
    let sent = request.send();
    let response = if streaming {
        // The streaming client has no whole-request deadline; the response head still has
        // to arrive in time.
        let limit = endpoint.limits.stream_first_byte_timeout;
        match tokio::time::timeout(limit, sent).await {
            Ok(result) => result,
            Err(_) => {
                return Err(AttemptFailure::timeout(
                    format!(
                        "endpoint {id} sent no response within {} (stream_first_byte_timeout)",
                        humantime::format_duration(limit)
                    ),
                    Phase::BeforeHead,
                ));
            }
        }
    } else {
        sent.await
    }
    .map_err(|err| failure(id, &err, Phase::BeforeHead))?;
    let status = response.status();
    if !status.is_success() {
        // Only the start of an error body is read (for the upstream's message).
        let body = match read_capped(response, MAX_ERROR_BODY_BYTES).await {
            Ok(Capped::Whole(body) | Capped::Cut(body)) => body,
            Err(_) => Vec::new(),
        };
        return Err(AttemptFailure::status(
            id,
            status,
            &body,
            path.is_capability(),
        ));
    }
    if streaming {
        let id = endpoint.id.clone();
        let stream: UpstreamBytes = Box::pin(
            response
                .bytes_stream()
                .map(move |item| item.map_err(|err| failure(&id, &err, Phase::AfterHead))),
        );
        return Ok(super::Answer::Stream(stream));
    }
    let cap = endpoint.limits.max_response_bytes;
    match read_capped(response, cap).await {
        Ok(Capped::Whole(bytes)) => Ok(super::Answer::Whole(bytes)),
        Ok(Capped::Cut(_)) => Err(AttemptFailure::too_large(id, cap)),
        Err(err) => Err(failure(id, &err, Phase::AfterHead)),
    }
}

/// A body read up to a cap.
#[derive(Debug)]
pub(crate) enum Capped {
    /// The whole body.
    Whole(Vec<u8>),
    /// The first `cap` bytes; the body goes on (the rest is never read).
    Cut(Vec<u8>),
}

/// Reads at most `cap` bytes of `response`'s body. A declared `Content-Length` over the
/// cap is refused before any byte is read; the rest of a longer body is never read
/// (dropping the response closes its connection).
pub(crate) async fn read_capped(
    mut response: reqwest::Response,
    cap: usize,
) -> Result<Capped, reqwest::Error> {
    if response
        .content_length()
        .is_some_and(|declared| declared > cap as u64)
    {
        return Ok(Capped::Cut(Vec::new()));
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await? {
        let room = cap - body.len();
        if chunk.len() > room {
            body.extend_from_slice(&chunk[..room]);
            return Ok(Capped::Cut(body));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(Capped::Whole(body))
}

/// A reqwest failure to get a response or to read its body (the connection failed or was
/// cut, or a deadline passed; decoding is the gateway's own job and fails elsewhere).
pub(crate) fn failure(endpoint: &str, err: &reqwest::Error, phase: Phase) -> AttemptFailure {
    if err.is_timeout() {
        return AttemptFailure::no_answer_in_time(endpoint, phase);
    }
    // reqwest's Display never includes headers, so no credential can appear here.
    let mut message = format!("endpoint {endpoint} unreachable: {err}");
    let mut source = std::error::Error::source(err);
    while let Some(inner) = source {
        message.push_str(&format!(": {inner}"));
        source = inner.source();
    }
    AttemptFailure::transport(message, phase)
}
