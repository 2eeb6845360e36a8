//! The tool surface an agent pays for (SPEC §15): every tool definition is sent to the
//! model on every turn, so the model-visible part of the four servers' default tool lists
//! has a budget, and every tool carries a title and the annotations a client shows.

mod common;

use common::{StdioClient, TestDb};
use serde_json::{Value, json};

/// The budget: the model-visible part of the default lists, in characters of compact JSON.
const BUDGET: usize = 6_000;

const SERVERS: [&str; 4] = [
    env!("CARGO_BIN_EXE_clawboo-mcp-tasks"),
    env!("CARGO_BIN_EXE_clawboo-mcp-memory"),
    env!("CARGO_BIN_EXE_clawboo-mcp-tools"),
    env!("CARGO_BIN_EXE_clawboo-mcp-teamchat"),
];

/// Each server's default `tools/list` (unbound, delegate off, web search unavailable).
fn default_lists() -> Vec<Vec<Value>> {
    let db = TestDb::new();
    SERVERS
        .iter()
        .map(|bin| {
            let mut c = StdioClient::spawn_with_env(bin, &db, &[], &[("TAVILY_API_KEY", "")]);
            c.initialize();
            let answer = c.request("tools/list", json!({}));
            answer["result"]["tools"]
                .as_array()
                .expect("a tools array")
                .clone()
        })
        .collect()
}

/// The characters a model reads of one tool: its name, description and input schema.
fn model_visible(tool: &Value) -> usize {
    json!({
        "name": tool["name"],
        "description": tool["description"],
        "inputSchema": tool["inputSchema"],
    })
    .to_string()
    .chars()
    .count()
}

#[test]
fn the_default_tool_lists_fit_the_budget() {
    let lists = default_lists();
    let tools: Vec<&Value> = lists.iter().flatten().collect();
    let per_tool: Vec<(String, usize)> = tools
        .iter()
        .map(|t| {
            (
                t["name"].as_str().unwrap_or("?").to_owned(),
                model_visible(t),
            )
        })
        .collect();
    let total: usize = per_tool.iter().map(|(_, n)| n).sum();
    eprintln!("{} tools, {total} characters: {per_tool:?}", tools.len());
    assert_eq!(tools.len(), 21, "the default lists changed: {per_tool:?}");
    assert!(
        total <= BUDGET,
        "the default tool lists cost {total} characters, over the budget of {BUDGET}: {per_tool:?}"
    );
}

/// Every tool's annotations, as (name, readOnly, destructive, idempotent, openWorld).
const HINTS: [(&str, bool, bool, bool, bool); 21] = [
    ("list_tasks", true, false, true, false),
    ("get_task", true, false, true, false),
    ("create_task", false, false, false, false),
    ("create_subtask", false, false, false, false),
    ("claim_task", false, false, true, false),
    ("assign_task", false, false, true, false),
    ("claim_next", false, false, false, false),
    ("release_task", false, false, true, false),
    ("update_task_status", false, false, true, false),
    ("block_task", false, false, true, false),
    ("unblock_task", false, false, true, false),
    ("add_comment", false, false, false, false),
    ("link_task", false, false, true, false),
    ("memory_save", false, false, false, false),
    ("memory_search", true, false, true, false),
    ("memory_browse", true, false, true, false),
    ("echo", true, false, true, false),
    ("note", false, false, false, false),
    ("delete_path", false, true, false, false),
    ("team_chat_post", false, false, false, false),
    ("team_chat_subscribe", true, false, true, false),
];

#[test]
fn every_tool_has_a_short_title_and_says_what_it_does_to_the_world() {
    let lists = default_lists();
    let tools: Vec<&Value> = lists.iter().flatten().collect();
    assert_eq!(tools.len(), HINTS.len());
    for (tool, (name, read_only, destructive, idempotent, open_world)) in tools.iter().zip(HINTS) {
        assert_eq!(tool["name"], name);
        let title = tool["title"].as_str().unwrap_or_default();
        assert!(
            !title.is_empty() && title.len() <= 24,
            "{name}: title {title:?}"
        );
        let a = &tool["annotations"];
        assert_eq!(a["title"], title, "{name}: {a}");
        assert_eq!(
            (
                &a["readOnlyHint"],
                &a["destructiveHint"],
                &a["idempotentHint"],
                &a["openWorldHint"]
            ),
            (
                &json!(read_only),
                &json!(destructive),
                &json!(idempotent),
                &json!(open_world)
            ),
            "{name}: {a}"
        );
    }
}

#[test]
fn web_search_when_configured_is_marked_open_world() {
    let db = TestDb::new();
    let mut c = StdioClient::spawn_with_env(
        SERVERS[2],
        &db,
        &[],
        &[("TAVILY_API_KEY", "tvly-test-not-a-key")],
    );
    c.initialize();
    let answer = c.request("tools/list", json!({}));
    let tools = answer["result"]["tools"].as_array().expect("a tools array");
    let search = tools
        .iter()
        .find(|t| t["name"] == "web_search")
        .expect("web_search is listed once configured");
    assert_eq!(search["annotations"]["openWorldHint"], true, "{search}");
    assert_eq!(search["annotations"]["destructiveHint"], false, "{search}");
    assert_eq!(search["title"], "Web search");
}
