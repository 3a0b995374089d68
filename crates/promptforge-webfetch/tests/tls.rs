//! End-to-end HTTPS: a real TLS server on 127.0.0.1:0 with a CA and leaf certificates made
//! at test time, reached as `site.test` (and `other.test`) through `allow_host_address`, and
//! trusted through `add_root_certificate_pem`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::net::IpAddr;
use std::sync::Arc;

use common::{Lookup, Reply, SITE, TestServer, parse_page};
use promptforge_core::tools::Tool;
use promptforge_webfetch::{FetchConfigBuilder, WebFetch};
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};

/// The second host name the redirect tests use; also paired with loopback.
const OTHER: &str = "other.test";

const BODY: &str = "served over TLS";

/// A test certificate authority: a self-signed CA that signs leaf certificates.
struct TestCa {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

impl TestCa {
    fn new(name: &str) -> Self {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let issuer = CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap();
        Self { issuer }
    }

    /// The CA certificate, PEM-encoded, as a deployment would hand it to the policy.
    fn pem(&self) -> String {
        self.issuer.pem()
    }

    /// A TLS acceptor presenting a server certificate for `names`, signed by this CA.
    fn acceptor(&self, names: &[&str]) -> TlsAcceptor {
        let names: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
        let mut params = CertificateParams::new(names.clone()).unwrap();
        params
            .distinguished_name
            .push(DnType::CommonName, &names[0]);
        params.use_authority_key_identifier_extension = true;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let key = KeyPair::generate().unwrap();
        let leaf = params.signed_by(&key, &self.issuer).unwrap();
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
        let provider = Arc::new(tokio_rustls::rustls::crypto::aws_lc_rs::default_provider());
        let config = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(vec![leaf.der().clone()], key)
            .unwrap();
        TlsAcceptor::from(Arc::new(config))
    }
}

fn loopback() -> IpAddr {
    "127.0.0.1".parse().unwrap()
}

/// The policy reaching `servers` as `site.test` / `other.test` on their ports (plain http
/// admitted too, so a refused downgrade is the downgrade rule's doing, not admission's).
fn policy(servers: &[&TestServer]) -> FetchConfigBuilder {
    let mut ports = vec![80, 443];
    ports.extend(servers.iter().map(|s| s.port()));
    servers[0]
        .policy()
        .allow_ports(ports)
        .allow_host_address(OTHER, loopback())
}

fn tool(config: FetchConfigBuilder) -> WebFetch {
    let lookup = Lookup::site().with(OTHER, &["127.0.0.1"]);
    WebFetch::try_with_lookup(config.build().unwrap(), Arc::new(lookup)).unwrap()
}

async fn call(tool: &WebFetch, url: &str) -> String {
    let args = serde_json::json!({ "url": url }).to_string();
    let out = tool.call(&args).await.unwrap();
    assert!(!out.is_trusted(), "web content must be untrusted");
    out.text().to_owned()
}

async fn soft(tool: &WebFetch, url: &str) -> String {
    let text = call(tool, url).await;
    assert!(
        !text.starts_with("url:"),
        "expected a soft outcome, got a page: {text}"
    );
    text
}

#[tokio::test]
async fn https_fetch_succeeds_with_an_added_root() {
    let ca = TestCa::new("PromptForge test CA");
    let server = TestServer::start_tls(
        vec![("/doc", Reply::typed("text/plain; charset=utf-8", BODY))],
        ca.acceptor(&[SITE]),
    )
    .await;
    let tool = tool(policy(&[&server]).add_root_certificate_pem(ca.pem()));
    let url = server.url("/doc?page=2");
    assert!(url.starts_with("https://site.test:"), "{url}");
    let (final_url, truncated, extraction, text) = parse_page(&call(&tool, &url).await);
    assert_eq!(
        final_url,
        format!("https://site.test:{}/doc?page=2", server.port())
    );
    assert!(!truncated);
    assert_eq!((extraction.as_str(), text.as_str()), ("plain", BODY));
    assert_eq!(server.paths(), ["/doc?page=2"]);
    let head = &server.requests()[0];
    assert!(
        head.to_ascii_lowercase().contains("host: site.test:"),
        "{head}"
    );
}

#[tokio::test]
async fn https_to_http_redirect_is_refused_and_the_target_never_contacted() {
    let ca = TestCa::new("PromptForge test CA");
    let canary = TestServer::start(vec![("/landing", Reply::typed("text/plain", "canary"))]).await;
    let target = canary.url("/landing?token=secret");
    let server = TestServer::start_tls(
        vec![("/go", Reply::redirect(302, &target))],
        ca.acceptor(&[SITE]),
    )
    .await;
    assert!(target.starts_with("http://"), "{target}");
    let tool = tool(policy(&[&server, &canary]).add_root_certificate_pem(ca.pem()));
    let text = soft(&tool, &server.url("/go")).await;
    assert_eq!(
        text,
        format!(
            "web_fetch could not fetch https://site.test:{}/go: redirect refused: https to http \
             downgrade to http://site.test:{}/landing?[redacted]",
            server.port(),
            canary.port()
        )
    );
    assert_eq!(server.paths(), ["/go"]);
    assert_eq!(canary.connections(), 0, "the http target was contacted");
    assert!(canary.requests().is_empty());
    // Control: the same tool reaches the canary directly over http, so only the downgrade
    // rule kept the redirect away from it.
    let (_, _, _, body) = parse_page(&call(&tool, &canary.url("/landing")).await);
    assert_eq!(body, "canary");
    assert_eq!(canary.connections(), 1);
}

#[tokio::test]
async fn https_to_https_redirects_are_followed_across_hosts() {
    let ca = TestCa::new("PromptForge test CA");
    let second = TestServer::start_tls(
        vec![("/final", Reply::typed("text/plain", BODY))],
        ca.acceptor(&[OTHER]),
    )
    .await;
    let first = TestServer::start_tls(
        vec![
            ("/start", Reply::redirect(302, "/next")),
            (
                "/next",
                Reply::redirect(307, &second.url_as(OTHER, "/final?x=1")),
            ),
        ],
        ca.acceptor(&[SITE]),
    )
    .await;
    let tool = tool(policy(&[&first, &second]).add_root_certificate_pem(ca.pem()));
    let (final_url, _, extraction, text) = parse_page(&call(&tool, &first.url("/start")).await);
    assert_eq!(
        final_url,
        format!("https://other.test:{}/final?x=1", second.port())
    );
    assert_eq!((extraction.as_str(), text.as_str()), ("plain", BODY));
    assert_eq!(first.paths(), ["/start", "/next"]);
    assert_eq!(second.paths(), ["/final?x=1"]);
}

#[tokio::test]
async fn a_certificate_for_another_host_is_refused() {
    let ca = TestCa::new("PromptForge test CA");
    // Trusted CA, but the certificate names other.test while the URL names site.test.
    let server = TestServer::start_tls(
        vec![("/doc", Reply::typed("text/plain", BODY))],
        ca.acceptor(&[OTHER]),
    )
    .await;
    let tool = tool(policy(&[&server]).add_root_certificate_pem(ca.pem()));
    let text = soft(&tool, &server.url("/doc?k=v")).await;
    assert_eq!(
        text,
        format!(
            "web_fetch could not fetch https://site.test:{}/doc?[redacted]: could not connect \
             to host site.test",
            server.port()
        )
    );
    assert!(server.connections() > 0, "the server was never reached");
    assert!(
        server.requests().is_empty(),
        "a request was sent over an unverified connection"
    );
    // Control: the same server and certificate reached by the name it carries is accepted,
    // so the refusal above was the host name check alone.
    let (final_url, _, _, text) = parse_page(&call(&tool, &server.url_as(OTHER, "/doc")).await);
    assert_eq!(
        final_url,
        format!("https://other.test:{}/doc", server.port())
    );
    assert_eq!(text, BODY);
    assert_eq!(server.paths(), ["/doc"]);
}

#[tokio::test]
async fn an_untrusted_certificate_is_refused() {
    let ca = TestCa::new("PromptForge test CA");
    let stranger = TestCa::new("Some other CA");
    let server = TestServer::start_tls(
        vec![("/doc", Reply::typed("text/plain", BODY))],
        ca.acceptor(&[SITE]),
    )
    .await;
    let expected = format!(
        "web_fetch could not fetch https://site.test:{}/doc: could not connect to host site.test",
        server.port()
    );
    // No extra root: only the platform's roots, which never signed the test CA.
    let platform_only = tool(policy(&[&server]));
    assert_eq!(soft(&platform_only, &server.url("/doc")).await, expected);
    // An extra root that is not the server's CA does not help either.
    let wrong_root = tool(policy(&[&server]).add_root_certificate_pem(stranger.pem()));
    assert_eq!(soft(&wrong_root, &server.url("/doc")).await, expected);
    assert!(server.connections() >= 2, "the server was never reached");
    assert!(
        server.requests().is_empty(),
        "a request was sent over an unverified connection"
    );
    // The same server with its CA trusted: the refusals above were about trust only.
    let trusted = tool(policy(&[&server]).add_root_certificate_pem(ca.pem()));
    let (_, _, _, text) = parse_page(&call(&trusted, &server.url("/doc")).await);
    assert_eq!(text, BODY);
}
