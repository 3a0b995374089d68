//! Environment lookup for `${VAR}`: the process environment over the env files, in the
//! syntax of `promptforge-env` (shared with the MCP server).

#[cfg(test)]
use std::collections::HashMap;
use std::path::Path;

use promptforge_env::Env;

use super::{ConfigError, ConfigErrorKind};

/// Variables from the env files loaded so far, below the process environment (or, in
/// tests, a fixed map standing for it).
#[derive(Debug, Clone, Default)]
pub(crate) struct EnvLayers {
    env: Env,
}

impl EnvLayers {
    /// The real process environment, no file loaded yet.
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// `process` standing for the process environment (the in-process tests, which share
    /// one real environment), no file loaded yet.
    #[cfg(test)]
    pub(crate) fn fixed(process: HashMap<String, String>) -> Self {
        Self {
            env: Env::fixed(process),
        }
    }

    /// Looks a variable up: the process environment first, then the loaded env files.
    #[cfg(test)]
    pub(crate) fn lookup(&self, name: &str) -> Option<String> {
        self.env.lookup(name)
    }

    /// The shared lookup.
    pub(crate) fn env(&self) -> &Env {
        &self.env
    }

    /// Loads `path` when it exists. A variable already visible (the process environment,
    /// an earlier file) is not overridden. Returns whether the file existed.
    pub(crate) fn load_file(&mut self, path: &Path) -> Result<bool, ConfigError> {
        let Some(text) = super::files::read_text(path, "env file", true)? else {
            return Ok(false);
        };
        self.env.load(&text).map_err(|err| {
            ConfigError::new(
                ConfigErrorKind::Parse,
                path,
                Some(format!("line {}", err.line)),
                err.problem.to_string(),
            )
        })?;
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn earlier_files_win_and_errors_name_the_line() {
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
        std::fs::write(&second, "A=1\nnot an assignment\n").unwrap();
        let err = env.load_file(&second).unwrap_err().to_string();
        assert!(err.ends_with("b.env: line 2: expected NAME=value"), "{err}");
    }
}
