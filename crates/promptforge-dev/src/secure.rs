//! The security layer of every dump write: owner-only permissions, no symlink followed,
//! atomic replacement, and the on-disk path rules.
//!
//! Every write starts from a trusted base directory (the canonicalised directory of the
//! prompt file, which the user chose) and walks down one component at a time with
//! `symlink_metadata`, so a symbolic link planted at the dump root, at any directory inside
//! it or at the target itself is refused before anything is written. Files are created as a
//! sibling temporary `.{name}.tmp{random}` with `O_CREAT | O_EXCL | O_NOFOLLOW` and mode
//! 0600, written, flushed to disk, restricted again, then renamed over the destination
//! (a rename replaces a link instead of following it). Directories are created 0700.

use std::fs::{self, DirBuilder, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use rand::Rng;

/// The mode of every directory the dump creates.
pub const DIR_MODE: u32 = 0o700;
/// The mode of every file the dump writes.
pub const FILE_MODE: u32 = 0o600;

/// Why a secure write did not happen.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SecureError {
    /// A symbolic link sits where the dump would write or descend.
    #[error("refusing to follow the symbolic link at {}", path.display())]
    Symlink {
        /// The link.
        path: PathBuf,
    },
    /// Something other than a directory sits where the dump needs one.
    #[error("{} exists and is not a directory", path.display())]
    NotADirectory {
        /// The offending entry.
        path: PathBuf,
    },
    /// A directory sits where the dump would write a file.
    #[error("{} is a directory, not a file", path.display())]
    IsADirectory {
        /// The offending entry.
        path: PathBuf,
    },
    /// An I/O operation failed.
    #[error("{} on {}: {source}", what, path.display())]
    Io {
        /// What was being done.
        what: &'static str,
        /// Where.
        path: PathBuf,
        /// The operating system's error.
        source: io::Error,
    },
}

impl SecureError {
    fn io(what: &'static str, path: &Path, source: io::Error) -> Self {
        Self::Io {
            what,
            path: path.to_owned(),
            source,
        }
    }

    /// Whether the write was refused because of a symbolic link.
    pub fn is_symlink(&self) -> bool {
        matches!(self, Self::Symlink { .. })
    }
}

/// Ensures `base/components…` exists as a chain of real directories and returns its path.
///
/// `base` is trusted and must exist. Each component below it is checked with
/// `symlink_metadata`: a link is refused, a missing directory is created 0700, a
/// non-directory is an error. Directories created here are owner-only; existing ones on the
/// way are restricted to 0700 as well.
pub fn ensure_dir(base: &Path, components: &[&str]) -> Result<PathBuf, SecureError> {
    let mut current = base.to_path_buf();
    for component in components {
        current.push(component);
        match fs::symlink_metadata(&current) {
            Ok(meta) if meta.file_type().is_symlink() => {
                return Err(SecureError::Symlink { path: current });
            }
            Ok(meta) if meta.is_dir() => {
                if meta.permissions().mode() & 0o777 != DIR_MODE {
                    fs::set_permissions(&current, fs::Permissions::from_mode(DIR_MODE))
                        .map_err(|e| SecureError::io("restricting", &current, e))?;
                }
            }
            Ok(_) => return Err(SecureError::NotADirectory { path: current }),
            Err(error) if error.kind() == io::ErrorKind::NotFound => {
                match DirBuilder::new().mode(DIR_MODE).create(&current) {
                    Ok(()) => {}
                    // Another writer of the same dump created it first: check it below.
                    Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                    Err(e) => return Err(SecureError::io("creating the directory", &current, e)),
                }
                // mkdir never follows a link, but check what is there now anyway.
                let meta = fs::symlink_metadata(&current)
                    .map_err(|e| SecureError::io("inspecting", &current, e))?;
                if meta.file_type().is_symlink() {
                    return Err(SecureError::Symlink { path: current });
                }
                if !meta.is_dir() {
                    return Err(SecureError::NotADirectory { path: current });
                }
            }
            Err(error) => return Err(SecureError::io("inspecting", &current, error)),
        }
    }
    Ok(current)
}

/// Whether `dir/name` already holds exactly `contents` as an owner-only regular file.
pub fn is_current(dir: &Path, name: &str, contents: &[u8]) -> bool {
    let target = dir.join(name);
    let Ok(meta) = fs::symlink_metadata(&target) else {
        return false;
    };
    if !meta.is_file() || meta.len() != contents.len() as u64 {
        return false;
    }
    if meta.permissions().mode() & 0o777 != FILE_MODE {
        return false;
    }
    let Ok(mut file) = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&target)
    else {
        return false;
    };
    let mut existing = Vec::with_capacity(contents.len());
    io::Read::read_to_end(&mut file, &mut existing).is_ok() && existing == contents
}

/// Writes `contents` to `dir/name` atomically with mode 0600.
///
/// `dir` must come from [`ensure_dir`]. A link or a directory at the target is refused; the
/// temporary is removed when anything fails.
pub fn write_file(dir: &Path, name: &str, contents: &[u8]) -> Result<(), SecureError> {
    let target = dir.join(name);
    match fs::symlink_metadata(&target) {
        Ok(meta) if meta.file_type().is_symlink() => {
            return Err(SecureError::Symlink { path: target });
        }
        Ok(meta) if meta.is_dir() => return Err(SecureError::IsADirectory { path: target }),
        Ok(_) => {}
        Err(error) if error.kind() == io::ErrorKind::NotFound => {}
        Err(error) => return Err(SecureError::io("inspecting", &target, error)),
    }
    replace(dir, name, &target, contents)
}

/// The temporary-then-rename step of [`write_file`], without the check of the target.
fn replace(dir: &Path, name: &str, target: &Path, contents: &[u8]) -> Result<(), SecureError> {
    let suffix: u64 = rand::rng().random();
    let temporary = dir.join(format!(".{name}.tmp{suffix:016x}"));
    let written = write_temporary(&temporary, contents).and_then(|()| {
        fs::rename(&temporary, target).map_err(|e| SecureError::io("renaming onto", target, e))
    });
    if written.is_err() {
        let _ = fs::remove_file(&temporary);
    }
    written
}

fn write_temporary(temporary: &Path, contents: &[u8]) -> Result<(), SecureError> {
    let mut file: File = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(FILE_MODE)
        .custom_flags(libc::O_NOFOLLOW)
        .open(temporary)
        .map_err(|e| SecureError::io("creating", temporary, e))?;
    file.write_all(contents)
        .and_then(|()| file.flush())
        .map_err(|e| SecureError::io("writing", temporary, e))?;
    // The umask may have narrowed the mode further, never widened it; set it exactly.
    file.set_permissions(fs::Permissions::from_mode(FILE_MODE))
        .map_err(|e| SecureError::io("restricting", temporary, e))?;
    file.sync_data()
        .map_err(|e| SecureError::io("flushing", temporary, e))?;
    Ok(())
}

/// The characters Windows reserves in file names; a store path holding one is not dumped.
const RESERVED_CHARACTERS: [char; 6] = ['*', '?', '"', '<', '>', '|'];

/// The first segment reserved for raw trace capture.
pub const TRACE_DIR: &str = ".trace";

/// Why a store path cannot be written to disk, or `None` when it can.
///
/// Refused: empty paths, absolute paths, empty, `.` and `..` segments, backslashes, control
/// characters, `* ? " < > |`, Windows device names (`CON`, `PRN`, `AUX`, `NUL`, `COM1`-`COM9`,
/// `LPT1`-`LPT9`, also with the superscript digits `¹ ² ³` and with any extension), and paths
/// under `.trace/`, which belongs to raw trace capture.
pub fn unsafe_reason(path: &str) -> Option<&'static str> {
    if path.is_empty() {
        return Some("the path is empty");
    }
    if path.starts_with('/') {
        return Some("the path is absolute");
    }
    if path.contains('\\') {
        return Some("the path contains a backslash");
    }
    if path.chars().any(char::is_control) {
        return Some("the path contains a control character");
    }
    if path.contains(RESERVED_CHARACTERS) {
        return Some("the path contains a character Windows reserves (* ? \" < > |)");
    }
    let mut segments = path.split('/').peekable();
    if segments.peek() == Some(&TRACE_DIR) {
        return Some("`.trace/` is reserved for raw trace capture");
    }
    for segment in segments {
        if segment.is_empty() {
            return Some("the path has an empty segment");
        }
        if segment == "." || segment == ".." {
            return Some("the path has a `.` or `..` segment");
        }
        if is_device_name(segment) {
            return Some("a segment is a reserved device name");
        }
    }
    None
}

fn is_device_name(segment: &str) -> bool {
    let stem = segment.split('.').next().unwrap_or(segment).trim_end();
    let upper = stem.to_ascii_uppercase();
    if ["CON", "PRN", "AUX", "NUL"].contains(&upper.as_str()) {
        return true;
    }
    let Some(rest) = upper
        .strip_prefix("COM")
        .or_else(|| upper.strip_prefix("LPT"))
    else {
        return false;
    };
    let mut digits = rest.chars();
    matches!(
        (digits.next(), digits.next()),
        (Some('1'..='9' | '¹' | '²' | '³'), None)
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn unsafe_paths_are_named() {
        for path in [
            "",
            "/etc/passwd",
            "a/../b",
            "./a",
            "a//b",
            "a\\b",
            "a\u{7}b",
            "a*b",
            "a?b",
            "a\"b",
            "a<b",
            "a>b",
            "a|b",
            "CON",
            "dir/nul.txt",
            "com1",
            "LPT9.log",
            "COM¹",
            "lpt².txt",
            "x/COM³",
            ".trace/turn-1-request.json",
        ] {
            assert!(unsafe_reason(path).is_some(), "{path:?} should be unsafe");
        }
        for path in [
            "a.txt",
            "notes/deep.txt",
            "COM10",
            "COM0",
            "console.txt",
            "LPT",
            "x/.trace",
            ".hidden",
        ] {
            assert_eq!(unsafe_reason(path), None, "{path:?} should be safe");
        }
    }

    #[test]
    fn writes_are_atomic_owner_only_and_leave_no_temporary() {
        let base = tempfile::tempdir().unwrap();
        std::fs::create_dir(base.path().join("root")).unwrap();
        fs::set_permissions(base.path().join("root"), fs::Permissions::from_mode(0o755)).unwrap();
        let dir = ensure_dir(base.path(), &["root", "sub"]).unwrap();
        write_file(&dir, "f.txt", b"one").unwrap();
        write_file(&dir, "f.txt", b"two").unwrap();
        assert_eq!(fs::read(dir.join("f.txt")).unwrap(), b"two");
        let mode = fs::metadata(dir.join("f.txt"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        for d in [base.path().join("root"), dir.clone()] {
            assert_eq!(
                fs::metadata(&d).unwrap().permissions().mode() & 0o777,
                0o700
            );
        }
        let names: Vec<_> = fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("f.txt")]);
        assert!(is_current(&dir, "f.txt", b"two"));
        assert!(!is_current(&dir, "f.txt", b"one"));
    }

    #[test]
    fn links_are_refused_at_the_target_and_at_ancestors() {
        let base = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        fs::write(outside.path().join("victim"), "keep").unwrap();
        let root = ensure_dir(base.path(), &["root"]).unwrap();
        symlink(outside.path().join("victim"), root.join("f.txt")).unwrap();
        let error = write_file(&root, "f.txt", b"evil").unwrap_err();
        assert!(error.is_symlink(), "{error}");
        symlink(outside.path(), root.join("sub")).unwrap();
        let error = ensure_dir(base.path(), &["root", "sub"]).unwrap_err();
        assert!(error.is_symlink(), "{error}");
        assert_eq!(
            fs::read_to_string(outside.path().join("victim")).unwrap(),
            "keep"
        );
        assert_eq!(fs::read_dir(outside.path()).unwrap().count(), 1);
    }

    #[test]
    fn a_failed_write_removes_its_temporary() {
        let base = tempfile::tempdir().unwrap();
        let root = ensure_dir(base.path(), &["root"]).unwrap();
        fs::create_dir(root.join("taken")).unwrap();
        fs::write(root.join("taken/x"), "x").unwrap();
        let error = write_file(&root, "taken", b"data").unwrap_err();
        assert!(matches!(error, SecureError::IsADirectory { .. }), "{error}");
        // Past the check, renaming a file over a non-empty directory fails after the
        // temporary was written: it must be cleaned up.
        let error = replace(&root, "taken", &root.join("taken"), b"data").unwrap_err();
        assert!(matches!(error, SecureError::Io { .. }), "{error}");
        let names: Vec<_> = fs::read_dir(&root)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("taken")]);
    }
}
