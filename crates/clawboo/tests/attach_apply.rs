//! `clawboo attach --apply`, run as the real binary against config files in a throwaway HOME
//! (and CODEX_HOME, OPENCLAW_CONFIG_PATH), on the backend under test: it merges the servers
//! into Claude Code's, Codex's and OpenClaw's files keeping every other entry and comment,
//! a second run changes nothing, `--dry-run` shows the diff and writes nothing, and a file it
//! cannot read as its format is refused and left as it was. (That the CLIs themselves then
//! list the servers is tests/third_party/node/agent-clis.test.mjs.)

#![allow(clippy::unwrap_used)]

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::TestDb;
use serde_json::{Value, json};

const SERVERS: [&str; 4] = ["tasks", "memory", "tools", "teamchat"];

/// A throwaway HOME, project folder, CODEX_HOME and OpenClaw config path.
struct Sandbox {
    _root: tempfile::TempDir,
    home: PathBuf,
    project: PathBuf,
    codex: PathBuf,
    openclaw: PathBuf,
}

impl Sandbox {
    fn new() -> Sandbox {
        let root = tempfile::tempdir().unwrap();
        let [home, project, codex] = ["home", "project", "codex"].map(|d| root.path().join(d));
        for dir in [&home, &project, &codex] {
            std::fs::create_dir_all(dir).unwrap();
        }
        let openclaw = root.path().join("openclaw").join("openclaw.json");
        Sandbox {
            _root: root,
            home,
            project,
            codex,
            openclaw,
        }
    }

    /// `clawboo attach <args> --db <db>`, in the project folder.
    fn attach(&self, db: &TestDb, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_clawboo"))
            .arg("attach")
            .args(args)
            .arg("--db")
            .arg(db.db_arg())
            .current_dir(&self.project)
            .env("HOME", &self.home)
            .env("CODEX_HOME", &self.codex)
            .env("OPENCLAW_CONFIG_PATH", &self.openclaw)
            .env_remove("CLAUDE_CONFIG_DIR")
            .env_remove("CLAWBOO_MCP_BIN_DIR")
            .output()
            .unwrap()
    }

    /// As [`Sandbox::attach`], which must succeed; its stdout.
    fn attach_ok(&self, db: &TestDb, args: &[&str]) -> String {
        let out = self.attach(db, args);
        assert!(
            out.status.success(),
            "attach {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }
}

/// A fresh database on the backend under test and a fresh sandbox.
fn setup() -> (TestDb, Sandbox) {
    (TestDb::new(), Sandbox::new())
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap()
}

fn json_of(path: &Path) -> Value {
    serde_json::from_str(&read(path)).unwrap()
}

#[test]
fn claude_user_scope_takes_all_four_servers_keeps_the_rest_and_a_second_run_changes_nothing() {
    let (db, s) = setup();
    let config = s.home.join(".claude.json");
    // What Claude Code keeps there besides servers, and a server of the user's own.
    let before = json!({
        "firstStartTime": "2026-01-01T00:00:00.000Z",
        "mcpServers": { "mine": { "type": "stdio", "command": "mine", "args": [], "env": {} } },
        "projects": { "/somewhere": { "allowedTools": [] } }
    });
    std::fs::write(&config, serde_json::to_string_pretty(&before).unwrap()).unwrap();
    let args = ["--apply", "--all", "--team", "red", "--agent", "alice"];
    let out = s.attach_ok(&db, &args);
    assert_eq!(
        out,
        format!(
            "updated {}: clawboo-tasks, clawboo-memory, clawboo-tools, clawboo-teamchat\n",
            config.display()
        )
    );
    let after = json_of(&config);
    assert_eq!(after["firstStartTime"], before["firstStartTime"]);
    assert_eq!(after["projects"], before["projects"]);
    assert_eq!(after["mcpServers"]["mine"], before["mcpServers"]["mine"]);
    // Each entry is what the printed snippet's `claude mcp add` would store.
    for server in SERVERS {
        let id = format!("clawboo-{server}");
        let printed: Value = serde_json::from_str(&s.attach_ok(
            &db,
            &[
                "--json", "--server", server, "--team", "red", "--agent", "alice",
            ],
        ))
        .unwrap();
        assert_eq!(
            after["mcpServers"][&id], printed["config"]["structured"][&id],
            "{server}"
        );
    }
    let bytes = read(&config);
    let again = s.attach_ok(&db, &args);
    assert!(again.starts_with("unchanged "), "{again}");
    assert_eq!(read(&config), bytes);
}

#[test]
fn claude_project_scope_writes_the_projects_mcp_json() {
    let (db, s) = setup();
    let out = s.attach_ok(
        &db,
        &["--apply", "--scope", "project", "--transport", "stdio"],
    );
    assert_eq!(out, "updated .mcp.json: clawboo-tasks\n");
    let written = json_of(&s.project.join(".mcp.json"));
    let entry = &written["mcpServers"]["clawboo-tasks"];
    assert_eq!(entry["type"], "stdio");
    assert_eq!(entry["command"], env!("CARGO_BIN_EXE_clawboo"));
    assert_eq!(entry["args"], json!(["mcp", "tasks"]));
    assert!(entry["env"]["CLAWBOO_DB_PATH"].is_string(), "{entry}");
    assert!(!s.home.join(".claude.json").exists());
}

#[test]
fn codex_config_keeps_its_comments_and_entries_and_a_transport_switch_replaces_only_ours() {
    let (db, s) = setup();
    let config = s.codex.join("config.toml");
    let before = "# my settings\nmodel = \"o4\" # the model I use\n\n[mcp_servers.mine]\ncommand = \"mine\" # keep me\n";
    std::fs::write(&config, before).unwrap();
    let all_stdio = [
        "--apply",
        "--all",
        "--runtime",
        "codex",
        "--transport",
        "stdio",
    ];
    s.attach_ok(&db, &all_stdio);
    let stdio = read(&config);
    assert!(stdio.starts_with(before), "{stdio}");
    for server in SERVERS {
        assert!(
            stdio.contains(&format!(
                "[mcp_servers.clawboo-{server}]\ncommand = \"{}\"\nargs = [\"mcp\", \"{server}\"]\n",
                env!("CARGO_BIN_EXE_clawboo")
            )),
            "{stdio}"
        );
    }
    assert!(s.attach_ok(&db, &all_stdio).starts_with("unchanged "));
    assert_eq!(read(&config), stdio);
    // A setting the user added to our entry stays when the transport changes.
    std::fs::write(
        &config,
        stdio.replace(
            "[mcp_servers.clawboo-tasks]\n",
            "[mcp_servers.clawboo-tasks]\nstartup_timeout_sec = 30 # slow host\n",
        ),
    )
    .unwrap();
    s.attach_ok(&db, &["--apply", "--runtime", "codex"]);
    let http = read(&config);
    assert!(http.starts_with(before), "{http}");
    let tasks = http
        .split("[mcp_servers.clawboo-tasks]\n")
        .nth(1)
        .unwrap()
        .split("\n[")
        .next()
        .unwrap();
    assert!(
        tasks.starts_with("startup_timeout_sec = 30 # slow host\n"),
        "{tasks}"
    );
    assert!(
        tasks.contains("url = \"http://127.0.0.1:18790/api/mcp/tasks?scopeSig="),
        "{tasks}"
    );
    assert!(
        !tasks.contains("command") && !tasks.contains("args"),
        "{tasks}"
    );
    // The other three are still stdio.
    assert!(http.contains("args = [\"mcp\", \"memory\"]"), "{http}");
}

#[test]
fn openclaw_servers_go_under_mcp_servers_beside_the_rest() {
    let (db, s) = setup();
    std::fs::create_dir_all(s.openclaw.parent().unwrap()).unwrap();
    let before = json!({ "agents": { "main": { "model": "x" } }, "mcp": { "servers": { "mine": { "command": "mine" } } } });
    std::fs::write(&s.openclaw, format!("{before}\n")).unwrap();
    s.attach_ok(
        &db,
        &[
            "--apply",
            "--runtime",
            "openclaw",
            "--team",
            "red",
            "--agent",
            "alice",
        ],
    );
    let after = json_of(&s.openclaw);
    assert_eq!(after["agents"], before["agents"]);
    assert_eq!(
        after["mcp"]["servers"]["mine"],
        before["mcp"]["servers"]["mine"]
    );
    let entry = &after["mcp"]["servers"]["clawboo-tasks"];
    assert_eq!(entry["transport"], "streamable-http");
    assert!(
        entry["url"]
            .as_str()
            .unwrap()
            .contains("scopeTeamId=red&scopeAgentId=alice&scopeSig="),
        "{entry}"
    );
}

#[test]
fn dry_run_prints_the_diff_and_writes_nothing() {
    let (db, s) = setup();
    let config = s.codex.join("config.toml");
    std::fs::write(&config, "model = \"o4\"\n").unwrap();
    let diff = s.attach_ok(&db, &["--apply", "--dry-run", "--runtime", "codex"]);
    let shown = config.display();
    assert!(
        diff.starts_with(&format!("--- {shown}\n+++ {shown}\n@@ ")),
        "{diff}"
    );
    assert!(diff.contains("\n+[mcp_servers.clawboo-tasks]\n+url = \"http://127.0.0.1:18790/api/mcp/tasks?scopeSig="), "{diff}");
    assert_eq!(read(&config), "model = \"o4\"\n");
    // A new file: the diff is from nothing, and the file is still not made.
    let diff = s.attach_ok(&db, &["--apply", "--dry-run"]);
    assert!(diff.starts_with("--- /dev/null\n"), "{diff}");
    assert!(!s.home.join(".claude.json").exists());
}

#[test]
fn a_file_that_does_not_parse_is_refused_and_left_as_it_was() {
    let (db, s) = setup();
    let config = s.home.join(".claude.json");
    std::fs::write(&config, "{ \"mcpServers\": ").unwrap();
    let out = s.attach(&db, &["--apply"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("{} is not valid JSON (", config.display()))
            && stderr.contains("clawboo attach without --apply prints it"),
        "{stderr}"
    );
    assert_eq!(read(&config), "{ \"mcpServers\": ");
    // And flags that make no sense together say so.
    let out = s.attach(&db, &["--apply", "--runtime", "codex", "--scope", "user"]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("--scope applies to --runtime claude-code only"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
