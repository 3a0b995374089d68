//! End-to-end fetches against a scripted loopback server reached through
//! `allow_host_address`: every content route, cap, compression, redirect and error.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use common::{Lookup, Reply, SITE, TestServer, parse_page};
use promptforge_core::tools::{Tool, ToolErrorKind};
use promptforge_webfetch::{FetchArgs, FetchConfig, WebFetch};

const ARTICLE: &str = r#"<!doctype html><html><head><title>Ownership in Rust</title>
<script>var tracking = "pixel";</script></head><body>
<nav><a href="/">Home</a> <a href="/blog">Blog</a> <a href="/about">About</a></nav>
<article><h1>Ownership in Rust</h1>
<p>Ownership is a set of rules that govern how a Rust program manages memory. All programs
have to manage the way they use a computer's memory while running. Some languages have
garbage collection that regularly looks for no-longer-used memory as the program runs.</p>
<p>In other languages, the programmer must explicitly allocate and free the memory. Rust
uses a third approach: memory is managed through a system of ownership with a set of rules
that the compiler checks. If any of the rules are violated, the program will not compile.</p>
</article><footer>Footer boilerplate, all rights reserved</footer></body></html>"#;

fn args(url: &str) -> String {
    serde_json::json!({ "url": url }).to_string()
}

async fn page(tool: &WebFetch, url: &str) -> (String, bool, String, String) {
    let out = tool.call(&args(url)).await.unwrap();
    assert!(!out.is_trusted(), "web content must be untrusted");
    parse_page(out.text())
}

async fn soft(tool: &WebFetch, url: &str) -> String {
    let out = tool.call(&args(url)).await.unwrap();
    assert!(!out.is_trusted());
    let text = out.text().to_owned();
    assert!(
        !text.starts_with("url:"),
        "expected a soft outcome, got a page: {text}"
    );
    text
}

#[tokio::test]
async fn html_goes_through_readability() {
    let server = TestServer::start(vec![("/post", Reply::html(ARTICLE))]).await;
    let (url, truncated, extraction, text) = page(&server.tool(), &server.url("/post")).await;
    assert_eq!(url, server.url("/post"));
    assert!(!truncated);
    assert_eq!(extraction, "readability");
    assert!(text.contains("Ownership is a set of rules"), "{text}");
    assert!(text.contains("# Ownership in Rust"), "{text}");
    assert!(
        !text.contains("Footer boilerplate") && !text.contains("tracking"),
        "{text}"
    );
}

/// An article with a captioned photo and a copyright line: furniture the default cleanup
/// drops and readability.js keeps.
const ILLUSTRATED: &str = r#"<!doctype html><html><head><title>Harbour reopens</title></head>
<body><article><h1>Harbour reopens</h1>
<p>The harbour reopened on Monday after a month of repairs to the breakwater, which the
winter storms had breached in two places. Fishing boats were the first to return, followed
by the ferry to the islands, which had been running from the next town along the coast.</p>
<figure><img src="/quay.jpg"><figcaption>Boats back at the quay on Monday. Photo: Jane
Doe</figcaption></figure>
<p>The council said the repairs came in under budget, and that a second phase, raising the
sea wall along the promenade, would start in the spring once the tourist season was over
and the contractors could close the road without disrupting the shops along the front.</p>
<p>Copyright 2026 Coast Gazette. All rights reserved.</p>
</article></body></html>"#;

#[tokio::test]
async fn article_cleanup_is_a_policy_the_deployment_can_turn_off() {
    let server = TestServer::start(vec![("/harbour", Reply::html(ILLUSTRATED))]).await;
    let url = server.url("/harbour");
    let (_, _, extraction, cleaned) = page(&server.tool(), &url).await;
    assert_eq!(extraction, "readability");
    assert!(cleaned.contains("second phase"), "{cleaned}");
    assert!(
        !cleaned.contains("Boats back at the quay") && !cleaned.contains("All rights reserved"),
        "{cleaned}"
    );
    let whole = server.tool_with(
        server.policy().article_cleanup(false).build().unwrap(),
        Lookup::site(),
    );
    let (_, _, extraction, full) = page(&whole, &url).await;
    assert_eq!(extraction, "readability");
    assert!(full.contains("second phase"), "{full}");
    assert!(
        full.contains("Boats back at the quay") && full.contains("All rights reserved"),
        "{full}"
    );
    // raw still means the whole page
    let out = whole
        .call(&serde_json::json!({ "url": url, "raw": true }).to_string())
        .await
        .unwrap();
    assert_eq!(parse_page(out.text()).2, "raw-html");
}

#[tokio::test]
async fn xhtml_is_html() {
    let server =
        TestServer::start(vec![("/x", Reply::typed("application/xhtml+xml", ARTICLE))]).await;
    let (_, _, extraction, text) = page(&server.tool(), &server.url("/x")).await;
    assert_eq!(extraction, "readability");
    assert!(text.contains("Ownership is a set of rules"));
}

#[tokio::test]
async fn short_article_falls_back_to_the_whole_page() {
    let html = "<html><body><h2>Pricing</h2><table><tr><th>Plan</th><th>Price</th></tr>\
                <tr><td>Pro</td><td>$10</td></tr></table></body></html>";
    let server = TestServer::start(vec![("/pricing", Reply::html(html))]).await;
    let (_, _, extraction, text) = page(&server.tool(), &server.url("/pricing")).await;
    assert_eq!(extraction, "raw-html");
    assert!(text.contains("Pro") && text.contains("$10"), "{text}");
}

#[tokio::test]
async fn raw_forces_the_whole_page_for_html_only() {
    let server = TestServer::start(vec![
        ("/post", Reply::html(ARTICLE)),
        ("/t", Reply::typed("text/plain", "just text")),
    ])
    .await;
    let tool = server.tool();
    let call = |path: &str| serde_json::json!({ "url": server.url(path), "raw": true }).to_string();
    let out = tool.call(&call("/post")).await.unwrap();
    let (_, _, extraction, text) = parse_page(out.text());
    assert_eq!(extraction, "raw-html");
    assert!(text.contains("Footer boilerplate"), "{text}");
    assert!(!text.contains("tracking"), "{text}");
    let out = tool.call(&call("/t")).await.unwrap();
    let (_, _, extraction, text) = parse_page(out.text());
    assert_eq!((extraction.as_str(), text.as_str()), ("plain", "just text"));
}

#[tokio::test]
async fn structured_types_are_verbatim() {
    let json = r#"{"a": [1, 2, {"b": "<p>not html</p>"}]}"#;
    let xml = "<?xml version=\"1.0\"?><feed><entry>x</entry></feed>";
    let server = TestServer::start(vec![
        ("/j", Reply::typed("application/json", json)),
        (
            "/lj",
            Reply::typed("application/ld+json; charset=utf-8", json),
        ),
        ("/x", Reply::typed("application/xml", xml)),
        ("/tx", Reply::typed("text/xml", xml)),
        ("/atom", Reply::typed("application/atom+xml", xml)),
    ])
    .await;
    let tool = server.tool();
    for (path, body) in [
        ("/j", json),
        ("/lj", json),
        ("/x", xml),
        ("/tx", xml),
        ("/atom", xml),
    ] {
        let (_, truncated, extraction, text) = page(&tool, &server.url(path)).await;
        assert_eq!((truncated, extraction.as_str()), (false, "plain"), "{path}");
        assert_eq!(text, body, "{path}");
    }
}

#[tokio::test]
async fn other_text_is_decoded_by_charset() {
    let server = TestServer::start(vec![
        ("/csv", Reply::typed("text/csv", "a,b\n1,2\n")),
        (
            "/latin",
            Reply::typed(
                "text/plain; charset=iso-8859-1",
                vec![0x63, 0x61, 0x66, 0xe9],
            ),
        ),
        ("/utf8", Reply::typed("text/plain", "naïve café ☕")),
    ])
    .await;
    let tool = server.tool();
    assert_eq!(page(&tool, &server.url("/csv")).await.3, "a,b\n1,2\n");
    assert_eq!(page(&tool, &server.url("/latin")).await.3, "caf\u{e9}");
    assert_eq!(page(&tool, &server.url("/utf8")).await.3, "naïve café ☕");
}

#[tokio::test]
async fn html_charset_comes_from_the_header_or_a_meta_tag() {
    let mut latin =
        b"<html><head><meta charset=\"iso-8859-1\"></head><body><table><tr><td>caf".to_vec();
    latin.extend_from_slice(&[0xe9]);
    latin.extend_from_slice(b"</td></tr></table></body></html>");
    let server = TestServer::start(vec![
        ("/meta", Reply::typed("text/html", latin.clone())),
        (
            "/header",
            Reply::typed("text/html; charset=windows-1252", latin),
        ),
    ])
    .await;
    let tool = server.tool();
    assert!(
        page(&tool, &server.url("/meta"))
            .await
            .3
            .contains("caf\u{e9}")
    );
    assert!(
        page(&tool, &server.url("/header"))
            .await
            .3
            .contains("caf\u{e9}")
    );
}

#[tokio::test]
async fn unsupported_and_missing_types_are_soft_refusals_naming_the_type() {
    let types = [
        "application/pdf",
        "image/png",
        "audio/mpeg",
        "video/mp4",
        "application/octet-stream",
    ];
    let mut routes: Vec<(String, Reply)> = types
        .iter()
        .enumerate()
        .map(|(i, t)| (format!("/{i}"), Reply::typed(t, vec![0u8, 1, 2, 3])))
        .collect();
    routes.push(("/none".into(), Reply::untyped("<html>no type</html>")));
    // The type decides before the body is read: this body would fail to read to the end.
    routes.push((
        "/pdf-unread".into(),
        Reply::ShortBody {
            headers: vec![("Content-Type".into(), "application/pdf".into())],
            declared: 10_000,
            body: b"%PDF-1.7".to_vec(),
        },
    ));
    let server = TestServer::start(
        routes
            .iter()
            .map(|(p, r)| (p.as_str(), r.clone()))
            .collect(),
    )
    .await;
    let tool = server.tool();
    for (i, t) in types.iter().enumerate() {
        let text = soft(&tool, &server.url(&format!("/{i}"))).await;
        assert!(text.contains(t), "{text}");
    }
    let text = soft(&tool, &server.url("/none")).await;
    assert!(text.contains("no Content-Type"), "{text}");
    let text = soft(&tool, &server.url("/pdf-unread")).await;
    assert!(text.contains("application/pdf is not supported"), "{text}");
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(data).unwrap();
    enc.finish().unwrap()
}

fn brotli(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    {
        let mut enc = brotli::CompressorWriter::new(&mut out, 4096, 5, 22);
        enc.write_all(data).unwrap();
    }
    out
}

#[tokio::test]
async fn gzip_and_brotli_are_decoded() {
    let server = TestServer::start(vec![
        (
            "/gz",
            Reply::typed("text/html", gzip(ARTICLE.as_bytes())).header("Content-Encoding", "gzip"),
        ),
        (
            "/br",
            Reply::typed("text/plain", brotli("brotli text".as_bytes()))
                .header("Content-Encoding", "br"),
        ),
    ])
    .await;
    let tool = server.tool();
    let (_, _, extraction, text) = page(&tool, &server.url("/gz")).await;
    assert_eq!(extraction, "readability");
    assert!(text.contains("Ownership is a set of rules"), "{text}");
    assert_eq!(page(&tool, &server.url("/br")).await.3, "brotli text");
    let heads = server.requests();
    assert!(
        heads[0]
            .to_ascii_lowercase()
            .contains("accept-encoding: gzip,br"),
        "{heads:?}"
    );
}

#[tokio::test]
async fn byte_cap_refuses_declared_lengths_and_aborts_streams() {
    let big_html = format!("<html><body>{}</body></html>", "<p>word</p>".repeat(200));
    let server = TestServer::start(vec![
        ("/declared", Reply::typed("text/html", big_html.clone())),
        (
            "/stream-html",
            Reply::Chunked {
                headers: vec![("Content-Type".into(), "text/html".into())],
                chunk: b"<p>stream</p>".to_vec(),
                count: 1000,
            },
        ),
        (
            "/stream-text",
            Reply::Chunked {
                headers: vec![("Content-Type".into(), "text/plain".into())],
                chunk: b"0123456789".to_vec(),
                count: 1000,
            },
        ),
        (
            "/bomb",
            Reply::typed("text/html", gzip(&vec![b' '; 200_000]))
                .header("Content-Encoding", "gzip"),
        ),
        ("/small", Reply::typed("text/plain", "0123456789")),
    ])
    .await;
    let config = server.policy().max_bytes(1000).build().unwrap();
    let tool = server.tool_with(config, Lookup::site());
    let text = soft(&tool, &server.url("/declared")).await;
    assert!(
        text.contains("too large") && text.contains("declared"),
        "{text}"
    );
    let text = soft(&tool, &server.url("/stream-html")).await;
    assert!(text.contains("too large: more than 1000 bytes"), "{text}");
    let text = soft(&tool, &server.url("/bomb")).await;
    assert!(text.contains("too large"), "{text}");
    // Flat text keeps the prefix and says it was truncated.
    let (_, truncated, extraction, text) = page(&tool, &server.url("/stream-text")).await;
    assert!(truncated);
    assert_eq!(extraction, "plain");
    assert_eq!(text, "0123456789".repeat(100));
    let (_, truncated, _, _) = page(&tool, &server.url("/small")).await;
    assert!(!truncated);
}

#[tokio::test]
async fn char_cap_cuts_on_boundaries_and_clamps_the_argument() {
    let text = "é".repeat(100);
    let server = TestServer::start(vec![("/t", Reply::typed("text/plain", text.clone()))]).await;
    let config = server.policy().max_chars(30).build().unwrap();
    let tool = server.tool_with(config, Lookup::site());
    let (_, truncated, _, got) = page(&tool, &server.url("/t")).await;
    assert!(truncated);
    assert_eq!(got, "é".repeat(30));
    let call = |n: u64| tool.fetch(FetchArgs::new(server.url("/t")).max_chars(n));
    let (_, truncated, _, got) = parse_page(call(7).await.unwrap().text());
    assert!(truncated);
    assert_eq!(got, "é".repeat(7));
    // A larger per-call value is clamped to the policy's ceiling.
    let (_, _, _, got) = parse_page(call(1_000_000).await.unwrap().text());
    assert_eq!(got.chars().count(), 30);
    // Exactly at the cap is not truncated.
    let roomy = server.tool_with(
        server.policy().max_chars(100).build().unwrap(),
        Lookup::site(),
    );
    let (_, truncated, _, got) = page(&roomy, &server.url("/t")).await;
    assert!(!truncated);
    assert_eq!(got, text);
}

#[tokio::test]
async fn default_char_cap_is_40000() {
    let server =
        TestServer::start(vec![("/t", Reply::typed("text/plain", "x".repeat(50_000)))]).await;
    let (_, truncated, _, got) = page(&server.tool(), &server.url("/t")).await;
    assert!(truncated);
    assert_eq!(got.len(), 40_000);
}

#[tokio::test]
async fn redirects_are_followed_and_the_final_url_reported() {
    let server = TestServer::start(vec![
        ("/a", Reply::redirect(301, "/b")),
        ("/b", Reply::redirect(302, "/c?page=2")),
        ("/c", Reply::redirect(307, "d")),
        ("/d", Reply::typed("text/plain", "landed")),
    ])
    .await;
    let (url, _, _, text) = page(&server.tool(), &server.url("/a#frag")).await;
    assert_eq!(url, server.url("/d"));
    assert_eq!(text, "landed");
    assert_eq!(server.paths(), ["/a", "/b", "/c?page=2", "/d"]);
}

#[tokio::test]
async fn hop_cap_is_enforced() {
    let server = TestServer::start(vec![
        ("/1", Reply::redirect(302, "/2")),
        ("/2", Reply::redirect(302, "/3")),
        ("/3", Reply::typed("text/plain", "three")),
    ])
    .await;
    let two = server.tool_with(
        server.policy().max_redirects(2).build().unwrap(),
        Lookup::site(),
    );
    assert_eq!(page(&two, &server.url("/1")).await.3, "three");
    let one = server.tool_with(
        server.policy().max_redirects(1).build().unwrap(),
        Lookup::site(),
    );
    let text = soft(&one, &server.url("/1")).await;
    assert!(
        text.contains("redirect refused") && text.contains("hop cap"),
        "{text}"
    );
    let none = server.tool_with(
        server.policy().max_redirects(0).build().unwrap(),
        Lookup::site(),
    );
    let text = soft(&none, &server.url("/1")).await;
    assert!(text.contains("more than 0 redirects"), "{text}");
}

#[tokio::test]
async fn redirect_loops_stop_at_the_cap() {
    let server = TestServer::start(vec![("/loop", Reply::redirect(302, "/loop"))]).await;
    let text = soft(&server.tool(), &server.url("/loop")).await;
    assert!(text.contains("hop cap"), "{text}");
    assert_eq!(server.paths().len(), 6);
}

#[tokio::test]
async fn redirect_without_location_and_bad_location_are_soft() {
    let server = TestServer::start(vec![
        (
            "/noloc",
            Reply::Full {
                status: 302,
                headers: vec![],
                body: vec![],
            },
        ),
        ("/bad", Reply::redirect(302, "http://[::1")),
    ])
    .await;
    let tool = server.tool();
    assert!(
        soft(&tool, &server.url("/noloc"))
            .await
            .contains("without a Location")
    );
    assert!(soft(&tool, &server.url("/bad")).await.contains("not a URL"));
}

#[tokio::test]
async fn http_error_statuses_are_soft() {
    let server = TestServer::start(vec![
        ("/gone", Reply::status(410)),
        ("/boom", Reply::status(500)),
        ("/nc", Reply::status(304)),
    ])
    .await;
    let tool = server.tool();
    let text = soft(&tool, &server.url("/missing?token=secret#frag")).await;
    assert!(text.contains("HTTP 404 Not Found"), "{text}");
    assert!(
        text.contains(&format!("{SITE}:{}/missing?[redacted]", server.port())),
        "{text}"
    );
    assert!(!text.contains("secret") && !text.contains("frag"), "{text}");
    assert!(
        soft(&tool, &server.url("/gone"))
            .await
            .contains("HTTP 410 Gone")
    );
    assert!(soft(&tool, &server.url("/boom")).await.contains("HTTP 500"));
    assert!(soft(&tool, &server.url("/nc")).await.contains("HTTP 304"));
}

#[tokio::test]
async fn timeouts_are_soft() {
    let server = TestServer::start(vec![("/hang", Reply::Hang)]).await;
    let config = server
        .policy()
        .timeout(Duration::from_millis(300))
        .build()
        .unwrap();
    let tool = server.tool_with(config, Lookup::site());
    let text = soft(&tool, &server.url("/hang?k=v")).await;
    assert!(text.contains("timed out"), "{text}");
    assert!(!text.contains("k=v"), "{text}");
}

#[tokio::test]
async fn dns_failures_are_soft_and_name_the_host() {
    let server = TestServer::start(vec![]).await;
    let config = server
        .policy()
        .allow_host_address("nowhere.test", "127.0.0.1".parse().unwrap())
        .build()
        .unwrap();
    let tool = server.tool_with(config, Lookup::site());
    let text = soft(&tool, &format!("http://nowhere.test:{}/", server.port())).await;
    assert!(
        text.contains("DNS lookup failed for host nowhere.test"),
        "{text}"
    );
}

#[tokio::test]
async fn connection_refused_is_soft() {
    let server = TestServer::start(vec![]).await;
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let config = server.policy().allow_ports([port]).build().unwrap();
    let tool = server.tool_with(config, Lookup::site());
    let text = soft(&tool, &format!("http://{SITE}:{port}/")).await;
    assert!(
        text.contains("could not connect to host site.test"),
        "{text}"
    );
    assert!(!text.contains("127.0.0.1"), "{text}");
}

#[tokio::test]
async fn body_read_failures_are_soft() {
    let server = TestServer::start(vec![(
        "/short",
        Reply::ShortBody {
            headers: vec![("Content-Type".into(), "text/plain".into())],
            declared: 500,
            body: b"only a little".to_vec(),
        },
    )])
    .await;
    let text = soft(&server.tool(), &server.url("/short")).await;
    assert!(text.contains("could not be read"), "{text}");
}

#[tokio::test]
async fn no_ambient_identity_reaches_the_server() {
    let server = TestServer::start(vec![
        (
            "/login",
            Reply::redirect(302, "/home").header("Set-Cookie", "session=abc; Path=/"),
        ),
        (
            "/home",
            Reply::typed("text/plain", "home").header("Set-Cookie", "other=def; Path=/"),
        ),
    ])
    .await;
    let tool = server.tool();
    assert_eq!(page(&tool, &server.url("/login")).await.3, "home");
    assert_eq!(page(&tool, &server.url("/login")).await.3, "home");
    let heads = server.requests();
    assert_eq!(heads.len(), 4);
    for head in &heads {
        let lower = head.to_ascii_lowercase();
        for banned in [
            "cookie:",
            "authorization:",
            "referer:",
            "proxy-authorization:",
        ] {
            assert!(!lower.contains(banned), "{banned} in {head}");
        }
        assert!(
            lower.contains("user-agent: promptforge-webfetch/"),
            "{head}"
        );
    }
}

#[tokio::test]
async fn user_agent_is_configurable() {
    let server = TestServer::start(vec![("/", Reply::typed("text/plain", "ok"))]).await;
    let config = server
        .policy()
        .user_agent("my-service/1.0")
        .build()
        .unwrap();
    page(&server.tool_with(config, Lookup::site()), &server.url("/")).await;
    assert!(server.requests()[0].contains("user-agent: my-service/1.0"));
}

#[tokio::test]
async fn the_system_resolver_reaches_localhost_only_through_the_pair() {
    let server = TestServer::start(vec![("/", Reply::typed("text/plain", "local"))]).await;
    let url = format!("http://localhost:{}/", server.port());
    let paired = FetchConfig::builder()
        .allow_http(true)
        .allow_ports([server.port()])
        .allow_host_address("localhost", "127.0.0.1".parse().unwrap())
        .build()
        .unwrap();
    let tool = WebFetch::try_with_config(paired).unwrap();
    assert_eq!(page(&tool, &url).await.3, "local");
    let unpaired = FetchConfig::builder()
        .allow_http(true)
        .allow_ports([server.port()])
        .build()
        .unwrap();
    let tool = WebFetch::try_with_config(unpaired).unwrap();
    let err = tool.call(&args(&url)).await.unwrap_err();
    assert_eq!(err.kind(), ToolErrorKind::Refused);
    assert!(err.message().contains("host localhost"), "{err}");
    assert!(!err.message().contains("127.0.0.1"), "{err}");
    assert_eq!(server.paths().len(), 1);
}

#[tokio::test]
async fn mixed_answers_connect_to_the_allowed_address() {
    let server = TestServer::start(vec![("/", Reply::typed("text/plain", "mixed ok"))]).await;
    let lookup = Lookup::default().with(SITE, &["10.0.0.1", "169.254.169.254", "127.0.0.1"]);
    let tool = server.tool_with(server.policy().build().unwrap(), lookup);
    assert_eq!(page(&tool, &server.url("/")).await.3, "mixed ok");
}

#[tokio::test]
async fn every_hop_and_every_call_resolves_afresh() {
    let server = TestServer::start(vec![
        ("/a", Reply::redirect(302, "/b")),
        ("/b", Reply::typed("text/plain", "b")),
    ])
    .await;
    let lookup = Lookup::site();
    let tool =
        WebFetch::try_with_lookup(server.policy().build().unwrap(), Arc::new(lookup.clone()))
            .unwrap();
    page(&tool, &server.url("/a")).await;
    page(&tool, &server.url("/b")).await;
    assert_eq!(lookup.count(SITE), 3);
}

#[tokio::test]
async fn unpaired_hosts_resolving_inward_are_hard_refusals() {
    let server = TestServer::start(vec![("/", Reply::typed("text/plain", "secret"))]).await;
    let lookup = Lookup::site().with("inward.test", &["127.0.0.1"]);
    let tool = server.tool_with(server.policy().build().unwrap(), lookup);
    let err = tool
        .call(&args(&format!(
            "http://inward.test:{}/?q=secret",
            server.port()
        )))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ToolErrorKind::Refused);
    assert_eq!(
        err.message(),
        "web_fetch refused: host inward.test resolves only to blocked addresses"
    );
    assert!(server.paths().is_empty());
}
