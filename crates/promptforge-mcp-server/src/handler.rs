//! The rmcp [`ServerHandler`]: the fixed tool list and call dispatch.

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, Implementation, ListToolsResult,
    PaginatedRequestParams, ProgressNotificationParam, ProgressToken, ServerCapabilities,
    ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, Peer, RoleServer, ServerHandler};

use crate::state::Shared;
use crate::tools::{self, ProgressSink, RunRequest};

/// One MCP session's handler over the shared server state.
#[derive(Clone, Debug)]
pub struct Handler {
    shared: Arc<Shared>,
}

impl Handler {
    /// A handler over `shared`.
    pub fn new(shared: Arc<Shared>) -> Self {
        Self { shared }
    }
}

const INSTRUCTIONS: &str = "PromptForge runs named prompts. list_prompts shows the catalog; \
run_prompt runs the prompt the caller names; check_run collects a run that outlived its call.";

struct PeerProgress {
    peer: Peer<RoleServer>,
    token: ProgressToken,
}

impl ProgressSink for PeerProgress {
    async fn send(&mut self, progress: f64, message: String) {
        let frame =
            ProgressNotificationParam::new(self.token.clone(), progress).with_message(message);
        if let Err(e) = self.peer.notify_progress(frame).await {
            tracing::debug!(error = %e, "a progress notification could not be sent");
        }
    }
}

impl ServerHandler for Handler {
    fn get_info(&self) -> ServerConfig {
        let mut implementation =
            Implementation::new("promptforge-mcp-server", env!("CARGO_PKG_VERSION"));
        implementation.title = Some("PromptForge".into());
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(implementation)
            .with_instructions(INSTRUCTIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(tools::tool_list()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let result = match request.name.as_ref() {
            "list_prompts" => tools::list_prompts(&self.shared, request.arguments)?,
            "check_run" => tools::check_run(&self.shared, request.arguments)?,
            "need_prompt" if tools::PICKER => {
                tools::need_prompt(&self.shared, request.arguments).await?
            }
            "run_prompt" => {
                let run = RunRequest::parse(request.arguments)?;
                let token = context
                    .meta
                    .get_progress_token()
                    .or_else(|| request.meta.as_ref().and_then(|m| m.get_progress_token()));
                let sink = token.map(|token| PeerProgress {
                    peer: context.peer.clone(),
                    token,
                });
                let record =
                    tools::run_prompt(Arc::clone(&self.shared), run, context.ct.clone(), sink)
                        .await;
                tools::record_result(&record)
            }
            other => return Err(tools::unknown_tool(other)),
        };
        Ok(CallToolResponse::Complete(result))
    }
}
