//! Every problem in a prompt file, not only the first: the diagnostics behind
//! `promptforge check`.
//!
//! The parser stops at its first error, which is right for running a prompt. For an editor
//! or a CI annotator, [`check`] goes on where it can, by error recovery through erasure: the
//! text an error points at (a heading, a fence, a placeholder) is blanked out, keeping every
//! newline where it was, and the file is parsed again. A frontmatter error is recovered by
//! standing in a minimal valid header of the same line count, so the body is still checked.
//! Recovery stops at an error without a location, when nothing more can be erased, after
//! [`MAX_DIAGNOSTICS`], or when an erasure would not make progress; each pass is linear in
//! the file, so the whole check is too.

use std::ops::Range;

use super::error::{ParseError, ParseErrorKind};
use super::frontmatter;

/// At most this many diagnostics are reported for one file.
pub const MAX_DIAGNOSTICS: usize = 50;

/// One problem in a prompt file, with the column an editor needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    error: ParseError,
    column: Option<usize>,
}

impl Diagnostic {
    /// The problem.
    pub fn error(&self) -> &ParseError {
        &self.error
    }

    /// The 1-based line, where the problem has one.
    pub fn line(&self) -> Option<usize> {
        self.error.line()
    }

    /// The 1-based column (in characters) on [`Diagnostic::line`], where it is known.
    pub fn column(&self) -> Option<usize> {
        self.column
    }
}

/// Checks `source` (parsed under the name `origin`) and returns every problem found, in file
/// order of discovery; an empty list means the prompt parses.
///
/// ```
/// let source = "---\nname: x\ndescription: d\npromptforge: 1\n---\n\n# T\n\n## A\n\n{{ bad. }}\n\n## A\n";
/// let found = promptforge_core::parse::check("x.md", source);
/// let kinds: Vec<&str> = found.iter().map(|d| d.error().kind().as_str()).collect();
/// assert_eq!(kinds, ["template", "duplicate_section"]);
/// assert_eq!((found[0].line(), found[0].column()), (Some(11), Some(1)));
/// ```
pub fn check(origin: &str, source: &str) -> Vec<Diagnostic> {
    let source = source.strip_prefix('\u{feff}').unwrap_or(source);
    let mut text = source.replace("\r\n", "\n");
    let mut found: Vec<Diagnostic> = Vec::new();
    let mut header_replaced = false;
    while found.len() < MAX_DIAGNOSTICS {
        let Err(error) = super::parse(origin, &text) else {
            break;
        };
        let column = column_of(&text, &error);
        let recovered = if is_frontmatter_problem(error.kind()) {
            !header_replaced && {
                header_replaced = true;
                replace_header(&mut text)
            }
        } else if matches!(
            error.kind(),
            ParseErrorKind::MissingTitle | ParseErrorKind::MissingFrontmatter
        ) {
            // Without a frontmatter or a title there is no structure to check further.
            false
        } else {
            error.span().is_some_and(|span| erase(&mut text, span))
        };
        found.push(Diagnostic { error, column });
        if !recovered {
            break;
        }
    }
    found
}

/// Whether the problem is in the frontmatter (recovered by a stand-in header).
fn is_frontmatter_problem(kind: ParseErrorKind) -> bool {
    matches!(
        kind,
        ParseErrorKind::InvalidFrontmatter
            | ParseErrorKind::MissingField
            | ParseErrorKind::UnknownField
            | ParseErrorKind::InvalidField
            | ParseErrorKind::UnsupportedVersion
    )
}

/// The column of the error's span start, when the span starts on the error's line.
fn column_of(text: &str, error: &ParseError) -> Option<usize> {
    let line = error.line()?;
    let Some(span) = error.span() else {
        return Some(1);
    };
    let start = span.start.min(text.len());
    if !text.is_char_boundary(start) {
        return Some(1);
    }
    let before = &text[..start];
    if before.matches('\n').count() + 1 != line {
        return Some(1);
    }
    let line_start = before.rfind('\n').map_or(0, |at| at + 1);
    Some(before[line_start..].chars().count() + 1)
}

/// Blanks out `span` (every character but newlines becomes a space); `false` when there is
/// nothing to erase, so recovery cannot make progress.
fn erase(text: &mut String, span: Range<usize>) -> bool {
    let end = span.end.min(text.len());
    let start = span.start.min(end);
    if !text.is_char_boundary(start) || !text.is_char_boundary(end) {
        return false;
    }
    let erased = &text[start..end];
    if erased.chars().all(char::is_whitespace) {
        return false;
    }
    let blank: String = erased
        .chars()
        .map(|c| if c == '\n' { '\n' } else { ' ' })
        .collect();
    text.replace_range(start..end, &blank);
    true
}

/// Replaces the frontmatter's YAML with a minimal valid header of the same line count;
/// `false` when the frontmatter has too few lines to hold one.
fn replace_header(text: &mut String) -> bool {
    let Some(split) = frontmatter::split(text) else {
        return false;
    };
    // The YAML starts on the line after the opening `---`.
    let Some(start) = text.find('\n').map(|at| at + 1) else {
        return false;
    };
    let end = start + split.yaml.len();
    let lines = split.yaml.matches('\n').count();
    const HEADER: &str = "name: check\ndescription: check\npromptforge: 1\n";
    if lines < HEADER.matches('\n').count() {
        return false;
    }
    let mut header = HEADER.to_owned();
    header.push_str(&"\n".repeat(lines - 3));
    text.replace_range(start..end, &header);
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(source: &str) -> Vec<(&'static str, Option<usize>, Option<usize>)> {
        check("t.md", source)
            .iter()
            .map(|d| (d.error().kind().as_str(), d.line(), d.column()))
            .collect()
    }

    const HEAD: &str = "---\nname: x\ndescription: d\npromptforge: 1\n---\n\n";

    #[test]
    fn a_valid_prompt_has_no_diagnostics() {
        assert!(kinds(&format!("{HEAD}# T\n\n```lua\nreturn args\n```\n")).is_empty());
    }

    #[test]
    fn every_lua_block_with_a_syntax_error_is_reported() {
        let source = format!(
            "{HEAD}# T\n\n## A\n\n```lua\nlocal = 1\n```\n\n## B\n\n```lua\nreturn (\n```\n"
        );
        let found = kinds(&source);
        assert_eq!(found.len(), 2, "{found:?}");
        assert!(found.iter().all(|(k, _, _)| *k == "lua_syntax"));
        assert_eq!(found[0].1, Some(12));
        // An unfinished expression is reported where the block ends.
        assert_eq!(found[1].1, Some(19));
    }

    #[test]
    fn a_frontmatter_error_does_not_hide_body_errors() {
        let source = "---\nname: x\ndescription: d\npromptforge: 1\ncolour: red\n---\n\n# T\n\n## A\n\n{{ 1bad }}\n";
        let found = kinds(source);
        assert_eq!(found[0].0, "unknown_field");
        assert_eq!(found[1], ("template", Some(12), Some(1)));
        assert_eq!(found.len(), 2);
    }

    #[test]
    fn columns_point_into_the_line() {
        let found = kinds(&format!("{HEAD}# T\n\nHello there {{{{ x. }}}}\n"));
        assert_eq!(found, [("template", Some(9), Some(13))]);
    }

    #[test]
    fn errors_without_a_location_stop_recovery() {
        let found = kinds(&format!("{HEAD}no title here\n"));
        assert_eq!(found.len(), 1, "{found:?}");
        // A wrong first heading is one problem, not a cascade.
        let found = kinds(&format!("{HEAD}## Not a title\n\n## B\n"));
        assert_eq!(found, [("missing_title", Some(7), Some(1))]);
    }

    #[test]
    fn lua_errors_never_show_a_cut_chunk_name() {
        let origin = format!("{}/prompt.md", "long-directory-name".repeat(5));
        let source = format!("{HEAD}# T\n\n```lua\nlocal = 1\n```\n");
        let found = check(&origin, &source);
        assert_eq!(found.len(), 1);
        assert_eq!(
            found[0].error().message(),
            "Lua syntax error: <name> expected near '='"
        );
        assert_eq!(found[0].line(), Some(10));
    }

    #[test]
    fn crlf_and_bom_keep_lines_and_columns() {
        let source = format!("\u{feff}{HEAD}# T\n\n  {{{{ x. }}}}\n").replace('\n', "\r\n");
        assert_eq!(kinds(&source), [("template", Some(9), Some(3))]);
    }

    #[test]
    fn the_number_of_diagnostics_is_bounded() {
        let mut source = format!("{HEAD}# T\n\n");
        for i in 0..(MAX_DIAGNOSTICS + 20) {
            source.push_str(&format!("## S{i}\n\n{{{{ bad. }}}}\n\n"));
        }
        assert_eq!(kinds(&source).len(), MAX_DIAGNOSTICS);
    }
}
