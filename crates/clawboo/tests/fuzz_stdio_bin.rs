//! Fuzzing the real `clawboo-mcp-tasks` binary over its stdin and stdout: a hostile byte
//! stream (arbitrary and non-UTF-8 bytes, truncated JSON, batches, odd and huge ids,
//! requests before `initialize`, notifications) then a valid `initialize`, `ping` and
//! `tools/list`. The process must write only well-formed JSON-RPC lines, still answer the
//! final requests, and exit 0 at EOF. (The exact answer owed to each line is checked in
//! process by `crates/clawboo-mcp/tests/fuzz_stdio.rs`.)
//!
//! `PROPTEST_CASES=500 cargo test -p clawboo --test fuzz_stdio_bin` for a long run.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::channel;
use std::time::Duration;

use proptest::prelude::*;
use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_clawboo-mcp-tasks");

/// How long the test waits for one output line before failing (a hang guard).
const LINE_TIMEOUT: Duration = Duration::from_secs(60);

/// `default_cases`, unless `PROPTEST_CASES` asks for another number.
fn config(default_cases: u32) -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(default_cases);
    ProptestConfig::with_cases(cases)
}

fn id() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        any::<String>().prop_map(Value::from),
        Just(json!(1e300)),
        Just(Value::Null),
        Just(json!([1, 2])),
        Just(json!({"id": 1})),
        (1_000usize..50_000).prop_map(|n| Value::from("9".repeat(n))),
    ]
}

fn message() -> impl Strategy<Value = Value> {
    let method = prop_oneof![
        Just("ping"),
        Just("tools/list"),
        Just("tools/call"),
        Just("initialize"),
        Just("notifications/initialized"),
        Just("resources/list"),
        Just("x/y"),
    ];
    let params = prop_oneof![
        Just(Value::Null),
        Just(json!({})),
        Just(json!(5)),
        Just(json!({"name": "list_tasks", "arguments": {}})),
        Just(json!({"name": "create_task", "arguments": {"title": 5}})),
        Just(
            json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "f", "version": "0"}})
        ),
        Just(json!({"protocolVersion": 7})),
    ];
    (method, params, proptest::option::of(id()), any::<bool>()).prop_map(
        |(method, params, id, batch)| {
            let mut m = json!({"jsonrpc": "2.0", "method": method, "params": params});
            if let Some(id) = id {
                m["id"] = id;
            }
            if batch { json!([m, m]) } else { m }
        },
    )
}

/// One hostile line (no newline inside: newlines frame lines).
fn line() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..300),
        message().prop_map(|m| m.to_string().into_bytes()),
        (message(), any::<prop::sample::Index>()).prop_map(|(m, cut)| {
            let text = m.to_string().into_bytes();
            text[..cut.index(text.len())].to_vec()
        }),
        Just(b"\xff\xfe{\"jsonrpc\":\"2.0\"}".to_vec()),
        Just(format!("{}{}", "[".repeat(200), "]".repeat(200)).into_bytes()),
    ]
    .prop_map(|mut bytes| {
        bytes.retain(|&b| b != b'\n');
        bytes
    })
}

/// The server process; killed and reaped if a check fails before it exits.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        if matches!(self.0.try_wait(), Ok(None)) {
            let _ = self.0.kill();
        }
        let _ = self.0.wait();
    }
}

/// Pipe `lines` and then a valid session into the binary; check what comes out.
fn run(lines: &[Vec<u8>]) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut server = Server(
        Command::new(BIN)
            .arg("--db")
            .arg(dir.path().join("clawboo.db"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn the server binary"),
    );
    let mut stdin = server.0.stdin.take().expect("stdin");
    let stdout = server.0.stdout.take().expect("stdout");
    let (tx, rx) = channel();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut stream = Vec::new();
    for line in lines {
        stream.extend_from_slice(line);
        stream.push(b'\n');
    }
    for m in [
        json!({"jsonrpc": "2.0", "id": "final-init", "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "fuzz", "version": "0"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": "final-ping", "method": "ping"}),
        json!({"jsonrpc": "2.0", "id": "final-list", "method": "tools/list", "params": {}}),
    ] {
        stream.extend_from_slice(m.to_string().as_bytes());
        stream.push(b'\n');
    }
    // Written from a thread, so a large stream cannot deadlock against a full stdout pipe.
    let writer = std::thread::spawn(move || {
        let written = stdin.write_all(&stream).and_then(|()| stdin.flush());
        (stdin, written)
    });
    let mut pinged = false;
    let mut listed = false;
    while !(pinged && listed) {
        let line = rx
            .recv_timeout(LINE_TIMEOUT)
            .map_err(|e| TestCaseError::fail(format!("no final answers: {e}")))?;
        let message: Value = serde_json::from_str(&line)
            .map_err(|e| TestCaseError::fail(format!("non-JSON output {line:?}: {e}")))?;
        prop_assert_eq!(&message["jsonrpc"], &json!("2.0"), "{}", line);
        let id = &message["id"];
        prop_assert!(
            message.get("method").is_some() || id.is_string() || id.is_number() || id.is_null(),
            "malformed id in {}",
            line
        );
        prop_assert!(
            message.get("method").is_some()
                || (message.get("result").is_some() != message.get("error").is_some()),
            "not a response: {}",
            line
        );
        if *id == json!("final-ping") {
            prop_assert!(message.get("result").is_some(), "{}", line);
            pinged = true;
        }
        if *id == json!("final-list") {
            prop_assert!(message["result"]["tools"].is_array(), "{}", line);
            listed = true;
        }
    }
    let (stdin, written) = writer.join().expect("the writer thread");
    prop_assert!(written.is_ok(), "the server stopped reading: {:?}", written);
    drop(stdin);
    let status = server.0.wait().expect("wait for the server");
    prop_assert_eq!(status.code(), Some(0));
    reader.join().expect("the reader thread");
    Ok(())
}

proptest! {
    #![proptest_config(config(32))]

    #[test]
    fn hostile_stream_then_a_session_is_answered_and_exit_is_clean(
        lines in proptest::collection::vec(line(), 0..40),
    ) {
        run(&lines)?;
    }
}
