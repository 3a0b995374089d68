//! `POST /v1/tools/web_search`.

use axum::Json;
use axum::extract::State;
use promptforge_wire::WebSearchResponse;

use super::{RawBody, parse_body};
use crate::error::{ApiError, ErrorCode};
use crate::search::request::{self, SearchRequest};
use crate::search::{brave, pipeline};
use crate::state::AppState;

/// Proxies one search to the provider and post-processes the results.
pub(super) async fn web_search(
    State(state): State<AppState>,
    body: RawBody,
) -> Result<Json<WebSearchResponse>, ApiError> {
    let runtime = state.runtime();
    let (Some(config), Some(client)) =
        (runtime.config.web_search.as_ref(), runtime.search_client())
    else {
        return Err(ApiError::new(
            ErrorCode::NotFound,
            "web search is not configured ([tools.web_search] is absent)",
        ));
    };
    let request: SearchRequest = parse_body(body)?;
    let search = request::validate(request, config)?;
    let raw = brave::search(client, config, &search).await?;
    let max_per_host = usize::try_from(config.max_per_host).unwrap_or(usize::MAX);
    let results = pipeline::process(raw, &search, max_per_host, config.strip_tracking);
    Ok(Json(WebSearchResponse {
        query: search.query,
        results,
    }))
}
