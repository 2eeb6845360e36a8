//! Helpers for tests that run the real `clawboo serve` on port 0 and speak HTTP to it.
#![allow(dead_code, clippy::unwrap_used)]

use std::ffi::OsStr;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::channel;
use std::time::Duration;

use serde_json::{Value, json};

use crate::common::TestDb;

/// Environment a test server must not inherit.
const CLEARED_ENV: [&str; 5] = [
    "STUDIO_ACCESS_TOKEN",
    "CLAWBOO_ALLOW_INSECURE",
    "CLAWBOO_ALLOWED_HOSTS",
    "CLAWBOO_MCP_BIN_DIR",
    "CLAWBOO_DB_PATH",
];

/// A running `clawboo serve`, killed on drop.
pub struct Server {
    child: Child,
    /// `http://127.0.0.1:<port>`.
    pub base: String,
    /// Its database (on the backend under test), kept while the server runs.
    pub db: TestDb,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The `clawboo` binary.
pub fn clawboo() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_clawboo"));
    for k in CLEARED_ENV {
        cmd.env_remove(k);
    }
    cmd
}

impl Server {
    /// Start on a fresh database.
    pub fn start(env: &[(&str, &str)]) -> Server {
        Server::start_on(&TestDb::new(), "127.0.0.1:0", env)
    }

    /// Start on `db`, bound to `bind`; returns once the listening line is printed (the
    /// socket is bound by then).
    pub fn start_on(db: &TestDb, bind: &str, env: &[(&str, &str)]) -> Server {
        let mut cmd = clawboo();
        cmd.args(["serve", "--bind", bind, "--db"])
            .arg(db)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().unwrap();
        let stdout = child.stdout.take().unwrap();
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line).unwrap();
        let base = line
            .trim()
            .strip_prefix("clawboo listening on ")
            .unwrap_or_else(|| panic!("unexpected first line: {line:?}"))
            .to_owned();
        Server {
            child,
            base,
            db: db.clone(),
        }
    }

    /// Start on a fresh database and read all `serve` prints once bound: the listening line
    /// and the banner after it, up to its `guide:` line.
    pub fn start_with_banner() -> (Server, Vec<String>) {
        let db = TestDb::new();
        let mut child = clawboo()
            .args(["serve", "--bind", "127.0.0.1:0", "--db"])
            .arg(&db)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        // Read on a thread so a banner that never ends fails the test instead of hanging it.
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let (lines, received) = channel();
        std::thread::spawn(move || {
            for line in stdout.lines().map_while(Result::ok) {
                if lines.send(line).is_err() {
                    break;
                }
            }
        });
        let mut banner: Vec<String> = Vec::new();
        while !banner
            .last()
            .is_some_and(|l| l.trim_start().starts_with("guide:"))
        {
            match received.recv_timeout(Duration::from_secs(30)) {
                Ok(line) => banner.push(line),
                Err(e) => panic!("no guide line after {banner:?}: {e}"),
            }
        }
        let base = banner[0]
            .strip_prefix("clawboo listening on ")
            .unwrap_or_else(|| panic!("unexpected first line: {:?}", banner[0]))
            .to_owned();
        (Server { child, base, db }, banner)
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }
}

/// Run `clawboo attach --json` with `args` against `db` (a [`TestDb`], or a path); returns
/// the config object.
pub fn attach(db: impl AsRef<OsStr>, args: &[&str]) -> Value {
    let out = clawboo()
        .arg("attach")
        .args(args)
        .arg("--json")
        .arg("--db")
        .arg(db)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    v["config"].clone()
}

/// The signed URL `clawboo attach` mints for `server_name` (`tasks`, `tools`, …), bound to
/// `team` and `agent`, on `server`.
pub fn signed_url(server: &Server, server_name: &str, team: &str, agent: &str) -> String {
    let args = [
        "--server",
        server_name,
        "--team",
        team,
        "--agent",
        agent,
        "--url",
        &server.base,
    ];
    let config = attach(&server.db, &args);
    let url = config["structured"][format!("clawboo-{server_name}")]["url"]
        .as_str()
        .unwrap();
    assert!(url.contains("scopeSig="), "{url}");
    url.to_owned()
}

/// The signed tasks URL `clawboo attach` mints for `team` and `agent` on `server`.
pub fn signed_tasks_url(server: &Server, team: &str, agent: &str) -> String {
    signed_url(server, "tasks", team, agent)
}

pub fn client() -> reqwest::Client {
    // reqwest has rustls but no crypto provider of its own (the workspace manifest).
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder().no_proxy().build().unwrap()
}

/// `GET url`'s JSON body.
pub async fn get_json(url: &str) -> Value {
    client()
        .get(url)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// The JSON-RPC message with `id` in a JSON or SSE body.
pub fn message_with_id(body: &str, id: i64) -> Value {
    if let Ok(v) = serde_json::from_str::<Value>(body) {
        return v;
    }
    body.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
        .find(|v| v["id"] == json!(id))
        .unwrap_or_else(|| panic!("no message with id {id} in {body:?}"))
}

/// One MCP session over HTTP.
pub struct Session {
    pub http: reqwest::Client,
    pub url: String,
    pub id: String,
    next_id: i64,
}

impl Session {
    /// `initialize` (+ `notifications/initialized`) at `url`.
    pub async fn open(url: &str) -> Session {
        let http = client();
        let resp = post(&http, url, None, &initialize_body(1)).await;
        assert_eq!(resp.status(), 200);
        let id = resp.headers()["mcp-session-id"]
            .to_str()
            .unwrap()
            .to_owned();
        let body = resp.text().await.unwrap();
        let init = message_with_id(&body, 1);
        assert_eq!(init["result"]["protocolVersion"], "2025-06-18", "{init}");
        let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let r = post(&http, url, Some(&id), &note).await;
        assert_eq!(r.status(), 202);
        Session {
            http,
            url: url.to_owned(),
            id,
            next_id: 2,
        }
    }

    /// A request in this session; returns the JSON-RPC response message.
    pub async fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let resp = post(&self.http, &self.url, Some(&self.id), &msg).await;
        assert_eq!(resp.status(), 200);
        message_with_id(&resp.text().await.unwrap(), id)
    }

    /// `tools/call`; returns the result object.
    pub async fn call(&mut self, name: &str, args: Value) -> Value {
        let r = self
            .request("tools/call", json!({"name": name, "arguments": args}))
            .await;
        r["result"].clone()
    }

    /// The JSON of a tool result's first text block.
    pub async fn call_json(&mut self, name: &str, args: Value) -> Value {
        let result = self.call(name, args).await;
        assert_ne!(result["isError"], json!(true), "{name} failed: {result}");
        serde_json::from_str(result["content"][0]["text"].as_str().unwrap()).unwrap()
    }
}

pub fn initialize_body(id: i64) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "clawboo-test", "version": "0"}}})
}

/// POST a JSON-RPC message the way MCP clients do.
pub async fn post(
    http: &reqwest::Client,
    url: &str,
    session: Option<&str>,
    body: &Value,
) -> reqwest::Response {
    let mut req = http
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(body.to_string());
    if let Some(s) = session {
        req = req.header("mcp-session-id", s);
    }
    req.send().await.unwrap()
}

/// Create a task over REST.
pub async fn create_task(server: &Server, title: &str, team: &str) -> Value {
    let r = client()
        .post(server.url("/api/board"))
        .json(&json!({"title": title, "teamId": team}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    r.json::<Value>().await.unwrap()["task"].clone()
}

/// The 2026-07-28 protocol, which has no `initialize` and no session.
pub const MODERN: &str = "2026-07-28";

/// An answer to one 2026-07-28 request.
pub struct ModernAnswer {
    pub status: u16,
    /// The `mcp-session-id` header, which a 2026-07-28 answer must not carry.
    pub session: Option<String>,
    /// The JSON-RPC message (from a JSON or SSE body).
    pub message: Value,
}

/// POST one 2026-07-28 request, as such clients send it: the protocol fields in `_meta`
/// (beside `params`), the version and method (and a tool's name) in headers, no session.
pub async fn post_modern(
    http: &reqwest::Client,
    url: &str,
    id: i64,
    method: &str,
    params: Value,
) -> ModernAnswer {
    let resp = send_modern(http, url, id, method, params, json!({})).await;
    let status = resp.status().as_u16();
    let session = resp
        .headers()
        .get("mcp-session-id")
        .map(|v| v.to_str().unwrap().to_owned());
    let message = message_with_id(&resp.text().await.unwrap(), id);
    ModernAnswer {
        status,
        session,
        message,
    }
}

/// Send one 2026-07-28 request from a client declaring `capabilities` (`params` may carry
/// a `progressToken` in `_meta`); the response is left unread.
pub async fn send_modern(
    http: &reqwest::Client,
    url: &str,
    id: i64,
    method: &str,
    mut params: Value,
    capabilities: Value,
) -> reqwest::Response {
    let progress = params["_meta"]["progressToken"].clone();
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": capabilities,
        "io.modelcontextprotocol/clientInfo": {"name": "clawboo-test", "version": "0"},
    });
    if !progress.is_null() {
        params["_meta"]["progressToken"] = progress;
    }
    let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    let mut req = http
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", MODERN)
        .header("mcp-method", method)
        .body(body.to_string());
    if let Some(name) = params["name"].as_str() {
        req = req.header("mcp-name", name);
    }
    req.send().await.unwrap()
}
