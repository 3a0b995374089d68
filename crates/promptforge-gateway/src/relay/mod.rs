//! Talking to upstreams: sending requests, mapping failures, relaying SSE streams.

pub(crate) mod failover;
pub(crate) mod h1;
pub(crate) mod sse;
pub(crate) mod upstream;

pub(crate) use upstream::{
    AttemptError, Capped, parse_json_object, read_capped, send_attempt, timeout_error,
    transport_error,
};
pub(crate) use upstream::{Payload, UpstreamCall};
