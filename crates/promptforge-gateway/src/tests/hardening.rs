//! Issue #12, the gateway half: no client, upstream or file can hang the gateway, exhaust
//! its memory or end a request without a clear error. Every wait is bounded; limits are
//! configured small so the tests run fast; nothing asserts a timing.

use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::harness::*;

/// Longest any single wait in these tests may take before the test fails.
const BOUND: Duration = Duration::from_secs(20);

fn chat(model: &str, stream: bool) -> Value {
    json!({"model": model, "messages": [{"role": "user", "content": "hi"}], "stream": stream})
}

/// A client whose every request fails instead of hanging.
fn bounded_client() -> reqwest::Client {
    reqwest::Client::builder().timeout(BOUND).build().unwrap()
}

/// Posts and returns (status, body as JSON or text), bounded.
async fn post(gw: &Gateway, path: &str, body: &Value) -> (u16, Value) {
    let res = bounded_client()
        .post(format!("{}{path}", gw.url))
        .bearer_auth(KEY)
        .json(body)
        .send()
        .await
        .expect("the gateway did not answer in time");
    let status = res.status().as_u16();
    let text = res.text().await.expect("the body did not end in time");
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

/// Reads a streaming answer to its end (bounded); returns (status, data payloads).
async fn stream_events(gw: &Gateway, body: &Value) -> (u16, Vec<String>) {
    let (status, text) = post_text(gw, body).await;
    let events = text
        .split("\n\n")
        .filter(|e| !e.is_empty())
        .map(|e| e.strip_prefix("data: ").unwrap_or(e).to_owned())
        .collect();
    (status, events)
}

async fn post_text(gw: &Gateway, body: &Value) -> (u16, String) {
    let res = bounded_client()
        .post(format!("{}/v1/chat/completions", gw.url))
        .bearer_auth(KEY)
        .json(body)
        .send()
        .await
        .expect("the gateway did not answer in time");
    let status = res.status().as_u16();
    (
        status,
        res.text().await.expect("the stream did not end in time"),
    )
}

async fn health_ok(gw: &Gateway) -> bool {
    matches!(
        bounded_client().get(format!("{}/health", gw.url)).send().await,
        Ok(res) if res.status() == 200
    )
}

/// The error code of a JSON envelope (body or event).
fn code(value: &Value) -> &str {
    value["error"]["code"].as_str().unwrap_or("<none>")
}

/// Writes `bytes` on a fresh connection, then reads until the gateway closes it
/// (bounded); returns what was read.
async fn raw_exchange(gw: &Gateway, bytes: &[u8]) -> String {
    let mut socket = TcpStream::connect(gw.addr()).await.unwrap();
    // The gateway may answer and close before all bytes are written.
    let _ = socket.write_all(bytes).await;
    read_to_close(&mut socket).await
}

async fn read_to_close(socket: &mut TcpStream) -> String {
    let mut out = Vec::new();
    let read = tokio::time::timeout(BOUND, async {
        let mut buf = [0u8; 8192];
        loop {
            match socket.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => out.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await;
    assert!(
        read.is_ok(),
        "the gateway kept the connection open: {}",
        String::from_utf8_lossy(&out)
    );
    String::from_utf8_lossy(&out).into_owned()
}

/// The JSON body of a raw HTTP response.
fn raw_body(response: &str) -> Value {
    let body = response.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    serde_json::from_str(body).unwrap_or(Value::Null)
}

// ---- finding 9: stream first-byte and idle timeouts ------------------------------------

#[tokio::test]
async fn a_stream_whose_upstream_never_answers_gets_an_envelope() {
    let upstream = Upstream::start().await;
    upstream.script("up-chat", Reply::Never);
    let (gw, _dir) =
        Gateway::with_limits(&upstream, "", "stream_first_byte_timeout = \"300ms\"").await;
    let (status, body) = post(&gw, "/v1/chat/completions", &chat("reasoning-large", true)).await;
    assert_eq!(status, 504, "{body}");
    assert_eq!(code(&body), "upstream_timeout", "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("stream_first_byte_timeout"), "{message}");
    // The queue slot and the upstream request are released.
    assert!(upstream.until(|u| u.streams_dropped() >= 1).await);
    assert!(health_ok(&gw).await);
}

#[tokio::test]
async fn a_stream_that_goes_silent_ends_with_an_error_event() {
    let upstream = Upstream::start().await;
    upstream.script(
        "up-chat",
        Reply::Stream(vec![Part::Data(chunk("up-chat", "Hel")), Part::Hang]),
    );
    let (gw, _dir) = Gateway::with_limits(&upstream, "", "stream_idle_timeout = \"300ms\"").await;
    let (status, events) = stream_events(&gw, &chat("reasoning-large", true)).await;
    assert_eq!(status, 200);
    assert_eq!(events.len(), 2, "{events:?}");
    let first: Value = serde_json::from_str(&events[0]).unwrap();
    assert_eq!(first["choices"][0]["delta"]["content"], "Hel");
    assert_error_event(&events[1], "upstream_timeout", "stream_idle_timeout");
    assert!(upstream.until(|u| u.streams_dropped() >= 1).await);
}

#[tokio::test]
async fn a_stream_with_headers_but_no_body_ends_with_an_error_event() {
    let upstream = Upstream::start().await;
    upstream.script("up-chat", Reply::Stream(vec![Part::Hang]));
    let (gw, _dir) = Gateway::with_limits(&upstream, "", "stream_idle_timeout = \"300ms\"").await;
    let (status, events) = stream_events(&gw, &chat("reasoning-large", true)).await;
    assert_eq!(status, 200);
    assert_eq!(events.len(), 1, "{events:?}");
    let only: Value = serde_json::from_str(&events[0]).unwrap();
    assert_eq!(code(&only), "upstream_timeout", "{only}");
}

// ---- finding 10: connection timeouts and cap --------------------------------------------

#[tokio::test]
async fn a_half_sent_request_head_is_closed_after_the_header_read_timeout() {
    let upstream = Upstream::start().await;
    let (gw, _dir) = Gateway::with_limits(&upstream, "header_read_timeout = \"300ms\"", "").await;
    let mut socket = TcpStream::connect(gw.addr()).await.unwrap();
    socket
        .write_all(b"GET /health HTTP/1.1\r\nHost: x\r\n")
        .await
        .unwrap();
    let read = read_to_close(&mut socket).await;
    assert!(!read.contains("serving"), "{read}");
    // A connection that never sends a byte is closed too.
    let mut silent = TcpStream::connect(gw.addr()).await.unwrap();
    read_to_close(&mut silent).await;
    assert!(health_ok(&gw).await);
}

#[tokio::test]
async fn a_request_body_that_stops_arriving_gets_an_envelope() {
    let upstream = Upstream::start().await;
    let (gw, _dir) = Gateway::with_limits(&upstream, "header_read_timeout = \"300ms\"", "").await;
    let head = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{{\"model\""
    );
    let answer = raw_exchange(&gw, head.as_bytes()).await;
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    let body = raw_body(&answer);
    assert_eq!(code(&body), "invalid_request", "{answer}");
    assert!(upstream.recorded().is_empty());
}

#[tokio::test]
async fn a_client_that_stops_reading_a_stream_is_dropped_with_its_upstream() {
    let upstream = Upstream::start().await;
    let event = format!("data: {}\n\n", chunk("up-chat", &"x".repeat(1000)));
    upstream.script("up-chat", Reply::Stream(vec![Part::Endless(event)]));
    let (gw, _dir) = Gateway::with_limits(&upstream, "write_timeout = \"300ms\"", "").await;
    let body = serde_json::to_string(&chat("reasoning-large", true)).unwrap();
    let request = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let mut socket = TcpStream::connect(gw.addr()).await.unwrap();
    socket.write_all(request.as_bytes()).await.unwrap();
    // Never read: once the socket buffers are full the gateway's writes stall, and the
    // stall ends the connection, the relay and the upstream request.
    let dropped = upstream.until(|u| u.streams_dropped() >= 1).await;
    assert!(dropped, "the stalled stream kept its upstream open");
    drop(socket);
    assert!(health_ok(&gw).await);
}

#[tokio::test]
async fn an_idle_kept_alive_connection_is_closed() {
    let upstream = Upstream::start().await;
    let (gw, _dir) = Gateway::with_limits(&upstream, "keep_alive_timeout = \"300ms\"", "").await;
    let mut socket = TcpStream::connect(gw.addr()).await.unwrap();
    socket
        .write_all(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    // The answer comes, then (no further request) the connection is closed.
    let read = read_to_close(&mut socket).await;
    assert!(read.starts_with("HTTP/1.1 200"), "{read}");
    assert!(read.contains("serving"), "{read}");
}

#[tokio::test]
async fn a_long_request_is_not_cut_by_the_connection_timeouts() {
    let upstream = Upstream::start().await;
    upstream.script(
        "up-fast",
        Reply::Delayed(
            1500,
            Box::new(Reply::Json(200, chat_reply("up-fast", "late"))),
        ),
    );
    let (gw, _dir) = Gateway::with_limits(
        &upstream,
        "header_read_timeout = \"200ms\"\nkeep_alive_timeout = \"200ms\"",
        "",
    )
    .await;
    let (status, body) = post(&gw, "/v1/chat/completions", &chat("fast-draft", false)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["choices"][0]["message"]["content"], "late");
}

#[tokio::test]
async fn connections_over_the_cap_get_a_503_envelope_and_health_recovers() {
    let upstream = Upstream::start().await;
    let (gw, _dir) = Gateway::with_limits(
        &upstream,
        "max_connections = 4\nheader_read_timeout = \"60s\"",
        "",
    )
    .await;
    let mut idle = Vec::new();
    for _ in 0..4 {
        idle.push(TcpStream::connect(gw.addr()).await.unwrap());
    }
    // The four are accepted before the next one is: wait until the gateway refuses.
    let refused = eventually_async(|| async {
        let res = bounded_client()
            .get(format!("{}/health", gw.url))
            .send()
            .await;
        match res {
            Ok(res) if res.status() == 503 => {
                // The connection layer's answers carry the overhead header too.
                let timed = res.headers().contains_key("x-promptforge-overhead-ms");
                let body: Value = res.json().await.unwrap_or(Value::Null);
                timed && code(&body) == "too_many_connections"
            }
            _ => false,
        }
    })
    .await;
    assert!(
        refused,
        "a fifth connection was not refused with an envelope"
    );
    drop(idle);
    assert!(eventually_async(|| health_ok(&gw)).await);
}

// ---- finding 11: non-streaming body cap --------------------------------------------------

#[tokio::test]
async fn an_endless_upstream_body_is_a_502_without_reading_it_all() {
    let upstream = Upstream::start().await;
    upstream.script(
        "up-fast",
        Reply::EndlessBody("{\"choices\": [".into(), "\"xxxxxxxxxxxxxxxx\",".repeat(64)),
    );
    let (gw, _dir) = Gateway::with_limits(&upstream, "", "max_response_bytes = 65536").await;
    let (status, body) = post(&gw, "/v1/chat/completions", &chat("fast-draft", false)).await;
    assert_eq!(status, 502, "{body}");
    assert_eq!(code(&body), "upstream_protocol", "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("max_response_bytes")
    );
    // The upstream body was abandoned, not drained.
    assert!(upstream.until(|u| u.streams_dropped() >= 1).await);
    assert!(health_ok(&gw).await);
}

#[tokio::test]
async fn a_body_just_over_the_cap_is_refused_on_every_buffered_route() {
    let upstream = Upstream::start().await;
    let padding = "p".repeat(4096);
    upstream.script(
        "up-fast",
        Reply::Json(200, {
            let mut reply = chat_reply("up-fast", "hi");
            reply["padding"] = json!(padding);
            reply
        }),
    );
    upstream.script(
        "up-embed",
        Reply::Json(
            200,
            json!({"object": "list", "data": [{"object": "embedding", "index": 0, "embedding": [0.1]}], "padding": padding}),
        ),
    );
    let (gw, _dir) = Gateway::with_limits(&upstream, "", "max_response_bytes = 2048").await;
    let (status, body) = post(&gw, "/v1/chat/completions", &chat("fast-draft", false)).await;
    assert_eq!((status, code(&body)), (502, "upstream_protocol"), "{body}");
    let (status, body) = post(
        &gw,
        "/v1/embeddings",
        &json!({"model": "embed-large", "input": "x"}),
    )
    .await;
    assert_eq!((status, code(&body)), (502, "upstream_protocol"), "{body}");
    // Under the cap still works.
    let (status, _) = post(&gw, "/v1/chat/completions", &chat("reasoning-large", false)).await;
    assert_eq!(status, 200);
}

// ---- finding 12: SSE line and event caps -------------------------------------------------

#[tokio::test]
async fn an_endless_sse_line_ends_the_stream_with_an_error_event() {
    let upstream = Upstream::start().await;
    upstream.script(
        "up-chat",
        Reply::Stream(vec![
            Part::Data(chunk("up-chat", "Hel")),
            Part::Raw("data: ".into()),
            Part::Endless("x".repeat(1024)),
        ]),
    );
    let (gw, _dir) = Gateway::with_limits(&upstream, "", "max_stream_event_bytes = 65536").await;
    let (status, events) = stream_events(&gw, &chat("reasoning-large", true)).await;
    assert_eq!(status, 200);
    assert_eq!(events.len(), 2, "{events:?}");
    assert_error_event(&events[1], "upstream_protocol", "max_stream_event_bytes");
    assert!(upstream.until(|u| u.streams_dropped() >= 1).await);
}

#[tokio::test]
async fn an_endless_event_of_short_data_lines_is_capped_too() {
    let upstream = Upstream::start().await;
    upstream.script(
        "up-chat",
        Reply::Stream(vec![Part::Endless("data: 0123456789abcdef\n".into())]),
    );
    let (gw, _dir) = Gateway::with_limits(&upstream, "", "max_stream_event_bytes = 65536").await;
    let (status, events) = stream_events(&gw, &chat("reasoning-large", true)).await;
    assert_eq!(status, 200);
    assert_eq!(events.len(), 1, "{events:?}");
    let last: Value = serde_json::from_str(&events[0]).unwrap();
    assert_eq!(code(&last), "upstream_protocol", "{last}");
}

// ---- finding 13: includes loaded once, a cap on the file count ---------------------------

/// `levels` levels of three files; each file includes all three of the next level.
fn diamond(dir: &ConfigDir, levels: usize) -> String {
    for level in 0..levels {
        for j in 0..3 {
            let includes: Vec<String> = if level + 1 < levels {
                (0..3)
                    .map(|k| format!("\"l{}_{k}.toml\"", level + 1))
                    .collect()
            } else {
                vec!["\"../gateway.toml\"".into()]
            };
            dir.write(
                &format!("inc/l{level}_{j}.toml"),
                &format!("include = [{}]\n", includes.join(", ")),
            );
        }
    }
    "include = [\"../inc/l0_0.toml\", \"../inc/l0_1.toml\", \"../inc/l0_2.toml\"]\n".to_owned()
}

#[tokio::test]
async fn a_diamond_of_includes_loads_each_file_once() {
    let upstream = Upstream::start().await;
    let dir = ConfigDir::new();
    dir.write("gateway.toml", &standard_boot(&upstream.url));
    let profile = diamond(&dir, 14);
    dir.write("profiles/main.toml", &profile);
    dir.write("profiles/other.toml", &profile);
    let gw = Gateway::start(&dir.boot(), "main", &base_env()).await;
    let (status, status_body) = gw.get("/admin/status").await;
    assert_eq!(status, 200);
    // 14 levels of 3, the boot file and the profile: each listed once.
    assert_eq!(
        status_body["include_chain"].as_array().unwrap().len(),
        14 * 3 + 2
    );
    // The same through a profile switch (bounded).
    let (status, body) = post(&gw, "/admin/switch-profile", &json!({"name": "other"})).await;
    assert_eq!(status, 200, "{body}");
}

#[tokio::test]
async fn too_many_distinct_include_files_is_an_error_naming_the_limit() {
    let upstream = Upstream::start().await;
    let dir = ConfigDir::new();
    dir.write("gateway.toml", &standard_boot(&upstream.url));
    dir.write("profiles/main.toml", MAIN_PROFILE);
    let includes: Vec<String> = (0..300)
        .map(|i| {
            dir.write(&format!("many/f{i}.toml"), "");
            format!("\"../many/f{i}.toml\"")
        })
        .collect();
    let big = format!("include = [\"../gateway.toml\", {}]\n", includes.join(", "));
    dir.write("profiles/big.toml", &big);
    let stderr = boot_failure(&dir, "big").await;
    assert!(stderr.contains("more than 256 files"), "{stderr}");
    let gw = Gateway::start(&dir.boot(), "main", &base_env()).await;
    let (status, body) = post(&gw, "/admin/switch-profile", &json!({"name": "big"})).await;
    assert_eq!((status, code(&body)), (400, "profile_invalid"), "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("more than 256 files")
    );
}

// ---- finding 15: a 100,000-model catalog boots -------------------------------------------

#[tokio::test]
async fn a_catalog_of_100000_models_boots_and_routes() {
    let upstream = Upstream::start().await;
    let dir = ConfigDir::new();
    let mut boot = standard_boot(&upstream.url);
    for i in 0..100_000 {
        boot.push_str(&format!(
            "[[model]]\nname = \"m{i}\"\ndescription = \"d\"\ncontext = 1000\nupstream = \"up-m{i}\"\nendpoints = [\"up\"]\n"
        ));
    }
    dir.write("gateway.toml", &boot);
    // The allowlist path, which filters the catalog, is linear too.
    let names: Vec<String> = (0..100_000).map(|i| format!("\"m{i}\"")).collect();
    dir.write(
        "profiles/main.toml",
        &format!(
            "include = [\"../gateway.toml\"]\nmodels = [{}]\n",
            names.join(", ")
        ),
    );
    // `start` fails the test when the listening line does not come within its bound.
    let gw = Gateway::start(&dir.boot(), "main", &base_env()).await;
    let (status, body) = post(&gw, "/v1/chat/completions", &chat("m99999", false)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["model"], "m99999");
    assert_eq!(upstream.last().body["model"], "up-m99999");
}

// ---- finding 20: messages and envelopes --------------------------------------------------

async fn include_failure(target: &str) -> String {
    let dir = ConfigDir::new();
    dir.write("gateway.toml", &standard_boot("http://127.0.0.1:1"));
    dir.write(
        "profiles/main.toml",
        &format!("include = [\"../gateway.toml\", \"{target}\"]\n"),
    );
    std::fs::create_dir_all(dir.path().join("adir")).unwrap();
    boot_failure(&dir, "main").await
}

#[tokio::test]
async fn a_directory_or_a_device_as_include_says_what_it_is() {
    let stderr = include_failure("../adir").await;
    assert!(stderr.contains("is a directory"), "{stderr}");
    assert!(!stderr.contains("does not exist"), "{stderr}");
    let stderr = include_failure("/dev/zero").await;
    assert!(stderr.contains("is not a regular file"), "{stderr}");
    let stderr = include_failure("../missing.toml").await;
    assert!(stderr.contains("does not exist"), "{stderr}");
}

#[tokio::test]
async fn an_include_of_a_foreign_file_does_not_echo_its_content() {
    let dir = ConfigDir::new();
    let secret = "root:x:0:0:root:/root:/bin/bash\ndaemon:x:1:1::/usr/sbin:/usr/sbin/nologin\n";
    dir.write("passwd", secret);
    dir.write("gateway.toml", &standard_boot("http://127.0.0.1:1"));
    dir.write(
        "profiles/main.toml",
        "include = [\"../gateway.toml\", \"../passwd\"]\n",
    );
    dir.write(
        "profiles/other.toml",
        "include = [\"../gateway.toml\", \"/etc/passwd\"]\n",
    );
    let stderr = boot_failure(&dir, "main").await;
    assert!(stderr.contains("line 1"), "{stderr}");
    assert!(!stderr.contains("/bin/bash"), "{stderr}");
    assert!(!stderr.contains("root:x"), "{stderr}");
    // Over HTTP, through a profile switch, with the real /etc/passwd.
    dir.write("profiles/ok.toml", MAIN_PROFILE);
    let gw = Gateway::start(&dir.boot(), "ok", &base_env()).await;
    let (status, body) = post(&gw, "/admin/switch-profile", &json!({"name": "other"})).await;
    assert_eq!(status, 400, "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(!message.contains("root:"), "{message}");
    assert!(!message.contains("/bin/"), "{message}");
}

#[tokio::test]
async fn switch_profile_errors_over_http_do_not_mention_the_command_line() {
    let upstream = Upstream::start().await;
    let (gw, dir) = Gateway::standard(&upstream).await;
    for name in ["../main", "a/b", "..", ""] {
        let (status, body) = post(&gw, "/admin/switch-profile", &json!({"name": name})).await;
        assert_eq!(
            (status, code(&body)),
            (400, "invalid_profile_name"),
            "{body}"
        );
        let message = body["error"]["message"].as_str().unwrap();
        assert!(!message.contains("--profile"), "{message}");
        assert!(message.contains("single path component"), "{message}");
    }
    // On the command line the flag is still named.
    let stderr = boot_failure(&dir, "../main").await;
    assert!(stderr.contains("--profile"), "{stderr}");
}

#[tokio::test]
async fn protocol_level_errors_carry_the_envelope() {
    let upstream = Upstream::start().await;
    let (gw, _dir) = Gateway::standard(&upstream).await;
    // 405 on the unauthenticated route.
    let res = bounded_client()
        .post(format!("{}/health", gw.url))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 405);
    let body: Value = res.json().await.unwrap();
    assert_eq!(code(&body), "method_not_allowed", "{body}");
    // 431: a head over max_header_bytes (default 64 KiB).
    let mut big = b"GET /health HTTP/1.1\r\nHost: x\r\nX-Big: ".to_vec();
    big.extend(std::iter::repeat_n(b'a', 200_000));
    big.extend_from_slice(b"\r\n\r\n");
    let answer = raw_exchange(&gw, &big).await;
    assert!(answer.starts_with("HTTP/1.1 431"), "{answer}");
    assert_eq!(code(&raw_body(&answer)), "headers_too_large", "{answer}");
    assert!(
        answer.contains("\r\nx-promptforge-overhead-ms: "),
        "{answer}"
    );
    // 400: a header line without a colon, and a request line that is not HTTP.
    for bad in [
        &b"GET /health HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n"[..],
        &b"GARBAGE\r\n\r\n"[..],
    ] {
        let answer = raw_exchange(&gw, bad).await;
        assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
        assert_eq!(code(&raw_body(&answer)), "invalid_request", "{answer}");
        assert!(
            answer.contains("content-type: application/json"),
            "{answer}"
        );
        assert!(
            answer.contains("\r\nx-promptforge-overhead-ms: "),
            "{answer}"
        );
    }
    assert!(health_ok(&gw).await);
}

#[tokio::test]
async fn a_declared_huge_body_is_refused_at_once() {
    let upstream = Upstream::start().await;
    let (gw, _dir) = Gateway::standard(&upstream).await;
    let head = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\nContent-Type: application/json\r\nContent-Length: 10000000000\r\n\r\n{{\"model\""
    );
    let answer = raw_exchange(&gw, head.as_bytes()).await;
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert_eq!(code(&raw_body(&answer)), "payload_too_large", "{answer}");
    assert!(upstream.recorded().is_empty());
}

#[tokio::test]
async fn a_key_with_a_newline_is_a_clear_boot_error() {
    for (var, expect_key) in [
        ("GW_UPSTREAM_KEY", "endpoint[up].api_key"),
        ("GW_TEST_KEY", "server.api_key"),
    ] {
        let dir = ConfigDir::new();
        dir.write("gateway.toml", &standard_boot("http://127.0.0.1:1"));
        dir.write("profiles/main.toml", MAIN_PROFILE);
        let mut env = base_env();
        for (name, value) in &mut env {
            if name == var {
                value.push('\n');
            }
        }
        let stderr = boot_error(&dir.boot(), "main", &env).await;
        assert!(stderr.contains(expect_key), "{stderr}");
        assert!(stderr.contains("contains a newline"), "{stderr}");
        assert!(!stderr.contains("failed to parse header value"), "{stderr}");
    }
}

// ---- the new limits are validated like every other key -----------------------------------

#[tokio::test]
async fn out_of_range_limits_are_boot_errors_naming_the_key() {
    for (server, endpoint, key) in [
        ("max_connections = 0", "", "server.max_connections"),
        ("max_header_bytes = 100", "", "server.max_header_bytes"),
        (
            "keep_alive_timeout = \"0s\"",
            "",
            "server.keep_alive_timeout",
        ),
        ("write_timeout = \"soon\"", "", "server.write_timeout"),
        (
            "",
            "max_response_bytes = 0",
            "endpoint[up].max_response_bytes",
        ),
        (
            "",
            "max_stream_event_bytes = -3",
            "endpoint[up].max_stream_event_bytes",
        ),
        (
            "",
            "stream_idle_timeout = \"0s\"",
            "endpoint[up].stream_idle_timeout",
        ),
        (
            "",
            "stream_first_byte_timeout = \"x\"",
            "endpoint[up].stream_first_byte_timeout",
        ),
    ] {
        let dir = ConfigDir::new();
        dir.write(
            "gateway.toml",
            &boot_with("http://127.0.0.1:1", server, endpoint),
        );
        dir.write("profiles/main.toml", MAIN_PROFILE);
        let stderr = boot_failure(&dir, "main").await;
        assert!(stderr.contains(key), "{key}: {stderr}");
    }
}

#[tokio::test]
async fn a_profile_cannot_change_the_connection_limits() {
    let dir = ConfigDir::new();
    dir.write("gateway.toml", &standard_boot("http://127.0.0.1:1"));
    dir.write(
        "profiles/main.toml",
        "include = [\"../gateway.toml\"]\n[server]\nmax_connections = 7\n",
    );
    let stderr = boot_failure(&dir, "main").await;
    assert!(stderr.contains("connection limits"), "{stderr}");
    assert!(stderr.contains("the boot file owns [server]"), "{stderr}");
}

/// Asserts that `event` is an error event with `code` whose message names `key`.
fn assert_error_event(event: &str, code_: &str, key: &str) {
    let event: Value = serde_json::from_str(event).unwrap();
    assert_eq!(code(&event), code_, "{event}");
    assert!(
        event["error"]["message"].as_str().unwrap().contains(key),
        "{event}"
    );
}
