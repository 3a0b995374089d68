//! Regression tests for issue #12 (parsing): linear time on adversarial shapes, frontmatter
//! messages in the prompt author's terms, source size and encoding checks, and a bounded
//! proptest fuzz target over prompt parsing.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::mpsc;
use std::time::Duration;

use promptforge_core::{NullObserver, ParseError, ParseErrorKind, Prompt};
use proptest::prelude::*;

const HEADER: &str = "---\nname: t\ndescription: t\npromptforge: 1\n---\n\n# T\n\n";

/// Parses on its own thread; a parse that takes longer than `limit` fails the test (the
/// quadratic versions took minutes on these inputs; the linear ones take well under one).
fn parse_within(source: String, limit: Duration) -> Result<Prompt, ParseError> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(Prompt::parse_named(
            "big.md",
            &source,
            "test",
            &NullObserver,
        ));
    });
    rx.recv_timeout(limit)
        .unwrap_or_else(|_| panic!("parsing did not finish within {limit:?}"))
}

#[test]
fn many_sibling_headings_parse_in_linear_time() {
    let mut source = HEADER.to_owned();
    for i in 0..200_000 {
        source.push_str(&format!("## S{i}\n"));
    }
    let prompt = parse_within(source, Duration::from_secs(60)).unwrap();
    assert_eq!(prompt.root_sections().count(), 200_000);
    // The duplicate check still works at that size.
    let mut source = HEADER.to_owned();
    for i in 0..100_000 {
        source.push_str(&format!("## S{i}\n"));
    }
    source.push_str("## S5\n");
    let error = parse_within(source, Duration::from_secs(60)).unwrap_err();
    assert_eq!(error.kind(), ParseErrorKind::DuplicateSection);
}

#[test]
fn many_placeholders_parse_in_linear_time() {
    let mut source = format!("{HEADER}## A\n\n");
    for _ in 0..200_000 {
        source.push_str("{{ args }}\n");
    }
    source.push_str("{{ bad path }}\n");
    let error = parse_within(source, Duration::from_secs(60)).unwrap_err();
    assert_eq!(error.kind(), ParseErrorKind::Template);
    assert_eq!(error.line(), Some(11 + 200_000));
}

fn frontmatter_error(yaml: &str) -> ParseError {
    let source = format!("---\n{yaml}---\n\n# T\n");
    Prompt::parse_named("fm.md", &source, "test", &NullObserver).unwrap_err()
}

#[test]
fn frontmatter_messages_speak_the_authors_language() {
    // A tab: one line number, the file's.
    let error = frontmatter_error("name: t\ndescription: t\npromptforge: 1\nversion:\n\t- x\n");
    let text = error.to_string();
    assert!(text.starts_with("fm.md:"), "{text}");
    assert!(!text.contains(" line "), "{text}");
    assert!(text.to_lowercase().contains("tab"), "{text}");
    // Duplicate keys: no YAML library option.
    let error = frontmatter_error("name: a\nname: b\ndescription: t\npromptforge: 1\n");
    let text = error.to_string();
    assert!(
        text.contains("`name`") && text.contains("more than once"),
        "{text}"
    );
    assert!(
        !text.to_lowercase().contains("policy") && !text.contains("option"),
        "{text}"
    );
    assert_eq!(error.line(), Some(3));
    // An alias bomb: no internal type names.
    let mut bomb = String::from(
        "name: t\ndescription: t\npromptforge: 1\nversion:\n  a: &a [x,x,x,x,x,x,x,x,x,x]\n",
    );
    for level in 1..9 {
        let prev = (b'a' + level - 1) as char;
        let name = (b'a' + level) as char;
        bomb.push_str(&format!("  {name}: &{name} [*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev}]\n"));
    }
    let error = frontmatter_error(&bomb);
    let text = error.to_string();
    assert!(
        !text.contains("Nodes {") && !text.contains("nodes:"),
        "{text}"
    );
    assert!(text.contains("aliases"), "{text}");
    // Other library messages lose their own `line N column M`.
    let error = frontmatter_error("name: t\ndescription: t\npromptforge: 1\ncolour: red\n");
    assert_eq!(
        error.to_string(),
        "fm.md:5: frontmatter: unknown field `colour`, expected one of name, description, promptforge, version, max_tool_iterations, input, output, default_return"
    );
    // A huge version number is an unsupported version, not a missing one.
    let error =
        frontmatter_error("name: t\ndescription: t\npromptforge: 99999999999999999999999\n");
    assert_eq!(error.kind(), ParseErrorKind::UnsupportedVersion, "{error}");
    assert!(
        error.to_string().contains("99999999999999999999999"),
        "{error}"
    );
    // A missing closing `---` says so.
    let source = "---\nname: t\ndescription: t\npromptforge: 1\n\n# T\n";
    let error = Prompt::parse_named("fm.md", source, "test", &NullObserver).unwrap_err();
    assert_eq!(error.kind(), ParseErrorKind::MissingFrontmatter);
    assert!(error.to_string().contains("no closing `---`"), "{error}");
}

#[test]
fn oversized_sources_are_refused() {
    let mut source = HEADER.to_owned();
    source.push_str(&"x".repeat(promptforge_core::parse::MAX_PROMPT_BYTES));
    let error = Prompt::parse_named("huge.md", &source, "test", &NullObserver).unwrap_err();
    assert_eq!(error.kind(), ParseErrorKind::TooLarge);
    assert!(error.to_string().contains("MiB"), "{error}");
}

#[test]
fn prompt_bytes_must_be_utf8_and_the_error_names_the_offset() {
    let mut bytes = HEADER.as_bytes().to_vec();
    bytes.extend_from_slice(b"## A\n\nok \xff bad\n");
    let error = promptforge_core::parse::source_from_bytes("bin.md", bytes).unwrap_err();
    assert_eq!(error.kind(), ParseErrorKind::InvalidEncoding);
    let offset = HEADER.len() + 9;
    assert!(
        error.to_string().contains(&format!("byte offset {offset}")),
        "{error}"
    );
    assert_eq!(error.line(), Some(11));
    assert_eq!(
        promptforge_core::parse::source_from_bytes("ok.md", HEADER.as_bytes().to_vec()).unwrap(),
        HEADER
    );
}

// A bounded fuzz target: arbitrary prompt-shaped text never panics and parses quickly.
fn fragment() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("## A\n".to_owned()),
        Just("### B\n".to_owned()),
        Just("# T2\n".to_owned()),
        Just("```lua\nreturn args\n```\n".to_owned()),
        Just("```lua shared\nx = 1\n```\n".to_owned()),
        Just("```lua\nlocal = \n```\n".to_owned()),
        Just("---\n".to_owned()),
        Just("- item\n".to_owned()),
        Just("{{ args }} {{ var.a.1 }}\n".to_owned()),
        Just("\\{{ literal }}\n".to_owned()),
        Just("{{ unclosed\n".to_owned()),
        Just("\r\n".to_owned()),
        "[ -~\n\t#`{}\\-]{0,40}",
        any::<String>().prop_map(|s| s.chars().take(20).collect()),
    ]
}

fn frontmatter() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(HEADER.to_owned()),
        Just("---\nname: t\n".to_owned()),
        Just("---\npromptforge: 2\nname: n\ndescription: d\n---\n".to_owned()),
        Just("---\n\tname: t\n---\n".to_owned()),
        Just("---\na: &a [1]\nb: [*a, *a]\n---\n".to_owned()),
        "---\n[ -~\n]{0,60}\n---\n",
        Just(String::new()),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn parsing_arbitrary_prompts_never_panics(
        head in frontmatter(),
        body in proptest::collection::vec(fragment(), 0..24),
    ) {
        let source = format!("{head}{}", body.concat());
        match Prompt::parse_named("fuzz.md", &source, "fuzz", &NullObserver) {
            Ok(prompt) => {
                prop_assert!(prompt.sections().count() <= source.len());
            }
            Err(error) => {
                let text = error.to_string();
                prop_assert!(!text.is_empty());
                prop_assert!(text.len() < 4096, "{}", text.len());
                if let Some(span) = error.span() {
                    prop_assert!(span.end <= source.len() + 1, "{span:?}");
                }
            }
        }
    }
}
