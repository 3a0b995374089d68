//! Command-line parsing.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

use crate::logging::LogFormat;

/// The environment variable naming the boot file when no CONFIG argument is given.
pub const CONFIG_ENV: &str = "PROMPTFORGE_GATEWAY_CONFIG";

/// `promptforge-gateway`: an OpenAI-compatible gateway for PromptForge.
#[derive(Debug, Parser)]
#[command(name = "promptforge-gateway", version, about)]
pub struct Cli {
    /// Log format on stderr: `text` (coloured only on a terminal) or `json` (one object a
    /// line).
    #[arg(
        long,
        global = true,
        value_enum,
        default_value_t = LogFormat::Text,
        env = crate::logging::LOG_FORMAT_ENV
    )]
    pub log_format: LogFormat,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Load the boot file and a profile, then serve.
    Serve {
        /// The boot file (default: $PROMPTFORGE_GATEWAY_CONFIG).
        config: Option<PathBuf>,
        /// The profile to load: profiles/NAME.toml beside the boot file.
        #[arg(long, value_name = "NAME")]
        profile: String,
    },
}

/// Picks the boot file: the argument wins over the environment variable.
pub fn resolve_config(argument: Option<PathBuf>) -> Result<PathBuf, String> {
    if let Some(path) = argument {
        return Ok(path);
    }
    match std::env::var_os(CONFIG_ENV) {
        Some(value) if !value.is_empty() => Ok(PathBuf::from(value)),
        _ => Err(format!(
            "no configuration file: pass CONFIG as an argument (promptforge-gateway serve CONFIG --profile NAME) \
             or set {CONFIG_ENV}"
        )),
    }
}
