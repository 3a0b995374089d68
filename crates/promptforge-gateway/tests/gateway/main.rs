//! Process tests: the real `promptforge-gateway` binary on 127.0.0.1:0 against a scripted
//! upstream, for what needs a process (the command line, signals, logs, local children,
//! the shipped configuration, the official openai SDK as a client). Everything else runs
//! in process (`src/tests/`).

#![allow(missing_docs, unreachable_pub, dead_code)]
// Test helpers outside `#[test]` functions panic on purpose: a failed setup is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod cli;
mod harness;
mod local;
mod logs;
mod openai_sdk;
mod shared;
mod shipped;
mod signals;
