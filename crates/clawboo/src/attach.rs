//! `clawboo attach`: print an attach snippet locally, its URL always signed from the
//! database (no HTTP, so no operator credentials are needed on the server host), or with
//! `--apply` write it into the runtime's own config file ([`apply`]).

pub mod apply;

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;
use apply::ClaudeScope;
use clap::Args;
use clawboo_mcp::attach::{
    AttachConfig, AttachTarget, McpServerName, Runtime, SignedScope, StdioLauncher, Transport,
    build_attach_config, mcp_http_url, stdio_target,
};
use clawboo_mcp::binding::Binding;
use clawboo_mcp::signing::ScopeSigner;
use serde_json::{Value, json};

/// Where `clawboo serve` listens unless told otherwise, and so where snippets point.
pub const DEFAULT_URL: &str = "http://127.0.0.1:18790";

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
    #[arg(long, default_value = DEFAULT_URL)]
    pub url: String,
    /// SQLite file or postgres:// URL (default: $CLAWBOO_DB_PATH, else ~/.clawboo/clawboo.db).
    #[arg(long, value_name = "PATH_OR_URL")]
    pub db: Option<PathBuf>,
    /// Print `{ok, config}` as JSON (the shape of GET /api/mcp/config).
    #[arg(long, conflicts_with = "apply")]
    pub json: bool,
    /// All four servers (the tenant binds memory only, --delegate teamchat only).
    #[arg(long, conflicts_with = "server")]
    pub all: bool,
    /// Write the configuration into the runtime's config file (merged: every other entry
    /// and comment stays; a file already up to date is not touched).
    #[arg(long)]
    pub apply: bool,
    /// With --apply: print the change as a diff and write nothing.
    #[arg(long, requires = "apply")]
    pub dry_run: bool,
    /// Claude Code with --apply: where `claude mcp add --scope` would keep the servers
    /// (user: ~/.claude.json; project: ./.mcp.json). Default user.
    #[arg(long, value_enum, requires = "apply")]
    pub scope: Option<ClaudeScope>,
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

/// The binding `args` asks of `server`: with `--all` the tenant goes to memory only and
/// `--delegate` to teamchat only; for one server every flag is checked against it.
fn binding_for(server: McpServerName, args: &AttachArgs) -> anyhow::Result<Binding> {
    let scope = Binding {
        team_id: args.team.clone(),
        agent_id: args.agent.clone(),
        tenant_id: args
            .tenant
            .clone()
            .filter(|_| !args.all || server == McpServerName::Memory),
        delegate: args.delegate && (!args.all || server == McpServerName::Teamchat),
    };
    match scope.check_for(server) {
        Ok(()) => Ok(scope),
        Err(e) if args.all => Err(anyhow::anyhow!("{}: {e}", server.attach_id())),
        Err(e) => Err(e.into()),
    }
}

/// Print the snippet(s), or with `--apply` write them.
pub fn run(args: AttachArgs) -> anyhow::Result<()> {
    let runtime: Runtime = args.runtime.parse()?;
    let transport: Transport = args.transport.parse()?;
    if args.scope.is_some() && runtime != Runtime::ClaudeCode {
        anyhow::bail!(
            "--scope applies to --runtime claude-code only (Codex and OpenClaw have one config file)"
        );
    }
    let servers = if args.all {
        McpServerName::ALL.to_vec()
    } else {
        vec![args.server.parse()?]
    };
    let scopes = servers
        .iter()
        .map(|&server| binding_for(server, &args))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let location = crate::resolve_db(args.db.as_deref())?;
    // Always signed, an unbound URL too: behind the access gate the signature is what
    // opens the endpoint.
    let signer = match transport {
        Transport::Http => {
            let store = crate::open_store(&location, crate::STDIO_PG_POOL)?;
            Some(ScopeSigner::from_store(&store)?)
        }
        Transport::Stdio => None,
    };
    let launcher = stdio_launcher()?;
    let configs: Vec<AttachConfig> = servers
        .iter()
        .zip(scopes)
        .map(|(&server, scope)| {
            let target = match &signer {
                Some(signer) => AttachTarget::Http {
                    url: mcp_http_url(&args.url, &SignedScope::new(server, scope, signer)),
                },
                None => stdio_target(&launcher, server, &scope, &location),
            };
            build_attach_config(server, runtime, &target)
        })
        .collect();
    // On stderr, so stdout stays the snippet alone, ready to paste or pipe (the JSON
    // carries it as `note`).
    if let Some(note) = configs.iter().find_map(|c| c.note).filter(|_| !args.json) {
        eprintln!("note: {note}");
    }
    if args.apply {
        return apply_configs(runtime, args.scope, &configs, args.dry_run);
    }
    for config in &configs {
        if args.json {
            println!("{}", json!({ "ok": true, "config": config }));
        } else {
            println!("{}", config.snippet);
        }
    }
    Ok(())
}

/// The entries `config` adds to the runtime's servers table: Codex's structured form is
/// the whole file's (`{mcp_servers: {id: …}}`), the others' the table's (`{id: …}`).
fn entry(runtime: Runtime, config: &AttachConfig) -> Option<(String, Value)> {
    let table = match runtime {
        Runtime::Codex => config.structured.get("mcp_servers")?,
        Runtime::ClaudeCode | Runtime::OpenClaw => &config.structured,
    };
    Some((config.id.clone(), table.get(&config.id)?.clone()))
}

/// Merge `configs` into the runtime's config file: write it (unless `dry_run`, which
/// prints the diff instead), or say it is already up to date.
fn apply_configs(
    runtime: Runtime,
    scope: Option<ClaudeScope>,
    configs: &[AttachConfig],
    dry_run: bool,
) -> anyhow::Result<()> {
    let (path, table_path) = apply::target(runtime, scope)?;
    let entries = configs
        .iter()
        .map(|c| entry(runtime, c).with_context(|| format!("no structured entry for {}", c.id)))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let ids: Vec<&str> = configs.iter().map(|c| c.id.as_str()).collect();
    let before = match std::fs::read_to_string(&path) {
        Ok(text) => Some(text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
    };
    let after = apply::merge(runtime, &path, before.as_deref(), table_path, &entries)?;
    let shown = path.display();
    if before.as_deref() == Some(after.as_str()) {
        println!("unchanged {shown}: {} already attached", ids.join(", "));
        return Ok(());
    }
    if dry_run {
        print!("{}", apply::diff(&path, before.as_deref(), &after));
        return Ok(());
    }
    write_atomically(&path, &after).with_context(|| format!("cannot write {shown}"))?;
    println!("updated {shown}: {}", ids.join(", "));
    if scope == Some(ClaudeScope::Project) {
        eprintln!(
            "note: Claude Code asks to approve a project's servers the first time it starts in it (or run `claude` there and accept)"
        );
    }
    Ok(())
}

/// Replace `path` by `text` in one rename (a reader never sees half a file), keeping the
/// file's permissions; a new file (and its folder) is made private to the user.
fn write_atomically(path: &Path, text: &str) -> anyhow::Result<()> {
    // Through a symlink to its target, so the link stays a link.
    let path = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_owned());
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_owned(),
        _ => PathBuf::from("."),
    };
    std::fs::create_dir_all(&dir)?;
    let permissions = std::fs::metadata(&path).ok().map(|m| m.permissions());
    let mut file = tempfile::NamedTempFile::new_in(&dir)?;
    file.write_all(text.as_bytes())?;
    file.as_file().sync_all()?;
    if let Some(permissions) = permissions {
        file.as_file().set_permissions(permissions)?;
    }
    file.persist(&path)?;
    Ok(())
}
