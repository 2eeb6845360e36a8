//! The transport's bare rate: an `echo` tool (no store, no state) served by our own
//! `McpServer` through the same stdio front and Streamable HTTP service as the product's
//! servers. It lives here, not in any product tool list. Its answer has the peer's shape:
//! `Echo: <message>`.

use std::net::SocketAddr;

use axum::Router;
use axum::routing::any;
use clawboo_mcp::protocol::{Effect, parse_args, tool};
use clawboo_mcp::server::{McpServer, ToolSet};
use clawboo_server::mcp_http::{McpHttpConfig, McpHttpService};
use rmcp::RoleServer;
use rmcp::model::{CallToolResult, ContentBlock, JsonObject, Tool};
use rmcp::service::RequestContext;
use schemars::JsonSchema;
use serde::Deserialize;

/// `echo`'s arguments.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct EchoArgs {
    /// Message to echo.
    message: String,
}

/// A tool set with the one `echo` tool.
pub struct EchoTools;

impl ToolSet for EchoTools {
    fn server_name(&self) -> &'static str {
        "clawboo-bench-echo"
    }

    fn tools(&self) -> Vec<Tool> {
        vec![tool::<EchoArgs>(
            "echo",
            "Echo",
            Effect::Read,
            "Echoes back the input string.",
        )]
    }

    async fn call<'a>(
        &'a self,
        name: &'a str,
        args: JsonObject,
        _ctx: RequestContext<RoleServer>,
    ) -> CallToolResult {
        if name != "echo" {
            return clawboo_mcp::protocol::unknown_tool(name);
        }
        match parse_args::<EchoArgs>(args) {
            Ok(a) => {
                CallToolResult::success(vec![ContentBlock::text(format!("Echo: {}", a.message))])
            }
            Err(refusal) => refusal,
        }
    }
}

/// Serve echo over this process's stdin/stdout (single-threaded, as the stdio bins run).
pub fn serve_stdio() -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(clawboo_mcp::stdio::serve_stdio(McpServer::new(EchoTools)))?;
    Ok(())
}

/// Serve echo over Streamable HTTP at `http://<bind>/mcp` (the service `clawboo serve`
/// mounts, on the same multi-threaded runtime); prints `listening on <url>` once bound.
pub fn serve_http(bind: SocketAddr) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(bind).await?;
        let local = listener.local_addr()?;
        let service =
            McpHttpService::new(|_uri| McpServer::new(EchoTools), McpHttpConfig::default());
        let app = Router::new().route(
            "/mcp",
            any(move |req| {
                let service = service.clone();
                async move { service.handle(req).await }
            }),
        );
        println!("listening on http://{local}/mcp");
        // As `clawboo serve` does: without TCP_NODELAY a response written in pieces waits
        // on the peer's delayed ACK.
        let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
            let _ = tcp.set_nodelay(true);
        });
        axum::serve(listener, app).await?;
        Ok(())
    })
}
