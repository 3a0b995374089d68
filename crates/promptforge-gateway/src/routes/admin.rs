//! `GET /admin/status` and `POST /admin/switch-profile`.

use axum::Json;
use axum::extract::State;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{RawBody, parse_body};
use crate::error::{ApiError, ErrorCode};
use crate::state::{AppState, Runtime, SwitchError};

fn describe(runtime: &Runtime) -> Value {
    let models: Vec<Value> = runtime
        .config
        .models
        .iter()
        .map(|m| json!({"name": m.name, "kind": m.kind.as_str()}))
        .collect();
    let chain: Vec<String> = runtime
        .config
        .include_chain
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    json!({
        "profile": runtime.profile,
        "model_allowlist": runtime.config.model_allowlist,
        "models": models,
        "include_chain": chain,
        "web_search": runtime.config.web_search.is_some(),
        "dominions": runtime.dominion_status(),
        "local_models": local_status(runtime),
    })
}

/// Each running local child: port, process id, liveness, respawns, dialect and, without a
/// dominion, its own queue (in flight, waiting, limits).
fn local_status(runtime: &Runtime) -> Vec<Value> {
    let Some(local) = runtime.local() else {
        return Vec::new();
    };
    let mut entries: Vec<Value> = local
        .models()
        .map(|(name, m)| {
            json!({
                "name": name,
                "port": m.child.spec().port,
                "pid": m.child.server_pid(),
                "running": !m.child.is_dead(),
                "respawns": m.child.respawn_count(),
                // The model's own queue; `null` when a dominion governs it.
                "queue": m.admission.as_ref().map(crate::admission::Admission::snapshot),
                "dialect": match m.dialect {
                    crate::config::ToolDialect::OpenAi => "openai",
                    crate::config::ToolDialect::Gemma3ToolCode => "gemma3_tool_code",
                },
            })
        })
        .collect();
    entries.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
    entries
}

/// The active profile and its loaded set.
pub(super) async fn status(State(state): State<AppState>) -> Json<Value> {
    Json(describe(&state.runtime()))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SwitchRequest {
    name: String,
}

/// Builds and validates the named profile, then swaps it in atomically.
pub(super) async fn switch_profile(
    State(state): State<AppState>,
    body: RawBody,
) -> Result<Json<Value>, ApiError> {
    let request: SwitchRequest = parse_body(body)?;
    match state.switch_profile(&request.name).await {
        Ok(runtime) => Ok(Json(describe(&runtime))),
        Err(SwitchError::InvalidName(err)) => Err(ApiError::new(
            ErrorCode::InvalidProfileName,
            err.to_string(),
        )),
        Err(SwitchError::Unknown(err)) => {
            Err(ApiError::new(ErrorCode::ProfileNotFound, err.to_string()))
        }
        Err(SwitchError::Invalid(err)) => {
            Err(ApiError::new(ErrorCode::ProfileInvalid, err.to_string()))
        }
        Err(SwitchError::Local(err)) => {
            Err(ApiError::new(ErrorCode::LocalStartFailed, err.to_string()))
        }
    }
}
