//! Crash safety: round after round, the real stdio bins write (creates, claims, status moves,
//! comments, chat posts, memory saves) with several requests in flight and are SIGKILLed at
//! random points; after every round the database must be sound: every write a client saw
//! acknowledged is present, no task is half-claimed, chat seqs and procedure versions are
//! contiguous, and (SQLite) `integrity_check` passes.
//!
//! The kill points come from a seeded generator; the seed is printed, and
//! `CLAWBOO_CRASH_SEED=<seed>` replays it. `CLAWBOO_CRASH_ROUNDS=<n>` runs longer by hand.

#![allow(clippy::unwrap_used)]

mod common;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::Path;
use std::time::{Duration, Instant};

use clawboo_store::board::{CreatePolicy, NewTask, Status};
use common::{StdioClient, TestDb, first_text, skip_on_postgres, sql_quote};
use rusqlite::Connection;
use serde_json::{Value, json};

const TASKS_BIN: &str = env!("CARGO_BIN_EXE_clawboo-mcp-tasks");
const TEAMCHAT_BIN: &str = env!("CARGO_BIN_EXE_clawboo-mcp-teamchat");
const MEMORY_BIN: &str = env!("CARGO_BIN_EXE_clawboo-mcp-memory");

/// Rounds run unless `CLAWBOO_CRASH_ROUNDS` says otherwise.
const DEFAULT_ROUNDS: u64 = 30;
/// No new round starts after this long (keeps CI bounded on a slow machine).
const TIME_BUDGET: Duration = Duration::from_secs(40);
/// Requests each writer keeps in flight, so a kill lands while work is under way.
const IN_FLIGHT: usize = 4;
/// A writer is killed after reading at most this many answers.
const MAX_ANSWERS: usize = 40;
/// Claimable tasks the two task writers race for in each round.
const POOL: usize = 10;
/// The two team rooms the chat writers share.
const CHAT_TEAMS: [&str; 2] = ["crash-a", "crash-b"];
/// The procedure names the memory writer versions.
const PROCEDURES: [&str; 2] = ["deploy", "rollback"];

/// splitmix64: small, seedable, good enough to pick kill points.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// One tool call a writer makes.
#[derive(Debug, Clone)]
enum Op {
    CreateSubtask { parent: String, title: String },
    Claim { task: String },
    Move { task: String, status: &'static str },
    Comment { task: String, body: String },
    Post { team: &'static str, text: String },
    SaveFact { title: String, content: String },
    SaveProcedure { name: &'static str, content: String },
}

impl Op {
    fn call(&self, agent: &str) -> (&'static str, Value) {
        match self {
            Op::CreateSubtask { parent, title } => (
                "create_subtask",
                json!({"parentTaskId": parent, "title": title}),
            ),
            Op::Claim { task } => (
                "claim_task",
                json!({"taskId": task, "assigneeAgentId": agent}),
            ),
            Op::Move { task, status } => (
                "update_task_status",
                json!({"taskId": task, "status": status}),
            ),
            Op::Comment { task, body } => ("add_comment", json!({"taskId": task, "body": body})),
            Op::Post { team, text } => (
                "team_chat_post",
                json!({"text": text, "authorAgentId": agent, "teamId": team}),
            ),
            Op::SaveFact { title, content } => {
                ("memory_save", json!({"title": title, "content": content}))
            }
            Op::SaveProcedure { name, content } => (
                "memory_save",
                json!({"procedureName": name, "content": content}),
            ),
        }
    }

    /// What a success answer acknowledges.
    fn acknowledged(self, agent: &str, answer: &Value) -> Ack {
        match self {
            Op::CreateSubtask { parent, title } => {
                assert_eq!(answer["task"]["parentTaskId"], parent.as_str(), "{answer}");
                Ack::Created {
                    id: text(&answer["task"]["id"]),
                    parent,
                    title,
                }
            }
            Op::Claim { task } => {
                assert_eq!(answer["task"]["assigneeAgentId"], agent, "{answer}");
                Ack::Claimed {
                    task,
                    agent: agent.to_owned(),
                }
            }
            Op::Move { task, status } => {
                assert_eq!(answer["task"]["status"], status, "{answer}");
                Ack::Moved { task, status }
            }
            Op::Comment { task, body } => Ack::Commented {
                id: text(&answer["comment"]["id"]),
                task,
                body,
            },
            Op::Post { team, text: body } => Ack::Posted {
                room: text(&answer["posted"]["roomId"]),
                seq: answer["posted"]["seq"].as_i64().expect("seq"),
                author: agent.to_owned(),
                body,
                team,
            },
            Op::SaveFact { title, content } => Ack::Fact {
                id: text(&answer["fact"]["id"]),
                title,
                content,
            },
            Op::SaveProcedure { name, content } => Ack::Procedure {
                name,
                version: answer["procedure"]["version"].as_i64().expect("version"),
                content,
            },
        }
    }

    /// Whether a tool-error is a legitimate answer (a lost race, a cap) rather than a fault.
    fn may_fail_with(&self, result: &Value) -> bool {
        match self {
            Op::Claim { .. } => result["_meta"]["error"] == "conflict",
            Op::CreateSubtask { .. } => result["_meta"]["denied"] == "child_cap",
            _ => false,
        }
    }
}

fn text(v: &Value) -> String {
    v.as_str()
        .unwrap_or_else(|| panic!("expected a string, got {v}"))
        .to_owned()
}

/// A write a client saw acknowledged.
#[derive(Debug, Clone)]
enum Ack {
    Created {
        id: String,
        parent: String,
        title: String,
    },
    Claimed {
        task: String,
        agent: String,
    },
    Moved {
        task: String,
        status: &'static str,
    },
    Commented {
        id: String,
        task: String,
        body: String,
    },
    Posted {
        room: String,
        seq: i64,
        author: String,
        body: String,
        team: &'static str,
    },
    Fact {
        id: String,
        title: String,
        content: String,
    },
    Procedure {
        name: &'static str,
        version: i64,
        content: String,
    },
}

/// What a writer process does.
enum Role {
    /// Races the pool's claims, walks its claims to done, files subtasks, comments.
    Tasks {
        parent: String,
        pool: Vec<String>,
        follow_ups: VecDeque<Op>,
    },
    /// Posts to the shared rooms.
    Chat,
    /// Saves facts and procedure versions.
    Memory,
}

struct Writer {
    role: Role,
    name: String,
    rng: Rng,
    made: usize,
}

impl Writer {
    fn spawn(&self, db: &TestDb) -> StdioClient {
        match self.role {
            Role::Tasks { .. } => StdioClient::spawn(TASKS_BIN, db, &["--agent", &self.name]),
            Role::Chat => StdioClient::spawn(TEAMCHAT_BIN, db, &[]),
            Role::Memory => StdioClient::spawn_with_env(
                MEMORY_BIN,
                db,
                &[],
                &[("CLAWBOO_EMBEDDINGS", "builtin")],
            ),
        }
    }

    fn next_op(&mut self) -> Op {
        self.made += 1;
        let n = self.made;
        let name = &self.name;
        let pick = self.rng.below(3);
        match &mut self.role {
            Role::Tasks {
                parent,
                pool,
                follow_ups,
            } => {
                if let Some(op) = follow_ups.pop_front() {
                    return op;
                }
                match pick {
                    0 if !pool.is_empty() => Op::Claim {
                        task: pool.pop().expect("non-empty"),
                    },
                    1 => Op::CreateSubtask {
                        parent: parent.clone(),
                        title: format!("{name} subtask {n}"),
                    },
                    _ => Op::Comment {
                        task: parent.clone(),
                        body: format!("{name} comment {n}"),
                    },
                }
            }
            Role::Chat => Op::Post {
                team: CHAT_TEAMS[pick % 2],
                text: format!("{name} post {n}"),
            },
            Role::Memory if pick == 0 => Op::SaveProcedure {
                name: PROCEDURES[n % 2],
                content: format!("{name} step list {n}"),
            },
            Role::Memory => Op::SaveFact {
                title: format!("{name} fact {n}"),
                content: format!("fact number {n} written by {name} before it was killed"),
            },
        }
    }

    /// Follow an acknowledged claim to `done`, one acknowledged step at a time.
    fn observe(&mut self, ack: &Ack) {
        let Role::Tasks { follow_ups, .. } = &mut self.role else {
            return;
        };
        match ack {
            Ack::Claimed { task, .. } => follow_ups.push_back(Op::Move {
                task: task.clone(),
                status: "in_review",
            }),
            Ack::Moved { task, status } if *status == "in_review" => {
                follow_ups.push_back(Op::Move {
                    task: task.clone(),
                    status: "done",
                })
            }
            _ => {}
        }
    }

    /// Write with [`IN_FLIGHT`] requests outstanding; SIGKILL the process once `kill_after`
    /// answers were read (0: right after spawning, possibly mid-open). Returns the writes
    /// whose success answer was read.
    fn run(mut self, db: &TestDb, kill_after: usize) -> Vec<Ack> {
        let mut client = self.spawn(db);
        let mut acks = Vec::new();
        if kill_after == 0 {
            client.kill();
            return acks;
        }
        client.initialize();
        let mut in_flight: HashMap<u64, Op> = HashMap::new();
        let mut next_id = 1000u64;
        let mut send =
            |writer: &mut Writer, client: &mut StdioClient, in_flight: &mut HashMap<u64, Op>| {
                let op = writer.next_op();
                let (tool, args) = op.call(&writer.name);
                client.send(
                    &json!({"jsonrpc": "2.0", "id": next_id, "method": "tools/call",
                "params": {"name": tool, "arguments": args}}),
                );
                in_flight.insert(next_id, op);
                next_id += 1;
            };
        for _ in 0..IN_FLIGHT {
            send(&mut self, &mut client, &mut in_flight);
        }
        let mut answers = 0;
        while answers < kill_after {
            let message = client.recv();
            let Some(op) = message["id"].as_u64().and_then(|id| in_flight.remove(&id)) else {
                continue;
            };
            answers += 1;
            let result = &message["result"];
            assert!(message.get("error").is_none(), "{op:?}: {message}");
            if result["isError"] == json!(true) {
                assert!(op.may_fail_with(result), "{op:?} failed: {result}");
            } else {
                let answer: Value =
                    serde_json::from_str(first_text(result)).expect("result text is JSON");
                let ack = op.acknowledged(&self.name, &answer);
                self.observe(&ack);
                acks.push(ack);
            }
            send(&mut self, &mut client, &mut in_flight);
        }
        client.kill();
        acks
    }
}

/// Every acknowledged write so far.
#[derive(Default)]
struct Ledger {
    created: Vec<(String, String, String)>,
    /// task → the agent told it won.
    claims: HashMap<String, String>,
    /// task → the furthest acknowledged status.
    progress: HashMap<String, &'static str>,
    comments: Vec<(String, String, String)>,
    posts: Vec<(String, i64, String, String)>,
    facts: Vec<(String, String, String)>,
    procedures: Vec<(&'static str, i64, String)>,
    total: usize,
}

fn rank(status: &str) -> u8 {
    match status {
        "in_progress" => 1,
        "in_review" => 2,
        "done" => 3,
        other => panic!("a claimed task is {other}"),
    }
}

impl Ledger {
    fn record(&mut self, ack: Ack) {
        self.total += 1;
        match ack {
            Ack::Created { id, parent, title } => self.created.push((id, parent, title)),
            Ack::Claimed { task, agent } => {
                if let Some(earlier) = self.claims.insert(task.clone(), agent.clone()) {
                    panic!("task {task} claimed twice: by {earlier} and by {agent}");
                }
                self.progress.entry(task).or_insert("in_progress");
            }
            Ack::Moved { task, status } => {
                let best = self.progress.entry(task).or_insert(status);
                if rank(status) > rank(best) {
                    *best = status;
                }
            }
            Ack::Commented { id, task, body } => self.comments.push((id, task, body)),
            Ack::Posted {
                room,
                seq,
                author,
                body,
                team,
            } => {
                assert_eq!(room, format!("team:{team}"));
                self.posts.push((room, seq, author, body));
            }
            Ack::Fact { id, title, content } => self.facts.push((id, title, content)),
            Ack::Procedure {
                name,
                version,
                content,
            } => self.procedures.push((name, version, content)),
        }
    }

    /// The database holds every acknowledged write and every invariant.
    fn check(&self, db: &TestDb, check_file: bool) {
        if check_file {
            check_sqlite_file(db.sqlite_path());
        }
        // No half-claimed task anywhere on the board.
        let torn = db.query_rows(
            "SELECT id, status, assignee_agent_id, completed_at FROM tasks
             WHERE (status = 'todo' AND assignee_agent_id IS NOT NULL)
                OR (status IN ('in_progress', 'in_review') AND assignee_agent_id IS NULL)
                OR ((completed_at IS NULL) = (status IN ('done', 'cancelled')))",
        );
        assert!(torn.is_empty(), "half-claimed or torn tasks: {torn:?}");

        // One row's columns as text, or None when there is no such row.
        let one = |sql: String| -> Option<Vec<Option<String>>> {
            let mut rows = db.query_rows(&sql);
            assert!(rows.len() <= 1, "{sql}: {rows:?}");
            rows.pop()
        };
        let task = |id: &str| {
            one(format!(
                "SELECT title, status, assignee_agent_id, parent_task_id FROM tasks WHERE id = {}",
                sql_quote(id)
            ))
        };
        for (id, parent, title) in &self.created {
            let row = task(id).unwrap_or_else(|| panic!("acknowledged task {id} lost"));
            assert_eq!(
                (row[0].as_ref(), row[3].as_deref()),
                (Some(title), Some(parent.as_str()))
            );
        }
        for (id, agent) in &self.claims {
            let row = task(id).expect("claimed task");
            let status = row[1].clone().unwrap_or_default();
            assert_eq!(row[2].as_deref(), Some(agent.as_str()), "task {id}");
            assert!(
                rank(&status) >= rank(self.progress[id]),
                "task {id} is {status}, but {} was acknowledged",
                self.progress[id]
            );
        }
        for (id, task_id, body) in &self.comments {
            let stored = one(format!(
                "SELECT task_id, body FROM task_comments WHERE id = {}",
                sql_quote(id)
            ));
            assert_eq!(
                stored,
                Some(vec![Some(task_id.clone()), Some(body.clone())]),
                "comment {id}"
            );
        }

        for (room, seq, author, body) in &self.posts {
            let stored = one(format!(
                "SELECT author, body FROM team_chat WHERE room_id = {} AND seq = {seq}",
                sql_quote(room)
            ));
            assert_eq!(
                stored,
                Some(vec![Some(author.clone()), Some(body.clone())]),
                "post {room}#{seq}"
            );
        }
        let mut seqs: BTreeMap<String, Vec<i64>> = BTreeMap::new();
        for row in db.query_rows("SELECT room_id, seq FROM team_chat ORDER BY room_id, seq") {
            let room = row[0].clone().unwrap_or_default();
            let seq: i64 = row[1].as_deref().unwrap_or_default().parse().unwrap();
            seqs.entry(room).or_default().push(seq);
        }
        for (room, seqs) in &seqs {
            assert_eq!(
                *seqs,
                (1..=seqs.len() as i64).collect::<Vec<_>>(),
                "room {room} seqs have a gap"
            );
        }

        for (id, title, content) in &self.facts {
            let stored = one(format!(
                "SELECT title, content FROM memory_facts WHERE id = {}",
                sql_quote(id)
            ));
            assert_eq!(
                stored,
                Some(vec![Some(title.clone()), Some(content.clone())]),
                "fact {id}"
            );
        }
        for (name, version, content) in &self.procedures {
            let stored = one(format!(
                "SELECT content FROM memory_procedures WHERE name = {} AND version = {version}",
                sql_quote(name)
            ));
            assert_eq!(
                stored,
                Some(vec![Some(content.clone())]),
                "procedure {name} v{version}"
            );
        }
        for name in PROCEDURES {
            let versions: Vec<i64> = db
                .query_rows(&format!(
                    "SELECT version FROM memory_procedures WHERE name = {} ORDER BY version",
                    sql_quote(name)
                ))
                .iter()
                .map(|row| row[0].as_deref().unwrap_or_default().parse().unwrap())
                .collect();
            assert_eq!(versions, (1..=versions.len() as i64).collect::<Vec<_>>());
        }
    }
}

/// The SQLite file itself survived the kills: its pages, its full-text index and its
/// foreign keys are sound (PostgreSQL's own crash safety is not the writers' to break).
fn check_sqlite_file(db: &Path) {
    let conn = Connection::open(db).expect("open after the crash");
    let integrity: String = conn
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(integrity, "ok");
    conn.execute(
        "INSERT INTO memory_facts_fts(memory_facts_fts) VALUES ('integrity-check')",
        [],
    )
    .expect("the full-text index matches its table");
    let fk_violations = conn
        .prepare("PRAGMA foreign_key_check")
        .unwrap()
        .query_map([], |_| Ok(()))
        .unwrap()
        .count();
    assert_eq!(fk_violations, 0);
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

/// A root for a round's subtasks and the round's claimable pool, made through the store.
fn prepare_round(db: &TestDb, round: u64, writers: usize) -> (Vec<String>, Vec<String>) {
    let store = db.open_store();
    let make = |title: String, status: Status| {
        let mut task = NewTask::titled(title);
        task.status = Some(status);
        store
            .create_task(task, CreatePolicy::Uncapped)
            .expect("create")
            .id
    };
    let parents = (0..writers)
        .map(|w| make(format!("round {round} parent {w}"), Status::Backlog))
        .collect();
    let pool = (0..POOL)
        .map(|i| make(format!("round {round} pool {i}"), Status::Todo))
        .collect();
    (parents, pool)
}

#[test]
fn killed_writers_never_lose_an_acknowledged_write_or_tear_a_task() {
    let seed = env_u64("CLAWBOO_CRASH_SEED").unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1)
    });
    let rounds = env_u64("CLAWBOO_CRASH_ROUNDS").unwrap_or(DEFAULT_ROUNDS);
    let budget = if env_u64("CLAWBOO_CRASH_ROUNDS").is_some() {
        Duration::MAX
    } else {
        TIME_BUDGET
    };
    eprintln!("crash_safety: seed {seed} (replay with CLAWBOO_CRASH_SEED={seed})");
    let mut rng = Rng(seed);
    let db = TestDb::new();
    let check_file = !skip_on_postgres(&db, "integrity_check, the FTS index, foreign_key_check");
    let mut ledger = Ledger::default();
    let started = Instant::now();
    let mut ran = 0;
    while ran < rounds && started.elapsed() < budget {
        let (parents, pool) = prepare_round(&db, ran, 2);
        let mut writers = Vec::new();
        for (w, parent) in parents.into_iter().enumerate() {
            let mut order = pool.clone();
            if w == 1 {
                order.reverse();
            }
            writers.push(Writer {
                role: Role::Tasks {
                    parent,
                    pool: order,
                    follow_ups: VecDeque::new(),
                },
                name: format!("r{ran}-tasks-{w}"),
                rng: Rng(rng.next()),
                made: 0,
            });
        }
        for c in 0..2 {
            writers.push(Writer {
                role: Role::Chat,
                name: format!("r{ran}-chat-{c}"),
                rng: Rng(rng.next()),
                made: 0,
            });
        }
        writers.push(Writer {
            role: Role::Memory,
            name: format!("r{ran}-memory"),
            rng: Rng(rng.next()),
            made: 0,
        });
        let kill_points: Vec<usize> = writers.iter().map(|_| rng.below(MAX_ANSWERS + 1)).collect();
        let acks: Vec<Vec<Ack>> = std::thread::scope(|scope| {
            let handles: Vec<_> = writers
                .into_iter()
                .zip(kill_points)
                .map(|(writer, kill_after)| {
                    let db = &db;
                    scope.spawn(move || writer.run(db, kill_after))
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for ack in acks.into_iter().flatten() {
            ledger.record(ack);
        }
        ledger.check(&db, check_file);
        ran += 1;
    }
    eprintln!(
        "crash_safety: {ran} rounds, {} acknowledged writes checked, {:?}",
        ledger.total,
        started.elapsed()
    );
    assert!(ran >= 5, "only {ran} rounds ran within {budget:?}");
    assert!(!ledger.claims.is_empty() && !ledger.posts.is_empty() && !ledger.facts.is_empty());
}
