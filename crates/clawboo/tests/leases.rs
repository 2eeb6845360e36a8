//! Leases, `claim_next` and fencing (SPEC §12) across real processes: stdio servers with a
//! short `CLAWBOO_LEASE_SECS`, killed, racing, and two `clawboo serve` sweepers on one file.

#![allow(clippy::unwrap_used)]

mod common;
mod http_support;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use common::{StdioClient, TestDb, first_text, seed_subtasks, sql_quote};
use http_support::Server;
use serde_json::{Value, json};

const TASKS_BIN: &str = env!("CARGO_BIN_EXE_clawboo-mcp-tasks");
const MEMORY_BIN: &str = env!("CARGO_BIN_EXE_clawboo-mcp-memory");
const TEAMCHAT_BIN: &str = env!("CARGO_BIN_EXE_clawboo-mcp-teamchat");

/// The most a test waits for a lease to run out before failing (never a speed claim: a
/// reclaim that never comes fails instead of hanging).
const GIVE_UP: Duration = Duration::from_secs(60);

fn spawn(bin: &str, db: &TestDb, args: &[&str], lease_secs: &str) -> StdioClient {
    let mut c = StdioClient::spawn_with_env(bin, db, args, &[("CLAWBOO_LEASE_SECS", lease_secs)]);
    c.initialize();
    c
}

fn create(c: &mut StdioClient, title: &str) -> String {
    let t = c.call_ok("create_task", json!({ "title": title }));
    t["task"]["id"].as_str().unwrap().to_owned()
}

/// `claim_next` until it hands out a task (the lease in the way has run out).
fn claim_next_when_free(c: &mut StdioClient) -> Value {
    let started = Instant::now();
    loop {
        let answer = c.call_ok("claim_next", json!({}));
        if !answer["task"].is_null() {
            return answer["task"].clone();
        }
        assert_eq!(answer["reason"], "nothing_ready", "{answer}");
        assert!(started.elapsed() < GIVE_UP, "the lease never ran out");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_killed_holders_task_goes_to_the_next_agent_and_its_claim_token_is_refused() {
    let db = TestDb::new();
    let mut alice = spawn(TASKS_BIN, &db, &["--agent", "alice", "--team", "core"], "2");
    let id = create(&mut alice, "migrate the schema");
    let claimed = alice.call_ok("claim_next", json!({}));
    assert_eq!(claimed["task"]["id"], id.as_str());
    assert_eq!(claimed["task"]["claimToken"], 1);
    assert!(claimed["task"]["leaseExpiresAt"].as_i64().is_some());
    // Claiming it again renews instead of conflicting.
    let again = alice.call_ok(
        "claim_task",
        json!({"taskId": id, "assigneeAgentId": "alice"}),
    );
    assert_eq!(again["task"]["claimToken"], 1);
    alice.kill();

    let mut bob = spawn(TASKS_BIN, &db, &["--agent", "bob", "--team", "core"], "2");
    let task = claim_next_when_free(&mut bob);
    assert_eq!(task["id"], id.as_str());
    assert_eq!(task["assigneeAgentId"], "bob");
    assert_eq!(task["claimToken"], 2);

    // The dead holder's token is refused, and nothing changes.
    let mut late = spawn(TASKS_BIN, &db, &[], "2");
    let refused = late.call_tool(
        "update_task_status",
        json!({"taskId": id, "status": "done", "claimToken": 1}),
    );
    assert_eq!(refused["isError"], true);
    assert_eq!(refused["_meta"]["error"], "stale_claim");
    let text = first_text(&refused);
    assert!(
        text.starts_with("status change failed: stale_claim: "),
        "{text}"
    );
    assert!(text.contains("held by bob"), "{text}");
    let refused = late.call_tool(
        "add_comment",
        json!({"taskId": id, "body": "finished", "claimToken": 1}),
    );
    assert!(
        first_text(&refused).starts_with("comment failed: stale_claim"),
        "{refused}"
    );
    let detail = late.call_ok("get_task", json!({"taskId": id}));
    assert_eq!(detail["task"]["status"], "in_progress");
    assert_eq!(detail["task"]["assigneeAgentId"], "bob");
    let comments = detail["comments"].as_array().unwrap();
    assert_eq!(comments.len(), 1, "only the expiry's: {comments:?}");
    assert_eq!(comments[0]["authorType"], "system");
    assert!(
        comments[0]["body"]
            .as_str()
            .unwrap()
            .contains("alice's lease ran out")
    );
    // The current holder's token works.
    bob.call_ok(
        "update_task_status",
        json!({"taskId": id, "status": "done", "claimToken": 2}),
    );

    // Alice's next session learns what happened with its first result.
    let mut alice = spawn(TASKS_BIN, &db, &["--agent", "alice", "--team", "core"], "2");
    let result = alice.call_tool("list_tasks", json!({}));
    let updates = result["content"][1]["text"].as_str().unwrap_or_default();
    assert!(
        updates.contains("your lease on \"migrate the schema\""),
        "{result}"
    );
}

#[test]
fn a_live_agents_calls_on_other_servers_keep_its_lease_through_several_lease_lengths() {
    const LEASE_SECS: u64 = 4;
    let db = TestDb::new();
    let lease = LEASE_SECS.to_string();
    let bound = ["--agent", "alice", "--team", "core"];
    let mut tasks = spawn(TASKS_BIN, &db, &bound, &lease);
    let id = create(&mut tasks, "long job");
    tasks.call_ok(
        "claim_task",
        json!({"taskId": id, "assigneeAgentId": "alice"}),
    );
    let mut memory = spawn(MEMORY_BIN, &db, &bound, &lease);
    let mut chat = spawn(TEAMCHAT_BIN, &db, &bound, &lease);
    let mut bob = spawn(
        TASKS_BIN,
        &db,
        &["--agent", "bob", "--team", "core"],
        &lease,
    );

    let until = Instant::now() + Duration::from_secs(3 * LEASE_SECS);
    let mut calls = 0;
    while Instant::now() < until {
        if calls % 2 == 0 {
            memory.call_ok("memory_browse", json!({}));
        } else {
            chat.call_ok("team_chat_subscribe", json!({}));
        }
        calls += 1;
        // Another agent keeps asking for work: it must never get alice's task.
        let next = bob.call_ok("claim_next", json!({}));
        assert_eq!(
            next["reason"], "nothing_ready",
            "after {calls} calls: {next}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let detail = tasks.call_ok("get_task", json!({"taskId": id}));
    assert_eq!(detail["task"]["assigneeAgentId"], "alice");
    assert_eq!(detail["task"]["claimToken"], 1, "never reclaimed");
    assert_eq!(detail["comments"], json!([]));
}

#[test]
fn an_agents_calls_on_one_team_keep_no_lease_on_another() {
    const LEASE_SECS: u64 = 2;
    let db = TestDb::new();
    let lease = LEASE_SECS.to_string();
    let mut blue = spawn(
        TASKS_BIN,
        &db,
        &["--agent", "alice", "--team", "blue"],
        &lease,
    );
    let id = create(&mut blue, "blue job");
    blue.call_ok(
        "claim_task",
        json!({"taskId": id, "assigneeAgentId": "alice"}),
    );
    blue.kill();
    // The same agent id stays busy on red, through several lease lengths.
    let mut red = spawn(
        TASKS_BIN,
        &db,
        &["--agent", "alice", "--team", "red"],
        &lease,
    );
    let mut bob = spawn(
        TASKS_BIN,
        &db,
        &["--agent", "bob", "--team", "blue"],
        &lease,
    );
    let started = Instant::now();
    loop {
        red.call_ok("list_tasks", json!({}));
        let next = bob.call_ok("claim_next", json!({}));
        if !next["task"].is_null() {
            assert_eq!(next["task"]["id"], id.as_str());
            assert_eq!(next["task"]["claimToken"], 2);
            break;
        }
        assert!(
            started.elapsed() < GIVE_UP,
            "alice's calls on red kept her lease on blue: {next}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn a_status_move_into_progress_is_a_claim() {
    let db = TestDb::new();
    let mut alice = spawn(
        TASKS_BIN,
        &db,
        &["--agent", "alice", "--team", "core"],
        "60",
    );
    let first = create(&mut alice, "lay the pipes");
    let second = create(&mut alice, "fill the tank");
    alice.call_ok(
        "link_task",
        json!({"taskId": second, "dependsOnTaskId": first}),
    );
    // Not ready: refused as a claim would be, nothing changed.
    let refused = alice.call_tool(
        "update_task_status",
        json!({"taskId": second, "status": "in_progress"}),
    );
    assert_eq!(refused["_meta"]["error"], "not_ready", "{refused}");
    // An unbound caller names nobody to hold it: told to claim instead.
    let mut unbound = spawn(TASKS_BIN, &db, &[], "60");
    let refused = unbound.call_tool(
        "update_task_status",
        json!({"taskId": first, "status": "in_progress"}),
    );
    assert_eq!(refused["_meta"]["error"], "invalid_args", "{refused}");
    assert!(first_text(&refused).contains("claim_task"), "{refused}");
    let untouched = unbound.call_ok("get_task", json!({"taskId": first}));
    assert_eq!(untouched["task"]["status"], "todo");
    assert_eq!(untouched["task"]["claimToken"], 0);
    // Ready: the mover holds it, with a lease and a claim token.
    let moved = alice.call_ok(
        "update_task_status",
        json!({"taskId": first, "status": "in_progress"}),
    );
    assert_eq!(moved["task"]["assigneeAgentId"], "alice");
    assert_eq!(moved["task"]["claimToken"], 1);
    assert!(
        moved["task"]["leaseExpiresAt"].as_i64().is_some(),
        "{moved}"
    );
    // Nor is a task created in progress.
    let created = alice.call_tool(
        "create_task",
        json!({"title": "skip the queue", "status": "in_progress"}),
    );
    assert_eq!(created["_meta"]["error"], "invalid_args", "{created}");
    // Another agent cannot take it by status either.
    let mut bob = spawn(TASKS_BIN, &db, &["--agent", "bob", "--team", "core"], "60");
    let taken = bob.call_tool(
        "update_task_status",
        json!({"taskId": first, "status": "in_progress"}),
    );
    assert_eq!(taken["isError"], true, "{taken}");
    let held = bob.call_ok("get_task", json!({"taskId": first}));
    assert_eq!(held["task"]["assigneeAgentId"], "alice");
}

#[test]
fn racing_claim_next_across_four_processes_hands_every_ready_task_out_once() {
    const PROCESSES: usize = 4;
    const PER_PROCESS: usize = 30;
    const TASKS: usize = PROCESSES * PER_PROCESS;
    let db = TestDb::new();
    let mut setup = spawn(TASKS_BIN, &db, &[], "1800");
    let ids = seed_subtasks(&mut setup, TASKS);

    // As many calls as ready tasks, pipelined in every process at once: a single
    // `nothing_ready` would mean a ready task was left while someone was told none was.
    let handles: Vec<_> = (0..PROCESSES)
        .map(|p| {
            let db = db.clone();
            std::thread::spawn(move || {
                let agent = format!("agent-{p}");
                let mut c = spawn(TASKS_BIN, &db, &["--agent", &agent], "1800");
                for n in 0..PER_PROCESS {
                    c.send(
                        &json!({"jsonrpc": "2.0", "id": 1000 + n, "method": "tools/call",
                        "params": {"name": "claim_next", "arguments": {}}}),
                    );
                }
                let got: Vec<(String, String)> = (0..PER_PROCESS)
                    .map(|n| {
                        let answer = c.recv_id(&json!(1000 + n));
                        let text = first_text(&answer["result"]).to_owned();
                        let v: Value = serde_json::from_str(&text).unwrap();
                        let id = v["task"]["id"].as_str().unwrap_or_else(|| {
                            panic!("{agent} was told {text} while tasks were ready")
                        });
                        (id.to_owned(), agent.clone())
                    })
                    .collect();
                assert_eq!(c.close(), Some(0));
                got
            })
        })
        .collect();
    let mut winners: HashMap<String, Vec<String>> = HashMap::new();
    for h in handles {
        for (id, agent) in h.join().unwrap() {
            winners.entry(id).or_default().push(agent);
        }
    }
    assert_eq!(winners.len(), TASKS, "every ready task was handed out");
    for (id, agents) in &winners {
        assert_eq!(agents.len(), 1, "task {id} went to {agents:?}");
        assert!(ids.contains(id));
    }
    let last = setup.call_ok("claim_next", json!({"assigneeAgentId": "late"}));
    assert_eq!(last, json!({"task": null, "reason": "nothing_ready"}));
    for (id, agents) in &winners {
        let row = db.query_row(&format!(
            "SELECT assignee_agent_id, claim_token FROM tasks WHERE id = {}",
            sql_quote(id)
        ));
        assert_eq!(
            (row[0].as_ref(), row[1].as_deref()),
            (Some(&agents[0]), Some("1"))
        );
    }
}

#[test]
fn two_sweepers_in_two_serve_processes_reclaim_each_task_once() {
    const TASKS: usize = 20;
    let db = TestDb::new();
    let env = [("CLAWBOO_LEASE_SECS", "1")];
    let _one = Server::start_on(&db, "127.0.0.1:0", &env);
    let _two = Server::start_on(&db, "127.0.0.1:0", &env);
    let mut alice = spawn(TASKS_BIN, &db, &["--agent", "alice", "--team", "core"], "1");
    for i in 0..TASKS {
        create(&mut alice, &format!("job {i}"));
        let claimed = alice.call_ok("claim_next", json!({}));
        assert!(!claimed["task"].is_null(), "{claimed}");
    }
    alice.kill();

    // Nobody lists or claims: only the sweepers reclaim.
    let count = |sql: &str| db.query_i64(sql);
    let started = Instant::now();
    while count("SELECT count(*) FROM tasks WHERE status = 'todo'") < TASKS as i64 {
        assert!(started.elapsed() < GIVE_UP, "the sweepers never reclaimed");
        std::thread::sleep(Duration::from_millis(100));
    }
    // Both sweepers keep running a while longer: a second reclaim would show now.
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(
        count("SELECT count(*) FROM task_comments WHERE author_type = 'system'"),
        TASKS as i64
    );
    assert_eq!(
        count("SELECT count(DISTINCT task_id) FROM task_comments WHERE author_type = 'system'"),
        TASKS as i64
    );
    assert_eq!(
        count("SELECT count(*) FROM agent_inbox WHERE agent_id = 'alice' AND source = 'lease'"),
        TASKS as i64
    );
    assert_eq!(
        count("SELECT count(*) FROM team_chat WHERE room_id = 'team:core' AND kind = 'system'"),
        TASKS as i64
    );
    assert_eq!(
        count(
            "SELECT count(*) FROM tasks WHERE reclaimed_from = 'alice' AND assignee_agent_id IS NULL"
        ),
        TASKS as i64
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_agents_api_and_the_board_cli_show_who_holds_what_until_when() {
    let db = TestDb::new();
    let server = Server::start_on(&db, "127.0.0.1:0", &[]);
    let mut alice = spawn(
        TASKS_BIN,
        &db,
        &["--agent", "alice", "--team", "core"],
        "1800",
    );
    let id = create(&mut alice, "review the lease code");
    let claimed = alice.call_ok(
        "claim_task",
        json!({"taskId": id, "assigneeAgentId": "alice", "assigneeRuntime": "codex"}),
    );
    let expires = claimed["task"]["leaseExpiresAt"].as_i64().unwrap();

    let agents = http_support::get_json(&server.url("/api/agents?teamId=core")).await;
    let alice_seen = &agents["agents"][0];
    assert_eq!(alice_seen["id"], "alice", "{agents}");
    assert_eq!(alice_seen["runtime"], "codex");
    assert_eq!(alice_seen["alive"], true);
    assert!(alice_seen["lastSeenAt"].as_i64().is_some(), "{agents}");
    assert_eq!(
        alice_seen["held"],
        json!([{"id": id, "title": "review the lease code", "status": "in_progress",
                "leaseExpiresAt": expires, "claimToken": 1}])
    );

    let out = http_support::clawboo()
        .args(["board", "list", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    // A line is the short id, then the task's id.
    let line = text
        .lines()
        .find(|l| l.split_whitespace().nth(1) == Some(id.as_str()))
        .unwrap();
    assert!(
        line.contains("lease 29m") || line.contains("lease 30m00s"),
        "{line}"
    );
}
