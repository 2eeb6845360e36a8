//! Streamable HTTP for one MCP server, over rmcp's `StreamableHttpService`, wrapped so the
//! session rules and error answers are the contract's (SPEC §7), not rmcp's defaults:
//!
//! - a POST without `mcp-session-id` must be `initialize` (or a 2026-07-28 request, see
//!   below); it builds a fresh server from
//!   the factory, which sees that request's URI (so the session is bound from its URL)
//!   and may refuse it (a URL whose scope signature does not verify → 403, -32001);
//!   anything else → 400 JSON-RPC error (id null, -32000)
//!   `No valid session; send an initialize request first.`;
//! - sessions are capped: a new one closes the oldest idle session, and with none idle
//!   `initialize` gets 503 (-32000) saying what to do;
//! - GET/DELETE without a session id → 400 `Invalid or missing MCP session id.`; with a
//!   2026-07-28 `MCP-Protocol-Version` (no sessions, no GET stream) → 405, `Allow: POST`;
//! - an unknown or expired session id → 404 with the same body;
//! - malformed JSON → 400 with -32700; a body that is JSON but not JSON-RPC → 400 -32600;
//! - a transport failure → 500 `{"error": …}`;
//! - `MCP-Protocol-Version` must be one of the versions this server speaks;
//! - a request of the initialize-less 2026-07-28 protocol (`server/discover`, or a request
//!   whose `_meta` or `MCP-Protocol-Version` names it) has no session: it is served by a
//!   server of its own, built from the factory for that request's URI as an `initialize`
//!   is, so its own URL's signature binds it and any replica on the same store can answer
//!   it; a plain answer comes back as one JSON body, one that streams first as SSE;
//! - a request of a session goes straight to its session (`mcp_sessions`: our own
//!   `SessionManager`, which rmcp's service uses too) once rmcp's own POST checks are
//!   known to pass it; once the session is initialized its server is called right here
//!   (`Sessions::start_call`), with the context rmcp's loop would give it, rather than
//!   through rmcp's loop (a channel, a task of its own, and back); it is answered with
//!   one JSON body when its answer is the first message and comes within 250 ms, else
//!   with the stream as SSE.
//!
//! Host/Origin checks are done once for all of `/api/*` by the guard, so rmcp's own are off.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use std::pin::Pin;

use axum::http::{HeaderMap, HeaderValue, Method, Request, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use clawboo_mcp::attach::ScopeRefused;
use clawboo_mcp::protocol::plain_tools_call;
use clawboo_mcp::server::{McpServer, ToolSet, supported_protocol_versions};
use futures::future::BoxFuture;
use futures::{Stream, StreamExt};
use http_body_util::BodyExt;
use rmcp::model::{
    ClientJsonRpcMessage, ClientRequest, GetExtensions, GetMeta, JsonRpcMessage, JsonRpcRequest,
    ProtocolVersion, ServerJsonRpcMessage, ServerResult,
};
use rmcp::service::{Peer, RequestContext};
use rmcp::transport::common::server_side_http::ServerSseMessage;
use rmcp::transport::streamable_http_server::SessionId;
use rmcp::transport::streamable_http_server::session::SessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler, Service};
use serde_json::json;
use sse_stream::{KeepAlive, Sse, SseBody};

use crate::mcp_sessions::{DirectCall, Sessions, StartedCall};

/// Body text of a non-initialize POST without a (valid) session.
pub const NO_SESSION: &str = "No valid session; send an initialize request first.";
/// Body text of a GET/DELETE without a (valid) session.
pub const INVALID_SESSION: &str = "Invalid or missing MCP session id.";
/// Body text of a GET/DELETE at protocol 2026-07-28 (HTTP 405).
pub const STATELESS_METHOD: &str = "Method Not Allowed: protocol 2026-07-28 has no session to stream or end; POST each request (its progress streams in its own answer).";

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
    /// Most sessions open at once (each holds a server and its state).
    pub max_sessions: usize,
}

impl Default for McpHttpConfig {
    fn default() -> Self {
        McpHttpConfig {
            session_idle: Duration::from_secs(30 * 60),
            max_body_bytes: 1024 * 1024,
            sse_keep_alive: Duration::from_secs(15),
            max_sessions: 1000,
        }
    }
}

/// How long a client whose SSE stream dropped waits before it resumes (rmcp's default).
const SSE_RETRY: Duration = Duration::from_secs(3);

/// Builds a server for a new session from the `initialize` request's URI, or refuses it.
type Factory<S> = Arc<dyn Fn(&Uri) -> Result<S, ScopeRefused> + Send + Sync>;

/// A server an endpoint serves sessions with.
pub trait SessionServer: ServerHandler + Clone + Send + Sync + 'static {
    /// After this server (or a clone) answered a session's `initialize`: the handle
    /// through which the HTTP side runs the session's later requests itself, without
    /// rmcp's service loop between (`None`: every request goes through rmcp's loop).
    fn direct_calls(&self) -> Option<Arc<dyn DirectCall>> {
        None
    }
}

impl<T: ToolSet> SessionServer for McpServer<T> {
    fn direct_calls(&self) -> Option<Arc<dyn DirectCall>> {
        let peer = self.session_peer()?;
        Some(Arc::new(Direct {
            server: self.clone(),
            peer,
        }))
    }
}

/// A session's server and client, for [`DirectCall`].
struct Direct<S> {
    server: S,
    peer: Peer<RoleServer>,
}

impl<S: ServerHandler + Clone + Sync> DirectCall for Direct<S> {
    fn peer(&self) -> Peer<RoleServer> {
        self.peer.clone()
    }

    fn call(
        &self,
        request: ClientRequest,
        context: RequestContext<RoleServer>,
    ) -> BoxFuture<'static, Result<ServerResult, ErrorData>> {
        let server = self.server.clone();
        Box::pin(async move { server.handle_request(request, context).await })
    }
}

/// One MCP server's Streamable HTTP endpoint with our session rules.
///
/// Cloned for every request (axum clones a route's handler and what it captures), so the
/// endpoint's state sits behind one `Arc`: a clone is one reference count, not two rmcp
/// configurations, their cancellation tokens and a service.
pub struct McpHttpService<S> {
    endpoint: Arc<Endpoint<S>>,
}

/// What [`McpHttpService`] shares between its clones.
struct Endpoint<S> {
    manager: Arc<Sessions>,
    rmcp_config: StreamableHttpServerConfig,
    /// rmcp's settings for a 2026-07-28 request: a plain answer as one JSON body.
    stateless_config: StreamableHttpServerConfig,
    factory: Factory<S>,
    /// Serves requests of existing sessions (its own factory is never used for a session).
    shared: StreamableHttpService<S, Sessions>,
    max_body_bytes: usize,
}

impl<S> Clone for McpHttpService<S> {
    fn clone(&self) -> Self {
        McpHttpService {
            endpoint: self.endpoint.clone(),
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
/// An attach URL whose scope signature does not verify (HTTP 403).
pub const INVALID_SCOPE: i64 = -32001;

impl<S: SessionServer> McpHttpService<S> {
    /// An endpoint whose sessions are served by servers from `factory`, every URL accepted.
    pub fn new(
        factory: impl Fn(&Uri) -> S + Send + Sync + 'static,
        config: McpHttpConfig,
    ) -> McpHttpService<S> {
        McpHttpService::checked(move |uri| Ok(factory(uri)), config)
    }

    /// An endpoint whose sessions are served by servers from `factory`, which refuses an
    /// `initialize` whose URL it does not accept.
    pub fn checked(
        factory: impl Fn(&Uri) -> Result<S, ScopeRefused> + Send + Sync + 'static,
        config: McpHttpConfig,
    ) -> McpHttpService<S> {
        let rmcp_config = StreamableHttpServerConfig::default()
            .disable_allowed_hosts()
            .disable_allowed_origins()
            .with_sse_keep_alive(Some(config.sse_keep_alive))
            .with_sse_retry(Some(SSE_RETRY))
            .with_max_request_body_bytes(config.max_body_bytes);
        let manager = Arc::new(Sessions::new(
            config.session_idle,
            SSE_RETRY,
            config.max_sessions,
        ));
        let factory: Factory<S> = Arc::new(factory);
        let shared = StreamableHttpService::new(
            // A session already has its server and a stateless request gets its own: an
            // unbound server from here would ignore the request's URL.
            || {
                Err(std::io::Error::other(
                    "this service serves existing sessions only",
                ))
            },
            manager.clone(),
            rmcp_config.clone(),
        );
        McpHttpService {
            endpoint: Arc::new(Endpoint {
                manager,
                stateless_config: rmcp_config.clone().with_json_response(true),
                rmcp_config,
                factory,
                shared,
                max_body_bytes: config.max_body_bytes,
            }),
        }
    }

    /// How many sessions are open.
    pub async fn session_count(&self) -> usize {
        self.endpoint.manager.len()
    }

    async fn has_session(&self, id: &str) -> bool {
        self.endpoint
            .manager
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
            let supported = supported_protocol_versions();
            let known = version
                .to_str()
                .is_ok_and(|v| supported.iter().any(|s| s.as_str() == v));
            if !known {
                let names: Vec<&str> = supported.iter().map(ProtocolVersion::as_str).collect();
                let text = format!(
                    "Unsupported MCP-Protocol-Version; this server speaks {}.",
                    names.join(", ")
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
            Method::GET | Method::DELETE if speaks_no_initialize(req.headers()) => {
                // 2026-07-28 has no sessions and no standalone stream: only POST serves it
                // (as rmcp answers a stateless GET/DELETE).
                let mut r = jsonrpc_error(
                    StatusCode::METHOD_NOT_ALLOWED,
                    SERVER_ERROR,
                    STATELESS_METHOD,
                );
                r.headers_mut()
                    .insert(header::ALLOW, HeaderValue::from_static("POST"));
                r
            }
            Method::GET | Method::DELETE => {
                let Some(id) = session else {
                    return jsonrpc_error(StatusCode::BAD_REQUEST, SERVER_ERROR, INVALID_SESSION);
                };
                if !self.has_session(&id).await {
                    return jsonrpc_error(StatusCode::NOT_FOUND, SERVER_ERROR, INVALID_SESSION);
                }
                let is_delete = req.method() == Method::DELETE;
                let response = rmcp_answer(&self.endpoint.shared, req).await;
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
        let bytes = match axum::body::to_bytes(body, self.endpoint.max_body_bytes).await {
            Ok(b) => b,
            Err(_) => {
                let text = format!(
                    "Request body too large or unreadable (limit {} bytes).",
                    self.endpoint.max_body_bytes
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
        // A plain `tools/call` (nearly every POST of a busy session) is built as rmcp's
        // message directly; anything else is checked against rmcp's message type here, so a
        // bad one gets our JSON-RPC error rather than rmcp's plain-text answer.
        let message = match plain_tools_call(value) {
            Ok(call) => call,
            Err(value) => match serde_json::from_value::<ClientJsonRpcMessage>(value) {
                Ok(message) => message,
                Err(e) => {
                    return jsonrpc_error(
                        StatusCode::BAD_REQUEST,
                        INVALID_REQUEST,
                        &format!("Invalid Request: not a JSON-RPC 2.0 message ({e})"),
                    );
                }
            },
        };
        let is_initialize = matches!(
            &message,
            ClientJsonRpcMessage::Request(r) if matches!(r.request, ClientRequest::InitializeRequest(_))
        );
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
        let stateless = is_stateless(&message, &parts.headers);
        let req = Request::from_parts(parts, Body::from(bytes));
        if stateless {
            let server = match (self.endpoint.factory)(req.uri()) {
                Ok(server) => server,
                Err(refused) => return scope_refused(&refused),
            };
            let service = one_server_service(
                server,
                &self.endpoint.manager,
                &self.endpoint.stateless_config,
            );
            return rmcp_answer(&service, req).await;
        }
        match session {
            None if is_initialize => {
                let server = match (self.endpoint.factory)(req.uri()) {
                    Ok(server) => server,
                    Err(refused) => return scope_refused(&refused),
                };
                if let Err(e) = self.endpoint.manager.make_room() {
                    tracing::warn!("MCP initialize refused: {e}");
                    let text = format!(
                        "Too many MCP sessions: {e}, none idle; end sessions you no longer use (DELETE with their mcp-session-id) or retry in a while."
                    );
                    let mut response =
                        jsonrpc_error(StatusCode::SERVICE_UNAVAILABLE, SERVER_ERROR, &text);
                    response
                        .headers_mut()
                        .insert(header::RETRY_AFTER, HeaderValue::from_static("30"));
                    return response;
                }
                let session_server = server.clone();
                let service =
                    one_server_service(server, &self.endpoint.manager, &self.endpoint.rmcp_config);
                let response = rmcp_answer(&service, req).await;
                let session = response
                    .headers()
                    .get(SESSION_HEADER)
                    .and_then(|v| v.to_str().ok());
                if let (Some(id), Some(direct)) = (session, session_server.direct_calls()) {
                    self.endpoint
                        .manager
                        .attach_direct(&id.to_owned().into(), direct);
                }
                response
            }
            None => jsonrpc_error(StatusCode::BAD_REQUEST, SERVER_ERROR, NO_SESSION),
            Some(id) => {
                if !self.has_session(&id).await {
                    return jsonrpc_error(StatusCode::NOT_FOUND, SERVER_ERROR, NO_SESSION);
                }
                match direct_request(message, req.headers()) {
                    Some(request) => self.answer_in_session(id.into(), request, req).await,
                    None => rmcp_answer(&self.endpoint.shared, req).await,
                }
            }
        }
    }

    /// Hand a request straight to its session and answer from the session's stream of
    /// messages for it: one JSON body when the answer comes first and within
    /// [`JSON_ANSWER_WITHIN`], else the stream as SSE (the same events rmcp would send).
    async fn answer_in_session(
        &self,
        session: SessionId,
        mut request: JsonRpcRequest<ClientRequest>,
        req: Request<Body>,
    ) -> Response {
        // As rmcp does: the handler may read the HTTP request's head from the extensions.
        let (parts, _) = req.into_parts();
        request.request.extensions_mut().insert(parts);
        let keep_alive = self.endpoint.rmcp_config.sse_keep_alive;
        let request = match self.endpoint.manager.start_call(&session, request) {
            Ok(Ok(started)) => return Box::pin(answer_call(started, keep_alive)).await,
            Ok(Err(request)) => request,
            Err(e) => return session_refused(&e),
        };
        // A session without a direct handle: through rmcp's loop. Boxed, as every rarely
        // taken await of this path, so that the route's future stays small (it is moved
        // several times a request).
        let message = ClientJsonRpcMessage::Request(request);
        Box::pin(async move {
            match self.endpoint.manager.create_stream(&session, message).await {
                Ok(stream) => answer_from_stream(stream, keep_alive).await,
                Err(e) => session_refused(&e),
            }
        })
        .await
    }
}

/// rmcp's answer to a request it serves itself (`initialize`, notifications, GET, DELETE,
/// stateless requests), boxed: rmcp's future is large and rarely awaited.
fn rmcp_answer<'a, S: ServerHandler + Send + 'static>(
    service: &'a StreamableHttpService<S, Sessions>,
    req: Request<Body>,
) -> Pin<Box<dyn Future<Output = Response> + Send + 'a>> {
    Box::pin(async move { finish(service.handle(req).await).await })
}

/// The 500 of a session that could not take a request.
fn session_refused(e: &crate::mcp_sessions::SessionError) -> Response {
    tracing::error!(error = %e, "MCP session could not take a request");
    crate::error::json_error(
        StatusCode::INTERNAL_SERVER_ERROR,
        format!(
            "the MCP session could not take the request ({e}); retry it, or start a new session with initialize"
        ),
    )
}

/// A call run by the HTTP side; if it is not done when its answer leaves (as SSE) or when
/// the client goes away, it finishes on a task of its own, so a call always runs to its
/// end as it would in rmcp's loop.
struct RunToEnd(Option<BoxFuture<'static, ()>>);

impl RunToEnd {
    fn detach(&mut self) {
        if let Some(call) = self.0.take()
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            drop(runtime.spawn(call));
        }
    }
}

impl Drop for RunToEnd {
    fn drop(&mut self) {
        self.detach();
    }
}

/// Run a call started directly and answer from its stream, as [`answer_from_stream`] does:
/// the call is polled here, so a quick answer costs no task and no thread hand-off.
async fn answer_call(started: StartedCall, keep_alive: Option<Duration>) -> Response {
    let StartedCall { stream, call } = started;
    let mut call = RunToEnd(Some(call));
    let mut stream = tokio_stream::wrappers::ReceiverStream::new(stream);
    let mut head = Vec::new();
    let deadline = tokio::time::sleep(JSON_ANSWER_WITHIN);
    tokio::pin!(deadline);
    loop {
        let item = tokio::select! {
            biased;
            () = async { call.0.as_mut().expect("polled only while running").await }, if call.0.is_some() => {
                call.0 = None;
                continue;
            }
            item = stream.next() => item,
            () = &mut deadline => break,
        };
        let Some(item) = item else { break };
        match read_head(item, &mut head) {
            HeadStep::More => {}
            HeadStep::Json(answer) => return answer,
            HeadStep::Sse => break,
        }
    }
    call.detach();
    sse_answer(futures::stream::iter(head).chain(stream), keep_alive)
}

/// The 403 refusing a URL whose scope signature does not verify.
fn scope_refused(refused: &ScopeRefused) -> Response {
    jsonrpc_error(StatusCode::FORBIDDEN, INVALID_SCOPE, &refused.to_string())
}

/// rmcp's service for one request (an `initialize` or a stateless request): rmcp asks its
/// factory once, for that request, and gets `server`.
fn one_server_service<S: ServerHandler + Send + 'static>(
    server: S,
    manager: &Arc<Sessions>,
    config: &StreamableHttpServerConfig,
) -> StreamableHttpService<S, Sessions> {
    let server = parking_lot::Mutex::new(Some(server));
    StreamableHttpService::new(
        move || {
            server
                .lock()
                .take()
                .ok_or_else(|| std::io::Error::other("one server per request"))
        },
        manager.clone(),
        config.clone(),
    )
}

/// Whether rmcp serves `message` without a session, as the 2026-07-28 protocol has none
/// (the routing rmcp applies, so the request reaches rmcp's stateless path with a server
/// built for it): `server/discover`, a request whose `_meta` carries the protocol fields,
/// or any message whose version (`_meta` first, else the header) has no `initialize`.
/// rmcp answers a malformed one (a discover without `_meta`, a header that contradicts
/// the `_meta`) with its JSON-RPC error.
fn is_stateless(message: &ClientJsonRpcMessage, headers: &HeaderMap) -> bool {
    let mut version = None;
    if let ClientJsonRpcMessage::Request(request) = message {
        match &request.request {
            ClientRequest::InitializeRequest(_) => return false,
            ClientRequest::DiscoverRequest(_) => return true,
            other => {
                let meta = other.get_meta();
                if meta
                    .missing_required_keys(&ProtocolVersion::V_2026_07_28)
                    .is_empty()
                {
                    return true;
                }
                version = meta.protocol_version();
            }
        }
    }
    let header = headers.get(PROTOCOL_HEADER).and_then(|v| v.to_str().ok());
    version
        .as_ref()
        .map(ProtocolVersion::as_str)
        .or(header)
        .is_some_and(has_no_initialize)
}

/// Whether protocol `version` has no `initialize` (2026-07-28 and later).
fn has_no_initialize(version: &str) -> bool {
    version >= ProtocolVersion::NO_INITIALIZE.as_str()
}

/// Whether the `MCP-Protocol-Version` header names a version without `initialize` (and so
/// without sessions). The header was checked to be a supported version in
/// [`McpHttpService::handle`].
fn speaks_no_initialize(headers: &HeaderMap) -> bool {
    headers
        .get(PROTOCOL_HEADER)
        .and_then(|v| v.to_str().ok())
        .is_some_and(has_no_initialize)
}

/// The request, when rmcp's own checks of a session POST would pass it unchanged and it can
/// go straight to the session: a request other than `initialize`, without a protocol
/// version of its own in `_meta`, from a client that accepts JSON and SSE and sent JSON
/// (the protocol-version header was checked in [`McpHttpService::handle`]). `None` for
/// anything else, which rmcp's service answers from the body as before (notifications,
/// refusals).
fn direct_request(
    message: ClientJsonRpcMessage,
    headers: &HeaderMap,
) -> Option<JsonRpcRequest<ClientRequest>> {
    let ClientJsonRpcMessage::Request(request) = message else {
        return None;
    };
    let direct = !matches!(request.request, ClientRequest::InitializeRequest(_))
        && request.request.get_meta().protocol_version().is_none()
        && names_media_types(headers, header::ACCEPT, &[JSON_MIME, SSE_MIME])
        && names_media_types(headers, header::CONTENT_TYPE, &[JSON_MIME]);
    direct.then_some(request)
}

const JSON_MIME: &str = "application/json";
const SSE_MIME: &str = "text/event-stream";

/// Whether the `name` header lists every one of `wanted` (media types, parameters ignored).
fn names_media_types(headers: &HeaderMap, name: header::HeaderName, wanted: &[&str]) -> bool {
    wanted.iter().all(|w| {
        headers
            .get_all(&name)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .any(|item| {
                let media_type = item.split(';').next().unwrap_or_default();
                media_type.trim().eq_ignore_ascii_case(w)
            })
    })
}

/// How long a request's answer may take and still be sent as one JSON body.
const JSON_ANSWER_WITHIN: Duration = Duration::from_millis(250);

/// Answer a request from its session's stream: when the answer is the stream's first
/// message (after rmcp's priming event) and comes within [`JSON_ANSWER_WITHIN`], as one
/// `application/json` body, which the MCP specification allows for any request: one write
/// instead of two and no SSE framing for the client to parse. A call that sends anything
/// first (progress, a log message, a request to the client) or takes longer is answered
/// with the stream as SSE, every event seen so far at its head.
async fn answer_from_stream(
    stream: impl Stream<Item = ServerSseMessage> + Send + Sync + 'static,
    keep_alive: Option<Duration>,
) -> Response {
    let mut stream = Box::pin(stream);
    let mut head = Vec::new();
    let deadline = tokio::time::sleep(JSON_ANSWER_WITHIN);
    tokio::pin!(deadline);
    loop {
        let item = tokio::select! {
            item = stream.next() => item,
            () = &mut deadline => break,
        };
        let Some(item) = item else { break };
        match read_head(item, &mut head) {
            HeadStep::More => {}
            HeadStep::Json(answer) => return answer,
            HeadStep::Sse => break,
        }
    }
    sse_answer(futures::stream::iter(head).chain(stream), keep_alive)
}

/// What one event read off a request's stream, before its answer, means for the answer.
enum HeadStep {
    /// Keep reading: nothing decided yet.
    More,
    /// The answer came first: send it as one JSON body.
    Json(Response),
    /// Something else came first: answer with the stream as SSE.
    Sse,
}

/// Classify `item`, keeping it in `head` when the answer may still become SSE.
fn read_head(item: ServerSseMessage, head: &mut Vec<ServerSseMessage>) -> HeadStep {
    match item.message.as_deref() {
        // rmcp's priming event (an id to resume from): only an SSE answer needs it.
        None => {
            head.push(item);
            HeadStep::More
        }
        Some(answer @ (JsonRpcMessage::Response(_) | JsonRpcMessage::Error(_))) => {
            HeadStep::Json(json_answer(answer))
        }
        Some(_) => {
            head.push(item);
            HeadStep::Sse
        }
    }
}

/// One JSON-RPC response as an `application/json` body.
fn json_answer(message: &ServerJsonRpcMessage) -> Response {
    match serde_json::to_vec(&message) {
        Ok(body) => (
            [(header::CONTENT_TYPE, HeaderValue::from_static(JSON_MIME))],
            body,
        )
            .into_response(),
        Err(e) => crate::error::json_error(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("the answer could not be encoded ({e}); retry the request"),
        ),
    }
}

/// A session's messages as an SSE response, framed as rmcp frames them (with the
/// `sse-stream` crate rmcp uses, so events, ids, retry hints and keep-alives are the same
/// bytes).
fn sse_answer(
    stream: impl Stream<Item = ServerSseMessage> + Send + Sync + 'static,
    keep_alive: Option<Duration>,
) -> Response {
    let events = stream.map(|message| {
        let data = match message.message.as_deref().map(serde_json::to_string) {
            Some(Ok(data)) => data,
            Some(Err(e)) => {
                tracing::error!(error = %e, "an MCP message could not be encoded; sending it empty");
                String::new()
            }
            // A priming event: empty data (SEP-1699).
            None => String::new(),
        };
        Ok::<_, Infallible>(Sse {
            event: None,
            data: Some(data),
            id: message.event_id,
            retry: message.retry.map(|r| u64::try_from(r.as_millis()).unwrap_or(u64::MAX)),
        })
    });
    let body = match keep_alive {
        Some(interval) => Body::new(
            SseBody::new(events)
                .with_keep_alive::<KeepAliveTimer>(KeepAlive::new().interval(interval)),
        ),
        None => Body::new(SseBody::new(events)),
    };
    (
        [
            (header::CONTENT_TYPE, SSE_MIME),
            (header::CACHE_CONTROL, "no-cache"),
            (header::HeaderName::from_static("x-accel-buffering"), "no"),
        ],
        body,
    )
        .into_response()
}

/// Tokio's sleep as the keep-alive clock of an [`SseBody`].
struct KeepAliveTimer(Pin<Box<tokio::time::Sleep>>);

impl Future for KeepAliveTimer {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<()> {
        self.0.as_mut().poll(cx)
    }
}

impl sse_stream::Timer for KeepAliveTimer {
    fn from_duration(duration: Duration) -> Self {
        KeepAliveTimer(Box::pin(tokio::time::sleep(duration)))
    }

    fn reset(mut self: Pin<&mut Self>, when: std::time::Instant) {
        self.0.as_mut().reset(tokio::time::Instant::from_std(when));
    }
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
