//! One development run, on resources built once per session.
//!
//! [`Session::connect`] fetches the model catalog and builds `web_search`, `web_fetch` and
//! the tool picker from that same live set; [`Session::run_once`] reads, parses and runs the
//! prompt with an in-memory store, then flushes the raw trace and reconciles the dump off
//! the async runtime's threads.

use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use promptforge_core::client::{GatewayClient, ModelCatalog, RequestLimits};
use promptforge_core::tools::{Tool, ToolCatalog, WebSearch};
use promptforge_core::{
    CancelHandle, NullObserver, Prompt, ResolutionContext, RunConfig, RunError, StoreRef,
    promptforge_version,
};
use promptforge_tool_picker::{Config, ToolPicker};
use promptforge_webfetch::WebFetch;
use rand::Rng;

use crate::capture::TraceCapture;
use crate::console::Console;
use crate::dump::DumpTarget;
use crate::env::GatewayEnv;
use crate::observer::{RunStats, StderrObserver};
use crate::ui::Hub;
use promptforge_core::trace::Tracer;
use promptforge_trace::otlp::{OtlpConfig, OtlpExport};

/// The largest prompt file read, in bytes.
pub const MAX_PROMPT_BYTES: u64 = 4 * 1024 * 1024;

/// Why a session could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SessionError {
    /// The gateway URL or key was refused by the client.
    #[error("{0}")]
    Gateway(String),
    /// The model catalog could not be fetched.
    #[error("cannot fetch the model catalog from the gateway: {0}")]
    Catalog(String),
    /// The tool set or picker could not be built.
    #[error("cannot build the tools: {0}")]
    Tools(String),
}

impl SessionError {
    /// Whether this is a configuration problem (exit 2) rather than a gateway failure.
    pub fn is_config(&self) -> bool {
        matches!(self, Self::Gateway(_))
    }
}

/// How one run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The prompt returned a result.
    Succeeded,
    /// The prompt could not be read or parsed, or its run failed.
    Failed,
    /// The run was cancelled (Ctrl-C).
    Cancelled,
}

/// A fresh run id: `dev-` and 32 lowercase hex digits (128 bits) from the thread-local
/// CSPRNG (ChaCha, seeded from the operating system).
pub fn new_run_id() -> String {
    let bits: u128 = rand::rng().random();
    format!("dev-{bits:032x}")
}

/// What each run traces to: files, the live viewer, an OTLP collector.
#[derive(Debug, Clone, Default)]
pub struct TraceOptions {
    /// `--trace FILE`.
    pub json: Option<std::path::PathBuf>,
    /// `--trace-html FILE`.
    pub html: Option<std::path::PathBuf>,
    /// `--ui`: the live viewer's runs.
    pub ui: Option<Arc<Hub>>,
    /// OTLP export (from the standard `OTEL_*` environment).
    pub otlp: Option<OtlpConfig>,
}

/// The resources every run of a session shares.
pub struct Session {
    client: GatewayClient,
    models: ModelCatalog,
    tools: ToolCatalog,
    picker: Arc<ToolPicker>,
    console: Console,
    capture_raw: bool,
    terminal_newline: bool,
    traces: TraceOptions,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("client", &self.client)
            .field("models", &self.models.len())
            .field("capture_raw", &self.capture_raw)
            .finish_non_exhaustive()
    }
}

impl Session {
    /// Fetches the catalog once and builds the tools and picker once.
    pub async fn connect(
        env: &GatewayEnv,
        console: Console,
        capture_raw: bool,
    ) -> Result<Self, SessionError> {
        let client = GatewayClient::new(&env.url, env.key.expose())
            .map_err(|e| SessionError::Gateway(e.to_string()))?
            .with_key_source(promptforge_core::client::KEY_VAR);
        let models = client
            .models(RequestLimits::default())
            .await
            .map_err(|e| SessionError::Catalog(e.to_string()))?;
        let search: Arc<dyn Tool> = Arc::new(WebSearch::new(client.clone()));
        let fetch: Arc<dyn Tool> = Arc::new(WebFetch::new());
        let tools =
            ToolCatalog::new(&[search, fetch]).map_err(|e| SessionError::Tools(e.to_string()))?;
        let catalog = tools.picker_catalog();
        let picker =
            tokio::task::spawn_blocking(move || ToolPicker::build(catalog, Config::default()))
                .await
                .map_err(|e| SessionError::Tools(format!("the picker build stopped: {e}")))?
                .map_err(|e| SessionError::Tools(format!("cannot build the tool picker: {e}")))?;
        Ok(Self {
            client,
            models,
            tools,
            picker: Arc::new(picker),
            console,
            capture_raw,
            terminal_newline: false,
            traces: TraceOptions::default(),
        })
    }

    /// Traces every run as `options` says.
    pub fn tracing(mut self, options: TraceOptions) -> Self {
        self.traces = options;
        self
    }

    /// Ends every printed result with a newline (watch mode, or stdout is a terminal).
    pub fn newline_results(mut self, on: bool) -> Self {
        self.terminal_newline = on;
        self
    }

    /// Runs the prompt at `prompt` once with `input`, prints the result (stdout) and every
    /// diagnostic (stderr), and dumps the store.
    pub async fn run_once(&self, prompt: &Path, input: &str, cancel: &CancelHandle) -> Outcome {
        let id = new_run_id();
        let console = &self.console;
        console.line(&format!("run id: {id}"));
        let started = Instant::now();
        let shown = prompt.display().to_string();
        let (parsed, source) = match read_prompt(prompt, &shown, &id).await {
            Ok(parsed) => parsed,
            Err(message) => {
                console.line(&format!("dev run failed: {message}"));
                console.line(&RunStats::default().summary(&id, started.elapsed(), 0));
                return Outcome::Failed;
            }
        };
        let target = match DumpTarget::beside(prompt) {
            Ok(target) => target,
            Err(error) => {
                console.line(&format!("dev run failed: {error}"));
                console.line(&RunStats::default().summary(&id, started.elapsed(), 0));
                return Outcome::Failed;
            }
        };
        let capture = if self.capture_raw {
            self.start_capture(&target).await
        } else {
            None
        };

        let store = StoreRef::memory();
        let observer = Arc::new(StderrObserver::new(console.clone(), parsed.name()));
        let mut config = RunConfig::new(id.clone())
            .client(self.client.clone())
            .observer(observer.clone())
            .cancel(cancel.clone());
        if let Some(capture) = &capture {
            config = config.debug(capture.clone());
        }
        let traced = self.start_trace(&parsed, &shown, &source);
        if let Some(tracer) = &traced.tracer {
            config = config.tracer(tracer.clone());
        }
        let resolution = ResolutionContext::new(&self.picker, &self.models, &self.tools);
        let result = promptforge_core::run(&parsed, input, resolution, &store, config).await;

        self.finish_trace(traced).await;
        if let Some(capture) = capture {
            self.finish_capture(capture).await;
        }
        let files = self.dump(&target, &store).await;

        let outcome = match &result {
            Ok(value) => {
                self.print_result(value);
                Outcome::Succeeded
            }
            Err(error) => {
                console.line(&format!("dev run failed: {}", located(error, &shown)));
                if error.is_cancelled() {
                    Outcome::Cancelled
                } else {
                    Outcome::Failed
                }
            }
        };
        console.line(&observer.stats().summary(&id, started.elapsed(), files));
        outcome
    }

    fn print_result(&self, value: &str) {
        let mut stdout = std::io::stdout().lock();
        let newline = if self.terminal_newline && !value.ends_with('\n') {
            "\n"
        } else {
            ""
        };
        if let Err(error) = write!(stdout, "{value}{newline}").and_then(|()| stdout.flush()) {
            self.console
                .line(&format!("dev run failed: cannot write the result: {error}"));
        }
    }

    /// The run's tracer, when a trace file, the viewer or an OTLP collector wants one (an
    /// untraced run records nothing).
    fn start_trace(&self, prompt: &Prompt, shown: &str, source: &str) -> Traced {
        let export = self.traces.otlp.as_ref().and_then(|config| {
            OtlpExport::start(config)
                .map_err(|why| self.console.line(&format!("otlp: export is off: {why}")))
                .ok()
        });
        let ui = self
            .traces
            .ui
            .as_ref()
            .map(|hub| (Arc::clone(hub), hub.begin(prompt.name(), shown)));
        let wanted = self.traces.json.is_some() || self.traces.html.is_some();
        if !wanted && export.is_none() && ui.is_none() {
            return Traced::default();
        }
        let mut builder = Tracer::builder().source(shown, source);
        if let Some(export) = &export {
            builder = builder.listener(export.listener());
        }
        if let Some((_, (_, listener))) = &ui {
            builder = builder.listener(Arc::clone(listener));
        }
        let tracer = builder.build();
        if let Some((hub, (index, _))) = &ui {
            hub.attach(*index, &tracer);
        }
        Traced {
            tracer: Some(tracer),
            export,
            ui: ui.map(|(hub, (index, _))| (hub, index)),
        }
    }

    /// Flushes the OTLP export, writes the trace files (off the async threads) and marks
    /// the viewer's run finished. Failures are reported; they never change the outcome.
    async fn finish_trace(&self, traced: Traced) {
        let Traced { tracer, export, ui } = traced;
        if let Some(export) = export {
            let report = export.finish().await;
            for error in &report.errors {
                self.console.line(&format!("otlp: {error}"));
            }
            if report.dropped > 0 {
                self.console.line(&format!(
                    "otlp: {} spans dropped (the export queue was full)",
                    report.dropped
                ));
            }
        }
        if let Some((hub, index)) = ui {
            hub.finish(index);
        }
        let Some(tracer) = tracer else { return };
        let (json, html) = (self.traces.json.clone(), self.traces.html.clone());
        if json.is_none() && html.is_none() {
            return;
        }
        let written = tokio::task::spawn_blocking(move || {
            promptforge_trace::write::write_outputs(
                &tracer.document(),
                json.as_deref(),
                html.as_deref(),
            )
        })
        .await;
        match written {
            Ok(failures) => {
                for failure in failures {
                    self.console.line(&format!("trace: {failure}"));
                }
            }
            Err(error) => self
                .console
                .line(&format!("trace: the trace writer stopped: {error}")),
        }
    }

    async fn start_capture(&self, target: &DumpTarget) -> Option<Arc<TraceCapture>> {
        let owned = target.clone();
        let cleared = tokio::task::spawn_blocking(move || owned.clear_trace()).await;
        match cleared {
            Ok(Ok(())) => {}
            Ok(Err(error)) => {
                self.console.line(&format!(
                    "capture: cannot clear the previous trace: {error}"
                ));
            }
            Err(error) => self.console.line(&format!(
                "capture: cannot clear the previous trace: {error}"
            )),
        }
        match TraceCapture::start(target.clone()) {
            Ok(capture) => Some(capture),
            Err(error) => {
                self.console.line(&format!(
                    "capture: cannot start the trace writer, capture is off for this run: {error}"
                ));
                None
            }
        }
    }

    async fn finish_capture(&self, capture: Arc<TraceCapture>) {
        let report = match tokio::task::spawn_blocking(move || capture.finish()).await {
            Ok(report) => report,
            Err(error) => {
                self.console
                    .line(&format!("capture: the trace writer stopped: {error}"));
                return;
            }
        };
        for (file, error) in &report.failures {
            self.console
                .line(&format!("capture: cannot write .trace/{file}: {error}"));
        }
        if report.more_failures > 0 {
            self.console.line(&format!(
                "capture: {} more trace files could not be written",
                report.more_failures
            ));
        }
        if report.dropped > 0 {
            self.console.line(&format!(
                "capture: {} trace events dropped because the writer fell behind",
                report.dropped
            ));
        }
    }

    /// Reconciles the dump and returns how many files the store holds.
    async fn dump(&self, target: &DumpTarget, store: &StoreRef) -> usize {
        let files: Vec<(String, String)> = match store.paths() {
            Ok(paths) => paths
                .into_iter()
                .filter_map(|path| store.read(&path).ok().map(|text| (path, text)))
                .collect(),
            Err(error) => {
                self.console
                    .line(&format!("dump: cannot list the store: {error}"));
                return 0;
            }
        };
        let count = files.len();
        let owned = target.clone();
        let report = tokio::task::spawn_blocking(move || owned.reconcile(&files)).await;
        let shown = target.shown().display();
        match report {
            Ok(Ok(report)) => {
                for (path, reason) in &report.skipped {
                    self.console
                        .line(&format!("dump: skipped store path {path:?}: {reason}"));
                }
                for (path, error) in &report.failed {
                    self.console
                        .line(&format!("dump: not written {path:?}: {error}"));
                }
                if report.removed {
                    self.console
                        .line(&format!("dump: {shown} removed (the store is empty)"));
                } else if count > 0 || !report.deleted.is_empty() {
                    self.console.line(&format!(
                        "dump: {shown}: {} written, {} unchanged, {} deleted",
                        report.written.len(),
                        report.unchanged,
                        report.deleted.len()
                    ));
                }
            }
            Ok(Err(error)) => self
                .console
                .line(&format!("dump: {shown} not written: {error}")),
            Err(error) => self
                .console
                .line(&format!("dump: {shown} not written: {error}")),
        }
        count
    }
}

/// A run's tracing: the tracer, the OTLP export and the viewer's run index.
#[derive(Default)]
struct Traced {
    tracer: Option<Tracer>,
    export: Option<OtlpExport>,
    ui: Option<(Arc<Hub>, u64)>,
}

/// Reads and parses the prompt; the error is the message after `dev run failed: `.
async fn read_prompt(prompt: &Path, shown: &str, id: &str) -> Result<(Prompt, String), String> {
    let meta = tokio::fs::metadata(prompt)
        .await
        .map_err(|e| format!("cannot read {shown}: {e}"))?;
    if !meta.is_file() {
        return Err(format!("cannot read {shown}: it is not a file"));
    }
    if meta.len() > MAX_PROMPT_BYTES {
        return Err(format!(
            "cannot read {shown}: it is {} bytes, more than the {MAX_PROMPT_BYTES}-byte limit",
            meta.len()
        ));
    }
    let bytes = tokio::fs::read(prompt)
        .await
        .map_err(|e| format!("cannot read {shown}: {e}"))?;
    let source =
        String::from_utf8(bytes).map_err(|_| format!("cannot read {shown}: it is not UTF-8"))?;
    if promptforge_version(&source).is_none() {
        return Err(format!(
            "{shown} is not a promptforge prompt: its frontmatter declares no `promptforge:` version"
        ));
    }
    let parsed =
        Prompt::parse_named(shown, &source, id, &NullObserver).map_err(|e| e.to_string())?;
    Ok((parsed, source))
}

/// The failure text, led by `file:line: ` when the error maps to a line of the prompt.
pub fn located(error: &RunError, origin: &str) -> String {
    locate(&error.to_string(), origin)
}

/// `text` with its first `origin:line: ` moved to the front; unchanged without one.
pub fn locate(text: &str, origin: &str) -> String {
    let marker = format!("{origin}:");
    let mut from = 0;
    while let Some(found) = text[from..].find(&marker) {
        let start = from + found;
        let rest = &text[start + marker.len()..];
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits > 0 && rest[digits..].starts_with(": ") {
            let line = &rest[..digits];
            let end = start + marker.len() + digits + 2;
            let remainder = format!("{}{}", &text[..start], &text[end..]);
            return format!("{origin}:{line}: {remainder}");
        }
        from = start + marker.len();
    }
    text.to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prompt_line_leads_the_message() {
        assert_eq!(
            locate("in section '## Step': b.md:17: assertion failed!", "b.md"),
            "b.md:17: in section '## Step': assertion failed!"
        );
        assert_eq!(locate("b.md:3: boom", "b.md"), "b.md:3: boom");
        assert_eq!(
            locate("some transport error", "b.md"),
            "some transport error"
        );
        assert_eq!(locate("b.md: not a line", "b.md"), "b.md: not a line");
        assert_eq!(locate("x b.md:: b.md:4: y", "b.md"), "b.md:4: x b.md:: y");
    }

    #[test]
    fn run_ids_are_fresh_lowercase_hex() {
        let a = new_run_id();
        let b = new_run_id();
        assert_ne!(a, b);
        let hex = a.strip_prefix("dev-").unwrap_or("");
        assert_eq!(hex.len(), 32);
        assert!(hex.bytes().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f')));
    }
}
