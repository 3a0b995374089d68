//! `GET /v1/models`.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use promptforge_wire::{ModelEntry, ModelList};

use super::Ctx;
use crate::config::ModelConfig;

/// The catalog of the loaded set.
pub(super) async fn list_models(State(ctx): State<Arc<Ctx>>) -> Json<ModelList> {
    let plan = ctx.plans.load();
    Json(ModelList::new(
        plan.models().iter().map(|m| entry(&m.config)).collect(),
    ))
}

/// One catalog entry: flags and `effort_levels` always, optional knobs when configured.
fn entry(model: &ModelConfig) -> ModelEntry {
    ModelEntry {
        object: Some("model".to_owned()),
        owned_by: Some("promptforge-gateway".to_owned()),
        kind: Some(model.kind),
        description: Some(model.description.clone()),
        context: Some(model.context),
        thinking: Some(model.thinking),
        max_output: model.max_output,
        default_temperature: model.default_temperature,
        images: Some(model.images),
        parallel_tool_calls: Some(model.parallel_tool_calls),
        effort_levels: Some(model.effort_levels.clone()),
        default_effort: model.default_effort.clone(),
        adaptive_thinking: Some(model.adaptive_thinking),
        ..ModelEntry::new(model.name.clone())
    }
}
