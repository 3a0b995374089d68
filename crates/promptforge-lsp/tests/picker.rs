//! What a need binds to: inlay hints and binding hovers, answered by the picker thread with
//! core's own resolution, compared with what real runs over the same resources do.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::sync::Arc;
use std::time::Duration;

use promptforge_core::client::{GatewayClient, ModelCatalog, ModelDescriptor, Thinking};
use promptforge_core::tools::{Tool, ToolCatalog, WebSearch};
use promptforge_core::{NullObserver, Prompt, ResolutionContext, RunConfig, StoreRef};
use promptforge_lsp::lsp_types::Position;
use promptforge_lsp::{Options, Resources};
use promptforge_tool_picker::{Config, LazyPicker};
use promptforge_webfetch::WebFetch;
use serde_json::{Value, json};
use support::{Client, HEAD, at, point, uri};

fn catalogs() -> (ToolCatalog, ModelCatalog) {
    let search: Arc<dyn Tool> = Arc::new(WebSearch::new(GatewayClient::disabled()));
    let fetch: Arc<dyn Tool> = Arc::new(WebFetch::new());
    let tools = ToolCatalog::new(&[search, fetch]).unwrap();
    let models = ModelCatalog::new(vec![
        ModelDescriptor::new(
            "coder-7b",
            "A coding model: writes, explains and reviews source code",
        )
        .with_context(32_768),
        ModelDescriptor::new(
            "storyteller-70b",
            "A creative writing model for stories, essays and poems",
        )
        .with_context(131_072)
        .with_thinking(Thinking::Switchable),
    ]);
    (tools, models)
}

/// One binding per line, each line a separate run below.
const BINDINGS: [&str; 8] = [
    "tools.bind(\"search\", \"search the web for current information\")",
    "tools.bind(\"fetch\", \"fetch a web page and read its text\")",
    "tools.bind(\"cake\", \"bake a chocolate cake with frosting\")",
    "models.bind(\"coder\", \"a model that writes source code\")",
    "models.default(\"writer\", \"a creative writing model for stories\", { thinking = true })",
    "models.bind(\"huge\", \"a model that writes source code\", { context = 10000000 })",
    "models.bind(\"odd\", \"a model that writes source code\", { colour = 1 })",
    "models.bind(\"later\", \"a model\", opts)",
];

/// What a real run says about one binding: the bound name, or the run's error message.
fn run_binding(line: &str) -> Result<String, String> {
    let (tools, models) = catalogs();
    let handle = if line.starts_with("tools") {
        "wire_name"
    } else {
        "model_id"
    };
    let source = format!(
        "{HEAD}```lua\nlocal opts = {{}}\nlocal bound = {line}\nreturn bound.{handle}\n```\n"
    );
    let prompt = Prompt::parse(&source, "binding", &NullObserver).unwrap();
    let picker = LazyPicker::new(tools.picker_catalog(), Config::default());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime
        .block_on(promptforge_core::run(
            &prompt,
            "",
            ResolutionContext::lazy(&picker, &models, &tools),
            &StoreRef::memory(),
            RunConfig::new("binding").client(GatewayClient::disabled()),
        ))
        .map_err(|e| e.message().to_owned())
}

#[test]
fn inlay_hints_show_what_each_binding_binds_as_a_run_would() {
    let (tools, models) = catalogs();
    let body: String = BINDINGS.iter().map(|b| format!("{b}\n")).collect();
    let text = format!(
        "{HEAD}```lua\nlocal opts = {{}}\n{body}tools.always(\"fetch\")\nmodels.default(\"nobody\")\n```\n"
    );
    let doc = uri("bindings.md");
    let mut client = Client::start(Options {
        debounce: Duration::from_millis(20),
        resources: Resources::Given { tools, models },
    });
    client.open(&doc, &text);
    let hints = client.call(
        "textDocument/inlayHint",
        json!({"textDocument": {"uri": doc}, "range": {"start": {"line": 0, "character": 0}, "end": {"line": 200, "character": 0}}}),
    );
    let hints = hints.as_array().unwrap();
    assert_eq!(hints.len(), BINDINGS.len() + 2, "{hints:?}");
    let labels: Vec<&str> = hints.iter().map(|h| h["label"].as_str().unwrap()).collect();
    let tooltip = |k: usize| {
        hints[k]["tooltip"]["value"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };
    for (k, line) in BINDINGS.iter().enumerate() {
        // The hint sits right after the call.
        let end = at(&text, line, line.len());
        let position: Position = serde_json::from_value(hints[k]["position"].clone()).unwrap();
        assert_eq!(position, end, "{line}");
        if k == BINDINGS.len() - 1 {
            // The opts are a variable: only the run knows.
            assert_eq!(labels[k], "→ decided at run time");
            continue;
        }
        match run_binding(line) {
            Ok(name) => {
                assert!(
                    labels[k].starts_with(&format!("→ {name} (")),
                    "{line}: hint {} but the run bound {name}",
                    labels[k]
                );
            }
            Err(message) => {
                // The run's message carries where the call was (`prompt:11: `); the hint
                // stands at the call.
                let message = message
                    .strip_prefix("prompt:")
                    .and_then(|rest| rest.split_once(": "))
                    .map_or(message.as_str(), |(_, rest)| rest);
                assert!(
                    tooltip(k).contains(message),
                    "{line}: the run failed with {message:?}, the hint says {:?}",
                    tooltip(k)
                );
            }
        }
    }
    // What the declarations above resolve to, as the runs confirmed.
    assert!(labels[0].starts_with("→ web_search ("), "{labels:?}");
    assert!(labels[1].starts_with("→ web_fetch ("), "{labels:?}");
    assert_eq!(labels[2], "→ no match");
    assert!(labels[3].starts_with("→ coder-7b ("), "{labels:?}");
    assert!(labels[4].starts_with("→ storyteller-70b ("), "{labels:?}");
    // `tools.always("fetch")` shows what its `tools.bind` bound; an undeclared alias says so.
    assert_eq!(labels[BINDINGS.len()], labels[1]);
    assert_eq!(labels[BINDINGS.len() + 1], "→ not declared");

    // The hover on a binding adds the same answer to the call's documentation.
    let hover = client.call(
        "textDocument/hover",
        point(&doc, at(&text, BINDINGS[1], 14)),
    );
    let value = hover["contents"]["value"].as_str().unwrap();
    assert!(
        value.contains("tools.bind(alias") && value.contains("Binds `web_fetch`"),
        "{value}"
    );
}

#[test]
fn a_server_without_resources_says_why_a_model_cannot_bind() {
    let text = format!("{HEAD}```lua\nmodels.bind(\"m\", \"a careful writer\")\n```\n");
    let doc = uri("nocatalog.md");
    let mut client = Client::start(Options {
        debounce: Duration::from_millis(20),
        resources: Resources::Given {
            tools: ToolCatalog::empty(),
            models: ModelCatalog::empty(),
        },
    });
    client.open(&doc, &text);
    let hover: Value = client.call(
        "textDocument/hover",
        point(&doc, at(&text, "models.bind", 3)),
    );
    let value = hover["contents"]["value"].as_str().unwrap();
    assert!(value.contains("the model catalog is empty"), "{value}");
}
