//! Fuzzing the JSON-RPC framing of the stdio front ([`serve_lines`], which every stdio
//! binary runs over its stdin and stdout), in process over an in-memory pipe.
//!
//! Each case sends a stream of lines (arbitrary bytes and non-UTF-8, truncated JSON,
//! batches, scalars, wrong `jsonrpc`, odd and huge ids, requests before `initialize`,
//! notifications, responses, nesting past the parser's depth limit, CRLF endings, blank
//! lines), then EOF. A small model of the contract says what each line must get:
//!
//! - blank lines, notifications and responses: nothing;
//! - a line that is not JSON: one `-32700` error with a null id;
//! - JSON that is not a request, notification or response: one `-32600` error whose id is
//!   the message's id when that is a string or number, else null;
//! - a request before `initialize`: one `-32002` error with its id;
//! - a request after `initialize`: one answer from the server with its id (null when the id
//!   is a number no `i64` holds, which rmcp refuses as an invalid request);
//!
//! and the test checks that exactly those answers arrive, every output line is well-formed
//! JSON-RPC, the session still answers `ping` and `tools/list` afterwards, and the front
//! ends cleanly at EOF.
//!
//! `PROPTEST_CASES=2000 cargo test -p clawboo-mcp --test fuzz_stdio` for a long run.

mod fuzz_support;

use std::collections::HashSet;
use std::sync::Arc;

use clawboo_mcp::server::McpServer;
use clawboo_mcp::tasks::{TasksConfig, TasksServer};
use clawboo_store::Store;
use fuzz_support::{LineSession, assert_well_formed, config};
use proptest::prelude::*;
use serde_json::{Value, json};

/// What one input line must be answered with.
#[derive(Debug, Clone, PartialEq)]
enum Expect {
    /// No answer.
    Nothing,
    /// One error with this id and code, written by the front.
    Error { id: Value, code: i64 },
    /// One answer (result or error) with this id, written by the server.
    Answer { id: Value },
    /// At most one answer with this id: the request reuses the id of a request that may
    /// still be in flight, and rmcp then answers only one of the two.
    Maybe { id: Value },
}

/// One generated line: its bytes, and whether it is a request whose params have the wrong
/// shape for its method.
#[derive(Clone)]
struct Line {
    bytes: Vec<u8>,
    odd_params: bool,
}

impl std::fmt::Debug for Line {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let text = String::from_utf8_lossy(&self.bytes);
        let shown: String = text.chars().take(300).collect();
        write!(f, "{shown:?} ({} bytes)", self.bytes.len())?;
        if self.odd_params {
            f.write_str(" [odd params]")?;
        }
        Ok(())
    }
}

impl Line {
    fn raw(bytes: Vec<u8>) -> Line {
        Line {
            bytes,
            odd_params: false,
        }
    }

    fn json(value: &Value) -> Line {
        Line::raw(value.to_string().into_bytes())
    }
}

const INITIALIZE_PARAMS: &str = r#"{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"fuzz","version":"0"}}"#;

fn initialize_params() -> Value {
    serde_json::from_str(INITIALIZE_PARAMS).expect("valid JSON")
}

/// The id rmcp answers with for a request id: integers an `i64` holds (also written as
/// integral floats below 2^53) and strings; anything else it refuses (null id).
fn rmcp_id(id: &Value) -> Value {
    if id.is_string() {
        return id.clone();
    }
    if let Some(n) = id.as_i64() {
        return json!(n);
    }
    match id.as_f64() {
        Some(f) if !id.is_u64() && f.fract() == 0.0 && f.abs() < 9_007_199_254_740_992.0 => {
            json!(f as i64)
        }
        _ => Value::Null,
    }
}

/// Ids a client might send: ordinary, odd (negative, zero, fractional, float-written,
/// beyond `i64`, beyond `u64`, huge strings, Unicode) and invalid (null, bool, array,
/// object).
fn request_id() -> impl Strategy<Value = Value> {
    prop_oneof![
        4 => any::<i64>().prop_map(Value::from),
        2 => any::<u64>().prop_map(Value::from),
        2 => any::<String>().prop_map(Value::from),
        1 => any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(Value::from),
        1 => (-1000i64..1000).prop_map(|n| json!(n as f64)),
        1 => Just(json!(1e300)),
        1 => Just(Value::from(String::new())),
        1 => (10_000usize..100_000).prop_map(|n| Value::from("i".repeat(n))),
    ]
}

fn invalid_id() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        Just(json!([1])),
        Just(json!({"id": 1})),
    ]
}

/// A request the server accepts, by method and params.
fn request_body() -> impl Strategy<Value = (Value, bool)> {
    prop_oneof![
        Just((json!({"method": "ping"}), false)),
        Just((json!({"method": "tools/list", "params": {}}), false)),
        Just((
            json!({"method": "tools/call", "params": {"name": "list_tasks", "arguments": {}}}),
            false
        )),
        Just((
            json!({"method": "tools/call", "params": {"name": "nope", "arguments": {}}}),
            false
        )),
        Just((json!({"method": "resources/list", "params": {}}), false)),
        "[a-z/]{1,20}".prop_map(|m| (json!({ "method": m }), false)),
        // Known methods with params of the wrong shape.
        Just((json!({"method": "tools/call", "params": 5}), true)),
        Just((json!({"method": "tools/call", "params": {"name": 7}}), true)),
        Just((
            json!({"method": "tools/call", "params": {"name": "list_tasks", "arguments": [1]}}),
            true
        )),
        Just((json!({"method": "ping", "params": "x"}), true)),
    ]
}

fn with_fields(mut base: Value, fields: &[(&str, Value)]) -> Value {
    if let Some(map) = base.as_object_mut() {
        for (k, v) in fields {
            map.insert((*k).to_owned(), v.clone());
        }
    }
    base
}

/// `depth` nested arrays, as text (past serde_json's limit of 128 the line is not JSON).
fn deeply_nested(depth: usize) -> Vec<u8> {
    format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"ping","params":{{"x":{}{}}}}}"#,
        "[".repeat(depth),
        "]".repeat(depth)
    )
    .into_bytes()
}

/// One line of a hostile stream.
fn line() -> impl Strategy<Value = Line> {
    prop_oneof![
        // Raw bytes, non-UTF-8 included (newlines removed: they frame lines).
        3 => proptest::collection::vec(any::<u8>(), 0..200).prop_map(|mut b| {
            b.retain(|&c| c != b'\n');
            Line::raw(b)
        }),
        // Blank lines and CR-only lines.
        1 => "[ \t\r]{0,4}".prop_map(|s| Line::raw(s.into_bytes())),
        // Truncated requests.
        2 => (request_id(), request_body(), any::<prop::sample::Index>()).prop_map(|(id, (body, _), cut)| {
            let full = with_fields(body, &[("jsonrpc", json!("2.0")), ("id", id)]).to_string().into_bytes();
            let at = cut.index(full.len());
            Line::raw(full[..at].to_vec())
        }),
        // Requests, with ordinary and odd ids.
        6 => (request_id(), request_body(), any::<bool>()).prop_map(|(id, (body, odd_params), crlf)| {
            let mut line = Line::json(&with_fields(body, &[("jsonrpc", json!("2.0")), ("id", id)]));
            line.odd_params = odd_params;
            if crlf {
                line.bytes.push(b'\r');
            }
            line
        }),
        // initialize, valid or not.
        2 => (request_id(), any::<bool>()).prop_map(|(id, valid)| {
            let params = if valid { initialize_params() } else { json!({"protocolVersion": 5}) };
            let message = json!({"jsonrpc": "2.0", "id": id, "method": "initialize", "params": params});
            Line {
                odd_params: !valid,
                ..Line::json(&message)
            }
        }),
        // Notifications and responses.
        2 => prop_oneof![
            Just(json!({"jsonrpc": "2.0", "method": "notifications/initialized"})),
            Just(json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 424242}})),
            Just(json!({"jsonrpc": "2.0", "method": "notifications/whatever", "params": {"x": [1, 2]}})),
            Just(json!({"jsonrpc": "2.0", "method": "$/lsp"})),
            request_id().prop_map(|id| json!({"jsonrpc": "2.0", "id": id, "result": {}})),
            request_id().prop_map(|id| json!({"jsonrpc": "2.0", "id": id, "error": {"code": 1, "message": "m"}})),
        ].prop_map(|m| Line::json(&m)),
        // Not JSON-RPC: batches, scalars, wrong version, bad method or id, no method.
        3 => prop_oneof![
            proptest::collection::vec((request_id(), request_body()), 0..4).prop_map(|items| {
                Value::Array(items.into_iter().map(|(id, (body, _))| {
                    with_fields(body, &[("jsonrpc", json!("2.0")), ("id", id)])
                }).collect())
            }),
            Just(json!(5)),
            Just(json!("ping")),
            Just(Value::Null),
            Just(json!({})),
            request_id().prop_map(|id| json!({"id": id, "method": "ping"})),
            request_id().prop_map(|id| json!({"jsonrpc": "1.0", "id": id, "method": "ping"})),
            request_id().prop_map(|id| json!({"jsonrpc": 2.0, "id": id, "method": "ping"})),
            request_id().prop_map(|id| json!({"jsonrpc": "2.0", "id": id, "method": 5})),
            invalid_id().prop_map(|id| json!({"jsonrpc": "2.0", "id": id, "method": "ping"})),
            invalid_id().prop_map(|id| json!({"jsonrpc": "2.0", "id": id, "result": {}})),
            request_id().prop_map(|id| json!({"jsonrpc": "2.0", "id": id})),
        ].prop_map(|m| Line::json(&m)),
        // Nesting around the parser's depth limit.
        1 => (100usize..200).prop_map(|d| Line::raw(deeply_nested(d))),
    ]
}

/// The id an error about `message` carries: its id when that is a string or number.
fn echoed_id(message: &Value) -> Value {
    match message.get("id") {
        Some(id) if id.is_string() || id.is_number() => id.clone(),
        _ => Value::Null,
    }
}

/// The contract's view of a stream so far.
#[derive(Default)]
struct Model {
    /// A valid `initialize` has started the session.
    started: bool,
    /// Ids of requests the server has been handed (as rmcp reads them).
    forwarded: HashSet<String>,
}

impl Model {
    /// What the front owes `line`.
    fn expect(&mut self, line: &Line) -> Expect {
        if line.bytes.iter().all(u8::is_ascii_whitespace) {
            return Expect::Nothing;
        }
        let Ok(message) = serde_json::from_slice::<Value>(&line.bytes) else {
            return Expect::Error {
                id: Value::Null,
                code: -32700,
            };
        };
        let echoed = echoed_id(&message);
        let invalid = Expect::Error {
            id: echoed.clone(),
            code: -32600,
        };
        let Some(object) = message.as_object() else {
            return invalid;
        };
        if object.get("jsonrpc") != Some(&json!("2.0")) {
            return invalid;
        }
        let has_result = object.contains_key("result") || object.contains_key("error");
        match (object.get("method"), object.get("id")) {
            (Some(Value::String(method)), Some(id)) if id.is_string() || id.is_number() => {
                if !self.started && method != "initialize" {
                    return Expect::Error {
                        id: id.clone(),
                        code: -32002,
                    };
                }
                let id = rmcp_id(id);
                if id.is_null() {
                    return invalid;
                }
                if line.odd_params && !self.started {
                    // An initialize that is not one: refused by the front, no session.
                    return Expect::Error {
                        id: echoed,
                        code: -32602,
                    };
                }
                // After initialize, wrongly shaped params are refused by the front or taken
                // by the server as a custom request; either way the answer carries the id.
                if !self.started {
                    self.started = true;
                    return Expect::Answer { id };
                }
                if self.forwarded.insert(id.to_string()) {
                    Expect::Answer { id }
                } else {
                    Expect::Maybe { id }
                }
            }
            (Some(Value::String(_)), None) => Expect::Nothing,
            (None, Some(_)) if has_result => Expect::Nothing,
            _ => invalid,
        }
    }
}

/// Whether two ids are the same: numbers by value (`5.0` is `5`), and fractional ones
/// up to the last digit, which serde_json's float parsing does not round-trip exactly.
fn same_id(a: &Value, b: &Value) -> bool {
    match (a.as_f64(), b.as_f64()) {
        (Some(x), Some(y)) if a.is_f64() || b.is_f64() => {
            x == y || (x - y).abs() <= x.abs().max(y.abs()) * 1e-14
        }
        _ => a == b,
    }
}

/// Match the answers that arrived against what was owed; `Err` names what is missing or
/// extra.
fn reconcile(mut owed: Vec<Expect>, answers: &[Value]) -> Result<(), String> {
    let mut left: Vec<&Value> = answers.iter().collect();
    let mut take = |pred: &dyn Fn(&Value) -> bool| -> bool {
        match left.iter().position(|a| pred(a)) {
            Some(i) => {
                left.remove(i);
                true
            }
            None => false,
        }
    };
    // Exact front errors first, then server answers by id, then the optional ones.
    owed.sort_by_key(|e| match e {
        Expect::Error { .. } => 0,
        Expect::Maybe { .. } => 2,
        _ => 1,
    });
    for e in &owed {
        let found = match e {
            Expect::Nothing => true,
            Expect::Error { id, code } => {
                take(&|a| same_id(&a["id"], id) && a["error"]["code"] == json!(code))
            }
            Expect::Answer { id } => take(&|a| same_id(&a["id"], id)),
            Expect::Maybe { id } => {
                take(&|a| same_id(&a["id"], id));
                true
            }
        };
        if !found {
            return Err(format!("no answer for {e:?}"));
        }
    }
    if !left.is_empty() {
        return Err(format!("answers nobody asked for: {left:?}"));
    }
    Ok(())
}

fn tasks_server(dir: &tempfile::TempDir) -> McpServer<TasksServer> {
    let store = Arc::new(Store::open(&dir.path().join("clawboo.db")).expect("open the store"));
    McpServer::new(TasksServer::new(store, TasksConfig::default()))
}

/// Send `lines`, then `ping` and `tools/list`, then EOF; check that exactly the answers
/// the model owes arrived, and that the final requests were served.
fn run_stream(lines: &[Line]) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut session = LineSession::start(tasks_server(&dir));
    let finals = [
        json!({"jsonrpc": "2.0", "id": "final-ping", "method": "ping"}),
        json!({"jsonrpc": "2.0", "id": "final-list", "method": "tools/list", "params": {}}),
    ]
    .map(|m| Line::json(&m));
    let mut model = Model::default();
    let mut owed = Vec::new();
    for line in lines.iter().chain(&finals) {
        owed.push(model.expect(line));
        session.send_line(&line.bytes);
    }
    // At EOF the front and rmcp flush every answer still in flight.
    let output = session.finish();
    output.iter().for_each(assert_well_formed);
    let answers: Vec<Value> = output
        .into_iter()
        .filter(|m| m.get("method").is_none())
        .collect();
    reconcile(owed, &answers).map_err(TestCaseError::fail)?;
    let final_answer = |id: &str| answers.iter().find(|a| a["id"] == json!(id)).cloned();
    let ping = final_answer("final-ping").unwrap_or_default();
    let list = final_answer("final-list").unwrap_or_default();
    if model.started {
        prop_assert_eq!(&ping["result"], &json!({}), "{}", ping);
        prop_assert!(list["result"]["tools"].is_array(), "{}", list);
    } else {
        prop_assert_eq!(&ping["error"]["code"], &json!(-32002), "{}", ping);
        prop_assert_eq!(&list["error"]["code"], &json!(-32002), "{}", list);
    }
    Ok(())
}

proptest! {
    #![proptest_config(config(64))]

    /// Hostile lines before and after a valid initialize.
    #[test]
    fn hostile_stream_around_initialize(
        before in proptest::collection::vec(line(), 0..12),
        after in proptest::collection::vec(line(), 0..24),
    ) {
        let initialize = json!({"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": initialize_params()});
        let mut lines = before;
        lines.push(Line::json(&initialize));
        lines.push(Line::json(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"})));
        lines.extend(after);
        run_stream(&lines)?;
    }

    /// Hostile lines only: the session may never start, or start from a fuzzed initialize.
    #[test]
    fn hostile_stream_alone(lines in proptest::collection::vec(line(), 0..24)) {
        run_stream(&lines)?;
    }
}

#[test]
fn an_over_long_line_is_a_parse_error_and_the_session_goes_on() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut session = LineSession::initialized(tasks_server(&dir));
    let mut huge = br#"{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":""#.to_vec();
    huge.resize(clawboo_mcp::stdio::MAX_LINE_BYTES + 10, b'a');
    session.send_line(&huge);
    let answer = session.next_message().expect("an answer");
    assert_eq!(answer["id"], Value::Null, "{answer}");
    assert_eq!(answer["error"]["code"], json!(-32700), "{answer}");
    assert!(session.request("ping", json!({})).get("result").is_some());
    assert!(session.finish().is_empty());
}
