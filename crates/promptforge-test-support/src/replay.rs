//! A chat route that replays queued replies in order and records every request.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};

use crate::has_bearer;

/// One scripted answer of a [`Replay`] chat route.
#[derive(Debug, Clone)]
pub enum Reply {
    /// 200 with this JSON body.
    Json(Value),
    /// This status with this JSON body.
    Status(u16, Value),
    /// 200 with this JSON body, after this delay.
    Slow(Duration, Value),
    /// 200 with a completion whose text content is this many bytes long.
    Huge(usize),
}

/// `POST /v1/chat/completions` behind a bearer: each request is recorded (its JSON
/// body) and answered with the next queued [`Reply`]; once the queue is empty, 500
/// `script exhausted`. A request without the bearer gets 401 and is not recorded.
#[derive(Debug)]
pub struct Replay {
    key: String,
    replies: Mutex<VecDeque<Reply>>,
    requests: Mutex<Vec<Value>>,
    traceparents: Mutex<Vec<Option<String>>>,
}

impl Replay {
    /// A replay expecting `Authorization: Bearer <key>`, answering `replies` in order.
    pub fn new(key: &str, replies: impl IntoIterator<Item = Reply>) -> Arc<Self> {
        Arc::new(Self {
            key: key.to_owned(),
            replies: Mutex::new(replies.into_iter().collect()),
            requests: Mutex::new(Vec::new()),
            traceparents: Mutex::new(Vec::new()),
        })
    }

    /// The JSON bodies of the requests so far, in arrival order.
    pub fn requests(&self) -> Vec<Value> {
        self.requests
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The `traceparent` header of each recorded request (`None` where it had none), in
    /// arrival order.
    pub fn traceparents(&self) -> Vec<Option<String>> {
        self.traceparents
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// How many replies are still queued.
    pub fn remaining(&self) -> usize {
        self.replies
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// The route, to merge into the upstream's router.
    pub fn router(self: &Arc<Self>) -> Router {
        Router::new()
            .route("/v1/chat/completions", post(chat))
            .with_state(Arc::clone(self))
    }
}

async fn chat(State(replay): State<Arc<Replay>>, headers: HeaderMap, body: String) -> Response {
    if !has_bearer(&headers, &replay.key) {
        return StatusCode::UNAUTHORIZED.into_response();
    }
    let body: Value = match serde_json::from_str(&body) {
        Ok(body) => body,
        Err(err) => {
            let error = json!({"error": {"message": format!("not JSON: {err}")}});
            return (StatusCode::BAD_REQUEST, axum::Json(error)).into_response();
        }
    };
    replay
        .requests
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(body);
    let traceparent = headers
        .get("traceparent")
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned);
    replay
        .traceparents
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(traceparent);
    let next = replay
        .replies
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .pop_front();
    match next {
        Some(Reply::Json(reply)) => axum::Json(reply).into_response(),
        Some(Reply::Status(status, body)) => {
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            (status, axum::Json(body)).into_response()
        }
        Some(Reply::Slow(delay, reply)) => {
            tokio::time::sleep(delay).await;
            axum::Json(reply).into_response()
        }
        Some(Reply::Huge(bytes)) => {
            let content = "x".repeat(bytes);
            axum::Json(json!({"choices": [{"finish_reason": "stop",
                "message": {"role": "assistant", "content": content}}]}))
            .into_response()
        }
        None => (
            StatusCode::INTERNAL_SERVER_ERROR,
            axum::Json(json!({"error": {"message": "script exhausted"}})),
        )
            .into_response(),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::Loopback;

    #[tokio::test]
    async fn replays_in_order_records_and_reports_exhaustion() {
        let replay = Replay::new(
            "k",
            [
                Reply::Json(json!({"n": 1})),
                Reply::Status(429, json!({"error": {"message": "slow down"}})),
            ],
        );
        let server = Loopback::serve(replay.router()).await.unwrap();
        let url = format!("{}/v1/chat/completions", server.url());
        let client = reqwest::Client::new();
        let send = |body: &'static str, key: &'static str| {
            client.post(&url).bearer_auth(key).body(body).send()
        };
        assert_eq!(send("{}", "wrong").await.unwrap().status(), 401);
        let first = send(r#"{"a": 1}"#, "k").await.unwrap();
        assert_eq!(first.status(), 200);
        assert_eq!(first.text().await.unwrap(), r#"{"n":1}"#);
        assert_eq!(send(r#"{"a": 2}"#, "k").await.unwrap().status(), 429);
        assert_eq!(replay.remaining(), 0);
        let exhausted = send(r#"{"a": 3}"#, "k").await.unwrap();
        assert_eq!(exhausted.status(), 500);
        assert!(exhausted.text().await.unwrap().contains("script exhausted"));
        assert_eq!(send("not json", "k").await.unwrap().status(), 400);
        assert_eq!(
            replay.requests(),
            vec![json!({"a": 1}), json!({"a": 2}), json!({"a": 3})]
        );
    }
}
