//! Signals: SIGTERM ends an open stream and an in-flight request with `shutting_down`
//! after the drain, and the process exits 0. These need the real binary; everything else
//! runs in process (`src/tests/`).

use std::time::Duration;

use futures::StreamExt;
use serde_json::{Value, json};

use crate::harness::*;

/// The bound on every wait (a test that hits it failed).
const BOUND: Duration = Duration::from_secs(20);

fn chat(model: &str, stream: bool) -> Value {
    json!({"model": model, "messages": [{"role": "user", "content": "hi"}], "stream": stream})
}

fn bounded_client() -> reqwest::Client {
    reqwest::Client::builder().timeout(BOUND).build().unwrap()
}

fn code(value: &Value) -> &str {
    value["error"]["code"].as_str().unwrap_or("")
}

fn stream_request(model: &str) -> Value {
    json!({"model": model, "messages": [{"role": "user", "content": "hi"}], "stream": true})
}

// ---- finding 14: SIGTERM ends requests with shutting_down --------------------------------

#[tokio::test]
async fn sigterm_ends_an_open_stream_with_a_shutting_down_event() {
    let upstream = Upstream::start().await;
    upstream.script(
        "up-chat",
        Reply::Stream(vec![Part::Data(chunk("up-chat", "Hel")), Part::Hang]),
    );
    let (mut gw, _dir) = Gateway::with_limits(&upstream, "drain_timeout = \"300ms\"", "").await;
    let res = bounded_client()
        .post(format!("{}/v1/chat/completions", gw.url))
        .bearer_auth(KEY)
        .json(&chat("reasoning-large", true))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let mut body = res.bytes_stream();
    let first = tokio::time::timeout(BOUND, body.next())
        .await
        .expect("no first chunk")
        .unwrap()
        .unwrap();
    assert!(String::from_utf8_lossy(&first).contains("Hel"));
    gw.signal_term();
    let mut rest = String::new();
    tokio::time::timeout(BOUND, async {
        while let Some(Ok(bytes)) = body.next().await {
            rest.push_str(&String::from_utf8_lossy(&bytes));
        }
    })
    .await
    .expect("the stream did not end after SIGTERM");
    let event = rest.trim().strip_prefix("data: ").unwrap_or(&rest);
    let event: Value = serde_json::from_str(event).unwrap_or(Value::String(rest.clone()));
    assert_eq!(code(&event), "shutting_down", "{rest:?}");
    assert!(!rest.contains("unreachable"), "{rest:?}");
    assert_eq!(gw.terminate_wait().await, Some(0));
}

#[tokio::test]
async fn sigterm_answers_an_in_flight_request_with_a_shutting_down_envelope() {
    let upstream = Upstream::start().await;
    upstream.script("up-fast", Reply::Never);
    let (mut gw, _dir) = Gateway::with_limits(&upstream, "drain_timeout = \"300ms\"", "").await;
    let url = format!("{}/v1/chat/completions", gw.url);
    let pending = tokio::spawn(async move {
        let res = bounded_client()
            .post(url)
            .bearer_auth(KEY)
            .json(&chat("fast-draft", false))
            .send()
            .await
            .expect("the in-flight request got no answer");
        let status = res.status().as_u16();
        (status, res.json::<Value>().await.unwrap_or(Value::Null))
    });
    assert!(eventually(|| !upstream.recorded().is_empty()).await);
    gw.signal_term();
    let (status, body) = tokio::time::timeout(BOUND, pending)
        .await
        .expect("no answer after SIGTERM")
        .unwrap();
    assert_eq!((status, code(&body)), (503, "shutting_down"), "{body}");
    assert_eq!(gw.terminate_wait().await, Some(0));
}

#[tokio::test(flavor = "multi_thread")]
async fn shutdown_drains_then_closes_a_stream_that_never_ends() {
    let upstream = Upstream::start().await;
    upstream.script(
        "up-chat",
        Reply::Stream(vec![Part::Data(chunk("up-chat", "first")), Part::Hang]),
    );
    let (mut gw, _dir) = Gateway::standard(&upstream).await;
    let res = gw
        .send("/v1/chat/completions", &stream_request("reasoning-large"))
        .await;
    let mut body = res.bytes_stream();
    assert!(String::from_utf8_lossy(&body.next().await.unwrap().unwrap()).contains("first"));
    assert_eq!(gw.terminate().await, Some(0));
    let logs = gw.logs();
    assert!(
        logs.contains("shutting down") && logs.contains("drain timeout"),
        "{logs}"
    );
    assert!(eventually(|| upstream.streams_dropped() == 1).await);
}
