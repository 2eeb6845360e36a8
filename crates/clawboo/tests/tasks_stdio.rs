//! The Tasks server through the real `clawboo-mcp-tasks` binary over stdio.

mod common;

use clawboo_mcp::tasks::CLAIM_CONFLICT;
use common::{StdioClient, TestDb, first_text};
use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_clawboo-mcp-tasks");

fn tasks(db: &TestDb, args: &[&str]) -> StdioClient {
    let mut c = StdioClient::spawn(BIN, db, args);
    c.initialize();
    c
}

/// Assert a tool-error with exactly `text` and `_meta.error = code`.
fn assert_refused(result: &Value, text: &str, code: &str) {
    assert_eq!(
        result["isError"],
        json!(true),
        "expected a tool-error: {result}"
    );
    assert_eq!(first_text(result), text, "{result}");
    assert_eq!(result["_meta"]["error"], json!(code), "{result}");
}

fn create(c: &mut StdioClient, args: Value) -> String {
    c.call_ok("create_task", args)["task"]["id"]
        .as_str()
        .expect("test setup")
        .to_owned()
}

#[test]
fn initialize_reports_name_version_and_lists_thirteen_tools_with_plain_schemas() {
    let db = TestDb::new();
    let mut c = StdioClient::spawn(BIN, &db, &[]);
    let info = c.initialize();
    assert_eq!(
        info["serverInfo"],
        json!({"name": "clawboo-tasks", "version": "0.1.0"})
    );
    let answer = c.request("tools/list", json!({}));
    let tools = answer["result"]["tools"].as_array().unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "list_tasks",
            "get_task",
            "create_task",
            "create_subtask",
            "claim_task",
            "assign_task",
            "claim_next",
            "release_task",
            "update_task_status",
            "block_task",
            "unblock_task",
            "add_comment",
            "link_task"
        ]
    );
    let schema =
        |name: &str| tools.iter().find(|t| t["name"] == name).unwrap()["inputSchema"].clone();
    let create = schema("create_task");
    assert_eq!(create["type"], "object");
    assert_eq!(create["required"], json!(["title"]));
    assert_eq!(create["properties"]["priority"]["type"], "integer");
    assert_eq!(create["properties"]["parentTaskId"]["minLength"], 1);
    assert_eq!(
        create["properties"]["status"]["enum"],
        json!([
            "backlog",
            "todo",
            "in_progress",
            "in_review",
            "blocked",
            "done",
            "cancelled"
        ])
    );
    assert_eq!(
        schema("claim_task")["required"],
        json!(["taskId", "assigneeAgentId"])
    );
    assert_eq!(
        schema("create_subtask")["required"],
        json!(["parentTaskId", "title"])
    );
    assert_eq!(
        schema("add_comment")["properties"]["authorType"]["enum"],
        json!(["agent", "user", "system"])
    );
    for t in tools {
        let text = t["inputSchema"].to_string();
        assert!(
            !text.contains("$schema") && !text.contains("null") && !text.contains("$ref"),
            "{text}"
        );
    }
    assert_eq!(c.close(), Some(0));
}

#[test]
fn every_tool_succeeds_on_its_happy_path() {
    let db = TestDb::new();
    let mut c = tasks(&db, &[]);
    let root = c.call_ok(
        "create_task",
        json!({"title": "ship it", "priority": 5, "teamId": "t1", "description": "d"}),
    );
    let root_id = root["task"]["id"].as_str().unwrap().to_owned();
    assert_eq!(root["task"]["status"], "todo");
    assert_eq!(root["task"]["teamId"], "t1");
    let sub = c.call_ok(
        "create_subtask",
        json!({"parentTaskId": root_id, "title": "write tests"}),
    );
    let sub_id = sub["task"]["id"].as_str().unwrap().to_owned();
    assert_eq!(
        sub["task"]["teamId"], "t1",
        "a subtask inherits its parent's team"
    );
    let other = create(&mut c, json!({"title": "docs", "parentTaskId": root_id}));

    let linked = c.call_ok(
        "link_task",
        json!({"taskId": sub_id, "dependsOnTaskId": other}),
    );
    assert_eq!(linked, json!({"taskId": sub_id, "dependsOnTaskId": other}));
    let ready = c.call_ok("list_tasks", json!({"ready": true}));
    let ready_ids: Vec<&str> = ready["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        ready_ids,
        [root_id.as_str(), other.as_str()],
        "priority first, and the blocked subtask is not ready"
    );

    let claimed = c.call_ok(
        "claim_task",
        json!({"taskId": other, "assigneeAgentId": "a1", "assigneeRuntime": "codex"}),
    );
    assert_eq!(claimed["task"]["status"], "in_progress");
    assert_eq!(claimed["task"]["assigneeAgentId"], "a1");
    assert_eq!(claimed["task"]["assigneeRuntime"], "codex");
    let released = c.call_ok("release_task", json!({"taskId": other}));
    assert_eq!(released["task"]["status"], "todo");
    assert_eq!(released["task"]["assigneeAgentId"], Value::Null);
    let assigned = c.call_ok(
        "assign_task",
        json!({"taskId": other, "assigneeAgentId": "a2"}),
    );
    assert_eq!(assigned["task"]["assigneeAgentId"], "a2");
    for status in ["in_review", "done"] {
        let moved = c.call_ok(
            "update_task_status",
            json!({"taskId": other, "status": status}),
        );
        assert_eq!(moved["task"]["status"], status);
    }
    let done = c.call_ok("get_task", json!({"taskId": other}));
    assert!(
        done["task"]["completedAt"].is_i64(),
        "entering done stamps completedAt"
    );

    let blocked = c.call_ok("block_task", json!({"taskId": sub_id}));
    assert_eq!(blocked["task"]["status"], "blocked");
    let unblocked = c.call_ok("unblock_task", json!({"taskId": sub_id}));
    assert_eq!(unblocked["task"]["status"], "todo");

    let comment = c.call_ok(
        "add_comment",
        json!({"taskId": sub_id, "body": "started", "authorAgentId": "a1"}),
    );
    assert_eq!(comment["comment"]["authorType"], "agent");
    assert_eq!(comment["comment"]["body"], "started");

    let detail = c.call_ok("get_task", json!({"taskId": sub_id}));
    assert_eq!(detail["task"]["dependsOn"], json!([other]));
    assert_eq!(detail["comments"].as_array().unwrap().len(), 1);
    assert_eq!(detail["ancestors"].as_array().unwrap().len(), 1);
    assert_eq!(detail["ancestors"][0]["id"], json!(root_id));

    let team_list = c.call_ok("list_tasks", json!({"teamId": "t1", "status": "todo"}));
    assert_eq!(team_list["tasks"].as_array().unwrap().len(), 2);
    let raw = c.call_tool("list_tasks", json!({}));
    assert!(!first_text(&raw).contains('\n'), "results are compact JSON");
}

#[test]
fn refusals_carry_exact_texts_and_codes() {
    let db = TestDb::new();
    let mut c = tasks(&db, &[]);
    let a = create(&mut c, json!({"title": "a"}));
    let b = create(&mut c, json!({"title": "b"}));

    assert_refused(
        &c.call_tool("get_task", json!({"taskId": "nope"})),
        "not found: nope",
        "not_found",
    );
    assert_refused(
        &c.call_tool(
            "claim_task",
            json!({"taskId": "nope", "assigneeAgentId": "x"}),
        ),
        "claim failed: not_found",
        "not_found",
    );
    c.call_ok("claim_task", json!({"taskId": a, "assigneeAgentId": "x"}));
    assert_refused(
        &c.call_tool("claim_task", json!({"taskId": a, "assigneeAgentId": "y"})),
        CLAIM_CONFLICT,
        "conflict",
    );
    assert_refused(
        &c.call_tool("assign_task", json!({"taskId": a, "assigneeAgentId": "y"})),
        CLAIM_CONFLICT,
        "conflict",
    );
    // A dependency that is not done makes a task unclaimable (we differ: ready == claimable).
    c.call_ok("link_task", json!({"taskId": b, "dependsOnTaskId": a}));
    assert_refused(
        &c.call_tool("claim_task", json!({"taskId": b, "assigneeAgentId": "y"})),
        "claim failed: not_ready",
        "not_ready",
    );
    assert_refused(
        &c.call_tool("release_task", json!({"taskId": b})),
        "release failed: illegal_transition",
        "illegal_transition",
    );
    assert_refused(
        &c.call_tool("release_task", json!({"taskId": "nope"})),
        "release failed: not_found",
        "not_found",
    );
    assert_refused(
        &c.call_tool("unblock_task", json!({"taskId": b})),
        "unblock failed: illegal_transition",
        "illegal_transition",
    );
    c.call_ok("update_task_status", json!({"taskId": a, "status": "done"}));
    assert_refused(
        &c.call_tool("block_task", json!({"taskId": a})),
        "block failed: illegal_transition",
        "illegal_transition",
    );
    assert_refused(
        &c.call_tool("update_task_status", json!({"taskId": a, "status": "todo"})),
        "status change failed: illegal_transition",
        "illegal_transition",
    );
    assert_refused(
        &c.call_tool(
            "update_task_status",
            json!({"taskId": "nope", "status": "todo"}),
        ),
        "status change failed: not_found",
        "not_found",
    );
    assert_refused(
        &c.call_tool("add_comment", json!({"taskId": "nope", "body": "x"})),
        "not found: nope",
        "not_found",
    );
    assert_refused(
        &c.call_tool("link_task", json!({"taskId": "nope", "dependsOnTaskId": a})),
        "not found: nope",
        "not_found",
    );
    assert_refused(
        &c.call_tool("frobnicate", json!({})),
        "unknown tool: frobnicate",
        "unknown_tool",
    );

    for (tool, args) in [
        ("get_task", json!({})),
        ("get_task", json!({"taskId": 7})),
        ("create_task", json!({"title": "x", "priority": 1.5})),
        ("create_task", json!({"title": "x", "status": "doing"})),
        ("create_task", json!({"title": "x", "parentTaskId": ""})),
        ("create_task", json!({"title": "   "})),
        ("create_subtask", json!({"parentTaskId": "", "title": "x"})),
        ("list_tasks", json!({"bogus": true})),
        ("add_comment", json!({"taskId": a, "body": ""})),
        ("claim_task", json!({"taskId": a, "assigneeAgentId": ""})),
    ] {
        let result = c.call_tool(tool, args.clone());
        assert_eq!(result["isError"], json!(true), "{tool} {args}: {result}");
        assert!(
            first_text(&result).starts_with("invalid args: "),
            "{tool} {args}: {result}"
        );
        assert_eq!(result["_meta"]["error"], "invalid_args");
        assert!(
            result["_meta"].get("denied").is_none(),
            "ordinary failures must not use _meta.denied"
        );
    }
    let count = c.call_ok("list_tasks", json!({}))["tasks"]
        .as_array()
        .unwrap()
        .len();
    assert_eq!(count, 2, "refused calls changed nothing");
}

#[test]
fn every_illegal_transition_is_refused_and_every_legal_one_accepted() {
    let statuses = [
        "backlog",
        "todo",
        "in_progress",
        "in_review",
        "blocked",
        "done",
        "cancelled",
    ];
    let legal: &[(&str, &[&str])] = &[
        ("backlog", &["todo", "blocked", "cancelled"]),
        ("todo", &["in_progress", "blocked", "backlog", "cancelled"]),
        (
            "in_progress",
            &["in_review", "done", "blocked", "todo", "cancelled"],
        ),
        (
            "in_review",
            &["done", "in_progress", "blocked", "cancelled"],
        ),
        ("blocked", &["todo", "in_progress", "backlog", "cancelled"]),
        ("done", &[]),
        ("cancelled", &[]),
    ];
    let db = TestDb::new();
    // Bound, so that a move into in_progress (a claim) has an agent to hold the task.
    let mut c = tasks(&db, &["--agent", "mover"]);
    for (from, tos) in legal {
        // A parent per source status keeps each under the child cap.
        let parent = create(&mut c, json!({"title": format!("from {from}")}));
        for to in statuses {
            // in_progress is entered only by a claim: such a task starts in todo.
            let created_as = if *from == "in_progress" { "todo" } else { from };
            let id = create(
                &mut c,
                json!({"title": format!("{from}->{to}"), "status": created_as, "parentTaskId": parent}),
            );
            if *from == "in_progress" {
                c.call_ok(
                    "claim_task",
                    json!({"taskId": id, "assigneeAgentId": "mover"}),
                );
            }
            let result = c.call_tool("update_task_status", json!({"taskId": id, "status": to}));
            if from == &to || tos.contains(&to) {
                assert_ne!(
                    result["isError"],
                    json!(true),
                    "{from} -> {to} must be legal: {result}"
                );
            } else {
                assert_refused(
                    &result,
                    "status change failed: illegal_transition",
                    "illegal_transition",
                );
            }
        }
    }
}

#[test]
fn cycles_and_self_links_are_refused_and_relinking_is_a_no_op() {
    let db = TestDb::new();
    let mut c = tasks(&db, &[]);
    let [a, b, d] = ["a", "b", "c"].map(|t| create(&mut c, json!({"title": t})));
    c.call_ok("link_task", json!({"taskId": a, "dependsOnTaskId": b}));
    c.call_ok("link_task", json!({"taskId": b, "dependsOnTaskId": d}));
    let again = c.call_ok("link_task", json!({"taskId": a, "dependsOnTaskId": b}));
    assert_eq!(again, json!({"taskId": a, "dependsOnTaskId": b}));
    assert_eq!(
        c.call_ok("get_task", json!({"taskId": a}))["task"]["dependsOn"],
        json!([b])
    );
    assert_refused(
        &c.call_tool("link_task", json!({"taskId": d, "dependsOnTaskId": a})),
        &format!("linking {d} to {a} would create a dependency cycle"),
        "cycle",
    );
    assert_refused(
        &c.call_tool("link_task", json!({"taskId": b, "dependsOnTaskId": a})),
        &format!("linking {b} to {a} would create a dependency cycle"),
        "cycle",
    );
    assert_refused(
        &c.call_tool("link_task", json!({"taskId": a, "dependsOnTaskId": a})),
        &format!("linking {a} to {a} would create a dependency cycle"),
        "cycle",
    );
    assert_eq!(
        c.call_ok("get_task", json!({"taskId": d}))["task"]["dependsOn"],
        json!([])
    );
}

#[test]
fn caps_hold_at_their_edges() {
    let db = TestDb::new();
    let mut c = tasks(&db, &[]);
    let root = create(&mut c, json!({"title": "root"}));
    let mut children = Vec::new();
    for i in 0..24 {
        children.push(create(
            &mut c,
            json!({"title": format!("child {i}"), "parentTaskId": root}),
        ));
    }
    let refused = c.call_tool(
        "create_subtask",
        json!({"parentTaskId": root, "title": "25th"}),
    );
    assert_refused(
        &refused,
        &format!(
            "subtask rejected: parent {root} already has 24 children (max 24); drop one or attach the new task elsewhere"
        ),
        "child_cap",
    );
    assert_eq!(refused["_meta"]["denied"], "child_cap");
    // Dropping a child (an operator action) frees a slot; done children still count.
    c.call_ok(
        "update_task_status",
        json!({"taskId": children[0], "status": "cancelled"}),
    );
    assert_eq!(
        c.call_tool(
            "create_subtask",
            json!({"parentTaskId": root, "title": "x"})
        )["_meta"]["denied"],
        "child_cap"
    );
    let board = std::process::Command::new(env!("CARGO_BIN_EXE_clawboo"))
        .args(["board", "drop", &children[1], "--db"])
        .arg(&db)
        .output()
        .unwrap();
    assert!(board.status.success(), "{board:?}");
    create(
        &mut c,
        json!({"title": "replacement", "parentTaskId": root}),
    );

    let depth1 = children[2].clone();
    let depth2 = create(
        &mut c,
        json!({"title": "grandchild", "parentTaskId": depth1}),
    );
    let refused = c.call_tool(
        "create_task",
        json!({"title": "too deep", "parentTaskId": depth2}),
    );
    assert_refused(
        &refused,
        &format!(
            "subtask rejected: parent {depth2} is at the maximum nesting depth (2); attach the new task higher in the tree"
        ),
        "depth_cap",
    );
    assert_eq!(refused["_meta"]["denied"], "depth_cap");

    let refused = c.call_tool(
        "create_subtask",
        json!({"parentTaskId": "ghost", "title": "x"}),
    );
    assert_refused(&refused, "parent not found: ghost", "parent_not_found");
    assert_eq!(refused["_meta"]["denied"], "parent_not_found");
}

#[test]
fn root_rate_cap_counts_every_surface_and_rolls_with_the_window() {
    let db = TestDb::new();
    let mut c = tasks(&db, &[]);
    // 29 roots created through another surface six minutes ago do not count…
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    insert_roots(&db, 29, now - 6 * 60 * 1000);
    for i in 0..29 {
        create(&mut c, json!({"title": format!("root {i}")}));
    }
    // …a dropped root created just now (another surface) does: velocity is what is bounded.
    insert_roots(&db, 1, now);
    let id = first_root(&db, now);
    let status = std::process::Command::new(env!("CARGO_BIN_EXE_clawboo"))
        .args(["board", "drop", &id, "--db"])
        .arg(&db)
        .status()
        .unwrap();
    assert!(status.success());
    let refused = c.call_tool("create_task", json!({"title": "31st"}));
    assert_refused(
        &refused,
        "task rejected: 30 root tasks already created in the last 5 min (max 30); attach this work to an existing task with parentTaskId instead of opening another",
        "root_rate_cap",
    );
    assert_eq!(refused["_meta"]["denied"], "root_rate_cap");
    // Subtasks are never charged against the root rate.
    let parent = c.call_ok("list_tasks", json!({}))["tasks"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    create(
        &mut c,
        json!({"title": "still fine", "parentTaskId": parent}),
    );
}

fn insert_roots(db: &TestDb, n: usize, created_at: i64) {
    for i in 0..n {
        db.exec(&format!(
            "INSERT INTO tasks(id, title, status, created_at, updated_at) \
             VALUES ('ext-{created_at}-{i}', 'external {i}', 'todo', {created_at}, {created_at})"
        ));
    }
}

fn first_root(db: &TestDb, created_at: i64) -> String {
    db.query_text(&format!(
        "SELECT id FROM tasks WHERE created_at = {created_at} LIMIT 1"
    ))
}

#[test]
fn read_only_mode_serves_only_list_and_get() {
    let db = TestDb::new();
    let mut writer = tasks(&db, &[]);
    let id = create(&mut writer, json!({"title": "visible"}));
    let mut c = tasks(&db, &["--read-only"]);
    assert_eq!(c.tool_names(), ["list_tasks", "get_task"]);
    assert_eq!(
        c.call_ok("get_task", json!({"taskId": id}))["task"]["title"],
        "visible"
    );
    assert_refused(
        &c.call_tool("create_task", json!({"title": "x"})),
        "unknown tool: create_task",
        "unknown_tool",
    );
    assert_refused(
        &c.call_tool("claim_task", json!({"taskId": id, "assigneeAgentId": "x"})),
        "unknown tool: claim_task",
        "unknown_tool",
    );
}

#[test]
fn bound_scope_hides_other_teams_and_fixes_identity() {
    let db = TestDb::new();
    let mut admin = tasks(&db, &[]);
    let theirs = create(&mut admin, json!({"title": "theirs", "teamId": "blue"}));
    let ours = create(&mut admin, json!({"title": "ours", "teamId": "red"}));

    let mut c = tasks(&db, &["--team", "red", "--agent", "alice"]);
    let listed = c.call_ok("list_tasks", json!({"teamId": "blue"}));
    let ids: Vec<&str> = listed["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        [ours.as_str()],
        "list_tasks is forced to the bound team"
    );

    // Another team's task is answered exactly as a missing one, by every tool.
    let missing = "00000000-0000-0000-0000-000000000000";
    for id in [theirs.as_str(), missing] {
        assert_refused(
            &c.call_tool("get_task", json!({"taskId": id})),
            &format!("not found: {id}"),
            "not_found",
        );
        assert_refused(
            &c.call_tool(
                "claim_task",
                json!({"taskId": id, "assigneeAgentId": "alice"}),
            ),
            "claim failed: not_found",
            "not_found",
        );
        assert_refused(
            &c.call_tool("block_task", json!({"taskId": id})),
            "block failed: not_found",
            "not_found",
        );
        assert_refused(
            &c.call_tool("add_comment", json!({"taskId": id, "body": "x"})),
            &format!("not found: {id}"),
            "not_found",
        );
        assert_refused(
            &c.call_tool("link_task", json!({"taskId": ours, "dependsOnTaskId": id})),
            &format!("not found: {id}"),
            "not_found",
        );
        let sub = c.call_tool("create_subtask", json!({"parentTaskId": id, "title": "x"}));
        assert_refused(&sub, &format!("parent not found: {id}"), "parent_not_found");
        let sub = c.call_tool("create_task", json!({"parentTaskId": id, "title": "x"}));
        assert_refused(&sub, &format!("parent not found: {id}"), "parent_not_found");
    }

    let created = c.call_ok("create_task", json!({"title": "mine", "teamId": "blue"}));
    assert_eq!(
        created["task"]["teamId"], "red",
        "create_task lands in the bound team"
    );
    let claimed = c.call_ok(
        "claim_task",
        json!({"taskId": ours, "assigneeAgentId": "mallory"}),
    );
    assert_eq!(
        claimed["task"]["assigneeAgentId"], "alice",
        "the bound agent claims, whatever the arguments say"
    );
    let comment = c.call_ok(
        "add_comment",
        json!({"taskId": ours, "body": "hi", "authorAgentId": "mallory"}),
    );
    assert_eq!(comment["comment"]["authorAgentId"], "alice");
    assert_eq!(
        admin.call_ok("get_task", json!({"taskId": theirs}))["comments"],
        json!([])
    );
}

#[test]
fn inbox_rows_piggyback_exactly_once_on_the_bound_agents_next_result() {
    let db = TestDb::new();
    let mut admin = tasks(&db, &[]);
    let id = create(&mut admin, json!({"title": "feature", "teamId": "red"}));
    let mut alice = tasks(&db, &["--team", "red", "--agent", "alice"]);
    alice.call_ok(
        "claim_task",
        json!({"taskId": id, "assigneeAgentId": "alice"}),
    );
    // Alice's own moves do not notify her; someone else's do.
    alice.call_ok("add_comment", json!({"taskId": id, "body": "on it"}));
    for i in 0..6 {
        admin.call_ok(
            "add_comment",
            json!({"taskId": id, "body": format!("ping {i}"), "authorAgentId": "bob"}),
        );
    }
    admin.call_ok(
        "update_task_status",
        json!({"taskId": id, "status": "in_review"}),
    );

    let first = alice.call_tool("list_tasks", json!({}));
    let blocks = first["content"].as_array().unwrap();
    assert_eq!(blocks.len(), 2, "{first}");
    let updates = blocks[1]["text"].as_str().unwrap();
    let lines: Vec<&str> = updates.lines().collect();
    assert_eq!(lines[0], "");
    assert_eq!(lines[1], "[team updates — delivered with this tool result]");
    assert_eq!(
        lines.len(),
        2 + 5,
        "at most five rows per result: {updates}"
    );
    assert!(
        lines[2].starts_with("- bob commented \"ping 0\""),
        "{updates}"
    );

    // Two more sessions for alice race for the remaining two rows: each is delivered once.
    let mut alice2 = tasks(&db, &["--team", "red", "--agent", "alice"]);
    let r1 = alice.call_tool("list_tasks", json!({}));
    let r2 = alice2.call_tool("list_tasks", json!({}));
    let delivered: Vec<String> = [r1, r2]
        .iter()
        .flat_map(|r| {
            r["content"]
                .as_array()
                .unwrap()
                .iter()
                .skip(1)
                .map(|b| b["text"].as_str().unwrap().to_owned())
        })
        .flat_map(|t| {
            t.lines()
                .filter(|l| l.starts_with("- "))
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .collect();
    assert_eq!(delivered.len(), 2, "{delivered:?}");
    assert!(
        delivered[0].contains("ping 5") && delivered[1].contains("moved it to in_review"),
        "{delivered:?}"
    );
    let again = alice.call_tool("list_tasks", json!({}));
    assert_eq!(
        again["content"].as_array().unwrap().len(),
        1,
        "nothing is delivered twice"
    );
    // Errors do not consume the inbox.
    admin.call_ok(
        "add_comment",
        json!({"taskId": id, "body": "late", "authorAgentId": "bob"}),
    );
    let err = alice.call_tool("get_task", json!({"taskId": "nope"}));
    assert_eq!(err["content"].as_array().unwrap().len(), 1);
    let ok = alice.call_tool("get_task", json!({"taskId": id}));
    assert_eq!(ok["content"].as_array().unwrap().len(), 2);
}

#[test]
fn stdio_framing_errors_before_initialize_and_clean_exit() {
    let db = TestDb::new();
    let mut c = StdioClient::spawn(BIN, &db, &[]);
    c.send_raw("{not json");
    let parse = c.recv();
    assert_eq!(parse["error"]["code"], -32700);
    assert_eq!(parse["id"], Value::Null);
    for (id, method) in [
        (1, "tools/list"),
        (2, "server/discover"),
        (3, "tools/call"),
        (4, "no/such/method"),
    ] {
        c.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": {}}));
        let answer = c.recv();
        assert_eq!(answer["id"], id);
        assert!(
            answer.get("result").is_none(),
            "{method} before initialize must not succeed: {answer}"
        );
        assert!(
            answer["error"]["message"]
                .as_str()
                .unwrap()
                .contains("initialize"),
            "{answer}"
        );
    }
    c.send_raw("[1,2]");
    assert_eq!(c.recv()["error"]["code"], -32600);
    c.initialize();
    c.send_raw("]]");
    assert_eq!(c.recv()["error"]["code"], -32700);
    assert_eq!(
        c.tool_names().len(),
        13,
        "the session survives malformed lines"
    );
    assert_eq!(c.close(), Some(0));

    // EOF before initialize is a clean exit too.
    let c = StdioClient::spawn(BIN, &db, &[]);
    assert_eq!(c.close(), Some(0));
}

/// The `_meta` a 2026-07-28 request carries in place of `initialize`.
fn modern_meta(version: &str) -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": version,
        "io.modelcontextprotocol/clientCapabilities": {},
    })
}

#[test]
fn protocol_2026_over_stdio_and_discover_leaves_initialize_open() {
    let db = TestDb::new();
    // A probe, stray messages, then the fallback a legacy client makes: still served.
    let mut legacy = StdioClient::spawn(BIN, &db, &[]);
    let discovered = legacy.request(
        "server/discover",
        json!({"_meta": modern_meta("2026-07-28")}),
    );
    let result = &discovered["result"];
    assert!(
        result["supportedVersions"]
            .as_array()
            .unwrap()
            .contains(&json!("2026-07-28")),
        "{discovered}"
    );
    assert_eq!(
        result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"], "clawboo-tasks",
        "{result}"
    );
    legacy.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    legacy.send(&json!({"jsonrpc": "2.0", "id": 99, "result": {}}));
    let early = legacy.request("tools/list", json!({}));
    assert_eq!(early["error"]["code"], -32002, "{early}");
    assert_eq!(legacy.initialize()["protocolVersion"], "2025-06-18");
    assert_eq!(legacy.tool_names().len(), 13);
    assert_eq!(legacy.close(), Some(0));

    // An unsupported version is refused with the list, and the choice stays open.
    let mut modern = StdioClient::spawn(BIN, &db, &["--team", "t26", "--agent", "a26"]);
    let refused = modern.request("tools/list", json!({"_meta": modern_meta("2027-01-01")}));
    assert_eq!(refused["error"]["code"], -32022, "{refused}");
    // Requests carrying the 2026-07-28 `_meta` are served without initialize, bound by
    // the flags.
    let created = modern.request(
        "tools/call",
        json!({"name": "create_task", "arguments": {"title": "inline", "teamId": "other"},
               "_meta": modern_meta("2026-07-28")}),
    );
    let task: Value = serde_json::from_str(first_text(&created["result"])).expect("a task as JSON");
    assert_eq!(task["task"]["teamId"], "t26", "{created}");
    let missing = modern.request(
        "tools/call",
        json!({"name": "get_task", "arguments": {"taskId": "nope"},
               "_meta": modern_meta("2026-07-28")}),
    );
    assert_refused(&missing["result"], "not found: nope", "not_found");
    assert_eq!(modern.close(), Some(0));

    // A client that only probes and leaves ends the process cleanly.
    let mut probe = StdioClient::spawn(BIN, &db, &[]);
    probe.request(
        "server/discover",
        json!({"_meta": modern_meta("2026-07-28")}),
    );
    assert_eq!(probe.close(), Some(0));
}

#[test]
fn stdout_carries_only_json_rpc() {
    let db = TestDb::new();
    let output = std::process::Command::new(BIN)
        .arg("--db")
        .arg(&db)
        .env("RUST_LOG", "trace")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write;
            let mut stdin = child.stdin.take().unwrap();
            writeln!(stdin, r#"{{"jsonrpc":"2.0","id":1,"method":"initialize","params":{{"protocolVersion":"2025-03-26","capabilities":{{}},"clientInfo":{{"name":"t","version":"0"}}}}}}"#)?;
            writeln!(stdin, r#"{{"jsonrpc":"2.0","method":"notifications/initialized"}}"#)?;
            writeln!(stdin, r#"{{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{{"name":"create_task","arguments":{{"title":"x"}}}}}}"#)?;
            drop(stdin);
            child.wait_with_output()
        })
        .unwrap();
    assert!(output.status.success());
    let stdout = String::from_utf8(output.stdout).unwrap();
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{stdout}");
    for line in lines {
        let v: Value = serde_json::from_str(line).unwrap();
        assert_eq!(v["jsonrpc"], "2.0");
    }
    assert_eq!(
        serde_json::from_str::<Value>(stdout.lines().next().unwrap()).unwrap()["result"]["protocolVersion"],
        "2025-03-26"
    );
}

#[test]
fn an_initialize_naming_2026_negotiates_the_newest_version_with_initialize() {
    let db = TestDb::new();
    for (asked, expected) in [
        ("2024-11-05", "2024-11-05"),
        ("2025-11-25", "2025-11-25"),
        ("2026-07-28", "2025-11-25"),
    ] {
        let mut c = StdioClient::spawn(BIN, &db, &[]);
        let answer = c.request(
            "initialize",
            json!({"protocolVersion": asked, "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}),
        );
        assert_eq!(
            answer["result"]["protocolVersion"], expected,
            "{asked}: {answer}"
        );
    }
}

/// A team's agents launched at once start their servers together on a database nobody has
/// opened yet: every one starts and answers, whichever won the race to set the file up.
#[test]
fn servers_started_together_on_a_new_database_all_start() {
    const SERVERS: usize = 12;
    for _ in 0..10 {
        let db = TestDb::new();
        // Every thread spawns its server at the same moment, so the openings overlap.
        let start = std::sync::Arc::new(std::sync::Barrier::new(SERVERS));
        let servers: Vec<_> = (0..SERVERS)
            .map(|_| {
                let (db, start) = (db.clone(), std::sync::Arc::clone(&start));
                std::thread::spawn(move || {
                    start.wait();
                    let mut c = StdioClient::spawn(BIN, &db, &[]);
                    c.initialize();
                    let listed = c.call_ok("list_tasks", json!({}));
                    assert!(listed["tasks"].is_array(), "{listed}");
                    assert_eq!(c.close(), Some(0));
                })
            })
            .collect();
        for server in servers {
            server.join().unwrap();
        }
    }
}
