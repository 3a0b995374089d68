//! `GET /v1/models`.

use axum::Json;
use axum::extract::State;
use serde_json::{Map, Value, json};

use crate::config::ModelConfig;
use crate::state::AppState;

/// The catalog of the loaded set.
pub(super) async fn list_models(State(state): State<AppState>) -> Json<Value> {
    let runtime = state.runtime();
    let data: Vec<Value> = runtime.config.models.iter().map(entry).collect();
    Json(json!({"object": "list", "data": data}))
}

/// One catalog entry: flags and `effort_levels` always, optional knobs when configured.
fn entry(model: &ModelConfig) -> Value {
    let mut map = Map::new();
    map.insert("id".into(), json!(model.name));
    map.insert("object".into(), json!("model"));
    map.insert("owned_by".into(), json!("promptforge-gateway"));
    map.insert("kind".into(), json!(model.kind.as_str()));
    map.insert("description".into(), json!(model.description));
    map.insert("context".into(), json!(model.context));
    map.insert("thinking".into(), json!(model.thinking.as_str()));
    if let Some(max_output) = model.max_output {
        map.insert("max_output".into(), json!(max_output));
    }
    if let Some(temperature) = model.default_temperature {
        map.insert("default_temperature".into(), json!(temperature));
    }
    map.insert("images".into(), json!(model.images));
    map.insert(
        "parallel_tool_calls".into(),
        json!(model.parallel_tool_calls),
    );
    map.insert("effort_levels".into(), json!(model.effort_levels));
    if let Some(effort) = &model.default_effort {
        map.insert("default_effort".into(), json!(effort));
    }
    map.insert("adaptive_thinking".into(), json!(model.adaptive_thinking));
    Value::Object(map)
}
