//! Boot (in the guide's order) and the two transports.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::serve::ListenerExt;
use promptforge_core::client::{CompletionErrorKind, GatewayClient, ModelCatalog, RequestLimits};
use promptforge_core::tools::{Tool, ToolCatalog, WebSearch};
use promptforge_tool_picker::{Config as PickerConfig, Model, ToolPicker};
use promptforge_webfetch::WebFetch;
use rmcp::ServiceExt;
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use tokio_util::sync::CancellationToken;

use crate::attach::{Attachments, WatchedSessions};
use crate::catalog::{self, Mode};
use crate::config::{Config, is_loopback};
use crate::files::Allowed;
use crate::handler::Handler;
use crate::runs::Registry;
use crate::state::{Generation, Index, Shared, build_index};
use crate::watch::Watcher;

/// The largest JSON-RPC message accepted: an HTTP body, or one stdio line (4 MiB).
pub const MAX_MESSAGE_BYTES: usize = 4 * 1024 * 1024;

/// SSE keep-alive interval.
pub const SSE_KEEP_ALIVE: Duration = Duration::from_secs(15);

/// How long shutdown waits for in-flight calls before exiting anyway.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

/// Time limit of the boot-time `GET /v1/models`.
pub const MODELS_TIMEOUT: Duration = Duration::from_secs(10);

/// Why the server did not start or stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The configuration or catalog has faults; every one is listed.
    #[error("{}", .0.join("\n"))]
    Faults(Vec<String>),
    /// Anything else that stops the server.
    #[error("{0}")]
    Fatal(String),
}

/// Which transport to serve.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// Streamable HTTP on `[server].bind`.
    Http,
    /// JSON-RPC lines on stdin/stdout.
    Stdio,
}

/// A booted server: the shared state and the configuration it was booted from.
#[derive(Debug)]
pub struct Booted {
    /// The state every session shares.
    pub shared: Arc<Shared>,
    /// The configuration read at boot.
    pub config: Config,
}

/// Boots: catalog, tools and execution picker, retrieval index, model catalog.
pub async fn boot(config: Config, transport: Transport) -> Result<Booted, ServeError> {
    for warning in &config.warnings {
        tracing::warn!("{warning}");
    }
    if transport == Transport::Http {
        check_http(&config)?;
    }
    let allowed = allowed_dirs(&config)?;
    // 1. The catalog: every fault is collected and reported together.
    let catalog = catalog::resolve(&config.catalog, &config.prompts_dir, Mode::Boot)
        .map_err(ServeError::Faults)?;
    tracing::info!(prompts = catalog.entries().len(), dir = %config.prompts_dir.display(), "catalog resolved");

    // 2. The gateway client and the live tools.
    let gateway = GatewayClient::new(&config.gateway.url, &config.gateway.api_key)
        .map_err(|e| ServeError::Fatal(format!("[gateway]: {e}")))?
        .with_key_source("[gateway] api_key");
    let fetch: Arc<dyn Tool> = Arc::new(WebFetch::new());
    let search: Arc<dyn Tool> = Arc::new(WebSearch::new(gateway.clone()));
    let tools = ToolCatalog::new(&[search, fetch]).map_err(|e| ServeError::Fatal(e.to_string()))?;

    // 3. The execution picker (fatal) and the retrieval index (not fatal).
    let key = catalog.index_key();
    let picker_catalog = tools.picker_catalog();
    let (model, picker) = tokio::task::spawn_blocking(move || {
        let model = Model::load()
            .map_err(|e| format!("cannot load the tool picker's embedding model: {e}"))?;
        let picker = ToolPicker::build_with_model(&model, picker_catalog, PickerConfig::default())
            .map_err(|e| format!("cannot build the tool picker: {e}"))?;
        Ok::<_, String>((model, picker))
    })
    .await
    .map_err(|e| ServeError::Fatal(format!("boot task failed: {e}")))?
    .map_err(ServeError::Fatal)?;

    // 4. The gateway's model catalog.
    let models = fetch_models(&gateway).await?;

    let registry = Registry::new(
        config.server.max_concurrent_runs,
        config.server.admission_timeout,
        config.server.retain_completed,
    );
    let first = Generation {
        number: 1,
        index_key: key,
        catalog,
        index: if crate::tools::PICKER {
            Index::Building
        } else {
            Index::Unavailable("this build has no picker feature".into())
        },
    };
    let shared = Arc::new(
        Shared::new(
            first,
            registry,
            config.server.reply_deadline,
            gateway,
            models,
            tools,
            picker,
            Some(model),
        )
        .with_allowed(allowed),
    );
    if crate::tools::PICKER {
        // The retrieval index is built off the boot path: a 1,000-prompt catalog takes
        // seconds to embed, and every other tool serves meanwhile.
        let background = Arc::clone(&shared);
        tokio::task::spawn_blocking(move || {
            let key = background.current().index_key.clone();
            let index = build_index(background.model.as_ref(), &key, None);
            if let Index::Unavailable(why) = &index {
                tracing::error!("need_prompt will answer that retrieval is unavailable: {why}");
            }
            if background.complete_index(1, index) {
                tracing::info!(prompts = key.len(), "retrieval index built");
            }
        });
    }
    Ok(Booted { shared, config })
}

/// Resolves `[files] allowed_dirs` (links included): each must be an existing directory.
fn allowed_dirs(config: &Config) -> Result<Allowed, ServeError> {
    let mut dirs = Vec::new();
    let mut faults = Vec::new();
    for (i, dir) in config.files.allowed_dirs.iter().enumerate() {
        match std::fs::canonicalize(dir) {
            Ok(resolved) if resolved.is_dir() => dirs.push(resolved),
            Ok(_) => faults.push(format!(
                "{}: `files.allowed_dirs[{i}]`: {} is not a directory",
                config.path.display(),
                dir.display()
            )),
            Err(e) => faults.push(format!(
                "{}: `files.allowed_dirs[{i}]`: {}: {e}",
                config.path.display(),
                dir.display()
            )),
        }
    }
    if !faults.is_empty() {
        return Err(ServeError::Faults(faults));
    }
    if !dirs.is_empty() {
        let shown: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
        tracing::info!(
            "input_file and output_file may be inside {}",
            shown.join(", ")
        );
    }
    Ok(Allowed {
        dirs,
        config: config.path.clone(),
    })
}

fn check_http(config: &Config) -> Result<(), ServeError> {
    let mut faults = Vec::new();
    if config.server.api_key.is_none() {
        faults.push(format!(
            "{}: [server].api_key is required to serve over HTTP (its variable is unset or the key is absent); \
             use --stdio for a local spawn",
            config.path.display()
        ));
    }
    if !is_loopback(&config.server.bind) && config.server.allowed_hosts.is_empty() {
        faults.push(format!(
            "{}: [server].bind {} is not a loopback address, so [server].allowed_hosts must list the host names clients use",
            config.path.display(),
            config.server.bind
        ));
    }
    if faults.is_empty() {
        Ok(())
    } else {
        Err(ServeError::Faults(faults))
    }
}

async fn fetch_models(gateway: &GatewayClient) -> Result<ModelCatalog, ServeError> {
    let limits = RequestLimits::default().with_timeout(MODELS_TIMEOUT);
    match gateway.models(limits).await {
        Ok(models) => {
            tracing::info!(models = models.len(), "model catalog fetched");
            Ok(models)
        }
        Err(e) => {
            let transient = e.is_timeout()
                || e.kind() == CompletionErrorKind::Transport
                || e.status().is_some_and(|s| s >= 500);
            if transient {
                tracing::warn!(
                    "the gateway's model catalog could not be fetched ({e}); serving with an empty model catalog"
                );
                Ok(ModelCatalog::empty())
            } else {
                Err(ServeError::Fatal(format!(
                    "the gateway refused or garbled GET /v1/models, so the server will not boot: {e}"
                )))
            }
        }
    }
}

/// Waits for Ctrl-C or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = term => {},
    }
}

/// Serves over stdio until EOF or a signal; attached runs are cancelled at the end.
pub async fn serve_stdio(booted: Booted) -> Result<(), ServeError> {
    log_ignored_over_stdio(&booted.config);
    let watcher = start_watcher(&booted)?;
    let handler = Handler::new(Arc::clone(&booted.shared));
    let (stdin, stdout) = rmcp::transport::stdio_pipes();
    let transport =
        AsyncRwTransport::new_server(stdin, stdout).with_max_line_length(MAX_MESSAGE_BYTES);
    let service = match handler.serve(transport).await {
        Ok(service) => service,
        Err(rmcp::service::ServerInitializeError::ConnectionClosed(_)) => {
            tracing::info!("stdin closed before the client initialized");
            finish(&booted.shared, watcher);
            return Ok(());
        }
        Err(e) => {
            finish(&booted.shared, watcher);
            return Err(ServeError::Fatal(format!(
                "the stdio session failed to start: {e}"
            )));
        }
    };
    let cancel = service.cancellation_token();
    let waiting = service.waiting();
    tokio::pin!(waiting);
    tokio::select! {
        result = &mut waiting => {
            if let Err(e) = result {
                tracing::warn!("the stdio session ended with an error: {e}");
            }
        }
        () = shutdown_signal() => {
            tracing::info!("signal received: shutting down");
            cancel.cancel();
            let _ = tokio::time::timeout(DRAIN_TIMEOUT, &mut waiting).await;
        }
    }
    finish(&booted.shared, watcher);
    Ok(())
}

/// Says which `[server]` settings of the file the stdio transport does not use, so a
/// `bind` or a key there is never ignored in silence.
fn log_ignored_over_stdio(config: &Config) {
    let server = &config.server;
    if server.bind_set {
        tracing::info!(
            "[server].bind {} is ignored over stdio: the stdio transport binds no port",
            server.bind
        );
    }
    if server.api_key.is_some() {
        tracing::info!(
            "[server].api_key is not checked over stdio: only the process that spawned the \
             server can talk to it"
        );
    }
    if !server.allowed_hosts.is_empty() {
        tracing::info!("[server].allowed_hosts is ignored over stdio: there is no Host header");
    }
}

fn finish(shared: &Shared, watcher: Option<Watcher>) {
    for run in shared.registry.live() {
        if run.is_attached() {
            run.cancel_handle().cancel();
        }
    }
    if let Some(watcher) = watcher {
        watcher.stop();
    }
    shared.close();
    tracing::info!("stopped");
}

fn start_watcher(booted: &Booted) -> Result<Option<Watcher>, ServeError> {
    if !booted.config.server.watch {
        return Ok(None);
    }
    Watcher::start(booted.config.clone(), Arc::clone(&booted.shared))
        .map(Some)
        .map_err(ServeError::Fatal)
}

/// The HTTP checks' configuration.
#[derive(Debug, Clone)]
struct Gate {
    key_digest: [u8; 32],
    hosts: Vec<String>,
    default_hosts: bool,
}

fn digest(text: &str) -> [u8; 32] {
    Sha256::digest(text.as_bytes()).into()
}

/// Parses an HTTP authority as `host[:port]`: a DNS name or IPv4 address (letters,
/// digits, `-`, `.`), or an IPv6 address in brackets; the port is decimal. Anything else
/// (user info like `localhost:1@evil.example`, a path, spaces, an empty host) is `None`.
fn parse_authority(authority: &str) -> Option<(String, Option<u16>)> {
    let (host, port) = if let Some(rest) = authority.strip_prefix('[') {
        let (inner, tail) = rest.split_once(']')?;
        inner.parse::<std::net::Ipv6Addr>().ok()?;
        (inner, tail)
    } else {
        let end = authority.find(':').unwrap_or(authority.len());
        let host = &authority[..end];
        let valid = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '.';
        if host.is_empty() || !host.chars().all(valid) {
            return None;
        }
        (host, &authority[end..])
    };
    let port = match tail_port(port)? {
        Some(text) => Some(text.parse::<u16>().ok()?),
        None => None,
    };
    Some((host.to_ascii_lowercase(), port))
}

/// The port digits after a host: `""` is no port, `":digits"` is one, anything else fails.
fn tail_port(tail: &str) -> Option<Option<&str>> {
    if tail.is_empty() {
        return Some(None);
    }
    let digits = tail.strip_prefix(':')?;
    (!digits.is_empty() && digits.len() <= 5 && digits.bytes().all(|b| b.is_ascii_digit()))
        .then_some(Some(digits))
}

impl Gate {
    fn host_allowed(&self, authority: &str) -> bool {
        let Some((host, port)) = parse_authority(authority) else {
            return false;
        };
        if self.default_hosts {
            return matches!(host.as_str(), "localhost" | "127.0.0.1" | "::1");
        }
        self.hosts.iter().any(|entry| {
            parse_authority(entry.trim()).is_some_and(|(want_host, want_port)| {
                want_host == host && want_port.is_none_or(|p| Some(p) == port)
            })
        })
    }

    fn origin_allowed(&self, origin: &str) -> bool {
        let Some(authority) = origin
            .strip_prefix("http://")
            .or_else(|| origin.strip_prefix("https://"))
        else {
            return false;
        };
        if authority.contains('/') {
            return false;
        }
        let Some((host, _)) = parse_authority(authority) else {
            return false;
        };
        matches!(host.as_str(), "localhost" | "127.0.0.1" | "::1") || self.host_allowed(authority)
    }
}

fn refuse(status: StatusCode, message: &str) -> Response {
    let mut response = (status, message.to_owned()).into_response();
    if status == StatusCode::UNAUTHORIZED {
        response
            .headers_mut()
            .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    }
    response
}

fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

async fn guard(State(gate): State<Arc<Gate>>, request: Request, next: Next) -> Response {
    let headers = request.headers();
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .or_else(|| request.uri().authority().map(|a| a.as_str()));
    match host {
        Some(h) if gate.host_allowed(h) => {}
        _ => {
            return refuse(
                StatusCode::FORBIDDEN,
                "the Host header is not an allowed host",
            );
        }
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        let allowed = origin.to_str().is_ok_and(|o| gate.origin_allowed(o));
        if !allowed {
            return refuse(StatusCode::FORBIDDEN, "the Origin is not allowed");
        }
    }
    let presented = bearer(headers).map(digest);
    let ok = presented.is_some_and(|d| bool::from(d.ct_eq(&gate.key_digest)));
    if !ok {
        return refuse(StatusCode::UNAUTHORIZED, "a valid bearer token is required");
    }
    next.run(request).await
}

/// The session cap's state: the sessions, `[server].max_sessions`, and the gate that lets
/// one `initialize` at a time count the sessions and open its own, so concurrent ones cannot
/// pass the cap together.
#[derive(Debug, Clone)]
struct Cap {
    sessions: Arc<WatchedSessions>,
    max: usize,
    opening: Arc<tokio::sync::Mutex<()>>,
}

/// Whether a JSON-RPC body is an `initialize` request (the one request that opens a session).
fn is_initialize(body: &[u8]) -> bool {
    #[derive(serde::Deserialize)]
    struct Method<'a> {
        #[serde(borrow)]
        method: Option<&'a str>,
    }
    serde_json::from_slice::<Method<'_>>(body).is_ok_and(|m| m.method == Some("initialize"))
}

/// Refuses an `initialize` with 503 while `[server].max_sessions` sessions are held. Only a
/// `POST` without `Mcp-Session-Id` can open one. Its body is read first (bounded), so a slow
/// upload never holds the gate; then an `initialize` counts the sessions and, under the
/// cap, opens its own while holding the gate: rmcp has stored the session before it answers.
async fn session_cap(State(cap): State<Cap>, request: Request, next: Next) -> Response {
    let opens = request.method() == axum::http::Method::POST
        && !request.headers().contains_key("mcp-session-id");
    if !opens {
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, MAX_MESSAGE_BYTES).await else {
        return refuse(
            StatusCode::PAYLOAD_TOO_LARGE,
            "the request body is over the 4 MiB limit",
        );
    };
    let request = Request::from_parts(parts, Body::from(bytes.clone()));
    if !is_initialize(&bytes) {
        return next.run(request).await;
    }
    let _gate = cap.opening.lock().await;
    if cap.sessions.count().await >= cap.max {
        let mut response = refuse(
            StatusCode::SERVICE_UNAVAILABLE,
            &format!(
                "the server holds its limit of {} MCP sessions ([server].max_sessions); an idle \
                 session ends after 5 minutes, or a client ends its own with DELETE: retry later",
                cap.max
            ),
        );
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("30"));
        return response;
    }
    next.run(request).await
}

async fn healthz() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "application/json")],
        Body::from("{\"status\":\"ok\"}"),
    )
}

/// Binds `[server].bind` and serves streamable HTTP until a signal.
pub async fn serve_http(booted: Booted) -> Result<(), ServeError> {
    let listener = tokio::net::TcpListener::bind(booted.config.server.bind)
        .await
        .map_err(|e| {
            ServeError::Fatal(format!("cannot bind {}: {e}", booted.config.server.bind))
        })?;
    serve_http_on(booted, listener, shutdown_signal()).await
}

/// Serves streamable HTTP on `listener` until `shutdown` completes.
pub async fn serve_http_on(
    booted: Booted,
    listener: tokio::net::TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    let key = booted
        .config
        .server
        .api_key
        .clone()
        .ok_or_else(|| ServeError::Fatal("[server].api_key is required over HTTP".into()))?;
    let watcher = start_watcher(&booted)?;
    let gate = Arc::new(Gate {
        key_digest: digest(&key),
        hosts: booted.config.server.allowed_hosts.clone(),
        default_hosts: booted.config.server.allowed_hosts.is_empty(),
    });
    let stop = CancellationToken::new();
    // The Host and Origin checks are ours (in `guard`), applied before the bearer.
    let mcp_config = StreamableHttpServerConfig::default()
        .disable_allowed_hosts()
        .with_sse_keep_alive(Some(SSE_KEEP_ALIVE))
        .with_max_request_body_bytes(MAX_MESSAGE_BYTES)
        .with_cancellation_token(stop.child_token());
    let shared = Arc::clone(&booted.shared);
    // Every call's stream is watched: a client that drops it and does not resume within
    // `resume_grace` has its attached run cancelled.
    let attachments = Attachments::new(booted.config.server.resume_grace);
    let sessions = Arc::new(WatchedSessions::new(Arc::clone(&attachments)));
    let cap = Cap {
        sessions: Arc::clone(&sessions),
        max: booted.config.server.max_sessions,
        opening: Arc::default(),
    };
    let service = StreamableHttpService::new(
        move || Ok(Handler::new(Arc::clone(&shared)).watching(Arc::clone(&attachments))),
        sessions,
        mcp_config,
    );
    // Layers run outermost last: the guard, then the session cap.
    let mcp = Router::new()
        .nest_service("/mcp", service)
        .layer(middleware::from_fn_with_state(cap, session_cap))
        .layer(middleware::from_fn_with_state(Arc::clone(&gate), guard));
    let app = Router::new().route("/healthz", get(healthz)).merge(mcp);
    let local: SocketAddr = listener
        .local_addr()
        .map_err(|e| ServeError::Fatal(e.to_string()))?;
    tracing::info!("serving MCP at http://{local}/mcp");

    let signalled = CancellationToken::new();
    let on_signal = signalled.clone();
    tokio::spawn(async move {
        shutdown.await;
        on_signal.cancel();
    });
    let graceful = signalled.clone();
    let stop_streams = stop.clone();
    // Small JSON-RPC replies must not wait for delayed ACKs (Nagle): about 40 ms a call.
    let listener = listener.tap_io(|stream| {
        if let Err(e) = stream.set_nodelay(true) {
            tracing::debug!("cannot set TCP_NODELAY: {e}");
        }
    });
    let server = axum::serve(listener, app).with_graceful_shutdown(async move {
        graceful.cancelled().await;
        tracing::info!("shutting down: closing SSE streams and draining calls");
        stop_streams.cancel();
    });
    let server = tokio::spawn(async move { server.await });
    signalled.cancelled().await;
    match tokio::time::timeout(DRAIN_TIMEOUT, server).await {
        Ok(Ok(Ok(()))) => {}
        Ok(Ok(Err(e))) => tracing::warn!("the HTTP server ended with an error: {e}"),
        Ok(Err(e)) => tracing::warn!("the HTTP server task failed: {e}"),
        Err(_) => tracing::warn!("in-flight calls did not drain within {DRAIN_TIMEOUT:?}"),
    }
    finish(&booted.shared, watcher);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gate(hosts: &[&str]) -> Gate {
        Gate {
            key_digest: digest("k"),
            hosts: hosts.iter().map(|h| (*h).to_owned()).collect(),
            default_hosts: hosts.is_empty(),
        }
    }

    #[test]
    fn loopback_hosts_are_the_default_with_any_port() {
        let g = gate(&[]);
        for ok in [
            "localhost",
            "localhost:9310",
            "127.0.0.1:1",
            "[::1]:9310",
            "LOCALHOST",
        ] {
            assert!(g.host_allowed(ok), "{ok}");
        }
        for bad in ["evil.example", "evil.example:9310", "127.0.0.2", ""] {
            assert!(!g.host_allowed(bad), "{bad}");
        }
    }

    /// Issue 38: `localhost:47310@evil.example` was accepted (split at the last `:`).
    #[test]
    fn the_host_header_is_parsed_as_an_authority() {
        let g = gate(&[]);
        for bad in [
            "localhost:47310@evil.example",
            "localhost@evil.example",
            "localhost:1/x",
            "localhost:",
            "localhost:99999",
            "localhost:1:2",
            "[::1",
            "[::1]x",
            "[not-ip]:1",
            "local host",
            " localhost",
            ":9310",
        ] {
            assert!(!g.host_allowed(bad), "{bad}");
        }
        assert_eq!(
            parse_authority("[::1]:9310"),
            Some(("::1".to_owned(), Some(9310)))
        );
        assert_eq!(
            parse_authority("Example.COM"),
            Some(("example.com".to_owned(), None))
        );
        let listed = gate(&["example.com:8080"]);
        assert!(!listed.host_allowed("example.com:8080@evil.example"));
        assert!(!listed.origin_allowed("http://localhost:1@evil.example"));
    }

    #[test]
    fn listed_hosts_match_with_or_without_port() {
        let g = gate(&["example.com", "api.example.com:8080"]);
        assert!(g.host_allowed("example.com:1234"));
        assert!(g.host_allowed("api.example.com:8080"));
        assert!(!g.host_allowed("api.example.com:8081"));
        assert!(!g.host_allowed("localhost"));
    }

    #[test]
    fn origins_must_be_loopback_or_listed() {
        let g = gate(&["example.com"]);
        assert!(g.origin_allowed("http://localhost:5173"));
        assert!(g.origin_allowed("http://[::1]:3000"));
        assert!(g.origin_allowed("https://example.com"));
        assert!(!g.origin_allowed("https://evil.example"));
        assert!(!g.origin_allowed("null"));
        assert!(!g.origin_allowed("file://x"));
    }

    #[test]
    fn bearer_scheme_is_required() {
        let mut h = HeaderMap::new();
        h.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("Bearer abc"),
        );
        assert_eq!(bearer(&h), Some("abc"));
        h.insert(header::AUTHORIZATION, HeaderValue::from_static("Basic abc"));
        assert_eq!(bearer(&h), None);
    }
}
