//! The fetch itself: the hardened HTTP client, the redirect loop (layer 3 of the SSRF
//! boundary), the capped body read and the routing to extraction.

use std::sync::Arc;
use std::time::Duration;

use promptforge_core::tools::ToolError;
use reqwest::header::{CONTENT_TYPE, LOCATION};
use reqwest::{Client, Response, StatusCode};
use url::Url;

use crate::admission::{AdmissionError, AdmittedUrl, admit, admit_url};
use crate::config::{ConfigError, FetchConfig};
use crate::content_type::{Route, decode, html_meta_charset, route};
use crate::extract::{Extraction, Rendering, html_to_markdown};
use crate::redact::redacted;
use crate::resolver::{GuardedResolver, HostLookup, ResolveRefusal, find_refusal};

/// The `Accept` header: the types the tool reads, HTML first.
const ACCEPT: &str = "text/html,application/xhtml+xml,application/xml;q=0.9,\
                      application/json;q=0.9,text/*;q=0.8,*/*;q=0.1";

/// The longest time spent connecting to one address.
const MAX_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// A fetched page, ready for the provenance header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Page {
    pub(crate) final_url: Url,
    pub(crate) truncated: bool,
    pub(crate) extraction: Extraction,
    pub(crate) text: String,
}

/// What a fetch produced: a page, or a soft outcome (a message the model can act on).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Outcome {
    Page(Page),
    Soft(String),
}

/// The HTTP client and the policy it enforces.
#[derive(Debug, Clone)]
pub(crate) struct Fetcher {
    client: Client,
    config: FetchConfig,
}

impl Fetcher {
    /// Builds the hardened client: no redirects followed by the client, no Referer, no
    /// proxies (ambient `HTTP_PROXY` / `HTTPS_PROXY` ignored), no cookie store, no pooled
    /// connections, and the guarded resolver. TLS trusts the platform's roots plus the
    /// policy's extra root certificates.
    pub(crate) fn new(
        config: FetchConfig,
        lookup: Arc<dyn HostLookup>,
    ) -> Result<Self, ConfigError> {
        let resolver = GuardedResolver::new(lookup, config.address_policy.clone());
        let mut headers = reqwest::header::HeaderMap::new();
        headers.insert(
            reqwest::header::ACCEPT,
            reqwest::header::HeaderValue::from_static(ACCEPT),
        );
        let roots = config
            .root_certificates
            .iter()
            .map(|der| reqwest::Certificate::from_der(der))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| ConfigError::HttpClient(e.without_url().to_string()))?;
        let client = Client::builder()
            .default_headers(headers)
            .redirect(reqwest::redirect::Policy::none())
            .referer(false)
            .no_proxy()
            .pool_max_idle_per_host(0)
            .dns_resolver(resolver)
            .tls_certs_merge(roots)
            .user_agent(config.user_agent.clone())
            .connect_timeout(config.timeout.min(MAX_CONNECT_TIMEOUT))
            .timeout(config.timeout)
            .build()
            .map_err(|e| ConfigError::HttpClient(e.without_url().to_string()))?;
        Ok(Self { client, config })
    }

    pub(crate) fn config(&self) -> &FetchConfig {
        &self.config
    }

    /// Fetches `raw_url`. Hard refusals are `Err`; everything else is an [`Outcome`].
    pub(crate) async fn fetch(
        &self,
        raw_url: &str,
        rendering: Rendering,
        max_chars: usize,
    ) -> Result<Outcome, ToolError> {
        let admitted = match admit(raw_url, &self.config) {
            Ok(a) => a,
            Err(e) if e.is_hard() => return Err(hard_admission(&e)),
            Err(e) => return Ok(Outcome::Soft(format!("web_fetch refused the URL: {e}"))),
        };
        let shown = redacted(admitted.url());
        match tokio::time::timeout(
            self.config.timeout,
            self.follow(admitted, rendering, max_chars),
        )
        .await
        {
            Ok(result) => result,
            Err(_) => Ok(Outcome::Soft(format!(
                "web_fetch could not fetch {shown}: timed out after {} ms",
                self.config.timeout.as_millis()
            ))),
        }
    }

    /// The redirect loop: every hop is re-admitted and connects through the guarded
    /// resolver; an https page may not lead to http; at most `max_redirects` hops.
    async fn follow(
        &self,
        first: AdmittedUrl,
        rendering: Rendering,
        max_chars: usize,
    ) -> Result<Outcome, ToolError> {
        let mut current = first;
        let mut hops: u8 = 0;
        loop {
            tracing::debug!(url = %redacted(current.url()), hop = hops, "fetching");
            let response = match self.client.get(current.url().clone()).send().await {
                Ok(r) => r,
                Err(e) => return transport_failure(&current, &e),
            };
            let status = response.status();
            if !matches!(status.as_u16(), 301 | 302 | 303 | 307 | 308) {
                if !status.is_success() {
                    return Ok(soft(&current, &format!("HTTP {}", status_text(status))));
                }
                return self.read(current, response, rendering, max_chars).await;
            }
            let Some(location) = response.headers().get(LOCATION) else {
                return Ok(soft(
                    &current,
                    &format!("HTTP {} without a Location header", status_text(status)),
                ));
            };
            let refused = |why: &str| Ok(soft(&current, &format!("redirect refused: {why}")));
            if hops >= self.config.max_redirects {
                return refused(&format!(
                    "more than {} redirects (the hop cap)",
                    self.config.max_redirects
                ));
            }
            let next = location
                .to_str()
                .map_err(|_| "the Location header is not a URL".to_owned())
                .and_then(|loc| redirect_target(current.url(), loc, &self.config));
            match next {
                Ok(a) => current = a,
                Err(why) => return refused(&why),
            }
            hops += 1;
        }
    }

    /// Routes by type, enforces the byte cap while reading, decodes and extracts.
    async fn read(
        &self,
        current: AdmittedUrl,
        mut response: Response,
        rendering: Rendering,
        max_chars: usize,
    ) -> Result<Outcome, ToolError> {
        let header = response.headers().get(CONTENT_TYPE).map(|v| v.as_bytes());
        let (route, charset) = match route(header) {
            Ok(r) => r,
            Err(refusal) => return Ok(soft(&current, &refusal.to_string())),
        };
        let cap = self.config.max_bytes;
        if let Some(declared) = response.content_length()
            && declared > cap
        {
            return Ok(soft(
                &current,
                &format!("the body is too large: {declared} bytes declared, the cap is {cap}"),
            ));
        }
        let cap_len = usize::try_from(cap).unwrap_or(usize::MAX);
        let mut body: Vec<u8> = Vec::new();
        let mut cut = false;
        loop {
            match response.chunk().await {
                Ok(Some(chunk)) => {
                    let room = cap_len.saturating_sub(body.len());
                    if chunk.len() > room {
                        if route != Route::Text {
                            return Ok(soft(
                                &current,
                                &format!("the body is too large: more than {cap} bytes"),
                            ));
                        }
                        body.extend_from_slice(&chunk[..room]);
                        cut = true;
                        break;
                    }
                    body.extend_from_slice(&chunk);
                }
                Ok(None) => break,
                Err(e) if e.is_timeout() => {
                    return Ok(soft(&current, "timed out while reading the body"));
                }
                Err(e) => {
                    tracing::debug!(url = %redacted(current.url()), error = %e.without_url(), "body read failed");
                    return Ok(soft(&current, "the body could not be read to the end"));
                }
            }
        }
        drop(response);
        let charset = match (charset, route) {
            (None, Route::Html) => html_meta_charset(&body),
            (charset, _) => charset,
        };
        let text = decode(&body, charset.as_deref(), cut);
        drop(body);
        let (text, extraction) = match route {
            Route::Html => {
                let base = current.url().to_string();
                tokio::task::spawn_blocking(move || html_to_markdown(&text, Some(&base), rendering))
                    .await
                    .map_err(|_| ToolError::backend("web_fetch: HTML extraction failed"))?
            }
            Route::Structured | Route::Text => (text, Extraction::Plain),
        };
        let (text, char_cut) = truncate_chars(text, max_chars);
        Ok(Outcome::Page(Page {
            final_url: current.url().clone(),
            truncated: cut || char_cut,
            extraction,
            text,
        }))
    }
}

/// Re-admits a redirect's `Location` (resolved against `current`): the full URL policy
/// again, and no https to http downgrade. The error says why, without query or fragment.
pub(crate) fn redirect_target(
    current: &Url,
    location: &str,
    config: &FetchConfig,
) -> Result<AdmittedUrl, String> {
    let next = current
        .join(location)
        .map_err(|_| "the Location header is not a URL".to_owned())?;
    let shown = redacted(&next);
    if current.scheme() == "https" && next.scheme() == "http" {
        return Err(format!("https to http downgrade to {shown}"));
    }
    admit_url(next, config).map_err(|e| format!("{shown}: {e}"))
}

/// Cuts `text` to at most `max` characters, on a character boundary.
pub(crate) fn truncate_chars(mut text: String, max: usize) -> (String, bool) {
    match text.char_indices().nth(max) {
        Some((at, _)) => {
            text.truncate(at);
            (text, true)
        }
        None => (text, false),
    }
}

fn status_text(status: StatusCode) -> String {
    match status.canonical_reason() {
        Some(reason) => format!("{} {reason}", status.as_u16()),
        None => status.as_u16().to_string(),
    }
}

fn soft(current: &AdmittedUrl, why: &str) -> Outcome {
    Outcome::Soft(format!(
        "web_fetch could not fetch {}: {why}",
        redacted(current.url())
    ))
}

fn hard_admission(e: &AdmissionError) -> ToolError {
    let message = format!("web_fetch refused the URL: {e}");
    match e {
        AdmissionError::Port { .. }
        | AdmissionError::IpLiteral
        | AdmissionError::BlockedAddress => ToolError::refused(message),
        _ => ToolError::invalid_arguments(message),
    }
}

/// Maps a failed request. A resolver refusal is a hard error naming only the host; every
/// other failure is a soft outcome. Error details (which may name addresses) go to the
/// debug log only, without the URL.
fn transport_failure(current: &AdmittedUrl, e: &reqwest::Error) -> Result<Outcome, ToolError> {
    tracing::debug!(url = %redacted(current.url()), error = %e.without_url_ref(), "request failed");
    match find_refusal(e) {
        Some(ResolveRefusal::Blocked { host }) => Err(ToolError::refused(format!(
            "web_fetch refused: host {host} resolves only to blocked addresses"
        ))),
        Some(ResolveRefusal::NotFound { host }) => {
            Ok(soft(current, &format!("DNS lookup failed for host {host}")))
        }
        None if e.is_timeout() => Ok(soft(current, "timed out")),
        None if e.is_connect() => Ok(soft(
            current,
            &format!("could not connect to host {}", current.host()),
        )),
        None => Ok(soft(current, "the request failed")),
    }
}

/// `reqwest::Error::without_url` consumes the error; render it without the URL from a
/// reference instead.
trait WithoutUrlRef {
    fn without_url_ref(&self) -> String;
}

impl WithoutUrlRef for reqwest::Error {
    fn without_url_ref(&self) -> String {
        let mut out = if self.is_timeout() {
            "timeout".to_owned()
        } else if self.is_connect() {
            "connect error".to_owned()
        } else if self.is_body() || self.is_decode() {
            "body error".to_owned()
        } else {
            "request error".to_owned()
        };
        let mut source = std::error::Error::source(self);
        while let Some(s) = source {
            out.push_str(": ");
            out.push_str(&s.to_string());
            source = s.source();
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redirect_targets_are_readmitted() {
        let open = FetchConfig::builder().allow_http(true).build().unwrap();
        let https = Url::parse("https://a.example/x?s=1").unwrap();
        let http = Url::parse("http://a.example/x").unwrap();
        let err = redirect_target(&https, "http://b.example/y?token=secret", &open).unwrap_err();
        assert_eq!(
            err,
            "https to http downgrade to http://b.example/y?[redacted]"
        );
        let ok = redirect_target(&https, "/z#f", &open).unwrap();
        assert_eq!(ok.url().as_str(), "https://a.example/z");
        assert!(redirect_target(&http, "https://b.example/", &open).is_ok());
        assert!(redirect_target(&http, "http://b.example/", &open).is_ok());
        let strict = FetchConfig::default();
        assert!(
            redirect_target(&http, "http://b.example/", &strict)
                .unwrap_err()
                .contains("scheme")
        );
        for bad in [
            "file:///etc/passwd",
            "https://127.0.0.1/",
            "https://[::1]/",
            "https://u:p@b.example/",
            "https://b.example:22/",
            "gopher://b.example/",
        ] {
            assert!(redirect_target(&https, bad, &open).is_err(), "{bad}");
        }
    }

    #[test]
    fn truncation_is_on_char_boundaries() {
        assert_eq!(truncate_chars("héllo".into(), 2), ("hé".into(), true));
        assert_eq!(truncate_chars("héllo".into(), 5), ("héllo".into(), false));
        assert_eq!(truncate_chars("日本語".into(), 1), ("日".into(), true));
        assert_eq!(truncate_chars(String::new(), 1), (String::new(), false));
    }
}
