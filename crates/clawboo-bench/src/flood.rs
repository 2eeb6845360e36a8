//! Flood: what one agent holding hundreds of long-polls costs everyone else (SPEC §16). A
//! real `clawboo serve` on loopback; another agent's read (`team_chat_subscribe` without a
//! wait) and the board (`GET /api/board`) are timed one after another on the idle server,
//! then again while one agent has sent `--waits` long-polls (`waitMs` 30000, 2026-07-28
//! requests through its own signed URL, no session), in one run. Reports both latencies,
//! their ratio, and how many of the long-polls the server held and refused.

use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::{Value, json};

use crate::Env;
use crate::load::{http_client, message_with_id};
use crate::procs::{ServeProcess, clawboo_command};
use crate::report::{ms, percentile};

/// Flags of `clawboo-bench flood`.
#[derive(clap::Args, Clone)]
pub struct FloodArgs {
    /// Long-polls the flooding agent sends at once.
    #[arg(long, default_value_t = 600)]
    waits: usize,
    /// Timed requests of each kind, idle and flooded.
    #[arg(long, default_value_t = 300)]
    samples: usize,
}

/// The protocol version whose requests need no session.
const MODERN: &str = "2026-07-28";

/// The signed teamchat URL `clawboo attach` mints for `agent` on team `red`.
fn signed_teamchat_url(
    env: &Env,
    db: &crate::db::BenchDb,
    base: &str,
    agent: &str,
) -> anyhow::Result<String> {
    let out = clawboo_command(&env.bin_dir, "clawboo", &env.embeddings)
        .args([
            "attach", "--server", "teamchat", "--team", "red", "--agent", agent,
        ])
        .args(["--url", base, "--json", "--db"])
        .arg(crate::procs::db_arg(db.location()))
        .stderr(Stdio::inherit())
        .output()
        .context("cannot run clawboo attach")?;
    if !out.status.success() {
        bail!("clawboo attach failed");
    }
    let config: Value = serde_json::from_slice(&out.stdout)?;
    config["config"]["structured"]["clawboo-teamchat"]["url"]
        .as_str()
        .map(str::to_owned)
        .context("no teamchat URL in clawboo attach's answer")
}

/// One 2026-07-28 `tools/call` (no session); its result.
async fn call(
    http: &reqwest::Client,
    url: &str,
    id: u64,
    tool: &str,
    args: Value,
) -> anyhow::Result<Value> {
    let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
    "name": tool, "arguments": args,
    "_meta": {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "clawboo-bench", "version": "0"},
    }}});
    let text = http
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", MODERN)
        .header("mcp-method", "tools/call")
        .header("mcp-name", tool)
        .body(body.to_string())
        .send()
        .await?
        .text()
        .await?;
    let message = message_with_id(&text, id).with_context(|| format!("no answer in {text:?}"))?;
    Ok(message["result"].clone())
}

/// The latencies of `samples` rounds of another agent's read and of the board.
async fn time_others(
    http: &reqwest::Client,
    bob: &str,
    board: &str,
    samples: usize,
) -> anyhow::Result<(Vec<Duration>, Vec<Duration>)> {
    let (mut reads, mut boards) = (Vec::new(), Vec::new());
    for i in 0..samples {
        let started = Instant::now();
        let read = call(http, bob, 1 + i as u64, "team_chat_subscribe", json!({})).await?;
        if read["isError"] == true {
            bail!("bob's read failed: {read}");
        }
        reads.push(started.elapsed());
        let started = Instant::now();
        let status = http.get(board).send().await?.status();
        if !status.is_success() {
            bail!("GET /api/board answered {status}");
        }
        boards.push(started.elapsed());
    }
    reads.sort();
    boards.sort();
    Ok((reads, boards))
}

/// Run the flood measure.
pub fn run(env: &Env, args: &FloodArgs) -> anyhow::Result<()> {
    let db = env.backend.fresh()?;
    let serve = ServeProcess::start(&env.bin_dir, db.location(), &env.embeddings)?;
    let alice = signed_teamchat_url(env, &db, &serve.base, "alice")?;
    let bob = signed_teamchat_url(env, &db, &serve.base, "bob")?;
    let board = format!("{}/api/board", serve.base);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let http = http_client()?;
        // Warm the connections and the server's first reads.
        time_others(&http, &bob, &board, 20).await?;
        let (idle_reads, idle_boards) = time_others(&http, &bob, &board, args.samples).await?;

        let refused = Arc::new(AtomicUsize::new(0));
        let answered = Arc::new(AtomicUsize::new(0));
        for i in 0..args.waits {
            let (url, refused, answered) = (alice.clone(), refused.clone(), answered.clone());
            // One client each: every long-poll its own connection, as separate agents'
            // processes would open them.
            let http = http_client()?;
            tokio::spawn(async move {
                let wait = json!({"waitMs": 30000});
                if let Ok(result) =
                    call(&http, &url, 10_000 + i as u64, "team_chat_subscribe", wait).await
                    && result["_meta"]["error"] == "too_many_waits"
                {
                    refused.fetch_add(1, Ordering::SeqCst);
                }
                answered.fetch_add(1, Ordering::SeqCst);
            });
        }
        // Until every long-poll the server refuses has come back (the rest wait 30 s).
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut last = usize::MAX;
        while Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(500)).await;
            let now = answered.load(Ordering::SeqCst);
            if now == last && now > 0 {
                break;
            }
            last = now;
        }
        let early = answered.load(Ordering::SeqCst);
        let (flood_reads, flood_boards) = time_others(&http, &bob, &board, args.samples).await?;
        let refused = refused.load(Ordering::SeqCst);
        println!(
            "flood: {} long-polls from one agent: {} refused at once (too_many_waits), {} held",
            args.waits,
            refused,
            args.waits - early
        );
        for (what, idle, flooded) in [
            ("another agent's read", &idle_reads, &flood_reads),
            ("GET /api/board", &idle_boards, &flood_boards),
        ] {
            let (idle_p50, flood_p50) = (percentile(idle, 0.5), percentile(flooded, 0.5));
            println!(
                "flood: {what}: idle p50 {} p99 {}; flooded p50 {} p99 {}; flooded/idle p50 {:.2}x",
                ms(idle_p50),
                ms(percentile(idle, 0.99)),
                ms(flood_p50),
                ms(percentile(flooded, 0.99)),
                flood_p50.as_secs_f64() / idle_p50.as_secs_f64().max(1e-9)
            );
        }
        anyhow::Ok(())
    })?;
    drop(serve);
    Ok(())
}
