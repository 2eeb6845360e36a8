//! `GET /metrics` (SPEC §17): the Prometheus exposition, in the OpenMetrics text format of
//! the official client (`prometheus-client`), and the REST layer's own record.
//!
//! What moves with every call is recorded where it happens and costs a counter add:
//! tool calls at the MCP edge (`clawboo_mcp::metrics`), REST requests here
//! (`observe_rest`), the store's round trips in the engines (`clawboo_store::ops`).
//! What needs a query (approvals waiting, leases, facts) is read when scraped, in one
//! short snapshot, so an idle server does no work for its metrics.

use std::sync::LazyLock;
use std::time::{Duration, Instant};

use axum::extract::{MatchedPath, Request, State};
use axum::http::{HeaderValue, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::metrics::info::Info;
use prometheus_client::registry::Registry;
use tracing::Instrument;

use crate::AppState;

/// The exposition's media type: OpenMetrics text, which Prometheus asks for and parses.
const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Longest a scrape waits for the store's counts before it answers without them.
const COUNTS_WITHIN: Duration = Duration::from_secs(5);

/// Upper bounds of the REST latency buckets, in seconds.
const LATENCY_BUCKETS: [f64; 14] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct RequestLabels {
    /// The route's pattern (`/api/board/{id}`), never the request's own path.
    route: String,
    method: String,
    status: u16,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct RouteLabels {
    route: String,
}

fn latency_histogram() -> Histogram {
    Histogram::new(LATENCY_BUCKETS)
}

struct RestMetrics {
    requests: Family<RequestLabels, Counter>,
    latency: Family<RouteLabels, Histogram, fn() -> Histogram>,
}

static REST: LazyLock<RestMetrics> = LazyLock::new(|| RestMetrics {
    requests: Family::default(),
    latency: Family::new_with_constructor(latency_histogram),
});

/// The router's per-route layer: each REST request is one `tracing` span (route, method,
/// request id) and one record by route, method and status. A route layer sees only
/// matched routes, so the route label is always a pattern of ours.
pub(crate) async fn observe_rest(req: Request, next: Next) -> Response {
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map(|path| path.as_str().to_owned())
        .unwrap_or_default();
    let method = req.method().as_str().to_owned();
    let span = tracing::info_span!(
        "http.request",
        otel.name = tracing::field::Empty,
        otel.kind = "server",
        route = %route,
        method = %method,
        request_id = tracing::field::Empty,
        status = tracing::field::Empty,
    );
    if !span.is_disabled() {
        span.record("otel.name", format!("{method} {route}"));
        span.record("request_id", clawboo_store::new_id());
    }
    let started = clawboo_mcp::metrics::enabled().then(Instant::now);
    let response = next.run(req).instrument(span.clone()).await;
    span.record("status", i64::from(response.status().as_u16()));
    if let Some(started) = started {
        record(route, method, response.status().as_u16(), started.elapsed());
    }
    response
}

/// Record one HTTP request of `route`.
pub(crate) fn record(route: String, method: String, status: u16, elapsed: Duration) {
    REST.requests
        .get_or_create(&RequestLabels {
            route: route.clone(),
            method,
            status,
        })
        .inc();
    REST.latency
        .get_or_create(&RouteLabels { route })
        .observe(elapsed.as_secs_f64());
}

/// `GET /metrics`.
pub(crate) async fn metrics(State(state): State<AppState>) -> Response {
    let text = exposition(&state).await;
    let mut response = text.into_response();
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(CONTENT_TYPE));
    response
}

/// What the store answers at scrape time.
struct Counts {
    ops: clawboo_store::ops::OpsCounts,
    facts: i64,
}

/// Read the counts a scrape needs; `None` when the store does not answer in time.
async fn read_counts(state: &AppState) -> Option<Counts> {
    let store = state.store();
    let memory = state.memory();
    let read = async {
        let ops = store.ops_counts_async().await?;
        let facts = memory.facts_stored_async().await?;
        Ok::<_, clawboo_store::RunError>(ops.and_then(|ops| Ok(Counts { ops, facts: facts? })))
    };
    match tokio::time::timeout(COUNTS_WITHIN, read).await {
        Ok(Ok(Ok(counts))) => Some(counts),
        Ok(Ok(Err(error))) => {
            tracing::warn!(%error, "metrics: the store's counts failed; scraped without them");
            None
        }
        _ => None,
    }
}

fn as_i64(value: usize) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// The whole exposition now. A registry is built for each scrape: the families recorded
/// as calls go are shared into it, the rest are read now.
async fn exposition(state: &AppState) -> String {
    let store = state.store();
    let backend = store.backend_name();
    let mut registry = Registry::with_prefix("clawboo");
    clawboo_mcp::metrics::register(&mut registry);
    registry.register(
        "http_requests",
        "HTTP requests by route pattern, method and status",
        REST.requests.clone(),
    );
    registry.register(
        "http_request_duration_seconds",
        "HTTP request latency by route pattern",
        REST.latency.clone(),
    );

    let sessions = Family::<[(&'static str, &'static str); 2], Gauge>::default();
    for mount in &state.shared.mounts {
        let open = mount.session_count().await;
        sessions
            .get_or_create(&[("server", mount.name.as_str()), ("family", "session")])
            .set(as_i64(open));
    }
    registry.register(
        "mcp_sessions_open",
        "MCP sessions open now by server and protocol family (2026-07-28 requests open none)",
        sessions,
    );

    let counts = read_counts(state).await;
    registry.register(
        "store_up",
        "Whether the store answered this scrape's counts (1) or not (0)",
        ConstGauge::new(i64::from(counts.is_some())),
    );
    if let Some(counts) = counts {
        registry.register(
            "approvals_pending",
            "Tool approvals waiting for a decision",
            ConstGauge::new(counts.ops.approvals_pending),
        );
        registry.register(
            "leases_held",
            "Claimed tasks holding a lease",
            ConstGauge::new(counts.ops.leases_held),
        );
        registry.register(
            "leases_expiring",
            "Leases that run out within a minute",
            ConstGauge::new(counts.ops.leases_expiring),
        );
        registry.register(
            "memory_facts",
            "Facts stored in shared memory",
            ConstGauge::new(counts.facts),
        );
    }

    let engine = clawboo_store::ops::counters();
    let (round_trips, errors) = match backend {
        "postgres" => (engine.postgres_round_trips, engine.postgres_errors),
        _ => (engine.sqlite_round_trips, engine.sqlite_errors),
    };
    let by_backend = |value: u64| {
        let family = Family::<[(&'static str, &'static str); 1], Counter>::default();
        family.get_or_create(&[("backend", backend)]).inc_by(value);
        family
    };
    registry.register(
        "store_round_trips",
        "Store round trips by backend (PostgreSQL: requests awaited; SQLite: transactions and group commits)",
        by_backend(round_trips),
    );
    registry.register(
        "store_errors",
        "Errors the store's engine reported, by backend",
        by_backend(errors),
    );
    registry.register(
        "leases_reclaimed",
        "Expired leases this process took back",
        ConstCounter::new(engine.leases_reclaimed),
    );
    registry.register(
        "chat_posts",
        "Team chat posts this process wrote",
        ConstCounter::new(engine.chat_posts),
    );
    if let Some(pool) = store.pool_stats() {
        let pool_gauge = |value: usize| ConstGauge::new(as_i64(value));
        registry.register(
            "postgres_pool_size",
            "The most PostgreSQL connections this process opens",
            pool_gauge(pool.max),
        );
        registry.register(
            "postgres_pool_open",
            "PostgreSQL connections open now",
            pool_gauge(pool.open),
        );
        registry.register(
            "postgres_pool_in_use",
            "PostgreSQL connections lent to a caller now",
            pool_gauge(pool.in_use),
        );
        registry.register(
            "postgres_pool_waiting",
            "Callers waiting for a PostgreSQL connection now",
            pool_gauge(pool.waiting),
        );
    } else {
        registry.register(
            "sqlite_group_commits",
            "SQLite group commits",
            ConstCounter::new(engine.sqlite_groups),
        );
        registry.register(
            "sqlite_group_commit_writes",
            "Writes carried by SQLite group commits (divided by the commits: the mean group size)",
            ConstCounter::new(engine.sqlite_grouped_writes),
        );
    }
    crate::process_stats::register(&mut registry);
    registry.register(
        "build",
        "This build: version, backend and compiled-in features",
        Info::new([
            ("version", env!("CARGO_PKG_VERSION")),
            ("backend", backend),
            ("features", state.shared.options.build_features),
        ]),
    );

    let mut text = String::new();
    if let Err(error) = prometheus_client::encoding::text::encode(&mut text, &registry) {
        tracing::error!(%error, "metrics: encoding failed");
    }
    text
}
