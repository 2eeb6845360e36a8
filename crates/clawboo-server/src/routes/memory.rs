//! `/api/memory` (search or browse facts), one fact by id, retiring a fact (the operator's
//! alone: no MCP tool retires) and `/api/memory/procedures`.

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::{get, post};
use clawboo_memory::{RetireOutcome, ScopeFilter, SearchMode, TeamFilter};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::AppState;
use crate::error::{ApiJson, ApiPath, ApiQuery, AppError, store_call};

/// The memory routes.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/memory", get(search))
        .route("/api/memory/procedures", get(procedures))
        .route("/api/memory/facts/{id}", get(fact))
        .route("/api/memory/facts/{id}/retire", post(retire))
}

/// One fact by id, retired or not: `{fact, retirement}` (`retirement` null while live).
async fn fact(
    State(state): State<AppState>,
    ApiPath(id): ApiPath<String>,
) -> Result<axum::Json<Value>, AppError> {
    let memory = state.memory();
    let fact = memory
        .get_fact_async(&id, &ScopeFilter::default())
        .await??
        .ok_or_else(|| AppError::not_found(format!("no fact {id}")))?;
    let retirement = memory.fact_retirement_async(&id).await??;
    Ok(axum::Json(
        json!({ "fact": fact, "retirement": retirement }),
    ))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RetireBody {
    /// Why the fact is wrong or stale (kept with the retirement).
    reason: String,
}

/// Retire a fact: no search or browse returns it again; by id it shows its retirement.
/// 201 with `{retirement}`; a fact already retired is 409 and keeps its first retirement.
async fn retire(
    State(state): State<AppState>,
    ApiPath(id): ApiPath<String>,
    ApiJson(body): ApiJson<RetireBody>,
) -> Result<(StatusCode, axum::Json<Value>), AppError> {
    let memory = state.memory();
    match memory.retire_fact_async(&id, "api", &body.reason).await?? {
        RetireOutcome::Retired(retirement) => Ok((
            StatusCode::CREATED,
            axum::Json(json!({ "retirement": retirement })),
        )),
        RetireOutcome::AlreadyRetired(r) => Err(AppError::new(
            StatusCode::CONFLICT,
            format!(
                "fact {id} is already retired (by {}: {:?}); a retirement is final, so nothing changed",
                r.retired_by, r.reason
            ),
        )),
    }
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
    let Some(text) = query else {
        // Browsing embeds nothing: awaited, as the board's reads are.
        let facts = memory.browse_async(&scope, q.limit.unwrap_or(10)).await??;
        return Ok(axum::Json(json!({ "facts": facts })));
    };
    store_call(state.store(), move |_| {
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
    let Some(name) = q.name else {
        let (query, limit) = (q.query.as_deref(), q.limit.unwrap_or(50));
        let procedures = memory
            .latest_procedures_async(&scope, query, limit)
            .await??;
        return Ok(axum::Json(json!({ "procedures": procedures })));
    };
    store_call(state.store(), move |_| {
        let procedures = memory.procedure_versions(&name, &scope)?;
        Ok(axum::Json(json!({ "procedures": procedures })))
    })
    .await
}
