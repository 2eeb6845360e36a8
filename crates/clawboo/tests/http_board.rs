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

/// The text of a tool's answer over 2026-07-28, parsed.
async fn tool_json(url: &str, id: i64, name: &str, arguments: Value) -> Value {
    let answer = http_support::post_modern(
        &client(),
        url,
        id,
        "tools/call",
        json!({"name": name, "arguments": arguments}),
    )
    .await;
    let result = &answer.message["result"];
    assert_ne!(result["isError"], true, "{name}: {result}");
    serde_json::from_str(result["content"][0]["text"].as_str().unwrap()).unwrap()
}

#[tokio::test]
async fn the_operators_moves_edits_and_comments_are_its_activity_and_an_agents_are_not() {
    let server = Server::start(&[]);
    let http = client();
    let red = http_support::create_task(&server, "red task", "red").await;
    let red_id = red["id"].as_str().unwrap();
    // A team-less task: its team is null, and it is listed when no team is named.
    let created = http
        .post(server.url("/api/board"))
        .json(&json!({"title": "nobody's team"}))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201);
    let loose = created.json::<Value>().await.unwrap()["task"].clone();
    let loose_id = loose["id"].as_str().unwrap();

    // An agent bound to red moves and comments over MCP: none of it is the operator's.
    let url = http_support::signed_tasks_url(&server, "red", "hal");
    tool_json(
        &url,
        1,
        "update_task_status",
        json!({"taskId": red_id, "status": "in_progress"}),
    )
    .await;
    tool_json(
        &url,
        2,
        "add_comment",
        json!({"taskId": red_id, "body": "on it"}),
    )
    .await;

    let patch = |id: &str, body: Value| {
        http.patch(server.url(&format!("/api/board/{id}")))
            .json(&body)
            .send()
    };
    assert_eq!(
        patch(red_id, json!({"status": "in_review"}))
            .await
            .unwrap()
            .status(),
        200
    );
    assert_eq!(
        patch(loose_id, json!({"title": "somebody's team", "priority": 2}))
            .await
            .unwrap()
            .status(),
        200
    );
    assert_eq!(
        patch(loose_id, json!({"dropped": true}))
            .await
            .unwrap()
            .status(),
        200
    );
    let commented = http
        .post(server.url(&format!("/api/board/{loose_id}/comments")))
        .json(&json!({"body": "split this one\nplease"}))
        .send()
        .await
        .unwrap();
    assert_eq!(commented.status(), 201);
    // A refused move records nothing.
    assert_eq!(
        patch(red_id, json!({"status": "backlog"}))
            .await
            .unwrap()
            .status(),
        409
    );

    let all = http_support::get_json(&server.url("/api/board/activity")).await;
    let rows: Vec<(String, String, String, Value)> = all["activity"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            assert_eq!(a["actor"], "api");
            (
                a["taskId"].as_str().unwrap().to_owned(),
                a["action"].as_str().unwrap().to_owned(),
                a["detail"].as_str().unwrap().to_owned(),
                a["teamId"].clone(),
            )
        })
        .collect();
    let row = |id: &str, action: &str, detail: &str, team: Value| {
        (id.to_owned(), action.to_owned(), detail.to_owned(), team)
    };
    assert_eq!(
        rows,
        vec![
            row(loose_id, "commented", "split this one", Value::Null),
            row(loose_id, "dropped", "dropped from the board", Value::Null),
            row(loose_id, "edited", "title, priority", Value::Null),
            row(red_id, "moved", "in_progress → in_review", json!("red")),
        ]
    );
    assert_eq!(all["activity"][0]["taskTitle"], "somebody's team");

    let red_only = http_support::get_json(&server.url("/api/board/activity?teamId=red")).await;
    assert_eq!(
        red_only["activity"].as_array().unwrap().len(),
        1,
        "{red_only}"
    );
    let one = http_support::get_json(&server.url("/api/board/activity?limit=1")).await;
    assert_eq!(one["activity"].as_array().unwrap().len(), 1);
    let refused = http
        .get(server.url("/api/board/activity?limit=0"))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 400);
    assert!(refused.text().await.unwrap().contains("1..=500"));
}

#[tokio::test]
async fn an_operator_retires_a_fact_and_no_search_finds_it_again() {
    let server = Server::start(&[]);
    let http = client();
    let memory = http_support::signed_url(&server, "memory", "red", "ivy");
    let mut ids = Vec::new();
    for (i, title) in ["old deploy steps", "deploy steps", "deploy checklist"]
        .iter()
        .enumerate()
    {
        let saved = tool_json(
            &memory,
            i as i64 + 1,
            "memory_save",
            json!({"title": title, "content": format!("how to deploy, version {i}")}),
        )
        .await;
        ids.push(saved["fact"]["id"].as_str().unwrap().to_owned());
    }
    let old = ids[0].clone();
    let retire = |id: &str, body: Value| {
        http.post(server.url(&format!("/api/memory/facts/{id}/retire")))
            .json(&body)
            .send()
    };

    let no_reason = retire(&old, json!({"reason": " "})).await.unwrap();
    assert_eq!(no_reason.status(), 400);
    assert!(no_reason.text().await.unwrap().contains("needs a reason"));
    assert_eq!(
        retire("nope", json!({"reason": "x"}))
            .await
            .unwrap()
            .status(),
        404
    );
    let done = retire(&old, json!({"reason": "replaced by the checklist"}))
        .await
        .unwrap();
    assert_eq!(done.status(), 201);
    let retirement = done.json::<Value>().await.unwrap()["retirement"].clone();
    assert_eq!(retirement["retiredBy"], "api");
    let again = retire(&old, json!({"reason": "twice"})).await.unwrap();
    assert_eq!(again.status(), 409);
    assert!(
        again
            .text()
            .await
            .unwrap()
            .contains("replaced by the checklist")
    );

    // Neither the board's search and list nor an agent's search returns it; two live
    // facts remain for a limit of two.
    for mode in ["fts", "vector", "hybrid"] {
        let found = http_support::get_json(
            &server.url(&format!("/api/memory?query=deploy&mode={mode}&limit=2")),
        )
        .await;
        let hits: Vec<&str> = found["results"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["fact"]["id"].as_str().unwrap())
            .collect();
        assert_eq!(hits.len(), 2, "{mode}: {found}");
        assert!(!hits.contains(&old.as_str()), "{mode}");
    }
    let newest = http_support::get_json(&server.url("/api/memory?limit=10")).await;
    assert_eq!(newest["facts"].as_array().unwrap().len(), 2, "{newest}");
    let agent = tool_json(
        &memory,
        9,
        "memory_search",
        json!({"query": "old deploy steps"}),
    )
    .await;
    assert!(
        agent["results"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["fact"]["id"] != json!(old)),
        "{agent}"
    );

    // By id it is found, with its retirement; a live fact has none.
    let shown = http_support::get_json(&server.url(&format!("/api/memory/facts/{old}"))).await;
    assert_eq!(shown["fact"]["title"], "old deploy steps");
    assert_eq!(shown["retirement"]["reason"], "replaced by the checklist");
    let live = http_support::get_json(&server.url(&format!("/api/memory/facts/{}", ids[1]))).await;
    assert_eq!(live["retirement"], Value::Null);

    // The CLI retires too, and says so when the fact already is.
    let cli = |reason: &str| {
        http_support::clawboo()
            .args([
                "memory", "retire", &ids[1], "--reason", reason, "--json", "--db",
            ])
            .arg(&server.db)
            .output()
            .unwrap()
    };
    let out = cli("merged into the checklist");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let printed: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(printed["retirement"]["retiredBy"], "cli");
    let out = cli("again");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("already retired"));
    let newest = http_support::get_json(&server.url("/api/memory?limit=10")).await;
    assert_eq!(newest["facts"].as_array().unwrap().len(), 1, "{newest}");
}
