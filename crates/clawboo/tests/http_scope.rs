//! Signed-scope attacks over real HTTP: only a URL this install signed binds a session;
//! tampered, swapped, appended, unsigned and foreign-signed URLs are served unbound, and a
//! bound session cannot read another team's tasks.

#![allow(clippy::unwrap_used)]

mod http_support;

use http_support::{Server, Session, attach, create_task};
use serde_json::{Value, json};

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
        let config = attach(
            &server.db,
            &[
                "--server",
                "tasks",
                "--team",
                "team-a",
                "--agent",
                "alice",
                "--url",
                &server.base,
            ],
        );
        let signed = config["structured"]["clawboo-tasks"]["url"]
            .as_str()
            .unwrap()
            .to_owned();
        assert!(signed.contains("scopeSig="), "{signed}");
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
async fn tampered_team_is_served_unbound() {
    let board = Board::new().await;
    let tampered = board
        .signed
        .replace("scopeTeamId=team-a", "scopeTeamId=team-b");
    assert_ne!(tampered, board.signed);
    assert_eq!(visible_ids(&tampered).await, board.everything());
}

#[tokio::test]
async fn swapped_agent_is_served_unbound() {
    let board = Board::new().await;
    let swapped = board
        .signed
        .replace("scopeAgentId=alice", "scopeAgentId=bob");
    assert_ne!(swapped, board.signed);
    assert_eq!(visible_ids(&swapped).await, board.everything());
}

#[tokio::test]
async fn appended_delegate_is_served_unbound() {
    let board = Board::new().await;
    let appended = format!("{}&delegate=1", board.signed);
    assert_eq!(visible_ids(&appended).await, board.everything());
}

#[tokio::test]
async fn missing_signature_is_served_unbound() {
    let board = Board::new().await;
    let (head, _sig) = board.signed.split_once("&scopeSig=").unwrap();
    assert_eq!(visible_ids(head).await, board.everything());
}

#[tokio::test]
async fn signature_from_another_install_is_served_unbound() {
    let board = Board::new().await;
    let other_dir = tempfile::tempdir().unwrap();
    let other_db = other_dir.path().join("other.db");
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
    assert_eq!(visible_ids(foreign).await, board.everything());
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
    // Re-attributed or appended-delegate URLs bind nobody: a post then needs identity
    // in its arguments.
    for forged in [
        url.replace("postAuthorAgentId=ada", "postAuthorAgentId=mallory"),
        format!("{url}&delegate=1"),
    ] {
        let mut s = Session::open(&forged).await;
        let refused = s.call("team_chat_post", json!({"text": "x"})).await;
        assert_eq!(refused["isError"], true, "{forged}");
        let tools = s.request("tools/list", json!({})).await;
        let names: Vec<&str> = tools["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap())
            .collect();
        assert!(!names.contains(&"team_delegate"), "{forged}: {names:?}");
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
    // A tampered URL is served unbound: its scope arguments apply again.
    let mut forged = Session::open(&url.replace("scopeTeamId=red", "scopeTeamId=blue")).await;
    let found = forged
        .call_json(
            "memory_search",
            json!({"query": "launch plan", "scopeTeamId": "blue"}),
        )
        .await;
    assert!(
        found["results"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["fact"]["title"] != "red plan"),
        "{found}"
    );
}
