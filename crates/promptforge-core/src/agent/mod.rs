//! The model and tool layer: run-wide bindings, the `models.*` and `tools.*` tables, the
//! section's conversation and tool scope, model turns and the tool loop.
//!
//! The walk (`engine`) depends on this module; this module never names the walk. It sees
//! an execution unit only through the narrow seam below:
//!
//! - [`Host`]: what the agent layer asks of a unit (its [`RunAgent`], its [`SectionScope`],
//!   its heading and place, its cancellation, its observer);
//! - [`TurnVm`]: what a model turn asks of the unit's VM (the `sys` model fields and running
//!   a local tool handler under the unit's budgets).
//!
//! The walk calls in through [`install`], [`install_aliases`], [`prose_turn`] and
//! [`InferCall`]. Everything the agent layer keeps, run-wide ([`RunAgent`]) or per section
//! ([`SectionScope`]), is its own type; the walk only holds it.

mod bindings;
mod lua_models;
mod lua_tools;
pub(crate) mod preview;
mod turns;

use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};

use mlua::{Function, Lua, Table};
use promptforge_tool_picker::{LazyPicker, ToolPicker};
use serde_json::Value as Json;
use tokio_util::sync::CancellationToken;

use crate::client::{ChatMessage, CompletionError, GatewayClient, RequestLimits};
use crate::error::RunError;
use crate::limits::RunLimits;
use crate::observe::{DebugCapture, Observation};
use crate::prompt::Prompt;
use crate::resolve::ResolutionContext;
use crate::tools::ToolCatalog;
use bindings::{Bindings, ModelBinding, ModelResolver};

pub(crate) use lua_tools::ParamKind;
pub(crate) use turns::{ProseOutcome, Rounds, prose_turn};

/// What the agent layer needs from an execution unit.
pub(crate) trait Host: Send + Sync + 'static {
    /// The run-wide agent state.
    fn agent(&self) -> &RunAgent;
    /// The unit's section-local model and tool state (the lock is never held across an
    /// await).
    fn scope(&self) -> MutexGuard<'_, SectionScope>;
    /// The unit's heading, as observations and debug events name it.
    fn heading(&self) -> &str;
    /// Whether the unit is a section (H2 and below), not the H1 preamble.
    fn in_section(&self) -> bool;
    /// Whether the unit is a fanout arm (an exhausted tool loop degrades softly there).
    fn in_fanout_arm(&self) -> bool;
    /// The unit's cancellation.
    fn cancel(&self) -> &CancellationToken;
    /// Reports an observation for the unit's section.
    fn observe(&self, event: Observation<'_>);
    /// The unit's trace (off when the run is not traced).
    fn trace(&self) -> &crate::trace::UnitTrace;
}

/// What a model turn needs from the unit's Lua VM.
pub(crate) trait TurnVm: Sync {
    /// The VM (local tool handlers live in its registry).
    fn lua(&self) -> &Lua;
    /// Records the model and finish reason of the latest section turn in `sys`.
    fn set_sys_model(&self, model: &str, finish: Option<&str>) -> Result<(), RunError>;
    /// Runs a local tool handler with checked arguments under the unit's budgets, `jump`
    /// disabled. `Ok(Err(_))` is a handler failure the model is told about; `Err(_)` ends
    /// the unit (cancelled, or out of its budget).
    fn run_handler(
        &self,
        alias: &str,
        handler: Function,
        args: Json,
    ) -> impl Future<Output = Result<Result<String, RunError>, RunError>> + Send;
}

/// The run-wide state of the model and tool layer.
pub(crate) struct RunAgent {
    /// The prompt's origin, for `file:line:` prefixes.
    origin: String,
    execution: String,
    /// The run's untrusted-envelope nonce.
    nonce: String,
    picker: Option<LazyPicker>,
    tools: ToolCatalog,
    debug: Option<Arc<dyn DebugCapture>>,
    configured_client: Option<GatewayClient>,
    client: OnceLock<Result<GatewayClient, CompletionError>>,
    bindings: Mutex<Bindings>,
    resolver: ModelResolver,
    request_limits: RequestLimits,
    max_tool_iterations: u32,
    /// The run's span: a client built from the environment adds its key to the trace's
    /// redaction list.
    trace: crate::trace::Scope,
}

/// What the walk hands the agent layer when a run starts.
pub(crate) struct AgentConfig<'a> {
    pub(crate) prompt: &'a Prompt,
    pub(crate) resolution: ResolutionContext<'a>,
    pub(crate) limits: &'a RunLimits,
    pub(crate) execution: &'a str,
    pub(crate) nonce: &'a str,
    pub(crate) client: Option<GatewayClient>,
    pub(crate) debug: Option<Arc<dyn DebugCapture>>,
    pub(crate) trace: crate::trace::Scope,
}

impl RunAgent {
    pub(crate) fn new(config: AgentConfig<'_>) -> Self {
        let AgentConfig {
            prompt,
            resolution,
            limits,
            execution,
            nonce,
            client,
            debug,
            trace,
        } = config;
        let picker = resolution.picker.map(crate::resolve::PickerSource::to_lazy);
        let models = resolution.models.cloned().unwrap_or_default();
        Self {
            origin: prompt.origin().to_owned(),
            execution: execution.to_owned(),
            nonce: nonce.to_owned(),
            resolver: ModelResolver::new(picker.clone(), models),
            picker,
            tools: resolution.tools.cloned().unwrap_or_default(),
            debug,
            configured_client: client,
            client: OnceLock::new(),
            bindings: Mutex::new(Bindings::default()),
            request_limits: RequestLimits {
                timeout: limits.request_timeout,
                max_response_bytes: limits.max_response_bytes.get(),
            },
            // Tool-loop iterations: the limits' override, else the frontmatter's.
            max_tool_iterations: limits
                .max_tool_iterations
                .unwrap_or_else(|| prompt.frontmatter().max_tool_iterations())
                .get(),
            trace,
        }
    }

    /// The gateway client: the configured one, else one built from the environment at the
    /// first model call.
    fn client(&self) -> Result<&GatewayClient, RunError> {
        let client = self.client.get_or_init(|| {
            let client = match &self.configured_client {
                Some(client) => Ok(client.clone()),
                None => GatewayClient::from_env(),
            };
            if let Some(key) = client
                .as_ref()
                .ok()
                .and_then(GatewayClient::key_for_redaction)
            {
                self.trace.add_secret(key);
            }
            client
        });
        client
            .as_ref()
            .map_err(|error| RunError::from(error.clone()))
    }

    /// The run-wide declarations (the lock is never held across an await).
    fn bindings(&self) -> MutexGuard<'_, Bindings> {
        self.bindings.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The run's tool picker, built on first use (outside every run lock); `None` when the
    /// run has none. A failed build is a binding error naming why.
    fn picker(&self) -> Result<Option<&ToolPicker>, RunError> {
        picker_of(self.picker.as_ref())
    }
}

/// The picker of a lazy handle, building it on first use; `None` without a handle.
pub(crate) fn picker_of(lazy: Option<&LazyPicker>) -> Result<Option<&ToolPicker>, RunError> {
    lazy.map(|l| {
        l.get().map_err(|e| {
            bindings::binding_error(format!(
                "cannot load the tool picker (embedding model and tool index): {e}"
            ))
            .caused_by(e.clone())
        })
    })
    .transpose()
}

/// The section-local state of the model and tool layer, fresh for every unit.
#[derive(Default)]
pub(crate) struct SectionScope {
    /// `tools.add` entries: alias and model-facing description override.
    added: Vec<(String, Option<String>)>,
    /// `tools.add_local` declarations, in order.
    locals: Vec<lua_tools::LocalTool>,
    /// How many locals the next prose block offers (declared before it started).
    visible_locals: usize,
    /// `tools.calls` counts by alias, failures included.
    calls: std::collections::BTreeMap<String, u32>,
    /// The `models.use` selection.
    model_use: Option<String>,
    /// The section's conversation (cleared on every section entry).
    conversation: Vec<ChatMessage>,
    /// Model turns made by this unit (the debug turn index).
    turns: u32,
}

/// Builds the `models` and `tools` tables of a unit's VM.
pub(crate) fn install<H: Host>(lua: &Lua, host: &Arc<H>) -> mlua::Result<(Table, Table)> {
    Ok((
        lua_models::install(lua, host)?,
        lua_tools::install(lua, host)?,
    ))
}

/// Installs the declared tool and model aliases as bare globals (after the shared library
/// replay, so they win over shared globals).
pub(crate) fn install_aliases<H: Host>(lua: &Lua, host: &H) -> mlua::Result<()> {
    lua_tools::install_aliases(lua, host)
}

/// A `models.infer` / `handle:infer` call, checked before it runs.
pub(crate) struct InferCall {
    model: Arc<ModelBinding>,
    prompt: String,
    /// The calling Lua line, for the trace.
    line: Option<usize>,
}

impl InferCall {
    /// `models.infer(prompt)`: the section's current model.
    pub(crate) fn section_model<H: Host>(host: &H, prompt: String) -> Result<Self, RunError> {
        Ok(Self {
            model: lua_models::section_model(host)?,
            prompt,
            line: None,
        })
    }

    /// `handle:infer(prompt)`: the model declared as `alias`.
    pub(crate) fn declared<H: Host>(
        host: &H,
        alias: &str,
        prompt: String,
    ) -> Result<Self, RunError> {
        Ok(Self {
            model: host.agent().bindings().model(alias)?,
            prompt,
            line: None,
        })
    }

    /// Records `line` as the calling line in the trace.
    pub(crate) fn at_line(mut self, line: Option<usize>) -> Self {
        self.line = line;
        self
    }

    /// One tool-free round on a fresh conversation; never touches `reply` or `sys`.
    pub(crate) async fn run<H: Host>(self, host: &H) -> Result<String, RunError> {
        turns::infer(host, &self.model, self.prompt, self.line).await
    }
}
