//! The language server in process, over an in-memory connection: every feature through
//! the protocol, as an editor drives it.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::time::Duration;

use promptforge_lsp::lsp_server::ErrorCode;
use promptforge_lsp::lsp_types::{Diagnostic, NumberOrString, Position};
use promptforge_lsp::{Options, Resources};
use serde_json::{Value, json};
use support::{Client, HEAD, apply_edit, at, point, position, symbol_names, uri};

fn options() -> Options {
    Options {
        debounce: Duration::from_millis(20),
        resources: Resources::Given {
            tools: promptforge_core::tools::ToolCatalog::empty(),
            models: promptforge_core::client::ModelCatalog::empty(),
        },
    }
}

fn code(diagnostic: &Diagnostic) -> String {
    match &diagnostic.code {
        Some(NumberOrString::String(code)) => code.clone(),
        other => format!("{other:?}"),
    }
}

#[test]
fn the_lifecycle_follows_the_protocol() {
    let (server, client) = promptforge_lsp::lsp_server::Connection::memory();
    let handle = std::thread::spawn(move || promptforge_lsp::serve(server, options()));
    let early = promptforge_lsp::lsp_server::Request::new(
        1.into(),
        "textDocument/hover".to_owned(),
        json!({}),
    );
    client.sender.send(early.into()).unwrap();
    let answer = client.receiver.recv_timeout(support::PATIENCE).unwrap();
    let promptforge_lsp::lsp_server::Message::Response(response) = answer else {
        panic!("{answer:?}");
    };
    assert_eq!(
        response.response_result.unwrap_err().code,
        ErrorCode::ServerNotInitialized as i32
    );
    drop(client);
    assert_eq!(handle.join().unwrap(), promptforge_lsp::Ended::Abrupt);

    let mut client = Client::start(options());
    let unknown = client.request("textDocument/nothing", json!({}));
    assert_eq!(
        unknown.response_result.unwrap_err().code,
        ErrorCode::MethodNotFound as i32
    );
    assert_eq!(client.shutdown(), Some(0));
}

#[test]
fn initialize_announces_utf16_and_incremental_sync() {
    let mut client = Client::start(options());
    let result = client.call("initialize", json!({"capabilities": {}}));
    let capabilities = &result["capabilities"];
    assert_eq!(capabilities["positionEncoding"], "utf-16");
    assert_eq!(capabilities["textDocumentSync"]["change"], 2);
    for provider in [
        "hoverProvider",
        "completionProvider",
        "definitionProvider",
        "referencesProvider",
        "renameProvider",
        "documentSymbolProvider",
        "codeActionProvider",
        "inlayHintProvider",
    ] {
        assert!(!capabilities[provider].is_null(), "{provider}");
    }
}

#[test]
fn diagnostics_are_checks_every_problem_with_utf16_positions() {
    let text = format!(
        "{HEAD}## Résumé 😀\n\nÉcrivez 😀😀 un résumé: {{{{ bad. }}}}\n\n```lua\nlocal = 1\n```\n\n## Résumé 😀\n"
    );
    let doc = uri("utf16.md");
    let mut client = Client::start(options());
    client.open(&doc, &text);
    let found = client.diagnostics(&doc, 1);
    let expected = promptforge_core::parse::check(doc.path(), &text);
    assert_eq!(expected.len(), 3, "{expected:?}");
    let kinds: Vec<String> = found.iter().map(code).collect();
    let core_kinds: Vec<&str> = expected.iter().map(|d| d.error().kind().as_str()).collect();
    assert_eq!(kinds, core_kinds);
    for (lsp, core) in found.iter().zip(&expected) {
        assert_eq!(lsp.source.as_deref(), Some("promptforge"));
        assert_eq!(lsp.message, core.error().message());
        assert_eq!(lsp.range.start.line as usize + 1, core.line().unwrap());
    }
    // The placeholder starts after two emoji: UTF-16 counts each as two units, where
    // `promptforge check`'s column counts characters.
    let template = &found[0];
    assert_eq!(template.range.start, at(&text, "{{ bad. }}", 0));
    let chars_before = "Écrivez 😀😀 un résumé: ".chars().count() as u32;
    assert_eq!(template.range.start.character, chars_before + 2);
    assert_eq!(expected[0].column(), Some(chars_before as usize + 1));
    assert_eq!(
        template.range.end,
        at(&text, "{{ bad. }}", "{{ bad. }}".len())
    );
    // The Lua error points at its own line.
    assert_eq!(found[1].range.start, at(&text, "local = 1", 0));
}

#[test]
fn diagnostics_follow_changes_and_publish_the_latest_version() {
    let doc = uri("changes.md");
    let text = format!("{HEAD}## A\n\n```lua\nreturn 1\n```\n");
    let mut client = Client::start(Options {
        debounce: Duration::from_millis(200),
        ..options()
    });
    client.open(&doc, &text);
    assert!(client.diagnostics(&doc, 1).is_empty());
    // Five quick edits: type a broken line character by character, then fix it.
    let line = position(&text, text.find("return 1").unwrap()).line;
    let edits = ["l", "o", "c", "a", "l"];
    for (k, letter) in edits.iter().enumerate() {
        client.notify(
            "textDocument/didChange",
            json!({
                "textDocument": {"uri": doc, "version": 2 + k as i32},
                "contentChanges": [{"range": {"start": {"line": line, "character": k}, "end": {"line": line, "character": k}}, "text": letter}],
            }),
        );
    }
    let broken = client.diagnostics(&doc, 6);
    assert_eq!(broken.iter().map(code).collect::<Vec<_>>(), ["lua_syntax"]);
    client.notify(
        "textDocument/didChange",
        json!({
            "textDocument": {"uri": doc, "version": 7},
            "contentChanges": [{"range": {"start": {"line": line, "character": 0}, "end": {"line": line, "character": 5}}, "text": ""}],
        }),
    );
    assert!(client.diagnostics(&doc, 7).is_empty());
    let versions: Vec<i32> = client
        .published(&doc)
        .iter()
        .filter_map(|p| p.version)
        .collect();
    assert!(versions.windows(2).all(|w| w[0] < w[1]), "{versions:?}");
    assert_eq!(versions.last(), Some(&7));
    // Closing clears them.
    client.notify(
        "textDocument/didClose",
        json!({"textDocument": {"uri": doc}}),
    );
    client.call(
        "textDocument/documentSymbol",
        json!({"textDocument": {"uri": doc}}),
    );
    let last = client.published(&doc).pop().unwrap();
    assert!(last.diagnostics.is_empty() && last.version.is_none());
}

#[test]
fn markdown_that_is_not_a_prompt_gets_no_diagnostics() {
    let doc = uri("README.md");
    let mut client = Client::start(options());
    client.open(&doc, "# A readme\n\n{{ not. a prompt }}\n");
    assert!(client.diagnostics(&doc, 1).is_empty());
}

const SECTIONS: &str = "```lua\nvar.topic = \"rust\"\njump(\"## Research\")\n```\n\n## Research\n\n```lua\nlocal notes = execute(\"### Notes\", args)\nvar[\"summary\"] = notes\njump(\"## Sumarise\")\n```\n\nResearch {{ var.topic }} and {{ var.missing }}.\n\n### Notes\n\n---\n\n- first\n- second\n\n## Summarise\n\n```lua\nlocal items = list_from_section(\"### Notes\")\nif false then jump(\"Research\") end\n```\n\nSummarise {{ var.summary }}.\n";

#[test]
fn section_references_resolve_with_visibility_and_offer_fixes() {
    let text = format!("{HEAD}{SECTIONS}");
    let doc = uri("sections.md");
    let mut client = Client::start(options());
    client.open(&doc, &text);
    let found = client.diagnostics(&doc, 1);
    let summary: Vec<(String, u32)> = found
        .iter()
        .map(|d| (code(d), d.range.start.line))
        .collect();
    let line_of = |needle: &str| at(&text, needle, 0).line;
    assert_eq!(
        summary,
        [
            ("unknown_section".to_owned(), line_of("\"## Sumarise\"")),
            ("unknown_section".to_owned(), line_of("\"### Notes\")\nif")),
            ("not_a_section_address".to_owned(), line_of("\"Research\"")),
            ("unassigned_variable".to_owned(), line_of("missing }}")),
        ]
    );
    assert_eq!(
        found[0].message,
        "no section `## Sumarise` is visible from `## Research`; visible sections: `## Summarise`, `### Notes`"
    );
    assert_eq!(found[0].source.as_deref(), Some("promptforge-lsp"));
    // Quick fix: the nearest visible section.
    let actions = client.call(
        "textDocument/codeAction",
        json!({"textDocument": {"uri": doc}, "range": found[0].range, "context": {"diagnostics": [found[0]]}}),
    );
    assert_eq!(actions.as_array().map(Vec::len), Some(1), "{actions}");
    assert_eq!(actions[0]["title"], "Change to `## Summarise`");
    let fixed = apply_edit(&text, &actions[0]["edit"], &doc);
    assert!(fixed.contains("jump(\"## Summarise\")"));
    // A bare name that spells a visible section gets its address.
    let actions = client.call(
        "textDocument/codeAction",
        json!({"textDocument": {"uri": doc}, "range": found[2].range, "context": {"diagnostics": []}}),
    );
    assert_eq!(actions[0]["title"], "Change to `## Research`");
    // A child is visible only from its parent: `### Notes` from `## Summarise` is not.
    assert!(
        found[1]
            .message
            .starts_with("no section `### Notes` is visible from `## Summarise`")
    );
}

#[test]
fn definition_references_and_rename_of_sections() {
    let text = format!("{HEAD}{SECTIONS}");
    let doc = uri("navigate.md");
    let mut client = Client::start(options());
    client.open(&doc, &text);
    // From the string to the heading.
    let target = client.call(
        "textDocument/definition",
        point(&doc, at(&text, "\"## Research\"", 4)),
    );
    assert_eq!(
        target[0]["range"]["start"],
        json!(at(&text, "## Research\n", 0))
    );
    // From the heading to every string that addresses it.
    let refs = client.call(
        "textDocument/references",
        json!({"textDocument": {"uri": doc}, "position": at(&text, "### Notes\n", 5), "context": {"includeDeclaration": true}}),
    );
    let starts: Vec<Value> = refs
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["range"]["start"].clone())
        .collect();
    assert_eq!(
        starts,
        [
            json!(at(&text, "### Notes\", args", 0)),
            json!(at(&text, "Notes\n", 0))
        ]
    );
    // Rename from a reference: the heading and every reference resolving to it change.
    let prepared = client.call(
        "textDocument/prepareRename",
        point(&doc, at(&text, "\"## Research\"", 5)),
    );
    assert_eq!(prepared["placeholder"], "Research");
    let edit = client.call(
        "textDocument/rename",
        json!({"textDocument": {"uri": doc}, "position": at(&text, "\"## Research\"", 5), "newName": "Investigate"}),
    );
    let renamed = apply_edit(&text, &edit, &doc);
    assert!(renamed.contains("jump(\"## Investigate\")"), "{renamed}");
    assert!(renamed.contains("\n## Investigate\n"), "{renamed}");
    // The bare `jump("Research")` is not a reference (it resolves to nothing).
    assert!(renamed.contains("jump(\"Research\")"));
    // A rename onto a sibling's name is refused with a reason.
    let refused = client.request(
        "textDocument/rename",
        json!({"textDocument": {"uri": doc}, "position": at(&text, "## Research\n", 4), "newName": "Summarise"}),
    );
    let error = refused.response_result.unwrap_err();
    assert!(error.message.contains("sibling"), "{error:?}");
}

#[test]
fn variables_link_lua_and_prose() {
    let text = format!("{HEAD}{SECTIONS}");
    let doc = uri("vars.md");
    let mut client = Client::start(options());
    client.open(&doc, &text);
    let target = client.call(
        "textDocument/definition",
        point(&doc, at(&text, "var.summary }}", 5)),
    );
    assert_eq!(
        target[0]["range"]["start"],
        json!(at(&text, "summary\"] = notes", 0))
    );
    let refs = client.call(
        "textDocument/references",
        json!({"textDocument": {"uri": doc}, "position": at(&text, "var.topic = ", 5), "context": {"includeDeclaration": true}}),
    );
    assert_eq!(refs.as_array().map(Vec::len), Some(2), "{refs}");
    let hover = client.call(
        "textDocument/hover",
        point(&doc, at(&text, "var.topic }}", 5)),
    );
    let value = hover["contents"]["value"].as_str().unwrap();
    let line = at(&text, "var.topic = ", 0).line + 1;
    assert!(
        value.contains(&format!("assigned on line {line}")),
        "{value}"
    );
}

#[test]
fn hover_and_completion_know_the_lua_api_and_the_frontmatter() {
    let text = "---\nname: api\ndescription: d\npromptforge: 1\nmax\n---\n\n# T\n\n## A\n\n```lua\ntools.bind(\"s\", \"search the web\")\nlocal x = store.\njump(\"\")\n```\n\nUse {{ sys.\n".to_owned();
    let doc = uri("api.md");
    let mut client = Client::start(options());
    client.open(&doc, &text);
    let hover = client.call("textDocument/hover", point(&doc, at(&text, "store.", 2)));
    assert!(
        hover["contents"]["value"]
            .as_str()
            .unwrap()
            .contains("virtual file system"),
        "{hover}"
    );
    let hover = client.call(
        "textDocument/hover",
        point(&doc, at(&text, "promptforge: 1", 3)),
    );
    assert!(
        hover["contents"]["value"]
            .as_str()
            .unwrap()
            .contains("major version 1"),
        "{hover}"
    );
    let labels = |value: &Value| -> Vec<String> {
        value
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["label"].as_str().unwrap().to_owned())
            .collect()
    };
    let members = client.call(
        "textDocument/completion",
        point(&doc, at(&text, "store.\n", 6)),
    );
    for name in [
        "read",
        "write",
        "append",
        "glob",
        "read_numbered",
        "str_replace",
        "exists",
        "delete",
    ] {
        assert!(
            labels(&members).contains(&name.to_owned()),
            "{name}: {members}"
        );
    }
    let keys = client.call(
        "textDocument/completion",
        point(&doc, at(&text, "max\n", 3)),
    );
    assert_eq!(labels(&keys), ["max_tool_iterations"]);
    let sections = client.call(
        "textDocument/completion",
        point(&doc, at(&text, "jump(\"\")", 6)),
    );
    assert!(
        labels(&sections).is_empty(),
        "only itself, no siblings: {sections}"
    );
    let sys = client.call(
        "textDocument/completion",
        point(&doc, at(&text, "sys.\n", 4)),
    );
    assert!(labels(&sys).contains(&"section_name".to_owned()), "{sys}");
    // Without picker resources, a binding hover still documents the call.
    let hover = client.call(
        "textDocument/hover",
        point(&doc, at(&text, "tools.bind", 8)),
    );
    assert!(
        hover["contents"]["value"]
            .as_str()
            .unwrap()
            .contains("tools.bind(alias"),
        "{hover}"
    );
}

#[test]
fn document_symbols_give_the_section_outline() {
    let text = format!("{HEAD}{SECTIONS}");
    let doc = uri("symbols.md");
    let mut client = Client::start(options());
    client.open(&doc, &text);
    let symbols = client.symbols(&doc);
    let names = symbol_names(&symbols);
    assert_eq!(names, ["Research", "Summarise"]);
    assert_eq!(symbols[0]["children"][0]["name"], "Notes");
    assert_eq!(
        symbols[0]["children"][0]["detail"],
        "### Notes · off the walk"
    );
}

#[test]
fn frontmatter_typos_get_a_quick_fix() {
    let text = "---\nname: x\ndescription: d\npromptforge: 1\nmax_tool_iteration: 3\n---\n\n# T\n";
    let doc = uri("frontmatter.md");
    let mut client = Client::start(options());
    client.open(&doc, text);
    let found = client.diagnostics(&doc, 1);
    assert_eq!(
        found.iter().map(code).collect::<Vec<_>>(),
        ["unknown_field"]
    );
    let actions = client.call(
        "textDocument/codeAction",
        json!({"textDocument": {"uri": doc}, "range": found[0].range, "context": {"diagnostics": found}}),
    );
    assert_eq!(actions[0]["title"], "Change to `max_tool_iterations`");
    let fixed = apply_edit(text, &actions[0]["edit"], &doc);
    assert!(
        promptforge_core::parse::check("x.md", &fixed).is_empty(),
        "{fixed}"
    );
}

#[test]
fn malformed_requests_and_documents_never_end_the_session() {
    let doc = uri("bad.md");
    let mut client = Client::start(options());
    let bad = client.request("textDocument/hover", json!({"textDocument": 5}));
    assert_eq!(
        bad.response_result.unwrap_err().code,
        ErrorCode::InvalidParams as i32
    );
    // Notifications with bad params are logged, not fatal.
    client.notify("textDocument/didOpen", json!({"nope": true}));
    client.notify(
        "textDocument/didChange",
        json!({"textDocument": {"uri": doc, "version": 9}, "contentChanges": []}),
    );
    // A document of control characters, broken fences and huge lines.
    let mut garbage = format!("{HEAD}## \u{0}\u{1}\n\n```lua\n\"unterminated\n[[ long\n");
    garbage.push_str(&"{{".repeat(10_000));
    garbage.push_str(&"é".repeat(50_000));
    client.open(&doc, &garbage);
    let found = client.diagnostics(&doc, 1);
    assert!(!found.is_empty());
    // Positions far outside the text are clamped, not fatal.
    for position in [
        Position::new(100_000, 0),
        Position::new(0, 100_000),
        Position::new(9, 3),
    ] {
        for method in [
            "textDocument/hover",
            "textDocument/completion",
            "textDocument/definition",
        ] {
            let response = client.request(method, point(&doc, position));
            assert!(
                response.response_result.is_ok(),
                "{method} {position:?}: {response:?}"
            );
        }
    }
    // An unknown document answers nothing.
    assert_eq!(
        client.call(
            "textDocument/hover",
            point(&uri("unknown.md"), Position::new(0, 0))
        ),
        Value::Null
    );
    assert_eq!(client.shutdown(), Some(0));
}

#[test]
fn a_thousand_sections_stay_responsive() {
    let mut text = HEAD.to_owned();
    for i in 0..1000 {
        text.push_str(&format!("## Section {i}\n\n```lua\nvar.v{i} = {i}\nif var.v{i} > 5 then jump(\"## Section {}\") end\n```\n\nStep {{{{ var.v{i} }}}}.\n\n", (i + 1) % 1000));
    }
    let doc = uri("big.md");
    let mut client = Client::start(options());
    client.open(&doc, &text);
    assert!(client.diagnostics(&doc, 1).is_empty());
    let refs = client.call(
        "textDocument/references",
        json!({"textDocument": {"uri": doc}, "position": at(&text, "## Section 500\n", 4), "context": {"includeDeclaration": false}}),
    );
    assert_eq!(refs.as_array().map(Vec::len), Some(1));
    let symbols = client.call(
        "textDocument/documentSymbol",
        json!({"textDocument": {"uri": doc}}),
    );
    assert_eq!(symbols.as_array().map(Vec::len), Some(1000));
}

#[test]
fn thousands_of_edits_in_one_change_apply_in_sequence_on_a_large_document() {
    // 3,000 sections of prose, about 4 MiB.
    let filler = "Prose that fills the section with words, ".repeat(36);
    let mut text = HEAD.to_owned();
    let mut headings = Vec::new();
    for k in 0..3000 {
        headings.push(text.matches('\n').count());
        text.push_str(&format!("## S{k}\n\n{filler}\n\n"));
    }
    assert!(text.len() > 4 * 1024 * 1024);
    let doc = uri("edited.md");
    let mut client = Client::start(options());
    client.open(&doc, &text);
    // Each edit adds a section before one of the originals; its position counts the two
    // lines every earlier edit added, as the protocol applies them in order.
    let changes: Vec<Value> = headings
        .iter()
        .enumerate()
        .map(|(k, line)| {
            let at = json!({"line": line + 2 * k, "character": 0});
            json!({"range": {"start": at, "end": at}, "text": format!("## N{k}\n\n")})
        })
        .collect();
    client.notify(
        "textDocument/didChange",
        json!({"textDocument": {"uri": doc, "version": 2}, "contentChanges": changes}),
    );
    let symbols = client.symbols(&doc);
    let names = symbol_names(&symbols);
    let expected: Vec<String> = (0..3000)
        .flat_map(|k| [format!("N{k}"), format!("S{k}")])
        .collect();
    assert_eq!(names, expected);
    assert!(client.diagnostics(&doc, 2).is_empty());
}

#[test]
fn a_change_past_the_document_cap_closes_the_document_with_a_reason() {
    let doc = uri("grown.md");
    let mut client = Client::start(options());
    let text = format!("{HEAD}## A\n\nText.\n");
    client.open(&doc, &text);
    assert!(client.diagnostics(&doc, 1).is_empty());
    let huge = "x".repeat(promptforge_lsp::MAX_DOCUMENT_BYTES);
    let end = position(&text, text.len());
    client.notify(
        "textDocument/didChange",
        json!({"textDocument": {"uri": doc, "version": 2}, "contentChanges": [
            {"range": {"start": end, "end": end}, "text": "fine"},
            {"range": {"start": end, "end": end}, "text": huge},
        ]}),
    );
    // The document is no longer followed: no symbols, its diagnostics cleared.
    assert_eq!(client.symbols(&doc), Value::Null);
    let told = client.notifications.iter().any(|n| {
        n.method == "window/logMessage"
            && n.params["message"].as_str().is_some_and(|m| {
                m.contains(&format!(
                    "would grow to {} bytes",
                    text.len() + 4 + huge.len()
                ))
            })
    });
    assert!(
        told,
        "{:?}",
        client
            .notifications
            .iter()
            .map(|n| &n.method)
            .collect::<Vec<_>>()
    );
    let cleared = client.published(&doc);
    assert!(
        cleared
            .last()
            .is_some_and(|p| p.diagnostics.is_empty() && p.version.is_none())
    );
}
