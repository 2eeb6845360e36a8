//! "Hosts" for tests of several processes on one PostgreSQL database: each host is a
//! `clawboo serve` plus the stdio servers started beside it, with a home and temporary
//! folder of their own, so nothing but the database connects two hosts. MCP clients of
//! either kind (an HTTP session on a host's serve, a stdio process) answer through one
//! blocking [`McpClient`], so racers and load loops are plain threads.
#![allow(dead_code, clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{Value, json};

use crate::common::{StdioClient, TestDb};
use crate::http_support::{Server, Session, client};

pub const TASKS_BIN: &str = env!("CARGO_BIN_EXE_clawboo-mcp-tasks");
pub const TEAMCHAT_BIN: &str = env!("CARGO_BIN_EXE_clawboo-mcp-teamchat");
pub const TOOLS_BIN: &str = env!("CARGO_BIN_EXE_clawboo-mcp-tools");

/// How long one REST request may take before the test fails.
const REST_TIMEOUT: Duration = Duration::from_secs(60);

/// One host: its serve and the environment its processes share.
pub struct Host {
    pub name: &'static str,
    pub server: Server,
    env: Vec<(String, String)>,
    _folder: tempfile::TempDir,
}

impl Host {
    /// Start host `name`'s serve on `db` (loopback, port 0).
    pub fn start(db: &TestDb, name: &'static str) -> Host {
        let folder = tempfile::tempdir().unwrap();
        let tmp = folder.path().join("tmp");
        std::fs::create_dir(&tmp).unwrap();
        let env = vec![
            ("HOME".to_owned(), folder.path().display().to_string()),
            ("TMPDIR".to_owned(), tmp.display().to_string()),
            // No web search on any host, whatever the machine's environment holds.
            ("TAVILY_API_KEY".to_owned(), String::new()),
        ];
        let pairs: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let server = Server::start_on(db, "127.0.0.1:0", &pairs);
        Host {
            name,
            server,
            env,
            _folder: folder,
        }
    }

    /// An MCP session on this host's serve at `endpoint` (`/api/mcp/tasks`, …).
    pub fn http(&self, endpoint: &str) -> McpClient {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let session = runtime.block_on(Session::open(&self.server.url(endpoint)));
        McpClient::Http(runtime, session)
    }

    /// A stdio server `bin` started on this host, on its database, with `args`.
    pub fn stdio(&self, bin: &str, args: &[&str]) -> McpClient {
        let env: Vec<(&str, &str)> = self
            .env
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        let mut c = StdioClient::spawn_with_env(bin, &self.server.db, args, &env);
        c.initialize();
        McpClient::Stdio(c)
    }

    /// `method path` on this host's REST API with an optional JSON body: status and body.
    pub fn rest(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> (u16, Value) {
        rest(&self.server.url(path), method, body)
    }
}

/// A blocking REST request: status and JSON body (`null` when the body is not JSON).
pub fn rest(url: &str, method: reqwest::Method, body: Option<Value>) -> (u16, Value) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let mut req = client().request(method, url).timeout(REST_TIMEOUT);
        if let Some(body) = body {
            req = req.json(&body);
        }
        let resp = req.send().await.unwrap();
        let status = resp.status().as_u16();
        let text = resp.text().await.unwrap();
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    })
}

/// An MCP client of one host.
pub enum McpClient {
    Http(tokio::runtime::Runtime, Session),
    Stdio(StdioClient),
}

impl McpClient {
    /// `tools/call`; the result object (content, isError, _meta).
    pub fn call(&mut self, tool: &str, args: Value) -> Value {
        match self {
            McpClient::Http(runtime, session) => runtime.block_on(session.call(tool, args)),
            McpClient::Stdio(c) => c.call_tool(tool, args),
        }
    }

    /// A call that must succeed: its first text block, parsed.
    pub fn call_ok(&mut self, tool: &str, args: Value) -> Value {
        let result = self.call(tool, args.clone());
        ok_json(&result).unwrap_or_else(|| panic!("{tool} {args} failed: {result}"))
    }
}

/// A successful tool result's first text block, parsed; `None` for a tool-error.
pub fn ok_json(result: &Value) -> Option<Value> {
    (result["isError"] != json!(true)).then(|| {
        serde_json::from_str(result["content"][0]["text"].as_str().unwrap())
            .unwrap_or_else(|e| panic!("result text is not JSON ({e}): {result}"))
    })
}

/// Team `team`'s room as stored: each post's text by seq.
pub fn stored_posts(db: &TestDb, team: &str) -> BTreeMap<i64, String> {
    let sql = format!(
        "SELECT seq, body FROM team_chat WHERE room_id = {}",
        crate::common::sql_quote(&format!("team:{team}"))
    );
    db.query_rows(&sql)
        .into_iter()
        .map(|r| {
            (
                r[0].as_deref().unwrap().parse().unwrap(),
                r[1].clone().unwrap(),
            )
        })
        .collect()
}
