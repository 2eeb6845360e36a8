//! A request POST whose answer comes at once, first, is answered with one JSON body; one
//! that streams something first, or takes longer, keeps its SSE stream with every event
//! (on Tokio's paused clock: no real waiting and no timing assumptions).

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use clawboo_mcp::server::{McpServer, ToolSet};
use clawboo_server::mcp_http::{McpHttpConfig, McpHttpService};
use http_body_util::BodyExt;
use rmcp::RoleServer;
use rmcp::model::{CallToolResult, ContentBlock, JsonObject, ProgressNotificationParam, Tool};
use rmcp::service::RequestContext;
use serde_json::{Value, json};

struct Tools;

impl ToolSet for Tools {
    fn server_name(&self) -> &'static str {
        "json-answers-test"
    }

    fn tools(&self) -> Vec<Tool> {
        ["quick", "with_progress", "slow"]
            .into_iter()
            .map(|name| Tool::new(name, "test tool", std::sync::Arc::new(JsonObject::new())))
            .collect()
    }

    async fn call(
        &self,
        name: &str,
        _args: JsonObject,
        ctx: RequestContext<RoleServer>,
    ) -> CallToolResult {
        match name {
            "with_progress" => {
                let token = ctx.meta.get_progress_token().unwrap();
                let progress = ProgressNotificationParam::new(token, 50.0).with_total(100.0);
                ctx.peer.notify_progress(progress).await.unwrap();
            }
            "slow" => tokio::time::sleep(Duration::from_secs(5)).await,
            _ => {}
        }
        CallToolResult::success(vec![ContentBlock::text(format!("{name} done"))])
    }
}

/// POST `body`; the answer's status, content type and body text.
async fn post(
    svc: &McpHttpService<McpServer<Tools>>,
    session: Option<&str>,
    body: Value,
) -> (StatusCode, String, Option<String>, String) {
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
    let header = |name: &str| {
        resp.headers()
            .get(name)
            .map(|v| v.to_str().unwrap().to_owned())
    };
    let content_type = header("content-type").unwrap_or_default();
    let session = header("mcp-session-id");
    let text = resp.into_body().collect().await.unwrap().to_bytes();
    let text = String::from_utf8(text.to_vec()).unwrap();
    (status, content_type, session, text)
}

async fn open(svc: &McpHttpService<McpServer<Tools>>) -> String {
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"}}});
    let (status, _, session, _) = post(svc, None, init).await;
    assert_eq!(status, StatusCode::OK);
    let session = session.unwrap();
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    assert_eq!(
        post(svc, Some(&session), initialized).await.0,
        StatusCode::ACCEPTED
    );
    session
}

fn call(id: u64, name: &str, meta: Option<Value>) -> Value {
    let mut params = json!({"name": name, "arguments": {}});
    if let Some(meta) = meta {
        params["_meta"] = meta;
    }
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params})
}

/// The JSON of every `data:` line of an SSE body that carries a message.
fn sse_messages(text: &str) -> Vec<Value> {
    text.lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .map(str::trim)
        .filter(|data| !data.is_empty())
        .map(|data| serde_json::from_str(data).unwrap())
        .collect()
}

#[tokio::test(start_paused = true)]
async fn quick_answers_are_json_and_streaming_or_slow_ones_stay_sse() {
    let svc = McpHttpService::new(|_| McpServer::new(Tools), McpHttpConfig::default());
    let session = open(&svc).await;

    let (status, content_type, _, text) = post(&svc, Some(&session), call(2, "quick", None)).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(content_type, "application/json");
    let answer: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(answer["id"], 2);
    assert_eq!(answer["result"]["content"][0]["text"], "quick done");

    // Requests other than tools/call take the same path.
    let ping = json!({"jsonrpc": "2.0", "id": 3, "method": "ping"});
    let (_, content_type, _, text) = post(&svc, Some(&session), ping).await;
    assert_eq!(content_type, "application/json");
    assert_eq!(serde_json::from_str::<Value>(&text).unwrap()["id"], 3);

    // A notification before the answer: the whole stream, in order.
    let meta = json!({"progressToken": "p1"});
    let (_, content_type, _, text) =
        post(&svc, Some(&session), call(4, "with_progress", Some(meta))).await;
    assert!(
        content_type.starts_with("text/event-stream"),
        "{content_type}"
    );
    // Framed as rmcp frames it: the priming event (an id to resume from, a retry hint), then
    // each message with its own id.
    assert!(text.starts_with("data: \nid: "), "{text}");
    assert!(text.contains("retry: 3000\n"), "{text}");
    assert_eq!(text.matches("\nid: ").count(), 3, "{text}");
    let messages = sse_messages(&text);
    assert_eq!(messages.len(), 2, "{text}");
    assert_eq!(messages[0]["method"], "notifications/progress");
    assert_eq!(messages[0]["params"]["progressToken"], "p1");
    assert_eq!(messages[1]["id"], 4);
    assert_eq!(
        messages[1]["result"]["content"][0]["text"],
        "with_progress done"
    );

    // An answer that takes longer than the JSON window comes on the stream.
    let (_, content_type, _, text) = post(&svc, Some(&session), call(5, "slow", None)).await;
    assert!(
        content_type.starts_with("text/event-stream"),
        "{content_type}"
    );
    let messages = sse_messages(&text);
    assert_eq!(messages.len(), 1, "{text}");
    assert_eq!(messages[0]["id"], 5);
    assert_eq!(messages[0]["result"]["content"][0]["text"], "slow done");
}
