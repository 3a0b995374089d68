//! Layer 1 of the SSRF boundary: URL admission, before any network access.
//!
//! Parsing follows the WHATWG URL standard (the `url` crate), which already normalises
//! every obfuscated IPv4 spelling a browser accepts (`0177.0.0.1`, `2130706433`, `127.1`,
//! `0x7f.1`, percent-encoded digits) to a plain IPv4 host, so an IP-literal check on the
//! parsed host catches them all.

use std::net::IpAddr;

use url::{Host, Url};

use crate::config::FetchConfig;
use crate::redact::redacted;

/// The longest URL admitted, in bytes.
pub const MAX_URL_LEN: usize = 8 * 1024;

/// A URL that passed admission: http(s), no userinfo, an allowed port, a host name (or an
/// allowed IP literal), fragment removed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdmittedUrl {
    url: Url,
    host: String,
}

impl AdmittedUrl {
    /// The URL to request (fragment removed).
    pub fn url(&self) -> &Url {
        &self.url
    }

    /// The canonical host: lowercase, trailing dot removed.
    pub fn host(&self) -> &str {
        &self.host
    }
}

/// Why a URL was refused at admission. [`AdmissionError::is_hard`] says whether the
/// refusal is a hard tool error (no retry of this URL can help) or a soft outcome.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AdmissionError {
    /// The URL is longer than [`MAX_URL_LEN`].
    #[error("the URL is longer than {MAX_URL_LEN} bytes")]
    TooLong,
    /// The URL does not parse.
    #[error("the URL does not parse: {0}")]
    Unparseable(String),
    /// The scheme is not allowed by the policy.
    #[error("the scheme {scheme:?} is not allowed (allowed: {allowed})")]
    Scheme {
        /// The refused scheme.
        scheme: String,
        /// What is allowed, in words.
        allowed: &'static str,
    },
    /// The URL carries a user name or password.
    #[error("URLs with embedded credentials (user:password@) are not allowed")]
    Userinfo,
    /// The URL has no host.
    #[error("the URL has no host")]
    NoHost,
    /// The port is not on the allowlist.
    #[error("port {port} is not allowed (allowed: {allowed})")]
    Port {
        /// The refused port.
        port: u16,
        /// The allowed ports, comma separated.
        allowed: String,
    },
    /// The host is an IP literal and literals are not allowed.
    #[error("IP-address hosts are not allowed; use a host name")]
    IpLiteral,
    /// The host is an IP literal in blocked address space.
    #[error("the URL's host is a blocked address")]
    BlockedAddress,
}

impl AdmissionError {
    /// Whether this refusal is a hard [`promptforge_core::ToolError`] rather than a soft
    /// outcome the model reads as text. A blocked scheme is soft; every other refusal is hard.
    pub fn is_hard(&self) -> bool {
        !matches!(self, Self::Scheme { .. })
    }
}

/// Admits `raw` under `config`, or says why not.
///
/// # Errors
///
/// An [`AdmissionError`]; its message never contains the query or fragment.
pub fn admit(raw: &str, config: &FetchConfig) -> Result<AdmittedUrl, AdmissionError> {
    if raw.len() > MAX_URL_LEN {
        return Err(AdmissionError::TooLong);
    }
    let url = Url::parse(raw.trim()).map_err(|e| AdmissionError::Unparseable(e.to_string()))?;
    admit_url(url, config)
}

/// Admits an already parsed URL (a redirect target) under `config`.
///
/// # Errors
///
/// As [`admit`].
pub fn admit_url(mut url: Url, config: &FetchConfig) -> Result<AdmittedUrl, AdmissionError> {
    if url.as_str().len() > MAX_URL_LEN {
        return Err(AdmissionError::TooLong);
    }
    let allowed = if config.allow_http {
        "http, https"
    } else {
        "https"
    };
    match url.scheme() {
        "https" => {}
        "http" if config.allow_http => {}
        other => {
            return Err(AdmissionError::Scheme {
                scheme: other.to_owned(),
                allowed,
            });
        }
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(AdmissionError::Userinfo);
    }
    let port = url.port_or_known_default().ok_or(AdmissionError::NoHost)?;
    let host = match url.host() {
        None => return Err(AdmissionError::NoHost),
        Some(Host::Domain(d)) => {
            let d = d.trim_end_matches('.').to_ascii_lowercase();
            if d.is_empty() {
                return Err(AdmissionError::NoHost);
            }
            d
        }
        Some(Host::Ipv4(v4)) => literal(IpAddr::V4(v4), config)?,
        Some(Host::Ipv6(v6)) => literal(IpAddr::V6(v6), config)?,
    };
    if !config.allow_ports.contains(&port) {
        let allowed = config
            .allow_ports
            .iter()
            .map(u16::to_string)
            .collect::<Vec<_>>()
            .join(", ");
        return Err(AdmissionError::Port { port, allowed });
    }
    url.set_fragment(None);
    tracing::trace!(url = %redacted(&url), "admitted");
    Ok(AdmittedUrl { url, host })
}

fn literal(ip: IpAddr, config: &FetchConfig) -> Result<String, AdmissionError> {
    if !config.address_policy.permits(None, ip) {
        return Err(AdmissionError::BlockedAddress);
    }
    if !config.allow_ip_literals {
        return Err(AdmissionError::IpLiteral);
    }
    Ok(ip.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn obfuscated_loopback_spellings_parse_to_ipv4_literals() {
        let c = FetchConfig::builder()
            .allow_ip_literals(true)
            .build()
            .unwrap();
        for raw in [
            "https://127.0.0.1/",
            "https://0177.0.0.1/",
            "https://2130706433/",
            "https://127.1/",
            "https://0x7f.1/",
            "https://0x7f000001/",
            "https://017700000001/",
            "https://127.0.0.1./",
            "https://%31%32%37.0.0.1/",
            "https://[::ffff:127.0.0.1]/",
            "https://[::ffff:7f00:1]/",
            "https://[::127.0.0.1]/",
        ] {
            assert_eq!(admit(raw, &c), Err(AdmissionError::BlockedAddress), "{raw}");
        }
    }

    #[test]
    fn literals_need_the_knob_even_when_public() {
        let strict = FetchConfig::default();
        assert_eq!(
            admit("https://8.8.8.8/", &strict),
            Err(AdmissionError::IpLiteral)
        );
        let open = FetchConfig::builder()
            .allow_ip_literals(true)
            .build()
            .unwrap();
        let ok = admit("https://8.8.8.8/", &open).unwrap();
        assert_eq!(ok.host(), "8.8.8.8");
    }

    #[test]
    fn hosts_are_canonical_and_fragments_dropped() {
        let ok = admit("https://Example.COM./a?q=1#frag", &FetchConfig::default()).unwrap();
        assert_eq!(ok.host(), "example.com");
        assert_eq!(ok.url().fragment(), None);
        assert_eq!(ok.url().query(), Some("q=1"));
    }

    #[test]
    fn hardness() {
        let c = FetchConfig::default();
        assert!(!admit("http://example.com/", &c).unwrap_err().is_hard());
        assert!(!admit("file:///etc/passwd", &c).unwrap_err().is_hard());
        assert!(admit("https://u:p@example.com/", &c).unwrap_err().is_hard());
        assert!(
            admit("https://example.com:8443/", &c)
                .unwrap_err()
                .is_hard()
        );
        assert!(admit("not a url", &c).unwrap_err().is_hard());
        let long = format!("https://example.com/{}", "a".repeat(MAX_URL_LEN));
        assert_eq!(admit(&long, &c), Err(AdmissionError::TooLong));
    }
}
