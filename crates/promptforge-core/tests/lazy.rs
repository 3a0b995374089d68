//! The lazy picker: a prompt that binds nothing never loads the model or indexes a tool.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::path::PathBuf;
use std::sync::Arc;

use promptforge_core::client::ModelCatalog;
use promptforge_core::tools::{Tool, ToolCatalog};
use promptforge_core::{NullObserver, Prompt, ResolutionContext, RunConfig, StoreRef, run};
use promptforge_tool_picker::{Config, LazyPicker};
use support::FakeTool;

fn load(name: &str) -> Prompt {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/lazy")
        .join(name);
    let source = std::fs::read_to_string(&path).unwrap();
    Prompt::parse_named(name, &source, "test", &NullObserver).unwrap()
}

fn catalog() -> ToolCatalog {
    let search = FakeTool::new(
        "web_search",
        "Search the web for current news and information",
        false,
    );
    let tools: Vec<Arc<dyn Tool>> = vec![search];
    ToolCatalog::new(&tools).unwrap()
}

async fn exec(name: &str, input: &str, picker: &LazyPicker, tools: &ToolCatalog) -> String {
    let models = ModelCatalog::empty();
    run(
        &load(name),
        input,
        ResolutionContext::lazy(picker, &models, tools),
        &StoreRef::memory(),
        RunConfig::new("test"),
    )
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prompt_that_binds_nothing_never_loads_the_picker() {
    let tools = catalog();
    let picker = LazyPicker::new(tools.picker_catalog(), Config::default());
    let out = exec("echo.md", "hello", &picker, &tools).await;
    assert_eq!(out, "hello");
    assert!(!picker.is_loaded(), "a model-free prompt loaded the picker");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_bind_loads_the_picker_on_first_use() {
    let tools = catalog();
    let picker =
        LazyPicker::with_model(&support::model(), tools.picker_catalog(), Config::default());
    assert!(!picker.is_loaded());
    let out = exec("bind.md", "", &picker, &tools).await;
    assert_eq!(out, "search", "the handle names its alias");
    assert!(picker.is_loaded(), "tools.bind must have built the picker");
    // A second run over the same handle reuses the build.
    let before = std::ptr::from_ref(picker.get().unwrap());
    exec("bind.md", "", &picker, &tools).await;
    assert!(std::ptr::eq(before, picker.get().unwrap()));
}
