//! Mounted MCP servers and their liveness: each is probed with an in-process client
//! (`tools/list`) at start and then every interval; `/api/mcp/status` reports the results.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::Request;
use axum::response::Response;
use axum::routing::{MethodRouter, any};
use clawboo_mcp::attach::{McpServerName, binding_from_query};
use clawboo_mcp::binding::Binding;
use clawboo_mcp::probe::{ProbeError, probe_server};
use clawboo_mcp::signing::ScopeSigner;
use futures::future::BoxFuture;
use serde::Serialize;
use tokio::sync::RwLock;

use crate::mcp_http::{McpHttpConfig, McpHttpService, SessionServer};

type ProbeFn = Arc<dyn Fn() -> BoxFuture<'static, Result<usize, ProbeError>> + Send + Sync>;

/// A mount's endpoint: answers one HTTP request.
type AnswerFn = Arc<dyn Fn(Request) -> BoxFuture<'static, Response> + Send + Sync>;

/// How many sessions a mount holds open, for `/metrics`.
type SessionsFn = Arc<dyn Fn() -> BoxFuture<'static, usize> + Send + Sync>;

/// One MCP server mounted at `/api/mcp/<name>`.
#[derive(Clone)]
pub struct McpMount {
    /// Which server.
    pub name: McpServerName,
    answer: AnswerFn,
    probe: ProbeFn,
    sessions: SessionsFn,
}

impl McpMount {
    /// Mount `name`: each HTTP session gets a server from `build`, bound by the signed
    /// scope of its `initialize` URL (unbound without one; refused when it does not
    /// verify).
    pub fn new<S: SessionServer>(
        name: McpServerName,
        signer: ScopeSigner,
        config: McpHttpConfig,
        build: impl Fn(Binding) -> S + Send + Sync + 'static,
    ) -> McpMount {
        let build = Arc::new(build);
        let for_http = build.clone();
        let service = McpHttpService::checked(
            move |uri| binding_from_query(name, uri.query(), &signer).map(|b| for_http(b)),
            config,
        );
        let counted = service.clone();
        let sessions: SessionsFn = Arc::new(move || {
            let service = counted.clone();
            Box::pin(async move { service.session_count().await })
        });
        let answer: AnswerFn = Arc::new(move |req| {
            let service = service.clone();
            Box::pin(async move { service.handle(req).await })
        });
        let probe: ProbeFn = Arc::new(move || {
            let server = build(Binding::default());
            Box::pin(probe_server(server))
        });
        McpMount {
            name,
            answer,
            probe,
            sessions,
        }
    }

    /// How many sessions this mount holds open now.
    pub async fn session_count(&self) -> usize {
        (self.sessions)().await
    }

    /// The URL path of this mount.
    pub fn path(&self) -> String {
        format!("/api/mcp/{}", self.name.as_str())
    }

    /// Whether `path` is this mount's (exactly, as the router matches it).
    pub(crate) fn serves(&self, path: &str) -> bool {
        path.strip_prefix("/api/mcp/") == Some(self.name.as_str())
    }

    /// The route answering this mount's path.
    pub fn route(&self) -> MethodRouter {
        let answer = self.answer.clone();
        any(move |req| answer(req))
    }

    /// Answer one request for this mount's path.
    pub(crate) fn answer(&self, req: Request) -> BoxFuture<'static, Response> {
        (self.answer)(req)
    }
}

/// The last probe of one server.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ProbeReport {
    pub alive: bool,
    pub tool_count: Option<usize>,
    /// Epoch milliseconds of the probe.
    pub last_probe_at: i64,
    pub error: Option<String>,
}

/// Probe results by server.
#[derive(Default, Clone)]
pub struct McpStatus {
    reports: Arc<RwLock<BTreeMap<&'static str, ProbeReport>>>,
}

/// Longest a single probe may take before the server counts as not alive.
const PROBE_TIMEOUT: Duration = Duration::from_secs(10);

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

impl McpStatus {
    /// The last report of `name`, if it was probed.
    pub async fn report(&self, name: McpServerName) -> Option<ProbeReport> {
        self.reports.read().await.get(name.as_str()).cloned()
    }

    /// Probe every mount once and record the results.
    pub async fn probe_all(&self, mounts: &[McpMount]) {
        for mount in mounts {
            let result = tokio::time::timeout(PROBE_TIMEOUT, (mount.probe)()).await;
            let report = match result {
                Ok(Ok(count)) => ProbeReport {
                    alive: true,
                    tool_count: Some(count),
                    last_probe_at: now_ms(),
                    error: None,
                },
                Ok(Err(e)) => ProbeReport {
                    alive: false,
                    tool_count: None,
                    last_probe_at: now_ms(),
                    error: Some(e.to_string()),
                },
                Err(_) => ProbeReport {
                    alive: false,
                    tool_count: None,
                    last_probe_at: now_ms(),
                    error: Some(format!("no answer within {}s", PROBE_TIMEOUT.as_secs())),
                },
            };
            if !report.alive {
                tracing::warn!(
                    server = mount.name.as_str(),
                    "MCP probe failed: {:?}",
                    report.error
                );
            }
            self.reports
                .write()
                .await
                .insert(mount.name.as_str(), report);
        }
    }

    /// Probe now and then every `interval`, for as long as the runtime lives.
    pub fn spawn_prober(&self, mounts: Vec<McpMount>, interval: Duration) {
        let status = self.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(interval);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                status.probe_all(&mounts).await;
            }
        });
    }
}
