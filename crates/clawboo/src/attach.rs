//! `clawboo attach`: print an attach snippet locally, its URL always signed from the
//! database (no HTTP, so no operator credentials are needed on the server host).

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use clawboo_mcp::attach::{
    AttachTarget, McpServerName, Runtime, SignedScope, StdioLauncher, Transport,
    build_attach_config, mcp_http_url, stdio_target,
};
use clawboo_mcp::binding::Binding;
use clawboo_mcp::signing::ScopeSigner;
use serde_json::json;

/// Flags of `clawboo attach`.
#[derive(Debug, Clone, Args)]
pub struct AttachArgs {
    /// tasks, memory, tools or teamchat.
    #[arg(long, default_value = "tasks")]
    pub server: String,
    /// claude-code, codex or openclaw.
    #[arg(long, default_value = "claude-code")]
    pub runtime: String,
    /// http or stdio.
    #[arg(long, default_value = "http")]
    pub transport: String,
    /// Bind to this team (teamchat: the room).
    #[arg(long, value_name = "TEAM_ID")]
    pub team: Option<String>,
    /// Bind to this agent (teamchat: the author).
    #[arg(long, value_name = "AGENT_ID")]
    pub agent: Option<String>,
    /// Bind to this tenant (memory only).
    #[arg(long, value_name = "TENANT_ID")]
    pub tenant: Option<String>,
    /// Teamchat only: list team_delegate (orchestrator-driven runs).
    #[arg(long)]
    pub delegate: bool,
    /// Base URL of the running server for http snippets.
    #[arg(long, default_value = "http://127.0.0.1:18790")]
    pub url: String,
    /// SQLite file or postgres:// URL (default: $CLAWBOO_DB_PATH, else ~/.clawboo/clawboo.db).
    #[arg(long, value_name = "PATH_OR_URL")]
    pub db: Option<PathBuf>,
    /// Print `{ok, config}` as JSON (the shape of GET /api/mcp/config).
    #[arg(long)]
    pub json: bool,
}

/// How stdio snippets launch a server: `$CLAWBOO_MCP_BIN_DIR/clawboo-mcp-<server>` when
/// set, else this executable with `mcp <server>`.
pub fn stdio_launcher() -> anyhow::Result<StdioLauncher> {
    if let Ok(dir) = std::env::var(clawboo_server::MCP_BIN_DIR_ENV)
        && !dir.is_empty()
    {
        return Ok(StdioLauncher::BinDir(dir));
    }
    let exe = std::env::current_exe().context("cannot find the clawboo executable's path")?;
    Ok(StdioLauncher::Clawboo(exe.display().to_string()))
}

/// Print the snippet.
pub fn run(args: AttachArgs) -> anyhow::Result<()> {
    let server: McpServerName = args.server.parse()?;
    let runtime: Runtime = args.runtime.parse()?;
    let transport: Transport = args.transport.parse()?;
    let scope = Binding {
        team_id: args.team,
        agent_id: args.agent,
        tenant_id: args.tenant,
        delegate: args.delegate,
    };
    scope.check_for(server)?;
    let location = crate::resolve_db(args.db.as_deref())?;
    let target = match transport {
        Transport::Http => {
            // Always signed, an unbound URL too: behind the access gate the signature is
            // what opens the endpoint.
            let store = crate::open_store(&location, crate::STDIO_PG_POOL)?;
            let signed = SignedScope::new(server, scope, &ScopeSigner::from_store(&store)?);
            AttachTarget::Http {
                url: mcp_http_url(&args.url, &signed),
            }
        }
        Transport::Stdio => stdio_target(&stdio_launcher()?, server, &scope, &location),
    };
    let config = build_attach_config(server, runtime, &target);
    if args.json {
        println!("{}", json!({ "ok": true, "config": config }));
    } else {
        println!("{}", config.snippet);
        // On stderr, so stdout stays the snippet alone, ready to paste or pipe.
        if let Some(note) = &config.note {
            eprintln!("note: {note}");
        }
    }
    Ok(())
}
