//! The 2026-07-28 protocol over real HTTP (SPEC §14): no `initialize`, no session, each
//! request bound by its own URL's signature, so two `clawboo serve` replicas on one
//! database answer one client's requests alternately and apply the binding on each.

#![allow(clippy::unwrap_used)]

mod common;
mod http_support;

use http_support::{
    MODERN, ModernAnswer, Server, client, create_task, post_modern, signed_tasks_url,
};
use serde_json::{Value, json};

/// The JSON of a successful tool result's first text block.
fn tool_json(answer: &ModernAnswer) -> Value {
    let result = &answer.message["result"];
    assert_eq!(answer.status, 200, "{}", answer.message);
    assert_ne!(result["isError"], json!(true), "{result}");
    serde_json::from_str(result["content"][0]["text"].as_str().unwrap()).unwrap()
}

/// `tools/call` of `name` at `url` over the 2026-07-28 protocol.
async fn call(url: &str, id: i64, name: &str, args: Value) -> ModernAnswer {
    let answer = post_modern(
        &client(),
        url,
        id,
        "tools/call",
        json!({"name": name, "arguments": args}),
    )
    .await;
    assert_eq!(answer.session, None, "a 2026-07-28 answer opened a session");
    answer
}

#[tokio::test]
async fn two_replicas_answer_one_signed_url_alternately_with_its_binding() {
    let first = Server::start(&[]);
    let second = Server::start_on(&first.db, "127.0.0.1:0", &[]);
    let theirs = create_task(&first, "team B work", "team-b").await;
    let signed = signed_tasks_url(&first, "team-a", "alice");
    let query = &signed[signed.find('?').unwrap()..];
    // One signed URL, as a client holds it, served by either replica.
    let replicas = [
        signed.clone(),
        second.url(&format!("/api/mcp/tasks{query}")),
    ];

    for (i, url) in replicas.iter().enumerate() {
        let discovered = post_modern(&client(), url, 1, "server/discover", json!({})).await;
        assert_eq!(discovered.status, 200, "{}", discovered.message);
        assert_eq!(discovered.session, None);
        let result = &discovered.message["result"];
        assert!(
            result["supportedVersions"]
                .as_array()
                .unwrap()
                .contains(&json!(MODERN)),
            "replica {i}: {result}"
        );
    }

    // Alternating replicas: each write made through one is seen and bound on the other.
    let mut mine = Vec::new();
    for round in 0..4_i64 {
        let url = &replicas[usize::try_from(round % 2).unwrap()];
        let created = call(
            url,
            10 + round,
            "create_task",
            json!({"title": format!("round {round}"), "teamId": "team-b"}),
        )
        .await;
        let task = tool_json(&created)["task"].clone();
        assert_eq!(task["teamId"], "team-a", "round {round}: {task}");
        mine.push(task["id"].as_str().unwrap().to_owned());

        let other = &replicas[usize::try_from((round + 1) % 2).unwrap()];
        let listed = call(other, 20 + round, "list_tasks", json!({"teamId": "team-b"})).await;
        let ids: Vec<String> = tool_json(&listed)["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["id"].as_str().unwrap().to_owned())
            .collect();
        let mut expected = mine.clone();
        expected.sort();
        let mut seen = ids.clone();
        seen.sort();
        assert_eq!(seen, expected, "round {round}: the bound team's tasks only");

        let hidden = call(
            other,
            30 + round,
            "get_task",
            json!({"taskId": theirs["id"]}),
        )
        .await;
        let result = &hidden.message["result"];
        assert_eq!(result["isError"], true, "round {round}: {result}");
        assert_eq!(result["_meta"]["error"], "not_found", "{result}");
    }

    // A claim through one replica is the bound agent's whatever the arguments say, and the
    // holder's move through the other is allowed.
    let claim = json!({"taskId": mine[1], "assigneeAgentId": "mallory"});
    let claimed = call(&replicas[0], 40, "claim_task", claim).await;
    assert_eq!(tool_json(&claimed)["task"]["assigneeAgentId"], "alice");
    let review = json!({"taskId": mine[1], "status": "in_review"});
    let moved = call(&replicas[1], 41, "update_task_status", review).await;
    assert_eq!(tool_json(&moved)["task"]["status"], "in_review");
}

#[tokio::test]
async fn a_modern_request_is_refused_unless_its_own_url_verifies() {
    let server = Server::start(&[]);
    let signed = signed_tasks_url(&server, "team-a", "alice");
    for url in [
        signed.replace("team-a", "team-b"),
        format!("{signed}&delegate=1"),
        server.url("/api/mcp/tasks?scopeTeamId=team-a"),
    ] {
        for method in ["server/discover", "tools/list"] {
            let refused = post_modern(&client(), &url, 1, method, json!({})).await;
            assert_eq!(refused.status, 403, "{method} at {url}");
            assert_eq!(refused.message["error"]["code"], -32001, "{url}");
            assert_eq!(
                refused.message["error"]["message"],
                "invalid scope signature: mint a new URL with clawboo attach"
            );
        }
    }
    // A discover without the protocol `_meta` is told what is missing.
    let bare = json!({"jsonrpc": "2.0", "id": 3, "method": "server/discover", "params": {}});
    let r = client()
        .post(server.url("/api/mcp/tasks"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(bare.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["error"]["code"], -32602, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("io.modelcontextprotocol/protocolVersion"),
        "{body}"
    );
}
