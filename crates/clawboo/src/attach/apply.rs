//! `clawboo attach --apply`: write attach configurations into an agent runtime's own config
//! file instead of printing them: Claude Code's (`~/.claude.json` for the user scope,
//! `.mcp.json` for the project scope, where `claude mcp add --scope user|project` writes),
//! Codex's (`$CODEX_HOME/config.toml`, else `~/.codex/config.toml`) and OpenClaw's
//! (`$OPENCLAW_CONFIG_PATH`, else `~/.openclaw/openclaw.json`, under `mcp.servers`).
//!
//! A merge, never a rewrite: every other server, every other setting and (in TOML) every
//! comment stays; in our own entry only the keys we write (the transport's) are replaced,
//! so options a user added to it stay too. A file that already says the same is not
//! touched, so a second run changes nothing.

use std::path::{Path, PathBuf};

use clap::ValueEnum;
use clawboo_mcp::attach::Runtime;
use serde_json::{Map, Value};
use toml_edit::{DocumentMut, Item, Table};

/// Where `claude mcp add` would keep the server (its `--scope`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ClaudeScope {
    /// Every project of this user: `~/.claude.json` (`$CLAUDE_CONFIG_DIR/.claude.json`).
    User,
    /// This project, shared through its repository: `.mcp.json` in the current folder.
    Project,
}

/// Why a config file could not be merged. The texts are what an operator sees: they name
/// the file and say what to do, and the file is left as it was.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    #[error(
        "{path} is not valid {format} ({reason}): fix it or move it aside, or add the entry by hand (clawboo attach without --apply prints it)"
    )]
    Unparsable {
        path: PathBuf,
        format: &'static str,
        reason: String,
    },
    #[error(
        "{path}: `{key}` is not a table/object, so the servers cannot be added under it: fix the file, or add the entry by hand (clawboo attach without --apply prints it)"
    )]
    NotATable { path: PathBuf, key: String },
    #[error("cannot find the home folder: set HOME")]
    NoHome,
}

impl ApplyError {
    fn not_a_table(path: &Path, key: &str) -> ApplyError {
        ApplyError::NotATable {
            path: path.to_owned(),
            key: key.to_owned(),
        }
    }
}

/// The keys of a server entry that `clawboo attach` writes, in any runtime and transport:
/// these are replaced (or removed when the new transport has none), the others kept.
const OWNED_KEYS: [&str; 6] = ["type", "url", "transport", "command", "args", "env"];

/// The config file `runtime` reads its MCP servers from, and the path of keys to the
/// servers' table inside it.
pub fn target(
    runtime: Runtime,
    scope: Option<ClaudeScope>,
) -> Result<(PathBuf, &'static [&'static str]), ApplyError> {
    let env_path = |var: &str| std::env::var_os(var).filter(|v| !v.is_empty());
    let home = || std::env::home_dir().ok_or(ApplyError::NoHome);
    Ok(match runtime {
        Runtime::ClaudeCode => match scope.unwrap_or(ClaudeScope::User) {
            ClaudeScope::User => {
                let dir = match env_path("CLAUDE_CONFIG_DIR") {
                    Some(dir) => PathBuf::from(dir),
                    None => home()?,
                };
                (dir.join(".claude.json"), &["mcpServers"])
            }
            ClaudeScope::Project => (PathBuf::from(".mcp.json"), &["mcpServers"]),
        },
        Runtime::Codex => {
            let dir = match env_path("CODEX_HOME") {
                Some(dir) => PathBuf::from(dir),
                None => home()?.join(".codex"),
            };
            (dir.join("config.toml"), &["mcp_servers"])
        }
        Runtime::OpenClaw => {
            let path = match env_path("OPENCLAW_CONFIG_PATH") {
                Some(path) => PathBuf::from(path),
                None => home()?.join(".openclaw").join("openclaw.json"),
            };
            (path, &["mcp", "servers"])
        }
    })
}

/// `existing` (the file's text, `None` when there is none) with `entries` (server id →
/// its entry, as `AttachConfig::structured` gives it) merged in under `table_path`. The
/// text comes back unchanged, byte for byte, when every entry is already there.
pub fn merge(
    runtime: Runtime,
    path: &Path,
    existing: Option<&str>,
    table_path: &[&str],
    entries: &[(String, Value)],
) -> Result<String, ApplyError> {
    match runtime {
        Runtime::Codex => merge_toml(path, existing, table_path, entries),
        Runtime::ClaudeCode | Runtime::OpenClaw => merge_json(path, existing, table_path, entries),
    }
}

/// Set our keys of `entry` on `current`, dropping the owned keys it has no value for;
/// whether anything changed.
fn merge_json_entry(current: &mut Map<String, Value>, entry: &Map<String, Value>) -> bool {
    let mut changed = false;
    for key in OWNED_KEYS {
        match entry.get(key) {
            Some(value) if current.get(key) != Some(value) => {
                current.insert(key.to_owned(), value.clone());
                changed = true;
            }
            Some(_) => {}
            None => changed |= current.remove(key).is_some(),
        }
    }
    changed
}

fn merge_json(
    path: &Path,
    existing: Option<&str>,
    table_path: &[&str],
    entries: &[(String, Value)],
) -> Result<String, ApplyError> {
    let mut root: Value = match existing.filter(|t| !t.trim().is_empty()) {
        Some(text) => serde_json::from_str(text).map_err(|e| ApplyError::Unparsable {
            path: path.to_owned(),
            format: "JSON",
            reason: e.to_string(),
        })?,
        None => Value::Object(Map::new()),
    };
    let not_a_table = |key: &str| ApplyError::not_a_table(path, key);
    let mut table = root
        .as_object_mut()
        .ok_or_else(|| not_a_table("(the top level)"))?;
    for key in table_path {
        table = table
            .entry(*key)
            .or_insert_with(|| Value::Object(Map::new()))
            .as_object_mut()
            .ok_or_else(|| not_a_table(key))?;
    }
    let mut changed = false;
    for (id, entry) in entries {
        let entry = entry.as_object().ok_or_else(|| not_a_table(id))?;
        let current = table
            .entry(id.clone())
            .or_insert_with(|| Value::Object(Map::new()))
            .as_object_mut()
            .ok_or_else(|| not_a_table(id))?;
        changed |= merge_json_entry(current, entry);
    }
    match existing {
        Some(text) if !changed => Ok(text.to_owned()),
        _ => {
            // Two-space indents, as both runtimes write their files.
            let mut text = serde_json::to_string_pretty(&root).unwrap_or_default();
            if existing.is_none_or(|t| t.ends_with('\n')) {
                text.push('\n');
            }
            Ok(text)
        }
    }
}

/// A JSON entry value as TOML. We write strings, string lists and string maps; anything
/// else would be written as its JSON text.
fn toml_value(value: &Value) -> toml_edit::Value {
    match value {
        Value::String(s) => s.as_str().into(),
        Value::Array(items) => toml_edit::Value::Array(items.iter().map(toml_value).collect()),
        Value::Object(map) => toml_edit::Value::InlineTable(
            map.iter()
                .map(|(k, v)| (k.as_str(), toml_value(v)))
                .collect(),
        ),
        other => other.to_string().into(),
    }
}

/// A TOML item as JSON, to compare with what we would write (formatting aside).
fn toml_as_json(item: &Item) -> Option<Value> {
    fn value(v: &toml_edit::Value) -> Value {
        match v {
            toml_edit::Value::String(s) => Value::String(s.value().clone()),
            toml_edit::Value::Integer(i) => Value::from(*i.value()),
            toml_edit::Value::Float(f) => Value::from(*f.value()),
            toml_edit::Value::Boolean(b) => Value::Bool(*b.value()),
            toml_edit::Value::Datetime(d) => Value::String(d.value().to_string()),
            toml_edit::Value::Array(a) => Value::Array(a.iter().map(value).collect()),
            toml_edit::Value::InlineTable(t) => {
                Value::Object(t.iter().map(|(k, v)| (k.to_owned(), value(v))).collect())
            }
        }
    }
    match item {
        Item::Value(v) => Some(value(v)),
        Item::Table(t) => Some(Value::Object(
            t.iter()
                .filter_map(|(k, v)| Some((k.to_owned(), toml_as_json(v)?)))
                .collect(),
        )),
        Item::None | Item::ArrayOfTables(_) => None,
    }
}

fn merge_toml(
    path: &Path,
    existing: Option<&str>,
    table_path: &[&str],
    entries: &[(String, Value)],
) -> Result<String, ApplyError> {
    let text = existing.unwrap_or("");
    let mut doc: DocumentMut =
        text.parse()
            .map_err(|e: toml_edit::TomlError| ApplyError::Unparsable {
                path: path.to_owned(),
                format: "TOML",
                reason: e.message().to_owned(),
            })?;
    let not_a_table = |key: &str| ApplyError::not_a_table(path, key);
    let mut table: &mut Table = doc.as_table_mut();
    for key in table_path {
        let item = table.entry(key).or_insert_with(|| {
            // `[mcp_servers.<id>]` headers only, no empty `[mcp_servers]` above them.
            let mut t = Table::new();
            t.set_implicit(true);
            Item::Table(t)
        });
        table = item.as_table_mut().ok_or_else(|| not_a_table(key))?;
    }
    let mut changed = false;
    for (id, entry) in entries {
        let entry = entry.as_object().ok_or_else(|| not_a_table(id))?;
        let server = table
            .entry(id)
            .or_insert_with(|| Item::Table(Table::new()))
            .as_table_mut()
            .ok_or_else(|| not_a_table(id))?;
        for key in OWNED_KEYS {
            match entry.get(key) {
                Some(want) if server.get(key).and_then(toml_as_json).as_ref() != Some(want) => {
                    server.insert(key, Item::Value(toml_value(want)));
                    changed = true;
                }
                Some(_) => {}
                None => changed |= server.remove(key).is_some(),
            }
        }
    }
    if !changed {
        return Ok(text.to_owned());
    }
    Ok(doc.to_string())
}

/// A unified diff of `path` from `before` to `after`, for `--dry-run`.
pub fn diff(path: &Path, before: Option<&str>, after: &str) -> String {
    let name = path.display().to_string();
    let old_name = if before.is_some() {
        name.clone()
    } else {
        "/dev/null".to_owned()
    };
    similar::TextDiff::from_lines(before.unwrap_or(""), after)
        .unified_diff()
        .header(&old_name, &name)
        .to_string()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn entries(pairs: &[(&str, Value)]) -> Vec<(String, Value)> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.clone()))
            .collect()
    }

    const CODEX: &str = "# my settings\nmodel = \"o4\" # the model\n\n[mcp_servers.other]\ncommand = \"other\" # keep me\n";

    #[test]
    fn codex_merge_keeps_every_other_entry_and_comment_and_is_idempotent() {
        let path = Path::new("config.toml");
        let add = entries(&[(
            "clawboo-tasks",
            json!({ "url": "http://h/api/mcp/tasks?scopeSig=ab" }),
        )]);
        let once = merge(Runtime::Codex, path, Some(CODEX), &["mcp_servers"], &add).unwrap();
        assert!(once.starts_with(CODEX), "{once}");
        assert!(
            once.ends_with(
                "\n[mcp_servers.clawboo-tasks]\nurl = \"http://h/api/mcp/tasks?scopeSig=ab\"\n"
            ),
            "{once}"
        );
        let twice = merge(Runtime::Codex, path, Some(&once), &["mcp_servers"], &add).unwrap();
        assert_eq!(twice, once);
        // Switching transport drops the old transport's key, keeps the user's own.
        let tuned = once.replace(
            "scopeSig=ab\"\n",
            "scopeSig=ab\"\nstartup_timeout_sec = 30 # slow host\n",
        );
        let stdio = entries(&[(
            "clawboo-tasks",
            json!({ "command": "/bin/clawboo", "args": ["mcp", "tasks"], "env": { "CLAWBOO_DB_PATH": "/d.db" } }),
        )]);
        let switched = merge(Runtime::Codex, path, Some(&tuned), &["mcp_servers"], &stdio).unwrap();
        assert!(!switched.contains("url ="), "{switched}");
        assert!(
            switched.contains("startup_timeout_sec = 30 # slow host"),
            "{switched}"
        );
        assert!(
            switched.contains("args = [\"mcp\", \"tasks\"]"),
            "{switched}"
        );
        assert!(
            switched.contains("env = { CLAWBOO_DB_PATH = \"/d.db\" }"),
            "{switched}"
        );
        assert!(switched.starts_with(CODEX), "{switched}");
    }

    #[test]
    fn a_new_codex_file_gets_only_the_server_tables() {
        let add = entries(&[("clawboo-tasks", json!({ "url": "http://h/x" }))]);
        let made = merge(
            Runtime::Codex,
            Path::new("c.toml"),
            None,
            &["mcp_servers"],
            &add,
        )
        .unwrap();
        assert_eq!(made, "[mcp_servers.clawboo-tasks]\nurl = \"http://h/x\"\n");
    }

    #[test]
    fn json_merge_keeps_other_entries_and_order_and_is_idempotent() {
        let before = "{\n  \"firstStartTime\": \"x\",\n  \"mcpServers\": {\n    \"mine\": {\n      \"type\": \"stdio\",\n      \"command\": \"m\"\n    }\n  },\n  \"projects\": {}\n}";
        let add = entries(&[(
            "clawboo-tasks",
            json!({ "type": "http", "url": "http://h/x" }),
        )]);
        let path = Path::new(".claude.json");
        let once = merge(
            Runtime::ClaudeCode,
            path,
            Some(before),
            &["mcpServers"],
            &add,
        )
        .unwrap();
        let parsed: Value = serde_json::from_str(&once).unwrap();
        let keys: Vec<&String> = parsed.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["firstStartTime", "mcpServers", "projects"]);
        assert_eq!(
            parsed["mcpServers"]["mine"],
            json!({ "type": "stdio", "command": "m" })
        );
        assert_eq!(parsed["mcpServers"]["clawboo-tasks"]["url"], "http://h/x");
        assert!(
            !once.ends_with('\n'),
            "no newline added where there was none"
        );
        let twice = merge(
            Runtime::ClaudeCode,
            path,
            Some(&once),
            &["mcpServers"],
            &add,
        )
        .unwrap();
        assert_eq!(twice, once);
    }

    #[test]
    fn openclaw_entries_go_under_mcp_servers() {
        let add = entries(&[(
            "clawboo-tasks",
            json!({ "url": "http://h/x", "transport": "streamable-http" }),
        )]);
        let before = "{\"agents\": {\"a\": 1}, \"mcp\": {\"enabled\": true}}\n";
        let once = merge(
            Runtime::OpenClaw,
            Path::new("o.json"),
            Some(before),
            &["mcp", "servers"],
            &add,
        )
        .unwrap();
        let parsed: Value = serde_json::from_str(&once).unwrap();
        assert_eq!(parsed["agents"], json!({ "a": 1 }));
        assert_eq!(parsed["mcp"]["enabled"], true);
        assert_eq!(
            parsed["mcp"]["servers"]["clawboo-tasks"]["transport"],
            "streamable-http"
        );
        assert!(once.ends_with('\n'));
    }

    #[test]
    fn unparsable_or_misshapen_files_are_refused_with_what_to_do() {
        let add = entries(&[("clawboo-tasks", json!({ "url": "u" }))]);
        let e = merge(
            Runtime::ClaudeCode,
            Path::new("/h/.claude.json"),
            Some("{ nope"),
            &["mcpServers"],
            &add,
        )
        .unwrap_err()
        .to_string();
        assert!(e.starts_with("/h/.claude.json is not valid JSON ("), "{e}");
        assert!(
            e.contains("clawboo attach without --apply prints it"),
            "{e}"
        );
        let e = merge(
            Runtime::Codex,
            Path::new("c.toml"),
            Some("mcp_servers = 3\n"),
            &["mcp_servers"],
            &add,
        )
        .unwrap_err()
        .to_string();
        assert!(e.starts_with("c.toml: `mcp_servers` is not a table"), "{e}");
        let e = merge(
            Runtime::Codex,
            Path::new("c.toml"),
            Some("[x\n"),
            &["mcp_servers"],
            &add,
        )
        .unwrap_err()
        .to_string();
        assert!(e.starts_with("c.toml is not valid TOML ("), "{e}");
    }

    #[test]
    fn a_diff_names_the_file_and_shows_the_added_lines() {
        let d = diff(Path::new("c.toml"), Some("a = 1\n"), "a = 1\nb = 2\n");
        assert!(d.starts_with("--- c.toml\n+++ c.toml\n"), "{d}");
        assert!(d.contains("\n+b = 2\n"), "{d}");
        assert!(
            diff(Path::new("n.toml"), None, "b = 2\n").starts_with("--- /dev/null\n+++ n.toml\n")
        );
    }
}
