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
use crate::runner::{Outcome, Session};
use crate::watch::PromptWatcher;

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
    if !args.watch {
        return match session.run_once(&args.prompt, &args.input, &cancel).await {
            Outcome::Succeeded => EXIT_OK,
            Outcome::Failed if interrupted.is_cancelled() => EXIT_INTERRUPTED,
            Outcome::Failed => EXIT_FAILED,
            Outcome::Cancelled => EXIT_INTERRUPTED,
        };
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
