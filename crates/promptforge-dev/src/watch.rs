//! `--watch`: the prompt's directory is watched, filtered to the prompt's file name, and a
//! change is reported once the file has been quiet for [`QUIET_PERIOD`].
//!
//! The backend's callback only ever `try_send`s into a capacity-one channel, so events
//! cannot pile up (one pending change is all a rerun needs). Backend errors go to a separate
//! slot that keeps them (up to [`MAX_KEPT_ERRORS`], then counts) and wakes the loop, so none
//! is lost even while the channel is full.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use notify::{Event, EventKind, RecommendedWatcher, RecursiveMode, Watcher};
use tokio::sync::{Notify, mpsc};

/// How long the file must stay quiet before a rerun.
pub const QUIET_PERIOD: Duration = Duration::from_millis(300);

/// Backend errors kept between two reports; later ones are counted.
pub const MAX_KEPT_ERRORS: usize = 64;

/// Why watching could not start.
#[derive(Debug, thiserror::Error)]
#[error("cannot watch {}: {source}", path.display())]
pub struct WatchError {
    path: PathBuf,
    source: notify::Error,
}

#[derive(Default)]
struct Slot {
    errors: Vec<String>,
    more: u64,
}

/// The loss-proof slot for backend errors.
#[derive(Default)]
struct ErrorSlot {
    slot: Mutex<Slot>,
    wake: Notify,
}

impl ErrorSlot {
    fn push(&self, message: String) {
        {
            let mut slot = match self.slot.lock() {
                Ok(s) => s,
                Err(poisoned) => poisoned.into_inner(),
            };
            if slot.errors.len() < MAX_KEPT_ERRORS {
                slot.errors.push(message);
            } else {
                slot.more += 1;
            }
        }
        self.wake.notify_one();
    }

    fn take(&self) -> (Vec<String>, u64) {
        let mut slot = match self.slot.lock() {
            Ok(s) => s,
            Err(poisoned) => poisoned.into_inner(),
        };
        let taken = std::mem::take(&mut *slot);
        (taken.errors, taken.more)
    }
}

/// Watches one prompt file.
pub struct PromptWatcher {
    _watcher: RecommendedWatcher,
    changes: mpsc::Receiver<()>,
    errors: Arc<ErrorSlot>,
    quiet: Duration,
}

impl std::fmt::Debug for PromptWatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PromptWatcher")
            .field("quiet", &self.quiet)
            .finish_non_exhaustive()
    }
}

/// Whether `event` touches a file named `name` (reads and other access events do not count:
/// the runner's own read of the prompt must not retrigger it).
fn relevant(event: &Event, name: &OsString) -> bool {
    !matches!(event.kind, EventKind::Access(_))
        && event
            .paths
            .iter()
            .any(|path| path.file_name() == Some(name.as_os_str()))
}

impl PromptWatcher {
    /// Starts watching `prompt`'s directory (not recursively) for changes to `prompt`.
    pub fn new(prompt: &Path) -> Result<Self, WatchError> {
        Self::with_quiet_period(prompt, QUIET_PERIOD)
    }

    /// [`PromptWatcher::new`] with another quiet period.
    pub fn with_quiet_period(prompt: &Path, quiet: Duration) -> Result<Self, WatchError> {
        let dir = match prompt.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_owned(),
            _ => PathBuf::from("."),
        };
        let name = prompt.file_name().map(OsString::from).unwrap_or_default();
        let (sender, changes) = mpsc::channel(1);
        let errors = Arc::new(ErrorSlot::default());
        let slot = Arc::clone(&errors);
        let fail = |source| WatchError {
            path: dir.clone(),
            source,
        };
        let mut watcher = notify::recommended_watcher(move |event: notify::Result<Event>| {
            match event {
                Ok(event) if relevant(&event, &name) => {
                    // Full means a change is already pending: nothing is lost.
                    let _ = sender.try_send(());
                }
                Ok(_) => {}
                Err(error) => slot.push(error.to_string()),
            }
        })
        .map_err(fail)?;
        watcher
            .watch(&dir, RecursiveMode::NonRecursive)
            .map_err(fail)?;
        Ok(Self {
            _watcher: watcher,
            changes,
            errors,
            quiet,
        })
    }

    /// Waits for the next change and its quiet period. Backend errors arriving meanwhile
    /// are handed to `report` as they come. Returns `false` when the watcher has stopped.
    pub async fn next_change(&mut self, report: &mut impl FnMut(&str)) -> bool {
        loop {
            tokio::select! {
                change = self.changes.recv() => {
                    if change.is_none() {
                        return false;
                    }
                    break;
                }
                () = self.errors.wake.notified() => self.report_errors(report),
            }
        }
        loop {
            match tokio::time::timeout(self.quiet, self.changes.recv()).await {
                Ok(Some(())) => continue,
                Ok(None) => return false,
                Err(_) => break,
            }
        }
        self.report_errors(report);
        true
    }

    fn report_errors(&self, report: &mut impl FnMut(&str)) {
        let (errors, more) = self.errors.take();
        for error in errors {
            report(&format!("watch error: {error}"));
        }
        if more > 0 {
            report(&format!("watch error: {more} more watcher errors"));
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn the_error_slot_keeps_and_counts() {
        let slot = ErrorSlot::default();
        for i in 0..(MAX_KEPT_ERRORS + 3) {
            slot.push(format!("e{i}"));
        }
        let (kept, more) = slot.take();
        assert_eq!(kept.len(), MAX_KEPT_ERRORS);
        assert_eq!(kept[0], "e0");
        assert_eq!(more, 3);
        assert_eq!(slot.take(), (Vec::new(), 0));
    }

    #[test]
    fn only_changes_to_the_file_count() {
        let name = OsString::from("p.md");
        let event = |kind, path: &str| Event::new(kind).add_path(PathBuf::from(path));
        use notify::event::{AccessKind, CreateKind, ModifyKind};
        assert!(relevant(
            &event(EventKind::Modify(ModifyKind::Any), "/d/p.md"),
            &name
        ));
        assert!(relevant(
            &event(EventKind::Create(CreateKind::File), "/d/p.md"),
            &name
        ));
        assert!(!relevant(
            &event(EventKind::Access(AccessKind::Any), "/d/p.md"),
            &name
        ));
        assert!(!relevant(
            &event(EventKind::Modify(ModifyKind::Any), "/d/p.store"),
            &name
        ));
        assert!(!relevant(
            &event(EventKind::Modify(ModifyKind::Any), "/d/p.md~"),
            &name
        ));
    }

    #[tokio::test]
    async fn backend_errors_are_reported_while_waiting() {
        let dir = tempfile::tempdir().unwrap();
        let prompt = dir.path().join("p.md");
        std::fs::write(&prompt, "x").unwrap();
        let mut watcher =
            PromptWatcher::with_quiet_period(&prompt, Duration::from_millis(20)).unwrap();
        watcher.errors.push("backend hiccup".to_owned());
        let mut seen = Vec::new();
        std::fs::write(&prompt, "y").unwrap();
        let waited = tokio::time::timeout(
            Duration::from_secs(10),
            watcher.next_change(&mut |line| seen.push(line.to_owned())),
        )
        .await
        .unwrap();
        assert!(waited);
        assert_eq!(seen, vec!["watch error: backend hiccup".to_owned()]);
    }
}
