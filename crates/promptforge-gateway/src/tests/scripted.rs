//! A scripted [`Transport`]: each endpoint answers from a script (a queue of one-shot acts,
//! then a standing act), and every request is recorded. No socket, no timer.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use axum::body::Bytes;
use futures::future::BoxFuture;
use serde_json::Value;
use tokio::sync::Semaphore;

use crate::plan::{ApiPath, Endpoint};
use crate::relay::transport::{Answer, AttemptFailure, Outgoing, Phase, Transport};

/// What an endpoint does with one request.
#[derive(Debug, Clone)]
pub enum Act {
    /// Answers this body whole (a buffered request).
    Whole(String),
    /// Answers a stream of these chunks, then ends it.
    Stream(Vec<String>),
    /// Fails so.
    Fail(AttemptFailure),
    /// Waits for [`Scripted::release`], then does the act.
    Gated(Box<Act>),
    /// Never answers.
    Hang,
}

/// One recorded request.
#[derive(Debug, Clone)]
pub struct Sent {
    /// The endpoint's id.
    pub endpoint: String,
    /// The API route.
    pub path: ApiPath,
    /// The body, parsed.
    pub body: Value,
    /// A streaming request.
    pub streaming: bool,
}

/// The scripted transport.
#[derive(Debug)]
pub struct Scripted {
    once: Mutex<HashMap<String, VecDeque<Act>>>,
    always: Mutex<HashMap<String, Act>>,
    sent: Mutex<Vec<Sent>>,
    gate: Semaphore,
}

impl Default for Scripted {
    fn default() -> Self {
        Self {
            once: Mutex::default(),
            always: Mutex::default(),
            sent: Mutex::default(),
            gate: Semaphore::new(0),
        }
    }
}

/// A connection refused before anything was sent.
pub fn refused(endpoint: &str) -> Act {
    Act::Fail(AttemptFailure::transport(
        format!("endpoint {endpoint} unreachable: connection refused"),
        Phase::BeforeHead,
    ))
}

/// A chat completion from `model` saying `content`.
pub fn completion(model: &str, content: &str) -> Act {
    Act::Whole(
        serde_json::json!({
            "id": "c",
            "object": "chat.completion",
            "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 1}
        })
        .to_string(),
    )
}

impl Scripted {
    /// `endpoint` answers every request with `act` (after its one-shot acts).
    pub fn always(&self, endpoint: &str, act: Act) {
        self.always.lock().unwrap().insert(endpoint.to_owned(), act);
    }

    /// `endpoint` answers its next request with `act`.
    pub fn then(&self, endpoint: &str, act: Act) {
        self.once
            .lock()
            .unwrap()
            .entry(endpoint.to_owned())
            .or_default()
            .push_back(act);
    }

    /// Lets `n` gated acts through.
    pub fn release(&self, n: usize) {
        self.gate.add_permits(n);
    }

    /// Every request so far.
    pub fn sent(&self) -> Vec<Sent> {
        self.sent.lock().unwrap().clone()
    }

    /// The endpoints tried, in order.
    pub fn tried(&self) -> Vec<String> {
        self.sent().into_iter().map(|s| s.endpoint).collect()
    }

    fn next_act(&self, endpoint: &str) -> Act {
        if let Some(act) = self
            .once
            .lock()
            .unwrap()
            .get_mut(endpoint)
            .and_then(VecDeque::pop_front)
        {
            return act;
        }
        self.always
            .lock()
            .unwrap()
            .get(endpoint)
            .cloned()
            .unwrap_or_else(|| refused(endpoint))
    }

    async fn act(&self, act: Act) -> Result<Answer, AttemptFailure> {
        let mut act = act;
        loop {
            match act {
                Act::Whole(body) => return Ok(Answer::Whole(body.into_bytes())),
                Act::Stream(chunks) => {
                    let items = chunks
                        .into_iter()
                        .map(|c| Ok::<_, AttemptFailure>(Bytes::from(c)));
                    return Ok(Answer::Stream(Box::pin(futures::stream::iter(items))));
                }
                Act::Fail(failure) => return Err(failure),
                Act::Hang => std::future::pending::<()>().await,
                Act::Gated(next) => {
                    if let Ok(permit) = self.gate.acquire().await {
                        permit.forget();
                    }
                    act = *next;
                }
            }
        }
    }
}

impl Transport for Scripted {
    fn send<'a>(
        &'a self,
        endpoint: &'a Endpoint,
        request: Outgoing<'a>,
    ) -> BoxFuture<'a, Result<Answer, AttemptFailure>> {
        self.sent.lock().unwrap().push(Sent {
            endpoint: endpoint.id.to_string(),
            path: request.path,
            body: serde_json::from_slice(request.body).unwrap_or(Value::Null),
            streaming: request.streaming,
        });
        let act = self.next_act(&endpoint.id);
        Box::pin(self.act(act))
    }
}
