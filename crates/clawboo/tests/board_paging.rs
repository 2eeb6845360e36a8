//! Bounded board answers (SPEC §15): `list_tasks` and `GET /api/board` answer a page at a
//! time in the board's order, with an opaque cursor that neither skips nor repeats a task
//! while other processes create and move tasks between pages.

#![allow(clippy::unwrap_used)]

mod common;
mod http_support;

use std::collections::HashSet;

use common::{StdioClient, TestDb, first_text};
use http_support::{Server, client, create_task};
use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_clawboo-mcp-tasks");

fn tasks(db: &TestDb) -> StdioClient {
    let mut c = StdioClient::spawn(BIN, db, &[]);
    c.initialize();
    c
}

fn create(c: &mut StdioClient, args: Value) -> String {
    c.call_ok("create_task", args)["task"]["id"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// The board's order of `tasks`: priority high to low, then oldest, then id.
fn in_board_order(tasks: &[Value]) -> bool {
    let key = |t: &Value| {
        (
            -t["priority"].as_i64().unwrap(),
            t["createdAt"].as_i64().unwrap(),
            t["id"].as_str().unwrap().to_owned(),
        )
    };
    tasks.windows(2).all(|w| key(&w[0]) < key(&w[1]))
}

#[test]
fn pages_neither_skip_nor_repeat_a_task_while_other_processes_write() {
    let db = TestDb::new();
    let mut writer = tasks(&db);
    let mut reader = tasks(&db);
    // Roots are rate-capped, so most of the board is subtasks of three roots (and the
    // late creates subtasks of a fourth).
    let mut before = Vec::new();
    for r in 0..3 {
        before.push(create(&mut writer, json!({"title": format!("root {r}")})));
    }
    for i in 0..57 {
        let parent = before[i % 3].clone();
        before.push(create(
            &mut writer,
            json!({"title": format!("task {i}"), "parentTaskId": parent, "priority": i % 4}),
        ));
    }
    let late_root = create(&mut writer, json!({"title": "late root", "priority": -1}));
    before.push(late_root.clone());
    // The default page is 50 tasks, and says where the next one starts.
    let first = reader.call_ok("list_tasks", json!({}));
    assert_eq!(first["tasks"].as_array().unwrap().len(), 50);
    assert!(first["nextCursor"].is_string(), "{first}");

    let mut seen: Vec<Value> = Vec::new();
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    loop {
        let mut args = json!({"limit": 7});
        if let Some(c) = &cursor {
            args["cursor"] = json!(c);
        }
        let page = reader.call_ok("list_tasks", args);
        seen.extend(page["tasks"].as_array().unwrap().iter().cloned());
        pages += 1;
        // Between pages another process creates tasks (of every priority) and moves some.
        create(
            &mut writer,
            json!({"title": format!("late {pages}"), "parentTaskId": late_root, "priority": pages % 5}),
        );
        let moved = &before[(pages * 7) % before.len()];
        // A move into in_progress is a claim (SPEC §16).
        writer.call_ok(
            "claim_task",
            json!({"taskId": moved, "assigneeAgentId": "writer"}),
        );
        match page.get("nextCursor") {
            Some(next) => cursor = Some(next.as_str().unwrap().to_owned()),
            None => break,
        }
        assert!(pages < 40, "paging does not end");
    }
    let ids: Vec<&str> = seen.iter().map(|t| t["id"].as_str().unwrap()).collect();
    let unique: HashSet<&str> = ids.iter().copied().collect();
    assert_eq!(unique.len(), ids.len(), "a task was repeated: {ids:?}");
    for id in &before {
        assert!(unique.contains(id.as_str()), "task {id} was skipped");
    }
    assert!(in_board_order(&seen), "pages are not in the board's order");
}

#[test]
fn listed_descriptions_are_cut_and_get_task_has_the_rest() {
    let db = TestDb::new();
    let mut c = tasks(&db);
    let long = "é".repeat(150) + &"x".repeat(350);
    let id = create(&mut c, json!({"title": "long", "description": long}));
    create(&mut c, json!({"title": "short", "description": "brief"}));
    let listed = c.call_ok("list_tasks", json!({}));
    assert!(listed.get("nextCursor").is_none(), "{listed}");
    let by_title = |title: &str| {
        listed["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["title"] == title)
            .unwrap()["description"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let cut = by_title("long");
    assert_eq!(cut.chars().count(), 200);
    assert_eq!(cut, "é".repeat(150) + &"x".repeat(49) + "…");
    assert_eq!(by_title("short"), "brief");
    let detail = c.call_ok("get_task", json!({"taskId": id}));
    assert_eq!(detail["task"]["description"], long.as_str());
}

#[test]
fn a_bad_limit_or_cursor_is_invalid_args() {
    let db = TestDb::new();
    let mut c = tasks(&db);
    create(&mut c, json!({"title": "a"}));
    for (args, text) in [
        (
            json!({"limit": 0}),
            "invalid args: limit must be between 1 and 200 (got 0)",
        ),
        (
            json!({"limit": 201}),
            "invalid args: limit must be between 1 and 200 (got 201)",
        ),
        (
            json!({"cursor": "not-hex"}),
            "invalid args: cursor is not one this server gave out: pass the nextCursor of the previous page, or none for the first page",
        ),
        (
            json!({"cursor": hex_of("1:2")}),
            "invalid args: cursor is not one this server gave out: pass the nextCursor of the previous page, or none for the first page",
        ),
    ] {
        let result = c.call_tool("list_tasks", args.clone());
        assert_eq!(result["isError"], true, "{args}: {result}");
        assert_eq!(first_text(&result), text, "{args}");
        assert_eq!(result["_meta"]["error"], "invalid_args", "{args}");
    }
    let negative = c.call_tool("list_tasks", json!({"limit": -1}));
    assert!(
        first_text(&negative).starts_with("invalid args: "),
        "{negative}"
    );
}

fn hex_of(text: &str) -> String {
    text.bytes().map(|b| format!("{b:02x}")).collect()
}

#[tokio::test]
async fn the_rest_board_pages_the_same_way() {
    let server = Server::start(&[]);
    let http = client();
    let mut made = HashSet::new();
    for i in 0..5 {
        let task = create_task(&server, &format!("t{i}"), "rest").await;
        made.insert(task["id"].as_str().unwrap().to_owned());
    }
    // Without a limit every task of a small board comes in one page, as before.
    let all: Value = http
        .get(server.url("/api/board"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(all["tasks"].as_array().unwrap().len(), 5);
    assert!(all.get("nextCursor").is_none(), "{all}");

    let mut seen = Vec::new();
    let mut url = server.url("/api/board?teamId=rest&limit=2");
    loop {
        let resp = http.get(&url).send().await.unwrap();
        assert_eq!(resp.status(), 200);
        let page: Value = resp.json().await.unwrap();
        let tasks = page["tasks"].as_array().unwrap();
        assert!(tasks.len() <= 2);
        seen.extend(tasks.iter().map(|t| t["id"].as_str().unwrap().to_owned()));
        match page["nextCursor"].as_str() {
            Some(next) => {
                url = server.url(&format!("/api/board?teamId=rest&limit=2&cursor={next}"))
            }
            None => break,
        }
    }
    assert_eq!(seen.len(), 5);
    assert_eq!(seen.into_iter().collect::<HashSet<_>>(), made);

    for query in ["limit=0", "limit=201", "cursor=zz"] {
        let resp = http
            .get(server.url(&format!("/api/board?{query}")))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 400, "{query}");
        let body: Value = resp.json().await.unwrap();
        assert!(
            body["error"]
                .as_str()
                .unwrap()
                .starts_with("invalid request: "),
            "{query}: {body}"
        );
    }
}
