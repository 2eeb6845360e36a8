//! The 2026-07-28 protocol over real HTTP (SPEC §14): no `initialize`, no session, each
//! request bound by its own URL's signature, so two `clawboo serve` replicas on one
//! database answer one client's requests alternately and apply the binding on each.

#![allow(clippy::unwrap_used)]

mod common;
mod http_support;

use http_support::{
    MODERN, ModernAnswer, Server, client, create_task, get_json, message_with_id, post_modern,
    send_modern, signed_tasks_url, signed_url,
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

/// A client declaring form elicitation, as Claude Code does.
fn form_client() -> Value {
    json!({"elicitation": {"form": {}}})
}

/// `tools/call` of `delete_path` on `path` from a form-declaring 2026-07-28 client;
/// `extra` adds `requestState`/`inputResponses`. Returns the result.
async fn delete_path(url: &str, id: i64, path: &str, extra: Value) -> Value {
    let params = delete_path_params(path, extra);
    let resp = send_modern(&client(), url, id, "tools/call", params, form_client()).await;
    assert_eq!(resp.status(), 200);
    assert!(resp.headers().get("mcp-session-id").is_none());
    let message = message_with_id(&resp.text().await.unwrap(), id);
    message["result"].clone()
}

/// The params of a `delete_path` call on `path`, with `extra` fields beside them.
fn delete_path_params(path: &str, extra: Value) -> Value {
    let mut params = json!({"name": "delete_path", "arguments": {"path": path}});
    if let (Some(params), Value::Object(extra)) = (params.as_object_mut(), extra) {
        params.extend(extra);
    }
    params
}

/// The first round: the approval is opened and the form comes back with the state.
async fn first_round(url: &str, id: i64, path: &str) -> String {
    let round = delete_path(url, id, path, json!({})).await;
    assert_eq!(round["resultType"], "input_required", "{round}");
    assert_eq!(
        round["inputRequests"]["approval"]["method"], "elicitation/create",
        "{round}"
    );
    round["requestState"].as_str().unwrap().to_owned()
}

fn answered(state: &str, answer: Value) -> Value {
    json!({"requestState": state, "inputResponses": {"approval": answer}})
}

fn accept(decision: &str) -> Value {
    json!({"action": "accept", "content": {"decision": decision}})
}

/// The one pending approval, as the REST API lists it.
async fn pending_approval(server: &Server) -> String {
    let listed = get_json(&server.url("/api/tools/approvals")).await;
    let pending = listed["approvals"].as_array().unwrap();
    assert_eq!(pending.len(), 1, "{listed}");
    pending[0]["id"].as_str().unwrap().to_owned()
}

/// Who decided the call of approval `id`: the approval's and the audit's word.
async fn decided_by(server: &Server, id: &str) -> (Value, Value) {
    let approvals = get_json(&server.url("/api/tools/approvals?status=all")).await;
    let approval = approvals["approvals"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["id"] == id)
        .unwrap()["decidedBy"]
        .clone();
    let audit = get_json(&server.url("/api/tools/audit?toolName=delete_path")).await;
    let row = audit["audit"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["approvalId"] == id && r["phase"] == "before")
        .unwrap_or_else(|| panic!("no audit row of {id}: {audit}"))
        .clone();
    (approval, row["decidedBy"].clone())
}

#[tokio::test]
async fn a_2026_client_answers_approvals_in_the_calls_rounds_over_http() {
    let server = Server::start(&[("TAVILY_API_KEY", "")]);
    let url = signed_url(&server, "tools", "t1", "a1");
    let both = |who: &str| (json!(who), json!(who));

    // Deny.
    let state = first_round(&url, 1, "/srv/one").await;
    let approval = pending_approval(&server).await;
    let denied = delete_path(&url, 2, "/srv/one", answered(&state, accept("deny"))).await;
    assert_eq!(denied["_meta"]["denied"], "approval:deny", "{denied}");
    assert_eq!(decided_by(&server, &approval).await, both("elicitation"));

    // Allow once.
    let state = first_round(&url, 3, "/srv/two").await;
    let allowed = delete_path(&url, 4, "/srv/two", answered(&state, accept("allow_once"))).await;
    assert_ne!(allowed["isError"], true, "{allowed}");
    let approval = allowed["_meta"]["approvalId"].as_str().unwrap().to_owned();
    assert_eq!(decided_by(&server, &approval).await, both("elicitation"));

    // Cancel: the retry waits (its progress streams in its own answer) until REST decides.
    let state = first_round(&url, 5, "/srv/three").await;
    let approval = pending_approval(&server).await;
    let mut params =
        delete_path_params("/srv/three", answered(&state, json!({"action": "cancel"})));
    params["_meta"] = json!({"progressToken": "p6"});
    let mut waiting = send_modern(&client(), &url, 6, "tools/call", params, form_client()).await;
    let mut body = String::new();
    while !body.contains("notifications/progress") {
        let chunk = waiting
            .chunk()
            .await
            .unwrap()
            .expect("the call ended before it waited");
        body.push_str(&String::from_utf8_lossy(&chunk));
    }
    assert_eq!(
        pending_approval(&server).await,
        approval,
        "cancel decided nothing"
    );
    let decided = client()
        .post(server.url(&format!("/api/tools/approvals/{approval}/resolve")))
        .json(&json!({"decision": "allow_once"}))
        .send()
        .await
        .unwrap();
    assert_eq!(decided.status(), 200);
    while let Some(chunk) = waiting.chunk().await.unwrap() {
        body.push_str(&String::from_utf8_lossy(&chunk));
    }
    let result = message_with_id(&body, 6)["result"].clone();
    assert_ne!(result["isError"], true, "{result}");
    assert_eq!(decided_by(&server, &approval).await, both("api"));

    // Allow always answered in the form (which does not offer it) allows this call once,
    // decided by the form, and grants nothing lasting: the next call is asked again.
    let state = first_round(&url, 7, "/srv/four").await;
    let once = delete_path(
        &url,
        8,
        "/srv/four",
        answered(&state, accept("allow_always")),
    )
    .await;
    assert_ne!(once["isError"], true, "{once}");
    let next = delete_path(&url, 9, "/srv/five", json!({})).await;
    assert_eq!(next["resultType"], "input_required", "{next}");
    let audit = get_json(&server.url("/api/tools/audit?toolName=delete_path&limit=4")).await;
    let decided: Vec<&str> = audit["audit"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["phase"] == "before")
        .filter_map(|r| r["decidedBy"].as_str())
        .collect();
    assert!(!decided.contains(&"allow_always"), "{audit}");
    assert!(decided.contains(&"elicitation"), "{audit}");
}

#[tokio::test]
async fn get_and_delete_at_2026_are_not_allowed_and_sessions_keep_their_answers() {
    let server = Server::start(&[]);
    let url = server.url("/api/mcp/tasks");
    let http = client();
    for method in [reqwest::Method::GET, reqwest::Method::DELETE] {
        let r = http
            .request(method.clone(), &url)
            .header("accept", "text/event-stream")
            .header("mcp-protocol-version", MODERN)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 405, "{method}");
        assert_eq!(r.headers()["allow"], "POST", "{method}");
        let body: Value = r.json().await.unwrap();
        assert_eq!(body["error"]["code"], -32000, "{body}");
        assert!(
            body["error"]["message"]
                .as_str()
                .unwrap()
                .starts_with("Method Not Allowed"),
            "{body}"
        );
        // An older protocol without a session is still told its session is missing.
        let r = http
            .request(method.clone(), &url)
            .header("accept", "text/event-stream")
            .header("mcp-protocol-version", "2025-11-25")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 400, "{method}");
    }
}

#[tokio::test]
async fn concurrent_replays_of_one_round_run_the_call_once_and_fail_none() {
    let server = Server::start(&[("TAVILY_API_KEY", "")]);
    let url = signed_url(&server, "tools", "t1", "a1");
    let state = first_round(&url, 1, "/srv/raced").await;
    let retries: Vec<_> = (0..5)
        .map(|i| {
            let (url, extra) = (url.clone(), answered(&state, accept("allow_once")));
            tokio::spawn(async move { delete_path(&url, 10 + i, "/srv/raced", extra).await })
        })
        .collect();
    let mut ran = 0;
    for retry in retries {
        let result = retry.await.unwrap();
        let text = result["content"][0]["text"].as_str().unwrap_or_default();
        assert!(!text.contains("internal"), "{result}");
        if result["isError"] == true {
            assert_eq!(result["_meta"]["denied"], "approval:used", "{result}");
        } else {
            ran += 1;
        }
    }
    assert_eq!(ran, 1, "the call ran once");
    let audit = get_json(&server.url("/api/tools/audit?toolName=delete_path")).await;
    let results = audit["audit"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["phase"] == "after")
        .count();
    assert_eq!(results, 1, "{audit}");
}
