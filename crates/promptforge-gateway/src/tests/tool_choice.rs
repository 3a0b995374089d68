//! `tool_choice`: validated by the chat contract on every path, forwarded unchanged to a
//! remote OpenAI-compatible upstream, and shaping the `gemma3_tool_code` guide (a local
//! child's translation is tested with a stand-in child in `tests/gateway/local.rs`).

use serde_json::{Value, json};

use super::harness::*;

fn user(content: &str) -> Value {
    json!([{"role": "user", "content": content}])
}

/// Two tools, so narrowing to one shows.
fn tools() -> Value {
    json!([
        {"type": "function", "function": {"name": "get_weather", "description": "Current weather", "parameters": {"type": "object"}}},
        {"type": "function", "function": {"name": "get_time", "description": "Current time", "parameters": {"type": "object"}}}
    ])
}

fn named(name: &str) -> Value {
    json!({"type": "function", "function": {"name": name}})
}

#[tokio::test]
async fn a_remote_upstream_gets_tool_choice_unchanged() {
    let upstream = Upstream::start().await;
    let (gw, _dir) = Gateway::standard(&upstream).await;
    for choice in [
        json!("auto"),
        json!("none"),
        json!("required"),
        Value::Null,
        named("get_time"),
        json!({"type": "function", "function": {"name": "get_time"}, "x_extra": 1}),
    ] {
        for stream in [false, true] {
            let request = json!({
                "model": "reasoning-large",
                "messages": user("what time is it?"),
                "tools": tools(),
                "tool_choice": choice,
                "stream": stream,
            });
            let response = gw.send("/v1/chat/completions", &request).await;
            assert_eq!(response.status(), 200, "{choice} stream {stream}");
            let _ = response.bytes().await.unwrap();
            let mut expected = request.clone();
            expected["model"] = json!("up-chat");
            assert_eq!(upstream.last().body, expected, "{choice} stream {stream}");
        }
    }
}

#[tokio::test]
async fn a_bad_tool_choice_is_a_400_on_every_path() {
    let upstream = Upstream::start().await;
    let (gw, _dir) = Gateway::standard(&upstream).await;
    let cases = [
        (
            json!("sometimes"),
            Some(tools()),
            "tool_choice `sometimes` is not one of none, auto, required",
        ),
        (json!("AUTO"), Some(tools()), "tool_choice `AUTO`"),
        (json!(7), Some(tools()), "tool_choice must be"),
        (json!(["auto"]), Some(tools()), "tool_choice must be"),
        (
            json!({"type": "tool", "function": {"name": "get_time"}}),
            Some(tools()),
            "tool_choice.type",
        ),
        (
            json!({"function": {"name": "get_time"}}),
            Some(tools()),
            "tool_choice.type",
        ),
        (
            json!({"type": "function"}),
            Some(tools()),
            "tool_choice.function.name",
        ),
        (
            json!({"type": "function", "function": {"name": ""}}),
            Some(tools()),
            "tool_choice.function.name",
        ),
        (
            named("get_stock"),
            Some(tools()),
            "tool_choice names the function `get_stock`, which is not in tools",
        ),
        (
            named("get_time"),
            None,
            "tool_choice names the function `get_time`, which is not in tools",
        ),
        (
            named("get_time"),
            Some(json!("get_time")),
            "which is not in tools",
        ),
    ];
    for model in ["reasoning-large", "fast-draft", "gemma-remote"] {
        for stream in [false, true] {
            for (choice, tools, message) in &cases {
                let mut request = json!({
                    "model": model,
                    "messages": user("hi"),
                    "tool_choice": choice,
                    "stream": stream,
                });
                if let Some(tools) = tools {
                    request["tools"] = tools.clone();
                }
                let (status, body) = gw.post("/v1/chat/completions", &request).await;
                assert_eq!(status, 400, "{request}: {body}");
                assert_eq!(body["error"]["type"], "invalid_request_error", "{body}");
                assert_eq!(body["error"]["code"], "invalid_request", "{body}");
                let text = body["error"]["message"].as_str().unwrap();
                assert!(text.contains(message), "{request}: {text}");
            }
        }
    }
    assert!(
        upstream.recorded().is_empty(),
        "a refused request went upstream"
    );
}

#[tokio::test]
async fn the_gemma_guide_offers_only_the_named_tool() {
    let upstream = Upstream::start().await;
    let (gw, _dir) = Gateway::standard(&upstream).await;
    let guide = |sent: &Value| sent["messages"][0]["content"].as_str().unwrap().to_owned();
    let request = json!({"model": "gemma-remote", "messages": user("time?"), "tools": tools(), "tool_choice": named("get_time")});
    let (status, body) = gw.post("/v1/chat/completions", &request).await;
    assert_eq!(status, 200, "{body}");
    let sent = upstream.last().body;
    assert!(
        sent.get("tools").is_none() && sent.get("tool_choice").is_none(),
        "{sent}"
    );
    let text = guide(&sent);
    assert!(text.contains("- get_time: Current time"), "{text}");
    assert!(!text.contains("get_weather"), "{text}");
    assert!(text.contains("Call the tool get_time now"), "{text}");

    // `auto` offers both; `none` offers none (no guide at all).
    let request = json!({"model": "gemma-remote", "messages": user("time?"), "tools": tools(), "tool_choice": "auto"});
    gw.post("/v1/chat/completions", &request).await;
    let text = guide(&upstream.last().body);
    assert!(
        text.contains("get_weather") && text.contains("get_time"),
        "{text}"
    );
    let request = json!({"model": "gemma-remote", "messages": user("time?"), "tools": tools(), "tool_choice": "none"});
    gw.post("/v1/chat/completions", &request).await;
    assert_eq!(upstream.last().body["messages"], user("time?"));
}
