//! Idle MCP sessions expire (on Tokio's paused clock, so no real waiting and no timing
//! assumptions), while a session in use stays open.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use clawboo_server::mcp_http::{McpHttpConfig, McpHttpService, SessionServer};
use http_body_util::BodyExt;
use rmcp::ServerHandler;
use rmcp::model::{ServerCapabilities, ServerConfig};
use serde_json::{Value, json};

#[derive(Clone)]
struct Empty;

impl SessionServer for Empty {}

impl ServerHandler for Empty {
    fn get_info(&self) -> ServerConfig {
        let mut info = ServerConfig::default();
        info.capabilities = ServerCapabilities::builder().enable_tools().build();
        info
    }
}

const IDLE: Duration = Duration::from_secs(60);

fn service() -> McpHttpService<Empty> {
    McpHttpService::new(
        |_| Empty,
        McpHttpConfig {
            session_idle: IDLE,
            ..McpHttpConfig::default()
        },
    )
}

async fn post(
    svc: &McpHttpService<Empty>,
    session: Option<&str>,
    body: Value,
) -> (StatusCode, Option<String>) {
    let mut req = Request::post("/api/mcp/x")
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream");
    if let Some(s) = session {
        req = req.header("mcp-session-id", s);
    }
    let resp = svc
        .handle(req.body(Body::from(body.to_string())).unwrap())
        .await;
    let status = resp.status();
    let id = resp
        .headers()
        .get("mcp-session-id")
        .map(|v| v.to_str().unwrap().to_owned());
    let _ = resp.into_body().collect().await.unwrap();
    (status, id)
}

async fn open(svc: &McpHttpService<Empty>) -> String {
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"}}});
    let (status, id) = post(svc, None, init).await;
    assert_eq!(status, StatusCode::OK);
    let id = id.unwrap();
    let (status, _) = post(
        svc,
        Some(&id),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    )
    .await;
    assert_eq!(status, StatusCode::ACCEPTED);
    id
}

fn ping() -> Value {
    json!({"jsonrpc": "2.0", "id": 2, "method": "ping"})
}

#[tokio::test(start_paused = true)]
async fn idle_sessions_expire_and_busy_ones_do_not() {
    let svc = service();
    let idle = open(&svc).await;
    let busy = open(&svc).await;
    assert_eq!(svc.session_count().await, 2);

    tokio::time::sleep(IDLE * 2 / 3).await;
    assert_eq!(post(&svc, Some(&busy), ping()).await.0, StatusCode::OK);
    tokio::time::sleep(IDLE * 2 / 3).await;

    // `idle` has been quiet longer than the limit; `busy` spoke within it.
    assert_eq!(svc.session_count().await, 1);
    assert_eq!(
        post(&svc, Some(&idle), ping()).await.0,
        StatusCode::NOT_FOUND
    );
    assert_eq!(post(&svc, Some(&busy), ping()).await.0, StatusCode::OK);
}
