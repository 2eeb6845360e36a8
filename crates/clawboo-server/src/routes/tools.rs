//! `/api/tools` (the registry with availability), approvals and the audit log.

use axum::Router;
use axum::extract::State;
use axum::routing::{get, post};
use clawboo_broker::{ApprovalError, BrokerStore, Decision};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::AppState;
use crate::error::{ApiJson, ApiPath, ApiQuery, AppError, store_call};

/// Longest page of approvals or audit rows one request returns.
const MAX_PAGE: usize = 500;

/// The tool broker routes.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/tools", get(list_tools))
        .route("/api/tools/approvals", get(list_approvals))
        .route("/api/tools/approvals/{id}/resolve", post(resolve))
        .route("/api/tools/audit", get(audit))
}

async fn list_tools(State(state): State<AppState>) -> Result<axum::Json<Value>, AppError> {
    let broker = state.broker();
    let tools = store_call(state.store(), move |_| Ok(broker.tools()?)).await?;
    Ok(axum::Json(json!({ "ok": true, "tools": tools })))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ApprovalsQuery {
    /// `pending` (default) or `all`.
    status: Option<String>,
    limit: Option<usize>,
}

async fn list_approvals(
    State(state): State<AppState>,
    ApiQuery(q): ApiQuery<ApprovalsQuery>,
) -> Result<axum::Json<Value>, AppError> {
    let pending_only = match q.status.as_deref() {
        None | Some("pending") => true,
        Some("all") => false,
        Some(other) => {
            return Err(AppError::bad_request(format!(
                "unknown status {other:?}; use pending or all"
            )));
        }
    };
    let limit = page_limit(q.limit)?;
    let store = state.store();
    let approvals = store.list_approvals_async(pending_only, limit).await??;
    Ok(axum::Json(json!({ "ok": true, "approvals": approvals })))
}

fn page_limit(limit: Option<usize>) -> Result<usize, AppError> {
    match limit {
        None => Ok(100),
        Some(n) if (1..=MAX_PAGE).contains(&n) => Ok(n),
        Some(n) => Err(AppError::bad_request(format!(
            "limit {n} is out of range; use 1..={MAX_PAGE}"
        ))),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ResolveBody {
    decision: String,
}

async fn resolve(
    State(state): State<AppState>,
    ApiPath(id): ApiPath<String>,
    ApiJson(body): ApiJson<ResolveBody>,
) -> Result<axum::Json<Value>, AppError> {
    let decision: Decision = body.decision.parse().map_err(|_| {
        AppError::bad_request(format!(
            "unknown decision {:?}; use allow_once, allow_always or deny",
            body.decision
        ))
    })?;
    let resolved = state
        .store()
        .resolve_approval_async(&id, decision, "api")
        .await?;
    match resolved {
        Ok(approval) => Ok(axum::Json(json!({ "ok": true, "approval": approval }))),
        Err(ApprovalError::Store(e)) => Err(e.into()),
        Err(e @ ApprovalError::NotFound(_)) => {
            Err(AppError::not_found(e.to_string()).with_ok_false())
        }
        Err(e) => {
            Err(AppError::new(axum::http::StatusCode::CONFLICT, e.to_string()).with_ok_false())
        }
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct AuditQuery {
    tool_name: Option<String>,
    limit: Option<usize>,
}

async fn audit(
    State(state): State<AppState>,
    ApiQuery(q): ApiQuery<AuditQuery>,
) -> Result<axum::Json<Value>, AppError> {
    let limit = page_limit(q.limit)?;
    let tool = q.tool_name.as_deref();
    let rows = state.store().tool_audit_async(tool, limit).await??;
    Ok(axum::Json(json!({ "ok": true, "audit": rows })))
}
