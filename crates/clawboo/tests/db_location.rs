//! `--db` and `CLAWBOO_DB_PATH` through the real binaries: a URL that no backend speaks is
//! refused (never taken as a file name), without echoing a password, and nothing is
//! created; a PostgreSQL URL is recognised and refused by this build with a clear error.

#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::{Command, Output, Stdio};

/// Run `bin args…` in `cwd` with stdin closed and `CLAWBOO_DB_PATH` set to `env_db`
/// (when given), and collect what it printed.
fn run(bin: &str, args: &[&str], env_db: Option<&str>, cwd: &Path) -> Output {
    let mut cmd = Command::new(bin);
    cmd.args(args)
        .current_dir(cwd)
        .env("HOME", cwd)
        .env_remove("CLAWBOO_DB_PATH")
        .stdin(Stdio::null());
    if let Some(db) = env_db {
        cmd.env("CLAWBOO_DB_PATH", db);
    }
    cmd.output().expect("run binary")
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
    let bins = [
        env!("CARGO_BIN_EXE_clawboo-mcp-tasks"),
        env!("CARGO_BIN_EXE_clawboo-mcp-memory"),
        env!("CARGO_BIN_EXE_clawboo-mcp-tools"),
        env!("CARGO_BIN_EXE_clawboo-mcp-teamchat"),
    ];
    for bin in bins {
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

#[test]
fn clawboo_commands_refuse_unsupported_urls_and_this_builds_postgres() {
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
    let postgres = "postgresql://clawboo:hunter2@127.0.0.1:1/board";
    for args in [&["board", "list"][..], &["serve", "--bind", "127.0.0.1:0"]] {
        let cwd = tempfile::tempdir().unwrap();
        let output = run(clawboo, args, Some(postgres), cwd.path());
        assert_refused(&output, "no PostgreSQL backend", "hunter2", cwd.path());
    }
}
