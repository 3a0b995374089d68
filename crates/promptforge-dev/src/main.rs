//! `promptforge-dev [--watch] [--capture-raw] <prompt.md> [input]`: see the crate README.
#![forbid(unsafe_code)]

fn main() -> std::process::ExitCode {
    std::process::ExitCode::from(promptforge_dev::app::main_with(std::env::args_os().skip(1)))
}
