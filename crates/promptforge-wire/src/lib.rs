//! promptforge-wire: the wire contract between PromptForge's core client and its gateway.
//!
//! Both `promptforge-core` (the client side) and `promptforge-gateway` (the server side)
//! depend on this crate, so the JSON they exchange is written once:
//!
//! - [`catalog`]: a `GET /v1/models` entry ([`ModelEntry`]), [`ModelKind`] and [`Thinking`];
//!   unknown enum values are rejected with an error naming the value and the model id.
//! - [`envelope`]: the OpenAI error envelope ([`ErrorEnvelope`]) and its `error.type`
//!   values ([`ErrorType`]).
//! - [`search`]: the `POST /v1/tools/web_search` request ([`WebSearchRequest`]), its
//!   enumerated fields ([`Freshness`], [`SafeSearch`]) and bounds, and the response
//!   ([`WebSearchResponse`]).
//! - [`secret`]: [`Secret`], the one credential type, redacted as `<redacted>`.
//!
//! The crate holds serde types and their pure parsing rules only: no HTTP client or server,
//! no async runtime. The gateway still shares no runtime code with core.

#![forbid(unsafe_code)]

pub mod catalog;
pub mod envelope;
pub mod search;
pub mod secret;

pub use catalog::{CatalogError, ModelEntry, ModelKind, ModelList, Thinking, UnknownValue};
pub use envelope::{ErrorBody, ErrorEnvelope, ErrorType};
pub use search::{
    Freshness, MAX_COUNT, MAX_DOMAINS, SafeSearch, WebSearchHit, WebSearchRequest,
    WebSearchResponse,
};
pub use secret::{REDACTED, Secret};
