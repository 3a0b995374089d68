//! The table-driven SSRF suite: every payload must fail closed.
//!
//! A canary loopback server stands in for the internal network. The policy is as open as a
//! deployment can make it (http allowed, IP literals allowed, the canary's port allowed,
//! only `site.test` paired with loopback), and each payload must end in a hard error or a
//! soft refusal, never in a page, and the canary's `/secret` must never be requested.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;

use common::{Lookup, Reply, SITE, TestServer};
use promptforge_core::tools::Tool;
use promptforge_webfetch::{FetchConfig, WebFetch};

/// How a payload must fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fails {
    /// A hard `ToolError`.
    Hard,
    /// Soft text (a refusal the model reads).
    Soft,
}
use Fails::{Hard, Soft};

/// The scripted DNS: names that resolve into blocked space, rebinding and mixed answers.
fn lookup() -> Lookup {
    Lookup::site()
        .with("internal.test", &["10.0.0.5"])
        .with("meta.test", &["169.254.169.254"])
        .with("loop.test", &["127.0.0.1"])
        .with("v6loop.test", &["::1"])
        .with("mapped.test", &["::ffff:127.0.0.1"])
        .with("compat.test", &["::127.0.0.1"])
        .with("nat64.test", &["64:ff9b::7f00:1"])
        .with("ula.test", &["fd00::1"])
        .with("linklocal6.test", &["fe80::1"])
        .with("cgnat.test", &["100.64.0.1"])
        .with("zero.test", &["0.0.0.0"])
        .with(
            "multi-private.test",
            &["10.0.0.1", "192.168.1.1", "172.16.0.1", "::1"],
        )
        .with("teredo.test", &["2001:0:4136:e378:8000:63bf:3fff:fdd2"])
        .with("sixtofour.test", &["2002:7f00:1::1"])
        .with("bench.test", &["198.18.0.1"])
        .with("doc.test", &["192.0.2.1", "2001:db8::1"])
        .with("mcast.test", &["224.0.0.1", "ff02::1"])
        .with("broadcast.test", &["255.255.255.255"])
        .with("sitelocal.test", &["fec0::1"])
        // Answers loopback (allowed for this pair) first, then private: rebinding.
        .with("rebind.test", &["127.0.0.1"])
        .then("rebind.test", &["10.0.0.1"])
}

fn policy(port: u16) -> FetchConfig {
    FetchConfig::builder()
        .allow_http(true)
        .allow_ip_literals(true)
        .allow_ports([80, 443, 8080, port])
        .allow_host_address(SITE, "127.0.0.1".parse().unwrap())
        .allow_host_address("rebind.test", "127.0.0.1".parse().unwrap())
        .deny_cidr("93.184.0.0/16")
        .build()
        .unwrap()
}

/// Direct payloads: `{p}` is the canary's port.
const DIRECT: &[(&str, Fails)] = &[
    // Obfuscated IPv4 loopback literals.
    ("http://127.0.0.1:{p}/secret", Hard),
    ("http://0177.0.0.1:{p}/secret", Hard),
    ("http://2130706433:{p}/secret", Hard),
    ("http://127.1:{p}/secret", Hard),
    ("http://127.0.1:{p}/secret", Hard),
    ("http://0x7f.1:{p}/secret", Hard),
    ("http://0x7F.0.0.1:{p}/secret", Hard),
    ("http://0x7f000001:{p}/secret", Hard),
    ("http://017700000001:{p}/secret", Hard),
    ("http://127.000.000.001:{p}/secret", Hard),
    ("http://127.0.0.1.:{p}/secret", Hard),
    ("http://%31%32%37.0.0.1:{p}/secret", Hard),
    ("http://127.0.0.255:{p}/secret", Hard),
    ("http://0:{p}/secret", Hard),
    ("http://0.0.0.0:{p}/secret", Hard),
    // IPv6 forms of loopback and of embedded IPv4 loopback.
    ("http://[::1]:{p}/secret", Hard),
    ("http://[0:0:0:0:0:0:0:1]:{p}/secret", Hard),
    ("http://[::]:{p}/secret", Hard),
    ("http://[::ffff:127.0.0.1]:{p}/secret", Hard),
    ("http://[::ffff:7f00:1]:{p}/secret", Hard),
    ("http://[0:0:0:0:0:ffff:127.0.0.1]:{p}/secret", Hard),
    ("http://[::127.0.0.1]:{p}/secret", Hard),
    ("http://[::ffff:0:127.0.0.1]:{p}/secret", Hard),
    ("http://[64:ff9b::127.0.0.1]:{p}/secret", Hard),
    // Other blocked literals: cloud metadata, private, CGNAT, special-use.
    ("http://169.254.169.254/latest/meta-data/", Hard),
    ("http://2852039166/latest/meta-data/", Hard),
    ("http://0xa9fea9fe/latest/meta-data/", Hard),
    ("http://0251.0376.0251.0376/", Hard),
    ("http://[::ffff:169.254.169.254]/", Hard),
    ("http://[::ffff:a9fe:a9fe]/", Hard),
    ("http://[fd00:ec2::254]/", Hard),
    ("http://10.0.0.1/", Hard),
    ("http://172.16.0.1/", Hard),
    ("http://192.168.0.1/", Hard),
    ("http://100.64.0.1/", Hard),
    ("http://192.0.0.1/", Hard),
    ("http://192.0.2.1/", Hard),
    ("http://198.18.0.1/", Hard),
    ("http://198.51.100.1/", Hard),
    ("http://203.0.113.1/", Hard),
    ("http://224.0.0.1/", Hard),
    ("http://240.0.0.1/", Hard),
    ("http://255.255.255.255/", Hard),
    ("http://93.184.216.34/", Hard),
    ("http://[fe80::1]/", Hard),
    ("http://[fc00::1]/", Hard),
    ("http://[fec0::1]/", Hard),
    ("http://[ff02::1]/", Hard),
    ("http://[2001:db8::1]/", Hard),
    ("http://[2002:7f00:1::1]/", Hard),
    ("http://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/", Hard),
    ("http://[64:ff9b::a9fe:a9fe]/", Hard),
    ("http://[100::1]/", Hard),
    // Schemes, userinfo and ports.
    ("file:///etc/passwd", Soft),
    ("ftp://site.test/secret", Soft),
    ("gopher://site.test:{p}/_GET%20/secret", Soft),
    ("data:text/html,<p>hi</p>", Soft),
    ("javascript:alert(1)", Soft),
    ("dict://site.test:{p}/secret", Soft),
    ("ws://site.test:{p}/secret", Soft),
    ("http://user:pass@site.test:{p}/secret", Hard),
    ("http://site.test@127.0.0.1:{p}/secret", Hard),
    ("http://user@site.test:{p}/secret", Hard),
    ("http://site.test:22/secret", Hard),
    ("http://site.test:6379/secret", Hard),
    // WHATWG parsing reads this as http://secret/, a name the scripted DNS does not know.
    ("http:///secret", Soft),
    ("not a url", Hard),
    ("http://[::1/secret", Hard),
    // Names that resolve into blocked space (scripted DNS).
    ("http://internal.test/secret", Hard),
    ("http://meta.test/latest/meta-data/", Hard),
    ("http://loop.test:{p}/secret", Hard),
    ("http://LOOP.test.:{p}/secret", Hard),
    ("http://v6loop.test:{p}/secret", Hard),
    ("http://mapped.test:{p}/secret", Hard),
    ("http://compat.test:{p}/secret", Hard),
    ("http://nat64.test:{p}/secret", Hard),
    ("http://ula.test:{p}/secret", Hard),
    ("http://linklocal6.test:{p}/secret", Hard),
    ("http://cgnat.test:{p}/secret", Hard),
    ("http://zero.test:{p}/secret", Hard),
    ("http://multi-private.test:{p}/secret", Hard),
    ("http://teredo.test:{p}/secret", Hard),
    ("http://sixtofour.test:{p}/secret", Hard),
    ("http://bench.test:{p}/secret", Hard),
    ("http://doc.test:{p}/secret", Hard),
    ("http://mcast.test:{p}/secret", Hard),
    ("http://broadcast.test:{p}/secret", Hard),
    ("http://sitelocal.test:{p}/secret", Hard),
];

/// Redirect payloads: the canary at `site.test` (allowed) redirects to each target.
const REDIRECTS: &[&str] = &[
    "http://127.0.0.1:{p}/secret",
    "http://2130706433:{p}/secret",
    "http://0x7f.1:{p}/secret",
    "http://[::1]:{p}/secret",
    "http://[::ffff:127.0.0.1]:{p}/secret",
    "http://169.254.169.254/latest/meta-data/",
    "http://loop.test:{p}/secret",
    "http://internal.test/secret",
    "http://meta.test/secret",
    "http://mapped.test:{p}/secret",
    "file:///etc/passwd",
    "gopher://site.test:{p}/secret",
    "http://user:pw@site.test:{p}/secret",
    "http://site.test:22/secret",
    "//127.0.0.1:{p}/secret",
    "/hop2",
];

async fn outcome(tool: &WebFetch, url: &str) -> Result<String, String> {
    let args = serde_json::json!({ "url": url }).to_string();
    match tool.call(&args).await {
        Ok(out) => Ok(out.text().to_owned()),
        Err(e) => Err(e.message().to_owned()),
    }
}

fn assert_no_leak(message: &str, payload: &str) {
    for leak in [
        "127.0.0.1",
        "10.0.0.5",
        "169.254.169.254",
        "::1",
        "/8",
        "/16",
        "/10",
    ] {
        if payload.contains(leak) {
            continue;
        }
        assert!(
            !message.contains(leak),
            "{payload}: message leaks {leak}: {message}"
        );
    }
}

#[tokio::test]
async fn direct_payloads_fail_closed() {
    assert!(DIRECT.len() + REDIRECTS.len() >= 60);
    let canary = TestServer::start(vec![("/secret", Reply::typed("text/plain", "SECRET"))]).await;
    let tool = WebFetch::try_with_lookup(policy(canary.port()), Arc::new(lookup())).unwrap();
    let mut failures = Vec::new();
    for (template, expected) in DIRECT {
        let url = template.replace("{p}", &canary.port().to_string());
        let got = outcome(&tool, &url).await;
        let ok = match (&got, expected) {
            (Err(m), Hard) => {
                assert_no_leak(m, &url);
                true
            }
            (Ok(text), Soft) => !text.starts_with("url:") && !text.contains("SECRET"),
            _ => false,
        };
        if !ok {
            failures.push(format!("{url}: expected {expected:?}, got {got:?}"));
        }
    }
    assert!(
        failures.is_empty(),
        "payloads that did not fail closed:\n{}",
        failures.join("\n")
    );
    assert!(
        canary.paths().is_empty(),
        "the canary was reached: {:?}",
        canary.paths()
    );
}

#[tokio::test]
async fn redirect_chains_into_blocked_space_fail_closed() {
    for target in REDIRECTS {
        // Each chain: /start -> target (for "/hop2": /start -> /hop2 -> loopback literal).
        let canary =
            TestServer::start(vec![("/secret", Reply::typed("text/plain", "SECRET"))]).await;
        let port = canary.port().to_string();
        let location = target.replace("{p}", &port);
        let server = TestServer::start(vec![
            ("/start", Reply::redirect(302, &location)),
            (
                "/hop2",
                Reply::redirect(301, &format!("http://127.0.0.1:{port}/secret")),
            ),
        ])
        .await;
        // The redirecting server is reachable too, through the site.test pair.
        let config = FetchConfig::builder()
            .allow_http(true)
            .allow_ip_literals(true)
            .allow_ports([80, 443, canary.port(), server.port()])
            .allow_host_address(SITE, "127.0.0.1".parse().unwrap())
            .build()
            .unwrap();
        let tool = WebFetch::try_with_lookup(config, Arc::new(lookup())).unwrap();
        let got = outcome(&tool, &server.url("/start")).await;
        match &got {
            Ok(text) => {
                assert!(
                    !text.starts_with("url:") && text.contains("redirect refused"),
                    "{location}: {text}"
                );
                assert!(!text.contains("SECRET"));
            }
            Err(message) => {
                assert!(message.contains("blocked"), "{location}: {message}");
                assert_no_leak(message, &location);
            }
        }
        assert!(canary.paths().is_empty(), "{location}: canary reached");
        assert!(
            !server.paths().iter().any(|p| p.contains("secret")),
            "{location}"
        );
    }
}

#[tokio::test]
async fn rebinding_is_caught_on_the_hop_that_returns_it() {
    let server = TestServer::start(vec![
        ("/first", Reply::typed("text/plain", "first")),
        ("/secret", Reply::typed("text/plain", "SECRET")),
    ])
    .await;
    let lookup = lookup();
    let tool = WebFetch::try_with_lookup(policy(server.port()), Arc::new(lookup.clone())).unwrap();
    let first = outcome(
        &tool,
        &format!("http://rebind.test:{}/first", server.port()),
    )
    .await;
    assert!(first.unwrap().ends_with("first"));
    // The second lookup answers 10.0.0.1: no verdict was cached, so it is refused.
    let second = outcome(
        &tool,
        &format!("http://rebind.test:{}/secret", server.port()),
    )
    .await;
    let message = second.unwrap_err();
    assert!(message.contains("host rebind.test"), "{message}");
    assert!(!message.contains("10.0.0.1"), "{message}");
    assert_eq!(lookup.count("rebind.test"), 2);
    assert_eq!(server.paths(), ["/first"]);
}

#[tokio::test]
async fn rebinding_between_redirect_hops_is_caught() {
    let server = TestServer::start(vec![
        ("/a", Reply::redirect(302, "/secret")),
        ("/secret", Reply::typed("text/plain", "SECRET")),
    ])
    .await;
    let tool = WebFetch::try_with_lookup(policy(server.port()), Arc::new(lookup())).unwrap();
    let got = outcome(&tool, &format!("http://rebind.test:{}/a", server.port())).await;
    assert!(got.unwrap_err().contains("rebind.test"));
    assert_eq!(server.paths(), ["/a"]);
}

#[tokio::test]
async fn the_default_policy_refuses_http_and_literals() {
    let tool = WebFetch::new();
    let soft = outcome(&tool, "http://example.com/").await.unwrap();
    assert!(soft.contains("scheme \"http\" is not allowed"), "{soft}");
    let hard = outcome(&tool, "https://8.8.8.8/").await.unwrap_err();
    assert!(hard.contains("IP-address hosts are not allowed"), "{hard}");
    let hard = outcome(&tool, "https://example.com:8443/")
        .await
        .unwrap_err();
    assert!(hard.contains("port 8443 is not allowed"), "{hard}");
}
