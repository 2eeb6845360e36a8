//! `clawboo db copy | backup | restore | check` (SPEC §18) as real processes, on boards
//! filled through the real servers: the stdio binaries of all four areas, `clawboo serve`'s
//! REST API, `clawboo approvals` and `clawboo attach`.

#![allow(clippy::unwrap_used)]

mod common;
mod http_support;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use common::{StdioClient, TestDb};
use http_support::{Server, Session, attach, client};
use serde_json::{Value, json};

const CLAWBOO: &str = env!("CARGO_BIN_EXE_clawboo");
const TASKS: &str = env!("CARGO_BIN_EXE_clawboo-mcp-tasks");
const MEMORY: &str = env!("CARGO_BIN_EXE_clawboo-mcp-memory");
const TOOLS: &str = env!("CARGO_BIN_EXE_clawboo-mcp-tools");
const TEAMCHAT: &str = env!("CARGO_BIN_EXE_clawboo-mcp-teamchat");

/// `clawboo db <args…>` with stdin closed (never a terminal), as its own process.
fn db_cmd(args: &[&std::ffi::OsStr]) -> Output {
    Command::new(CLAWBOO)
        .arg("db")
        .args(args)
        .env_remove("CLAWBOO_DB_PATH")
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn os(s: &str) -> &std::ffi::OsStr {
    std::ffi::OsStr::new(s)
}

/// `clawboo db copy --from <from> --to <to> --json [extra…]`, which must succeed; its report.
fn copy(from: &TestDb, to: &TestDb, extra: &[&str]) -> Value {
    let mut args = vec![
        os("copy"),
        os("--from"),
        from.db_arg(),
        os("--to"),
        to.db_arg(),
        os("--json"),
    ];
    args.extend(extra.iter().map(|a| os(a)));
    ok_json(db_cmd(&args))
}

fn ok_json(out: Output) -> Value {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The error text of a `clawboo db` run that must fail.
fn failed(out: Output) -> String {
    assert!(
        !out.status.success(),
        "succeeded: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// `clawboo db check --db <db> --json`: its report and whether it passed.
fn check(db: &TestDb) -> (Value, bool) {
    let out = db_cmd(&[os("check"), os("--db"), db.db_arg(), os("--json")]);
    (
        serde_json::from_slice(&out.stdout).unwrap(),
        out.status.success(),
    )
}

fn approvals_json(db: &TestDb, args: &[&str]) -> Value {
    ok_json(
        Command::new(CLAWBOO)
            .arg("approvals")
            .args(args)
            .arg("--db")
            .arg(db)
            .output()
            .unwrap(),
    )
}

fn stdio(bin: &str, db: &TestDb, args: &[&str]) -> StdioClient {
    let mut client = StdioClient::spawn_with_env(bin, db, args, &[("TAVILY_API_KEY", "")]);
    client.initialize();
    client
}

/// A board with rows in every table, made through the real surfaces. Returns a signed
/// tasks URL minted on it (its base to be replaced by the server that answers it).
fn seed(db: &TestDb) -> String {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let server = Server::start_on(db, "127.0.0.1:0", &[]);
    runtime.block_on(async {
        let http = client();
        for (path, body) in [
            ("/api/teams", json!({"id": "core", "name": "Core"})),
            (
                "/api/agents",
                json!({"id": "a1", "name": "alice", "teamId": "core", "runtime": "codex"}),
            ),
            (
                "/api/agents",
                json!({"id": "b1", "name": "bob", "teamId": "core", "runtime": "claude-code"}),
            ),
            (
                "/api/team-chat",
                json!({"text": "hello from the board", "teamId": "core"}),
            ),
        ] {
            let r = http
                .post(server.url(path))
                .json(&body)
                .send()
                .await
                .unwrap();
            assert!(r.status().is_success(), "{path}: {}", r.status());
        }
    });
    drop(server);

    let mut tasks = stdio(TASKS, db, &["--team", "core", "--agent", "a1"]);
    let epic = tasks.call_ok("create_task", json!({"title": "ship the release"}));
    let epic = epic["task"]["id"].as_str().unwrap().to_owned();
    let mut subtasks = Vec::new();
    for i in 0..5 {
        let sub = tasks.call_ok(
            "create_subtask",
            json!({"parentTaskId": epic, "title": format!("step {i}")}),
        );
        subtasks.push(sub["task"]["id"].as_str().unwrap().to_owned());
    }
    tasks.call_ok(
        "link_task",
        json!({"taskId": subtasks[1], "dependsOnTaskId": subtasks[0]}),
    );
    tasks.call_ok(
        "claim_task",
        json!({"taskId": subtasks[0], "assigneeAgentId": "a1"}),
    );
    tasks.call_ok(
        "add_comment",
        json!({"taskId": subtasks[0], "body": "started on the changelog"}),
    );
    tasks.call_ok(
        "update_task_status",
        json!({"taskId": subtasks[0], "status": "done"}),
    );
    tasks.call_ok(
        "claim_task",
        json!({"taskId": subtasks[1], "assigneeAgentId": "a1"}),
    );

    let mut chat = stdio(
        TEAMCHAT,
        db,
        &["--team", "core", "--agent", "a1", "--delegate"],
    );
    for text in ["first post", "second post", "third post"] {
        chat.call_ok("team_chat_post", json!({"text": text}));
    }
    chat.call_ok(
        "team_delegate",
        json!({"assignee": "bob", "task": "Write the docs\nCover every tool."}),
    );

    let mut memory = stdio(MEMORY, db, &["--team", "core", "--agent", "a1"]);
    for (title, content) in [
        (
            "release checklist",
            "tag the release, publish the crates, announce it",
        ),
        (
            "database moves",
            "copy the board with clawboo db copy before switching",
        ),
        ("flaky test", "the lease test is flaky when the clock jumps"),
    ] {
        memory.call_ok("memory_save", json!({"title": title, "content": content}));
    }
    // A fact the operator retired: it travels, and no copy's search finds it.
    let stale = memory.call_ok(
        "memory_save",
        json!({"title": "old copy advice", "content": "copy the board by hand, table by table"}),
    );
    let stale = stale["fact"]["id"].as_str().unwrap().to_owned();
    for args in [
        vec![
            "memory",
            "retire",
            stale.as_str(),
            "--reason",
            "clawboo db copy does it",
        ],
        // The operator's own activity (a drop and a restore: the board ends as it was).
        vec!["board", "drop", epic.as_str()],
        vec!["board", "restore", epic.as_str()],
    ] {
        let out = Command::new(CLAWBOO)
            .args(&args)
            .arg("--db")
            .arg(db.db_arg())
            .env_remove("CLAWBOO_DB_PATH")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    for steps in ["1. build 2. test", "1. build 2. test 3. tag"] {
        memory.call_ok(
            "memory_save",
            json!({"procedureName": "release", "content": steps}),
        );
    }

    let mut tools = stdio(TOOLS, db, &["--team", "core", "--agent", "a1"]);
    tools.call_ok("note", json!({"note": "ship on friday"}));
    tools.send(&json!({
        "jsonrpc": "2.0", "id": 900, "method": "tools/call",
        "params": {"name": "delete_path", "arguments": {"path": "/tmp/x"},
                   "_meta": {"progressToken": "p900"}}
    }));
    let approval = loop {
        let listed = approvals_json(db, &["list", "--json"]);
        if let Some(id) = listed["approvals"][0]["id"].as_str() {
            break id.to_owned();
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let decided = approvals_json(db, &["always", &approval, "--json"]);
    assert_eq!(decided["remembered"], true, "{decided}");
    let answer = tools.recv_id(&json!(900));
    assert!(answer.get("error").is_none(), "{answer}");
    for client in [tasks, chat, memory, tools] {
        assert_eq!(client.close(), Some(0));
    }

    // No surface sets these two (operators edit them in the database): as another surface
    // would.
    db.exec("INSERT INTO tool_registry(name, enabled, updated_at) VALUES ('web_search', 0, 1)");
    db.exec(
        "INSERT INTO tool_blocklist(subject_kind, subject_id, tool_name, created_at)
         VALUES ('agent', 'b1', 'delete_path', 1)",
    );

    let config = attach(
        db,
        &[
            "--server",
            "tasks",
            "--team",
            "core",
            "--agent",
            "b1",
            "--url",
            "http://127.0.0.1:1",
        ],
    );
    let url = config["structured"]["clawboo-tasks"]["url"]
        .as_str()
        .unwrap();
    assert!(url.contains("scopeSig="), "{url}");
    url.to_owned()
}

/// Every row of every table in `tables` of a SQLite file, each table in a fixed order.
fn sqlite_dump(
    path: &Path,
    tables: &[String],
) -> BTreeMap<String, Vec<Vec<rusqlite::types::Value>>> {
    let conn = rusqlite::Connection::open(path).unwrap();
    let mut dump = BTreeMap::new();
    for table in tables {
        let columns: i64 = conn
            .query_row(
                &format!("SELECT count(*) FROM pragma_table_info('{table}')"),
                [],
                |r| r.get(0),
            )
            .unwrap();
        let order: Vec<String> = (1..=columns).map(|i| i.to_string()).collect();
        let mut stmt = conn
            .prepare(&format!(
                "SELECT * FROM {table} ORDER BY {}",
                order.join(", ")
            ))
            .unwrap();
        let rows = stmt
            .query_map([], |r| {
                (0..columns as usize)
                    .map(|i| r.get::<_, rusqlite::types::Value>(i))
                    .collect::<Result<Vec<_>, _>>()
            })
            .unwrap()
            .collect::<Result<Vec<_>, _>>()
            .unwrap();
        dump.insert(table.clone(), rows);
    }
    dump
}

/// The ids memory search finds for `query` on `db`, in rank order, in `mode`.
fn search(db: &TestDb, query: &str, mode: &str) -> Vec<String> {
    let mut memory = stdio(MEMORY, db, &["--team", "core", "--agent", "a1"]);
    let found = memory.call_ok(
        "memory_search",
        json!({"query": query, "mode": mode, "limit": 10}),
    );
    memory.close();
    found["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|hit| hit["fact"]["id"].as_str().unwrap().to_owned())
        .collect()
}

/// The signed `url` (minted against another base) answered by `clawboo serve` on `db`:
/// whether `initialize` succeeds, and the tasks `list_tasks` shows then.
fn open_signed(db: &TestDb, url: &str) -> Option<usize> {
    let server = Server::start_on(db, "127.0.0.1:0", &[]);
    let path = url.strip_prefix("http://127.0.0.1:1").unwrap();
    let url = server.url(path);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let http = client();
        let r = http_support::post(&http, &url, None, &http_support::initialize_body(1)).await;
        if r.status() != 200 {
            return None;
        }
        let mut session = Session::open(&url).await;
        let listed = session.call_json("list_tasks", json!({})).await;
        Some(listed["tasks"].as_array().unwrap().len())
    })
}

#[test]
fn a_board_goes_to_postgresql_and_back_row_for_row() {
    if common::no_postgres_server() {
        return;
    }
    let original = TestDb::sqlite();
    let signed = seed(&original);
    let tasks_seen = open_signed(&original, &signed).expect("the URL opens its own board");
    assert!(tasks_seen > 0);

    let pg = TestDb::postgres();
    let there = copy(&original, &pg, &[]);
    let rows: BTreeMap<String, u64> = serde_json::from_value(there["rows"].clone()).unwrap();
    for (table, n) in &rows {
        assert!(
            *n > 0,
            "the seed left {table} empty: fill it through its surface"
        );
    }
    let derived: Vec<&str> = there["derived"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["name"].as_str().unwrap())
        .collect();
    assert!(derived.contains(&"memory_fts_postings"), "{derived:?}");

    let back = TestDb::sqlite();
    let returned = copy(&pg, &back, &[]);
    assert_eq!(returned["rows"], there["rows"]);

    let tables: Vec<String> = rows.keys().cloned().collect();
    let before = sqlite_dump(original.sqlite_path(), &tables);
    let after = sqlite_dump(back.sqlite_path(), &tables);
    for table in &tables {
        assert_eq!(
            before[table], after[table],
            "{table} differs after the round trip"
        );
    }
    assert_eq!(
        pg.query_i64("SELECT count(*) FROM tasks WHERE status = 'in_progress' AND lease_expires_at IS NOT NULL AND claim_token > 0"),
        1
    );

    // pgvector's column, where the server has it, is derived: filled on the target.
    let vector_column = pg.query_i64(
        "SELECT count(*) FROM information_schema.columns
         WHERE table_name = 'memory_facts' AND column_name = 'embedding_vec'",
    );
    if vector_column == 1 {
        assert_eq!(
            pg.query_i64(
                "SELECT count(*) FROM memory_facts WHERE embedding IS NOT NULL AND embedding_vec IS NULL"
            ),
            0
        );
        assert!(
            pg.query_i64("SELECT count(*) FROM memory_facts WHERE embedding_vec IS NOT NULL") > 0
        );
    }

    // Searches find the same facts in the same order on every copy, the retired one never.
    for (query, mode) in [
        ("release", "fts"),
        ("board copy", "hybrid"),
        ("flaky clock", "vector"),
    ] {
        let expected = search(&original, query, mode);
        assert!(!expected.is_empty(), "{query} ({mode}) finds nothing");
        assert_eq!(
            search(&pg, query, mode),
            expected,
            "{query} ({mode}) on PostgreSQL"
        );
        assert_eq!(
            search(&back, query, mode),
            expected,
            "{query} ({mode}) back on SQLite"
        );
    }

    // New rows on the copy get new numbers (PostgreSQL's identity moved past the copy's).
    let mut memory = stdio(MEMORY, &pg, &["--team", "core", "--agent", "a1"]);
    memory.call_ok(
        "memory_save",
        json!({"title": "after the move", "content": "saved on PostgreSQL"}),
    );
    memory.close();

    for db in [&pg, &back] {
        let (report, passed) = check(db);
        assert!(passed, "{report}");
    }

    // The URL signed before the move opens the moved board; a board with another secret
    // refuses it.
    assert_eq!(open_signed(&pg, &signed), Some(tasks_seen));
    assert_eq!(open_signed(&back, &signed), Some(tasks_seen));
    assert_eq!(open_signed(&TestDb::sqlite(), &signed), None);

    // Short ids and their counters travel: the copy answers the same short ids, and its
    // next task of the team takes the next number, not one already given.
    let in_core = pg.query_i64("SELECT count(*) FROM tasks WHERE team_id = 'core'");
    let mut tasks = stdio(TASKS, &pg, &["--team", "core", "--agent", "a1"]);
    let epic = tasks.call_ok("get_task", json!({"taskId": "COR-1"}));
    assert_eq!(epic["task"]["title"], "ship the release");
    let next = tasks.call_ok("create_task", json!({"title": "after the move"}));
    assert_eq!(next["task"]["shortId"], format!("COR-{}", in_core + 1));
    tasks.close();
}

/// A fresh database on the backend under test holding one root task per title, made
/// through the tasks server.
fn board_with_tasks(titles: &[&str]) -> TestDb {
    let db = TestDb::new();
    let mut tasks = stdio(TASKS, &db, &["--team", "core", "--agent", "a1"]);
    for title in titles {
        tasks.call_ok("create_task", json!({"title": title}));
    }
    tasks.close();
    db
}

#[test]
fn a_target_with_rows_is_refused_untouched_and_replaced_with_force() {
    let source = board_with_tasks(&["from the source"]);
    let target = board_with_tasks(&["already here"]);

    let refused = failed(db_cmd(&[
        os("copy"),
        os("--from"),
        source.db_arg(),
        os("--to"),
        target.db_arg(),
    ]));
    assert!(refused.contains("not empty"), "{refused}");
    assert!(refused.contains("--force"), "{refused}");
    assert_eq!(target.query_text("SELECT title FROM tasks"), "already here");

    // Not on a terminal: --force goes ahead without asking, and progress is plain lines.
    let replaced = db_cmd(&[
        os("copy"),
        os("--from"),
        source.db_arg(),
        os("--to"),
        target.db_arg(),
        os("--force"),
    ]);
    let progress = String::from_utf8_lossy(&replaced.stderr);
    assert!(replaced.status.success(), "{progress}");
    assert!(progress.lines().any(|l| l == "tasks: 1 rows"), "{progress}");
    let said = String::from_utf8_lossy(&replaced.stdout);
    assert!(said.contains("counts match on both sides"), "{said}");
    assert_eq!(
        target.query_text("SELECT title FROM tasks"),
        "from the source"
    );
    assert_eq!(target.query_i64("SELECT count(*) FROM tasks"), 1);
}

#[test]
fn a_backup_taken_under_writers_restores_one_consistent_instant() {
    let db = TestDb::new();
    seed(&db);
    let stop = Arc::new(AtomicBool::new(false));
    let mut writers = Vec::new();
    for agent in ["w1", "w2"] {
        let (db, stop) = (db.clone(), Arc::clone(&stop));
        writers.push(std::thread::spawn(move || {
            // Each writer on a team of its own: the root-rate cap counts per team.
            let bound = ["--team", agent, "--agent", agent];
            let mut tasks = stdio(TASKS, &db, &bound);
            let mut chat = stdio(TEAMCHAT, &db, &bound);
            let mut memory = stdio(MEMORY, &db, &bound);
            // Rounds until told to stop (at most 25 roots in the cap's window), then one
            // more: every writer also writes after the backup's instant.
            let mut rounds = 0;
            let mut round = |rounds: usize| {
                    let mut parent = tasks.call_ok("create_task", json!({"title": format!("{agent} {rounds}")}));
                    for depth in 1..=2 {
                        let parent_id = parent["task"]["id"].as_str().unwrap().to_owned();
                        parent = tasks.call_ok(
                            "create_subtask",
                            json!({"parentTaskId": parent_id, "title": format!("depth {depth}")}),
                        );
                    }
                    let leaf = parent["task"]["id"].as_str().unwrap().to_owned();
                    tasks.call_ok("claim_task", json!({"taskId": leaf, "assigneeAgentId": agent}));
                    tasks.call_ok("add_comment", json!({"taskId": leaf, "body": "working"}));
                    chat.call_ok("team_chat_post", json!({"text": format!("{agent} round {rounds}")}));
                    memory.call_ok(
                        "memory_save",
                        json!({"title": format!("{agent} note {rounds}"), "content": "kept while backing up"}),
                    );
            };
            while !stop.load(Ordering::Relaxed) {
                if rounds < 25 {
                    round(rounds);
                    rounds += 1;
                } else {
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
            }
            round(rounds);
            rounds
        }));
    }
    // Let the writers get going, then back up while they keep writing.
    while db.query_i64("SELECT count(*) FROM team_chat") < 8 {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let dir = tempfile::tempdir().unwrap();
    let archive = dir.path().join("board.clawboo");
    let made = ok_json(db_cmd(&[
        os("backup"),
        archive.as_os_str(),
        os("--db"),
        db.db_arg(),
        os("--json"),
    ]));
    stop.store(true, Ordering::Relaxed);
    for writer in writers {
        assert!(writer.join().unwrap() >= 1);
    }
    let kept_tasks = made["rows"]["tasks"].as_u64().unwrap();
    assert!(kept_tasks < db.query_i64("SELECT count(*) FROM tasks") as u64);

    let mut targets = vec![TestDb::sqlite()];
    if std::env::var(common::POSTGRES_URL_ENV).is_ok() {
        targets.push(TestDb::postgres());
    }
    for target in targets {
        let restored = ok_json(db_cmd(&[
            os("restore"),
            archive.as_os_str(),
            os("--to"),
            target.db_arg(),
            os("--json"),
        ]));
        assert_eq!(restored["rows"], made["rows"]);
        let (report, passed) = check(&target);
        assert!(passed, "{report}");
        assert_eq!(
            target.query_i64(
                "SELECT count(*) FROM tasks c WHERE parent_task_id IS NOT NULL
                 AND NOT EXISTS (SELECT 1 FROM tasks p WHERE p.id = c.parent_task_id)"
            ),
            0
        );
        assert_eq!(
            target.query_i64(
                "SELECT count(*) FROM (SELECT room_id FROM team_chat GROUP BY room_id
                 HAVING count(*) <> max(seq)) AS gaps"
            ),
            0
        );
    }
}

#[test]
fn check_reports_each_broken_rule_and_fails() {
    let db = TestDb::new();
    let mut chat = stdio(TEAMCHAT, &db, &["--team", "core", "--agent", "a1"]);
    for text in ["one", "two", "three"] {
        chat.call_ok("team_chat_post", json!({"text": text}));
    }
    chat.close();
    let mut tasks = stdio(TASKS, &db, &["--team", "core", "--agent", "a1"]);
    let t = tasks.call_ok("create_task", json!({"title": "held"}));
    let id = t["task"]["id"].as_str().unwrap().to_owned();
    tasks.call_ok("claim_task", json!({"taskId": id, "assigneeAgentId": "a1"}));
    tasks.close();
    let (report, passed) = check(&db);
    assert!(passed, "{report}");

    // Another surface breaks two rules behind the store's back.
    db.exec("DELETE FROM team_chat WHERE seq = 2");
    db.exec("UPDATE tasks SET assignee_agent_id = NULL");
    db.exec("UPDATE task_keys SET next_number = 1");
    let (report, passed) = check(&db);
    assert!(!passed);
    let found: Vec<&str> = report["violations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["check"].as_str().unwrap())
        .collect();
    assert!(found.contains(&"chat_seq_gap"), "{report}");
    assert!(found.contains(&"in_progress_without_holder"), "{report}");
    assert!(found.contains(&"short_id_counter_behind"), "{report}");
    let text = report.to_string();
    assert!(text.contains(&id), "{text}");
    assert!(text.contains("COR: next 1, highest given 1"), "{text}");
}

#[test]
fn bad_archives_and_unreachable_databases_are_refused_and_write_nothing() {
    let titles: Vec<String> = (0..30).map(|i| format!("task {i}")).collect();
    let source = board_with_tasks(&titles.iter().map(String::as_str).collect::<Vec<_>>());
    let dir = tempfile::tempdir().unwrap();
    let archive = dir.path().join("good.clawboo");
    ok_json(db_cmd(&[
        os("backup"),
        archive.as_os_str(),
        os("--db"),
        source.db_arg(),
        os("--json"),
    ]));
    // A second backup onto the same file is refused; the first stays.
    let again = failed(db_cmd(&[
        os("backup"),
        archive.as_os_str(),
        os("--db"),
        source.db_arg(),
    ]));
    assert!(again.contains("already exists"), "{again}");

    let bytes = std::fs::read(&archive).unwrap();
    let header_end = bytes
        .iter()
        .enumerate()
        .filter(|(_, b)| **b == b'\n')
        .nth(1)
        .unwrap()
        .0
        + 1;
    let mut corrupted = bytes.clone();
    let middle = header_end + (bytes.len() - header_end) / 2;
    corrupted[middle] ^= 0x55;
    let header = String::from_utf8(bytes[..header_end].to_vec()).unwrap();
    let newer = header.replacen("\"schema\":", "\"schema\":999,\"was\":", 1);
    let mut from_newer = newer.into_bytes();
    from_newer.extend_from_slice(&bytes[header_end..]);
    let cases: [(&str, Vec<u8>, &str); 4] = [
        (
            "truncated",
            bytes[..bytes.len() * 2 / 3].to_vec(),
            "damaged",
        ),
        ("corrupted", corrupted, "damaged"),
        (
            "wrong",
            b"PRAGMA nothing;\n".to_vec(),
            "not a clawboo backup",
        ),
        ("newer", from_newer, "schema version 999"),
    ];
    for (name, content, expected) in cases {
        let file = dir.path().join(format!("{name}.clawboo"));
        std::fs::write(&file, content).unwrap();
        let target = dir.path().join(format!("{name}-target.db"));
        let err = failed(db_cmd(&[
            os("restore"),
            file.as_os_str(),
            os("--to"),
            target.as_os_str(),
        ]));
        assert!(err.contains(expected), "{name}: {err}");
        assert!(!target.exists(), "{name}: the target was created");
    }

    // A target that holds rows is refused and keeps them.
    let full = board_with_tasks(&["mine"]);
    let err = failed(db_cmd(&[
        os("restore"),
        archive.as_os_str(),
        os("--to"),
        full.db_arg(),
    ]));
    assert!(err.contains("not empty"), "{err}");
    assert_eq!(full.query_text("SELECT title FROM tasks"), "mine");

    // An unreachable PostgreSQL, either side: a clear error, no file made.
    let nowhere = "postgres://postgres@127.0.0.1:1/clawboo?connect_timeout=2";
    let target = dir.path().join("never.db");
    let err = failed(db_cmd(&[
        os("copy"),
        os("--from"),
        os(nowhere),
        os("--to"),
        target.as_os_str(),
    ]));
    assert!(err.contains("cannot open the database"), "{err}");
    assert!(!target.exists());
    let err = failed(db_cmd(&[
        os("restore"),
        archive.as_os_str(),
        os("--to"),
        os(nowhere),
    ]));
    assert!(err.contains("cannot open the database"), "{err}");
    // A source that does not exist is not created.
    let missing = dir.path().join("missing.db");
    let err = failed(db_cmd(&[
        os("copy"),
        os("--from"),
        missing.as_os_str(),
        os("--to"),
        target.as_os_str(),
    ]));
    assert!(err.contains("no database at"), "{err}");
    assert!(!missing.exists() && !target.exists());

    // The good archive still restores.
    let restored = TestDb::new();
    let report = ok_json(db_cmd(&[
        os("restore"),
        archive.as_os_str(),
        os("--to"),
        restored.db_arg(),
        os("--json"),
    ]));
    assert_eq!(report["rows"]["tasks"], 30);
}
