//! What a throughput run calls: the tool, the data it starts from, and call number `n`'s
//! arguments. The same workload runs over stdio and over HTTP.

use std::path::PathBuf;

use clap::ValueEnum;
use clawboo_store::DbLocation;
use clawboo_store::board::{MAX_CHILDREN, TaskFilter};
use serde_json::{Value, json};

use crate::db::{Backend, BenchDb};
use crate::seed::{self, Corpus, Rng, TEAM};

/// Posts in the room `team_chat_subscribe` reads.
const ROOM_POSTS: usize = 1000;
/// Posts one `team_chat_subscribe` returns.
const SUBSCRIBE_PAGE: usize = 20;
/// Distinct `memory_search` queries, used round robin.
const QUERIES: usize = 200;

/// The tool a run measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum BenchTool {
    /// `get_task` on a board of `--tasks`.
    GetTask,
    /// `claim_task`, each call a different todo task.
    ClaimTask,
    /// `claim_next`, each call taking the next ready task.
    ClaimNext,
    /// `list_tasks` (whole board) on a board of `--tasks`.
    ListTasks,
    /// `create_subtask`, 24 under each parent (the child cap).
    CreateSubtask,
    /// `memory_save` of a 30-word fact.
    MemorySave,
    /// `memory_search` (`--mode`) over `--facts` facts.
    MemorySearch,
    /// `team_chat_post` to one team room.
    TeamChatPost,
    /// `team_chat_subscribe` reading 20 posts of a 1,000-post room.
    TeamChatSubscribe,
    /// The bench's own `echo` tool (no store): the transport's bare rate.
    Echo,
}

/// `memory_search` modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Mode {
    /// Full text (FTS5, BM25).
    Fts,
    /// Whole-corpus vector scan.
    Vector,
    /// Both, fused.
    Hybrid,
}

impl Mode {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Fts => "fts",
            Mode::Vector => "vector",
            Mode::Hybrid => "hybrid",
        }
    }
}

/// The order `claim_task` takes the seeded todo tasks in (they have priorities 0-4 in turn).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ClaimOrder {
    /// The board's order, as an agent takes the next ready task: highest priority first,
    /// then oldest (`list_tasks` with `ready`).
    Board,
    /// Creation order, priorities interleaved: each claim moves index entries far from
    /// the previous one's (the order of the figures before 2026-12-01 08:30 UTC).
    Created,
}

/// Sizes and options of a workload.
#[derive(Debug, Clone)]
pub struct WorkloadSpec {
    /// The tool.
    pub tool: BenchTool,
    /// Board size for `get_task` / `list_tasks`.
    pub tasks: usize,
    /// Corpus size for `memory_search`.
    pub facts: usize,
    /// Search mode for `memory_search`.
    pub mode: Mode,
    /// Calls that will be made (warm-up included), for workloads that use up data.
    pub total_calls: usize,
    /// The order of `claim_task`'s tasks.
    pub claim_order: ClaimOrder,
    /// `CLAWBOO_EMBEDDINGS` of the servers.
    pub embeddings: String,
    /// What `memory_search`'s facts and queries are made of.
    pub corpus: Corpus,
    /// Where slow-to-seed SQLite files are kept between runs.
    pub data_dir: PathBuf,
    /// The backend the data is on.
    pub backend: Backend,
}

/// A prepared workload: its database and the data its calls refer to.
pub struct Workload {
    spec: WorkloadSpec,
    db: BenchDb,
    ids: Vec<String>,
    queries: Vec<String>,
}

impl Workload {
    /// Seed the data `spec` needs (a fresh temporary database for writing workloads, a
    /// kept one for large read-only corpora).
    pub fn prepare(spec: WorkloadSpec) -> anyhow::Result<Workload> {
        let mut ids = Vec::new();
        let mut queries = Vec::new();
        let ready = TaskFilter {
            ready: true,
            ..TaskFilter::default()
        };
        let db = match spec.tool {
            BenchTool::GetTask | BenchTool::ListTasks => {
                let db = seed::board_db(&spec.backend, &spec.data_dir, spec.tasks)?;
                ids = task_ids(&db, &TaskFilter::default())?;
                db
            }
            BenchTool::ClaimTask => {
                let db = spec.backend.fresh()?;
                ids = seed::board(db.location(), spec.total_calls)?;
                if spec.claim_order == ClaimOrder::Board {
                    ids = task_ids(&db, &ready)?;
                }
                db
            }
            BenchTool::ClaimNext => {
                let db = spec.backend.fresh()?;
                seed::board(db.location(), spec.total_calls)?;
                db
            }
            BenchTool::CreateSubtask => {
                let db = spec.backend.fresh()?;
                ids = seed::board(db.location(), spec.total_calls / MAX_CHILDREN as usize + 1)?;
                db
            }
            BenchTool::MemorySearch => {
                queries = seed::queries(QUERIES, spec.corpus);
                seed::memory_db(
                    &spec.backend,
                    &spec.data_dir,
                    spec.facts,
                    &spec.embeddings,
                    spec.corpus,
                )?
            }
            BenchTool::TeamChatSubscribe => {
                let db = spec.backend.fresh()?;
                seed::chat_room(db.location(), ROOM_POSTS)?;
                db
            }
            BenchTool::MemorySave | BenchTool::TeamChatPost | BenchTool::Echo => {
                let db = spec.backend.fresh()?;
                db.open()?;
                db
            }
        };
        Ok(Workload {
            spec,
            db,
            ids,
            queries,
        })
    }

    /// The database the servers open.
    pub fn db(&self) -> &DbLocation {
        self.db.location()
    }

    /// The MCP server that serves the tool (`tasks`, `memory`, `teamchat`, or `echo`).
    pub fn server(&self) -> &'static str {
        match self.spec.tool {
            BenchTool::GetTask
            | BenchTool::ClaimTask
            | BenchTool::ClaimNext
            | BenchTool::ListTasks
            | BenchTool::CreateSubtask => "tasks",
            BenchTool::MemorySave | BenchTool::MemorySearch => "memory",
            BenchTool::TeamChatPost | BenchTool::TeamChatSubscribe => "teamchat",
            BenchTool::Echo => "echo",
        }
    }

    /// A label naming the tool and the data, e.g. `memory_search hybrid, 100000 facts`.
    pub fn label(&self) -> String {
        let s = &self.spec;
        let tool = match s.tool {
            BenchTool::GetTask => format!("get_task, {} tasks", s.tasks),
            BenchTool::ListTasks => format!("list_tasks, {} tasks", s.tasks),
            BenchTool::ClaimTask => "claim_task".into(),
            BenchTool::ClaimNext => "claim_next".into(),
            BenchTool::CreateSubtask => "create_subtask".into(),
            BenchTool::MemorySave => format!("memory_save ({} embedder)", s.embeddings),
            BenchTool::MemorySearch => format!(
                "memory_search {}, {} facts ({} embedder)",
                s.mode.as_str(),
                s.facts,
                s.embeddings
            ),
            BenchTool::TeamChatPost => "team_chat_post".into(),
            BenchTool::TeamChatSubscribe => {
                format!("team_chat_subscribe, {SUBSCRIBE_PAGE} of {ROOM_POSTS} posts")
            }
            BenchTool::Echo => "echo".into(),
        };
        format!("{tool} [{}]", s.backend.name())
    }

    /// Call number `n`: the tool name and its arguments.
    pub fn request(&self, n: usize) -> (&'static str, Value) {
        match self.spec.tool {
            BenchTool::GetTask => ("get_task", json!({"taskId": self.ids[n % self.ids.len()]})),
            BenchTool::ListTasks => ("list_tasks", json!({})),
            BenchTool::ClaimTask => (
                "claim_task",
                json!({"taskId": self.ids[n % self.ids.len()], "assigneeAgentId": "bench"}),
            ),
            BenchTool::ClaimNext => ("claim_next", json!({"assigneeAgentId": "bench"})),
            BenchTool::CreateSubtask => (
                "create_subtask",
                json!({"parentTaskId": self.ids[(n / MAX_CHILDREN as usize) % self.ids.len()],
                       "title": format!("subtask {n}")}),
            ),
            BenchTool::MemorySave => {
                let (title, content, tag, team) = seed::fact(&mut Rng::new(n as u64), n);
                (
                    "memory_save",
                    json!({"title": title, "content": content, "tags": [tag], "scopeTeamId": team}),
                )
            }
            BenchTool::MemorySearch => (
                "memory_search",
                json!({"query": self.queries[n % self.queries.len()], "mode": self.spec.mode.as_str(),
                       "limit": 10, "scopeTeamId": TEAM}),
            ),
            BenchTool::TeamChatPost => (
                "team_chat_post",
                json!({"text": format!("progress note {n}: step done, moving on"),
                       "teamId": TEAM, "authorAgentId": format!("agent-{}", n % 8)}),
            ),
            BenchTool::TeamChatSubscribe => (
                "team_chat_subscribe",
                json!({"teamId": TEAM, "authorAgentId": "reader",
                       "sinceSeq": (n * 37) % (ROOM_POSTS - SUBSCRIBE_PAGE),
                       "limit": SUBSCRIBE_PAGE}),
            ),
            BenchTool::Echo => ("echo", json!({"message": format!("hello {n}")})),
        }
    }
}

/// The ids of `db`'s tasks that `filter` lists, in the board's order.
fn task_ids(db: &BenchDb, filter: &TaskFilter) -> anyhow::Result<Vec<String>> {
    Ok(db
        .open()?
        .list_tasks(filter)?
        .into_iter()
        .map(|t| t.id)
        .collect())
}
