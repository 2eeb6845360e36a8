//! Short task ids (`RED-12`) through the real surfaces: the stdio tasks server answers them
//! and takes them in `get_task` (within the caller's team only, refused with a clear
//! error elsewhere), the HTTP MCP endpoint and REST likewise, the CLI takes them; and
//! several OS processes creating tasks in one team at once get every number exactly once,
//! with no gap. On the backend under test.

#![allow(clippy::unwrap_used)]

mod common;
mod http_support;

use std::collections::BTreeSet;

use common::{StdioClient, TestDb, first_text};
use http_support::{Server, Session, clawboo, client, signed_tasks_url};
use serde_json::{Value, json};

const TASKS: &str = env!("CARGO_BIN_EXE_clawboo-mcp-tasks");

/// Racing processes, the epics each creates, and the sub-tasks under each epic (the child cap).
const PROCESSES: usize = 6;
const EPICS: usize = 2;
const CHILDREN: usize = 24;

fn short_id(answer: &Value) -> String {
    answer["task"]["shortId"].as_str().unwrap().to_owned()
}

#[test]
fn get_task_takes_a_short_id_of_the_callers_team_only_over_stdio_and_the_cli_takes_it_too() {
    let db = TestDb::new();
    let mut red = StdioClient::spawn(TASKS, &db, &["--team", "red", "--agent", "a1"]);
    red.initialize();
    let first = red.call_ok("create_task", json!({"title": "first"}));
    let second = red.call_ok("create_task", json!({"title": "second"}));
    assert_eq!(short_id(&first), "RED-1");
    assert_eq!(short_id(&second), "RED-2");
    let mut blue = StdioClient::spawn(TASKS, &db, &["--team", "blue", "--agent", "b1"]);
    blue.initialize();
    assert_eq!(
        short_id(&blue.call_ok("create_task", json!({"title": "theirs"}))),
        "BLU-1"
    );

    // By short id, in any case, and by id: the same task, its short id in the answer.
    for reference in ["RED-2", "red-2", second["task"]["id"].as_str().unwrap()] {
        let got = red.call_ok("get_task", json!({"taskId": reference}));
        assert_eq!(got["task"]["title"], "second", "{reference}");
        assert_eq!(got["task"]["shortId"], "RED-2");
    }
    // Lists carry them too.
    let listed = red.call_ok("list_tasks", json!({}));
    let shorts: BTreeSet<&str> = listed["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["shortId"].as_str().unwrap())
        .collect();
    assert_eq!(shorts, BTreeSet::from(["RED-1", "RED-2"]));

    // Another team's short id is not found, exactly as one that does not exist, and says
    // where short ids are looked up.
    for reference in ["RED-1", "RED-99"] {
        let refused = blue.call_tool("get_task", json!({"taskId": reference}));
        assert_eq!(refused["isError"], true, "{refused}");
        assert_eq!(refused["_meta"]["error"], "not_found");
        assert_eq!(
            first_text(&refused),
            format!("not found: {reference} (a short id names a task of your own team only)")
        );
    }
    for client in [red, blue] {
        assert_eq!(client.close(), Some(0));
    }

    // The CLI: list shows short ids, drop and restore take one.
    let run = |args: &[&str]| {
        let out = clawboo().args(args).arg("--db").arg(&db).output().unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let listing = run(&["board", "list", "--team", "red"]);
    assert!(
        listing
            .lines()
            .any(|l| l.starts_with("RED-1 ") && l.contains("first")),
        "{listing}"
    );
    let dropped: Value = serde_json::from_str(&run(&["board", "drop", "red-1", "--json"])).unwrap();
    assert_eq!(dropped["task"]["dropped"], true);
    assert_eq!(dropped["task"]["id"], first["task"]["id"]);
    assert!(run(&["board", "restore", "RED-1"]).starts_with("restored RED-1 ("));
    let missing = clawboo()
        .args(["board", "drop", "RED-7", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    assert!(!missing.status.success());
    assert!(
        String::from_utf8_lossy(&missing.stderr).contains("no task RED-7;"),
        "{}",
        String::from_utf8_lossy(&missing.stderr)
    );
}

/// A REST request's status and JSON body.
async fn rest(request: reqwest::RequestBuilder) -> (u16, Value) {
    let answer = request.send().await.unwrap();
    let status = answer.status().as_u16();
    (status, answer.json().await.unwrap())
}

#[tokio::test]
async fn short_ids_over_http_mcp_and_rest() {
    let server = Server::start(&[]);
    let http = client();
    let teams = server.url("/api/teams");
    let (status, team) = rest(
        http.post(&teams)
            .json(&json!({"id": "web", "name": "Web", "key": "FE"})),
    )
    .await;
    assert_eq!((status, &team["team"]["key"]), (201, &json!("FE")));
    let (status, taken) = rest(
        http.post(&teams)
            .json(&json!({"id": "ops", "name": "Ops", "key": "fe"})),
    )
    .await;
    assert_eq!(status, 400);
    assert!(
        taken.to_string().contains("key FE is taken by team web"),
        "{taken}"
    );

    let task = http_support::create_task(&server, "ship it", "web").await;
    assert_eq!(task["shortId"], "FE-1");
    let other = http_support::create_task(&server, "elsewhere", "ops").await;
    assert_eq!(other["shortId"], "OPS-1");

    // REST: the detail, a comment and a move by short id; an unknown one is a 404.
    let (status, detail) = rest(http.get(server.url("/api/board/fe-1"))).await;
    assert_eq!((status, &detail["task"]["id"]), (200, &task["id"]));
    let comment = http.post(server.url("/api/board/FE-1/comments"));
    let (status, _) = rest(comment.json(&json!({"body": "on it"}))).await;
    assert_eq!(status, 201);
    let moving = http.patch(server.url("/api/board/FE-1"));
    let (status, moved) = rest(moving.json(&json!({"status": "cancelled"}))).await;
    assert_eq!(status, 200);
    assert_eq!(moved["task"]["status"], "cancelled");
    assert_eq!(moved["task"]["shortId"], "FE-1");
    assert_eq!(rest(http.get(server.url("/api/board/FE-9"))).await.0, 404);

    // MCP over HTTP, bound to a team by a signed URL: its own short id resolves, another
    // team's does not.
    let mut session = Session::open(&signed_tasks_url(&server, "web", "a1")).await;
    let got = session
        .call_json("get_task", json!({"taskId": "FE-1"}))
        .await;
    assert_eq!(got["task"]["title"], "ship it");
    assert_eq!(got["comments"][0]["body"], "on it");
    let refused = session.call("get_task", json!({"taskId": "OPS-1"})).await;
    assert_eq!(refused["isError"], true, "{refused}");
    assert_eq!(
        refused["content"][0]["text"],
        "not found: OPS-1 (a short id names a task of your own team only)"
    );
}

/// Every process creates its epics and their sub-tasks in team `red` at once, all its
/// calls pipelined, and one more sub-task than the child cap allows (refused, so it must
/// take no number): together the answers hold `RED-1` to `RED-n` exactly once each.
#[test]
fn racing_processes_creating_in_one_team_take_every_number_once_with_no_gap() {
    let db = TestDb::new();
    let handles: Vec<_> = (0..PROCESSES)
        .map(|p| {
            let db = db.clone();
            std::thread::spawn(move || {
                let agent = format!("agent-{p}");
                let mut c = StdioClient::spawn(TASKS, &db, &["--team", "red", "--agent", &agent]);
                c.initialize();
                let mut shorts = Vec::new();
                for e in 0..EPICS {
                    let epic = c.call_ok(
                        "create_task",
                        json!({"title": format!("epic {p}.{e}"), "status": "backlog"}),
                    );
                    shorts.push(short_id(&epic));
                    let parent = epic["task"]["id"].as_str().unwrap().to_owned();
                    for n in 0..=CHILDREN {
                        c.send(
                            &json!({"jsonrpc": "2.0", "id": 1000 + n, "method": "tools/call",
                            "params": {"name": "create_subtask", "arguments":
                                {"parentTaskId": parent, "title": format!("task {p}.{e}.{n}")}}}),
                        );
                    }
                    let mut refused = 0;
                    for n in 0..=CHILDREN {
                        let result = c.recv_id(&json!(1000 + n))["result"].clone();
                        if result["isError"] == json!(true) {
                            assert_eq!(result["_meta"]["denied"], "child_cap", "{result}");
                            refused += 1;
                        } else {
                            let answer: Value = serde_json::from_str(first_text(&result)).unwrap();
                            shorts.push(short_id(&answer));
                        }
                    }
                    assert_eq!(refused, 1, "one create over the child cap");
                }
                assert_eq!(c.close(), Some(0));
                shorts
            })
        })
        .collect();
    let mut all: Vec<String> = Vec::new();
    for h in handles {
        all.extend(h.join().unwrap());
    }
    let total = PROCESSES * EPICS * (1 + CHILDREN);
    assert_eq!(all.len(), total);
    let numbers: BTreeSet<usize> = all
        .iter()
        .map(|s| s.strip_prefix("RED-").unwrap().parse().unwrap())
        .collect();
    assert_eq!(numbers.len(), total, "a number was given twice");
    assert_eq!(numbers, (1..=total).collect(), "a gap in the numbers");
    // The database agrees, and the counter stands at the next number.
    assert_eq!(
        db.query_i64("SELECT count(DISTINCT short_id) FROM tasks WHERE team_id = 'red'"),
        total as i64
    );
    assert_eq!(
        db.query_i64("SELECT next_number FROM task_keys WHERE team_id = 'red'"),
        total as i64 + 1
    );
}
