//! `promptforge-mcp-server serve [--stdio] <prompts.toml>`.
//!
//! Exit status: 0 after a clean shutdown, 1 when boot or serving fails, 2 for usage errors.
//! Logs go to stderr; over stdio, stdout carries only JSON-RPC.
#![forbid(unsafe_code)]

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use promptforge_mcp_server::config::Config;
use promptforge_mcp_server::serve::{self, Transport};

/// Serve PromptForge prompts to MCP clients (Cursor, Claude Code, ...).
#[derive(Parser)]
#[command(name = "promptforge-mcp-server", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the catalog a prompts.toml describes: streamable HTTP on [server].bind, or
    /// stdio with --stdio.
    Serve {
        /// Speak JSON-RPC on stdin/stdout instead of binding a port.
        #[arg(long)]
        stdio: bool,
        /// The configuration file.
        config: PathBuf,
    },
}

/// The log filter without `RUST_LOG`: `info`, except rmcp's session manager, which logs
/// every session id it creates at info (ids are bearer-like: they go at debug or not at all).
const DEFAULT_LOG_FILTER: &str = "info,rmcp::transport::streamable_http_server::session=warn";

fn main() -> ExitCode {
    let cli = Cli::parse();
    let Command::Serve { stdio, config } = cli.command;
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(DEFAULT_LOG_FILTER)),
        )
        .init();
    let transport = if stdio {
        Transport::Stdio
    } else {
        Transport::Http
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => return fail(&format!("cannot start the async runtime: {e}")),
    };
    let outcome = runtime.block_on(async {
        let config = Config::load(&config).map_err(|e| e.to_string())?;
        let booted = serve::boot(config, transport)
            .await
            .map_err(|e| e.to_string())?;
        match transport {
            Transport::Stdio => serve::serve_stdio(booted).await,
            Transport::Http => serve::serve_http(booted).await,
        }
        .map_err(|e| e.to_string())
    });
    // A pending stdin read cannot be cancelled: do not wait for it.
    runtime.shutdown_timeout(std::time::Duration::from_millis(100));
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => fail(&message),
    }
}

fn fail(message: &str) -> ExitCode {
    let mut stderr = std::io::stderr().lock();
    for line in message.lines() {
        let _ = writeln!(stderr, "error: {line}");
    }
    ExitCode::from(1)
}
