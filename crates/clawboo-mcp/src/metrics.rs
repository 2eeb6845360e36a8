//! What the MCP servers count at their edge (SPEC §17): each tool call by server, tool and
//! outcome with its latency, the waits held by protocol family, and memory searches by
//! mode. Recorded in `McpServer::call_tool` (`server.rs`) (the one entry of every call,
//! over stdio and HTTP), so a handler records nothing itself; `clawboo serve` exposes them
//! at `/metrics` ([`register`]).
//!
//! Labels carry only names this process chose (server, tool, error code, mode, family):
//! never an argument value, so the series are bounded by the tool tables. A call of a tool
//! no table knows is counted under the tool name `unknown`.

use std::borrow::Cow;
use std::sync::LazyLock;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use clawboo_memory::SearchMode;
use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue, LabelValueEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use rmcp::RoleServer;
use rmcp::model::{CallToolResponse, CallToolResult, ProtocolVersion};
use rmcp::service::RequestContext;

/// Set to `off` to record nothing (for measuring what recording costs); on otherwise.
pub const METRICS_ENV: &str = "CLAWBOO_METRICS";

/// Upper bounds of the latency buckets, in seconds: from a cached read to a long-poll.
const LATENCY_BUCKETS: [f64; 16] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
    60.0,
];

/// The two ways a client speaks to a server: sessions opened by `initialize`
/// (2024-11-05 … 2025-11-25), or the initialize-less 2026-07-28 with each request on its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProtocolFamily {
    Session,
    Stateless,
}

impl EncodeLabelValue for ProtocolFamily {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> std::fmt::Result {
        self.as_str().encode(encoder)
    }
}

impl ProtocolFamily {
    /// The family `request` speaks.
    pub fn of(request: &RequestContext<RoleServer>) -> ProtocolFamily {
        if request
            .protocol_version()
            .is_some_and(|version| version >= ProtocolVersion::V_2026_07_28)
        {
            ProtocolFamily::Stateless
        } else {
            ProtocolFamily::Session
        }
    }

    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            ProtocolFamily::Session => "session",
            ProtocolFamily::Stateless => "stateless",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct CallLabels {
    server: &'static str,
    tool: String,
    outcome: Cow<'static, str>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ToolLabels {
    server: &'static str,
    tool: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct FamilyLabels {
    family: ProtocolFamily,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ModeLabels {
    mode: &'static str,
}

fn latency_histogram() -> Histogram {
    Histogram::new(LATENCY_BUCKETS)
}

/// The process's MCP series.
struct McpMetrics {
    calls: Family<CallLabels, Counter>,
    latency: Family<ToolLabels, Histogram, fn() -> Histogram>,
    waits: Family<FamilyLabels, Gauge>,
    searches: Family<ModeLabels, Counter>,
}

static METRICS: LazyLock<McpMetrics> = LazyLock::new(|| McpMetrics {
    calls: Family::default(),
    latency: Family::new_with_constructor(latency_histogram),
    waits: Family::default(),
    searches: Family::default(),
});

/// Every call recorded, and those answered with a tool-error, for the board's strip.
static CALLS: AtomicU64 = AtomicU64::new(0);
static ERRORS: AtomicU64 = AtomicU64::new(0);

/// Tool calls this process answered, and how many of them were tool-errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallTotals {
    pub calls: u64,
    pub errors: u64,
}

/// The totals of [`CallTotals`] now.
pub fn call_totals() -> CallTotals {
    CallTotals {
        calls: CALLS.load(Ordering::Relaxed),
        errors: ERRORS.load(Ordering::Relaxed),
    }
}

/// Whether calls are recorded: on unless `CLAWBOO_METRICS=off` ([`init_from_env`]).
static ENABLED: AtomicBool = AtomicBool::new(true);

/// Read `CLAWBOO_METRICS` once at start: `off` turns recording off for this process.
pub fn init_from_env() {
    let off = std::env::var(METRICS_ENV).is_ok_and(|v| v.trim().eq_ignore_ascii_case("off"));
    ENABLED.store(!off, Ordering::Relaxed);
}

/// Whether calls are recorded in this process.
pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

/// Add the MCP series to `registry` (prefixed `clawboo_` by the registry).
pub fn register(registry: &mut Registry) {
    let m = &*METRICS;
    registry.register(
        "mcp_tool_calls",
        "Tool calls by server, tool and outcome (ok, a tool-error code, input_required)",
        m.calls.clone(),
    );
    registry.register(
        "mcp_tool_call_duration_seconds",
        "Tool call latency by server and tool, from the call's arrival to its answer",
        m.latency.clone(),
    );
    registry.register(
        "mcp_waits",
        "Waits held now (long-polls, calls waiting for approval) by protocol family",
        m.waits.clone(),
    );
    registry.register(
        "memory_searches",
        "Memory searches by the mode they ran in (fts, vector, hybrid)",
        m.searches.clone(),
    );
}

/// The outcome label of a call's answer: `ok`, the tool-error's `_meta.error` code, or
/// `input_required` (a 2026-07-28 round asking the client).
fn outcome_of(response: &CallToolResponse) -> Cow<'static, str> {
    match response {
        CallToolResponse::Complete(result) => result_outcome(result),
        CallToolResponse::InputRequired(_) => Cow::Borrowed("input_required"),
        _ => Cow::Borrowed("task"),
    }
}

fn result_outcome(result: &CallToolResult) -> Cow<'static, str> {
    if result.is_error != Some(true) {
        return Cow::Borrowed("ok");
    }
    let code = result
        .meta
        .as_ref()
        .and_then(|meta| meta.0.get("error"))
        .and_then(|code| code.as_str());
    match code {
        // Codes are this crate's own words; anything else is folded, so no label grows
        // without bound.
        Some(code)
            if code.len() <= 40 && code.bytes().all(|b| b.is_ascii_lowercase() || b == b'_') =>
        {
            Cow::Owned(code.to_owned())
        }
        _ => Cow::Borrowed("error"),
    }
}

/// Record one answered call of `tool` on `server` that took `elapsed`.
pub(crate) fn record_call(
    server: &'static str,
    tool: &str,
    response: &CallToolResponse,
    elapsed: Duration,
) {
    let m = &*METRICS;
    let outcome = outcome_of(response);
    CALLS.fetch_add(1, Ordering::Relaxed);
    if outcome != "ok" && outcome != "input_required" {
        ERRORS.fetch_add(1, Ordering::Relaxed);
    }
    let tool = if outcome == "unknown_tool" {
        "unknown"
    } else {
        tool
    };
    m.calls
        .get_or_create(&CallLabels {
            server,
            tool: tool.to_owned(),
            outcome,
        })
        .inc();
    m.latency
        .get_or_create(&ToolLabels {
            server,
            tool: tool.to_owned(),
        })
        .observe(elapsed.as_secs_f64());
}

/// Count one memory search, by the mode it ran in (MCP's `memory_search` and REST's
/// `/api/memory` both call this).
pub fn record_search(mode: SearchMode) {
    if enabled() {
        let mode = match mode {
            SearchMode::Fts => "fts",
            SearchMode::Vector => "vector",
            SearchMode::Hybrid => "hybrid",
        };
        METRICS.searches.get_or_create(&ModeLabels { mode }).inc();
    }
}

/// A wait held by a caller of `family`, counted in `clawboo_mcp_waits` until dropped.
#[derive(Debug)]
pub(crate) struct WaitGauge(Gauge);

impl WaitGauge {
    pub(crate) fn hold(family: ProtocolFamily) -> WaitGauge {
        let gauge = METRICS
            .waits
            .get_or_create(&FamilyLabels { family })
            .clone();
        gauge.inc();
        WaitGauge(gauge)
    }
}

impl Drop for WaitGauge {
    fn drop(&mut self) {
        self.0.dec();
    }
}
