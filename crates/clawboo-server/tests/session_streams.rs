//! SSE streams under the session manager of `mcp_sessions`: a client that lost a request's
//! stream mid-call resumes it with `Last-Event-ID` and still gets the answer; a cancelled
//! request's stream ends; messages about no request go to the GET stream, which resumes
//! too; a call longer than the idle limit keeps its session (on Tokio's paused clock: no
//! real waiting and no timing assumptions).

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use axum::response::Response;
use clawboo_mcp::server::{McpServer, ToolSet};
use clawboo_server::mcp_http::{McpHttpConfig, McpHttpService};
use http_body_util::BodyExt;
use rmcp::RoleServer;
use rmcp::model::{CallToolResult, ContentBlock, JsonObject, ProgressNotificationParam, Tool};
use rmcp::service::RequestContext;
use serde_json::{Value, json};

const IDLE: Duration = Duration::from_secs(60);

struct Tools;

impl ToolSet for Tools {
    fn server_name(&self) -> &'static str {
        "session-streams-test"
    }

    fn tools(&self) -> Vec<Tool> {
        ["progress_then_wait", "announce", "longer_than_idle"]
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
            "progress_then_wait" => {
                let token = ctx.meta.get_progress_token().unwrap();
                let progress = ProgressNotificationParam::new(token, 1.0);
                ctx.peer.notify_progress(progress).await.unwrap();
                tokio::time::sleep(Duration::from_secs(5)).await;
            }
            "announce" => ctx.peer.notify_tool_list_changed().await.unwrap(),
            _ => tokio::time::sleep(IDLE * 3 / 2).await,
        }
        CallToolResult::success(vec![ContentBlock::text(format!("{name} done"))])
    }
}

type Service = McpHttpService<McpServer<Tools>>;

fn service() -> Service {
    McpHttpService::new(
        |_| McpServer::new(Tools),
        McpHttpConfig {
            session_idle: IDLE,
            // SSE keep-alives are timed by the real clock (the `sse-stream` crate resets
            // them from `std::time::Instant`), which a paused Tokio clock runs ahead of.
            sse_keep_alive: IDLE * 10,
            ..McpHttpConfig::default()
        },
    )
}

async fn send(svc: &Service, session: Option<&str>, body: Value) -> Response {
    let mut req = Request::post("/api/mcp/x")
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream");
    if let Some(s) = session {
        req = req.header("mcp-session-id", s);
    }
    svc.handle(req.body(Body::from(body.to_string())).unwrap())
        .await
}

async fn open(svc: &Service) -> String {
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"}}});
    let resp = send(svc, None, init).await;
    assert_eq!(resp.status(), StatusCode::OK);
    let session = resp.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let resp = send(svc, Some(&session), initialized).await;
    assert_eq!(resp.status(), StatusCode::ACCEPTED);
    session
}

fn call(id: u64, name: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": name, "arguments": {}, "_meta": {"progressToken": id}}})
}

/// One SSE event: its id and the message it carries (`None` for a priming event).
#[derive(Debug)]
struct Event {
    id: Option<String>,
    message: Option<Value>,
}

/// Read SSE events from `body` until `stop` accepts one (returned last), the body ends or
/// nothing comes for ten minutes (of the paused clock: a missing event fails, never hangs).
async fn read_events(body: &mut Body, stop: impl Fn(&Event) -> bool) -> Vec<Event> {
    let mut text = String::new();
    let mut events = Vec::new();
    while let Ok(Some(frame)) = tokio::time::timeout(Duration::from_secs(600), body.frame()).await {
        let frame = frame.unwrap();
        let Some(data) = frame.data_ref() else {
            continue;
        };
        text.push_str(std::str::from_utf8(data).unwrap());
        while let Some(end) = text.find("\n\n") {
            let block: String = text.drain(..end + 2).collect();
            let mut event = Event {
                id: None,
                message: None,
            };
            for line in block.lines() {
                if let Some(id) = line.strip_prefix("id:") {
                    event.id = Some(id.trim().to_owned());
                } else if let Some(data) = line.strip_prefix("data:")
                    && !data.trim().is_empty()
                {
                    event.message = Some(serde_json::from_str(data.trim()).unwrap());
                }
            }
            if event.id.is_none() && event.message.is_none() {
                continue; // a keep-alive comment
            }
            let done = stop(&event);
            events.push(event);
            if done {
                return events;
            }
        }
    }
    events
}

/// GET the session's stream, or resume one from `last_event_id`: the body of a 200 answer.
async fn get_stream(svc: &Service, session: &str, last_event_id: Option<&str>) -> Body {
    let mut req = Request::get("/api/mcp/x")
        .header("accept", "text/event-stream")
        .header("mcp-session-id", session);
    if let Some(id) = last_event_id {
        req = req.header("last-event-id", id);
    }
    let req = req.body(Body::empty()).unwrap();
    let resp = svc.handle(req).await;
    assert_eq!(resp.status(), StatusCode::OK);
    resp.into_body()
}

fn is_answer(event: &Event, id: u64) -> bool {
    event.message.as_ref().is_some_and(|m| m["id"] == id)
}

#[tokio::test(start_paused = true)]
async fn a_stream_lost_mid_call_resumes_from_its_last_event() {
    let svc = service();
    let session = open(&svc).await;

    let resp = send(&svc, Some(&session), call(7, "progress_then_wait")).await;
    let content_type = resp.headers()["content-type"].to_str().unwrap().to_owned();
    assert!(
        content_type.starts_with("text/event-stream"),
        "{content_type}"
    );
    let mut body = resp.into_body();
    let seen = read_events(&mut body, |e| e.message.is_some()).await;
    // The priming event, then the progress notification; the client then loses the stream.
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert!(seen[0].message.is_none());
    let progress = seen[1].message.as_ref().unwrap();
    assert_eq!(progress["method"], "notifications/progress");
    let last_seen = seen[1].id.clone().unwrap();
    drop(body);

    let mut body = get_stream(&svc, &session, Some(&last_seen)).await;
    let rest = read_events(&mut body, |e| is_answer(e, 7)).await;
    // Only what came after the last event seen: the answer, not the progress again.
    assert_eq!(rest.len(), 1, "{rest:?}");
    let answer = rest[0].message.as_ref().unwrap();
    assert_eq!(
        answer["result"]["content"][0]["text"],
        "progress_then_wait done"
    );
    assert_ne!(rest[0].id, Some(last_seen));

    // Once answered, the stream is gone: resuming it again gets an empty stream.
    let mut body = get_stream(&svc, &session, rest[0].id.as_deref()).await;
    assert!(read_events(&mut body, |_| true).await.is_empty());
}

#[tokio::test(start_paused = true)]
async fn the_get_stream_carries_what_no_request_owns_and_resumes() {
    let svc = service();
    let session = open(&svc).await;
    let mut body = get_stream(&svc, &session, None).await;
    // rmcp's priming event of a GET stream.
    let priming = read_events(&mut body, |_| true).await;
    assert_eq!(priming[0].id.as_deref(), Some("0"), "{priming:?}");

    // A notification about no request: the call is answered as JSON, the notification
    // comes on the GET stream.
    let resp = send(&svc, Some(&session), call(10, "announce")).await;
    assert_eq!(resp.headers()["content-type"], "application/json");
    let seen = read_events(&mut body, |e| e.message.is_some()).await;
    let notification = seen.last().unwrap();
    let method = &notification.message.as_ref().unwrap()["method"];
    assert_eq!(method, "notifications/tools/list_changed");
    let first_id = notification.id.clone().unwrap();
    drop(body);

    // Sent while no client reads the stream: kept, and replayed from the last event seen.
    send(&svc, Some(&session), call(11, "announce")).await;
    let mut body = get_stream(&svc, &session, Some(&first_id)).await;
    let missed = read_events(&mut body, |e| e.message.is_some()).await;
    assert_eq!(missed.len(), 1, "{missed:?}");
    assert_ne!(missed[0].id.as_deref(), Some(first_id.as_str()));
    drop(body);

    // From rmcp's priming event: both.
    let mut body = get_stream(&svc, &session, Some("0")).await;
    let mut events = read_events(&mut body, |e| e.message.is_some()).await;
    events.extend(read_events(&mut body, |e| e.message.is_some()).await);
    assert_eq!(events.len(), 2, "{events:?}");
    assert_eq!(events[0].id.as_deref(), Some(first_id.as_str()));
}

#[tokio::test(start_paused = true)]
async fn a_cancelled_request_ends_its_stream() {
    let svc = service();
    let session = open(&svc).await;

    let resp = send(&svc, Some(&session), call(8, "progress_then_wait")).await;
    let mut body = resp.into_body();
    let seen = read_events(&mut body, |e| e.message.is_some()).await;
    assert_eq!(seen.len(), 2, "{seen:?}");

    let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": 8, "reason": "test"}});
    let resp = send(&svc, Some(&session), cancel).await;
    assert_eq!(resp.status(), StatusCode::ACCEPTED);
    // The stream ends without an answer, and the session goes on.
    let rest = read_events(&mut body, |_| false).await;
    assert!(rest.iter().all(|e| !is_answer(e, 8)), "{rest:?}");
    assert_eq!(svc.session_count().await, 1);
}

#[tokio::test(start_paused = true)]
async fn a_request_id_reused_in_flight_moves_to_the_newer_stream() {
    let svc = service();
    let session = open(&svc).await;
    let older = send(&svc, Some(&session), call(12, "progress_then_wait")).await;
    let mut older = older.into_body();
    assert_eq!(
        read_events(&mut older, |e| e.message.is_some()).await.len(),
        2
    );

    // The same id and progress token again, before the first is answered.
    let newer = send(&svc, Some(&session), call(12, "progress_then_wait")).await;
    let rest = read_events(&mut older, |_| false).await;
    assert!(rest.iter().all(|e| !is_answer(e, 12)), "{rest:?}");
    let events = read_events(&mut newer.into_body(), |e| is_answer(e, 12)).await;
    let is_progress = |e: &Event| {
        e.message
            .as_ref()
            .is_some_and(|m| m["method"] == "notifications/progress")
    };
    assert!(events.iter().any(is_progress), "{events:?}");
    assert!(is_answer(events.last().unwrap(), 12), "{events:?}");
}

#[tokio::test(start_paused = true)]
async fn a_call_longer_than_the_idle_limit_keeps_its_session() {
    let svc = service();
    let session = open(&svc).await;

    let resp = send(&svc, Some(&session), call(9, "longer_than_idle")).await;
    let mut body = resp.into_body();
    let events = read_events(&mut body, |e| is_answer(e, 9)).await;
    let answer = events.last().and_then(|e| e.message.as_ref()).unwrap();
    assert_eq!(
        answer["result"]["content"][0]["text"],
        "longer_than_idle done"
    );
    assert_eq!(svc.session_count().await, 1);

    // Quiet for longer than the limit afterwards, it closes.
    tokio::time::sleep(IDLE * 2).await;
    assert_eq!(svc.session_count().await, 0);
}
