//! Shared by the `fuzz_*` tests: the case count, arbitrary JSON, and an in-process session
//! that speaks newline-delimited JSON-RPC to the real stdio front ([`serve_lines`]) over
//! an in-memory pipe, exactly as a stdio binary does over its stdin and stdout.
#![allow(dead_code)]

use std::io;
use std::time::Duration;

use clawboo_mcp::stdio::serve_lines;
use proptest::prelude::*;
use rmcp::ServerHandler;
use serde_json::{Value, json};
use tokio::io::{
    AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream, ReadHalf, WriteHalf, split,
};
use tokio::runtime::Runtime;
use tokio::task::JoinHandle;

/// How long a session waits for one line before the test fails (a guard against a hang,
/// not a speed assertion).
pub const LINE_TIMEOUT: Duration = Duration::from_secs(60);

/// `default_cases`, unless `PROPTEST_CASES` asks for another number (long runs by hand).
/// Rejected inputs (`prop_assume!`) may number as many as the cases: proptest's fixed
/// limit (1,024) ended a by-hand run of 50,000 signing cases at its 4,253rd.
pub fn config(default_cases: u32) -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(default_cases);
    ProptestConfig {
        max_global_rejects: cases.max(ProptestConfig::default().max_global_rejects),
        ..ProptestConfig::with_cases(cases)
    }
}

/// A string of `len` characters (huge inputs without a slow generator).
fn long_string(len: usize) -> String {
    "\u{e9}x".repeat(len / 2)
}

/// `value` wrapped in `depth` arrays or objects.
fn nested(depth: usize, in_objects: bool) -> Value {
    (0..depth).fold(json!(1), |inner, _| {
        if in_objects {
            json!({ "k": inner })
        } else {
            json!([inner])
        }
    })
}

/// Arbitrary JSON: every type, wrong-typed numbers (negative, fractional, beyond `u64`),
/// arbitrary Unicode, huge strings, and nesting up to 100 levels deep.
pub fn arbitrary_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        4 => Just(Value::Null),
        4 => any::<bool>().prop_map(Value::from),
        4 => any::<i64>().prop_map(Value::from),
        2 => any::<u64>().prop_map(Value::from),
        2 => any::<f64>().prop_map(Value::from),
        6 => any::<String>().prop_map(Value::from),
        1 => (1_000usize..130_000).prop_map(|n| Value::from(long_string(n))),
        1 => (20usize..100, any::<bool>()).prop_map(|(d, o)| nested(d, o)),
    ];
    leaf.prop_recursive(4, 32, 5, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            proptest::collection::btree_map(any::<String>(), inner, 0..5)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// One server behind the real stdio front, driven line by line from the test.
pub struct LineSession {
    runtime: Runtime,
    to_server: WriteHalf<DuplexStream>,
    from_server: BufReader<ReadHalf<DuplexStream>>,
    served: JoinHandle<io::Result<()>>,
    next_id: u64,
}

impl LineSession {
    /// Serve `handler` on a single-threaded runtime (as the stdio binaries do); nothing is
    /// sent yet.
    pub fn start<H: ServerHandler>(handler: H) -> LineSession {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a tokio runtime");
        let (client, server) = tokio::io::duplex(1 << 20);
        let (server_read, server_write) = split(server);
        let served = runtime.spawn(serve_lines(handler, server_read, server_write));
        let (client_read, client_write) = split(client);
        LineSession {
            runtime,
            to_server: client_write,
            from_server: BufReader::new(client_read),
            served,
            next_id: 1_000_000,
        }
    }

    /// Start `handler` and complete the `initialize` handshake.
    pub fn initialized<H: ServerHandler>(handler: H) -> LineSession {
        let mut session = LineSession::start(handler);
        let answer = session.request(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "fuzz", "version": "0"}}),
        );
        assert!(
            answer.get("result").is_some(),
            "initialize failed: {answer}"
        );
        session.send_line(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        session
    }

    /// Write `line` and its newline.
    pub fn send_line(&mut self, line: &[u8]) {
        let framed = [line, b"\n"].concat();
        self.runtime
            .block_on(self.to_server.write_all(&framed))
            .expect("the front reads its input while it runs");
    }

    /// The next line the front writes, parsed; `None` at EOF. Fails the test on a line
    /// that is not JSON or when nothing comes within [`LINE_TIMEOUT`].
    pub fn next_message(&mut self) -> Option<Value> {
        let mut line = String::new();
        let from_server = &mut self.from_server;
        let read = self.runtime.block_on(async {
            tokio::time::timeout(LINE_TIMEOUT, from_server.read_line(&mut line)).await
        });
        let n = read
            .unwrap_or_else(|_| panic!("no line from the front within {LINE_TIMEOUT:?}"))
            .expect("reading the front's output");
        if n == 0 {
            return None;
        }
        assert!(line.ends_with('\n'), "unterminated output line {line:?}");
        Some(
            serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("the front wrote non-JSON {line:?}: {e}")),
        )
    }

    /// Send a request with a fresh id and wait for its answer (the whole message),
    /// skipping anything else (notifications).
    pub fn request(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = json!(self.next_id);
        let message = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.send_line(message.to_string().as_bytes());
        loop {
            let answer = self
                .next_message()
                .unwrap_or_else(|| panic!("the front closed its output before answering {method}"));
            assert_well_formed(&answer);
            if answer.get("id") == Some(&id) && answer.get("method").is_none() {
                return answer;
            }
        }
    }

    /// Close the input (EOF) and return every line still written, after the front has
    /// ended; fails the test when the front returns an error or panics.
    pub fn finish(mut self) -> Vec<Value> {
        self.runtime
            .block_on(self.to_server.shutdown())
            .expect("closing the input");
        let mut rest = Vec::new();
        while let Some(message) = self.next_message() {
            rest.push(message);
        }
        let served = &mut self.served;
        let ended = self
            .runtime
            .block_on(async { tokio::time::timeout(LINE_TIMEOUT, served).await })
            .expect("the front ends at EOF");
        ended
            .expect("the front did not panic")
            .expect("the front ends cleanly at EOF");
        rest
    }
}

/// Assert `message` is a well-formed JSON-RPC 2.0 message as a server may write it: a
/// response (`id` a string, number or null, and exactly one of `result` and `error`, an
/// error with an integer code and a string message) or a notification/request of its own.
pub fn assert_well_formed(message: &Value) {
    let object = message
        .as_object()
        .unwrap_or_else(|| panic!("not an object: {message}"));
    assert_eq!(object.get("jsonrpc"), Some(&json!("2.0")), "{message}");
    if let Some(method) = object.get("method") {
        assert!(method.is_string(), "{message}");
        return;
    }
    let id = object
        .get("id")
        .unwrap_or_else(|| panic!("a response without an id: {message}"));
    assert!(
        id.is_string() || id.is_number() || id.is_null(),
        "a response id must be a string, a number or null: {message}"
    );
    match (object.get("result"), object.get("error")) {
        (Some(_), None) => {}
        (None, Some(error)) => {
            assert!(error["code"].is_i64(), "{message}");
            assert!(error["message"].is_string(), "{message}");
        }
        _ => panic!("a response needs exactly one of result and error: {message}"),
    }
}
