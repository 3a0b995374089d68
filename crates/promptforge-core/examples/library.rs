//! The guide's Execution chapter, step by step, as a program that links `promptforge-core`
//! and nothing else of PromptForge: parse with an observer, a custom `Tool`, a tool catalog
//! and the picker over it, the gateway's model catalog, a `RunConfig` with an observer, a
//! debug sink, a gateway client, a cancel handle and limits, then the Errors chapter's
//! handling of the result.
//!
//! ```text
//! PROMPTFORGE_GATEWAY_URL=http://127.0.0.1:8080/v1 PROMPTFORGE_GATEWAY_API_KEY=… \
//!     cargo run -p promptforge-core --example library -- "Ada"
//! ```
//!
//! Ctrl-C cancels the run cooperatively. `tests/examples.rs` runs [`demo`] against a
//! scripted gateway on loopback.
#![allow(clippy::print_stdout, clippy::print_stderr, dead_code)]

use std::num::{NonZeroU32, NonZeroU64, NonZeroUsize};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use promptforge_core::client::RequestLimits;
use promptforge_core::{
    CancelHandle, DebugCapture, DebugEvent, GatewayClient, Observation, Observer, Prompt,
    ResolutionContext, RunConfig, RunLimits, StoreRef, Tool, ToolCatalog, ToolError, ToolId,
    ToolOutput, async_trait, run,
};

/// The prompt: a model bound by description, the custom tool bound by description too.
pub const SOURCE: &str = "---
name: library_example
description: Greet someone loudly through a custom tool
promptforge: 1
---

# Library

```lua
models.default(\"writer\", \"a small instruction-following chat model\")
tools.bind(\"shout\", \"turn a text into capital letters\")
tools.always(\"shout\")
```

## Greet

```lua
log(\"greeting \" .. args)
```

Greet {{ args }}, then pass your greeting through the shout tool and answer with its result.
";

/// Step 1: an observer. One `Arc` serves the parse and the run.
#[derive(Debug, Default)]
pub struct Printer {
    /// How many observations it saw.
    pub seen: AtomicU32,
}

impl Observer for Printer {
    fn observe(&self, execution: &str, section: &str, event: Observation<'_>) {
        self.seen.fetch_add(1, Ordering::Relaxed);
        eprintln!("[{execution}] {section} {event:?}");
    }
}

/// A debug sink: counts the raw requests it is shown.
#[derive(Debug, Default)]
pub struct Requests(pub AtomicU32);

impl DebugCapture for Requests {
    fn on_event(&self, _execution: &str, _section: &str, _turn: u32, event: DebugEvent<'_>) {
        if let DebugEvent::Request { .. } = event {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Step 2: a custom tool, as the guide's "Implementing Custom Tools" writes it.
pub struct Shout {
    id: ToolId,
    parameters: serde_json::Value,
}

impl Shout {
    /// The tool, under the identity `example/shout`.
    pub fn new() -> Self {
        Self {
            id: ToolId::new("example", "shout"),
            parameters: serde_json::json!({
                "type": "object",
                "properties": {"text": {"type": "string", "description": "The text to shout"}},
                "required": ["text"]
            }),
        }
    }
}

impl Default for Shout {
    fn default() -> Self {
        Self::new()
    }
}

#[async_trait]
impl Tool for Shout {
    fn id(&self) -> &ToolId {
        &self.id
    }

    fn wire_name(&self) -> &str {
        "shout"
    }

    fn description(&self) -> &str {
        "Turn a text into capital letters"
    }

    fn parameters(&self) -> &serde_json::Value {
        &self.parameters
    }

    async fn call(&self, arguments: &str) -> Result<ToolOutput, ToolError> {
        let arguments: serde_json::Value = serde_json::from_str(arguments)
            .map_err(|e| ToolError::invalid_arguments(format!("not JSON: {e}")))?;
        let text = arguments["text"]
            .as_str()
            .ok_or_else(|| ToolError::invalid_arguments("`text` must be a string"))?;
        // Our own code wrote this output: it is trusted (no envelope).
        Ok(ToolOutput::trusted(text.to_uppercase()))
    }

    fn untrusted(&self) -> bool {
        false
    }
}

/// What a run ended with, as the Errors chapter sorts it.
#[derive(Debug, PartialEq, Eq)]
pub enum Ending {
    /// The result.
    Done(String),
    /// The cancel handle stopped it.
    Cancelled,
    /// A transient failure: worth running again.
    Transient(String),
    /// Anything else.
    Fatal(String),
}

/// Steps 3 to 6: catalogs, picker, configuration, the run and its result.
pub async fn demo(
    client: GatewayClient,
    input: &str,
    cancel: CancelHandle,
) -> Result<(Ending, Arc<Printer>, Arc<Requests>), Box<dyn std::error::Error>> {
    let printer = Arc::new(Printer::default());
    let observer: Arc<dyn Observer> = printer.clone();
    let prompt = Prompt::parse(SOURCE, "library-example", &observer)?;

    let tools: Vec<Arc<dyn Tool>> = vec![Arc::new(Shout::new())];
    let tool_catalog = ToolCatalog::new(&tools)?;
    // The picker over the tool catalog: core builds it, no other dependency needed.
    let picker = tool_catalog.picker()?;
    let models = client.models(RequestLimits::default()).await?;

    let limits = RunLimits::new()
        .max_tool_iterations(NonZeroU32::new(24).ok_or("24 is not zero")?)
        .max_fanout_concurrency(NonZeroUsize::new(8).ok_or("8 is not zero")?)
        .max_response_bytes(NonZeroU64::new(16 * 1024 * 1024).ok_or("not zero")?)
        .lua_memory_bytes(NonZeroUsize::new(64 * 1024 * 1024).ok_or("not zero")?)
        .lua_log_events(NonZeroU32::new(1024).ok_or("not zero")?)
        .request_timeout(Duration::from_secs(120));
    let requests = Arc::new(Requests::default());
    let config = RunConfig::new("library-example")
        .observer(Arc::clone(&observer))
        .debug(Arc::clone(&requests))
        .client(client)
        .cancel(cancel)
        .limits(limits);

    let result = run(
        &prompt,
        input,
        ResolutionContext::new(&picker, &models, &tool_catalog),
        &StoreRef::memory(),
        config,
    )
    .await;
    let ending = match result {
        Ok(value) => Ending::Done(value),
        Err(e) if e.is_cancelled() => Ending::Cancelled,
        Err(e) if e.is_retryable() => Ending::Transient(e.to_string()),
        Err(e) => Ending::Fatal(e.to_string()),
    };
    Ok((ending, printer, requests))
}

#[tokio::main]
async fn main() -> ExitCode {
    let input = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "World".to_owned());
    let client = match GatewayClient::from_env() {
        Ok(client) => client,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    // From another task: Ctrl-C cancels the run.
    let cancel = CancelHandle::new();
    let on_signal = cancel.clone();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            on_signal.cancel();
        }
    });
    match demo(client, &input, cancel).await {
        Ok((Ending::Done(result), _, _)) => {
            println!("{result}");
            ExitCode::SUCCESS
        }
        Ok((Ending::Cancelled, _, _)) => {
            eprintln!("run was cancelled");
            ExitCode::from(130)
        }
        Ok((Ending::Transient(e), _, _)) => {
            eprintln!("transient failure: {e}");
            ExitCode::from(1)
        }
        Ok((Ending::Fatal(e), _, _)) => {
            eprintln!("fatal: {e}");
            ExitCode::from(1)
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(1)
        }
    }
}
