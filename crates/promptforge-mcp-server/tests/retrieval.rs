//! `need_prompt` when the retrieval index could not be built: it says so, points at
//! `list_prompts`, and every other tool serves on.
#![allow(clippy::unwrap_used, clippy::expect_used)]
#![cfg(feature = "picker")]

use std::sync::Arc;
use std::time::Duration;

use promptforge_core::client::{GatewayClient, ModelCatalog};
use promptforge_core::tools::ToolCatalog;
use promptforge_mcp_server::catalog::{self, Mode};
use promptforge_mcp_server::config::CatalogConfig;
use promptforge_mcp_server::runs::Registry;
use promptforge_mcp_server::state::{Generation, Index, Shared};
use promptforge_mcp_server::tools;
use promptforge_tool_picker::{Config, Model, ToolPicker};
use serde_json::json;

#[tokio::test]
async fn a_failed_index_is_reported_and_the_catalog_still_serves() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("echo.md"),
        "---\nname: echo\ndescription: Return the input\npromptforge: 1\n---\n\n# E\n\n```lua\nreturn args\n```\n",
    )
    .unwrap();
    let config = CatalogConfig {
        include: vec!["*.md".into()],
        exclude: vec![],
        overrides: Default::default(),
    };
    let catalog = catalog::resolve(&config, dir.path(), Mode::Boot).unwrap();
    let model = Model::load().unwrap();
    let tools = ToolCatalog::empty();
    let picker =
        ToolPicker::build_with_model(&model, tools.picker_catalog(), Config::default()).unwrap();
    let shared = Arc::new(Shared::new(
        Generation {
            number: 1,
            index_key: catalog.index_key(),
            catalog,
            index: Index::Unavailable("the retrieval index failed to build: test".into()),
        },
        Registry::new(1, Duration::from_secs(1), Duration::from_secs(60)),
        Duration::from_secs(10),
        GatewayClient::disabled(),
        ModelCatalog::empty(),
        tools,
        picker,
        None,
    ));
    let answer = tools::need_prompt(
        &shared,
        json!({"capability": "echo text"}).as_object().cloned(),
    )
    .await
    .unwrap();
    let content = answer.structured_content.unwrap();
    assert_eq!(content["prompts"], json!([]));
    let why = content["unavailable"].as_str().unwrap();
    assert!(
        why.contains("failed to build: test") && why.contains("list_prompts"),
        "{why}"
    );
    assert_eq!(answer.is_error, Some(false));
    let listed = tools::list_prompts(&shared, None).unwrap();
    assert_eq!(
        listed.structured_content.unwrap()["prompts"][0]["name"],
        "echo"
    );
}
