//! The web board's server side through the real `clawboo serve`: the page and its assets
//! (compiled in, with a strict content-security policy), the workflow route, and the live
//! feed (`/api/events`) reporting a write made by another process. The page itself is
//! driven in headless Chromium by `tests/browser/`.

#![allow(clippy::unwrap_used)]

mod common;
mod http_support;

use common::StdioClient;
use http_support::{Server, client};
use serde_json::{Value, json};

const TASKS_BIN: &str = env!("CARGO_BIN_EXE_clawboo-mcp-tasks");

/// The next `marks` event of an SSE response (keep-alive comments skipped); fails after a
/// generous minute rather than hang when the feed never reports.
async fn next_marks(events: &mut reqwest::Response, buffer: &mut String) -> Value {
    tokio::time::timeout(
        std::time::Duration::from_secs(60),
        read_marks(events, buffer),
    )
    .await
    .expect("no marks event within a minute")
}

async fn read_marks(events: &mut reqwest::Response, buffer: &mut String) -> Value {
    loop {
        if let Some(end) = buffer.find("\n\n") {
            let frame: String = buffer.drain(..end + 2).collect();
            if frame.lines().any(|l| l == "event: marks") {
                let data = frame
                    .lines()
                    .find_map(|l| l.strip_prefix("data: "))
                    .unwrap();
                return serde_json::from_str(data).unwrap();
            }
            continue;
        }
        let chunk = events.chunk().await.unwrap().expect("the feed ended");
        buffer.push_str(std::str::from_utf8(&chunk).unwrap());
    }
}

#[tokio::test]
async fn the_page_and_its_assets_are_served_with_a_strict_policy() {
    let server = Server::start(&[]);
    let http = client();
    for (path, kind, marker) in [
        ("/", "text/html", "/assets/app.js"),
        (
            "/assets/app.js",
            "text/javascript",
            "EventSource('/api/events')",
        ),
        ("/assets/app.css", "text/css", ".columns"),
    ] {
        let resp = http.get(server.url(path)).send().await.unwrap();
        assert_eq!(resp.status(), 200, "{path}");
        let headers = resp.headers().clone();
        assert!(
            headers["content-type"].to_str().unwrap().starts_with(kind),
            "{path}"
        );
        let csp = headers["content-security-policy"].to_str().unwrap();
        assert!(csp.contains("script-src 'self'") && csp.contains("default-src 'none'"));
        assert_eq!(headers["x-content-type-options"], "nosniff");
        assert!(resp.text().await.unwrap().contains(marker), "{path}");
    }

    let workflow: Value = http
        .get(server.url("/api/board/workflow"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        workflow["statuses"],
        json!([
            "backlog",
            "todo",
            "in_progress",
            "in_review",
            "blocked",
            "done",
            "cancelled"
        ])
    );
    assert_eq!(workflow["transitions"]["done"], json!([]));
    assert_eq!(
        workflow["transitions"]["todo"],
        json!(["backlog", "in_progress", "blocked", "cancelled"])
    );
}

#[tokio::test]
async fn the_live_feed_reports_another_processs_write_in_its_own_area() {
    let server = Server::start(&[]);
    let mut events = client()
        .get(server.url("/api/events"))
        .send()
        .await
        .unwrap();
    assert_eq!(events.status(), 200);
    assert_eq!(events.headers()["content-type"], "text/event-stream");
    let mut buffer = String::new();
    let first = next_marks(&mut events, &mut buffer).await;
    assert_eq!(first["pendingApprovals"], 0);

    // Another OS process, a stdio agent on the same database file, moves the board.
    let db = server.db.clone();
    tokio::task::spawn_blocking(move || {
        let mut agent = StdioClient::spawn(TASKS_BIN, &db, &[]);
        agent.initialize();
        agent.call_ok("create_task", json!({"title": "seen live"}));
    })
    .await
    .unwrap();

    let second = next_marks(&mut events, &mut buffer).await;
    assert_ne!(second["board"], first["board"]);
    for area in ["chat", "memory", "approvals", "audit"] {
        assert_eq!(second[area], first[area], "{area} did not change");
    }
}

#[tokio::test]
async fn moving_a_task_nobody_holds_into_progress_claims_it_for_someone_named() {
    let server = Server::start(&[]);
    let task = http_support::create_task(&server, "paint the fence", "red").await;
    let id = task["id"].as_str().unwrap();
    let patch = |body: Value| {
        let url = server.url(&format!("/api/board/{id}"));
        async move { client().patch(url).json(&body).send().await.unwrap() }
    };
    // The operator must say who takes it.
    let refused = patch(json!({"status": "in_progress"})).await;
    assert_eq!(refused.status(), 400);
    let error = refused.json::<Value>().await.unwrap()["error"].clone();
    assert!(
        error.as_str().unwrap().contains("assigneeAgentId"),
        "{error}"
    );
    let moved = patch(json!({"status": "in_progress", "assigneeAgentId": "erin"})).await;
    assert_eq!(moved.status(), 200);
    let moved = moved.json::<Value>().await.unwrap()["task"].clone();
    assert_eq!(moved["assigneeAgentId"], "erin");
    assert_eq!(moved["claimToken"], 1);
    assert!(moved["leaseExpiresAt"].as_i64().is_some(), "{moved}");

    // Over 2026-07-28, the bound agent moving it becomes its holder.
    let other = http_support::create_task(&server, "sand the deck", "red").await;
    let url = http_support::signed_tasks_url(&server, "red", "frank");
    let answer = http_support::post_modern(
        &client(),
        &url,
        1,
        "tools/call",
        json!({"name": "update_task_status",
               "arguments": {"taskId": other["id"], "status": "in_progress"}}),
    )
    .await;
    let result = &answer.message["result"];
    assert_ne!(result["isError"], true, "{result}");
    let task: Value = serde_json::from_str(result["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(task["task"]["assigneeAgentId"], "frank");
    assert_eq!(task["task"]["claimToken"], 1);
}

#[tokio::test]
async fn taking_a_held_task_back_leaves_a_system_comment_and_detail_renders_markdown() {
    let server = Server::start(&[]);
    let task = http_support::create_task(&server, "oil the hinges", "red").await;
    let id = task["id"].as_str().unwrap();
    let url = server.url(&format!("/api/board/{id}"));
    let http = client();
    let send = |body: Value| http.patch(&url).json(&body).send();
    let held = send(json!({"status": "in_progress", "assigneeAgentId": "gus",
                           "description": "**steps** <script>x()</script>"}))
    .await
    .unwrap();
    assert_eq!(held.status(), 200);
    // A move the holder keeps (and one by the holder itself) leaves no note.
    let blocked = send(json!({"status": "blocked"})).await.unwrap();
    assert_eq!(blocked.status(), 200);
    let back = send(json!({"status": "todo"})).await.unwrap();
    assert_eq!(back.status(), 200);
    assert_eq!(
        back.json::<Value>().await.unwrap()["task"]["assigneeAgentId"],
        Value::Null
    );

    let detail = http_support::get_json(&url).await;
    let comments = detail["comments"].as_array().unwrap();
    assert_eq!(comments.len(), 1, "{detail}");
    assert_eq!(comments[0]["authorType"], "system");
    let body = comments[0]["body"].as_str().unwrap();
    assert!(
        body.contains("took this task back from gus (it was blocked, now todo)"),
        "{body}"
    );
    assert!(comments[0]["bodyHtml"].as_str().unwrap().starts_with("<p>"));
    let html = detail["task"]["descriptionHtml"].as_str().unwrap();
    assert!(
        html.contains("<strong>steps</strong>") && !html.contains("<script"),
        "{html}"
    );
}
