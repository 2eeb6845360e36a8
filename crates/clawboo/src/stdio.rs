//! `clawboo mcp <server>` and the `clawboo-mcp-<server>` binaries: one server over stdio.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::bail;
use clap::{Args, Parser};
use clawboo_mcp::binding::Binding;
use clawboo_mcp::memory::{MemoryConfig, MemoryServer};
use clawboo_mcp::server::{McpServer, ToolSet};
use clawboo_mcp::stdio::serve_stdio;
use clawboo_mcp::tasks::{TasksConfig, TasksServer};
use clawboo_mcp::tools::{ToolsConfig, ToolsServer};

/// Flags every stdio server takes. The binding flags are set by the process that spawns
/// the server (never by the model) and bind the session exactly as a signed URL does.
#[derive(Debug, Clone, Default, Args)]
pub struct StdioArgs {
    /// SQLite file or postgres:// URL (default: $CLAWBOO_DB_PATH, else ~/.clawboo/clawboo.db).
    #[arg(long, value_name = "PATH_OR_URL")]
    pub db: Option<PathBuf>,
    /// Bind the session to this team.
    #[arg(long, value_name = "TEAM_ID")]
    pub team: Option<String>,
    /// Bind the session to this agent.
    #[arg(long, value_name = "AGENT_ID")]
    pub agent: Option<String>,
    /// Bind the session to this tenant.
    #[arg(long, value_name = "TENANT_ID")]
    pub tenant: Option<String>,
    /// Tasks only: serve just list_tasks and get_task.
    #[arg(long)]
    pub read_only: bool,
    /// Teamchat only: an orchestrator-driven run (lists team_delegate).
    #[arg(long)]
    pub delegate: bool,
}

impl StdioArgs {
    /// The session binding these flags describe.
    pub fn binding(&self) -> Binding {
        Binding {
            team_id: self.team.clone(),
            agent_id: self.agent.clone(),
            tenant_id: self.tenant.clone(),
            delegate: self.delegate,
        }
    }
}

/// Serve `server` over stdio until stdin closes (`clawboo mcp <server>`).
pub fn run(server: &str, args: StdioArgs) -> anyhow::Result<()> {
    match server {
        "tasks" => serve_tasks(args),
        "memory" => serve_memory(args),
        "teamchat" => serve_teamchat(args),
        "tools" => serve_tools(args),
        other => bail!("unknown server: {other} (expected one of: tasks, memory, tools, teamchat)"),
    }
}

/// Refuse the flags that belong to another server.
fn check_flags(server: &str, args: &StdioArgs) -> anyhow::Result<()> {
    if args.read_only && server != "tasks" {
        bail!("--read-only applies to the tasks server only");
    }
    if args.delegate && server != "teamchat" {
        bail!("--delegate applies to the teamchat server only");
    }
    Ok(())
}

/// Serve `server` on stdin/stdout on one thread: store work is quick and serialized on
/// the connection anyway, and a single-threaded reactor keeps cold start and idle memory
/// small.
fn serve_on_this_thread<T: ToolSet>(server: McpServer<T>) -> anyhow::Result<()> {
    keep_freed_heap_top();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(serve_stdio(server))?;
    Ok(())
}

/// How much freed memory may sit at the top of the heap before glibc gives it back.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const HEAP_TRIM_THRESHOLD: libc::c_int = 1 << 20;

/// Let up to [`HEAP_TRIM_THRESHOLD`] of freed memory stay at the top of the heap. A stdio
/// server's one thread allocates from glibc's main heap, and each write of a group commit
/// makes SQLite allocate its savepoint journal (one 64 KiB buffer) and free it on release.
/// With glibc's default threshold (128 KiB, moved by its own heuristics) that buffer can
/// land on a top that the free shrinks and the next write grows again, so a write paid a
/// `brk` and its page faults; with this setting the top stays mapped (measured:
/// docs/BENCHMARKS.md's git history).
/// `serve` sets it too: its worker threads allocate from arenas of their own, whose top
/// glibc shrinks with `madvise` (a TLB flush on every core, and page faults to grow it
/// again), and each claim's lease check makes SQLite allocate and free a temporary
/// B-tree's page cache there.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
pub(crate) fn keep_freed_heap_top() {
    // SAFETY: `mallopt` only changes a parameter of glibc's allocator, under the
    // allocator's own lock; it has no precondition and may be called at any time.
    if unsafe { libc::mallopt(libc::M_TRIM_THRESHOLD, HEAP_TRIM_THRESHOLD) } == 0 {
        tracing::debug!("glibc refused M_TRIM_THRESHOLD; the heap trims at its default");
    }
}

/// Other C libraries keep no such threshold to tune.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub(crate) fn keep_freed_heap_top() {}

/// The Tasks server over stdio.
pub fn serve_tasks(args: StdioArgs) -> anyhow::Result<()> {
    check_flags("tasks", &args)?;
    let store = crate::open_db(args.db.as_deref(), crate::STDIO_PG_POOL)?;
    let config = TasksConfig {
        read_only: args.read_only,
        binding: args.binding(),
    };
    serve_on_this_thread(McpServer::new(TasksServer::new(store, config)))
}

/// The Memory server over stdio.
pub fn serve_memory(args: StdioArgs) -> anyhow::Result<()> {
    check_flags("memory", &args)?;
    let store = crate::open_db(args.db.as_deref(), crate::STDIO_PG_POOL)?;
    // Chosen before the async runtime starts: the HTTP embedders are blocking clients.
    let memory = crate::open_memory(store);
    let config = MemoryConfig {
        binding: args.binding(),
    };
    serve_on_this_thread(McpServer::new(MemoryServer::new(memory, config)))
}

/// The TeamChat server over stdio.
pub fn serve_teamchat(args: StdioArgs) -> anyhow::Result<()> {
    check_flags("teamchat", &args)?;
    let store = crate::open_db(args.db.as_deref(), crate::STDIO_PG_POOL)?;
    let teamchat = clawboo_mcp::teamchat::TeamChatServer::new(store, args.binding(), wait_limit()?);
    serve_on_this_thread(McpServer::new(teamchat))
}

/// The Tools server (the tool broker) over stdio.
pub fn serve_tools(args: StdioArgs) -> anyhow::Result<()> {
    check_flags("tools", &args)?;
    let store = crate::open_db(args.db.as_deref(), crate::STDIO_PG_POOL)?;
    let config = ToolsConfig {
        binding: args.binding(),
        broker: clawboo_broker::BrokerConfig::from_env(),
        executor: Arc::new(clawboo_exec::Builtins::from_env()),
        waits: wait_limit()?,
    };
    serve_on_this_thread(McpServer::new(ToolsServer::new(store, config)))
}

/// The most waits the client holds at once (`CLAWBOO_MAX_WAITS`).
fn wait_limit() -> anyhow::Result<clawboo_mcp::waits::WaitLimit> {
    clawboo_mcp::waits::WaitLimit::from_env().map_err(anyhow::Error::msg)
}

#[derive(Parser)]
struct StdioCli {
    #[command(flatten)]
    args: StdioArgs,
}

/// `main` of a `clawboo-mcp-<server>` binary. Each binary passes its own `serve_*`, so
/// the linker keeps only that server's code: the Tasks binary carries no embedder, no
/// HTTP server and no broker (smaller, faster to start, less resident code).
pub fn bin_main(server: &str, serve: fn(StdioArgs) -> anyhow::Result<()>) -> ExitCode {
    crate::init_logging();
    let cli = StdioCli::parse();
    let result = serve(cli.args);
    crate::telemetry::shutdown();
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e:#}");
            eprintln!("clawboo-mcp-{server}: {e:#}");
            ExitCode::FAILURE
        }
    }
}
