//! Parser rules, each checked against a real `.md` fixture.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

use promptforge_core::{NullObserver, ParseErrorKind, Prompt, promptforge_version};

fn fixture(name: &str) -> (String, String) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/parse")
        .join(name);
    let source = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
    (name.to_owned(), source)
}

fn parse(name: &str) -> Prompt {
    let (origin, source) = fixture(name);
    Prompt::parse_named(&origin, &source, "test", &NullObserver)
        .unwrap_or_else(|e| panic!("{name} should parse: {e}"))
}

#[track_caller]
fn reject(name: &str, kind: ParseErrorKind, line: Option<usize>, fragment: &str) {
    let (origin, source) = fixture(name);
    let error = Prompt::parse_named(&origin, &source, "test", &NullObserver)
        .expect_err("fixture must be rejected");
    assert_eq!(error.kind(), kind, "{name}: {error}");
    assert_eq!(error.line(), line, "{name}: {error}");
    let shown = error.to_string();
    assert!(
        shown.contains(fragment),
        "{name}: `{shown}` lacks `{fragment}`"
    );
    if let Some(line) = line {
        assert!(shown.starts_with(&format!("{origin}:{line}: ")), "{shown}");
    }
}

#[test]
fn h1_only_prompt_has_no_sections() {
    let prompt = parse("valid/h1_only.md");
    assert_eq!(prompt.title(), "Summarize");
    assert_eq!(prompt.sections().count(), 0);
    assert_eq!(prompt.name(), "h1_only");
}

#[test]
fn sections_nest_recursively_by_level() {
    let prompt = parse("valid/nested.md");
    let roots: Vec<_> = prompt.root_sections().map(|s| s.heading()).collect();
    assert_eq!(roots, ["## Main", "## Other"]);
    let main = prompt.root_sections().next().unwrap();
    let children: Vec<_> = prompt.children(main).map(|s| s.heading()).collect();
    assert_eq!(children, ["### Child", "### Second"]);
    let child = prompt.children(main).next().unwrap();
    let grandchildren: Vec<_> = prompt.children(child).map(|s| s.heading()).collect();
    assert_eq!(grandchildren, ["#### Grandchild"]);
    assert_eq!(child.line(), 15);
}

#[test]
fn only_exact_unindented_lua_fences_execute() {
    let prompt = parse("valid/fences.md");
    let blocks = prompt.root_sections().next().unwrap();
    assert_eq!(blocks.lua_block_count(), 2);
    // Prose before the inert fences, the inert fences themselves, then the closing prose.
    assert_eq!(blocks.prose_block_count(), 2);
}

#[test]
fn thematic_breaks_take_sections_off_the_walk_or_open_comments() {
    let prompt = parse("valid/markers.md");
    let sections: Vec<_> = prompt.root_sections().collect();
    let names: Vec<_> = sections.iter().map(|s| s.heading()).collect();
    assert_eq!(names, ["## Walked", "## Helper", "## Setext Title"]);
    // `## Walked`: the Lua after its comment rule is never compiled (it would error).
    assert!(!sections[0].is_off_walk());
    assert_eq!(sections[0].lua_block_count(), 1);
    // `## Helper`: leading marker (off walk) and a later comment hiding the list item.
    assert!(sections[1].is_off_walk());
    assert_eq!(sections[1].lua_block_count(), 1);
    assert!(sections[1].items().is_empty());
    // A text line directly followed by `---` is a setext heading, not a marker.
    assert!(!sections[2].is_off_walk());
    assert_eq!(sections[2].lua_block_count(), 1);
}

#[test]
fn list_items_are_pre_parsed_without_markers() {
    let prompt = parse("valid/lists.md");
    let topics = prompt.root_sections().next().unwrap();
    assert!(topics.is_off_walk());
    assert_eq!(
        topics.items(),
        [
            "first item",
            "second item",
            "third item",
            "fourth item",
            "fifth item",
            "sixth item\ncontinued on a second line"
        ]
    );
}

#[test]
fn shared_library_lives_in_the_h1() {
    let prompt = parse("valid/shared.md");
    assert_eq!(prompt.shared_block_count(), 1);
    reject(
        "invalid/shared_in_section.md",
        ParseErrorKind::MisplacedShared,
        Some(11),
        "belongs in the H1 region",
    );
}

#[test]
fn optional_frontmatter_fields_are_read() {
    let prompt = parse("valid/frontmatter_optional.md");
    let fm = prompt.frontmatter();
    assert_eq!(fm.version(), Some("2.3"));
    assert_eq!(fm.max_tool_iterations().get(), 1000);
    assert_eq!(fm.input().map(|d| d.path()), Some("paper.md"));
    assert_eq!(fm.output().map(|d| d.description()), Some("The report"));
    assert_eq!(fm.default_return(), Some("finished"));
    assert_eq!(fm.promptforge(), 1);
    let defaults = parse("valid/h1_only.md");
    assert_eq!(defaults.frontmatter().max_tool_iterations().get(), 24);
}

/// Issue 26 item 4: every frontmatter error carries the line and column of the value it is
/// about (`parse::check` gives the column an editor needs; the span covers the value).
#[test]
fn frontmatter_errors_point_at_the_value() {
    /// What the case is, the line it writes, the error, its (line, column), the value.
    type Case<'a> = (&'a str, &'a str, ParseErrorKind, (usize, usize), &'a str);
    let cases: &[Case<'_>] = &[
        (
            "version",
            "promptforge:   7",
            ParseErrorKind::UnsupportedVersion,
            (4, 16),
            "7",
        ),
        (
            "version text",
            "promptforge: abc",
            ParseErrorKind::InvalidField,
            (4, 14),
            "abc",
        ),
        (
            "iterations",
            "max_tool_iterations:  0",
            ParseErrorKind::InvalidField,
            (5, 23),
            "0",
        ),
        (
            "iterations high",
            "max_tool_iterations: 5000",
            ParseErrorKind::InvalidField,
            (5, 22),
            "5000",
        ),
        (
            "iterations type",
            "max_tool_iterations: many",
            ParseErrorKind::InvalidFrontmatter,
            (5, 22),
            "many",
        ),
        (
            "name",
            "name: \"\"",
            ParseErrorKind::InvalidField,
            (2, 7),
            "\"\"",
        ),
        (
            "description",
            "description: \"  \"",
            ParseErrorKind::InvalidField,
            (3, 14),
            "\"  \"",
        ),
        (
            "input path",
            "input:\n  path: ../up.md",
            ParseErrorKind::InvalidField,
            (6, 9),
            "../up.md",
        ),
        (
            "output path",
            "output:\n  description: d\n  path: a\\\\b",
            ParseErrorKind::InvalidField,
            (7, 9),
            "a\\\\b",
        ),
        (
            "unknown key",
            "tools: [search]",
            ParseErrorKind::UnknownField,
            (5, 1),
            "tools",
        ),
    ];
    for (what, line, kind, (row, column), value) in cases {
        // Each case replaces the field it is about (or adds one at line 5).
        let header = match *what {
            "name" => "name: \"\"\ndescription: d\npromptforge: 1".to_owned(),
            "description" => format!("name: x\n{line}\npromptforge: 1"),
            w if w.starts_with("version") => format!("name: x\ndescription: d\n{line}"),
            _ => format!("name: x\ndescription: d\npromptforge: 1\n{line}"),
        };
        let source = format!("---\n{header}\n---\n\n# T\n");
        let error = Prompt::parse_named("f.md", &source, "t", &NullObserver).expect_err(what);
        assert_eq!(error.kind(), *kind, "{what}: {error}");
        assert_eq!(error.line(), Some(*row), "{what}: {error}");
        let span = error
            .span()
            .unwrap_or_else(|| panic!("{what}: no span: {error}"));
        assert_eq!(&source[span], *value, "{what}: the span is not the value");
        let found = promptforge_core::parse::check("f.md", &source);
        assert_eq!(found[0].error(), &error, "{what}");
        assert_eq!(
            (found[0].line(), found[0].column()),
            (Some(*row), Some(*column)),
            "{what}: {error}"
        );
    }
}

#[test]
fn frontmatter_problems_are_named() {
    reject(
        "invalid/no_frontmatter.md",
        ParseErrorKind::MissingFrontmatter,
        Some(1),
        "frontmatter",
    );
    reject(
        "invalid/unterminated_frontmatter.md",
        ParseErrorKind::MissingFrontmatter,
        Some(1),
        "frontmatter",
    );
    reject(
        "invalid/unknown_field.md",
        ParseErrorKind::UnknownField,
        Some(5),
        "tools",
    );
    reject(
        "invalid/missing_description.md",
        ParseErrorKind::MissingField,
        Some(1),
        "`description`",
    );
    // Issue 26 item 4: the `promptforge:` line, not the first YAML line; the out-of-range
    // value's own line, not none.
    reject(
        "invalid/unsupported_version.md",
        ParseErrorKind::UnsupportedVersion,
        Some(4),
        "supports only major version 1",
    );
    reject(
        "invalid/iterations_too_high.md",
        ParseErrorKind::InvalidField,
        Some(5),
        "between 1 and 1000",
    );
    reject(
        "invalid/iterations_zero.md",
        ParseErrorKind::InvalidField,
        Some(5),
        "max_tool_iterations",
    );
    reject(
        "invalid/input_bad_path.md",
        ParseErrorKind::InvalidField,
        Some(6),
        "input.path",
    );
    reject(
        "invalid/bad_yaml.md",
        ParseErrorKind::InvalidFrontmatter,
        Some(5),
        "frontmatter",
    );
}

#[test]
fn structural_problems_name_their_location() {
    reject(
        "invalid/no_title.md",
        ParseErrorKind::MissingTitle,
        Some(7),
        "H1",
    );
    reject(
        "invalid/two_titles.md",
        ParseErrorKind::MultipleTitles,
        Some(11),
        "line 7",
    );
    reject(
        "invalid/content_before_title.md",
        ParseErrorKind::ContentBeforeTitle,
        Some(7),
        "before",
    );
    reject(
        "invalid/root_not_h2.md",
        ParseErrorKind::RootNotH2,
        Some(9),
        "must be an H2",
    );
    reject(
        "invalid/orphan.md",
        ParseErrorKind::OrphanHeading,
        Some(11),
        "`### Orphan`",
    );
    reject(
        "invalid/duplicate_section.md",
        ParseErrorKind::DuplicateSection,
        Some(13),
        "lines 9 and 13",
    );
    reject(
        "invalid/duplicate_child.md",
        ParseErrorKind::DuplicateSection,
        Some(13),
        "lines 11 and 13",
    );
}

#[test]
fn lua_syntax_errors_carry_absolute_file_lines() {
    reject(
        "invalid/lua_syntax.md",
        ParseErrorKind::LuaSyntax,
        Some(15),
        "Lua syntax error",
    );
}

#[test]
fn malformed_placeholders_are_parse_errors() {
    reject(
        "invalid/unclosed_placeholder.md",
        ParseErrorKind::Template,
        Some(11),
        "unclosed",
    );
    reject(
        "invalid/bad_placeholder.md",
        ParseErrorKind::Template,
        Some(11),
        "{{ a b }}",
    );
}

#[test]
fn errors_carry_byte_spans() {
    let (origin, source) = fixture("invalid/orphan.md");
    let error = Prompt::parse_named(&origin, &source, "t", &NullObserver).unwrap_err();
    let span = error.span().expect("span");
    assert_eq!(&source[span], "#### Orphan\n");
}

#[test]
fn version_detection_needs_only_the_frontmatter_key() {
    assert_eq!(promptforge_version(&fixture("valid/h1_only.md").1), Some(1));
    assert_eq!(
        promptforge_version(&fixture("invalid/unsupported_version.md").1),
        Some(2)
    );
    assert_eq!(promptforge_version("---\nname: x\n---\n# X\n"), None);
    assert_eq!(
        promptforge_version("# no frontmatter\npromptforge: 1\n"),
        None
    );
    assert_eq!(
        promptforge_version("---\npromptforge: \"1.2\"\n---\n"),
        Some(1)
    );
    assert_eq!(promptforge_version("---\npromptforge: one\n---\n"), None);
}

#[test]
fn every_prompt_in_the_repository_parses() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../prompts");
    let mut count = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "md") {
            let source = std::fs::read_to_string(&path).unwrap();
            Prompt::parse_named(&path.display().to_string(), &source, "t", &NullObserver)
                .unwrap_or_else(|e| panic!("{e}"));
            count += 1;
        }
    }
    assert!(count >= 3);
}
