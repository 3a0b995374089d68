//! The `promptforge` binary in remote mode, against a scripted gateway on loopback.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../../promptforge-core/tests/support/mod.rs"]
mod support;

use std::path::PathBuf;

use serde_json::json;
use support::{KEY, Upstream, text};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

async fn promptforge(args: &[&str], url: &str) -> std::process::Output {
    tokio::process::Command::new(env!("CARGO_BIN_EXE_promptforge"))
        .args(args)
        .current_dir(repo())
        .env("PROMPTFORGE_GATEWAY_URL", url)
        .env("PROMPTFORGE_GATEWAY_API_KEY", KEY)
        .output()
        .await
        .unwrap()
}

fn chat_catalog() -> serde_json::Value {
    json!({"object": "list", "data": [
        {"id": "smol-chat", "object": "model", "kind": "chat",
         "description": "A small friendly general-purpose chat model that follows instructions",
         "context": 2048, "thinking": "never"}
    ]})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remote_mode_binds_the_catalog_and_prints_the_reply() {
    let upstream = Upstream::start(vec![text("Hello, World!")]).await;
    upstream.set_catalog(chat_catalog());
    let output = promptforge(&["run", "prompts/greet.md", "World"], &upstream.url).await;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert_eq!(String::from_utf8_lossy(&output.stdout), "Hello, World!");
    let requests = upstream.requests();
    assert_eq!(requests[0]["model"], "smol-chat");
    assert_eq!(
        requests[0]["messages"][0]["content"],
        "Repeat exactly, with no extra words: Hello, World!"
    );
    let tools: Vec<&str> = requests[0]["tools"]
        .as_array()
        .map(|t| {
            t.iter()
                .map(|t| t["function"]["name"].as_str().unwrap())
                .collect()
        })
        .unwrap_or_default();
    assert!(tools.is_empty(), "greet.md offers no tools: {tools:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_catalog_is_a_clear_error() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    let output = promptforge(&["run", "prompts/echo.md", "x"], &url).await;
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(output.stdout, b"");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.starts_with("error: cannot fetch the model catalog from the gateway:"),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_mode_has_no_models_and_no_web_search() {
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_promptforge"))
        .args(["run", "prompts/greet.md", "World"])
        .current_dir(repo())
        .env_remove("PROMPTFORGE_GATEWAY_URL")
        .env_remove("PROMPTFORGE_GATEWAY_API_KEY")
        .output()
        .await
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("the model catalog is empty"), "{stderr}");
}
