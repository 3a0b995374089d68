//! The `promptforge-gateway` binary: parse the command line, serve, report errors.

#![forbid(unsafe_code)]

use std::io::Write;
use std::process::ExitCode;

use clap::Parser;
use promptforge_gateway::cli::{self, Cli, Command};
use promptforge_gateway::serve;

fn main() -> ExitCode {
    let cli = Cli::parse();
    promptforge_gateway::logging::init(cli.log_format);
    let Command::Serve { config, profile } = cli.command;
    let config = match cli::resolve_config(config) {
        Ok(path) => path,
        Err(message) => {
            let _ = writeln!(std::io::stderr(), "error: {message}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            let _ = writeln!(
                std::io::stderr(),
                "error: cannot start the async runtime: {err}"
            );
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(serve::serve(&config, &profile)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            let _ = writeln!(std::io::stderr(), "error: {err}");
            ExitCode::FAILURE
        }
    }
}
