//! The run-scoped virtual file store.
//!
//! A [`Store`] is a flat map of validated paths to UTF-8 text, shared by every section and
//! fanout arm of a run. [`StoreRef::memory()`] is the default backend: thread-safe, no
//! filesystem, dropped with the run. The line-oriented operations prompts use
//! (bounded reads, numbered reads, unique replacement, globbing) are built on the trait's
//! primitives in [`StoreRef`], so every backend gets them.

mod error;
mod glob;
mod memory;
mod path;

use std::fmt;
use std::sync::Arc;

pub use error::{StoreError, StoreErrorKind};
pub use memory::MemoryStore;
pub use path::{MAX_PATH_BYTES, validate_path};

pub(crate) use glob::Glob;

/// A store backend. Paths handed to it are already validated.
pub trait Store: Send + Sync {
    /// The contents of `path`, or `None` when it does not exist.
    fn get(&self, path: &str) -> Result<Option<String>, StoreError>;
    /// Creates or replaces `path`.
    fn put(&self, path: &str, contents: String) -> Result<(), StoreError>;
    /// Appends to `path`, creating it when missing. Must be atomic per call.
    fn append(&self, path: &str, contents: &str) -> Result<(), StoreError>;
    /// Removes `path`; removing a missing path is not an error.
    fn remove(&self, path: &str) -> Result<(), StoreError>;
    /// Every path in the store, sorted.
    fn paths(&self) -> Result<Vec<String>, StoreError>;
}

/// A shared handle to a store: cheap to clone, safe to use from many tasks.
#[derive(Clone)]
pub struct StoreRef {
    inner: Arc<dyn Store>,
}

impl fmt::Debug for StoreRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StoreRef").finish_non_exhaustive()
    }
}

impl StoreRef {
    /// A fresh in-memory store.
    pub fn memory() -> Self {
        Self::new(MemoryStore::default())
    }

    /// Wraps a custom backend.
    pub fn new(store: impl Store + 'static) -> Self {
        Self {
            inner: Arc::new(store),
        }
    }

    /// Wraps a shared custom backend.
    pub fn from_arc(store: Arc<dyn Store>) -> Self {
        Self { inner: store }
    }

    /// Reads the whole file.
    pub fn read(&self, path: &str) -> Result<String, StoreError> {
        validate_path(path)?;
        self.inner
            .get(path)?
            .ok_or_else(|| StoreError::not_found(path))
    }

    /// Reads lines `start..=end` (1-based, inclusive), joined by `\n` with no trailing newline.
    ///
    /// `end` past the last line clamps to it; `start` past the last line gives `""`; a
    /// `start` below 1 or an `end` before `start` is an error.
    pub fn read_lines(
        &self,
        path: &str,
        start: usize,
        end: Option<usize>,
    ) -> Result<String, StoreError> {
        let text = self.read(path)?;
        let lines = bounded_lines(path, &text, start, end)?;
        Ok(lines
            .into_iter()
            .map(|(_, line)| line)
            .collect::<Vec<_>>()
            .join("\n"))
    }

    /// Like [`StoreRef::read_lines`], each line prefixed by its absolute number right-aligned
    /// to the widest number emitted, then `| `.
    pub fn read_numbered(
        &self,
        path: &str,
        start: usize,
        end: Option<usize>,
    ) -> Result<String, StoreError> {
        let text = self.read(path)?;
        let lines = bounded_lines(path, &text, start, end)?;
        let width = lines
            .last()
            .map_or(1, |(number, _)| number.to_string().len());
        Ok(lines
            .into_iter()
            .map(|(number, line)| format!("{number:>width$}| {line}"))
            .collect::<Vec<_>>()
            .join("\n"))
    }

    /// Creates or replaces a file.
    pub fn write(&self, path: &str, contents: &str) -> Result<(), StoreError> {
        validate_path(path)?;
        self.inner.put(path, contents.to_owned())
    }

    /// Appends to a file, creating it when missing.
    pub fn append(&self, path: &str, contents: &str) -> Result<(), StoreError> {
        validate_path(path)?;
        self.inner.append(path, contents)
    }

    /// Replaces the one occurrence of `old` with `new`; refuses when `old` occurs zero or
    /// several times, naming the count.
    pub fn str_replace(&self, path: &str, old: &str, new: &str) -> Result<(), StoreError> {
        let text = self.read(path)?;
        if old.is_empty() {
            return Err(StoreError::replace(path, "the text to replace is empty"));
        }
        let count = text.matches(old).count();
        if count != 1 {
            return Err(StoreError::replace(
                path,
                &format!("the text to replace occurs {count} times; it must occur exactly once"),
            ));
        }
        self.inner.put(path, text.replacen(old, new, 1))
    }

    /// Every path matching `pattern` (`*` within a segment, `**` across), sorted.
    pub fn glob(&self, pattern: &str) -> Result<Vec<String>, StoreError> {
        let glob = Glob::new(pattern)?;
        Ok(self
            .inner
            .paths()?
            .into_iter()
            .filter(|p| glob.matches(p))
            .collect())
    }

    /// Whether a file exists.
    pub fn exists(&self, path: &str) -> Result<bool, StoreError> {
        validate_path(path)?;
        Ok(self.inner.get(path)?.is_some())
    }

    /// Removes a file; removing a missing file is not an error.
    pub fn delete(&self, path: &str) -> Result<(), StoreError> {
        validate_path(path)?;
        self.inner.remove(path)
    }

    /// Every path in the store, sorted.
    pub fn paths(&self) -> Result<Vec<String>, StoreError> {
        self.inner.paths()
    }
}

fn bounded_lines<'t>(
    path: &str,
    text: &'t str,
    start: usize,
    end: Option<usize>,
) -> Result<Vec<(usize, &'t str)>, StoreError> {
    if start < 1 {
        return Err(StoreError::range(path, "the start line must be 1 or more"));
    }
    if let Some(end) = end
        && end < start
    {
        return Err(StoreError::range(
            path,
            "the end line is before the start line",
        ));
    }
    let body = text.strip_suffix('\n').unwrap_or(text);
    if body.is_empty() {
        return Ok(Vec::new());
    }
    let end = end.unwrap_or(usize::MAX);
    Ok(body
        .split('\n')
        .enumerate()
        .map(|(index, line)| (index + 1, line))
        .skip(start - 1)
        .take_while(|(number, _)| *number <= end)
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store_with(text: &str) -> StoreRef {
        let store = StoreRef::memory();
        store.write("f.txt", text).unwrap();
        store
    }

    #[test]
    fn bounded_reads_clamp_and_validate() {
        let store = store_with("a\nb\nc\nd\n");
        assert_eq!(store.read_lines("f.txt", 2, Some(3)).unwrap(), "b\nc");
        assert_eq!(store.read_lines("f.txt", 3, None).unwrap(), "c\nd");
        assert_eq!(store.read_lines("f.txt", 3, Some(99)).unwrap(), "c\nd");
        assert_eq!(store.read_lines("f.txt", 9, None).unwrap(), "");
        assert!(store.read_lines("f.txt", 0, None).is_err());
        assert!(store.read_lines("f.txt", 3, Some(2)).is_err());
    }

    #[test]
    fn numbered_reads_keep_absolute_numbers() {
        let text: String = (1..=12).map(|i| format!("l{i}\n")).collect();
        let store = store_with(&text);
        assert_eq!(
            store.read_numbered("f.txt", 9, Some(10)).unwrap(),
            " 9| l9\n10| l10"
        );
        let whole = store.read_numbered("f.txt", 1, None).unwrap();
        assert!(whole.starts_with(" 1| l1\n"));
        assert!(whole.ends_with("12| l12"));
    }

    #[test]
    fn str_replace_requires_a_unique_match() {
        let store = store_with("one two two");
        let error = store.str_replace("f.txt", "two", "2").unwrap_err();
        assert!(error.to_string().contains("occurs 2 times"), "{error}");
        let error = store.str_replace("f.txt", "three", "3").unwrap_err();
        assert!(error.to_string().contains("occurs 0 times"), "{error}");
        store.str_replace("f.txt", "one", "1").unwrap();
        assert_eq!(store.read("f.txt").unwrap(), "1 two two");
    }

    #[test]
    fn delete_is_idempotent_and_missing_reads_are_not_found() {
        let store = store_with("x");
        store.delete("f.txt").unwrap();
        store.delete("f.txt").unwrap();
        let error = store.read("f.txt").unwrap_err();
        assert!(error.is_not_found());
        assert_eq!(error.path(), Some("f.txt"));
        assert!(!store.exists("f.txt").unwrap());
    }

    #[test]
    fn glob_lists_sorted_matches() {
        let store = StoreRef::memory();
        for path in ["notes/b.md", "notes/a.md", "notes/x/c.md", "other.md"] {
            store.write(path, "").unwrap();
        }
        assert_eq!(
            store.glob("notes/*.md").unwrap(),
            ["notes/a.md", "notes/b.md"]
        );
        assert_eq!(store.glob("**/*.md").unwrap().len(), 4);
    }
}
