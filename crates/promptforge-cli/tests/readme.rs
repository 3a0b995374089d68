//! The READMEs stay true: every prompt they show is a real file that parses, and the
//! model-free commands of the root README's install section run as written.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

fn readmes() -> Vec<PathBuf> {
    let root = repo();
    let mut found = vec![root.join("README.md")];
    for entry in std::fs::read_dir(root.join("crates")).unwrap() {
        let readme = entry.unwrap().path().join("README.md");
        if readme.exists() {
            found.push(readme);
        }
    }
    found
}

/// `(marker line, block text)` for every ```` ````markdown ```` block in `text`.
fn markdown_blocks(text: &str) -> Vec<(Option<String>, String)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut blocks = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        if lines[i].trim_end() == "````markdown" {
            let marker = i
                .checked_sub(1)
                .map(|m| lines[m].trim())
                .and_then(|m| m.strip_prefix("<!-- prompt: "))
                .and_then(|m| m.strip_suffix(" -->"))
                .map(str::to_owned);
            let mut body = String::new();
            i += 1;
            while i < lines.len() && lines[i].trim_end() != "````" {
                body.push_str(lines[i]);
                body.push('\n');
                i += 1;
            }
            blocks.push((marker, body));
        }
        i += 1;
    }
    blocks
}

fn promptforge(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_promptforge"))
        .args(args)
        .current_dir(repo())
        .env_remove("PROMPTFORGE_GATEWAY_URL")
        .env_remove("PROMPTFORGE_GATEWAY_API_KEY")
        .output()
        .unwrap()
}

#[test]
fn every_prompt_a_readme_shows_is_a_real_file_that_checks_clean() {
    let mut shown = 0;
    for readme in readmes() {
        let text = std::fs::read_to_string(&readme).unwrap();
        for (marker, body) in markdown_blocks(&text) {
            if !body.contains("promptforge:") {
                continue;
            }
            let marker = marker.unwrap_or_else(|| {
                panic!(
                    "{}: a prompt block needs a `<!-- prompt: prompts/NAME.md -->` line above it",
                    readme.display()
                )
            });
            let file = std::fs::read_to_string(repo().join(&marker))
                .unwrap_or_else(|e| panic!("{}: {marker}: {e}", readme.display()));
            assert_eq!(
                body,
                file,
                "{} shows {marker} differently",
                readme.display()
            );
            let output = promptforge(&["check", &marker]);
            assert!(
                output.status.success(),
                "{marker}: {}",
                String::from_utf8_lossy(&output.stdout)
            );
            shown += 1;
        }
    }
    assert!(shown >= 1, "the root README shows at least one prompt");
}

#[test]
fn the_route_example_runs_without_a_model_when_there_is_nothing_to_do() {
    let output = promptforge(&["run", "prompts/route.md"]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(output.stdout, b"nothing to do");
}

/// The shell lines of the root README's `## Install` section that call `promptforge`.
fn install_commands() -> Vec<String> {
    let text = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let section = text
        .split("\n## Install\n")
        .nth(1)
        .expect("the root README has an `## Install` section");
    let section = section.split("\n## ").next().unwrap();
    let mut commands = Vec::new();
    let mut in_sh = false;
    for line in section.lines() {
        match line.trim_end() {
            "```sh" => in_sh = true,
            "```" => in_sh = false,
            command if in_sh && command.starts_with("promptforge ") => {
                commands.push(command.to_owned());
            }
            _ => {}
        }
    }
    commands
}

#[test]
fn the_install_sections_commands_run_as_written() {
    let commands = install_commands();
    assert!(commands.len() >= 2, "{commands:?}");
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_promptforge"))
        .parent()
        .unwrap();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    for command in commands {
        let output = Command::new("sh")
            .args(["-c", &command])
            .current_dir(repo())
            .env("PATH", &path)
            .env_remove("PROMPTFORGE_GATEWAY_URL")
            .env_remove("PROMPTFORGE_GATEWAY_API_KEY")
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "`{command}` failed: {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        if let Some(expected) = command.split("# prints ").nth(1) {
            assert_eq!(String::from_utf8_lossy(&output.stdout), expected.trim());
        }
    }
}

#[test]
fn the_install_script_installs_every_binary_crate() {
    let script = std::fs::read_to_string(repo().join("scripts/install.sh")).unwrap();
    for entry in std::fs::read_dir(repo().join("crates")).unwrap() {
        let dir = entry.unwrap().path();
        let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap_or_default();
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        let ships_a_binary = manifest.contains("[[bin]]") || dir.join("src/main.rs").exists();
        let unpublished = name.ends_with("-tests");
        if ships_a_binary && !unpublished {
            assert!(
                script.contains(&name),
                "scripts/install.sh does not install {name}"
            );
        }
    }
}
