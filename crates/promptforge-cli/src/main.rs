//! The `promptforge` command line: `promptforge run <file.md> [input]`.
//!
//! The result alone goes to stdout; every diagnostic goes to stderr. Exit status: 0 on
//! success, 1 when the prompt fails (parse or run), 2 for usage and environment errors,
//! 130 when interrupted.
#![forbid(unsafe_code)]

mod check;
mod source;

use std::io::{IsTerminal, Write};
use std::os::fd::AsFd;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::{Parser, Subcommand};
use promptforge_core::client::{GatewayClient, ModelCatalog, RequestLimits};
use promptforge_core::tools::{Tool, ToolCatalog, WebSearch};
use promptforge_core::trace::Tracer;
use promptforge_core::{
    CancelHandle, NullObserver, Prompt, ResolutionContext, RunConfig, StoreRef, promptforge_version,
};
use promptforge_tool_picker::{Config, LazyPicker};
use promptforge_trace::otlp::{OtlpConfig, OtlpExport};
use promptforge_webfetch::WebFetch;

use source::SourceError;

/// After the first Ctrl-C cancels the run, the process ends with 130 at the latest after
/// this long (or at a second Ctrl-C), whatever the run is doing.
const INTERRUPT_GRACE: Duration = Duration::from_millis(500);

/// The longest error message printed, in bytes; longer ones are cut with a note.
const MAX_ERROR_BYTES: usize = 8 * 1024;

/// Run PromptForge prompts: Markdown files whose Lua steers and whose prose goes to a model.
#[derive(Parser)]
#[command(name = "promptforge", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a prompt file and print its result on stdout.
    ///
    /// Gateway access comes from PROMPTFORGE_GATEWAY_URL and PROMPTFORGE_GATEWAY_API_KEY
    /// (both or neither); credentials are never flags.
    Run {
        /// The prompt file (Markdown with a `promptforge:` frontmatter version).
        file: PathBuf,
        /// The input, passed to the prompt as `args` verbatim.
        input: Option<String>,
        /// Write the run's trace (JSON, see trace.schema.json) to this file, also when the
        /// run fails.
        #[arg(long, value_name = "FILE")]
        trace: Option<PathBuf>,
        /// Write the trace viewer (one self-contained HTML file) to this file.
        #[arg(long = "trace-html", value_name = "FILE")]
        trace_html: Option<PathBuf>,
    },
    /// Check prompt files without running them: every diagnostic as
    /// `file:line:col: error[kind]: message`, then a summary; exit 1 when any file has a
    /// problem.
    ///
    /// Directories are searched recursively for `*.md`; Markdown without a `promptforge:`
    /// version is skipped there, and reported when named explicitly.
    Check {
        /// Files or directories (default: the current directory).
        paths: Vec<PathBuf>,
        /// Output format.
        #[arg(long, value_enum, default_value_t = check::Format::Text)]
        format: check::Format,
    },
}

/// A failure with its exit status.
struct Failure {
    message: String,
    code: u8,
}

impl Failure {
    fn usage(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            code: 2,
        }
    }

    fn prompt(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            code: 1,
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // A stdout that cannot take the output would lose it: refuse before running anything.
    if let Some(problem) = stdout_problem() {
        report(problem);
        return ExitCode::from(2);
    }
    let cancel = CancelHandle::new();
    if let Err(failure) = watch_interrupts(cancel.clone()) {
        report(&failure.message);
        return ExitCode::from(failure.code);
    }
    let (outcome, traces) = match cli.command {
        Command::Run {
            file,
            input,
            trace,
            trace_html,
        } => {
            let outputs = TraceOutputs {
                json: trace,
                html: trace_html,
            };
            run(&file, input.as_deref().unwrap_or(""), cancel, &outputs)
        }
        Command::Check { paths, format } => return check_command(&paths, format),
    };
    let code = match outcome {
        Ok(result) => {
            let newline = if std::io::stdout().is_terminal() && !result.ends_with('\n') {
                "\n"
            } else {
                ""
            };
            match write_stdout(&format!("{result}{newline}")) {
                Ok(()) => 0,
                Err(error) => {
                    report(&format!("cannot write the result to stdout: {error}"));
                    1
                }
            }
        }
        Err(failure) => {
            report(&failure.message);
            failure.code
        }
    };
    // A trace that could not be written fails the command, but never hides the result.
    match traces {
        Err(message) => {
            report(&message);
            ExitCode::from(if code == 0 { 1 } else { code })
        }
        Ok(()) => ExitCode::from(code),
    }
}

/// Where `--trace` and `--trace-html` write.
struct TraceOutputs {
    json: Option<PathBuf>,
    html: Option<PathBuf>,
}

impl TraceOutputs {
    fn any(&self) -> bool {
        self.json.is_some() || self.html.is_some()
    }

    /// Checks both targets before the run (a usage error, exit 2).
    fn check(&self) -> Result<(), Failure> {
        for (flag, path) in [("--trace", &self.json), ("--trace-html", &self.html)] {
            if let Some(path) = path {
                promptforge_trace::write::check_target(path)
                    .map_err(|why| Failure::usage(format!("{flag} {}: {why}", path.display())))?;
            }
        }
        Ok(())
    }

    /// Writes the trace file and the viewer.
    fn write(&self, document: &serde_json::Value) -> Result<(), String> {
        let failures = promptforge_trace::write::write_outputs(
            document,
            self.json.as_deref(),
            self.html.as_deref(),
        );
        if failures.is_empty() {
            Ok(())
        } else {
            Err(failures.join("; "))
        }
    }
}

/// `promptforge check`: the report goes to stdout; exit 1 when anything failed.
fn check_command(paths: &[PathBuf], format: check::Format) -> ExitCode {
    let found = check::check(paths);
    if let Err(error) = write_stdout(&found.render(format)) {
        report(&format!("cannot write the report to stdout: {error}"));
        return ExitCode::from(1);
    }
    if found.failed() {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

/// Writes `text` to stdout through a descriptor of its own. Rust's `Stdout` reports a
/// write to a bad descriptor (`EBADF`: stdout open for reading only, for instance) as a
/// success, which would lose the result with exit status 0; a `File` over a duplicate of
/// descriptor 1 reports every failure.
fn write_stdout(text: &str) -> std::io::Result<()> {
    let mut out = std::fs::File::from(std::io::stdout().as_fd().try_clone_to_owned()?);
    out.write_all(text.as_bytes())?;
    out.flush()
}

/// Why stdout cannot take the result, if it cannot: closed, or open for reading only.
/// Rust's runtime reopens a closed standard descriptor on `/dev/null` read-write before
/// `main` (where a shell's `>/dev/null` is write-only), so that is what a closed stdout
/// looks like here; a descriptor that cannot even be duplicated is closed too. Where
/// `/proc` is unavailable the write itself reports the failure.
fn stdout_problem() -> Option<&'static str> {
    const CLOSED: &str = "stdout is closed, so the result would be lost; run with stdout open";
    const READ_ONLY: &str = "stdout is open for reading only, so the result would be lost; \
         redirect it to a file or pipe opened for writing";
    if std::io::stdout().as_fd().try_clone_to_owned().is_err() {
        return Some(CLOSED);
    }
    let info = std::fs::read_to_string("/proc/self/fdinfo/1").ok()?;
    let access = info
        .lines()
        .find_map(|line| line.strip_prefix("flags:"))
        .and_then(|flags| u32::from_str_radix(flags.trim(), 8).ok())?
        & 0o3;
    if access == 0o0 {
        return Some(READ_ONLY);
    }
    let target = std::fs::read_link("/proc/self/fd/1").ok()?;
    (target == std::path::Path::new("/dev/null") && access == 0o2).then_some(CLOSED)
}

fn report(message: &str) {
    let _ = writeln!(std::io::stderr().lock(), "error: {}", shorten(message));
}

/// Caps a message at [`MAX_ERROR_BYTES`] and escapes what could forge or reorder a console
/// line (controls other than newline and tab, bidirectional formatting characters, U+2028,
/// U+2029), as `promptforge check` does: [`promptforge_core::error::quote_text`].
fn shorten(message: &str) -> String {
    promptforge_core::error::quote_text(message, MAX_ERROR_BYTES, true)
}

/// Listens for Ctrl-C on a thread of its own (so a busy runtime cannot delay it): the first
/// signal cancels the run cooperatively; a second one, or [`INTERRUPT_GRACE`] later, ends
/// the process with 130.
fn watch_interrupts(cancel: CancelHandle) -> Result<(), Failure> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::usage(format!("cannot start the signal handler: {e}")))?;
    // Registered here, before the run starts, so no early Ctrl-C is missed.
    let mut interrupts = runtime
        .block_on(async {
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())
        })
        .map_err(|e| Failure::usage(format!("cannot listen for Ctrl-C: {e}")))?;
    std::thread::Builder::new()
        .name("promptforge-interrupts".to_owned())
        .spawn(move || {
            runtime.block_on(async move {
                if interrupts.recv().await.is_none() {
                    return;
                }
                cancel.cancel();
                tokio::select! {
                    _ = interrupts.recv() => {}
                    () = tokio::time::sleep(INTERRUPT_GRACE) => {}
                }
                report("interrupted");
                std::process::exit(130);
            });
        })
        .map_err(|e| Failure::usage(format!("cannot start the signal handler: {e}")))?;
    Ok(())
}

/// Reads a prompt file for `run`: unreadable and non-regular files are usage errors (2),
/// oversized and non-UTF-8 ones prompt errors (1).
fn read_prompt(file: &std::path::Path, shown: &str) -> Result<String, Failure> {
    source::read_prompt(file, shown).map_err(|error| match error {
        SourceError::Unreadable(_) | SourceError::NotRegular => {
            Failure::usage(format!("cannot read {shown}: {error}"))
        }
        SourceError::TooLarge(size) => Failure::prompt(format!(
            "{shown} is {size} bytes; prompts may be at most {} MiB",
            promptforge_core::parse::MAX_PROMPT_BYTES / (1024 * 1024)
        )),
        SourceError::Encoding(error) => Failure::prompt(error.to_string()),
    })
}

/// Runs the prompt; the second value is how writing the trace files went.
fn run(
    file: &std::path::Path,
    input: &str,
    cancel: CancelHandle,
    outputs: &TraceOutputs,
) -> (Result<String, Failure>, Result<(), String>) {
    let mut traces = Ok(());
    let result = run_traced(file, input, cancel, outputs, &mut traces);
    (result, traces)
}

fn run_traced(
    file: &std::path::Path,
    input: &str,
    cancel: CancelHandle,
    outputs: &TraceOutputs,
    traces: &mut Result<(), String>,
) -> Result<String, Failure> {
    let gateway = GatewayClient::from_env_if_configured()
        .map_err(|error| Failure::usage(error.to_string()))?;
    outputs.check()?;
    // Observability never stops a run: a misconfigured OTLP export is a warning.
    let otlp = OtlpConfig::from_env().unwrap_or_else(|why| {
        warn(&format!("OTLP export is off: {why}"));
        None
    });
    let shown = file.display().to_string();
    let source = read_prompt(file, &shown)?;
    if promptforge_version(&source).is_none() && !source::attempts_prompt(&source) {
        return Err(Failure::prompt(format!(
            "{shown} is not a promptforge prompt: its frontmatter declares no `promptforge:` version"
        )));
    }
    let execution = format!("cli-{}", std::process::id());
    let prompt = Prompt::parse_named(&shown, &source, &execution, &NullObserver)
        .map_err(|error| Failure::prompt(error.to_string()))?;

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|error| Failure::prompt(format!("cannot start the async runtime: {error}")))?;
    runtime.block_on(async {
        let (client, models, tools) = resources(gateway).await?;
        // Built on first use: a prompt that binds no tool and no model never loads the
        // embedding model or indexes the tools.
        let picker = LazyPicker::new(tools.picker_catalog(), Config::default());
        let store = StoreRef::memory();
        let mut config = RunConfig::new(execution).cancel(cancel).client(client);
        // A tracer only when something reads it: an untraced run records nothing.
        let export = otlp.as_ref().and_then(|otlp| {
            OtlpExport::start(otlp)
                .map_err(|why| warn(&format!("OTLP export is off: {why}")))
                .ok()
        });
        let tracer = (outputs.any() || export.is_some()).then(|| {
            let mut builder = Tracer::builder().source(&shown, &source);
            if let Some(export) = &export {
                builder = builder.listener(export.listener());
            }
            builder.build()
        });
        if let Some(tracer) = &tracer {
            config = config.tracer(tracer.clone());
        }
        let resolution = ResolutionContext::lazy(&picker, &models, &tools);
        let result = promptforge_core::run(&prompt, input, resolution, &store, config).await;
        if let Some(export) = export {
            let report = export.finish().await;
            for error in &report.errors {
                warn(&format!("OTLP export: {error}"));
            }
            if report.dropped > 0 {
                warn(&format!(
                    "OTLP export: {} spans dropped (the export queue was full)",
                    report.dropped
                ));
            }
        }
        if let Some(tracer) = &tracer {
            *traces = outputs.write(&tracer.document());
        }
        result.map_err(|error| Failure {
            code: if error.is_cancelled() { 130 } else { 1 },
            message: error.to_string(),
        })
    })
}

fn warn(message: &str) {
    let _ = writeln!(std::io::stderr().lock(), "warning: {}", shorten(message));
}

/// The gateway client, model catalog and tools: with a gateway (remote mode) the catalog is
/// fetched and `web_search` + `web_fetch` are offered; without one (local mode) only
/// `web_fetch`.
async fn resources(
    gateway: Option<GatewayClient>,
) -> Result<(GatewayClient, ModelCatalog, ToolCatalog), Failure> {
    let fetch: Arc<dyn Tool> = Arc::new(WebFetch::new());
    let (client, models, tools) = match gateway {
        None => (
            GatewayClient::disabled(),
            ModelCatalog::empty(),
            vec![fetch],
        ),
        Some(client) => {
            let models = client.models(RequestLimits::default()).await.map_err(|e| {
                Failure::prompt(format!(
                    "cannot fetch the model catalog from the gateway: {e}"
                ))
            })?;
            let search: Arc<dyn Tool> = Arc::new(WebSearch::new(client.clone()));
            (client, models, vec![search, fetch])
        }
    };
    let tools = ToolCatalog::new(&tools).map_err(|e| Failure::prompt(e.to_string()))?;
    Ok((client, models, tools))
}
