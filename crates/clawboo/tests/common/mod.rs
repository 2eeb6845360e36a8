//! Shared helpers for integration tests: spawn a real stdio server binary and speak
//! newline-delimited JSON-RPC to it.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::Duration;

use serde_json::{Value, json};

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
    /// Spawn `bin --db <db> <args…>`.
    pub fn spawn(bin: &str, db: &Path, args: &[&str]) -> StdioClient {
        Self::spawn_with_env(bin, db, args, &[])
    }

    /// [`StdioClient::spawn`] with extra environment variables.
    pub fn spawn_with_env(
        bin: &str,
        db: &Path,
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

/// A fresh database path in a new temporary folder (keep the guard alive).
pub fn temp_db() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("clawboo.db");
    (dir, path)
}
