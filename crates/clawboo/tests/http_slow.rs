//! Slow clients against the real `clawboo serve`: a request whose headers or body never
//! finish gets 408 and its connection closed within the (shortened) deadline, and MCP
//! sessions are capped: a new one closes the oldest idle session, and with none idle
//! `initialize` gets 503 with a JSON-RPC error.

#![allow(clippy::unwrap_used)]

mod common;
mod http_support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use http_support::{Server, Session, client, initialize_body, post};
use serde_json::{Value, json};

/// Deadlines short enough for a test, far below the defaults (10 s, 30 s).
const SHORT: [(&str, &str); 2] = [
    ("CLAWBOO_HEADER_TIMEOUT_MS", "400"),
    ("CLAWBOO_BODY_TIMEOUT_MS", "400"),
];

/// A raw connection to `server`, with a read limit so a server that never answers fails
/// the test instead of hanging it.
fn connect(server: &Server) -> TcpStream {
    let addr = server.base.strip_prefix("http://").unwrap();
    let tcp = TcpStream::connect(addr).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(8))).unwrap();
    tcp
}

/// Everything the server sends until it closes (or resets) the connection, and how long
/// that took. A read timeout (the server holding the connection) fails the test.
fn read_until_closed(tcp: &mut TcpStream) -> (String, Duration) {
    let start = Instant::now();
    let mut out = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        match tcp.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => out.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
            Err(e) => panic!("the server held the connection: {e}"),
        }
    }
    (String::from_utf8_lossy(&out).into_owned(), start.elapsed())
}

fn assert_408(answer: &str) {
    assert!(
        answer.starts_with("HTTP/1.1 408 Request Timeout\r\n"),
        "{answer:?}"
    );
    let body = answer.split_once("\r\n\r\n").unwrap().1;
    let v: Value = serde_json::from_str(body).unwrap();
    assert!(
        v["error"]
            .as_str()
            .unwrap()
            .starts_with("request timed out"),
        "{v}"
    );
}

#[test]
fn half_sent_headers_get_408_and_the_connection_closes() {
    let server = Server::start(&SHORT);
    let mut tcp = connect(&server);
    tcp.write_all(b"POST /api/board HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Ty")
        .unwrap();
    let (answer, took) = read_until_closed(&mut tcp);
    assert_408(&answer);
    assert!(took < Duration::from_secs(5), "took {took:?}");
    // The server goes on serving.
    let mut tcp = connect(&server);
    tcp.write_all(b"GET /api/teams HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        .unwrap();
    let (answer, _) = read_until_closed(&mut tcp);
    assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer:?}");
}

#[test]
fn a_body_that_never_finishes_gets_408_and_changes_nothing() {
    let server = Server::start(&SHORT);
    for path in ["/api/board", "/api/mcp/tasks"] {
        let mut tcp = connect(&server);
        let head = format!(
            "POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: 200\r\n\r\n"
        );
        tcp.write_all(head.as_bytes()).unwrap();
        tcp.write_all(br#"{"title": "never fin"#).unwrap();
        let (answer, took) = read_until_closed(&mut tcp);
        assert_408(&answer);
        assert!(
            answer
                .to_ascii_lowercase()
                .contains("\r\nconnection: close\r\n"),
            "{answer:?}"
        );
        assert!(took < Duration::from_secs(5), "{path} took {took:?}");
    }
    // A body trickled a few bytes at a time is held to the same deadline as a whole.
    let mut tcp = connect(&server);
    tcp.write_all(
        b"POST /api/board HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 400\r\n\r\n",
    )
    .unwrap();
    let mut writer = tcp.try_clone().unwrap();
    let start = Instant::now();
    let trickle = std::thread::spawn(move || {
        // The slow client under test: two bytes every 40 ms would take 8 s for the body.
        for _ in 0..200 {
            if writer.write_all(b"  ").is_err() {
                return;
            }
            std::thread::sleep(Duration::from_millis(40));
        }
    });
    let (answer, took) = read_until_closed(&mut tcp);
    assert!(
        took < Duration::from_secs(5),
        "the trickle held on for {took:?}"
    );
    // The 408 may be lost to a reset when a trickled byte lands as the socket closes.
    if !answer.is_empty() {
        assert_408(&answer);
    }
    drop(tcp);
    trickle.join().unwrap();
    assert!(start.elapsed() < Duration::from_secs(5));
    // No task was made by any of the cut-off requests.
    let mut tcp = connect(&server);
    tcp.write_all(b"GET /api/board HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        .unwrap();
    let (answer, _) = read_until_closed(&mut tcp);
    assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer:?}");
    let body: Value = serde_json::from_str(answer.split_once("\r\n\r\n").unwrap().1).unwrap();
    assert_eq!(body["tasks"].as_array().unwrap().len(), 0, "{body}");
}

/// Whether the session `id` at `url` still answers.
async fn alive(url: &str, id: &str) -> u16 {
    let ping = json!({"jsonrpc": "2.0", "id": 99, "method": "ping"});
    post(&client(), url, Some(id), &ping)
        .await
        .status()
        .as_u16()
}

#[tokio::test]
async fn sessions_are_capped_the_oldest_idle_one_makes_room() {
    let server = Server::start(&[("CLAWBOO_MCP_MAX_SESSIONS", "2")]);
    let url = server.url("/api/mcp/tasks");
    let mut a = Session::open(&url).await;
    let b = Session::open(&url).await;
    // A is used after B, so B is now the oldest idle session.
    a.request("tools/list", json!({})).await;
    let c = Session::open(&url).await;
    assert_eq!(alive(&url, &b.id).await, 404);
    assert_eq!(alive(&url, &a.id).await, 200);
    assert_eq!(alive(&url, &c.id).await, 200);
    // Each server has its own cap.
    Session::open(&server.url("/api/mcp/memory")).await;
    assert_eq!(alive(&url, &a.id).await, 200);
}

#[tokio::test]
async fn with_every_session_busy_initialize_gets_503() {
    let server = Server::start(&[("CLAWBOO_MCP_MAX_SESSIONS", "1")]);
    let url = server.url("/api/mcp/teamchat");
    let busy = Session::open(&url).await;
    // A long poll keeps the only session busy; its answer comes as a stream once it has
    // waited past the JSON window, so the call is in flight once the headers are in.
    let wait = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
        "name": "team_chat_subscribe",
        "arguments": {"teamId": "red", "authorAgentId": "ada", "waitMs": 3000}}});
    let in_flight = post(&busy.http, &url, Some(&busy.id), &wait).await;
    assert_eq!(in_flight.status(), 200);
    let r = post(&client(), &url, None, &initialize_body(1)).await;
    assert_eq!(r.status(), 503);
    assert!(r.headers().get("mcp-session-id").is_none());
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["jsonrpc"], "2.0");
    assert_eq!(body["error"]["code"], -32000);
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.starts_with("Too many MCP sessions") && message.contains("DELETE"),
        "{message}"
    );
    // The busy session was left alone; once its call ends it is idle and makes room.
    let answer = in_flight.text().await.unwrap();
    assert!(answer.contains("\"id\":7"), "{answer}");
    let fresh = Session::open(&url).await;
    assert_eq!(alive(&url, &busy.id).await, 404);
    assert_eq!(alive(&url, &fresh.id).await, 200);
}
