//! `clawboo mcp <server>` and the `clawboo-mcp-<server>` binaries: one server over stdio.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::bail;
use clap::{Args, Parser};
use clawboo_mcp::binding::Binding;
use clawboo_mcp::server::McpServer;
use clawboo_mcp::stdio::serve_stdio;
use clawboo_mcp::tasks::{TasksConfig, TasksServer};
use clawboo_mcp::tools::{ToolsConfig, ToolsServer};

/// Flags every stdio server takes. The binding flags are set by the process that spawns
/// the server (never by the model) and bind the session exactly as a signed URL does.
#[derive(Debug, Clone, Default, Args)]
pub struct StdioArgs {
    /// Database file (default: $CLAWBOO_DB_PATH, else ~/.clawboo/clawboo.db).
    #[arg(long, value_name = "PATH")]
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

/// Serve `server` over stdio until stdin closes.
pub fn run(server: &str, args: StdioArgs) -> anyhow::Result<()> {
    if args.read_only && server != "tasks" {
        bail!("--read-only applies to the tasks server only");
    }
    if args.delegate && server != "teamchat" {
        bail!("--delegate applies to the teamchat server only");
    }
    let store = crate::open_store(args.db.as_deref())?;
    let binding = args.binding();
    // One thread is plenty: store work runs on the blocking pool, and a single-threaded
    // reactor keeps cold start and idle memory small.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        match server {
            "tasks" => {
                let config = TasksConfig {
                    read_only: args.read_only,
                    binding,
                };
                serve_stdio(McpServer::new(TasksServer::new(store, config))).await?
            }
            "teamchat" => {
                let teamchat = clawboo_mcp::teamchat::TeamChatServer::new(store, binding);
                serve_stdio(McpServer::new(teamchat)).await?
            }
            "tools" => {
                let config = ToolsConfig {
                    binding,
                    broker: clawboo_store::broker::BrokerConfig::from_env(),
                };
                serve_stdio(McpServer::new(ToolsServer::new(store, config))).await?
            }
            other => {
                bail!("unknown server: {other} (expected one of: tasks, memory, tools, teamchat)")
            }
        }
        Ok(())
    })
}

#[derive(Parser)]
struct StdioCli {
    #[command(flatten)]
    args: StdioArgs,
}

/// `main` of a `clawboo-mcp-<server>` binary.
pub fn bin_main(server: &str) -> ExitCode {
    crate::init_logging();
    let cli = StdioCli::parse();
    match run(server, cli.args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e:#}");
            eprintln!("clawboo-mcp-{server}: {e:#}");
            ExitCode::FAILURE
        }
    }
}
