//! `POST /v1/tools/web_search`.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use promptforge_wire::WebSearchResponse;

use super::error::{ApiError, ErrorCode};
use super::{Ctx, RawBody, parse_body};
use crate::search::request::{self, SearchRequest};
use crate::search::{brave, pipeline};

/// Proxies one search to the provider and post-processes the results.
pub(super) async fn web_search(
    State(ctx): State<Arc<Ctx>>,
    body: RawBody,
) -> Result<Json<WebSearchResponse>, ApiError> {
    let plan = ctx.plans.load();
    let Some(search) = plan.search() else {
        return Err(ApiError::new(
            ErrorCode::NotFound,
            "web search is not configured ([tools.web_search] is absent)",
        ));
    };
    let config = &search.config;
    let request: SearchRequest = parse_body(body)?;
    let validated = request::validate(request, config)?;
    let raw = brave::search(&search.client, config, &validated).await?;
    let max_per_host = usize::try_from(config.max_per_host).unwrap_or(usize::MAX);
    let results = pipeline::process(raw, &validated, max_per_host, config.strip_tracking);
    Ok(Json(WebSearchResponse {
        query: validated.query,
        results,
    }))
}
