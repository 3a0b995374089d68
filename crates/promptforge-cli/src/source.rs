//! Reading a prompt file safely: a regular file (after symlinks) of at most
//! [`MAX_PROMPT_BYTES`], valid UTF-8. `promptforge run` and `promptforge check` share it.

use std::fmt;
use std::io::Read;
use std::path::Path;

use promptforge_core::ParseError;
use promptforge_core::parse::{MAX_PROMPT_BYTES, source_from_bytes};

/// Why a prompt file could not be read.
#[derive(Debug)]
pub(crate) enum SourceError {
    /// The file could not be opened or read.
    Unreadable(std::io::Error),
    /// A directory, device, socket or pipe.
    NotRegular,
    /// Larger than [`MAX_PROMPT_BYTES`] (the size seen).
    TooLarge(u64),
    /// Not UTF-8 (the error names the byte offset and line).
    Encoding(ParseError),
}

impl fmt::Display for SourceError {
    /// The problem, without the file's name.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Unreadable(error) => write!(f, "{error}"),
            Self::NotRegular => f.write_str(
                "it is not a regular file (a prompt is a Markdown file, not a directory, device \
                 or pipe)",
            ),
            Self::TooLarge(size) => write!(
                f,
                "it is {size} bytes; prompts may be at most {} MiB",
                MAX_PROMPT_BYTES / (1024 * 1024)
            ),
            Self::Encoding(error) => f.write_str(error.message()),
        }
    }
}

/// Reads the prompt at `file`; `shown` names it in an encoding error.
pub(crate) fn read_prompt(file: &Path, shown: &str) -> Result<String, SourceError> {
    // Checked before opening: opening a FIFO would block.
    let metadata = std::fs::metadata(file).map_err(SourceError::Unreadable)?;
    if !metadata.is_file() {
        return Err(SourceError::NotRegular);
    }
    let limit = MAX_PROMPT_BYTES as u64;
    if metadata.len() > limit {
        return Err(SourceError::TooLarge(metadata.len()));
    }
    let handle = std::fs::File::open(file).map_err(SourceError::Unreadable)?;
    if !handle
        .metadata()
        .map_err(SourceError::Unreadable)?
        .is_file()
    {
        return Err(SourceError::NotRegular);
    }
    // The file may grow after the check: read at most one byte past the cap.
    let mut bytes = Vec::new();
    handle
        .take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(SourceError::Unreadable)?;
    if bytes.len() as u64 > limit {
        return Err(SourceError::TooLarge(bytes.len() as u64));
    }
    source_from_bytes(shown, bytes).map_err(SourceError::Encoding)
}

/// Whether a source without a readable `promptforge:` version still tries to be a prompt
/// (a frontmatter with a `promptforge:` key, or an unclosed one): then the parser says
/// precisely what is wrong.
pub(crate) fn attempts_prompt(source: &str) -> bool {
    let source = source.strip_prefix('\u{feff}').unwrap_or(source);
    if !source.starts_with("---") {
        return false;
    }
    let mut lines = source.lines().skip(1);
    let closed = lines.any(|line| matches!(line.trim_end(), "---" | "..."));
    !closed || source.lines().any(|line| line.starts_with("promptforge:"))
}

/// Whether a file found while searching a directory claims to be a prompt: a readable
/// `promptforge:` version, or a frontmatter that carries a `promptforge:` key the version
/// reader could not read (so the parser can say what is wrong with it).
pub(crate) fn claims_promptforge(source: &str) -> bool {
    let source = source.strip_prefix('\u{feff}').unwrap_or(source);
    promptforge_core::promptforge_version(source).is_some()
        || (source.starts_with("---")
            && source.lines().any(|line| line.starts_with("promptforge:")))
}
