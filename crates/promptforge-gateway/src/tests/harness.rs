//! The in-process test harness: the gateway booted in this process (`app::boot`),
//! serving its connection layer on 127.0.0.1:0 so tests talk HTTP to it, with its logs
//! captured per test; the scripted upstream and configurations are [`super::upstream`]'s.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;

pub use super::upstream::*;
use crate::app::{self, Booted};
use crate::config::EnvLayers;
use crate::conn;
use crate::otel::Export;
use crate::relay::http::HttpTransport;

/// The environment every test gateway gets (instead of the process environment, which all
/// the in-process tests share).
pub fn base_env() -> Vec<(String, String)> {
    vec![
        ("GW_TEST_KEY".into(), KEY.into()),
        ("GW_UPSTREAM_KEY".into(), UPSTREAM_KEY.into()),
    ]
}

fn env_layers(env: &[(String, String)]) -> EnvLayers {
    EnvLayers::fixed(env.iter().cloned().collect())
}

thread_local! {
    /// The log capture of the test running on this thread (every in-process test runs on
    /// a current-thread runtime, so the gateway's tasks log here too).
    static LOG_GUARD: std::cell::RefCell<Option<tracing::subscriber::DefaultGuard>> =
        const { std::cell::RefCell::new(None) };
}

thread_local! {
    /// This thread's capture buffer: every gateway a test boots logs into the same one.
    static LOG_BUFFER: std::cell::RefCell<Option<Arc<Mutex<Vec<u8>>>>> =
        const { std::cell::RefCell::new(None) };
}

/// Captures this thread's log lines (level info and up, no colour) into the returned
/// buffer, for as long as the thread lives; a second gateway on the same thread (a test
/// of several replicas) shares the first one's buffer.
fn capture_logs() -> Arc<Mutex<Vec<u8>>> {
    if let Some(buffer) = LOG_BUFFER.with_borrow(Clone::clone) {
        return buffer;
    }
    #[derive(Clone)]
    struct Sink(Arc<Mutex<Vec<u8>>>);
    impl std::io::Write for Sink {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let buffer = Arc::new(Mutex::new(Vec::new()));
    let sink = Sink(buffer.clone());
    let subscriber = tracing_subscriber::fmt()
        .with_ansi(false)
        .with_max_level(tracing::Level::INFO)
        .with_writer(move || sink.clone())
        .finish();
    let guard = tracing::subscriber::set_default(subscriber);
    LOG_GUARD.with_borrow_mut(|slot| *slot = Some(guard));
    LOG_BUFFER.with_borrow_mut(|slot| *slot = Some(buffer.clone()));
    buffer
}

/// A gateway booted in this process, its connection layer on 127.0.0.1:0; stopped on drop.
pub struct Gateway {
    pub http: Http,
    pub booted: Booted,
    logs: Arc<Mutex<Vec<u8>>>,
    closing: watch::Sender<bool>,
    accept: tokio::task::JoinHandle<()>,
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.closing.send(true);
        self.accept.abort();
    }
}

impl std::ops::Deref for Gateway {
    type Target = Http;

    fn deref(&self) -> &Http {
        &self.http
    }
}

/// Boots `boot` + `profile` in process expecting a failure; the error as the binary would
/// print it after `error: `.
pub async fn boot_error(boot: &Path, profile: &str, env: &[(String, String)]) -> String {
    match app::boot(boot, profile, env_layers(env), Arc::new(HttpTransport)).await {
        Ok(_) => panic!("expected a boot failure, got a booted gateway"),
        Err(err) => err.to_string(),
    }
}

/// Boots `dir`'s `gateway.toml` + `profile` expecting a failure; the error.
pub async fn boot_failure(dir: &ConfigDir, profile: &str) -> String {
    boot_error(&dir.boot(), profile, &base_env()).await
}

impl Gateway {
    /// Boots `boot` with `profile` and `env` in process and serves it (no span export:
    /// the in-process tests share one process environment, so it is not read).
    pub async fn start(boot: &Path, profile: &str, env: &[(String, String)]) -> Self {
        Self::start_traced(boot, profile, env, |_| None).await
    }

    /// [`Gateway::start`], with the span export `export` makes.
    pub async fn start_traced(
        boot: &Path,
        profile: &str,
        env: &[(String, String)],
        export: impl FnOnce(&EnvLayers) -> Option<Export>,
    ) -> Self {
        let logs = capture_logs();
        let transport = Arc::new(HttpTransport);
        let booted = match app::boot_traced(boot, profile, env_layers(env), transport, export).await
        {
            Ok(booted) => booted,
            Err(err) => panic!("the gateway did not boot: {err}"),
        };
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let (closing, closing_rx) = watch::channel(false);
        let gate = conn::Gate::new(&booted.limits);
        let accept = tokio::spawn(conn::accept_loop(
            listener,
            booted.service.clone(),
            booted.limits,
            gate,
            closing_rx,
        ));
        Self {
            http: Http::new(url),
            booted,
            logs,
            closing,
            accept,
        }
    }

    /// Boots [`boot_with`] with the main profile.
    pub async fn with_limits(
        upstream: &Upstream,
        server_extra: &str,
        endpoint_extra: &str,
    ) -> (Self, ConfigDir) {
        let dir = ConfigDir::new();
        dir.write(
            "gateway.toml",
            &boot_with(&upstream.url, server_extra, endpoint_extra),
        );
        dir.write("profiles/main.toml", MAIN_PROFILE);
        let gw = Self::start(&dir.boot(), "main", &base_env()).await;
        (gw, dir)
    }

    /// Boots the standard configuration with the main profile.
    pub async fn standard(upstream: &Upstream) -> (Self, ConfigDir) {
        let dir = ConfigDir::new();
        dir.write("gateway.toml", &standard_boot(&upstream.url));
        dir.write("profiles/main.toml", MAIN_PROFILE);
        let gw = Self::start(&dir.boot(), "main", &base_env()).await;
        (gw, dir)
    }

    /// Everything logged on this test's thread so far.
    pub fn logs(&self) -> String {
        String::from_utf8_lossy(&self.logs.lock().unwrap()).into_owned()
    }

    /// Stops serving (the drop does the same).
    pub async fn kill(self) {
        drop(self);
    }
}

/// Waits (bounded) for `cond`, checking it every 25 ms: for conditions nothing signals
/// (a gateway's internal queue state read over HTTP).
pub async fn eventually(mut cond: impl FnMut() -> bool) -> bool {
    for _ in 0..400 {
        if cond() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    cond()
}

/// Polls an async condition (bounded), as [`eventually`].
pub async fn eventually_async<F, Fut>(mut cond: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    for _ in 0..400 {
        if cond().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    false
}

/// `GET /metrics` of `gw`, checked and parsed.
pub async fn scrape(gw: &Gateway) -> (Vec<Sample>, BTreeMap<String, String>) {
    scrape_url(&gw.client, &gw.url).await
}
