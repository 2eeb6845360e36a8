//! `clawboo-bench`: measure the real binaries from outside, as a client would.
//!
//! Run after `cargo build --release --bins` as `target/release/clawboo-bench <command>`
//! (or `--profile dist` and `target/dist/…`: it runs the servers built beside it);
//! `scripts/bench.sh` runs the whole set. See docs/BENCHMARKS.md for the figures.

mod contention;
mod db;
mod echo;
mod fact_memory;
mod flood;
mod load;
mod peer;
mod pg_commit;
mod pg_read;
mod procs;
mod recall;
mod report;
mod seed;
mod soak;
mod transfer;
mod workload;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, bail};
use clap::{Parser, Subcommand, ValueEnum};
use clawboo_store::DbLocation;
use serde_json::json;

use crate::db::Backend;
use crate::procs::db_arg;

use crate::load::{HttpLoad, MakeCall, no_errors, round_robin, run_stdio};
use crate::procs::{ServeProcess, StdioServer, clawboo_command, mib};
use crate::report::percentile;
use crate::seed::Corpus;
use crate::workload::{BenchTool, ClaimOrder, Mode, Workload, WorkloadSpec};

#[derive(Parser)]
#[command(about = "Benchmarks for clawboo's MCP servers (stdio and HTTP), its store, and a peer")]
struct Cli {
    /// Folder holding the built binaries (default: the folder of this executable).
    #[arg(long, global = true)]
    bin_dir: Option<PathBuf>,
    /// Where large seeded databases are kept between runs (default: `<bin-dir>/../bench-data`).
    #[arg(long, global = true)]
    data_dir: Option<PathBuf>,
    /// `CLAWBOO_EMBEDDINGS` for the servers and the seeded facts.
    #[arg(long, global = true, default_value = "builtin")]
    embeddings: String,
    /// What the memory measures' facts and queries are made of.
    #[arg(long, global = true, value_enum, default_value_t = Corpus::Random)]
    corpus: Corpus,
    /// One database (a SQLite file or a postgres:// URL) every measure seeds and runs on,
    /// instead of a fresh one each.
    #[arg(long, global = true, value_name = "PATH|URL")]
    db: Option<PathBuf>,
    /// A PostgreSQL server (postgres:// URL) to run every measure on: each gets a fresh
    /// database created there and dropped after; large seeded corpora are kept there as
    /// `clawboo_bench_kept_*`. Without it (and without `--db`) measures run on SQLite files.
    #[arg(long, global = true, value_name = "URL")]
    pg: Option<String>,
    #[command(subcommand)]
    command: BenchCommand,
}

#[derive(Subcommand)]
enum BenchCommand {
    /// Spawn a stdio server, initialize, and time until the first tools/list answer.
    ColdStart {
        #[arg(long, value_enum, default_value = "tasks")]
        server: ColdServer,
        #[arg(long, default_value_t = 30)]
        runs: usize,
    },
    /// tools/call throughput over stdio: `--clients` server processes, each with a window
    /// of pipelined requests.
    Stdio {
        #[command(flatten)]
        load: LoadArgs,
        /// Requests in flight per server process.
        #[arg(long, default_value_t = 8)]
        window: usize,
        /// Server processes (each its own client connection) on the same database.
        #[arg(long, default_value_t = 1)]
        clients: usize,
    },
    /// tools/call throughput over Streamable HTTP against a `clawboo serve` started on a
    /// loopback port (`echo`: against our echo server), with `--sessions` sessions each
    /// sending calls back to back; reports the server's idle and loaded RSS.
    Http {
        #[command(flatten)]
        load: LoadArgs,
        #[arg(long, default_value_t = 8)]
        sessions: usize,
    },
    /// Our echo tool against the peer's (`@modelcontextprotocol/server-everything`), over
    /// stdio and Streamable HTTP, in one run.
    Echo {
        #[arg(long, default_value_t = 20_000)]
        calls: usize,
        /// stdio windows (requests in flight) to measure.
        #[arg(long, value_delimiter = ',', default_value = "1,8")]
        windows: Vec<usize>,
        /// HTTP session counts to measure.
        #[arg(long, value_delimiter = ',', default_value = "1,8")]
        sessions: Vec<usize>,
        #[command(flatten)]
        peer: PeerArgs,
    },
    /// The physical limit: raw `BEGIN IMMEDIATE; UPDATE; COMMIT` transactions per second.
    SqliteCommit {
        #[arg(long, default_value_t = 50_000)]
        transactions: usize,
    },
    /// PostgreSQL's limit, measured as `sqlite-commit` measures SQLite's: `BEGIN; UPDATE
    /// (one row); COMMIT` transactions per second over `--connections` connections, each
    /// updating a row of its own (on a fresh database of `--pg`, or on `--db`).
    PgCommit(pg_commit::PgCommitArgs),
    /// How a short read's round trip is best waited for on PostgreSQL: the store's read
    /// path against `tokio-postgres` driven by the runtime, a connection per reader and one
    /// pipelined connection for all (on a fresh database of `--pg`, or on `--db`).
    PgRead(pg_read::PgReadArgs),
    /// What a stored fact costs in memory: private RSS of `clawboo serve` and of a stdio
    /// memory server over `--facts` facts (after searches in every mode), less the same
    /// server's over an empty database, per fact.
    FactMemory(fact_memory::FactMemoryArgs),
    /// Recall@10 of vector search (through pgvector's HNSW index where the store has it)
    /// against the exact scan, over the kept `--facts` corpus.
    MemoryRecall(recall::RecallArgs),
    /// Processes racing claims on one database: `--stdio` clawboo-mcp-tasks processes and
    /// `--sessions` HTTP sessions of one `clawboo serve`, every racer claiming every task.
    Contention {
        #[arg(long, default_value_t = 2000)]
        tasks: usize,
        #[arg(long, default_value_t = 4)]
        stdio: usize,
        #[arg(long, default_value_t = 4)]
        sessions: usize,
        /// Claims in flight per stdio racer.
        #[arg(long, default_value_t = 4)]
        window: usize,
        /// Race `claim_next` (one call per task in all) instead of `claim_task`.
        #[arg(long)]
        claim_next: bool,
    },
    /// A steady rate of mixed calls against a real `clawboo serve` (loopback) for
    /// `--minutes`, sampling its RSS; fails on any error or RSS growth after warm-up.
    Soak(soak::SoakArgs),
    /// Another agent's read and the board, timed on an idle `clawboo serve` and again while
    /// one agent holds `--waits` long-polls through its own signed URL, in one run.
    Flood(flood::FloodArgs),
    /// `clawboo db copy`, `backup` and `restore` in rows a second: SQLite to SQLite, and
    /// with `--pg` to PostgreSQL and back, over a kept board of facts and tasks.
    Transfer(transfer::TransferArgs),
    /// Serve the bench's echo tool (used by `echo`; not a product server).
    #[command(hide = true)]
    EchoServer {
        #[arg(value_enum)]
        transport: Transport,
        #[arg(long, default_value = "127.0.0.1:0")]
        bind: SocketAddr,
    },
}

/// Options of a throughput run.
#[derive(clap::Args, Clone)]
struct LoadArgs {
    #[arg(long, value_enum)]
    tool: BenchTool,
    /// Board size for get-task and list-tasks.
    #[arg(long, default_value_t = 1000)]
    tasks: usize,
    /// Corpus size for memory-search.
    #[arg(long, default_value_t = 10_000)]
    facts: usize,
    /// memory-search mode.
    #[arg(long, value_enum, default_value = "fts")]
    mode: Mode,
    /// Measured calls.
    #[arg(long, default_value_t = 20_000)]
    calls: usize,
    /// Unmeasured calls first (fills caches, e.g. the vector cache).
    #[arg(long, default_value_t = 200)]
    warmup: usize,
    /// Seconds of quiet after the warm-up, before measuring, for background work the
    /// warm-up started to end (the memory server fills its text index on a thread of its
    /// own after the first search, for longer the larger the corpus; scripts/bench.sh).
    #[arg(long, default_value_t = 0.0)]
    settle: f64,
    /// The order claim-task takes its tasks in.
    #[arg(long, value_enum, default_value = "board")]
    claim_order: ClaimOrder,
    /// Bind every stdio server to this agent (`--agent`, as a spawner does), so each call
    /// goes through the bound agent's renewal hook.
    #[arg(long)]
    agent: Option<String>,
}

/// Where the peer is.
#[derive(clap::Args, Clone)]
struct PeerArgs {
    /// The Node.js binary.
    #[arg(long, default_value = "node")]
    node: PathBuf,
    /// The folder where `npm ci` installed the peer (default: crates/clawboo-bench/peer).
    #[arg(long)]
    peer_dir: Option<PathBuf>,
}

impl PeerArgs {
    fn dir(&self) -> PathBuf {
        self.peer_dir.clone().unwrap_or_else(peer::default_peer_dir)
    }
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum ColdServer {
    Tasks,
    Memory,
    Teamchat,
    Tools,
    /// The bench's echo server.
    Echo,
    /// The peer (`server-everything` under Node).
    Peer,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Transport {
    Stdio,
    Http,
}

/// Settings every command shares.
pub struct Env {
    /// Folder of the built binaries.
    pub bin_dir: PathBuf,
    /// Folder of kept seeded databases.
    pub data_dir: PathBuf,
    /// `CLAWBOO_EMBEDDINGS` value.
    pub embeddings: String,
    /// The memory measures' corpus.
    pub corpus: Corpus,
    /// The backend every measure runs on.
    pub backend: Backend,
}

impl Env {
    /// A stdio server of ours (`tasks`, `memory`, `teamchat`, `tools`, or `echo`) on `db`.
    pub fn stdio_command(&self, server: &str, db: &DbLocation) -> anyhow::Result<Command> {
        if server == "echo" {
            return peer::ours_stdio();
        }
        let mut cmd = clawboo_command(
            &self.bin_dir,
            &format!("clawboo-mcp-{server}"),
            &self.embeddings,
        );
        cmd.arg("--db").arg(db_arg(db));
        Ok(cmd)
    }
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let bin_dir = match cli.bin_dir {
        Some(d) => d,
        None => std::env::current_exe()?
            .parent()
            .context("executable has no folder")?
            .to_path_buf(),
    };
    let data_dir = cli
        .data_dir
        .unwrap_or_else(|| bin_dir.join("..").join("bench-data"));
    let env = Env {
        bin_dir,
        data_dir,
        embeddings: cli.embeddings,
        corpus: cli.corpus,
        backend: Backend::from_flags(cli.db.as_deref(), cli.pg.as_deref())?,
    };
    match cli.command {
        BenchCommand::ColdStart { server, runs } => cold_start(&env, server, runs),
        BenchCommand::Stdio {
            load,
            window,
            clients,
        } => stdio(&env, &load, window, clients),
        BenchCommand::Http { load, sessions } => http(&env, &load, sessions),
        BenchCommand::Echo {
            calls,
            windows,
            sessions,
            peer,
        } => echo_side_by_side(calls, &windows, &sessions, &peer),
        BenchCommand::SqliteCommit { transactions } => sqlite_commit(transactions),
        BenchCommand::PgCommit(args) => pg_commit::run(&env, &args),
        BenchCommand::PgRead(args) => pg_read::run(&env, &args),
        BenchCommand::FactMemory(args) => fact_memory::run(&env, &args),
        BenchCommand::MemoryRecall(args) => recall::run(&env, &args),
        BenchCommand::Contention {
            tasks,
            stdio,
            sessions,
            window,
            claim_next,
        } => contention::run(&env, tasks, stdio, sessions, window, claim_next),
        BenchCommand::Soak(args) => soak::run(&env, &args),
        BenchCommand::Flood(args) => flood::run(&env, &args),
        BenchCommand::Transfer(args) => transfer::run(&env, &args),
        BenchCommand::EchoServer { transport, bind } => match transport {
            Transport::Stdio => echo::serve_stdio(),
            Transport::Http => echo::serve_http(bind),
        },
    }
}

fn cold_start(env: &Env, server: ColdServer, runs: usize) -> anyhow::Result<()> {
    let fresh = env.backend.fresh()?;
    fresh.open()?;
    let db = fresh.location();
    let peer_args = PeerArgs {
        node: "node".into(),
        peer_dir: None,
    };
    let (name, make): (&str, Box<dyn Fn() -> anyhow::Result<Command>>) = match server {
        ColdServer::Tasks => (
            "clawboo-mcp-tasks",
            Box::new(|| env.stdio_command("tasks", db)),
        ),
        ColdServer::Memory => (
            "clawboo-mcp-memory",
            Box::new(|| env.stdio_command("memory", db)),
        ),
        ColdServer::Teamchat => (
            "clawboo-mcp-teamchat",
            Box::new(|| env.stdio_command("teamchat", db)),
        ),
        ColdServer::Tools => (
            "clawboo-mcp-tools",
            Box::new(|| env.stdio_command("tools", db)),
        ),
        ColdServer::Echo => ("our echo server", Box::new(peer::ours_stdio)),
        ColdServer::Peer => (
            "peer server-everything",
            Box::new(|| peer::peer_stdio(&peer_args.node, &peer_args.dir())),
        ),
    };
    let mut times = Vec::with_capacity(runs);
    let mut rss = Vec::with_capacity(runs);
    let mut private = Vec::with_capacity(runs);
    for _ in 0..runs {
        let start = Instant::now();
        let mut server = StdioServer::spawn(make()?)?;
        server.initialize()?;
        server
            .send_line(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).to_string())?;
        let (at, answer) = server.wait_for(1)?;
        times.push(at - start);
        if answer["result"]["tools"]
            .as_array()
            .is_none_or(Vec::is_empty)
        {
            bail!("unexpected tools/list answer: {answer}");
        }
        let usage = server.usage()?;
        rss.push(usage.rss_kib);
        private.push(usage.anon_rss_kib);
        server.finish()?;
    }
    times.sort();
    rss.sort();
    private.sort();
    println!(
        "cold start of {name} [{}] to first tools/list ({runs} runs): min {:.2} ms, median {:.2} ms, p90 {:.2} ms; idle RSS median {} (private {})",
        env.backend.name(),
        times[0].as_secs_f64() * 1e3,
        percentile(&times, 0.5).as_secs_f64() * 1e3,
        percentile(&times, 0.9).as_secs_f64() * 1e3,
        mib(rss[rss.len() / 2]),
        mib(private[private.len() / 2]),
    );
    Ok(())
}

fn workload(env: &Env, load: &LoadArgs) -> anyhow::Result<Arc<Workload>> {
    Ok(Arc::new(Workload::prepare(WorkloadSpec {
        tool: load.tool,
        tasks: load.tasks,
        facts: load.facts,
        mode: load.mode,
        total_calls: load.warmup + load.calls,
        claim_order: load.claim_order,
        embeddings: env.embeddings.clone(),
        corpus: env.corpus,
        data_dir: env.data_dir.clone(),
        backend: env.backend.clone(),
    })?))
}

/// PostgreSQL's CPU over a measured phase (nothing on SQLite).
struct DatabaseCpu(Option<(db::ServerCpu, f64)>);

impl DatabaseCpu {
    fn start(location: &DbLocation) -> anyhow::Result<DatabaseCpu> {
        Ok(DatabaseCpu(match db::ServerCpu::probe(location) {
            Some(cpu) => {
                let before = cpu.seconds()?;
                Some((cpu, before))
            }
            None => None,
        }))
    }

    /// Seconds spent since [`DatabaseCpu::start`].
    fn spent(&self) -> anyhow::Result<Option<f64>> {
        self.0
            .as_ref()
            .map(|(cpu, before)| Ok(cpu.seconds()? - before))
            .transpose()
    }
}

/// Wait `--settle` seconds (see [`LoadArgs::settle`]).
fn settle(load: &LoadArgs) {
    if load.settle > 0.0 {
        std::thread::sleep(std::time::Duration::from_secs_f64(load.settle));
    }
}

fn make_call(workload: &Arc<Workload>) -> Arc<MakeCall> {
    let workload = workload.clone();
    Arc::new(move |n| workload.request(n))
}

fn stdio(env: &Env, load: &LoadArgs, window: usize, clients: usize) -> anyhow::Result<()> {
    let workload = workload(env, load)?;
    let make = make_call(&workload);
    let mut servers = Vec::with_capacity(clients);
    for _ in 0..clients.max(1) {
        let mut command = env.stdio_command(workload.server(), workload.db())?;
        if let Some(agent) = load
            .agent
            .as_deref()
            .filter(|_| workload.server() != "echo")
        {
            command.arg("--agent").arg(agent);
        }
        let mut server = StdioServer::spawn(command)?;
        server.initialize()?;
        servers.push(server);
    }
    let warm = round_robin(0, load.warmup, servers.len());
    run_stdio(&mut servers, &warm, window, &*make, &no_errors)?.ensure_ok("warm-up")?;
    settle(load);
    let plan = round_robin(load.warmup, load.calls, servers.len());
    let database = DatabaseCpu::start(workload.db())?;
    let mut report = run_stdio(&mut servers, &plan, window, &*make, &no_errors)?;
    report.database_cpu_seconds = database.spent()?;
    for server in servers {
        server.finish()?;
    }
    report.print_and_check(&format!(
        "{} over stdio, {} client(s) × window {window}",
        workload.label(),
        clients.max(1)
    ))?;
    Ok(())
}

fn http(env: &Env, load: &LoadArgs, sessions: usize) -> anyhow::Result<()> {
    let workload = workload(env, load)?;
    let make = make_call(&workload);
    let (url, pid, _server): (String, u32, Box<dyn std::any::Any>) = if workload.server() == "echo"
    {
        let server = peer::HttpEcho::ours()?;
        (server.url.clone(), server.pid(), Box::new(server))
    } else {
        let server = ServeProcess::start(&env.bin_dir, workload.db(), &env.embeddings)?;
        let url = format!("{}/api/mcp/{}", server.base, workload.server());
        (url, server.pid(), Box::new(server))
    };
    let idle = procs::proc_usage(pid)?;
    let clients = HttpLoad::open(&url, sessions)?;
    let check: Arc<load::CheckAnswer> = Arc::new(no_errors);
    clients
        .run_shared(0..load.warmup, make.clone(), check.clone(), None)?
        .ensure_ok("warm-up")?;
    settle(load);
    let calls = load.warmup..load.warmup + load.calls;
    let database = DatabaseCpu::start(workload.db())?;
    let mut report = clients.run_shared(calls, make, check, Some(pid))?;
    report.database_cpu_seconds = database.spent()?;
    clients.close();
    println!(
        "server idle RSS {} (after start, before any session)",
        mib(idle.rss_kib)
    );
    report.print_and_check(&format!(
        "{} over HTTP, {sessions} session(s)",
        workload.label()
    ))?;
    Ok(())
}

fn echo_side_by_side(
    calls: usize,
    windows: &[usize],
    sessions: &[usize],
    peer_args: &PeerArgs,
) -> anyhow::Result<()> {
    let peer_dir = peer_args.dir();
    let make: Arc<MakeCall> = Arc::new(|n| ("echo", json!({"message": format!("hello {n}")})));
    let check: Arc<load::CheckAnswer> = Arc::new(|n, answer| {
        no_errors(n, answer)?;
        let text = answer["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or("");
        if text == format!("Echo: hello {n}") {
            Ok(())
        } else {
            Err(format!("wrong echo: {answer}"))
        }
    });
    let warmup = (calls / 10).clamp(1, 1000);
    for &window in windows {
        let mut rates = Vec::new();
        for (who, cmd) in [
            ("ours", peer::ours_stdio()?),
            ("peer", peer::peer_stdio(&peer_args.node, &peer_dir)?),
        ] {
            let mut server = StdioServer::spawn(cmd)?;
            server.initialize()?;
            let mut servers = [server];
            run_stdio(
                &mut servers,
                &round_robin(0, warmup, 1),
                window,
                &*make,
                &*check,
            )?
            .ensure_ok("warm-up")?;
            let report = run_stdio(
                &mut servers,
                &round_robin(warmup, calls, 1),
                window,
                &*make,
                &*check,
            )?;
            let [server] = servers;
            drop(server);
            rates.push(report.rate());
            report.print_and_check(&format!("echo over stdio, window {window}, {who}"))?;
        }
        println!(
            "echo over stdio, window {window}: ours/peer = {:.2}×",
            rates[0] / rates[1]
        );
    }
    for &count in sessions {
        let mut rates = Vec::new();
        for who in ["ours", "peer"] {
            let server = if who == "ours" {
                peer::HttpEcho::ours()?
            } else {
                peer::HttpEcho::peer(&peer_args.node, &peer_dir)?
            };
            let clients = HttpLoad::open(&server.url, count)?;
            clients
                .run(
                    &round_robin(0, warmup, count),
                    make.clone(),
                    check.clone(),
                    None,
                )?
                .ensure_ok("warm-up")?;
            let report = clients.run(
                &round_robin(warmup, calls, count),
                make.clone(),
                check.clone(),
                Some(server.pid()),
            )?;
            clients.close();
            rates.push(report.rate());
            report.print_and_check(&format!("echo over HTTP, {count} session(s), {who}"))?;
        }
        println!(
            "echo over HTTP, {count} session(s): ours/peer = {:.2}×",
            rates[0] / rates[1]
        );
    }
    Ok(())
}

fn sqlite_commit(transactions: usize) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let db = dir.path().join("raw.db");
    let mut conn = rusqlite::Connection::open(&db)?;
    let _: String = conn.query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))?;
    conn.execute_batch(
        "PRAGMA synchronous=NORMAL; CREATE TABLE t(id INTEGER PRIMARY KEY, n INTEGER); INSERT INTO t VALUES (1, 0);",
    )?;
    let start = Instant::now();
    for _ in 0..transactions {
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        tx.execute("UPDATE t SET n = n + 1 WHERE id = 1", [])?;
        tx.commit()?;
    }
    let elapsed = start.elapsed();
    println!(
        "raw SQLite BEGIN IMMEDIATE; UPDATE; COMMIT (WAL, synchronous=NORMAL): {:.0} tx/s over {transactions}",
        transactions as f64 / elapsed.as_secs_f64()
    );
    Ok(())
}
