//! Streamable HTTP for one MCP server, over rmcp's `StreamableHttpService`, wrapped so the
//! session rules and error answers are the contract's (SPEC §7), not rmcp's defaults:
//!
//! - a POST without `mcp-session-id` must be `initialize`; it builds a fresh server from
//!   the factory, which sees that request's URI (so the session is bound from its URL);
//!   anything else → 400 JSON-RPC error (id null, -32000)
//!   `No valid session; send an initialize request first.`;
//! - GET/DELETE without a session id → 400 `Invalid or missing MCP session id.`;
//! - an unknown or expired session id → 404 with the same body;
//! - malformed JSON → 400 with -32700; a body that is JSON but not JSON-RPC → 400 -32600;
//! - a transport failure → 500 `{"error": …}`;
//! - `MCP-Protocol-Version` must be one of the versions this server speaks (the
//!   initialize-less 2026 protocol is not offered);
//! - a request answered at once is answered with one JSON body, not rmcp's SSE stream
//!   (within 250 ms, and only when the answer is the first message).
//!
//! Host/Origin checks are done once for all of `/api/*` by the guard, so rmcp's own are off.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderValue, Method, Request, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use clawboo_mcp::protocol::plain_tools_call_id;
use http_body_util::BodyExt;
use rmcp::ServerHandler;
use rmcp::model::{ClientJsonRpcMessage, ClientRequest};
use rmcp::transport::streamable_http_server::session::SessionManager;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::json;

/// The protocol versions served (all negotiate through `initialize`).
pub const SUPPORTED_PROTOCOL_VERSIONS: [&str; 4] =
    ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];

/// Body text of a non-initialize POST without a (valid) session.
pub const NO_SESSION: &str = "No valid session; send an initialize request first.";
/// Body text of a GET/DELETE without a (valid) session.
pub const INVALID_SESSION: &str = "Invalid or missing MCP session id.";

const SESSION_HEADER: &str = "mcp-session-id";
const PROTOCOL_HEADER: &str = "mcp-protocol-version";

/// Settings of the MCP HTTP endpoints.
#[derive(Debug, Clone, Copy)]
pub struct McpHttpConfig {
    /// A session with no traffic for this long is closed (its id then answers 404).
    pub session_idle: Duration,
    /// Largest accepted POST body, in bytes.
    pub max_body_bytes: usize,
    /// Interval of SSE keep-alive comments on open streams.
    pub sse_keep_alive: Duration,
}

impl Default for McpHttpConfig {
    fn default() -> Self {
        McpHttpConfig {
            session_idle: Duration::from_secs(30 * 60),
            max_body_bytes: 1024 * 1024,
            sse_keep_alive: Duration::from_secs(15),
        }
    }
}

/// Builds a server for a new session from the `initialize` request's URI.
type Factory<S> = Arc<dyn Fn(&Uri) -> S + Send + Sync>;

/// One MCP server's Streamable HTTP endpoint with our session rules.
pub struct McpHttpService<S> {
    manager: Arc<LocalSessionManager>,
    rmcp_config: StreamableHttpServerConfig,
    factory: Factory<S>,
    /// Serves requests of existing sessions (its own factory is never used for a session).
    shared: StreamableHttpService<S, LocalSessionManager>,
    max_body_bytes: usize,
}

impl<S> Clone for McpHttpService<S> {
    fn clone(&self) -> Self {
        McpHttpService {
            manager: self.manager.clone(),
            rmcp_config: self.rmcp_config.clone(),
            factory: self.factory.clone(),
            shared: self.shared.clone(),
            max_body_bytes: self.max_body_bytes,
        }
    }
}

/// A JSON-RPC error response (`id: null`).
pub fn jsonrpc_error(status: StatusCode, code: i64, message: &str) -> Response {
    let body = json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": { "code": code, "message": message },
    });
    (status, axum::Json(body)).into_response()
}

/// -32000: the transport's own refusals (sessions, unsupported versions).
const SERVER_ERROR: i64 = -32000;
const PARSE_ERROR: i64 = -32700;
const INVALID_REQUEST: i64 = -32600;

impl<S: ServerHandler + Send + 'static> McpHttpService<S> {
    /// An endpoint whose sessions are served by servers from `factory`.
    pub fn new(
        factory: impl Fn(&Uri) -> S + Send + Sync + 'static,
        config: McpHttpConfig,
    ) -> McpHttpService<S> {
        let mut manager = LocalSessionManager::default();
        manager.session_config.keep_alive = Some(config.session_idle);
        let manager = Arc::new(manager);
        let rmcp_config = StreamableHttpServerConfig::default()
            .disable_allowed_hosts()
            .disable_allowed_origins()
            .with_sse_keep_alive(Some(config.sse_keep_alive))
            .with_max_request_body_bytes(config.max_body_bytes);
        let factory: Factory<S> = Arc::new(factory);
        let unbound = factory.clone();
        let shared = StreamableHttpService::new(
            move || Ok(unbound(&Uri::default())),
            manager.clone(),
            rmcp_config.clone(),
        );
        McpHttpService {
            manager,
            rmcp_config,
            factory,
            shared,
            max_body_bytes: config.max_body_bytes,
        }
    }

    /// How many sessions are open.
    pub async fn session_count(&self) -> usize {
        self.manager.sessions.read().await.len()
    }

    async fn has_session(&self, id: &str) -> bool {
        self.manager
            .has_session(&id.to_owned().into())
            .await
            .unwrap_or(false)
    }

    /// Answer one HTTP request.
    pub async fn handle(&self, mut req: Request<Body>) -> Response {
        // The guard has already vetted `Host`; rmcp refuses a request without one (an
        // HTTP/1.0 or in-process request), so name loopback for it.
        if !req.headers().contains_key(header::HOST) {
            req.headers_mut()
                .insert(header::HOST, HeaderValue::from_static("localhost"));
        }
        if let Some(version) = req.headers().get(PROTOCOL_HEADER) {
            let known = version
                .to_str()
                .is_ok_and(|v| SUPPORTED_PROTOCOL_VERSIONS.contains(&v));
            if !known {
                let text = format!(
                    "Unsupported MCP-Protocol-Version; this server speaks {}.",
                    SUPPORTED_PROTOCOL_VERSIONS.join(", ")
                );
                return jsonrpc_error(StatusCode::BAD_REQUEST, SERVER_ERROR, &text);
            }
        }
        let session = req
            .headers()
            .get(SESSION_HEADER)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        match *req.method() {
            Method::POST => self.handle_post(req, session).await,
            Method::GET | Method::DELETE => {
                let Some(id) = session else {
                    return jsonrpc_error(StatusCode::BAD_REQUEST, SERVER_ERROR, INVALID_SESSION);
                };
                if !self.has_session(&id).await {
                    return jsonrpc_error(StatusCode::NOT_FOUND, SERVER_ERROR, INVALID_SESSION);
                }
                let is_delete = req.method() == Method::DELETE;
                let response = finish(self.shared.handle(req).await).await;
                if is_delete && response.status() == StatusCode::ACCEPTED {
                    // The session is gone: say 200, which every client reads as done
                    // (some log rmcp's 202 as a failed termination).
                    return StatusCode::OK.into_response();
                }
                response
            }
            _ => {
                let mut r = crate::error::json_error(
                    StatusCode::METHOD_NOT_ALLOWED,
                    "method not allowed: use POST for JSON-RPC, GET for the session stream, DELETE to end the session",
                );
                r.headers_mut()
                    .insert(header::ALLOW, HeaderValue::from_static("GET, POST, DELETE"));
                r
            }
        }
    }

    async fn handle_post(&self, req: Request<Body>, session: Option<String>) -> Response {
        let (mut parts, body) = req.into_parts();
        let bytes = match axum::body::to_bytes(body, self.max_body_bytes).await {
            Ok(b) => b,
            Err(_) => {
                let text = format!(
                    "Request body too large or unreadable (limit {} bytes).",
                    self.max_body_bytes
                );
                return jsonrpc_error(StatusCode::PAYLOAD_TOO_LARGE, INVALID_REQUEST, &text);
            }
        };
        let value: serde_json::Value = match serde_json::from_slice(&bytes) {
            Ok(v) => v,
            Err(e) => {
                return jsonrpc_error(
                    StatusCode::BAD_REQUEST,
                    PARSE_ERROR,
                    &format!("Parse error: {e}"),
                );
            }
        };
        if value.is_array() {
            return jsonrpc_error(
                StatusCode::BAD_REQUEST,
                INVALID_REQUEST,
                "Invalid Request: JSON-RPC batches are not supported; send one message per POST.",
            );
        }
        // A plain `tools/call` (nearly every POST of a busy session) is a valid message
        // and no `initialize`; anything else is checked against rmcp's message type here,
        // so a bad one gets our JSON-RPC error rather than rmcp's plain-text answer.
        let is_plain_call =
            matches!(&value, serde_json::Value::Object(o) if plain_tools_call_id(o).is_some());
        let is_initialize = if is_plain_call {
            false
        } else {
            match serde_json::from_value::<ClientJsonRpcMessage>(value) {
                Ok(message) => matches!(
                    &message,
                    ClientJsonRpcMessage::Request(r) if matches!(r.request, ClientRequest::InitializeRequest(_))
                ),
                Err(e) => {
                    return jsonrpc_error(
                        StatusCode::BAD_REQUEST,
                        INVALID_REQUEST,
                        &format!("Invalid Request: not a JSON-RPC 2.0 message ({e})"),
                    );
                }
            }
        };
        // rmcp insists on an Accept header naming both JSON and SSE; a client that sent
        // none (or */*) accepts both, so say so on its behalf.
        let accept_any = parts
            .headers
            .get(header::ACCEPT)
            .and_then(|v| v.to_str().ok())
            .is_none_or(|v| v.trim() == "*/*");
        if accept_any {
            parts.headers.insert(
                header::ACCEPT,
                HeaderValue::from_static("application/json, text/event-stream"),
            );
        }
        let req = Request::from_parts(parts, Body::from(bytes));
        match session {
            None if is_initialize => {
                let factory = self.factory.clone();
                let uri = req.uri().clone();
                let service = StreamableHttpService::new(
                    move || Ok(factory(&uri)),
                    self.manager.clone(),
                    self.rmcp_config.clone(),
                );
                finish(service.handle(req).await).await
            }
            None => jsonrpc_error(StatusCode::BAD_REQUEST, SERVER_ERROR, NO_SESSION),
            Some(id) => {
                if !self.has_session(&id).await {
                    return jsonrpc_error(StatusCode::NOT_FOUND, SERVER_ERROR, NO_SESSION);
                }
                json_when_quick(finish(self.shared.handle(req).await).await).await
            }
        }
    }
}

/// How long a request's answer may take and still be sent as one JSON body.
const JSON_ANSWER_WITHIN: Duration = Duration::from_millis(250);

/// rmcp answers every request POST of a session with an SSE stream: a priming event, the
/// answer, the end. When the answer is the stream's first message and comes within
/// [`JSON_ANSWER_WITHIN`], send it instead as one `application/json` body, which the MCP
/// specification allows for any request: one write instead of two and no SSE framing for
/// the client to parse (about a tenth of a quick call's cost on both sides). A call that
/// sends anything first (progress, a log message, a request to the client) or takes
/// longer keeps its SSE stream, with every event seen so far at its head.
async fn json_when_quick(response: Response) -> Response {
    let is_sse = response.status() == StatusCode::OK
        && response
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
    if !is_sse {
        return response;
    }
    let (parts, mut body) = response.into_parts();
    let mut seen = bytes::BytesMut::new();
    let mut scanned = 0;
    let deadline = tokio::time::sleep(JSON_ANSWER_WITHIN);
    tokio::pin!(deadline);
    loop {
        let frame = tokio::select! {
            frame = body.frame() => frame,
            () = &mut deadline => break,
        };
        match frame {
            Some(Ok(frame)) => match frame.into_data() {
                Ok(data) => seen.extend_from_slice(&data),
                Err(_) => continue,
            },
            Some(Err(_)) | None => break,
        }
        // Look at each whole event (they end with a blank line) not yet looked at.
        while let Some(end) = find_event_end(&seen[scanned..]) {
            let event = &seen[scanned..scanned + end];
            scanned += end;
            match sse_data(event) {
                None => continue,
                Some(data) if is_response(&data) => {
                    let mut answer = Response::new(Body::from(data));
                    answer.headers_mut().insert(
                        header::CONTENT_TYPE,
                        HeaderValue::from_static("application/json"),
                    );
                    return answer;
                }
                Some(_) => return resume_sse(parts, seen.freeze(), body),
            }
        }
    }
    resume_sse(parts, seen.freeze(), body)
}

/// The SSE response again: the bytes already read, then the rest of the stream.
fn resume_sse(parts: http::response::Parts, head: Bytes, rest: Body) -> Response {
    use futures::StreamExt;
    let head = futures::stream::once(async move { Ok::<_, axum::Error>(head) });
    Response::from_parts(
        parts,
        Body::from_stream(head.chain(rest.into_data_stream())),
    )
}

// The events are read here rather than with an SSE decoder crate because the bytes read
// must be replayed untouched when the stream is kept, and only rmcp's own framing needs
// reading (`data:` lines, `\n` line ends, an event ended by a blank line); anything else
// is never taken for an answer, so such a stream simply stays SSE.

/// Length of the first whole SSE event in `bytes` (through its blank line), if any.
fn find_event_end(bytes: &[u8]) -> Option<usize> {
    bytes.windows(2).position(|w| w == b"\n\n").map(|i| i + 2)
}

/// An SSE event's data (its `data:` lines joined by newlines), or `None` for an event
/// without data: a comment (keep-alive) or rmcp's priming event (`data:` with nothing).
fn sse_data(event: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(event).ok()?;
    let mut data: Option<String> = None;
    for line in text.lines() {
        if let Some(value) = line.strip_prefix("data:") {
            let value = value.strip_prefix(' ').unwrap_or(value);
            match data.as_mut() {
                Some(d) => {
                    d.push('\n');
                    d.push_str(value);
                }
                None => data = Some(value.to_owned()),
            }
        }
    }
    data.filter(|d| !d.is_empty())
}

/// Whether a JSON-RPC message is a response (a result or an error), not a request or a
/// notification the server sends first.
fn is_response(message: &str) -> bool {
    #[derive(serde::Deserialize)]
    struct Shape {
        method: Option<serde::de::IgnoredAny>,
        result: Option<serde::de::IgnoredAny>,
        error: Option<serde::de::IgnoredAny>,
    }
    serde_json::from_str::<Shape>(message)
        .is_ok_and(|m| m.method.is_none() && (m.result.is_some() || m.error.is_some()))
}

/// Turn rmcp's plain-text error answers into JSON: 5xx → `{"error": …}`, 4xx → a JSON-RPC
/// error body. Successful and JSON answers (and SSE streams) pass through untouched.
async fn finish<B>(response: http::Response<B>) -> Response
where
    B: http_body::Body<Data = Bytes, Error = Infallible> + Send + 'static,
{
    let status = response.status();
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if status.as_u16() < 400 || is_json {
        return response.map(Body::new);
    }
    let text = match response.into_body().collect().await {
        Ok(collected) => String::from_utf8_lossy(&collected.to_bytes()).into_owned(),
        Err(never) => match never {},
    };
    if status.is_server_error() {
        tracing::error!("MCP transport failure: {text}");
        crate::error::json_error(status, text)
    } else {
        jsonrpc_error(status, SERVER_ERROR, &text)
    }
}
