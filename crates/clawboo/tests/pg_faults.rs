//! PostgreSQL going away under load (SPEC §13, Faults), on a throwaway cluster of this
//! test's own (it stops the server mid-test): a `clawboo serve` and stdio servers keep
//! making calls; while the server is down every call fails within seconds with
//! `backend_unavailable` (REST: 503 `{error}`) and no process exits; once it is back on
//! the same port the same processes answer again by themselves; and nothing is half
//! written: every acknowledged post and claim is stored whole, seqs stay contiguous, no
//! task is held without its lease and fencing token.
//! PostgreSQL only: elsewhere the test returns at once with a notice.

#![allow(clippy::unwrap_used)]

mod common;
mod http_support;
mod multi_host;
mod own_cluster;

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use clawboo_store::board::{CreatePolicy, NewTask};
use common::{TestDb, not_a_postgres_run, sql_quote};
use multi_host::{Host, McpClient, TASKS_BIN, TEAMCHAT_BIN, ok_json, stored_posts};
use own_cluster::Cluster;
use reqwest::Method;
use serde_json::{Value, json};

/// How long a call may take to fail while the server is down ("fail fast").
const FAIL_WITHIN: Duration = Duration::from_secs(10);
/// How long the processes may take to answer successfully once the server is back.
const RECOVER_WITHIN: Duration = Duration::from_secs(60);
/// Calls each worker must see of a kind before the test moves on.
const SEEN: usize = 3;

/// One call a worker made: when it started, how long it took, its result.
struct Record {
    started: Instant,
    took: Duration,
    result: Value,
}

/// A client calling in a loop until told to stop, each call's record kept.
struct Worker {
    label: &'static str,
    records: Mutex<Vec<Record>>,
}

impl Worker {
    fn new(label: &'static str) -> Worker {
        Worker {
            label,
            records: Mutex::new(Vec::new()),
        }
    }

    /// Call `next(n)` through `client` until `stop` (at most ten minutes).
    fn run(
        &self,
        mut client: McpClient,
        stop: &AtomicBool,
        next: impl Fn(usize) -> (&'static str, Value),
    ) {
        let deadline = Instant::now() + Duration::from_secs(600);
        let mut n = 0;
        while !stop.load(Ordering::SeqCst) && Instant::now() < deadline {
            let (tool, args) = next(n);
            let started = Instant::now();
            let result = client.call(tool, args);
            let took = started.elapsed();
            self.records.lock().unwrap().push(Record {
                started,
                took,
                result,
            });
            n += 1;
            std::thread::sleep(Duration::from_millis(25));
        }
    }

    /// How many calls started at or after `since` succeeded, and how many failed.
    fn counts_since(&self, since: Instant) -> (usize, usize) {
        let records = self.records.lock().unwrap();
        let after = records.iter().filter(|r| r.started >= since);
        let ok = after
            .clone()
            .filter(|r| r.result["isError"] != json!(true))
            .count();
        (ok, after.count() - ok)
    }
}

/// Sets its flag when dropped, on the way out of a scope whether it ends or panics.
struct StopOnDrop<'a>(&'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// Wait (polling, up to `within`) until `done` holds for every worker.
fn wait_for(workers: &[&Worker], within: Duration, what: &str, done: impl Fn(&Worker) -> bool) {
    let deadline = Instant::now() + within;
    while !workers.iter().all(|w| done(w)) {
        let lagging: Vec<&str> = workers
            .iter()
            .filter(|w| !done(w))
            .map(|w| w.label)
            .collect();
        assert!(
            Instant::now() < deadline,
            "{what}: not within {within:?} for {lagging:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn postgres_down_under_load_fails_fast_and_the_same_processes_recover() {
    if not_a_postgres_run() {
        return;
    }
    const TASKS: usize = 400;
    let Some(cluster) = Cluster::start() else {
        return;
    };
    let db = TestDb::postgres_on(&cluster.url);
    let store = db.open_store();
    for i in 0..TASKS {
        store
            .create_task(NewTask::titled(format!("task {i}")), CreatePolicy::Uncapped)
            .unwrap();
    }
    drop(store);
    let host = Host::start(&db, "a");

    let workers = [
        Worker::new("stdio-claims"),
        Worker::new("http-claims"),
        Worker::new("stdio-posts"),
        Worker::new("http-posts"),
    ];
    let stop = AtomicBool::new(false);
    let (stop_at, resumed_at) = std::thread::scope(|scope| {
        let [stdio_claims, http_claims, stdio_posts, http_posts] = &workers;
        let claim =
            |agent: &'static str| move |_| ("claim_next", json!({"assigneeAgentId": agent}));
        let post = |author: &'static str| {
            move |n| {
                let text = format!("{author} post {n}");
                (
                    "team_chat_post",
                    json!({"text": text, "authorAgentId": author, "teamId": "load"}),
                )
            }
        };
        let stop = &stop;
        // A failed check below ends the workers too, rather than leaving the scope waiting.
        let _stop_on_exit = StopOnDrop(stop);
        let clients = [
            host.stdio(TASKS_BIN, &["--agent", "stdio-claims"]),
            host.http("/api/mcp/tasks"),
            host.stdio(TEAMCHAT_BIN, &[]),
            host.http("/api/mcp/teamchat"),
        ];
        let [c0, c1, c2, c3] = clients;
        scope.spawn(move || stdio_claims.run(c0, stop, claim("stdio-claims")));
        scope.spawn(move || http_claims.run(c1, stop, claim("http-claims")));
        scope.spawn(move || stdio_posts.run(c2, stop, post("stdio-posts")));
        scope.spawn(move || http_posts.run(c3, stop, post("http-posts")));
        let all: Vec<&Worker> = workers.iter().collect();
        let began = Instant::now();
        wait_for(
            &all,
            Duration::from_secs(60),
            "calls succeed at first",
            |w| w.counts_since(began).0 >= SEEN,
        );

        cluster.run("pause");
        let stop_at = Instant::now();
        wait_for(
            &all,
            FAIL_WITHIN * 3,
            "calls fail while PostgreSQL is down",
            |w| w.counts_since(stop_at + FAIL_WITHIN / 10).1 >= SEEN,
        );
        // The REST API says so too: 503 with a JSON error.
        for (method, path, body) in [
            (Method::GET, "/api/board", None),
            (
                Method::POST,
                "/api/team-chat",
                Some(json!({"teamId": "load", "text": "down?"})),
            ),
        ] {
            let asked = Instant::now();
            let (status, answer) = host.rest(method, path, body);
            assert_eq!(status, 503, "{path} while PostgreSQL is down: {answer}");
            assert!(
                answer["error"].as_str().is_some_and(|e| !e.is_empty()),
                "{answer}"
            );
            assert!(
                asked.elapsed() < FAIL_WITHIN,
                "{path} took {:?}",
                asked.elapsed()
            );
        }

        cluster.run("resume");
        let resumed_at = Instant::now();
        wait_for(
            &all,
            RECOVER_WITHIN,
            "the same processes answer again",
            |w| w.counts_since(resumed_at).0 >= SEEN,
        );
        let (status, board) = host.rest(Method::GET, "/api/board", None);
        assert_eq!(status, 200, "{board}");
        (stop_at, resumed_at)
    });

    // Every failure was the retryable one, and came fast.
    let mut failures_while_down = 0;
    for w in &workers {
        for r in w.records.lock().unwrap().iter() {
            if r.result["isError"] != json!(true) {
                continue;
            }
            assert_eq!(
                r.result["_meta"]["error"], "backend_unavailable",
                "{}: {}",
                w.label, r.result
            );
            assert!(
                r.took < FAIL_WITHIN,
                "{}: a failure took {:?}",
                w.label,
                r.took
            );
            if r.started >= stop_at && r.started < resumed_at {
                failures_while_down += 1;
            }
        }
    }
    assert!(failures_while_down >= workers.len() * SEEN);

    // Nothing half-written. Every acknowledged claim is stored whole, and no task is held
    // without its lease and token (a claim whose answer was lost may be stored: whole too).
    for w in &workers[..2] {
        for r in w.records.lock().unwrap().iter() {
            let Some(won) = ok_json(&r.result) else {
                continue;
            };
            let task = &won["task"];
            if task.is_null() {
                continue;
            }
            let row = db.query_row(&format!(
                "SELECT status, assignee_agent_id, claim_token FROM tasks WHERE id = {}",
                sql_quote(task["id"].as_str().unwrap())
            ));
            assert_eq!(row[0].as_deref(), Some("in_progress"), "{task}");
            assert_eq!(row[1].as_deref(), Some(w.label), "{task}");
            assert_eq!(row[2], Some(task["claimToken"].to_string()), "{task}");
        }
    }
    let half_claimed = db.query_i64(
        "SELECT count(*) FROM tasks WHERE (status = 'in_progress' AND (assignee_agent_id IS NULL \
         OR lease_expires_at IS NULL OR claim_token = 0)) \
         OR (status = 'todo' AND (assignee_agent_id IS NOT NULL OR lease_expires_at IS NOT NULL))",
    );
    assert_eq!(half_claimed, 0, "tasks held without their lease or token");

    // Every acknowledged post is stored at its seq, and the room's seqs have no gap.
    let stored = stored_posts(&db, "load");
    let max = stored.keys().next_back().copied().unwrap_or(0);
    assert_eq!(stored.len() as i64, max, "the room's seqs have a gap");
    let mut acknowledged = 0;
    for w in &workers[2..] {
        for r in w.records.lock().unwrap().iter() {
            let Some(posted) = ok_json(&r.result) else {
                continue;
            };
            let seq = posted["posted"]["seq"].as_i64().unwrap();
            assert!(
                stored.contains_key(&seq),
                "{}: acknowledged seq {seq} is missing",
                w.label
            );
            assert!(
                stored[&seq].starts_with(w.label),
                "{}: seq {seq} holds {:?}",
                w.label,
                stored[&seq]
            );
            acknowledged += 1;
        }
    }
    assert!(acknowledged >= 4 * SEEN);
}
