//! In-process tests: the gateway booted in this process (`app::boot`) against a scripted
//! upstream on loopback, or with a scripted transport, on a current-thread runtime per
//! test. The process tests (`tests/gateway/`) keep what needs the real binary.

#![allow(clippy::unwrap_used, clippy::expect_used, dead_code, unreachable_pub)]

mod admin;
mod boot;
mod dominions;
mod failover;
mod hardening;
mod harness;
mod metrics;
mod redis;
mod routes;
pub(crate) mod scripted;
mod shared;
mod spans;
mod streaming;
mod tool_choice;
mod upstream;
mod web_search;
