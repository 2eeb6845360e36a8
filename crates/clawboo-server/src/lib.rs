//! Clawboo's HTTP server (mounted by `clawboo serve`): the four MCP servers over Streamable
//! HTTP at `/api/mcp/<server>` with sessions bound from signed attach URLs, the attach
//! config and status routes, the REST API, the web board with its live feed, the access
//! gate and the origin guard.
//!
//! [`app`] builds the application from an [`AppState`]; [`serve`] runs it on a listener
//! with the socket peer address available to the gate (never taken from a header).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{Method, StatusCode};
use axum::middleware::{Next, from_fn_with_state};
use axum::response::Response;
use clawboo_broker::{Broker, BrokerConfig};
use clawboo_exec::Builtins;
use clawboo_mcp::attach::StdioLauncher;
use clawboo_mcp::signing::ScopeSigner;
use clawboo_memory::Memory;
use clawboo_store::{DbLocation, Store};
use futures::FutureExt;
use futures::future::BoxFuture;
use tower::ServiceExt;
use tower_http::catch_panic::CatchPanicLayer;

pub mod conn;
pub mod error;
pub mod guard;
pub mod markdown;
pub mod mcp_http;
pub mod mcp_sessions;
pub mod metrics;
pub mod mounts;
pub mod ops;
mod process_stats;
pub mod rate_limit;
pub mod routes;
pub mod status;

use crate::conn::Deadlines;
use crate::error::json_error;
use crate::guard::HostPolicy;
use crate::mcp_http::McpHttpConfig;
use crate::rate_limit::{PeerRateLimiter, RateLimitConfig};
use crate::status::{McpMount, McpStatus};

/// Environment variable holding the access-gate token.
pub const ACCESS_TOKEN_ENV: &str = "STUDIO_ACCESS_TOKEN";
/// Set to `1` to allow a non-loopback bind without the gate.
pub const ALLOW_INSECURE_ENV: &str = "CLAWBOO_ALLOW_INSECURE";
/// Comma-separated extra `Host` names the API answers to (for a non-loopback bind).
pub const ALLOWED_HOSTS_ENV: &str = "CLAWBOO_ALLOWED_HOSTS";
/// Idle seconds before an MCP HTTP session expires.
pub const SESSION_IDLE_ENV: &str = "CLAWBOO_MCP_SESSION_IDLE_SECS";
/// Directory of the `clawboo-mcp-<server>` binaries for stdio snippets.
pub const MCP_BIN_DIR_ENV: &str = "CLAWBOO_MCP_BIN_DIR";
/// Milliseconds a client has to send a request's headers.
pub const HEADER_TIMEOUT_ENV: &str = "CLAWBOO_HEADER_TIMEOUT_MS";
/// Milliseconds a client has to send a request's body once its headers are in.
pub const BODY_TIMEOUT_ENV: &str = "CLAWBOO_BODY_TIMEOUT_MS";
/// Most MCP sessions open at once per server.
pub const MAX_SESSIONS_ENV: &str = "CLAWBOO_MCP_MAX_SESSIONS";

/// A setting in the environment that the server refuses to start with.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// `STUDIO_ACCESS_TOKEN` is too short to keep anyone out.
    #[error(
        "{ACCESS_TOKEN_ENV} is {0} characters; it must be at least {min} (letters, digits, . _ ~ -), since a short token is guessed quickly. Set a longer one, or unset it to keep the gate off on loopback",
        min = guard::MIN_TOKEN_LEN
    )]
    TokenTooShort(usize),
    /// A numeric setting is not a positive whole number.
    #[error("{name} must be a positive whole number, not {value:?}")]
    NotPositive { name: &'static str, value: String },
}

/// A positive number from the environment variable `name`, if set.
fn positive_env(name: &'static str) -> Result<Option<u64>, ConfigError> {
    let Ok(value) = std::env::var(name) else {
        return Ok(None);
    };
    match value.trim().parse::<u64>() {
        Ok(n) if n > 0 => Ok(Some(n)),
        _ => Err(ConfigError::NotPositive { name, value }),
    }
}

/// How the server runs.
#[derive(Debug, Clone)]
pub struct ServerOptions {
    /// The address actually bound (its port is the real one, even when asked for 0).
    pub bind: SocketAddr,
    /// The server's own base URL, used in attach snippets (never the request's `Host`).
    pub base_url: String,
    /// The database, embedded in stdio snippets (a PostgreSQL URL without its password).
    pub db: DbLocation,
    /// How stdio snippets launch a server.
    pub stdio_launcher: StdioLauncher,
    /// The access-gate token; `None` leaves the gate off.
    pub access_token: Option<String>,
    /// Extra `Host` names accepted on `/api/*`.
    pub extra_hosts: Vec<String>,
    /// The server is reached over https (the access cookie gets `Secure`).
    pub public_https: bool,
    /// Per-peer request rate.
    pub rate_limit: RateLimitConfig,
    /// MCP session settings; its `max_body_bytes` limits every request body.
    pub mcp: McpHttpConfig,
    /// How often each mounted MCP server is probed.
    pub probe_interval: Duration,
    /// How long a client may take to send a request's headers and body.
    pub deadlines: Deadlines,
    /// `/metrics` is served on a listener of its own (`--metrics-bind`), not on this one.
    pub metrics_apart: bool,
    /// The binary's compiled-in features, for `clawboo_build_info`.
    pub build_features: &'static str,
}

/// The base URL for a bound address: an unspecified address is reached on loopback.
pub fn base_url_for(bind: SocketAddr) -> String {
    let ip = match bind.ip() {
        ip if ip.is_unspecified() && ip.is_ipv4() => "127.0.0.1".to_owned(),
        ip if ip.is_unspecified() => "[::1]".to_owned(),
        std::net::IpAddr::V6(v6) => format!("[{v6}]"),
        ip => ip.to_string(),
    };
    format!("http://{ip}:{}", bind.port())
}

impl ServerOptions {
    /// Defaults for a server bound at `bind` over the database `db`, with the gate
    /// off. [`ServerOptions::with_env`] reads the environment's settings.
    pub fn new(
        bind: SocketAddr,
        db: impl Into<DbLocation>,
        stdio_launcher: StdioLauncher,
    ) -> ServerOptions {
        ServerOptions {
            bind,
            base_url: base_url_for(bind),
            db: db.into(),
            stdio_launcher,
            access_token: None,
            extra_hosts: Vec::new(),
            public_https: false,
            rate_limit: RateLimitConfig::default(),
            mcp: McpHttpConfig::default(),
            probe_interval: Duration::from_secs(60),
            deadlines: Deadlines::default(),
            metrics_apart: false,
            build_features: "",
        }
    }

    /// Apply the environment's settings, every one read here: `STUDIO_ACCESS_TOKEN`
    /// (ignored with a warning when empty or not `[A-Za-z0-9._~-]+`; refused when shorter
    /// than [`guard::MIN_TOKEN_LEN`]), `CLAWBOO_ALLOWED_HOSTS`,
    /// `CLAWBOO_MCP_SESSION_IDLE_SECS` (a bad value warns and keeps the default),
    /// `CLAWBOO_MCP_MAX_SESSIONS`, `CLAWBOO_HEADER_TIMEOUT_MS` and `CLAWBOO_BODY_TIMEOUT_MS`.
    pub fn with_env(mut self) -> Result<ServerOptions, ConfigError> {
        if let Ok(token) = std::env::var(ACCESS_TOKEN_ENV) {
            if !guard::valid_access_token(&token) {
                tracing::warn!(
                    "{ACCESS_TOKEN_ENV} is empty or has characters outside [A-Za-z0-9._~-]; the access gate stays OFF"
                );
            } else if token.len() < guard::MIN_TOKEN_LEN {
                return Err(ConfigError::TokenTooShort(token.len()));
            } else {
                self.access_token = Some(token);
            }
        }
        if let Ok(hosts) = std::env::var(ALLOWED_HOSTS_ENV) {
            self.extra_hosts = hosts
                .split(',')
                .map(str::trim)
                .filter(|h| !h.is_empty())
                .map(str::to_owned)
                .collect();
        }
        if let Ok(secs) = std::env::var(SESSION_IDLE_ENV) {
            match secs.trim().parse::<u64>() {
                Ok(s) if s > 0 => self.mcp.session_idle = Duration::from_secs(s),
                _ => tracing::warn!(
                    "{SESSION_IDLE_ENV} must be a positive number of seconds; using the default"
                ),
            }
        }
        if let Some(max) = positive_env(MAX_SESSIONS_ENV)? {
            self.mcp.max_sessions = usize::try_from(max).unwrap_or(usize::MAX);
        }
        if let Some(ms) = positive_env(HEADER_TIMEOUT_ENV)? {
            self.deadlines.header = Duration::from_millis(ms);
        }
        if let Some(ms) = positive_env(BODY_TIMEOUT_ENV)? {
            self.deadlines.body = Duration::from_millis(ms);
        }
        Ok(self)
    }
}

/// Refuse to expose the API on a non-loopback address without the access gate, unless
/// the operator opted in with `CLAWBOO_ALLOW_INSECURE=1`.
pub fn check_exposure(bind: SocketAddr, gate_on: bool, allow_insecure: bool) -> Result<(), String> {
    if guard::is_loopback(bind.ip()) || gate_on || allow_insecure {
        return Ok(());
    }
    Err(format!(
        "refusing to bind {bind} without the access gate: anyone who can reach it could read and change the board. \
         Set {ACCESS_TOKEN_ENV} (letters, digits, . _ ~ -), bind 127.0.0.1, or set {ALLOW_INSECURE_ENV}=1 to accept the risk"
    ))
}

/// What every handler shares.
pub(crate) struct Shared {
    pub(crate) store: Arc<Store>,
    pub(crate) signer: ScopeSigner,
    pub(crate) options: ServerOptions,
    pub(crate) host_policy: HostPolicy,
    pub(crate) rate_limiter: PeerRateLimiter,
    pub(crate) mounts: Vec<McpMount>,
    pub(crate) status: McpStatus,
    pub(crate) memory: Arc<Memory>,
    pub(crate) broker: Broker,
    pub(crate) activity: Arc<routes::events::ActivityFeed>,
}

/// The application state (cheap to clone).
#[derive(Clone)]
pub struct AppState {
    pub(crate) shared: Arc<Shared>,
}

impl AppState {
    /// State over `store` (and `memory` over the same store), signing with `signer`,
    /// serving `mounts`.
    pub fn new(
        store: Arc<Store>,
        memory: Arc<Memory>,
        signer: ScopeSigner,
        options: ServerOptions,
        mounts: Vec<McpMount>,
    ) -> AppState {
        let host_policy = HostPolicy::new(options.bind, &options.extra_hosts, options.public_https);
        let rate_limiter = PeerRateLimiter::new(options.rate_limit);
        let broker = Broker::new(
            store.clone(),
            BrokerConfig::from_env(),
            Arc::new(Builtins::from_env()),
        );
        AppState {
            shared: Arc::new(Shared {
                memory,
                broker,
                store,
                signer,
                options,
                host_policy,
                rate_limiter,
                mounts,
                status: McpStatus::default(),
                activity: Arc::default(),
            }),
        }
    }

    /// The store.
    pub fn store(&self) -> Arc<Store> {
        self.shared.store.clone()
    }

    /// Shared memory (facts, procedures, search) over the store.
    pub fn memory(&self) -> Arc<Memory> {
        self.shared.memory.clone()
    }

    /// The tool broker over the store.
    pub fn broker(&self) -> Broker {
        self.shared.broker.clone()
    }

    /// The options the server runs with.
    pub fn options(&self) -> &ServerOptions {
        &self.shared.options
    }

    /// Probe every mounted MCP server once now (the background prober does this every
    /// interval).
    pub async fn probe_now(&self) {
        self.shared.status.probe_all(&self.shared.mounts).await;
    }

    /// Start the background work: MCP probes (now and every interval) and rate-limiter
    /// pruning. Needs a Tokio runtime.
    pub fn start_background(&self) {
        let mounts = self.shared.mounts.clone();
        self.shared
            .status
            .spawn_prober(mounts, self.shared.options.probe_interval);
        let limiter = self.shared.rate_limiter.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(60));
            loop {
                tick.tick().await;
                limiter.prune();
            }
        });
        if let Some(lease) = self.shared.store.lease_ms() {
            tokio::spawn(sweep_leases(self.shared.store.clone(), lease));
        }
    }
}

/// The lease sweeper (SPEC §12): every tenth of a lease (between 100 ms and a minute) it
/// applies the expiry rule, so a dead agent's task is back in `todo` soon after its lease
/// ran out even when no agent lists or claims. A reclaim is one conditional update, so
/// sweepers of several processes on one database reclaim each task once.
async fn sweep_leases(store: Arc<Store>, lease_ms: i64) {
    let every = Duration::from_millis(u64::try_from(lease_ms / 10).unwrap_or(0))
        .clamp(Duration::from_millis(100), Duration::from_secs(60));
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        match store.expire_leases_async().await {
            Ok(Ok(_)) => {}
            Ok(Err(error)) => tracing::warn!(%error, "lease sweep failed; retrying next tick"),
            Err(error) => tracing::warn!(%error, "lease sweep panicked; retrying next tick"),
        }
    }
}

async fn not_found(uri: axum::http::Uri) -> Response {
    json_error(
        StatusCode::NOT_FOUND,
        format!("no such route: {}", uri.path()),
    )
}

fn panic_response(_: Box<dyn std::any::Any + Send + 'static>) -> Response {
    tracing::error!("a request handler panicked");
    json_error(
        StatusCode::INTERNAL_SERVER_ERROR,
        "internal error: the request failed unexpectedly; it was not applied partially, retry it",
    )
}

/// Every request's checks, in order: the peer's rate, the access guard, then the body
/// deadline around `inner`, which answers what passes them. One composition for the
/// router's middleware ([`edge`]) and the MCP lane ([`App::answer`]).
async fn at_the_edge<F, Fut>(state: &AppState, mut req: Request, inner: F) -> Response
where
    F: FnOnce(Request) -> Fut,
    Fut: Future<Output = Response>,
{
    if let Some(refused) = rate_limit::rate_refusal(state, &req) {
        return refused;
    }
    if let Some(refused) = guard::access_refusal(state, &mut req) {
        return refused;
    }
    conn::with_body_deadline(state.shared.options.deadlines, req, inner).await
}

/// [`at_the_edge`] as the router's one middleware, rather than one a check: each `from_fn`
/// layer costs every request a boxed clone of the service below it and a boxed future.
async fn edge(State(state): State<AppState>, req: Request, next: Next) -> Response {
    at_the_edge(&state, req, |req| next.run(req)).await
}

/// The whole HTTP application, as `serve` answers each request: a POST to an MCP mount
/// (nearly every request of a busy team) goes through the edge checks straight to its
/// mount, as the router would route it but without the router's per-request clones and
/// boxes; everything else goes through the router.
#[derive(Clone)]
pub struct App {
    state: AppState,
    router: Router,
}

/// The application serving `state`.
pub fn app(state: AppState) -> App {
    App {
        router: router(state.clone()),
        state,
    }
}

impl App {
    /// Answer one request.
    async fn answer(self, req: Request) -> Response {
        let mount = if req.method() == Method::POST {
            let path = req.uri().path();
            self.state.shared.mounts.iter().find(|m| m.serves(path))
        } else {
            None
        };
        let Some(mount) = mount else {
            return match self.router.oneshot(req).await {
                Ok(response) => response,
                Err(never) => match never {},
            };
        };
        let started = clawboo_mcp::metrics::enabled().then(Instant::now);
        // As the router's `CatchPanicLayer`.
        let response = AssertUnwindSafe(at_the_edge(&self.state, req, |req| mount.answer(req)))
            .catch_unwind()
            .await
            .unwrap_or_else(panic_response);
        if let Some(started) = started {
            let status = response.status().as_u16();
            metrics::record(mount.path(), "POST".into(), status, started.elapsed());
        }
        response
    }
}

/// For callers that drive the application as a tower service (in-process tests); `serve`
/// awaits `App::answer` without the box.
impl tower::Service<Request> for App {
    type Response = Response;
    type Error = Infallible;
    type Future = BoxFuture<'static, Result<Response, Infallible>>;

    fn poll_ready(
        &mut self,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Infallible>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request) -> Self::Future {
        Box::pin(self.clone().answer(req).map(Ok))
    }
}

/// Every route, behind the edge checks ([`edge`]).
fn router(state: AppState) -> Router {
    let mut router = Router::new()
        .merge(routes::board::routes())
        .merge(routes::teams::routes())
        .merge(routes::mcp::routes())
        .merge(routes::memory::routes())
        .merge(routes::reservations::routes())
        .merge(routes::tools::routes())
        .merge(routes::chat::routes())
        .merge(routes::events::routes())
        .merge(routes::web::routes())
        .merge(ops::routes());
    if !state.shared.options.metrics_apart {
        router = router.route("/metrics", axum::routing::get(metrics::metrics));
    }
    for mount in &state.shared.mounts {
        router = router.route_service(&mount.path(), mount.route());
    }
    router
        .route_layer(axum::middleware::from_fn(metrics::observe_rest))
        .fallback(not_found)
        .layer(DefaultBodyLimit::max(
            state.shared.options.mcp.max_body_bytes,
        ))
        .layer(from_fn_with_state(state.clone(), edge))
        .layer(CatchPanicLayer::custom(panic_response))
        .with_state(state)
}

/// Serve `/metrics` alone on `listener` (`clawboo serve --metrics-bind`), for a scraper
/// on an address apart from the public one; nothing else answers there.
pub async fn serve_metrics(
    listener: tokio::net::TcpListener,
    state: AppState,
) -> std::io::Result<()> {
    let router = Router::new()
        .route("/metrics", axum::routing::get(metrics::metrics))
        .fallback(not_found)
        .with_state(state);
    axum::serve(listener, router).await
}

/// Serve `state` on `listener` until `shutdown` resolves; starts the background work.
/// Each connection is held to the options' header and body deadlines.
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: AppState,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    state.start_background();
    let deadlines = state.shared.options.deadlines;
    let app = app(state);
    let answer = move |req| app.clone().answer(req);
    tokio::select! {
        () = conn::serve_connections(listener, answer, deadlines) => Ok(()),
        () = shutdown => Ok(()),
    }
}
