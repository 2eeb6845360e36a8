//! Contention across mixed processes on one database file: stdio bins and two real
//! `clawboo serve` processes (over their MCP endpoints, and REST for operator posts) race
//! together. Claims: exactly one winner per task, counted across every client, and the
//! database agrees. Caps: the child cap and the root-rate cap are never exceeded by one when
//! many processes create at the edge. Posts: per-room seqs are 1..N with no gap or duplicate
//! and every acknowledged post is stored as acknowledged. (`claim_race.rs` covers stdio-only
//! claims.)

#![allow(clippy::unwrap_used)]

mod common;
mod http_support;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Barrier};
use std::time::Instant;

use clawboo_mcp::tasks::CLAIM_CONFLICT;
use clawboo_store::board::{CreatePolicy, MAX_CHILDREN, MAX_ROOTS_PER_WINDOW, NewTask, Status};
use common::{StdioClient, TestDb, first_text, sql_quote};
use http_support::{Server, Session, client, message_with_id, post};
use serde_json::{Value, json};

const TASKS_BIN: &str = env!("CARGO_BIN_EXE_clawboo-mcp-tasks");
const TEAMCHAT_BIN: &str = env!("CARGO_BIN_EXE_clawboo-mcp-teamchat");
/// Requests each client keeps in flight at once (the same over stdio and HTTP, so both
/// surfaces race at comparable rates).
const IN_FLIGHT: usize = 8;

/// A tool call: its name and arguments.
type Call = (&'static str, Value);

/// One racing client and the calls it makes.
struct Racer {
    label: String,
    via: Via,
    calls: Vec<Call>,
}

enum Via {
    /// A stdio bin with these arguments (after `--db`); [`IN_FLIGHT`] calls pipelined.
    Stdio(&'static str, Vec<String>),
    /// An MCP session at this URL; [`IN_FLIGHT`] calls in flight at a time.
    Http(String),
    /// REST operator posts to this server (`POST /api/team-chat`); the calls' arguments
    /// are the request bodies.
    RestChat(String),
}

/// Two `clawboo serve` processes on `db`.
fn servers(db: &TestDb) -> [Server; 2] {
    [
        Server::start_on(db, "127.0.0.1:0", &[]),
        Server::start_on(db, "127.0.0.1:0", &[]),
    ]
}

async fn http_calls(session: Session, calls: Vec<Call>) -> Vec<Value> {
    let session = Arc::new(session);
    let mut results = vec![Value::Null; calls.len()];
    let mut pending = calls.into_iter().enumerate();
    let mut set = tokio::task::JoinSet::new();
    let mut spawn_next = |set: &mut tokio::task::JoinSet<(usize, Value)>| {
        let Some((n, (tool, args))) = pending.next() else {
            return;
        };
        let session = session.clone();
        set.spawn(async move {
            let id = 1000 + n as i64;
            let msg = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                "params": {"name": tool, "arguments": args}});
            let resp = post(&session.http, &session.url, Some(&session.id), &msg).await;
            assert_eq!(resp.status(), 200);
            let answer = message_with_id(&resp.text().await.unwrap(), id);
            assert!(answer.get("error").is_none(), "{tool}: {answer}");
            (n, answer["result"].clone())
        });
    };
    for _ in 0..IN_FLIGHT {
        spawn_next(&mut set);
    }
    while let Some(done) = set.join_next().await {
        let (n, result) = done.unwrap();
        results[n] = result;
        spawn_next(&mut set);
    }
    results
}

/// REST operator posts; each result is `{posted}` (as an MCP post's text would be).
async fn rest_posts(base: String, bodies: Vec<Call>) -> Vec<Value> {
    let http = client();
    let mut results = Vec::new();
    for (_, body) in bodies {
        let resp = http
            .post(format!("{base}/api/team-chat"))
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 201);
        let posted: Value = resp.json().await.unwrap();
        results.push(json!({"content": [{"type": "text", "text": posted.to_string()}]}));
    }
    results
}

/// Start every racer, let them all go at once, and return each one's results (the tool
/// `result` objects, in call order) by label.
fn race(db: &TestDb, racers: Vec<Racer>) -> Vec<(String, Vec<Call>, Vec<Value>)> {
    let stdio_count = racers
        .iter()
        .filter(|r| matches!(r.via, Via::Stdio(..)))
        .count();
    let barrier = Arc::new(Barrier::new(stdio_count + 1));
    let (stdio, remote): (Vec<Racer>, Vec<Racer>) = racers
        .into_iter()
        .partition(|r| matches!(r.via, Via::Stdio(..)));
    std::thread::scope(|scope| {
        let stdio_handles: Vec<_> = stdio
            .into_iter()
            .map(|racer| {
                let barrier = barrier.clone();
                scope.spawn(move || {
                    let Via::Stdio(bin, args) = &racer.via else {
                        unreachable!()
                    };
                    let args: Vec<&str> = args.iter().map(String::as_str).collect();
                    let mut c = StdioClient::spawn(bin, db, &args);
                    c.initialize();
                    barrier.wait();
                    let send = |c: &mut StdioClient, n: usize| {
                        let (tool, args) = &racer.calls[n];
                        c.send(
                            &json!({"jsonrpc": "2.0", "id": 1000 + n, "method": "tools/call",
                            "params": {"name": tool, "arguments": args}}),
                        );
                    };
                    let count = racer.calls.len();
                    for n in 0..count.min(IN_FLIGHT) {
                        send(&mut c, n);
                    }
                    let results = (0..count)
                        .map(|n| {
                            let answer = c.recv_id(&json!(1000 + n));
                            if n + IN_FLIGHT < count {
                                send(&mut c, n + IN_FLIGHT);
                            }
                            assert!(answer.get("error").is_none(), "{answer}");
                            answer["result"].clone()
                        })
                        .collect();
                    assert_eq!(c.close(), Some(0));
                    (racer.label, racer.calls, results)
                })
            })
            .collect();
        let remote_handle = scope.spawn(move || {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap();
            // Sessions are opened before the start, like the stdio processes.
            let sessions: Vec<Option<Session>> = runtime.block_on(async {
                let mut sessions = Vec::new();
                for racer in &remote {
                    sessions.push(match &racer.via {
                        Via::Http(url) => Some(Session::open(url).await),
                        _ => None,
                    });
                }
                sessions
            });
            barrier.wait();
            runtime.block_on(async {
                let mut set = tokio::task::JoinSet::new();
                for (i, (racer, session)) in remote.into_iter().zip(sessions).enumerate() {
                    set.spawn(async move {
                        let results = match (racer.via, session) {
                            (Via::Http(_), Some(session)) => {
                                http_calls(session, racer.calls.clone()).await
                            }
                            (Via::RestChat(base), _) => rest_posts(base, racer.calls.clone()).await,
                            _ => unreachable!("stdio racers run on threads"),
                        };
                        (i, (racer.label, racer.calls, results))
                    });
                }
                let mut out = Vec::new();
                while let Some(done) = set.join_next().await {
                    out.push(done.unwrap());
                }
                out.sort_by_key(|(i, _)| *i);
                out.into_iter().map(|(_, r)| r).collect::<Vec<_>>()
            })
        });
        let mut all: Vec<_> = stdio_handles
            .into_iter()
            .map(|h| h.join().unwrap())
            .collect();
        all.extend(remote_handle.join().unwrap());
        all
    })
}

fn succeeded(result: &Value) -> Option<Value> {
    (result["isError"] != json!(true))
        .then(|| serde_json::from_str(first_text(result)).expect("result text is JSON"))
}

/// `n` stdio racers then `m` HTTP racers per server, all on `endpoint`, with calls from
/// `calls(label)`.
fn mixed(
    servers: &[Server; 2],
    bin: &'static str,
    endpoint: &str,
    stdio: usize,
    http_per_server: usize,
    calls: impl Fn(usize, &str) -> Vec<Call>,
    stdio_args: impl Fn(&str) -> Vec<String>,
) -> Vec<Racer> {
    let mut racers = Vec::new();
    for i in 0..stdio {
        let label = format!("stdio-{i}");
        racers.push(Racer {
            calls: calls(racers.len(), &label),
            via: Via::Stdio(bin, stdio_args(&label)),
            label,
        });
    }
    for (s, server) in servers.iter().enumerate() {
        for i in 0..http_per_server {
            let label = format!("http-{s}-{i}");
            racers.push(Racer {
                calls: calls(racers.len(), &label),
                via: Via::Http(server.url(endpoint)),
                label,
            });
        }
    }
    racers
}

#[test]
fn claims_from_stdio_and_http_have_exactly_one_winner_per_task() {
    const TASKS: usize = 120;
    let db = TestDb::new();
    let store = db.open_store();
    let ids: Vec<String> = (0..TASKS)
        .map(|i| {
            store
                .create_task(NewTask::titled(format!("task {i}")), CreatePolicy::Uncapped)
                .unwrap()
                .id
        })
        .collect();
    drop(store);
    let servers = servers(&db);
    // Every client claims every task, each in its own order. Stdio agents are bound by the
    // spawner's flag; HTTP sessions are unbound and name themselves in the arguments.
    let racers = mixed(
        &servers,
        TASKS_BIN,
        "/api/mcp/tasks",
        3,
        2,
        |r, label| {
            let mut order = ids.clone();
            order.rotate_left(r * TASKS / 7);
            if r % 2 == 1 {
                order.reverse();
            }
            order
                .into_iter()
                .map(|id| {
                    (
                        "claim_task",
                        json!({"taskId": id, "assigneeAgentId": label}),
                    )
                })
                .collect()
        },
        |label| vec!["--agent".into(), label.into()],
    );
    let clients = racers.len();
    let started = Instant::now();
    let outcomes = race(&db, racers);
    let elapsed = started.elapsed();

    let mut winners: HashMap<String, Vec<String>> = HashMap::new();
    let mut attempts = 0;
    for (label, calls, results) in &outcomes {
        for ((_, args), result) in calls.iter().zip(results) {
            attempts += 1;
            let id = args["taskId"].as_str().unwrap();
            match succeeded(result) {
                Some(answer) => {
                    assert_eq!(answer["task"]["assigneeAgentId"], label.as_str());
                    winners
                        .entry(id.to_owned())
                        .or_default()
                        .push(label.clone());
                }
                None => {
                    assert_eq!(first_text(result), CLAIM_CONFLICT, "{result}");
                    assert_eq!(result["_meta"]["error"], "conflict");
                }
            }
        }
    }
    assert_eq!(attempts, clients * TASKS);
    assert_eq!(winners.len(), TASKS, "every task has a winner");
    for (id, who) in &winners {
        assert_eq!(who.len(), 1, "task {id} was won by {who:?}");
    }
    let by_surface = |prefix: &str| {
        winners
            .values()
            .filter(|w| w[0].starts_with(prefix))
            .count()
    };
    eprintln!(
        "contention: {attempts} claims from {clients} clients in {elapsed:?} ({:.0}/s); won via stdio {}, via HTTP {}",
        attempts as f64 / elapsed.as_secs_f64(),
        by_surface("stdio"),
        by_surface("http"),
    );
    for (id, who) in &winners {
        let row = db.query_row(&format!(
            "SELECT status, assignee_agent_id FROM tasks WHERE id = {}",
            sql_quote(id)
        ));
        assert_eq!(
            (row[0].as_deref(), row[1].as_deref()),
            (Some("in_progress"), Some(who[0].as_str()))
        );
    }
}

#[test]
fn racing_creates_at_the_caps_never_exceed_them_by_one() {
    // Three parents whose child counts start 0, 12 and 23 short of nothing: rows made
    // through another surface (the store, uncapped) count toward the caps.
    const PREFILLED: [i64; 3] = [0, 12, 23];
    // Roots already made in the window: the parents plus these fillers.
    const FILLER_ROOTS: i64 = 20;
    const SUBTASKS_PER_PARENT: usize = 10;
    const ROOTS_EACH: usize = 4;
    let db = TestDb::new();
    let store = db.open_store();
    let mut parents = Vec::new();
    for (p, prefilled) in PREFILLED.into_iter().enumerate() {
        let mut parent = NewTask::titled(format!("parent {p}"));
        parent.status = Some(Status::Backlog);
        let parent = store.create_task(parent, CreatePolicy::Uncapped).unwrap();
        for c in 0..prefilled {
            let mut child = NewTask::titled(format!("prefilled {c}"));
            child.parent_task_id = Some(parent.id.clone());
            store.create_task(child, CreatePolicy::Uncapped).unwrap();
        }
        parents.push(parent.id);
    }
    for f in 0..FILLER_ROOTS {
        store
            .create_task(
                NewTask::titled(format!("filler {f}")),
                CreatePolicy::Uncapped,
            )
            .unwrap();
    }
    drop(store);
    let roots_before = PREFILLED.len() as i64 + FILLER_ROOTS;
    let servers = servers(&db);
    // Every client interleaves subtask creates under each parent with root creates.
    let racers = mixed(
        &servers,
        TASKS_BIN,
        "/api/mcp/tasks",
        3,
        2,
        |_, label| {
            let mut calls = Vec::new();
            for i in 0..SUBTASKS_PER_PARENT {
                for parent in &parents {
                    calls.push((
                        "create_subtask",
                        json!({"parentTaskId": parent, "title": format!("{label} sub {i}")}),
                    ));
                }
                if i < ROOTS_EACH {
                    calls.push(("create_task", json!({"title": format!("{label} root {i}")})));
                }
            }
            calls
        },
        |_| Vec::new(),
    );
    let clients = racers.len();
    let outcomes = race(&db, racers);

    let mut children_made: HashMap<String, i64> = HashMap::new();
    let mut roots_made = 0;
    let mut denials = 0;
    for (_, calls, results) in &outcomes {
        for ((tool, args), result) in calls.iter().zip(results) {
            let parent = args["parentTaskId"].as_str();
            match (succeeded(result), parent) {
                (Some(answer), Some(parent)) => {
                    assert_eq!(*tool, "create_subtask");
                    assert_eq!(answer["task"]["parentTaskId"], parent);
                    *children_made.entry(parent.to_owned()).or_default() += 1;
                }
                (Some(answer), None) => {
                    assert_eq!(answer["task"]["parentTaskId"], Value::Null);
                    roots_made += 1;
                }
                (None, Some(parent)) => {
                    denials += 1;
                    assert_eq!(result["_meta"]["denied"], "child_cap", "{result}");
                    assert_eq!(
                        first_text(result),
                        format!(
                            "subtask rejected: parent {parent} already has {MAX_CHILDREN} children (max {MAX_CHILDREN}); drop one or attach the new task elsewhere"
                        ),
                        "a refusal saw more than the cap"
                    );
                }
                (None, None) => {
                    denials += 1;
                    assert_eq!(result["_meta"]["denied"], "root_rate_cap", "{result}");
                    assert!(
                        first_text(result).starts_with(&format!(
                            "task rejected: {MAX_ROOTS_PER_WINDOW} root tasks already created in the last 5 min"
                        )),
                        "{result}"
                    );
                }
            }
        }
    }
    eprintln!(
        "caps: {clients} clients, {} children and {roots_made} roots created, {denials} refused",
        children_made.values().sum::<i64>()
    );
    for (parent, prefilled) in parents.iter().zip(PREFILLED) {
        assert_eq!(
            children_made.get(parent).copied().unwrap_or(0),
            MAX_CHILDREN - prefilled,
            "parent {parent} (prefilled {prefilled}) must be filled exactly to the cap"
        );
    }
    assert_eq!(roots_made, MAX_ROOTS_PER_WINDOW - roots_before);

    for parent in &parents {
        let live = db.query_i64(&format!(
            "SELECT COUNT(*) FROM tasks WHERE parent_task_id = {} AND dropped = 0",
            sql_quote(parent)
        ));
        assert_eq!(live, MAX_CHILDREN);
    }
    let roots = db.query_i64("SELECT COUNT(*) FROM tasks WHERE parent_task_id IS NULL");
    assert_eq!(roots, MAX_ROOTS_PER_WINDOW);
}

#[test]
fn posts_from_stdio_mcp_http_and_rest_get_contiguous_seqs_per_room() {
    const POSTS_EACH: usize = 24;
    const TEAMS: [&str; 2] = ["mixed-a", "mixed-b"];
    let db = TestDb::new();
    drop(db.open_store());
    let servers = servers(&db);
    let post_calls = |label: &str| -> Vec<Call> {
        (0..POSTS_EACH)
            .map(|i| {
                (
                    "team_chat_post",
                    json!({"text": format!("{label} post {i}"), "authorAgentId": label,
                        "teamId": TEAMS[i % 2]}),
                )
            })
            .collect()
    };
    let mut racers = mixed(
        &servers,
        TEAMCHAT_BIN,
        "/api/mcp/teamchat",
        3,
        2,
        |_, label| post_calls(label),
        |_| Vec::new(),
    );
    for (s, server) in servers.iter().enumerate() {
        let label = format!("rest-{s}");
        racers.push(Racer {
            calls: (0..POSTS_EACH / 2)
                .map(|i| {
                    (
                        "rest",
                        json!({"teamId": TEAMS[i % 2], "text": format!("{label} post {i}")}),
                    )
                })
                .collect(),
            via: Via::RestChat(server.base.clone()),
            label,
        });
    }
    let outcomes = race(&db, racers);

    // room → seq → (author, text) as acknowledged.
    let mut acked: BTreeMap<String, BTreeMap<i64, (String, String)>> = BTreeMap::new();
    for (label, calls, results) in &outcomes {
        for ((_, args), result) in calls.iter().zip(results) {
            let answer = succeeded(result).unwrap_or_else(|| panic!("{label}: {result}"));
            let posted = &answer["posted"];
            let room = posted["roomId"].as_str().unwrap().to_owned();
            let team = args["teamId"].as_str().unwrap();
            assert_eq!(room, format!("team:{team}"));
            let author = if label.starts_with("rest") {
                "operator"
            } else {
                label
            };
            assert_eq!(posted["authorAgentId"], author);
            let seq = posted["seq"].as_i64().unwrap();
            let text = args["text"].as_str().unwrap().to_owned();
            if let Some(other) = acked
                .entry(room.clone())
                .or_default()
                .insert(seq, (author.to_owned(), text))
            {
                panic!("{room} seq {seq} acknowledged twice (also to {other:?})");
            }
        }
    }
    let total: usize = acked.values().map(BTreeMap::len).sum();
    assert_eq!(total, 7 * POSTS_EACH + 2 * (POSTS_EACH / 2));
    for (room, posts) in &acked {
        let seqs: Vec<i64> = posts.keys().copied().collect();
        assert_eq!(
            seqs,
            (1..=posts.len() as i64).collect::<Vec<_>>(),
            "{room}: seqs must be 1..=N"
        );
        let stored: BTreeMap<i64, (String, String)> = db
            .query_rows(&format!(
                "SELECT seq, author, body FROM team_chat WHERE room_id = {} ORDER BY seq",
                sql_quote(room)
            ))
            .into_iter()
            .map(|row| {
                let [seq, author, body] = <[Option<String>; 3]>::try_from(row).unwrap();
                let seq = seq.unwrap().parse().unwrap();
                (seq, (author.unwrap(), body.unwrap()))
            })
            .collect();
        assert_eq!(
            &stored, posts,
            "{room}: the database holds exactly what was acknowledged"
        );
    }
}
