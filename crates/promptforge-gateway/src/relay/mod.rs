//! Talking to upstreams: the [`transport::Transport`] seam and its HTTP implementation,
//! failover across a model's routes, and the typed SSE relay.
//!
//! Nothing here knows the HTTP answers the gateway gives: failures are typed
//! ([`transport::AttemptFailure`], [`failover::RelayError`], [`sse::StreamError`]) and
//! `routes/` maps them to envelopes; what happens is reported through
//! [`failover::Observer`].

pub(crate) mod failover;
pub(crate) mod h1;
pub(crate) mod http;
pub(crate) mod pooled;
pub(crate) mod sse;
pub(crate) mod transport;

pub(crate) use transport::{Answer, AttemptFailure, FailureKind, Transport};
