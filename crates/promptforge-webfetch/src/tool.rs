//! [`WebFetch`]: the `web_fetch` tool behind core's [`Tool`] trait.

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use promptforge_core::tools::{Tool, ToolError, ToolId, ToolOutput};
use serde::Deserialize;

use crate::config::{ConfigError, FetchConfig};
use crate::extract::Rendering;
use crate::fetch::{Fetcher, Outcome, Page};
use crate::resolver::{HostLookup, SystemLookup};

/// The name the model calls the tool by.
pub const WIRE_NAME: &str = "web_fetch";

const DESCRIPTION: &str = "Fetch a public web page or text document by URL and return its \
useful content as Markdown. The text comes behind a header: `url:` (the final URL after \
redirects), `truncated:` (whether a size cap cut it short) and `extraction:` (`readability` \
for an isolated article, `raw-html` for a whole-page render, `plain` for non-HTML text). \
HTML, JSON, XML and other text are read; PDFs, images, audio and video are not. Set `raw` to \
true to render the whole HTML page instead of the isolated article (for tables and \
listings). Set `max_chars` to ask for less text. Only public http(s) addresses are reachable.";

/// The arguments of one call, as the model sends them (`{"url": ..., "raw": ...,
/// "max_chars": ...}`); unknown fields are refused.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FetchArgs {
    /// The URL to fetch (required).
    pub url: String,
    /// Render the whole HTML page instead of the readability article (default `false`;
    /// ignored for non-HTML responses).
    #[serde(default)]
    pub raw: Option<bool>,
    /// Return at most this many characters; clamped to the policy's `max_chars`.
    #[serde(default)]
    pub max_chars: Option<u64>,
}

impl FetchArgs {
    /// Arguments for a plain fetch of `url`.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            raw: None,
            max_chars: None,
        }
    }

    /// Sets `raw`.
    pub fn raw(mut self, raw: bool) -> Self {
        self.raw = Some(raw);
        self
    }

    /// Sets `max_chars`.
    pub fn max_chars(mut self, max_chars: u64) -> Self {
        self.max_chars = Some(max_chars);
        self
    }
}

/// The SSRF-safe `web_fetch` tool. Cheap to share behind an `Arc`; every call builds no
/// new client.
pub struct WebFetch {
    id: ToolId,
    parameters: serde_json::Value,
    fetcher: Result<Fetcher, ConfigError>,
}

impl fmt::Debug for WebFetch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WebFetch")
            .field("id", &self.id)
            .field("config", &self.fetcher.as_ref().map(Fetcher::config))
            .finish_non_exhaustive()
    }
}

impl Default for WebFetch {
    fn default() -> Self {
        Self::new()
    }
}

impl WebFetch {
    /// The tool with the default policy ([`FetchConfig::default`]): HTTPS only, ports 80 and
    /// 443, no IP-literal URLs, every non-globally-reachable address blocked.
    ///
    /// Never panics: if the HTTP client cannot start, every call returns a backend
    /// [`ToolError`] saying so. Use [`WebFetch::try_with_config`] to see that at startup.
    pub fn new() -> Self {
        let fetcher = Fetcher::new(FetchConfig::default(), Arc::new(SystemLookup));
        Self::from_fetcher(fetcher)
    }

    /// The tool with a custom policy.
    ///
    /// # Errors
    ///
    /// [`ConfigError::HttpClient`] when the HTTP client cannot be built.
    pub fn try_with_config(config: FetchConfig) -> Result<Self, ConfigError> {
        Self::try_with_lookup(config, Arc::new(SystemLookup))
    }

    /// The tool with a custom policy and a custom DNS lookup (a deployment's own
    /// resolver, or a scripted one in tests). The lookup's answers still pass through the
    /// address policy.
    ///
    /// # Errors
    ///
    /// [`ConfigError::HttpClient`] when the HTTP client cannot be built.
    pub fn try_with_lookup(
        config: FetchConfig,
        lookup: Arc<dyn HostLookup>,
    ) -> Result<Self, ConfigError> {
        Fetcher::new(config, lookup).map(|f| Self::from_fetcher(Ok(f)))
    }

    fn from_fetcher(fetcher: Result<Fetcher, ConfigError>) -> Self {
        Self {
            id: ToolId::new("builtin", WIRE_NAME),
            parameters: parameters_schema(),
            fetcher,
        }
    }

    /// The policy this tool enforces (`None` when its HTTP client failed to start).
    pub fn config(&self) -> Option<&FetchConfig> {
        self.fetcher.as_ref().ok().map(Fetcher::config)
    }

    /// [`Tool::call`] with an already built JSON value, the shape the guide's examples use:
    /// `tool.call_json(serde_json::json!({ "url": "https://example.com" }))`.
    ///
    /// # Errors
    ///
    /// As [`WebFetch::fetch`], plus `InvalidArguments` when the value is not a valid
    /// arguments object.
    pub async fn call_json(&self, arguments: serde_json::Value) -> Result<ToolOutput, ToolError> {
        let args = FetchArgs::deserialize(arguments).map_err(invalid_args)?;
        self.fetch(args).await
    }

    /// Typed convenience for [`Tool::call`]: fetches with already parsed arguments.
    ///
    /// # Errors
    ///
    /// A [`ToolError`] for hard failures (unparseable URL, userinfo, port, IP literal,
    /// blocked address, invalid `max_chars`); soft failures come back as untrusted text.
    pub async fn fetch(&self, args: FetchArgs) -> Result<ToolOutput, ToolError> {
        let fetcher = self
            .fetcher
            .as_ref()
            .map_err(|e| ToolError::backend(format!("web_fetch is unavailable: {e}")))?;
        let ceiling = fetcher.config().max_chars;
        let max_chars = match args.max_chars {
            None => ceiling,
            Some(0) => {
                return Err(ToolError::invalid_arguments(
                    "web_fetch: max_chars must be at least 1",
                ));
            }
            Some(n) => usize::try_from(n).unwrap_or(usize::MAX).min(ceiling),
        };
        let rendering = match Rendering::from_raw(args.raw.unwrap_or(false)) {
            Rendering::Article if !fetcher.config().article_cleanup => Rendering::FullArticle,
            rendering => rendering,
        };
        match fetcher.fetch(&args.url, rendering, max_chars).await? {
            Outcome::Page(page) => Ok(ToolOutput::untrusted(render(&page))),
            Outcome::Soft(message) => {
                tracing::debug!(%message, "web_fetch soft outcome");
                Ok(ToolOutput::untrusted(message))
            }
        }
    }
}

/// The provenance header and the text.
fn render(page: &Page) -> String {
    format!(
        "url: {}\ntruncated: {}\nextraction: {}\n\n{}",
        page.final_url, page.truncated, page.extraction, page.text
    )
}

fn invalid_args(e: serde_json::Error) -> ToolError {
    ToolError::invalid_arguments(format!(
        "web_fetch arguments must be a JSON object with a string \"url\" and optional \
         boolean \"raw\" and positive integer \"max_chars\": {e}"
    ))
}

fn parameters_schema() -> serde_json::Value {
    serde_json::json!({
        "type": "object",
        "properties": {
            "url": {
                "type": "string",
                "description": "The http(s) URL to fetch."
            },
            "raw": {
                "type": "boolean",
                "description": "Render the whole HTML page instead of the isolated article. Default false."
            },
            "max_chars": {
                "type": "integer",
                "minimum": 1,
                "description": "Return at most this many characters (the policy's ceiling still applies)."
            }
        },
        "required": ["url"],
        "additionalProperties": false
    })
}

#[async_trait]
impl Tool for WebFetch {
    fn id(&self) -> &ToolId {
        &self.id
    }

    fn wire_name(&self) -> &str {
        WIRE_NAME
    }

    fn description(&self) -> &str {
        DESCRIPTION
    }

    fn parameters(&self) -> &serde_json::Value {
        &self.parameters
    }

    async fn call(&self, arguments: &str) -> Result<ToolOutput, ToolError> {
        let args: FetchArgs = serde_json::from_str(arguments).map_err(invalid_args)?;
        self.fetch(args).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use promptforge_core::tools::ToolErrorKind;

    #[test]
    fn identity_and_schema() {
        let tool = WebFetch::new();
        assert_eq!(tool.id(), &ToolId::new("builtin", "web_fetch"));
        assert_eq!(tool.wire_name(), "web_fetch");
        assert!(tool.description().contains("Markdown"));
        assert_eq!(tool.parameters()["required"], serde_json::json!(["url"]));
        assert_eq!(tool.config(), Some(&FetchConfig::default()));
    }

    #[tokio::test]
    async fn bad_arguments_are_invalid_arguments() {
        let tool = WebFetch::new();
        for args in [
            "",
            "[]",
            "{}",
            r#"{"url": 5}"#,
            r#"{"url": "https://example.com", "max_chars": -1}"#,
            r#"{"url": "https://example.com", "max_chars": 0}"#,
            r#"{"url": "https://example.com", "extra": 1}"#,
        ] {
            let err = tool.call(args).await.unwrap_err();
            assert_eq!(err.kind(), ToolErrorKind::InvalidArguments, "{args}: {err}");
        }
        let err = tool
            .call_json(serde_json::json!({ "uri": "x" }))
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ToolErrorKind::InvalidArguments);
        // A well-formed value reaches admission: a refused port is a hard Refused error.
        let err = tool
            .call_json(serde_json::json!({ "url": "https://example.com:8443/" }))
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ToolErrorKind::Refused);
    }

    #[test]
    fn args_accept_nulls_and_builders() {
        let a: FetchArgs =
            serde_json::from_str(r#"{"url":"https://x.example","raw":null,"max_chars":null}"#)
                .unwrap();
        assert_eq!(a, FetchArgs::new("https://x.example"));
        let b = FetchArgs::new("u").raw(true).max_chars(5);
        assert_eq!((b.raw, b.max_chars), (Some(true), Some(5)));
    }
}
