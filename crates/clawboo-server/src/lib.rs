//! Clawboo's HTTP server (mounted by `clawboo serve`): the four MCP servers over Streamable
//! HTTP at `/api/mcp/<server>` with sessions bound from signed attach URLs, the attach
//! config and status routes, the REST API, the web board with its live feed, the access
//! gate and the origin guard.
//!
//! [`app`] builds the router from an [`AppState`]; [`serve`] runs it on a listener with
//! the socket peer address available to the gate (never taken from a header).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::StatusCode;
use axum::middleware::from_fn_with_state;
use axum::response::Response;
use clawboo_mcp::attach::StdioLauncher;
use clawboo_mcp::signing::ScopeSigner;
use clawboo_store::Store;
use clawboo_store::broker::{Broker, BrokerConfig};
use clawboo_store::memory::Memory;
use tower_http::catch_panic::CatchPanicLayer;

pub mod error;
pub mod guard;
pub mod mcp_http;
pub mod mcp_sessions;
pub mod mounts;
pub mod rate_limit;
pub mod routes;
pub mod status;

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

/// How the server runs.
#[derive(Debug, Clone)]
pub struct ServerOptions {
    /// The address actually bound (its port is the real one, even when asked for 0).
    pub bind: SocketAddr,
    /// The server's own base URL, used in attach snippets (never the request's `Host`).
    pub base_url: String,
    /// The database file, embedded in stdio snippets.
    pub db_path: String,
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
    /// Defaults for a server bound at `bind` over the database `db_path`, with the gate
    /// off. [`ServerOptions::with_env`] reads the environment's settings.
    pub fn new(bind: SocketAddr, db_path: PathBuf, stdio_launcher: StdioLauncher) -> ServerOptions {
        ServerOptions {
            bind,
            base_url: base_url_for(bind),
            db_path: db_path.display().to_string(),
            stdio_launcher,
            access_token: None,
            extra_hosts: Vec::new(),
            public_https: false,
            rate_limit: RateLimitConfig::default(),
            mcp: McpHttpConfig::default(),
            probe_interval: Duration::from_secs(60),
        }
    }

    /// Apply `STUDIO_ACCESS_TOKEN` (ignored with a warning unless `[A-Za-z0-9._~-]+`),
    /// `CLAWBOO_ALLOWED_HOSTS` and `CLAWBOO_MCP_SESSION_IDLE_SECS`.
    pub fn with_env(mut self) -> ServerOptions {
        if let Ok(token) = std::env::var(ACCESS_TOKEN_ENV) {
            if guard::valid_access_token(&token) {
                self.access_token = Some(token);
            } else {
                tracing::warn!(
                    "{ACCESS_TOKEN_ENV} is empty or has characters outside [A-Za-z0-9._~-]; the access gate stays OFF"
                );
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
        self
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
        let host_policy = HostPolicy::new(options.bind, &options.extra_hosts);
        let rate_limiter = PeerRateLimiter::new(options.rate_limit);
        let broker = Broker::new(store.clone(), BrokerConfig::from_env());
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

/// The whole HTTP application.
pub fn app(state: AppState) -> Router {
    let mut router = Router::new()
        .merge(routes::board::routes())
        .merge(routes::teams::routes())
        .merge(routes::mcp::routes())
        .merge(routes::memory::routes())
        .merge(routes::tools::routes())
        .merge(routes::chat::routes())
        .merge(routes::events::routes())
        .merge(routes::web::routes());
    for mount in &state.shared.mounts {
        router = router.route_service(&mount.path(), mount.route());
    }
    router
        .fallback(not_found)
        .layer(DefaultBodyLimit::max(
            state.shared.options.mcp.max_body_bytes,
        ))
        .layer(from_fn_with_state(state.clone(), guard::access_guard))
        .layer(from_fn_with_state(state.clone(), rate_limit::rate_limit))
        .layer(CatchPanicLayer::custom(panic_response))
        .with_state(state)
}

/// Serve `state` on `listener` until `shutdown` resolves; starts the background work.
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: AppState,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    use axum::serve::ListenerExt;
    state.start_background();
    let service = app(state).into_make_service_with_connect_info::<SocketAddr>();
    // Without TCP_NODELAY a response written in pieces (SSE frames) waits on the peer's
    // delayed ACK: ~40 ms per call.
    let listener = listener.tap_io(|tcp| {
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!("could not set TCP_NODELAY: {e}");
        }
    });
    tokio::select! {
        result = axum::serve(listener, service) => result,
        () = shutdown => Ok(()),
    }
}
