//! One `rmcp::ServerHandler` for every Clawboo server: a [`ToolSet`] supplies the name, the
//! tool list and the calls; [`McpServer`] does the protocol.

use std::borrow::Cow;
use std::future::Future;
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, Implementation, InitializeRequestParams,
    InitializeResult, JsonObject, ListToolsResult, PaginatedRequestParams, ProtocolVersion,
    ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{Peer, RequestContext};
use rmcp::{ErrorData, RoleServer, ServerHandler};

use tracing::Instrument;

use crate::MCP_SERVER_VERSION;
use crate::metrics;

/// A server's tools and how to answer them.
pub trait ToolSet: Send + Sync + 'static {
    /// `serverInfo.name`, e.g. `clawboo-tasks`.
    fn server_name(&self) -> &'static str;

    /// The `tools/list` answer; may change at run time.
    fn tools(&self) -> Vec<Tool>;

    /// Whether the tool list can change during a session (advertised as `listChanged`).
    fn tool_list_changes(&self) -> bool {
        false
    }

    /// The identity a spawner or signed URL bound this server to, for the call's span;
    /// `None` when the tool set has none.
    fn binding(&self) -> Option<&crate::binding::Binding> {
        None
    }

    /// Answer one `tools/call`. Unknown names are answered by the tool set itself (as a
    /// tool-error), never as a protocol error.
    fn call<'a>(
        &'a self,
        name: &'a str,
        args: JsonObject,
        ctx: RequestContext<RoleServer>,
    ) -> impl Future<Output = rmcp::model::CallToolResult> + Send + 'a;

    /// Answer one `tools/call` with everything it carries, `requestState` and the client's
    /// `inputResponses` of a 2026-07-28 multi-round-trip retry included. A tool set that
    /// never asks the client for input answers through [`ToolSet::call`].
    fn respond(
        &self,
        request: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> impl Future<Output = CallToolResponse> + Send + '_ {
        async move {
            let args = request.arguments.unwrap_or_default();
            self.call(&request.name, args, ctx).await.into()
        }
    }
}

/// The protocol versions every server speaks: 2024-11-05 … 2025-11-25 through
/// `initialize`, and the initialize-less 2026-07-28 through `server/discover` and
/// per-request `_meta` (an `initialize` naming 2026-07-28 still negotiates 2025-11-25).
pub fn supported_protocol_versions() -> &'static [ProtocolVersion] {
    ProtocolVersion::known_up_to(&ProtocolVersion::V_2026_07_28)
}

/// An MCP server over a [`ToolSet`]. Cheap to clone; clones share the session's peer.
pub struct McpServer<T> {
    tools: Arc<T>,
    /// The client of the session this server serves, once it sent `initialize`.
    peer: Arc<OnceLock<Peer<RoleServer>>>,
}

impl<T> Clone for McpServer<T> {
    fn clone(&self) -> Self {
        McpServer {
            tools: Arc::clone(&self.tools),
            peer: Arc::clone(&self.peer),
        }
    }
}

impl<T: ToolSet> McpServer<T> {
    /// Serve `tools`.
    pub fn new(tools: T) -> Self {
        McpServer {
            tools: Arc::new(tools),
            peer: Arc::new(OnceLock::new()),
        }
    }

    /// The peer of the session this server answered `initialize` for (`None` before it
    /// did, and for a server of a stateless request): what a transport needs to run the
    /// session's later requests itself, with the context rmcp would give them.
    pub fn session_peer(&self) -> Option<Peer<RoleServer>> {
        self.peer.get().cloned()
    }

    /// The tool set behind this server.
    pub fn tool_set(&self) -> &T {
        &self.tools
    }
}

impl<T: ToolSet> ServerHandler for McpServer<T> {
    fn get_info(&self) -> ServerConfig {
        let capabilities = if self.tools.tool_list_changes() {
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .build()
        } else {
            ServerCapabilities::builder().enable_tools().build()
        };
        let mut info = InitializeResult::new(capabilities);
        info.protocol_version = ProtocolVersion::V_2025_11_25;
        info.server_info = Implementation::new(self.tools.server_name(), MCP_SERVER_VERSION);
        info
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(supported_protocol_versions())
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        // rmcp's default, plus keeping the peer for `session_peer`.
        context.peer.set_peer_info(request.clone());
        let _ = self.peer.set(context.peer);
        self.negotiate_initialize(&request)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.tools.tools()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        // The edge of every call, over stdio and HTTP alike: one span, one record.
        let server = self.tools.server_name();
        let server = server.strip_prefix("clawboo-").unwrap_or(server);
        let span = call_span(server, &request.name, &context, self.tools.binding());
        let started = Instant::now();
        let tool = metrics::enabled().then(|| request.name.clone());
        let response = self
            .tools
            .respond(request, context)
            .instrument(span.clone())
            .await;
        let elapsed = started.elapsed();
        if let Some(tool) = tool {
            metrics::record_call(server, &tool, &response, elapsed);
        }
        // An access log line (`RUST_LOG=clawboo_mcp=debug`) carrying the span's fields.
        tracing::debug!(parent: &span, elapsed_ms = elapsed.as_secs_f64() * 1e3, "tool call answered");
        Ok(response)
    }
}

/// The span of one tool call: which server, tool, protocol family, session, team and
/// agent (the bound ones; never an argument value). Its fields are filled only when some
/// subscriber listens (a trace exporter, or `RUST_LOG` at `info`), so a quiet process pays
/// one cached check.
fn call_span(
    server: &str,
    tool: &str,
    context: &RequestContext<RoleServer>,
    binding: Option<&crate::binding::Binding>,
) -> tracing::Span {
    let span = tracing::info_span!(
        "mcp.call",
        otel.name = tracing::field::Empty,
        otel.kind = "server",
        server,
        tool,
        family = tracing::field::Empty,
        session = tracing::field::Empty,
        team = tracing::field::Empty,
        agent = tracing::field::Empty,
    );
    if span.is_disabled() {
        return span;
    }
    span.record("otel.name", format!("{server}/{tool}"));
    span.record("family", metrics::ProtocolFamily::of(context).as_str());
    let session = context
        .extensions
        .get::<http::request::Parts>()
        .and_then(|parts| parts.headers.get("mcp-session-id"))
        .and_then(|id| id.to_str().ok());
    if let Some(session) = session {
        span.record("session", session);
    }
    if let Some(binding) = binding {
        if let Some(team) = &binding.team_id {
            span.record("team", team.as_str());
        }
        if let Some(agent) = &binding.agent_id {
            span.record("agent", agent.as_str());
        }
    }
    span
}
