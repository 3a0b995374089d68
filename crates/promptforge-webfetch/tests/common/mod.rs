//! Shared fixtures: a scripted HTTP/1.1 server on 127.0.0.1:0 (plain or behind TLS) and a
//! scripted DNS lookup.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use promptforge_webfetch::{FetchConfig, FetchConfigBuilder, HostLookup, WebFetch};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;

/// The host name the fixtures reach the loopback server by.
pub(crate) const SITE: &str = "site.test";

/// One scripted reply.
#[derive(Debug, Clone)]
pub(crate) enum Reply {
    /// A complete response with a correct Content-Length.
    Full {
        status: u16,
        headers: Vec<(String, String)>,
        body: Vec<u8>,
    },
    /// A chunked response sending `chunk` `count` times.
    Chunked {
        headers: Vec<(String, String)>,
        chunk: Vec<u8>,
        count: usize,
    },
    /// Declares `declared` bytes, sends `body`, then closes.
    ShortBody {
        headers: Vec<(String, String)>,
        declared: usize,
        body: Vec<u8>,
    },
    /// Reads the request and never answers.
    Hang,
}

impl Reply {
    pub(crate) fn typed(content_type: &str, body: impl Into<Vec<u8>>) -> Self {
        Self::Full {
            status: 200,
            headers: vec![("Content-Type".into(), content_type.into())],
            body: body.into(),
        }
    }

    pub(crate) fn html(body: &str) -> Self {
        Self::typed("text/html; charset=utf-8", body)
    }

    pub(crate) fn untyped(body: &str) -> Self {
        Self::Full {
            status: 200,
            headers: vec![],
            body: body.into(),
        }
    }

    pub(crate) fn status(status: u16) -> Self {
        Self::Full {
            status,
            headers: vec![("Content-Type".into(), "text/plain".into())],
            body: b"error page".to_vec(),
        }
    }

    pub(crate) fn redirect(status: u16, location: &str) -> Self {
        Self::Full {
            status,
            headers: vec![("Location".into(), location.into())],
            body: vec![],
        }
    }

    pub(crate) fn header(mut self, name: &str, value: &str) -> Self {
        match &mut self {
            Self::Full { headers, .. }
            | Self::Chunked { headers, .. }
            | Self::ShortBody { headers, .. } => headers.push((name.into(), value.into())),
            Self::Hang => {}
        }
        self
    }
}

/// A loopback server replaying scripted replies by path and recording every request head.
/// It also counts accepted TCP connections, so a canary can prove nothing connected at all.
pub(crate) struct TestServer {
    addr: SocketAddr,
    scheme: &'static str,
    requests: Arc<Mutex<Vec<String>>>,
    connections: Arc<AtomicUsize>,
    task: JoinHandle<()>,
}

impl TestServer {
    /// A plain HTTP/1.1 server.
    pub(crate) async fn start(routes: Vec<(&str, Reply)>) -> Self {
        Self::spawn(routes, None).await
    }

    /// The same server behind TLS: every connection is handshaken with `acceptor` first
    /// (a failed handshake is dropped, and records no request).
    pub(crate) async fn start_tls(routes: Vec<(&str, Reply)>, acceptor: TlsAcceptor) -> Self {
        Self::spawn(routes, Some(acceptor)).await
    }

    async fn spawn(routes: Vec<(&str, Reply)>, tls: Option<TlsAcceptor>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let scheme = if tls.is_some() { "https" } else { "http" };
        let routes: Arc<HashMap<String, Reply>> =
            Arc::new(routes.into_iter().map(|(p, r)| (p.to_owned(), r)).collect());
        let requests = Arc::new(Mutex::new(Vec::new()));
        let connections = Arc::new(AtomicUsize::new(0));
        let seen = Arc::clone(&requests);
        let accepted = Arc::clone(&connections);
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                accepted.fetch_add(1, Ordering::SeqCst);
                let routes = Arc::clone(&routes);
                let seen = Arc::clone(&seen);
                let tls = tls.clone();
                tokio::spawn(async move {
                    match tls {
                        None => serve(stream, &routes, &seen).await,
                        Some(acceptor) => {
                            if let Ok(stream) = acceptor.accept(stream).await {
                                serve(stream, &routes, &seen).await;
                            }
                        }
                    }
                });
            }
        });
        Self {
            addr,
            scheme,
            requests,
            connections,
            task,
        }
    }

    pub(crate) fn port(&self) -> u16 {
        self.addr.port()
    }

    /// `http://site.test:<port><path>` (`https` for a TLS server).
    pub(crate) fn url(&self, path: &str) -> String {
        self.url_as(SITE, path)
    }

    /// This server's URL under another host name (which the policy must pair with
    /// 127.0.0.1).
    pub(crate) fn url_as(&self, host: &str, path: &str) -> String {
        format!("{}://{host}:{}{path}", self.scheme, self.port())
    }

    /// How many TCP connections were accepted so far (with or without a request).
    pub(crate) fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }

    /// Every request head received so far.
    pub(crate) fn requests(&self) -> Vec<String> {
        self.requests.lock().unwrap().clone()
    }

    /// The request-target paths received so far.
    pub(crate) fn paths(&self) -> Vec<String> {
        self.requests()
            .iter()
            .filter_map(|r| r.split(' ').nth(1).map(str::to_owned))
            .collect()
    }

    /// A policy reaching this server as `site.test` over http.
    pub(crate) fn policy(&self) -> FetchConfigBuilder {
        FetchConfig::builder()
            .allow_http(true)
            .allow_ports([80, 443, self.port()])
            .allow_host_address(SITE, "127.0.0.1".parse().unwrap())
            .timeout(Duration::from_secs(10))
    }

    /// The tool with [`TestServer::policy`] and a lookup that maps `site.test` to loopback.
    pub(crate) fn tool(&self) -> WebFetch {
        self.tool_with(self.policy().build().unwrap(), Lookup::site())
    }

    pub(crate) fn tool_with(&self, config: FetchConfig, lookup: Lookup) -> WebFetch {
        WebFetch::try_with_lookup(config, Arc::new(lookup)).unwrap()
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn serve(
    mut stream: impl AsyncRead + AsyncWrite + Unpin,
    routes: &HashMap<String, Reply>,
    seen: &Mutex<Vec<String>>,
) {
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    let head = String::from_utf8_lossy(&head).into_owned();
    let path = head.split(' ').nth(1).unwrap_or("/").to_owned();
    seen.lock().unwrap().push(head);
    let reply = routes
        .get(&path)
        .or_else(|| routes.get(path.split('?').next().unwrap_or("")))
        .cloned()
        .unwrap_or(Reply::Full {
            status: 404,
            headers: vec![("Content-Type".into(), "text/plain".into())],
            body: b"not found".to_vec(),
        });
    let write_head = |status: u16, headers: &[(String, String)], extra: &str| {
        let mut out = format!("HTTP/1.1 {status} Scripted\r\nConnection: close\r\n{extra}");
        for (k, v) in headers {
            out.push_str(&format!("{k}: {v}\r\n"));
        }
        out.push_str("\r\n");
        out.into_bytes()
    };
    let _ = match reply {
        Reply::Full {
            status,
            headers,
            body,
        } => {
            let mut out = write_head(
                status,
                &headers,
                &format!("Content-Length: {}\r\n", body.len()),
            );
            out.extend_from_slice(&body);
            stream.write_all(&out).await
        }
        Reply::ShortBody {
            headers,
            declared,
            body,
        } => {
            let mut out = write_head(200, &headers, &format!("Content-Length: {declared}\r\n"));
            out.extend_from_slice(&body);
            stream.write_all(&out).await
        }
        Reply::Chunked {
            headers,
            chunk,
            count,
        } => {
            let out = write_head(200, &headers, "Transfer-Encoding: chunked\r\n");
            if stream.write_all(&out).await.is_err() {
                return;
            }
            for _ in 0..count {
                let mut piece = format!("{:x}\r\n", chunk.len()).into_bytes();
                piece.extend_from_slice(&chunk);
                piece.extend_from_slice(b"\r\n");
                if stream.write_all(&piece).await.is_err() {
                    return;
                }
            }
            stream.write_all(b"0\r\n\r\n").await
        }
        Reply::Hang => {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            Ok(())
        }
    };
    let _ = stream.shutdown().await;
}

/// A scripted DNS lookup: each host has a list of answers, used in turn (the last one
/// repeats); unknown hosts fail like NXDOMAIN. Counts lookups per host.
#[derive(Debug, Default, Clone)]
pub(crate) struct Lookup {
    answers: Arc<Mutex<HashMap<String, Script>>>,
}

/// One host's answers in order, and how many lookups have been made.
type Script = (Vec<Vec<IpAddr>>, usize);

impl Lookup {
    /// Maps `site.test` to 127.0.0.1.
    pub(crate) fn site() -> Self {
        Self::default().with(SITE, &["127.0.0.1"])
    }

    pub(crate) fn with(self, host: &str, ips: &[&str]) -> Self {
        self.then(host, ips)
    }

    /// Adds one more answer for `host` (used after the earlier ones).
    pub(crate) fn then(self, host: &str, ips: &[&str]) -> Self {
        let ips = ips.iter().map(|s| s.parse().unwrap()).collect();
        self.answers
            .lock()
            .unwrap()
            .entry(host.to_owned())
            .or_default()
            .0
            .push(ips);
        self
    }

    pub(crate) fn count(&self, host: &str) -> usize {
        self.answers.lock().unwrap().get(host).map_or(0, |e| e.1)
    }
}

#[async_trait]
impl HostLookup for Lookup {
    async fn lookup(&self, host: &str) -> std::io::Result<Vec<IpAddr>> {
        let mut map = self.answers.lock().unwrap();
        let Some((list, used)) = map.get_mut(host) else {
            return Err(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "no such host",
            ));
        };
        let answer = list[(*used).min(list.len() - 1)].clone();
        *used += 1;
        Ok(answer)
    }
}

/// Splits a page output into its three header values and the text.
pub(crate) fn parse_page(text: &str) -> (String, bool, String, String) {
    let (head, body) = text.split_once("\n\n").expect("a provenance header");
    let mut lines = head.lines();
    let mut field = |name: &str| {
        let line = lines.next().expect("a header line");
        line.strip_prefix(&format!("{name}: "))
            .unwrap_or_else(|| panic!("expected {name}: in {line:?}"))
            .to_owned()
    };
    let url = field("url");
    let truncated = field("truncated") == "true";
    let extraction = field("extraction");
    (url, truncated, extraction, body.to_owned())
}
