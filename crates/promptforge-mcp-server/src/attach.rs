//! Whether a `run_prompt` call over streamable HTTP still has a client listening.
//!
//! The guide: "If the client disconnects while a run is in progress, the run is cancelled
//! cooperatively." Over streamable HTTP a call's answer travels on the SSE stream of the
//! `POST` that made it; a client whose connection drops may resume that stream with a `GET`
//! carrying `Last-Event-ID` (rmcp replays what it missed). So a dropped stream is not yet a
//! gone client: [`WatchedSessions`] (a [`SessionManager`] over rmcp's
//! [`LocalSessionManager`]) watches every request's stream, and when one is dropped before
//! it delivered the answer, a timer of [`Attachments::grace`] starts. A resume within it
//! keeps the call; otherwise the call's cancellation token fires, which cancels an
//! attached run (a run already handed its run id — past `reply_deadline`, or a task — has
//! answered its call, so nothing cancels it).
//!
//! Over stdio the peer is the process that spawned the server: its end of the pipe closing
//! ends the session, and the session's end cancels the attached calls (rmcp cancels every
//! in-flight request's token).

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use futures::Stream;
use rmcp::model::{ClientJsonRpcMessage, RequestId, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::session::{
    EventStore, RestoreOutcome, ServerSseMessage, SessionId, SessionManager,
};
use tokio_util::sync::CancellationToken;

/// How long a dropped call's stream may be resumed before its run is cancelled, unless
/// `[server].resume_grace` says otherwise. Clients are told to reconnect after 3 s (the
/// SSE `retry` hint), so this leaves room for one retry and a slow network.
pub const DEFAULT_RESUME_GRACE: Duration = Duration::from_secs(10);

/// The most calls watched at once; past it new streams are not watched (their calls are
/// never cancelled by a disconnect), so the table cannot grow without bound.
pub const MAX_WATCHED: usize = 10_000;

/// A call: its session and its JSON-RPC request id.
type CallKey = (SessionId, RequestId);

#[derive(Debug, Default)]
struct Call {
    /// Whether a stream of the call is open.
    connected: bool,
    /// Bumped on every drop and resume, so a stale timer does nothing.
    epoch: u64,
    /// The call's token, once the handler registered it.
    token: Option<CancellationToken>,
    /// rmcp's id of the call's HTTP request stream (from its event ids), for resumes.
    stream: Option<u64>,
}

#[derive(Debug, Default)]
struct Table {
    calls: HashMap<CallKey, Call>,
    streams: HashMap<(SessionId, u64), RequestId>,
}

impl Table {
    fn remove(&mut self, key: &CallKey) {
        if let Some(call) = self.calls.remove(key)
            && let Some(stream) = call.stream
        {
            self.streams.remove(&(key.0.clone(), stream));
        }
    }
}

/// The calls being watched, shared by the session manager and the handlers.
#[derive(Debug)]
pub struct Attachments {
    table: Mutex<Table>,
    grace: Duration,
}

impl Attachments {
    /// A table whose dropped streams may be resumed for `grace`.
    pub fn new(grace: Duration) -> Arc<Self> {
        Arc::new(Self {
            table: Mutex::new(Table::default()),
            grace,
        })
    }

    /// How long a dropped stream may be resumed.
    pub fn grace(&self) -> Duration {
        self.grace
    }

    fn table(&self) -> MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// How many calls are watched (for tests and the server's own checks).
    pub fn watched(&self) -> usize {
        self.table().calls.len()
    }

    /// A stream of `key` opened (the `POST` itself): watch it.
    fn opened(self: &Arc<Self>, key: CallKey) -> Option<Guard> {
        let mut table = self.table();
        if !table.calls.contains_key(&key) && table.calls.len() >= MAX_WATCHED {
            return None;
        }
        let call = table.calls.entry(key.clone()).or_default();
        call.connected = true;
        call.epoch += 1;
        Some(Guard {
            attachments: Arc::clone(self),
            key,
            ended: false,
            seen_stream: false,
        })
    }

    /// A `GET` with `Last-Event-ID` resumed the stream `stream` of `session`.
    fn resumed(self: &Arc<Self>, session: &SessionId, stream: u64) -> Option<Guard> {
        let request = self
            .table()
            .streams
            .get(&(session.clone(), stream))
            .cloned()?;
        self.opened((session.clone(), request))
    }

    fn learned_stream(&self, key: &CallKey, stream: u64) {
        let mut table = self.table();
        if let Some(call) = table.calls.get_mut(key) {
            call.stream = Some(stream);
            table.streams.insert((key.0.clone(), stream), key.1.clone());
        }
    }

    /// The stream delivered the answer and ended: the call is over.
    fn ended(&self, key: &CallKey) {
        self.table().remove(key);
    }

    /// The stream was dropped before it ended: the client may be gone.
    fn dropped(self: &Arc<Self>, key: &CallKey) {
        let epoch = {
            let mut table = self.table();
            let Some(call) = table.calls.get_mut(key) else {
                return;
            };
            call.connected = false;
            call.epoch += 1;
            call.epoch
        };
        let attachments = Arc::clone(self);
        let owned = key.clone();
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(async move {
                    tokio::time::sleep(attachments.grace).await;
                    attachments.expire(&owned, epoch);
                });
            }
            // No runtime to wait on: the client is treated as gone at once.
            Err(_) => self.expire(key, epoch),
        }
    }

    /// The grace period of the drop numbered `epoch` ran out.
    fn expire(&self, key: &CallKey, epoch: u64) {
        let mut table = self.table();
        let Some(call) = table.calls.get_mut(key) else {
            return;
        };
        if call.connected || call.epoch != epoch {
            return;
        }
        // A call that registered no token (not a `run_prompt`) is simply forgotten.
        if let Some(token) = call.token.take() {
            tracing::debug!(session = %key.0, request = %key.1, "cancelling the call of a gone client");
            tracing::info!(
                "a client went away and did not resume within {:?}: cancelling its call",
                self.grace
            );
            token.cancel();
        }
        table.remove(key);
    }

    /// Registers the cancellation token of the call `request` of `session`: it is
    /// cancelled when the call's stream is dropped and not resumed in time. The returned
    /// guard unregisters it (the call answered).
    pub fn attach(
        self: &Arc<Self>,
        session: SessionId,
        request: RequestId,
        token: CancellationToken,
    ) -> Attached {
        let key = (session, request);
        if let Some(call) = self.table().calls.get_mut(&key) {
            call.token = Some(token);
        }
        Attached {
            attachments: Arc::clone(self),
            key,
        }
    }
}

/// Unregisters a call's token when the call has answered.
#[derive(Debug)]
pub struct Attached {
    attachments: Arc<Attachments>,
    key: CallKey,
}

impl Drop for Attached {
    fn drop(&mut self) {
        let mut table = self.attachments.table();
        if let Some(call) = table.calls.get_mut(&self.key) {
            call.token = None;
        }
    }
}

/// Watches one stream of a call: learns rmcp's stream id from the event ids, reports the
/// end (answer delivered) or a drop (client gone, for now).
struct Guard {
    attachments: Arc<Attachments>,
    key: CallKey,
    ended: bool,
    seen_stream: bool,
}

impl Guard {
    fn saw(&mut self, message: &ServerSseMessage) {
        if self.seen_stream {
            return;
        }
        // rmcp's event ids are `<index>/<stream>` on request streams.
        let stream = message
            .event_id
            .as_deref()
            .and_then(|id| id.split_once('/'))
            .and_then(|(_, stream)| stream.parse::<u64>().ok());
        if let Some(stream) = stream {
            self.seen_stream = true;
            self.attachments.learned_stream(&self.key, stream);
        }
    }

    fn answered(message: &ServerSseMessage) -> bool {
        matches!(
            message.message.as_deref(),
            Some(ServerJsonRpcMessage::Response(_) | ServerJsonRpcMessage::Error(_))
        )
    }
}

#[cfg(test)]
impl Guard {
    /// The stream delivered the answer and is dropped.
    fn deliver(mut self) {
        self.ended = true;
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        if self.ended {
            self.attachments.ended(&self.key);
        } else {
            self.attachments.dropped(&self.key);
        }
    }
}

type Inner = Pin<Box<dyn Stream<Item = ServerSseMessage> + Send + Sync>>;

/// A request stream under watch.
struct Watched {
    inner: Inner,
    guard: Option<Guard>,
}

impl Stream for Watched {
    type Item = ServerSseMessage;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let polled = self.inner.as_mut().poll_next(cx);
        if let Some(guard) = self.guard.as_mut() {
            match &polled {
                Poll::Ready(Some(message)) => {
                    guard.saw(message);
                    if Guard::answered(message) {
                        guard.ended = true;
                    }
                }
                Poll::Ready(None) => guard.ended = true,
                Poll::Pending => {}
            }
        }
        polled
    }
}

/// rmcp's [`LocalSessionManager`] with every request stream watched (see the module).
#[derive(Debug)]
pub struct WatchedSessions {
    inner: LocalSessionManager,
    attachments: Arc<Attachments>,
}

impl WatchedSessions {
    /// Sessions whose call streams report to `attachments`.
    pub fn new(attachments: Arc<Attachments>) -> Self {
        Self {
            inner: LocalSessionManager::default(),
            attachments,
        }
    }

    /// How many sessions are held (live or idle until rmcp's keep-alive ends them).
    pub async fn count(&self) -> usize {
        self.inner.sessions.read().await.len()
    }
}

/// The stream id of a request stream's `Last-Event-ID` (`<index>/<stream>`).
fn stream_of(last_event_id: &str) -> Option<u64> {
    last_event_id.split_once('/')?.1.parse().ok()
}

impl SessionManager for WatchedSessions {
    type Error = <LocalSessionManager as SessionManager>::Error;
    type Transport = <LocalSessionManager as SessionManager>::Transport;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        self.inner.create_session().await
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        self.inner.initialize_session(id, message).await
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        self.inner.has_session(id).await
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        self.inner.close_session(id).await
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        let key = match &message {
            ClientJsonRpcMessage::Request(request) => Some((id.clone(), request.id.clone())),
            _ => None,
        };
        // Watch the call before rmcp hands the request to the handler: a handler that ran
        // first would register its token with a call not yet in the table, and a drop
        // would then cancel nothing.
        let guard = key.and_then(|key| self.attachments.opened(key));
        let stream = match self.inner.create_stream(id, message).await {
            Ok(stream) => stream,
            Err(error) => {
                if let Some(mut guard) = guard {
                    // No stream was made: the call is forgotten, not dropped.
                    guard.ended = true;
                }
                return Err(error);
            }
        };
        Ok(Watched {
            inner: Box::pin(stream),
            guard,
        })
    }

    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), Self::Error> {
        self.inner.accept_message(id, message).await
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.inner.create_standalone_stream(id).await
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        let stream_id = stream_of(&last_event_id);
        let stream = self.inner.resume(id, last_event_id).await?;
        let guard = stream_id.and_then(|s| self.attachments.resumed(id, s));
        Ok(Watched {
            inner: Box::pin(stream),
            guard,
        })
    }

    async fn restore_session(
        &self,
        id: SessionId,
    ) -> Result<RestoreOutcome<Self::Transport>, Self::Error> {
        self.inner.restore_session(id).await
    }

    fn event_store(&self) -> Option<Arc<dyn EventStore>> {
        self.inner.event_store()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(request: i64) -> CallKey {
        (SessionId::from("session"), RequestId::Number(request))
    }

    fn drop_now(attachments: &Arc<Attachments>, guard: Guard) -> u64 {
        drop(guard);
        attachments
            .table()
            .calls
            .get(&key(1))
            .map_or(0, |c| c.epoch)
    }

    #[test]
    fn stream_ids_come_from_request_stream_event_ids() {
        assert_eq!(stream_of("0/7"), Some(7));
        assert_eq!(stream_of("12/3"), Some(3));
        assert_eq!(stream_of("5"), None);
        assert_eq!(stream_of("x/y"), None);
    }

    // A runtime, for the grace timer (which never fires here: the tests expire by hand).
    #[tokio::test]
    async fn a_dropped_stream_not_resumed_cancels_its_call() {
        let attachments = Attachments::new(Duration::from_secs(3600));
        let guard = attachments.opened(key(1)).unwrap();
        let token = CancellationToken::new();
        let attached = attachments.attach(key(1).0, key(1).1, token.clone());
        let epoch = drop_now(&attachments, guard);
        assert!(!token.is_cancelled());
        attachments.expire(&key(1), epoch);
        assert!(token.is_cancelled());
        drop(attached);
        assert_eq!(attachments.watched(), 0);
    }

    // A runtime, for the grace timer (which never fires here: the tests expire by hand).
    #[tokio::test]
    async fn a_resumed_stream_keeps_its_call() {
        let attachments = Attachments::new(Duration::from_secs(3600));
        let mut guard = attachments.opened(key(1)).unwrap();
        guard.saw(&ServerSseMessage::priming("0/42", Duration::from_secs(3)));
        let token = CancellationToken::new();
        let _attached = attachments.attach(key(1).0, key(1).1, token.clone());
        let epoch = drop_now(&attachments, guard);
        let resumed = attachments
            .resumed(&key(1).0, 42)
            .expect("the stream is known");
        // The timer of the earlier drop finds the call connected again: nothing happens.
        attachments.expire(&key(1), epoch);
        assert!(!token.is_cancelled());
        // Delivering the answer on the resumed stream ends the watch.
        resumed.deliver();
        assert_eq!(attachments.watched(), 0);
    }

    // A runtime, for the grace timer (which never fires here: the tests expire by hand).
    #[tokio::test]
    async fn a_dropped_call_that_registered_nothing_is_forgotten() {
        let attachments = Attachments::new(Duration::from_secs(3600));
        let guard = attachments.opened(key(1)).unwrap();
        let epoch = drop_now(&attachments, guard);
        assert_eq!(attachments.watched(), 1);
        attachments.expire(&key(1), epoch);
        assert_eq!(attachments.watched(), 0);
    }

    #[test]
    fn the_table_is_bounded() {
        let attachments = Attachments::new(Duration::from_secs(3600));
        let guards: Vec<Guard> = (0..MAX_WATCHED as i64)
            .filter_map(|i| attachments.opened(key(i)))
            .collect();
        assert_eq!(guards.len(), MAX_WATCHED);
        assert!(attachments.opened(key(-1)).is_none());
        for guard in guards {
            guard.deliver();
        }
        assert_eq!(attachments.watched(), 0);
    }
}
