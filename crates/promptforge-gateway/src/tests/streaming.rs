//! The typed SSE relay.

use futures::StreamExt;
use serde_json::{Value, json};

use super::harness::*;

fn stream_request(model: &str) -> Value {
    json!({"model": model, "messages": [{"role": "user", "content": "hi"}], "stream": true, "stream_options": {"include_usage": true}})
}

/// Sends a streaming request and returns (status, content-type, data payloads).
async fn collect(gw: &Gateway, body: &Value) -> (u16, String, Vec<String>) {
    let res = gw.send("/v1/chat/completions", body).await;
    let status = res.status().as_u16();
    let content_type = res
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    let text = res.text().await.unwrap();
    if !content_type.starts_with("text/event-stream") {
        return (status, content_type, vec![text]);
    }
    let events = text
        .split("\n\n")
        .filter(|e| !e.is_empty())
        .map(|e| {
            e.strip_prefix("data: ")
                .unwrap_or_else(|| panic!("not a data event: {e:?}"))
                .to_owned()
        })
        .collect();
    (status, content_type, events)
}

#[tokio::test]
async fn relays_chunks_with_the_callers_model_and_done() {
    let upstream = Upstream::start().await;
    let usage = json!({"id": "s", "object": "chat.completion.chunk", "model": "up-chat", "choices": [], "usage": {"total_tokens": 9}});
    upstream.script(
        "up-chat",
        Reply::Stream(vec![
            Part::Data(chunk("up-chat", "Hel")),
            Part::Raw(": keep-alive comment\n\n".into()),
            Part::Raw(format!("data: {}\r\n\r\n", chunk("up-chat", "lo"))),
            Part::Data(usage.to_string()),
            Part::Data("[DONE]".into()),
        ]),
    );
    let (gw, _dir) = Gateway::standard(&upstream).await;
    let (status, content_type, events) = collect(&gw, &stream_request("reasoning-large")).await;
    assert_eq!(status, 200);
    assert_eq!(content_type, "text/event-stream");
    assert_eq!(events.len(), 4, "{events:?}");
    let chunks: Vec<Value> = events[..3]
        .iter()
        .map(|e| serde_json::from_str(e).unwrap())
        .collect();
    assert!(chunks.iter().all(|c| c["model"] == "reasoning-large"));
    assert_eq!(chunks[0]["choices"][0]["delta"]["content"], "Hel");
    assert_eq!(chunks[1]["choices"][0]["delta"]["content"], "lo");
    assert_eq!(chunks[0]["object"], "chat.completion.chunk");
    assert!(chunks[0]["choices"][0].get("finish_reason").is_some());
    assert_eq!(chunks[2]["usage"]["total_tokens"], 9);
    assert_eq!(events[3], "[DONE]");
    let sent = upstream.last().body;
    assert_eq!(sent["stream"], true);
    assert_eq!(sent["model"], "up-chat");
    assert_eq!(sent["stream_options"], json!({"include_usage": true}));
    assert!(
        !gw.logs().contains("malformed"),
        "[DONE] must not be logged as malformed"
    );
}

#[tokio::test]
async fn malformed_chunks_are_logged_and_skipped() {
    let upstream = Upstream::start().await;
    upstream.script(
        "up-chat",
        Reply::Stream(vec![
            Part::Data(chunk("up-chat", "a")),
            Part::Data("this is not json".into()),
            Part::Data(json!({"choices": [{"delta": {"content": "no index"}}]}).to_string()),
            Part::Data(json!({"choices": []}).to_string()),
            Part::Data(chunk("up-chat", "b")),
            Part::Data("[DONE]".into()),
        ]),
    );
    let (gw, _dir) = Gateway::standard(&upstream).await;
    let (status, _, events) = collect(&gw, &stream_request("reasoning-large")).await;
    assert_eq!(status, 200);
    assert_eq!(events.len(), 3, "{events:?}");
    let contents: Vec<Value> = events[..2]
        .iter()
        .map(|e| {
            serde_json::from_str::<Value>(e).unwrap()["choices"][0]["delta"]["content"].clone()
        })
        .collect();
    assert_eq!(contents, [json!("a"), json!("b")]);
    assert_eq!(events[2], "[DONE]");
    // The relay logs on this test's thread as it goes: by the end of the stream, all three.
    assert_eq!(
        gw.logs()
            .matches("skipped a malformed upstream stream chunk")
            .count(),
        3,
        "{}",
        gw.logs()
    );
}

#[tokio::test]
async fn failures_before_the_first_byte_are_json_envelopes() {
    let upstream = Upstream::start().await;
    upstream.script(
        "up-chat",
        Reply::Json(503, json!({"error": {"message": "overloaded"}})),
    );
    let (gw, _dir) = Gateway::standard(&upstream).await;
    let (status, content_type, body) = collect(&gw, &stream_request("reasoning-large")).await;
    assert_eq!(status, 502);
    assert!(content_type.starts_with("application/json"));
    let body: Value = serde_json::from_str(&body[0]).unwrap();
    assert_eq!(body["error"]["code"], "upstream_status");
    let (status, content_type, body) = collect(&gw, &stream_request("unreachable")).await;
    assert_eq!(status, 502);
    assert!(content_type.starts_with("application/json"));
    assert_eq!(
        serde_json::from_str::<Value>(&body[0]).unwrap()["error"]["code"],
        "upstream_transport"
    );
    let (status, _, body) = collect(&gw, &stream_request("nope")).await;
    assert_eq!(status, 404);
    assert_eq!(
        serde_json::from_str::<Value>(&body[0]).unwrap()["error"]["code"],
        "model_not_found"
    );
}

#[tokio::test]
async fn mid_stream_failures_become_an_error_event_before_the_end() {
    let upstream = Upstream::start().await;
    upstream.script(
        "up-chat",
        Reply::Stream(vec![
            Part::Data(chunk("up-chat", "partial")),
            Part::Sleep(50),
            Part::Abort,
        ]),
    );
    upstream.script(
        "up-fast",
        Reply::Stream(vec![Part::Data(chunk("up-fast", "cut short"))]),
    );
    let (gw, _dir) = Gateway::standard(&upstream).await;
    let (status, _, events) = collect(&gw, &stream_request("reasoning-large")).await;
    assert_eq!(status, 200);
    assert_eq!(events.len(), 2, "{events:?}");
    assert_eq!(
        serde_json::from_str::<Value>(&events[0]).unwrap()["choices"][0]["delta"]["content"],
        "partial"
    );
    let error: Value = serde_json::from_str(&events[1]).unwrap();
    assert_eq!(error["error"]["code"], "upstream_transport", "{error}");

    let (_, _, events) = collect(&gw, &stream_request("fast-draft")).await;
    assert_eq!(events.len(), 2, "{events:?}");
    let error: Value = serde_json::from_str(&events[1]).unwrap();
    assert_eq!(error["error"]["code"], "upstream_protocol");
}

#[tokio::test]
async fn client_disconnect_drops_the_upstream_stream() {
    let upstream = Upstream::start().await;
    upstream.script(
        "up-chat",
        Reply::Stream(vec![Part::Data(chunk("up-chat", "first")), Part::Hang]),
    );
    let (gw, _dir) = Gateway::standard(&upstream).await;
    let res = gw
        .send("/v1/chat/completions", &stream_request("reasoning-large"))
        .await;
    let mut body = res.bytes_stream();
    let first = body.next().await.unwrap().unwrap();
    assert!(String::from_utf8_lossy(&first).contains("first"));
    assert_eq!(upstream.streams_dropped(), 0);
    drop(body);
    assert!(
        upstream.until(|u| u.streams_dropped() == 1).await,
        "the upstream stream outlived the client"
    );
}

#[tokio::test]
async fn streams_are_not_cut_by_the_request_deadline() {
    let upstream = Upstream::start().await;
    upstream.script(
        "up-chat",
        Reply::Stream(vec![
            Part::Data(chunk("up-chat", "a")),
            Part::Sleep(2500),
            Part::Data(chunk("up-chat", "b")),
            Part::Data("[DONE]".into()),
        ]),
    );
    let dir = ConfigDir::new();
    dir.write(
        "gateway.toml",
        &standard_boot(&upstream.url).replace("id = \"up\"\n", "id = \"up\"\ntimeout = \"1s\"\n"),
    );
    dir.write("profiles/main.toml", MAIN_PROFILE);
    let gw = Gateway::start(&dir.boot(), "main", &base_env()).await;
    let (status, _, events) = collect(&gw, &stream_request("reasoning-large")).await;
    assert_eq!(status, 200);
    assert_eq!(events.len(), 3, "{events:?}");
    assert_eq!(events[2], "[DONE]");
}
