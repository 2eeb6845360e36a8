//! `GET /api/mcp/config` (attach snippets, signed scope) and `GET /api/mcp/status`.

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use clawboo_mcp::attach::{
    AttachTarget, McpServerName, Runtime, SignedScope, Transport, build_attach_config,
    mcp_http_url, stdio_target,
};
use clawboo_mcp::binding::Binding;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::AppState;
use crate::error::{ApiQuery, AppError};
use crate::guard::Operator;

/// The MCP REST routes.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/mcp/config", get(config))
        .route("/api/mcp/status", get(status))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ConfigQuery {
    server: Option<String>,
    runtime: Option<String>,
    transport: Option<String>,
    scope_team_id: Option<String>,
    scope_agent_id: Option<String>,
    scope_tenant_id: Option<String>,
    delegate: Option<String>,
}

fn non_empty(v: Option<String>) -> Option<String> {
    v.filter(|s| !s.is_empty())
}

async fn config(
    State(state): State<AppState>,
    operator: Option<axum::Extension<Operator>>,
    ApiQuery(q): ApiQuery<ConfigQuery>,
) -> Result<axum::Json<Value>, AppError> {
    let bad = |e: clawboo_mcp::attach::AttachError| AppError::bad_request(e.to_string());
    let server: McpServerName = q
        .server
        .as_deref()
        .unwrap_or("tasks")
        .parse()
        .map_err(bad)?;
    let runtime: Runtime = q
        .runtime
        .as_deref()
        .unwrap_or("claude-code")
        .parse()
        .map_err(bad)?;
    let transport: Transport = q
        .transport
        .as_deref()
        .unwrap_or("http")
        .parse()
        .map_err(bad)?;
    let delegate = match q.delegate.as_deref() {
        None | Some("" | "0" | "false") => false,
        Some("1" | "true") => true,
        Some(other) => {
            return Err(AppError::bad_request(format!(
                "invalid delegate: {other} (use 1 or 0)"
            )));
        }
    };
    let scope = Binding {
        team_id: non_empty(q.scope_team_id),
        agent_id: non_empty(q.scope_agent_id),
        tenant_id: non_empty(q.scope_tenant_id),
        delegate,
    };
    scope.check_for(server).map_err(bad)?;
    let options = &state.shared.options;
    if scope.is_bound() && options.access_token.is_some() && operator.is_none() {
        return Err(AppError::new(
            StatusCode::UNAUTHORIZED,
            "minting a scoped attach config needs operator credentials (the clawboo_access cookie or Authorization: Bearer); or run `clawboo attach` on the server host",
        ));
    }
    let target = match transport {
        Transport::Http => {
            let signed = SignedScope::new(server, scope.clone(), &state.shared.signer);
            AttachTarget::Http {
                url: mcp_http_url(&options.base_url, &signed),
            }
        }
        Transport::Stdio => stdio_target(&options.stdio_launcher, server, &scope, &options.db),
    };
    let config = build_attach_config(server, runtime, &target);
    Ok(axum::Json(json!({ "ok": true, "config": config })))
}

async fn status(State(state): State<AppState>) -> axum::Json<Value> {
    let mut servers = Vec::new();
    for name in McpServerName::ALL {
        let mounted = state.shared.mounts.iter().any(|m| m.name == name);
        let report = state.shared.status.report(name).await;
        servers.push(json!({
            "name": name.as_str(),
            "id": name.attach_id(),
            "path": format!("/api/mcp/{}", name.as_str()),
            "mounted": mounted,
            "alive": report.as_ref().is_some_and(|r| r.alive),
            "toolCount": report.as_ref().and_then(|r| r.tool_count),
            "lastProbeAt": report.as_ref().map(|r| r.last_probe_at),
            "error": report.as_ref().and_then(|r| r.error.clone()),
        }));
    }
    let vector_search = state.shared.memory.vector_search();
    axum::Json(json!({
        "ok": true,
        "servers": servers,
        "memory": {
            "backend": state.shared.store.backend_name(),
            "vectorSearch": vector_search.as_str(),
            "vectorSearchDetail": vector_search.to_string(),
        },
    }))
}
