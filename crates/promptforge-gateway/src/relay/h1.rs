//! The inline upstream client: buffered (non-streaming) requests to plain `http://`
//! endpoints, over a small HTTP/1.1 keep-alive client that the request's own task drives
//! (no connection task, no channel between the two, no URL parsed and no request head
//! formatted per request: the plan wrote each head once, see [`PlainTarget`]).
//!
//! reqwest ([`super::pooled`]) stays for everything else: `https://` endpoints, streaming
//! requests, a process with a proxy variable set (`HTTP_PROXY`, `http_proxy`,
//! `ALL_PROXY`, `all_proxy`: reqwest would honour it, this client does not know proxies),
//! and any attempt for which this client cannot open a connection (then nothing was sent,
//! and reqwest's own attempt reports the failure exactly as before).
//!
//! The bounds are reqwest's: the endpoint's `connect_timeout` for a new connection, its
//! `timeout` for the whole exchange (connect, send, response head and body), its
//! `max_response_bytes` for the body (a declared `Content-Length` over it is refused
//! before the body is read), 64 KiB of an error body, and a response head of at most
//! 400 KiB (hyper's client default). Failures are the same [`AttemptFailure`]s reqwest's
//! give ([`super::pooled`]), with the same messages where the tests compare them.
//!
//! Connections: each I/O thread keeps its own idle connections per upstream address (at most
//! [`MAX_IDLE_PER_ENDPOINT`], idle at most [`IDLE_TIMEOUT`], like reqwest's pool). A
//! connection goes back to the pool only after a response was read completely with
//! nothing after it, and the response allowed keep-alive (HTTP/1.1 without
//! `Connection: close`, framed by `Content-Length` or chunked encoding); one that failed
//! or was left half-read is closed. A pooled connection is checked before reuse (one the
//! upstream closed while it sat idle is dropped, as hyper's pool drops it); if writing
//! the request to it fails anyway, the request (which cannot have reached the upstream
//! whole) goes out once more on a new connection. Once the request is written, a failure
//! is final: a POST is never sent twice.

use std::cell::RefCell;
use std::collections::HashMap;
use std::io;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use axum::http::StatusCode;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::transport::{AttemptFailure, MAX_ERROR_BODY_BYTES, Phase};
use crate::plan::{ApiPath, Endpoint, PlainTarget};

/// Idle connections one I/O thread keeps per upstream address.
pub(crate) const MAX_IDLE_PER_ENDPOINT: usize = 256;
/// How long a connection may sit idle in the pool (reqwest's `pool_idle_timeout`).
pub(crate) const IDLE_TIMEOUT: Duration = Duration::from_secs(90);
/// Largest response head (status line and headers), hyper's client default.
const MAX_HEAD_BYTES: usize = 400 * 1024;
/// Most response headers parsed.
const MAX_HEADERS: usize = 100;
/// Upstream addresses whose idle connections one thread keeps (past this the pool is
/// emptied).
const MAX_POOLED_ENDPOINTS: usize = 256;
/// What one read asks for at least.
const READ_CHUNK: usize = 16 * 1024;
/// A connection's read buffer larger than this is not kept for the next request.
const KEEP_BUFFER_BYTES: usize = 64 * 1024;

/// How an exchange ended.
#[derive(Debug)]
pub(crate) enum Exchange {
    /// A success status and the whole body.
    Whole(Vec<u8>),
    /// A failure before any response head (a transport failure or timeout: the request
    /// may not have reached the upstream, as with a failed reqwest `send`) or after it (an
    /// error status, or a body that was cut, too large or not decodable).
    Failed(AttemptFailure),
    /// No connection could be opened (not a timeout): nothing was sent, so the caller
    /// sends the request through reqwest instead.
    Unconnected,
}

/// One idle (or in-use) connection and what it has read past the last response.
#[derive(Debug)]
struct Conn {
    stream: TcpStream,
    buf: Vec<u8>,
    idle_since: Instant,
}

#[derive(Debug, Default)]
struct Pool {
    /// The runtime whose reactor the pooled sockets are registered with.
    runtime: Option<tokio::runtime::Id>,
    /// Idle connections per upstream address (`host:port`): endpoints that share an
    /// address share its connections, across profile switches too.
    idle: HashMap<Arc<str>, Vec<Conn>>,
    /// When connections idle past [`IDLE_TIMEOUT`] were last closed (those of an
    /// address no profile uses any more are never checked out again).
    swept: Option<Instant>,
}

impl Pool {
    /// Closes every connection idle past [`IDLE_TIMEOUT`], at most once per timeout.
    fn sweep(&mut self, now: Instant) {
        if self
            .swept
            .is_some_and(|swept| now.duration_since(swept) < IDLE_TIMEOUT)
        {
            return;
        }
        self.swept = Some(now);
        self.idle.retain(|_, conns| {
            conns.retain(|conn| now.duration_since(conn.idle_since) < IDLE_TIMEOUT);
            !conns.is_empty()
        });
    }
}

thread_local! {
    static POOL: RefCell<Pool> = RefCell::new(Pool::default());
}

/// A live idle connection to `address`, if the pool has one.
fn checkout(address: &str) -> Option<Conn> {
    let runtime = tokio::runtime::Handle::try_current().ok()?.id();
    POOL.with_borrow_mut(|pool| {
        if pool.runtime != Some(runtime) {
            pool.idle.clear();
            pool.runtime = Some(runtime);
        }
        let idle = pool.idle.get_mut(address)?;
        while let Some(conn) = idle.pop() {
            if conn.idle_since.elapsed() < IDLE_TIMEOUT && still_open(&conn.stream) {
                return Some(conn);
            }
        }
        None
    })
}

/// Whether an idle connection is still usable: nothing arrived on it since its last
/// response (neither bytes nor the upstream's close). Costs no system call unless the
/// reactor saw the socket become readable.
fn still_open(stream: &TcpStream) -> bool {
    let mut cx = Context::from_waker(Waker::noop());
    match stream.poll_read_ready(&mut cx) {
        Poll::Pending => true,
        Poll::Ready(Err(_)) => false,
        Poll::Ready(Ok(())) => {
            let mut probe = [0u8; 1];
            matches!(stream.try_read(&mut probe), Err(err) if err.kind() == io::ErrorKind::WouldBlock)
        }
    }
}

/// Returns `conn` to `address`'s idle connections.
fn checkin(address: &Arc<str>, mut conn: Conn) {
    let Ok(runtime) = tokio::runtime::Handle::try_current().map(|h| h.id()) else {
        return;
    };
    if conn.buf.capacity() > KEEP_BUFFER_BYTES {
        conn.buf = Vec::new();
    }
    conn.buf.clear();
    conn.idle_since = Instant::now();
    POOL.with_borrow_mut(|pool| {
        if pool.runtime != Some(runtime) {
            pool.idle.clear();
            pool.runtime = Some(runtime);
        }
        pool.sweep(conn.idle_since);
        if !pool.idle.contains_key(&**address) && pool.idle.len() >= MAX_POOLED_ENDPOINTS {
            pool.idle.clear();
        }
        let idle = pool.idle.entry(address.clone()).or_default();
        if idle.len() < MAX_IDLE_PER_ENDPOINT {
            idle.push(conn);
        }
    });
}

/// Sends a buffered POST of `body` to `path` of `endpoint`, whose plain target is
/// `plain`, and reads the whole answer within the endpoint's `timeout`.
pub(crate) async fn exchange(
    endpoint: &Endpoint,
    plain: &PlainTarget,
    path: ApiPath,
    body: &[u8],
) -> Exchange {
    let request = request_bytes(plain, path, body);
    let call = Call {
        endpoint,
        plain,
        path,
    };
    match tokio::time::timeout(endpoint.limits.timeout, call.run(&request)).await {
        Ok(outcome) => outcome,
        Err(_) => Exchange::Failed(AttemptFailure::no_answer_in_time(
            &endpoint.id,
            Phase::BeforeHead,
        )),
    }
}

/// The request head and body, ready to write in one go.
fn request_bytes(plain: &PlainTarget, path: ApiPath, body: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let head = plain.head(path);
    let mut out = Vec::with_capacity(head.len() + 32 + body.len());
    out.extend_from_slice(head);
    let _ = write!(out, "content-length: {}\r\n\r\n", body.len());
    out.extend_from_slice(body);
    out
}

/// What a failed try on a connection means.
enum TryError {
    /// Writing the request failed: for a reused connection the request goes out once
    /// more on a new one.
    Stale(io::Error),
    /// A final outcome.
    Done(Exchange),
}

struct Call<'a> {
    endpoint: &'a Endpoint,
    plain: &'a PlainTarget,
    path: ApiPath,
}

impl Call<'_> {
    async fn run(&self, request: &[u8]) -> Exchange {
        if let Some(conn) = checkout(self.plain.connect()) {
            match self.on(conn, request).await {
                Ok(outcome) => return outcome,
                Err(TryError::Done(outcome)) => return outcome,
                // Closed under us while idle: a new connection below.
                Err(TryError::Stale(_)) => {}
            }
        }
        let connect = TcpStream::connect(self.plain.connect());
        let stream = match tokio::time::timeout(self.endpoint.limits.connect_timeout, connect).await
        {
            Ok(Ok(stream)) => stream,
            Ok(Err(_)) => return Exchange::Unconnected,
            Err(_) => {
                return Exchange::Failed(AttemptFailure::no_answer_in_time(
                    &self.endpoint.id,
                    Phase::BeforeHead,
                ));
            }
        };
        let _ = stream.set_nodelay(true);
        let conn = Conn {
            stream,
            buf: Vec::new(),
            idle_since: Instant::now(),
        };
        match self.on(conn, request).await {
            Ok(outcome) | Err(TryError::Done(outcome)) => outcome,
            Err(TryError::Stale(err)) => Exchange::Failed(self.transport(&err)),
        }
    }

    /// `endpoint X unreachable: ...`, in the shape of reqwest's message for a failed send.
    fn transport(&self, err: &io::Error) -> AttemptFailure {
        AttemptFailure::transport(
            format!(
                "endpoint {} unreachable: error sending request for url ({}): client error (SendRequest): {err}",
                self.endpoint.id,
                self.plain.shown(self.path)
            ),
            Phase::BeforeHead,
        )
    }

    /// A failure reading the body, in the shape of reqwest's message for it.
    fn body_error(&self, err: &io::Error) -> Exchange {
        Exchange::Failed(AttemptFailure::transport(
            format!(
                "endpoint {} unreachable: error decoding response body: request or response body error: error reading a body from connection: {err}",
                self.endpoint.id
            ),
            Phase::AfterHead,
        ))
    }

    /// One try on `conn`.
    async fn on(&self, mut conn: Conn, request: &[u8]) -> Result<Exchange, TryError> {
        conn.stream
            .write_all(request)
            .await
            .map_err(TryError::Stale)?;
        let head = loop {
            match read_head(&mut conn).await {
                Ok(head) if head.status.is_informational() => {
                    if head.status == StatusCode::SWITCHING_PROTOCOLS {
                        return Err(TryError::Done(self.head_error("unexpected 101 response")));
                    }
                    conn.buf.drain(..head.len);
                }
                Ok(head) => break head,
                Err(HeadError::Closed) => {
                    return Err(TryError::Done(
                        self.head_error("connection closed before message completed"),
                    ));
                }
                Err(HeadError::Io(err)) => {
                    return Err(TryError::Done(Exchange::Failed(self.transport(&err))));
                }
                Err(HeadError::Invalid(what)) => return Err(TryError::Done(self.head_error(what))),
            }
        };
        conn.buf.drain(..head.len);
        let id = &*self.endpoint.id;
        if let Some(coding) = &head.content_encoding {
            return Ok(Exchange::Failed(AttemptFailure::protocol(
                format!(
                    "endpoint {id} answered with content-encoding {coding}, which the gateway did not ask for"
                ),
                false,
            )));
        }
        let success = head.status.is_success();
        let cap = if success {
            self.endpoint.limits.max_response_bytes
        } else {
            MAX_ERROR_BODY_BYTES
        };
        let read = read_body(&mut conn, head.framing, cap).await;
        let address = self.plain.connect_key();
        if !success {
            // Only the start of an error body is read (for the upstream's message).
            let body = match read {
                Ok(BodyRead::Whole(body)) => {
                    if head.keep_alive && conn.buf.is_empty() {
                        checkin(address, conn);
                    }
                    body
                }
                Ok(BodyRead::Cut(body)) => body,
                Err(_) => Vec::new(),
            };
            return Ok(Exchange::Failed(AttemptFailure::status(
                id,
                head.status,
                &body,
                self.path.is_capability(),
            )));
        }
        Ok(match read {
            Ok(BodyRead::Whole(body)) => {
                if head.keep_alive && conn.buf.is_empty() {
                    checkin(address, conn);
                }
                Exchange::Whole(body)
            }
            Ok(BodyRead::Cut(_)) => Exchange::Failed(AttemptFailure::too_large(id, cap)),
            Err(err) => self.body_error(&err),
        })
    }

    fn head_error(&self, what: &str) -> Exchange {
        Exchange::Failed(
            self.transport(&io::Error::new(io::ErrorKind::InvalidData, what.to_owned())),
        )
    }
}

/// How a response body is delimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Framing {
    /// `Content-Length` (or no body at all: 0).
    Length(u64),
    /// `Transfer-Encoding: chunked`.
    Chunked,
    /// Until the upstream closes the connection.
    Close,
}

/// A parsed response head.
#[derive(Debug)]
struct Head {
    status: StatusCode,
    /// Its length in the buffer.
    len: usize,
    framing: Framing,
    /// Whether the connection may carry another request afterwards.
    keep_alive: bool,
    /// A `Content-Encoding` other than `identity`.
    content_encoding: Option<String>,
}

#[derive(Debug)]
enum HeadError {
    /// The upstream closed the connection before a whole head arrived.
    Closed,
    Io(io::Error),
    Invalid(&'static str),
}

/// Reads more of the connection into its buffer; `Ok(0)` at the end.
async fn fill(conn: &mut Conn) -> io::Result<usize> {
    conn.buf.reserve(READ_CHUNK);
    conn.stream.read_buf(&mut conn.buf).await
}

/// Reads until `conn.buf` starts with a whole response head, and parses it.
async fn read_head(conn: &mut Conn) -> Result<Head, HeadError> {
    loop {
        if !conn.buf.is_empty() {
            if let Some(head) = parse_head(&conn.buf)? {
                return Ok(head);
            }
            if conn.buf.len() > MAX_HEAD_BYTES {
                return Err(HeadError::Invalid("message head is too large"));
            }
        }
        match fill(conn).await {
            Ok(0) => return Err(HeadError::Closed),
            Ok(_) => {}
            Err(err) => return Err(HeadError::Io(err)),
        }
    }
}

/// Parses the head at the start of `buf`; `None` while it is incomplete.
fn parse_head(buf: &[u8]) -> Result<Option<Head>, HeadError> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut response = httparse::Response::new(&mut headers);
    let len = match response.parse(buf) {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(httparse::Error::TooManyHeaders) => {
            return Err(HeadError::Invalid("message head is too large"));
        }
        Err(_) => return Err(HeadError::Invalid("invalid HTTP response head")),
    };
    let status = response
        .code
        .and_then(|code| StatusCode::from_u16(code).ok())
        .ok_or(HeadError::Invalid("invalid HTTP status code"))?;
    let http11 = response.version == Some(1);
    let mut keep_alive = http11;
    let mut length: Option<u64> = None;
    let mut chunked = false;
    let mut transfer_encoding = false;
    let mut content_encoding = None;
    for header in response.headers.iter() {
        let value = std::str::from_utf8(header.value)
            .map_err(|_| HeadError::Invalid("invalid HTTP header value"))?
            .trim();
        let name = header.name;
        if name.eq_ignore_ascii_case("content-length") {
            let parsed = parse_length(value)?;
            if length.is_some_and(|seen| seen != parsed) {
                return Err(HeadError::Invalid("conflicting content-length headers"));
            }
            length = Some(parsed);
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            transfer_encoding = true;
            chunked = value
                .rsplit(',')
                .next()
                .is_some_and(|last| last.trim().eq_ignore_ascii_case("chunked"));
        } else if name.eq_ignore_ascii_case("connection") {
            for token in value.split(',').map(str::trim) {
                if token.eq_ignore_ascii_case("close") {
                    keep_alive = false;
                } else if token.eq_ignore_ascii_case("keep-alive") && !http11 {
                    keep_alive = true;
                }
            }
        } else if name.eq_ignore_ascii_case("content-encoding")
            && !value.is_empty()
            && !value.eq_ignore_ascii_case("identity")
        {
            content_encoding = Some(value.to_owned());
        }
    }
    let no_body = status.is_informational()
        || status == StatusCode::NO_CONTENT
        || status == StatusCode::NOT_MODIFIED;
    let framing = if no_body {
        Framing::Length(0)
    } else if transfer_encoding {
        if chunked {
            Framing::Chunked
        } else {
            Framing::Close
        }
    } else {
        match length {
            Some(length) => Framing::Length(length),
            None => Framing::Close,
        }
    };
    if framing == Framing::Close {
        keep_alive = false;
    }
    Ok(Some(Head {
        status,
        len,
        framing,
        keep_alive,
        content_encoding,
    }))
}

fn parse_length(value: &str) -> Result<u64, HeadError> {
    if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
        return Err(HeadError::Invalid("invalid content-length header"));
    }
    value
        .parse()
        .map_err(|_| HeadError::Invalid("invalid content-length header"))
}

/// A body read up to a cap.
#[derive(Debug)]
enum BodyRead {
    /// The whole body; the connection's buffer holds what came after it.
    Whole(Vec<u8>),
    /// The body goes on past the cap (what was read of it; the rest is never read).
    Cut(Vec<u8>),
}

fn cut_short() -> io::Error {
    io::Error::new(
        io::ErrorKind::UnexpectedEof,
        "end of file before message length reached",
    )
}

/// Reads the body that follows the head (already removed from `conn.buf`).
async fn read_body(conn: &mut Conn, framing: Framing, cap: usize) -> io::Result<BodyRead> {
    match framing {
        Framing::Length(length) => {
            if length > cap as u64 {
                return Ok(BodyRead::Cut(Vec::new()));
            }
            // `length <= cap`, which is a usize.
            let length = usize::try_from(length).unwrap_or(cap);
            while conn.buf.len() < length {
                if fill(conn).await? == 0 {
                    return Err(cut_short());
                }
            }
            let rest = conn.buf.split_off(length);
            let body = std::mem::replace(&mut conn.buf, rest);
            Ok(BodyRead::Whole(body))
        }
        Framing::Close => {
            loop {
                if conn.buf.len() > cap {
                    conn.buf.truncate(cap);
                    return Ok(BodyRead::Cut(std::mem::take(&mut conn.buf)));
                }
                if fill(conn).await? == 0 {
                    break;
                }
            }
            Ok(BodyRead::Whole(std::mem::take(&mut conn.buf)))
        }
        Framing::Chunked => read_chunked(conn, cap).await,
    }
}

/// Decodes a chunked body (extensions and trailers are read and ignored).
async fn read_chunked(conn: &mut Conn, cap: usize) -> io::Result<BodyRead> {
    let invalid = |what: &str| io::Error::new(io::ErrorKind::InvalidData, what.to_owned());
    let mut body = Vec::new();
    // Where the undecoded part of `conn.buf` starts.
    let mut at = 0;
    loop {
        let (consumed, size) = loop {
            match httparse::parse_chunk_size(&conn.buf[at..]) {
                Ok(httparse::Status::Complete(parsed)) => break parsed,
                Ok(httparse::Status::Partial) => {
                    if conn.buf.len() - at > MAX_HEAD_BYTES {
                        return Err(invalid("invalid chunk size line"));
                    }
                    if fill(conn).await? == 0 {
                        return Err(cut_short());
                    }
                }
                Err(_) => return Err(invalid("invalid chunk size line")),
            }
        };
        at += consumed;
        if size == 0 {
            // Trailers: header lines up to an empty line, all of them together no larger
            // than a response head.
            let trailers = at;
            loop {
                let line_end = loop {
                    if let Some(end) = conn.buf[at..].windows(2).position(|w| w == b"\r\n") {
                        break end;
                    }
                    if conn.buf.len() - trailers > MAX_HEAD_BYTES {
                        return Err(invalid("chunked trailers too large"));
                    }
                    if fill(conn).await? == 0 {
                        return Err(cut_short());
                    }
                };
                at += line_end + 2;
                if line_end == 0 {
                    conn.buf.drain(..at);
                    return Ok(BodyRead::Whole(body));
                }
                if at - trailers > MAX_HEAD_BYTES {
                    return Err(invalid("chunked trailers too large"));
                }
            }
        }
        let room = (cap - body.len()) as u64;
        if size > room {
            // The cap is reached within this chunk: keep what fits, read no further.
            let available = conn.buf.len() - at;
            let take = available.min(cap - body.len());
            body.extend_from_slice(&conn.buf[at..at + take]);
            return Ok(BodyRead::Cut(body));
        }
        // `size <= room <= cap`, which is a usize.
        let size = usize::try_from(size).unwrap_or(0);
        while conn.buf.len() - at < size + 2 {
            if fill(conn).await? == 0 {
                return Err(cut_short());
            }
        }
        body.extend_from_slice(&conn.buf[at..at + size]);
        if &conn.buf[at + size..at + size + 2] != b"\r\n" {
            return Err(invalid("chunk not followed by CRLF"));
        }
        at += size + 2;
        // Keep the buffer from growing with the whole body.
        if at > READ_CHUNK {
            conn.buf.drain(..at);
            at = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::collections::VecDeque;
    use std::sync::{Arc, Mutex};

    use axum::body::Bytes;
    use tokio::net::TcpListener;

    use super::*;
    use crate::plan::Limits;
    use crate::relay::transport::FailureKind;
    use crate::secret::Secret;

    /// What the scripted upstream does with one request.
    #[derive(Debug, Clone)]
    enum Act {
        /// Writes these bytes and waits for the next request on the connection.
        Reply(&'static str),
        /// Writes these bytes and closes the connection.
        ReplyClose(String),
        /// Closes the connection without answering.
        Close,
        /// Never answers.
        Hang,
    }

    #[derive(Debug, Default)]
    struct Seen {
        connections: usize,
        heads: Vec<String>,
        bodies: Vec<Vec<u8>>,
    }

    /// A raw HTTP/1.1 upstream on 127.0.0.1:0 acting out `script`, one act per request,
    /// in order over all connections.
    async fn upstream(script: Vec<Act>) -> (String, Arc<Mutex<Seen>>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Seen::default()));
        let script = Arc::new(Mutex::new(VecDeque::from(script)));
        let record = seen.clone();
        tokio::spawn(async move {
            loop {
                let Ok((mut stream, _)) = listener.accept().await else {
                    return;
                };
                record.lock().unwrap().connections += 1;
                let (record, script) = (record.clone(), script.clone());
                tokio::spawn(async move {
                    let mut buf = Vec::new();
                    loop {
                        // One request: the head, then `content-length` bytes.
                        let head_end = loop {
                            if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                                break end + 4;
                            }
                            let mut chunk = [0u8; 4096];
                            match stream.read(&mut chunk).await {
                                Ok(0) | Err(_) => return,
                                Ok(n) => buf.extend_from_slice(&chunk[..n]),
                            }
                        };
                        let head = String::from_utf8(buf[..head_end].to_vec()).unwrap();
                        let length: usize = head
                            .lines()
                            .find_map(|l| l.strip_prefix("content-length: "))
                            .map_or(0, |v| v.trim().parse().unwrap());
                        while buf.len() < head_end + length {
                            let mut chunk = [0u8; 4096];
                            match stream.read(&mut chunk).await {
                                Ok(0) | Err(_) => return,
                                Ok(n) => buf.extend_from_slice(&chunk[..n]),
                            }
                        }
                        let body = buf[head_end..head_end + length].to_vec();
                        buf.drain(..head_end + length);
                        {
                            let mut seen = record.lock().unwrap();
                            seen.heads.push(head);
                            seen.bodies.push(body);
                        }
                        let act = script.lock().unwrap().pop_front().unwrap_or(Act::Close);
                        match act {
                            Act::Reply(bytes) => {
                                if stream.write_all(bytes.as_bytes()).await.is_err() {
                                    return;
                                }
                            }
                            Act::ReplyClose(bytes) => {
                                let _ = stream.write_all(bytes.as_bytes()).await;
                                return;
                            }
                            Act::Close => return,
                            Act::Hang => std::future::pending::<()>().await,
                        }
                    }
                });
            }
        });
        (format!("http://{addr}/v1"), seen)
    }

    fn limits() -> Limits {
        Limits {
            connect_timeout: Duration::from_secs(5),
            timeout: Duration::from_secs(10),
            stream_first_byte_timeout: Duration::from_secs(10),
            stream_idle_timeout: Duration::from_secs(10),
            max_response_bytes: 64,
            max_stream_event_bytes: 1024,
            failover_cooldown: Duration::from_secs(1),
        }
    }

    fn endpoint_with(base_url: &str, limits: Limits) -> Endpoint {
        let url = reqwest::Url::parse(base_url).unwrap();
        Endpoint::new("up", &url, Some(Secret::new("up-key")), limits)
    }

    fn endpoint(base_url: &str) -> Endpoint {
        endpoint_with(base_url, limits())
    }

    async fn send(endpoint: &Endpoint, body: &'static str) -> Exchange {
        let plain = endpoint.plain().expect("a plain target");
        exchange(endpoint, plain, ApiPath::ChatCompletions, body.as_bytes()).await
    }

    fn whole(exchange: Exchange) -> String {
        match exchange {
            Exchange::Whole(body) => String::from_utf8(body).unwrap(),
            other => panic!("not a whole body: {other:?}"),
        }
    }

    fn failed(exchange: Exchange, phase: Phase) -> AttemptFailure {
        match exchange {
            Exchange::Failed(failed) if failed.phase == phase => failed,
            other => panic!("not a failure {phase:?}: {other:?}"),
        }
    }

    fn after_head(exchange: Exchange) -> AttemptFailure {
        failed(exchange, Phase::AfterHead)
    }

    fn before_head(exchange: Exchange) -> AttemptFailure {
        failed(exchange, Phase::BeforeHead)
    }

    const OK: &str =
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 8\r\n\r\n{\"a\":12}";

    #[test]
    fn response_heads_are_framed_as_hyper_frames_them() {
        let head = |text: &str| parse_head(text.as_bytes()).unwrap().unwrap();
        let h = head("HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\n");
        assert_eq!((h.framing, h.keep_alive), (Framing::Length(12), true));
        let h = head("HTTP/1.1 200 OK\r\ntransfer-encoding: gzip, Chunked\r\n\r\n");
        assert_eq!((h.framing, h.keep_alive), (Framing::Chunked, true));
        let h = head("HTTP/1.1 200 OK\r\n\r\n");
        assert_eq!((h.framing, h.keep_alive), (Framing::Close, false));
        let h =
            head("HTTP/1.1 200 OK\r\nConnection: keep-alive, Close\r\ncontent-length: 1\r\n\r\n");
        assert!(!h.keep_alive);
        let h = head("HTTP/1.0 200 OK\r\ncontent-length: 1\r\n\r\n");
        assert!(!h.keep_alive);
        let h = head("HTTP/1.0 200 OK\r\nconnection: keep-alive\r\ncontent-length: 1\r\n\r\n");
        assert!(h.keep_alive);
        let h = head("HTTP/1.1 204 No Content\r\n\r\n");
        assert_eq!((h.framing, h.keep_alive), (Framing::Length(0), true));
        let h = head("HTTP/1.1 200 OK\r\ncontent-encoding: gzip\r\ncontent-length: 1\r\n\r\n");
        assert_eq!(h.content_encoding.as_deref(), Some("gzip"));
        assert!(
            parse_head(b"HTTP/1.1 200 OK\r\ncontent-le")
                .unwrap()
                .is_none()
        );
        for bad in [
            "HTTP/1.1 200 OK\r\ncontent-length: 1\r\ncontent-length: 2\r\n\r\n",
            "HTTP/1.1 200 OK\r\ncontent-length: -1\r\n\r\n",
            "HELLO\r\n\r\n",
        ] {
            assert!(parse_head(bad.as_bytes()).is_err(), "{bad}");
        }
    }

    #[tokio::test]
    async fn requests_share_one_kept_alive_connection() {
        let (url, seen) = upstream(vec![Act::Reply(OK), Act::Reply(OK)]).await;
        let up = endpoint(&url);
        assert_eq!(whole(send(&up, r#"{"m":1}"#).await), r#"{"a":12}"#);
        assert_eq!(whole(send(&up, r#"{"m":2}"#).await), r#"{"a":12}"#);
        let seen = seen.lock().unwrap();
        assert_eq!(seen.connections, 1);
        let head = &seen.heads[0];
        let port = url
            .trim_start_matches("http://127.0.0.1:")
            .trim_end_matches("/v1");
        assert!(
            head.starts_with("POST /v1/chat/completions HTTP/1.1\r\n"),
            "{head}"
        );
        for line in [
            format!("host: 127.0.0.1:{port}"),
            "content-type: application/json".into(),
            "authorization: Bearer up-key".into(),
            "accept-encoding: identity".into(),
            "content-length: 7".into(),
        ] {
            assert!(head.contains(&format!("{line}\r\n")), "{line}: {head}");
        }
        assert_eq!(
            seen.bodies,
            [br#"{"m":1}"#.to_vec(), br#"{"m":2}"#.to_vec()]
        );
    }

    #[tokio::test]
    async fn chunked_bodies_are_decoded() {
        let chunked = "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3;x=y\r\nabc\r\n0a\r\n0123456789\r\n0\r\nx-trailer: 1\r\n\r\n";
        let (url, seen) = upstream(vec![Act::Reply(chunked), Act::Reply(OK)]).await;
        let up = endpoint(&url);
        assert_eq!(whole(send(&up, "{}").await), "abc0123456789");
        // The trailer was consumed: the connection serves the next request.
        assert_eq!(whole(send(&up, "{}").await), r#"{"a":12}"#);
        assert_eq!(seen.lock().unwrap().connections, 1);
    }

    #[tokio::test]
    async fn chunked_trailers_are_bounded_like_a_head() {
        // Short trailer lines, each well under the bound, adding up to more than a head.
        let line = "x-t: 1\r\n";
        let endless = format!(
            "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n{}\r\n",
            line.repeat(MAX_HEAD_BYTES / line.len() + 2)
        );
        let (url, seen) = upstream(vec![Act::ReplyClose(endless), Act::Reply(OK)]).await;
        let up = endpoint(&url);
        let failed = after_head(send(&up, "{}").await);
        assert_eq!(failed.kind, FailureKind::Transport);
        assert!(
            failed.message.contains("chunked trailers too large"),
            "{}",
            failed.message
        );
        assert_eq!(whole(send(&up, "{}").await), r#"{"a":12}"#);
        assert_eq!(seen.lock().unwrap().connections, 2);
    }

    #[tokio::test]
    async fn a_connection_the_response_does_not_keep_alive_is_not_reused() {
        let close =
            "HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: 2\r\n\r\nok".to_owned();
        let until_eof = "HTTP/1.1 200 OK\r\n\r\nuntil the end".to_owned();
        let (url, seen) = upstream(vec![
            Act::ReplyClose(close),
            Act::ReplyClose(until_eof),
            Act::Reply(OK),
        ])
        .await;
        let up = endpoint(&url);
        assert_eq!(whole(send(&up, "{}").await), "ok");
        assert_eq!(whole(send(&up, "{}").await), "until the end");
        assert_eq!(whole(send(&up, "{}").await), r#"{"a":12}"#);
        assert_eq!(seen.lock().unwrap().connections, 3);
    }

    #[tokio::test]
    async fn a_pooled_connection_closed_while_idle_is_replaced() {
        // The upstream answers (keep-alive) and then closes the connection.
        let (url, seen) = upstream(vec![Act::ReplyClose(OK.to_owned()), Act::Reply(OK)]).await;
        let up = endpoint(&url);
        assert_eq!(whole(send(&up, "{}").await), r#"{"a":12}"#);
        // The close is seen before the reuse: the request goes out on a new connection.
        assert_eq!(whole(send(&up, "{}").await), r#"{"a":12}"#);
        assert_eq!(seen.lock().unwrap().connections, 2);
    }

    #[tokio::test]
    async fn a_request_written_to_a_reused_connection_is_never_sent_twice() {
        // The upstream reads the second request on the kept-alive connection and closes
        // it without an answer.
        let (url, seen) = upstream(vec![Act::Reply(OK), Act::Close, Act::Reply(OK)]).await;
        let up = endpoint(&url);
        assert_eq!(whole(send(&up, "{}").await), r#"{"a":12}"#);
        let failed = before_head(send(&up, "{}").await);
        assert!(failed.retryable, "failover may move on");
        assert_eq!(failed.kind, FailureKind::Transport);
        assert_eq!(seen.lock().unwrap().heads.len(), 2, "sent once");
        assert_eq!(whole(send(&up, "{}").await), r#"{"a":12}"#);
        assert_eq!(seen.lock().unwrap().connections, 2);
    }

    #[tokio::test]
    async fn bodies_over_the_cap_fail_and_close_the_connection() {
        let declared = "HTTP/1.1 200 OK\r\ncontent-length: 65\r\n\r\n";
        let chunked = "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n40\r\n0123456789012345678901234567890123456789012345678901234567890123\r\n1\r\nx\r\n0\r\n\r\n";
        let (url, seen) = upstream(vec![
            Act::Reply(declared),
            Act::Reply(chunked),
            Act::Reply(OK),
        ])
        .await;
        let up = endpoint(&url);
        for _ in 0..2 {
            let failed = after_head(send(&up, "{}").await);
            assert!(!failed.retryable);
            assert_eq!(failed.kind, FailureKind::Protocol);
            assert_eq!(
                failed.message,
                AttemptFailure::too_large("up", 64).message,
                "the message of the reqwest path"
            );
        }
        assert_eq!(whole(send(&up, "{}").await), r#"{"a":12}"#);
        assert_eq!(seen.lock().unwrap().connections, 3);
    }

    #[tokio::test]
    async fn error_statuses_map_as_on_the_reqwest_path() {
        let busy = "HTTP/1.1 503 Service Unavailable\r\ncontent-length: 29\r\n\r\n{\"error\":{\"message\":\"busy!\"}}";
        let bad = "HTTP/1.1 400 Bad Request\r\ncontent-length: 2\r\n\r\n{}";
        let (url, seen) = upstream(vec![Act::Reply(busy), Act::Reply(bad), Act::Reply(OK)]).await;
        let up = endpoint(&url);
        let failed = after_head(send(&up, "{}").await);
        assert!(failed.retryable);
        assert_eq!(failed.kind, FailureKind::Status);
        assert_eq!(
            failed.message,
            AttemptFailure::status(
                "up",
                StatusCode::SERVICE_UNAVAILABLE,
                br#"{"error":{"message":"busy!"}}"#,
                false
            )
            .message
        );
        assert!(failed.message.contains("busy!"));
        let failed = after_head(send(&up, "{}").await);
        assert!(!failed.retryable);
        assert_eq!(failed.kind, FailureKind::Rejected);
        // Both error bodies were read whole: the connection stays in use.
        assert_eq!(whole(send(&up, "{}").await), r#"{"a":12}"#);
        assert_eq!(seen.lock().unwrap().connections, 1);
    }

    #[tokio::test]
    async fn transport_failures_are_retryable_and_never_reuse_the_connection() {
        let cut = "HTTP/1.1 200 OK\r\ncontent-length: 50\r\n\r\nonly ten b".to_owned();
        let encoded = "HTTP/1.1 200 OK\r\ncontent-encoding: gzip\r\ncontent-length: 1\r\n\r\nx";
        let (url, seen) = upstream(vec![
            Act::Close,
            Act::ReplyClose(cut),
            Act::ReplyClose("garbage\r\n\r\n".into()),
            Act::Reply(encoded),
            Act::Reply(OK),
        ])
        .await;
        let up = endpoint(&url);
        // Closed without an answer, on a new connection: no second try.
        let failed = before_head(send(&up, "{}").await);
        assert!(failed.retryable);
        assert_eq!(failed.kind, FailureKind::Transport);
        assert!(
            failed.message.starts_with("endpoint up unreachable: "),
            "{}",
            failed.message
        );
        // Cut in the middle of the body.
        let failed = after_head(send(&up, "{}").await);
        assert!(failed.retryable);
        assert_eq!(failed.kind, FailureKind::Transport);
        // Not HTTP.
        let failed = before_head(send(&up, "{}").await);
        assert_eq!(failed.kind, FailureKind::Transport);
        // An encoding the request did not accept.
        let failed = after_head(send(&up, "{}").await);
        assert_eq!(failed.kind, FailureKind::Protocol);
        assert_eq!(whole(send(&up, "{}").await), r#"{"a":12}"#);
        let seen = seen.lock().unwrap();
        assert_eq!(seen.heads.len(), 5, "every request was sent exactly once");
        assert_eq!(seen.connections, 5);
    }

    #[tokio::test]
    async fn the_whole_exchange_is_bounded_by_the_endpoint_timeout() {
        let (url, _seen) = upstream(vec![Act::Hang]).await;
        let short = Limits {
            timeout: Duration::from_millis(200),
            ..limits()
        };
        let up = endpoint_with(&url, short);
        let failed = tokio::time::timeout(Duration::from_secs(10), send(&up, "{}"))
            .await
            .expect("the endpoint timeout did not end the exchange");
        let failed = before_head(failed);
        assert!(failed.retryable);
        assert_eq!(failed.kind, FailureKind::Timeout);
        assert_eq!(failed.message, "endpoint up did not answer in time");
        // Nothing listens: the attempt is left to reqwest, which reports it as before.
        let up = endpoint_with("http://127.0.0.1:1/v1", short);
        assert!(matches!(send(&up, "{}").await, Exchange::Unconnected));
    }

    /// The reqwest path's message for the same failure, for comparison.
    async fn via_reqwest(up: &Endpoint) -> String {
        let body = Bytes::from_static(b"{}");
        match crate::relay::pooled::send(up, ApiPath::ChatCompletions, &body, false).await {
            Ok(answer) => panic!("reqwest succeeded: {answer:?}"),
            Err(failed) => failed.message,
        }
    }

    #[tokio::test]
    async fn a_body_cut_short_reads_as_on_the_reqwest_path() {
        let cut = "HTTP/1.1 200 OK\r\ncontent-length: 50\r\n\r\nonly ten b".to_owned();
        let (url, _seen) = upstream(vec![Act::ReplyClose(cut.clone()), Act::ReplyClose(cut)]).await;
        let up = endpoint(&url);
        let ours = after_head(send(&up, "{}").await).message;
        let theirs = via_reqwest(&up).await;
        assert_eq!(ours, theirs);
    }

    #[tokio::test]
    async fn a_connection_closed_without_an_answer_reads_as_on_the_reqwest_path() {
        let (url, _seen) = upstream(vec![Act::Close, Act::Close]).await;
        let up = endpoint(&url);
        let ours = before_head(send(&up, "{}").await).message;
        let theirs = via_reqwest(&up).await;
        assert_eq!(ours, theirs);
    }
}
