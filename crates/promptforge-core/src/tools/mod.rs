//! Tools: the [`Tool`] trait every model-callable capability implements, its identity
//! ([`ToolId`]), its output ([`ToolOutput`], trust-marked at construction) and its error
//! ([`ToolError`]).
//!
//! A tool is dispatched uniformly whether it runs in-process (`web_fetch`, a Lua local tool)
//! or proxies through a gateway (`web_search`): the tool loop sees only this trait.

mod catalog;
mod error;
mod output;
mod web_search;

pub use catalog::{CatalogError, ToolCatalog};
pub use error::{ToolError, ToolErrorKind};
pub use output::ToolOutput;
pub use promptforge_tool_picker::ToolId;
pub use web_search::WebSearch;

use async_trait::async_trait;

/// A capability a model can call during the tool loop.
///
/// Implementations must be cheap to share (`Send + Sync`); the runtime holds them behind an
/// `Arc`. Cancellation is cooperative: the runtime drops the future returned by
/// [`Tool::call`] when the run is cancelled, so a tool should not rely on running to
/// completion.
#[async_trait]
pub trait Tool: Send + Sync {
    /// The stable, structural identity of the tool.
    fn id(&self) -> &ToolId;

    /// The name the model sees and calls; matches `[A-Za-z0-9_.-]+`.
    fn wire_name(&self) -> &str;

    /// The prose description the model sees (and the tool picker embeds).
    fn description(&self) -> &str;

    /// The JSON Schema of the tool's arguments object.
    fn parameters(&self) -> &serde_json::Value;

    /// Runs the tool with the raw JSON arguments string the model produced.
    async fn call(&self, arguments: &str) -> Result<ToolOutput, ToolError>;

    /// Runs the tool for a run whose model and gateway requests are bounded by `limits`
    /// (`RunLimits::request_timeout` and `RunLimits::max_response_bytes`). The tool loop
    /// calls this; the default calls [`Tool::call`]. A tool that makes requests of its own
    /// overrides it to honour the run's limits, as the built-in [`WebSearch`] does. Either
    /// way the tool loop ends a call that outlives `limits.timeout` and refuses an output
    /// larger than `limits.max_response_bytes` (both go back to the model as a failed call).
    async fn call_within(
        &self,
        arguments: &str,
        limits: crate::client::RequestLimits,
    ) -> Result<ToolOutput, ToolError> {
        let _ = limits;
        self.call(arguments).await
    }

    /// Whether the tool's output comes from a third party (the `untrusted` handle flag).
    /// Each [`ToolOutput`] still carries its own trust mark, which is what the tool loop
    /// honours.
    fn untrusted(&self) -> bool {
        true
    }
}
