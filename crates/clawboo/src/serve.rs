//! `clawboo serve`: the HTTP API, the MCP servers over Streamable HTTP and the board.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use clawboo_mcp::signing::ScopeSigner;
use clawboo_server::mounts::default_mounts;
use clawboo_server::{ALLOW_INSECURE_ENV, AppState, ServerOptions, check_exposure};

/// Flags of `clawboo serve`.
#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// Address to listen on (port 0 picks a free port).
    #[arg(long, default_value = "127.0.0.1:18790")]
    pub bind: SocketAddr,
    /// SQLite file or postgres:// URL (default: $CLAWBOO_DB_PATH, else ~/.clawboo/clawboo.db).
    #[arg(long, value_name = "PATH_OR_URL")]
    pub db: Option<PathBuf>,
}

/// Serve until Ctrl-C. Prints `clawboo listening on <url>` on stdout once the socket is
/// bound, so scripts (and tests) learn the real port.
pub fn run(args: ServeArgs) -> anyhow::Result<()> {
    let location = crate::resolve_db(args.db.as_deref())?;
    let launcher = crate::attach::stdio_launcher()?;
    // Every setting is read (and a bad one refused) before anything is opened.
    let mut options = ServerOptions::new(args.bind, location.clone(), launcher).with_env()?;
    let gate_on = options.access_token.is_some();
    let store = crate::open_store(&location, crate::SERVE_PG_POOL)?;
    let signer = ScopeSigner::from_store(&store)?;
    // Before the runtime starts: choosing an embedder may build a blocking HTTP client.
    let memory = crate::open_memory(store.clone());
    let allow_insecure = std::env::var(ALLOW_INSECURE_ENV).is_ok_and(|v| v == "1");
    check_exposure(args.bind, gate_on, allow_insecure).map_err(anyhow::Error::msg)?;
    crate::stdio::keep_freed_heap_top();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(args.bind)
            .await
            .with_context(|| format!("cannot listen on {}", args.bind))?;
        let local = listener.local_addr()?;
        // The address actually bound (its real port, when asked for 0).
        options.bind = local;
        options.base_url = clawboo_server::base_url_for(local);
        let mounts = default_mounts(&store, &memory, &signer, options.mcp);
        let state = AppState::new(store, memory, signer, options, mounts);
        println!(
            "clawboo listening on {}",
            clawboo_server::base_url_for(local)
        );
        if state.options().access_token.is_some() {
            eprintln!("clawboo: access gate ON (STUDIO_ACCESS_TOKEN)");
        }
        let shutdown = async {
            let _ = tokio::signal::ctrl_c().await;
        };
        clawboo_server::serve(listener, state, shutdown).await?;
        Ok(())
    })
}
