//! The fetch policy: [`FetchConfig`], its [`FetchConfigBuilder`] and [`ConfigError`].

use std::net::IpAddr;
use std::time::Duration;

use crate::address_policy::{AddressPolicy, Cidr, CidrError};

/// Default for [`FetchConfigBuilder::max_bytes`]: 8 MiB of decompressed body.
pub const DEFAULT_MAX_BYTES: u64 = 8 * 1024 * 1024;
/// Largest accepted [`FetchConfigBuilder::max_bytes`]: 1 GiB.
pub const MAX_MAX_BYTES: u64 = 1024 * 1024 * 1024;
/// Default for [`FetchConfigBuilder::max_chars`]: 40,000 characters returned to the model.
pub const DEFAULT_MAX_CHARS: usize = 40_000;
/// Largest accepted [`FetchConfigBuilder::max_chars`]: 10,000,000 characters.
pub const MAX_MAX_CHARS: usize = 10_000_000;
/// Default for [`FetchConfigBuilder::timeout`]: 30 seconds for the whole call.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
/// Largest accepted [`FetchConfigBuilder::timeout`]: 10 minutes.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(600);
/// Default for [`FetchConfigBuilder::max_redirects`]: 5 hops.
pub const DEFAULT_MAX_REDIRECTS: u8 = 5;
/// Largest accepted [`FetchConfigBuilder::max_redirects`]: 20 hops.
pub const MAX_MAX_REDIRECTS: u8 = 20;
/// Default for [`FetchConfigBuilder::allow_ports`]: 80 and 443.
pub const DEFAULT_PORTS: [u16; 2] = [80, 443];
/// Default for [`FetchConfigBuilder::user_agent`].
pub const DEFAULT_USER_AGENT: &str = concat!("promptforge-webfetch/", env!("CARGO_PKG_VERSION"));

/// A fetch policy that was refused at [`FetchConfigBuilder::build`] (or a client that could
/// not be built from a valid policy).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// `max_bytes` is zero or above [`MAX_MAX_BYTES`].
    #[error("max_bytes must be from 1 to {MAX_MAX_BYTES}, got {0}")]
    MaxBytes(u64),
    /// `max_chars` is zero or above [`MAX_MAX_CHARS`].
    #[error("max_chars must be from 1 to {MAX_MAX_CHARS}, got {0}")]
    MaxChars(usize),
    /// `timeout` is zero or above [`MAX_TIMEOUT`].
    #[error("timeout must be above zero and at most 600 seconds, got {0:?}")]
    Timeout(Duration),
    /// `max_redirects` is above [`MAX_MAX_REDIRECTS`].
    #[error("max_redirects must be at most {MAX_MAX_REDIRECTS}, got {0}")]
    MaxRedirects(u8),
    /// `allow_ports` is empty.
    #[error("allow_ports must name at least one port")]
    NoPorts,
    /// `allow_ports` contains port 0.
    #[error("allow_ports must not contain port 0")]
    PortZero,
    /// `user_agent` is empty or not a valid HTTP header value.
    #[error("user_agent must be a non-empty, visible-ASCII HTTP header value")]
    UserAgent,
    /// A `deny_cidr` entry is not a CIDR range.
    #[error("deny_cidr {cidr:?} is not a CIDR range: {source}")]
    DenyCidr {
        /// The text as given.
        cidr: String,
        /// What is wrong with it.
        source: CidrError,
    },
    /// An `allow_host_address` host is not a DNS host name.
    #[error("allow_host_address host {host:?} is not a DNS host name: {reason}")]
    AllowHost {
        /// The host as given.
        host: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// An `add_root_certificate_pem` value is not PEM holding usable X.509 certificates.
    #[error("add_root_certificate_pem (call {call}) is not a usable root certificate: {reason}")]
    RootCertificate {
        /// Which `add_root_certificate_pem` call supplied it, counting from 1.
        call: usize,
        /// What is wrong with it.
        reason: String,
    },
    /// The HTTP client could not be built (for example the TLS backend failed to start).
    #[error("the HTTP client could not be built: {0}")]
    HttpClient(String),
}

/// The validated policy of a [`crate::WebFetch`] tool. Build one with
/// [`FetchConfig::builder`]; [`FetchConfig::default`] is the safe public-internet policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchConfig {
    pub(crate) allow_http: bool,
    pub(crate) allow_ports: Vec<u16>,
    pub(crate) allow_ip_literals: bool,
    pub(crate) max_bytes: u64,
    pub(crate) max_chars: usize,
    pub(crate) timeout: Duration,
    pub(crate) max_redirects: u8,
    pub(crate) user_agent: String,
    pub(crate) allow_hosts: Vec<(String, IpAddr)>,
    pub(crate) deny_cidrs: Vec<Cidr>,
    pub(crate) root_certificates: Vec<Vec<u8>>,
    pub(crate) address_policy: AddressPolicy,
    pub(crate) article_cleanup: bool,
}

impl Default for FetchConfig {
    fn default() -> Self {
        Self {
            allow_http: false,
            allow_ports: DEFAULT_PORTS.to_vec(),
            allow_ip_literals: false,
            max_bytes: DEFAULT_MAX_BYTES,
            max_chars: DEFAULT_MAX_CHARS,
            timeout: DEFAULT_TIMEOUT,
            max_redirects: DEFAULT_MAX_REDIRECTS,
            user_agent: DEFAULT_USER_AGENT.to_owned(),
            allow_hosts: Vec::new(),
            deny_cidrs: Vec::new(),
            root_certificates: Vec::new(),
            address_policy: AddressPolicy::default(),
            article_cleanup: true,
        }
    }
}

impl FetchConfig {
    /// Starts a builder holding the defaults.
    pub fn builder() -> FetchConfigBuilder {
        FetchConfigBuilder::default()
    }

    /// Whether plain `http` URLs are fetched (default `false`: HTTPS only).
    pub fn allow_http(&self) -> bool {
        self.allow_http
    }

    /// The ports a URL may name (default 80 and 443).
    pub fn allow_ports(&self) -> &[u16] {
        &self.allow_ports
    }

    /// Whether URLs whose host is an IP literal are admitted when the address is allowed
    /// (default `false`).
    pub fn allow_ip_literals(&self) -> bool {
        self.allow_ip_literals
    }

    /// The largest decompressed body read, in bytes (default 8 MiB).
    pub fn max_bytes(&self) -> u64 {
        self.max_bytes
    }

    /// The most characters returned to the model, and the ceiling of the per-call
    /// `max_chars` argument (default 40,000).
    pub fn max_chars(&self) -> usize {
        self.max_chars
    }

    /// The deadline for a whole call, every hop and the body included (default 30 s).
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// The most redirects followed in one call (default 5).
    pub fn max_redirects(&self) -> u8 {
        self.max_redirects
    }

    /// The `User-Agent` header sent (default `promptforge-webfetch/<version>`).
    pub fn user_agent(&self) -> &str {
        &self.user_agent
    }

    /// The exact `(host, address)` pairs that may reach otherwise blocked addresses.
    pub fn allowed_host_addresses(&self) -> &[(String, IpAddr)] {
        &self.allow_hosts
    }

    /// The extra ranges blocked on top of the built-in table.
    pub fn denied_cidrs(&self) -> &[Cidr] {
        &self.deny_cidrs
    }

    /// The extra trusted root CA certificates, DER-encoded, in the order given (default
    /// none). They are trusted in addition to the platform's roots.
    pub fn root_certificates(&self) -> &[Vec<u8>] {
        &self.root_certificates
    }

    /// Whether an article is cleaned of captions, galleries, related-link lists and other
    /// furniture inside it (default `true`; see [`FetchConfigBuilder::article_cleanup`]).
    pub fn article_cleanup(&self) -> bool {
        self.article_cleanup
    }
}

/// Builds a [`FetchConfig`]. Every setter returns `self`; [`FetchConfigBuilder::build`]
/// validates everything once.
#[derive(Debug, Clone)]
pub struct FetchConfigBuilder {
    allow_http: bool,
    allow_ports: Vec<u16>,
    allow_ip_literals: bool,
    max_bytes: u64,
    max_chars: usize,
    timeout: Duration,
    max_redirects: u8,
    user_agent: String,
    allow_hosts: Vec<(String, IpAddr)>,
    deny_cidrs: Vec<String>,
    root_pems: Vec<Vec<u8>>,
    article_cleanup: bool,
}

impl Default for FetchConfigBuilder {
    fn default() -> Self {
        let d = FetchConfig::default();
        Self {
            allow_http: d.allow_http,
            allow_ports: d.allow_ports,
            allow_ip_literals: d.allow_ip_literals,
            max_bytes: d.max_bytes,
            max_chars: d.max_chars,
            timeout: d.timeout,
            max_redirects: d.max_redirects,
            user_agent: d.user_agent,
            allow_hosts: Vec::new(),
            deny_cidrs: Vec::new(),
            root_pems: Vec::new(),
            article_cleanup: d.article_cleanup,
        }
    }
}

impl FetchConfigBuilder {
    /// Admits plain `http` URLs too (default `false`). An `https` page can still never
    /// redirect to `http`.
    pub fn allow_http(mut self, allow: bool) -> Self {
        self.allow_http = allow;
        self
    }

    /// Replaces the port allowlist (default `[80, 443]`). The port a URL names, or its
    /// scheme's default, must be listed.
    pub fn allow_ports(mut self, ports: impl IntoIterator<Item = u16>) -> Self {
        self.allow_ports = ports.into_iter().collect();
        self.allow_ports.sort_unstable();
        self.allow_ports.dedup();
        self
    }

    /// Admits URLs whose host is an IP literal, provided the address passes the address
    /// policy (default `false`: a URL must name a host).
    pub fn allow_ip_literals(mut self, allow: bool) -> Self {
        self.allow_ip_literals = allow;
        self
    }

    /// The largest decompressed body read, in bytes (default 8 MiB, at most 1 GiB).
    pub fn max_bytes(mut self, bytes: u64) -> Self {
        self.max_bytes = bytes;
        self
    }

    /// The most characters returned to the model (default 40,000, at most 10,000,000).
    pub fn max_chars(mut self, chars: usize) -> Self {
        self.max_chars = chars;
        self
    }

    /// The deadline for a whole call (default 30 s, at most 10 minutes).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The most redirects followed in one call (default 5, at most 20; 0 follows none).
    pub fn max_redirects(mut self, hops: u8) -> Self {
        self.max_redirects = hops;
        self
    }

    /// The `User-Agent` header sent (default `promptforge-webfetch/<version>`).
    pub fn user_agent(mut self, agent: impl Into<String>) -> Self {
        self.user_agent = agent.into();
        self
    }

    /// Lets `host` reach exactly `addr` even when the address is blocked. The host is
    /// canonicalised (lowercased, trailing dot stripped, IDNA-encoded); the pair matches only
    /// when that host resolves to that address. May be called more than once.
    pub fn allow_host_address(mut self, host: impl Into<String>, addr: IpAddr) -> Self {
        self.allow_hosts.push((host.into(), addr));
        self
    }

    /// Blocks one more range (CIDR text such as `10.99.0.0/16`) on top of the built-in
    /// table. May be called more than once.
    pub fn deny_cidr(mut self, cidr: impl Into<String>) -> Self {
        self.deny_cidrs.push(cidr.into());
        self
    }

    /// Trusts the root CA certificates in `pem` (one or more `CERTIFICATE` sections; other
    /// sections are skipped) in addition to the platform's roots, for example a corporate
    /// CA that signs internal sites. It widens only whom TLS trusts, never which addresses
    /// are reachable. May be called more than once.
    pub fn add_root_certificate_pem(mut self, pem: impl AsRef<[u8]>) -> Self {
        self.root_pems.push(pem.as_ref().to_vec());
        self
    }

    /// Whether the article a readability pass finds is cleaned (default `true`): captions
    /// and galleries, related-link lists, newsletter and author boxes, bylines and closing
    /// notices inside it are dropped, which is what a model reading the page needs. With
    /// `false` the article comes back whole, as readability.js returns it
    /// ([`crate::Rendering::FullArticle`]), for a deployment that wants the captions and
    /// boxes too. `raw: true` still renders the whole page either way.
    pub fn article_cleanup(mut self, clean: bool) -> Self {
        self.article_cleanup = clean;
        self
    }

    /// Validates every field and returns the policy.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming the first invalid field.
    pub fn build(self) -> Result<FetchConfig, ConfigError> {
        if self.max_bytes == 0 || self.max_bytes > MAX_MAX_BYTES {
            return Err(ConfigError::MaxBytes(self.max_bytes));
        }
        if self.max_chars == 0 || self.max_chars > MAX_MAX_CHARS {
            return Err(ConfigError::MaxChars(self.max_chars));
        }
        if self.timeout.is_zero() || self.timeout > MAX_TIMEOUT {
            return Err(ConfigError::Timeout(self.timeout));
        }
        if self.max_redirects > MAX_MAX_REDIRECTS {
            return Err(ConfigError::MaxRedirects(self.max_redirects));
        }
        if self.allow_ports.is_empty() {
            return Err(ConfigError::NoPorts);
        }
        if self.allow_ports.contains(&0) {
            return Err(ConfigError::PortZero);
        }
        if self.user_agent.trim().is_empty()
            || !self.user_agent.bytes().all(|b| (0x20..0x7f).contains(&b))
        {
            return Err(ConfigError::UserAgent);
        }
        let deny_cidrs = self
            .deny_cidrs
            .iter()
            .map(|c| {
                c.parse::<Cidr>().map_err(|source| ConfigError::DenyCidr {
                    cidr: c.clone(),
                    source,
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let allow_hosts = self
            .allow_hosts
            .iter()
            .map(|(host, addr)| Ok((canonical_allow_host(host)?, *addr)))
            .collect::<Result<Vec<_>, ConfigError>>()?;
        let mut root_certificates = Vec::new();
        for (i, pem) in self.root_pems.iter().enumerate() {
            root_certificates.extend(root_certificates_from_pem(pem).map_err(|reason| {
                ConfigError::RootCertificate {
                    call: i + 1,
                    reason,
                }
            })?);
        }
        Ok(FetchConfig {
            allow_http: self.allow_http,
            allow_ports: self.allow_ports,
            allow_ip_literals: self.allow_ip_literals,
            max_bytes: self.max_bytes,
            max_chars: self.max_chars,
            timeout: self.timeout,
            max_redirects: self.max_redirects,
            user_agent: self.user_agent,
            address_policy: AddressPolicy::new(deny_cidrs.clone(), allow_hosts.clone()),
            allow_hosts,
            deny_cidrs,
            root_certificates,
            article_cleanup: self.article_cleanup,
        })
    }
}

/// Reads every `CERTIFICATE` section of an `add_root_certificate_pem` value and checks each
/// parses as a trust anchor (the check the TLS stack makes when it loads a root), so a bad
/// value is refused at `build()` rather than when the HTTP client starts.
fn root_certificates_from_pem(pem: &[u8]) -> Result<Vec<Vec<u8>>, String> {
    use rustls_pki_types::CertificateDer;
    use rustls_pki_types::pem::{Error as PemError, PemObject};

    let mut ders = Vec::new();
    for section in CertificateDer::pem_slice_iter(pem) {
        let der = section.map_err(|e| {
            match e {
                PemError::MissingSectionEnd { .. } => "a PEM section has no END line",
                PemError::IllegalSectionStart { .. } => "a PEM BEGIN line is malformed",
                PemError::Base64Decode(_) => "a PEM section is not valid base64",
                PemError::SectionTooLarge => "a PEM section is too large",
                _ => "it is not valid PEM",
            }
            .to_owned()
        })?;
        if webpki::anchor_from_trusted_cert(&der).is_err() {
            return Err(format!(
                "CERTIFICATE section {} is not a valid X.509 certificate",
                ders.len() + 1
            ));
        }
        ders.push(der.as_ref().to_vec());
    }
    if ders.is_empty() {
        return Err("it holds no CERTIFICATE section".to_owned());
    }
    Ok(ders)
}

/// Canonicalises an `allow_host_address` host the way URL parsing canonicalises a URL's
/// host, so the pair compares equal to what admission and the resolver see.
fn canonical_allow_host(host: &str) -> Result<String, ConfigError> {
    let err = |reason| ConfigError::AllowHost {
        host: host.to_owned(),
        reason,
    };
    if host.is_empty() || host.contains(['/', '@', ':', '?', '#', '\\', ' ', '[', ']']) {
        return Err(err(
            "it must be a bare host name, without scheme, port or path",
        ));
    }
    let parsed = url::Host::parse(host).map_err(|_| err("it does not parse as a host"))?;
    match parsed {
        url::Host::Domain(d) => {
            let d = d.trim_end_matches('.').to_owned();
            if d.is_empty() {
                return Err(err("it is empty"));
            }
            Ok(d)
        }
        url::Host::Ipv4(_) | url::Host::Ipv6(_) => {
            Err(err("it is an IP literal; pair a DNS name with the address"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_the_documented_ones() {
        let c = FetchConfig::builder().build().unwrap();
        assert_eq!(c, FetchConfig::default());
        assert!(!c.allow_http());
        assert_eq!(c.allow_ports(), &[80, 443]);
        assert!(!c.allow_ip_literals());
        assert_eq!(c.max_bytes(), 8 * 1024 * 1024);
        assert_eq!(c.max_chars(), 40_000);
        assert_eq!(c.timeout(), Duration::from_secs(30));
        assert_eq!(c.max_redirects(), 5);
        assert!(c.user_agent().starts_with("promptforge-webfetch/"));
        assert!(c.allowed_host_addresses().is_empty());
        assert!(c.denied_cidrs().is_empty());
        assert!(c.root_certificates().is_empty());
        assert!(c.article_cleanup());
    }

    #[test]
    fn setters_are_kept() {
        let addr: IpAddr = "10.0.5.42".parse().unwrap();
        let c = FetchConfig::builder()
            .allow_http(true)
            .allow_ports([8080, 443, 80, 443])
            .allow_ip_literals(true)
            .max_bytes(16 * 1024 * 1024)
            .max_chars(100_000)
            .timeout(Duration::from_secs(60))
            .max_redirects(0)
            .user_agent("my-service/1.0")
            .allow_host_address("Wiki.Internal.Corp.", addr)
            .deny_cidr("10.99.0.0/16")
            .deny_cidr("172.20.0.0/14")
            .article_cleanup(false)
            .build()
            .unwrap();
        assert!(c.allow_http());
        assert!(!c.article_cleanup());
        assert_eq!(c.allow_ports(), &[80, 443, 8080]);
        assert!(c.allow_ip_literals());
        assert_eq!(c.max_bytes(), 16 * 1024 * 1024);
        assert_eq!(c.max_chars(), 100_000);
        assert_eq!(c.timeout(), Duration::from_secs(60));
        assert_eq!(c.max_redirects(), 0);
        assert_eq!(c.user_agent(), "my-service/1.0");
        assert_eq!(
            c.allowed_host_addresses(),
            &[("wiki.internal.corp".to_owned(), addr)]
        );
        let denied: Vec<String> = c.denied_cidrs().iter().map(ToString::to_string).collect();
        assert_eq!(denied, ["10.99.0.0/16", "172.20.0.0/14"]);
    }

    #[test]
    fn invalid_fields_are_refused_at_build() {
        let b = FetchConfig::builder;
        let ip: IpAddr = "10.0.0.1".parse().unwrap();
        assert_eq!(b().max_bytes(0).build(), Err(ConfigError::MaxBytes(0)));
        assert_eq!(
            b().max_bytes(MAX_MAX_BYTES + 1).build(),
            Err(ConfigError::MaxBytes(MAX_MAX_BYTES + 1))
        );
        assert_eq!(b().max_chars(0).build(), Err(ConfigError::MaxChars(0)));
        assert_eq!(
            b().timeout(Duration::ZERO).build(),
            Err(ConfigError::Timeout(Duration::ZERO))
        );
        assert_eq!(
            b().max_redirects(21).build(),
            Err(ConfigError::MaxRedirects(21))
        );
        assert_eq!(b().allow_ports([]).build(), Err(ConfigError::NoPorts));
        assert_eq!(
            b().allow_ports([0, 443]).build(),
            Err(ConfigError::PortZero)
        );
        assert_eq!(b().user_agent("").build(), Err(ConfigError::UserAgent));
        assert_eq!(
            b().user_agent("a\r\nb").build(),
            Err(ConfigError::UserAgent)
        );
        assert!(matches!(
            b().deny_cidr("10.99.0.0").build(),
            Err(ConfigError::DenyCidr { .. })
        ));
        for bad in ["", "10.0.0.2", "[::1]", "http://x", "x:80", "a b", "user@x"] {
            assert!(
                matches!(
                    b().allow_host_address(bad, ip).build(),
                    Err(ConfigError::AllowHost { .. })
                ),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn root_certificates_are_read_and_validated_at_build() {
        let ca = rcgen::generate_simple_self_signed(vec!["ca.test".to_owned()]).unwrap();
        let other = rcgen::generate_simple_self_signed(vec!["other.test".to_owned()]).unwrap();
        // A bundle: a key section (skipped) and two certificates.
        let bundle = format!(
            "{}{}{}",
            other.signing_key.serialize_pem(),
            other.cert.pem(),
            ca.cert.pem()
        );
        let c = FetchConfig::builder()
            .add_root_certificate_pem(ca.cert.pem())
            .add_root_certificate_pem(bundle.as_bytes())
            .build()
            .unwrap();
        let roots: Vec<&[u8]> = c.root_certificates().iter().map(Vec::as_slice).collect();
        assert_eq!(
            roots,
            [
                ca.cert.der().as_ref(),
                other.cert.der().as_ref(),
                ca.cert.der().as_ref()
            ]
        );

        let reason = |pem: &str| match FetchConfig::builder()
            .add_root_certificate_pem(ca.cert.pem())
            .add_root_certificate_pem(pem)
            .build()
        {
            Err(ConfigError::RootCertificate { call: 2, reason }) => reason,
            other => panic!("{pem:?}: {other:?}"),
        };
        let key_only = ca.signing_key.serialize_pem();
        for pem in ["", "not a certificate at all", key_only.as_str()] {
            assert_eq!(reason(pem), "it holds no CERTIFICATE section", "{pem:?}");
        }
        assert_eq!(
            reason("-----BEGIN CERTIFICATE-----\n!!!!\n-----END CERTIFICATE-----\n"),
            "a PEM section is not valid base64"
        );
        assert_eq!(
            reason("-----BEGIN CERTIFICATE-----\nAAAA\n"),
            "a PEM section has no END line"
        );
        assert_eq!(
            reason("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"),
            "CERTIFICATE section 1 is not a valid X.509 certificate"
        );
        let e = FetchConfig::builder()
            .add_root_certificate_pem("junk")
            .build()
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "add_root_certificate_pem (call 1) is not a usable root certificate: \
             it holds no CERTIFICATE section"
        );
    }

    #[test]
    fn config_errors_name_the_field() {
        let e = FetchConfig::builder()
            .deny_cidr("10.0.0.1/8")
            .build()
            .unwrap_err();
        assert!(e.to_string().contains("deny_cidr \"10.0.0.1/8\""), "{e}");
        let e = FetchConfig::builder().max_chars(0).build().unwrap_err();
        assert!(e.to_string().contains("max_chars"), "{e}");
    }
}
