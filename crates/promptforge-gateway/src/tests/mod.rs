//! In-process test support: a scripted transport.

#![allow(clippy::unwrap_used, clippy::expect_used, dead_code, unreachable_pub)]

pub(crate) mod scripted;
