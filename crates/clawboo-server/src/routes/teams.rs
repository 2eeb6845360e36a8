//! `/api/teams` and `/api/agents`.

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use clawboo_store::teams::NewAgent;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::AppState;
use crate::error::{ApiJson, ApiQuery, AppError};

/// The team and agent routes.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/teams", get(list_teams).post(create_team))
        .route("/api/agents", get(list_agents).post(create_agent))
}

async fn list_teams(State(state): State<AppState>) -> Result<axum::Json<Value>, AppError> {
    let teams = state.store().list_teams_async().await??;
    Ok(axum::Json(json!({ "teams": teams })))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct TeamBody {
    id: Option<String>,
    name: String,
    /// Its short ids' key (`RED`); the default is derived from the name.
    key: Option<String>,
}

async fn create_team(
    State(state): State<AppState>,
    ApiJson(body): ApiJson<TeamBody>,
) -> Result<(StatusCode, axum::Json<Value>), AppError> {
    let (id, key) = (body.id.as_deref(), body.key.as_deref());
    let team = state
        .store()
        .upsert_team_async(id, &body.name, key)
        .await??;
    Ok((StatusCode::CREATED, axum::Json(json!({ "team": team }))))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct AgentQuery {
    team_id: Option<String>,
}

async fn list_agents(
    State(state): State<AppState>,
    ApiQuery(q): ApiQuery<AgentQuery>,
) -> Result<axum::Json<Value>, AppError> {
    // With each one's last call, liveness and held tasks (their leases), SPEC §12.
    let team = q.team_id.as_deref();
    let agents = state.store().agents_seen_async(team).await??;
    Ok(axum::Json(json!({ "agents": agents })))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct AgentBody {
    id: Option<String>,
    name: String,
    team_id: Option<String>,
    runtime: Option<String>,
}

async fn create_agent(
    State(state): State<AppState>,
    ApiJson(body): ApiJson<AgentBody>,
) -> Result<(StatusCode, axum::Json<Value>), AppError> {
    let new = NewAgent {
        id: body.id,
        name: body.name,
        team_id: body.team_id,
        runtime: body.runtime,
    };
    let agent = state.store().upsert_agent_async(&new).await??;
    Ok((StatusCode::CREATED, axum::Json(json!({ "agent": agent }))))
}
