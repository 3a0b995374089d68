//! The built-in web search tool: a Brave Search proxy with a fixed post-processing
//! pipeline. The Brave key is a [`crate::Secret`] sent only as the
//! `X-Subscription-Token` header; it never reaches a response or a log line.

pub(crate) mod brave;
pub(crate) mod pipeline;
pub(crate) mod request;
