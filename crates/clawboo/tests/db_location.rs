//! `--db` and `CLAWBOO_DB_PATH` through the real binaries: a URL that no backend speaks is
//! refused (never taken as a file name), without echoing a password, and nothing is
//! created; a PostgreSQL URL opens the board in every binary, and one that cannot be
//! reached fails at once with an error that names it without its password.

#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{StdioClient, TestDb, no_postgres_server};
use serde_json::json;

/// How long a refused or unreachable database may take to fail.
const FAIL_WITHIN: Duration = Duration::from_secs(30);

/// Run `bin args…` in `cwd` with stdin closed, `CLAWBOO_DB_PATH` set to `env_db` (when
/// given) and `env` added, and collect what it printed. A process still running after
/// [`FAIL_WITHIN`] is killed and fails the test: a bad database must not hang.
fn run_with(
    bin: &str,
    args: &[&str],
    env_db: Option<&str>,
    env: &[(&str, &str)],
    cwd: &Path,
) -> Output {
    let mut cmd = Command::new(bin);
    cmd.args(args)
        .current_dir(cwd)
        .env("HOME", cwd)
        .env_remove("CLAWBOO_DB_PATH")
        .env_remove("CLAWBOO_PG_POOL")
        .env_remove("PGPASSWORD")
        .env_remove("PGPASSFILE")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(db) = env_db {
        cmd.env("CLAWBOO_DB_PATH", db);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("run binary");
    let started = Instant::now();
    while child.try_wait().expect("wait").is_none() {
        if started.elapsed() > FAIL_WITHIN {
            let _ = child.kill();
            let output = child.wait_with_output().expect("collect");
            panic!(
                "{bin} {args:?} still ran after {FAIL_WITHIN:?}; stderr: {}",
                String::from_utf8_lossy(&output.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().expect("collect")
}

fn run(bin: &str, args: &[&str], env_db: Option<&str>, cwd: &Path) -> Output {
    run_with(bin, args, env_db, &[], cwd)
}

/// The command failed, said `expected` on stderr, never repeated `secret`, and left the
/// folder it ran in empty (no file named after the URL, no default database).
fn assert_refused(output: &Output, expected: &str, secret: &str, cwd: &Path) {
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "exit {:?}", output.status);
    assert!(stderr.contains(expected), "stderr: {stderr}");
    assert!(!stderr.contains(secret), "password echoed: {stderr}");
    assert!(output.stdout.is_empty(), "stdout: {:?}", output.stdout);
    let left: Vec<_> = std::fs::read_dir(cwd).unwrap().collect();
    assert!(left.is_empty(), "created {left:?}");
}

const UNSUPPORTED: &str = "is not a database clawboo can open";

#[test]
fn every_binary_refuses_a_url_of_another_scheme() {
    for bin in STDIO_BINS {
        let cwd = tempfile::tempdir().unwrap();
        let flag = run(
            bin,
            &["--db", "mysql://root:hunter2@db/board"],
            None,
            cwd.path(),
        );
        assert_refused(&flag, UNSUPPORTED, "hunter2", cwd.path());
        let env = run(bin, &[], Some("sqlite://board.db"), cwd.path());
        assert_refused(&env, UNSUPPORTED, "board.db", cwd.path());
    }
}

const STDIO_BINS: [&str; 4] = [
    env!("CARGO_BIN_EXE_clawboo-mcp-tasks"),
    env!("CARGO_BIN_EXE_clawboo-mcp-memory"),
    env!("CARGO_BIN_EXE_clawboo-mcp-tools"),
    env!("CARGO_BIN_EXE_clawboo-mcp-teamchat"),
];

#[test]
fn clawboo_commands_refuse_unsupported_urls() {
    let clawboo = env!("CARGO_BIN_EXE_clawboo");
    for args in [
        &[
            "serve",
            "--bind",
            "127.0.0.1:0",
            "--db",
            "redis://:hunter2@h",
        ][..],
        &["board", "list", "--db", "redis://:hunter2@h"],
        &["attach", "--db", "redis://:hunter2@h"],
    ] {
        let cwd = tempfile::tempdir().unwrap();
        assert_refused(
            &run(clawboo, args, None, cwd.path()),
            UNSUPPORTED,
            "hunter2",
            cwd.path(),
        );
    }
}

/// Nothing listens on port 1: the connection is refused at once.
const UNREACHABLE: &str = "postgresql://clawboo:hunter2@127.0.0.1:1/board";
/// How errors name it.
const UNREACHABLE_SHOWN: &str = "cannot open the database postgresql://clawboo@127.0.0.1:1/board";

#[test]
fn an_unreachable_postgres_url_fails_at_once_naming_it_without_its_password() {
    let clawboo = env!("CARGO_BIN_EXE_clawboo");
    let mut runs: Vec<(&str, Vec<&str>)> = vec![
        (clawboo, vec!["board", "list"]),
        (clawboo, vec!["approvals", "list"]),
        (clawboo, vec!["serve", "--bind", "127.0.0.1:0"]),
        (clawboo, vec!["mcp", "tasks"]),
    ];
    runs.extend(STDIO_BINS.iter().map(|bin| (*bin, vec![])));
    for (bin, args) in runs {
        let cwd = tempfile::tempdir().unwrap();
        let output = run(bin, &args, Some(UNREACHABLE), cwd.path());
        assert_refused(&output, UNREACHABLE_SHOWN, "hunter2", cwd.path());
    }
    // The same through --db.
    let cwd = tempfile::tempdir().unwrap();
    let output = run(
        clawboo,
        &["board", "list", "--db", UNREACHABLE],
        None,
        cwd.path(),
    );
    assert_refused(&output, UNREACHABLE_SHOWN, "hunter2", cwd.path());
}

#[test]
fn a_pool_size_that_is_not_a_count_is_refused() {
    let clawboo = env!("CARGO_BIN_EXE_clawboo");
    for bad in ["0", "-2", "many"] {
        let cwd = tempfile::tempdir().unwrap();
        let output = run_with(
            clawboo,
            &["board", "list"],
            Some(UNREACHABLE),
            &[("CLAWBOO_PG_POOL", bad)],
            cwd.path(),
        );
        assert_refused(&output, "CLAWBOO_PG_POOL", "hunter2", cwd.path());
    }
}

#[test]
fn every_binary_opens_a_postgres_url() {
    if no_postgres_server() {
        return;
    }
    let db = TestDb::postgres();
    let url = db.db_arg().to_str().unwrap().to_owned();
    let clawboo = env!("CARGO_BIN_EXE_clawboo");
    let cwd = tempfile::tempdir().unwrap();
    let board = run(clawboo, &["board", "list", "--db", &url], None, cwd.path());
    assert!(
        board.status.success(),
        "{}",
        String::from_utf8_lossy(&board.stderr)
    );
    for bin in STDIO_BINS {
        let mut client = StdioClient::spawn(bin, &db, &[]);
        let info = client.initialize();
        assert!(info["serverInfo"]["name"].is_string(), "{bin}: {info}");
        assert!(!client.tool_names().is_empty(), "{bin}");
    }
    let mut tasks = StdioClient::spawn(STDIO_BINS[0], &db, &[]);
    tasks.initialize();
    let made = tasks.call_ok("create_task", json!({"title": "on postgres"}));
    assert_eq!(made["task"]["title"], "on postgres");
    assert_eq!(db.query_i64("SELECT COUNT(*) FROM tasks"), 1);

    // A password in the URL opens the store (trust auth ignores it) and stays out of both
    // snippets: the http one is signed from the database, the stdio one names it.
    let with_password = url.replacen("://postgres@", "://postgres:hunter2@", 1);
    assert_ne!(with_password, url, "the test URL names the postgres role");
    for transport in ["http", "stdio"] {
        let attach = run(
            clawboo,
            &[
                "attach",
                "--json",
                "--transport",
                transport,
                "--db",
                &with_password,
            ],
            None,
            cwd.path(),
        );
        let stdout = String::from_utf8_lossy(&attach.stdout);
        let stderr = String::from_utf8_lossy(&attach.stderr);
        assert!(attach.status.success(), "{transport}: {stderr}");
        assert!(
            !stdout.contains("hunter2") && !stderr.contains("hunter2"),
            "{stdout}"
        );
        if transport == "stdio" {
            assert!(
                stdout.contains(&url) && stdout.contains("PGPASSWORD"),
                "{stdout}"
            );
        }
    }
}
