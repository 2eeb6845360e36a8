//! Load generators: pipelined `tools/call`s over stdio (a window of requests in flight per
//! server process) and back-to-back calls over Streamable HTTP sessions (one in flight per
//! session), timestamping every answer.

use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, anyhow, bail};
use serde_json::{Value, json};

use crate::procs::{
    ProcUsage, StdioServer, answer_failure, initialize_request, proc_usage, tool_call,
};
use crate::report::LoadReport;

/// Call number `n`'s tool and arguments.
pub type MakeCall = dyn Fn(usize) -> (&'static str, Value) + Send + Sync;
/// Hands a session its next call number, `None` once it has no more.
type CallFeed = Box<dyn FnMut() -> Option<usize> + Send>;
/// Whether the answer to call `n` is what the workload expects (`Err` says why not).
pub type CheckAnswer = dyn Fn(usize, &Value) -> Result<(), String> + Send + Sync;

/// The usual check: any JSON-RPC error or tool-error is a failure.
pub fn no_errors(_n: usize, answer: &Value) -> Result<(), String> {
    answer_failure(answer).map_or(Ok(()), Err)
}

/// Sum of the usage of several processes (CPU and RSS add up; peak RSS sums the peaks).
fn total_usage(pids: &[u32]) -> anyhow::Result<ProcUsage> {
    let mut total = ProcUsage::default();
    for &pid in pids {
        let u = proc_usage(pid)?;
        total.cpu_seconds += u.cpu_seconds;
        total.rss_kib += u.rss_kib;
        total.anon_rss_kib += u.anon_rss_kib;
        total.peak_rss_kib += u.peak_rss_kib;
    }
    Ok(total)
}

/// Calls `first..first + calls` dealt round robin into `clients` lists.
pub fn round_robin(first: usize, calls: usize, clients: usize) -> Vec<Vec<usize>> {
    let clients = clients.max(1);
    (0..clients)
        .map(|c| (first + c..first + calls).step_by(clients).collect())
        .collect()
}

/// `plan[i]` are the calls server `i` makes, each server driven by its own thread with
/// `window` requests in flight; the servers' CPU and memory are measured.
pub fn run_stdio(
    servers: &mut [StdioServer],
    plan: &[Vec<usize>],
    window: usize,
    make: &MakeCall,
    check: &CheckAnswer,
) -> anyhow::Result<LoadReport> {
    let pids: Vec<u32> = servers.iter().map(StdioServer::pid).collect();
    let before = total_usage(&pids)?;
    let started = Instant::now();
    let reports = std::thread::scope(|scope| {
        let handles: Vec<_> = servers
            .iter_mut()
            .zip(plan)
            .map(|(server, mine)| {
                scope.spawn(move || drive_stdio(server, mine, window.max(1), make, check))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().map_err(|_| anyhow!("a client thread panicked"))?)
            .collect::<anyhow::Result<Vec<LoadReport>>>()
    })?;
    let elapsed = started.elapsed();
    let after = total_usage(&pids)?;
    let mut report = LoadReport::default();
    for r in reports {
        report.merge(r);
    }
    report.elapsed = elapsed;
    report.server_cpu_seconds = Some(after.cpu_seconds - before.cpu_seconds);
    report.server_rss_kib = Some(after.rss_kib);
    report.server_anon_rss_kib = Some(after.anon_rss_kib);
    report.server_peak_rss_kib = Some(after.peak_rss_kib);
    Ok(report)
}

/// One server's share: keep `window` requests in flight until every call is answered.
fn drive_stdio(
    server: &mut StdioServer,
    calls: &[usize],
    window: usize,
    make: &MakeCall,
    check: &CheckAnswer,
) -> anyhow::Result<LoadReport> {
    let mut report = LoadReport::default();
    let mut sent_at: Vec<Option<Instant>> = vec![None; calls.len()];
    let started = Instant::now();
    let mut sent = 0;
    let send_next = |server: &mut StdioServer,
                     sent_at: &mut [Option<Instant>],
                     sent: &mut usize|
     -> anyhow::Result<()> {
        let (tool, args) = make(calls[*sent]);
        let line = tool_call(*sent as u64 + 1, tool, &args);
        sent_at[*sent] = Some(Instant::now());
        server.send_line(&line)?;
        *sent += 1;
        Ok(())
    };
    while sent < calls.len().min(window) {
        send_next(server, &mut sent_at, &mut sent)?;
    }
    let mut answered = 0;
    while answered < calls.len() {
        let (at, answer) = server
            .answers
            .recv_timeout(Duration::from_secs(120))
            .context("no answer within 120 s")?;
        // Skip notifications and requests from the server.
        if answer.get("method").is_some() {
            continue;
        }
        let Some(pos) = answer["id"].as_u64().and_then(|id| id.checked_sub(1)) else {
            continue;
        };
        let pos = pos as usize;
        let Some(t0) = sent_at.get_mut(pos).and_then(Option::take) else {
            continue;
        };
        report.latencies.push(at - t0);
        answered += 1;
        if let Err(why) = check(calls[pos], &answer) {
            report.fail(why);
        }
        if sent < calls.len() {
            send_next(server, &mut sent_at, &mut sent)?;
        }
    }
    report.elapsed = started.elapsed();
    Ok(report)
}

/// An HTTP client for MCP over Streamable HTTP (loopback: no proxy, `TCP_NODELAY`).
pub fn http_client() -> anyhow::Result<reqwest::Client> {
    // Built with the workspace, reqwest has rustls but no crypto provider of its own.
    let _ = rustls::crypto::ring::default_provider().install_default();
    Ok(reqwest::Client::builder()
        .no_proxy()
        .tcp_nodelay(true)
        .timeout(Duration::from_secs(120))
        .build()?)
}

/// One MCP session over Streamable HTTP.
pub struct HttpSession {
    http: reqwest::Client,
    url: String,
    id: String,
}

impl HttpSession {
    /// `initialize` at `url` and `notifications/initialized`.
    pub async fn open(http: &reqwest::Client, url: &str) -> anyhow::Result<HttpSession> {
        let (id, body) = post(http, url, None, initialize_request(0).to_string()).await?;
        let id = id.with_context(|| format!("no mcp-session-id on initialize: {body}"))?;
        let session = HttpSession {
            http: http.clone(),
            url: url.to_owned(),
            id,
        };
        session
            .post(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string())
            .await?;
        Ok(session)
    }

    async fn post(&self, body: String) -> anyhow::Result<String> {
        Ok(post(&self.http, &self.url, Some(&self.id), body).await?.1)
    }

    /// Call `tool` with JSON-RPC id `id`; the answer message.
    pub async fn call(&self, id: u64, tool: &str, args: &Value) -> anyhow::Result<Value> {
        let body = self.post(tool_call(id, tool, args)).await?;
        message_with_id(&body, id).with_context(|| format!("no answer with id {id} in {body:?}"))
    }

    /// End the session (DELETE).
    pub async fn close(self) {
        let _ = self
            .http
            .delete(&self.url)
            .header("mcp-session-id", &self.id)
            .send()
            .await;
    }
}

/// POST one JSON-RPC message; the session id header of the answer and its body.
async fn post(
    http: &reqwest::Client,
    url: &str,
    session: Option<&str>,
    body: String,
) -> anyhow::Result<(Option<String>, String)> {
    let mut req = http
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(body);
    if let Some(s) = session {
        req = req.header("mcp-session-id", s);
    }
    let resp = req.send().await?;
    let status = resp.status();
    let id = resp
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let text = resp.text().await?;
    if !status.is_success() {
        bail!("HTTP {status}: {text}");
    }
    Ok((id, text))
}

/// The JSON-RPC message with `id` in a JSON body or an SSE stream's `data:` lines.
pub(crate) fn message_with_id(body: &str, id: u64) -> Option<Value> {
    if let Ok(v) = serde_json::from_str::<Value>(body) {
        return Some(v);
    }
    body.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
        .find(|v| v["id"] == json!(id))
}

/// `sessions` HTTP sessions at `url` on their own runtime, ready to run load phases.
pub struct HttpLoad {
    runtime: tokio::runtime::Runtime,
    sessions: Vec<Arc<HttpSession>>,
}

impl HttpLoad {
    /// Open `sessions` sessions at `url`.
    pub fn open(url: &str, sessions: usize) -> anyhow::Result<HttpLoad> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()?;
        let sessions = runtime.block_on(async {
            let http = http_client()?;
            let mut out = Vec::with_capacity(sessions);
            for _ in 0..sessions.max(1) {
                out.push(Arc::new(HttpSession::open(&http, url).await?));
            }
            Ok::<_, anyhow::Error>(out)
        })?;
        Ok(HttpLoad { runtime, sessions })
    }

    /// `plan[i]` are the calls session `i` makes, each sent when the last is answered
    /// (racers that each make every call). `server_pid` is measured when given.
    pub fn run(
        &self,
        plan: &[Vec<usize>],
        make: Arc<MakeCall>,
        check: Arc<CheckAnswer>,
        server_pid: Option<u32>,
    ) -> anyhow::Result<LoadReport> {
        let feeds = plan
            .iter()
            .map(|mine| {
                let mut mine = mine.clone().into_iter();
                Box::new(move || mine.next()) as CallFeed
            })
            .collect();
        self.run_feeds(feeds, make, check, server_pid)
    }

    /// Calls `calls`, every session taking the next one of the sequence when its last is
    /// answered, as agents on one board each take its next ready task. Dealing them out
    /// in advance instead would let a session that runs ahead claim tasks far down the
    /// board, touching pages no other claim of its group touches, which a client
    /// pipelining the same calls in order never does. `server_pid` is measured when given.
    pub fn run_shared(
        &self,
        calls: Range<usize>,
        make: Arc<MakeCall>,
        check: Arc<CheckAnswer>,
        server_pid: Option<u32>,
    ) -> anyhow::Result<LoadReport> {
        let next = Arc::new(AtomicUsize::new(calls.start));
        let feeds = self
            .sessions
            .iter()
            .map(|_| {
                let (next, end) = (next.clone(), calls.end);
                Box::new(move || Some(next.fetch_add(1, Ordering::Relaxed)).filter(|&n| n < end))
                    as CallFeed
            })
            .collect();
        self.run_feeds(feeds, make, check, server_pid)
    }

    /// Session `i` makes the calls `feeds[i]` hands out, each sent when the last is
    /// answered.
    fn run_feeds(
        &self,
        feeds: Vec<CallFeed>,
        make: Arc<MakeCall>,
        check: Arc<CheckAnswer>,
        server_pid: Option<u32>,
    ) -> anyhow::Result<LoadReport> {
        let pids: Vec<u32> = server_pid.into_iter().collect();
        let before = total_usage(&pids)?;
        let started = Instant::now();
        let reports = self.runtime.block_on(async {
            let mut workers = Vec::with_capacity(feeds.len());
            for (session, mut feed) in self.sessions.iter().zip(feeds) {
                let (session, make, check) = (session.clone(), make.clone(), check.clone());
                workers.push(tokio::spawn(async move {
                    let mut report = LoadReport::default();
                    let mut id = 0;
                    while let Some(n) = feed() {
                        id += 1;
                        let (tool, args) = make(n);
                        let t0 = Instant::now();
                        let answer = session.call(id, tool, &args).await?;
                        report.latencies.push(t0.elapsed());
                        if let Err(why) = check(n, &answer) {
                            report.fail(why);
                        }
                    }
                    Ok::<_, anyhow::Error>(report)
                }));
            }
            let mut reports = Vec::with_capacity(workers.len());
            for w in workers {
                reports.push(w.await??);
            }
            Ok::<_, anyhow::Error>(reports)
        })?;
        let elapsed = started.elapsed();
        let mut report = LoadReport::default();
        for r in reports {
            report.merge(r);
        }
        report.elapsed = elapsed;
        if !pids.is_empty() {
            let after = total_usage(&pids)?;
            report.server_cpu_seconds = Some(after.cpu_seconds - before.cpu_seconds);
            report.server_rss_kib = Some(after.rss_kib);
            report.server_anon_rss_kib = Some(after.anon_rss_kib);
            report.server_peak_rss_kib = Some(after.peak_rss_kib);
        }
        Ok(report)
    }

    /// End every session.
    pub fn close(self) {
        let HttpLoad { runtime, sessions } = self;
        runtime.block_on(async {
            for s in sessions {
                if let Ok(s) = Arc::try_unwrap(s) {
                    s.close().await;
                }
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_found_in_json_and_sse_bodies() {
        let json_body = r#"{"jsonrpc":"2.0","id":3,"result":{}}"#;
        assert_eq!(message_with_id(json_body, 3).unwrap()["id"], json!(3));
        let sse = "id: 1\ndata: \n\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}\n\n";
        assert_eq!(message_with_id(sse, 7).unwrap()["id"], json!(7));
        assert!(message_with_id(sse, 8).is_none());
    }
}
