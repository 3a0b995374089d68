//! The store error type.

use std::fmt;

/// The class of a [`StoreError`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum StoreErrorKind {
    /// The path breaks a path rule.
    InvalidPath,
    /// The glob pattern uses unsupported syntax.
    InvalidGlob,
    /// The file does not exist.
    NotFound,
    /// Line bounds are out of domain.
    InvalidRange,
    /// `str_replace` found zero or several matches.
    Replace,
    /// Two fanout arms wrote the same path.
    WriteConflict,
    /// The backend failed.
    Backend,
}

/// A store operation that failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreError {
    kind: StoreErrorKind,
    path: Option<String>,
    message: String,
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.path {
            Some(path) => write!(
                f,
                "store path '{}': {}",
                crate::error::quote_text(path, 160, false),
                self.message
            ),
            None => f.write_str(&self.message),
        }
    }
}

impl StoreError {
    /// Creates an error of any kind; backends use [`StoreErrorKind::Backend`].
    pub fn new(kind: StoreErrorKind, path: Option<&str>, message: impl Into<String>) -> Self {
        Self {
            kind,
            path: path.map(str::to_owned),
            message: message.into(),
        }
    }

    pub(crate) fn invalid_path(path: &str, why: &str) -> Self {
        Self::new(StoreErrorKind::InvalidPath, Some(path), why)
    }

    pub(crate) fn invalid_glob(pattern: &str, why: &str) -> Self {
        Self::new(
            StoreErrorKind::InvalidGlob,
            None,
            format!("glob pattern '{pattern}': {why}"),
        )
    }

    pub(crate) fn not_found(path: &str) -> Self {
        Self::new(StoreErrorKind::NotFound, Some(path), "no such file")
    }

    pub(crate) fn range(path: &str, why: &str) -> Self {
        Self::new(StoreErrorKind::InvalidRange, Some(path), why)
    }

    pub(crate) fn replace(path: &str, why: &str) -> Self {
        Self::new(StoreErrorKind::Replace, Some(path), why)
    }

    pub(crate) fn write_conflict(path: &str, first: usize, second: usize) -> Self {
        Self::new(
            StoreErrorKind::WriteConflict,
            Some(path),
            format!(
                "fanout arms {first} and {second} both wrote this path (a write-write race); \
                 give each arm its own path or use store.append"
            ),
        )
    }

    /// The class of failure.
    pub fn kind(&self) -> StoreErrorKind {
        self.kind
    }

    /// Whether the file did not exist.
    pub fn is_not_found(&self) -> bool {
        self.kind == StoreErrorKind::NotFound
    }

    /// The offending path, when there is one.
    pub fn path(&self) -> Option<&str> {
        self.path.as_deref()
    }
}

impl std::error::Error for StoreError {}
