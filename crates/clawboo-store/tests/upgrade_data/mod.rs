//! The data the upgrade fixtures hold, shared by the generator
//! (`examples/make_upgrade_fixture.rs`) and the tests that check it (`tests/upgrade.rs`,
//! and memory's, `crates/clawboo-memory/tests/upgrade.rs`), with how those tests find the
//! fixtures and check a migrated file.
//!
//! [`insert`] writes, with raw SQL as the code of that time did, the rows of the tables a
//! migration introduced. A fixture for schema version N holds the data of versions 1..=N.
//! Once a fixture is committed its version's rows are frozen: add data for a new version,
//! never edit an earlier version's.
#![allow(dead_code, clippy::unwrap_used)]

use clawboo_embed::{Embedder, HashedEmbedder};
use rusqlite::{Connection, params};
use std::path::{Path, PathBuf};

/// The fixtures' folder, from the store's tests or another crate's.
pub fn fixture_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../clawboo-store/tests/fixtures/upgrade")
}

/// Every fixture, by the schema version that made it.
pub fn fixtures() -> Vec<(i64, PathBuf)> {
    let mut found: Vec<(i64, PathBuf)> = std::fs::read_dir(fixture_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter_map(|p| {
            let name = p.file_name()?.to_str()?;
            let version = name.strip_prefix('v')?.strip_suffix(".db")?.parse().ok()?;
            Some((version, p))
        })
        .collect();
    found.sort();
    found
}

/// The schema version a SQLite file reports.
pub fn user_version(conn: &Connection) -> i64 {
    conn.query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap()
}

/// The file passes SQLite's integrity and foreign-key checks and FTS5's own.
pub fn assert_sound(path: &Path) {
    let conn = Connection::open(path).unwrap();
    let integrity: String = conn
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(integrity, "ok");
    let mut stmt = conn.prepare("PRAGMA foreign_key_check").unwrap();
    let violations = stmt.query_map([], |_| Ok(())).unwrap().count();
    assert_eq!(violations, 0, "foreign key violations");
    conn.execute(
        "INSERT INTO memory_facts_fts(memory_facts_fts) VALUES ('integrity-check')",
        [],
    )
    .unwrap();
}

/// `fixture` (made by schema `version`) copied into `dir` and opened with `open`: the
/// copy's path and the store, the copy checked to be of `version` before and of the latest
/// version after, and sound.
pub fn open_migrated<S>(
    dir: &Path,
    fixture: &Path,
    version: i64,
    open: impl Fn(&Path) -> S,
) -> (PathBuf, S) {
    let db = dir.join("clawboo.db");
    std::fs::copy(fixture, &db).unwrap();
    assert_eq!(
        user_version(&Connection::open(&db).unwrap()),
        version,
        "{}",
        fixture.display()
    );
    let store = open(&db);
    assert_eq!(
        user_version(&Connection::open(&db).unwrap()),
        clawboo_store::SCHEMA_VERSION
    );
    assert_sound(&db);
    (db, store)
}

/// Once its store is dropped, the migrated file at `db` is still sound, and reopening it
/// with `open` changes nothing.
pub fn reopens_unchanged<S>(db: &Path, open: impl Fn(&Path) -> S) {
    assert_sound(db);
    drop(open(db));
    assert_eq!(
        user_version(&Connection::open(db).unwrap()),
        clawboo_store::SCHEMA_VERSION
    );
}

/// When the fixture rows were written (June 2024, far outside any rate window).
pub const T0: i64 = 1_719_000_000_000;

pub const TEAM_ALPHA: &str = "team-alpha";
pub const TEAM_BETA: &str = "team-beta";
pub const AGENT_ALICE: &str = "agent-alice";
pub const AGENT_BOB: &str = "agent-bob";
pub const AGENT_CARA: &str = "agent-cara";

/// A root epic of team alpha (`backlog`).
pub const EPIC: &str = "01903a5c-0000-7000-8000-000000000001";
/// A ready `todo` child of the epic (its one dependency is done).
pub const OPEN: &str = "01903a5c-0000-7000-8000-000000000002";
/// An `in_progress` child claimed by alice.
pub const CLAIMED: &str = "01903a5c-0000-7000-8000-000000000003";
/// A `todo` child that waits for [`CLAIMED`] (so not ready).
pub const WAITING: &str = "01903a5c-0000-7000-8000-000000000004";
/// An `in_review` child assigned to bob.
pub const REVIEW: &str = "01903a5c-0000-7000-8000-000000000005";
/// A `done` child (completed).
pub const DONE: &str = "01903a5c-0000-7000-8000-000000000006";
/// A `cancelled` child.
pub const CANCELLED: &str = "01903a5c-0000-7000-8000-000000000007";
/// A `blocked` child.
pub const BLOCKED: &str = "01903a5c-0000-7000-8000-000000000008";
/// A dropped `todo` child.
pub const DROPPED: &str = "01903a5c-0000-7000-8000-000000000009";
/// A depth-2 task under [`CLAIMED`].
pub const GRANDCHILD: &str = "01903a5c-0000-7000-8000-00000000000a";
/// A root of team beta, with a tenant and a non-ASCII title.
pub const BETA_ROOT: &str = "01903a5c-0000-7000-8000-00000000000b";
/// Its non-ASCII title.
pub const BETA_TITLE: &str = "Übersetzung prüfen ✓ 任务";
/// Every task, in insertion order.
pub const TASKS: [&str; 11] = [
    EPIC, OPEN, CLAIMED, WAITING, REVIEW, DONE, CANCELLED, BLOCKED, DROPPED, GRANDCHILD, BETA_ROOT,
];

pub const COMMENT_BY_BOB: &str = "01903a5c-0000-7000-8000-0000000000c1";
pub const COMMENT_BY_USER: &str = "01903a5c-0000-7000-8000-0000000000c2";
pub const COMMENT_BY_SYSTEM: &str = "01903a5c-0000-7000-8000-0000000000c3";
pub const INBOX_PENDING: &str = "01903a5c-0000-7000-8000-0000000000d1";
pub const INBOX_DELIVERED: &str = "01903a5c-0000-7000-8000-0000000000d2";
pub const INBOX_PENDING_BODY: &str = "agent-bob commented \"looks good\" on your task";
pub const SECRET_KEY: &str = "attach_signing_secret";
pub const SECRET_VALUE: &str = "5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed";

/// A global fact with a vector from the built-in embedder.
pub const FACT_EMBEDDED: &str = "01903a5c-0000-7000-8000-0000000000f1";
pub const FACT_EMBEDDED_TITLE: &str = "Deploys go through the blue-green switch";
/// A team alpha fact without a vector.
pub const FACT_TEAM: &str = "01903a5c-0000-7000-8000-0000000000f2";
pub const FACT_TEAM_CONTENT: &str = "The staging kubernetes cluster lives in eu-west-3.";
/// An agent-scoped fact of alice.
pub const FACT_AGENT: &str = "01903a5c-0000-7000-8000-0000000000f3";
pub const PROCEDURE_NAME: &str = "deploy";
pub const PROCEDURE_V1: &str = "01903a5c-0000-7000-8000-0000000000e1";
pub const PROCEDURE_V2: &str = "01903a5c-0000-7000-8000-0000000000e2";

/// Team alpha's room.
pub const ROOM: &str = "team:team-alpha";
/// The bodies of its posts, seq 1.. in order.
pub const ROOM_POSTS: [(&str, &str, &str); 3] = [
    (AGENT_ALICE, "peer", "picking up the deploy"),
    ("operator", "user", "thanks; ping me when staging is green"),
    ("clawboo", "system", "agent-alice claimed \"Deploy\""),
];
/// A room named by id.
pub const CUSTOM_ROOM: &str = "war-room";

pub const APPROVAL_ALLOWED: &str = "01903a5c-0000-7000-8000-0000000000a1";
pub const APPROVAL_PENDING: &str = "01903a5c-0000-7000-8000-0000000000a2";
/// A fact written by plain SQL under schema 5: its insert trigger only noted it in
/// `memory_facts_fts_pending`, so it waits there to be indexed.
pub const FACT_PENDING: &str = "01903a5c-0000-7000-8000-0000000000f4";

pub const NOTE_ID: &str = "01903a5c-0000-7000-8000-0000000000b1";
pub const NOTE_TEXT: &str = "remember to rotate the staging key";

/// Write the rows of the tables migration `version` introduced.
pub fn insert(conn: &Connection, version: i64) {
    match version {
        1 => board(conn),
        2 => memory(conn),
        3 => teamchat(conn),
        4 => tools(conn),
        5 => pending_fact(conn),
        // Migrations 6 to 9 changed indexes and no table: the rows of 1..=5 stand for them.
        6..=9 => {}
        10 => grant_per_identity(conn),
        11 => leased_claim(conn),
        12 => decided_call(conn),
        13 => presence_on_another_team(conn),
        14 => paths_and_a_link(conn),
        // Short ids (migration 15) are numbered when the store opens the file: no rows.
        15 => {}
        16 => operator_activity_and_a_retired_fact(conn),
        other => panic!("no fixture data for schema version {other}: add it here"),
    }
}

fn board(conn: &Connection) {
    for (id, name) in [(TEAM_ALPHA, "Alpha"), (TEAM_BETA, "Beta")] {
        conn.execute(
            "INSERT INTO teams(id, name, created_at) VALUES (?1, ?2, ?3)",
            params![id, name, T0],
        )
        .unwrap();
    }
    for (id, name, team, runtime) in [
        (AGENT_ALICE, "alice", TEAM_ALPHA, "claude-code"),
        (AGENT_BOB, "bob", TEAM_ALPHA, "codex"),
        (AGENT_CARA, "cara", TEAM_BETA, "openclaw"),
    ] {
        conn.execute(
            "INSERT INTO agents(id, name, team_id, runtime, created_at) VALUES (?1, ?2, ?3, ?4, ?5)",
            params![id, name, team, runtime, T0],
        )
        .unwrap();
    }
    // (id, title, status, parent, assignee, runtime, dropped, priority)
    type Row<'a> = (
        &'a str,
        &'a str,
        &'a str,
        Option<&'a str>,
        Option<&'a str>,
        Option<&'a str>,
        bool,
        i64,
    );
    let rows: [Row<'_>; 10] = [
        (
            EPIC,
            "Ship the release",
            "backlog",
            None,
            None,
            None,
            false,
            2,
        ),
        (
            OPEN,
            "Write the changelog",
            "todo",
            Some(EPIC),
            None,
            None,
            false,
            1,
        ),
        (
            CLAIMED,
            "Deploy",
            "in_progress",
            Some(EPIC),
            Some(AGENT_ALICE),
            Some("claude-code"),
            false,
            3,
        ),
        (
            WAITING,
            "Announce",
            "todo",
            Some(EPIC),
            None,
            None,
            false,
            0,
        ),
        (
            REVIEW,
            "Bump versions",
            "in_review",
            Some(EPIC),
            Some(AGENT_BOB),
            Some("codex"),
            false,
            0,
        ),
        (
            DONE,
            "Freeze main",
            "done",
            Some(EPIC),
            Some(AGENT_ALICE),
            None,
            false,
            0,
        ),
        (
            CANCELLED,
            "Old idea",
            "cancelled",
            Some(EPIC),
            None,
            None,
            false,
            0,
        ),
        (
            BLOCKED,
            "Sign binaries",
            "blocked",
            Some(EPIC),
            None,
            None,
            false,
            0,
        ),
        (
            DROPPED,
            "Duplicate",
            "todo",
            Some(EPIC),
            None,
            None,
            true,
            0,
        ),
        (
            GRANDCHILD,
            "Smoke test staging",
            "todo",
            Some(CLAIMED),
            None,
            None,
            false,
            0,
        ),
    ];
    for (i, (id, title, status, parent, assignee, runtime, dropped, priority)) in
        rows.into_iter().enumerate()
    {
        let at = T0 + i as i64;
        let completed = matches!(status, "done" | "cancelled").then_some(at + 500);
        conn.execute(
            "INSERT INTO tasks(id, title, description, status, priority, team_id, assignee_agent_id,
                 assignee_runtime, parent_task_id, dropped, tenant_id, created_at, updated_at, completed_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, NULL, ?11, ?12, ?13)",
            params![
                id,
                title,
                format!("{title}, as planned."),
                status,
                priority,
                TEAM_ALPHA,
                assignee,
                runtime,
                parent,
                dropped,
                at,
                completed.unwrap_or(at),
                completed
            ],
        )
        .unwrap();
    }
    conn.execute(
        "INSERT INTO tasks(id, title, status, team_id, tenant_id, created_at, updated_at)
         VALUES (?1, ?2, 'todo', ?3, 'tenant-1', ?4, ?4)",
        params![BETA_ROOT, BETA_TITLE, TEAM_BETA, T0 + 20],
    )
    .unwrap();
    for (task, dep) in [(WAITING, CLAIMED), (OPEN, DONE)] {
        conn.execute(
            "INSERT INTO task_deps(task_id, depends_on_task_id, created_at) VALUES (?1, ?2, ?3)",
            params![task, dep, T0 + 30],
        )
        .unwrap();
    }
    for (i, (id, author, kind, body)) in [
        (COMMENT_BY_BOB, Some(AGENT_BOB), "agent", "looks good"),
        (COMMENT_BY_USER, None, "user", "please deploy before noon"),
        (COMMENT_BY_SYSTEM, None, "system", "claimed by agent-alice"),
    ]
    .into_iter()
    .enumerate()
    {
        conn.execute(
            "INSERT INTO task_comments(id, task_id, author_agent_id, author_type, body, created_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![id, CLAIMED, author, kind, body, T0 + 40 + i as i64],
        )
        .unwrap();
    }
    conn.execute(
        "INSERT INTO agent_inbox(id, agent_id, team_id, body, source, created_at)
         VALUES (?1, ?2, ?3, ?4, 'board', ?5)",
        params![
            INBOX_PENDING,
            AGENT_ALICE,
            TEAM_ALPHA,
            INBOX_PENDING_BODY,
            T0 + 50
        ],
    )
    .unwrap();
    conn.execute(
        "INSERT INTO agent_inbox(id, agent_id, team_id, body, source, created_at, delivered_at, delivered_via)
         VALUES (?1, ?2, ?3, 'an old note', 'board', ?4, ?5, 'mcp')",
        params![INBOX_DELIVERED, AGENT_ALICE, TEAM_ALPHA, T0 + 10, T0 + 11],
    )
    .unwrap();
    conn.execute(
        "INSERT INTO settings(key, value) VALUES (?1, ?2)",
        params![SECRET_KEY, SECRET_VALUE],
    )
    .unwrap();
}

fn memory(conn: &Connection) {
    let embedder = HashedEmbedder::default();
    let text = format!("{FACT_EMBEDDED_TITLE}\nswitch traffic only after smoke tests pass");
    let vector = embedder.embed(&[&text]).unwrap().remove(0);
    let blob: Vec<u8> = vector.iter().flat_map(|x| x.to_le_bytes()).collect();
    conn.execute(
        "INSERT INTO memory_facts(id, title, content, tags, created_at, embedding, embedding_model,
             embedding_dim, embed_seq)
         VALUES (?1, ?2, 'switch traffic only after smoke tests pass', '[\"deploy\",\"ops\"]', ?3,
             ?4, ?5, ?6, 1)",
        params![
            FACT_EMBEDDED,
            FACT_EMBEDDED_TITLE,
            T0 + 100,
            blob,
            embedder.model_id(),
            vector.len() as i64
        ],
    )
    .unwrap();
    conn.execute(
        "INSERT INTO memory_facts(id, title, content, tags, team_id, created_at)
         VALUES (?1, 'Where staging runs', ?2, '[\"infra\"]', ?3, ?4)",
        params![FACT_TEAM, FACT_TEAM_CONTENT, TEAM_ALPHA, T0 + 101],
    )
    .unwrap();
    conn.execute(
        "INSERT INTO memory_facts(id, title, content, team_id, agent_id, tenant_id, created_at)
         VALUES (?1, 'Alice prefers small diffs', 'keep pull requests under 300 lines', ?2, ?3,
             'tenant-1', ?4)",
        params![FACT_AGENT, TEAM_ALPHA, AGENT_ALICE, T0 + 102],
    )
    .unwrap();
    for (id, version, content) in [
        (PROCEDURE_V1, 1, "1. build\n2. deploy"),
        (PROCEDURE_V2, 2, "1. build\n2. smoke test\n3. deploy"),
    ] {
        conn.execute(
            "INSERT INTO memory_procedures(id, name, version, content, tags, team_id, created_at)
             VALUES (?1, ?2, ?3, ?4, '[\"ops\"]', ?5, ?6)",
            params![
                id,
                PROCEDURE_NAME,
                version,
                content,
                TEAM_ALPHA,
                T0 + 110 + version
            ],
        )
        .unwrap();
    }
}

fn teamchat(conn: &Connection) {
    for (i, (author, kind, body)) in ROOM_POSTS.into_iter().enumerate() {
        conn.execute(
            "INSERT INTO team_chat(id, room_id, seq, author, body, kind, created_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            params![
                format!("01903a5c-0000-7000-8000-0000000001{i:02x}"),
                ROOM,
                i as i64 + 1,
                author,
                body,
                kind,
                T0 + 200 + i as i64
            ],
        )
        .unwrap();
    }
    conn.execute(
        "INSERT INTO team_chat(id, room_id, seq, author, body, kind, created_at)
         VALUES ('01903a5c-0000-7000-8000-000000000200', ?1, 1, ?2, 'line one\nline two', 'peer', ?3)",
        params![CUSTOM_ROOM, AGENT_CARA, T0 + 210],
    )
    .unwrap();
}

fn pending_fact(conn: &Connection) {
    conn.execute(
        "INSERT INTO memory_facts(id, title, content, tags, team_id, created_at)
         VALUES (?1, 'Release train', 'the zanzibar release train leaves on thursdays', '[]',
             ?2, ?3)",
        params![FACT_PENDING, TEAM_BETA, T0 + 500],
    )
    .unwrap();
}

/// An `allow_always` remembered per bound identity, as migration 10 keys it.
/// The lease and fencing token a claim holds under schema 11 (a lease far in the future, so
/// opening the file does not reclaim it), and its holder's last tool call.
pub const LEASE_UNTIL: i64 = 4_102_444_800_000;
pub const CLAIM_TOKEN: i64 = 4;

fn leased_claim(conn: &Connection) {
    conn.execute(
        "UPDATE tasks SET lease_expires_at = ?2, claim_token = ?3 WHERE id = ?1",
        params![CLAIMED, LEASE_UNTIL, CLAIM_TOKEN],
    )
    .unwrap();
    conn.execute(
        "UPDATE agents SET last_seen_at = ?2 WHERE id = ?1",
        params![AGENT_ALICE, T0 + 800],
    )
    .unwrap();
}

/// An `echo` call of schema 12, its two audit rows saying who decided it.
pub const DECIDED_CALL: &str = "call-12";

pub const OPERATOR_MOVE: &str = "01903a5c-0000-7000-8000-0000000015a1";
pub const RETIREMENT_REASON: &str = "the cluster moved to eu-central-1";

/// An operator's move and a retired fact (migration 16).
fn operator_activity_and_a_retired_fact(conn: &Connection) {
    conn.execute(
        "INSERT INTO operator_activity(id, task_id, actor, action, detail, created_at)
         VALUES (?1, ?2, 'api', 'moved', 'todo → blocked', ?3)",
        params![OPERATOR_MOVE, BLOCKED, T0 + 1500],
    )
    .unwrap();
    conn.execute(
        "INSERT INTO memory_fact_retirements(fact_id, retired_by, reason, retired_at)
         VALUES (?1, 'cli', ?2, ?3)",
        params![FACT_TEAM, RETIREMENT_REASON, T0 + 1501],
    )
    .unwrap();
}

/// Migration 13's table: alice seen calling on team beta too (her roster team is alpha).
fn presence_on_another_team(conn: &Connection) {
    conn.execute(
        "INSERT INTO agent_presence(agent_id, team_key, runtime, last_seen_at)
         VALUES (?1, ?2, 'codex', ?3)",
        params![AGENT_ALICE, TEAM_BETA, T0 + 1300],
    )
    .unwrap();
}

/// Migration 14's column and table: the paths the claimed task works on, and a room post
/// linked to it.
pub const CLAIMED_PATHS: [&str; 2] = ["docs/*.md", "src/**"];
pub const LINKED_POST: &str = "01903a5c-0000-7000-8000-000000000201";

fn paths_and_a_link(conn: &Connection) {
    conn.execute(
        "UPDATE tasks SET paths = ?2 WHERE id = ?1",
        params![CLAIMED, CLAIMED_PATHS.join("\n")],
    )
    .unwrap();
    conn.execute(
        "INSERT INTO task_links(task_id, kind, ref_id, line, created_at)
         VALUES (?1, 'post', ?2, 'deploying now', ?3)",
        params![CLAIMED, LINKED_POST, T0 + 1400],
    )
    .unwrap();
}

fn decided_call(conn: &Connection) {
    for (i, (phase, decision, result)) in [
        ("before", "allow", None),
        ("after", "executed", Some("hello")),
    ]
    .into_iter()
    .enumerate()
    {
        conn.execute(
            "INSERT INTO tool_call_audit(id, call_id, phase, tool_name, agent_id, team_id, decision,
                 reason, observations, args_json, result_text, is_error, approval_id, created_at,
                 decided_by)
             VALUES (?1, ?2, ?3, 'echo', ?4, ?5, ?6, NULL, '[]', '{\"message\":\"hello\"}',
                 ?7, ?8, NULL, ?9, 'policy')",
            params![
                format!("01903a5c-0000-7000-8000-0000000012{i:02x}"),
                DECIDED_CALL,
                phase,
                AGENT_ALICE,
                TEAM_ALPHA,
                decision,
                result,
                result.map(|_| 0),
                T0 + 900 + i as i64
            ],
        )
        .unwrap();
    }
}

fn grant_per_identity(conn: &Connection) {
    conn.execute(
        "INSERT INTO tool_approval_grants(tool_name, agent_id, team_id, tenant_id, approval_id, created_at)
         VALUES ('delete_path', ?1, ?2, '', ?3, ?4)",
        params![AGENT_ALICE, TEAM_ALPHA, APPROVAL_ALLOWED, T0 + 700],
    )
    .unwrap();
}

fn tools(conn: &Connection) {
    conn.execute(
        "INSERT INTO tool_registry(name, enabled, updated_at) VALUES ('web_search', 0, ?1)",
        [T0 + 300],
    )
    .unwrap();
    conn.execute(
        "INSERT INTO tool_blocklist(subject_kind, subject_id, tool_name, created_at)
         VALUES ('agent', ?1, 'delete_path', ?2)",
        params![AGENT_BOB, T0 + 301],
    )
    .unwrap();
    conn.execute(
        "INSERT INTO tool_call_approvals(id, call_id, tool_name, agent_id, team_id, risk, message,
             args_json, status, decision, decided_by, created_at, expires_at, decided_at)
         VALUES (?1, 'call-1', 'delete_path', ?2, ?3, 'destructive', 'delete_path wants approval',
             '{\"path\":\"/tmp/build\"}', 'allowed', 'allow_always', 'cli', ?4, ?5, ?6)",
        params![
            APPROVAL_ALLOWED,
            AGENT_ALICE,
            TEAM_ALPHA,
            T0 + 310,
            T0 + 610,
            T0 + 320
        ],
    )
    .unwrap();
    conn.execute(
        "INSERT INTO tool_call_approvals(id, call_id, tool_name, agent_id, team_id, risk, message,
             args_json, status, created_at, expires_at)
         VALUES (?1, 'call-2', 'delete_path', ?2, ?3, 'destructive', 'delete_path wants approval',
             '{\"path\":\"/tmp/cache\"}', 'pending', ?4, ?5)",
        params![APPROVAL_PENDING, AGENT_BOB, TEAM_ALPHA, T0 + 330, T0 + 630],
    )
    .unwrap();
    conn.execute(
        "INSERT INTO tool_approval_grants(tool_name, agent_id, approval_id, created_at)
         VALUES ('delete_path', ?1, ?2, ?3)",
        params![AGENT_ALICE, APPROVAL_ALLOWED, T0 + 320],
    )
    .unwrap();
    for (i, (phase, decision, result)) in [
        ("before", "allow", None),
        ("after", "executed", Some("would delete /tmp/build")),
    ]
    .into_iter()
    .enumerate()
    {
        conn.execute(
            "INSERT INTO tool_call_audit(id, call_id, phase, tool_name, agent_id, team_id, decision,
                 reason, observations, args_json, result_text, is_error, approval_id, created_at)
             VALUES (?1, 'call-1', ?2, 'delete_path', ?3, ?4, ?5, 'approval:allow', '[]',
                 '{\"path\":\"/tmp/build\"}', ?6, ?7, ?8, ?9)",
            params![
                format!("01903a5c-0000-7000-8000-0000000003{i:02x}"),
                phase,
                AGENT_ALICE,
                TEAM_ALPHA,
                decision,
                result,
                result.map(|_| 0),
                APPROVAL_ALLOWED,
                T0 + 320 + i as i64
            ],
        )
        .unwrap();
    }
    conn.execute(
        "INSERT INTO tool_notes(id, agent_id, team_id, note, created_at) VALUES (?1, ?2, ?3, ?4, ?5)",
        params![NOTE_ID, AGENT_ALICE, TEAM_ALPHA, NOTE_TEXT, T0 + 340],
    )
    .unwrap();
}
