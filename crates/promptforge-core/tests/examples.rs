//! The `examples/` programs (the guide's Execution and Errors chapters, issue 26) compile
//! as part of every `cargo test`; this file also runs their code: `library`'s run against a
//! scripted gateway on loopback, `errors`'s tour line by line.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

#[path = "../examples/errors.rs"]
#[allow(unreachable_pub)]
mod errors;
#[path = "../examples/library.rs"]
#[allow(unreachable_pub)]
mod library;

use std::sync::atomic::Ordering;

use promptforge_core::{CancelHandle, GatewayClient};
use serde_json::json;
use support::{KEY, Upstream, calls, text};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_library_example_runs_the_guides_execution_chapter() {
    let upstream = Upstream::start(vec![
        calls(&[("shout", r#"{"text": "hello, ada"}"#)]),
        text("HELLO, ADA"),
    ])
    .await;
    upstream.set_catalog(json!({"object": "list", "data": [
        {"id": "smol", "object": "model", "kind": "chat",
         "description": "A small instruction-following chat model", "context": 8192,
         "thinking": "never"}]}));
    let client = GatewayClient::new(&upstream.url, KEY).unwrap();
    let (ending, printer, requests) = library::demo(client, "Ada", CancelHandle::new())
        .await
        .unwrap();
    assert_eq!(ending, library::Ending::Done("HELLO, ADA".into()));
    // The tool ran and its trusted output went back verbatim.
    let sent = upstream.requests();
    let tool_message = sent[1]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .unwrap()
        .clone();
    assert_eq!(tool_message["content"], "HELLO, ADA");
    assert_eq!(sent[0]["model"], "smol");
    // The observer saw the parse and the run; the debug sink both requests.
    assert!(printer.seen.load(Ordering::Relaxed) > 5);
    assert_eq!(requests.0.load(Ordering::Relaxed), 2);

    // A cancelled handle ends the run as the Errors chapter says.
    let cancel = CancelHandle::new();
    cancel.cancel();
    let client = GatewayClient::new(&upstream.url, KEY).unwrap();
    let (ending, _, _) = library::demo(client, "Ada", cancel).await.unwrap();
    assert_eq!(ending, library::Ending::Cancelled);
}

#[tokio::test]
async fn the_errors_example_tours_every_error_type() {
    let lines = errors::tour().await;
    assert_eq!(
        lines,
        [
            "ParseError kind=duplicate_section line=Some(11) span=Some(78..83)",
            "promptforge_version=Some(1) (not a prompt: None)",
            "RunError kind=store section=Some(\"## Read\") retryable=false store.is_not_found=Some(true) store.path=Some(\"missing.md\")",
            "RunError cancelled=true",
            "CompletionError kind=config status=None timeout=false retryable=false",
            "CompletionError kind=config status=None timeout=false retryable=false",
            "RunError kind=model completion=Some(Disabled)",
            "CompletionErrorKind::Disabled=disabled",
            "ToolError kind=transport retryable=true cancelled=false",
            "ToolError kind=cancelled retryable=false cancelled=true",
        ]
    );
}
