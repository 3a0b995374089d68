//! The PromptForge MCP server: a prompt catalog behind four fixed MCP tools
//! (`list_prompts`, `run_prompt`, `check_run` and, with the `picker` feature,
//! `need_prompt`), served over streamable HTTP or stdio with the official Rust SDK.
//!
//! [`config::Config::load`] reads `prompts.toml`, [`serve::boot`] resolves the catalog,
//! builds the tools and pickers and fetches the model catalog, then
//! [`serve::serve_stdio`] or [`serve::serve_http`] serves until EOF or a signal.
#![forbid(unsafe_code)]

pub mod attach;
pub mod catalog;
pub mod config;
pub mod files;
pub mod handler;
pub mod logging;
pub mod roots;
pub mod runs;
pub mod serve;
pub mod state;
pub mod tools;
pub mod watch;
