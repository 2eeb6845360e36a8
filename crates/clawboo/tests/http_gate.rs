//! The access gate and the origin guard against the real `clawboo serve`.

#![allow(clippy::unwrap_used)]

mod common;
mod http_support;

use http_support::{Server, Session, attach, clawboo, client, initialize_body, post};
use serde_json::{Value, json};

const TOKEN: &str = "gate-token_1.x~-ok";
const BAD_SCOPE: &str = "invalid scope signature: mint a new URL with clawboo attach";
const INVALID: &str = "Invalid Clawboo access token.";

fn gated() -> Server {
    Server::start(&[("STUDIO_ACCESS_TOKEN", TOKEN)])
}

async fn status_and_error(resp: reqwest::Response) -> (u16, String) {
    let status = resp.status().as_u16();
    let body: Value = resp.json().await.unwrap();
    (
        status,
        body["error"].as_str().unwrap_or_default().to_owned(),
    )
}

fn no_redirects() -> reqwest::Client {
    // reqwest has rustls but no crypto provider of its own (the workspace manifest).
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

#[tokio::test]
async fn api_needs_credentials_whatever_the_spelling() {
    let server = gated();
    let http = client();
    for path in [
        "/api/board",
        "/API/board",
        "/Api/Teams",
        "/%61pi/board",
        "/api/%6Dcp/tasks",
        "/API/mcp/tasks",
        "/api/mcp/config",
        "/api/mcp/status",
        "/api/mcp/tasks/",
    ] {
        let r = http.get(server.url(path)).send().await.unwrap();
        let (status, error) = status_and_error(r).await;
        assert_eq!(status, 401, "{path}");
        assert!(
            error.starts_with("Clawboo access token required"),
            "{path}: {error}"
        );
    }
    // Encoded and case-folded MCP paths are not MCP endpoints.
    let r = post(
        &http,
        &server.url("/api/%6Dcp/tasks"),
        None,
        &initialize_body(1),
    )
    .await;
    assert_eq!(r.status(), 401);
    let r = post(
        &http,
        &server.url("/API/mcp/tasks"),
        None,
        &initialize_body(1),
    )
    .await;
    assert_eq!(r.status(), 401);
}

/// The URL `clawboo attach` prints for `server` (with `args`) against `server`'s database.
fn attach_url(server: &Server, name: &str, args: &[&str]) -> String {
    let mut all = vec!["--server", name, "--url", &server.base];
    all.extend_from_slice(args);
    let config = attach(&server.db, &all);
    config["structured"][format!("clawboo-{name}")]["url"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[tokio::test]
async fn loopback_alone_no_longer_opens_mcp_but_a_signed_url_does() {
    let server = gated();
    let http = client();
    // A local process without the token or a signed URL gets nothing, forged headers
    // or not.
    for (name, value) in [("x-forwarded-for", "127.0.0.1"), ("x-real-ip", "127.0.0.1")] {
        let r = http
            .post(server.url("/api/mcp/tasks"))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header(name, value)
            .body(initialize_body(1).to_string())
            .send()
            .await
            .unwrap();
        let (status, error) = status_and_error(r).await;
        assert_eq!(status, 401, "{name}");
        assert!(
            error.starts_with("Clawboo access token required"),
            "{error}"
        );
    }
    // The unbound URL `clawboo attach` signs opens it, unbound.
    let unbound = attach_url(&server, "tasks", &[]);
    assert!(unbound.contains("/api/mcp/tasks?scopeSig="), "{unbound}");
    let mut s = Session::open(&unbound).await;
    let created = s
        .call_json("create_task", json!({"title": "x", "teamId": "blue"}))
        .await;
    assert_eq!(created["task"]["teamId"], "blue");
    // A bound signed URL opens it bound.
    let bound = attach_url(&server, "tasks", &["--team", "red", "--agent", "ada"]);
    let mut s = Session::open(&bound).await;
    let created = s
        .call_json("create_task", json!({"title": "y", "teamId": "blue"}))
        .await;
    assert_eq!(created["task"]["teamId"], "red");
    // A tampered one, or one signed for another server, is refused on every request.
    for forged in [
        bound.replace("scopeTeamId=red", "scopeTeamId=blue"),
        unbound.replace("/api/mcp/tasks", "/api/mcp/memory"),
        format!("{unbound}&delegate=1"),
        server.url("/api/mcp/tasks?scopeTeamId=red"),
    ] {
        let r = post(&http, &forged, None, &initialize_body(1)).await;
        assert_eq!(r.status(), 403, "{forged}");
        assert!(r.headers().get("mcp-session-id").is_none());
        let body: Value = r.json().await.unwrap();
        assert_eq!(body["error"]["code"], -32001, "{forged}: {body}");
        assert_eq!(body["error"]["message"], BAD_SCOPE);
    }
    // The session of a signed URL goes on working only through a signed URL.
    let tasks = server.url("/api/mcp/tasks");
    let r = post(
        &http,
        &tasks,
        Some(&s.id),
        &json!({"jsonrpc": "2.0", "id": 9, "method": "tools/list"}),
    )
    .await;
    assert_eq!(r.status(), 401);
    // The operator's token opens the plain URL.
    let r = http
        .post(&tasks)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .bearer_auth(TOKEN)
        .body(initialize_body(1).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    // Nothing but MCP endpoints opens with a signature.
    let sig = unbound.split_once('?').unwrap().1;
    let r = http
        .get(server.url(&format!("/api/board?{sig}")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
}

#[test]
fn a_short_token_is_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    for short in ["x", "fifteen-chars-x"] {
        let out = clawboo()
            .args(["serve", "--bind", "127.0.0.1:0", "--db"])
            .arg(dir.path().join("c.db"))
            .env("STUDIO_ACCESS_TOKEN", short)
            .output()
            .unwrap();
        assert!(!out.status.success(), "{short}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(&format!(
                "STUDIO_ACCESS_TOKEN is {} characters",
                short.len()
            )) && err.contains("at least 16"),
            "{err}"
        );
        assert!(out.stdout.is_empty(), "it must not start listening");
    }
}

#[tokio::test]
async fn the_token_redirect_never_leaves_the_server() {
    let server = gated();
    let http = no_redirects();
    for (path, location) in [
        ("//evil.example/x", "/evil.example/x"),
        ("///evil.example", "/evil.example"),
        ("/", "/"),
    ] {
        let r = http
            .get(server.url(&format!("{path}?access_token={TOKEN}")))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 302, "{path}");
        assert_eq!(r.headers()["location"], location, "{path}");
    }
}

#[tokio::test]
async fn cookie_flow_and_bearer() {
    let server = gated();
    let http = no_redirects();
    let r = http
        .get(server.url(&format!("/api/board?status=todo&access_token={TOKEN}")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 302);
    assert_eq!(r.headers()["location"], "/api/board?status=todo");
    let cookie = r.headers()["set-cookie"].to_str().unwrap().to_owned();
    assert!(
        cookie.starts_with(&format!("clawboo_access={TOKEN};")),
        "{cookie}"
    );
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("SameSite=Lax"),
        "{cookie}"
    );

    let r = http
        .get(server.url("/api/board"))
        .header("cookie", format!("clawboo_access={TOKEN}"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);

    let r = http
        .get(server.url("/api/teams"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);

    for bad in [
        http.get(server.url("/api/board?access_token=wrong")),
        http.get(server.url("/?access_token=wrong")),
        http.get(server.url("/api/board")).bearer_auth("wrong"),
        http.get(server.url("/api/board"))
            .header("cookie", "clawboo_access=wrong"),
    ] {
        let (status, error) = status_and_error(bad.send().await.unwrap()).await;
        assert_eq!(status, 401);
        assert_eq!(error, INVALID);
    }
}

#[tokio::test]
async fn minting_a_signed_url_needs_operator_credentials() {
    let server = gated();
    let http = client();
    let scoped = server.url("/api/mcp/config?server=tasks&scopeTeamId=t&scopeAgentId=a");
    let r = http.get(&scoped).send().await.unwrap();
    assert_eq!(r.status(), 401);
    let unbound = server.url("/api/mcp/config?server=tasks");
    let r = http.get(&unbound).send().await.unwrap();
    assert_eq!(r.status(), 401);
    let v: Value = http
        .get(&unbound)
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let url = v["config"]["structured"]["clawboo-tasks"]["url"]
        .as_str()
        .unwrap();
    assert!(url.contains("/api/mcp/tasks?scopeSig="), "{url}");
    assert_eq!(url, attach_url(&server, "tasks", &[]));
    let v: Value = http
        .get(&scoped)
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let url = v["config"]["structured"]["clawboo-tasks"]["url"]
        .as_str()
        .unwrap();
    assert!(url.contains("scopeSig="), "{url}");
}

#[tokio::test]
async fn foreign_host_and_origin_are_refused() {
    let server = Server::start(&[]);
    let http = client();
    let cases: [(&str, &str); 5] = [
        ("host", "evil.example"),
        ("host", "localhost.evil.example:80"),
        ("origin", "http://evil.example"),
        ("origin", "null"),
        ("sec-fetch-site", "cross-site"),
    ];
    for (name, value) in cases {
        for path in ["/api/board", "/api/mcp/tasks"] {
            let r = http
                .post(server.url(path))
                .header("content-type", "application/json")
                .header("accept", "application/json, text/event-stream")
                .header(name, value)
                .body(initialize_body(1).to_string())
                .send()
                .await
                .unwrap();
            let (status, error) = status_and_error(r).await;
            assert_eq!(status, 403, "{name}: {value} on {path}");
            assert!(error.starts_with("Forbidden"), "{error}");
        }
    }
    // Loopback names pass.
    for host in ["localhost", "127.0.0.1:1", "[::1]:1"] {
        let r = http
            .get(server.url("/api/board"))
            .header("host", host)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "{host}");
    }
    // Only the server's own scheme, host and port is its origin.
    let port = server.base.rsplit_once(':').unwrap().1.to_owned();
    for same in [server.base.clone(), format!("http://localhost:{port}")] {
        let r = http
            .get(server.url("/api/board"))
            .header("origin", &same)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "{same}");
    }
    let other_port = if port == "3000" { "3001" } else { "3000" };
    for other in [
        format!("http://localhost:{other_port}"),
        format!("http://127.0.0.1:{other_port}"),
        format!("https://127.0.0.1:{port}"),
        "http://localhost".to_owned(),
    ] {
        for path in ["/api/board", "/api/mcp/tasks"] {
            let r = http
                .post(server.url(path))
                .header("content-type", "application/json")
                .header("accept", "application/json, text/event-stream")
                .header("origin", &other)
                .body(initialize_body(1).to_string())
                .send()
                .await
                .unwrap();
            let (status, error) = status_and_error(r).await;
            assert_eq!(status, 403, "{other} on {path}");
            assert!(error.starts_with("Forbidden: Origin"), "{error}");
        }
    }
}

#[test]
fn non_loopback_bind_needs_the_gate_or_an_explicit_opt_in() {
    let dir = tempfile::tempdir().unwrap();
    let out = clawboo()
        .args(["serve", "--bind", "0.0.0.0:0", "--db"])
        .arg(dir.path().join("c.db"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("refusing to bind"), "{err}");
    // A malformed token leaves the gate off, so it is refused too.
    let out = clawboo()
        .args(["serve", "--bind", "0.0.0.0:0", "--db"])
        .arg(dir.path().join("c.db"))
        .env("STUDIO_ACCESS_TOKEN", "bad token!")
        .output()
        .unwrap();
    assert!(!out.status.success());
    // With the gate, or with CLAWBOO_ALLOW_INSECURE=1, it starts.
    let db = common::TestDb::new();
    let gated = Server::start_on(&db, "0.0.0.0:0", &[("STUDIO_ACCESS_TOKEN", TOKEN)]);
    assert!(gated.base.starts_with("http://127.0.0.1:"));
    let open = Server::start_on(&db, "0.0.0.0:0", &[("CLAWBOO_ALLOW_INSECURE", "1")]);
    assert!(open.base.starts_with("http://127.0.0.1:"));
}
