//! Load generator for the MCP Streamable HTTP endpoint of a running `clawboo serve`:
//! `--sessions` concurrent MCP sessions, each issuing `tools/call` one after another
//! (so `--sessions` calls are in flight), reporting throughput and latency percentiles.
//!
//! `cargo run --release -p clawboo-server --example http_load -- --url http://127.0.0.1:18790 [--sessions 8] [--calls 20000] [--tool get_task|list_tasks]`

use std::time::{Duration, Instant};

use serde_json::{Value, json};

fn arg(args: &[String], name: &str, default: &str) -> String {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .cloned()
        .unwrap_or_else(|| default.to_owned())
}

async fn post(
    http: &reqwest::Client,
    url: &str,
    session: Option<&str>,
    body: &Value,
) -> Result<(Option<String>, String), reqwest::Error> {
    let mut req = http
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(body.to_string());
    if let Some(s) = session {
        req = req.header("mcp-session-id", s);
    }
    let resp = req.send().await?.error_for_status()?;
    let id = resp
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    Ok((id, resp.text().await?))
}

async fn open_session(
    http: &reqwest::Client,
    url: &str,
) -> Result<String, Box<dyn std::error::Error>> {
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "http_load", "version": "0"}}});
    let (id, _) = post(http, url, None, &init).await?;
    let id = id.ok_or("no mcp-session-id on initialize")?;
    post(
        http,
        url,
        Some(&id),
        &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    )
    .await?;
    Ok(id)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let base = arg(&args, "--url", "http://127.0.0.1:18790");
    let sessions: usize = arg(&args, "--sessions", "8").parse()?;
    let calls: usize = arg(&args, "--calls", "20000").parse()?;
    let tool = arg(&args, "--tool", "get_task");
    let http = reqwest::Client::builder()
        .no_proxy()
        .tcp_nodelay(true)
        .build()?;
    let url = format!("{base}/api/mcp/tasks");

    let created: Value = http
        .post(format!("{base}/api/board"))
        .json(&json!({"title": "bench target", "teamId": "bench"}))
        .send()
        .await?
        .json()
        .await?;
    let task_id = created["task"]["id"]
        .as_str()
        .ok_or("no task id")?
        .to_owned();
    let arguments = match tool.as_str() {
        "get_task" => json!({"taskId": task_id}),
        "list_tasks" => json!({"teamId": "bench"}),
        other => return Err(format!("unknown --tool {other}").into()),
    };

    let mut ids = Vec::new();
    for _ in 0..sessions {
        ids.push(open_session(&http, &url).await?);
    }
    let per_session = calls / sessions;
    let started = Instant::now();
    let mut workers = Vec::new();
    for id in ids {
        let (http, url, tool, arguments) =
            (http.clone(), url.clone(), tool.clone(), arguments.clone());
        workers.push(tokio::spawn(async move {
            let mut latencies = Vec::with_capacity(per_session);
            for n in 0..per_session {
                let call = json!({"jsonrpc": "2.0", "id": n + 1, "method": "tools/call",
                                  "params": {"name": tool, "arguments": arguments}});
                let t = Instant::now();
                let (_, body) = post(&http, &url, Some(&id), &call)
                    .await
                    .map_err(|e| e.to_string())?;
                latencies.push(t.elapsed());
                if body.contains("\"isError\":true") || !body.contains("\"result\"") {
                    return Err(format!("call failed: {body}"));
                }
            }
            Ok::<_, String>(latencies)
        }));
    }
    let mut all: Vec<Duration> = Vec::with_capacity(calls);
    for w in workers {
        all.extend(w.await?.map_err(|e| e.to_string())?);
    }
    let elapsed = started.elapsed();
    all.sort();
    let pct = |p: f64| all[((all.len() as f64 * p) as usize).min(all.len() - 1)];
    println!(
        "tools/call {tool} over HTTP: {} calls, {sessions} sessions, {:.0} calls/s, p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        all.len(),
        all.len() as f64 / elapsed.as_secs_f64(),
        pct(0.50).as_secs_f64() * 1e3,
        pct(0.99).as_secs_f64() * 1e3,
        all[all.len() - 1].as_secs_f64() * 1e3,
    );
    Ok(())
}
