//! Live reload: watch the prompts directory and `prompts.toml`, debounce, re-resolve,
//! publish one generation.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use notify::{EventKind, RecommendedWatcher, RecursiveMode, Watcher as _};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::catalog::{self, Mode};
use crate::config::{Config, restart_only_changes};
use crate::state::Shared;

/// Events buffered between the platform watcher and the debounce loop; past it events
/// are dropped (any one of them triggers the same re-resolution).
pub const EVENT_BUFFER: usize = 1024;

/// While the watch is lost, how often a window is settled to register it again.
pub const RETRY: std::time::Duration = std::time::Duration::from_secs(1);

/// The longest a window stays open, in `watch_debounce` periods from its first event: a
/// window settles after `watch_debounce` without events, or at the latest this many periods
/// after it opened, so files saved without pause (a generator, an editor's autosave loop)
/// still reach the catalog (5 s at the default 500 ms).
pub const MAX_WINDOW_PERIODS: u32 = 10;

/// What one settled window did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reloaded {
    /// A new generation was published.
    Published(u64),
    /// The candidate could not be resolved; the previous catalog keeps serving.
    Kept(Vec<String>),
    /// The server is shutting down.
    Closed,
}

/// Re-reads `prompts.toml`'s catalog tables and the prompts directory, and publishes the
/// result. `boot` is the configuration read at boot: `[server]`, `[gateway]` and
/// `[paths]` keep their boot values, and a change to any of them is logged.
pub fn reload(boot: &Config, shared: &Arc<Shared>) -> Reloaded {
    let catalog_config = match Config::load(&boot.path) {
        Ok(fresh) => {
            let ignored = restart_only_changes(boot, &fresh);
            if !ignored.is_empty() {
                tracing::warn!(
                    "{} changed {}; these settings take effect on the next restart",
                    boot.path.display(),
                    ignored.join(", ")
                );
            }
            fresh.catalog
        }
        Err(e) => {
            tracing::error!("reload: {e}; the previous catalog keeps serving");
            return Reloaded::Kept(vec![e.to_string()]);
        }
    };
    let previous = shared.current();
    match catalog::resolve_with(
        &catalog_config,
        &boot.prompts_dir,
        Mode::Reload,
        Some(&previous.catalog),
    ) {
        Ok(catalog) => {
            for entry in catalog.entries() {
                if let Some(problem) = entry.problem() {
                    tracing::warn!(prompt = %entry.name, "broken prompt stays listed: {problem}");
                }
            }
            match shared.publish(catalog) {
                Some(number) => {
                    tracing::info!(generation = number, "catalog reloaded");
                    Reloaded::Published(number)
                }
                None => Reloaded::Closed,
            }
        }
        Err(faults) => {
            tracing::error!(
                "reload: the catalog could not be resolved, the previous one keeps serving: {}",
                faults.join("; ")
            );
            Reloaded::Kept(faults)
        }
    }
}

/// The running watcher.
pub struct Watcher {
    task: JoinHandle<()>,
    stopped: Arc<AtomicBool>,
}

impl std::fmt::Debug for Watcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watcher").finish_non_exhaustive()
    }
}

/// Why the watch on the prompts directory must be registered again, set by the platform
/// callback and taken by the debounce loop. A flag, not a message on the event channel: a
/// full channel drops events, and losing this one would stop live reload for good.
#[derive(Debug, Default)]
struct Lost(std::sync::Mutex<Option<String>>);

impl Lost {
    fn set(&self, why: String) {
        let mut slot = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        slot.get_or_insert(why);
    }

    fn take(&self) -> Option<String> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
    }
}

/// Whether `event` means the platform watch on `dir` is gone or no longer covers the
/// directory now at that path: `dir` itself was removed, created, or renamed away or back.
///
/// A rename matters as much as a removal: when the parent's watch reports the directory
/// moved away, `notify`'s inotify backend drops the directory's recursive watch, and when
/// the directory is moved back (a `git checkout`, an editor's atomic save of a directory)
/// nothing adds it again, since the parent is watched non-recursively. The directory then
/// exists, so its absence cannot be what tells the loop to register again.
fn loses_watch(event: &notify::Event, dir: &Path) -> bool {
    use notify::event::ModifyKind;
    let names_dir = event.paths.iter().any(|p| p == dir);
    names_dir
        && matches!(
            event.kind,
            EventKind::Remove(_) | EventKind::Create(_) | EventKind::Modify(ModifyKind::Name(_))
        )
}

struct Platform {
    watcher: RecommendedWatcher,
    dir: PathBuf,
    toml_dir: PathBuf,
}

impl Platform {
    fn new(dir: &Path, toml: &Path, tx: mpsc::Sender<()>, lost: Arc<Lost>) -> Result<Self, String> {
        let toml_path = toml.to_path_buf();
        let dir_path = dir.to_path_buf();
        let watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
            match event {
                Ok(event) => {
                    if matches!(event.kind, EventKind::Access(_)) {
                        return;
                    }
                    if loses_watch(&event, &dir_path) {
                        lost.set(format!(
                            "{} was removed, created or renamed",
                            dir_path.display()
                        ));
                    } else {
                        let relevant = event
                            .paths
                            .iter()
                            .any(|p| p.starts_with(&dir_path) || *p == toml_path);
                        if !relevant && !event.need_rescan() {
                            return;
                        }
                    }
                }
                Err(e) => lost.set(e.to_string()),
            }
            // A full buffer already holds a wake-up: any one of them settles a window.
            let _ = tx.try_send(());
        })
        .map_err(|e| format!("cannot start the file watcher: {e}"))?;
        let toml_dir = toml
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
        let mut platform = Self {
            watcher,
            dir: dir.to_path_buf(),
            toml_dir,
        };
        platform.register()?;
        Ok(platform)
    }

    fn register(&mut self) -> Result<(), String> {
        // `prompts.toml`'s directory first: it also reports the prompts directory coming
        // back after a rename, which is what lets a lost watch be registered again.
        if self.dir != self.toml_dir {
            let _ = self.watcher.unwatch(&self.toml_dir);
            self.watcher
                .watch(&self.toml_dir, RecursiveMode::NonRecursive)
                .map_err(|e| format!("cannot watch {}: {e}", self.toml_dir.display()))?;
        }
        let _ = self.watcher.unwatch(&self.dir);
        self.watcher
            .watch(&self.dir, RecursiveMode::Recursive)
            .map_err(|e| format!("cannot watch {}: {e}", self.dir.display()))
    }
}

impl Watcher {
    /// Starts watching (refused when the prompts directory cannot be watched at all).
    pub fn start(boot: Config, shared: Arc<Shared>) -> Result<Self, String> {
        let dir = std::fs::canonicalize(&boot.prompts_dir)
            .map_err(|e| format!("cannot watch {}: {e}", boot.prompts_dir.display()))?;
        let toml = std::fs::canonicalize(&boot.path)
            .map_err(|e| format!("cannot watch {}: {e}", boot.path.display()))?;
        let (tx, mut rx) = mpsc::channel(EVENT_BUFFER);
        let lost_flag = Arc::new(Lost::default());
        let mut platform = Platform::new(&dir, &toml, tx, Arc::clone(&lost_flag))?;
        let stopped = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stopped);
        let debounce = boot.server.watch_debounce;
        let task = tokio::spawn(async move {
            let mut lost = false;
            loop {
                // While the watch is lost, a settled window also comes every RETRY.
                if lost {
                    if let Ok(None) = tokio::time::timeout(RETRY, rx.recv()).await {
                        return;
                    }
                } else if rx.recv().await.is_none() {
                    return;
                }
                // Each event restarts the quiet period, within the window's hard limit.
                let limit = tokio::time::Instant::now() + debounce * MAX_WINDOW_PERIODS;
                loop {
                    let quiet = (tokio::time::Instant::now() + debounce).min(limit);
                    match tokio::time::timeout_at(quiet, rx.recv()).await {
                        Ok(Some(())) => {}
                        Ok(None) => return,
                        Err(_) => break,
                    }
                }
                if flag.load(Ordering::Acquire) {
                    return;
                }
                if let Some(why) = lost_flag.take() {
                    tracing::error!(
                        "the prompts watch broke ({why}); it is registered again on this settled window"
                    );
                    lost = true;
                }
                if lost || !dir.exists() {
                    match platform.register() {
                        Ok(()) => {
                            if lost {
                                tracing::info!("the prompts watch was registered again");
                            }
                            lost = false;
                        }
                        Err(e) => {
                            tracing::error!(
                                "live reload is paused ({e}); registering again every {RETRY:?} until the path is back"
                            );
                            lost = true;
                        }
                    }
                }
                let boot = boot.clone();
                let shared = Arc::clone(&shared);
                let outcome = tokio::task::spawn_blocking(move || reload(&boot, &shared)).await;
                if matches!(outcome, Ok(Reloaded::Closed)) {
                    return;
                }
            }
        });
        Ok(Self { task, stopped })
    }

    /// Stops the watcher: nothing publishes after this.
    pub fn stop(self) {
        self.stopped.store(true, Ordering::Release);
        self.task.abort();
    }
}
