//! The processes a benchmark drives: stdio MCP servers (ours, the echo server, the peer)
//! with a reader thread timestamping every answer, and `clawboo serve`; plus their CPU time
//! and memory from `/proc`.

use std::ffi::OsString;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clawboo_store::DbLocation;
use serde_json::{Value, json};

/// Environment a benchmarked server must not inherit (it would change what is measured).
const CLEARED_ENV: [&str; 6] = [
    "STUDIO_ACCESS_TOKEN",
    "CLAWBOO_ALLOW_INSECURE",
    "CLAWBOO_ALLOWED_HOSTS",
    "CLAWBOO_MCP_BIN_DIR",
    "CLAWBOO_DB_PATH",
    "CLAWBOO_PG_POOL",
];

/// A clawboo binary from `bin_dir`, with a clean environment and the embedder chosen by
/// `embeddings` (`CLAWBOO_EMBEDDINGS`).
pub fn clawboo_command(bin_dir: &Path, name: &str, embeddings: &str) -> Command {
    let mut cmd = Command::new(bin_dir.join(name));
    for k in CLEARED_ENV {
        cmd.env_remove(k);
    }
    cmd.env(clawboo_embed::select::EMBEDDINGS_ENV, embeddings);
    cmd
}

/// CPU time and memory of a process.
#[derive(Debug, Clone, Copy, Default)]
pub struct ProcUsage {
    /// User + system CPU seconds so far.
    pub cpu_seconds: f64,
    /// Resident set now, KiB.
    pub rss_kib: u64,
    /// Of which private memory (`RssAnon`: heap, stacks), KiB; the rest is file-backed
    /// (code and mapped database pages, shared with the kernel's page cache).
    pub anon_rss_kib: u64,
    /// Highest resident set so far (`VmHWM`), KiB.
    pub peak_rss_kib: u64,
}

/// The fields of `/proc/<pid>/stat` after the parenthesised command name: `[1]` is the
/// parent, `[11]`/`[12]` user and system ticks, `[13]`/`[14]` those of reaped children.
fn stat_fields(pid: u32) -> anyhow::Result<Vec<String>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .with_context(|| format!("process {pid} is gone"))?;
    let after = stat.rsplit_once(')').context("bad /proc stat")?.1;
    let fields: Vec<String> = after.split_whitespace().map(str::to_owned).collect();
    if fields.len() < 15 {
        bail!("short /proc/{pid}/stat");
    }
    Ok(fields)
}

/// The sum of stat fields `at` of `fields`, as seconds of CPU.
fn ticks(fields: &[String], at: &[usize]) -> anyhow::Result<f64> {
    let mut sum = 0.0;
    for &i in at {
        sum += fields[i].parse::<f64>()?;
    }
    Ok(sum / clock_ticks_per_second())
}

/// The parent of process `pid`.
pub fn parent_pid(pid: u32) -> anyhow::Result<u32> {
    Ok(stat_fields(pid)?[1].parse()?)
}

/// CPU seconds a process family has spent: `parent` itself, its children that ended, and
/// its live children (a PostgreSQL server: the postmaster, its background processes and
/// one backend per connection).
pub fn family_cpu_seconds(parent: u32) -> anyhow::Result<f64> {
    let mut total = ticks(&stat_fields(parent)?, &[11, 12, 13, 14])?;
    for entry in std::fs::read_dir("/proc")? {
        let Some(pid) = entry?
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        // A process may end between the listing and the read.
        if let Ok(fields) = stat_fields(pid)
            && fields[1] == parent.to_string()
        {
            total += ticks(&fields, &[11, 12])?;
        }
    }
    Ok(total)
}

/// Read `pid`'s usage from `/proc`.
pub fn proc_usage(pid: u32) -> anyhow::Result<ProcUsage> {
    let fields = stat_fields(pid)?;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let kib = |key: &str| -> u64 {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    Ok(ProcUsage {
        cpu_seconds: ticks(&fields, &[11, 12])?,
        rss_kib: kib("VmRSS:"),
        anon_rss_kib: kib("RssAnon:"),
        peak_rss_kib: kib("VmHWM:"),
    })
}

/// `sysconf(_SC_CLK_TCK)`, which is 100 on every Linux this runs on; read once from
/// `getconf` to avoid `unsafe` FFI.
fn clock_ticks_per_second() -> f64 {
    static TICKS: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
    *TICKS.get_or_init(|| {
        Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(100.0)
    })
}

/// `KiB` as MiB with one decimal.
pub fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

/// A spawned stdio MCP server: requests go to its stdin, and a reader thread hands over
/// every JSON line of its stdout with the instant it arrived.
pub struct StdioServer {
    child: Child,
    stdin: Option<ChildStdin>,
    /// Answers (and notifications) in arrival order.
    pub answers: Receiver<(Instant, Value)>,
}

impl StdioServer {
    /// Spawn `cmd` with piped stdin/stdout (stderr is inherited: servers log there).
    pub fn spawn(mut cmd: Command) -> anyhow::Result<StdioServer> {
        let program = cmd.get_program().to_string_lossy().into_owned();
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .with_context(|| format!("cannot start {program}"))?;
        let stdout = child.stdout.take().context("no stdout")?;
        let stdin = child.stdin.take();
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
        Ok(StdioServer {
            child,
            stdin,
            answers,
        })
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Write one JSON-RPC line (already serialized, without the newline).
    pub fn send_line(&mut self, line: &str) -> anyhow::Result<()> {
        let stdin = self.stdin.as_mut().context("stdin closed")?;
        stdin.write_all(line.as_bytes())?;
        stdin.write_all(b"\n")?;
        Ok(())
    }

    /// The next answer carrying `id`, skipping notifications and other answers.
    pub fn wait_for(&self, id: u64) -> anyhow::Result<(Instant, Value)> {
        loop {
            let (at, v) = self
                .answers
                .recv_timeout(Duration::from_secs(120))
                .context("no answer within 120 s")?;
            if v["id"] == json!(id) {
                return Ok((at, v));
            }
        }
    }

    /// `initialize` (id 0) and `notifications/initialized`.
    pub fn initialize(&mut self) -> anyhow::Result<()> {
        self.send_line(&initialize_request(0).to_string())?;
        self.send_line(
            &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string(),
        )?;
        let (_, answer) = self.wait_for(0)?;
        if answer.get("result").is_none() {
            bail!("initialize failed: {answer}");
        }
        Ok(())
    }

    /// This process's usage.
    pub fn usage(&self) -> anyhow::Result<ProcUsage> {
        proc_usage(self.pid())
    }

    /// Close stdin and wait for a clean exit.
    pub fn finish(mut self) -> anyhow::Result<()> {
        drop(self.stdin.take());
        let status = self.child.wait()?;
        if !status.success() {
            bail!("server exited with {status}");
        }
        Ok(())
    }
}

impl Drop for StdioServer {
    fn drop(&mut self) {
        if self.stdin.is_some() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// The `initialize` request every benchmark client sends.
pub fn initialize_request(id: u64) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "clawboo-bench", "version": "0"}}})
}

/// One `tools/call` request line.
pub fn tool_call(id: u64, tool: &str, args: &Value) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": {"name": tool, "arguments": args}})
    .to_string()
}

/// Why an answer counts as a failure: a JSON-RPC error or a tool-error, with its text.
pub fn answer_failure(answer: &Value) -> Option<String> {
    if let Some(e) = answer.get("error") {
        return Some(e.to_string());
    }
    if answer["result"]["isError"] == json!(true) {
        return Some(answer["result"].to_string());
    }
    None
}

/// The JSON text inside a tool result's first content block (our tools answer JSON).
pub fn result_json(answer: &Value) -> anyhow::Result<Value> {
    let text = answer["result"]["content"][0]["text"]
        .as_str()
        .with_context(|| format!("no text result in {answer}"))?;
    Ok(serde_json::from_str(text)?)
}

/// A running `clawboo serve` on loopback, killed on drop.
pub struct ServeProcess {
    child: Child,
    /// `http://127.0.0.1:<port>`.
    pub base: String,
}

impl ServeProcess {
    /// Start `clawboo serve` on `db`, bound to a free loopback port; returns once the
    /// listening line is printed (the socket is bound by then).
    pub fn start(
        bin_dir: &Path,
        db: &DbLocation,
        embeddings: &str,
    ) -> anyhow::Result<ServeProcess> {
        let mut cmd = clawboo_command(bin_dir, "clawboo", embeddings);
        cmd.args(["serve", "--bind", "127.0.0.1:0", "--db"])
            .arg(db_arg(db))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        let mut child = cmd.spawn().context("cannot start clawboo serve")?;
        let stdout = child.stdout.take().context("no stdout")?;
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line)?;
        let Some(base) = line.trim().strip_prefix("clawboo listening on ") else {
            let _ = child.kill();
            bail!("clawboo serve did not start: {line:?}");
        };
        Ok(ServeProcess {
            base: base.to_owned(),
            child,
        })
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for ServeProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `location` as a server's `--db` argument (a URL with its password: the server needs it).
pub fn db_arg(location: &DbLocation) -> OsString {
    match location {
        DbLocation::File(path) => path.clone().into_os_string(),
        DbLocation::Postgres(url) => url.into(),
    }
}
