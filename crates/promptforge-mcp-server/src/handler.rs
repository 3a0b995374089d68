//! The rmcp [`ServerHandler`]: the fixed tool list and call dispatch.

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, CreateTaskResult, DetailedTask,
    GetTaskParams, GetTaskResult, Implementation, ListToolsResult, PaginatedRequestParams,
    ProgressNotificationParam, ProgressToken, ProtocolVersion, ServerCapabilities, ServerConfig,
    Task, TaskPayload, TaskStatus,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, Peer, RoleServer, ServerHandler};
use tokio_util::sync::CancellationToken;

use crate::attach::{Attached, Attachments};
use crate::files::{ClientRoots, Scope};
use crate::logging::{self, LogThreshold, PeerLog};
use crate::roots::SessionRoots;
use crate::runs::{Run, Status};
use crate::state::Shared;
use crate::tools::{self, ProgressSink, RunLog, RunRequest};

/// One MCP session's handler over the shared server state.
#[derive(Clone, Debug)]
pub struct Handler {
    shared: Arc<Shared>,
    /// The session's logging threshold (see [`logging`]): `logging/setLevel` sets it;
    /// `info` until then.
    log_level: Arc<AtomicU8>,
    /// The HTTP transport's watch over call streams (`None` over stdio).
    attachments: Option<Arc<Attachments>>,
    /// The session's roots as its client last listed them.
    roots: Arc<SessionRoots>,
}

impl Handler {
    /// A handler over `shared`.
    pub fn new(shared: Arc<Shared>) -> Self {
        Self {
            shared,
            log_level: Arc::new(AtomicU8::new(logging::INFO)),
            attachments: None,
            roots: Arc::new(SessionRoots::default()),
        }
    }

    /// The same handler with its calls' streams watched (streamable HTTP): a call whose
    /// client went away and did not resume has its attached run cancelled.
    pub fn watching(mut self, attachments: Arc<Attachments>) -> Self {
        self.attachments = Some(attachments);
        self
    }

    /// The call's own cancellation token, registered with the stream watch when there is
    /// one (the guard unregisters it once the call answered).
    fn call_token(
        &self,
        context: &RequestContext<RoleServer>,
    ) -> (CancellationToken, Option<Attached>) {
        let token = context.ct.child_token();
        let session = context
            .extensions
            .get::<axum::http::request::Parts>()
            .and_then(|parts| parts.headers.get("mcp-session-id"))
            .and_then(|value| value.to_str().ok());
        let attached = match (&self.attachments, session) {
            (Some(attachments), Some(session)) => {
                Some(attachments.attach(session.into(), context.id.clone(), token.clone()))
            }
            _ => None,
        };
        (token, attached)
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

/// Whether a call becomes a task: the client declared the tasks extension on a
/// 2026-07-28 or later exchange (SEP-2663). Older revisions never get a task result, since
/// clients that declare the capability there (the MCP Inspector) do not poll for one.
fn wants_task(context: &RequestContext<RoleServer>) -> bool {
    modern(context)
        && context
            .client_capabilities()
            .is_some_and(|c| c.supports_tasks())
}

/// Whether the connection speaks 2026-07-28 or later, where a request opts in to log
/// messages with its own `_meta` (SEP-2575) instead of `logging/setLevel`.
fn modern(context: &RequestContext<RoleServer>) -> bool {
    context
        .protocol_version()
        .is_some_and(|v| v.as_str() >= ProtocolVersion::V_2026_07_28.as_str())
}

/// How often a task client is asked to poll.
pub const TASK_POLL_INTERVAL_MS: u64 = 500;

fn timestamp(at: std::time::SystemTime) -> String {
    humantime::format_rfc3339_millis(at).to_string()
}

impl Handler {
    /// Where the files of a `run_prompt` call may be (see [`crate::roots`]).
    async fn scope(&self, context: &RequestContext<RoleServer>, request: &RunRequest) -> Scope {
        let allowed = Arc::clone(&self.shared.allowed);
        if request.input_file.is_none() && request.output_file.is_none() {
            return Scope {
                roots: ClientRoots::Undeclared,
                allowed,
            };
        }
        let roots = self.roots.of(context, modern(context)).await;
        Scope { roots, allowed }
    }

    /// Where a `run_prompt` call's log messages go: to this client, at the level it asked
    /// for (`None` when a 2026-07-28 call did not opt in).
    fn run_log(
        &self,
        context: &RequestContext<RoleServer>,
        request: &CallToolRequestParams,
    ) -> Option<Arc<dyn RunLog>> {
        let threshold = if modern(context) {
            LogThreshold::Call(logging::requested(&context.meta, request.meta.as_ref())?)
        } else {
            LogThreshold::Session(Arc::clone(&self.log_level))
        };
        let log: Arc<dyn RunLog> = PeerLog::start(context.peer.clone(), threshold);
        Some(log)
    }

    fn task(&self, run: &Run) -> Task {
        let status = if run.is_finished() {
            if run.cancel_requested() {
                TaskStatus::Cancelled
            } else {
                TaskStatus::Completed
            }
        } else {
            TaskStatus::Working
        };
        let retain = u64::try_from(self.shared.registry.retain().as_millis()).unwrap_or(u64::MAX);
        Task::new(
            run.id(),
            status,
            timestamp(run.created()),
            timestamp(std::time::SystemTime::now()),
        )
        .with_ttl_ms(retain)
        .with_poll_interval_ms(TASK_POLL_INTERVAL_MS)
    }

    fn lookup_task(&self, id: &str) -> Result<Arc<Run>, McpError> {
        self.shared.registry.get(id).ok_or_else(|| {
            McpError::invalid_params(
                format!("no task has the id `{id}`: it is unknown, or it finished longer ago than retain_completed"),
                None,
            )
        })
    }
}

impl ServerHandler for Handler {
    async fn get_task(
        &self,
        request: GetTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, McpError> {
        let run = self.lookup_task(&request.task_id)?;
        let task = self.task(&run);
        let record = run.record();
        let payload = match (task.status, record.status) {
            (TaskStatus::Cancelled, _) => TaskPayload::Cancelled,
            (_, Status::Running) => TaskPayload::Working,
            _ => {
                let result = serde_json::to_value(tools::record_result(&record))
                    .map_err(|e| McpError::internal_error(e.to_string(), None))?;
                let serde_json::Value::Object(result) = result else {
                    return Err(McpError::internal_error(
                        "a tool result is not an object",
                        None,
                    ));
                };
                TaskPayload::Completed { result }
            }
        };
        Ok(GetTaskResult::new(DetailedTask::new(task, payload)))
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let run = self.lookup_task(&request.task_id)?;
        if !run.is_finished() {
            run.request_cancel();
        }
        Ok(())
    }

    fn get_info(&self) -> ServerConfig {
        let mut implementation =
            Implementation::new("promptforge-mcp-server", env!("CARGO_PKG_VERSION"));
        implementation.title = Some("PromptForge".into());
        ServerConfig::new(logging::declared(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tasks()
                .build(),
        ))
        .with_server_info(implementation)
        .with_instructions(INSTRUCTIONS)
    }

    #[allow(
        deprecated,
        reason = "logging/setLevel is deprecated by SEP-2577 but served"
    )]
    async fn set_level(
        &self,
        request: rmcp::model::SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.log_level
            .store(logging::rank(request.level), Ordering::Relaxed);
        Ok(())
    }

    async fn on_roots_list_changed(
        &self,
        _context: rmcp::service::NotificationContext<RoleServer>,
    ) {
        self.roots.changed().await;
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
            "run_prompt" if wants_task(&context) => {
                // The tasks extension: the run becomes a task under its own run id.
                let log = self.run_log(&context, &request);
                let mut run_request = RunRequest::parse(request.arguments)?;
                run_request.scope = self.scope(&context, &run_request).await;
                let (generation, entry, run) = tools::register(&self.shared, &run_request);
                let shared = Arc::clone(&self.shared);
                let task_run = Arc::clone(&run);
                tokio::spawn(async move {
                    let cancel = task_run.call_cancel().clone();
                    tools::execute::<PeerProgress>(
                        shared,
                        generation,
                        entry,
                        task_run,
                        run_request,
                        cancel,
                        None,
                        log,
                        false,
                    )
                    .await;
                });
                return Ok(CallToolResponse::Task(CreateTaskResult::new(
                    self.task(&run),
                )));
            }
            "run_prompt" => {
                let log = self.run_log(&context, &request);
                let mut run = RunRequest::parse(request.arguments)?;
                run.scope = self.scope(&context, &run).await;
                let token = context
                    .meta
                    .get_progress_token()
                    .or_else(|| request.meta.as_ref().and_then(|m| m.get_progress_token()));
                let sink = token.map(|token| PeerProgress {
                    peer: context.peer.clone(),
                    token,
                });
                let (cancel, _attached) = self.call_token(&context);
                let record =
                    tools::run_prompt(Arc::clone(&self.shared), run, cancel, sink, log).await;
                tools::record_result(&record)
            }
            other => return Err(tools::unknown_tool(other)),
        };
        Ok(CallToolResponse::Complete(result))
    }
}
