//! Diagnostic URLs: what a log line or a message may show of a URL.

use url::Url;

/// Renders `url` for diagnostics: scheme, host, port and path only. User info is dropped,
/// and a query or fragment is replaced by a `?[redacted]` / `#[redacted]` marker so a
/// `?token=secret` never reaches a log or the model.
pub fn redacted(url: &Url) -> String {
    let mut out = format!("{}://", url.scheme());
    if let Some(host) = url.host_str() {
        out.push_str(host);
    }
    if let Some(port) = url.port() {
        out.push(':');
        out.push_str(&port.to_string());
    }
    out.push_str(url.path());
    if url.query().is_some() {
        out.push_str("?[redacted]");
    }
    if url.fragment().is_some() {
        out.push_str("#[redacted]");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_fragment_and_userinfo_never_show() {
        let url = Url::parse("https://user:pw@Example.com:8443/a/b?token=secret#frag").unwrap();
        let shown = redacted(&url);
        assert_eq!(shown, "https://example.com:8443/a/b?[redacted]#[redacted]");
        assert!(!shown.contains("secret") && !shown.contains("pw") && !shown.contains("frag"));
        let plain = Url::parse("https://example.com/x").unwrap();
        assert_eq!(redacted(&plain), "https://example.com/x");
    }
}
