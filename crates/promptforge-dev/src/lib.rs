//! `promptforge-dev`: the prompt author's edit-run-inspect loop.
//!
//! Point it at a prompt file: it runs the prompt against an already-running
//! promptforge-gateway (`PROMPTFORGE_GATEWAY_URL` + `PROMPTFORGE_GATEWAY_API_KEY`, both
//! required), prints the result on stdout and every observer record on stderr, dumps the
//! run's store to `<prompt-stem>.store/` beside the prompt, and with `--watch` reruns on
//! every save. `--capture-raw` also writes each model turn's raw JSON under `.trace/`.
//!
//! The pieces are usable on their own: [`args`] (the command line), [`env`] (the gateway
//! environment and the key in core's redacted `Secret`), [`runner`] (a session and one run),
//! [`dump`] and [`secure`] (the reconciled, symlink-proof store dump), [`capture`] (the raw
//! trace worker), [`ui`] (the live trace viewer server), [`watch`] (the debounced file watcher), [`observer`] and [`console`]
//! (stderr output). [`app::main_with`] is the whole program.
#![forbid(unsafe_code)]
#![cfg(unix)]

pub mod app;
pub mod args;
pub mod capture;
pub mod console;
pub mod dump;
pub mod env;
pub mod observer;
pub mod runner;
pub mod secure;
pub mod ui;
pub mod watch;
