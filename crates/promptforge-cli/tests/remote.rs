//! The `promptforge` binary in remote mode, against a scripted gateway on loopback.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../../promptforge-core/tests/support/mod.rs"]
mod support;

use std::path::PathBuf;

use serde_json::json;
use support::{KEY, Upstream, calls, text};

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
    // The URL it could not reach is named, so a wrong port or a stopped gateway is obvious.
    assert!(
        stderr.contains(&format!("could not connect to {url}/v1/models")),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_key_names_the_variable_that_holds_it() {
    let upstream = Upstream::start(Vec::new()).await;
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_promptforge"))
        .args(["run", "prompts/echo.md", "x"])
        .current_dir(repo())
        .env("PROMPTFORGE_GATEWAY_URL", &upstream.url)
        .env("PROMPTFORGE_GATEWAY_API_KEY", "not-the-key")
        .output()
        .await
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("HTTP 401"), "{stderr}");
    assert!(
        stderr.contains("the gateway refused PROMPTFORGE_GATEWAY_API_KEY"),
        "{stderr}"
    );
    assert!(!stderr.contains("not-the-key"), "the key leaked: {stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gateway_error_envelope_reaches_the_user() {
    let upstream = Upstream::start(vec![support::Reply::Status(
        502,
        json!({"error": {"message": "endpoint local-openai unreachable (connection refused)",
                         "type": "api_error", "code": "upstream_unreachable"}}),
    )])
    .await;
    upstream.set_catalog(chat_catalog());
    let output = promptforge(&["run", "prompts/greet.md", "World"], &upstream.url).await;
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(output.stdout, b"");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(
            "HTTP 502 upstream_unreachable: endpoint local-openai unreachable (connection refused)"
        ),
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hello_runs_against_the_catalog() {
    let upstream = Upstream::start(vec![text("Hello there!")]).await;
    upstream.set_catalog(chat_catalog());
    let output = promptforge(&["run", "prompts/hello.md"], &upstream.url).await;
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&output.stdout), "Hello there!");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_research_example_fans_out_model_arms_and_uses_a_local_tool() {
    let upstream = Upstream::start(vec![
        text("Angle answer."),
        text("Angle answer."),
        text("Angle answer."),
        calls(&[("read_notes", r#"{"first": 1, "last": 4}"#)]),
        text("Merged answer [2]."),
    ])
    .await;
    upstream.set_catalog(chat_catalog());
    let output = promptforge(
        &["run", "prompts/research.md", "Why is the sky blue?"],
        &upstream.url,
    )
    .await;
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        "Merged answer [2]."
    );
    let requests = upstream.requests();
    assert_eq!(requests.len(), 5);
    assert!(requests.iter().all(|r| r["model"] == "smol-chat"));
    let arm_prompts: Vec<String> = requests[..3]
        .iter()
        .map(|r| r["messages"][0]["content"].as_str().unwrap().to_owned())
        .collect();
    for angle in [
        "history and background",
        "current state and open problems",
        "practical advice",
    ] {
        assert!(
            arm_prompts.iter().any(|p| p.contains(angle)),
            "{angle}: {arm_prompts:?}"
        );
    }
    assert_eq!(requests[3]["tools"][0]["function"]["name"], "read_notes");
    // The local tool's output is trusted: numbered note lines, verbatim.
    let tool_result = requests[4]["messages"][2]["content"].as_str().unwrap();
    assert!(tool_result.starts_with("1| ### "), "{tool_result}");
}
