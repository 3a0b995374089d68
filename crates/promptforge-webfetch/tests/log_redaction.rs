//! Query strings and fragments never reach a log line, at any level, from this crate or
//! from the HTTP stack beneath it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::Write;
use std::sync::{Arc, Mutex};

use common::{Lookup, Reply, SITE, TestServer};
use promptforge_core::tools::Tool;

#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn no_log_line_carries_a_query_or_fragment() {
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    let server = TestServer::start(vec![
        (
            "/start",
            Reply::redirect(302, "/next?token=hop-secret#hop-frag"),
        ),
        ("/next", Reply::status(404)),
        ("/page", Reply::typed("text/plain", "fine")),
    ])
    .await;
    let lookup = Lookup::site().with("inward.test", &["10.0.0.1"]);
    let tool = server.tool_with(server.policy().build().unwrap(), lookup);
    let port = server.port();
    for url in [
        format!("http://{SITE}:{port}/start?token=first-secret#first-frag"),
        format!("http://{SITE}:{port}/page?token=page-secret#page-frag"),
        format!("http://nowhere.test:{port}/?token=dns-secret"),
        format!("http://inward.test:{port}/?token=blocked-secret"),
        format!("ftp://{SITE}/?token=scheme-secret"),
    ] {
        let args = serde_json::json!({ "url": url }).to_string();
        let shown = match tool.call(&args).await {
            Ok(out) => out.text().to_owned(),
            Err(e) => e.message().to_owned(),
        };
        if !shown.starts_with("url:") {
            assert!(
                !shown.contains("secret") && !shown.contains("frag"),
                "{shown}"
            );
        }
    }
    let logs = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    assert!(logs.contains("fetching"), "the capture works: {logs}");
    assert!(logs.contains("[redacted]"), "{logs}");
    for leak in ["secret", "frag"] {
        let bad: Vec<&str> = logs.lines().filter(|l| l.contains(leak)).collect();
        assert!(bad.is_empty(), "log lines leak {leak}:\n{}", bad.join("\n"));
    }
}
