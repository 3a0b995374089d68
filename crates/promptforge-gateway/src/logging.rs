//! Log output: human-readable text (coloured only on a terminal) or one JSON object a line.

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

/// The environment variable that picks the log format when `--log-format` is not given.
pub const LOG_FORMAT_ENV: &str = "PROMPTFORGE_LOG_FORMAT";

/// How log lines are written to stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines; ANSI colour only when stderr is a terminal and `NO_COLOR` is
    /// unset.
    #[default]
    Text,
    /// One JSON object per line (timestamp, level, target, fields), for log collectors.
    Json,
}

/// Whether text logs should carry ANSI colour: stderr is a terminal and `NO_COLOR` is unset
/// or empty (<https://no-color.org>).
pub fn colour_wanted(stderr_is_terminal: bool, no_color: Option<&std::ffi::OsStr>) -> bool {
    stderr_is_terminal && no_color.is_none_or(std::ffi::OsStr::is_empty)
}

/// Installs the process's log subscriber: `RUST_LOG` filters (default `info`), lines go to
/// stderr in `format`.
pub fn init(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => {
            let ansi = colour_wanted(
                std::io::stderr().is_terminal(),
                std::env::var_os("NO_COLOR").as_deref(),
            );
            builder.with_ansi(ansi).init();
        }
        LogFormat::Json => builder.json().with_ansi(false).init(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colour_only_on_a_terminal_without_no_color() {
        use std::ffi::OsStr;
        assert!(colour_wanted(true, None));
        assert!(colour_wanted(true, Some(OsStr::new(""))));
        assert!(!colour_wanted(true, Some(OsStr::new("1"))));
        assert!(!colour_wanted(false, None));
    }
}
