//! Bounded reading of configuration files, and quoting of file content in messages.

use std::io::Read;
use std::path::Path;

use super::{ConfigError, ConfigErrorKind};

/// Largest configuration file (boot file, profile, include or env file) read, in bytes.
/// Large enough for a catalog of 100,000 models.
pub(crate) const MAX_CONFIG_FILE_BYTES: u64 = 64 * 1024 * 1024;

/// Most distinct files one profile's include graph may load.
pub(crate) const MAX_INCLUDE_FILES: usize = 256;

/// Why a path cannot be read as a configuration file, in the reader's terms; `None` when
/// it is a regular file.
pub(crate) fn not_a_file(path: &Path) -> Option<String> {
    match std::fs::metadata(path) {
        Ok(meta) if meta.is_file() => None,
        Ok(meta) if meta.is_dir() => Some("is a directory, not a file".to_owned()),
        Ok(_) => Some("is not a regular file (a device, socket or pipe)".to_owned()),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Some("does not exist".to_owned()),
        Err(err) => Some(format!("cannot be opened: {}", err.kind())),
    }
}

/// Reads a configuration file as UTF-8 text: a regular file of at most
/// [`MAX_CONFIG_FILE_BYTES`]. `what` names the file in messages ("env file", "file").
/// `Ok(None)` when the file does not exist and `missing_ok` is set.
pub(crate) fn read_text(
    path: &Path,
    what: &str,
    missing_ok: bool,
) -> Result<Option<String>, ConfigError> {
    read_text_shown(path, path, what, missing_ok)
}

/// [`read_text`] of the file at `path`, whose errors name it as `shown` (the path as the
/// user gave it).
pub(crate) fn read_text_shown(
    path: &Path,
    shown: &Path,
    what: &str,
    missing_ok: bool,
) -> Result<Option<String>, ConfigError> {
    let io_error = |message: String| ConfigError::new(ConfigErrorKind::Io, shown, None, message);
    if missing_ok && !path.exists() {
        return Ok(None);
    }
    if let Some(why) = not_a_file(path) {
        return Err(io_error(format!("cannot read {what}: it {why}")));
    }
    let file = std::fs::File::open(path)
        .map_err(|err| io_error(format!("cannot read {what}: {}", err.kind())))?;
    let mut bytes = Vec::new();
    file.take(MAX_CONFIG_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|err| io_error(format!("cannot read {what}: {}", err.kind())))?;
    if bytes.len() as u64 > MAX_CONFIG_FILE_BYTES {
        return Err(io_error(format!(
            "{what} is larger than the limit of {MAX_CONFIG_FILE_BYTES} bytes"
        )));
    }
    String::from_utf8(bytes).map(Some).map_err(|err| {
        io_error(format!(
            "{what} is not UTF-8 text (invalid byte at offset {})",
            err.utf8_error().valid_up_to()
        ))
    })
}

pub(crate) use promptforge_env::quote;

/// A TOML error as "line L, column C: message", without the excerpt of the file that the
/// TOML library prints (a file that is not configuration, say `/etc/passwd`, must not
/// have its content echoed, possibly over HTTP).
pub(crate) fn toml_error(text: &str, err: &toml::de::Error) -> String {
    let message = err.message().trim();
    match err.span() {
        Some(span) => {
            let before = text.get(..span.start).unwrap_or(text);
            let line = before.matches('\n').count() + 1;
            let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
            format!("TOML error at line {line}, column {column}: {message}")
        }
        None => format!("TOML error: {message}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn toml_errors_carry_no_excerpt() {
        let text = "a = 1\nroot:x:0:0:root:/root:/bin/bash\n";
        let err = toml::from_str::<toml::Value>(text).unwrap_err();
        let message = toml_error(text, &err);
        assert!(
            message.starts_with("TOML error at line 2, column"),
            "{message}"
        );
        assert!(!message.contains("/bin/bash"), "{message}");
    }

    #[test]
    fn refuses_directories_and_devices() {
        let dir = tempfile::tempdir().unwrap();
        let err = read_text(dir.path(), "file", false).unwrap_err();
        assert!(err.to_string().contains("is a directory"), "{err}");
        assert!(
            read_text(&dir.path().join("nope"), "file", true)
                .unwrap()
                .is_none()
        );
        if Path::new("/dev/zero").exists() {
            let err = read_text(Path::new("/dev/zero"), "file", false).unwrap_err();
            assert!(err.to_string().contains("not a regular file"), "{err}");
        }
    }
}
