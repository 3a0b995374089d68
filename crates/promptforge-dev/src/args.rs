//! The command line: `promptforge-dev [--watch] [--capture-raw] <prompt.md> [input]`.

use std::ffi::OsString;
use std::path::PathBuf;

/// The usage text printed with every command-line error.
pub const USAGE: &str = "usage: promptforge-dev [--watch] [--capture-raw] [--trace FILE] [--trace-html FILE] [--ui] <prompt.md> [input]\n\
\n\
Runs a PromptForge prompt against the gateway at PROMPTFORGE_GATEWAY_URL (bearer\n\
PROMPTFORGE_GATEWAY_API_KEY), prints the result on stdout and dumps the store to\n\
<prompt-stem>.store/ beside the prompt.\n\
\n\
  --watch        rerun after every save of the prompt file (300 ms quiet period)\n\
  --capture-raw  write each model turn's raw request and response JSON to <stem>.store/.trace\n\
  --trace FILE   write each run's trace (JSON, trace.schema.json) to FILE\n\
  --trace-html FILE  write each run's trace viewer (one self-contained HTML file) to FILE\n\
  --ui           serve the live trace viewer on 127.0.0.1 (the URL, with its token, is printed)\n\
  --             end of flags: everything after it is positional (an input may start with -)\n\
\n\
Model parameters (context, thinking, max tokens) belong in the prompt file, not on the\n\
command line.";

/// The parsed command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Args {
    /// `--watch`: rerun on every save.
    pub watch: bool,
    /// `--capture-raw`: persist raw model turns under `.trace/`.
    pub capture_raw: bool,
    /// `--trace FILE`: write each run's trace file.
    pub trace: Option<PathBuf>,
    /// `--trace-html FILE`: write each run's trace viewer.
    pub trace_html: Option<PathBuf>,
    /// `--ui`: serve the live trace viewer on loopback.
    pub ui: bool,
    /// The prompt file.
    pub prompt: PathBuf,
    /// The input, `""` when omitted.
    pub input: String,
}

/// A command line that cannot be run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum UsageError {
    /// A `--flag` (or `-x`) that is not one of the runner's.
    #[error("unknown flag `{0}`")]
    UnknownFlag(String),
    /// No prompt path.
    #[error("missing the prompt file")]
    MissingPrompt,
    /// More than two positional arguments.
    #[error("unexpected extra argument `{0}` (quote an input that has spaces)")]
    Extra(String),
    /// An argument that is not valid UTF-8.
    #[error("an argument is not valid UTF-8")]
    NotUtf8,
    /// A flag that takes a value came without one.
    #[error("`{0}` needs a file name")]
    MissingValue(String),
}

impl Args {
    /// Parses the arguments after the program name.
    ///
    /// Flags may come before or between positionals; `--` ends them. `-` alone is a
    /// positional. Anything else starting with `-` is an unknown flag, including the
    /// removed `--context`, `--max-tokens` and `--no-think`, and `--help` (the guide allows
    /// no other flag; the usage text comes with every refusal).
    pub fn parse<I>(args: I) -> Result<Self, UsageError>
    where
        I: IntoIterator<Item = OsString>,
    {
        let mut watch = false;
        let mut capture_raw = false;
        let mut ui = false;
        let mut trace = None;
        let mut trace_html = None;
        let mut positional = Vec::new();
        let mut flags_done = false;
        let mut args = args.into_iter();
        while let Some(arg) = args.next() {
            let arg = arg.into_string().map_err(|_| UsageError::NotUtf8)?;
            if flags_done || arg == "-" || !arg.starts_with('-') {
                positional.push(arg);
                continue;
            }
            let (flag, inline) = match arg.split_once('=') {
                Some((flag, value)) if flag.starts_with("--") => {
                    (flag.to_owned(), Some(value.to_owned()))
                }
                _ => (arg.clone(), None),
            };
            match flag.as_str() {
                "--trace" | "--trace-html" => {
                    let value = match inline {
                        Some(value) => value,
                        None => args
                            .next()
                            .ok_or_else(|| UsageError::MissingValue(flag.clone()))?
                            .into_string()
                            .map_err(|_| UsageError::NotUtf8)?,
                    };
                    if value.is_empty() {
                        return Err(UsageError::MissingValue(flag));
                    }
                    let slot = if flag == "--trace" {
                        &mut trace
                    } else {
                        &mut trace_html
                    };
                    *slot = Some(PathBuf::from(value));
                }
                _ if inline.is_some() => return Err(UsageError::UnknownFlag(arg)),
                "--" => flags_done = true,
                "--watch" => watch = true,
                "--capture-raw" => capture_raw = true,
                "--ui" => ui = true,
                _ => return Err(UsageError::UnknownFlag(arg)),
            }
        }
        let mut positional = positional.into_iter();
        let prompt = positional.next().ok_or(UsageError::MissingPrompt)?;
        let input = positional.next().unwrap_or_default();
        if let Some(extra) = positional.next() {
            return Err(UsageError::Extra(extra));
        }
        Ok(Self {
            watch,
            capture_raw,
            trace,
            trace_html,
            ui,
            prompt: PathBuf::from(prompt),
            input,
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn parse(args: &[&str]) -> Result<Args, UsageError> {
        Args::parse(args.iter().map(OsString::from))
    }

    #[test]
    fn flags_positionals_and_the_delimiter() {
        let args = parse(&["--watch", "p.md", "--capture-raw", "in put"]).unwrap();
        assert!(args.watch && args.capture_raw);
        assert_eq!(args.prompt, PathBuf::from("p.md"));
        assert_eq!(args.input, "in put");
        let args = parse(&["p.md", "--", "--not-a-flag"]).unwrap();
        assert_eq!(args.input, "--not-a-flag");
        assert!(!args.watch);
        assert_eq!(parse(&["p.md"]).unwrap().input, "");
        assert_eq!(parse(&["p.md", "-"]).unwrap().input, "-");
    }

    #[test]
    fn trace_flags_take_a_file_and_ui_is_a_switch() {
        let args = parse(&[
            "--trace",
            "t.json",
            "--ui",
            "p.md",
            "--trace-html=t.html",
            "x",
        ])
        .unwrap();
        assert_eq!(args.trace, Some(PathBuf::from("t.json")));
        assert_eq!(args.trace_html, Some(PathBuf::from("t.html")));
        assert!(args.ui);
        assert_eq!(args.input, "x");
        assert_eq!(
            parse(&["p.md", "--trace"]),
            Err(UsageError::MissingValue("--trace".to_owned()))
        );
        assert_eq!(
            parse(&["p.md", "--trace-html="]),
            Err(UsageError::MissingValue("--trace-html".to_owned()))
        );
        assert_eq!(
            parse(&["--ui=1", "p.md"]),
            Err(UsageError::UnknownFlag("--ui=1".to_owned()))
        );
    }

    #[test]
    fn unknown_flags_and_bad_shapes_are_refused() {
        for flag in [
            "--context",
            "--max-tokens",
            "--no-think",
            "--watch=1",
            "-w",
            "--help",
        ] {
            assert_eq!(
                parse(&[flag, "p.md"]),
                Err(UsageError::UnknownFlag(flag.to_owned()))
            );
        }
        assert_eq!(parse(&[]), Err(UsageError::MissingPrompt));
        assert_eq!(parse(&["--watch"]), Err(UsageError::MissingPrompt));
        assert_eq!(
            parse(&["p.md", "a", "b"]),
            Err(UsageError::Extra("b".to_owned()))
        );
    }
}
