//! The typed SSE relay for streaming chat completions.
//!
//! Upstream bytes are decoded into events; each `data:` payload is either the `[DONE]`
//! sentinel (recognised before any parsing) or a chunk that must parse into
//! [`ChatChunk`] with at least one choice carrying an index and a delta. A valid chunk
//! gets the caller's model name and is re-serialised; an invalid one is logged and
//! skipped. A failure mid-stream ends the relayed stream with one [`StreamError`] (which
//! `routes/` writes as an error-envelope event). Dropping the relay (the client went away)
//! drops the upstream response and with it the upstream connection.

use std::collections::VecDeque;
use std::time::Duration;

use axum::body::Bytes;
use futures::{Stream, StreamExt};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::transport::{AttemptFailure, Phase, UpstreamBytes};
use crate::shutdown::Shutdown;

/// The terminal sentinel.
const DONE: &str = "[DONE]";

/// The default cap of one SSE line and of one event's joined data.
pub(crate) const DEFAULT_MAX_EVENT_BYTES: usize = 1024 * 1024;

/// A stream the decoder refuses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum SseError {
    /// A line grew past the cap without a newline.
    #[error("an SSE line is longer than {0} bytes")]
    LineTooLong(usize),
    /// One event's joined `data` grew past the cap.
    #[error("an SSE event carries more than {0} bytes of data")]
    EventTooLarge(usize),
}

/// Splits a byte stream into SSE event payloads (the joined `data:` lines of each event).
///
/// Memory is bounded: a line longer than the cap, or an event whose joined data is larger,
/// is an [`SseError`]. Each byte is scanned for a newline once, however the input is
/// split into reads.
#[derive(Debug)]
pub(crate) struct SseDecoder {
    buffer: Vec<u8>,
    /// How much of `buffer` is known to hold no newline.
    scanned: usize,
    data: Option<String>,
    max: usize,
}

impl Default for SseDecoder {
    fn default() -> Self {
        Self::new(DEFAULT_MAX_EVENT_BYTES)
    }
}

impl SseDecoder {
    /// A decoder capping lines and events at `max` bytes.
    pub(crate) fn new(max: usize) -> Self {
        Self {
            buffer: Vec::new(),
            scanned: 0,
            data: None,
            max,
        }
    }

    /// Feeds bytes; returns the data of every event completed by them.
    pub(crate) fn feed(&mut self, bytes: &[u8]) -> Result<Vec<String>, SseError> {
        self.buffer.extend_from_slice(bytes);
        let mut events = Vec::new();
        let mut start = 0;
        let mut from = self.scanned;
        while let Some(offset) = self.buffer[from..].iter().position(|b| *b == b'\n') {
            let end = from + offset;
            let mut line = &self.buffer[start..end];
            if line.last() == Some(&b'\r') {
                line = &line[..line.len() - 1];
            }
            if line.len() > self.max {
                return Err(SseError::LineTooLong(self.max));
            }
            let text = String::from_utf8_lossy(line).into_owned();
            self.line(&text, &mut events)?;
            start = end + 1;
            from = start;
        }
        self.buffer.drain(..start);
        self.scanned = self.buffer.len();
        if self.buffer.len() > self.max {
            return Err(SseError::LineTooLong(self.max));
        }
        Ok(events)
    }

    /// Ends the input: an event missing its final blank line still counts.
    pub(crate) fn finish(&mut self) -> Result<Vec<String>, SseError> {
        let mut events = Vec::new();
        if !self.buffer.is_empty() {
            let rest = std::mem::take(&mut self.buffer);
            self.scanned = 0;
            let text = String::from_utf8_lossy(&rest).into_owned();
            self.line(text.trim_end_matches('\r'), &mut events)?;
        }
        events.extend(self.data.take());
        Ok(events)
    }

    fn line(&mut self, line: &str, events: &mut Vec<String>) -> Result<(), SseError> {
        if line.is_empty() {
            events.extend(self.data.take());
            return Ok(());
        }
        if line.starts_with(':') {
            return Ok(());
        }
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line, ""),
        };
        if field == "data" {
            let held = self.data.as_ref().map_or(0, |d| d.len() + 1);
            if held + value.len() > self.max {
                return Err(SseError::EventTooLarge(self.max));
            }
            match &mut self.data {
                Some(data) => {
                    data.push('\n');
                    data.push_str(value);
                }
                None => self.data = Some(value.to_owned()),
            }
        }
        Ok(())
    }
}

/// One streamed chat completion chunk, with unknown fields kept verbatim.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct ChatChunk {
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
pub(crate) struct ChunkChoice {
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
pub(crate) enum Relayed {
    /// A rewritten chunk to forward.
    Chunk(String),
    /// The `[DONE]` sentinel.
    Done,
    /// A malformed chunk, skipped; the reason is logged.
    Skipped(String),
}

/// Validates and rewrites one event payload.
pub(crate) fn relay_event(data: &str, caller_model: &str) -> Relayed {
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

/// One SSE event carrying `data`.
pub(crate) fn frame(data: &str) -> Bytes {
    Bytes::from(format!("data: {data}\n\n"))
}

/// Why a relayed stream ended early: after it, the stream ends.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum StreamError {
    /// The upstream failed, went silent, sent an oversized event or ended without
    /// `[DONE]`.
    #[error("{0}")]
    Upstream(AttemptFailure),
    /// The shutdown drain ended first.
    #[error("the gateway is shutting down")]
    ShuttingDown,
}

impl StreamError {
    /// A label for the log.
    fn label(&self) -> &'static str {
        match self {
            Self::Upstream(failure) => failure.kind.label(),
            Self::ShuttingDown => "shutting_down",
        }
    }
}

/// Sees each chunk a stream relays (as the JSON text sent to the client).
pub(crate) trait ChunkTap: Send + Sync + std::fmt::Debug {
    /// One relayed chunk.
    fn observe(&self, chunk: &str);
}

/// The bounds and names of one relayed stream.
#[derive(Debug)]
pub(crate) struct StreamSettings {
    /// The endpoint's id (for messages).
    pub endpoint: String,
    /// The caller's model name, written into every chunk.
    pub caller_model: String,
    /// Longest silence between two upstream chunks.
    pub idle_timeout: Duration,
    /// Longest SSE line or event.
    pub max_event_bytes: usize,
    /// Sees every relayed chunk (the metrics count the stream's last `usage` this way).
    pub tap: Option<Box<dyn ChunkTap>>,
}

struct RelayState<G> {
    upstream: UpstreamBytes,
    settings: StreamSettings,
    decoder: SseDecoder,
    pending: VecDeque<Result<Bytes, StreamError>>,
    finished: bool,
    shutdown: Shutdown,
    /// Held for the stream's whole lifetime (a queue slot), released on drop.
    _guard: G,
}

impl<G> RelayState<G> {
    fn absorb(&mut self, events: Result<Vec<String>, SseError>) {
        let events = match events {
            Ok(events) => events,
            Err(err) => {
                let err = AttemptFailure::protocol(
                    format!(
                        "endpoint {}: {err} (max_stream_event_bytes)",
                        self.settings.endpoint
                    ),
                    false,
                );
                self.fail(StreamError::Upstream(err));
                return;
            }
        };
        for data in events {
            if self.finished {
                return;
            }
            match relay_event(&data, &self.settings.caller_model) {
                Relayed::Chunk(json) => {
                    if let Some(tap) = &self.settings.tap {
                        tap.observe(&json);
                    }
                    self.pending.push_back(Ok(frame(&json)));
                }
                Relayed::Done => {
                    self.pending.push_back(Ok(frame(DONE)));
                    self.finished = true;
                }
                Relayed::Skipped(reason) => {
                    tracing::warn!(endpoint = %self.settings.endpoint, %reason, "skipped a malformed upstream stream chunk");
                }
            }
        }
    }

    /// Ends the stream with `err`.
    fn fail(&mut self, err: StreamError) {
        tracing::warn!(endpoint = %self.settings.endpoint, code = err.label(), "stream ended with an error: {err}");
        self.pending.push_back(Err(err));
        self.finished = true;
    }
}

/// What ended one wait for upstream bytes.
enum Next {
    Item(Option<Result<Bytes, AttemptFailure>>),
    Idle,
    Shutdown,
}

/// Turns an upstream SSE body into the relayed events (failover reads the first chunk
/// before committing to an endpoint, then chains it back on). `guard` lives as long as the
/// returned stream. The stream ends with one [`StreamError`] when the upstream is silent
/// for `idle_timeout`, sends a line or event over `max_event_bytes`, fails, ends without
/// `[DONE]`, or when `shutdown` fires.
pub(crate) fn relay_body<G: Send + 'static>(
    upstream: UpstreamBytes,
    settings: StreamSettings,
    shutdown: Shutdown,
    guard: G,
) -> impl Stream<Item = Result<Bytes, StreamError>> + Send + 'static {
    let state = RelayState {
        upstream,
        decoder: SseDecoder::new(settings.max_event_bytes),
        settings,
        pending: VecDeque::new(),
        finished: false,
        shutdown,
        _guard: guard,
    };
    futures::stream::unfold(state, |mut state| async move {
        loop {
            if let Some(item) = state.pending.pop_front() {
                return Some((item, state));
            }
            if state.finished {
                return None;
            }
            let idle = state.settings.idle_timeout;
            let next = tokio::select! {
                biased;
                () = state.shutdown.fired() => Next::Shutdown,
                item = tokio::time::timeout(idle, state.upstream.next()) => match item {
                    Ok(item) => Next::Item(item),
                    Err(_) => Next::Idle,
                },
            };
            match next {
                Next::Item(Some(Ok(bytes))) => {
                    let events = state.decoder.feed(&bytes);
                    state.absorb(events);
                }
                Next::Item(Some(Err(err))) => state.fail(StreamError::Upstream(err)),
                Next::Item(None) => {
                    let events = state.decoder.finish();
                    state.absorb(events);
                    if !state.finished {
                        let err = AttemptFailure::protocol(
                            format!(
                                "endpoint {} ended the stream before [DONE]",
                                state.settings.endpoint
                            ),
                            false,
                        );
                        state.fail(StreamError::Upstream(err));
                    }
                }
                Next::Idle => {
                    let err = AttemptFailure::timeout(
                        format!(
                            "endpoint {} sent nothing for {} mid-stream (stream_idle_timeout)",
                            state.settings.endpoint,
                            humantime::format_duration(idle)
                        ),
                        Phase::AfterHead,
                    );
                    state.fail(StreamError::Upstream(err));
                }
                Next::Shutdown => state.fail(StreamError::ShuttingDown),
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
        assert!(d.feed(b"data: {\"a\"").unwrap().is_empty());
        assert_eq!(
            d.feed(b":1}\r\n\r\n: comment\n\nevent: x\ndata: [DONE]\n\n")
                .unwrap(),
            vec!["{\"a\":1}".to_owned(), "[DONE]".to_owned()]
        );
        assert_eq!(
            d.feed(b"data: a\ndata: b\n\n").unwrap(),
            vec!["a\nb".to_owned()]
        );
        assert!(d.feed(b"data: tail").unwrap().is_empty());
        assert_eq!(d.finish().unwrap(), vec!["tail".to_owned()]);
    }

    #[test]
    fn a_line_without_a_newline_is_capped() {
        let mut d = SseDecoder::new(64);
        assert!(d.feed(b"data: ").unwrap().is_empty());
        let mut result = Ok(Vec::new());
        for _ in 0..100 {
            result = d.feed(b"xxxxxxxx");
            if result.is_err() {
                break;
            }
        }
        assert_eq!(result, Err(SseError::LineTooLong(64)));
        // A line arriving whole in one read is capped too.
        let mut d = SseDecoder::new(64);
        let mut line = b"data: ".to_vec();
        line.extend(std::iter::repeat_n(b'y', 100));
        line.extend_from_slice(b"\n\n");
        assert_eq!(d.feed(&line), Err(SseError::LineTooLong(64)));
    }

    #[test]
    fn an_event_of_many_short_lines_is_capped() {
        let mut d = SseDecoder::new(64);
        let mut result = Ok(Vec::new());
        for _ in 0..100 {
            result = d.feed(b"data: 0123456789\n");
            if result.is_err() {
                break;
            }
        }
        assert_eq!(result, Err(SseError::EventTooLarge(64)));
    }

    #[test]
    fn many_lines_in_one_read_and_a_line_split_over_many_reads() {
        let mut d = SseDecoder::default();
        let mut big = Vec::new();
        for i in 0..10_000 {
            big.extend_from_slice(format!("data: {i}\n\n").as_bytes());
        }
        let events = d.feed(&big).unwrap();
        assert_eq!(events.len(), 10_000);
        assert_eq!(events[9_999], "9999");
        assert!(d.feed(b"data: ").unwrap().is_empty());
        for _ in 0..10_000 {
            assert!(d.feed(b"z").unwrap().is_empty());
        }
        assert_eq!(d.feed(b"\n\n").unwrap().len(), 1);
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
