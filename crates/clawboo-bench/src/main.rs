//! `clawboo-bench`: measure the real binaries from outside, as a client would.
//!
//! Run with `cargo run --release -p clawboo-bench -- <command>` after
//! `cargo build --release --bins`; see docs/BENCHMARKS.md for the figures and commands.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::{Parser, Subcommand, ValueEnum};
use clawboo_store::Store;
use clawboo_store::board::{CreatePolicy, NewTask};
use serde_json::{Value, json};

#[derive(Parser)]
#[command(about = "Benchmarks for clawboo's stdio servers and store")]
struct Cli {
    /// Folder holding the built binaries (default: the folder of this executable).
    #[arg(long, global = true)]
    bin_dir: Option<PathBuf>,
    #[command(subcommand)]
    command: BenchCommand,
}

#[derive(Subcommand)]
enum BenchCommand {
    /// Spawn clawboo-mcp-tasks, initialize, and time until the first tools/list answer.
    ColdStart {
        #[arg(long, default_value_t = 50)]
        runs: usize,
    },
    /// tools/call throughput over stdio with a window of pipelined requests.
    Stdio {
        #[arg(long, value_enum)]
        tool: BenchTool,
        /// Tasks on the board before the run.
        #[arg(long, default_value_t = 1000)]
        tasks: usize,
        #[arg(long, default_value_t = 20_000)]
        calls: usize,
        /// Requests in flight at once.
        #[arg(long, default_value_t = 8)]
        window: usize,
    },
    /// The physical limit: raw `BEGIN IMMEDIATE; UPDATE; COMMIT` transactions per second.
    SqliteCommit {
        #[arg(long, default_value_t = 50_000)]
        transactions: usize,
    },
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum BenchTool {
    GetTask,
    ClaimTask,
    ListTasks,
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
    match cli.command {
        BenchCommand::ColdStart { runs } => cold_start(&bin_dir, runs),
        BenchCommand::Stdio {
            tool,
            tasks,
            calls,
            window,
        } => stdio(&bin_dir, tool, tasks, calls, window),
        BenchCommand::SqliteCommit { transactions } => sqlite_commit(transactions),
    }
}

/// A spawned stdio server with a reader thread timestamping every answer.
struct Server {
    child: Child,
    answers: Receiver<(Instant, Value)>,
}

impl Server {
    fn spawn(bin_dir: &Path, db: &Path) -> anyhow::Result<Server> {
        let bin = bin_dir.join("clawboo-mcp-tasks");
        let mut child = Command::new(&bin)
            .arg("--db")
            .arg(db)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .with_context(|| format!("cannot start {}", bin.display()))?;
        let stdout = child.stdout.take().context("no stdout")?;
        let (tx, answers) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let Ok(v) = serde_json::from_str::<Value>(&line) else {
                    continue;
                };
                if tx.send((Instant::now(), v)).is_err() {
                    break;
                }
            }
        });
        Ok(Server { child, answers })
    }

    fn send(&mut self, message: &Value) -> anyhow::Result<()> {
        let stdin = self.child.stdin.as_mut().context("stdin closed")?;
        let mut line = message.to_string();
        line.push('\n');
        stdin.write_all(line.as_bytes())?;
        Ok(())
    }

    fn wait_for(&self, id: u64) -> anyhow::Result<(Instant, Value)> {
        loop {
            let (at, v) = self
                .answers
                .recv_timeout(Duration::from_secs(60))
                .context("no answer within 60 s")?;
            if v["id"] == json!(id) {
                return Ok((at, v));
            }
        }
    }

    fn initialize(&mut self) -> anyhow::Result<()> {
        self.send(&json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}}))?;
        self.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))?;
        self.wait_for(0)?;
        Ok(())
    }

    /// (user + system CPU seconds, resident KiB) of the server process, from /proc.
    fn usage(&self) -> anyhow::Result<(f64, u64)> {
        let pid = self.child.id();
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
        // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
        let after = stat.rsplit_once(')').context("bad /proc stat")?.1;
        let fields: Vec<&str> = after.split_whitespace().collect();
        let ticks: f64 = fields[11].parse::<f64>()? + fields[12].parse::<f64>()?;
        let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
        let rss = status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        Ok((ticks / clock_ticks_per_second(), rss))
    }

    fn finish(mut self) -> anyhow::Result<()> {
        drop(self.child.stdin.take());
        let status = self.child.wait()?;
        if !status.success() {
            bail!("server exited with {status}");
        }
        Ok(())
    }
}

/// `sysconf(_SC_CLK_TCK)`, which is 100 on every Linux this runs on; read it from `getconf`
/// to avoid `unsafe` FFI.
fn clock_ticks_per_second() -> f64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100.0)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[rank]
}

fn cold_start(bin_dir: &Path, runs: usize) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let db = dir.path().join("bench.db");
    Store::open(&db)?;
    let mut times = Vec::with_capacity(runs);
    let mut rss = Vec::with_capacity(runs);
    for _ in 0..runs {
        let start = Instant::now();
        let mut server = Server::spawn(bin_dir, &db)?;
        server.initialize()?;
        server.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))?;
        let (at, answer) = server.wait_for(1)?;
        times.push(at - start);
        if answer["result"]["tools"].as_array().map(Vec::len) != Some(12) {
            bail!("unexpected tools/list answer: {answer}");
        }
        rss.push(server.usage()?.1);
        server.finish()?;
    }
    times.sort();
    rss.sort();
    println!(
        "cold start to first tools/list ({runs} runs): min {:.2} ms, median {:.2} ms, p90 {:.2} ms; idle RSS median {} KiB",
        times[0].as_secs_f64() * 1e3,
        percentile(&times, 0.5).as_secs_f64() * 1e3,
        percentile(&times, 0.9).as_secs_f64() * 1e3,
        rss[rss.len() / 2],
    );
    Ok(())
}

fn stdio(
    bin_dir: &Path,
    tool: BenchTool,
    tasks: usize,
    calls: usize,
    window: usize,
) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let db = dir.path().join("bench.db");
    let board_size = if tool == BenchTool::ClaimTask {
        tasks.max(calls)
    } else {
        tasks
    };
    let ids = seed_board(&db, board_size)?;
    let mut server = Server::spawn(bin_dir, &db)?;
    server.initialize()?;
    let request = |n: usize| -> Value {
        let (name, args) = match tool {
            BenchTool::GetTask => ("get_task", json!({"taskId": ids[n % ids.len()]})),
            BenchTool::ClaimTask => (
                "claim_task",
                json!({"taskId": ids[n], "assigneeAgentId": "bench"}),
            ),
            BenchTool::ListTasks => ("list_tasks", json!({})),
        };
        json!({"jsonrpc": "2.0", "id": n as u64 + 1, "method": "tools/call", "params": {"name": name, "arguments": args}})
    };
    let (cpu_before, _) = server.usage()?;
    let mut sent_at = vec![Instant::now(); calls];
    let mut latencies = Vec::with_capacity(calls);
    let start = Instant::now();
    let mut sent = 0;
    let mut errors = 0;
    while sent < calls.min(window) {
        sent_at[sent] = Instant::now();
        server.send(&request(sent))?;
        sent += 1;
    }
    while latencies.len() < calls {
        let (at, answer) = server
            .answers
            .recv_timeout(Duration::from_secs(60))
            .context("no answer within 60 s")?;
        let Some(id) = answer["id"].as_u64() else {
            continue;
        };
        if answer["result"]["isError"] == json!(true) || answer.get("error").is_some() {
            errors += 1;
        }
        latencies.push(at - sent_at[id as usize - 1]);
        if sent < calls {
            sent_at[sent] = Instant::now();
            server.send(&request(sent))?;
            sent += 1;
        }
    }
    let elapsed = start.elapsed();
    let (cpu_after, rss) = server.usage()?;
    server.finish()?;
    latencies.sort();
    let name = match tool {
        BenchTool::GetTask => "get_task",
        BenchTool::ClaimTask => "claim_task",
        BenchTool::ListTasks => "list_tasks",
    };
    println!(
        "{name} over stdio, {board_size} tasks, {calls} calls, window {window}: {:.0} calls/s, p50 {:.3} ms, p99 {:.3} ms, server CPU {:.1} µs/call, RSS {} KiB, {errors} errors",
        calls as f64 / elapsed.as_secs_f64(),
        percentile(&latencies, 0.5).as_secs_f64() * 1e3,
        percentile(&latencies, 0.99).as_secs_f64() * 1e3,
        (cpu_after - cpu_before) / calls as f64 * 1e6,
        rss,
    );
    if errors > 0 {
        bail!("{errors} calls failed");
    }
    Ok(())
}

/// A board of `n` todo tasks, created through the store (uncapped), in 24-child groups.
fn seed_board(db: &Path, n: usize) -> anyhow::Result<Vec<String>> {
    let store = Store::open(db)?;
    let mut ids = Vec::with_capacity(n);
    for i in 0..n {
        let task = store.create_task(
            NewTask {
                title: format!("task {i}"),
                priority: Some((i % 5) as i64),
                ..NewTask::default()
            },
            CreatePolicy::Uncapped,
        )?;
        ids.push(task.id);
    }
    Ok(ids)
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
