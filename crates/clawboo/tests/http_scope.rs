//! Signed-scope attacks over real HTTP: only a URL this install signed for that server
//! binds a session; tampered, swapped, appended, unsigned, foreign-signed and
//! other-server URLs are refused at `initialize` (403, -32001), never served unbound, and
//! a bound session cannot read another team's tasks.

#![allow(clippy::unwrap_used)]

mod common;
mod http_support;

use http_support::{
    Server, Session, attach, client, create_task, initialize_body, post, signed_tasks_url,
};
use serde_json::{Value, json};

/// Assert that `initialize` at `url` is refused as a bad signature, and opens no session.
async fn assert_refused(url: &str) {
    let r = post(&client(), url, None, &initialize_body(1)).await;
    assert_eq!(r.status(), 403, "{url}");
    assert!(r.headers().get("mcp-session-id").is_none(), "{url}");
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["jsonrpc"], "2.0");
    assert_eq!(body["error"]["code"], -32001, "{url}: {body}");
    assert_eq!(
        body["error"]["message"],
        "invalid scope signature: mint a new URL with clawboo attach"
    );
}

/// The ids of the tasks a session's `list_tasks` (no arguments) returns.
async fn visible_ids(url: &str) -> Vec<String> {
    let mut s = Session::open(url).await;
    let listed = s.call_json("list_tasks", json!({})).await;
    let mut ids: Vec<String> = listed["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_str().unwrap().to_owned())
        .collect();
    ids.sort();
    ids
}

struct Board {
    server: Server,
    a: String,
    b: String,
    signed: String,
}

impl Board {
    async fn new() -> Board {
        let server = Server::start(&[]);
        let a = create_task(&server, "team A work", "team-a").await["id"]
            .as_str()
            .unwrap()
            .to_owned();
        let b = create_task(&server, "team B work", "team-b").await["id"]
            .as_str()
            .unwrap()
            .to_owned();
        let signed = signed_tasks_url(&server, "team-a", "alice");
        Board {
            server,
            a,
            b,
            signed,
        }
    }

    fn everything(&self) -> Vec<String> {
        let mut all = vec![self.a.clone(), self.b.clone()];
        all.sort();
        all
    }
}

#[tokio::test]
async fn signed_url_binds_and_hides_other_teams() {
    let board = Board::new().await;
    assert_eq!(visible_ids(&board.signed).await, vec![board.a.clone()]);
    let mut s = Session::open(&board.signed).await;
    // Asking for another team's list still answers with the bound team's.
    let listed = s.call_json("list_tasks", json!({"teamId": "team-b"})).await;
    assert_eq!(listed["tasks"].as_array().unwrap().len(), 1);
    assert_eq!(listed["tasks"][0]["id"], board.a.as_str());
    // Another team's task is answered exactly as a task that does not exist.
    let got = s.call("get_task", json!({"taskId": board.b})).await;
    assert_eq!(got["isError"], true);
    assert_eq!(
        got["content"][0]["text"],
        format!("not found: {}", board.b).as_str()
    );
    // Writes land in the bound team, and claims act as the bound agent.
    let created = s
        .call_json("create_task", json!({"title": "mine", "teamId": "team-b"}))
        .await;
    assert_eq!(created["task"]["teamId"], "team-a");
    let claimed = s
        .call_json(
            "claim_task",
            json!({"taskId": board.a, "assigneeAgentId": "mallory"}),
        )
        .await;
    assert_eq!(claimed["task"]["assigneeAgentId"], "alice");
}

#[tokio::test]
async fn tampered_swapped_appended_and_unsigned_urls_are_refused() {
    let board = Board::new().await;
    let (head, _sig) = board.signed.split_once("&scopeSig=").unwrap();
    for forged in [
        board
            .signed
            .replace("scopeTeamId=team-a", "scopeTeamId=team-b"),
        board
            .signed
            .replace("scopeAgentId=alice", "scopeAgentId=bob"),
        format!("{}&delegate=1", board.signed),
        format!("{}&scopeTeamId=team-b", board.signed),
        head.to_owned(),
        format!("{head}&scopeSig=00"),
    ] {
        assert_ne!(forged, board.signed);
        assert_refused(&forged).await;
    }
    // The refusals changed nothing: the signed URL still binds, and no task was made.
    assert_eq!(visible_ids(&board.signed).await, vec![board.a.clone()]);
    assert_eq!(
        visible_ids(&board.server.url("/api/mcp/tasks")).await,
        board.everything()
    );
}

#[tokio::test]
async fn a_signature_for_one_server_opens_no_other() {
    let board = Board::new().await;
    // Tasks and memory read the same parameters; the server's name is in the signature.
    for other in ["memory", "tools", "teamchat"] {
        let moved = board
            .signed
            .replace("/api/mcp/tasks?", &format!("/api/mcp/{other}?"));
        assert_refused(&moved).await;
    }
    let unbound = attach(
        &board.server.db,
        &["--server", "tasks", "--url", &board.server.base],
    );
    let unbound = unbound["structured"]["clawboo-tasks"]["url"]
        .as_str()
        .unwrap();
    let prefix = format!("{}/api/mcp/tasks?scopeSig=", board.server.base);
    assert!(
        unbound.starts_with(&prefix) && !unbound.contains('&'),
        "{unbound}"
    );
    assert_eq!(visible_ids(unbound).await, board.everything());
    assert_refused(&unbound.replace("/api/mcp/tasks?", "/api/mcp/memory?")).await;
}

#[tokio::test]
async fn signature_from_another_install_is_refused() {
    let board = Board::new().await;
    let other_db = common::TestDb::new();
    let config = attach(
        &other_db,
        &[
            "--server",
            "tasks",
            "--team",
            "team-a",
            "--agent",
            "alice",
            "--url",
            &board.server.base,
        ],
    );
    let foreign = config["structured"]["clawboo-tasks"]["url"]
        .as_str()
        .unwrap();
    assert_ne!(foreign, board.signed);
    assert_refused(foreign).await;
}

#[tokio::test]
async fn http_config_signs_unbound_urls_like_the_cli() {
    let server = Server::start(&[]);
    let v: Value = client()
        .get(server.url("/api/mcp/config?server=memory"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let url = v["config"]["structured"]["clawboo-memory"]["url"]
        .as_str()
        .unwrap();
    assert!(url.contains("/api/mcp/memory?scopeSig="), "{url}");
    let cli = attach(&server.db, &["--server", "memory", "--url", &server.base]);
    assert_eq!(cli["structured"]["clawboo-memory"]["url"], url);
    // Deterministic: minting again gives the same URL.
    let again = attach(&server.db, &["--server", "memory", "--url", &server.base]);
    assert_eq!(again, cli);
}

#[tokio::test]
async fn http_config_mints_the_same_signed_url_as_the_cli() {
    let board = Board::new().await;
    let v: Value = http_support::client()
        .get(
            board
                .server
                .url("/api/mcp/config?server=tasks&scopeTeamId=team-a&scopeAgentId=alice"),
        )
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(v["ok"], true);
    assert_eq!(
        v["config"]["structured"]["clawboo-tasks"]["url"],
        board.signed.as_str()
    );
    assert_eq!(
        v["config"]["snippet"],
        format!(
            "claude mcp add --transport http clawboo-tasks '{}'",
            board.signed
        )
        .as_str()
    );
}

#[tokio::test]
async fn bound_teamchat_session_cannot_post_as_another_agent() {
    let server = Server::start(&[]);
    let config = attach(
        &server.db,
        &[
            "--server",
            "teamchat",
            "--team",
            "red",
            "--agent",
            "ada",
            "--url",
            &server.base,
        ],
    );
    let url = config["structured"]["clawboo-teamchat"]["url"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        url.contains("roomTeamId=red&postAuthorAgentId=ada&scopeSig="),
        "{url}"
    );
    let mut s = Session::open(&url).await;
    let posted = s
        .call_json(
            "team_chat_post",
            json!({"text": "it was me", "authorAgentId": "mallory", "teamId": "blue"}),
        )
        .await;
    assert_eq!(posted["posted"]["authorAgentId"], "ada");
    assert_eq!(posted["posted"]["roomId"], "team:red");
    // Re-attributed, appended-delegate or half-dropped URLs are refused.
    let (room_only, _) = url.split_once("&postAuthorAgentId=").unwrap();
    for forged in [
        url.replace("postAuthorAgentId=ada", "postAuthorAgentId=mallory"),
        format!("{url}&delegate=1"),
        format!("{room_only}&{}", url.rsplit_once('&').unwrap().1),
    ] {
        assert_refused(&forged).await;
    }
}

#[tokio::test]
async fn bound_memory_session_never_sees_another_teams_facts() {
    let server = Server::start(&[("CLAWBOO_EMBEDDINGS", "builtin")]);
    let mut unbound = Session::open(&server.url("/api/mcp/memory")).await;
    for (team, title) in [("red", "red plan"), ("blue", "blue plan")] {
        unbound
            .call_json(
                "memory_save",
                json!({"title": title, "content": format!("the {team} launch plan"), "scopeTeamId": team}),
            )
            .await;
    }
    let config = attach(
        &server.db,
        &[
            "--server",
            "memory",
            "--team",
            "red",
            "--agent",
            "ada",
            "--url",
            &server.base,
        ],
    );
    let url = config["structured"]["clawboo-memory"]["url"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(url.contains("scopeSig="), "{url}");
    let mut bound = Session::open(&url).await;
    for mode in ["fts", "vector", "hybrid"] {
        let found = bound
            .call_json(
                "memory_search",
                json!({"query": "launch plan", "mode": mode, "scopeTeamId": "blue"}),
            )
            .await;
        let titles: Vec<&str> = found["results"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["fact"]["title"].as_str().unwrap())
            .collect();
        assert_eq!(titles, ["red plan"], "{mode}: {found}");
    }
    let browsed = bound
        .call_json("memory_browse", json!({"scopeTeamId": "blue"}))
        .await;
    assert_eq!(browsed["facts"].as_array().unwrap().len(), 1, "{browsed}");
    // A save is tagged with the bound team whatever the arguments say.
    let saved = bound
        .call_json(
            "memory_save",
            json!({"title": "t", "content": "c", "scopeTeamId": "blue"}),
        )
        .await;
    assert_eq!(saved["fact"]["teamId"], "red", "{saved}");
    // A tampered URL is refused, and so is the red URL taken to the tasks server.
    assert_refused(&url.replace("scopeTeamId=red", "scopeTeamId=blue")).await;
    assert_refused(&url.replace("/api/mcp/memory?", "/api/mcp/tasks?")).await;
}
