//! The operators' routes (SPEC §17): `GET /healthz` (the process answers) and
//! `GET /readyz` (the store answers a query and its schema is current), both outside
//! `/api`, so the access gate never asks a load balancer for a token; and `GET /api/ops`,
//! the few figures of the board's operations strip, behind the gate like the board.

use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::json;

use crate::AppState;
use crate::error::AppError;

/// Longest `/readyz` waits for the store before it answers not ready: a probe must answer
/// within the balancer's own timeout, whatever the database does.
const READY_WITHIN: Duration = Duration::from_secs(5);

/// `/healthz` and `/readyz`.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/api/ops", get(ops_summary))
}

/// `{calls, errors, approvalsPending, leasesHeld, leasesExpiring}`: this process's tool
/// calls and tool-errors so far (the board turns them into rates), and the store's counts.
async fn ops_summary(
    State(state): State<AppState>,
) -> Result<axum::Json<serde_json::Value>, AppError> {
    let counts = state.store().ops_counts_async().await??;
    let totals = clawboo_mcp::metrics::call_totals();
    Ok(axum::Json(json!({
        "calls": totals.calls,
        "errors": totals.errors,
        "approvalsPending": counts.approvals_pending,
        "leasesHeld": counts.leases_held,
        "leasesExpiring": counts.leases_expiring,
    })))
}

async fn healthz() -> Response {
    axum::Json(json!({ "ok": true })).into_response()
}

/// 200 when the store answered and every migration this build knows is applied; 503 with
/// the reason otherwise. Also says which engine and which vector-search path are in use.
async fn readyz(State(state): State<AppState>) -> Response {
    let store = state.store();
    let backend = store.backend_name();
    let vector_search = state.shared.memory.vector_search();
    let asked = store.readiness_async();
    let reason = match tokio::time::timeout(READY_WITHIN, asked).await {
        Ok(Ok(Ok(ready))) if ready.schema_current() => None,
        Ok(Ok(Ok(ready))) => Some(format!(
            "the database's schema is version {} and this build expects {}: restart this server (it migrates at start), or run the build that matches the database",
            ready.schema_found, ready.schema_expected
        )),
        Ok(Ok(Err(error))) => Some(AppError::from(error).message),
        Ok(Err(_)) => Some("the readiness check failed unexpectedly; see the server's log".into()),
        Err(_) => Some(format!(
            "the database did not answer within {}s; retry once it is reachable",
            READY_WITHIN.as_secs()
        )),
    };
    let status = if reason.is_some() {
        StatusCode::SERVICE_UNAVAILABLE
    } else {
        StatusCode::OK
    };
    let mut body = json!({
        "ready": reason.is_none(),
        "backend": backend,
        "vectorSearch": vector_search.as_str(),
    });
    if let Some(reason) = reason {
        body["error"] = json!(reason);
    }
    (status, axum::Json(body)).into_response()
}
