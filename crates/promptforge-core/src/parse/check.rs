//! Every problem in a prompt file, not only the first: the diagnostics behind
//! `promptforge check`.
//!
//! The parser stops at its first error, which is right for running a prompt. For an editor
//! or a CI annotator, [`check`] goes on where it can, in the same single pass: each problem
//! it can recover from is recorded and the parse goes on as if the text the problem points
//! at (a heading, a fence, a placeholder) were erased. A heading in error is left out of the
//! section tree (its content stays in the region before it), a fence in error is left out of
//! its region, a malformed placeholder out of its prose; a frontmatter error is recovered
//! with a minimal stand-in frontmatter, so the body is still checked. The Markdown is read
//! once and each byte of prose is scanned once, so the check is linear in the file,
//! whatever its errors. It stops at an error without a location or one nothing can be
//! recovered from (no frontmatter, no title), and after [`MAX_DIAGNOSTICS`].

use super::error::ParseError;
use super::lines::Lines;

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
    let text = source.replace("\r\n", "\n");
    let mut recovery = Recovery {
        found: Vec::new(),
        room: MAX_DIAGNOSTICS - 1,
    };
    let last = super::parse_with(origin, &text, &mut recovery).err();
    let lines = Lines::new(&text);
    recovery
        .found
        .into_iter()
        .chain(last)
        .map(|error| Diagnostic {
            column: column_of(&text, &lines, &error),
            error: error.with_origin(origin),
        })
        .collect()
}

/// What a parse does with the problems it finds: [`Recovery::none`] (the parser) stops at
/// the first; [`check`] records up to [`MAX_DIAGNOSTICS`] and goes on past each.
pub(crate) struct Recovery {
    found: Vec<ParseError>,
    /// How many problems may be recorded before the next one ends the parse.
    room: usize,
}

impl Recovery {
    /// Recovers from nothing: the first problem ends the parse.
    pub(crate) fn none() -> Self {
        Self {
            found: Vec::new(),
            room: 0,
        }
    }

    /// Records `error` when there is room, and the caller goes on as if the text it points
    /// at were erased; otherwise returns it, ending the parse with it.
    pub(crate) fn recover(&mut self, error: ParseError) -> Result<(), ParseError> {
        if self.found.len() < self.room {
            self.found.push(error);
            Ok(())
        } else {
            Err(error)
        }
    }
}

/// The column of the error's span start, when the span starts on the error's line.
fn column_of(text: &str, lines: &Lines, error: &ParseError) -> Option<usize> {
    let line = error.line()?;
    let Some(span) = error.span() else {
        return Some(1);
    };
    let start = span.start.min(text.len());
    let Some(line_start) = lines.start_of(line) else {
        return Some(1);
    };
    if !text.is_char_boundary(start) || lines.line_of(start) != line {
        return Some(1);
    }
    Some(text[line_start..start].chars().count() + 1)
}

/// Counts of the work a parse does, for the tests that prove [`check`] linear.
#[cfg(test)]
pub(super) mod work {
    use std::cell::Cell;

    thread_local! {
        static PARSES: Cell<usize> = const { Cell::new(0) };
        static MARKDOWN_PASSES: Cell<usize> = const { Cell::new(0) };
        static TEMPLATE_BYTES: Cell<usize> = const { Cell::new(0) };
    }

    /// One parse started.
    pub(in crate::parse) fn parse_pass() {
        PARSES.with(|n| n.set(n.get() + 1));
    }

    /// The Markdown body was read once more.
    pub(in crate::parse) fn markdown_pass() {
        MARKDOWN_PASSES.with(|n| n.set(n.get() + 1));
    }

    /// A template scan read `bytes` bytes of prose.
    pub(in crate::parse) fn template_bytes(bytes: usize) {
        TEMPLATE_BYTES.with(|n| n.set(n.get() + bytes));
    }

    /// (parses, Markdown passes, template bytes) on this thread so far.
    pub(in crate::parse) fn so_far() -> (usize, usize, usize) {
        (
            PARSES.with(Cell::get),
            MARKDOWN_PASSES.with(Cell::get),
            TEMPLATE_BYTES.with(Cell::get),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::super::error::ParseErrorKind;
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

    /// The work `check` does on `source`: (parses, Markdown passes, template bytes).
    fn work_of(source: &str) -> (Vec<Diagnostic>, (usize, usize, usize)) {
        let before = work::so_far();
        let found = check("t.md", source);
        let after = work::so_far();
        (
            found,
            (after.0 - before.0, after.1 - before.1, after.2 - before.2),
        )
    }

    #[test]
    fn four_hundred_thousand_duplicate_headings_take_one_pass() {
        let mut source = format!("{HEAD}# T\n\n");
        source.push_str(&"## A\n\n".repeat(400_000));
        assert!(source.len() > 2_300_000);
        let (found, (parses, markdown, _)) = work_of(&source);
        assert_eq!(found.len(), MAX_DIAGNOSTICS);
        for (k, diagnostic) in found.iter().enumerate() {
            assert_eq!(diagnostic.error().kind(), ParseErrorKind::DuplicateSection);
            // The first `## A` is on line 9; the k-th duplicate two lines per heading later.
            assert_eq!(diagnostic.line(), Some(11 + 2 * k), "{k}");
            assert_eq!(diagnostic.column(), Some(1));
        }
        // One parse, one read of the Markdown: the old check parsed the file 50 times.
        assert_eq!((parses, markdown), (1, 1));
    }

    #[test]
    fn prose_around_erased_headings_and_fences_is_scanned_once() {
        // Big prose runs between 40 duplicate headings and 5 broken fences: each recovery
        // goes on where it stopped instead of scanning the region's prose again.
        let prose = "Some words and a {{ args }} placeholder.\n".repeat(2_000);
        let mut source = format!("{HEAD}# T\n\n## A\n\n{prose}\n");
        for _ in 0..40 {
            source.push_str(&format!("## A\n\n{prose}\n"));
        }
        for _ in 0..5 {
            source.push_str(&format!("```lua\nlocal = 1\n```\n\n{prose}\n"));
        }
        let (found, (parses, markdown, template_bytes)) = work_of(&source);
        let kinds: Vec<&str> = found.iter().map(|d| d.error().kind().as_str()).collect();
        assert_eq!(kinds.len(), 45, "{kinds:?}");
        assert!(kinds[..40].iter().all(|k| *k == "duplicate_section"));
        assert!(kinds[40..].iter().all(|k| *k == "lua_syntax"));
        assert_eq!((parses, markdown), (1, 1));
        assert!(
            template_bytes <= source.len(),
            "{template_bytes} template bytes scanned for a {}-byte file",
            source.len()
        );
    }

    #[test]
    fn an_erased_heading_leaves_the_tree_as_it_was() {
        // The duplicate `## A` closes nothing: `#### D` still sits under `### B`.
        let source = format!("{HEAD}# T\n\n## A\n\n### B\n\n## A\n\n#### D\n\n{{{{ x. }}}}\n");
        assert_eq!(
            kinds(&source),
            [
                ("duplicate_section", Some(13), Some(1)),
                ("template", Some(17), Some(1))
            ]
        );
        // A rule that ends a region's content also ends the erased heading's content.
        let source = format!(
            "{HEAD}# T\n\n## A\n\ntext\n\n---\n\n## A\n\n{{{{ x. }}}}\n\n## B\n\n{{{{ y. }}}}\n"
        );
        let found = kinds(&source);
        assert_eq!(
            found,
            [
                ("duplicate_section", Some(15), Some(1)),
                ("template", Some(21), Some(1))
            ]
        );
    }

    #[test]
    fn several_problems_in_one_prose_are_each_reported() {
        let source =
            format!("{HEAD}# T\n\nA {{{{ x. }}}} b {{= y =}} c {{{{ 1 }}}}\n\nd {{{{ open\n");
        assert_eq!(
            kinds(&source),
            [
                ("template", Some(9), Some(14)),
                ("template", Some(9), Some(3)),
                ("template", Some(9), Some(24)),
                ("template", Some(11), Some(3)),
            ]
        );
    }

    #[test]
    fn spans_stay_in_the_files_bytes_after_an_erased_multibyte_text() {
        let source = format!("{HEAD}# T\n\n## Café\n\n## Café\n\n{{{{ x. }}}}\n");
        let found = check("t.md", &source);
        assert_eq!(found.len(), 2);
        let span = found[1].error().span().unwrap();
        assert_eq!(&source[span], "{{ x. }}");
    }
}
