//! Store path validation.

use super::StoreError;

/// The longest store path accepted, in bytes.
pub const MAX_PATH_BYTES: usize = 1024;

const RESERVED: [&str; 4] = ["CON", "PRN", "AUX", "NUL"];

/// Checks a store path against the path rules.
///
/// A path uses forward slashes only, has no empty, `.` or `..` segments, no Windows device
/// names (`CON`, `PRN`, `AUX`, `NUL`, `COM1`-`COM9`, `LPT1`-`LPT9`, with or without an
/// extension), no segment ending in a dot or a space, no control characters, and is at most
/// [`MAX_PATH_BYTES`] long.
pub fn validate_path(path: &str) -> Result<(), StoreError> {
    let reject = |why: &str| Err(StoreError::invalid_path(path, why));
    if path.is_empty() {
        return reject("the path is empty");
    }
    if path.len() > MAX_PATH_BYTES {
        return reject("the path is longer than 1024 bytes");
    }
    if path.contains('\\') {
        return reject("use forward slashes, not backslashes");
    }
    if path.chars().any(char::is_control) {
        return reject("the path contains a control character");
    }
    if path.starts_with('/') {
        return reject("store paths are relative: remove the leading slash");
    }
    for segment in path.split('/') {
        if segment.is_empty() {
            return reject("the path has an empty segment");
        }
        if segment == "." || segment == ".." {
            return reject("`.` and `..` segments are not allowed");
        }
        if segment.ends_with('.') || segment.ends_with(' ') {
            return reject("a segment ends with a dot or a space");
        }
        if is_device_name(segment) {
            return reject("a segment is a reserved device name");
        }
    }
    Ok(())
}

fn is_device_name(segment: &str) -> bool {
    let stem = segment.split('.').next().unwrap_or(segment).trim_end();
    let upper = stem.to_ascii_uppercase();
    if RESERVED.contains(&upper.as_str()) {
        return true;
    }
    let bytes = upper.as_bytes();
    bytes.len() == 4
        && (upper.starts_with("COM") || upper.starts_with("LPT"))
        && (b'1'..=b'9').contains(&bytes[3])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_ordinary_paths() {
        for path in [
            "a",
            "notes/summary.md",
            "a/b/c.txt",
            "console/x",
            "COM0",
            "LPT10",
            ".hidden",
        ] {
            assert!(validate_path(path).is_ok(), "{path}");
        }
    }

    #[test]
    fn rejects_each_rule() {
        let long = "a".repeat(1025);
        let cases = [
            "",
            "a\\b",
            "/abs",
            "a//b",
            "a/./b",
            "../x",
            "a/..",
            "CON",
            "nul.txt",
            "con.d/x",
            "x/com1",
            "LPT9.log",
            "name.",
            "name ",
            "a\u{7}b",
            long.as_str(),
        ];
        for path in cases {
            let error = validate_path(path).expect_err(path);
            assert_eq!(error.path(), Some(path));
        }
        assert!(validate_path(&"a".repeat(1024)).is_ok());
    }
}
