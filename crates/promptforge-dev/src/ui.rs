//! `--ui`: the trace viewer served live on loopback.
//!
//! [`UiServer::start`] binds `127.0.0.1` on a port the kernel picks and serves the viewer
//! (`promptforge_trace::viewer::live_html`) under a random 128-bit token:
//! `http://127.0.0.1:PORT/TOKEN/`. Every other path is a 404, a request whose `Host` is
//! not this loopback address is refused (a web page cannot reach the server through DNS
//! rebinding), and the token is compared in constant time. Each run registers with the
//! server's [`Hub`]; its spans stream to every open page as server-sent events as they
//! start and end, and the pages fetch whole documents from `api/runs/<n>`.
//!
//! Bounds: at most [`UiLimits::max_connections`] connections are served at once (one over
//! the cap is closed as soon as it is accepted), a connection that has not sent a whole
//! request head within [`UiLimits::header_read_timeout`] (from its accept, or from its
//! previous response when idle between requests) is closed, the last [`MAX_RUNS`] runs are kept (older ones are forgotten), each run's trace
//! is bounded by core's `TraceLimits`, at most [`MAX_STREAMS`] event streams are open at
//! once, and a page that falls more than [`EVENT_BACKLOG`] events behind is told to reload
//! (`resync`) instead of holding the run back.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use futures::stream::Stream;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use promptforge_core::trace::{Span, SpanListener, SpanStatus, Tracer};
use rand::Rng;
use serde_json::{Value as Json, json};
use subtle::ConstantTimeEq;
use tokio::sync::{Semaphore, broadcast, oneshot};
use tokio_util::sync::CancellationToken;
use tower::ServiceExt as _;

/// Runs kept for the viewer; older ones are forgotten.
pub const MAX_RUNS: usize = 20;

/// Event streams (open viewer pages) served at once; more are refused with 503.
pub const MAX_STREAMS: usize = 16;

/// Events a page may fall behind before it is told to reload.
pub const EVENT_BACKLOG: usize = 8192;

/// The default of [`UiLimits::max_connections`].
pub const MAX_CONNECTIONS: usize = 64;

/// The default of [`UiLimits::header_read_timeout`].
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// The viewer server's connection bounds: a connection cap and a header-read timeout, so
/// idle and slow-header (slowloris) connections cannot pile up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UiLimits {
    /// Connections served at once ([`MAX_CONNECTIONS`] by default); one more is closed as
    /// soon as it is accepted. Open event streams count, so keep it above [`MAX_STREAMS`].
    pub max_connections: usize,
    /// How long a connection may take to send a whole request head, counted from its
    /// accept and, between requests, from its previous response ([`HEADER_READ_TIMEOUT`]
    /// by default); then it is closed.
    pub header_read_timeout: Duration,
}

impl Default for UiLimits {
    fn default() -> Self {
        Self {
            max_connections: MAX_CONNECTIONS,
            header_read_timeout: HEADER_READ_TIMEOUT,
        }
    }
}

/// One run the viewer lists.
struct Entry {
    index: u64,
    summary: Json,
    tracer: Option<Tracer>,
}

/// The runs and the event fan-out shared by the server and the runs.
pub struct Hub {
    runs: Mutex<VecDeque<Entry>>,
    next: Mutex<u64>,
    events: broadcast::Sender<(String, Json)>,
}

impl std::fmt::Debug for Hub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hub").finish_non_exhaustive()
    }
}

impl Hub {
    fn new() -> Arc<Self> {
        let (events, _) = broadcast::channel(EVENT_BACKLOG);
        Arc::new(Self {
            runs: Mutex::new(VecDeque::new()),
            next: Mutex::new(0),
            events,
        })
    }

    fn runs(&self) -> std::sync::MutexGuard<'_, VecDeque<Entry>> {
        self.runs.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn send(&self, kind: &str, data: Json) {
        // No page open is not an error.
        let _ = self.events.send((kind.to_owned(), data));
    }

    /// Starts listing a run: returns its index and the listener its tracer streams through.
    pub fn begin(&self, prompt: &str, origin: &str) -> (u64, Arc<dyn SpanListener>) {
        let index = {
            let mut next = self.next.lock().unwrap_or_else(PoisonError::into_inner);
            let index = *next;
            *next += 1;
            index
        };
        let summary = json!({
            "index": index, "prompt": prompt, "origin": origin, "status": "running",
            "started_at": humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
        });
        {
            let mut runs = self.runs();
            runs.push_back(Entry {
                index,
                summary: summary.clone(),
                tracer: None,
            });
            while runs.len() > MAX_RUNS {
                runs.pop_front();
            }
        }
        let listener = Arc::new(RunListener {
            hub_events: self.events.clone(),
            index,
        });
        self.send("run", summary);
        (index, listener)
    }

    /// Attaches the run's tracer (before the run starts), so pages can fetch its document.
    pub fn attach(&self, index: u64, tracer: &Tracer) {
        if let Some(entry) = self.runs().iter_mut().find(|e| e.index == index) {
            entry.tracer = Some(tracer.clone());
        }
    }

    /// Marks the run finished.
    pub fn finish(&self, index: u64) {
        let status = {
            let mut runs = self.runs();
            let Some(entry) = runs.iter_mut().find(|e| e.index == index) else {
                return;
            };
            let status = entry
                .tracer
                .as_ref()
                .map_or(SpanStatus::Error, Tracer::status);
            let status = match status {
                SpanStatus::Running => SpanStatus::Error,
                other => other,
            };
            entry.summary["status"] = json!(status.as_str());
            status
        };
        self.send("done", json!({"run": index, "status": status.as_str()}));
    }

    fn list(&self) -> Json {
        Json::Array(self.runs().iter().map(|e| e.summary.clone()).collect())
    }

    fn document(&self, index: u64) -> Option<Json> {
        let runs = self.runs();
        let entry = runs.iter().find(|e| e.index == index)?;
        Some(entry.tracer.as_ref().map_or_else(
            || json!({"format": "promptforge-trace", "run": {"status": "running"}, "spans": []}),
            Tracer::document,
        ))
    }
}

/// Streams one run's spans to the open pages.
struct RunListener {
    hub_events: broadcast::Sender<(String, Json)>,
    index: u64,
}

impl SpanListener for RunListener {
    fn span_started(&self, span: &Span) {
        let _ = self.hub_events.send((
            "span".to_owned(),
            json!({"run": self.index, "span": span.to_json()}),
        ));
    }

    fn span_ended(&self, span: &Span) {
        self.span_started(span);
    }
}

/// The running viewer server; dropping it stops the server.
pub struct UiServer {
    url: String,
    hub: Arc<Hub>,
    _stop: oneshot::Sender<()>,
}

impl std::fmt::Debug for UiServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The URL holds the token: it is printed once, on purpose, and nowhere else.
        f.debug_struct("UiServer").finish_non_exhaustive()
    }
}

#[derive(Clone)]
struct App {
    hub: Arc<Hub>,
    token: Arc<str>,
    hosts: Arc<[String]>,
    streams: Arc<Semaphore>,
}

impl UiServer {
    /// Binds `127.0.0.1:0` and serves the viewer on a task of the current runtime, with the
    /// default [`UiLimits`].
    pub async fn start() -> std::io::Result<Self> {
        Self::start_with(UiLimits::default()).await
    }

    /// [`UiServer::start`] with the connection bounds `limits`.
    pub async fn start_with(limits: UiLimits) -> std::io::Result<Self> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let address = listener.local_addr()?;
        let token = format!("{:032x}", rand::rng().random::<u128>());
        let hub = Hub::new();
        let app = App {
            hub: Arc::clone(&hub),
            token: Arc::from(token.as_str()),
            hosts: Arc::from(vec![
                format!("127.0.0.1:{}", address.port()),
                format!("localhost:{}", address.port()),
            ]),
            streams: Arc::new(Semaphore::new(MAX_STREAMS)),
        };
        let router = router(app);
        let (stop, stopped) = oneshot::channel::<()>();
        tokio::spawn(async move {
            let closing = CancellationToken::new();
            tokio::select! {
                () = accept_loop(listener, router, limits, closing.clone()) => {}
                _ = stopped => {}
            }
            closing.cancel();
        });
        Ok(Self {
            url: format!("http://{address}/{token}/"),
            hub,
            _stop: stop,
        })
    }

    /// The viewer's URL, token included.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The runs the viewer lists.
    pub fn hub(&self) -> &Arc<Hub> {
        &self.hub
    }
}

/// Accepts connections and serves each on a task of its own under `limits` (axum's `serve`
/// has neither bound, so hyper's HTTP/1.1 connection builder serves them). Once `closing`
/// is cancelled (the server stopped), every connection is closed, open event streams too.
async fn accept_loop(
    listener: tokio::net::TcpListener,
    router: Router,
    limits: UiLimits,
    closing: CancellationToken,
) {
    let permits = Arc::new(Semaphore::new(limits.max_connections));
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            // Out of descriptors and the like: the listener itself is fine, so back off
            // briefly instead of spinning.
            Err(_) => {
                tokio::time::sleep(ACCEPT_BACKOFF).await;
                continue;
            }
        };
        // Over the cap: closed at once (dropping the stream closes it).
        let Ok(permit) = Arc::clone(&permits).try_acquire_owned() else {
            continue;
        };
        let (router, closing) = (router.clone(), closing.clone());
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |request: hyper::Request<Incoming>| {
                router.clone().oneshot(request.map(axum::body::Body::new))
            });
            let connection = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(limits.header_read_timeout)
                .serve_connection(TokioIo::new(stream), service);
            tokio::select! {
                _ = connection => {}
                () = closing.cancelled() => {}
            }
            drop(permit);
        });
    }
}

/// How long the accept loop waits after a failed accept (out of descriptors, say).
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

fn router(app: App) -> Router {
    Router::new()
        .route("/{token}", get(redirect))
        .route("/{token}/", get(page))
        .route("/{token}/api/runs", get(runs))
        .route("/{token}/api/runs/{index}", get(run))
        .route("/{token}/api/events", get(events))
        .with_state(app)
}

/// Why a request is refused.
enum Refused {
    /// A foreign `Host`.
    Host,
    /// The wrong token.
    Token,
}

impl IntoResponse for Refused {
    fn into_response(self) -> Response {
        match self {
            Self::Host => (
                StatusCode::FORBIDDEN,
                "this viewer answers on its loopback address only",
            )
                .into_response(),
            Self::Token => StatusCode::NOT_FOUND.into_response(),
        }
    }
}

/// Refuses a request with the wrong token or a foreign `Host`.
fn check(app: &App, token: &str, headers: &HeaderMap) -> Result<(), Refused> {
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("");
    if !app.hosts.iter().any(|h| h == host) {
        return Err(Refused::Host);
    }
    if !bool::from(token.as_bytes().ct_eq(app.token.as_bytes())) {
        return Err(Refused::Token);
    }
    Ok(())
}

fn no_store(mut response: Response) -> Response {
    let headers = response.headers_mut();
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    response
}

async fn redirect(
    State(app): State<App>,
    Path(token): Path<String>,
    headers: HeaderMap,
) -> Response {
    if let Err(refused) = check(&app, &token, &headers) {
        return refused.into_response();
    }
    no_store(Redirect::to(&format!("/{token}/")).into_response())
}

async fn page(State(app): State<App>, Path(token): Path<String>, headers: HeaderMap) -> Response {
    if let Err(refused) = check(&app, &token, &headers) {
        return refused.into_response();
    }
    no_store(
        (
            [
                (header::CONTENT_TYPE, "text/html; charset=utf-8"),
                // The page's own meta-tag policy, also as a header: only the page's script
                // runs, by its hash.
                (
                    header::CONTENT_SECURITY_POLICY,
                    promptforge_trace::viewer::content_security_policy(),
                ),
            ],
            promptforge_trace::viewer::live_html(),
        )
            .into_response(),
    )
}

async fn runs(State(app): State<App>, Path(token): Path<String>, headers: HeaderMap) -> Response {
    if let Err(refused) = check(&app, &token, &headers) {
        return refused.into_response();
    }
    no_store(axum::Json(app.hub.list()).into_response())
}

async fn run(
    State(app): State<App>,
    Path((token, index)): Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    if let Err(refused) = check(&app, &token, &headers) {
        return refused.into_response();
    }
    let document = index.parse::<u64>().ok().and_then(|i| app.hub.document(i));
    match document {
        Some(document) => no_store(axum::Json(document).into_response()),
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

async fn events(State(app): State<App>, Path(token): Path<String>, headers: HeaderMap) -> Response {
    if let Err(refused) = check(&app, &token, &headers) {
        return refused.into_response();
    }
    let Ok(permit) = Arc::clone(&app.streams).try_acquire_owned() else {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            "too many viewer pages are open",
        )
            .into_response();
    };
    let receiver = app.hub.events.subscribe();
    let stream = event_stream(receiver, permit);
    no_store(
        Sse::new(stream)
            .keep_alive(KeepAlive::default())
            .into_response(),
    )
}

fn event_stream(
    receiver: broadcast::Receiver<(String, Json)>,
    permit: tokio::sync::OwnedSemaphorePermit,
) -> impl Stream<Item = Result<Event, Infallible>> {
    futures::stream::unfold((receiver, permit), |(mut receiver, permit)| async move {
        let event = match receiver.recv().await {
            Ok((kind, data)) => Event::default().event(kind).data(data.to_string()),
            Err(broadcast::error::RecvError::Lagged(_)) => {
                Event::default().event("resync").data("{}")
            }
            Err(broadcast::error::RecvError::Closed) => return None,
        };
        Some((Ok(event), (receiver, permit)))
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn only_the_token_url_on_its_loopback_host_is_served() {
        let server = UiServer::start().await.unwrap();
        let url = server.url().to_owned();
        assert!(url.starts_with("http://127.0.0.1:"), "{url}");
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap();
        let get = |u: String| client.get(u).send();
        let page = get(url.clone()).await.unwrap();
        assert_eq!(page.status(), 200);
        assert_eq!(page.headers()["cache-control"], "no-store");
        assert_eq!(
            page.headers()["content-security-policy"],
            promptforge_trace::viewer::content_security_policy()
        );
        assert!(page.text().await.unwrap().contains("\"mode\":\"live\""));
        let base = url.trim_end_matches('/');
        let (origin, token) = base.rsplit_once('/').unwrap();
        let mut wrong = token.to_owned();
        wrong.replace_range(0..1, if token.starts_with('0') { "1" } else { "0" });
        assert_eq!(
            get(format!("{origin}/{wrong}/")).await.unwrap().status(),
            404
        );
        assert_eq!(get(format!("{origin}/")).await.unwrap().status(), 404);
        assert_eq!(
            get(format!("{origin}/{token}/api/nope"))
                .await
                .unwrap()
                .status(),
            404
        );
        let redirect = get(base.to_owned()).await.unwrap();
        assert!(redirect.status().is_redirection());
        assert_eq!(redirect.headers()["location"], format!("/{token}/"));
        // DNS rebinding: the right token through a foreign host name is refused.
        let foreign = client
            .get(url.clone())
            .header("host", "attacker.invalid")
            .send()
            .await
            .unwrap();
        assert_eq!(foreign.status(), 403);
        let runs: Json = get(format!("{url}api/runs"))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(runs, json!([]));
        assert_eq!(get(format!("{url}api/runs/7")).await.unwrap().status(), 404);
        let (index, _) = server.hub().begin("p", "p.md");
        let runs: Json = get(format!("{url}api/runs"))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(runs[0]["index"], index);
        let events = get(format!("{url}api/events")).await.unwrap();
        assert_eq!(events.status(), 200);
        assert_eq!(events.headers()["content-type"], "text/event-stream");
    }

    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpStream;

    /// Only keeps a regression from hanging the suite: a bounded server closes the
    /// connections below at once or after a fraction of a second.
    const HANG_GUARD: Duration = Duration::from_secs(60);

    fn address_of(server: &UiServer) -> String {
        let rest = server.url().trim_start_matches("http://");
        rest.split('/').next().unwrap().to_owned()
    }

    /// Everything the server sends until it closes the connection (a reset counts as a
    /// close); `None` when it is still open after [`HANG_GUARD`].
    async fn until_closed(stream: &mut TcpStream) -> Option<Vec<u8>> {
        let mut answer = Vec::new();
        let read = tokio::time::timeout(HANG_GUARD, stream.read_to_end(&mut answer)).await;
        read.is_ok().then_some(answer)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn idle_and_slowloris_connections_are_closed_after_the_header_read_timeout() {
        let server = UiServer::start_with(UiLimits {
            max_connections: 4,
            header_read_timeout: Duration::from_millis(200),
        })
        .await
        .unwrap();
        let address = address_of(&server);
        // A head that never ends.
        let mut slow = TcpStream::connect(&address).await.unwrap();
        slow.write_all(format!("GET / HTTP/1.1\r\nHost: {address}\r\n").as_bytes())
            .await
            .unwrap();
        let answer = until_closed(&mut slow).await;
        let answer = answer.expect("a half-sent request head is closed");
        assert!(!String::from_utf8_lossy(&answer).contains(" 200 "));
        // A connection that sends nothing at all.
        let mut idle = TcpStream::connect(&address).await.unwrap();
        assert!(
            until_closed(&mut idle).await.is_some(),
            "an idle connection is closed"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn connections_over_the_cap_are_closed_while_a_good_request_is_served() {
        let server = UiServer::start_with(UiLimits {
            max_connections: 3,
            header_read_timeout: Duration::from_secs(600),
        })
        .await
        .unwrap();
        let address = address_of(&server);
        // Two connections that hold their place without sending anything; the kernel hands
        // connections to the accept loop in order, so these two are admitted first.
        let _held: Vec<TcpStream> = vec![
            TcpStream::connect(&address).await.unwrap(),
            TcpStream::connect(&address).await.unwrap(),
        ];
        // The third, a real page load, is served (its connection stays in the pool).
        let client = reqwest::Client::new();
        let page = client.get(server.url()).send().await.unwrap();
        assert_eq!(page.status(), 200);
        assert!(page.text().await.unwrap().contains("\"mode\":\"live\""));
        // The fourth is over the cap: closed unanswered, though it sends a whole request.
        let mut over = TcpStream::connect(&address).await.unwrap();
        let path = server
            .url()
            .trim_start_matches("http://")
            .trim_start_matches(&address);
        let request = format!("GET {path} HTTP/1.1\r\nHost: {address}\r\n\r\n");
        let _ = over.write_all(request.as_bytes()).await;
        let answer = until_closed(&mut over).await;
        assert_eq!(
            answer.as_deref(),
            Some(&[][..]),
            "over the cap: no answer, closed"
        );
    }

    #[test]
    fn the_hub_keeps_the_last_runs_and_reports_their_status() {
        let hub = Hub::new();
        for _ in 0..MAX_RUNS + 3 {
            let _ = hub.begin("p", "p.md");
        }
        let list = hub.list();
        let list = list.as_array().unwrap();
        assert_eq!(list.len(), MAX_RUNS);
        assert_eq!(list[0]["index"], 3);
        assert!(hub.document(0).is_none());
        let last = (MAX_RUNS + 2) as u64;
        assert_eq!(hub.document(last).unwrap()["run"]["status"], "running");
        hub.finish(last);
        assert_eq!(hub.list()[MAX_RUNS - 1]["status"], "error");
    }
}
