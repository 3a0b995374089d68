//! The `promptforge` binary, spawned as users run it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn promptforge(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_promptforge"));
    command
        .args(args)
        .current_dir(repo())
        .env_remove("PROMPTFORGE_GATEWAY_URL")
        .env_remove("PROMPTFORGE_GATEWAY_API_KEY");
    for (key, value) in env {
        command.env(key, value);
    }
    command.output().expect("spawn promptforge")
}

fn stdout(output: &Output) -> String {
    String::from_utf8(output.stdout.clone()).unwrap()
}

fn stderr(output: &Output) -> String {
    String::from_utf8(output.stderr.clone()).unwrap()
}

fn write_prompt(dir: &Path, name: &str, body: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, body).unwrap();
    path.display().to_string()
}

#[test]
fn echo_prints_exactly_the_input() {
    let output = promptforge(&["run", "prompts/echo.md", "hello world"], &[]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(stdout(&output), "hello world");
    assert_eq!(stderr(&output), "");
}

#[test]
fn missing_input_is_the_empty_string() {
    let output = promptforge(&["run", "prompts/echo.md"], &[]);
    assert!(output.status.success());
    assert_eq!(stdout(&output), "");
}

#[test]
fn files_without_a_version_are_refused_before_parsing() {
    let dir = tempfile::tempdir().unwrap();
    let file = write_prompt(
        dir.path(),
        "plain.md",
        "---\nname: x\n---\n\n# Not a prompt\n",
    );
    let output = promptforge(&["run", &file], &[]);
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(stdout(&output), "");
    assert_eq!(
        stderr(&output),
        format!(
            "error: {file} is not a promptforge prompt: its frontmatter declares no `promptforge:` version\n"
        )
    );
}

#[test]
fn parse_errors_name_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let file = write_prompt(
        dir.path(),
        "broken.md",
        "---\nname: b\ndescription: d\npromptforge: 1\n---\n\n# B\n\n## A\n\n```lua\nlocal = 1\n```\n",
    );
    let output = promptforge(&["run", &file], &[]);
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(stdout(&output), "");
    assert!(
        stderr(&output).starts_with(&format!("error: {file}:12: Lua syntax error")),
        "{}",
        stderr(&output)
    );
}

#[test]
fn run_errors_go_to_stderr_with_an_empty_stdout() {
    let dir = tempfile::tempdir().unwrap();
    let file = write_prompt(
        dir.path(),
        "fails.md",
        "---\nname: f\ndescription: d\npromptforge: 1\n---\n\n# F\n\n## Main\n\n```lua\nerror(\"bad input: \" .. args)\n```\n",
    );
    let output = promptforge(&["run", &file, "xyz"], &[]);
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(stdout(&output), "");
    assert_eq!(
        stderr(&output),
        format!("error: in section '## Main': {file}:12: bad input: xyz\n")
    );
}

#[test]
fn the_result_stays_byte_exact_while_stderr_escapes_bidi_and_line_separators() {
    // A run's text (here its input; a model reply takes the same paths) holding a
    // right-to-left override, a line separator, NEL and CR.
    let forged = "x\u{202e}gnp.exe\u{2028}[dev-1] run ok\u{85}\rend";
    // The result on stdout is data: byte for byte what the prompt returned.
    let output = promptforge(&["run", "prompts/echo.md", forged], &[]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(stdout(&output), forged);
    // An error quoting it is a console line on stderr: escaped, as `check` escapes.
    let dir = tempfile::tempdir().unwrap();
    let file = write_prompt(
        dir.path(),
        "fails.md",
        "---\nname: f\ndescription: d\npromptforge: 1\n---\n\n# F\n\n## Main\n\n```lua\nerror(\"bad input: \" .. args)\n```\n",
    );
    let output = promptforge(&["run", &file, forged], &[]);
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(stdout(&output), "");
    assert_eq!(
        stderr(&output),
        format!(
            "error: in section '## Main': {file}:12: bad input: x\\u{{202e}}gnp.exe\\u{{2028}}[dev-1] run ok\\u{{85}}\\rend\n"
        )
    );
}

#[test]
fn prose_without_a_model_is_a_clear_error() {
    let output = promptforge(&["run", "prompts/hello.md"], &[]);
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(stdout(&output), "");
    assert!(
        stderr(&output).starts_with("error: "),
        "{}",
        stderr(&output)
    );
}

#[test]
fn a_key_without_a_url_is_rejected_with_the_guides_text() {
    let output = promptforge(
        &["run", "prompts/echo.md", "x"],
        &[("PROMPTFORGE_GATEWAY_API_KEY", "k")],
    );
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(stdout(&output), "");
    assert_eq!(
        stderr(&output),
        "error: PROMPTFORGE_GATEWAY_API_KEY is set but PROMPTFORGE_GATEWAY_URL is missing or empty; both are required to reach the gateway\n"
    );
}

#[test]
fn a_url_without_a_key_is_rejected_the_same_way() {
    let output = promptforge(
        &["run", "prompts/echo.md", "x"],
        &[("PROMPTFORGE_GATEWAY_URL", "http://127.0.0.1:9")],
    );
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains(
        "PROMPTFORGE_GATEWAY_URL is set but PROMPTFORGE_GATEWAY_API_KEY is missing or empty"
    ));
}

#[test]
fn empty_values_count_as_unset() {
    let output = promptforge(
        &["run", "prompts/echo.md", "local"],
        &[
            ("PROMPTFORGE_GATEWAY_URL", ""),
            ("PROMPTFORGE_GATEWAY_API_KEY", ""),
        ],
    );
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(stdout(&output), "local");
}

#[test]
fn unreadable_files_and_bad_usage_are_usage_errors() {
    let output = promptforge(&["run", "prompts/does-not-exist.md"], &[]);
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).starts_with("error: cannot read prompts/does-not-exist.md"));
    let output = promptforge(&["frobnicate"], &[]);
    assert_eq!(output.status.code(), Some(2));
    let output = promptforge(&["--help"], &[]);
    assert!(output.status.success());
    assert!(stdout(&output).contains("run"));
}

#[test]
fn fixtures_run_through_the_cli() {
    let fixtures = repo().join("crates/promptforge-core/tests/fixtures/run");
    for (name, input, expected) in [
        ("walk_fallthrough.md", "", "HAC"),
        ("fanout_list.md", "", "[rust] / [lua] / [markdown]"),
        (
            "execute.md",
            "",
            "helper got input text and var changed by the chain | c1+c3 | true | outer | caller reply",
        ),
        ("default_return.md", "", "finished"),
    ] {
        let path = fixtures.join(name).display().to_string();
        let output = promptforge(&["run", &path, input], &[]);
        assert!(output.status.success(), "{name}: {}", stderr(&output));
        assert_eq!(stdout(&output), expected, "{name}");
    }
}
