//! The four MCP tools: schemas, argument checks and their implementations.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use promptforge_core::{Observation, Observer, ResolutionContext, RunConfig, StoreRef};
use rmcp::ErrorData as McpError;
use rmcp::model::{CallToolResult, ErrorCode, JsonObject, Tool};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::catalog::Entry;
use crate::files::{self, Scope};
use crate::runs::{Record, Run, Status};
use crate::state::{Generation, Index, Shared};

/// Entries per `list_prompts` page.
pub const PAGE_SIZE: usize = 100;

pub use crate::files::MAX_INPUT_BYTES;

/// How many candidates `need_prompt` returns at most.
pub const NEED_CANDIDATES: usize = 3;

/// How long a cancelled attached run gets to wind down before the call answers anyway.
pub const CANCEL_GRACE: Duration = Duration::from_secs(5);

/// Whether `need_prompt` is compiled in.
pub const PICKER: bool = cfg!(feature = "picker");

fn object(value: Value) -> Arc<JsonObject> {
    match value {
        Value::Object(map) => Arc::new(map),
        _ => Arc::new(JsonObject::new()),
    }
}

fn declared_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "path": {"type": "string"},
            "description": {"type": "string"}
        },
        "required": ["path", "description"]
    })
}

/// The JSON schema of the run record.
pub fn record_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "run_id": {"type": "string", "description": "The run's id, for check_run."},
            "prompt": {"type": "string"},
            "status": {"type": "string", "enum": ["running", "completed", "failed"]},
            "value": {"type": ["string", "null"], "description": "The artifact (completed runs)."},
            "turns": {"type": "integer", "minimum": 0},
            "elapsed_ms": {"type": "integer", "minimum": 0},
            "error": {"type": ["string", "null"], "description": "Why the run failed (failed runs)."}
        },
        "required": ["run_id", "prompt", "status", "value", "turns", "elapsed_ms", "error"]
    })
}

const NEED_HELP: &str = "State the capability the way a tool author documents it: an imperative \
phrase naming the operation and what it acts on, with no entity names or conversational framing. \
Examples: \"Build a stakeholder position report for one entity.\" or \"Summarise a research paper \
into a one-page brief.\"";

/// The published tools, in a fixed order (three without the `picker` feature).
pub fn tool_list() -> Vec<Tool> {
    let mut tools = vec![
        Tool::new(
            "list_prompts",
            "List the PromptForge prompts this server can run (100 per page): name, description, \
             any problem that stops a prompt running, and its declared input/output store files.",
            object(json!({
                "type": "object",
                "properties": {
                    "cursor": {"type": "string", "description": "The next_cursor of the previous page."}
                },
                "additionalProperties": false
            })),
        )
        .with_raw_output_schema(object(json!({
            "type": "object",
            "properties": {
                "prompts": {"type": "array", "items": {
                    "type": "object",
                    "properties": {
                        "name": {"type": "string"},
                        "description": {"type": "string"},
                        "problem": {"type": ["string", "null"]},
                        "input": declared_schema(),
                        "output": declared_schema()
                    },
                    "required": ["name", "description", "problem"]
                }},
                "next_cursor": {"type": "string"}
            },
            "required": ["prompts"]
        }))),
        Tool::new(
            "run_prompt",
            "Execute the PromptForge prompt the caller names and return its result record. The \
             caller supplies the prompt's name (see list_prompts); the server runs exactly that \
             prompt. A run that outlasts the reply deadline answers status \"running\" with a \
             run_id to collect with check_run.",
            object(json!({
                "type": "object",
                "properties": {
                    "prompt": {"type": "string", "description": "The prompt's name (case and -/_ are folded)."},
                    "args": {"type": "string", "description": "The run's input, passed to the prompt as `args`."},
                    "input_file": {"type": "string", "description": "A file the server reads into the prompt's declared input store path (absolute path recommended)."},
                    "input_text": {"type": "string", "description": "Text placed at the prompt's declared input store path."},
                    "output_file": {"type": "string", "description": "Where the server writes the prompt's declared output store file after the run (atomically)."}
                },
                "required": ["prompt"],
                "additionalProperties": false
            })),
        )
        .with_raw_output_schema(object(record_schema())),
        Tool::new(
            "check_run",
            "Collect the record of a run by its run_id: live runs report status \"running\"; \
             finished runs stay collectable for the server's retain_completed window.",
            object(json!({
                "type": "object",
                "properties": {"run_id": {"type": "string"}},
                "required": ["run_id"],
                "additionalProperties": false
            })),
        )
        .with_raw_output_schema(object(record_schema())),
    ];
    if PICKER {
        tools.push(
            Tool::new(
                "need_prompt",
                format!(
                    "Name up to three catalog prompts that match a capability, best first; runs \
                     none of them. {NEED_HELP}"
                ),
                object(json!({
                    "type": "object",
                    "properties": {"capability": {"type": "string", "description": NEED_HELP}},
                    "required": ["capability"],
                    "additionalProperties": false
                })),
            )
            .with_raw_output_schema(object(json!({
                "type": "object",
                "properties": {
                    "prompts": {"type": "array", "items": {
                        "type": "object",
                        "properties": {"name": {"type": "string"}, "description": {"type": "string"}},
                        "required": ["name", "description"]
                    }},
                    "unavailable": {"type": "string"}
                },
                "required": ["prompts"]
            }))),
        );
    }
    tools
}

/// String arguments of a call, checked against the tool's field list.
struct Args {
    map: JsonObject,
}

impl Args {
    fn new(
        tool: &str,
        arguments: Option<JsonObject>,
        allowed: &[&str],
        required: &[&str],
    ) -> Result<Self, McpError> {
        let map = arguments.unwrap_or_default();
        for (key, value) in &map {
            if !allowed.contains(&key.as_str()) {
                return Err(McpError::invalid_params(
                    format!(
                        "{tool}: unknown argument `{key}` (expected {})",
                        allowed.join(", ")
                    ),
                    None,
                ));
            }
            if !value.is_string() && !value.is_null() {
                return Err(McpError::invalid_params(
                    format!("{tool}: argument `{key}` must be a string"),
                    None,
                ));
            }
        }
        for key in required {
            if !map.get(*key).is_some_and(Value::is_string) {
                return Err(McpError::invalid_params(
                    format!("{tool}: the argument `{key}` is required"),
                    None,
                ));
            }
        }
        Ok(Self { map })
    }

    fn get(&self, key: &str) -> Option<&str> {
        self.map.get(key).and_then(Value::as_str)
    }
}

/// The answer to an unknown tool name (-32601).
pub fn unknown_tool(name: &str) -> McpError {
    let names: Vec<String> = tool_list().iter().map(|t| t.name.to_string()).collect();
    McpError::new(
        ErrorCode::METHOD_NOT_FOUND,
        format!(
            "unknown tool `{name}`: this server publishes {}; run a prompt by naming it to run_prompt",
            names.join(", ")
        ),
        None,
    )
}

/// A record as a tool result: structured content plus one JSON text block; `isError` only
/// for `failed`.
pub fn record_result(record: &Record) -> CallToolResult {
    let value = serde_json::to_value(record).unwrap_or(Value::Null);
    if record.status == Status::Failed {
        CallToolResult::structured_error(value)
    } else {
        CallToolResult::structured(value)
    }
}

/// `list_prompts`.
pub fn list_prompts(
    shared: &Shared,
    arguments: Option<JsonObject>,
) -> Result<CallToolResult, McpError> {
    let args = Args::new("list_prompts", arguments, &["cursor"], &[])?;
    let start = match args.get("cursor") {
        None | Some("") => 0,
        Some(cursor) => cursor.parse::<usize>().map_err(|_| {
            McpError::invalid_params(
                format!("list_prompts: `{cursor}` is not a cursor this server issued"),
                None,
            )
        })?,
    };
    let generation = shared.current();
    let entries = generation.catalog.entries();
    let page: Vec<Value> = entries
        .iter()
        .skip(start)
        .take(PAGE_SIZE)
        .map(|e| listing(e))
        .collect();
    let mut out = json!({ "prompts": page });
    let end = start.saturating_add(PAGE_SIZE);
    if end < entries.len() {
        out["next_cursor"] = Value::String(end.to_string());
    }
    Ok(CallToolResult::structured(out))
}

fn listing(entry: &Entry) -> Value {
    let mut value = json!({
        "name": entry.name,
        "description": entry.description,
        "problem": entry.problem(),
    });
    for (key, declared) in [("input", &entry.input), ("output", &entry.output)] {
        if let Some(d) = declared {
            value[key] = json!({"path": d.path, "description": d.description});
        }
    }
    value
}

/// `check_run`.
pub fn check_run(
    shared: &Shared,
    arguments: Option<JsonObject>,
) -> Result<CallToolResult, McpError> {
    let args = Args::new("check_run", arguments, &["run_id"], &["run_id"])?;
    let id = args.get("run_id").unwrap_or_default();
    match shared.registry.get(id) {
        Some(run) => Ok(record_result(&run.record())),
        None => Ok(record_result(&Record {
            run_id: id.to_owned(),
            prompt: String::new(),
            status: Status::Failed,
            value: None,
            turns: 0,
            elapsed_ms: 0,
            error: Some(format!(
                "no run has the id `{id}`: it is unknown, or it finished longer ago than the \
                 server's retain_completed and was evicted"
            )),
        })),
    }
}

/// `need_prompt`.
pub async fn need_prompt(
    shared: &Shared,
    arguments: Option<JsonObject>,
) -> Result<CallToolResult, McpError> {
    let args = Args::new("need_prompt", arguments, &["capability"], &["capability"])?;
    let capability = args.get("capability").unwrap_or_default().to_owned();
    let generation = shared.current();
    let picker = match &generation.index {
        Index::Ready(picker) => Arc::clone(picker),
        Index::Building => {
            return Ok(CallToolResult::structured(json!({
                "prompts": [],
                "unavailable": "the retrieval index is still being built after boot; retry in a moment, or call list_prompts to browse the catalog",
            })));
        }
        Index::Unavailable(why) => {
            return Ok(CallToolResult::structured(json!({
                "prompts": [],
                "unavailable": format!(
                    "prompt retrieval is unavailable ({why}); call list_prompts to browse the catalog instead"
                ),
            })));
        }
    };
    let ranked = tokio::task::spawn_blocking(move || {
        picker.rank(&capability, NEED_CANDIDATES).map(|scored| {
            scored
                .iter()
                .map(|s| s.tool().name().to_owned())
                .collect::<Vec<_>>()
        })
    })
    .await;
    let names = match ranked {
        Ok(Ok(names)) => names,
        Ok(Err(e)) => {
            return Ok(CallToolResult::structured(json!({
                "prompts": [],
                "unavailable": format!("the capability could not be embedded ({e}); call list_prompts instead"),
            })));
        }
        Err(e) => {
            return Err(McpError::internal_error(
                format!("retrieval failed: {e}"),
                None,
            ));
        }
    };
    let prompts: Vec<Value> = names
        .iter()
        .filter_map(|n| generation.catalog.lookup(n))
        .filter(|e| e.prompt.is_ok())
        .map(|e| json!({"name": e.name, "description": e.description}))
        .collect();
    Ok(CallToolResult::structured(json!({ "prompts": prompts })))
}

/// One progress frame for the call that started a run.
#[derive(Debug, Clone, PartialEq)]
pub enum Progress {
    /// `progress`, `message`.
    Frame(f64, String),
    /// The run returned; everything before this was sent.
    Done,
}

/// How bad a run's log message is (the MCP logging levels a run uses).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogLevel {
    /// A `log()` checkpoint.
    Info,
    /// The run failed.
    Error,
}

/// Where a run's `log()` checkpoints and its failure go: the client that started it (MCP
/// `notifications/message`). Must not block: a sink that cannot keep up drops messages.
pub trait RunLog: Send + Sync + 'static {
    /// One message: `data` is a JSON object naming the run.
    fn log(&self, level: LogLevel, data: Value);

    /// Waits (bounded) until the messages logged so far are on their way: the call's
    /// answer goes out after them.
    fn flush(&self) -> std::pin::Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        Box::pin(std::future::ready(()))
    }
}

/// Counts sections and turns of one run, queues its progress frames and sends its log
/// checkpoints and failure to the client that started it.
struct RunObserver {
    run: Arc<Run>,
    sections: AtomicU32,
    progress: Option<mpsc::UnboundedSender<Progress>>,
    log: Option<Arc<dyn RunLog>>,
}

impl Observer for RunObserver {
    fn observe(&self, _execution: &str, section: &str, event: Observation<'_>) {
        match event {
            Observation::SectionStarted { .. } if section.starts_with("##") => {
                let n = self.sections.fetch_add(1, Ordering::AcqRel) + 1;
                if let Some(tx) = &self.progress {
                    let _ = tx.send(Progress::Frame(f64::from(n), section.to_owned()));
                }
            }
            Observation::ModelTurnCompleted { .. } | Observation::ModelTurnTruncated { .. } => {
                self.run.add_turn();
            }
            Observation::LuaLog { message, .. } => {
                if let Some(log) = &self.log {
                    log.log(
                        LogLevel::Info,
                        json!({
                            "run_id": self.run.id(),
                            "prompt": self.run.prompt(),
                            "section": section,
                            "message": message,
                        }),
                    );
                }
            }
            Observation::RunFailed { error } => {
                if let Some(log) = &self.log {
                    log.log(
                        LogLevel::Error,
                        json!({
                            "run_id": self.run.id(),
                            "prompt": self.run.prompt(),
                            "error": error.to_string(),
                        }),
                    );
                }
            }
            _ => {}
        }
    }
}

/// What a `run_prompt` call asks for.
#[derive(Debug, Clone, Default)]
pub struct RunRequest {
    /// The requested name.
    pub prompt: String,
    /// `args`.
    pub args: String,
    /// `input_file`.
    pub input_file: Option<String>,
    /// `input_text`.
    pub input_text: Option<String>,
    /// `output_file`.
    pub output_file: Option<String>,
    /// Where `input_file` and `output_file` may be (the handler sets it: the client's MCP
    /// roots and `[files] allowed_dirs`); the default admits no file.
    pub scope: Scope,
}

impl RunRequest {
    /// Checks the argument shape of a `run_prompt` call.
    pub fn parse(arguments: Option<JsonObject>) -> Result<Self, McpError> {
        let args = Args::new(
            "run_prompt",
            arguments,
            &["prompt", "args", "input_file", "input_text", "output_file"],
            &["prompt"],
        )?;
        let own = |k: &str| args.get(k).map(str::to_owned);
        Ok(Self {
            prompt: own("prompt").unwrap_or_default(),
            args: own("args").unwrap_or_default(),
            input_file: own("input_file"),
            input_text: own("input_text"),
            output_file: own("output_file"),
            scope: Scope::default(),
        })
    }
}

/// Where the progress of an attached call goes.
pub trait ProgressSink: Send + 'static {
    /// Sends one frame; returns once it is on its way.
    fn send(&mut self, progress: f64, message: String) -> impl Future<Output = ()> + Send;
}

/// Runs a prompt for one call: resolution, admission, seeding, execution, reply deadline.
///
/// `cancel` is the call's own token: cancelled while the call is attached, it cancels the
/// run; once the call has detached (reply deadline), it no longer does.
pub async fn run_prompt<S: ProgressSink>(
    shared: Arc<Shared>,
    request: RunRequest,
    cancel: CancellationToken,
    sink: Option<S>,
    log: Option<Arc<dyn RunLog>>,
) -> Record {
    let (generation, entry, run) = register(&shared, &request);
    execute(
        shared, generation, entry, run, request, cancel, sink, log, true,
    )
    .await
}

/// Registers a run for `request` under the current generation (the generation the run
/// keeps, whatever a reload publishes later).
pub fn register(
    shared: &Shared,
    request: &RunRequest,
) -> (Arc<Generation>, Option<Arc<Entry>>, Arc<Run>) {
    let generation = shared.current();
    let entry = generation.catalog.lookup(&request.prompt).cloned();
    let name = entry
        .as_ref()
        .map_or(request.prompt.as_str(), |e| e.name.as_str());
    let run = shared.registry.start(name);
    (generation, entry, run)
}

/// Drives a registered run: seeding, admission, execution. With `deadline` the call
/// answers `running` past `reply_deadline`; without it (a task) it waits for the end.
#[allow(clippy::too_many_arguments)]
pub async fn execute<S: ProgressSink>(
    shared: Arc<Shared>,
    generation: Arc<Generation>,
    entry: Option<Arc<Entry>>,
    run: Arc<Run>,
    request: RunRequest,
    cancel: CancellationToken,
    mut sink: Option<S>,
    log: Option<Arc<dyn RunLog>>,
    deadline: bool,
) -> Record {
    let Some(entry) = entry else {
        let names = generation.catalog.nearest(&request.prompt);
        run.finish(Err(format!(
            "no prompt is named `{}`. Enabled prompts, nearest first: {}",
            request.prompt,
            names.join(", ")
        )));
        return run.record();
    };
    let prompt = match &entry.prompt {
        Ok(p) => p.clone(),
        Err(problem) => {
            run.finish(Err(format!(
                "the prompt `{}` cannot run: {problem}",
                entry.name
            )));
            return run.record();
        }
    };
    let store = match seed(&entry, &request).await {
        Ok(store) => store,
        Err(e) => {
            run.finish(Err(e));
            return run.record();
        }
    };
    if let Some(file) = &request.output_file {
        let checked = match &entry.output {
            None => Err(format!(
                "output_file was given, but the prompt `{}` declares no output",
                entry.name
            )),
            Some(_) => files::check_output(&request.scope, file).await,
        };
        if let Err(e) = checked {
            run.finish(Err(e));
            return run.record();
        }
    }

    let permit = tokio::select! {
        permit = shared.registry.admit() => match permit {
            Ok(p) => p,
            Err(e) => {
                run.finish(Err(e.to_string()));
                return run.record();
            }
        },
        () = cancel.cancelled() => {
            run.finish(Err("cancelled by the client before the run was admitted".into()));
            return run.record();
        }
    };

    let (tx, mut rx) = mpsc::unbounded_channel();
    if sink.is_some() {
        let _ = tx.send(Progress::Frame(0.0, entry.name.clone()));
    }
    let observer = Arc::new(RunObserver {
        run: Arc::clone(&run),
        sections: AtomicU32::new(0),
        progress: sink.is_some().then(|| tx.clone()),
        log: log.clone(),
    });
    let task_run = Arc::clone(&run);
    let task_shared = Arc::clone(&shared);
    let output = request
        .output_file
        .clone()
        .zip(entry.output.as_ref().map(|d| d.path.clone()));
    let input = request.args.clone();
    let scope = request.scope.clone();
    tokio::spawn(async move {
        let _permit = permit;
        let config = RunConfig::new(task_run.id())
            .cancel(task_run.cancel_handle().clone())
            .client(task_shared.gateway.clone())
            .observer(observer);
        let resolution =
            ResolutionContext::new(&task_shared.picker, &task_shared.models, &task_shared.tools);
        let result = promptforge_core::run(&prompt, &input, resolution, &store, config).await;
        let outcome = match result {
            Ok(value) => match &output {
                Some((file, path)) => write_output(&store, path, &scope, file)
                    .await
                    .map(|()| value),
                None => Ok(value),
            },
            Err(e) => Err(e.to_string()),
        };
        task_run.finish(outcome);
        let _ = tx.send(Progress::Done);
    });

    let reply_deadline = if deadline {
        shared.reply_deadline
    } else {
        // A task has no reply to give early: it is polled with tasks/get.
        Duration::from_secs(u64::from(u32::MAX))
    };
    let deadline = tokio::time::sleep(reply_deadline);
    tokio::pin!(deadline);
    loop {
        tokio::select! {
            biased;
            message = rx.recv() => match message {
                Some(Progress::Frame(progress, text)) => {
                    if let Some(sink) = sink.as_mut() {
                        sink.send(progress, text).await;
                    }
                }
                Some(Progress::Done) | None => {
                    run.finished().await;
                    if let Some(log) = &log {
                        log.flush().await;
                    }
                    run.detach();
                    return run.record();
                }
            },
            () = cancel.cancelled() => {
                run.cancel_handle().cancel();
                let _ = tokio::time::timeout(CANCEL_GRACE, run.finished()).await;
                run.detach();
                return run.record();
            }
            () = &mut deadline => {
                run.detach();
                return run.record();
            }
        }
    }
}

async fn seed(entry: &Entry, request: &RunRequest) -> Result<StoreRef, String> {
    let store = StoreRef::memory();
    let text = match (&request.input_file, &request.input_text) {
        (Some(_), Some(_)) => {
            return Err(
                "input_file and input_text are mutually exclusive: give one of them".into(),
            );
        }
        (None, None) => return Ok(store),
        (Some(_), None) if entry.input.is_none() => String::new(),
        (Some(file), None) => files::read_input(&request.scope, file).await?,
        (None, Some(text)) => {
            if text.len() as u64 > MAX_INPUT_BYTES {
                return Err(format!(
                    "input_text is {} bytes, over the {MAX_INPUT_BYTES}-byte limit",
                    text.len()
                ));
            }
            text.clone()
        }
    };
    let Some(declared) = &entry.input else {
        let which = if request.input_file.is_some() {
            "input_file"
        } else {
            "input_text"
        };
        return Err(format!(
            "{which} was given, but the prompt `{}` declares no input",
            entry.name
        ));
    };
    store
        .write(&declared.path, &text)
        .map_err(|e| format!("cannot place the input at `{}`: {e}", declared.path))?;
    Ok(store)
}

/// Writes the store file `path` to `output_file` `file` (see [`files::write_output`]).
async fn write_output(
    store: &StoreRef,
    path: &str,
    scope: &Scope,
    file: &str,
) -> Result<(), String> {
    let text = store.read(path).map_err(|e| {
        format!("the run completed, but its declared output `{path}` is not in the store: {e}")
    })?;
    files::write_output(scope, file, text).await
}
