//! The store dump: `<prompt-stem>.store/` beside the prompt, reconciled after every run.
//!
//! Reconciling makes the directory mirror the store: files whose contents changed are
//! replaced, files that are already current are left alone, files (and links) the store no
//! longer holds are deleted, emptied directories are removed, `.trace/` is kept, and the
//! whole directory goes away when the store is empty and no trace file remains. Every write
//! goes through [`crate::secure`].

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::secure::{self, SecureError, TRACE_DIR};

/// How many threads write one dump's files at once. Each file is flushed to disk before
/// its rename; parallel flushes share journal commits, which is most of a large dump's time.
pub const DUMP_WRITERS: usize = 8;

/// Where a prompt's dump lives: a trusted base directory and the dump directory's name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DumpTarget {
    base: PathBuf,
    name: String,
    shown: PathBuf,
}

/// Why the dump could not start at all.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DumpError {
    /// The prompt path has no file name to derive the dump directory from.
    #[error("{} has no file name to name its store dump after", path.display())]
    NoFileName {
        /// The prompt path.
        path: PathBuf,
    },
    /// The prompt's directory cannot be resolved.
    #[error("cannot resolve the directory of {}: {source}", path.display())]
    Base {
        /// The prompt path.
        path: PathBuf,
        /// The operating system's error.
        source: io::Error,
    },
    /// The dump root itself is unusable (a link, a file, or an I/O failure).
    #[error(transparent)]
    Root(#[from] SecureError),
}

/// The dump directory of the prompt at `prompt` as the user would write it: `<stem>.store`
/// beside the prompt path as given (`prompts/briefer.store` for `prompts/briefer.md`).
pub fn shown_dump_dir(prompt: &Path) -> PathBuf {
    let stem = prompt
        .file_stem()
        .map(|s| s.to_string_lossy())
        .unwrap_or_default();
    let name = format!("{stem}.store");
    match prompt.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.join(name),
        _ => PathBuf::from(name),
    }
}

impl DumpTarget {
    /// The dump of the prompt at `prompt`: `<stem>.store` in the prompt's directory.
    ///
    /// The prompt's directory is canonicalised once: links the user's own path goes through
    /// are trusted; from the dump root down nothing is followed.
    pub fn beside(prompt: &Path) -> Result<Self, DumpError> {
        let stem = prompt
            .file_stem()
            .and_then(|s| s.to_str())
            .filter(|s| !s.is_empty())
            .ok_or_else(|| DumpError::NoFileName {
                path: prompt.to_owned(),
            })?;
        let parent = match prompt.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_owned(),
            _ => PathBuf::from("."),
        };
        let base = fs::canonicalize(&parent).map_err(|source| DumpError::Base {
            path: prompt.to_owned(),
            source,
        })?;
        let name = format!("{stem}.store");
        Ok(Self {
            shown: shown_dump_dir(prompt),
            base,
            name,
        })
    }

    /// The dump target for a directory `name` inside `base` (which must exist).
    pub fn in_dir(base: &Path, name: &str) -> Result<Self, DumpError> {
        let base = fs::canonicalize(base).map_err(|source| DumpError::Base {
            path: base.to_owned(),
            source,
        })?;
        Ok(Self {
            shown: PathBuf::from(name),
            base,
            name: name.to_owned(),
        })
    }

    /// The dump directory's absolute path.
    pub fn dir(&self) -> PathBuf {
        self.base.join(&self.name)
    }

    /// The dump directory as shown to the user (`briefer.store` for `briefer.md`).
    pub fn shown(&self) -> &Path {
        &self.shown
    }

    /// Ensures `<dump>/<components…>` exists securely and returns it.
    pub(crate) fn ensure(&self, components: &[&str]) -> Result<PathBuf, SecureError> {
        let mut all = Vec::with_capacity(components.len() + 1);
        all.push(self.name.as_str());
        all.extend_from_slice(components);
        secure::ensure_dir(&self.base, &all)
    }

    /// Writes one store file unless it is already current; `Ok(true)` when written.
    fn write_one(&self, path: &str, contents: &str) -> Result<bool, SecureError> {
        let (dirs, name) = match path.rsplit_once('/') {
            Some((dirs, name)) => (dirs.split('/').collect::<Vec<_>>(), name),
            None => (Vec::new(), path),
        };
        let dir = self.ensure(&dirs)?;
        if secure::is_current(&dir, name, contents.as_bytes()) {
            return Ok(false);
        }
        secure::write_file(&dir, name, contents.as_bytes()).map(|()| true)
    }

    /// The state of the dump root: absent, a real directory, or refused.
    fn root_state(&self) -> Result<bool, SecureError> {
        let root = self.dir();
        match fs::symlink_metadata(&root) {
            Ok(meta) if meta.file_type().is_symlink() => Err(SecureError::Symlink { path: root }),
            Ok(meta) if meta.is_dir() => Ok(true),
            Ok(_) => Err(SecureError::NotADirectory { path: root }),
            Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(source) => Err(SecureError::Io {
                what: "inspecting",
                path: root,
                source,
            }),
        }
    }

    /// Deletes everything under `.trace/` (not following links) so a new capture starts
    /// clean. A missing dump or trace directory is not an error.
    pub fn clear_trace(&self) -> Result<(), DumpError> {
        if !self.root_state()? {
            return Ok(());
        }
        let trace = self.dir().join(TRACE_DIR);
        match fs::symlink_metadata(&trace) {
            Ok(meta) if meta.file_type().is_symlink() => {
                Err(DumpError::Root(SecureError::Symlink { path: trace }))
            }
            Ok(meta) if meta.is_dir() => {
                let mut report = DumpReport::default();
                remove_stale(&trace, "", &Keep::default(), &mut report);
                report.into_error()
            }
            Ok(_) => fs::remove_file(&trace).map_err(|source| {
                DumpError::Root(SecureError::Io {
                    what: "removing",
                    path: trace,
                    source,
                })
            }),
            Err(_) => Ok(()),
        }
    }

    /// Makes the dump directory mirror `files` (store path, contents).
    ///
    /// Per-file problems (unsafe paths, planted links, I/O failures) are collected in the
    /// report and the rest still dumps; only an unusable dump root is an error.
    pub fn reconcile(&self, files: &[(String, String)]) -> Result<DumpReport, DumpError> {
        let mut report = DumpReport::default();
        let mut wanted: BTreeMap<&str, &str> = BTreeMap::new();
        for (path, contents) in files {
            match secure::unsafe_reason(path) {
                Some(reason) => report.skipped.push((path.clone(), reason.to_owned())),
                None => {
                    wanted.insert(path.as_str(), contents.as_str());
                }
            }
        }
        let exists = self.root_state()?;
        let root = self.dir();
        if exists {
            let keep = Keep {
                files: wanted.keys().copied().collect(),
                dirs: wanted
                    .keys()
                    .flat_map(|path| path.match_indices('/').map(|(end, _)| &path[..end]))
                    .collect(),
            };
            remove_stale(&root, "", &keep, &mut report);
        }
        if !wanted.is_empty() {
            self.ensure(&[])?;
        }
        let wanted_list: Vec<(&str, &str)> = wanted.iter().map(|(p, c)| (*p, *c)).collect();
        let chunk = wanted_list.len().div_ceil(DUMP_WRITERS).max(1);
        let outcomes: Vec<(&str, Result<bool, SecureError>)> = std::thread::scope(|scope| {
            let workers: Vec<_> = wanted_list
                .chunks(chunk)
                .map(|files| {
                    scope.spawn(move || {
                        files
                            .iter()
                            .map(|(path, contents)| (*path, self.write_one(path, contents)))
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            workers
                .into_iter()
                .flat_map(|worker| worker.join().unwrap_or_default())
                .collect()
        });
        let mut seen = 0;
        for (path, outcome) in outcomes {
            seen += 1;
            match outcome {
                Ok(true) => report.written.push(path.to_owned()),
                Ok(false) => report.unchanged += 1,
                Err(error) => report.failed.push((path.to_owned(), error)),
            }
        }
        if seen != wanted_list.len() {
            report.failed.push((
                String::new(),
                SecureError::Io {
                    what: "writing",
                    path: root.clone(),
                    source: io::Error::other("a dump writer thread stopped"),
                },
            ));
        }
        if wanted.is_empty() && exists {
            let trace = root.join(TRACE_DIR);
            // Only a real, empty `.trace/` (or none) lets the dump go; a link there is
            // never followed, and counts as a remaining trace.
            let trace_empty = match fs::symlink_metadata(&trace) {
                Err(error) => error.kind() == io::ErrorKind::NotFound,
                Ok(meta) if meta.is_dir() => fs::read_dir(&trace)
                    .map(|mut entries| entries.next().is_none())
                    .unwrap_or(false),
                Ok(_) => false,
            };
            if trace_empty {
                let _ = fs::remove_dir(&trace);
                match fs::remove_dir(&root) {
                    Ok(()) => report.removed = true,
                    Err(source) => report.failed.push((
                        String::new(),
                        SecureError::Io {
                            what: "removing the empty dump directory",
                            path: root,
                            source,
                        },
                    )),
                }
            }
        }
        Ok(report)
    }
}

/// What one reconcile did.
#[derive(Debug, Default)]
#[non_exhaustive]
pub struct DumpReport {
    /// Store paths written (new or changed).
    pub written: Vec<String>,
    /// Files already current on disk.
    pub unchanged: usize,
    /// Dump paths deleted because the store no longer holds them.
    pub deleted: Vec<String>,
    /// Store paths not dumped because they are unsafe on disk, with the reason.
    pub skipped: Vec<(String, String)>,
    /// Paths whose write or delete failed (planted links included), with the error.
    pub failed: Vec<(String, SecureError)>,
    /// Whether the dump directory was removed (empty store, no trace).
    pub removed: bool,
}

impl DumpReport {
    fn into_error(mut self) -> Result<(), DumpError> {
        match self.failed.pop() {
            Some((_, error)) => Err(DumpError::Root(error)),
            None => Ok(()),
        }
    }
}

/// What a reconcile keeps: the store's files, and the directories above them.
#[derive(Default)]
struct Keep<'a> {
    files: BTreeSet<&'a str>,
    dirs: BTreeSet<&'a str>,
}

/// Deletes what under `dir` is not in `keep` (paths relative to the dump root; `prefix` is
/// `dir`'s own relative path). `.trace/` at the root is never touched. Links are unlinked,
/// never followed; directories left empty are removed.
fn remove_stale(dir: &Path, prefix: &str, keep: &Keep<'_>, report: &mut DumpReport) {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(source) => {
            report.failed.push((
                prefix.to_owned(),
                SecureError::Io {
                    what: "listing",
                    path: dir.to_owned(),
                    source,
                },
            ));
            return;
        }
    };
    for entry in entries.flatten() {
        let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
            // Not UTF-8: no store path can name it, so it is stale.
            let _ = remove_entry(&entry.path(), report, prefix);
            continue;
        };
        if prefix.is_empty() && name == TRACE_DIR {
            continue;
        }
        let relative = if prefix.is_empty() {
            name.clone()
        } else {
            format!("{prefix}/{name}")
        };
        let path = entry.path();
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_dir() {
            remove_stale(&path, &relative, keep, report);
            // Fails (harmlessly) while something wanted still lives inside.
            let _ = fs::remove_dir(&path);
        } else if keep.files.contains(relative.as_str())
            || (kind.is_symlink() && keep.dirs.contains(relative.as_str()))
        {
            // A current file stays; a link planted where the store writes (or descends)
            // stays too, so the write refuses it and the user hears about it.
        } else if remove_entry(&path, report, &relative) {
            report.deleted.push(relative);
        }
    }
}

fn remove_entry(path: &Path, report: &mut DumpReport, relative: &str) -> bool {
    let removed = match fs::symlink_metadata(path) {
        Ok(meta) if meta.is_dir() => fs::remove_dir_all(path),
        _ => fs::remove_file(path),
    };
    match removed {
        Ok(()) => true,
        Err(source) => {
            report.failed.push((
                relative.to_owned(),
                SecureError::Io {
                    what: "deleting",
                    path: path.to_owned(),
                    source,
                },
            ));
            false
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn files(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(p, c)| ((*p).to_owned(), (*c).to_owned()))
            .collect()
    }

    #[test]
    fn reconcile_writes_replaces_deletes_and_removes() {
        let base = tempfile::tempdir().unwrap();
        let target = DumpTarget::in_dir(base.path(), "p.store").unwrap();
        let dir = target.dir();
        let report = target
            .reconcile(&files(&[("a.txt", "1"), ("notes/deep.txt", "2")]))
            .unwrap();
        assert_eq!(report.written, vec!["a.txt", "notes/deep.txt"]);
        assert_eq!(fs::read_to_string(dir.join("notes/deep.txt")).unwrap(), "2");

        let report = target
            .reconcile(&files(&[("a.txt", "1"), ("b.txt", "3")]))
            .unwrap();
        assert_eq!(report.written, vec!["b.txt"]);
        assert_eq!(report.unchanged, 1);
        assert_eq!(report.deleted, vec!["notes/deep.txt"]);
        assert!(!dir.join("notes").exists(), "emptied directories go away");

        fs::create_dir(dir.join(".trace")).unwrap();
        fs::write(dir.join(".trace/turn-1-request.json"), "{}").unwrap();
        let report = target.reconcile(&[]).unwrap();
        assert!(!report.removed);
        assert!(dir.join(".trace/turn-1-request.json").exists());
        assert!(!dir.join("a.txt").exists());

        target.clear_trace().unwrap();
        let report = target.reconcile(&[]).unwrap();
        assert!(report.removed);
        assert!(!dir.exists());
    }

    #[test]
    fn a_file_can_replace_a_directory_and_back() {
        let base = tempfile::tempdir().unwrap();
        let target = DumpTarget::in_dir(base.path(), "p.store").unwrap();
        target.reconcile(&files(&[("x/y", "1")])).unwrap();
        target.reconcile(&files(&[("x", "2")])).unwrap();
        assert_eq!(fs::read_to_string(target.dir().join("x")).unwrap(), "2");
        target.reconcile(&files(&[("x/y", "3")])).unwrap();
        assert_eq!(fs::read_to_string(target.dir().join("x/y")).unwrap(), "3");
    }

    #[test]
    fn a_linked_root_is_refused() {
        let base = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), base.path().join("p.store")).unwrap();
        let target = DumpTarget::in_dir(base.path(), "p.store").unwrap();
        let error = target.reconcile(&files(&[("a", "1")])).unwrap_err();
        assert!(error.to_string().contains("symbolic link"), "{error}");
        assert_eq!(fs::read_dir(outside.path()).unwrap().count(), 0);
    }
}
