//! The in-memory store backend.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use super::{Store, StoreError};

/// A thread-safe in-memory store; the default backend of every run.
#[derive(Debug, Default)]
pub struct MemoryStore {
    files: Mutex<BTreeMap<String, String>>,
}

impl MemoryStore {
    fn files(&self) -> MutexGuard<'_, BTreeMap<String, String>> {
        // A panic while holding the lock cannot leave a half-written map: every operation
        // below is a single map call, so the data stays consistent and we keep using it.
        self.files.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Store for MemoryStore {
    fn get(&self, path: &str) -> Result<Option<String>, StoreError> {
        Ok(self.files().get(path).cloned())
    }

    fn put(&self, path: &str, contents: String) -> Result<(), StoreError> {
        self.files().insert(path.to_owned(), contents);
        Ok(())
    }

    fn append(&self, path: &str, contents: &str) -> Result<(), StoreError> {
        self.files()
            .entry(path.to_owned())
            .or_default()
            .push_str(contents);
        Ok(())
    }

    fn remove(&self, path: &str) -> Result<(), StoreError> {
        self.files().remove(path);
        Ok(())
    }

    fn paths(&self) -> Result<Vec<String>, StoreError> {
        Ok(self.files().keys().cloned().collect())
    }
}
