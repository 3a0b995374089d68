//! The gateway client: chat completions, the model catalog and the web-search proxy.
//!
//! The client speaks the OpenAI wire format to a PromptForge gateway (or any
//! OpenAI-compatible server) with a bearer token. The token is a [`Secret`]: it never
//! appears in `Debug`, `Display` or logs.

mod catalog;
mod error;
mod wire;

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use reqwest::{StatusCode, Url};
use serde_json::Value as Json;

pub use catalog::{CatalogError, ModelCatalog, ModelDescriptor, ModelKind, Thinking};
pub use error::{CompletionError, CompletionErrorKind};
pub use promptforge_wire::{Secret, WebSearchRequest};
pub use wire::{ChatMessage, ChatRequest, ChatResponse, ToolCall, ToolSpec};

/// The environment variable holding the gateway URL.
pub const URL_VAR: &str = "PROMPTFORGE_GATEWAY_URL";
/// The environment variable holding the gateway bearer token.
pub const KEY_VAR: &str = "PROMPTFORGE_GATEWAY_API_KEY";

/// Per-request limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestLimits {
    /// The whole-request timeout.
    pub timeout: Duration,
    /// The largest response body accepted.
    pub max_response_bytes: u64,
}

impl Default for RequestLimits {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(120),
            max_response_bytes: 16 * 1024 * 1024,
        }
    }
}

/// A client for one gateway. Cheap to clone.
#[derive(Clone)]
pub struct GatewayClient {
    inner: Option<Arc<Inner>>,
}

#[derive(Clone)]
struct Inner {
    base: Url,
    key: Secret,
    /// Where the key came from, named when the gateway refuses it.
    key_source: String,
    http: reqwest::Client,
}

impl fmt::Debug for GatewayClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.inner {
            Some(inner) => f
                .debug_struct("GatewayClient")
                .field("endpoint", &inner.base.as_str())
                .field("key", &inner.key)
                .finish(),
            None => f.write_str("GatewayClient(disabled)"),
        }
    }
}

impl fmt::Display for GatewayClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.inner {
            Some(inner) => write!(f, "gateway {}", inner.base),
            None => f.write_str("disabled gateway client"),
        }
    }
}

impl GatewayClient {
    /// A client for the gateway at `endpoint` (its base URL, with or without a trailing
    /// `/v1`) authenticating with `key`.
    ///
    /// The URL must be `http` or `https` with a host and no credentials, query or fragment;
    /// the key must not be empty.
    pub fn new(endpoint: &str, key: &str) -> Result<Self, CompletionError> {
        let base = validate_endpoint(endpoint)?;
        if key.trim().is_empty() {
            return Err(CompletionError::config("the gateway API key is empty"));
        }
        let http = reqwest::Client::builder()
            .no_proxy()
            .connect_timeout(Duration::from_secs(10))
            .build()
            .map_err(|e| CompletionError::config(format!("cannot build the HTTP client: {e}")))?;
        Ok(Self {
            inner: Some(Arc::new(Inner {
                base,
                key: Secret::new(key),
                key_source: "the gateway API key".to_owned(),
                http,
            })),
        })
    }

    /// Names where the key came from (an environment variable, a config key), so that a
    /// gateway refusing it (HTTP 401 or 403) is reported as "the gateway refused the key in
    /// `source`". [`GatewayClient::from_env`] sets `PROMPTFORGE_GATEWAY_API_KEY`.
    #[must_use]
    pub fn with_key_source(self, source: impl Into<String>) -> Self {
        let Some(inner) = self.inner else {
            return self;
        };
        let inner = Arc::unwrap_or_clone(inner);
        Self {
            inner: Some(Arc::new(Inner {
                key_source: source.into(),
                ..inner
            })),
        }
    }

    /// A client from `PROMPTFORGE_GATEWAY_URL` and `PROMPTFORGE_GATEWAY_API_KEY`; neither
    /// being set is a `Config` error too.
    pub fn from_env() -> Result<Self, CompletionError> {
        Self::from_env_if_configured()?.ok_or_else(|| {
            CompletionError::config(format!(
                "no gateway is configured: set {URL_VAR} and {KEY_VAR}"
            ))
        })
    }

    /// The environment rule: neither variable set (or both empty) is `Ok(None)`, local-only
    /// mode; both set is a client; exactly one set is a `Config` error naming the missing one.
    pub fn from_env_if_configured() -> Result<Option<Self>, CompletionError> {
        let read = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
        Self::from_values(read(URL_VAR), read(KEY_VAR))
    }

    fn from_values(
        url: Option<String>,
        key: Option<String>,
    ) -> Result<Option<Self>, CompletionError> {
        match (url, key) {
            (None, None) => Ok(None),
            (Some(url), Some(key)) => {
                Self::new(&url, &key).map(|client| Some(client.with_key_source(KEY_VAR)))
            }
            (None, Some(_)) => Err(CompletionError::config(format!(
                "{KEY_VAR} is set but {URL_VAR} is missing or empty; both are required to reach the gateway"
            ))),
            (Some(_), None) => Err(CompletionError::config(format!(
                "{URL_VAR} is set but {KEY_VAR} is missing or empty; both are required to reach the gateway"
            ))),
        }
    }

    /// A client whose every call fails with [`CompletionErrorKind::Disabled`].
    pub fn disabled() -> Self {
        Self { inner: None }
    }

    /// Whether this client can reach a gateway.
    pub fn is_enabled(&self) -> bool {
        self.inner.is_some()
    }

    /// The normalised base URL.
    pub fn endpoint(&self) -> Option<&str> {
        self.inner.as_ref().map(|inner| inner.base.as_str())
    }

    /// The key, for the trace's redaction list (never recorded or printed).
    pub(crate) fn key_for_redaction(&self) -> Option<&str> {
        self.inner.as_ref().map(|inner| inner.key.expose())
    }

    fn inner(&self) -> Result<&Inner, CompletionError> {
        self.inner.as_deref().ok_or_else(|| {
            CompletionError::new(
                CompletionErrorKind::Disabled,
                "model calls are disabled: no gateway client is configured",
            )
        })
    }

    /// One chat completion.
    pub async fn chat(
        &self,
        request: &ChatRequest,
        limits: RequestLimits,
    ) -> Result<ChatResponse, CompletionError> {
        self.chat_traced(request, limits, None)
            .await
            .map(|(response, _)| response)
    }

    /// One chat completion carrying `traceparent` (W3C Trace Context) when given; also
    /// returns how long the first byte of the response body took to arrive.
    pub(crate) async fn chat_traced(
        &self,
        request: &ChatRequest,
        limits: RequestLimits,
        traceparent: Option<&str>,
    ) -> Result<(ChatResponse, Option<Duration>), CompletionError> {
        let what = "chat completion";
        let (raw, first_byte) = self
            .post_json_traced(
                "v1/chat/completions",
                &request.to_json(),
                limits,
                what,
                traceparent,
            )
            .await?;
        let response =
            ChatResponse::from_json(raw).map_err(|why| CompletionError::malformed(what, why))?;
        Ok((response, first_byte))
    }

    /// `GET /v1/models`.
    pub async fn models(&self, limits: RequestLimits) -> Result<ModelCatalog, CompletionError> {
        let what = "model catalog";
        let inner = self.inner()?;
        let url = inner.url("v1/models")?;
        let response = inner
            .http
            .get(url.clone())
            .bearer_auth(inner.key.expose())
            .timeout(limits.timeout)
            .send()
            .await
            .map_err(|e| CompletionError::transport(&e, what, &url))?;
        let (body, _) = read_body(response, limits, &Call::new(inner, what, &url), None).await?;
        ModelCatalog::from_models_json(&body).map_err(|e| CompletionError::malformed(what, e))
    }

    /// `POST /v1/tools/web_search`; returns the response body as text (the JSON the
    /// gateway sent, handed to the model as it is).
    pub async fn web_search(
        &self,
        request: &WebSearchRequest,
        limits: RequestLimits,
    ) -> Result<String, CompletionError> {
        let body = serde_json::to_value(request).map_err(|e| {
            CompletionError::config(format!("cannot encode the web search request: {e}"))
        })?;
        let raw = self
            .post_json("v1/tools/web_search", &body, limits, "web search")
            .await?;
        Ok(raw.to_string())
    }

    async fn post_json(
        &self,
        path: &str,
        body: &Json,
        limits: RequestLimits,
        what: &str,
    ) -> Result<Json, CompletionError> {
        self.post_json_traced(path, body, limits, what, None)
            .await
            .map(|(json, _)| json)
    }

    async fn post_json_traced(
        &self,
        path: &str,
        body: &Json,
        limits: RequestLimits,
        what: &str,
        traceparent: Option<&str>,
    ) -> Result<(Json, Option<Duration>), CompletionError> {
        let inner = self.inner()?;
        let url = inner.url(path)?;
        let mut request = inner
            .http
            .post(url.clone())
            .bearer_auth(inner.key.expose())
            .timeout(limits.timeout)
            .json(body);
        if let Some(traceparent) = traceparent {
            request = request.header("traceparent", traceparent);
        }
        let sent = Instant::now();
        let response = request
            .send()
            .await
            .map_err(|e| CompletionError::transport(&e, what, &url))?;
        let (bytes, first_byte) =
            read_body(response, limits, &Call::new(inner, what, &url), Some(sent)).await?;
        let json =
            serde_json::from_slice(&bytes).map_err(|e| CompletionError::malformed(what, e))?;
        Ok((json, first_byte))
    }
}

impl Inner {
    fn url(&self, path: &str) -> Result<Url, CompletionError> {
        self.base
            .join(path)
            .map_err(|e| CompletionError::config(format!("cannot build the request URL: {e}")))
    }
}

/// What one request was, for its error messages.
struct Call<'a> {
    what: &'a str,
    url: &'a Url,
    key_source: &'a str,
}

impl<'a> Call<'a> {
    fn new(inner: &'a Inner, what: &'a str, url: &'a Url) -> Self {
        Self {
            what,
            url,
            key_source: &inner.key_source,
        }
    }
}

/// Reads a response body up to the byte cap; non-success statuses become backend errors.
/// With `sent`, also returns how long after it the first body byte arrived.
async fn read_body(
    response: reqwest::Response,
    limits: RequestLimits,
    call: &Call<'_>,
    sent: Option<Instant>,
) -> Result<(Vec<u8>, Option<Duration>), CompletionError> {
    let what = call.what;
    let status = response.status();
    let too_large = || {
        CompletionError::malformed(
            what,
            format!(
                "the body exceeds {} bytes (RunLimits::max_response_bytes)",
                limits.max_response_bytes
            ),
        )
    };
    if response
        .content_length()
        .is_some_and(|len| len > limits.max_response_bytes)
    {
        return Err(too_large());
    }
    let mut body = Vec::new();
    let mut first_byte = None;
    let mut stream = response.bytes_stream();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| CompletionError::transport(&e, what, call.url))?;
        if first_byte.is_none() && !chunk.is_empty() {
            first_byte = sent.map(|sent| sent.elapsed());
        }
        if (body.len() + chunk.len()) as u64 > limits.max_response_bytes {
            return Err(too_large());
        }
        body.extend_from_slice(&chunk);
    }
    if status != StatusCode::OK && !status.is_success() {
        return Err(CompletionError::backend(
            status.as_u16(),
            what,
            call.key_source,
            String::from_utf8_lossy(&body).into_owned(),
        ));
    }
    Ok((body, first_byte))
}

/// Validates and normalises a gateway base URL: the result ends with `/` and has no `/v1`.
fn validate_endpoint(endpoint: &str) -> Result<Url, CompletionError> {
    let url = Url::parse(endpoint.trim())
        .map_err(|e| CompletionError::config(format!("the gateway URL is not a valid URL: {e}")))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(CompletionError::config(format!(
            "the gateway URL must use http or https, not `{}`",
            url.scheme()
        )));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(CompletionError::config("the gateway URL has no host"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(CompletionError::config(
            "the gateway URL must not embed credentials; use PROMPTFORGE_GATEWAY_API_KEY",
        ));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(CompletionError::config(
            "the gateway URL must not have a query string or fragment",
        ));
    }
    let mut url = url;
    let path = url.path().trim_end_matches('/');
    let path = path.strip_suffix("/v1").unwrap_or(path);
    let normalised = format!("{path}/");
    url.set_path(&normalised);
    Ok(url)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_are_validated_and_normalised() {
        let ok = |url: &str| validate_endpoint(url).unwrap().to_string();
        assert_eq!(ok("http://127.0.0.1:8080"), "http://127.0.0.1:8080/");
        assert_eq!(ok("https://gw.example.com/v1/"), "https://gw.example.com/");
        assert_eq!(
            ok("https://gw.example.com/base/v1"),
            "https://gw.example.com/base/"
        );
        assert_eq!(
            ok("https://gw.example.com/base//"),
            "https://gw.example.com/base/"
        );
        for bad in [
            "ftp://x",
            "not a url",
            "http://user:pw@host",
            "http://host?x=1",
            "http://host#frag",
            "file:///etc/passwd",
        ] {
            let error = validate_endpoint(bad).unwrap_err();
            assert_eq!(error.kind(), CompletionErrorKind::Config, "{bad}");
        }
    }

    #[test]
    fn keys_are_required_and_redacted() {
        assert_eq!(
            GatewayClient::new("http://h", " ").unwrap_err().kind(),
            CompletionErrorKind::Config
        );
        let client = GatewayClient::new("http://h", "sekrit-token").unwrap();
        assert!(!format!("{client:?}").contains("sekrit"));
        assert!(!client.to_string().contains("sekrit"));
        assert!(format!("{client:?}").contains("redacted"));
    }

    #[test]
    fn the_environment_rule_is_both_or_neither() {
        let some = |s: &str| Some(s.to_owned());
        assert!(GatewayClient::from_values(None, None).unwrap().is_none());
        assert!(
            GatewayClient::from_values(some("http://h"), some("k"))
                .unwrap()
                .is_some()
        );
        let error = GatewayClient::from_values(None, some("k")).unwrap_err();
        assert!(
            error
                .to_string()
                .starts_with("PROMPTFORGE_GATEWAY_API_KEY is set but")
        );
        let error = GatewayClient::from_values(some("http://h"), None).unwrap_err();
        assert!(
            error
                .to_string()
                .starts_with("PROMPTFORGE_GATEWAY_URL is set but")
        );
        assert_eq!(error.kind(), CompletionErrorKind::Config);
    }

    #[tokio::test]
    async fn disabled_clients_fail_every_call() {
        let client = GatewayClient::disabled();
        let error = client.models(RequestLimits::default()).await.unwrap_err();
        assert_eq!(error.kind(), CompletionErrorKind::Disabled);
        assert!(!error.is_retryable());
    }
}
