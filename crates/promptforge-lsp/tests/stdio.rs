//! The `promptforge-lsp` binary over its stdio: framing, exit statuses, bad input, and the
//! picker loading off the request thread against a gateway on loopback.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::http::HeaderMap;
use axum::routing::get;
use promptforge_test_support::{Loopback, has_bearer};
use serde_json::{Value, json};
use support::{Client, HEAD, at, point, uri};
use tokio::sync::Notify;

const KEY: &str = "test-gateway-key";

#[test]
fn a_session_ends_with_the_protocols_exit_status() {
    let client = Client::spawn(&[]);
    assert_eq!(client.shutdown(), Some(0));
    let mut client = Client::spawn(&[]);
    client.notify("exit", Value::Null);
    assert_eq!(client.finish(), Some(1));
    // A client that goes away without a word.
    let client = Client::spawn(&[]);
    assert_eq!(client.finish(), Some(1));
}

#[test]
fn bad_frames_are_answered_and_the_session_goes_on() {
    let mut client = Client::spawn(&[]);
    client.write_raw(b"Content-Length: 9\r\n\r\n{not json");
    client.write_raw(b"Content-Length: nine\r\n\r\n");
    let doc = uri("stdio.md");
    let text = format!("{HEAD}## A\n\n```lua\nlocal = 1\n```\n");
    client.open(&doc, &text);
    let found = client.diagnostics(&doc, 1);
    assert_eq!(found.len(), 1);
    let unparsed: Vec<&Value> = client
        .notifications
        .iter()
        .filter(|n| n.method == "test/unparsed")
        .map(|n| &n.params)
        .collect();
    assert_eq!(unparsed.len(), 1, "{unparsed:?}");
    assert_eq!(unparsed[0]["error"]["code"], -32700);
    assert_eq!(unparsed[0]["id"], Value::Null);
    let logged = client.notifications.iter().any(|n| {
        n.method == "window/logMessage"
            && n.params["message"]
                .as_str()
                .unwrap_or("")
                .contains("Content-Length `nine`")
    });
    assert!(logged, "{:?}", client.notifications);
    assert_eq!(client.shutdown(), Some(0));
}

#[test]
fn after_each_bad_frame_the_next_request_is_answered() {
    let mut client = Client::spawn(&[]);
    let symbols = json!({"textDocument": {"uri": uri("none.md")}});
    let bad: [&[u8]; 3] = [
        // Garbage without a line break: skipped to the next `Content-Length:`.
        b"garbage without a line break",
        // A body shorter than its length (cut mid-message): it ends where the next
        // header begins, with nothing more needed from the client.
        b"Content-Length: 4000\r\n\r\n{\"jsonrpc\":\"2.0\",\"method\":\"textDocument/didOp",
        // A length over the cap that the client never sends.
        b"Content-Length: 99999999999\r\n\r\n",
    ];
    for bytes in bad {
        client.write_raw(bytes);
        let answer = client.request("textDocument/documentSymbol", symbols.clone());
        assert!(
            answer.response_result.is_ok_and(|v| v.is_null()),
            "after {bytes:?}"
        );
    }
    let told: Vec<&str> = client
        .notifications
        .iter()
        .filter(|n| n.method == "window/logMessage")
        .filter_map(|n| n.params["message"].as_str())
        .collect();
    assert_eq!(told.len(), 3, "{told:?}");
    assert!(told[0].contains("28 bytes were skipped"), "{told:?}");
    assert!(told[1].contains("declared 4000 bytes"), "{told:?}");
    assert!(told[2].contains("declared 99999999999 bytes"), "{told:?}");
    // The cut message was answered as what it is, a parse error.
    let unparsed = client
        .notifications
        .iter()
        .filter(|n| n.method == "test/unparsed");
    assert_eq!(unparsed.count(), 1);
    // The input ending inside a body ends the session (no `shutdown`: status 1).
    client.write_raw(b"Content-Length: 100\r\n\r\n{\"jsonrpc\"");
    assert_eq!(client.finish(), Some(1));
}

/// A gateway whose `GET /v1/models` answers only once `release` is notified.
async fn held_gateway(release: Arc<Notify>, asked: Arc<Mutex<u32>>) -> Loopback {
    let app = Router::new().route(
        "/v1/models",
        get(move |headers: HeaderMap| {
            let release = Arc::clone(&release);
            let asked = Arc::clone(&asked);
            async move {
                *asked.lock().unwrap() += 1;
                assert!(has_bearer(&headers, KEY));
                release.notified().await;
                axum::Json(json!({"object": "list", "data": [
                    {"id": "smol-chat", "object": "model", "kind": "chat",
                     "description": "A small friendly general-purpose chat model that follows instructions",
                     "context": 2048, "thinking": "never"}
                ]}))
            }
        }),
    );
    Loopback::serve(app).await.unwrap()
}

#[test]
fn the_picker_loads_off_the_request_thread_with_the_gateways_catalog() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let release = Arc::new(Notify::new());
    let asked = Arc::new(Mutex::new(0));
    let gateway = runtime.block_on(held_gateway(Arc::clone(&release), Arc::clone(&asked)));
    let mut client = Client::spawn(&[
        ("PROMPTFORGE_GATEWAY_URL", gateway.url()),
        ("PROMPTFORGE_GATEWAY_API_KEY", KEY),
    ]);
    let doc = uri("remote.md");
    let text = format!(
        "{HEAD}```lua\ntools.bind(\"search\", \"search the web for current information\")\nmodels.default(\"chat\", \"a friendly chat model\")\n```\n\n## Greet\n\nSay hello.\n"
    );
    client.open(&doc, &text);
    // The hints wait on the picker thread, which waits on the gateway's catalog.
    let hints = client.send_request(
        "textDocument/inlayHint",
        json!({"textDocument": {"uri": doc}, "range": {"start": {"line": 0, "character": 0}, "end": {"line": 99, "character": 0}}}),
    );
    // Meanwhile every other request is answered.
    let hover = client.send_request("textDocument/hover", point(&doc, at(&text, "## Greet", 4)));
    let first = client.any_response();
    assert_eq!(
        first.id, hover,
        "the hover must not wait for the picker: {first:?}"
    );
    let symbols = client.call(
        "textDocument/documentSymbol",
        json!({"textDocument": {"uri": doc}}),
    );
    assert_eq!(symbols[0]["name"], "Greet");
    assert!(client.diagnostics(&doc, 1).is_empty());
    // The picker thread asked the gateway (it is still holding the answer).
    let deadline = std::time::Instant::now() + support::PATIENCE;
    while *asked.lock().unwrap() == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the catalog was never asked for"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    release.notify_one();
    let answer = client.response(&hints).response_result.unwrap();
    let labels: Vec<&str> = answer
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["label"].as_str().unwrap())
        .collect();
    assert_eq!(labels.len(), 2, "{labels:?}");
    assert!(labels[0].starts_with("→ web_search ("), "{labels:?}");
    assert!(labels[1].starts_with("→ smol-chat ("), "{labels:?}");
    assert_eq!(client.shutdown(), Some(0));
    drop(gateway);
}

#[test]
fn an_unreachable_gateway_is_named_in_the_model_hint() {
    let mut client = Client::spawn(&[
        ("PROMPTFORGE_GATEWAY_URL", "http://127.0.0.1:9"),
        ("PROMPTFORGE_GATEWAY_API_KEY", KEY),
    ]);
    let doc = uri("down.md");
    let text = format!("{HEAD}```lua\nmodels.bind(\"m\", \"a writer\")\n```\n");
    client.open(&doc, &text);
    let hover = client.call(
        "textDocument/hover",
        point(&doc, at(&text, "models.bind", 2)),
    );
    let value = hover["contents"]["value"].as_str().unwrap();
    assert!(
        value.contains("cannot fetch the model catalog from the gateway"),
        "{value}"
    );
    // Only one of the two settings is a configuration error, as `promptforge run` says.
    let mut client = Client::spawn(&[("PROMPTFORGE_GATEWAY_URL", "http://127.0.0.1:9")]);
    client.open(&doc, &text);
    let hover = client.call(
        "textDocument/hover",
        point(&doc, at(&text, "models.bind", 2)),
    );
    let value = hover["contents"]["value"].as_str().unwrap();
    assert!(value.contains("PROMPTFORGE_GATEWAY_API_KEY"), "{value}");
}
