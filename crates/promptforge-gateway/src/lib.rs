//! promptforge-gateway: the one PromptForge process that talks to LLM backends.
//!
//! It serves an OpenAI-compatible HTTP API (`/v1/chat/completions` buffered and
//! streaming, `/v1/models`, `/v1/embeddings`, `/v1/rerank`, `/v1/tools/web_search`,
//! `/admin/*`), holds every credential behind [`Secret`], and routes each request by one
//! exact model-name lookup to the configured endpoint, substituting the backend's model
//! string on the way out and restoring the caller's on the way back. Every other request
//! field passes through verbatim.
//!
//! The key design choice: configuration is loaded in two phases (shape, then rules) into
//! an immutable [`config::Config`]; the live routing table is an `Arc` swapped atomically
//! by a profile switch, so a request always sees one whole, valid configuration.
//!
//! Modules: [`config`] (files, includes, env, validation), [`state`] (live runtime and
//! profile switch), [`routes`] (HTTP handlers and auth), [`relay`] (upstream calls and the
//! typed SSE relay), [`dialect`] (emulated tool calling), [`admission`] (dominion queues
//! with fair scheduling), [`search`] (the Brave web-search proxy), [`error`] (the OpenAI
//! error envelope), [`conn`] (the accept loop and per-connection bounds), [`shutdown`]
//! (the end of the drain), [`metrics`] (`GET /metrics` and the overhead headers),
//! [`local`] (llama-server children for GGUF models), [`cli`] and [`serve`] (the binary's
//! entry points).
//!
//! The public surface is what `main.rs` needs ([`cli`], [`logging`], [`serve`]) and
//! [`Secret`]; every other module is `pub(crate)`. The wire shapes (catalog entries, the
//! error envelope, web search, `Secret`) come from `promptforge-wire`, shared with core.

#![forbid(unsafe_code)]

pub(crate) mod admission;
pub mod cli;
pub(crate) mod config;
pub(crate) mod conn;
pub(crate) mod dialect;
pub(crate) mod error;
pub(crate) mod local;
pub mod logging;
pub(crate) mod metrics;
pub(crate) mod relay;
pub(crate) mod routes;
pub(crate) mod search;
pub(crate) mod secret;
pub mod serve;
pub(crate) mod shutdown;
pub(crate) mod state;

pub use secret::Secret;
