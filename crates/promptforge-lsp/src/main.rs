//! `promptforge-lsp`: the PromptForge language server, speaking LSP over stdin and stdout.
//!
//! Exit status: 0 after `shutdown` then `exit`, 1 when the client goes away or exits
//! without `shutdown`, 2 when stdio cannot be set up.
#![forbid(unsafe_code)]

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

fn main() -> ExitCode {
    if std::env::args().nth(1).is_some_and(|a| a == "--version") {
        let mut stdout = std::io::stdout().lock();
        let _ = writeln!(stdout, "promptforge-lsp {}", env!("CARGO_PKG_VERSION"));
        return ExitCode::SUCCESS;
    }
    let (connection, io) = match promptforge_lsp::transport::stdio() {
        Ok(pair) => pair,
        Err(error) => {
            let _ = writeln!(
                std::io::stderr().lock(),
                "promptforge-lsp: cannot start: {error}"
            );
            return ExitCode::from(2);
        }
    };
    let ended = promptforge_lsp::serve(connection, promptforge_lsp::Options::default());
    io.finish(Duration::from_secs(2));
    match ended {
        promptforge_lsp::Ended::Clean => ExitCode::SUCCESS,
        promptforge_lsp::Ended::Abrupt => ExitCode::from(1),
    }
}
