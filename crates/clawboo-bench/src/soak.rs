//! Soak: a real `clawboo serve` on loopback under a steady rate of mixed calls for minutes,
//! its RSS sampled every few seconds. Fails (non-zero exit) on any error, or when private RSS
//! (`RssAnon`; file-backed pages such as the mapped database grow with the file, not with a
//! leak) after the warm-up grows more than the tolerance above the warm-up's highest.
//!
//! Each worker holds one session per MCP server (tasks, memory, teamchat) and cycles through
//! create_subtask → get_task → claim_task → update_task_status(done) → list_tasks (in
//! progress) → memory_save → memory_search (fts) → team_chat_post → team_chat_subscribe
//! (from its cursor), opening a new parent through REST every 24 subtasks (the child cap).
//! Searches use full text: the vector index grows with the corpus by design and is reported
//! separately in docs/BENCHMARKS.md.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clawboo_store::board::MAX_CHILDREN;
use serde_json::{Value, json};

use crate::Env;
use crate::load::{HttpSession, http_client};
use crate::procs::{ServeProcess, answer_failure, mib, proc_usage, result_json};
use crate::seed::{self, Rng};

/// The team every soak row belongs to.
const TEAM: &str = "soak";

/// Flags of `clawboo-bench soak`.
#[derive(clap::Args, Clone)]
pub struct SoakArgs {
    /// How long to run.
    #[arg(long, default_value_t = 5.0)]
    minutes: f64,
    /// Calls per second, all workers together.
    #[arg(long, default_value_t = 200.0)]
    rate: f64,
    /// Concurrent workers (each with its own sessions).
    #[arg(long, default_value_t = 4)]
    workers: usize,
    /// Seconds between RSS samples.
    #[arg(long, default_value_t = 5)]
    sample_secs: u64,
    /// Warm-up seconds (default: a quarter of the run, at most 60).
    #[arg(long)]
    warmup_secs: Option<u64>,
    /// Allowed private RSS growth after warm-up over the warm-up's highest sample, MiB.
    #[arg(long, default_value_t = 8.0)]
    tolerance_mib: f64,
    /// Database file (default: a fresh temporary one).
    #[arg(long)]
    db: Option<PathBuf>,
}

/// Counters the workers share with the sampler.
#[derive(Default)]
struct Progress {
    calls: AtomicUsize,
    errors: AtomicUsize,
    first_errors: Mutex<Vec<String>>,
}

impl Progress {
    fn fail(&self, why: String) {
        self.errors.fetch_add(1, Ordering::SeqCst);
        if let Ok(mut first) = self.first_errors.lock()
            && first.len() < 5
        {
            first.push(why);
        }
    }
}

/// One worker's sessions and cursors.
struct Worker {
    name: String,
    base: String,
    http: reqwest::Client,
    tasks: HttpSession,
    memory: HttpSession,
    chat: HttpSession,
    parent: Option<String>,
    children: i64,
    task: Option<String>,
    chat_cursor: i64,
    next_id: u64,
    rng: Rng,
}

impl Worker {
    async fn open(base: &str, k: usize) -> anyhow::Result<Worker> {
        let http = http_client()?;
        let url = |server: &str| format!("{base}/api/mcp/{server}");
        Ok(Worker {
            name: format!("soak-{k}"),
            base: base.to_owned(),
            tasks: HttpSession::open(&http, &url("tasks")).await?,
            memory: HttpSession::open(&http, &url("memory")).await?,
            chat: HttpSession::open(&http, &url("teamchat")).await?,
            http,
            parent: None,
            children: 0,
            task: None,
            chat_cursor: 0,
            next_id: 1,
            rng: Rng::new(k as u64 + 1000),
        })
    }

    /// Call a tool; a JSON-RPC error or tool-error is an error.
    async fn call(&mut self, server: Server, tool: &str, args: Value) -> anyhow::Result<Value> {
        let id = self.next_id;
        self.next_id += 1;
        let session = match server {
            Server::Tasks => &self.tasks,
            Server::Memory => &self.memory,
            Server::Chat => &self.chat,
        };
        let answer = session.call(id, tool, &args).await?;
        if let Some(why) = answer_failure(&answer) {
            bail!("{tool}: {why}");
        }
        result_json(&answer)
    }

    /// The current task (set by step 0 of the cycle).
    fn task(&self) -> anyhow::Result<String> {
        self.task.clone().context("no task created yet")
    }

    /// Step `step` of the cycle (one call, or a REST parent creation plus one call).
    async fn step(&mut self, step: usize) -> anyhow::Result<()> {
        match step % 9 {
            0 => {
                if self.parent.is_none() || self.children >= MAX_CHILDREN {
                    let created: Value = self
                        .http
                        .post(format!("{}/api/board", self.base))
                        .json(&json!({"title": format!("{} parent", self.name), "teamId": TEAM}))
                        .send()
                        .await?
                        .error_for_status()?
                        .json()
                        .await?;
                    self.parent = created["task"]["id"].as_str().map(str::to_owned);
                    self.children = 0;
                }
                let parent = self.parent.clone().context("no parent task")?;
                let title = format!("{} step {}", self.name, self.next_id);
                let out = self
                    .call(
                        Server::Tasks,
                        "create_subtask",
                        json!({"parentTaskId": parent, "title": title}),
                    )
                    .await?;
                self.children += 1;
                self.task = out["task"]["id"].as_str().map(str::to_owned);
            }
            1 => {
                let task = self.task()?;
                self.call(Server::Tasks, "get_task", json!({"taskId": task}))
                    .await?;
            }
            2 => {
                let (task, me) = (self.task()?, self.name.clone());
                self.call(
                    Server::Tasks,
                    "claim_task",
                    json!({"taskId": task, "assigneeAgentId": me}),
                )
                .await?;
            }
            3 => {
                let task = self.task()?;
                self.call(
                    Server::Tasks,
                    "update_task_status",
                    json!({"taskId": task, "status": "done"}),
                )
                .await?;
            }
            4 => {
                self.call(
                    Server::Tasks,
                    "list_tasks",
                    json!({"teamId": TEAM, "status": "in_progress"}),
                )
                .await?;
            }
            5 => {
                let n = self.next_id as usize;
                let (title, content, tag, _) = seed::fact(&mut self.rng, n);
                self.call(
                    Server::Memory,
                    "memory_save",
                    json!({"title": title, "content": content, "tags": [tag], "scopeTeamId": TEAM}),
                )
                .await?;
            }
            6 => {
                let query = seed::sentence(&mut self.rng, 3);
                self.call(
                    Server::Memory,
                    "memory_search",
                    json!({"query": query, "mode": "fts", "limit": 10, "scopeTeamId": TEAM}),
                )
                .await?;
            }
            7 => {
                let (me, n) = (self.name.clone(), self.next_id);
                self.call(
                    Server::Chat,
                    "team_chat_post",
                    json!({"text": format!("{me}: step {n} done"), "teamId": TEAM, "authorAgentId": me}),
                )
                .await?;
            }
            _ => {
                let (me, since) = (self.name.clone(), self.chat_cursor);
                let out = self
                    .call(
                        Server::Chat,
                        "team_chat_subscribe",
                        json!({"teamId": TEAM, "authorAgentId": me, "sinceSeq": since, "limit": 100}),
                    )
                    .await?;
                self.chat_cursor = out["nextSeq"].as_i64().unwrap_or(since);
            }
        }
        Ok(())
    }
}

#[derive(Clone, Copy)]
enum Server {
    Tasks,
    Memory,
    Chat,
}

/// Run the soak; `Err` (non-zero exit) on any error or RSS growth.
pub fn run(env: &Env, args: &SoakArgs) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let db = args
        .db
        .clone()
        .unwrap_or_else(|| dir.path().join("soak.db"));
    let serve = ServeProcess::start(&env.bin_dir, &db, &env.embeddings)?;
    let pid = serve.pid();
    let duration = Duration::from_secs_f64(args.minutes.max(0.0) * 60.0);
    let warmup = Duration::from_secs(
        args.warmup_secs
            .unwrap_or_else(|| (duration.as_secs() / 4).min(60)),
    );
    let workers = args.workers.max(1);
    let period = Duration::from_secs_f64(workers as f64 / args.rate.max(0.1));
    let progress = Arc::new(Progress::default());
    let stop = Arc::new(AtomicBool::new(false));
    let idle = proc_usage(pid)?;
    println!(
        "soak: clawboo serve (pid {pid}) at {}, {} calls/s over {workers} workers for {:.1} min, warm-up {} s, RSS sampled every {} s, tolerance {:.1} MiB; idle RSS {}",
        serve.base,
        args.rate,
        args.minutes,
        warmup.as_secs(),
        args.sample_secs,
        args.tolerance_mib,
        mib(idle.rss_kib)
    );

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let samples = runtime.block_on(async {
        let mut handles = Vec::with_capacity(workers);
        for k in 0..workers {
            let mut worker = Worker::open(&serve.base, k).await?;
            let (progress, stop) = (progress.clone(), stop.clone());
            handles.push(tokio::spawn(async move {
                let mut tick = tokio::time::interval(period);
                tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                let mut step = 0;
                while !stop.load(Ordering::SeqCst) {
                    tick.tick().await;
                    if let Err(e) = worker.step(step).await {
                        progress.fail(format!("{}: {e:#}", worker.name));
                    }
                    progress.calls.fetch_add(1, Ordering::SeqCst);
                    step += 1;
                }
            }));
        }
        let started = Instant::now();
        let mut samples: Vec<(Duration, u64)> = Vec::new();
        let mut tick = tokio::time::interval(Duration::from_secs(args.sample_secs.max(1)));
        loop {
            tick.tick().await;
            let at = started.elapsed();
            let usage = proc_usage(pid).context("clawboo serve is gone")?;
            // Judged on private memory: file-backed pages (code, the mapped database)
            // grow with the file, not with a leak.
            samples.push((at, usage.anon_rss_kib));
            println!(
                "  t={:>5.0} s  RSS {:>9}  private {:>9}  calls {:>8}  errors {}{}",
                at.as_secs_f64(),
                mib(usage.rss_kib),
                mib(usage.anon_rss_kib),
                progress.calls.load(Ordering::SeqCst),
                progress.errors.load(Ordering::SeqCst),
                if at < warmup { "  (warm-up)" } else { "" }
            );
            if at >= duration {
                break;
            }
        }
        stop.store(true, Ordering::SeqCst);
        for h in handles {
            h.await?;
        }
        Ok::<_, anyhow::Error>(samples)
    })?;
    let peak = proc_usage(pid)?.peak_rss_kib;
    drop(serve);

    let calls = progress.calls.load(Ordering::SeqCst);
    let errors = progress.errors.load(Ordering::SeqCst);
    let elapsed = samples.last().map_or(Duration::ZERO, |s| s.0);
    let verdict = judge(&samples, warmup, args.tolerance_mib);
    println!(
        "soak: {calls} calls in {:.0} s ({:.0} calls/s achieved of {} asked), {errors} errors; {}; peak RSS {}",
        elapsed.as_secs_f64(),
        calls as f64 / elapsed.as_secs_f64().max(1e-9),
        args.rate,
        verdict.summary,
        mib(peak)
    );
    if errors > 0 {
        let first = progress
            .first_errors
            .lock()
            .map(|f| f.join("\n  "))
            .unwrap_or_default();
        bail!("soak FAILED: {errors} calls failed; first:\n  {first}");
    }
    if !verdict.flat {
        bail!("soak FAILED: {}", verdict.summary);
    }
    println!("soak PASSED");
    Ok(())
}

/// Whether RSS stayed flat after warm-up.
struct Verdict {
    flat: bool,
    summary: String,
}

/// Compare every sample after `warmup` with the highest sample during warm-up.
fn judge(samples: &[(Duration, u64)], warmup: Duration, tolerance_mib: f64) -> Verdict {
    let baseline = samples
        .iter()
        .filter(|(at, _)| *at < warmup)
        .map(|s| s.1)
        .max();
    let after: Vec<u64> = samples
        .iter()
        .filter(|(at, _)| *at >= warmup)
        .map(|s| s.1)
        .collect();
    let (Some(baseline), Some(&highest)) = (baseline, after.iter().max()) else {
        return Verdict {
            flat: false,
            summary: "too short to judge: no samples both during and after warm-up".into(),
        };
    };
    let growth_mib = (highest as f64 - baseline as f64) / 1024.0;
    let last = after.last().copied().unwrap_or(highest);
    Verdict {
        flat: growth_mib <= tolerance_mib,
        summary: format!(
            "private RSS after warm-up: highest {} vs warm-up highest {} ({growth_mib:+.1} MiB, tolerance {tolerance_mib:.1} MiB), last {}",
            mib(highest),
            mib(baseline),
            mib(last)
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn samples(rss_mib: &[u64]) -> Vec<(Duration, u64)> {
        rss_mib
            .iter()
            .enumerate()
            .map(|(i, m)| (Duration::from_secs(i as u64 * 10), m * 1024))
            .collect()
    }

    #[test]
    fn flat_within_tolerance_passes_and_growth_fails() {
        let warmup = Duration::from_secs(25);
        assert!(judge(&samples(&[10, 14, 15, 16, 17, 18]), warmup, 4.0).flat);
        assert!(!judge(&samples(&[10, 14, 15, 16, 20, 30]), warmup, 4.0).flat);
        assert!(!judge(&samples(&[10, 14]), warmup, 4.0).flat);
    }
}
