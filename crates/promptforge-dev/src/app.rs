//! The whole program behind the thin `main`: arguments, environment, Ctrl-C, the single run
//! or the watch loop, and the exit status.

use std::ffi::OsString;
use std::io::{IsTerminal, Write};
use std::path::Path;

use promptforge_core::CancelHandle;
use tokio_util::sync::CancellationToken;

use crate::args::{Args, USAGE};
use crate::capture;
use crate::console::Console;
use crate::env::GatewayEnv;
use crate::runner::{Outcome, Session, TraceOptions};
use crate::ui::UiServer;
use crate::watch::PromptWatcher;
use promptforge_trace::otlp::OtlpConfig;
use std::sync::Arc;

/// Exit status: the run succeeded.
pub const EXIT_OK: u8 = 0;
/// Exit status: the prompt could not be run, or its run failed.
pub const EXIT_FAILED: u8 = 1;
/// Exit status: bad command line or environment.
pub const EXIT_USAGE: u8 = 2;
/// Exit status: interrupted with Ctrl-C.
pub const EXIT_INTERRUPTED: u8 = 130;

/// Runs the program with the arguments after the program name; returns the exit status.
pub fn main_with(args: impl IntoIterator<Item = OsString>) -> u8 {
    let console = Console::stderr();
    let args = match Args::parse(args) {
        Ok(args) => args,
        Err(error) => {
            let _ = writeln!(std::io::stderr(), "error: {error}\n\n{USAGE}");
            return EXIT_USAGE;
        }
    };
    let env = match GatewayEnv::from_env() {
        Ok(env) => env,
        Err(error) => {
            console.line(&format!("error: {error}"));
            return EXIT_USAGE;
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            console.line(&format!("error: cannot start the async runtime: {error}"));
            return EXIT_FAILED;
        }
    };
    let code = runtime.block_on(session(args, env, console));
    // Fanout arms or tools left over by a cancelled run must not hold the exit.
    runtime.shutdown_timeout(std::time::Duration::from_secs(2));
    code
}

async fn session(args: Args, env: GatewayEnv, console: Console) -> u8 {
    let cancel = CancelHandle::new();
    let interrupted = CancellationToken::new();
    {
        let cancel = cancel.clone();
        let interrupted = interrupted.clone();
        let console = console.clone();
        tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                console.line("interrupted: cancelling the run (Ctrl-C again to quit at once)");
                cancel.cancel();
                interrupted.cancel();
                if tokio::signal::ctrl_c().await.is_ok() {
                    std::process::exit(i32::from(EXIT_INTERRUPTED));
                }
            }
        });
    }
    for (flag, path) in [("--trace", &args.trace), ("--trace-html", &args.trace_html)] {
        if let Some(path) = path
            && let Err(why) = promptforge_trace::write::check_target(path)
        {
            console.line(&format!("error: {flag} {}: {why}", path.display()));
            return EXIT_USAGE;
        }
    }
    // Observability never stops a run: a misconfigured OTLP export is a warning.
    let otlp = OtlpConfig::from_env().unwrap_or_else(|why| {
        console.line(&format!("warning: OTLP export is off: {why}"));
        None
    });
    if args.capture_raw {
        console.line(&capture::warning_for(&args.prompt));
    }
    let connected = tokio::select! {
        session = Session::connect(&env, console.clone(), args.capture_raw) => session,
        () = interrupted.cancelled() => return EXIT_INTERRUPTED,
    };
    let session = match connected {
        Ok(session) => session.newline_results(args.watch || std::io::stdout().is_terminal()),
        Err(error) => {
            console.line(&format!("error: {error}"));
            return if error.is_config() {
                EXIT_USAGE
            } else {
                EXIT_FAILED
            };
        }
    };
    let ui = if args.ui {
        match UiServer::start().await {
            Ok(ui) => {
                console.line(&format!(
                    "ui: {} (loopback only; the token in the URL is its key)",
                    ui.url()
                ));
                Some(ui)
            }
            Err(error) => {
                console.line(&format!("error: cannot start the trace viewer: {error}"));
                return EXIT_FAILED;
            }
        }
    } else {
        None
    };
    let session = session.tracing(TraceOptions {
        json: args.trace.clone(),
        html: args.trace_html.clone(),
        ui: ui.as_ref().map(|ui| Arc::clone(ui.hub())),
        otlp,
    });
    if !args.watch {
        let code = match session.run_once(&args.prompt, &args.input, &cancel).await {
            Outcome::Succeeded => EXIT_OK,
            Outcome::Failed if interrupted.is_cancelled() => EXIT_INTERRUPTED,
            Outcome::Failed => EXIT_FAILED,
            Outcome::Cancelled => EXIT_INTERRUPTED,
        };
        if let Some(ui) = &ui
            && !interrupted.is_cancelled()
        {
            // The page stays up for the finished run until the author is done with it.
            console.line(&format!(
                "ui: the run finished; its trace is at {} until Ctrl-C",
                ui.url()
            ));
            interrupted.cancelled().await;
        }
        return code;
    }
    watch(
        &session,
        &args.prompt,
        &args.input,
        &cancel,
        &interrupted,
        &console,
    )
    .await
}

async fn watch(
    session: &Session,
    prompt: &Path,
    input: &str,
    cancel: &CancelHandle,
    interrupted: &CancellationToken,
    console: &Console,
) -> u8 {
    // Watch before the first run, so a save during it is not missed.
    let mut watcher = match PromptWatcher::new(prompt) {
        Ok(watcher) => watcher,
        Err(error) => {
            console.line(&format!("error: {error}"));
            return EXIT_FAILED;
        }
    };
    session.run_once(prompt, input, cancel).await;
    let shown = prompt.display();
    loop {
        if interrupted.is_cancelled() {
            return EXIT_INTERRUPTED;
        }
        console.line(&format!(
            "watching {shown} for changes; press Ctrl-C to stop"
        ));
        let mut report = |line: &str| console.line(line);
        let changed = tokio::select! {
            changed = watcher.next_change(&mut report) => changed,
            () = interrupted.cancelled() => return EXIT_INTERRUPTED,
        };
        if !changed {
            console.line("error: the file watcher stopped");
            return EXIT_FAILED;
        }
        session.run_once(prompt, input, cancel).await;
    }
}
