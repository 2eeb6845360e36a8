//! Test-only server for the official MCP conformance suite: the suite's fixture tools
//! (`test_simple_text`, …) served by `clawboo_mcp::server::McpServer` over
//! `clawboo_server::mcp_http::McpHttpService` behind the same Host/Origin guard as
//! `clawboo serve`, so the suite exercises our transport, session rules and DNS-rebinding
//! protection.
//!
//! `cargo run -p clawboo-server --example conformance_fixture -- [--bind 127.0.0.1:0]`
//! prints `listening on http://127.0.0.1:<port>/mcp` once bound.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::Request;
use axum::http::StatusCode;
use axum::middleware::{Next, from_fn};
use axum::response::Response;
use axum::routing::any;
use clawboo_mcp::server::{McpServer, ToolSet};
use clawboo_server::error::json_error;
use clawboo_server::guard::HostPolicy;
use clawboo_server::mcp_http::{McpHttpConfig, McpHttpService};
use rmcp::RoleServer;
use rmcp::model::{
    CallToolResult, ContentBlock, JsonObject, ProgressNotificationParam, ResourceContents, Tool,
};
use rmcp::service::RequestContext;
use serde_json::json;

/// A 1×1 red PNG.
const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";
/// A WAV header with no samples.
const WAV: &str = "UklGRiQAAABXQVZFZm10IBAAAAABAAEARKwAAIhYAQACABAAZGF0YQAAAAA=";

struct FixtureTools;

fn no_args() -> Arc<JsonObject> {
    match json!({"type": "object", "properties": {}}) {
        serde_json::Value::Object(map) => Arc::new(map),
        _ => Arc::new(JsonObject::new()),
    }
}

impl ToolSet for FixtureTools {
    fn server_name(&self) -> &'static str {
        "clawboo-conformance-fixture"
    }

    fn tools(&self) -> Vec<Tool> {
        [
            ("test_simple_text", "Returns simple text."),
            ("test_image_content", "Returns an image."),
            ("test_audio_content", "Returns audio."),
            ("test_embedded_resource", "Returns an embedded resource."),
            (
                "test_multiple_content_types",
                "Returns text, an image and a resource.",
            ),
            ("test_error_handling", "Always fails."),
            (
                "test_tool_with_progress",
                "Reports progress 0, 50 and 100 of 100.",
            ),
        ]
        .into_iter()
        .map(|(name, description)| Tool::new(name, description, no_args()))
        .collect()
    }

    async fn call(
        &self,
        name: &str,
        _args: JsonObject,
        ctx: RequestContext<RoleServer>,
    ) -> CallToolResult {
        match name {
            "test_simple_text" => CallToolResult::success(vec![ContentBlock::text(
                "This is a simple text response for testing.",
            )]),
            "test_image_content" => {
                CallToolResult::success(vec![ContentBlock::image(PNG, "image/png")])
            }
            "test_audio_content" => {
                CallToolResult::success(vec![ContentBlock::audio(WAV, "audio/wav")])
            }
            "test_embedded_resource" => CallToolResult::success(vec![ContentBlock::resource(
                ResourceContents::text(
                    "This is an embedded resource content.",
                    "test://embedded-resource",
                )
                .with_mime_type("text/plain"),
            )]),
            "test_multiple_content_types" => CallToolResult::success(vec![
                ContentBlock::text("Multiple content types test:"),
                ContentBlock::image(PNG, "image/png"),
                ContentBlock::resource(
                    ResourceContents::text(
                        r#"{"test":"data","value":123}"#,
                        "test://mixed-content-resource",
                    )
                    .with_mime_type("application/json"),
                ),
            ]),
            "test_error_handling" => CallToolResult::error(vec![ContentBlock::text(
                "This tool intentionally returns an error for testing",
            )]),
            "test_tool_with_progress" => {
                let token = ctx.meta.get_progress_token();
                for step in [0.0, 50.0, 100.0] {
                    if let Some(token) = &token {
                        let progress =
                            ProgressNotificationParam::new(token.clone(), step).with_total(100.0);
                        let _ = ctx.peer.notify_progress(progress).await;
                    }
                    if step < 100.0 {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                }
                CallToolResult::success(vec![ContentBlock::text("Progress test completed")])
            }
            other => {
                CallToolResult::error(vec![ContentBlock::text(format!("unknown tool: {other}"))])
            }
        }
    }
}

async fn host_guard(policy: HostPolicy, req: Request, next: Next) -> Response {
    if let Err(why) = policy.check(req.headers()) {
        return json_error(StatusCode::FORBIDDEN, why);
    }
    next.run(req).await
}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let bind = args
        .iter()
        .position(|a| a == "--bind")
        .and_then(|i| args.get(i + 1))
        .map(String::as_str)
        .unwrap_or("127.0.0.1:0");
    let listener = tokio::net::TcpListener::bind(bind).await?;
    let local = listener.local_addr()?;
    let service = McpHttpService::new(
        |_uri| McpServer::new(FixtureTools),
        McpHttpConfig::default(),
    );
    let policy = HostPolicy::new(local, &[], false);
    let app = Router::new()
        .route(
            "/mcp",
            any(move |req| {
                let service = service.clone();
                async move { service.handle(req).await }
            }),
        )
        .layer(from_fn(move |req, next| {
            host_guard(policy.clone(), req, next)
        }));
    println!("listening on http://{local}/mcp");
    let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
        let _ = tcp.set_nodelay(true);
    });
    axum::serve(listener, app).await
}
