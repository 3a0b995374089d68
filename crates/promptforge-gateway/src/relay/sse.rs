//! The typed SSE relay for streaming chat completions.
//!
//! Upstream bytes are decoded into events; each `data:` payload is either the `[DONE]`
//! sentinel (recognised before any parsing) or a chunk that must parse into
//! [`ChatChunk`] with at least one choice carrying an index and a delta. A valid chunk
//! gets the caller's model name and is re-serialised; an invalid one is logged and
//! skipped. A transport failure mid-stream becomes one error-envelope event, then the
//! stream ends. Dropping the relay (the client went away) drops the upstream response
//! and with it the upstream connection.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::pin::Pin;

use axum::body::Bytes;
use futures::{Stream, StreamExt};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::error::ApiError;

/// The terminal sentinel.
const DONE: &str = "[DONE]";

/// Splits a byte stream into SSE event payloads (the joined `data:` lines of each event).
#[derive(Debug, Default)]
pub struct SseDecoder {
    buffer: Vec<u8>,
    data: Option<String>,
}

impl SseDecoder {
    /// Feeds bytes; returns the data of every event completed by them.
    pub fn feed(&mut self, bytes: &[u8]) -> Vec<String> {
        self.buffer.extend_from_slice(bytes);
        let mut events = Vec::new();
        while let Some(pos) = self.buffer.iter().position(|b| *b == b'\n') {
            let mut line: Vec<u8> = self.buffer.drain(..=pos).collect();
            line.pop();
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            self.line(&String::from_utf8_lossy(&line), &mut events);
        }
        events
    }

    /// Ends the input: an event missing its final blank line still counts.
    pub fn finish(&mut self) -> Vec<String> {
        let mut events = Vec::new();
        if !self.buffer.is_empty() {
            let rest = std::mem::take(&mut self.buffer);
            let text = String::from_utf8_lossy(&rest).into_owned();
            self.line(text.trim_end_matches('\r'), &mut events);
        }
        events.extend(self.data.take());
        events
    }

    fn line(&mut self, line: &str, events: &mut Vec<String>) {
        if line.is_empty() {
            events.extend(self.data.take());
            return;
        }
        if line.starts_with(':') {
            return;
        }
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line, ""),
        };
        if field == "data" {
            match &mut self.data {
                Some(data) => {
                    data.push('\n');
                    data.push_str(value);
                }
                None => self.data = Some(value.to_owned()),
            }
        }
    }
}

/// One streamed chat completion chunk, with unknown fields kept verbatim.
#[derive(Debug, Serialize, Deserialize)]
pub struct ChatChunk {
    /// The model name (rewritten to the caller's).
    #[serde(default)]
    pub model: Value,
    /// The choices.
    pub choices: Vec<ChunkChoice>,
    /// Every other field.
    #[serde(flatten)]
    pub rest: Map<String, Value>,
}

/// One choice of a chunk.
#[derive(Debug, Serialize, Deserialize)]
pub struct ChunkChoice {
    /// Choice index.
    pub index: u64,
    /// The delta object.
    pub delta: Map<String, Value>,
    /// Every other field (`finish_reason`, `logprobs`, ...).
    #[serde(flatten)]
    pub rest: Map<String, Value>,
}

/// What one upstream event becomes.
#[derive(Debug, PartialEq, Eq)]
pub enum Relayed {
    /// A rewritten chunk to forward.
    Chunk(String),
    /// The `[DONE]` sentinel.
    Done,
    /// A malformed chunk, skipped; the reason is logged.
    Skipped(String),
}

/// Validates and rewrites one event payload.
pub fn relay_event(data: &str, caller_model: &str) -> Relayed {
    if data.trim() == DONE {
        return Relayed::Done;
    }
    let mut chunk: ChatChunk = match serde_json::from_str(data) {
        Ok(chunk) => chunk,
        Err(err) => return Relayed::Skipped(format!("not a chat chunk: {err}")),
    };
    // A final usage-only chunk (`stream_options.include_usage`) has no choices.
    if chunk.choices.is_empty() && !chunk.rest.contains_key("usage") {
        return Relayed::Skipped("chunk has no choices".into());
    }
    chunk.model = Value::String(caller_model.to_owned());
    match serde_json::to_string(&chunk) {
        Ok(json) => Relayed::Chunk(json),
        Err(err) => Relayed::Skipped(format!("cannot re-serialise chunk: {err}")),
    }
}

fn frame(data: &str) -> Bytes {
    Bytes::from(format!("data: {data}\n\n"))
}

fn error_frame(err: &ApiError) -> Bytes {
    frame(&err.envelope().to_string())
}

type UpstreamBytes = Pin<Box<dyn Stream<Item = Result<Bytes, reqwest::Error>> + Send>>;

struct RelayState<G> {
    upstream: UpstreamBytes,
    endpoint: String,
    decoder: SseDecoder,
    pending: VecDeque<Bytes>,
    finished: bool,
    caller_model: String,
    /// Held for the stream's whole lifetime (a queue slot), released on drop.
    _guard: G,
}

impl<G> RelayState<G> {
    fn absorb(&mut self, events: Vec<String>) {
        for data in events {
            if self.finished {
                return;
            }
            match relay_event(&data, &self.caller_model) {
                Relayed::Chunk(json) => self.pending.push_back(frame(&json)),
                Relayed::Done => {
                    self.pending.push_back(frame(DONE));
                    self.finished = true;
                }
                Relayed::Skipped(reason) => {
                    tracing::warn!(endpoint = %self.endpoint, %reason, "skipped a malformed upstream stream chunk");
                }
            }
        }
    }
}

/// Turns an upstream SSE response into the relayed body stream. `guard` lives as long as
/// the returned stream.
pub fn relay_stream<G: Send + 'static>(
    response: reqwest::Response,
    endpoint: &str,
    caller_model: &str,
    guard: G,
) -> impl Stream<Item = Result<Bytes, Infallible>> + Send + 'static {
    let state = RelayState {
        upstream: Box::pin(response.bytes_stream()),
        endpoint: endpoint.to_owned(),
        decoder: SseDecoder::default(),
        pending: VecDeque::new(),
        finished: false,
        caller_model: caller_model.to_owned(),
        _guard: guard,
    };
    futures::stream::unfold(state, |mut state| async move {
        loop {
            if let Some(bytes) = state.pending.pop_front() {
                return Some((Ok(bytes), state));
            }
            if state.finished {
                return None;
            }
            match state.upstream.next().await {
                Some(Ok(bytes)) => {
                    let events = state.decoder.feed(&bytes);
                    state.absorb(events);
                }
                Some(Err(err)) => {
                    let err = crate::relay::upstream::transport_error(&state.endpoint, &err);
                    state.pending.push_back(error_frame(&err));
                    state.finished = true;
                }
                None => {
                    let events = state.decoder.finish();
                    state.absorb(events);
                    if !state.finished {
                        let err = ApiError::upstream_protocol(format!(
                            "endpoint {} ended the stream before [DONE]",
                            state.endpoint
                        ));
                        state.pending.push_back(error_frame(&err));
                        state.finished = true;
                    }
                }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_events_across_chunk_boundaries() {
        let mut d = SseDecoder::default();
        assert!(d.feed(b"data: {\"a\"").is_empty());
        assert_eq!(
            d.feed(b":1}\r\n\r\n: comment\n\nevent: x\ndata: [DONE]\n\n"),
            vec!["{\"a\":1}".to_owned(), "[DONE]".to_owned()]
        );
        assert_eq!(d.feed(b"data: a\ndata: b\n\n"), vec!["a\nb".to_owned()]);
        assert!(d.feed(b"data: tail").is_empty());
        assert_eq!(d.finish(), vec!["tail".to_owned()]);
    }

    #[test]
    fn rewrites_valid_chunks_and_skips_malformed_ones() {
        let chunk = r#"{"id":"c1","model":"up-1","choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":null}],"x":1}"#;
        let Relayed::Chunk(out) = relay_event(chunk, "mine") else {
            panic!("not relayed")
        };
        let v: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["model"], "mine");
        assert_eq!(v["x"], 1);
        assert_eq!(v["choices"][0]["delta"]["content"], "hi");
        assert!(v["choices"][0].get("finish_reason").is_some());
        assert_eq!(relay_event(" [DONE]", "m"), Relayed::Done);
        assert!(matches!(relay_event("not json", "m"), Relayed::Skipped(_)));
        assert!(matches!(
            relay_event(r#"{"choices":[]}"#, "m"),
            Relayed::Skipped(_)
        ));
        assert!(matches!(
            relay_event(r#"{"choices":[{"delta":{}}]}"#, "m"),
            Relayed::Skipped(_)
        ));
        assert!(matches!(
            relay_event(r#"{"choices":[{"index":0}]}"#, "m"),
            Relayed::Skipped(_)
        ));
        assert!(matches!(
            relay_event(r#"{"choices":[],"usage":{"total_tokens":3}}"#, "m"),
            Relayed::Chunk(_)
        ));
    }
}
