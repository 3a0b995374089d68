//! `GET /metrics`: scraped after real traffic and parsed.

use serde_json::json;

use super::failover::{boot_two, chat, post_full};
use super::harness::*;

#[tokio::test]
async fn metrics_need_the_bearer() {
    let upstream = Upstream::start().await;
    let (gw, _dir) = Gateway::standard(&upstream).await;
    let response = gw
        .client
        .get(format!("{}/metrics", gw.url))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 401);
    let response = gw
        .client
        .get(format!("{}/metrics", gw.url))
        .bearer_auth("wrong")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 401);
}

#[tokio::test]
async fn counters_move_with_traffic() {
    let a = Upstream::start().await;
    let b = Upstream::start().await;
    a.script("m", Reply::Json(500, json!({"error": {"message": "boom"}})));
    b.script("m", Reply::Json(200, chat_reply("m", "from b")));
    let (gw, _dir) = boot_two(
        &a,
        &b,
        "dominion = \"pool\"\nfailover_cooldown = \"10m\"",
        "\n[[dominion]]\nid = \"pool\"\nkind = \"remote\"\nmax_concurrency = 4\n",
    )
    .await;

    let (before, _) = scrape(&gw).await;
    let chat_route = ("route", "/v1/chat/completions");
    assert_eq!(
        total(&before, "promptforge_gateway_requests_total", &[chat_route]),
        0.0
    );

    // One failover (a: 500 -> b), then three requests straight to b (a is cooling), a
    // 404 for an unknown model and a 400 for a bad body.
    for _ in 0..3 {
        let (status, endpoint, _, text) = post_full(&gw, &chat("ab")).await;
        assert_eq!(status, 200, "{text}");
        assert_eq!(endpoint.as_deref(), Some("b"));
    }
    let (status, _) = gw
        .post(
            "/v1/chat/completions",
            &json!({"model": "ab", "messages": [{"role": "user", "content": "x"}]}),
        )
        .await;
    assert_eq!(status, 200);
    let (status, _) = gw
        .post("/v1/chat/completions", &chat("no-such-model-xyz"))
        .await;
    assert_eq!(status, 404);
    let (status, _) = gw
        .post("/v1/chat/completions", &json!({"model": "ab"}))
        .await;
    assert_eq!(status, 400);

    let (after, types) = scrape(&gw).await;
    assert_eq!(types["promptforge_gateway_requests"], "counter");
    assert_eq!(
        types["promptforge_gateway_request_duration_seconds"],
        "histogram"
    );
    assert_eq!(types["promptforge_gateway_overhead_seconds"], "histogram");
    assert_eq!(types["promptforge_gateway_dominion_in_flight"], "gauge");
    let ok = [
        chat_route,
        ("model", "ab"),
        ("endpoint", "b"),
        ("status", "200"),
    ];
    assert_eq!(
        total(&after, "promptforge_gateway_requests_total", &ok),
        4.0
    );
    // The unknown model created no series of its own.
    assert!(
        after
            .iter()
            .all(|s| s.labels.values().all(|v| v != "no-such-model-xyz")),
        "an unknown model name became a label"
    );
    assert_eq!(
        total(
            &after,
            "promptforge_gateway_requests_total",
            &[chat_route, ("model", ""), ("status", "404")]
        ),
        1.0
    );
    assert_eq!(
        total(
            &after,
            "promptforge_gateway_failovers_total",
            &[("model", "ab"), ("endpoint", "a"), ("reason", "status")]
        ),
        1.0
    );
    assert_eq!(
        total(
            &after,
            "promptforge_gateway_upstream_errors_total",
            &[("endpoint", "a"), ("code", "upstream_status")]
        ),
        1.0
    );
    // chat_reply reports 3 prompt and 4 completion tokens, four times.
    assert_eq!(
        total(
            &after,
            "promptforge_gateway_tokens_total",
            &[("model", "ab"), ("kind", "prompt")]
        ),
        12.0
    );
    assert_eq!(
        total(
            &after,
            "promptforge_gateway_tokens_total",
            &[("model", "ab"), ("kind", "completion")]
        ),
        16.0
    );
    let count = |name: &str, want: &[(&str, &str)]| total(&after, name, want);
    assert_eq!(
        count(
            "promptforge_gateway_request_duration_seconds_count",
            &[chat_route]
        ),
        6.0
    );
    assert_eq!(
        count("promptforge_gateway_overhead_seconds_count", &[chat_route]),
        6.0
    );
    // One attempt on a, four on b.
    assert_eq!(
        count(
            "promptforge_gateway_upstream_duration_seconds_count",
            &[("endpoint", "a")]
        ),
        1.0
    );
    assert_eq!(
        count(
            "promptforge_gateway_upstream_duration_seconds_count",
            &[("endpoint", "b")]
        ),
        4.0
    );
    // The +Inf bucket equals the count.
    assert_eq!(
        count(
            "promptforge_gateway_upstream_duration_seconds_bucket",
            &[("endpoint", "b"), ("le", "+Inf")]
        ),
        4.0
    );
    assert_eq!(
        count(
            "promptforge_gateway_dominion_admission_wait_seconds_count",
            &[("dominion", "pool")]
        ),
        0.0,
        "a non-last endpoint's admission never waits"
    );
    assert_eq!(
        count(
            "promptforge_gateway_dominion_in_flight",
            &[("dominion", "pool")]
        ),
        0.0
    );
    assert!(
        after
            .iter()
            .any(|s| s.name == "promptforge_gateway_dominion_waiting"
                && s.labels.get("dominion").map(String::as_str) == Some("pool"))
    );
    // The scrapes themselves are counted.
    assert!(
        count(
            "promptforge_gateway_requests_total",
            &[("route", "/metrics"), ("status", "200")]
        ) >= 1.0
    );
}

#[tokio::test]
async fn streamed_usage_and_admission_wait_are_counted() {
    let a = Upstream::start().await;
    let b = Upstream::start().await;
    a.script(
        "m",
        Reply::Stream(vec![
            Part::Data(chunk("m", "x")),
            Part::Data(
                json!({"id": "u", "model": "m", "choices": [], "usage": {"prompt_tokens": 11, "completion_tokens": 13}})
                    .to_string(),
            ),
            Part::Data("[DONE]".into()),
        ]),
    );
    let (gw, _dir) = boot_two(
        &a,
        &b,
        "dominion = \"pool\"",
        "\n[[dominion]]\nid = \"pool\"\nkind = \"remote\"\nmax_concurrency = 2\n",
    )
    .await;
    let body =
        json!({"model": "solo", "stream": true, "messages": [{"role": "user", "content": "hi"}]});
    let (status, endpoint, overhead, text) = post_full(&gw, &body).await;
    assert_eq!(status, 200, "{text}");
    assert!(text.contains("data: [DONE]"), "{text}");
    assert_eq!(endpoint.as_deref(), Some("a"));
    assert!(overhead.is_some());
    // The stream's tally is counted once the relay is gone (right after the body ends).
    let counted = eventually_async(|| async {
        let (after, _) = scrape(&gw).await;
        total(
            &after,
            "promptforge_gateway_tokens_total",
            &[("model", "solo"), ("kind", "completion")],
        ) == 13.0
    })
    .await;
    assert!(counted, "streamed usage was not counted");
    let (after, _) = scrape(&gw).await;
    assert_eq!(
        total(
            &after,
            "promptforge_gateway_tokens_total",
            &[("model", "solo"), ("kind", "prompt")]
        ),
        11.0
    );
    assert_eq!(
        total(
            &after,
            "promptforge_gateway_dominion_admission_wait_seconds_count",
            &[("dominion", "pool")]
        ),
        1.0
    );
}

/// Status, `X-PromptForge-Endpoint`, `X-PromptForge-Overhead-Ms`, body, client-side time.
async fn timed(
    gw: &Gateway,
    path: &str,
    body: Option<&serde_json::Value>,
) -> (u16, Option<String>, f64, String, f64) {
    let started = std::time::Instant::now();
    let request = match body {
        Some(body) => gw.client.post(format!("{}{path}", gw.url)).json(body),
        None => gw.client.get(format!("{}{path}", gw.url)),
    };
    let response = request.bearer_auth(KEY).send().await.unwrap();
    let status = response.status().as_u16();
    let endpoint = response
        .headers()
        .get("x-promptforge-endpoint")
        .map(|v| v.to_str().unwrap().to_owned());
    let overhead: f64 = response
        .headers()
        .get("x-promptforge-overhead-ms")
        .unwrap_or_else(|| panic!("{path}: no X-PromptForge-Overhead-Ms"))
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    let head_ms = started.elapsed().as_secs_f64() * 1000.0;
    let text = tokio::time::timeout(std::time::Duration::from_secs(30), response.text())
        .await
        .unwrap()
        .unwrap();
    (status, endpoint, overhead, text, head_ms)
}

#[tokio::test]
async fn overhead_headers_on_buffered_streaming_and_error_responses() {
    let upstream = Upstream::start().await;
    // The upstream takes 300 ms: that wait is not the gateway's overhead.
    upstream.script(
        "up-fast",
        Reply::Delayed(
            300,
            Box::new(Reply::Json(200, chat_reply("up-fast", "slow"))),
        ),
    );
    let (gw, _dir) = Gateway::standard(&upstream).await;
    let fast = json!({"model": "fast-draft", "messages": [{"role": "user", "content": "x"}]});
    let (status, endpoint, overhead, text, head_ms) =
        timed(&gw, "/v1/chat/completions", Some(&fast)).await;
    assert_eq!(status, 200, "{text}");
    assert_eq!(endpoint.as_deref(), Some("up"));
    assert!(overhead >= 0.0);
    // The gateway's time cannot include the 300 ms the upstream took.
    assert!(
        overhead <= head_ms - 300.0,
        "overhead {overhead} ms includes the upstream wait (head after {head_ms} ms)"
    );

    // A stream: the header is there with the response head.
    let stream = json!({"model": "reasoning-large", "stream": true, "messages": [{"role": "user", "content": "x"}]});
    let (status, endpoint, overhead, text, _) =
        timed(&gw, "/v1/chat/completions", Some(&stream)).await;
    assert_eq!(status, 200);
    assert_eq!(endpoint.as_deref(), Some("up"));
    assert!(overhead >= 0.0);
    assert!(text.contains("data: [DONE]"), "{text}");

    // Embeddings and rerank.
    for (path, model, extra) in [
        ("/v1/embeddings", "embed-large", json!({"input": "x"})),
        (
            "/v1/rerank",
            "rerank-large",
            json!({"query": "q", "documents": ["a", "b"]}),
        ),
    ] {
        let mut body = extra;
        body["model"] = json!(model);
        let (status, endpoint, _, text, _) = timed(&gw, path, Some(&body)).await;
        assert_eq!(status, 200, "{path}: {text}");
        assert_eq!(endpoint.as_deref(), Some("up"), "{path}");
    }

    // An error after an endpoint was tried names it.
    let dead = json!({"model": "unreachable", "messages": [{"role": "user", "content": "x"}]});
    let (status, endpoint, _, text, _) = timed(&gw, "/v1/chat/completions", Some(&dead)).await;
    assert_eq!(status, 502, "{text}");
    assert_eq!(endpoint.as_deref(), Some("dead"));

    // No endpoint tried: the overhead only.
    let unknown = json!({"model": "nope", "messages": [{"role": "user", "content": "x"}]});
    let (status, endpoint, _, _, _) = timed(&gw, "/v1/chat/completions", Some(&unknown)).await;
    assert_eq!(status, 404);
    assert_eq!(endpoint, None);
    let (status, endpoint, _, _, _) = timed(&gw, "/v1/models", None).await;
    assert_eq!(status, 200);
    assert_eq!(endpoint, None);
}
