//! A real editor as the client: Debian's Neovim (0.7.2) starts the built server, opens a
//! prompt with problems, and reports what it received: the diagnostics, where
//! go-to-definition took the cursor, hover texts (an API call, and what a binding binds to),
//! completion, references, the outline, and the buffer after a quick fix and a rename.
//! `scripts/test.sh` installs `neovim`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

const PROMPT: &str = "---
name: neovim
description: the prompt Neovim opens
promptforge: 1
---

# Neovim

```lua
tools.bind(\"fetch\", \"fetch a web page and read its text\")
```

## Research

```lua
local notes = store.read(\"notes.md\")
if notes == \"\" then jump(\"## Summarise\") end
jump(\"## Sumarise\")
```

Résumé {{ bad. }} of the notes.

## Summarise

```lua
local = 1
```
";

#[test]
fn neovim_shows_diagnostics_jumps_hovers_fixes_and_renames() {
    let nvim = which("nvim").unwrap_or_else(|| {
        panic!("Neovim is not installed: `apt-get install -y neovim` (scripts/test.sh does it)")
    });
    let dir = tempfile::tempdir().unwrap();
    let prompt = dir.path().join("prompt.md");
    std::fs::write(&prompt, PROMPT).unwrap();
    let out = dir.path().join("results.json");
    let init = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/neovim/test-init.lua");
    let mut child = Command::new(nvim)
        .args(["--headless", "-n", "-i", "NONE", "-u"])
        .arg(&init)
        .env("PF_LSP", env!("CARGO_BIN_EXE_promptforge-lsp"))
        .env("PF_PROMPT", &prompt)
        .env("PF_OUT", &out)
        .env_remove("PROMPTFORGE_GATEWAY_URL")
        .env_remove("PROMPTFORGE_GATEWAY_API_KEY")
        .env("XDG_CONFIG_HOME", dir.path().join("config"))
        .env("XDG_DATA_HOME", dir.path().join("data"))
        .env("XDG_STATE_HOME", dir.path().join("state"))
        .env("XDG_CACHE_HOME", dir.path().join("cache"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(240);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("Neovim did not finish within 240 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let results: Value = serde_json::from_str(
        &std::fs::read_to_string(&out)
            .unwrap_or_else(|e| panic!("Neovim wrote no results ({e}); exit status {status}")),
    )
    .unwrap();
    assert_eq!(results["ok"], true, "{results:#}");

    // The diagnostics Neovim holds: check's two and the unknown section.
    let mut diagnostics: Vec<(u64, u64, String, String)> = results["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d["lnum"].as_u64().unwrap(),
                d["col"].as_u64().unwrap(),
                d["code"].as_str().unwrap_or_default().to_owned(),
                d["message"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    diagnostics.sort();
    let line_of = |needle: &str| PROMPT.lines().position(|l| l.contains(needle)).unwrap() as u64;
    let byte_col = |needle: &str| {
        let line = PROMPT.lines().find(|l| l.contains(needle)).unwrap();
        line.find(needle).unwrap() as u64
    };
    let summary: Vec<(u64, u64, &str)> = diagnostics
        .iter()
        .map(|(l, c, k, _)| (*l, *c, k.as_str()))
        .collect();
    // Neovim columns are bytes: `Résumé ` is 9 bytes and 7 UTF-16 units; the server said 7.
    assert_eq!(
        summary,
        [
            (
                line_of("jump(\"## Sumarise\")"),
                byte_col("\"## Sumarise\""),
                "unknown_section"
            ),
            (line_of("{{ bad. }}"), byte_col("{{ bad. }}"), "template"),
            (line_of("local = 1"), 0, "lua_syntax"),
        ],
        "{diagnostics:#?}"
    );
    assert!(
        diagnostics[0]
            .3
            .contains("visible sections: `## Summarise`"),
        "{}",
        diagnostics[0].3
    );

    // Go-to-definition moved the cursor to the heading.
    let heading = PROMPT.lines().position(|l| l == "## Summarise").unwrap() as u64;
    assert_eq!(results["definition"][0], heading + 1);
    assert_eq!(results["definition_line"], "## Summarise");
    // The hover documents the Lua API.
    let hover = results["hover"].as_str().unwrap_or_default();
    assert!(
        hover.contains("store.read(path: string") && hover.contains("Reads a store file"),
        "{hover}"
    );
    // The binding hover says what the run would bind (no gateway: `web_fetch` is the tool).
    let binding = results["binding_hover"].as_str().unwrap_or_default();
    assert!(
        binding.contains("tools.bind(alias") && binding.contains("Binds `web_fetch`"),
        "{binding}"
    );
    // Completion in `jump("…")` from `## Research`: its visible sections.
    assert_eq!(results["completion"], serde_json::json!(["## Summarise"]));
    // References of `## Summarise`: the heading and the one string that resolves to it
    // (the misspelt one does not).
    let jump_line = line_of("if notes ==") + 1;
    assert_eq!(
        results["references"],
        serde_json::json!([jump_line, heading + 1])
    );
    // The outline.
    let symbols: Vec<&str> = results["symbols"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap())
        .collect();
    assert!(
        symbols.len() == 2 && symbols[0].contains("Research") && symbols[1].contains("Summarise"),
        "{symbols:?}"
    );
    // The quick fix and the rename were applied to the buffer.
    let text = results["text"].as_str().unwrap();
    assert!(
        text.contains("jump(\"## Synthesis\") end\njump(\"## Synthesis\")"),
        "{text}"
    );
    assert!(text.contains("\n## Synthesis\n"), "{text}");
    assert_eq!(
        results["steps"].as_array().unwrap().len(),
        11,
        "{results:#}"
    );
}

fn which(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|dir| PathBuf::from(dir).join(name))
        .find(|path| path.is_file())
}
