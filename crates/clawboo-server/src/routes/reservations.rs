//! `/api/reservations`: the live path reservations (SPEC §19), who holds which globs for
//! which task and until when.

use axum::Router;
use axum::extract::State;
use axum::routing::get;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::AppState;
use crate::error::{ApiQuery, AppError};

/// The reservation routes.
pub fn routes() -> Router<AppState> {
    Router::new().route("/api/reservations", get(list))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ListQuery {
    team_id: Option<String>,
}

async fn list(
    State(state): State<AppState>,
    ApiQuery(query): ApiQuery<ListQuery>,
) -> Result<axum::Json<Value>, AppError> {
    let reservations = state.store().reservations_async(query.team_id).await??;
    Ok(axum::Json(json!({ "reservations": reservations })))
}
