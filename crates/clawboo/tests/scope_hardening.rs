//! Hardening of bound scope through the real binaries (the `clawboo-mcp-tasks` stdio server
//! and `clawboo serve` over HTTP): MCP comments never pose as the operator, another team's
//! tasks never show as ancestors or dependencies, the root-rate cap counts per team, and a
//! bound agent cannot move a task a teammate holds.

#![allow(clippy::unwrap_used)]

mod common;
mod http_support;

use common::{StdioClient, TestDb, first_text, sql_quote};
use http_support::{Server, client, create_task};
use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_clawboo-mcp-tasks");

fn tasks(db: &TestDb, args: &[&str]) -> StdioClient {
    let mut c = StdioClient::spawn(BIN, db, args);
    c.initialize();
    c
}

fn id_of(task: &Value) -> String {
    task["id"].as_str().unwrap().to_owned()
}

async fn board_detail(server: &Server, id: &str) -> Value {
    let r = client()
        .get(server.url(&format!("/api/board/{id}")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    r.json().await.unwrap()
}

fn count(db: &TestDb, sql: &str) -> i64 {
    db.query_i64(sql)
}

#[tokio::test]
async fn mcp_comments_are_stored_and_served_as_agent_whatever_author_type_says() {
    let server = Server::start(&[]);
    let task = id_of(&create_task(&server, "feature", "red").await);
    let mut c = tasks(&server.db, &["--team", "red", "--agent", "alice"]);
    for claimed in ["user", "system"] {
        let added = c.call_ok(
            "add_comment",
            json!({"taskId": task, "body": format!("as {claimed}"), "authorType": claimed}),
        );
        assert_eq!(added["comment"]["authorType"], "agent", "{added}");
    }
    let mut unbound = tasks(&server.db, &[]);
    let added = unbound.call_ok(
        "add_comment",
        json!({"taskId": task, "body": "unbound", "authorType": "user"}),
    );
    assert_eq!(added["comment"]["authorType"], "agent");

    let served = c.call_ok("get_task", json!({"taskId": task}));
    let rest = board_detail(&server, &task).await;
    for comments in [&served["comments"], &rest["comments"]] {
        let types: Vec<&str> = comments
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["authorType"].as_str().unwrap())
            .collect();
        assert_eq!(types, ["agent", "agent", "agent"], "{comments}");
    }
    assert_eq!(
        count(
            &server.db,
            "SELECT COUNT(*) FROM task_comments WHERE author_type <> 'agent'"
        ),
        0
    );

    // The board's own comments stay the operator's, whatever voice they claim: `system`
    // is the server's alone and `agent` a bound agent's.
    for claimed in [None, Some("user"), Some("system"), Some("agent")] {
        let mut body = json!({"body": "from the board"});
        if let Some(claimed) = claimed {
            body["authorType"] = json!(claimed);
        }
        let r = client()
            .post(server.url(&format!("/api/board/{task}/comments")))
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 201);
        let v: Value = r.json().await.unwrap();
        assert_eq!(v["comment"]["authorType"], "user", "{claimed:?}");
    }
    assert_eq!(
        count(
            &server.db,
            "SELECT COUNT(*) FROM task_comments WHERE author_type = 'system'"
        ),
        0
    );
}

#[tokio::test]
async fn rest_refuses_a_parent_of_another_team_and_writes_nothing() {
    let server = Server::start(&[]);
    let parent = id_of(&create_task(&server, "red epic", "red").await);
    let before = count(&server.db, "SELECT COUNT(*) FROM tasks");
    let r = client()
        .post(server.url("/api/board"))
        .json(&json!({"title": "sneaky", "teamId": "blue", "parentTaskId": parent}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    let body: Value = r.json().await.unwrap();
    assert_eq!(
        body["error"],
        format!(
            "invalid request: parent {parent} belongs to team red, not to team blue: a subtask lives in its parent's team; leave teamId out (it defaults to the parent's) or pick a parent of team blue"
        ),
        "{body}"
    );
    assert_eq!(count(&server.db, "SELECT COUNT(*) FROM tasks"), before);

    // Without a team the child joins its parent's.
    let r = client()
        .post(server.url("/api/board"))
        .json(&json!({"title": "child", "parentTaskId": parent}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["task"]["teamId"], "red");
}

#[tokio::test]
async fn a_bound_agent_sees_no_foreign_ancestor_and_no_foreign_dependency() {
    let server = Server::start(&[]);
    let foreign_root = id_of(&create_task(&server, "blue secret epic", "blue").await);
    let foreign_dep = id_of(&create_task(&server, "blue secret dep", "blue").await);
    let red_parent = id_of(&create_task(&server, "red story", "red").await);
    let red_dep = id_of(&create_task(&server, "red dep", "red").await);
    let child = id_of(&create_task(&server, "red child", "red").await);
    // REST now refuses such a chain, so it is written as another surface (or a team move)
    // would leave it: red child -> red story -> blue epic.
    for (parent, id) in [(&foreign_root, &red_parent), (&red_parent, &child)] {
        server.db.exec(&format!(
            "UPDATE tasks SET parent_task_id = {} WHERE id = {}",
            sql_quote(parent),
            sql_quote(id)
        ));
    }
    for dep in [&foreign_dep, &red_dep] {
        let r = client()
            .post(server.url(&format!("/api/board/{child}/deps")))
            .json(&json!({"dependsOnTaskId": dep}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
    }
    let r = client()
        .post(server.url(&format!("/api/board/{red_parent}/deps")))
        .json(&json!({"dependsOnTaskId": foreign_dep}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);

    let mut c = tasks(&server.db, &["--team", "red", "--agent", "alice"]);
    let detail = c.call_ok("get_task", json!({"taskId": child}));
    let text = detail.to_string();
    assert!(!text.contains("blue secret"), "{text}");
    assert!(!text.contains(&foreign_dep), "{text}");
    let ancestors: Vec<&str> = detail["ancestors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["id"].as_str().unwrap())
        .collect();
    assert_eq!(ancestors, [red_parent.as_str()], "the chain stops at blue");
    assert_eq!(detail["task"]["dependsOn"], json!([red_dep]));
    assert_eq!(detail["ancestors"][0]["dependsOn"], json!([]));
    let listed = c.call_ok("list_tasks", json!({}));
    assert!(!listed.to_string().contains(&foreign_dep), "{listed}");
    let child_listed = listed["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["id"] == child.as_str())
        .unwrap();
    assert_eq!(child_listed["dependsOn"], json!([red_dep]));

    // The operator still sees the whole chain.
    let rest = board_detail(&server, &child).await;
    assert_eq!(rest["ancestors"].as_array().unwrap().len(), 2);
    assert_eq!(rest["task"]["dependsOn"], json!([foreign_dep, red_dep]));
}

#[test]
fn one_team_filling_its_root_bucket_does_not_stop_another() {
    let db = TestDb::new();
    let mut red = tasks(&db, &["--team", "red"]);
    let mut blue = tasks(&db, &["--team", "blue"]);
    let mut teamless = tasks(&db, &[]);
    for i in 0..30 {
        red.call_ok("create_task", json!({"title": format!("red root {i}")}));
    }
    let refused = red.call_tool("create_task", json!({"title": "red 31st"}));
    assert_eq!(refused["isError"], json!(true), "{refused}");
    assert_eq!(
        first_text(&refused),
        "task rejected: 30 root tasks already created in the last 5 min (max 30); attach this work to an existing task with parentTaskId instead of opening another"
    );
    assert_eq!(refused["_meta"]["denied"], "root_rate_cap");
    // An unbound caller naming red shares red's bucket.
    let named = teamless.call_tool("create_task", json!({"title": "x", "teamId": "red"}));
    assert_eq!(named["_meta"]["denied"], "root_rate_cap", "{named}");
    let made = blue.call_ok("create_task", json!({"title": "blue root"}));
    assert_eq!(made["task"]["teamId"], "blue");
    teamless.call_ok("create_task", json!({"title": "team-less root"}));
    assert_eq!(
        count(
            &db,
            "SELECT COUNT(*) FROM tasks WHERE team_id = 'red' AND parent_task_id IS NULL"
        ),
        30
    );
}

/// The task's status and assignee, straight from the database.
fn state(db: &TestDb, id: &str) -> (String, Option<String>) {
    let mut row = db.query_row(&format!(
        "SELECT status, assignee_agent_id FROM tasks WHERE id = {}",
        sql_quote(id)
    ));
    let assignee = row.pop().flatten();
    (row.pop().flatten().unwrap(), assignee)
}

#[tokio::test]
async fn a_bound_agent_cannot_move_a_teammates_task_but_the_holder_and_rest_can() {
    let server = Server::start(&[]);
    let db = server.db.clone();
    let task = id_of(&create_task(&server, "alice's work", "red").await);
    let mut alice = tasks(&db, &["--team", "red", "--agent", "alice"]);
    let mut bob = tasks(&db, &["--team", "red", "--agent", "bob"]);
    alice.call_ok(
        "claim_task",
        json!({"taskId": task, "assigneeAgentId": "alice"}),
    );
    let held = ("in_progress".to_owned(), Some("alice".to_owned()));

    let attempts = [
        ("release_task", json!({"taskId": task}), "release failed"),
        (
            "update_task_status",
            json!({"taskId": task, "status": "done"}),
            "status change failed",
        ),
        ("block_task", json!({"taskId": task}), "block failed"),
    ];
    for (tool, args, prefix) in &attempts {
        let refused = bob.call_tool(tool, args.clone());
        assert_eq!(refused["isError"], json!(true), "{tool}: {refused}");
        assert_eq!(refused["_meta"]["error"], "not_assignee", "{refused}");
        assert_eq!(
            first_text(&refused),
            format!(
                "{prefix}: not_assignee: task {task} is held by alice; only its holder or an operator may move it: ask alice (team chat) or an operator"
            )
        );
        assert_eq!(state(&db, &task), held, "{tool} changed nothing");
    }
    assert_eq!(
        count(&db, "SELECT COUNT(*) FROM agent_inbox"),
        0,
        "a refused move notifies no one"
    );

    // The holder blocks it; bob may not unblock it.
    alice.call_ok("block_task", json!({"taskId": task}));
    let refused = bob.call_tool("unblock_task", json!({"taskId": task}));
    assert_eq!(refused["_meta"]["error"], "not_assignee", "{refused}");
    assert!(first_text(&refused).starts_with("unblock failed: not_assignee: "));
    let blocked = ("blocked".to_owned(), Some("alice".to_owned()));
    assert_eq!(state(&db, &task), blocked);
    alice.call_ok("unblock_task", json!({"taskId": task}));
    assert_eq!(state(&db, &task), ("todo".to_owned(), None));

    // An operator over REST may always move a held task.
    bob.call_ok(
        "claim_task",
        json!({"taskId": task, "assigneeAgentId": "bob"}),
    );
    let r = client()
        .patch(server.url(&format!("/api/board/{task}")))
        .json(&json!({"status": "blocked"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(
        state(&db, &task),
        ("blocked".to_owned(), Some("bob".to_owned()))
    );
    // So may an unbound MCP session (the operator's own tools).
    let mut operator = tasks(&db, &[]);
    operator.call_ok(
        "update_task_status",
        json!({"taskId": task, "status": "todo"}),
    );
    assert_eq!(state(&db, &task), ("todo".to_owned(), None));
}

#[tokio::test]
async fn a_bound_agent_never_sees_the_id_of_a_foreign_parent() {
    let server = Server::start(&[]);
    let blue_epic = id_of(&create_task(&server, "blue epic", "blue").await);
    let red_story = id_of(&create_task(&server, "red story", "red").await);
    let red_child = id_of(&create_task(&server, "red child", "red").await);
    // red child -> red story -> blue epic, as another surface (or a team move) would leave it.
    for (parent, id) in [(&blue_epic, &red_story), (&red_story, &red_child)] {
        server.db.exec(&format!(
            "UPDATE tasks SET parent_task_id = {} WHERE id = {}",
            sql_quote(parent),
            sql_quote(id)
        ));
    }
    let mut c = tasks(&server.db, &["--team", "red", "--agent", "alice"]);
    let mut answers = Vec::new();

    // The top ancestor shown has no parent, not the foreign one's id.
    let child = c.call_ok("get_task", json!({"taskId": red_child}));
    assert_eq!(child["task"]["parentTaskId"], red_story.as_str());
    assert_eq!(child["ancestors"].as_array().unwrap().len(), 1, "{child}");
    assert_eq!(child["ancestors"][0]["id"], red_story.as_str());
    assert_eq!(child["ancestors"][0]["parentTaskId"], Value::Null);
    answers.push(child);
    let story = c.call_ok("get_task", json!({"taskId": red_story}));
    assert_eq!(story["task"]["parentTaskId"], Value::Null, "{story}");
    assert_eq!(story["ancestors"], json!([]));
    answers.push(story);
    let listed = c.call_ok("list_tasks", json!({}));
    let listed_story = listed["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["id"] == red_story.as_str())
        .unwrap();
    assert_eq!(listed_story["parentTaskId"], Value::Null, "{listed}");
    answers.push(listed.clone());
    // Nor does any write's answer show it.
    answers.push(c.call_ok(
        "claim_task",
        json!({"taskId": red_story, "assigneeAgentId": "alice"}),
    ));
    answers.push(c.call_ok(
        "update_task_status",
        json!({"taskId": red_story, "status": "blocked"}),
    ));
    answers.push(c.call_ok("claim_next", json!({})));
    for answer in &answers {
        assert!(!answer.to_string().contains(&blue_epic), "{answer}");
    }
    // The cap still counts the whole tree: red story sits at depth 1, so a subtask of it
    // is at depth 2, and one of red child would be at depth 3.
    let made = c.call_ok(
        "create_subtask",
        json!({"parentTaskId": red_story, "title": "red detail"}),
    );
    assert_eq!(made["task"]["parentTaskId"], red_story.as_str());
    let deep = c.call_tool(
        "create_subtask",
        json!({"parentTaskId": red_child, "title": "too deep"}),
    );
    assert_eq!(deep["_meta"]["denied"], "depth_cap", "{deep}");

    // The operator still sees where red story hangs.
    let rest = board_detail(&server, &red_story).await;
    assert_eq!(rest["task"]["parentTaskId"], blue_epic.as_str());
    let mut operator = tasks(&server.db, &[]);
    let seen = operator.call_ok("get_task", json!({"taskId": red_child}));
    assert_eq!(seen["ancestors"][0]["id"], blue_epic.as_str(), "{seen}");
}

#[test]
fn a_parent_of_another_team_is_refused_before_its_caps_are_counted() {
    let db = TestDb::new();
    let mut operator = tasks(&db, &[]);
    let blue_epic = id_of(
        &operator.call_ok(
            "create_task",
            json!({"title": "blue epic", "teamId": "blue"}),
        )["task"],
    );
    let mut children = Vec::new();
    for i in 0..24 {
        let made = operator.call_ok(
            "create_subtask",
            json!({"parentTaskId": blue_epic, "title": format!("blue part {i}")}),
        );
        children.push(id_of(&made["task"]));
    }
    let blue_leaf = id_of(
        &operator.call_ok(
            "create_task",
            json!({"title": "blue leaf", "teamId": "blue", "parentTaskId": children[0]}),
        )["task"],
    );
    // blue epic is full and blue leaf is at the maximum depth: for blue itself these are
    // caps.
    let full = operator.call_tool(
        "create_subtask",
        json!({"parentTaskId": blue_epic, "title": "one more"}),
    );
    assert_eq!(full["_meta"]["denied"], "child_cap", "{full}");
    let before = count(&db, "SELECT COUNT(*) FROM tasks");

    // A session bound to red cannot see either parent: not found, whatever its caps.
    let mut red = tasks(&db, &["--team", "red", "--agent", "alice"]);
    for parent in [&blue_epic, &blue_leaf] {
        for tool in ["create_subtask", "create_task"] {
            let refused = red.call_tool(tool, json!({"parentTaskId": parent, "title": "x"}));
            assert_eq!(refused["isError"], json!(true), "{refused}");
            assert_eq!(first_text(&refused), format!("parent not found: {parent}"));
            assert_eq!(refused["_meta"]["denied"], "parent_not_found", "{refused}");
        }
    }
    // An unbound session filing work for red under a blue parent is told the parent is
    // blue's, not blue's cap state.
    for parent in [&blue_epic, &blue_leaf] {
        let refused = operator.call_tool(
            "create_task",
            json!({"parentTaskId": parent, "title": "x", "teamId": "red"}),
        );
        assert_eq!(refused["isError"], json!(true), "{refused}");
        assert_eq!(refused["_meta"]["error"], "invalid_args", "{refused}");
        assert_eq!(refused["_meta"]["denied"], Value::Null, "{refused}");
        assert_eq!(
            first_text(&refused),
            format!(
                "invalid args: parent {parent} belongs to team blue, not to team red: a subtask lives in its parent's team; leave teamId out (it defaults to the parent's) or pick a parent of team red"
            )
        );
    }
    assert_eq!(count(&db, "SELECT COUNT(*) FROM tasks"), before);
}
