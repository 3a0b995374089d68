//! The repository's own gateway.toml + profiles/main.toml boot as shipped.

use std::path::PathBuf;

use crate::harness::*;

#[tokio::test(flavor = "multi_thread")]
async fn shipped_configuration_boots() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let boot = root.join("gateway.toml");
    // The process environment wins over gateway.env: only the port is moved to 0.
    let gw_env = [(
        "PROMPTFORGE_GATEWAY_BIND".to_owned(),
        "127.0.0.1:0".to_owned(),
    )];
    let gw = Gateway::start_args_without(
        &["serve", boot.to_str().unwrap(), "--profile", "main"],
        &gw_env,
        &["PROMPTFORGE_GATEWAY_API_KEY"],
    )
    .await;
    let res = gw
        .client
        .get(format!("{}/v1/models", gw.url))
        .bearer_auth("dev-secret")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let body: serde_json::Value = res.json().await.unwrap();
    let ids: Vec<&str> = body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["local-chat", "local-embed"]);
}
