//! A NUL character (U+0000) in any string argument is refused alike on both backends,
//! before either is asked (PostgreSQL cannot store one, SQLite would): an `invalid_args`
//! tool-error naming the field over stdio, a 400 naming it over REST, and nothing written.
//! Through the real binaries, on the run's backend (test.sh runs it on both).
#![allow(clippy::unwrap_used)]

mod common;
mod http_support;

use common::{StdioClient, TestDb};
use http_support::{Server, client};
use serde_json::{Value, json};

const MEMORY: &str = env!("CARGO_BIN_EXE_clawboo-mcp-memory");
const TASKS: &str = env!("CARGO_BIN_EXE_clawboo-mcp-tasks");
const TEAMCHAT: &str = env!("CARGO_BIN_EXE_clawboo-mcp-teamchat");
const TOOLS: &str = env!("CARGO_BIN_EXE_clawboo-mcp-tools");

fn assert_refused(result: &Value, field: &str) {
    assert_eq!(result["isError"], true, "{result}");
    assert_eq!(result["_meta"]["error"], "invalid_args", "{result}");
    let text = result["content"][0]["text"].as_str().unwrap_or_default();
    assert!(
        text.contains(&format!("{field} holds a NUL character (U+0000)")),
        "{text}"
    );
    assert!(!text.to_lowercase().contains("byte sequence"), "{text}");
}

#[test]
fn every_stdio_server_refuses_a_nul_naming_the_field() {
    let db = TestDb::new();
    let mut memory = StdioClient::spawn(MEMORY, &db, &[]);
    memory.initialize();
    let saved = memory.call_tool(
        "memory_save",
        json!({"title": "deploy\u{0}key", "content": "rotate it"}),
    );
    assert_refused(&saved, "title");
    let tagged = memory.call_tool(
        "memory_save",
        json!({"title": "deploy", "content": "rotate it", "tags": ["ok", "b\u{0}"]}),
    );
    assert_refused(&tagged, "tags[1]");

    let mut tasks = StdioClient::spawn(TASKS, &db, &[]);
    tasks.initialize();
    let created = tasks.call_tool(
        "create_task",
        json!({"title": "ship\u{0}it", "teamId": "t"}),
    );
    assert_refused(&created, "title");

    let mut chat = StdioClient::spawn(TEAMCHAT, &db, &[]);
    chat.initialize();
    let posted = chat.call_tool(
        "team_chat_post",
        json!({"teamId": "t", "authorAgentId": "a", "text": "hi\u{0}there"}),
    );
    assert_refused(&posted, "text");

    let mut tools = StdioClient::spawn(TOOLS, &db, &[]);
    tools.initialize();
    let noted = tools.call_tool("note", json!({"note": "a\u{0}b"}));
    assert_refused(&noted, "note");

    // Nothing was written anywhere.
    for table in ["memory_facts", "tasks", "team_chat", "tool_call_audit"] {
        assert_eq!(
            db.query_i64(&format!("SELECT count(*) FROM {table}")),
            0,
            "{table}"
        );
    }
}

#[tokio::test]
async fn rest_refuses_a_nul_with_a_400_naming_the_field() {
    let server = Server::start(&[]);
    let created = client()
        .post(server.url("/api/board"))
        .json(&json!({"title": "ship\u{0}it", "teamId": "t"}))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 400);
    let body: Value = created.json().await.unwrap();
    let error = body["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("title holds a NUL character (U+0000)"),
        "{body}"
    );
    let listed = client()
        .get(server.url("/api/board?teamId=t%00x"))
        .send()
        .await
        .unwrap();
    assert_eq!(listed.status(), 400);
    let body: Value = listed.json().await.unwrap();
    assert!(
        body["error"]
            .as_str()
            .unwrap_or_default()
            .contains("teamId holds a NUL"),
        "{body}"
    );
    assert_eq!(server.db.query_i64("SELECT count(*) FROM tasks"), 0);
}
