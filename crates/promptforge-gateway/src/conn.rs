//! The accept loop and per-connection bounds: a connection cap, a header-read timeout, a
//! keep-alive idle timeout, a request-head size cap, enveloped answers to requests hyper
//! cannot parse, and the graceful drain on shutdown.
//!
//! axum's `serve` offers none of these bounds, so connections are served here with
//! hyper's HTTP/1.1 connection builder directly. Each connection has a [`Tracker`] that
//! knows whether a request is in flight: while one is, no connection timeout applies (a
//! long upstream call or stream has its own bounds); between requests the keep-alive
//! timeout applies; once the first byte of a request head arrives (or from the accept, for
//! the first request), the header-read timeout applies. Whatever the phase, a write that
//! cannot proceed for the write timeout (the client stopped reading) closes the
//! connection.

use std::convert::Infallible;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::Request;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, Semaphore, watch};
use tokio::time::Instant;

use crate::config::ServerLimits;
use crate::routes::Service;
use crate::routes::error::{ApiError, Refusal};
use crate::routes::layer::{OVERHEAD_HEADER, overhead_ms};
use crate::shutdown::ShutdownTrigger;

/// Connections over the cap that are still being answered 503 at once; past this they
/// are closed without an answer.
const MAX_REJECTING: usize = 64;
/// How long answering an over-the-cap connection may take.
const REJECT_DEADLINE: Duration = Duration::from_secs(2);
/// After the drain timeout, how long requests and streams get to send their
/// `shutting_down` error before the process exits.
const FINAL_GRACE: Duration = Duration::from_secs(2);

/// The connection cap, shared by every listener (one per I/O thread, see
/// [`crate::serve`]): `max_connections` permits, and a small budget for answering
/// connections over the cap.
#[derive(Debug, Clone)]
pub(crate) struct Gate {
    permits: Arc<Semaphore>,
    rejecting: Arc<Semaphore>,
    max: u32,
}

impl Gate {
    /// A gate admitting `max_connections` connections at once.
    pub(crate) fn new(limits: &ServerLimits) -> Self {
        let max = u32::try_from(limits.max_connections).unwrap_or(u32::MAX);
        Self {
            permits: Arc::new(Semaphore::new(max as usize)),
            rejecting: Arc::new(Semaphore::new(MAX_REJECTING)),
            max,
        }
    }
}

/// Accepts connections on `listener` and serves `app` on each (as tasks of the current
/// runtime, so a connection never leaves the thread that accepted it) until `closing`
/// turns `true`; then stops accepting and tells its connections to close once idle. The
/// connections keep running on the runtime after this returns; [`drain`] waits for them.
pub(crate) async fn accept_loop(
    listener: TcpListener,
    app: Service,
    limits: ServerLimits,
    gate: Gate,
    closing: watch::Receiver<bool>,
) {
    let max = gate.max;
    let mut stop = closing.clone();
    loop {
        tokio::select! {
            // The watch's guard must not live across the loop's awaits (the future stays
            // `Send`).
            () = async { let _ = stop.wait_for(|closing| *closing).await; } => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    let _ = stream.set_nodelay(true);
                    match gate.permits.clone().try_acquire_owned() {
                        Ok(permit) => {
                            let (app, closing) = (app.clone(), closing.clone());
                            tokio::spawn(async move {
                                serve_connection(stream, app, limits, closing).await;
                                drop(permit);
                            });
                        }
                        Err(_) => match gate.rejecting.clone().try_acquire_owned() {
                            Ok(permit) => {
                                tokio::spawn(async move {
                                    let _ = tokio::time::timeout(REJECT_DEADLINE, reject(stream, max)).await;
                                    drop(permit);
                                });
                            }
                            Err(_) => drop(stream),
                        },
                    }
                }
                Err(err) => {
                    // Out of descriptors and the like: the listener itself is fine, so back
                    // off briefly instead of spinning or exiting.
                    tracing::warn!(%err, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
        }
    }
}

/// The drain after every accept loop stopped: idle connections close, in-flight requests
/// and streams get `limits.drain_timeout`; after it, `shutdown` fires so each ends with a
/// `shutting_down` error, and they get a short grace to send it.
pub(crate) async fn drain(gate: &Gate, limits: ServerLimits, shutdown: ShutdownTrigger) {
    let all_closed = gate.permits.acquire_many(gate.max);
    tokio::pin!(all_closed);
    if tokio::time::timeout(limits.drain_timeout, &mut all_closed)
        .await
        .is_err()
    {
        tracing::warn!(
            seconds = limits.drain_timeout.as_secs_f64(),
            "drain timeout: ending the remaining requests and streams with shutting_down"
        );
        shutdown.fire();
        let _ = tokio::time::timeout(FINAL_GRACE, &mut all_closed).await;
    }
}

/// Answers a connection over the cap with 503 and closes it. The answer waits for the
/// request head (briefly), so an HTTP client reads it as the answer to its request.
async fn reject(mut stream: TcpStream, max: u32) {
    let mut head = Vec::new();
    let mut chunk = [0u8; 2048];
    let _ = tokio::time::timeout(REJECT_DEADLINE / 2, async {
        while head.len() < 16 * 1024 && !head.windows(4).any(|w| w == b"\r\n\r\n") {
            match stream.read(&mut chunk).await {
                Ok(n) if n > 0 => head.extend_from_slice(&chunk[..n]),
                _ => break,
            }
        }
    })
    .await;
    // The gateway's own time starts once the head is in (as for a routed request).
    let decided = Instant::now();
    let error = ApiError::from(Refusal::TooManyConnections { max });
    let _ = stream.write_all(&raw_response(&error, decided)).await;
    let _ = stream.shutdown().await;
    // Read the rest of what the client sent, so closing does not reset the connection
    // before it has read the answer.
    while matches!(stream.read(&mut chunk).await, Ok(n) if n > 0) {}
}

/// A whole HTTP/1.1 response carrying `error`'s envelope, closing the connection, with
/// the gateway's own time since `decided` (when the answer was decided on) in
/// `X-PromptForge-Overhead-Ms`, as every routed response has it. No endpoint was tried, so
/// there is no `X-PromptForge-Endpoint`.
fn raw_response(error: &ApiError, decided: Instant) -> Vec<u8> {
    let body = error.envelope().to_string();
    let status = error.status();
    let overhead = overhead_ms(decided.elapsed());
    format!(
        "HTTP/1.1 {} {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n{OVERHEAD_HEADER}: {overhead}\r\nconnection: close\r\n\r\n{body}",
        status.as_u16(),
        status.canonical_reason().unwrap_or(""),
        body.len()
    )
    .into_bytes()
}

/// Serves one connection with its timeouts.
async fn serve_connection(
    stream: TcpStream,
    app: Service,
    limits: ServerLimits,
    mut closing: watch::Receiver<bool>,
) {
    let tracker = Arc::new(Tracker::new(limits));
    let io = TokioIo::new(Watched::new(
        stream,
        tracker.clone(),
        limits.max_header_bytes,
    ));
    let service_tracker = tracker.clone();
    let body_timeout = limits.header_read_timeout;
    let service = hyper::service::service_fn(move |request: Request<Incoming>| {
        let guard = service_tracker.begin();
        let app = app.clone();
        async move {
            let request = request.map(|body| Body::new(Paced::new(body, body_timeout)));
            let response = app.handle(request).await;
            Ok::<_, Infallible>(response.map(|body| {
                Body::new(Tracked {
                    body,
                    _guard: guard,
                })
            }))
        }
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .keep_alive(true)
        .header_read_timeout(None)
        .writev(false)
        .max_buf_size(limits.max_header_bytes.max(8192));
    let conn = builder.serve_connection(io, service);
    tokio::pin!(conn);
    let mut graceful = false;
    loop {
        let deadline = tracker.arm();
        tokio::select! {
            _ = conn.as_mut() => return,
            changed = closing.wait_for(|closing| *closing), if !graceful => {
                let _ = changed;
                conn.as_mut().graceful_shutdown();
                graceful = true;
            }
            () = tracker.changed.notified() => {}
            () = sleep_until(deadline) => {
                if tracker.expired() {
                    // Dropping the connection closes the socket.
                    return;
                }
            }
        }
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

/// Where a connection is between and within requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Waiting for (the rest of) a request head.
    Head,
    /// A request is being handled or its response sent.
    Busy,
    /// Kept alive between requests.
    Idle,
}

#[derive(Debug)]
struct TrackState {
    phase: Phase,
    since: Instant,
    in_flight: usize,
    /// Since when a write has been waiting for the client to read.
    write_stalled: Option<Instant>,
    /// The deadline the connection's timer sleeps until (`None`: no timer). A change that
    /// moves the deadline later does not wake the timer: it fires at the old one, finds
    /// nothing expired and sleeps again until the new one. Only a change that moves the
    /// deadline earlier wakes it, so a request served in time costs no timer wake-up.
    armed: Option<Instant>,
}

impl TrackState {
    fn deadline(&self, limits: &ServerLimits) -> Option<Instant> {
        let phase = match self.phase {
            Phase::Head => Some(self.since + limits.header_read_timeout),
            Phase::Idle => Some(self.since + limits.keep_alive_timeout),
            Phase::Busy => None,
        };
        let write = self.write_stalled.map(|since| since + limits.write_timeout);
        match (phase, write) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Whether the deadline is now earlier than the one the timer sleeps until.
    fn needs_wake(&self, limits: &ServerLimits) -> bool {
        self.deadline(limits)
            .is_some_and(|deadline| self.armed.is_none_or(|armed| deadline < armed))
    }
}

/// One connection's phase, shared by its IO, its service and its timer.
#[derive(Debug)]
struct Tracker {
    state: Mutex<TrackState>,
    changed: Notify,
    limits: ServerLimits,
}

impl Tracker {
    fn new(limits: ServerLimits) -> Self {
        Self {
            state: Mutex::new(TrackState {
                phase: Phase::Head,
                since: Instant::now(),
                in_flight: 0,
                write_stalled: None,
                armed: None,
            }),
            changed: Notify::new(),
            limits,
        }
    }

    fn with<R>(&self, f: impl FnOnce(&mut TrackState) -> R) -> R {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        f(&mut state)
    }

    /// Bytes arrived: an idle connection starts reading a request head.
    fn on_read(&self) {
        let wake = self.with(|s| {
            if s.phase != Phase::Idle {
                return false;
            }
            s.phase = Phase::Head;
            s.since = Instant::now();
            s.needs_wake(&self.limits)
        });
        if wake {
            self.changed.notify_one();
        }
    }

    /// A request head was parsed; the returned guard ends the request when dropped.
    fn begin(self: &Arc<Self>) -> BusyGuard {
        let wake = self.with(|s| {
            s.in_flight += 1;
            s.phase = Phase::Busy;
            s.needs_wake(&self.limits)
        });
        if wake {
            self.changed.notify_one();
        }
        BusyGuard(self.clone())
    }

    fn end(&self) {
        let wake = self.with(|s| {
            s.in_flight = s.in_flight.saturating_sub(1);
            if s.in_flight == 0 {
                s.phase = Phase::Idle;
                s.since = Instant::now();
            }
            s.needs_wake(&self.limits)
        });
        if wake {
            self.changed.notify_one();
        }
    }

    /// A write could not proceed (`true`) or did (`false`).
    fn on_write(&self, stalled: bool) {
        let wake = self.with(|s| match (stalled, s.write_stalled) {
            (true, None) => {
                s.write_stalled = Some(Instant::now());
                s.needs_wake(&self.limits)
            }
            (false, Some(_)) => {
                s.write_stalled = None;
                false
            }
            _ => false,
        });
        if wake {
            self.changed.notify_one();
        }
    }

    /// The current deadline, which the timer now sleeps until.
    fn arm(&self) -> Option<Instant> {
        self.with(|s| {
            s.armed = s.deadline(&self.limits);
            s.armed
        })
    }

    fn expired(&self) -> bool {
        self.with(|s| s.deadline(&self.limits))
            .is_some_and(|deadline| Instant::now() >= deadline)
    }
}

/// Marks a request in flight until its response body is finished or dropped.
#[derive(Debug)]
struct BusyGuard(Arc<Tracker>);

impl Drop for BusyGuard {
    fn drop(&mut self) {
        self.0.end();
    }
}

/// A response body that keeps its request counted as in flight.
struct Tracked {
    body: Body,
    _guard: BusyGuard,
}

impl http_body::Body for Tracked {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

/// A request body that fails when the client sends nothing for `limit` while the gateway
/// waits for more of it (a body trickled forever would hold a connection and a handler).
struct Paced {
    body: Incoming,
    limit: Duration,
    timer: Pin<Box<tokio::time::Sleep>>,
}

impl Paced {
    fn new(body: Incoming, limit: Duration) -> Self {
        Self {
            body,
            limit,
            timer: Box::pin(tokio::time::sleep(limit)),
        }
    }
}

/// The client stopped sending its request body.
#[derive(Debug, thiserror::Error)]
#[error("the client sent no part of the request body for {0:?} (header_read_timeout)")]
struct BodyStalled(Duration);

impl http_body::Body for Paced {
    type Data = Bytes;
    type Error = axum::BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        let this = &mut *self;
        match Pin::new(&mut this.body).poll_frame(cx) {
            Poll::Ready(frame) => {
                let deadline = Instant::now() + this.limit;
                this.timer.as_mut().reset(deadline);
                Poll::Ready(frame.map(|f| f.map_err(Into::into)))
            }
            Poll::Pending => match this.timer.as_mut().poll(cx) {
                Poll::Ready(()) => Poll::Ready(Some(Err(BodyStalled(this.limit).into()))),
                Poll::Pending => Poll::Pending,
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

/// The socket as hyper sees it: reads tell the tracker a request head has begun, and the
/// bare answers hyper writes by itself for a request it cannot parse (400, 414, 431 with
/// an empty body) are replaced by the same status with an error envelope.
struct Watched {
    inner: TcpStream,
    tracker: Arc<Tracker>,
    max_header_bytes: usize,
    /// A replacement being written: the bytes, how many are written, and the length of
    /// hyper's buffer it stands for.
    rewrite: Option<(Vec<u8>, usize, usize)>,
}

impl Watched {
    fn new(inner: TcpStream, tracker: Arc<Tracker>, max_header_bytes: usize) -> Self {
        Self {
            inner,
            tracker,
            max_header_bytes,
            rewrite: None,
        }
    }
}

/// The enveloped replacement for one of hyper's automatic error answers, when `buf` is
/// one: a 400, 414 or 431 head with `content-length: 0` and no content type (every answer
/// the gateway itself writes carries a JSON body).
fn replacement(buf: &[u8], max_header_bytes: usize) -> Option<Vec<u8>> {
    let decided = Instant::now();
    let head_end = buf.windows(4).position(|w| w == b"\r\n\r\n")?;
    if head_end + 4 != buf.len() {
        return None;
    }
    let head = std::str::from_utf8(&buf[..head_end])
        .ok()?
        .to_ascii_lowercase();
    let status = head.strip_prefix("http/1.1 ")?.get(..3)?;
    if !head.contains("\r\ncontent-length: 0") || head.contains("\r\ncontent-type:") {
        return None;
    }
    let refusal = match status {
        "400" => Refusal::Malformed,
        "414" => Refusal::UriTooLong,
        "431" => Refusal::HeadersTooLarge {
            max: max_header_bytes,
        },
        _ => return None,
    };
    Some(raw_response(&refusal.into(), decided))
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let result = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(result, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.tracker.on_read();
        }
        result
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        if this.rewrite.is_none()
            && buf.starts_with(b"HTTP/1.1 4")
            && let Some(bytes) = replacement(buf, this.max_header_bytes)
        {
            this.rewrite = Some((bytes, 0, buf.len()));
        }
        if let Some((bytes, written, stands_for)) = &mut this.rewrite {
            while *written < bytes.len() {
                match Pin::new(&mut this.inner).poll_write(cx, &bytes[*written..]) {
                    Poll::Ready(Ok(0)) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                    Poll::Ready(Ok(n)) => *written += n,
                    Poll::Ready(Err(err)) => return Poll::Ready(Err(err)),
                    Poll::Pending => return Poll::Pending,
                }
            }
            let consumed = *stands_for;
            this.rewrite = None;
            return Poll::Ready(Ok(consumed));
        }
        let result = Pin::new(&mut this.inner).poll_write(cx, buf);
        this.tracker.on_write(result.is_pending());
        result
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_hypers_bare_error_answers_are_replaced() {
        let bare = b"HTTP/1.1 431 Request Header Fields Too Large\r\nconnection: close\r\ncontent-length: 0\r\ndate: x\r\n\r\n";
        let replaced = String::from_utf8(replacement(bare, 65536).unwrap()).unwrap();
        assert!(replaced.starts_with("HTTP/1.1 431 "), "{replaced}");
        assert!(
            replaced.contains("\"code\":\"headers_too_large\""),
            "{replaced}"
        );
        let overhead = replaced
            .lines()
            .find_map(|line| line.strip_prefix("x-promptforge-overhead-ms: "))
            .expect("the overhead header");
        assert!(
            overhead.parse::<f64>().is_ok_and(|ms| ms >= 0.0),
            "{overhead}"
        );
        let bad = b"HTTP/1.1 400 Bad Request\r\nconnection: close\r\ncontent-length: 0\r\n\r\n";
        assert!(replacement(bad, 65536).is_some());
        let ours = b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: 0\r\n\r\n";
        assert!(replacement(ours, 65536).is_none());
        let with_body = b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\nxx";
        assert!(replacement(with_body, 65536).is_none());
        let ok = b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n";
        assert!(replacement(ok, 65536).is_none());
    }
}
