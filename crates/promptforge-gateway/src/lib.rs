//! promptforge-gateway: the one PromptForge process that talks to LLM backends.
//!
//! It serves an OpenAI-compatible HTTP API (`/v1/chat/completions` buffered and
//! streaming, `/v1/models`, `/v1/embeddings`, `/v1/rerank`, `/v1/tools/web_search`,
//! `/admin/*`), holds every credential behind [`Secret`], and routes each request by one
//! exact model-name lookup to the configured endpoints, substituting the backend's model
//! string on the way out and restoring the caller's on the way back. Every other request
//! field passes through verbatim.
//!
//! The shape is a one-way pipeline, each stage depending only on the ones before it:
//! [`config`] (files, includes, env, validation) → [`plan`] (the immutable routing table
//! of one profile) → [`relay`] (the [`relay::transport::Transport`] seam, failover, the
//! SSE relay) → [`routes`] (HTTP handlers, the one layer function, the one error map),
//! with [`app`] on top (boot, the live plan, the transactional profile switch) and
//! [`conn`] / [`serve`] serving it. Beside the pipeline: [`admission`] (dominion queues
//! with fair scheduling), [`local`] (llama-server children: the local overlay the plan
//! routes to), [`metrics`] (`GET /metrics`, the per-request trace), [`otel`] (request
//! spans over OTLP, continuing the caller's `traceparent`), [`search`] (the Brave
//! web-search proxy), [`dialect`] (emulated tool calling), [`shutdown`] (the end of the
//! drain). `ARCHITECTURE.md` has the layer order and how it is checked.
//!
//! The public surface is what `main.rs` needs ([`cli`], [`logging`], [`serve`]) and
//! [`Secret`]; every other module is `pub(crate)`. The wire shapes (catalog entries, the
//! error envelope, web search, `Secret`) come from `promptforge-wire`, shared with core.

#![forbid(unsafe_code)]

pub(crate) mod admission;
pub(crate) mod app;
pub mod cli;
pub(crate) mod config;
pub(crate) mod conn;
pub(crate) mod dialect;
pub(crate) mod local;
pub mod logging;
pub(crate) mod metrics;
pub(crate) mod otel;
pub(crate) mod plan;
pub(crate) mod relay;
pub(crate) mod routes;
pub(crate) mod search;
pub(crate) mod secret;
pub mod serve;
pub(crate) mod shutdown;
#[cfg(test)]
mod tests;

pub use secret::Secret;
