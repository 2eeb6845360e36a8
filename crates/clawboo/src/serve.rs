//! `clawboo serve`: the HTTP API, the MCP servers over Streamable HTTP and the board.

use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Args;
use clawboo_mcp::signing::ScopeSigner;
use clawboo_memory::VectorSearchPath;
use clawboo_server::mounts::default_mounts;
use clawboo_server::{ALLOW_INSECURE_ENV, AppState, ServerOptions, check_exposure};
use clawboo_store::DbLocation;

/// Flags of `clawboo serve`.
#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// Address to listen on (port 0 picks a free port).
    #[arg(long, default_value = "127.0.0.1:18790")]
    pub bind: SocketAddr,
    /// SQLite file or postgres:// URL (default: $CLAWBOO_DB_PATH, else ~/.clawboo/clawboo.db).
    #[arg(long, value_name = "PATH_OR_URL")]
    pub db: Option<PathBuf>,
    /// Serve `/metrics` on this address alone (for a scraper on an internal network),
    /// instead of on `--bind` behind the access gate.
    #[arg(long, value_name = "ADDR")]
    pub metrics_bind: Option<SocketAddr>,
}

/// Tokio's own setting for its worker count; when set, `serve` leaves the count to it.
const WORKER_THREADS_ENV: &str = "TOKIO_WORKER_THREADS";

/// Serve until Ctrl-C. Once the socket is bound, prints `clawboo listening on <url>` on
/// stdout, so scripts (and tests) learn the real port, followed by `banner`'s lines.
pub fn run(args: ServeArgs) -> anyhow::Result<()> {
    let location = crate::resolve_db(args.db.as_deref())?;
    let launcher = crate::attach::stdio_launcher()?;
    // Every setting is read (and a bad one refused) before anything is opened.
    let mut options = ServerOptions::new(args.bind, location.clone(), launcher).with_env()?;
    options.metrics_apart = args.metrics_bind.is_some();
    options.build_features = if cfg!(feature = "minilm") {
        "minilm"
    } else {
        ""
    };
    let gate_on = options.access_token.is_some();
    let store = crate::open_store(&location, crate::SERVE_PG_POOL)?;
    let signer = ScopeSigner::from_store(&store)?;
    // Before the runtime starts: choosing an embedder may build a blocking HTTP client.
    let memory = crate::open_memory(store.clone());
    let vector_search = memory.vector_search();
    let allow_insecure = std::env::var(ALLOW_INSECURE_ENV).is_ok_and(|v| v == "1");
    check_exposure(args.bind, gate_on, allow_insecure).map_err(anyhow::Error::msg)?;
    crate::stdio::keep_freed_heap_top();
    let mut runtime = tokio::runtime::Builder::new_multi_thread();
    if store.groups_writes() && std::env::var_os(WORKER_THREADS_ENV).is_none() {
        // SQLite's writes run one group at a time on one connection, and what may take
        // long (memory's embedding, long-polls, approvals, the REST API's store calls)
        // runs on the blocking pool; one worker then answers every session without
        // waking another thread for each answer, and its drains gather the writes that
        // arrived meanwhile (docs/BENCHMARKS.md: less CPU a call, more calls a second).
        runtime.worker_threads(1);
    }
    let runtime = runtime.enable_all().build()?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(args.bind)
            .await
            .with_context(|| format!("cannot listen on {}", args.bind))?;
        let local = listener.local_addr()?;
        // The address actually bound (its real port, when asked for 0).
        options.bind = local;
        options.base_url = clawboo_server::base_url_for(local);
        let waits = clawboo_mcp::waits::WaitLimit::from_env().map_err(anyhow::Error::msg)?;
        let mounts = default_mounts(&store, &memory, &signer, options.mcp, &waits);
        let state = AppState::new(store, memory, signer, options, mounts);
        let mut metrics_at = None;
        if let Some(addr) = args.metrics_bind {
            let listener = tokio::net::TcpListener::bind(addr)
                .await
                .with_context(|| format!("cannot listen for /metrics on {addr}"))?;
            metrics_at = Some(listener.local_addr()?);
            tokio::spawn(clawboo_server::serve_metrics(listener, state.clone()));
        }
        let mut banner = banner(
            &clawboo_server::base_url_for(local),
            &location,
            gate_on,
            &vector_search,
        );
        if let Some(addr) = metrics_at {
            let url = clawboo_server::base_url_for(addr);
            banner.push_str(&format!("\x20 metrics:  {url}/metrics\n"));
        }
        // One write: a script that reads the first line may close the pipe after it, and
        // a later write would then fail. Nothing else goes to stdout, so a failure (no
        // reader at all) does not stop the server.
        let mut stdout = std::io::stdout();
        let _ = stdout
            .write_all(banner.as_bytes())
            .and_then(|()| stdout.flush());
        let shutdown = async {
            let _ = tokio::signal::ctrl_c().await;
        };
        clawboo_server::serve(listener, state, shutdown).await?;
        Ok(())
    })
}

/// What `serve` prints once bound: the line scripts parse, then, for the person who just
/// started it, where the board and the database are and the command that attaches an
/// agent, with `--url` and `--db` when this server's differ from `attach`'s defaults (its
/// URLs are signed with the database's secret, so it must open the same one).
fn banner(
    base: &str,
    location: &DbLocation,
    gate_on: bool,
    vector_search: &VectorSearchPath,
) -> String {
    let gate = if gate_on {
        " (access gate on: open it once as /?access_token=<STUDIO_ACCESS_TOKEN>)"
    } else {
        ""
    };
    let (database, engine) = match location {
        DbLocation::File(path) => {
            let path = std::path::absolute(path).unwrap_or_else(|_| path.clone());
            (path.display().to_string(), "SQLite")
        }
        // `Display` leaves the password out.
        DbLocation::Postgres(_) => (location.to_string(), "PostgreSQL"),
    };
    let mut attach = format!(
        "{} attach --apply --runtime claude-code --team demo --agent alice",
        command_name()
    );
    if base != crate::attach::DEFAULT_URL {
        attach.push_str(&format!(" --url {}", shell_word(base)));
    }
    if !matches!(location, DbLocation::File(path) if *path == clawboo_store::default_db_path()) {
        attach.push_str(&format!(" --db {}", shell_word(&database)));
    }
    format!(
        "clawboo listening on {base}\n\
         \x20 board:    {base}/{gate}\n\
         \x20 database: {database} ({engine})\n\
         \x20 memory:   vector search by {vector_search}\n\
         \x20 attach:   {attach}\n\
         \x20           (adds clawboo to Claude Code's config; --runtime codex for Codex,\n\
         \x20           without --apply it prints the snippet instead)\n\
         \x20 guide:    docs/QUICKSTART.md\n"
    )
}

/// How a person runs this executable: `clawboo` when that name on `PATH` is this file,
/// else its full path (after `cargo run` it is not on `PATH`).
fn command_name() -> String {
    let Ok(exe) = std::env::current_exe() else {
        return "clawboo".to_owned();
    };
    let real = exe.canonicalize().unwrap_or_else(|_| exe.clone());
    let same = |candidate: &Path| candidate.canonicalize().is_ok_and(|c| c == real);
    let on_path = std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| same(&dir.join("clawboo"))));
    if on_path {
        "clawboo".to_owned()
    } else {
        shell_word(&exe.display().to_string())
    }
}

/// `text` as one POSIX shell word: unchanged when it holds only characters no shell treats
/// specially, else single-quoted.
fn shell_word(text: &str) -> String {
    let plain = !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-:@%+=,".contains(c));
    if plain {
        text.to_owned()
    } else {
        format!("'{}'", text.replace('\'', "'\\''"))
    }
}
