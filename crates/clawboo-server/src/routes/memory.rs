//! `/api/memory` (search or browse facts) and `/api/memory/procedures`.

use axum::Router;
use axum::extract::State;
use axum::routing::get;
use clawboo_memory::{ScopeFilter, SearchMode, TeamFilter};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::AppState;
use crate::error::{ApiQuery, AppError, store_call};

/// The memory routes.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/memory", get(search))
        .route("/api/memory/procedures", get(procedures))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct MemoryQuery {
    /// Search text; without it the newest facts are listed.
    query: Option<String>,
    mode: Option<String>,
    team_id: Option<String>,
    agent_id: Option<String>,
    limit: Option<u32>,
}

fn scope(team_id: Option<String>, agent_id: Option<String>) -> ScopeFilter {
    ScopeFilter {
        team: team_id.map_or(TeamFilter::Any, TeamFilter::TeamOrGlobal),
        agent_id,
        tenant_id: None,
    }
}

async fn search(
    State(state): State<AppState>,
    ApiQuery(q): ApiQuery<MemoryQuery>,
) -> Result<axum::Json<Value>, AppError> {
    let mode = match q.mode.as_deref() {
        None | Some("") => None,
        Some(m) => Some(m.parse::<SearchMode>().map_err(|_| {
            AppError::bad_request(format!("unknown mode {m:?}; use fts, vector or hybrid"))
        })?),
    };
    let memory = state.memory();
    let scope = scope(q.team_id, q.agent_id);
    let query = q.query.filter(|text| !text.trim().is_empty());
    store_call(state.store(), move |_| match query {
        Some(text) => {
            let outcome = memory.search(&text, mode, &scope, q.limit.unwrap_or(10))?;
            clawboo_mcp::metrics::record_search(outcome.mode);
            let results: Vec<Value> = outcome
                .hits
                .iter()
                .map(|h| json!({"fact": h.fact, "score": h.score, "matchedVia": h.matched_via}))
                .collect();
            Ok(axum::Json(
                json!({ "results": results, "mode": outcome.mode }),
            ))
        }
        None => {
            let facts = memory.browse(&scope, q.limit.unwrap_or(10))?;
            Ok(axum::Json(json!({ "facts": facts })))
        }
    })
    .await
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ProcedureQuery {
    /// Every version of this procedure (oldest first); without it, the latest of each.
    name: Option<String>,
    query: Option<String>,
    team_id: Option<String>,
    agent_id: Option<String>,
    limit: Option<u32>,
}

async fn procedures(
    State(state): State<AppState>,
    ApiQuery(q): ApiQuery<ProcedureQuery>,
) -> Result<axum::Json<Value>, AppError> {
    let memory = state.memory();
    let scope = scope(q.team_id, q.agent_id);
    store_call(state.store(), move |_| {
        let procedures = match q.name.as_deref() {
            Some(name) => memory.procedure_versions(name, &scope)?,
            None => memory.latest_procedures(&scope, q.query.as_deref(), q.limit.unwrap_or(50))?,
        };
        Ok(axum::Json(json!({ "procedures": procedures })))
    })
    .await
}
