//! The operators' view (SPEC §17) against the real `clawboo serve` on port 0: the health
//! and readiness probes (ungated, and `/readyz` 503 with its reason while PostgreSQL is
//! down, 200 once it is back); `/metrics` parsed by the official Prometheus client's
//! OpenMetrics parser, its counters moving by exactly the calls made, its buckets
//! cumulative, no argument value in any label; and a tool call's span received over
//! OTLP/HTTP, decoded by the official OpenTelemetry protobuf bindings. The Python side is
//! installed by `scripts/install-ops-python.sh` (a gitignored venv).

#![allow(clippy::unwrap_used)]

mod common;
mod http_support;
mod multi_host;
mod own_cluster;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

use common::{TestDb, not_a_postgres_run};
use http_support::{Server, Session, clawboo, client, signed_tasks_url};
use multi_host::{McpClient, ok_json, rest};
use own_cluster::Cluster;
use reqwest::Method;
use serde_json::{Value, json};

const TOKEN: &str = "ops-test-token-0123456789";

/// `GET path` on `server`: status and JSON body.
fn get(server: &Server, path: &str) -> (u16, Value) {
    rest(&server.url(path), Method::GET, None)
}

#[test]
fn health_and_readiness_answer_without_the_token_and_name_the_engine() {
    let server = Server::start(&[("STUDIO_ACCESS_TOKEN", TOKEN)]);
    // The gate is on: /api/* wants the token, the probes do not.
    assert_eq!(get(&server, "/api/teams").0, 401);
    assert_eq!(get(&server, "/healthz"), (200, json!({"ok": true})));
    let (status, ready) = get(&server, "/readyz");
    assert_eq!(status, 200, "{ready}");
    assert_eq!(ready["ready"], json!(true));
    let engine = if server.db.is_postgres() {
        "postgres"
    } else {
        "sqlite"
    };
    assert_eq!(ready["backend"], json!(engine));
    // The same vector-search path `/api/mcp/status` reports.
    let expected = if server.db.is_postgres() {
        ["pgvector-hnsw", "exact-scan"].as_slice()
    } else {
        ["in-process"].as_slice()
    };
    let path = ready["vectorSearch"].as_str().unwrap();
    assert!(expected.contains(&path), "{ready}");
    assert!(ready.get("error").is_none(), "{ready}");
}

#[test]
fn readiness_is_503_with_the_reason_while_postgres_is_down_and_200_once_back() {
    if not_a_postgres_run() {
        return;
    }
    let Some(cluster) = Cluster::start() else {
        return;
    };
    let db = TestDb::postgres_on(&cluster.url);
    let server = Server::start_on(&db, "127.0.0.1:0", &[]);
    assert_eq!(get(&server, "/readyz").0, 200);

    cluster.run("pause");
    let (status, body) = until(Duration::from_secs(60), || {
        let answer = get(&server, "/readyz");
        (answer.0 == 503).then_some(answer)
    });
    assert_eq!(status, 503);
    assert_eq!(body["ready"], json!(false));
    let reason = body["error"].as_str().unwrap();
    assert!(reason.contains("database"), "{reason}");
    // No driver text reaches the caller.
    assert!(!reason.contains("PostgreSQL:"), "{reason}");
    // The process itself still answers.
    assert_eq!(get(&server, "/healthz").0, 200);

    cluster.run("resume");
    let (status, body) = until(Duration::from_secs(60), || {
        let answer = get(&server, "/readyz");
        (answer.0 == 200).then_some(answer)
    });
    assert_eq!((status, &body["ready"]), (200, &json!(true)));
}

/// Poll `probe` until it gives a value, failing after `within` (a bound that only stops a
/// hang).
fn until<T>(within: Duration, mut probe: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + within;
    loop {
        if let Some(value) = probe() {
            return value;
        }
        assert!(Instant::now() < deadline, "not within {within:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

const REPO: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

/// The Python with the official parsers, installed on first use; `None` (after a notice)
/// when it cannot be installed outside CI. In CI a failed install fails the test.
fn ops_python() -> Option<PathBuf> {
    let out = Command::new("bash")
        .arg(format!("{REPO}/scripts/install-ops-python.sh"))
        .output()
        .unwrap();
    if out.status.success() {
        return Some(PathBuf::from(String::from_utf8(out.stdout).unwrap().trim()));
    }
    let why = String::from_utf8_lossy(&out.stderr);
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "scripts/install-ops-python.sh failed: {why}"
    );
    eprintln!("skipped: the Python parsers could not be installed: {why}");
    None
}

/// One parsed exposition: each sample's value by its name and labels.
struct Scrape {
    text: String,
    types: BTreeMap<String, String>,
    samples: Vec<(String, BTreeMap<String, String>, f64)>,
}

impl Scrape {
    /// The value of sample `name` whose labels include `labels` (0 when absent, as a
    /// counter not yet created reads).
    fn value(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.samples
            .iter()
            .filter(|(n, l, _)| {
                n == name
                    && labels
                        .iter()
                        .all(|(k, v)| l.get(*k).map(String::as_str) == Some(v))
            })
            .map(|(_, _, value)| value)
            .sum()
    }
}

/// `GET url` (a `/metrics`), parsed by the official parser.
fn scrape(python: &PathBuf, url: &str) -> Scrape {
    let (content_type, text) = block_on(async {
        let resp = client().get(url).send().await.unwrap();
        assert_eq!(resp.status(), 200);
        let content_type = resp.headers()["content-type"].to_str().unwrap().to_owned();
        (content_type, resp.text().await.unwrap())
    });
    assert!(
        content_type.starts_with("application/openmetrics-text"),
        "{content_type}"
    );
    let mut child = Command::new(python)
        .arg(format!("{REPO}/tests/ops/parse_metrics.py"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "the parser refused the exposition: {}\n{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    let parsed: Value = serde_json::from_slice(&out.stdout).unwrap();
    let types = parsed["types"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_owned()))
        .collect();
    let samples = parsed["samples"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let labels = s[1]
                .as_object()
                .unwrap()
                .iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_owned()))
                .collect();
            (
                s[0].as_str().unwrap().to_owned(),
                labels,
                s[2].as_f64().unwrap(),
            )
        })
        .collect();
    Scrape {
        text,
        types,
        samples,
    }
}

/// An MCP session on `url`.
fn session(url: &str) -> McpClient {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let session = runtime.block_on(Session::open(url));
    McpClient::Http(runtime, session)
}

/// Run `future` to its end on a runtime of its own.
fn block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(future)
}

/// Argument values the calls below carry, none of which may reach a label or a span.
const SECRET_TITLE: &str = "title-7f3a-never-a-label";
const BOGUS_ID: &str = "id-91c2-never-a-label";
const BOGUS_TOOL: &str = "tool_5d8e_never_a_label";

#[test]
fn metrics_count_exactly_the_calls_made_with_bounded_labels() {
    let Some(python) = ops_python() else {
        return;
    };
    let server = Server::start(&[]);
    let metrics = server.url("/metrics");
    let before = scrape(&python, &metrics);

    let mut tasks = session(&server.url("/api/mcp/tasks"));
    let created = tasks.call_ok("create_task", json!({"title": SECRET_TITLE}));
    let id = created["task"]["id"].as_str().unwrap().to_owned();
    for _ in 0..3 {
        tasks.call_ok("get_task", json!({"taskId": id}));
    }
    let missing = tasks.call("get_task", json!({"taskId": BOGUS_ID}));
    assert!(ok_json(&missing).is_none(), "{missing}");
    let unknown = tasks.call(BOGUS_TOOL, json!({}));
    assert!(ok_json(&unknown).is_none(), "{unknown}");
    tasks.call_ok(
        "claim_task",
        json!({"taskId": id, "assigneeAgentId": "alice"}),
    );
    for _ in 0..2 {
        assert_eq!(get(&server, "/api/teams").0, 200);
    }
    let (status, _) = get(&server, &format!("/api/memory?query={SECRET_TITLE}"));
    assert_eq!(status, 200);

    let after = scrape(&python, &metrics);
    let moved = |name: &str, labels: &[(&str, &str)]| {
        after.value(name, labels) - before.value(name, labels)
    };
    let calls = "clawboo_mcp_tool_calls_total";
    let tasks_tool = |tool: &'static str, outcome: &'static str| {
        [("server", "tasks"), ("tool", tool), ("outcome", outcome)]
    };
    assert_eq!(moved(calls, &tasks_tool("create_task", "ok")), 1.0);
    assert_eq!(moved(calls, &tasks_tool("get_task", "ok")), 3.0);
    assert_eq!(moved(calls, &tasks_tool("get_task", "not_found")), 1.0);
    assert_eq!(moved(calls, &tasks_tool("unknown", "unknown_tool")), 1.0);
    assert_eq!(moved(calls, &tasks_tool("claim_task", "ok")), 1.0);
    assert_eq!(moved(calls, &[]), 7.0, "no other call was counted");
    let latency = "clawboo_mcp_tool_call_duration_seconds_count";
    assert_eq!(
        moved(latency, &[("server", "tasks"), ("tool", "get_task")]),
        4.0
    );
    let rest = "clawboo_http_requests_total";
    let teams = [
        ("route", "/api/teams"),
        ("method", "GET"),
        ("status", "200"),
    ];
    assert_eq!(moved(rest, &teams), 2.0);
    assert_eq!(moved("clawboo_memory_searches_total", &[]), 1.0);
    // The claim holds a lease that does not run out within a minute.
    assert_eq!(after.value("clawboo_leases_held", &[]), 1.0);
    assert_eq!(after.value("clawboo_leases_expiring", &[]), 0.0);
    assert_eq!(after.value("clawboo_approvals_pending", &[]), 0.0);
    assert_eq!(after.value("clawboo_store_up", &[]), 1.0);
    let backend = if server.db.is_postgres() {
        "postgres"
    } else {
        "sqlite"
    };
    assert!(moved("clawboo_store_round_trips_total", &[("backend", backend)]) > 0.0);
    assert_eq!(
        after.value("clawboo_build_info", &[("backend", backend)]),
        1.0,
        "{}",
        after.text
    );
    if server.db.is_postgres() {
        assert!(after.value("clawboo_postgres_pool_size", &[]) >= 1.0);
        assert!(after.value("clawboo_postgres_pool_open", &[]) >= 1.0);
    } else {
        assert!(after.types.contains_key("clawboo_sqlite_group_commits"));
    }
    assert!(after.value("clawboo_process_cpu_seconds_total", &[]) > 0.0);
    assert!(after.value("clawboo_process_resident_memory_bytes", &[]) > 0.0);
    assert!(after.value("clawboo_process_open_fds", &[]) > 0.0);
    for (family, kind) in [
        ("clawboo_mcp_tool_calls", "counter"),
        ("clawboo_mcp_tool_call_duration_seconds", "histogram"),
        ("clawboo_http_request_duration_seconds", "histogram"),
        ("clawboo_mcp_sessions_open", "gauge"),
        ("clawboo_build", "info"),
    ] {
        assert_eq!(
            after.types.get(family).map(String::as_str),
            Some(kind),
            "{family}"
        );
    }

    assert_buckets_cumulative(&after);
    for secret in [SECRET_TITLE, BOGUS_ID, BOGUS_TOOL, &id] {
        assert!(
            !after.text.contains(secret),
            "{secret} reached the exposition"
        );
    }
}

/// Every histogram's buckets grow with `le`, and its `+Inf` bucket is its count.
fn assert_buckets_cumulative(scrape: &Scrape) {
    let mut series: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    for (name, labels, value) in &scrape.samples {
        let Some(family) = name.strip_suffix("_bucket") else {
            continue;
        };
        let mut rest = labels.clone();
        let le = rest.remove("le").unwrap();
        let le = if le == "+Inf" {
            f64::INFINITY
        } else {
            le.parse().unwrap()
        };
        series
            .entry(format!("{family}{rest:?}"))
            .or_default()
            .push((le, *value));
    }
    assert!(!series.is_empty(), "no histogram in {}", scrape.text);
    for (key, mut buckets) in series {
        buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
        assert!(
            buckets.windows(2).all(|w| w[0].1 <= w[1].1),
            "{key}: {buckets:?}"
        );
        assert_eq!(buckets.last().unwrap().0, f64::INFINITY, "{key}");
    }
}

#[test]
fn metrics_are_gated_like_the_api_or_served_apart() {
    let server = Server::start(&[("STUDIO_ACCESS_TOKEN", TOKEN)]);
    assert_eq!(get(&server, "/metrics").0, 401);
    let status = block_on(async {
        client()
            .get(server.url("/metrics"))
            .bearer_auth(TOKEN)
            .send()
            .await
            .unwrap()
            .status()
    });
    assert_eq!(status, 200);

    // `--metrics-bind`: served on its own address, no longer on the public one.
    let db = TestDb::new();
    let mut child = clawboo()
        .args([
            "serve",
            "--bind",
            "127.0.0.1:0",
            "--metrics-bind",
            "127.0.0.1:0",
            "--db",
        ])
        .arg(&db)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let child = KillOnDrop(&mut child);
    let lines = read_lines(child.0.stdout.take().unwrap());
    let base = line_after(&lines, "clawboo listening on ");
    let metrics_url = line_after(&lines, "  metrics:  ");
    let (status, _) = rest(&format!("{base}/metrics"), Method::GET, None);
    assert_eq!(status, 404);
    let text = block_on(async {
        let resp = client().get(&metrics_url).send().await.unwrap();
        assert_eq!(resp.status(), 200);
        resp.text().await.unwrap()
    });
    assert!(text.contains("clawboo_build_info"), "{text}");
    assert!(text.ends_with("# EOF\n"), "{text}");
}

/// Kills the child when dropped, however the test ends.
struct KillOnDrop<'a>(&'a mut Child);

impl Drop for KillOnDrop<'_> {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A reader's lines, as they come, on a channel.
fn read_lines(from: impl std::io::Read + Send + 'static) -> Receiver<String> {
    let (lines, received) = channel();
    std::thread::spawn(move || {
        for line in BufReader::new(from).lines().map_while(Result::ok) {
            if lines.send(line).is_err() {
                break;
            }
        }
    });
    received
}

/// The rest of the first line that starts with `prefix` (within 30 s).
fn line_after(lines: &Receiver<String>, prefix: &str) -> String {
    loop {
        let line = lines
            .recv_timeout(Duration::from_secs(30))
            .unwrap_or_else(|e| panic!("no line starting {prefix:?}: {e}"));
        if let Some(rest) = line.strip_prefix(prefix) {
            return rest.trim().to_owned();
        }
    }
}

#[test]
fn a_tool_call_is_a_span_tree_exported_over_otlp_without_its_arguments() {
    let Some(python) = ops_python() else {
        return;
    };
    let mut receiver = Command::new(&python)
        .arg(format!("{REPO}/tests/ops/otlp_receiver.py"))
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let receiver = KillOnDrop(&mut receiver);
    let spans = read_lines(receiver.0.stdout.take().unwrap());
    let port = spans.recv_timeout(Duration::from_secs(30)).unwrap();
    let endpoint = format!("http://127.0.0.1:{}", port.trim());
    let server = Server::start(&[
        ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
        ("OTEL_BSP_SCHEDULE_DELAY", "50"),
        ("OTEL_SERVICE_NAME", "clawboo-under-test"),
    ]);
    let url = signed_tasks_url(&server, "red", "alice");
    let mut tasks = session(&url);
    let missing = tasks.call("get_task", json!({"taskId": BOGUS_ID}));
    assert!(ok_json(&missing).is_none(), "{missing}");
    assert_eq!(get(&server, "/api/teams").0, 200);

    let mut call = None;
    let mut request = None;
    let mut store_spans: Vec<Value> = Vec::new();
    let is_child_of = |child: &Value, parent: &Option<Value>| {
        parent.as_ref().is_some_and(|p| {
            child["traceId"] == p["traceId"] && child["parentSpanId"] == p["spanId"]
        })
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while call.is_none() || request.is_none() || !store_spans.iter().any(|s| is_child_of(s, &call))
    {
        let left = deadline.saturating_duration_since(Instant::now());
        let line = spans
            .recv_timeout(left)
            .unwrap_or_else(|e| panic!("no spans within 30 s ({e}); call {call:?}"));
        let span: Value = serde_json::from_str(&line).unwrap();
        assert!(
            !span["raw"].as_str().unwrap().contains(BOGUS_ID),
            "an argument was exported"
        );
        match span["name"].as_str().unwrap() {
            "tasks/get_task" => call = Some(span),
            "GET /api/teams" => request = Some(span),
            name if name.starts_with("store.") => store_spans.push(span),
            _ => {}
        }
    }
    // The call's trip to the store is its child span, named by the engine it ran on.
    let trip = store_spans.iter().find(|s| is_child_of(s, &call)).unwrap();
    assert!(
        ["sqlite", "postgres"].contains(&trip["attributes"]["engine"].as_str().unwrap_or("")),
        "{trip}"
    );
    let call = call.unwrap();
    let attributes = &call["attributes"];
    assert_eq!(attributes["server"], json!("tasks"), "{call}");
    assert_eq!(attributes["tool"], json!("get_task"));
    assert_eq!(attributes["family"], json!("session"));
    assert_eq!(attributes["team"], json!("red"));
    assert_eq!(attributes["agent"], json!("alice"));
    assert!(
        attributes["session"]
            .as_str()
            .is_some_and(|s| !s.is_empty()),
        "{call}"
    );
    assert_eq!(call["service"], json!("clawboo-under-test"));
    // A server span, the root of its trace.
    assert_eq!(call["kind"], json!(2));
    assert_eq!(call["parentSpanId"], json!(""));
    let request = request.unwrap();
    assert_eq!(request["attributes"]["route"], json!("/api/teams"));
    assert_eq!(request["attributes"]["method"], json!("GET"));
    assert_eq!(request["attributes"]["status"], json!(200));
    assert!(request["attributes"]["request_id"].as_str().is_some());
}

#[test]
fn json_logs_are_one_object_a_line_with_the_call_span_fields() {
    let db = TestDb::new();
    let mut child = Command::new(env!("CARGO_BIN_EXE_clawboo-mcp-tasks"))
        .arg("--db")
        .arg(&db)
        .args(["--team", "red", "--agent", "alice"])
        .env("CLAWBOO_LOG_FORMAT", "json")
        .env("RUST_LOG", "clawboo_mcp=debug")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "ops-test", "version": "0"}}});
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "get_task", "arguments": {"taskId": BOGUS_ID}}});
    for message in [
        initialize,
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        call,
    ] {
        writeln!(stdin, "{message}").unwrap();
    }
    // Read until the call's answer, then close stdin: the server exits.
    let answers = read_lines(child.stdout.take().unwrap());
    while !answers
        .recv_timeout(Duration::from_secs(30))
        .unwrap()
        .contains("\"id\":2")
    {}
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let stderr = String::from_utf8(out.stderr).unwrap();
    let lines: Vec<Value> = stderr
        .lines()
        .map(|line| {
            serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("not one JSON object ({e}): {line}"))
        })
        .collect();
    let answered = lines
        .iter()
        .find(|line| line["fields"]["message"] == json!("tool call answered"))
        .unwrap_or_else(|| panic!("no access line in {stderr}"));
    let span = &answered["span"];
    assert_eq!(span["name"], json!("mcp.call"), "{answered}");
    assert_eq!(span["server"], json!("tasks"));
    assert_eq!(span["tool"], json!("get_task"));
    assert_eq!(span["team"], json!("red"));
    assert_eq!(span["agent"], json!("alice"));
    assert!(
        !stderr.contains(BOGUS_ID),
        "an argument reached the log: {stderr}"
    );
}
