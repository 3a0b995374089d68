//! Integration tests: the real `promptforge-gateway` binary on 127.0.0.1:0 against a
//! scripted upstream.

#![allow(missing_docs, unreachable_pub, dead_code)]
// Test helpers outside `#[test]` functions panic on purpose: a failed setup is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod admin;
mod boot;
mod dominions;
mod failover;
mod hardening;
mod harness;
mod local;
mod logs;
mod metrics;
mod openai_sdk;
mod routes;
mod shipped;
mod streaming;
mod web_search;
