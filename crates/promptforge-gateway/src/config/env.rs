//! Environment lookup: the process environment layered over the env files.
//!
//! The workspace forbids `unsafe`, and editing the process environment is `unsafe` under
//! edition 2024, so env files are not written into the process. They fill a layer that
//! [`EnvLayers::lookup`] consults after the process environment: a variable already set
//! always wins, exactly as if the files had been loaded with "do not override".

use std::collections::BTreeMap;
use std::path::Path;

use super::{ConfigError, ConfigErrorKind};

/// Variables from the env files loaded so far, below the process environment.
#[derive(Debug, Clone, Default)]
pub(crate) struct EnvLayers {
    files: BTreeMap<String, String>,
}

impl EnvLayers {
    /// An empty layer: lookups see the process environment only.
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Looks a variable up: the process environment first, then the loaded env files.
    pub(crate) fn lookup(&self, name: &str) -> Option<String> {
        std::env::var(name)
            .ok()
            .or_else(|| self.files.get(name).cloned())
    }

    /// Loads `path` when it exists. A variable already visible through
    /// [`EnvLayers::lookup`] is not overridden. Returns whether the file existed.
    pub(crate) fn load_file(&mut self, path: &Path) -> Result<bool, ConfigError> {
        let Some(text) = super::files::read_text(path, "env file", true)? else {
            return Ok(false);
        };
        for (line_no, line) in text.lines().enumerate() {
            let Some((name, value)) = parse_line(line).map_err(|message| {
                ConfigError::new(
                    ConfigErrorKind::Parse,
                    path,
                    Some(format!("line {}", line_no + 1)),
                    message,
                )
            })?
            else {
                continue;
            };
            if self.lookup(&name).is_none() {
                self.files.insert(name, value);
            }
        }
        Ok(true)
    }
}

/// Parses one `NAME=value` line; `None` for blank lines and comments.
fn parse_line(line: &str) -> Result<Option<(String, String)>, String> {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return Ok(None);
    }
    let line = line.strip_prefix("export ").unwrap_or(line).trim_start();
    let Some((name, value)) = line.split_once('=') else {
        return Err("expected NAME=value".to_owned());
    };
    let name = name.trim();
    let valid_name = !name.is_empty()
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !valid_name {
        return Err(format!(
            "invalid variable name `{}`",
            super::files::quote(name)
        ));
    }
    let value = value.trim();
    let value = match (value.chars().next(), value.chars().last()) {
        (Some(q @ ('"' | '\'')), Some(end)) if value.len() >= 2 && end == q => {
            &value[1..value.len() - 1]
        }
        _ => value,
    };
    Ok(Some((name.to_owned(), value.to_owned())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_lines() {
        assert_eq!(parse_line("# c").unwrap(), None);
        assert_eq!(parse_line("  ").unwrap(), None);
        assert_eq!(
            parse_line("export A_1=\"x y\"").unwrap(),
            Some(("A_1".into(), "x y".into()))
        );
        assert_eq!(parse_line("B='v'").unwrap(), Some(("B".into(), "v".into())));
        assert_eq!(
            parse_line("C=a=b").unwrap(),
            Some(("C".into(), "a=b".into()))
        );
        assert!(parse_line("no equals").is_err());
        assert!(parse_line("1X=3").is_err());
    }

    #[test]
    fn earlier_files_win() {
        let dir = tempfile::tempdir().unwrap();
        let first = dir.path().join("a.env");
        let second = dir.path().join("b.env");
        std::fs::write(&first, "PF_TEST_ENV_LAYER=first\n").unwrap();
        std::fs::write(&second, "PF_TEST_ENV_LAYER=second\nPF_TEST_ENV_OTHER=o\n").unwrap();
        let mut env = EnvLayers::new();
        assert!(env.load_file(&first).unwrap());
        assert!(env.load_file(&second).unwrap());
        assert!(!env.load_file(&dir.path().join("missing.env")).unwrap());
        assert_eq!(env.lookup("PF_TEST_ENV_LAYER").as_deref(), Some("first"));
        assert_eq!(env.lookup("PF_TEST_ENV_OTHER").as_deref(), Some("o"));
    }
}
