//! MCP logging for runs: the `logging` capability, `logging/setLevel`, and a run's `log()`
//! checkpoints and failure as `notifications/message` to the client that started it.
//!
//! SEP-2577 deprecates MCP logging as of the 2026-07-28 revision and rmcp marks its types
//! `#[deprecated]`; both still serve it, and the guide's clients use it, so this module
//! (and only this one) allows the deprecation. On handshake-era connections the session's
//! `logging/setLevel` governs delivery (`info` until a client sets it); a 2026-07-28 call
//! opts in with its own `_meta` `io.modelcontextprotocol/logLevel` (SEP-2575), and a call
//! that does not gets no messages.
#![allow(
    deprecated,
    reason = "MCP logging is deprecated by SEP-2577 but still served"
)]

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::Notify;

use rmcp::model::{
    JsonObject, LoggingLevel, LoggingMessageNotificationParam, RequestMetaObject,
    ServerCapabilities,
};
use rmcp::{Peer, RoleServer};

use crate::tools::{LogLevel, RunLog};

/// The rank of `info`, the session threshold until `logging/setLevel`.
pub const INFO: u8 = 1;

/// The capabilities with `logging` declared.
pub fn declared(mut capabilities: ServerCapabilities) -> ServerCapabilities {
    capabilities.logging = Some(JsonObject::default());
    capabilities
}

/// The level a 2026-07-28 call opted in to, as a rank, if it did.
pub fn requested(context: &RequestMetaObject, request: Option<&RequestMetaObject>) -> Option<u8> {
    context
        .log_level()
        .or_else(|| request.and_then(RequestMetaObject::log_level))
        .map(rank)
}

/// How many log messages of one run may wait for the client at once; past it messages are
/// dropped (and counted in the server's log) rather than held.
pub const LOG_QUEUE: usize = 64;

/// The severity order of the MCP logging levels (RFC 5424), `debug` lowest.
pub fn rank(level: LoggingLevel) -> u8 {
    match level {
        LoggingLevel::Debug => 0,
        LoggingLevel::Info => 1,
        LoggingLevel::Notice => 2,
        LoggingLevel::Warning => 3,
        LoggingLevel::Error => 4,
        LoggingLevel::Critical => 5,
        LoggingLevel::Alert => 6,
        LoggingLevel::Emergency => 7,
    }
}

/// Which messages the client asked for.
pub enum LogThreshold {
    /// The session's `logging/setLevel` (handshake-era connections), read at send time.
    Session(Arc<AtomicU8>),
    /// The call's own `_meta` `io.modelcontextprotocol/logLevel` (2026-07-28 and later).
    Call(u8),
}

/// How long a call's answer waits for its run's queued log messages to go out first.
pub const FLUSH_WAIT: Duration = Duration::from_secs(2);

/// A run's log messages on their way to the client that started the run, through a
/// bounded queue drained by a task of their own (a slow client never blocks the run).
pub struct PeerLog {
    queue: tokio::sync::mpsc::Sender<LoggingMessageNotificationParam>,
    threshold: LogThreshold,
    dropped: AtomicU64,
    /// Messages queued and not yet handed to the transport.
    in_queue: Arc<(AtomicU64, Notify)>,
}

impl PeerLog {
    /// Starts the queue's forwarding task for `peer`.
    pub fn start(peer: Peer<RoleServer>, threshold: LogThreshold) -> Arc<Self> {
        let (queue, mut pending) = tokio::sync::mpsc::channel(LOG_QUEUE);
        let in_queue = Arc::new((AtomicU64::new(0), Notify::new()));
        let counted = Arc::clone(&in_queue);
        tokio::spawn(async move {
            while let Some(message) = pending.recv().await {
                let sent = peer.notify_logging_message(message).await;
                counted.0.fetch_sub(1, Ordering::AcqRel);
                counted.1.notify_waiters();
                if let Err(e) = sent {
                    tracing::debug!(error = %e, "a log notification could not be sent");
                    break;
                }
            }
        });
        Arc::new(Self {
            queue,
            threshold,
            dropped: AtomicU64::new(0),
            in_queue,
        })
    }
}

impl Drop for PeerLog {
    fn drop(&mut self) {
        let dropped = self.dropped.load(Ordering::Relaxed);
        if dropped > 0 {
            tracing::warn!(
                dropped,
                "log messages were dropped: the client did not keep up"
            );
        }
    }
}

impl RunLog for PeerLog {
    fn log(&self, level: LogLevel, data: serde_json::Value) {
        let level = match level {
            LogLevel::Info => LoggingLevel::Info,
            LogLevel::Error => LoggingLevel::Error,
        };
        let threshold = match &self.threshold {
            LogThreshold::Session(level) => level.load(Ordering::Relaxed),
            LogThreshold::Call(level) => *level,
        };
        if rank(level) < threshold {
            return;
        }
        let message = LoggingMessageNotificationParam::new(level, data).with_logger("promptforge");
        self.in_queue.0.fetch_add(1, Ordering::AcqRel);
        if self.queue.try_send(message).is_err() {
            self.in_queue.0.fetch_sub(1, Ordering::AcqRel);
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn flush(&self) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        // A 2026-07-28 call over HTTP carries its messages on its own response stream,
        // which ends with the answer: the answer waits (bounded) for them.
        Box::pin(async move {
            let drained = async {
                loop {
                    let notified = self.in_queue.1.notified();
                    if self.in_queue.0.load(Ordering::Acquire) == 0 {
                        return;
                    }
                    notified.await;
                }
            };
            let _ = tokio::time::timeout(FLUSH_WAIT, drained).await;
        })
    }
}
