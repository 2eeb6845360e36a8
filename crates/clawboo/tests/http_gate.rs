//! The access gate and the origin guard against the real `clawboo serve`.

#![allow(clippy::unwrap_used)]

mod http_support;

use http_support::{Server, Session, clawboo, client, initialize_body, post};
use serde_json::Value;

const TOKEN: &str = "gate-token_1.x~";
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
    // Encoded and case-folded MCP paths are not the loopback-exempt endpoint.
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

#[tokio::test]
async fn loopback_peer_may_attach_to_mcp_endpoints_only() {
    let server = gated();
    // The exact endpoint is exempt for a loopback peer, even with a forged header.
    let mut s = Session::open(&server.url("/api/mcp/tasks")).await;
    assert!(s.request("tools/list", serde_json::json!({})).await["result"]["tools"].is_array());
    let r = client()
        .get(server.url("/api/board"))
        .header("x-forwarded-for", "127.0.0.1")
        .header("x-real-ip", "127.0.0.1")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
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
    let r = http
        .get(server.url("/api/board"))
        .header("origin", "http://localhost:3000")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
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
    let db = dir.path().join("c.db");
    let gated = Server::start_on(&db, "0.0.0.0:0", &[("STUDIO_ACCESS_TOKEN", TOKEN)]);
    assert!(gated.base.starts_with("http://127.0.0.1:"));
    let open = Server::start_on(&db, "0.0.0.0:0", &[("CLAWBOO_ALLOW_INSECURE", "1")]);
    assert!(open.base.starts_with("http://127.0.0.1:"));
}
