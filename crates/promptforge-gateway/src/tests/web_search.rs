//! `POST /v1/tools/web_search` against a fake Brave server.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::routing::get;
use serde_json::{Value, json};

use super::harness::*;

const BRAVE_KEY: &str = "brave-subscription-token-123";

/// One call Brave received: query parameters and the subscription token.
type Call = (HashMap<String, String>, Option<String>);

#[derive(Default)]
struct BraveState {
    reply: Mutex<(u16, Value)>,
    calls: Mutex<Vec<Call>>,
}

#[derive(Clone)]
struct FakeBrave {
    state: Arc<BraveState>,
    url: String,
}

impl FakeBrave {
    async fn start() -> Self {
        let state = Arc::new(BraveState::default());
        *state.reply.lock().unwrap() = (200, json!({"web": {"results": []}}));
        let app = Router::new()
            .route(
                "/res/v1/web/search",
                get(
                    |State(s): State<Arc<BraveState>>,
                     Query(q): Query<HashMap<String, String>>,
                     headers: HeaderMap| async move {
                        let token = headers
                            .get("x-subscription-token")
                            .map(|v| v.to_str().unwrap().to_owned());
                        s.calls.lock().unwrap().push((q, token));
                        let (status, body) = s.reply.lock().unwrap().clone();
                        (
                            axum::http::StatusCode::from_u16(status).unwrap(),
                            axum::Json(body),
                        )
                    },
                ),
            )
            .with_state(state.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Self {
            state,
            url: format!("http://{addr}/res/v1"),
        }
    }

    fn reply(&self, status: u16, body: Value) {
        *self.state.reply.lock().unwrap() = (status, body);
    }

    fn results(&self, results: Value) {
        self.reply(200, json!({"type": "search", "query": {"original": "x"}, "web": {"type": "search", "results": results}}));
    }

    fn calls(&self) -> Vec<Call> {
        self.state.calls.lock().unwrap().clone()
    }
}

async fn gateway(brave: &FakeBrave, knobs: &str) -> (Gateway, ConfigDir) {
    let upstream_url = "http://127.0.0.1:9";
    let dir = ConfigDir::new();
    let section = format!(
        "\n[tools.web_search]\nprovider = \"brave\"\napi_key = \"${{GW_BRAVE_KEY}}\"\nbase_url = \"{}\"\n{knobs}\n",
        brave.url
    );
    dir.write(
        "gateway.toml",
        &format!("{}{section}", standard_boot(upstream_url)),
    );
    dir.write("profiles/main.toml", MAIN_PROFILE);
    let mut env = base_env();
    env.push(("GW_BRAVE_KEY".into(), BRAVE_KEY.into()));
    let gw = Gateway::start(&dir.boot(), "main", &env).await;
    (gw, dir)
}

fn hit(url: &str, title: &str) -> Value {
    json!({"title": title, "url": url, "description": format!("about {title}"), "thumbnail": {"src": "x"}, "profile": {"name": "P"}, "meta_url": {"hostname": "h"}, "family_friendly": true})
}

#[tokio::test]
async fn results_are_trimmed_and_post_processed_in_order() {
    let brave = FakeBrave::start().await;
    let long_tracking = format!(
        "https://long.example.org/p?id=1&utm_content={}",
        "x".repeat(2100)
    );
    let too_long = format!("https://long.example.org/{}", "y".repeat(2100));
    brave.results(json!([
        {"title": "<strong>Rust</strong> &amp; Tokio", "url": "https://www.example.com/a?utm_source=x&id=1&fbclid=z", "description": "A <b>fast</b>\n\t runtime &#39;guide&#39;", "age": "2 days ago", "extra_snippets": ["<i>one</i>", "  "], "thumbnail": {"src": "t"}},
        hit("https://example.com/b", "B"),
        hit("https://www.example.com/c", "C (third on example.com: diversified away)"),
        hit("https://evil.org/x", "Excluded"),
        hit(&too_long, "Over-long URL"),
        hit("ftp://files.net/x", "Not http"),
        hit(&long_tracking, "Long only because of tracking"),
        hit("https://docs.example.com/d", "Docs"),
        hit("https://news.site.org/n", "News"),
        {"title": "no url"},
    ]));
    let (gw, _dir) = gateway(&brave, "default_safesearch = \"moderate\"").await;
    let request = json!({"query": "  Rust async runtime comparison ", "count": 4, "domains_exclude": ["evil.org"], "freshness": "pw", "country": "us", "language": "en"});
    let (status, body) = gw.post("/v1/tools/web_search", &request).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body,
        json!({
            "query": "Rust async runtime comparison",
            "results": [
                {"title": "Rust & Tokio", "url": "https://www.example.com/a?id=1", "description": "A fast runtime 'guide'", "age": "2 days ago", "site_name": "example.com", "extra_snippets": ["one"]},
                {"title": "B", "url": "https://example.com/b", "description": "about B", "site_name": "example.com"},
                {"title": "Long only because of tracking", "url": "https://long.example.org/p?id=1", "description": "about Long only because of tracking", "site_name": "long.example.org"},
                {"title": "Docs", "url": "https://docs.example.com/d", "description": "about Docs", "site_name": "docs.example.com"},
            ]
        })
    );
    let calls = brave.calls();
    assert_eq!(calls.len(), 1);
    let (params, token) = &calls[0];
    assert_eq!(token.as_deref(), Some(BRAVE_KEY));
    assert_eq!(params["q"], "Rust async runtime comparison");
    assert_eq!(params["count"], "20", "over-fetch up to max_count");
    assert_eq!(params["freshness"], "pw");
    assert_eq!(params["safesearch"], "moderate");
    assert_eq!(params["country"], "US");
    assert_eq!(params["search_lang"], "en");
    assert!(!body.to_string().contains(BRAVE_KEY));
    assert!(!gw.logs().contains(BRAVE_KEY));
}

#[tokio::test]
async fn domain_filters_run_before_diversity_and_the_cap_runs_last() {
    let brave = FakeBrave::start().await;
    brave.results(json!([
        hit("https://www.example.com/1", "W1"),
        hit("https://www.example.com/2", "W2"),
        hit("https://example.com/3", "E3"),
        hit("https://blog.example.com/4", "B4"),
        hit("https://other.com/5", "O5"),
        hit("https://example.com/6", "E6"),
        hit("https://example.com/7", "E7"),
    ]));
    let (gw, _dir) = gateway(&brave, "max_per_host = 2\nstrip_tracking = false").await;
    let titles = |body: &Value| -> Vec<String> {
        body["results"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["title"].as_str().unwrap().to_owned())
            .collect()
    };
    // Excluding www.example.com first leaves example.com's quota to E3 and E6.
    let (_, body) = gw
        .post(
            "/v1/tools/web_search",
            &json!({"query": "q", "domains_exclude": ["www.example.com"]}),
        )
        .await;
    assert_eq!(titles(&body), ["E3", "B4", "O5", "E6"]);
    // Include matches the domain and its subdomains, never look-alikes.
    let (_, body) = gw
        .post(
            "/v1/tools/web_search",
            &json!({"query": "q", "domains_include": ["example.com"]}),
        )
        .await;
    assert_eq!(titles(&body), ["W1", "W2", "B4"]);
    // The cap applies after diversity.
    let (_, body) = gw
        .post("/v1/tools/web_search", &json!({"query": "q", "count": 2}))
        .await;
    assert_eq!(titles(&body), ["W1", "W2"]);
    // default_count is 10 and max_per_host 2: W1 W2 B4 O5.
    let (_, body) = gw
        .post("/v1/tools/web_search", &json!({"query": "q"}))
        .await;
    assert_eq!(titles(&body), ["W1", "W2", "B4", "O5"]);
}

#[tokio::test]
async fn tracking_parameters_are_kept_when_stripping_is_off() {
    let brave = FakeBrave::start().await;
    brave.results(json!([hit(
        "https://a.example.com/p?utm_source=x&id=2",
        "A"
    )]));
    let (gw, _dir) = gateway(&brave, "strip_tracking = false").await;
    let (_, body) = gw
        .post("/v1/tools/web_search", &json!({"query": "q"}))
        .await;
    assert_eq!(
        body["results"][0]["url"],
        "https://a.example.com/p?utm_source=x&id=2"
    );
}

#[tokio::test]
async fn invalid_requests_are_400_and_never_reach_brave() {
    let brave = FakeBrave::start().await;
    let (gw, _dir) = gateway(&brave, "").await;
    let many: Vec<String> = (0..21).map(|i| format!("d{i}.com")).collect();
    let bad = [
        json!({}),
        json!({"query": ""}),
        json!({"query": " \t "}),
        json!({"query": "q", "count": 0}),
        json!({"query": "q", "count": 21}),
        json!({"query": "q", "freshness": "pz"}),
        json!({"query": "q", "safe_search": "none"}),
        json!({"query": "q", "domains_include": ["https://example.com"]}),
        json!({"query": "q", "domains_include": ["example.com/path"]}),
        json!({"query": "q", "domains_exclude": ["example.com:443"]}),
        json!({"query": "q", "domains_exclude": many}),
        json!({"query": "q", "country": "USA"}),
        json!({"query": "q", "language": "english"}),
        json!({"query": "q", "unknown": 1}),
    ];
    for body in bad {
        let (status, reply) = gw.post("/v1/tools/web_search", &body).await;
        assert_eq!(status, 400, "{body} -> {reply}");
        assert_eq!(reply["error"]["code"], "invalid_request", "{reply}");
    }
    assert!(brave.calls().is_empty());
}

#[tokio::test]
async fn provider_failures_map_to_envelopes_without_the_key() {
    let brave = FakeBrave::start().await;
    let (gw, _dir) = gateway(&brave, "").await;
    brave.reply(500, json!({"error": "oops"}));
    let (status, body) = gw
        .post("/v1/tools/web_search", &json!({"query": "q"}))
        .await;
    assert_eq!(
        (status, body["error"]["code"].clone()),
        (502, json!("upstream_status"))
    );
    brave.reply(429, json!({"error": "slow down"}));
    let (status, body) = gw
        .post("/v1/tools/web_search", &json!({"query": "q"}))
        .await;
    assert_eq!(
        (status, body["error"]["code"].clone()),
        (429, json!("upstream_rate_limited"))
    );
    assert!(!body.to_string().contains(BRAVE_KEY));
    let (_, status) = gw.get("/admin/status").await;
    assert_eq!(status["web_search"], true);
    assert!(!status.to_string().contains(BRAVE_KEY));
    assert!(!gw.logs().contains(BRAVE_KEY));
}

#[tokio::test]
async fn absent_section_is_404_and_the_route_needs_the_bearer() {
    let upstream = Upstream::start().await;
    let (gw, _dir) = Gateway::standard(&upstream).await;
    let (status, body) = gw
        .post("/v1/tools/web_search", &json!({"query": "q"}))
        .await;
    assert_eq!(status, 404);
    assert_eq!(body["error"]["code"], "not_found");
    let res = gw
        .client
        .post(format!("{}/v1/tools/web_search", gw.url))
        .json(&json!({"query": "q"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 401);
}
