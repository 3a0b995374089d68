//! The files a `run_prompt` call names (`input_file`, `output_file`): where they may be,
//! and how they are read and written without blocking the runtime.
//!
//! **Where.** A file must be inside the client's MCP roots when the client declares the
//! `roots` capability, and inside `[files] allowed_dirs` when `prompts.toml` sets it: both
//! when both apply (the client says which project it works on, the operator bounds what the
//! server may touch at all). A client without roots and a configuration without
//! `allowed_dirs` get no file access; the refusal says how to allow it. A path is resolved
//! (symbolic links, `.` and `..`) before the check, so no link inside a root reaches out of
//! it.
//!
//! **How.** Every file operation runs on the blocking pool under [`FILE_IO_TIMEOUT`]. An
//! input is opened with `O_NONBLOCK | O_NOFOLLOW` (opening a FIFO for reading never waits
//! for a writer), its type is read from the opened descriptor, anything but a regular file
//! is refused before a byte is read, and the read stops at [`MAX_INPUT_BYTES`] whatever the
//! file claims (a `/proc` file says it holds 0 bytes). An output is written to a new
//! temporary beside the target (`O_EXCL | O_NOFOLLOW`), flushed and renamed over it; a
//! target that is a symbolic link or not a regular file is never replaced.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// The largest `input_file` the server reads, and the largest `input_text`: 8 MiB.
pub const MAX_INPUT_BYTES: u64 = 8 * 1024 * 1024;

/// How long one file operation of a call (resolving, reading, writing) may take before the
/// call fails with a message saying so.
pub const FILE_IO_TIMEOUT: Duration = Duration::from_secs(10);

/// The `[files]` table, resolved at boot: the directories the operator allows.
#[derive(Debug, Clone, Default)]
pub struct Allowed {
    /// `[files] allowed_dirs`, canonical (empty: the operator allows none).
    pub dirs: Vec<PathBuf>,
    /// The `prompts.toml` they come from, named in refusals.
    pub config: PathBuf,
}

/// What the client says about its roots.
#[derive(Debug, Clone, Default)]
pub enum ClientRoots {
    /// The client declares no `roots` capability, or speaks a revision (2026-07-28) on
    /// which a server cannot ask for them: `[files] allowed_dirs` alone applies.
    #[default]
    Undeclared,
    /// The directories its `roots/list` named, resolved (those that exist here).
    Listed(Arc<[PathBuf]>),
    /// It declares roots but listing them failed: no file is admitted.
    Unavailable(String),
}

/// Where one call's files may be.
#[derive(Debug, Clone, Default)]
pub struct Scope {
    /// The client's roots.
    pub roots: ClientRoots,
    /// The operator's directories.
    pub allowed: Arc<Allowed>,
}

/// Which parameter a file is, for messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Param {
    /// `input_file`.
    Input,
    /// `output_file`.
    Output,
}

impl std::fmt::Display for Param {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Input => "input_file",
            Self::Output => "output_file",
        })
    }
}

fn listed(dirs: &[PathBuf]) -> String {
    dirs.iter()
        .map(|d| d.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

impl Scope {
    /// Whether `resolved` (a path without links, `.` or `..`) may be used as `param`
    /// (`shown` is the path the call gave).
    pub fn admits(&self, param: Param, shown: &str, resolved: &Path) -> Result<(), String> {
        let allowed = &self.allowed.dirs;
        let roots = match &self.roots {
            ClientRoots::Listed(roots) => roots,
            ClientRoots::Unavailable(why) => {
                return Err(format!(
                    "{param} {shown} is refused: the client declares MCP roots, but they could \
                     not be listed ({why})"
                ));
            }
            ClientRoots::Undeclared => {
                if allowed.is_empty() {
                    return Err(format!(
                        "{param} {shown} is refused: this client declares no MCP roots and {} sets no \
                     [files] allowed_dirs, so the server touches no file for it. List the \
                     directory under [files] allowed_dirs there and restart the server, or \
                     connect with a client that sends its workspace as roots{}",
                        self.allowed.config.display(),
                        if param == Param::Input {
                            "; or pass the text as input_text"
                        } else {
                            ""
                        }
                    ));
                }
                return inside(param, shown, resolved, allowed, "[files] allowed_dirs");
            }
        };
        if roots.is_empty() {
            return Err(format!(
                "{param} {shown} is refused: the client declares the roots capability but \
                 lists no root (or none that exists on this machine), so no file is inside one"
            ));
        }
        inside(param, shown, resolved, roots, "the client's MCP roots")?;
        if !allowed.is_empty() {
            inside(param, shown, resolved, allowed, "[files] allowed_dirs")?;
        }
        Ok(())
    }
}

fn inside(
    param: Param,
    shown: &str,
    resolved: &Path,
    dirs: &[PathBuf],
    what: &str,
) -> Result<(), String> {
    if dirs.iter().any(|d| resolved.starts_with(d)) {
        return Ok(());
    }
    Err(format!(
        "{param} {shown} (resolved to {}) is outside {what} ({})",
        resolved.display(),
        listed(dirs)
    ))
}

/// Runs one blocking file operation on the blocking pool, bounded by [`FILE_IO_TIMEOUT`].
async fn off_runtime<T: Send + 'static>(
    param: Param,
    shown: &str,
    operation: impl FnOnce() -> Result<T, String> + Send + 'static,
) -> Result<T, String> {
    match tokio::time::timeout(FILE_IO_TIMEOUT, tokio::task::spawn_blocking(operation)).await {
        Ok(Ok(outcome)) => outcome,
        Ok(Err(e)) => Err(format!("{param} {shown}: the file operation failed: {e}")),
        Err(_) => Err(format!(
            "{param} {shown}: the file operation did not finish within {FILE_IO_TIMEOUT:?}"
        )),
    }
}

/// What a file system entry is, for a refusal.
fn kind(file_type: std::fs::FileType) -> &'static str {
    if file_type.is_dir() {
        "a directory"
    } else if file_type.is_symlink() {
        "a symbolic link"
    } else if file_type.is_fifo() {
        "a FIFO"
    } else if file_type.is_char_device() {
        "a character device"
    } else if file_type.is_block_device() {
        "a block device"
    } else if file_type.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    }
}

/// The absolute form of `path` with `.` and `..` folded lexically (no link is resolved).
fn lexical(path: &Path) -> PathBuf {
    let absolute = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir().unwrap_or_default().join(path)
    };
    let mut out = PathBuf::new();
    for component in absolute.components() {
        match component {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// Resolves `shown` for `param`: links, `.` and `..` are resolved and the result checked
/// against `scope`. A path that does not resolve is reported as missing only when its
/// lexical form is in scope, so the error never says what exists outside it.
fn resolve(scope: &Scope, param: Param, shown: &str) -> Result<PathBuf, String> {
    match std::fs::canonicalize(shown) {
        Ok(resolved) => {
            scope.admits(param, shown, &resolved)?;
            Ok(resolved)
        }
        Err(e) => {
            scope.admits(param, shown, &lexical(Path::new(shown)))?;
            Err(format!("cannot read {param} {shown}: {e}"))
        }
    }
}

/// Reads at most `limit` bytes of `reader`; more is an error naming the limit.
pub fn read_capped(reader: impl Read, limit: u64) -> io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    reader
        .take(limit.saturating_add(1))
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(io::Error::new(
            io::ErrorKind::FileTooLarge,
            format!("it holds more than the {limit}-byte limit"),
        ));
    }
    Ok(bytes)
}

fn read_blocking(scope: &Scope, shown: &str) -> Result<String, String> {
    let resolved = resolve(scope, Param::Input, shown)?;
    let failed = |e: io::Error| format!("cannot read input_file {shown}: {e}");
    // O_NONBLOCK: opening a FIFO waits for no writer; O_NOFOLLOW: a link swapped in after
    // the resolution is not followed.
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW)
        .open(&resolved)
        .map_err(failed)?;
    let meta = file.metadata().map_err(failed)?;
    if !meta.is_file() {
        return Err(format!(
            "input_file {shown} is {}: only regular files are read",
            kind(meta.file_type())
        ));
    }
    if meta.len() > MAX_INPUT_BYTES {
        return Err(format!(
            "input_file {shown} is {} bytes, over the {MAX_INPUT_BYTES}-byte limit",
            meta.len()
        ));
    }
    let bytes = read_capped(file, MAX_INPUT_BYTES).map_err(failed)?;
    String::from_utf8(bytes).map_err(|e| {
        format!(
            "input_file {shown} is not UTF-8 text (at byte {})",
            e.utf8_error().valid_up_to()
        )
    })
}

/// Reads `input_file` `shown` for a call whose files are bounded by `scope`.
pub async fn read_input(scope: &Scope, shown: &str) -> Result<String, String> {
    let (scope, owned) = (scope.clone(), shown.to_owned());
    off_runtime(Param::Input, shown, move || read_blocking(&scope, &owned)).await
}

/// Where `output_file` `shown` would be written: its resolved directory and file name,
/// after the scope check and the check that the target is not a link nor other than a
/// regular file.
fn output_target(scope: &Scope, shown: &str) -> Result<(PathBuf, String), String> {
    let path = Path::new(shown);
    let name = match path.components().next_back() {
        Some(Component::Normal(name)) => name.to_string_lossy().into_owned(),
        _ => return Err(format!("output_file {shown} names no file")),
    };
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let dir = match std::fs::canonicalize(parent) {
        Ok(dir) => dir,
        Err(e) => {
            scope.admits(Param::Output, shown, &lexical(path))?;
            return Err(format!(
                "cannot write output_file {shown}: its directory {}: {e}",
                parent.display()
            ));
        }
    };
    let target = dir.join(&name);
    scope.admits(Param::Output, shown, &target)?;
    match std::fs::symlink_metadata(&target) {
        Ok(meta) if meta.is_file() => {}
        Ok(meta) => {
            return Err(format!(
                "output_file {shown} is {}: only a regular file is ever replaced",
                kind(meta.file_type())
            ));
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(format!("cannot write output_file {shown}: {e}")),
    }
    Ok((dir, name))
}

/// Checks `output_file` `shown` before a run, so a refused target costs no run.
pub async fn check_output(scope: &Scope, shown: &str) -> Result<(), String> {
    let (scope, owned) = (scope.clone(), shown.to_owned());
    off_runtime(Param::Output, shown, move || {
        output_target(&scope, &owned).map(|_| ())
    })
    .await
}

fn write_blocking(scope: &Scope, shown: &str, text: &str) -> Result<(), String> {
    let (dir, name) = output_target(scope, shown)?;
    let temp = dir.join(format!(".{name}.{}.tmp", crate::runs::new_run_id()));
    let written = OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&temp)
        .and_then(|mut file: File| {
            file.write_all(text.as_bytes())?;
            file.sync_data()
        })
        .map_err(|e| format!("cannot write output_file {shown}: {e}"))
        // The target is checked again just before the rename, which replaces whatever
        // entry is there (a rename never writes through a link).
        .and_then(|()| output_target(scope, shown))
        .and_then(|(dir, name)| {
            std::fs::rename(&temp, dir.join(name))
                .map_err(|e| format!("cannot write output_file {shown}: {e}"))
        });
    if written.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    written
}

/// Writes `text` to `output_file` `shown` atomically, for a call bounded by `scope`.
pub async fn write_output(scope: &Scope, shown: &str, text: String) -> Result<(), String> {
    let (scope, owned) = (scope.clone(), shown.to_owned());
    off_runtime(Param::Output, shown, move || {
        write_blocking(&scope, &owned, &text)
    })
    .await
}

/// The local directory a root's `file://` URI names, if it names one.
pub fn root_path(uri: &str) -> Option<PathBuf> {
    let url = url::Url::parse(uri).ok()?;
    if url.scheme() != "file" {
        return None;
    }
    url.to_file_path().ok()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn scope(roots: Option<&[&Path]>, allowed: &[&Path]) -> Scope {
        Scope {
            roots: match roots {
                Some(r) => {
                    ClientRoots::Listed(r.iter().map(|p| p.canonicalize().unwrap()).collect())
                }
                None => ClientRoots::Undeclared,
            },
            allowed: Arc::new(Allowed {
                dirs: allowed.iter().map(|p| p.canonicalize().unwrap()).collect(),
                config: PathBuf::from("/srv/pf/prompts.toml"),
            }),
        }
    }

    fn text(path: &Path) -> String {
        path.to_str().unwrap().to_owned()
    }

    #[test]
    fn the_capped_reader_stops_at_the_limit_whatever_the_source() {
        // An endless source (what /dev/zero is) ends in an error, not in memory.
        let err = read_capped(io::repeat(0), 1024).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::FileTooLarge);
        assert_eq!(read_capped(&b"abc"[..], 3).unwrap(), b"abc");
    }

    #[tokio::test]
    async fn a_device_is_refused_as_not_a_regular_file() {
        // Issue 38 item 1: `/dev/zero` claims 0 bytes and never ends.
        let s = scope(None, &[Path::new("/dev")]);
        let err = read_input(&s, "/dev/zero").await.unwrap_err();
        assert!(
            err.contains("a character device") && err.contains("/dev/zero"),
            "{err}"
        );
    }

    #[tokio::test]
    async fn a_proc_file_outside_the_scope_is_refused() {
        // Issue 38 item 3: `/proc/self/environ` held the gateway key and the MCP bearer.
        let dir = tempfile::tempdir().unwrap();
        for s in [scope(None, &[dir.path()]), scope(Some(&[dir.path()]), &[])] {
            let err = read_input(&s, "/proc/self/environ").await.unwrap_err();
            assert!(err.contains("is outside"), "{err}");
        }
        let err = read_input(&scope(None, &[]), "/proc/self/environ")
            .await
            .unwrap_err();
        assert!(
            err.contains("[files] allowed_dirs") && err.contains("input_text"),
            "{err}"
        );
    }

    #[tokio::test]
    async fn a_proc_file_in_scope_is_read_through_the_cap() {
        // A regular file whose size says 0: read to its end, bounded.
        let s = scope(None, &[Path::new("/proc/self")]);
        let status = read_input(&s, "/proc/self/status").await.unwrap();
        assert!(status.contains("Pid:"), "{status}");
    }

    #[tokio::test]
    async fn a_fifo_is_refused_at_once_without_a_writer() {
        // Issue 38 item 2: opening a FIFO for reading used to wait in open(2) for a writer.
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("pipe");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        let err = read_input(&scope(None, &[dir.path()]), &text(&fifo))
            .await
            .unwrap_err();
        assert!(err.contains("a FIFO"), "{err}");
    }

    #[tokio::test]
    async fn a_link_inside_a_root_that_points_out_of_it_is_refused() {
        let root = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), "s3cret").unwrap();
        let link = root.path().join("link");
        std::os::unix::fs::symlink(outside.path().join("secret"), &link).unwrap();
        let dotted = format!(
            "{}/../{}/secret",
            text(root.path()),
            outside.path().file_name().unwrap().to_str().unwrap()
        );
        let s = scope(Some(&[root.path()]), &[]);
        for path in [text(&link), dotted] {
            let err = read_input(&s, &path).await.unwrap_err();
            assert!(
                err.contains("outside the client's MCP roots"),
                "{path}: {err}"
            );
        }
        // A file inside is read.
        std::fs::write(root.path().join("in.txt"), "inside").unwrap();
        let inside = read_input(&s, &text(&root.path().join("in.txt"))).await;
        assert_eq!(inside.unwrap(), "inside");
    }

    #[tokio::test]
    async fn roots_and_allowed_dirs_must_both_admit_a_file() {
        let root = tempfile::tempdir().unwrap();
        let a = root.path().join("a");
        let b = root.path().join("b");
        std::fs::create_dir_all(&a).unwrap();
        std::fs::create_dir_all(&b).unwrap();
        std::fs::write(a.join("f"), "fa").unwrap();
        std::fs::write(b.join("f"), "fb").unwrap();
        let s = scope(Some(&[root.path()]), &[&a]);
        assert_eq!(read_input(&s, &text(&a.join("f"))).await.unwrap(), "fa");
        let err = read_input(&s, &text(&b.join("f"))).await.unwrap_err();
        assert!(err.contains("outside [files] allowed_dirs"), "{err}");
        let err = read_input(&scope(Some(&[]), &[&a]), &text(&a.join("f")))
            .await
            .unwrap_err();
        assert!(err.contains("lists no root"), "{err}");
    }

    #[tokio::test]
    async fn a_missing_file_is_named_only_inside_the_scope() {
        let dir = tempfile::tempdir().unwrap();
        let s = scope(None, &[dir.path()]);
        let missing = text(&dir.path().join("missing.txt"));
        let err = read_input(&s, &missing).await.unwrap_err();
        assert!(
            err.contains(&missing) && err.contains("No such file"),
            "{err}"
        );
        let err = read_input(&s, "/nonexistent-pf/secret").await.unwrap_err();
        assert!(
            err.contains("is outside") && !err.contains("No such file"),
            "{err}"
        );
    }

    #[tokio::test]
    async fn an_output_that_is_a_link_is_never_replaced() {
        let root = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let victim = outside.path().join("victim");
        std::fs::write(&victim, "keep").unwrap();
        let inside_victim = root.path().join("inside");
        std::fs::write(&inside_victim, "keep too").unwrap();
        let s = scope(Some(&[root.path()]), &[]);
        for (name, to) in [("link-out", &victim), ("link-in", &inside_victim)] {
            let link = root.path().join(name);
            std::os::unix::fs::symlink(to, &link).unwrap();
            let err = write_output(&s, &text(&link), "x".into())
                .await
                .unwrap_err();
            assert!(err.contains("a symbolic link"), "{err}");
            assert!(
                std::fs::symlink_metadata(&link)
                    .unwrap()
                    .file_type()
                    .is_symlink()
            );
        }
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
        assert_eq!(std::fs::read_to_string(&inside_victim).unwrap(), "keep too");
        // Outside the roots, through `..`: refused before anything is written.
        let escape = format!(
            "{}/../{}/new",
            text(root.path()),
            outside.path().file_name().unwrap().to_str().unwrap()
        );
        let err = write_output(&s, &escape, "x".into()).await.unwrap_err();
        assert!(err.contains("outside"), "{err}");
        assert!(!outside.path().join("new").exists());
        // A regular file inside is replaced atomically and no temporary is left.
        let target = root.path().join("report.md");
        write_output(&s, &text(&target), "one".into())
            .await
            .unwrap();
        write_output(&s, &text(&target), "two".into())
            .await
            .unwrap();
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "two");
        let left: Vec<_> = std::fs::read_dir(root.path())
            .unwrap()
            .filter_map(Result::ok)
            .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
            .collect();
        assert!(left.is_empty(), "{left:?}");
        // A directory is not a file to replace.
        let err = write_output(&s, &text(root.path()), "x".into())
            .await
            .unwrap_err();
        assert!(
            err.contains("a directory") || err.contains("names no file"),
            "{err}"
        );
    }

    #[test]
    fn roots_are_decoded_file_uris() {
        assert_eq!(
            root_path("file:///home/u/My%20Project"),
            Some(PathBuf::from("/home/u/My Project"))
        );
        assert_eq!(
            root_path("file://localhost/srv/x"),
            Some(PathBuf::from("/srv/x"))
        );
        assert_eq!(root_path("file://evil.example/srv/x"), None);
        assert_eq!(root_path("https://example.com/x"), None);
        assert_eq!(root_path("not a uri"), None);
    }
}
