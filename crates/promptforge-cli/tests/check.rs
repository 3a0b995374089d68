//! `promptforge check` on valid, invalid and mixed trees.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn check_in(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_promptforge"))
        .arg("check")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("spawn promptforge")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8(bytes.to_vec()).unwrap()
}

const HEAD: &str = "---\nname: x\ndescription: d\npromptforge: 1\n---\n\n";

fn write(dir: &Path, rel: &str, body: &str) {
    let path = dir.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, body).unwrap();
}

#[test]
fn the_shipped_prompts_check_clean() {
    let output = check_in(&repo(), &["prompts"]);
    assert!(output.status.success(), "{}", text(&output.stdout));
    let stdout = text(&output.stdout);
    assert!(stdout.starts_with("checked "), "{stdout}");
    assert!(stdout.trim_end().ends_with("no problems"), "{stdout}");
    assert_eq!(text(&output.stderr), "");
}

#[test]
fn every_problem_in_a_file_is_listed_in_editor_format() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "bad.md",
        &format!("{HEAD}# T\n\n## A\n\nHello {{{{ x. }}}}\n\n```lua\nlocal = 1\n```\n\n## A\n"),
    );
    let output = check_in(dir.path(), &["bad.md"]);
    assert_eq!(output.status.code(), Some(1));
    let stdout = text(&output.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        lines,
        [
            "bad.md:11:7: error[template]: invalid placeholder `{{ x. }}`: use a dotted path of names such as `var.topic` or `item.1`",
            "bad.md:14:1: error[lua_syntax]: Lua syntax error: <name> expected near '='",
            "bad.md:17:1: error[duplicate_section]: duplicate sibling section `## A` on lines 9 and 17; sibling names must be unique",
            "checked 1 prompt: 1 with problems, 3 diagnostics",
        ]
    );
}

#[test]
fn a_mixed_tree_skips_plain_markdown_and_hidden_directories() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "good.md",
        &format!("{HEAD}# T\n\n```lua\nreturn 1\n```\n"),
    );
    write(
        dir.path(),
        "sub/deeper/broken.md",
        &format!("{HEAD}# T\n\n#### Deep\n"),
    );
    write(
        dir.path(),
        "notes/README.md",
        "# Just notes\n\nNot a prompt.\n",
    );
    write(
        dir.path(),
        ".hidden/broken.md",
        &format!("{HEAD}no title\n"),
    );
    write(dir.path(), "sub/data.txt", "not markdown");
    let output = check_in(dir.path(), &[]);
    assert_eq!(output.status.code(), Some(1));
    let stdout = text(&output.stdout);
    assert_eq!(
        stdout,
        "sub/deeper/broken.md:9:1: error[root_not_h2]: `#### Deep` is a top-level section, so it must be an H2 (`## Deep`)\n\
         checked 2 prompts: 1 with problems, 1 diagnostic\n"
    );
}

#[test]
fn a_valid_tree_exits_zero() {
    let dir = tempfile::tempdir().unwrap();
    for i in 0..3 {
        write(
            dir.path(),
            &format!("p{i}.md"),
            &format!("{HEAD}# T\n\n## S\n\nSay {{{{ args }}}}.\n"),
        );
    }
    let output = check_in(dir.path(), &["."]);
    assert!(output.status.success());
    assert_eq!(text(&output.stdout), "checked 3 prompts: no problems\n");
}

#[test]
fn named_files_are_reported_even_when_not_prompts() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "notes.md", "# Notes\n");
    let output = check_in(dir.path(), &["notes.md", "missing.md"]);
    assert_eq!(output.status.code(), Some(1));
    let stdout = text(&output.stdout);
    assert!(
        stdout.contains("notes.md:1:1: error[not_a_prompt]: not a promptforge prompt"),
        "{stdout}"
    );
    assert!(
        stdout.contains("missing.md:1:1: error[io]: cannot read it:"),
        "{stdout}"
    );
}

#[test]
fn json_output_is_one_document() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "good.md", &format!("{HEAD}# T\n"));
    write(
        dir.path(),
        "bad.md",
        "---\nname: x\ndescription: d\npromptforge: 1\ncolour: red\n---\n\n# T\n\n{{ 1x }}\n",
    );
    let output = check_in(dir.path(), &["--format", "json"]);
    assert_eq!(output.status.code(), Some(1));
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["files"], 2);
    assert_eq!(report["failed"], 1);
    let diagnostics = report["diagnostics"].as_array().unwrap();
    assert_eq!(diagnostics.len(), 2, "{report}");
    assert_eq!(diagnostics[0]["file"], "bad.md");
    assert_eq!(diagnostics[0]["kind"], "unknown_field");
    assert_eq!(diagnostics[1]["kind"], "template");
    assert_eq!(diagnostics[1]["line"], 10);
    assert_eq!(diagnostics[1]["column"], 1);
}

#[test]
fn oversized_and_non_regular_files_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let big = format!("{HEAD}# T\n{}", "x".repeat(9 * 1024 * 1024));
    write(dir.path(), "big.md", &big);
    std::fs::create_dir(dir.path().join("dir.md")).unwrap();
    let output = check_in(dir.path(), &["big.md", "/dev/null"]);
    assert_eq!(output.status.code(), Some(1));
    let stdout = text(&output.stdout);
    assert!(stdout.contains("big.md:1:1: error[io]: it is "), "{stdout}");
    assert!(
        stdout.contains("/dev/null:1:1: error[io]: it is not a regular file"),
        "{stdout}"
    );
}

#[test]
fn invalid_utf8_is_reported_with_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let mut bytes = format!("{HEAD}# T\n\nok\n").into_bytes();
    bytes.extend_from_slice(b"bad \xff byte\n");
    std::fs::write(dir.path().join("enc.md"), bytes).unwrap();
    let output = check_in(dir.path(), &["enc.md"]);
    assert_eq!(output.status.code(), Some(1));
    let stdout = text(&output.stdout);
    assert!(
        stdout.starts_with("enc.md:10:1: error[invalid_encoding]: the prompt is not UTF-8"),
        "{stdout}"
    );
}

#[test]
fn a_prompt_with_a_broken_frontmatter_is_checked_not_skipped() {
    let dir = tempfile::tempdir().unwrap();
    // No closing `---`: the version reader cannot read it, but it claims to be a prompt.
    write(
        dir.path(),
        "open.md",
        "---\nname: x\ndescription: d\npromptforge: 1\n\n# T\n",
    );
    // A plain document that merely starts with a rule is not a prompt.
    write(dir.path(), "notes.md", "---\n\nSome notes.\n");
    let output = check_in(dir.path(), &[]);
    assert_eq!(output.status.code(), Some(1));
    let stdout = text(&output.stdout);
    assert!(stdout.starts_with("open.md:1:1: error["), "{stdout}");
    assert!(!stdout.contains("notes.md"), "{stdout}");
    assert!(
        stdout.ends_with("checked 1 prompt: 1 with problems, 1 diagnostic\n"),
        "{stdout}"
    );
}

#[test]
fn bidi_and_line_separators_in_a_problem_are_escaped_in_the_text_report() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "bidi.md",
        &format!("{HEAD}# T\n\n## A\u{202e}B\u{2028}C\n\n## A\u{202e}B\u{2028}C\n"),
    );
    let output = check_in(dir.path(), &["bidi.md"]);
    assert_eq!(output.status.code(), Some(1));
    let stdout = text(&output.stdout);
    assert_eq!(
        stdout.lines().next(),
        Some(
            "bidi.md:11:1: error[duplicate_section]: duplicate sibling section `## A\\u{202e}B\\u{2028}C` on lines 9 and 11; sibling names must be unique"
        ),
        "{stdout}"
    );
    assert!(!stdout.contains(['\u{202e}', '\u{2028}']), "{stdout}");
}
