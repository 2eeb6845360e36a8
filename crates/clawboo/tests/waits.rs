//! No caller can stall the others (SPEC §16): long-polls and approval waits are futures,
//! and each bound identity holds at most `CLAWBOO_MAX_WAITS` (16) of them at once; one more
//! is refused at once with `too_many_waits`. Real `clawboo serve`, real TCP, both protocol
//! families.

#![allow(clippy::unwrap_used)]

mod common;
mod http_support;

use std::time::{Duration, Instant};

use http_support::{Server, client, message_with_id, post, post_modern, signed_url};
use serde_json::{Value, json};

/// The default limit of waits one identity holds.
const MAX_WAITS: usize = 16;

/// The generous bound within which a request must answer while another identity holds
/// its waits (a stall would take the waits' 30 s); never a speed claim.
const ANSWERS_WITHIN: Duration = Duration::from_secs(10);

/// The arguments of a long-poll that waits up to 30 s for a post.
fn long_poll() -> Value {
    json!({"name": "team_chat_subscribe", "arguments": {"waitMs": 30000}})
}

fn is_too_many_waits(result: &Value) -> bool {
    result["isError"] == true && result["_meta"]["error"] == "too_many_waits"
}

/// Run `request` and assert it answered within [`ANSWERS_WITHIN`]; returns its value.
async fn answers_promptly<T>(what: &str, request: impl std::future::Future<Output = T>) -> T {
    let started = Instant::now();
    let answer = tokio::time::timeout(ANSWERS_WITHIN, request)
        .await
        .unwrap_or_else(|_| panic!("{what} did not answer within {ANSWERS_WITHIN:?}"));
    assert!(started.elapsed() < ANSWERS_WITHIN, "{what}");
    answer
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn six_hundred_long_polls_from_one_agent_leave_everyone_else_answering() {
    let server = Server::start(&[]);
    let alice = signed_url(&server, "teamchat", "red", "alice");
    let bob = signed_url(&server, "teamchat", "red", "bob");

    // 600 long-polls at once through alice's own signed URL, each a request of its own
    // (2026-07-28: no session, so the session cap does not apply).
    let (answered, mut answers) = tokio::sync::mpsc::unbounded_channel();
    for id in 0..600 {
        let (url, answered) = (alice.clone(), answered.clone());
        tokio::spawn(async move {
            let answer = post_modern(&client(), &url, id, "tools/call", long_poll()).await;
            let _sent = answered.send(answer.message["result"].clone());
        });
    }
    drop(answered);
    // All but alice's 16 are refused at once.
    let mut refused = 0;
    while refused < 600 - MAX_WAITS {
        let result = tokio::time::timeout(Duration::from_secs(60), answers.recv())
            .await
            .expect("the refusals did not come")
            .expect("a long-poll task failed");
        assert!(is_too_many_waits(&result), "{result}");
        refused += 1;
    }
    let refusal = last_refusal(&alice).await;
    assert!(is_too_many_waits(&refusal), "{refusal}");
    assert!(
        result_text(&refusal).contains("finish or cancel one"),
        "{refusal}"
    );

    // Meanwhile everyone else is served as usual: the board, the approvals list, another
    // agent's post.
    let board = answers_promptly("GET /api/board", async {
        client().get(server.url("/api/board")).send().await.unwrap()
    })
    .await;
    assert_eq!(board.status(), 200);
    let approvals = answers_promptly("GET /api/tools/approvals", async {
        client()
            .get(server.url("/api/tools/approvals"))
            .send()
            .await
            .unwrap()
    })
    .await;
    assert_eq!(approvals.status(), 200);
    let posted = answers_promptly(
        "bob's team_chat_post",
        post_modern(
            &client(),
            &bob,
            1,
            "tools/call",
            json!({"name": "team_chat_post", "arguments": {"text": "the build is green"}}),
        ),
    )
    .await;
    assert_ne!(
        posted.message["result"]["isError"], true,
        "{}",
        posted.message
    );

    // Bob's post ends alice's 16 waits, each with the post.
    for _ in 0..MAX_WAITS {
        let result = tokio::time::timeout(ANSWERS_WITHIN, answers.recv())
            .await
            .expect("a held long-poll did not see the post")
            .expect("a long-poll task failed");
        let page: Value = serde_json::from_str(result_text(&result)).unwrap();
        assert_eq!(page["posts"][0]["authorAgentId"], "bob", "{page}");
    }
    assert!(
        answers.recv().await.is_none(),
        "every long-poll answered once"
    );
}

/// One more long-poll by alice while she holds her 16: its refusal.
async fn last_refusal(alice: &str) -> Value {
    let answer = post_modern(&client(), alice, 9999, "tools/call", long_poll()).await;
    answer.message["result"].clone()
}

fn result_text(result: &Value) -> &str {
    result["content"][0]["text"].as_str().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sessions_long_polls_and_approval_waits_count_against_its_identity() {
    let server = Server::start(&[("TAVILY_API_KEY", "")]);
    let chat = signed_url(&server, "teamchat", "red", "carol");
    let tools = signed_url(&server, "tools", "red", "carol");
    let other = signed_url(&server, "teamchat", "blue", "carol");

    // A 2025-06-18 session: 17 long-polls in flight at once, as a client may send them.
    // Whichever comes last finds carol's 16 waits taken and is refused at once.
    let session = http_support::Session::open(&chat).await;
    let (answered, mut answers) = tokio::sync::mpsc::unbounded_channel();
    for id in 0..=MAX_WAITS as i64 {
        let (url, session_id, answered) =
            (session.url.clone(), session.id.clone(), answered.clone());
        tokio::spawn(async move {
            let body = json!({"jsonrpc": "2.0", "id": 100 + id, "method": "tools/call",
                              "params": long_poll()});
            let resp = post(&client(), &url, Some(&session_id), &body).await;
            let message = message_with_id(&resp.text().await.unwrap(), 100 + id);
            let _sent = answered.send(message["result"].clone());
        });
    }
    drop(answered);
    let refused = tokio::time::timeout(ANSWERS_WITHIN, answers.recv())
        .await
        .expect("the 17th long-poll was not refused at once")
        .unwrap();
    assert!(is_too_many_waits(&refused), "{refused}");
    assert!(
        result_text(&refused).contains("too many waits"),
        "{refused}"
    );
    // So is a call that would wait for approval, on carol's tools URL; the approval it
    // opened is abandoned.
    let deleted = post_modern(
        &client(),
        &tools,
        2,
        "tools/call",
        json!({"name": "delete_path", "arguments": {"path": "/srv/old"}}),
    )
    .await;
    let result = &deleted.message["result"];
    assert!(is_too_many_waits(result), "{result}");
    let approvals = http_support::get_json(&server.url("/api/tools/approvals?status=all")).await;
    let rows = approvals["approvals"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{approvals}");
    assert_eq!(rows[0]["status"], "expired", "{approvals}");

    // The same agent id on another team is another identity.
    let answer = answers_promptly(
        "carol's long-poll on blue",
        post_modern(
            &client(),
            &other,
            3,
            "tools/call",
            json!({"name": "team_chat_subscribe", "arguments": {"waitMs": 200}}),
        ),
    )
    .await;
    assert_ne!(
        answer.message["result"]["isError"], true,
        "{}",
        answer.message
    );

    // A post ends the 16; their places are free again.
    let dave = signed_url(&server, "teamchat", "red", "dave");
    post_modern(
        &client(),
        &dave,
        4,
        "tools/call",
        json!({"name": "team_chat_post", "arguments": {"text": "done here"}}),
    )
    .await;
    for _ in 0..MAX_WAITS {
        let result = tokio::time::timeout(ANSWERS_WITHIN, answers.recv())
            .await
            .expect("a held long-poll did not see the post")
            .unwrap();
        assert_ne!(result["isError"], true, "{result}");
        let page: Value = serde_json::from_str(result_text(&result)).unwrap();
        assert_eq!(page["posts"][0]["authorAgentId"], "dave", "{page}");
    }
    let again = post_modern(
        &client(),
        &chat,
        5,
        "tools/call",
        json!({"name": "team_chat_subscribe", "arguments": {"waitMs": 100}}),
    )
    .await;
    assert_ne!(
        again.message["result"]["isError"], true,
        "{}",
        again.message
    );
}
