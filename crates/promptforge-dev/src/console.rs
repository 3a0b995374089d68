//! Where the runner's lines go: records and status on stderr, the result on stdout.

use std::io::Write;
use std::sync::{Arc, Mutex};

/// The longest record printed, in characters; longer ones end in `…`.
pub const MAX_LINE_CHARS: usize = 4096;

/// A line sink shared by the observer, the dump report and the watcher.
#[derive(Clone)]
pub struct Console {
    err: Arc<Mutex<Box<dyn Write + Send>>>,
}

impl std::fmt::Debug for Console {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Console").finish_non_exhaustive()
    }
}

impl Console {
    /// A console writing to the process's stderr.
    pub fn stderr() -> Self {
        Self::new(Box::new(std::io::stderr()))
    }

    /// A console writing diagnostics to `err`.
    pub fn new(err: Box<dyn Write + Send>) -> Self {
        Self {
            err: Arc::new(Mutex::new(err)),
        }
    }

    /// Prints one diagnostic line: control characters are escaped so a record stays one
    /// line, and it is cut at [`MAX_LINE_CHARS`].
    pub fn line(&self, text: &str) {
        let line = one_line(text);
        let mut err = match self.err.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        };
        let _ = writeln!(err, "{line}");
        let _ = err.flush();
    }
}

/// `text` with control characters escaped (`\n`, `\t`, `\u{…}`) and cut to
/// [`MAX_LINE_CHARS`].
pub fn one_line(text: &str) -> String {
    let mut out = String::with_capacity(text.len().min(MAX_LINE_CHARS));
    for (count, c) in text.chars().enumerate() {
        if count == MAX_LINE_CHARS {
            out.push('…');
            break;
        }
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => out.push_str(&c.escape_unicode().to_string()),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_stay_single_and_bounded() {
        assert_eq!(one_line("a\nb\tc\u{1b}"), "a\\nb\\tc\\u{1b}");
        let long = "x".repeat(MAX_LINE_CHARS + 10);
        let cut = one_line(&long);
        assert_eq!(cut.chars().count(), MAX_LINE_CHARS + 1);
        assert!(cut.ends_with('…'));
    }
}
