//! Shared helpers for integration tests: a database per test on the backend under test
//! ([`TestDb`]), and a real stdio server binary spoken to in newline-delimited JSON-RPC.
#![allow(dead_code)]

use std::ffi::OsStr;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::Arc;
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::Duration;

use clawboo_store::{DbLocation, Store, StoreConfig};
use serde_json::{Value, json};

/// `postgres` runs every [`TestDb`] on PostgreSQL; anything else (or unset) on SQLite.
pub const BACKEND_ENV: &str = "CLAWBOO_TEST_BACKEND";
/// A PostgreSQL server whose role may create databases (test.sh starts a throwaway one).
pub const POSTGRES_URL_ENV: &str = "CLAWBOO_TEST_POSTGRES_URL";

/// Whether this run's databases are on PostgreSQL.
pub fn on_postgres() -> bool {
    std::env::var(BACKEND_ENV).is_ok_and(|b| b == "postgres")
}

/// True, after printing why, when no PostgreSQL server is configured: a test that needs
/// one whatever the backend under test then returns early.
pub fn no_postgres_server() -> bool {
    let missing = std::env::var(POSTGRES_URL_ENV).is_err();
    if missing {
        eprintln!("skipped: no PostgreSQL server ({POSTGRES_URL_ENV} is unset; test.sh sets it)");
    }
    missing
}

/// True, after printing a one-line notice, unless this run is the PostgreSQL one
/// ([`BACKEND_ENV`] is `postgres` and [`POSTGRES_URL_ENV`] is set): a test of what only
/// PostgreSQL offers (hosts sharing one database, the server going away) then returns
/// early, and runs once in test.sh, in its PostgreSQL pass.
pub fn not_a_postgres_run() -> bool {
    let skip = !on_postgres() || std::env::var(POSTGRES_URL_ENV).is_err();
    if skip {
        eprintln!(
            "skipped: PostgreSQL only (set {BACKEND_ENV}=postgres and {POSTGRES_URL_ENV}, as test.sh does)"
        );
    }
    skip
}

/// True, after printing `reason`, when `db` is on PostgreSQL and the caller is about to
/// check a SQLite-only property (its files, WAL, `integrity_check`), which it then skips.
pub fn skip_on_postgres(db: &TestDb, reason: &str) -> bool {
    let skip = db.is_postgres();
    if skip {
        eprintln!("skipped on PostgreSQL: {reason}");
    }
    skip
}

/// One test's own database on the backend under test: a SQLite file in a fresh temporary
/// folder, or, when [`BACKEND_ENV`] is `postgres`, a fresh database `clawboo_t_<uuid>` on
/// [`POSTGRES_URL_ENV`], dropped when the last clone goes. Pass it (or [`TestDb::db_arg`])
/// wherever `--db` goes.
#[derive(Clone)]
pub struct TestDb(Arc<Backing>);

enum Backing {
    Sqlite {
        _dir: tempfile::TempDir,
        path: PathBuf,
    },
    Postgres {
        /// The server's URL (its own database), to create and drop ours from.
        server: String,
        name: String,
        /// Our database's URL, as the binaries get it.
        url: String,
    },
}

impl TestDb {
    /// A database on the backend under test.
    pub fn new() -> TestDb {
        if on_postgres() {
            TestDb::postgres()
        } else {
            TestDb::sqlite()
        }
    }

    /// A SQLite database whatever the backend under test (for SQLite-only checks).
    pub fn sqlite() -> TestDb {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("clawboo.db");
        TestDb(Arc::new(Backing::Sqlite { _dir: dir, path }))
    }

    /// A PostgreSQL database whatever the backend under test (needs [`POSTGRES_URL_ENV`]).
    pub fn postgres() -> TestDb {
        let server = std::env::var(POSTGRES_URL_ENV).unwrap_or_else(|_| {
            panic!("{BACKEND_ENV}=postgres needs {POSTGRES_URL_ENV} (test.sh sets both)")
        });
        TestDb::postgres_on(&server)
    }

    /// A fresh database on the PostgreSQL server at `server` (a URL whose role may create
    /// databases), for a test that runs a server of its own.
    pub fn postgres_on(server: &str) -> TestDb {
        let server = server.to_owned();
        let name = format!("clawboo_t_{}", clawboo_store::new_id().replace('-', "_"));
        pg_batch(&server, &format!("CREATE DATABASE {name}"));
        let url = with_database(&server, &name);
        TestDb(Arc::new(Backing::Postgres { server, name, url }))
    }

    pub fn is_postgres(&self) -> bool {
        matches!(*self.0, Backing::Postgres { .. })
    }

    /// What `--db` (or `CLAWBOO_DB_PATH`) gets: the file's path or the database's URL.
    pub fn db_arg(&self) -> &OsStr {
        match &*self.0 {
            Backing::Sqlite { path, .. } => path.as_os_str(),
            Backing::Postgres { url, .. } => OsStr::new(url),
        }
    }

    /// The SQLite file (only for checks [`skip_on_postgres`] skips on PostgreSQL).
    pub fn sqlite_path(&self) -> &Path {
        match &*self.0 {
            Backing::Sqlite { path, .. } => path,
            Backing::Postgres { .. } => panic!("a SQLite-only check ran on PostgreSQL"),
        }
    }

    /// Where the store is, for opening it in the test process.
    pub fn location(&self) -> DbLocation {
        match &*self.0 {
            Backing::Sqlite { path, .. } => DbLocation::File(path.clone()),
            Backing::Postgres { url, .. } => DbLocation::Postgres(url.clone()),
        }
    }

    /// The store, opened in the test process with default settings.
    pub fn open_store(&self) -> Store {
        self.open_store_with(StoreConfig::default())
    }

    /// The store, opened in the test process with `config`.
    pub fn open_store_with(&self, config: StoreConfig) -> Store {
        let location = self.location().with_libpq_password();
        Store::open_location(&location, config).expect("open the test database")
    }

    /// Run `sql` (one or more statements, SQL both engines accept) on the database.
    pub fn exec(&self, sql: &str) {
        match &*self.0 {
            Backing::Sqlite { path, .. } => rusqlite::Connection::open(path)
                .and_then(|c| c.execute_batch(sql))
                .unwrap_or_else(|e| panic!("{sql}: {e}")),
            Backing::Postgres { url, .. } => pg_batch(url, sql),
        }
    }

    /// Every row `sql` returns, each column as text (`None` for NULL), the same on both
    /// engines: the test compares values, not driver types.
    pub fn query_rows(&self, sql: &str) -> Vec<Vec<Option<String>>> {
        match &*self.0 {
            Backing::Sqlite { path, .. } => sqlite_rows(path, sql),
            Backing::Postgres { url, .. } => {
                let messages = pg_run(url, |client| async move { client.simple_query(sql).await })
                    .unwrap_or_else(|e| panic!("{sql}: {e}"));
                messages
                    .iter()
                    .filter_map(|m| match m {
                        tokio_postgres::SimpleQueryMessage::Row(row) => Some(
                            (0..row.len())
                                .map(|i| row.get(i).map(str::to_owned))
                                .collect(),
                        ),
                        _ => None,
                    })
                    .collect()
            }
        }
    }

    /// The one row `sql` returns, each column as text.
    pub fn query_row(&self, sql: &str) -> Vec<Option<String>> {
        let mut rows = self.query_rows(sql);
        assert_eq!(rows.len(), 1, "{sql}: {rows:?}");
        rows.remove(0)
    }

    /// The first column of the one row `sql` returns, as text.
    pub fn query_text(&self, sql: &str) -> String {
        self.query_row(sql)
            .swap_remove(0)
            .unwrap_or_else(|| panic!("{sql}: NULL"))
    }

    /// The first column of the one row `sql` returns, as an integer (COUNT, a seq, 0/1).
    pub fn query_i64(&self, sql: &str) -> i64 {
        let text = self.query_text(sql);
        text.parse()
            .unwrap_or_else(|e| panic!("{sql}: {text:?} is not an integer: {e}"))
    }
}

/// `text` as a SQL string literal (both engines: quotes doubled).
pub fn sql_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

fn sqlite_rows(path: &Path, sql: &str) -> Vec<Vec<Option<String>>> {
    use rusqlite::types::ValueRef;
    let conn = rusqlite::Connection::open(path).unwrap_or_else(|e| panic!("open {path:?}: {e}"));
    let mut stmt = conn.prepare(sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
    let columns = stmt.column_count();
    let rows = stmt.query_map([], |r| {
        (0..columns)
            .map(|i| {
                Ok(match r.get_ref(i)? {
                    ValueRef::Null => None,
                    ValueRef::Integer(n) => Some(n.to_string()),
                    ValueRef::Real(x) => Some(x.to_string()),
                    ValueRef::Text(t) | ValueRef::Blob(t) => {
                        Some(String::from_utf8_lossy(t).into_owned())
                    }
                })
            })
            .collect::<rusqlite::Result<Vec<_>>>()
    });
    rows.and_then(|rows| rows.collect())
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
}

impl AsRef<OsStr> for TestDb {
    fn as_ref(&self) -> &OsStr {
        self.db_arg()
    }
}

impl Drop for Backing {
    fn drop(&mut self) {
        if let Backing::Postgres { server, name, .. } = self {
            let sql = format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)");
            if let Err(e) = pg_run(
                server,
                |client| async move { client.batch_execute(&sql).await },
            ) {
                eprintln!("could not drop the test database {name}: {e}");
            }
        }
    }
}

/// `url` naming database `name` instead (its query string kept).
fn with_database(url: &str, name: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((base, query)) => (base, Some(query)),
        None => (url, None),
    };
    let authority_start = base.find("://").map_or(0, |i| i + 3);
    let server = match base[authority_start..].find('/') {
        Some(slash) => &base[..authority_start + slash],
        None => base,
    };
    match query {
        Some(query) => format!("{server}/{name}?{query}"),
        None => format!("{server}/{name}"),
    }
}

/// Connect to `url` (password from libpq's sources when it has none) and run `work`, on a
/// thread and runtime of its own, so async tests may call it too.
fn pg_run<T, F, Fut>(url: &str, work: F) -> Result<T, tokio_postgres::Error>
where
    T: Send,
    F: FnOnce(tokio_postgres::Client) -> Fut + Send,
    Fut: std::future::Future<Output = Result<T, tokio_postgres::Error>>,
{
    let DbLocation::Postgres(url) = DbLocation::Postgres(url.to_owned()).with_libpq_password()
    else {
        unreachable!("a PostgreSQL location stays one")
    };
    std::thread::scope(|s| {
        s.spawn(|| {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime");
            runtime.block_on(async {
                let (client, connection) =
                    tokio_postgres::connect(&url, tokio_postgres::NoTls).await?;
                let driver = tokio::spawn(connection);
                let result = work(client).await;
                driver.abort();
                result
            })
        })
        .join()
        .expect("the PostgreSQL thread panicked")
    })
}

fn pg_batch(url: &str, sql: &str) {
    pg_run(url, |client| async move { client.batch_execute(sql).await })
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
}

/// How long a test waits for one answer before failing (generous: CI machines are slow).
pub const ANSWER_TIMEOUT: Duration = Duration::from_secs(60);

/// A running stdio server.
pub struct StdioClient {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    next_id: u64,
    /// Messages received while waiting for another id (notifications, other answers).
    pub backlog: Vec<Value>,
}

impl StdioClient {
    /// Spawn `bin --db <db> <args…>` (`db`: a [`TestDb`], or a path).
    pub fn spawn(bin: &str, db: impl AsRef<OsStr>, args: &[&str]) -> StdioClient {
        Self::spawn_with_env(bin, db, args, &[])
    }

    /// [`StdioClient::spawn`] with extra environment variables.
    pub fn spawn_with_env(
        bin: &str,
        db: impl AsRef<OsStr>,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> StdioClient {
        let mut cmd = Command::new(bin);
        cmd.arg("--db").arg(db).args(args);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn server binary");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stdin = child.stdin.take();
        StdioClient {
            child,
            stdin,
            lines: rx,
            next_id: 1,
            backlog: Vec::new(),
        }
    }

    /// Write one raw line.
    pub fn send_raw(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(line.as_bytes()).expect("write");
        stdin.write_all(b"\n").expect("write");
        stdin.flush().expect("flush");
    }

    /// Send a JSON message.
    pub fn send(&mut self, message: &Value) {
        self.send_raw(&message.to_string());
    }

    /// The next line from the server, parsed.
    pub fn recv(&mut self) -> Value {
        match self.lines.recv_timeout(ANSWER_TIMEOUT) {
            Ok(line) => serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("server wrote non-JSON {line:?}: {e}")),
            Err(RecvTimeoutError::Timeout) => {
                panic!("no answer from the server within {ANSWER_TIMEOUT:?}")
            }
            Err(RecvTimeoutError::Disconnected) => panic!("the server closed stdout"),
        }
    }

    /// Wait for the answer with `id`, keeping anything else in `backlog`.
    pub fn recv_id(&mut self, id: &Value) -> Value {
        if let Some(pos) = self
            .backlog
            .iter()
            .position(|m| m.get("id") == Some(id) && m.get("method").is_none())
        {
            return self.backlog.remove(pos);
        }
        loop {
            let message = self.recv();
            if message.get("id") == Some(id) && message.get("method").is_none() {
                return message;
            }
            self.backlog.push(message);
        }
    }

    /// Send a request and wait for its answer (the whole JSON-RPC response).
    pub fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        self.recv_id(&json!(id))
    }

    /// `initialize` + `notifications/initialized`; returns the initialize result.
    pub fn initialize(&mut self) -> Value {
        let answer = self.request(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "clawboo-tests", "version": "0"}}),
        );
        self.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        answer["result"].clone()
    }

    /// Call a tool; returns the `result` object (content, isError, _meta).
    pub fn call_tool(&mut self, name: &str, arguments: Value) -> Value {
        let answer = self.request("tools/call", json!({"name": name, "arguments": arguments}));
        assert!(
            answer.get("error").is_none(),
            "tools/call {name} was a protocol error: {answer}"
        );
        answer["result"].clone()
    }

    /// Call a tool that must succeed; returns its first text block parsed as JSON.
    pub fn call_ok(&mut self, name: &str, arguments: Value) -> Value {
        let result = self.call_tool(name, arguments.clone());
        assert_ne!(
            result["isError"],
            json!(true),
            "{name} {arguments} failed: {result}"
        );
        serde_json::from_str(first_text(&result)).expect("result text is JSON")
    }

    /// Names of the listed tools.
    pub fn tool_names(&mut self) -> Vec<String> {
        let answer = self.request("tools/list", json!({}));
        answer["result"]["tools"]
            .as_array()
            .expect("tools array")
            .iter()
            .map(|t| t["name"].as_str().expect("name").to_owned())
            .collect()
    }

    /// SIGKILL the process (no chance to finish anything) and reap it.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Close stdin and wait for the process; returns its exit code.
    pub fn close(mut self) -> Option<i32> {
        drop(self.stdin.take());
        self.child.wait().expect("wait").code()
    }
}

impl Drop for StdioClient {
    fn drop(&mut self) {
        drop(self.stdin.take());
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

/// The first text block of a tool result.
pub fn first_text(result: &Value) -> &str {
    result["content"][0]["text"].as_str().expect("a text block")
}

/// `tasks` todo subtasks (a multiple of 24) under backlog epics, made through `setup`'s
/// `create_task` / `create_subtask` (the root-rate cap allows 30 roots, so race boards nest
/// their tasks); returns the subtasks' ids.
pub fn seed_subtasks(setup: &mut StdioClient, tasks: usize) -> Vec<String> {
    let mut ids = Vec::with_capacity(tasks);
    for i in 0..tasks / 24 {
        let parent = setup.call_ok(
            "create_task",
            json!({"title": format!("epic {i}"), "status": "backlog"}),
        );
        let parent = parent["task"]["id"].as_str().expect("an id").to_owned();
        for j in 0..24 {
            let t = setup.call_ok(
                "create_subtask",
                json!({"parentTaskId": parent, "title": format!("task {i}.{j}")}),
            );
            ids.push(t["task"]["id"].as_str().expect("an id").to_owned());
        }
    }
    assert_eq!(ids.len(), tasks, "a multiple of 24 tasks");
    ids
}
