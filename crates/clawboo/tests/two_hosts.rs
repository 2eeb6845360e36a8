//! Two hosts on one PostgreSQL database (SPEC §13): on each, a `clawboo serve` and stdio
//! servers beside it. One winner per claim and contiguous chat seqs across hosts; an
//! approval decided on one host, a post made on one, and a move made through one wake the
//! waiting call, the long-poll and the live feed on the other within a second.
//!
//! The hosts share the loopback interface, each with a home and temporary folder of its
//! own. Separate network namespaces were tried and left out: they need root, a serve
//! bound off loopback needs the access gate or `CLAWBOO_ALLOW_INSECURE` and meets the
//! per-peer rate limit, and the database needs a forwarder into each namespace; while
//! the filesystem stays shared anyway, they would prove little more than this does.
//! PostgreSQL only: elsewhere each test returns at once with a notice.

#![allow(clippy::unwrap_used)]

mod common;
mod http_support;
mod multi_host;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Barrier;
use std::sync::mpsc::channel;
use std::time::{Duration, Instant};

use common::{TestDb, first_text, not_a_postgres_run, seed_subtasks, sql_quote};
use http_support::client;
use multi_host::{Host, McpClient, TASKS_BIN, TEAMCHAT_BIN, TOOLS_BIN, ok_json, stored_posts};
use reqwest::Method;
use serde_json::{Value, json};

/// How soon a decision, a post or a move made on one host must reach the other.
const WAKE_WITHIN: Duration = Duration::from_secs(1);

/// A fresh database and two hosts on it; `None` (after a notice) when this is no
/// PostgreSQL run.
fn two_hosts() -> Option<(TestDb, [Host; 2])> {
    if not_a_postgres_run() {
        return None;
    }
    let db = TestDb::new();
    let hosts = [Host::start(&db, "a"), Host::start(&db, "b")];
    Some((db, hosts))
}

/// How a racer claims: each task by id, in its own order, or `claim_next` until nothing
/// is ready.
#[derive(Clone, Copy)]
enum Claims {
    ById,
    Next,
}

#[test]
fn claims_from_both_hosts_have_exactly_one_winner_per_task() {
    const TASKS: usize = 96;
    let Some((db, hosts)) = two_hosts() else {
        return;
    };
    let McpClient::Stdio(mut setup) = hosts[0].stdio(TASKS_BIN, &[]) else {
        unreachable!()
    };
    let ids = seed_subtasks(&mut setup, TASKS);
    drop(setup);

    // On each host: an HTTP session and a stdio process per way of claiming.
    let mut racers = Vec::new();
    for host in &hosts {
        for claims in [Claims::ById, Claims::Next] {
            for via in ["http", "stdio"] {
                let kind = match claims {
                    Claims::ById => "task",
                    Claims::Next => "next",
                };
                racers.push((host, via, claims, format!("{}-{via}-{kind}", host.name)));
            }
        }
    }
    let (count, start) = (racers.len(), Barrier::new(racers.len()));
    let wins: Vec<(String, String, Value)> = std::thread::scope(|scope| {
        let handles: Vec<_> = racers
            .iter()
            .enumerate()
            .map(|(r, (host, via, claims, label))| {
                let (start, ids) = (&start, &ids);
                scope.spawn(move || {
                    // Stdio racers are bound by flag; HTTP sessions name themselves.
                    let mut c = match *via {
                        "http" => host.http("/api/mcp/tasks"),
                        _ => host.stdio(TASKS_BIN, &["--agent", label]),
                    };
                    let mut order = ids.clone();
                    order.rotate_left(r * TASKS / count);
                    if r % 2 == 1 {
                        order.reverse();
                    }
                    start.wait();
                    let mut wins = Vec::new();
                    match claims {
                        Claims::ById => {
                            for id in order {
                                let result = c.call(
                                    "claim_task",
                                    json!({"taskId": id, "assigneeAgentId": label}),
                                );
                                match ok_json(&result) {
                                    Some(won) => {
                                        wins.push((id, label.clone(), won["task"].clone()))
                                    }
                                    None => {
                                        assert_eq!(result["_meta"]["error"], "conflict", "{result}")
                                    }
                                }
                            }
                        }
                        Claims::Next => {
                            for _ in 0..=TASKS {
                                let won =
                                    c.call_ok("claim_next", json!({"assigneeAgentId": label}));
                                if won["task"].is_null() {
                                    assert_eq!(won["reason"], "nothing_ready", "{won}");
                                    break;
                                }
                                let id = won["task"]["id"].as_str().unwrap().to_owned();
                                wins.push((id, label.clone(), won["task"].clone()));
                            }
                        }
                    }
                    wins
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });

    let mut winners: BTreeMap<String, Vec<(String, Value)>> = BTreeMap::new();
    for (id, label, task) in wins {
        winners.entry(id).or_default().push((label, task));
    }
    assert_eq!(winners.len(), TASKS, "every task has a winner");
    for (id, won) in &winners {
        assert_eq!(won.len(), 1, "task {id} was won by {won:?}");
    }
    for host in ["a-", "b-"] {
        assert!(
            winners.values().any(|w| w[0].0.starts_with(host)),
            "host {host} won nothing"
        );
    }
    // The database names each winner, with the lease and fencing token it was told.
    for (id, won) in &winners {
        let (label, task) = &won[0];
        assert_eq!(task["assigneeAgentId"], label.as_str());
        let row = db.query_row(&format!(
            "SELECT status, assignee_agent_id, claim_token, lease_expires_at FROM tasks WHERE id = {}",
            sql_quote(id)
        ));
        assert_eq!(row[0].as_deref(), Some("in_progress"), "{id}");
        assert_eq!(row[1].as_deref(), Some(label.as_str()), "{id}");
        assert_eq!(row[2], Some(task["claimToken"].to_string()), "{id}: {task}");
        assert_eq!(
            row[3],
            Some(task["leaseExpiresAt"].to_string()),
            "{id}: {task}"
        );
    }
}

/// The one pending approval on `host` that is not in `seen`, polled for (bounded).
fn new_pending_approval(host: &Host, seen: &[String]) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (status, listed) = host.rest(Method::GET, "/api/tools/approvals", None);
        assert_eq!(status, 200, "{listed}");
        let fresh = listed["approvals"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|a| a["status"] == "pending")
            .map(|a| a["id"].as_str().unwrap().to_owned())
            .find(|id| !seen.contains(id));
        if let Some(id) = fresh {
            return id;
        }
        assert!(
            Instant::now() < deadline,
            "no pending approval within a minute"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Decide `approval` on `decider` while `waiter` runs `call`, a `delete_path` parked on
/// it; returns the call's result and how long it took to answer once the decision was
/// made.
fn decide_across_hosts(
    waiter: McpClient,
    decider: &Host,
    seen: &[String],
    decision: &str,
) -> (String, Value, Duration) {
    let (sent, answered) = channel();
    let waiting = std::thread::spawn(move || {
        let mut waiter = waiter;
        let result = waiter.call("delete_path", json!({"path": "/srv/across"}));
        sent.send(result).unwrap();
        waiter
    });
    let approval = new_pending_approval(decider, seen);
    let (status, resolved) = decider.rest(
        Method::POST,
        &format!("/api/tools/approvals/{approval}/resolve"),
        Some(json!({"decision": decision})),
    );
    assert_eq!(status, 200, "{resolved}");
    let decided = Instant::now();
    let result = answered
        .recv_timeout(Duration::from_secs(60))
        .expect("the waiting call never answered");
    let took = decided.elapsed();
    drop(waiting.join().unwrap());
    (approval, result, took)
}

#[test]
fn an_approval_decided_on_one_host_wakes_the_call_waiting_on_the_other() {
    let Some((_db, [a, b])) = two_hosts() else {
        return;
    };

    // An HTTP session on A waits; the operator allows it through B's REST API.
    let waiter = a.http("/api/mcp/tools");
    let (first, result, took) = decide_across_hosts(waiter, &b, &[], "allow_once");
    assert_ne!(result["isError"], json!(true), "{result}");
    assert!(first_text(&result).contains("/srv/across"), "{result}");
    assert_eq!(result["_meta"]["approvalId"], first.as_str());
    assert!(
        took < WAKE_WITHIN,
        "allowed on B, A's call answered after {took:?}"
    );

    // A stdio agent on B waits; the operator denies it through A's REST API.
    let waiter = b.stdio(TOOLS_BIN, &["--agent", "b-agent"]);
    let (second, result, took) = decide_across_hosts(waiter, &a, &[first], "deny");
    assert_eq!(result["isError"], json!(true), "{result}");
    assert_eq!(result["_meta"]["denied"], "approval:deny", "{result}");
    assert_eq!(result["_meta"]["approvalId"], second.as_str());
    assert!(
        took < WAKE_WITHIN,
        "denied on A, B's call answered after {took:?}"
    );
}

/// An SSE `marks` reader of one host's live feed.
struct Feed {
    runtime: tokio::runtime::Runtime,
    events: reqwest::Response,
    buffer: String,
}

impl Feed {
    fn open(host: &Host) -> Feed {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let events = runtime
            .block_on(client().get(host.server.url("/api/events")).send())
            .unwrap();
        assert_eq!(events.status(), 200);
        Feed {
            runtime,
            events,
            buffer: String::new(),
        }
    }

    /// The next `marks` event within `within`, or `None`.
    fn next(&mut self, within: Duration) -> Option<Value> {
        let Feed {
            runtime,
            events,
            buffer,
        } = self;
        runtime.block_on(async {
            tokio::time::timeout(within, async {
                loop {
                    if let Some(end) = buffer.find("\n\n") {
                        let frame: String = buffer.drain(..end + 2).collect();
                        if frame.lines().any(|l| l == "event: marks") {
                            let data = frame.lines().find_map(|l| l.strip_prefix("data: "));
                            return serde_json::from_str(data.unwrap()).unwrap();
                        }
                        continue;
                    }
                    let chunk = events.chunk().await.unwrap().expect("the feed ended");
                    buffer.push_str(std::str::from_utf8(&chunk).unwrap());
                }
            })
            .await
            .ok()
        })
    }

    /// Wait (up to [`WAKE_WITHIN`]) for marks whose board differs from `before`'s.
    fn board_moved_from(&mut self, before: &Value, what: &str) -> Value {
        let deadline = Instant::now() + WAKE_WITHIN;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let marks = self.next(left).unwrap_or_else(|| {
                panic!("A's live feed did not show {what} within {WAKE_WITHIN:?}")
            });
            if marks["board"] != before["board"] {
                return marks;
            }
        }
    }
}

#[test]
fn the_live_feed_on_one_host_shows_a_move_made_through_the_other() {
    let Some((_db, [a, b])) = two_hosts() else {
        return;
    };
    let mut feed = Feed::open(&a);
    let first = feed.next(Duration::from_secs(60)).expect("the first marks");

    // A task created through B's REST API.
    let (status, created) = b.rest(
        Method::POST,
        "/api/board",
        Some(json!({"title": "made on B", "teamId": "t"})),
    );
    assert_eq!(status, 201, "{created}");
    let second = feed.board_moved_from(&first, "a task created on B");
    for area in ["chat", "memory", "approvals", "audit"] {
        assert_eq!(second[area], first[area], "{area} did not change");
    }

    // Then moved (claimed) through an MCP session on B.
    let id = created["task"]["id"].as_str().unwrap();
    b.http("/api/mcp/tasks").call_ok(
        "claim_task",
        json!({"taskId": id, "assigneeAgentId": "b-agent"}),
    );
    feed.board_moved_from(&second, "a claim made on B");
}

/// One poster in the chat race: where it posts from and what it was told.
struct Poster {
    label: String,
    seqs: Vec<i64>,
    texts: Vec<String>,
}

#[test]
fn chat_seqs_stay_contiguous_under_posters_on_both_hosts_and_long_polls_wake_across() {
    const POSTS_EACH: usize = 25;
    let Some((db, hosts)) = two_hosts() else {
        return;
    };
    // On each host: an HTTP session, a stdio process and the operator over REST.
    let surfaces: Vec<(&Host, &str)> = hosts
        .iter()
        .flat_map(|h| [(h, "http"), (h, "stdio"), (h, "rest")])
        .collect();
    let start = Barrier::new(surfaces.len());
    let posters: Vec<Poster> = std::thread::scope(|scope| {
        let handles: Vec<_> = surfaces
            .iter()
            .map(|&(host, via)| {
                let start = &start;
                scope.spawn(move || {
                    let label = format!("{}-{via}", host.name);
                    let mut c = match via {
                        "http" => Some(host.http("/api/mcp/teamchat")),
                        "stdio" => Some(host.stdio(TEAMCHAT_BIN, &[])),
                        _ => None,
                    };
                    start.wait();
                    let mut poster = Poster {
                        label: label.clone(),
                        seqs: Vec::new(),
                        texts: Vec::new(),
                    };
                    for n in 0..POSTS_EACH {
                        let text = format!("{label} post {n}");
                        let posted = match c.as_mut() {
                            Some(c) => c.call_ok(
                                "team_chat_post",
                                json!({"text": text, "authorAgentId": label, "teamId": "race"}),
                            ),
                            None => {
                                let (status, posted) = host.rest(
                                    Method::POST,
                                    "/api/team-chat",
                                    Some(json!({"teamId": "race", "text": text})),
                                );
                                assert_eq!(status, 201, "{posted}");
                                posted
                            }
                        };
                        poster.seqs.push(posted["posted"]["seq"].as_i64().unwrap());
                        poster.texts.push(text);
                    }
                    poster
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });

    let total = (surfaces.len() * POSTS_EACH) as i64;
    let all: BTreeSet<i64> = posters.iter().flat_map(|p| p.seqs.clone()).collect();
    assert_eq!(
        all,
        (1..=total).collect(),
        "seqs must be 1..={total} with no gap or duplicate"
    );
    for p in &posters {
        assert!(
            p.seqs.windows(2).all(|w| w[0] < w[1]),
            "{}: {:?}",
            p.label,
            p.seqs
        );
    }
    // The stored room holds each acknowledged post at the seq its poster was told.
    let stored = stored_posts(&db, "race");
    assert_eq!(stored.len(), total as usize);
    for p in &posters {
        for (seq, text) in p.seqs.iter().zip(&p.texts) {
            assert_eq!(stored.get(seq), Some(text), "{}: seq {seq}", p.label);
        }
    }

    // A long-poll on A (an HTTP session) wakes on a post made through B's REST API, and
    // one on B (a stdio process) on a post made through A's MCP endpoint.
    let [a, b] = &hosts;
    let mut head = total;
    for (waiter, poster) in [
        (a.http("/api/mcp/teamchat"), None),
        (b.stdio(TEAMCHAT_BIN, &[]), Some(a)),
    ] {
        let (sent, answered) = channel();
        let since = head;
        let polling = std::thread::spawn(move || {
            let mut waiter = waiter;
            let page = waiter.call_ok(
                "team_chat_subscribe",
                json!({"teamId": "race", "authorAgentId": "reader", "sinceSeq": since, "waitMs": 20000}),
            );
            sent.send(page).unwrap();
        });
        // Let the call find nothing new and park before the post.
        std::thread::sleep(Duration::from_millis(500));
        assert!(
            answered.try_recv().is_err(),
            "the long-poll answered before any post"
        );
        let posted = match poster {
            None => {
                let (status, posted) = b.rest(
                    Method::POST,
                    "/api/team-chat",
                    Some(json!({"teamId": "race", "text": "wake up, A"})),
                );
                assert_eq!(status, 201, "{posted}");
                posted
            }
            Some(host) => host.http("/api/mcp/teamchat").call_ok(
                "team_chat_post",
                json!({"text": "wake up, B", "authorAgentId": "a-http", "teamId": "race"}),
            ),
        };
        let acknowledged = Instant::now();
        let seq = posted["posted"]["seq"].as_i64().unwrap();
        let page = answered
            .recv_timeout(Duration::from_secs(30))
            .expect("the long-poll never answered");
        let took = acknowledged.elapsed();
        polling.join().unwrap();
        let seqs: Vec<i64> = page["posts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["seq"].as_i64().unwrap())
            .collect();
        assert_eq!(seqs, vec![seq], "{page}");
        assert!(
            took < WAKE_WITHIN,
            "the long-poll answered {took:?} after the post"
        );
        head = seq;
    }
}
