//! The built-in web search tool: a Brave Search proxy with a fixed post-processing
//! pipeline. The Brave key is a [`crate::Secret`] sent only as the
//! `X-Subscription-Token` header; it never reaches a response or a log line.

pub(crate) mod brave;
pub(crate) mod pipeline;
pub(crate) mod request;

use crate::relay::AttemptFailure;

/// Why a search failed (`routes/` answers it with an error envelope).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum SearchError {
    /// The request is invalid (the message names the field).
    #[error("{0}")]
    Invalid(String),
    /// The provider failed, like an upstream attempt (transport, status, rate limit,
    /// undecodable body).
    #[error("{0}")]
    Provider(AttemptFailure),
}
