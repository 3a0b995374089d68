//! Writing trace files: checked before the run, written atomically after it.

use std::io::Write;
use std::path::{Path, PathBuf};

/// Checks that a file can be written at `path` later: its directory exists and `path` is
/// not a directory. Called before a run, so a typo fails fast instead of after the run.
pub fn check_target(path: &Path) -> Result<(), String> {
    if path.as_os_str().is_empty() {
        return Err("the path is empty".into());
    }
    if path.is_dir() {
        return Err(format!("{} is a directory", path.display()));
    }
    let dir = parent(path);
    match std::fs::metadata(&dir) {
        Ok(meta) if meta.is_dir() => Ok(()),
        Ok(_) => Err(format!("{} is not a directory", dir.display())),
        Err(error) => Err(format!(
            "cannot use the directory {}: {error}",
            dir.display()
        )),
    }
}

fn parent(path: &Path) -> PathBuf {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Writes `bytes` to `path` atomically: a fresh temporary file beside it (created
/// exclusively, flushed to disk), then a rename over `path`. A reader sees the old file or
/// the whole new one, never half of it; the temporary is removed when any step fails.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = parent(path);
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "trace".into());
    let suffix: u64 = rand::random();
    let temp = dir.join(format!(".{name}.tmp{suffix:016x}"));
    let result = (|| {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&temp)?;
        file.write_all(bytes)?;
        file.sync_data()?;
        std::fs::rename(&temp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    result
}

/// Writes a run's trace `document` as the JSON trace file at `json` and as the viewer page
/// at `html` (either may be absent); returns a message per file that could not be written.
pub fn write_outputs(
    document: &serde_json::Value,
    json: Option<&Path>,
    html: Option<&Path>,
) -> Vec<String> {
    let mut failures = Vec::new();
    if let Some(path) = json {
        match serde_json::to_vec_pretty(document) {
            Ok(mut bytes) => {
                bytes.push(b'\n');
                if let Err(error) = write_atomic(path, &bytes) {
                    failures.push(format!(
                        "cannot write the trace to {}: {error}",
                        path.display()
                    ));
                }
            }
            Err(error) => failures.push(format!("cannot encode the trace: {error}")),
        }
    }
    if let Some(path) = html {
        let page = crate::viewer::html(document);
        if let Err(error) = write_atomic(path, page.as_bytes()) {
            failures.push(format!(
                "cannot write the trace viewer to {}: {error}",
                path.display()
            ));
        }
    }
    failures
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn targets_are_checked_and_writes_replace_whole_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.json");
        check_target(&path).unwrap();
        assert!(
            check_target(dir.path())
                .unwrap_err()
                .contains("is a directory")
        );
        assert!(
            check_target(&dir.path().join("missing/t.json"))
                .unwrap_err()
                .contains("cannot use the directory")
        );
        write_atomic(&path, b"one").unwrap();
        write_atomic(&path, b"two").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"two");
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(left.len(), 1, "no temporary file is left behind");
    }
}
