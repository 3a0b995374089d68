//! Routes: health, auth, chat, models, embeddings, rerank, errors, tool_code emulation.

use serde_json::{Value, json};

use super::harness::*;

fn user(content: &str) -> Value {
    json!([{"role": "user", "content": content}])
}

fn assert_envelope(body: &Value, kind: &str, code: &str) {
    assert_eq!(body["error"]["type"], kind, "{body}");
    assert_eq!(body["error"]["code"], code, "{body}");
    assert!(body["error"]["message"].is_string(), "{body}");
}

/// POSTs `body` to `path` and checks the answer is `status` with an error envelope of
/// `kind` and `code`; the envelope.
async fn expect_error(
    gw: &Gateway,
    path: &str,
    body: &Value,
    status: u16,
    kind: &str,
    code: &str,
) -> Value {
    let (got, answer) = gw.post(path, body).await;
    assert_eq!(got, status, "{answer}");
    assert_envelope(&answer, kind, code);
    answer
}

#[tokio::test]
async fn health_is_open_and_everything_else_needs_the_bearer() {
    let upstream = Upstream::start().await;
    let (gw, _dir) = Gateway::standard(&upstream).await;
    let health = gw
        .client
        .get(format!("{}/health", gw.url))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), 200);
    assert_eq!(
        health.json::<Value>().await.unwrap(),
        json!({"status": "serving"})
    );

    let routes = [
        ("GET", "/v1/models"),
        ("POST", "/v1/chat/completions"),
        ("POST", "/v1/embeddings"),
        ("POST", "/v1/rerank"),
        ("GET", "/admin/status"),
        ("POST", "/admin/switch-profile"),
        ("GET", "/nope"),
    ];
    let mut bodies = Vec::new();
    for (method, path) in routes {
        let url = format!("{}{path}", gw.url);
        for auth in [
            None,
            Some("Bearer wrong"),
            Some(&*format!("Basic {KEY}")),
            Some(&*format!("Bearer {KEY}x")),
        ] {
            let mut req = gw
                .client
                .request(method.parse().unwrap(), &url)
                .json(&json!({}));
            if let Some(auth) = auth {
                req = req.header("authorization", auth);
            }
            let res = req.send().await.unwrap();
            assert_eq!(res.status(), 401, "{method} {path} {auth:?}");
            assert_eq!(res.headers()["www-authenticate"], "Bearer");
            bodies.push(res.text().await.unwrap());
        }
    }
    // No detail: every refusal is byte-identical.
    assert!(bodies.windows(2).all(|w| w[0] == w[1]));
    let body: Value = serde_json::from_str(&bodies[0]).unwrap();
    assert_envelope(&body, "authentication_error", "unauthorized");
    assert_eq!(gw.get("/v1/models").await.0, 200);
}

#[tokio::test]
async fn chat_rewrites_the_model_and_passes_everything_else_through() {
    let upstream = Upstream::start().await;
    let (gw, _dir) = Gateway::standard(&upstream).await;
    let request = json!({
        "model": "reasoning-large",
        "messages": [{"role": "developer", "content": "be brief"}, {"role": "user", "content": "Explain monads"}],
        "temperature": 0.7,
        "chat_template_kwargs": {"enable_thinking": true},
        "a_field_nobody_knows": [1, {"x": null}],
        "stream": false
    });
    let (status, body) = gw.post("/v1/chat/completions", &request).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["model"], "reasoning-large");
    assert_eq!(
        body["choices"][0]["message"]["content"],
        "hello from upstream"
    );
    assert_eq!(body["system_fingerprint"], "fp-upstream");
    assert_eq!(body["usage"]["total_tokens"], 7);
    let sent = upstream.last();
    assert_eq!(sent.path, "/v1/chat/completions");
    assert_eq!(
        sent.authorization.as_deref(),
        Some(&*format!("Bearer {UPSTREAM_KEY}"))
    );
    let mut expected = request.clone();
    expected["model"] = json!("up-chat");
    assert_eq!(sent.body, expected);
}

#[tokio::test]
async fn default_max_tokens_fills_only_a_missing_limit() {
    let upstream = Upstream::start().await;
    let (gw, _dir) = Gateway::standard(&upstream).await;
    gw.post(
        "/v1/chat/completions",
        &json!({"model": "fast-draft", "messages": user("x")}),
    )
    .await;
    assert_eq!(upstream.last().body["max_tokens"], 256);
    gw.post(
        "/v1/chat/completions",
        &json!({"model": "fast-draft", "messages": user("x"), "max_tokens": 9}),
    )
    .await;
    assert_eq!(upstream.last().body["max_tokens"], 9);
    gw.post(
        "/v1/chat/completions",
        &json!({"model": "fast-draft", "messages": user("x"), "max_completion_tokens": 9}),
    )
    .await;
    assert!(upstream.last().body.get("max_tokens").is_none());
    gw.post(
        "/v1/chat/completions",
        &json!({"model": "reasoning-large", "messages": user("x")}),
    )
    .await;
    assert!(upstream.last().body.get("max_tokens").is_none());
}

#[tokio::test]
async fn chat_validation() {
    let upstream = Upstream::start().await;
    let (gw, _dir) = Gateway::standard(&upstream).await;
    let bad = [
        json!({"messages": user("x")}),
        json!({"model": "", "messages": user("x")}),
        json!({"model": 5, "messages": user("x")}),
        json!({"model": "fast-draft"}),
        json!({"model": "fast-draft", "messages": []}),
        json!({"model": "fast-draft", "messages": ["hi"]}),
        json!({"model": "fast-draft", "messages": [{"content": "x"}]}),
        json!({"model": "fast-draft", "messages": [{"role": "robot", "content": "x"}]}),
        json!({"model": "fast-draft", "messages": [{"role": "user"}]}),
        json!({"model": "fast-draft", "messages": [{"role": "assistant", "content": null}]}),
    ];
    for body in bad {
        let (status, reply) = gw.post("/v1/chat/completions", &body).await;
        assert_eq!(status, 400, "{body} -> {reply}");
        assert_envelope(&reply, "invalid_request_error", "invalid_request");
    }
    let res = gw
        .client
        .post(format!("{}/v1/chat/completions", gw.url))
        .bearer_auth(KEY)
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 400);
    assert_envelope(
        &res.json().await.unwrap(),
        "invalid_request_error",
        "invalid_request",
    );
    assert!(
        upstream.recorded().is_empty(),
        "invalid requests must not reach the upstream"
    );

    let ok = [
        json!([{"role": "assistant", "content": null, "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}, {"role": "tool", "tool_call_id": "c", "content": "r"}]),
        json!([{"role": "assistant", "function_call": {"name": "f", "arguments": "{}"}}, {"role": "function", "name": "f", "content": "r"}]),
        json!([{"role": "system", "content": "s"}, {"role": "user", "content": [{"type": "text", "text": "hi"}]}]),
    ];
    for messages in ok {
        let (status, reply) = gw
            .post(
                "/v1/chat/completions",
                &json!({"model": "fast-draft", "messages": messages}),
            )
            .await;
        assert_eq!(status, 200, "{messages} -> {reply}");
    }
}

#[tokio::test]
async fn unknown_models_and_wrong_kinds() {
    let upstream = Upstream::start().await;
    let (gw, _dir) = Gateway::standard(&upstream).await;
    let body = expect_error(
        &gw,
        "/v1/chat/completions",
        &json!({"model": "Reasoning-Large", "messages": user("x")}),
        404,
        "invalid_request_error",
        "model_not_found",
    )
    .await;
    assert_eq!(body["error"]["message"], "unknown model Reasoning-Large");
    expect_error(
        &gw,
        "/v1/chat/completions",
        &json!({"model": "embed-large", "messages": user("x")}),
        400,
        "invalid_request_error",
        "kind_mismatch",
    )
    .await;
    for model in ["reasoning-large", "rerank-large"] {
        let (status, body) = gw
            .post("/v1/embeddings", &json!({"model": model, "input": "x"}))
            .await;
        assert_eq!(status, 400);
        assert_envelope(&body, "invalid_request_error", "kind_mismatch");
    }
    for model in ["reasoning-large", "embed-large"] {
        let (status, body) = gw
            .post(
                "/v1/rerank",
                &json!({"model": model, "query": "q", "documents": ["a"]}),
            )
            .await;
        assert_eq!(status, 400);
        assert_envelope(&body, "invalid_request_error", "kind_mismatch");
    }
    let (status, body) = gw
        .post("/v1/embeddings", &json!({"model": "nope", "input": "x"}))
        .await;
    assert_eq!(
        (status, body["error"]["code"].clone()),
        (404, json!("model_not_found"))
    );
    assert!(upstream.recorded().is_empty());
}

#[tokio::test]
async fn models_lists_the_catalog_with_optional_knobs_only_when_set() {
    let upstream = Upstream::start().await;
    let (gw, _dir) = Gateway::standard(&upstream).await;
    let (status, body) = gw.get("/v1/models").await;
    assert_eq!(status, 200);
    assert_eq!(body["object"], "list");
    let data = body["data"].as_array().unwrap();
    assert_eq!(data.len(), 6);
    assert_eq!(
        data[0],
        json!({
            "id": "reasoning-large",
            "object": "model",
            "owned_by": "promptforge-gateway",
            "kind": "chat",
            "description": "A careful reasoning model",
            "context": 200000,
            "thinking": "switchable",
            "max_output": 64000,
            "images": true,
            "parallel_tool_calls": true,
            "effort_levels": ["low", "high"],
            "default_effort": "low",
            "adaptive_thinking": false
        })
    );
    assert_eq!(
        data[1],
        json!({
            "id": "fast-draft",
            "object": "model",
            "owned_by": "promptforge-gateway",
            "kind": "chat",
            "description": "A fast drafting model",
            "context": 8192,
            "thinking": "never",
            "images": false,
            "parallel_tool_calls": false,
            "effort_levels": [],
            "adaptive_thinking": false
        })
    );
    assert_eq!(data[3]["kind"], "embedding");
    assert_eq!(data[4]["kind"], "classifier");
}

#[tokio::test]
async fn embeddings_route() {
    let upstream = Upstream::start().await;
    let (gw, _dir) = Gateway::standard(&upstream).await;
    let request = json!({"model": "embed-large", "input": ["first", "second"], "encoding_format": "float", "dimensions": 3, "user": "u1"});
    let (status, body) = gw.post("/v1/embeddings", &request).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["model"], "embed-large");
    assert_eq!(body["data"][0]["embedding"], json!([0.1, 0.2, 0.3]));
    assert_eq!(body["usage"]["total_tokens"], 2);
    let sent = upstream.last();
    assert_eq!(sent.path, "/v1/embeddings");
    let mut expected = request.clone();
    expected["model"] = json!("up-embed");
    assert_eq!(sent.body, expected);
    assert_eq!(
        gw.post(
            "/v1/embeddings",
            &json!({"model": "embed-large", "input": "one"})
        )
        .await
        .0,
        200
    );
    for bad in [
        json!({"model": "embed-large"}),
        json!({"model": "embed-large", "input": []}),
        json!({"model": "embed-large", "input": [1]}),
        json!({"model": "embed-large", "input": "x", "encoding_format": "int8"}),
    ] {
        let (status, body) = gw.post("/v1/embeddings", &bad).await;
        assert_eq!(status, 400, "{bad}");
        assert_envelope(&body, "invalid_request_error", "invalid_request");
    }
}

#[tokio::test]
async fn rerank_route() {
    let upstream = Upstream::start().await;
    let (gw, _dir) = Gateway::standard(&upstream).await;
    let request = json!({"model": "rerank-large", "query": "what is rust", "documents": ["a card game", "a systems language"], "top_n": 2, "return_documents": false});
    let (status, body) = gw.post("/v1/rerank", &request).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["model"], "rerank-large");
    assert_eq!(
        body["results"][0],
        json!({"index": 1, "relevance_score": 0.9})
    );
    let sent = upstream.last();
    assert_eq!(sent.path, "/v1/rerank");
    let mut expected = request.clone();
    expected["model"] = json!("up-rerank");
    assert_eq!(sent.body, expected);
    for bad in [
        json!({"model": "rerank-large", "documents": ["a"]}),
        json!({"model": "rerank-large", "query": "", "documents": ["a"]}),
        json!({"model": "rerank-large", "query": "q", "documents": []}),
        json!({"model": "rerank-large", "query": "q", "documents": ["a"], "top_n": 0}),
    ] {
        let (status, body) = gw.post("/v1/rerank", &bad).await;
        assert_eq!(status, 400, "{bad}");
        assert_envelope(&body, "invalid_request_error", "invalid_request");
    }
}

#[tokio::test]
async fn upstream_without_the_capability_is_model_unavailable() {
    let upstream = Upstream::start().await;
    upstream.script(
        "up-embed",
        Reply::Json(404, json!({"error": {"message": "Not Found"}})),
    );
    upstream.script("up-rerank", Reply::Raw(501, "not implemented".into()));
    let (gw, _dir) = Gateway::standard(&upstream).await;
    expect_error(
        &gw,
        "/v1/embeddings",
        &json!({"model": "embed-large", "input": "x"}),
        400,
        "invalid_request_error",
        "model_unavailable",
    )
    .await;
    expect_error(
        &gw,
        "/v1/rerank",
        &json!({"model": "rerank-large", "query": "q", "documents": ["a"]}),
        400,
        "invalid_request_error",
        "model_unavailable",
    )
    .await;
}

#[tokio::test]
async fn upstream_failures_map_to_envelopes() {
    let upstream = Upstream::start().await;
    upstream.script("up-chat", Reply::Raw(200, "<html>not json</html>".into()));
    upstream.script(
        "up-fast",
        Reply::Json(500, json!({"error": {"message": "boom"}})),
    );
    upstream.script(
        "gemma3-it",
        Reply::Json(400, json!({"error": {"message": "bad temperature"}})),
    );
    upstream.script("up-embed", Reply::Json(200, json!({"object": "list"})));
    let (gw, _dir) = Gateway::standard(&upstream).await;
    let chat = |model: &str| {
        (
            "/v1/chat/completions",
            json!({"model": model, "messages": user("x")}),
        )
    };
    let cases = [
        (
            chat("unreachable"),
            502,
            "upstream_error",
            "upstream_transport",
        ),
        (
            chat("reasoning-large"),
            502,
            "upstream_error",
            "upstream_protocol",
        ),
        (chat("fast-draft"), 502, "upstream_error", "upstream_status"),
        (
            chat("gemma-remote"),
            400,
            "invalid_request_error",
            "upstream_rejected",
        ),
        (
            (
                "/v1/embeddings",
                json!({"model": "embed-large", "input": "x"}),
            ),
            502,
            "upstream_error",
            "upstream_protocol",
        ),
    ];
    for ((path, request), status, kind, code) in cases {
        let body = expect_error(&gw, path, &request, status, kind, code).await;
        if code == "upstream_status" {
            assert!(body["error"]["message"].as_str().unwrap().contains("boom"));
        }
    }
    let (status, body) = gw.get("/v1/nothing-here").await;
    assert_eq!(status, 404);
    assert_envelope(&body, "invalid_request_error", "not_found");
    let res = gw
        .client
        .get(format!("{}/v1/chat/completions", gw.url))
        .bearer_auth(KEY)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 405);
    assert_envelope(
        &res.json().await.unwrap(),
        "invalid_request_error",
        "method_not_allowed",
    );
    assert!(!gw.logs().contains(UPSTREAM_KEY));
}

#[tokio::test]
async fn upstream_timeout_applies_to_buffered_requests() {
    let upstream = Upstream::start().await;
    upstream.script(
        "up-fast",
        Reply::Delayed(
            3000,
            Box::new(Reply::Json(200, chat_reply("up-fast", "late"))),
        ),
    );
    let dir = ConfigDir::new();
    dir.write(
        "gateway.toml",
        &standard_boot(&upstream.url).replace("id = \"up\"\n", "id = \"up\"\ntimeout = \"1s\"\n"),
    );
    dir.write("profiles/main.toml", MAIN_PROFILE);
    let gw = Gateway::start(&dir.boot(), "main", &base_env()).await;
    expect_error(
        &gw,
        "/v1/chat/completions",
        &json!({"model": "fast-draft", "messages": user("x")}),
        504,
        "upstream_error",
        "upstream_timeout",
    )
    .await;
}

fn weather_tools() -> Value {
    json!([{"type": "function", "function": {"name": "get_weather", "description": "Current weather for a city", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}])
}

#[tokio::test]
async fn gemma_tool_code_emulation() {
    let upstream = Upstream::start().await;
    let (gw, _dir) = Gateway::standard(&upstream).await;
    let request = json!({"model": "gemma-remote", "messages": user("weather in Paris?"), "tools": weather_tools(), "tool_choice": "auto", "temperature": 0.2});

    // Outbound: tools become a prepended system guide; tools and tool_choice are stripped.
    upstream.script(
        "gemma3-it",
        Reply::Json(
            200,
            chat_reply(
                "gemma3-it",
                "```tool_code\nget_weather(city=\"Paris\")\n```",
            ),
        ),
    );
    let (status, body) = gw.post("/v1/chat/completions", &request).await;
    assert_eq!(status, 200, "{body}");
    let sent = upstream.last().body;
    assert!(sent.get("tools").is_none() && sent.get("tool_choice").is_none());
    assert_eq!(sent["temperature"], 0.2);
    assert_eq!(sent["messages"][0]["role"], "system");
    let guide = sent["messages"][0]["content"].as_str().unwrap();
    assert!(
        guide.contains("tool_code") && guide.contains("get_weather: Current weather for a city"),
        "{guide}"
    );
    assert_eq!(
        sent["messages"][1],
        json!({"role": "user", "content": "weather in Paris?"})
    );

    // Inbound: the fence becomes tool_calls with null content and finish_reason tool_calls.
    let choice = &body["choices"][0];
    assert_eq!(body["model"], "gemma-remote");
    assert_eq!(choice["finish_reason"], "tool_calls");
    assert!(choice["message"]["content"].is_null());
    let call = &choice["message"]["tool_calls"][0];
    assert_eq!(call["type"], "function");
    assert_eq!(call["function"]["name"], "get_weather");
    assert_eq!(
        serde_json::from_str::<Value>(call["function"]["arguments"].as_str().unwrap()).unwrap(),
        json!({"city": "Paris"})
    );
    assert!(call["id"].as_str().unwrap().starts_with("call_"));

    // A json fence carrying a tool_calls blob is accepted too.
    upstream.script("gemma3-it", Reply::Json(200, chat_reply("gemma3-it", "```json\n{\"tool_calls\": [{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}]}\n```")));
    let (_, body) = gw.post("/v1/chat/completions", &request).await;
    assert_eq!(
        body["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"],
        "{\"city\":\"Oslo\"}"
    );

    // Malformed: empty content plus gateway_warning, logged at warn.
    upstream.script(
        "gemma3-it",
        Reply::Json(
            200,
            chat_reply(
                "gemma3-it",
                "```tool_code\nget_weather(city=\"Paris\")\n```\nI hope that helps",
            ),
        ),
    );
    let (status, body) = gw.post("/v1/chat/completions", &request).await;
    assert_eq!(status, 200);
    let message = &body["choices"][0]["message"];
    assert_eq!(message["content"], "");
    assert!(
        message["gateway_warning"]
            .as_str()
            .unwrap()
            .contains("trailing prose")
    );
    assert!(message.get("tool_calls").is_none());
    let logs = gw.logs();
    assert!(
        logs.contains("WARN") && logs.contains("malformed tool_code reply"),
        "{logs}"
    );

    // Plain prose is untouched.
    upstream.script(
        "gemma3-it",
        Reply::Json(200, chat_reply("gemma3-it", "It is sunny.")),
    );
    let (_, body) = gw.post("/v1/chat/completions", &request).await;
    assert_eq!(body["choices"][0]["message"]["content"], "It is sunny.");
    assert_eq!(body["choices"][0]["finish_reason"], "stop");

    // Streaming is forwarded unchanged: tools stay, no system guide.
    upstream.script(
        "gemma3-it",
        Reply::Stream(vec![
            Part::Data(chunk("gemma3-it", "x")),
            Part::Data("[DONE]".into()),
        ]),
    );
    let mut streaming = request.clone();
    streaming["stream"] = json!(true);
    let res = gw.send("/v1/chat/completions", &streaming).await;
    assert_eq!(res.status(), 200);
    res.text().await.unwrap();
    let mut expected = streaming.clone();
    expected["model"] = json!("gemma3-it");
    assert_eq!(upstream.last().body, expected);
}
