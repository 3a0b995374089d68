//! PromptForge core: parse and execute Markdown prompt files.
//!
//! A prompt is one Markdown file: YAML frontmatter, an H1 title and sections whose Lua
//! blocks steer control flow while their prose goes to a model. [`Prompt::parse`] checks
//! every structural rule and compiles all Lua up front; [`run`] executes a parsed prompt
//! against caller-owned resources (store, observer, cancellation, limits). There is no
//! global state: many runs may execute in one process at once.
//!
//! ```
//! use promptforge_core::{NullObserver, Prompt, ResolutionContext, RunConfig, StoreRef, run};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let source = "---\nname: echo\ndescription: Echo the input\npromptforge: 1\n---\n\n# Echo\n\n```lua\nreturn args\n```\n";
//! let prompt = Prompt::parse(source, "example", &NullObserver)?;
//! let store = StoreRef::memory();
//! let result = run(&prompt, "hello", ResolutionContext::empty(), &store, RunConfig::new("example")).await?;
//! assert_eq!(result, "hello");
//! # Ok(())
//! # }
//! ```
#![forbid(unsafe_code)]

mod agent;
mod cancel;
pub mod client;
mod engine;
mod envelope;
pub mod error;
mod limits;
pub mod observe;
pub mod parse;
pub mod preview;
mod prompt;
mod resolve;
mod sandbox;
pub mod store;
pub mod tools;
pub mod trace;

pub use cancel::CancelHandle;
pub use client::{
    CompletionError, CompletionErrorKind, GatewayClient, ModelCatalog, ModelDescriptor,
};
pub use engine::run;
pub use error::{RunError, RunErrorKind};
pub use limits::{RunConfig, RunLimits};
pub use observe::{NullObserver, Observation, Observer};
pub use parse::{FileDeclaration, Frontmatter, ParseError, ParseErrorKind, promptforge_version};
pub use prompt::{Prompt, Section};
pub use resolve::ResolutionContext;
pub use store::{Store, StoreError, StoreRef};
pub use tools::{Tool, ToolCatalog, ToolError, ToolErrorKind, ToolId, ToolOutput};

/// The README's examples, compiled and run as doctests so they stay true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
