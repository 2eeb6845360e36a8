//! Arbitrary JSON as a tool's arguments on every server: the answer is a tool result
//! (maybe a tool-error), never a JSON-RPC error or a panic.
#![no_main]

use clawboo_fuzz::{INITIALIZE, run_session};
use libfuzzer_sys::fuzz_target;
use serde_json::{Value, json};

/// Every tool of the four servers, as (server index, tool name).
const TOOLS: &[(usize, &str)] = &[
    (0, "list_tasks"),
    (0, "get_task"),
    (0, "create_task"),
    (0, "create_subtask"),
    (0, "claim_task"),
    (0, "assign_task"),
    (0, "release_task"),
    (0, "update_task_status"),
    (0, "block_task"),
    (0, "unblock_task"),
    (0, "add_comment"),
    (0, "link_task"),
    (1, "memory_save"),
    (1, "memory_search"),
    (1, "memory_browse"),
    (2, "echo"),
    (2, "note"),
    (2, "web_search"),
    (2, "delete_path"),
    (3, "team_chat_post"),
    (3, "team_chat_subscribe"),
    (3, "team_delegate"),
];

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let Ok(Value::Object(mut args)) = serde_json::from_slice::<Value>(rest) else {
        return;
    };
    let (server, tool) = TOOLS[usize::from(selector) % TOOLS.len()];
    // A well-typed wait would park the call for up to 30 s.
    if args.get("waitMs").and_then(Value::as_u64).is_some_and(|ms| ms > 1) {
        args.insert("waitMs".into(), json!(1));
    }
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool, "arguments": args}});
    let input = format!("{INITIALIZE}\n{call}\n");
    let output = run_session(server, input.as_bytes());
    let answer = output
        .iter()
        .find(|m| m["id"] == json!(1))
        .unwrap_or_else(|| panic!("no answer to {call}"));
    assert!(answer.get("error").is_none(), "a JSON-RPC error for {call}: {answer}");
    assert!(answer["result"]["content"][0]["text"].is_string(), "{answer}");
});
