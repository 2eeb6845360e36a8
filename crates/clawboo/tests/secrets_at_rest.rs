//! No secret reaches the database: every shape the scrubber knows (and the same tokens split
//! by invisible characters or written full-width) is saved through the real memory, tools and
//! tasks servers and the board's REST API, then the database is read back, every text
//! column of every table and the raw bytes of the `.db` and `-wal` files (SQLite), and no
//! secret may appear anywhere, nor in the answers.
#![allow(clippy::unwrap_used)]

mod common;
mod http_support;

use std::path::Path;

use common::{StdioClient, TestDb, first_text, skip_on_postgres};
use http_support::{Server, client};
use serde_json::{Value, json};

const MEMORY_BIN: &str = env!("CARGO_BIN_EXE_clawboo-mcp-memory");
const TOOLS_BIN: &str = env!("CARGO_BIN_EXE_clawboo-mcp-tools");
const TASKS_BIN: &str = env!("CARGO_BIN_EXE_clawboo-mcp-tasks");

/// The refusal of a comment that was nothing but secrets.
const COMMENT_DECLINED: &str = "nothing to save: the comment was entirely redacted secrets; write what happened without the credential";

/// Every secret shape, each fake but of the real shape, in the prose an agent would write.
fn secrets() -> Vec<String> {
    let github = "ghp_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8";
    let full_width: String = "ghp_Z9y8X7w6V5u4T3s2R1q0P9o8N7m6L5k4J3i2"
        .chars()
        .map(|c| char::from_u32(c as u32 - 0x21 + 0xff01).unwrap())
        .collect();
    vec![
        "sk-proj-4f9aB7cD2eF1gH8iJ3kL6mN0pQ5rS".into(),
        // An OpenAI key whose letters happen to look regular (no digit at all).
        "sk-abcdefghijklmnopqrstuvwxyzQWERTY".into(),
        "sk-ant-api03-Qm9vZ3hX1bL4cN8dR2fT6gY0".into(),
        github.into(),
        "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz".into(),
        "glpat-xY7zK9mN2pQ4rS6tU8vW".into(),
        "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx".into(),
        "AKIAIOSFODNN7EXAMPLE".into(),
        "AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q".into(),
        "Bearer abc123def456ghi789jkl".into(),
        "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U".into(),
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA0Z3VS5JJcds3xfn\n-----END RSA PRIVATE KEY-----".into(),
        "DB_PASSWORD=hunter2hunter2".into(),
        "postgres://app:pgS3cretPass@db.internal:5432/app".into(),
        "https://deploy:httpsS3cretPass@git.example.com/repo.git".into(),
        "Authorization: Basic YWxpY2U6YmFzaWNTM2NyZXQ=".into(),
        "sk_live_4eC39HqLyjWDarjtT1zdp7dc".into(),
        "rk_live_51H8abcdEFGH1234ijklMNOP".into(),
        "sk_test_9fK28WqLyjWDarjtT1zdp3xz".into(),
        "hf_aBcDeFgHiJkLmNoPqRsTuVwXyZ012345".into(),
        "npm_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8".into(),
        "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".into(),
        "https://hooks.slack.com/services/T0ABC1234/B0DEF5678/SlackHookS3cretValue99".into(),
        "SK0123456789abcdef0123456789abcdef".into(),
        // A token split by a zero-width space, and one written in full-width letters.
        "ghp_Zw5sPl1tT0k3n\u{200b}Aa9Bb8Cc7Dd6Ee5Ff4Gg".into(),
        full_width,
        // Split by default-ignorable characters that are not format characters: a
        // variation selector, the combining grapheme joiner, the Hangul filler.
        "ghp_Vs16Sel3ct0rXy\u{fe0f}Aa9Bb8Cc7Dd6Ee5Ff4Gh".into(),
        "sk-proj-Cgj0Ner4Abcd\u{034f}tQ5rS8vW2xY6zA1bC3".into(),
        "ghp_HangulF1ll3rQw\u{3164}Zz9Yy8Xx7Ww6Vv5Uu4".into(),
        // A URL password holding a raw `@`: the userinfo ends at the last `@`.
        "https://deploy:pa@ss2WordS3cret@git.example.com/repo.git".into(),
    ]
}

/// What must not appear for `secret`: each run of letters and digits of 8 or more (lower
/// case, as the full-text index stores terms) that is not a fixed word of the shape.
fn needles(secret: &str) -> Vec<String> {
    const KEPT: &[&str] = &[
        "authorization",
        "password",
        "private",
        "internal",
        "postgres",
        "services",
        "-----end",
    ];
    secret
        .split(|c: char| !c.is_alphanumeric())
        .map(str::to_lowercase)
        .filter(|run| run.chars().count() >= 8 && !KEPT.contains(&run.as_str()))
        .collect()
}

fn assert_free_of_secrets(haystack: &str, what: &str) {
    let haystack = haystack.to_lowercase();
    for secret in secrets() {
        for needle in needles(&secret) {
            assert!(
                !haystack.contains(&needle),
                "{what} holds {needle:?} of secret {secret:?}"
            );
        }
    }
}

/// Every value of every table (SQLite's full-text shadow tables included), as text; a
/// PostgreSQL `bytea` (`\x…` hex) is decoded as a SQLite blob is.
fn dump_every_text_column(db: &TestDb) -> String {
    let tables_sql = if db.is_postgres() {
        "SELECT table_name FROM information_schema.tables
         WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'"
    } else {
        "SELECT name FROM sqlite_master WHERE type = 'table'"
    };
    let tables: Vec<String> = db
        .query_rows(tables_sql)
        .into_iter()
        .filter_map(|row| row.into_iter().next().flatten())
        .collect();
    assert!(tables.iter().any(|t| t == "memory_facts"), "{tables:?}");
    if !db.is_postgres() {
        assert!(
            tables.iter().any(|t| t == "memory_facts_fts_data"),
            "{tables:?}"
        );
    }
    let mut dump = String::new();
    for table in tables {
        for row in db.query_rows(&format!("SELECT * FROM \"{table}\"")) {
            for value in row.into_iter().flatten() {
                dump.push_str(&decode_bytea(&value).unwrap_or(value));
                dump.push('\n');
            }
        }
    }
    dump
}

/// The bytes of PostgreSQL's hex `bytea` text form, as (lossy) text.
fn decode_bytea(value: &str) -> Option<String> {
    let hex = value.strip_prefix("\\x")?;
    let bytes = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok())
        .collect::<Option<Vec<u8>>>()?;
    Some(String::from_utf8_lossy(&bytes).into_owned())
}

/// The raw bytes of the database file and its WAL, as text.
fn raw_files(db: &Path) -> String {
    let mut raw = String::new();
    let wal = db.with_extension("db-wal");
    for file in [db, wal.as_path()] {
        if let Ok(bytes) = std::fs::read(file) {
            raw.push_str(&String::from_utf8_lossy(&bytes));
        }
    }
    raw
}

fn spawn(bin: &str, db: &TestDb, args: &[&str], env: &[(&str, &str)]) -> StdioClient {
    let mut client = StdioClient::spawn_with_env(bin, db, args, env);
    client.initialize();
    client
}

#[test]
fn no_secret_reaches_any_table_index_or_file_and_pure_secrets_are_declined() {
    let db = TestDb::new();
    let mut memory = spawn(
        MEMORY_BIN,
        &db,
        &["--team", "red"],
        &[("CLAWBOO_EMBEDDINGS", "builtin")],
    );
    let mut tools = spawn(
        TOOLS_BIN,
        &db,
        &["--agent", "alice", "--team", "red"],
        &[("TAVILY_API_KEY", ""), ("CLAWBOO_APPROVAL_WAIT_MS", "200")],
    );
    let mut alice = spawn(TASKS_BIN, &db, &["--team", "red", "--agent", "alice"], &[]);
    let mut bob = spawn(TASKS_BIN, &db, &["--team", "red", "--agent", "bob"], &[]);
    let mut answers = String::new();
    for (i, secret) in secrets().iter().enumerate() {
        let prose = format!("deploy note {i}: use {secret} for the staging run");
        let fact = memory.call_ok(
            "memory_save",
            json!({"title": format!("creds {i} {secret}"), "content": prose,
                   "tags": if secret.chars().count() <= 100 { json!(["ops", secret]) } else { json!(["ops"]) }}),
        );
        assert_eq!(fact["saved"], "fact", "{fact}");
        let stored = fact["fact"]["content"].as_str().unwrap();
        assert!(stored.contains("[REDACTED]"), "{stored}");
        assert!(stored.contains(&format!("deploy note {i}:")), "{stored}");
        let procedure = memory.call_ok(
            "memory_save",
            json!({"procedureName": format!("deploy-{i}"), "content": prose}),
        );
        assert_eq!(procedure["saved"], "procedure", "{procedure}");
        answers.push_str(&format!("{fact}\n{procedure}\n"));
        // Content that is nothing but a bare token is declined (shapes that keep a word,
        // `Bearer`, `DB_PASSWORD=`, a URL's user, are saved with it).
        let keeps_a_word = secret.contains("://")
            || secret.contains('=')
            || secret.starts_with("Bearer")
            || secret.starts_with("Authorization");
        if !keeps_a_word {
            let declined = memory.call_tool(
                "memory_save",
                json!({"title": format!("only {i}"), "content": secret}),
            );
            assert_eq!(declined["isError"], true, "{secret}: {declined}");
            assert_eq!(
                first_text(&declined),
                "nothing to save: content was entirely redacted secrets",
                "{secret}"
            );
        }
        // The broker's note (its row and its audit rows), an echo (audit of the answer) and
        // an approval row (delete_path asks; nobody answers, so it expires).
        let noted = tools.call_tool("note", json!({"note": prose}));
        assert_ne!(noted["isError"], true, "{noted}");
        let echoed = tools.call_tool("echo", json!({"message": prose}));
        assert_ne!(echoed["isError"], true, "{echoed}");
        let asked = tools.call_tool("delete_path", json!({"path": format!("/srv/{secret}")}));
        assert_eq!(asked["_meta"]["denied"], "approval:expired", "{asked}");
        answers.push_str(&format!("{noted}\n{asked}\n"));
        // A task's title, description and comments (and the inbox note that quotes a
        // comment to the task's holder); a comment of nothing but the secret is declined.
        let title = if secret.chars().count() <= 400 {
            format!("rotate {i}: {secret}")
        } else {
            format!("rotate {i}")
        };
        let task = alice.call_ok("create_task", json!({"title": title, "description": prose}));
        assert!(
            task["task"]["description"]
                .as_str()
                .unwrap()
                .contains("[REDACTED]"),
            "{task}"
        );
        let id = task["task"]["id"].as_str().unwrap().to_owned();
        let claimed = alice.call_ok(
            "claim_task",
            json!({"taskId": id, "assigneeAgentId": "alice"}),
        );
        let comment = bob.call_ok("add_comment", json!({"taskId": id, "body": prose}));
        let body = comment["comment"]["body"].as_str().unwrap();
        assert!(body.contains(&format!("deploy note {i}:")), "{body}");
        assert!(body.contains("[REDACTED]"), "{body}");
        answers.push_str(&format!("{task}\n{claimed}\n{comment}\n"));
        if !keeps_a_word {
            let declined = bob.call_tool("add_comment", json!({"taskId": id, "body": secret}));
            assert_eq!(declined["isError"], true, "{secret}: {declined}");
            assert_eq!(
                first_text(&declined),
                format!("invalid args: {COMMENT_DECLINED}"),
                "{secret}"
            );
        }
        // The holder reads the task and its inbox note (delivered with its next call).
        let read = alice.call_tool("get_task", json!({"taskId": id}));
        assert_ne!(read["isError"], true, "{read}");
        answers.push_str(&format!("{read}\n"));
    }
    let searched = memory.call_ok(
        "memory_search",
        json!({"query": "deploy note staging", "limit": 100}),
    );
    answers.push_str(&searched.to_string());
    assert_free_of_secrets(&answers, "an answer");
    if !skip_on_postgres(
        &db,
        "the raw .db/-wal bytes (the server's pages are read via SQL)",
    ) {
        // While the servers run, the WAL holds the latest pages.
        assert!(db.sqlite_path().with_extension("db-wal").exists());
        assert_free_of_secrets(&raw_files(db.sqlite_path()), "the database or WAL file");
    }
    assert_free_of_secrets(&dump_every_text_column(&db), "a table");
    let count = |table: &str| db.query_i64(&format!("SELECT count(*) FROM {table}"));
    let n = secrets().len() as i64;
    assert_eq!(
        count("memory_facts"),
        n,
        "one fact per secret, none for the declined ones"
    );
    assert_eq!((count("tool_notes"), count("tool_call_approvals")), (n, n));
    assert_eq!(
        (count("tasks"), count("task_comments")),
        (n, n),
        "one task and one comment per secret, none for the declined comments"
    );
    assert!(count("agent_inbox") >= n, "each comment told the holder");
    let audit = count("tool_call_audit");
    assert!(audit >= 5 * n, "audit rows: {audit}");
    memory.close();
    tools.close();
    alice.close();
    bob.close();
    if !db.is_postgres() {
        assert_free_of_secrets(
            &raw_files(db.sqlite_path()),
            "the database file after close",
        );
    }
    assert_free_of_secrets(&dump_every_text_column(&db), "a table after close");
}

#[tokio::test]
async fn the_board_rest_api_stores_no_secret_either() {
    let server = Server::start(&[]);
    let mut answers = String::new();
    for (i, secret) in secrets().iter().enumerate() {
        let prose = format!("deploy note {i}: use {secret} for the staging run");
        let r = client()
            .post(server.url("/api/board"))
            .json(&json!({"title": format!("rotate {i}"), "description": prose, "teamId": "red"}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 201);
        let created: Value = r.json().await.unwrap();
        let id = created["task"]["id"].as_str().unwrap().to_owned();
        let short = secret.chars().count() <= 400;
        let title = if short {
            format!("rotate {i}: {secret}")
        } else {
            format!("rotate {i}")
        };
        let r = client()
            .patch(server.url(&format!("/api/board/{id}")))
            .json(&json!({"title": title, "description": format!("{prose} (edited)")}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        let patched: Value = r.json().await.unwrap();
        let description = patched["task"]["description"].as_str().unwrap();
        assert!(description.ends_with("(edited)"), "{description}");
        assert!(description.contains("[REDACTED]"), "{description}");
        let r = client()
            .post(server.url(&format!("/api/board/{id}/comments")))
            .json(&json!({"body": prose}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 201);
        let comment: Value = r.json().await.unwrap();
        assert!(
            comment["comment"]["body"]
                .as_str()
                .unwrap()
                .contains("[REDACTED]")
        );
        answers.push_str(&format!("{created}\n{patched}\n{comment}\n"));
    }
    // A comment of nothing but a bare token is refused, and nothing is written.
    let id = answers.lines().next().map(|l| {
        let v: Value = serde_json::from_str(l).unwrap();
        v["task"]["id"].as_str().unwrap().to_owned()
    });
    let comments = server.db.query_i64("SELECT count(*) FROM task_comments");
    let r = client()
        .post(server.url(&format!("/api/board/{}/comments", id.unwrap())))
        .json(&json!({"body": "ghp_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    let refused: Value = r.json().await.unwrap();
    assert_eq!(
        refused["error"],
        format!("invalid request: {COMMENT_DECLINED}"),
        "{refused}"
    );
    assert_eq!(
        server.db.query_i64("SELECT count(*) FROM task_comments"),
        comments
    );
    assert_free_of_secrets(&answers, "an answer");
    assert_free_of_secrets(&dump_every_text_column(&server.db), "a table");
}
