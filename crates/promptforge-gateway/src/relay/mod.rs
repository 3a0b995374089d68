//! Talking to upstreams: sending requests, mapping failures, relaying SSE streams.

pub(crate) mod sse;
mod upstream;

pub(crate) use upstream::{Capped, read_capped, timeout_error, transport_error};
pub(crate) use upstream::{UpstreamCall, read_json_object, send};
