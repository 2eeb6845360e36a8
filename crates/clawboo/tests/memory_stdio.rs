//! The Memory server through the real `clawboo-mcp-memory` binary over stdio.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::BTreeSet;

use common::{StdioClient, TestDb, first_text};
use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_clawboo-mcp-memory");

/// Spawn with the built-in embedder, so vector and hybrid modes are exercised without
/// model files or network.
fn spawn(db: &TestDb, args: &[&str]) -> StdioClient {
    let mut c = StdioClient::spawn_with_env(BIN, db, args, &[("CLAWBOO_EMBEDDINGS", "builtin")]);
    c.initialize();
    c
}

fn save_fact(c: &mut StdioClient, title: &str, content: &str, extra: Value) -> Value {
    let mut args = json!({"title": title, "content": content});
    if let (Some(a), Some(e)) = (args.as_object_mut(), extra.as_object()) {
        a.extend(e.clone());
    }
    let saved = c.call_ok("memory_save", args);
    assert_eq!(saved["saved"], "fact", "{saved}");
    saved["fact"].clone()
}

fn search_titles(c: &mut StdioClient, args: Value) -> (BTreeSet<String>, String) {
    let out = c.call_ok("memory_search", args);
    let titles = out["results"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["fact"]["title"].as_str().map(str::to_owned))
        .collect();
    (titles, out["mode"].as_str().unwrap().to_owned())
}

fn set(items: &[&str]) -> BTreeSet<String> {
    items.iter().map(|s| s.to_string()).collect()
}

fn error_text(result: &Value) -> String {
    assert_eq!(
        result["isError"],
        json!(true),
        "expected a tool-error: {result}"
    );
    first_text(result).to_owned()
}

#[test]
fn lists_three_tools_and_reports_its_name() {
    let db = TestDb::new();
    let mut c = StdioClient::spawn_with_env(BIN, &db, &[], &[("CLAWBOO_EMBEDDINGS", "none")]);
    let init = c.initialize();
    assert_eq!(init["serverInfo"]["name"], "clawboo-memory");
    assert_eq!(init["serverInfo"]["version"], "0.1.0");
    assert_eq!(
        c.tool_names(),
        ["memory_save", "memory_search", "memory_browse"]
    );
    assert_eq!(c.close(), Some(0));
}

#[test]
fn unbound_scope_arguments_filter_and_bound_sessions_ignore_them() {
    let db = TestDb::new();
    let mut open = spawn(&db, &[]);
    save_fact(
        &mut open,
        "alpha runbook",
        "team A deploy runbook",
        json!({"scopeTeamId": "A"}),
    );
    save_fact(
        &mut open,
        "beta runbook",
        "team B deploy runbook",
        json!({"scopeTeamId": "B"}),
    );
    save_fact(
        &mut open,
        "shared runbook",
        "global deploy runbook",
        json!({}),
    );
    save_fact(
        &mut open,
        "a1 runbook",
        "agent a1 deploy runbook",
        json!({"scopeTeamId": "A", "scopeAgentId": "a1"}),
    );

    for mode in ["fts", "vector", "hybrid"] {
        let (titles, used) = search_titles(
            &mut open,
            json!({"query": "deploy runbook", "mode": mode, "scopeTeamId": "A", "limit": 100}),
        );
        assert_eq!(used, mode);
        assert_eq!(
            titles,
            set(&["alpha runbook", "shared runbook", "a1 runbook"]),
            "{mode}"
        );
        let (titles, _) = search_titles(
            &mut open,
            json!({"query": "deploy runbook", "mode": mode, "scopeTeamId": "A", "scopeAgentId": "a2"}),
        );
        assert_eq!(titles, set(&["alpha runbook", "shared runbook"]), "{mode}");
        let (titles, _) =
            search_titles(&mut open, json!({"query": "deploy runbook", "mode": mode}));
        assert_eq!(titles.len(), 4, "{mode}");
    }
    let browsed = open.call_ok("memory_browse", json!({"scopeTeamId": "B"}));
    let titles: BTreeSet<String> = browsed["facts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["title"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(titles, set(&["beta runbook", "shared runbook"]));

    // A session bound to team A (and agent a9) by its spawner.
    let mut bound = spawn(&db, &["--team", "A", "--agent", "a9", "--tenant", "t1"]);
    let saved = save_fact(
        &mut bound,
        "bound note",
        "deploy runbook addendum",
        json!({"scopeTeamId": "B", "scopeAgentId": "spoofed"}),
    );
    assert_eq!(saved["teamId"], "A");
    assert_eq!(saved["agentId"], Value::Null);
    assert_eq!(saved["tenantId"], "t1");
    for mode in ["fts", "vector", "hybrid"] {
        let (titles, _) = search_titles(
            &mut bound,
            json!({"query": "deploy runbook beta team B", "mode": mode, "scopeTeamId": "B", "limit": 100}),
        );
        // Tenant is strict: only the bound session's own tenant-tagged fact is visible.
        assert_eq!(titles, set(&["bound note"]), "{mode}");
    }
    let mut bound_no_tenant = spawn(&db, &["--team", "A"]);
    for mode in ["fts", "vector", "hybrid"] {
        let (titles, _) = search_titles(
            &mut bound_no_tenant,
            json!({"query": "deploy runbook beta", "mode": mode, "scopeTeamId": "B", "limit": 100}),
        );
        assert!(!titles.contains("beta runbook"), "{mode}: {titles:?}");
        assert!(titles.contains("alpha runbook") && titles.contains("shared runbook"));
    }
    let browsed =
        bound_no_tenant.call_ok("memory_browse", json!({"scopeTeamId": "B", "limit": 200}));
    for fact in browsed["facts"].as_array().unwrap() {
        assert_ne!(fact["teamId"], "B", "bound session saw team B: {fact}");
    }
}

#[test]
fn errors_are_tool_errors_with_exact_texts_and_change_nothing() {
    let db = TestDb::new();
    let mut c = spawn(&db, &[]);
    let r = c.call_tool("memory_save", json!({"content": "no title here"}));
    assert_eq!(
        error_text(&r),
        "a fact requires a title (or set procedureName for a procedure)"
    );
    let r = c.call_tool(
        "memory_save",
        json!({"title": "keys", "content": "ghp_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"}),
    );
    assert_eq!(
        error_text(&r),
        "nothing to save: content was entirely redacted secrets"
    );
    for args in [
        json!({"query": "x", "limit": 0}),
        json!({"query": "x", "limit": 101}),
        json!({"query": "x", "limit": -1}),
        json!({"query": "x", "limit": "5"}),
        json!({"query": "x", "mode": "semantic"}),
        json!({"query": "x", "bogus": true}),
        json!({"query": "   "}),
        json!({}),
    ] {
        let r = c.call_tool("memory_search", args.clone());
        assert!(error_text(&r).starts_with("invalid args: "), "{args}: {r}");
        assert_eq!(r["_meta"]["error"], "invalid_args");
    }
    let r = c.call_tool("memory_browse", json!({"limit": 201}));
    assert!(error_text(&r).starts_with("invalid args: "));
    let r = c.call_tool("memory_forget", json!({}));
    assert!(error_text(&r).contains("unknown tool"));
    let browsed = c.call_ok("memory_browse", json!({"limit": 200}));
    assert_eq!(browsed["facts"], json!([]));
}

#[test]
fn saves_are_scrubbed_and_search_results_have_scores_and_modes() {
    let db = TestDb::new();
    let mut c = spawn(&db, &[]);
    let fact = save_fact(
        &mut c,
        "staging access",
        "log in with DB_PASSWORD=hunter2 then run the smoke suite",
        json!({"tags": ["staging", "Bearer abcdef0123456789xyz"]}),
    );
    assert_eq!(
        fact["content"],
        "log in with DB_PASSWORD=[REDACTED] then run the smoke suite"
    );
    assert_eq!(fact["tags"], json!(["staging", "Bearer [REDACTED]"]));
    assert!(
        !c.call_ok("memory_browse", json!({}))
            .to_string()
            .contains("hunter2")
    );

    // Punctuation that would be FTS syntax is harmless.
    let out = c.call_ok("memory_search", json!({"query": "smoke\" OR (suite*"}));
    assert_eq!(out["mode"], "fts", "built-in embedder: fts is the default");
    let hit = &out["results"][0];
    assert_eq!(hit["fact"]["id"], fact["id"]);
    assert_eq!(hit["matchedVia"], "fts");
    let score = hit["score"].as_f64().unwrap();
    assert!(score > 0.0 && score <= 1.0, "{score}");
    let out = c.call_ok(
        "memory_search",
        json!({"query": "smoke suite", "mode": "hybrid"}),
    );
    assert_eq!(out["mode"], "hybrid");
    assert_eq!(out["results"][0]["matchedVia"], "both");
}

#[test]
fn vector_modes_fall_back_to_fts_without_an_embedder() {
    let db = TestDb::new();
    let mut c = StdioClient::spawn_with_env(BIN, &db, &[], &[("CLAWBOO_EMBEDDINGS", "none")]);
    c.initialize();
    save_fact(&mut c, "kafka", "topic retention is seven days", json!({}));
    for mode in ["vector", "hybrid"] {
        let out = c.call_ok("memory_search", json!({"query": "retention", "mode": mode}));
        assert_eq!(out["mode"], "fts");
        assert_eq!(out["results"].as_array().unwrap().len(), 1);
    }
}

#[test]
fn procedures_are_versioned_and_readable_with_include_procedures() {
    let db = TestDb::new();
    let mut c = spawn(&db, &[]);
    for (i, steps) in ["build, test, tag", "build, test, tag, announce"]
        .iter()
        .enumerate()
    {
        let saved = c.call_ok(
            "memory_save",
            json!({"procedureName": "release", "content": steps, "scopeTeamId": "A"}),
        );
        assert_eq!(saved["saved"], "procedure");
        assert_eq!(saved["procedure"]["version"], i as i64 + 1);
        assert_eq!(saved["procedure"]["name"], "release");
    }
    let out = c.call_ok(
        "memory_search",
        json!({"query": "announce release", "includeProcedures": true, "scopeTeamId": "A"}),
    );
    let procedures: Vec<&Value> = out["results"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r.get("procedure"))
        .collect();
    assert_eq!(procedures.len(), 1);
    assert_eq!(procedures[0]["version"], 2);
    let without = c.call_ok("memory_search", json!({"query": "announce release"}));
    assert_eq!(without["results"], json!([]));
    let browsed = c.call_ok("memory_browse", json!({"includeProcedures": true}));
    assert_eq!(
        browsed["procedures"][0]["content"],
        "build, test, tag, announce"
    );
    let hidden = c.call_ok(
        "memory_browse",
        json!({"includeProcedures": true, "scopeTeamId": "B"}),
    );
    assert_eq!(hidden["procedures"], json!([]));
}

#[test]
fn concurrent_procedure_saves_from_several_processes_get_versions_one_to_n() {
    const PROCESSES: usize = 4;
    const SAVES_EACH: usize = 6;
    let db = TestDb::new();
    // Create the schema once so the processes race on saves, not on migrations.
    spawn(&db, &[]).close();
    let mut clients: Vec<StdioClient> = (0..PROCESSES).map(|_| spawn(&db, &[])).collect();
    // Pipeline every save before reading any answer, so the processes overlap.
    for (p, c) in clients.iter_mut().enumerate() {
        for i in 0..SAVES_EACH {
            c.send(&json!({
                "jsonrpc": "2.0", "id": 1000 + i, "method": "tools/call",
                "params": {"name": "memory_save", "arguments": {
                    "procedureName": "deploy", "content": format!("process {p} save {i}")}}
            }));
        }
    }
    let mut versions = Vec::new();
    for c in clients.iter_mut() {
        for i in 0..SAVES_EACH {
            let answer = c.recv_id(&json!(1000 + i));
            let result = &answer["result"];
            assert_ne!(result["isError"], json!(true), "{answer}");
            let saved: Value = serde_json::from_str(first_text(result)).unwrap();
            versions.push(saved["procedure"]["version"].as_i64().unwrap());
        }
    }
    versions.sort();
    let expected: Vec<i64> = (1..=(PROCESSES * SAVES_EACH) as i64).collect();
    assert_eq!(versions, expected);
}

#[test]
fn reindex_gives_facts_saved_without_an_embedder_a_vector() {
    let db = TestDb::new();
    let mut c = StdioClient::spawn_with_env(BIN, &db, &[], &[("CLAWBOO_EMBEDDINGS", "none")]);
    c.initialize();
    for i in 0..3 {
        let fact = save_fact(
            &mut c,
            &format!("fact {i}"),
            "saved without vectors",
            json!({}),
        );
        assert_eq!(fact["embeddingModel"], Value::Null);
    }
    assert_eq!(c.close(), Some(0));
    let reindex = || {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_clawboo"))
            .args(["memory", "reindex", "--json", "--db"])
            .arg(&db)
            .env("CLAWBOO_EMBEDDINGS", "builtin")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice::<Value>(&out.stdout).unwrap()
    };
    assert_eq!(
        reindex(),
        json!({"model": "clawboo-hashed-v1-256", "embedded": 3, "upToDate": 0})
    );
    assert_eq!(
        reindex(),
        json!({"model": "clawboo-hashed-v1-256", "embedded": 0, "upToDate": 3})
    );
    let mut c = spawn(&db, &[]);
    let browsed = c.call_ok("memory_browse", json!({}));
    for fact in browsed["facts"].as_array().unwrap() {
        assert_eq!(fact["embeddingModel"], "clawboo-hashed-v1-256");
    }
}

/// Four memory servers save 2,200 facts into one database at once, so on PostgreSQL the
/// full-text tail is packed into blocks (every 2,000 facts) while the others keep saving:
/// every fact is then found by its own word, whether its postings were packed or not.
#[test]
fn facts_saved_by_several_processes_at_once_are_all_found() {
    const SERVERS: usize = 4;
    const FACTS_EACH: usize = 550;
    let db = TestDb::new();
    let word = |server: usize, i: usize| format!("marker{server}x{i}");
    std::thread::scope(|threads| {
        for server in 0..SERVERS {
            let db = &db;
            threads.spawn(move || {
                let mut c =
                    StdioClient::spawn_with_env(BIN, db, &[], &[("CLAWBOO_EMBEDDINGS", "none")]);
                c.initialize();
                for i in 0..FACTS_EACH {
                    save_fact(
                        &mut c,
                        &format!("note {server}-{i}"),
                        &format!("the {} of the nightly deploy", word(server, i)),
                        json!({}),
                    );
                }
            });
        }
    });
    if db.is_postgres() {
        assert!(
            db.query_i64("SELECT count(*) FROM memory_fts_blocks") > 0,
            "the tail was packed at least once"
        );
    }
    let mut c = spawn(&db, &[]);
    for server in 0..SERVERS {
        for i in 0..FACTS_EACH {
            let (titles, _) = search_titles(
                &mut c,
                json!({"query": word(server, i), "mode": "fts", "limit": 5}),
            );
            assert_eq!(titles, set(&[&format!("note {server}-{i}")]));
        }
    }
    let (titles, _) = search_titles(
        &mut c,
        json!({"query": "nightly", "mode": "fts", "limit": 100}),
    );
    assert_eq!(titles.len(), 100);
}
