//! Talking to upstreams: sending requests, mapping failures, relaying SSE streams.

pub mod failover;
pub mod sse;
mod upstream;

pub(crate) use upstream::{
    AttemptError, Capped, parse_json_object, read_capped, send_attempt, timeout_error,
    transport_error,
};
pub use upstream::{UpstreamCall, read_json_object, send};
