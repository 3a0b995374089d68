//! Every message the workspace can show a user reads as clean text: no string literal in any
//! crate's `src/` holds a run of spaces or a line break followed by indentation, the marks
//! of a message wrapped across source lines without a `\` continuation (issue 26, item 5).
//!
//! The scan lexes Rust just enough to find string literals: comments, character literals,
//! lifetimes and raw strings (`r"…"`, `r#"…"#`: JSON, schemas, fixtures) are skipped;
//! ordinary strings are decoded with Rust's own continuation rule (a `\` at the end of a
//! line swallows the newline and the next line's indentation).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

/// Stands in a literal's text for a line break written as one in the source (a string
/// that runs on to the next line without a `\` continuation).
const PHYSICAL_BREAK: char = '\u{2}';

/// A literal's decoded text and the line it starts on.
struct Literal {
    line: usize,
    text: String,
}

/// The ordinary (non-raw) string literals of a Rust source file.
fn literals(source: &str) -> Vec<Literal> {
    let bytes = source.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    let mut line = 1;
    let at = |i: usize| bytes.get(i).copied().unwrap_or(0);
    while i < bytes.len() {
        let c = bytes[i];
        match c {
            b'\n' => {
                line += 1;
                i += 1;
            }
            b'/' if at(i + 1) == b'/' => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if at(i + 1) == b'*' => {
                let mut depth = 0usize;
                loop {
                    if i >= bytes.len() {
                        break;
                    }
                    if bytes[i] == b'/' && at(i + 1) == b'*' {
                        depth += 1;
                        i += 2;
                    } else if bytes[i] == b'*' && at(i + 1) == b'/' {
                        depth -= 1;
                        i += 2;
                        if depth == 0 {
                            break;
                        }
                    } else {
                        if bytes[i] == b'\n' {
                            line += 1;
                        }
                        i += 1;
                    }
                }
            }
            b'r' | b'b' | b'c'
                if !is_ident(at(i.wrapping_sub(1))) && raw_start(bytes, i).is_some() =>
            {
                let (hashes, open) = raw_start(bytes, i).expect("checked");
                let mut j = open + 1;
                let close: Vec<u8> = std::iter::once(b'"')
                    .chain(std::iter::repeat_n(b'#', hashes))
                    .collect();
                while j < bytes.len() && !bytes[j..].starts_with(&close) {
                    if bytes[j] == b'\n' {
                        line += 1;
                    }
                    j += 1;
                }
                i = j + close.len();
            }
            b'\'' => {
                // A character literal ('x', '\n', '\u{..}') or a lifetime ('a).
                if at(i + 1) == b'\\' {
                    let mut j = i + 2;
                    while j < bytes.len() && bytes[j] != b'\'' {
                        j += 1;
                    }
                    i = j + 1;
                } else {
                    let width = source[i + 1..].chars().next().map_or(1, char::len_utf8);
                    if at(i + 1 + width) == b'\'' {
                        i += width + 2;
                    } else {
                        i += 1;
                    }
                }
            }
            b'"' => {
                let start = line;
                let mut text = String::new();
                let mut j = i + 1;
                while j < bytes.len() && bytes[j] != b'"' {
                    match bytes[j] {
                        b'\\' if at(j + 1) == b'\n' => {
                            // The continuation: the newline and the next line's indentation go.
                            line += 1;
                            j += 2;
                            while matches!(at(j), b' ' | b'\t' | b'\n' | b'\r') {
                                if at(j) == b'\n' {
                                    line += 1;
                                }
                                j += 1;
                            }
                        }
                        b'\\' => {
                            text.push(match at(j + 1) {
                                b'n' => '\n',
                                b't' => '\t',
                                _ => '\u{1}',
                            });
                            j += 2;
                        }
                        b'\n' => {
                            // A line break in the source, not a `\n` escape.
                            line += 1;
                            text.push(PHYSICAL_BREAK);
                            j += 1;
                        }
                        _ => {
                            let ch = source[j..].chars().next().expect("in bounds");
                            text.push(ch);
                            j += ch.len_utf8();
                        }
                    }
                }
                out.push(Literal { line: start, text });
                i = j + 1;
            }
            _ => i += 1,
        }
    }
    out
}

fn is_ident(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || byte == b'_'
}

/// `r"`, `r#"`, `br"`, `cr#"` …: the number of hashes and the index of the opening quote.
fn raw_start(bytes: &[u8], i: usize) -> Option<(usize, usize)> {
    let mut j = i;
    if matches!(bytes.get(j), Some(b'b' | b'c')) {
        j += 1;
    }
    if bytes.get(j) != Some(&b'r') {
        return None;
    }
    j += 1;
    let mut hashes = 0;
    while bytes.get(j) == Some(&b'#') {
        hashes += 1;
        j += 1;
    }
    (bytes.get(j) == Some(&b'"')).then_some((hashes, j))
}

/// What is wrong with a literal's text, if anything. A one-line text (a message) must not
/// hold a run of spaces; no text may run on to the next source line without a `\`
/// continuation. Texts laid out over several lines with `\n` escapes (usage text, the
/// tool guide a model reads) may align columns with spaces.
fn problem(text: &str) -> Option<&'static str> {
    if text.contains(PHYSICAL_BREAK) {
        Some("a line break followed by indentation")
    } else if !text.contains('\n') && text.contains("   ") {
        Some("a run of spaces")
    } else {
        None
    }
}

fn rust_sources(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn no_message_in_any_crate_carries_source_indentation() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = Vec::new();
    for entry in std::fs::read_dir(&crates).unwrap().flatten() {
        rust_sources(&entry.path().join("src"), &mut files);
    }
    files.sort();
    assert!(
        files.len() > 50,
        "the scan found only {} files",
        files.len()
    );
    let mut found = Vec::new();
    for file in &files {
        let source = std::fs::read_to_string(file).unwrap();
        for literal in literals(&source) {
            if let Some(why) = problem(&literal.text) {
                found.push(format!(
                    "{}:{}: {why}: {:?}",
                    file.strip_prefix(&crates).unwrap_or(file).display(),
                    literal.line,
                    literal.text
                ));
            }
        }
    }
    assert!(found.is_empty(), "{}", found.join("\n"));
}

#[test]
fn the_scanner_sees_what_it_must_and_skips_the_rest() {
    let source = "// \"a    comment\"\nlet a = \"one \\\n    two\";\nlet b = 'x'; fn f<'a>() {}\nlet c = r#\"raw    \"text\"\"#;\nlet d = \"bad          gap\";\nlet e = \"wrapped\n  here\";\n";
    let found: Vec<(usize, String)> = literals(source)
        .into_iter()
        .map(|l| (l.line, l.text))
        .collect();
    assert_eq!(
        found,
        [
            (2, "one two".to_owned()),
            (6, "bad          gap".to_owned()),
            (7, format!("wrapped{PHYSICAL_BREAK}  here")),
        ]
    );
    assert_eq!(problem("one two"), None);
    assert_eq!(problem("bad          gap"), Some("a run of spaces"));
    assert_eq!(
        problem(&format!("wrapped{PHYSICAL_BREAK}  here")),
        Some("a line break followed by indentation")
    );
    assert_eq!(problem("usage:\n  --watch      rerun"), None);
}
