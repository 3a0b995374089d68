//! `GET /admin/status`, `POST /admin/switch-profile` and `GET /metrics`.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};

use super::error::{ApiError, switch_failed};
use super::{Ctx, RawBody, parse_body};
use crate::admission::shared::Shared;
use crate::config::{DominionKind, QueuePolicy, ToolDialect};
use crate::plan::Plan;

/// The active profile and its loaded set, as `/admin/status` answers it.
pub(crate) fn describe(plan: &Plan, shared: Option<&Shared>) -> Value {
    let models: Vec<Value> = plan
        .models()
        .iter()
        .map(|m| json!({"name": &*m.name, "kind": m.kind.as_str()}))
        .collect();
    let chain: Vec<String> = plan
        .config
        .include_chain
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    json!({
        "profile": plan.profile,
        "model_allowlist": plan.config.model_allowlist,
        "models": models,
        "include_chain": chain,
        "web_search": plan.search().is_some(),
        "dominions": dominions(plan),
        "local_models": local_models(plan),
        // `[dominion_store]`: the replica's link to the shared dominions; `null` without.
        "dominion_store": shared.map(Shared::status),
    })
}

/// Every dominion: its settings and, when limited, its live queue.
fn dominions(plan: &Plan) -> Vec<Value> {
    plan.dominion_snapshots()
        .map(|(dominion, live)| {
            let d = &dominion.config;
            let mut entry = json!({
                "id": d.id,
                "kind": match d.kind { DominionKind::Remote => "remote", DominionKind::Local => "local" },
                "policy": match d.policy { QueuePolicy::Queue => "queue", QueuePolicy::Reject => "reject" },
                "fair_scheduling": d.fair_scheduling,
                "max_concurrency": d.max_concurrency,
                "max_queue": d.max_queue,
                "in_flight": null,
                "waiting": 0,
                "waiting_by_client": {},
                // Across every replica, for a dominion shared through `[dominion_store]`.
                "global": dominion.admission.as_ref().and_then(crate::admission::Admission::global),
            });
            if let (Some(live), Some(map)) = (live, entry.as_object_mut()) {
                map.insert("in_flight".into(), json!(live.in_flight));
                map.insert("waiting".into(), json!(live.waiting));
                map.insert("waiting_by_client".into(), json!(live.waiting_by_client));
            }
            entry
        })
        .collect()
}

/// Each running local child: port, process id, liveness, respawns, dialect and, without a
/// dominion, its own queue (in flight, waiting, limits).
fn local_models(plan: &Plan) -> Vec<Value> {
    plan.local()
        .iter()
        .map(|local| {
            let child = &local.running.child;
            json!({
                "name": local.name,
                "port": child.spec().port,
                "pid": child.server_pid(),
                "running": !child.is_dead(),
                "respawns": child.respawn_count(),
                // The model's own queue; `null` when a dominion governs it.
                "queue": local.own_queue.as_ref().map(crate::admission::Admission::snapshot),
                "dialect": match local.running.dialect {
                    ToolDialect::OpenAi => "openai",
                    ToolDialect::Gemma3ToolCode => "gemma3_tool_code",
                },
            })
        })
        .collect()
}

/// The active profile and its loaded set.
pub(super) async fn status(State(ctx): State<Arc<Ctx>>) -> Json<Value> {
    Json(describe(&ctx.plans.load(), ctx.shared.as_deref()))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SwitchRequest {
    name: String,
}

/// Builds, starts and swaps in the named profile; answers like `/admin/status`.
pub(super) async fn switch_profile(
    State(ctx): State<Arc<Ctx>>,
    body: RawBody,
) -> Result<Json<Value>, ApiError> {
    let request: SwitchRequest = parse_body(body)?;
    match ctx.control.switch_profile(&request.name).await {
        Ok(plan) => Ok(Json(describe(&plan, ctx.shared.as_deref()))),
        Err(error) => Err(switch_failed(&error)),
    }
}

/// `GET /metrics`: the OpenMetrics exposition, live gauges read from the live plan.
pub(super) async fn scrape(State(ctx): State<Arc<Ctx>>) -> Response {
    let body = ctx.metrics.render(&ctx.plans.load(), ctx.shared.as_deref());
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/openmetrics-text; version=1.0.0; charset=utf-8"),
        )],
        body,
    )
        .into_response()
}
