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
//! (the end of the drain), [`metrics`] (`GET /metrics` and the overhead headers), [`local`] (llama-server children for GGUF models), [`cli`] and [`serve`] (the binary's entry points).

#![forbid(unsafe_code)]

pub mod admission;
pub mod cli;
pub mod config;
pub mod conn;
pub mod dialect;
pub mod error;
pub mod local;
pub mod logging;
pub mod metrics;
pub mod relay;
pub mod routes;
pub mod search;
pub mod secret;
pub mod serve;
pub mod shutdown;
pub mod state;

pub use secret::Secret;
