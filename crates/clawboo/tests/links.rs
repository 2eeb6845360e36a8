//! Links (SPEC §19) across the four real stdio servers on one database: a fact saved and a
//! post made with `taskId`, and a tool call made by the task's holder, all show among the
//! task's `links` in `get_task`; an unknown `taskId` is refused before anything is stored.
//! On the backend `CLAWBOO_TEST_BACKEND` names.

#![allow(clippy::unwrap_used)]

mod common;

use common::{StdioClient, TestDb, first_text};
use serde_json::json;

const TASKS_BIN: &str = env!("CARGO_BIN_EXE_clawboo-mcp-tasks");
const MEMORY_BIN: &str = env!("CARGO_BIN_EXE_clawboo-mcp-memory");
const TOOLS_BIN: &str = env!("CARGO_BIN_EXE_clawboo-mcp-tools");
const TEAMCHAT_BIN: &str = env!("CARGO_BIN_EXE_clawboo-mcp-teamchat");

fn alice(bin: &str, db: &TestDb) -> StdioClient {
    let mut c = StdioClient::spawn(bin, db, &["--agent", "alice", "--team", "core"]);
    c.initialize();
    c
}

#[test]
fn facts_posts_and_the_holders_tool_calls_are_the_tasks_links() {
    let db = TestDb::new();
    let mut tasks = alice(TASKS_BIN, &db);
    let mut memory = alice(MEMORY_BIN, &db);
    let mut chat = alice(TEAMCHAT_BIN, &db);
    let mut tools = alice(TOOLS_BIN, &db);
    let created = tasks.call_ok("create_task", json!({"title": "fix the parser"}));
    let id = created["task"]["id"].as_str().unwrap().to_owned();
    let other = tasks.call_ok("create_task", json!({"title": "unrelated"}));
    let other = other["task"]["id"].as_str().unwrap().to_owned();

    // A call made before the claim is about no task.
    assert_eq!(
        tools.call_tool("echo", json!({"message": "before"}))["isError"],
        false
    );
    tasks.call_ok(
        "claim_task",
        json!({"taskId": id, "assigneeAgentId": "alice"}),
    );
    let fact = memory.call_ok(
        "memory_save",
        json!({"title": "parser", "content": "the parser chokes on CRLF\nsecond line", "taskId": id}),
    );
    let fact_id = fact["fact"]["id"].as_str().unwrap().to_owned();
    let post = chat.call_tool(
        "team_chat_post",
        json!({"text": "working on the parser now", "taskId": id}),
    );
    assert_eq!(post["isError"], false, "{post}");
    assert_eq!(
        tools.call_tool("echo", json!({"message": "during"}))["isError"],
        false
    );

    let detail = tasks.call_ok("get_task", json!({"taskId": id}));
    let links = detail["links"].as_array().unwrap();
    let kinds: Vec<&str> = links.iter().map(|l| l["kind"].as_str().unwrap()).collect();
    assert!(
        kinds.contains(&"fact") && kinds.contains(&"post"),
        "{detail}"
    );
    let fact_link = links.iter().find(|l| l["kind"] == "fact").unwrap();
    assert_eq!(fact_link["id"], fact_id.as_str());
    assert_eq!(fact_link["line"], "the parser chokes on CRLF");
    let post_link = links.iter().find(|l| l["kind"] == "post").unwrap();
    assert_eq!(post_link["line"], "working on the parser now");
    // The echo made while holding the task, both audit rows of it, and not the one before.
    let audits: Vec<&str> = links
        .iter()
        .filter(|l| l["kind"] == "audit")
        .map(|l| l["line"].as_str().unwrap())
        .collect();
    assert_eq!(audits.len(), 2, "{detail}");
    assert!(audits.iter().all(|l| l.starts_with("echo ")), "{audits:?}");
    // Newest first.
    let times: Vec<i64> = links
        .iter()
        .map(|l| l["createdAt"].as_i64().unwrap())
        .collect();
    assert!(times.windows(2).all(|w| w[0] >= w[1]), "{times:?}");
    let unrelated = tasks.call_ok("get_task", json!({"taskId": other}));
    assert_eq!(unrelated["links"], json!([]));
}

#[test]
fn an_unknown_task_id_is_refused_and_nothing_is_stored() {
    let db = TestDb::new();
    let mut memory = alice(MEMORY_BIN, &db);
    let mut chat = alice(TEAMCHAT_BIN, &db);
    let refused = memory.call_tool(
        "memory_save",
        json!({"title": "t", "content": "c", "taskId": "no-such-task"}),
    );
    assert_eq!(refused["_meta"]["error"], "not_found", "{refused}");
    assert!(first_text(&refused).contains("list_tasks"), "{refused}");
    let browse = memory.call_ok("memory_browse", json!({}));
    assert_eq!(browse["facts"], json!([]), "{browse}");
    let refused = chat.call_tool(
        "team_chat_post",
        json!({"text": "hello", "taskId": "no-such-task"}),
    );
    assert_eq!(refused["_meta"]["error"], "not_found", "{refused}");
    assert_eq!(db.query_i64("SELECT count(*) FROM team_chat"), 0);
    // A procedure is not about one task.
    let refused = memory.call_tool(
        "memory_save",
        json!({"content": "step 1", "procedureName": "deploy", "taskId": "x"}),
    );
    assert_eq!(refused["_meta"]["error"], "invalid_args", "{refused}");
}
