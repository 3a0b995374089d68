//! # promptforge-webfetch
//!
//! The SSRF-safe `web_fetch` tool: a model hands over any URL and gets back the page's
//! useful content as Markdown, behind a provenance header, without ever reaching the
//! deployment's internal network.
//!
//! ```no_run
//! use promptforge_core::tools::Tool;
//! use promptforge_webfetch::WebFetch;
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let tool = WebFetch::new();
//! let output = tool.call(r#"{"url": "https://example.com/article"}"#).await?;
//! // url: https://example.com/article
//! // truncated: false
//! // extraction: readability
//! //
//! // # Article Title ...
//! assert!(!output.is_trusted());
//! # Ok(()) }
//! ```
//!
//! ## The SSRF boundary
//!
//! 1. **URL admission** ([`admit`]) before any network access: http(s) only (http only when
//!    allowed), no userinfo, allowed ports only, no IP-literal hosts unless allowed and then
//!    only outside blocked space; obfuscated IPv4 spellings are normalised by WHATWG parsing
//!    first.
//! 2. **A guarded DNS resolver** plugged into the HTTP client, run at connect time on every
//!    hop: answers are filtered through the address policy ([`is_special_use`], `deny_cidr`,
//!    `allow_host_address`); nothing is cached and connections are not pooled.
//! 3. **Redirects** are followed by hand: each hop is re-admitted, https to http is
//!    refused, and the hop cap is enforced.
//! 4. **No ambient identity**: no cookie store, no Authorization, no Referer, proxies from
//!    the environment ignored.
//!
//! ## Errors
//!
//! Hard errors ([`promptforge_core::ToolError`]) are reserved for URLs no retry can help:
//! unparseable, userinfo, port, IP literal, blocked address. Everything else (HTTP status,
//! timeout, DNS failure, type, size, body read, refused redirect, blocked scheme) is
//! returned as untrusted text the model can act on. Messages name hosts, never resolved
//! addresses or ranges, and never show a query string or fragment.
#![forbid(unsafe_code)]

mod address_policy;
mod admission;
mod cleanup;
mod config;
mod content_type;
mod extract;
mod fetch;
mod redact;
mod resolver;
mod streaming;
mod tool;

pub use address_policy::{
    BLOCKED_V4, BLOCKED_V6, BlockedRange, Cidr, CidrError, is_special_use, normalize,
};
pub use admission::{AdmissionError, AdmittedUrl, MAX_URL_LEN, admit, admit_url};
pub use cleanup::{CleanupRule, Dropped};
pub use config::{
    ConfigError, DEFAULT_MAX_BYTES, DEFAULT_MAX_CHARS, DEFAULT_MAX_REDIRECTS, DEFAULT_PORTS,
    DEFAULT_TIMEOUT, DEFAULT_USER_AGENT, FetchConfig, FetchConfigBuilder, MAX_MAX_BYTES,
    MAX_MAX_CHARS, MAX_MAX_REDIRECTS, MAX_TIMEOUT,
};
pub use extract::{
    CleanupExplanation, Extraction, MIN_ARTICLE_CHARS, Rendering, explain_cleanup,
    full_article_markdown, html_to_markdown, readability_markdown, whole_page_markdown,
};
pub use redact::redacted;
pub use resolver::{HostLookup, SystemLookup};
pub use streaming::MAX_STREAMED_SEGMENTS;
pub use tool::{FetchArgs, WIRE_NAME, WebFetch};

/// The README's examples, compiled and run as doctests so they stay true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
