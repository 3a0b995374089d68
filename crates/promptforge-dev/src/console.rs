//! Where the runner's lines go: records and status on stderr, the result on stdout.

use std::io::Write;
use std::sync::{Arc, Mutex};

use promptforge_core::error::push_console_escaped;

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

    /// Prints one diagnostic line: control, bidirectional and line-separator characters are
    /// escaped (see [`one_line`]) so a record stays one line that reads as written, and it
    /// is cut at [`MAX_LINE_CHARS`].
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

/// `text` as one console line: every character
/// [`promptforge_core::error::is_console_escaped`] names (controls, bidirectional formatting
/// characters, U+2028 and U+2029) escaped as `\n`, `\t`, `\r` or `\u{…}`, so model text
/// cannot start a line that looks like the runner's own; cut to [`MAX_LINE_CHARS`].
pub fn one_line(text: &str) -> String {
    let mut out = String::with_capacity(text.len().min(MAX_LINE_CHARS));
    for (count, c) in text.chars().enumerate() {
        if count == MAX_LINE_CHARS {
            out.push('…');
            break;
        }
        push_console_escaped(&mut out, c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_stay_single_and_bounded() {
        assert_eq!(one_line("a\nb\tc\u{1b}"), "a\\nb\\tc\\u{1b}");
        // Bidirectional overrides and line separators cannot forge or reorder a line.
        assert_eq!(
            one_line("ok\u{202e}txt.exe\u{2028}[dev-1] done\u{85}\u{2066}\r"),
            "ok\\u{202e}txt.exe\\u{2028}[dev-1] done\\u{85}\\u{2066}\\r"
        );
        let long = "x".repeat(MAX_LINE_CHARS + 10);
        let cut = one_line(&long);
        assert_eq!(cut.chars().count(), MAX_LINE_CHARS + 1);
        assert!(cut.ends_with('…'));
    }
}
