//! Path reservations (SPEC §19) across real processes: two agents, each its own stdio Tasks
//! server on one database, claim tasks with glob `paths`; overlapping globs are refused to
//! the second with who holds what, globs that only share a prefix both win, and the
//! holder's lease running out frees the paths; `GET /api/reservations` lists them, and the
//! pre-commit hook `clawboo hooks install` writes refuses another agent's files in a real
//! git repository. On the backend `CLAWBOO_TEST_BACKEND` names.

#![allow(clippy::unwrap_used)]

mod common;
mod http_support;

use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use common::{StdioClient, TestDb, first_text};
use http_support::{Server, clawboo, get_json};
use serde_json::{Value, json};

const TASKS_BIN: &str = env!("CARGO_BIN_EXE_clawboo-mcp-tasks");

/// The most a test waits for a lease to run out before failing (a reclaim that never
/// comes fails instead of hanging).
const GIVE_UP: Duration = Duration::from_secs(60);

/// An agent of team `core`: its own stdio server process, bound to `agent`.
fn agent(db: &TestDb, agent: &str, lease_secs: &str) -> StdioClient {
    let mut c = StdioClient::spawn_with_env(
        TASKS_BIN,
        db,
        &["--agent", agent, "--team", "core"],
        &[("CLAWBOO_LEASE_SECS", lease_secs)],
    );
    c.initialize();
    c
}

fn create(c: &mut StdioClient, title: &str, paths: Option<Value>) -> String {
    let mut args = json!({ "title": title });
    if let Some(paths) = paths {
        args["paths"] = paths;
    }
    let t = c.call_ok("create_task", args);
    t["task"]["id"].as_str().unwrap().to_owned()
}

fn claim(c: &mut StdioClient, id: &str, paths: Value) -> Value {
    c.call_tool(
        "claim_task",
        json!({"taskId": id, "assigneeAgentId": "ignored", "paths": paths}),
    )
}

#[test]
fn overlapping_globs_are_refused_naming_the_holder_and_prefix_sharing_ones_both_win() {
    let db = TestDb::new();
    let mut alice = agent(&db, "alice", "1800");
    let mut bob = agent(&db, "bob", "1800");
    let store_work = create(&mut alice, "rework the store", None);
    let store_file = create(&mut bob, "fix one store file", None);

    let won = claim(&mut alice, &store_work, json!(["src/**"]));
    assert_eq!(won["isError"], false, "{won}");
    let task: Value = serde_json::from_str(first_text(&won)).unwrap();
    assert_eq!(task["task"]["paths"], json!(["src/**"]));

    let refused = claim(&mut bob, &store_file, json!(["src/store/*.rs"]));
    assert_eq!(refused["isError"], true, "{refused}");
    assert_eq!(refused["_meta"]["error"], "reserved");
    let text = first_text(&refused);
    assert!(text.starts_with("claim failed: reserved: "), "{text}");
    for needed in [
        "alice",
        store_work.as_str(),
        "rework the store",
        "src/store/*.rs overlaps src/**",
        "claim_next skips",
    ] {
        assert!(text.contains(needed), "{needed:?} missing from {text}");
    }
    // The refusal changed nothing: bob's task is still todo and unheld.
    let detail = bob.call_ok("get_task", json!({"taskId": store_file}));
    assert_eq!(detail["task"]["status"], "todo");
    assert!(detail["task"]["assigneeAgentId"].is_null());

    // Globs that share a prefix but no path both win.
    let a = create(&mut alice, "a files", None);
    let b = create(&mut bob, "b files", None);
    let mut carol = agent(&db, "carol", "1800");
    let mut dave = agent(&db, "dave", "1800");
    assert_eq!(claim(&mut carol, &a, json!(["docs/a*"]))["isError"], false);
    assert_eq!(claim(&mut dave, &b, json!(["docs/b*"]))["isError"], false);
    // A character class or a `?` overlapping carol's `docs/a*` is refused.
    let c = create(&mut dave, "c files", None);
    let refused = claim(&mut dave, &c, json!(["docs/[xa]?.md"]));
    assert_eq!(refused["_meta"]["error"], "reserved", "{refused}");
    assert!(first_text(&refused).contains("carol"));

    // The list shows each task's reserved paths.
    let listed = alice.call_ok("list_tasks", json!({"status": "in_progress"}));
    let paths: Vec<&Value> = listed["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| &t["paths"])
        .collect();
    assert!(paths.contains(&&json!(["src/**"])), "{listed}");
    assert!(paths.contains(&&json!(["docs/a*"])), "{listed}");

    // Released, alice's paths are free for bob.
    alice.call_ok("release_task", json!({"taskId": store_work}));
    let won = claim(&mut bob, &store_file, json!(["src/store/*.rs"]));
    assert_eq!(won["isError"], false, "{won}");
}

/// Six agents, each its own process, claim six tasks at once with patterns that all
/// overlap (`src/**`, `src/store/*.rs`, …), named in the claim or declared by the task: in
/// every round exactly one wins and every other is told who holds what. The check and the claim are one step across processes (and, on
/// PostgreSQL, across connections as two hosts would hold them).
#[test]
fn racing_overlapping_claims_in_separate_processes_have_exactly_one_winner() {
    const AGENTS: usize = 6;
    const ROUNDS: usize = 8;
    let db = TestDb::new();
    let mut agents: Vec<StdioClient> = (0..AGENTS)
        .map(|i| agent(&db, &format!("agent{i}"), "1800"))
        .collect();
    let patterns = [
        "src/**",
        "src/store/*.rs",
        "src/store/mod.rs",
        "**/mod.rs",
        "src/*/mod.?s",
        "src/[rs]tore/**",
    ];
    for round in 0..ROUNDS {
        // Even rounds name the paths in the claim; odd ones claim tasks that declare them.
        let declared = round % 2 == 1;
        let pattern = |i: usize| patterns[(i + round) % AGENTS];
        // Subtasks of one parent a round, so the root-creation cap stays out of the way.
        let parent = create(&mut agents[0], &format!("round {round}"), None);
        let ids: Vec<String> = (0..AGENTS)
            .map(|i| {
                let mut args = json!({"title": format!("r{round} t{i}"), "parentTaskId": parent});
                if declared {
                    args["paths"] = json!([pattern(i)]);
                }
                let t = agents[0].call_ok("create_task", args);
                t["task"]["id"].as_str().unwrap().to_owned()
            })
            .collect();
        // Every request is written before any answer is read.
        for (i, c) in agents.iter_mut().enumerate() {
            let mut args = json!({"taskId": ids[i], "assigneeAgentId": "x"});
            if !declared {
                args["paths"] = json!([pattern(i)]);
            }
            c.send(&json!({
                "jsonrpc": "2.0", "id": 10_000 + round, "method": "tools/call",
                "params": {"name": "claim_task", "arguments": args}
            }));
        }
        let answers: Vec<Value> = agents
            .iter_mut()
            .map(|c| c.recv_id(&json!(10_000 + round))["result"].clone())
            .collect();
        let winners: Vec<usize> = (0..AGENTS)
            .filter(|&i| answers[i]["isError"] == false)
            .collect();
        assert_eq!(winners.len(), 1, "round {round}: {answers:?}");
        let winner = winners[0];
        for (i, answer) in answers.iter().enumerate().filter(|(i, _)| *i != winner) {
            assert_eq!(
                answer["_meta"]["error"], "reserved",
                "round {round}: {answer}"
            );
            let text = first_text(answer);
            assert!(text.contains(&format!("agent{winner}")), "{i}: {text}");
            assert!(text.contains(&ids[winner]), "{i}: {text}");
        }
        agents[winner].call_ok(
            "update_task_status",
            json!({"taskId": ids[winner], "status": "done"}),
        );
    }
}

#[test]
fn bad_patterns_are_refused_with_what_to_write_and_change_nothing() {
    let db = TestDb::new();
    let mut alice = agent(&db, "alice", "1800");
    let id = create(&mut alice, "t", None);
    for bad in [json!(["/etc/passwd"]), json!(["../up"]), json!(["src/["])] {
        let refused = claim(&mut alice, &id, bad.clone());
        assert_eq!(
            refused["_meta"]["error"], "invalid_args",
            "{bad}: {refused}"
        );
        assert!(
            first_text(&refused).contains("relative to the repository root"),
            "{refused}"
        );
    }
    let refused = alice.call_tool("create_task", json!({"title": "x", "paths": ["/abs"]}));
    assert_eq!(refused["_meta"]["error"], "invalid_args", "{refused}");
    let detail = alice.call_ok("get_task", json!({"taskId": id}));
    assert_eq!(detail["task"]["status"], "todo");
}

#[test]
fn claim_next_skips_tasks_whose_declared_paths_another_agent_holds() {
    let db = TestDb::new();
    let mut alice = agent(&db, "alice", "1800");
    let mut bob = agent(&db, "bob", "1800");
    let held = create(&mut alice, "store work", Some(json!(["src/store/**"])));
    let won = alice.call_ok(
        "claim_task",
        json!({"taskId": held, "assigneeAgentId": "alice"}),
    );
    assert_eq!(won["task"]["paths"], json!(["src/store/**"]));
    // Claiming the task alice holds is a conflict, as it always was, not a reservation.
    let taken = bob.call_tool(
        "claim_task",
        json!({"taskId": held, "assigneeAgentId": "bob"}),
    );
    assert_eq!(taken["_meta"]["error"], "conflict", "{taken}");
    let clashing = create(&mut alice, "store file", Some(json!(["src/store/mod.rs"])));
    let free = create(&mut alice, "docs", Some(json!(["docs/**"])));
    // `clashing` is older, so first in the board's order: bob gets `free` instead.
    let next = bob.call_ok("claim_next", json!({}));
    assert_eq!(next["task"]["id"], free.as_str(), "{next}");
    assert_eq!(next["task"]["paths"], json!(["docs/**"]));
    let none = bob.call_ok("claim_next", json!({}));
    assert_eq!(none["reason"], "nothing_ready", "{none}");
    // claim_next naming paths another agent holds is refused with who holds them.
    let refused = bob.call_tool("claim_next", json!({"paths": ["src/**"]}));
    assert_eq!(refused["_meta"]["error"], "reserved", "{refused}");
    assert!(first_text(&refused).contains(&held));
    let detail = bob.call_ok("get_task", json!({"taskId": clashing}));
    assert_eq!(detail["task"]["status"], "todo", "{detail}");
}

#[test]
fn the_holders_lease_running_out_frees_its_paths() {
    let db = TestDb::new();
    let mut alice = agent(&db, "alice", "2");
    let mut bob = agent(&db, "bob", "2");
    let mine = create(&mut alice, "mine", None);
    let theirs = create(&mut bob, "theirs", None);
    assert_eq!(
        claim(&mut alice, &mine, json!(["src/**"]))["isError"],
        false
    );
    alice.kill();
    let started = Instant::now();
    loop {
        let answer = claim(&mut bob, &theirs, json!(["src/lib.rs"]));
        if answer["isError"] == false {
            break;
        }
        assert_eq!(answer["_meta"]["error"], "reserved", "{answer}");
        assert!(started.elapsed() < GIVE_UP, "alice's lease never ran out");
        std::thread::sleep(Duration::from_millis(200));
    }
    let detail = bob.call_ok("get_task", json!({"taskId": mine}));
    assert_eq!(detail["task"]["status"], "todo", "{detail}");
}

/// `GET /api/reservations?teamId=team`'s body.
async fn reservations_of(server: &Server, team: &str) -> Value {
    get_json(&server.url(&format!("/api/reservations?teamId={team}"))).await
}

#[tokio::test]
async fn the_rest_api_lists_live_reservations_by_team() {
    let server = Server::start(&[]);
    let db = server.db.clone();
    let id = tokio::task::spawn_blocking(move || {
        let mut alice = agent(&db, "alice", "1800");
        let id = create(&mut alice, "store work", None);
        assert_eq!(
            claim(&mut alice, &id, json!(["src/store/**"]))["isError"],
            false
        );
        // Kept alive past the request: a reservation needs no live process, only a lease.
        alice.kill();
        id
    })
    .await
    .unwrap();
    let listed = reservations_of(&server, "core").await;
    let all = listed["reservations"].as_array().unwrap();
    assert_eq!(all.len(), 1, "{listed}");
    assert_eq!(all[0]["taskId"], id.as_str());
    assert_eq!(all[0]["holder"], "alice");
    assert_eq!(all[0]["paths"], json!(["src/store/**"]));
    assert!(all[0]["leaseExpiresAt"].as_i64().is_some());
    let other = reservations_of(&server, "elsewhere").await;
    assert_eq!(other["reservations"], json!([]));
}

/// `git` in `repo`, with no user or system configuration in the way.
fn git(repo: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new("git")
        .current_dir(repo)
        .args(args)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .envs(env.iter().copied())
        .output()
        .unwrap()
}

fn git_ok(repo: &Path, args: &[&str]) {
    let out = git(repo, args, &[]);
    assert!(out.status.success(), "git {args:?}: {out:?}");
}

#[test]
fn the_installed_hook_refuses_another_agents_reserved_file_and_lets_the_holder_commit() {
    let db = TestDb::new();
    let mut alice = agent(&db, "alice", "1800");
    let id = create(&mut alice, "store work", None);
    assert_eq!(
        claim(&mut alice, &id, json!(["src/store/**"]))["isError"],
        false
    );

    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path();
    git_ok(repo, &["init", "-q"]);
    git_ok(repo, &["config", "user.email", "agents@example.com"]);
    git_ok(repo, &["config", "user.name", "agents"]);
    std::fs::create_dir_all(repo.join("src/store")).unwrap();
    std::fs::write(repo.join("src/store/mod.rs"), "// store\n").unwrap();
    std::fs::write(repo.join("README.md"), "hello\n").unwrap();
    // An existing hook is kept, and still runs.
    let hooks = repo.join(".git/hooks");
    std::fs::write(
        hooks.join("pre-commit"),
        "#!/bin/sh\necho ran >> \"$(git rev-parse --git-dir)/previous-hook-ran\"\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(
        hooks.join("pre-commit"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    let installed = clawboo()
        .current_dir(repo)
        .args(["hooks", "install"])
        .output()
        .unwrap();
    assert!(installed.status.success(), "{installed:?}");
    assert!(String::from_utf8_lossy(&installed.stdout).contains("previous hook is kept"));
    // Installing again rewrites clawboo's own hook and keeps the same previous one.
    let again = clawboo()
        .current_dir(repo)
        .args(["hooks", "install"])
        .output()
        .unwrap();
    assert!(again.status.success(), "{again:?}");

    let db_path = db.db_arg().to_str().unwrap().to_owned();
    let as_agent = |who: &'static str| {
        vec![
            ("CLAWBOO_DB_PATH", db_path.clone()),
            ("CLAWBOO_AGENT_ID", who.to_owned()),
            ("CLAWBOO_TEAM_ID", "core".to_owned()),
        ]
    };
    let commit = |env: &[(&str, String)], message: &str| {
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        git(repo, &["commit", "-q", "-m", message], &env)
    };

    // Bob may commit a file nobody reserved.
    git_ok(repo, &["add", "README.md"]);
    let out = commit(&as_agent("bob"), "readme");
    assert!(out.status.success(), "{out:?}");
    assert!(
        repo.join(".git/previous-hook-ran").exists(),
        "the kept hook ran"
    );

    // Bob's commit of alice's reserved file is refused, naming holder and task.
    git_ok(repo, &["add", "src/store/mod.rs"]);
    let out = commit(&as_agent("bob"), "store");
    assert!(!out.status.success(), "{out:?}");
    let said = String::from_utf8_lossy(&out.stderr);
    for needed in [
        "src/store/mod.rs",
        "alice",
        id.as_str(),
        "store work",
        "src/store/**",
    ] {
        assert!(said.contains(needed), "{needed:?} missing from {said}");
    }
    let log = git(repo, &["log", "--format=%s"], &[]);
    assert_eq!(String::from_utf8_lossy(&log.stdout).trim(), "readme");

    // Alice, the holder, commits it.
    let out = commit(&as_agent("alice"), "store");
    assert!(out.status.success(), "{out:?}");

    // The check alone, on files named: exit status and the same listing.
    let check = clawboo()
        .args(["reservations", "check", "--team", "core", "--agent", "bob"])
        .args(["--db", &db_path, "src/store/x.rs", "docs/y.md"])
        .output()
        .unwrap();
    assert!(!check.status.success());
    let said = String::from_utf8_lossy(&check.stderr);
    assert!(said.contains("src/store/x.rs: reserved by alice"), "{said}");
    assert!(!said.contains("docs/y.md"), "{said}");
}
