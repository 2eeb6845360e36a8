//! Soak: a real `clawboo serve` on loopback under a steady rate of mixed calls for minutes,
//! its RSS sampled every few seconds. Fails (non-zero exit) on any error, or when private RSS
//! (`RssAnon`; file-backed pages such as the mapped database grow with the file, not with a
//! leak) after the warm-up grows more than the tolerance above the warm-up's highest, plus
//! what the facts the run stored since then may hold: the memory server keeps every fact's
//! vector and text postings in memory by design, so a run that stores tens of thousands of
//! facts grows by that much without leaking anything.
//!
//! Each worker holds one session per MCP server (tasks, memory, teamchat) and cycles through
//! create_subtask → get_task → claim_task → update_task_status(done) → list_tasks (in
//! progress) → memory_save → memory_search (fts) → team_chat_post → team_chat_subscribe
//! (from its cursor), opening a new parent through REST every 24 subtasks (the child cap).
//! Searches use full text.

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
    /// Allowed private RSS growth after warm-up over the warm-up's highest sample, MiB,
    /// besides what the stored facts may hold.
    #[arg(long, default_value_t = 8.0)]
    tolerance_mib: f64,
    /// What one fact stored after the warm-up may add to the server's private memory, KiB
    /// (`clawboo-bench fact-memory` measures it per backend; the default leaves a margin
    /// over both).
    #[arg(long, default_value_t = 4.0)]
    kib_per_fact: f64,
}

/// Counters the workers share with the sampler.
#[derive(Default)]
struct Progress {
    calls: AtomicUsize,
    /// Facts `memory_save` stored.
    facts: AtomicUsize,
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
    async fn step(&mut self, step: usize) -> anyhow::Result<Stored> {
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
                return Ok(Stored::Fact);
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
        Ok(Stored::Other)
    }
}

/// What a step stored, for the memory verdict.
#[derive(PartialEq, Eq)]
enum Stored {
    Fact,
    Other,
}

#[derive(Clone, Copy)]
enum Server {
    Tasks,
    Memory,
    Chat,
}

/// Run the soak; `Err` (non-zero exit) on any error or RSS growth.
pub fn run(env: &Env, args: &SoakArgs) -> anyhow::Result<()> {
    let db = env.backend.fresh()?;
    let serve = ServeProcess::start(&env.bin_dir, db.location(), &env.embeddings)?;
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
        "soak: clawboo serve (pid {pid}) at {} on {}, {} calls/s over {workers} workers for {:.1} min, warm-up {} s, RSS sampled every {} s, tolerance {:.1} MiB + {:.1} KiB a fact stored after warm-up; idle RSS {}",
        serve.base,
        env.backend.name(),
        args.rate,
        args.minutes,
        warmup.as_secs(),
        args.sample_secs,
        args.tolerance_mib,
        args.kib_per_fact,
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
                    match worker.step(step).await {
                        Ok(Stored::Fact) => {
                            progress.facts.fetch_add(1, Ordering::SeqCst);
                        }
                        Ok(Stored::Other) => {}
                        Err(e) => progress.fail(format!("{}: {e:#}", worker.name)),
                    }
                    progress.calls.fetch_add(1, Ordering::SeqCst);
                    step += 1;
                }
            }));
        }
        let started = Instant::now();
        let mut samples: Vec<Sample> = Vec::new();
        let mut tick = tokio::time::interval(Duration::from_secs(args.sample_secs.max(1)));
        loop {
            tick.tick().await;
            let at = started.elapsed();
            let usage = proc_usage(pid).context("clawboo serve is gone")?;
            // Judged on private memory: file-backed pages (code, the mapped database)
            // grow with the file, not with a leak.
            let facts = progress.facts.load(Ordering::SeqCst);
            samples.push(Sample {
                at,
                private_kib: usage.anon_rss_kib,
                facts,
            });
            println!(
                "  t={:>5.0} s  RSS {:>9}  private {:>9}  calls {:>8}  facts {:>7}  errors {}{}",
                at.as_secs_f64(),
                mib(usage.rss_kib),
                mib(usage.anon_rss_kib),
                progress.calls.load(Ordering::SeqCst),
                facts,
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
    let elapsed = samples.last().map_or(Duration::ZERO, |s| s.at);
    let verdict = judge(&samples, warmup, args.tolerance_mib, args.kib_per_fact);
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

/// One RSS sample.
struct Sample {
    /// Since the workers started.
    at: Duration,
    /// Private RSS (`RssAnon`), KiB.
    private_kib: u64,
    /// Facts stored by then.
    facts: usize,
}

/// Whether RSS stayed within what the run stored after warm-up.
struct Verdict {
    flat: bool,
    summary: String,
}

/// Compare every sample after `warmup` with the highest sample during warm-up, allowing
/// `tolerance_mib` plus `kib_per_fact` for each fact stored since that highest sample.
fn judge(samples: &[Sample], warmup: Duration, tolerance_mib: f64, kib_per_fact: f64) -> Verdict {
    let baseline = samples
        .iter()
        .filter(|s| s.at < warmup)
        .max_by_key(|s| (s.private_kib, s.at));
    let after: Vec<&Sample> = samples.iter().filter(|s| s.at >= warmup).collect();
    let Some(baseline) = baseline.filter(|_| !after.is_empty()) else {
        return Verdict {
            flat: false,
            summary: "too short to judge: no samples both during and after warm-up".into(),
        };
    };
    let allowed_kib = |s: &Sample| {
        let stored = s.facts.saturating_sub(baseline.facts) as f64;
        tolerance_mib * 1024.0 + stored * kib_per_fact
    };
    let growth_kib = |s: &Sample| s.private_kib as f64 - baseline.private_kib as f64;
    // The sample that used most of its allowance.
    let worst = after
        .iter()
        .max_by(|a, b| {
            (growth_kib(a) - allowed_kib(a)).total_cmp(&(growth_kib(b) - allowed_kib(b)))
        })
        .copied()
        .unwrap_or(baseline);
    let last = after.last().copied().unwrap_or(worst);
    let stored = last.facts.saturating_sub(baseline.facts);
    let per_fact = if stored > 0 {
        format!(
            ", {:.2} KiB a fact stored",
            growth_kib(last).max(0.0) / stored as f64
        )
    } else {
        String::new()
    };
    Verdict {
        flat: growth_kib(worst) <= allowed_kib(worst),
        summary: format!(
            "private RSS after warm-up: at most {:+.1} MiB over warm-up's highest {} where {:.1} MiB was allowed \
             ({tolerance_mib:.1} MiB + {kib_per_fact:.1} KiB for each of the {} facts stored by then); last {} \
             after {stored} facts stored since warm-up{per_fact}",
            growth_kib(worst) / 1024.0,
            mib(baseline.private_kib),
            allowed_kib(worst) / 1024.0,
            worst.facts.saturating_sub(baseline.facts),
            mib(last.private_kib),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether samples 10 s apart (private RSS in MiB, `facts_per_sample` facts stored
    /// between two) pass with a 25 s warm-up, 4 MiB of tolerance and 2 KiB a fact.
    fn passes(rss_mib: &[u64], facts_per_sample: usize) -> bool {
        let samples: Vec<Sample> = rss_mib
            .iter()
            .enumerate()
            .map(|(i, m)| Sample {
                at: Duration::from_secs(i as u64 * 10),
                private_kib: m * 1024,
                facts: i * facts_per_sample,
            })
            .collect();
        judge(&samples, Duration::from_secs(25), 4.0, 2.0).flat
    }

    #[test]
    fn flat_within_tolerance_passes_and_growth_fails() {
        assert!(passes(&[10, 14, 15, 16, 17, 18], 0));
        assert!(!passes(&[10, 14, 15, 16, 20, 30], 0));
        assert!(!passes(&[10, 14], 0));
    }

    #[test]
    fn growth_the_stored_facts_account_for_passes() {
        // 2,048 facts between samples may add 4 MiB each time, on top of the 4 MiB.
        assert!(passes(&[10, 14, 15, 19, 24, 28], 2048));
        // Beyond it: 13 MiB over the baseline after 2 × 2,048 facts (4 + 8 allowed).
        assert!(!passes(&[10, 14, 15, 19, 28, 28], 2048));
    }
}
