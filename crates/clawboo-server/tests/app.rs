//! The application in-process (`app(state)` + `oneshot`, as `serve` answers), with the
//! socket peer set explicitly: non-loopback peers, the rate limit, and the REST routes'
//! shapes and statuses.

#![allow(clippy::unwrap_used)]

use std::net::SocketAddr;
use std::num::NonZeroU32;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::{Request, StatusCode};
use clawboo_mcp::attach::{McpServerName, SignedScope, StdioLauncher, mcp_http_url};
use clawboo_mcp::binding::Binding;
use clawboo_mcp::signing::ScopeSigner;
use clawboo_memory::Memory;
use clawboo_server::mounts::default_mounts;
use clawboo_server::rate_limit::RateLimitConfig;
use clawboo_server::{AppState, ServerOptions, app};
use clawboo_store::{DbLocation, Store, StoreConfig};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tower::ServiceExt;

struct Fixture {
    state: AppState,
    _dir: tempfile::TempDir,
}

fn fixture(configure: impl FnOnce(&mut ServerOptions)) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("c.db");
    let config = StoreConfig::default().with_extension(clawboo_memory::EXTENSION);
    let store = Arc::new(Store::open_with(&db, config).unwrap());
    let signer = ScopeSigner::from_store(&store).unwrap();
    let mut options = ServerOptions::new(
        "127.0.0.1:18790".parse().unwrap(),
        db,
        StdioLauncher::Clawboo("/usr/bin/clawboo".into()),
    );
    configure(&mut options);
    let memory = Arc::new(Memory::new(store.clone(), None));
    let waits = clawboo_mcp::waits::WaitLimit::default();
    let mounts = default_mounts(&store, &memory, &signer, options.mcp, &waits);
    Fixture {
        state: AppState::new(store, memory, signer, options, mounts),
        _dir: dir,
    }
}

async fn send(
    f: &Fixture,
    peer: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<Value>,
) -> (StatusCode, Value) {
    let mut req = Request::builder().method(method).uri(path);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let mut req = match body {
        Some(b) => req
            .header("content-type", "application/json")
            .body(Body::from(b.to_string()))
            .unwrap(),
        None => req.body(Body::empty()).unwrap(),
    };
    let peer: SocketAddr = peer.parse().unwrap();
    req.extensions_mut().insert(ConnectInfo(peer));
    let resp = app(f.state.clone()).oneshot(req).await.unwrap();
    let status = resp.status();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    let value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    (status, value)
}

const LOOPBACK: &str = "127.0.0.1:50000";
const REMOTE: &str = "203.0.113.7:50000";

fn gated(o: &mut ServerOptions) {
    o.access_token = Some("tok".into());
}

/// The URL this install's `clawboo attach` would print for `server`, unbound.
fn signed_unbound_url(f: &Fixture, server: McpServerName) -> String {
    let signer = ScopeSigner::from_store(&f.state.store()).unwrap();
    let signed = SignedScope::new(server, Binding::default(), &signer);
    mcp_http_url("http://127.0.0.1:18790", &signed)
}

fn initialize() -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"}}})
}

/// Status of an MCP initialize POST to `/api/mcp/tasks` (the SSE body is not read).
async fn initialize_status(f: &Fixture, peer: &str, headers: &[(&str, &str)]) -> StatusCode {
    initialize_status_at(f, "/api/mcp/tasks", peer, headers).await
}

/// Status of an MCP initialize POST to `path`.
async fn initialize_status_at(
    f: &Fixture,
    path: &str,
    peer: &str,
    headers: &[(&str, &str)],
) -> StatusCode {
    let mut req = Request::post(path)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream");
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let mut req = req.body(Body::from(initialize().to_string())).unwrap();
    req.extensions_mut()
        .insert(ConnectInfo::<SocketAddr>(peer.parse().unwrap()));
    app(f.state.clone()).oneshot(req).await.unwrap().status()
}

#[tokio::test]
async fn no_peer_forges_its_way_past_the_gate_and_loopback_is_no_key() {
    let f = fixture(gated);
    for forged in [
        ("x-forwarded-for", "127.0.0.1"),
        ("x-real-ip", "127.0.0.1"),
        ("forwarded", "for=127.0.0.1"),
        ("host", "127.0.0.1:18790"),
    ] {
        let status = initialize_status(&f, REMOTE, &[forged]).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{forged:?}");
    }
    let (status, body) = send(&f, REMOTE, "GET", "/api/mcp/tasks", &[], None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .starts_with("Clawboo access token required")
    );
    // A loopback socket (IPv4, IPv6, mapped) is refused the same: it is no key.
    for peer in [LOOPBACK, "[::1]:5", "[::ffff:127.0.0.1]:5"] {
        assert_eq!(
            initialize_status(&f, peer, &[]).await,
            StatusCode::UNAUTHORIZED,
            "{peer}"
        );
    }
    // A signed URL opens the MCP endpoint, from anywhere; the token opens everything.
    let signed = signed_unbound_url(&f, McpServerName::Tasks);
    let path = signed.strip_prefix("http://127.0.0.1:18790").unwrap();
    for peer in [LOOPBACK, REMOTE] {
        let status = initialize_status_at(&f, path, peer, &[]).await;
        assert_eq!(status, StatusCode::OK, "{peer}");
    }
    let status = initialize_status(&f, REMOTE, &[("authorization", "Bearer tok")]).await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = send(&f, LOOPBACK, "GET", "/api/board", &[], None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
}

/// Options allowing a peer one request a second after a burst of `burst`, loopback exempt.
fn rate_limited(burst: u32) -> impl FnOnce(&mut ServerOptions) {
    move |o| {
        o.rate_limit = RateLimitConfig {
            per_second: NonZeroU32::new(1).unwrap(),
            burst: NonZeroU32::new(burst).unwrap(),
            exempt_loopback: true,
        };
    }
}

/// MCP POSTs skip the router (`App::answer`): the same rate limit still applies to them,
/// sharing the peer's bucket with its REST requests.
#[tokio::test]
async fn mcp_posts_share_the_peers_rate_limit() {
    let f = fixture(rate_limited(3));
    let (status, _) = send(&f, REMOTE, "GET", "/api/teams", &[], None).await;
    assert_eq!(status, StatusCode::OK);
    let mut statuses = Vec::new();
    for _ in 0..3 {
        statuses.push(initialize_status(&f, REMOTE, &[]).await);
    }
    assert_eq!(
        statuses,
        [
            StatusCode::OK,
            StatusCode::OK,
            StatusCode::TOO_MANY_REQUESTS
        ]
    );
    let (status, body) = send(
        &f,
        REMOTE,
        "POST",
        "/api/mcp/tasks",
        &[],
        Some(initialize()),
    )
    .await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    assert!(
        body["error"].as_str().unwrap().contains("rate limit"),
        "{body}"
    );
    for _ in 0..5 {
        assert_eq!(initialize_status(&f, LOOPBACK, &[]).await, StatusCode::OK);
    }
}

#[tokio::test]
async fn remote_peers_are_rate_limited_with_a_json_429() {
    let f = fixture(rate_limited(5));
    let mut statuses = Vec::new();
    for _ in 0..8 {
        statuses.push(send(&f, REMOTE, "GET", "/api/teams", &[], None).await);
    }
    let ok = statuses
        .iter()
        .filter(|(s, _)| *s == StatusCode::OK)
        .count();
    assert_eq!(ok, 5);
    let (status, body) = &statuses[7];
    assert_eq!(*status, StatusCode::TOO_MANY_REQUESTS);
    assert!(body["error"].as_str().unwrap().contains("rate limit"));
    // Another peer has its own bucket; loopback is exempt.
    let (status, _) = send(&f, "198.51.100.1:1", "GET", "/api/teams", &[], None).await;
    assert_eq!(status, StatusCode::OK);
    for _ in 0..8 {
        let (status, _) = send(&f, LOOPBACK, "GET", "/api/teams", &[], None).await;
        assert_eq!(status, StatusCode::OK);
    }
}

#[tokio::test]
async fn oversized_bodies_are_refused() {
    let f = fixture(|o| o.mcp.max_body_bytes = 1024);
    let big = json!({"title": "x".repeat(4096)});
    let (status, body) = send(&f, LOOPBACK, "POST", "/api/board", &[], Some(big)).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    assert!(body["error"].is_string());
    let big_rpc = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"pad": "x".repeat(4096)}});
    let (status, body) = send(&f, LOOPBACK, "POST", "/api/mcp/tasks", &[], Some(big_rpc)).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    assert!(body["error"]["message"].is_string());
}

#[tokio::test]
async fn attach_config_shapes_and_refusals() {
    let f = fixture(|_| {});
    let (status, v) = send(&f, LOOPBACK, "GET", "/api/mcp/config", &[], None).await;
    assert_eq!(status, StatusCode::OK);
    // Unbound URLs are signed too.
    let tasks = signed_unbound_url(&f, McpServerName::Tasks);
    assert!(tasks.starts_with("http://127.0.0.1:18790/api/mcp/tasks?scopeSig="));
    assert_eq!(
        v,
        json!({"ok": true, "config": {
            "id": "clawboo-tasks", "transport": "http",
            "snippet": format!("claude mcp add --transport http clawboo-tasks '{tasks}'"),
            "structured": {"clawboo-tasks": {"type": "http", "url": tasks}}}})
    );
    // The base URL is the server's own, never the request's Host.
    let (_, v) = send(
        &f,
        LOOPBACK,
        "GET",
        "/api/mcp/config?server=memory",
        &[("host", "localhost:9")],
        None,
    )
    .await;
    assert_eq!(
        v["config"]["structured"]["clawboo-memory"]["url"],
        signed_unbound_url(&f, McpServerName::Memory)
    );
    let (_, v) = send(
        &f,
        LOOPBACK,
        "GET",
        "/api/mcp/config?server=teamchat&runtime=codex&transport=stdio&scopeTeamId=t&scopeAgentId=a&delegate=1",
        &[],
        None,
    )
    .await;
    let snippet = v["config"]["snippet"].as_str().unwrap();
    assert!(
        snippet.starts_with(
            "# ~/.codex/config.toml\n[mcp_servers.clawboo-teamchat]\ncommand = \"/usr/bin/clawboo\"\nargs = [\"mcp\", \"teamchat\", \"--team\", \"t\", \"--agent\", \"a\", \"--delegate\"]\nenv = { CLAWBOO_DB_PATH = "
        ),
        "{snippet}"
    );
    for (query, error) in [
        ("server=nope", "unknown server: nope"),
        (
            "runtime=vim",
            "unknown runtime: vim (use claude-code, codex or openclaw)",
        ),
        (
            "transport=sse",
            "unknown transport: sse (use http or stdio)",
        ),
        (
            "server=tasks&scopeTenantId=x",
            "a tenant scope applies only to the memory server",
        ),
        (
            "server=teamchat&scopeTeamId=t",
            "teamchat binds only with both a team (room) and an agent (author); pass both or neither",
        ),
    ] {
        let (status, v) = send(
            &f,
            LOOPBACK,
            "GET",
            &format!("/api/mcp/config?{query}"),
            &[],
            None,
        )
        .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{query}");
        assert_eq!(v, json!({"error": error}), "{query}");
    }
}

#[tokio::test]
async fn stdio_config_over_postgres_names_the_url_without_its_password() {
    let f = fixture(|o| {
        o.db = DbLocation::Postgres("postgres://clawboo:hunter2@db.internal:5432/board".into());
    });
    let (status, v) = send(
        &f,
        LOOPBACK,
        "GET",
        "/api/mcp/config?server=tasks&runtime=claude-code&transport=stdio",
        &[],
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert!(!v.to_string().contains("hunter2"), "{v}");
    assert_eq!(
        v["config"]["structured"]["clawboo-tasks"]["env"]["CLAWBOO_DB_PATH"],
        "postgres://clawboo@db.internal:5432/board"
    );
    assert!(
        v["config"]["note"].as_str().unwrap().contains("PGPASSWORD"),
        "{v}"
    );
}

#[tokio::test]
async fn board_routes_follow_the_store_rules() {
    let f = fixture(|_| {});
    let post = |path: String, body: Value| {
        let f = &f;
        async move { send(f, LOOPBACK, "POST", &path, &[], Some(body)).await }
    };
    let (status, v) = post("/api/board".into(), json!({"title": "A", "teamId": "t"})).await;
    assert_eq!(status, StatusCode::CREATED);
    let a = v["task"]["id"].as_str().unwrap().to_owned();
    assert_eq!(v["task"]["status"], "todo");
    let (_, v) = post("/api/board".into(), json!({"title": "B", "teamId": "t"})).await;
    let b = v["task"]["id"].as_str().unwrap().to_owned();

    let (status, v) = send(
        &f,
        LOOPBACK,
        "GET",
        "/api/board?teamId=t&status=todo",
        &[],
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(v["tasks"].as_array().unwrap().len(), 2);

    let (status, v) = send(&f, LOOPBACK, "GET", "/api/board/missing", &[], None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(v, json!({"error": "not found: missing"}));

    let (status, _) = post(
        format!("/api/board/{a}/deps"),
        json!({"dependsOnTaskId": b}),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let (status, v) = post(
        format!("/api/board/{b}/deps"),
        json!({"dependsOnTaskId": a}),
    )
    .await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_eq!(
        v["error"],
        format!("linking {b} to {a} would create a dependency cycle").as_str()
    );

    // A is not ready (B is open): not claimable.
    let (status, v) = post(format!("/api/board/{a}/claim"), json!({"agentId": "x"})).await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_eq!(v["ok"], false);
    let (status, v) = post(format!("/api/board/{b}/claim"), json!({"agentId": "x"})).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(v["task"]["assigneeAgentId"], "x");
    let (status, v) = post(format!("/api/board/{b}/claim"), json!({"agentId": "y"})).await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_eq!(v["ok"], false);
    let (status, v) = post("/api/board/nope/claim".into(), json!({"agentId": "y"})).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(v["ok"], false);

    let patch = |id: String, body: Value| {
        let f = &f;
        async move {
            send(
                f,
                LOOPBACK,
                "PATCH",
                &format!("/api/board/{id}"),
                &[],
                Some(body),
            )
            .await
        }
    };
    let (status, v) = patch(b.clone(), json!({"status": "backlog"})).await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_eq!(v["error"], "illegal transition from in_progress to backlog");
    let (status, v) = patch(b.clone(), json!({"status": "done", "title": "B!"})).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(v["task"]["status"], "done");
    assert_eq!(v["task"]["title"], "B!");

    let (status, v) = post(format!("/api/board/{a}/comments"), json!({"body": "hi"})).await;
    assert_eq!(status, StatusCode::CREATED);
    assert_eq!(v["comment"]["authorType"], "user");
    let (_, v) = send(&f, LOOPBACK, "GET", &format!("/api/board/{a}"), &[], None).await;
    assert_eq!(v["comments"][0]["body"], "hi");
    assert_eq!(v["task"]["dependsOn"], json!([b]));

    let (status, _) = patch(a.clone(), json!({"dropped": true})).await;
    assert_eq!(status, StatusCode::OK);
    let (_, v) = send(&f, LOOPBACK, "GET", "/api/board?teamId=t", &[], None).await;
    assert_eq!(v["tasks"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn bad_input_gets_json_errors_and_changes_nothing() {
    let f = fixture(|_| {});
    let cases: Vec<(&str, &str, Option<Value>, StatusCode)> = vec![
        (
            "POST",
            "/api/board",
            Some(json!({"title": ""})),
            StatusCode::BAD_REQUEST,
        ),
        (
            "POST",
            "/api/board",
            Some(json!({"title": 5})),
            StatusCode::BAD_REQUEST,
        ),
        (
            "POST",
            "/api/board",
            Some(json!({"title": "x", "sneaky": true})),
            StatusCode::BAD_REQUEST,
        ),
        (
            "POST",
            "/api/board",
            Some(json!({"title": "x", "status": "nope"})),
            StatusCode::BAD_REQUEST,
        ),
        (
            "GET",
            "/api/board?ready=maybe",
            None,
            StatusCode::BAD_REQUEST,
        ),
        (
            "GET",
            "/api/board?status=weird",
            None,
            StatusCode::BAD_REQUEST,
        ),
        (
            "PATCH",
            "/api/board/x",
            Some(json!({})),
            StatusCode::BAD_REQUEST,
        ),
        (
            "POST",
            "/api/teams",
            Some(json!({"name": ""})),
            StatusCode::BAD_REQUEST,
        ),
        ("GET", "/api/nowhere", None, StatusCode::NOT_FOUND),
    ];
    for (method, path, body, expected) in cases {
        let (status, v) = send(&f, LOOPBACK, method, path, &[], body.clone()).await;
        assert_eq!(status, expected, "{method} {path} {body:?}: {v}");
        assert!(v["error"].is_string(), "{method} {path}: {v}");
    }
    // Malformed JSON.
    let mut req = Request::post("/api/board")
        .header("content-type", "application/json")
        .body(Body::from("{nope"))
        .unwrap();
    req.extensions_mut()
        .insert(ConnectInfo::<SocketAddr>(LOOPBACK.parse().unwrap()));
    let resp = app(f.state.clone()).oneshot(req).await.unwrap();
    assert_eq!(resp.status(), StatusCode::BAD_REQUEST);
    let (_, v) = send(
        &f,
        LOOPBACK,
        "GET",
        "/api/board?includeDropped=true",
        &[],
        None,
    )
    .await;
    assert_eq!(v["tasks"], json!([]));
}

#[tokio::test]
async fn teams_and_agents() {
    let f = fixture(|_| {});
    let (status, v) = send(
        &f,
        LOOPBACK,
        "POST",
        "/api/teams",
        &[],
        Some(json!({"id": "t1", "name": "Core"})),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED);
    assert_eq!(v["team"]["name"], "Core");
    let (status, _) = send(
        &f,
        LOOPBACK,
        "POST",
        "/api/agents",
        &[],
        Some(json!({"name": "ada", "teamId": "t1", "runtime": "codex"})),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED);
    let (_, v) = send(&f, LOOPBACK, "GET", "/api/teams", &[], None).await;
    assert_eq!(v["teams"][0]["id"], "t1");
    let (_, v) = send(&f, LOOPBACK, "GET", "/api/agents?teamId=t1", &[], None).await;
    assert_eq!(v["agents"][0]["name"], "ada");
    assert_eq!(v["agents"][0]["runtime"], "codex");
}
