//! Claims under contention: stdio server processes and HTTP sessions of one `clawboo serve`
//! race to claim the same tasks on one database (a SQLite file or a PostgreSQL database). With `claim_task` every racer tries
//! every task (each starting at a different place in the list); with `claim_next` the racers
//! make as many calls as there are tasks, so each call must get a task of its own.
//! Afterwards every task must have exactly one winner, and the database must name that
//! winner as the assignee.

use std::collections::HashMap;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use anyhow::{anyhow, bail};
use clawboo_store::board::{Scope, Status};
use serde_json::{Value, json};

use crate::Env;
use crate::load::{CheckAnswer, HttpLoad, MakeCall, run_stdio};
use crate::procs::{ServeProcess, StdioServer, answer_failure};
use crate::seed;

/// Who won each task: a count of successful claims and the last winner (racer + 1).
struct Tally {
    wins: Vec<AtomicUsize>,
    winner: Vec<AtomicUsize>,
}

/// Run the race and check the outcome.
pub fn run(
    env: &Env,
    tasks: usize,
    stdio: usize,
    sessions: usize,
    window: usize,
    claim_next: bool,
) -> anyhow::Result<()> {
    let racers = stdio + sessions;
    if tasks == 0 || racers < 2 {
        bail!("a race needs at least one task and two racers");
    }
    if claim_next && !tasks.is_multiple_of(racers) {
        bail!("with --claim-next, --tasks must be a multiple of the racers ({racers})");
    }
    // claim_next: each racer makes an equal share of the calls, one per task.
    let per_racer = tasks / racers;
    let fresh = env.backend.fresh()?;
    let db = fresh.location();
    let ids = Arc::new(seed::board(db, tasks)?);
    let serve = ServeProcess::start(&env.bin_dir, db, &env.embeddings)?;
    let http = HttpLoad::open(&format!("{}/api/mcp/tasks", serve.base), sessions.max(1))?;
    let mut servers = Vec::with_capacity(stdio);
    for _ in 0..stdio {
        let mut server = StdioServer::spawn(env.stdio_command("tasks", db)?)?;
        server.initialize()?;
        servers.push(server);
    }

    let index: Arc<HashMap<String, usize>> = Arc::new(
        ids.iter()
            .enumerate()
            .map(|(i, id)| (id.clone(), i))
            .collect(),
    );
    // claim_task: call number n is racer n / tasks claiming task n % tasks. claim_next:
    // call n is racer n / per_racer asking for the next ready task.
    let make: Arc<MakeCall> = {
        let ids = ids.clone();
        Arc::new(move |n| {
            if claim_next {
                let agent = format!("racer-{}", n / per_racer);
                ("claim_next", json!({ "assigneeAgentId": agent }))
            } else {
                (
                    "claim_task",
                    json!({"taskId": ids[n % tasks], "assigneeAgentId": format!("racer-{}", n / tasks)}),
                )
            }
        })
    };
    let tally = Arc::new(Tally {
        wins: (0..tasks).map(|_| AtomicUsize::new(0)).collect(),
        winner: (0..tasks).map(|_| AtomicUsize::new(0)).collect(),
    });
    let check: Arc<CheckAnswer> = {
        let tally = tally.clone();
        Arc::new(move |n, answer: &Value| {
            let (task, racer) = if claim_next {
                let text = answer["result"]["content"][0]["text"]
                    .as_str()
                    .unwrap_or("");
                let body: Value = serde_json::from_str(text).unwrap_or(Value::Null);
                let Some(&task) = body["task"]["id"].as_str().and_then(|id| index.get(id)) else {
                    return Err(format!(
                        "call {n} got no task while tasks were ready: {text}"
                    ));
                };
                (task, n / per_racer)
            } else {
                (n % tasks, n / tasks)
            };
            match answer_failure(answer) {
                None => {
                    tally.wins[task].fetch_add(1, Ordering::SeqCst);
                    tally.winner[task].store(racer + 1, Ordering::SeqCst);
                    Ok(())
                }
                Some(_) if answer["result"]["_meta"]["error"] == json!("conflict") => Ok(()),
                Some(why) => Err(why),
            }
        })
    };
    // claim_task: racer r tries every task, starting at r / racers of the way through the
    // list. claim_next: racer r makes calls r * per_racer.. of its share.
    let plan_of = |r: usize| -> Vec<usize> {
        if claim_next {
            return (r * per_racer..(r + 1) * per_racer).collect();
        }
        let offset = r * tasks / racers;
        (0..tasks)
            .map(|k| r * tasks + (k + offset) % tasks)
            .collect()
    };
    let stdio_plan: Vec<Vec<usize>> = (0..stdio).map(plan_of).collect();
    let http_plan: Vec<Vec<usize>> = (stdio..racers).map(plan_of).collect();

    let started = Instant::now();
    let (stdio_report, http_report) = std::thread::scope(|scope| {
        let http_side = scope.spawn(|| {
            if http_plan.is_empty() {
                return Ok(None);
            }
            http.run(&http_plan, make.clone(), check.clone(), Some(serve.pid()))
                .map(Some)
        });
        let stdio_side = if stdio_plan.is_empty() {
            Ok(None)
        } else {
            run_stdio(&mut servers, &stdio_plan, window, &*make, &*check).map(Some)
        };
        let http_side = http_side
            .join()
            .map_err(|_| anyhow!("the HTTP racers panicked"))?;
        Ok::<_, anyhow::Error>((stdio_side?, http_side?))
    })?;
    let elapsed = started.elapsed();
    http.close();
    for server in servers {
        server.finish()?;
    }
    drop(serve);

    let (attempts, tool) = if claim_next {
        (tasks, "claim_next")
    } else {
        (tasks * racers, "claim_task")
    };
    println!(
        "contention ({tool}): {stdio} stdio processes (window {window}) + {sessions} HTTP sessions racing for {tasks} tasks on one {} database: \
         {:.0} claims/s won, {:.0} attempts/s, {:.2} s",
        env.backend.name(),
        tasks as f64 / elapsed.as_secs_f64(),
        attempts as f64 / elapsed.as_secs_f64(),
        elapsed.as_secs_f64()
    );
    for (side, report) in [("stdio racers", stdio_report), ("HTTP racers", http_report)] {
        if let Some(report) = report {
            report.print_and_check(&format!("  {side}"))?;
        }
    }

    // Exactly one winner per task, and the database agrees.
    let store = fresh.open()?;
    let mut wrong = Vec::new();
    for (i, id) in ids.iter().enumerate() {
        let wins = tally.wins[i].load(Ordering::SeqCst);
        let winner = tally.winner[i].load(Ordering::SeqCst);
        let task = store.get_task(id, Scope::ALL)?;
        let expected = format!("racer-{}", winner.saturating_sub(1));
        let agrees = task.as_ref().is_some_and(|t| {
            t.status == Status::InProgress && t.assignee_agent_id.as_deref() == Some(&expected)
        });
        if wins != 1 || !agrees {
            wrong.push(format!("{id}: {wins} winners, database says {task:?}"));
        }
    }
    if !wrong.is_empty() {
        bail!(
            "winners check FAILED for {} of {tasks} tasks; first: {}",
            wrong.len(),
            wrong[0]
        );
    }
    println!(
        "winners check: {tasks} of {tasks} tasks have exactly one winner and the database names it"
    );
    Ok(())
}
