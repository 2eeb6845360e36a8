//! Streamable HTTP against the real `clawboo serve`: the session lifecycle and the exact
//! error answers of SPEC §7.

#![allow(clippy::unwrap_used)]

mod common;
mod http_support;

use http_support::{Server, Session, client, initialize_body, message_with_id, post};
use serde_json::{Value, json};

const NO_SESSION: &str = "No valid session; send an initialize request first.";
const INVALID_SESSION: &str = "Invalid or missing MCP session id.";

async fn error_of(resp: reqwest::Response) -> (u16, Value) {
    let status = resp.status().as_u16();
    let body: Value = resp.json().await.unwrap();
    (status, body)
}

fn assert_session_error(body: &Value, code: i64, text: &str) {
    assert_eq!(body["jsonrpc"], "2.0");
    assert_eq!(body["id"], Value::Null);
    assert_eq!(body["error"]["code"], code);
    assert_eq!(body["error"]["message"], text);
}

#[tokio::test]
async fn initialize_list_and_call_tools_over_http() {
    let server = Server::start(&[]);
    let mut s = Session::open(&server.url("/api/mcp/tasks")).await;
    let tools = s.request("tools/list", json!({})).await;
    let names: Vec<&str> = tools["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names.len(), 13, "{names:?}");
    assert!(names.contains(&"claim_task"));
    let created = s
        .call_json("create_task", json!({"title": "over http", "teamId": "t1"}))
        .await;
    let id = created["task"]["id"].as_str().unwrap().to_owned();
    let listed = s.call_json("list_tasks", json!({"teamId": "t1"})).await;
    assert_eq!(listed["tasks"][0]["id"], id.as_str());
    // The REST board sees the same store.
    let board: Value = client()
        .get(server.url(&format!("/api/board/{id}")))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(board["task"]["title"], "over http");
    let unknown = s.call("no_such_tool", json!({})).await;
    assert_eq!(unknown["isError"], true);
}

#[tokio::test]
async fn every_initialize_version_negotiates_and_2026_only_without_initialize() {
    let server = Server::start(&[]);
    let http = client();
    let url = server.url("/api/mcp/tasks");
    // 2026-07-28 has no `initialize`: an `initialize` naming it gets the newest version
    // that has one (the initialize-less protocol is in http_stateless.rs).
    for (asked, agreed) in [
        ("2024-11-05", "2024-11-05"),
        ("2025-03-26", "2025-03-26"),
        ("2025-06-18", "2025-06-18"),
        ("2025-11-25", "2025-11-25"),
        ("2026-07-28", "2025-11-25"),
    ] {
        let mut body = initialize_body(1);
        body["params"]["protocolVersion"] = json!(asked);
        let r = post(&http, &url, None, &body).await;
        assert_eq!(r.status(), 200);
        let msg = message_with_id(&r.text().await.unwrap(), 1);
        assert_eq!(msg["result"]["protocolVersion"], agreed, "{asked}");
    }
    let with_header = |version: &'static str| {
        http.post(&url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", version)
            .body(initialize_body(1).to_string())
            .send()
    };
    // An `initialize` whose header names another version than its body is refused.
    let r = with_header("2026-07-28").await.unwrap();
    assert_eq!(r.status(), 400);
    assert!(r.headers().get("mcp-session-id").is_none());
    // So is a header naming a version this server does not speak.
    let r = with_header("2027-01-01").await.unwrap();
    let (status, body) = error_of(r).await;
    assert_eq!(status, 400);
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("2026-07-28"),
        "{body}"
    );
}

#[tokio::test]
async fn session_errors_have_the_contract_texts() {
    let server = Server::start(&[]);
    let http = client();
    let url = server.url("/api/mcp/tasks");
    let list = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/list"});

    let (status, body) = error_of(post(&http, &url, None, &list).await).await;
    assert_eq!(status, 400);
    assert_session_error(&body, -32000, NO_SESSION);

    let (status, body) = error_of(post(&http, &url, Some("not-a-session"), &list).await).await;
    assert_eq!(status, 404);
    assert_session_error(&body, -32000, NO_SESSION);
    // A plain tools/call (which skips the full message check) gets the same answers.
    let call = json!({"jsonrpc": "2.0", "id": 8, "method": "tools/call",
                      "params": {"name": "list_tasks", "arguments": {}}});
    let (status, body) = error_of(post(&http, &url, None, &call).await).await;
    assert_eq!(status, 400);
    assert_session_error(&body, -32000, NO_SESSION);
    let (status, body) = error_of(post(&http, &url, Some("not-a-session"), &call).await).await;
    assert_eq!(status, 404);
    assert_session_error(&body, -32000, NO_SESSION);

    let get = http
        .get(&url)
        .header("accept", "text/event-stream")
        .send()
        .await
        .unwrap();
    let (status, body) = error_of(get).await;
    assert_eq!(status, 400);
    assert_session_error(&body, -32000, INVALID_SESSION);

    let del = http.delete(&url).send().await.unwrap();
    let (status, body) = error_of(del).await;
    assert_eq!(status, 400);
    assert_session_error(&body, -32000, INVALID_SESSION);

    let del = http
        .delete(&url)
        .header("mcp-session-id", "expired-or-unknown")
        .send()
        .await
        .unwrap();
    let (status, body) = error_of(del).await;
    assert_eq!(status, 404);
    assert_session_error(&body, -32000, INVALID_SESSION);

    let bad = http
        .post(&url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body("{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": ")
        .send()
        .await
        .unwrap();
    let (status, body) = error_of(bad).await;
    assert_eq!(status, 400);
    assert_eq!(body["error"]["code"], -32700);
    assert_eq!(body["id"], Value::Null);

    let not_rpc = post(&http, &url, None, &json!({"hello": "world"})).await;
    let (status, body) = error_of(not_rpc).await;
    assert_eq!(status, 400);
    assert_eq!(body["error"]["code"], -32600);
}

#[tokio::test]
async fn delete_ends_a_session_and_sessions_are_independent() {
    let server = Server::start(&[]);
    let url = server.url("/api/mcp/tasks");
    let mut a = Session::open(&url).await;
    let mut b = Session::open(&url).await;
    assert_ne!(a.id, b.id);
    let del = a
        .http
        .delete(&url)
        .header("mcp-session-id", &a.id)
        .send()
        .await
        .unwrap();
    assert!(del.status().is_success(), "{}", del.status());
    let list = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/list"});
    let (status, body) = error_of(post(&a.http, &url, Some(&a.id), &list).await).await;
    assert_eq!(status, 404);
    assert_session_error(&body, -32000, NO_SESSION);
    // The other session is untouched.
    let tools = b.request("tools/list", json!({})).await;
    assert!(tools["result"]["tools"].is_array());
    // And the ended one can start over with initialize.
    a = Session::open(&url).await;
    assert!(a.request("tools/list", json!({})).await["result"]["tools"].is_array());
}

#[tokio::test]
async fn get_opens_the_session_stream() {
    let server = Server::start(&[]);
    let url = server.url("/api/mcp/tasks");
    let s = Session::open(&url).await;
    let resp = s
        .http
        .get(&url)
        .header("accept", "text/event-stream")
        .header("mcp-session-id", &s.id)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(
        resp.headers()["content-type"].to_str().unwrap(),
        "text/event-stream"
    );
}

#[tokio::test]
async fn status_reports_probed_servers() {
    let server = Server::start(&[]);
    let http = client();
    // The first probe runs at start; poll the route until it has reported (readiness of
    // a background task, not a timing assertion).
    let mut tasks = Value::Null;
    for _ in 0..200 {
        let v: Value = http
            .get(server.url("/api/mcp/status"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        tasks = v["servers"][0].clone();
        if !tasks["lastProbeAt"].is_null() {
            break;
        }
        tokio::task::yield_now().await;
    }
    assert_eq!(tasks["name"], "tasks");
    assert_eq!(tasks["mounted"], true);
    assert_eq!(tasks["alive"], true);
    assert_eq!(tasks["toolCount"], 13);
}

#[tokio::test]
async fn every_mounted_server_answers_over_http() {
    let server = Server::start(&[]);
    let mut tools = Session::open(&server.url("/api/mcp/tools")).await;
    let listed = tools.request("tools/list", json!({})).await;
    let names: Vec<&str> = listed["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"echo"), "{names:?}");
    let echoed = tools.call("echo", json!({"message": "over http"})).await;
    assert_ne!(echoed["isError"], json!(true), "{echoed}");
    assert!(
        echoed["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("over http"),
        "{echoed}"
    );

    let mut chat = Session::open(&server.url("/api/mcp/teamchat")).await;
    let posted = chat
        .call_json(
            "team_chat_post",
            json!({"text": "hi", "authorAgentId": "ada", "teamId": "red"}),
        )
        .await;
    assert_eq!(posted["posted"]["seq"], 1);
    let mut reader = Session::open(&server.url("/api/mcp/teamchat")).await;
    let read = reader
        .call_json(
            "team_chat_subscribe",
            json!({"teamId": "red", "authorAgentId": "bob"}),
        )
        .await;
    assert_eq!(read["posts"][0]["authorAgentId"], "ada");
}
