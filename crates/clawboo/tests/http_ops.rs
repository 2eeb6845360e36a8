//! The operators' view (SPEC §17) against the real `clawboo serve` on port 0: the health
//! and readiness probes (ungated, and `/readyz` 503 with its reason while PostgreSQL is
//! down, 200 once it is back).

#![allow(clippy::unwrap_used)]

mod common;
mod http_support;
mod multi_host;
mod own_cluster;

use std::time::{Duration, Instant};

use common::{TestDb, not_a_postgres_run};
use http_support::Server;
use multi_host::rest;
use own_cluster::Cluster;
use reqwest::Method;
use serde_json::{Value, json};

const TOKEN: &str = "ops-test-token-0123456789";

/// `GET path` on `server`: status and JSON body.
fn get(server: &Server, path: &str) -> (u16, Value) {
    rest(&server.url(path), Method::GET, None)
}

#[test]
fn health_and_readiness_answer_without_the_token_and_name_the_engine() {
    let server = Server::start(&[("STUDIO_ACCESS_TOKEN", TOKEN)]);
    // The gate is on: /api/* wants the token, the probes do not.
    assert_eq!(get(&server, "/api/teams").0, 401);
    assert_eq!(get(&server, "/healthz"), (200, json!({"ok": true})));
    let (status, ready) = get(&server, "/readyz");
    assert_eq!(status, 200, "{ready}");
    assert_eq!(ready["ready"], json!(true));
    let engine = if server.db.is_postgres() {
        "postgres"
    } else {
        "sqlite"
    };
    assert_eq!(ready["backend"], json!(engine));
    // The same vector-search path `/api/mcp/status` reports.
    let expected = if server.db.is_postgres() {
        ["pgvector-hnsw", "exact-scan"].as_slice()
    } else {
        ["in-process"].as_slice()
    };
    let path = ready["vectorSearch"].as_str().unwrap();
    assert!(expected.contains(&path), "{ready}");
    assert!(ready.get("error").is_none(), "{ready}");
}

#[test]
fn readiness_is_503_with_the_reason_while_postgres_is_down_and_200_once_back() {
    if not_a_postgres_run() {
        return;
    }
    let Some(cluster) = Cluster::start() else {
        return;
    };
    let db = TestDb::postgres_on(&cluster.url);
    let server = Server::start_on(&db, "127.0.0.1:0", &[]);
    assert_eq!(get(&server, "/readyz").0, 200);

    cluster.run("pause");
    let (status, body) = until(Duration::from_secs(60), || {
        let answer = get(&server, "/readyz");
        (answer.0 == 503).then_some(answer)
    });
    assert_eq!(status, 503);
    assert_eq!(body["ready"], json!(false));
    let reason = body["error"].as_str().unwrap();
    assert!(reason.contains("database"), "{reason}");
    // No driver text reaches the caller.
    assert!(!reason.contains("PostgreSQL:"), "{reason}");
    // The process itself still answers.
    assert_eq!(get(&server, "/healthz").0, 200);

    cluster.run("resume");
    let (status, body) = until(Duration::from_secs(60), || {
        let answer = get(&server, "/readyz");
        (answer.0 == 200).then_some(answer)
    });
    assert_eq!((status, &body["ready"]), (200, &json!(true)));
}

/// Poll `probe` until it gives a value, failing after `within` (a bound that only stops a
/// hang).
fn until<T>(within: Duration, mut probe: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + within;
    loop {
        if let Some(value) = probe() {
            return value;
        }
        assert!(Instant::now() < deadline, "not within {within:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}
