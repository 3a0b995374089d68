//! PromptForge core: parse and execute Markdown prompt files.
#![forbid(unsafe_code)]

pub mod tools;

pub use tools::{Tool, ToolError, ToolErrorKind, ToolId, ToolOutput};
