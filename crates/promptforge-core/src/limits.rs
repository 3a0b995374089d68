//! Run configuration: [`RunLimits`] and [`RunConfig`].

use std::fmt;
use std::num::{NonZeroU32, NonZeroU64, NonZeroUsize};
use std::sync::Arc;
use std::time::Duration;

use crate::cancel::CancelHandle;
use crate::client::GatewayClient;
use crate::observe::{DebugCapture, NullObserver, Observer};

/// Resource caps of a run. Every field has a default; the builder methods replace one each.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunLimits {
    pub(crate) max_tool_iterations: Option<NonZeroU32>,
    pub(crate) max_fanout_concurrency: NonZeroUsize,
    pub(crate) max_response_bytes: NonZeroU64,
    pub(crate) lua_memory_bytes: NonZeroUsize,
    pub(crate) lua_log_events: NonZeroU32,
    pub(crate) lua_instructions: NonZeroU64,
    pub(crate) max_section_entries: NonZeroU64,
    pub(crate) request_timeout: Duration,
    pub(crate) max_store_bytes: NonZeroU64,
    pub(crate) max_fanout_result_bytes: NonZeroU64,
    pub(crate) lua_block_time: Duration,
}

/// Execute/fanout nesting cap, counted across fanout boundaries.
pub(crate) const MAX_NESTING: u32 = 8;

const fn nz32(value: u32) -> NonZeroU32 {
    match NonZeroU32::new(value) {
        Some(v) => v,
        None => NonZeroU32::MIN,
    }
}

const fn nz64(value: u64) -> NonZeroU64 {
    match NonZeroU64::new(value) {
        Some(v) => v,
        None => NonZeroU64::MIN,
    }
}

const fn nzu(value: usize) -> NonZeroUsize {
    match NonZeroUsize::new(value) {
        Some(v) => v,
        None => NonZeroUsize::MIN,
    }
}

impl Default for RunLimits {
    fn default() -> Self {
        Self {
            max_tool_iterations: None,
            max_fanout_concurrency: nzu(8),
            max_response_bytes: nz64(16 * 1024 * 1024),
            lua_memory_bytes: nzu(64 * 1024 * 1024),
            lua_log_events: nz32(1024),
            lua_instructions: nz64(10_000_000),
            max_section_entries: nz64(100_000),
            request_timeout: Duration::from_secs(120),
            max_store_bytes: nz64(256 * 1024 * 1024),
            max_fanout_result_bytes: nz64(64 * 1024 * 1024),
            lua_block_time: Duration::from_secs(60),
        }
    }
}

impl RunLimits {
    /// The defaults: tool iterations from the prompt's frontmatter (24 unless set), 8
    /// parallel fanout arms, 16 MiB responses, 64 MiB per Lua VM, 1024 log events, about 10
    /// million instructions per Lua block, 100,000 section entries, 120 s per model request,
    /// 256 MiB held in the store, 64 MiB of fanout results held at once, 60 s of running
    /// time per Lua block.
    pub fn new() -> Self {
        Self::default()
    }

    /// Model round-trips per tool loop; overrides the frontmatter's `max_tool_iterations`.
    pub fn max_tool_iterations(mut self, value: NonZeroU32) -> Self {
        self.max_tool_iterations = Some(value);
        self
    }

    /// Fanout arms that run at once.
    pub fn max_fanout_concurrency(mut self, value: NonZeroUsize) -> Self {
        self.max_fanout_concurrency = value;
        self
    }

    /// The largest model response accepted, in bytes.
    pub fn max_response_bytes(mut self, value: NonZeroU64) -> Self {
        self.max_response_bytes = value;
        self
    }

    /// The memory ceiling of each Lua VM, in bytes.
    pub fn lua_memory_bytes(mut self, value: NonZeroUsize) -> Self {
        self.lua_memory_bytes = value;
        self
    }

    /// How many `log()` checkpoints a run reports; later ones are dropped.
    pub fn lua_log_events(mut self, value: NonZeroU32) -> Self {
        self.lua_log_events = value;
        self
    }

    /// The instruction budget of one Lua block (or local tool handler call).
    pub fn lua_instructions(mut self, value: NonZeroU64) -> Self {
        self.lua_instructions = value;
        self
    }

    /// How many section entries (including fanout arms) one run may make; a guard against
    /// endless `jump` cycles.
    pub fn max_section_entries(mut self, value: NonZeroU64) -> Self {
        self.max_section_entries = value;
        self
    }

    /// The most bytes the store may hold while the run writes to it (the sum of its files'
    /// sizes); a write, append or replacement past it fails with a `limit` error.
    pub fn max_store_bytes(mut self, value: NonZeroU64) -> Self {
        self.max_store_bytes = value;
        self
    }

    /// The most bytes of fanout results (arm texts and items) the run holds at once, across
    /// every fanout in flight; past it the fanout fails with a `limit` error.
    pub fn max_fanout_result_bytes(mut self, value: NonZeroU64) -> Self {
        self.max_fanout_result_bytes = value;
        self
    }

    /// The running time of one Lua block (or local tool handler call), not counting the time
    /// it waits for `execute`, `fanout` or model calls: a backstop for code whose single
    /// instructions are expensive (concatenating large strings in a loop, for instance).
    pub fn lua_block_time(mut self, value: Duration) -> Self {
        self.lua_block_time = value;
        self
    }

    /// The timeout of one model or gateway request.
    pub fn request_timeout(mut self, value: Duration) -> Self {
        self.request_timeout = value;
        self
    }
}

/// Per-run configuration: execution id, observer, cancellation and limits.
#[derive(Clone)]
pub struct RunConfig {
    pub(crate) execution: String,
    pub(crate) observer: Arc<dyn Observer>,
    pub(crate) cancel: CancelHandle,
    pub(crate) limits: RunLimits,
    pub(crate) client: Option<GatewayClient>,
    pub(crate) debug: Option<Arc<dyn DebugCapture>>,
    pub(crate) tracer: Option<crate::trace::Tracer>,
}

impl fmt::Debug for RunConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RunConfig")
            .field("execution", &self.execution)
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

impl RunConfig {
    /// A configuration for the run with this execution id.
    pub fn new(execution: impl Into<String>) -> Self {
        Self {
            execution: execution.into(),
            observer: Arc::new(NullObserver),
            cancel: CancelHandle::new(),
            limits: RunLimits::default(),
            client: None,
            debug: None,
            tracer: None,
        }
    }

    /// The gateway client model calls use. Without one, the run builds one from
    /// `PROMPTFORGE_GATEWAY_URL` and `PROMPTFORGE_GATEWAY_API_KEY` at its first model call.
    pub fn client(mut self, client: GatewayClient) -> Self {
        self.client = Some(client);
        self
    }

    /// Receives the raw JSON of every model turn.
    pub fn debug(mut self, debug: Arc<dyn DebugCapture>) -> Self {
        self.debug = Some(debug);
        self
    }

    /// Records the run's trace (see [`crate::trace`]); without one, nothing is recorded and
    /// no `traceparent` is sent.
    pub fn tracer(mut self, tracer: crate::trace::Tracer) -> Self {
        self.tracer = Some(tracer);
        self
    }

    /// Receives the run's observations.
    pub fn observer(mut self, observer: Arc<dyn Observer>) -> Self {
        self.observer = observer;
        self
    }

    /// Cancels the run when the handle is cancelled.
    pub fn cancel(mut self, cancel: CancelHandle) -> Self {
        self.cancel = cancel;
        self
    }

    /// Replaces the default limits.
    pub fn limits(mut self, limits: RunLimits) -> Self {
        self.limits = limits;
        self
    }

    /// The execution id.
    pub fn execution(&self) -> &str {
        &self.execution
    }
}
