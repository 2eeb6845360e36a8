//! Attach configuration: the URL and stdio command an external agent uses to reach one of
//! the four servers, the per-runtime snippets (Claude Code, Codex, OpenClaw), and the
//! reading of a signed binding back off an HTTP attach URL.
//!
//! Everything here is pure (no I/O): the caller supplies the base URL, the database, the
//! stdio launcher and the [`ScopeSigner`].

use std::str::FromStr;

use clawboo_store::DbLocation;
use serde::Serialize;
use serde_json::{Value, json};

use crate::binding::Binding;
pub use crate::server_name::McpServerName;
use crate::signing::ScopeSigner;

/// Here rather than beside the type: its error is the attach error an operator sees.
impl FromStr for McpServerName {
    type Err = AttachError;
    fn from_str(s: &str) -> Result<Self, AttachError> {
        McpServerName::ALL
            .into_iter()
            .find(|n| n.as_str() == s)
            .ok_or_else(|| AttachError::UnknownServer(s.to_owned()))
    }
}

/// The agent runtime a snippet is formatted for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Runtime {
    ClaudeCode,
    Codex,
    OpenClaw,
}

impl FromStr for Runtime {
    type Err = AttachError;
    fn from_str(s: &str) -> Result<Self, AttachError> {
        match s {
            "claude-code" => Ok(Runtime::ClaudeCode),
            "codex" => Ok(Runtime::Codex),
            "openclaw" => Ok(Runtime::OpenClaw),
            other => Err(AttachError::UnknownRuntime(other.to_owned())),
        }
    }
}

/// How the agent reaches the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    Http,
    Stdio,
}

impl Transport {
    /// The wire name (`http`, `stdio`).
    pub fn as_str(self) -> &'static str {
        match self {
            Transport::Http => "http",
            Transport::Stdio => "stdio",
        }
    }
}

impl FromStr for Transport {
    type Err = AttachError;
    fn from_str(s: &str) -> Result<Self, AttachError> {
        match s {
            "http" => Ok(Transport::Http),
            "stdio" => Ok(Transport::Stdio),
            other => Err(AttachError::UnknownTransport(other.to_owned())),
        }
    }
}

/// Why an attach config could not be built. The texts are what an operator sees.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AttachError {
    #[error("unknown server: {0}")]
    UnknownServer(String),
    #[error("unknown runtime: {0} (use claude-code, codex or openclaw)")]
    UnknownRuntime(String),
    #[error("unknown transport: {0} (use http or stdio)")]
    UnknownTransport(String),
    /// A scope field the chosen server does not bind (e.g. a tenant on tasks).
    #[error("{0}")]
    ScopeNotApplicable(String),
}

/// Whether `scope` claims anything at all (a lone `delegate` counts: it must be refused,
/// not silently dropped).
fn claims_anything(scope: &Binding) -> bool {
    scope.is_bound() || scope.delegate
}

impl Binding {
    /// Check that `server` binds every field that is set: tenant only on memory,
    /// delegate only on teamchat, and teamchat needs both team and agent.
    pub fn check_for(&self, server: McpServerName) -> Result<(), AttachError> {
        let refuse = |m: &str| Err(AttachError::ScopeNotApplicable(m.to_owned()));
        if self.tenant_id.is_some() && server != McpServerName::Memory {
            return refuse("a tenant scope applies only to the memory server");
        }
        if self.delegate && server != McpServerName::Teamchat {
            return refuse("delegate applies only to the teamchat server");
        }
        if server == McpServerName::Teamchat
            && claims_anything(self)
            && (self.team_id.is_none() || self.agent_id.is_none())
        {
            return refuse(
                "teamchat binds only with both a team (room) and an agent (author); pass both or neither",
            );
        }
        Ok(())
    }
}

/// A scope with this install's signature over it and the server it is for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignedScope {
    pub server: McpServerName,
    pub scope: Binding,
    pub sig: String,
}

impl SignedScope {
    /// Sign `scope` (empty for an unbound URL) on `server` with `signer`.
    pub fn new(server: McpServerName, scope: Binding, signer: &ScopeSigner) -> SignedScope {
        let sig = signer.sign(server, &scope);
        SignedScope { server, scope, sig }
    }
}

/// Why an attach URL was refused. What the agent sees is one fixed text (it says what to
/// do); the reason is logged for the operator, never shown, so a prober learns nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{INVALID_SCOPE_SIGNATURE}")]
pub struct ScopeRefused {
    /// What was wrong with the URL (for the log).
    pub reason: &'static str,
}

/// The message of a refused attach URL (HTTP 403, JSON-RPC -32001).
pub const INVALID_SCOPE_SIGNATURE: &str =
    "invalid scope signature: mint a new URL with clawboo attach";

/// URL parameter holding the signature.
const SIG_PARAM: &str = "scopeSig";
/// URL parameter granting `team_delegate` (teamchat only, inside the signature).
const DELEGATE_PARAM: &str = "delegate";

/// The query parameter names a server's URL uses for team, agent and tenant. `delegate`
/// is read on every server (and is inside the signature), so appending it to any signed
/// URL refuses the session rather than being ignored.
struct ParamNames {
    team: &'static str,
    agent: &'static str,
    tenant: Option<&'static str>,
}

fn param_names(server: McpServerName) -> ParamNames {
    match server {
        McpServerName::Tasks | McpServerName::Tools => ParamNames {
            team: "scopeTeamId",
            agent: "scopeAgentId",
            tenant: None,
        },
        McpServerName::Memory => ParamNames {
            team: "scopeTeamId",
            agent: "scopeAgentId",
            tenant: Some("scopeTenantId"),
        },
        McpServerName::Teamchat => ParamNames {
            team: "roomTeamId",
            agent: "postAuthorAgentId",
            tenant: None,
        },
    }
}

/// The HTTP attach URL under `base` (e.g. `http://127.0.0.1:18790`) of the server
/// `signed` is for, carrying its binding and signature (always: an unbound URL is signed
/// over the empty binding, which is what opens the endpoint behind the access gate).
pub fn mcp_http_url(base: &str, signed: &SignedScope) -> String {
    let server = signed.server;
    let mut url = format!("{}/api/mcp/{}", base.trim_end_matches('/'), server.as_str());
    let names = param_names(server);
    let mut query = form_urlencoded::Serializer::new(String::new());
    let scope = &signed.scope;
    if let Some(team) = &scope.team_id {
        query.append_pair(names.team, team);
    }
    if let Some(agent) = &scope.agent_id {
        query.append_pair(names.agent, agent);
    }
    if let (Some(name), Some(tenant)) = (names.tenant, &scope.tenant_id) {
        query.append_pair(name, tenant);
    }
    if scope.delegate {
        query.append_pair(DELEGATE_PARAM, "1");
    }
    query.append_pair(SIG_PARAM, &signed.sig);
    url.push('?');
    url.push_str(&query.finish());
    url
}

/// Refuse a URL, logging why.
fn refuse(server: McpServerName, reason: &'static str) -> ScopeRefused {
    tracing::warn!(server = server.as_str(), "attach URL refused: {reason}");
    ScopeRefused { reason }
}

/// The scope an HTTP request to `server` carries in its query string: `Ok(None)` when it
/// has no scope parameters and no `scopeSig` (a plain unbound URL), `Ok(Some(binding))`
/// when `scopeSig` is this install's signature over exactly `server` and those values
/// (the binding is empty for a signed unbound URL). Anything else is refused, never
/// served unbound (unbound is more powerful than bound): missing, malformed or wrong
/// signatures, repeated parameters, a `delegate` appended to a signed URL, or (teamchat)
/// only one of room and author.
pub fn verified_scope(
    server: McpServerName,
    query: Option<&str>,
    signer: &ScopeSigner,
) -> Result<Option<Binding>, ScopeRefused> {
    let names = param_names(server);
    let mut team = None;
    let mut agent = None;
    let mut tenant = None;
    let mut delegate = None;
    let mut sig = None;
    for (key, value) in form_urlencoded::parse(query.unwrap_or("").as_bytes()) {
        let slot = if key == names.team {
            &mut team
        } else if key == names.agent {
            &mut agent
        } else if Some(key.as_ref()) == names.tenant {
            &mut tenant
        } else if key == DELEGATE_PARAM {
            &mut delegate
        } else if key == SIG_PARAM {
            &mut sig
        } else {
            continue;
        };
        if slot.is_some() {
            return Err(refuse(server, "a scope parameter appears more than once"));
        }
        *slot = Some(value.into_owned());
    }
    let delegate = match delegate.as_deref() {
        None => false,
        Some("1" | "true") => true,
        Some(_) => return Err(refuse(server, "delegate must be 1")),
    };
    let scope = Binding {
        team_id: team,
        agent_id: agent,
        tenant_id: tenant,
        delegate,
    };
    let Some(sig) = sig else {
        if claims_anything(&scope) {
            return Err(refuse(server, "scope parameters without scopeSig"));
        }
        return Ok(None);
    };
    if server == McpServerName::Teamchat
        && claims_anything(&scope)
        && (scope.team_id.is_none() || scope.agent_id.is_none())
    {
        return Err(refuse(
            server,
            "teamchat needs both roomTeamId and postAuthorAgentId",
        ));
    }
    if !signer.verify(server, &scope, &sig) {
        return Err(refuse(
            server,
            "scopeSig does not match the server and scope parameters (tampered, minted for another server, or by another install)",
        ));
    }
    Ok(Some(scope))
}

/// The binding an HTTP session of `server` gets from its `initialize` request's query
/// string (see [`verified_scope`]): unbound for a plain or signed unbound URL, bound for
/// a signed scope, refused otherwise.
pub fn binding_from_query(
    server: McpServerName,
    query: Option<&str>,
    signer: &ScopeSigner,
) -> Result<Binding, ScopeRefused> {
    verified_scope(server, query, signer).map(Option::unwrap_or_default)
}

/// How a stdio snippet launches a server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StdioLauncher {
    /// `$CLAWBOO_MCP_BIN_DIR`: run `<dir>/clawboo-mcp-<server>`.
    BinDir(String),
    /// The `clawboo` executable itself: run `<exe> mcp <server>`.
    Clawboo(String),
}

/// What the snippet points at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AttachTarget {
    /// A Streamable HTTP URL (see [`mcp_http_url`]).
    Http { url: String },
    /// A native stdio command, with the database it must open: a file path, or a
    /// PostgreSQL URL without its password (see [`PG_PASSWORD_NOTE`]).
    Stdio {
        command: String,
        args: Vec<String>,
        db: String,
        note: Option<&'static str>,
    },
}

/// What a stdio snippet over PostgreSQL tells the operator: snippets land in config files
/// and shell history, so the URL is written without its password and the agent's host
/// supplies it the way every libpq tool does.
pub const PG_PASSWORD_NOTE: &str = "the database URL carries no password: give the agent's \
     environment PGPASSWORD, or add the server to ~/.pgpass \
     (hostname:port:database:username:password, mode 600) on the host that runs the agent";

/// The stdio target for `server`: the launcher's command plus the binding flags of
/// `scope` (stdio binds by flags, set by the spawning process, so no signature), opening
/// `db` (a PostgreSQL URL loses its password here, whoever the caller is).
pub fn stdio_target(
    launcher: &StdioLauncher,
    server: McpServerName,
    scope: &Binding,
    db: &DbLocation,
) -> AttachTarget {
    let (command, mut args) = match launcher {
        StdioLauncher::BinDir(dir) => (
            format!(
                "{}/clawboo-mcp-{}",
                dir.trim_end_matches('/'),
                server.as_str()
            ),
            Vec::new(),
        ),
        StdioLauncher::Clawboo(exe) => (
            exe.clone(),
            vec!["mcp".to_owned(), server.as_str().to_owned()],
        ),
    };
    let flags = [
        ("--team", &scope.team_id),
        ("--agent", &scope.agent_id),
        ("--tenant", &scope.tenant_id),
    ];
    for (flag, value) in flags {
        if let Some(v) = value {
            args.push(flag.to_owned());
            args.push(v.clone());
        }
    }
    if scope.delegate {
        args.push("--delegate".to_owned());
    }
    AttachTarget::Stdio {
        command,
        args,
        db: db.to_string(),
        note: db.is_postgres().then_some(PG_PASSWORD_NOTE),
    }
}

/// One attach configuration: `{id, transport, snippet, structured[, note]}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AttachConfig {
    pub id: String,
    pub transport: &'static str,
    /// The copy-paste text (a command, or a comment line then TOML/JSON).
    pub snippet: String,
    /// The same attachment as an object, for programmatic config.
    pub structured: Value,
    /// What the operator must do besides pasting the snippet (kept out of the snippet,
    /// whose TOML/JSON must parse as it stands).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<&'static str>,
}

/// Quote `s` for a POSIX shell when it holds anything but plainly safe characters.
fn shell_quote(s: &str) -> String {
    let safe = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-./:=@%+,".contains(c));
    if safe {
        s.to_owned()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// A TOML basic string (quoted, with every character TOML forbids escaped).
fn toml_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\u{:04X}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A JSON string literal.
fn json_string(s: &str) -> String {
    Value::String(s.to_owned()).to_string()
}

/// Build the attach config of `server` for `runtime` pointing at `target`.
pub fn build_attach_config(
    server: McpServerName,
    runtime: Runtime,
    target: &AttachTarget,
) -> AttachConfig {
    let id = server.attach_id();
    let (transport, snippet, structured, note) = match target {
        AttachTarget::Http { url } => {
            let (snippet, structured) = http_snippet(&id, runtime, url);
            (Transport::Http, snippet, structured, None)
        }
        AttachTarget::Stdio {
            command,
            args,
            db,
            note,
        } => {
            let (snippet, structured) = stdio_snippet(&id, runtime, command, args, db);
            (Transport::Stdio, snippet, structured, *note)
        }
    };
    AttachConfig {
        id,
        transport: transport.as_str(),
        snippet,
        structured,
        note,
    }
}

const CODEX_HEADER: &str = "# ~/.codex/config.toml";
const OPENCLAW_HEADER: &str = "# openclaw.json → mcp.servers";

fn http_snippet(id: &str, runtime: Runtime, url: &str) -> (String, Value) {
    match runtime {
        Runtime::ClaudeCode => (
            format!("claude mcp add --transport http {id} {}", shell_quote(url)),
            json!({ id: { "type": "http", "url": url } }),
        ),
        Runtime::Codex => (
            format!(
                "{CODEX_HEADER}\n[mcp_servers.{id}]\nurl = {}\n",
                toml_string(url)
            ),
            json!({ "mcp_servers": { id: { "url": url } } }),
        ),
        Runtime::OpenClaw => (
            format!(
                "{OPENCLAW_HEADER}\n{}: {{ \"url\": {}, \"transport\": \"streamable-http\" }}",
                json_string(id),
                json_string(url)
            ),
            json!({ id: { "url": url, "transport": "streamable-http" } }),
        ),
    }
}

fn stdio_snippet(
    id: &str,
    runtime: Runtime,
    command: &str,
    args: &[String],
    db: &str,
) -> (String, Value) {
    let env = json!({ clawboo_store::DB_PATH_ENV: db });
    match runtime {
        Runtime::ClaudeCode => {
            let mut cmd = format!(
                "claude mcp add {id} -e {} -- {}",
                shell_quote(&format!("{}={db}", clawboo_store::DB_PATH_ENV)),
                shell_quote(command)
            );
            for a in args {
                cmd.push(' ');
                cmd.push_str(&shell_quote(a));
            }
            (
                cmd,
                json!({ id: { "type": "stdio", "command": command, "args": args, "env": env } }),
            )
        }
        Runtime::Codex => {
            let args_toml: Vec<String> = args.iter().map(|a| toml_string(a)).collect();
            (
                format!(
                    "{CODEX_HEADER}\n[mcp_servers.{id}]\ncommand = {}\nargs = [{}]\nenv = {{ {} = {} }}\n",
                    toml_string(command),
                    args_toml.join(", "),
                    clawboo_store::DB_PATH_ENV,
                    toml_string(db)
                ),
                json!({ "mcp_servers": { id: { "command": command, "args": args, "env": env } } }),
            )
        }
        Runtime::OpenClaw => {
            let entry = json!({ "command": command, "args": args, "env": env });
            (
                format!("{OPENCLAW_HEADER}\n{}: {}", json_string(id), entry),
                json!({ id: entry }),
            )
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn signer() -> ScopeSigner {
        ScopeSigner::from_secret_hex(&"5a".repeat(32)).unwrap()
    }

    fn team_agent(team: &str, agent: &str) -> Binding {
        Binding {
            team_id: Some(team.into()),
            agent_id: Some(agent.into()),
            ..Binding::default()
        }
    }

    /// The query part of a URL.
    fn query(url: &str) -> Option<&str> {
        url.split_once('?').map(|(_, q)| q)
    }

    #[test]
    fn names_parse_and_unknowns_are_refused_with_their_text() {
        assert_eq!("memory".parse::<McpServerName>(), Ok(McpServerName::Memory));
        assert_eq!(
            "nope".parse::<McpServerName>().unwrap_err().to_string(),
            "unknown server: nope"
        );
        assert!("claude".parse::<Runtime>().is_err());
        assert!("sse".parse::<Transport>().is_err());
        assert_eq!(McpServerName::Teamchat.attach_id(), "clawboo-teamchat");
    }

    fn signed(server: McpServerName, scope: Binding) -> SignedScope {
        SignedScope::new(server, scope, &signer())
    }

    fn refused(server: McpServerName, query: &str) -> bool {
        let result = binding_from_query(server, Some(query), &signer());
        if let Err(e) = &result {
            assert_eq!(e.to_string(), INVALID_SCOPE_SIGNATURE);
        }
        result.is_err()
    }

    #[test]
    fn unbound_url_is_signed_and_a_plain_one_stays_unbound() {
        let url = mcp_http_url(
            "http://127.0.0.1:18790/",
            &signed(McpServerName::Tasks, Binding::default()),
        );
        let (path, q) = url.split_once('?').unwrap();
        assert_eq!(path, "http://127.0.0.1:18790/api/mcp/tasks");
        assert!(q.starts_with("scopeSig=") && !q.contains('&'), "{url}");
        let s = signer();
        assert_eq!(
            verified_scope(McpServerName::Tasks, Some(q), &s),
            Ok(Some(Binding::default()))
        );
        assert_eq!(verified_scope(McpServerName::Tasks, None, &s), Ok(None));
        assert_eq!(
            verified_scope(McpServerName::Tasks, Some("foo=1"), &s),
            Ok(None)
        );
        // The unbound signature of one server opens no other.
        assert!(refused(McpServerName::Memory, q));
        assert!(refused(McpServerName::Tasks, "scopeSig=00"));
    }

    #[test]
    fn signed_url_round_trips_for_every_server() {
        let s = signer();
        for server in McpServerName::ALL {
            let mut scope = team_agent("team one", "agent&1");
            if server == McpServerName::Memory {
                scope.tenant_id = Some("tenant=x".into());
            }
            if server == McpServerName::Teamchat {
                scope.delegate = true;
            }
            scope.check_for(server).unwrap();
            let url = mcp_http_url("http://h:1", &signed(server, scope.clone()));
            assert_eq!(
                binding_from_query(server, query(&url), &s),
                Ok(scope),
                "{url}"
            );
        }
    }

    #[test]
    fn a_url_signed_for_one_server_opens_no_other() {
        // Tasks and memory read the same parameter names: the server is in the signature.
        let q = signed_query(McpServerName::Tasks, team_agent("t", "a"));
        assert!(!refused(McpServerName::Tasks, &q));
        assert!(refused(McpServerName::Memory, &q));
        assert!(refused(McpServerName::Tools, &q));
    }

    #[test]
    fn teamchat_url_uses_room_and_author_params() {
        let url = mcp_http_url(
            "http://h:1",
            &signed(McpServerName::Teamchat, team_agent("t", "a")),
        );
        assert!(
            url.contains("roomTeamId=t&postAuthorAgentId=a&scopeSig="),
            "{url}"
        );
        assert!(!url.contains("delegate"));
    }

    #[test]
    fn signing_is_deterministic_so_config_files_do_not_churn() {
        let a = mcp_http_url(
            "http://h:1",
            &signed(McpServerName::Memory, team_agent("t", "a")),
        );
        let b = mcp_http_url(
            "http://h:1",
            &signed(McpServerName::Memory, team_agent("t", "a")),
        );
        assert_eq!(a, b);
    }

    fn signed_query(server: McpServerName, scope: Binding) -> String {
        let url = mcp_http_url("http://h:1", &signed(server, scope));
        query(&url).unwrap().to_owned()
    }

    #[test]
    fn unsigned_scope_is_refused() {
        assert!(refused(
            McpServerName::Tasks,
            "scopeTeamId=t&scopeAgentId=a"
        ));
        assert!(refused(McpServerName::Teamchat, "delegate=1"));
    }

    #[test]
    fn tampered_team_is_refused() {
        let q = signed_query(McpServerName::Tasks, team_agent("t1", "a"));
        let tampered = q.replace("scopeTeamId=t1", "scopeTeamId=t2");
        assert_ne!(q, tampered);
        assert!(refused(McpServerName::Tasks, &tampered));
    }

    #[test]
    fn swapped_agent_is_refused() {
        let q = signed_query(McpServerName::Memory, team_agent("t", "alice"));
        let swapped = q.replace("scopeAgentId=alice", "scopeAgentId=mallory");
        assert!(refused(McpServerName::Memory, &swapped));
    }

    #[test]
    fn appended_delegate_breaks_the_signature() {
        let q = signed_query(McpServerName::Teamchat, team_agent("t", "a"));
        assert!(!refused(McpServerName::Teamchat, &q));
        assert!(refused(McpServerName::Teamchat, &format!("{q}&delegate=1")));
    }

    #[test]
    fn repeated_parameter_is_refused() {
        let q = signed_query(McpServerName::Tasks, team_agent("t", "a"));
        assert!(refused(
            McpServerName::Tasks,
            &format!("{q}&scopeTeamId=other")
        ));
        assert!(refused(McpServerName::Tasks, &format!("{q}&{q}")));
    }

    #[test]
    fn added_tenant_breaks_a_memory_signature() {
        let q = signed_query(McpServerName::Memory, team_agent("t", "a"));
        assert!(refused(
            McpServerName::Memory,
            &format!("{q}&scopeTenantId=x")
        ));
    }

    #[test]
    fn signature_from_another_install_is_refused() {
        let other = ScopeSigner::from_secret_hex(&"77".repeat(32)).unwrap();
        let url = mcp_http_url(
            "http://h:1",
            &SignedScope::new(McpServerName::Tasks, team_agent("t", "a"), &other),
        );
        assert!(refused(McpServerName::Tasks, query(&url).unwrap()));
    }

    #[test]
    fn teamchat_with_one_param_is_refused() {
        let q = signed_query(McpServerName::Teamchat, team_agent("t", "a"));
        let only_room: String = q
            .split('&')
            .filter(|p| !p.starts_with("postAuthorAgentId="))
            .collect::<Vec<_>>()
            .join("&");
        assert!(refused(McpServerName::Teamchat, &only_room));
    }

    #[test]
    fn delegate_appended_to_any_signed_url_is_refused() {
        for server in [
            McpServerName::Tasks,
            McpServerName::Memory,
            McpServerName::Tools,
        ] {
            let q = signed_query(server, team_agent("t", "a"));
            assert_eq!(
                binding_from_query(server, Some(&q), &signer()),
                Ok(team_agent("t", "a"))
            );
            assert!(refused(server, &format!("{q}&delegate=1")));
        }
        assert_eq!(
            binding_from_query(McpServerName::Tasks, None, &signer()),
            Ok(Binding::default())
        );
    }

    #[test]
    fn foreign_params_are_ignored() {
        let q = signed_query(McpServerName::Tasks, team_agent("t", "a"));
        let extra = format!("{q}&roomTeamId=x&foo=1");
        assert_eq!(
            binding_from_query(McpServerName::Tasks, Some(&extra), &signer()),
            Ok(team_agent("t", "a"))
        );
    }

    #[test]
    fn scope_checks_per_server() {
        let tenant = Binding {
            tenant_id: Some("x".into()),
            ..Binding::default()
        };
        assert!(tenant.check_for(McpServerName::Tasks).is_err());
        assert!(tenant.check_for(McpServerName::Memory).is_ok());
        let delegate = Binding {
            delegate: true,
            ..team_agent("t", "a")
        };
        assert!(delegate.check_for(McpServerName::Memory).is_err());
        assert!(delegate.check_for(McpServerName::Teamchat).is_ok());
        let only_team = Binding {
            team_id: Some("t".into()),
            ..Binding::default()
        };
        assert!(only_team.check_for(McpServerName::Teamchat).is_err());
        assert!(only_team.check_for(McpServerName::Tasks).is_ok());
    }

    fn tricky_http() -> AttachTarget {
        AttachTarget::Http {
            url: "http://127.0.0.1:18790/api/mcp/memory?scopeTeamId=a%22b&scopeSig=00".into(),
        }
    }

    fn tricky_stdio() -> AttachTarget {
        stdio_target(
            &StdioLauncher::Clawboo("/opt/claw boo/\"bin\"\\clawboo".into()),
            McpServerName::Teamchat,
            &Binding {
                delegate: true,
                ..team_agent("team \"x\"", "it's me")
            },
            &DbLocation::File("/home/u/.clawboo/clawboo.db".into()),
        )
    }

    #[test]
    fn claude_code_snippets() {
        let c = build_attach_config(
            McpServerName::Tasks,
            Runtime::ClaudeCode,
            &AttachTarget::Http {
                url: "http://127.0.0.1:18790/api/mcp/tasks".into(),
            },
        );
        assert_eq!(c.id, "clawboo-tasks");
        assert_eq!(c.transport, "http");
        assert_eq!(
            c.snippet,
            "claude mcp add --transport http clawboo-tasks http://127.0.0.1:18790/api/mcp/tasks"
        );
        assert_eq!(
            c.structured,
            json!({"clawboo-tasks": {"type": "http", "url": "http://127.0.0.1:18790/api/mcp/tasks"}})
        );
        let scoped =
            build_attach_config(McpServerName::Memory, Runtime::ClaudeCode, &tricky_http());
        assert!(
            scoped
                .snippet
                .ends_with("'http://127.0.0.1:18790/api/mcp/memory?scopeTeamId=a%22b&scopeSig=00'")
        );

        let s = build_attach_config(
            McpServerName::Tasks,
            Runtime::ClaudeCode,
            &stdio_target(
                &StdioLauncher::BinDir("/usr/lib/clawboo/".into()),
                McpServerName::Tasks,
                &Binding::default(),
                &DbLocation::File("/home/u/.clawboo/clawboo.db".into()),
            ),
        );
        assert_eq!(s.transport, "stdio");
        assert_eq!(
            s.snippet,
            "claude mcp add clawboo-tasks -e CLAWBOO_DB_PATH=/home/u/.clawboo/clawboo.db -- /usr/lib/clawboo/clawboo-mcp-tasks"
        );
        assert_eq!(
            s.structured,
            json!({"clawboo-tasks": {"type": "stdio", "command": "/usr/lib/clawboo/clawboo-mcp-tasks",
                   "args": [], "env": {"CLAWBOO_DB_PATH": "/home/u/.clawboo/clawboo.db"}}})
        );
        let t = build_attach_config(
            McpServerName::Teamchat,
            Runtime::ClaudeCode,
            &tricky_stdio(),
        );
        assert!(
            t.snippet
                .contains(" mcp teamchat --team 'team \"x\"' --agent 'it'\\''s me' --delegate"),
            "{}",
            t.snippet
        );
    }

    /// The TOML under the comment line.
    fn codex_toml(snippet: &str) -> toml::Table {
        let (header, body) = snippet.split_once('\n').unwrap();
        assert_eq!(header, "# ~/.codex/config.toml");
        body.parse::<toml::Table>().unwrap()
    }

    #[test]
    fn codex_snippets_parse_as_toml() {
        let c = build_attach_config(McpServerName::Memory, Runtime::Codex, &tricky_http());
        let t = codex_toml(&c.snippet);
        assert_eq!(
            t["mcp_servers"]["clawboo-memory"]["url"].as_str(),
            Some("http://127.0.0.1:18790/api/mcp/memory?scopeTeamId=a%22b&scopeSig=00")
        );
        assert_eq!(
            c.structured["mcp_servers"]["clawboo-memory"]["url"],
            t["mcp_servers"]["clawboo-memory"]["url"].as_str().unwrap()
        );
        let s = build_attach_config(McpServerName::Teamchat, Runtime::Codex, &tricky_stdio());
        let t = codex_toml(&s.snippet);
        let entry = &t["mcp_servers"]["clawboo-teamchat"];
        assert_eq!(
            entry["command"].as_str(),
            Some("/opt/claw boo/\"bin\"\\clawboo")
        );
        let args: Vec<&str> = entry["args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap())
            .collect();
        assert_eq!(
            args,
            [
                "mcp",
                "teamchat",
                "--team",
                "team \"x\"",
                "--agent",
                "it's me",
                "--delegate"
            ]
        );
        assert_eq!(
            entry["env"]["CLAWBOO_DB_PATH"].as_str(),
            Some("/home/u/.clawboo/clawboo.db")
        );
        assert_eq!(toml_string("a\u{7f}\u{1}"), "\"a\\u007F\\u0001\"");
    }

    /// The JSON under the comment line, wrapped in `{}`.
    fn openclaw_json(snippet: &str) -> Value {
        let (header, body) = snippet.split_once('\n').unwrap();
        assert_eq!(header, "# openclaw.json → mcp.servers");
        serde_json::from_str(&format!("{{{body}}}")).unwrap()
    }

    #[test]
    fn openclaw_snippets_parse_as_json() {
        let c = build_attach_config(McpServerName::Memory, Runtime::OpenClaw, &tricky_http());
        let v = openclaw_json(&c.snippet);
        assert_eq!(
            v,
            json!({"clawboo-memory": {"url": "http://127.0.0.1:18790/api/mcp/memory?scopeTeamId=a%22b&scopeSig=00",
                                      "transport": "streamable-http"}})
        );
        assert_eq!(v, c.structured);
        let s = build_attach_config(McpServerName::Teamchat, Runtime::OpenClaw, &tricky_stdio());
        let v = openclaw_json(&s.snippet);
        assert_eq!(v["clawboo-teamchat"]["args"][3], "team \"x\"");
        assert_eq!(v, s.structured);
    }
    #[test]
    fn stdio_snippets_over_postgres_carry_the_url_without_its_password() {
        let db = DbLocation::Postgres("postgres://clawboo:hunter2@db.internal/board".into());
        let target = stdio_target(
            &StdioLauncher::BinDir("/usr/lib/clawboo".into()),
            McpServerName::Tasks,
            &Binding::default(),
            &db,
        );
        for runtime in [Runtime::ClaudeCode, Runtime::Codex, Runtime::OpenClaw] {
            let c = build_attach_config(McpServerName::Tasks, runtime, &target);
            let all = serde_json::to_string(&c).unwrap();
            assert!(!all.contains("hunter2"), "{all}");
            assert!(
                c.snippet.contains("postgres://clawboo@db.internal/board"),
                "{}",
                c.snippet
            );
            assert_eq!(c.note, Some(PG_PASSWORD_NOTE));
            assert!(all.contains("PGPASSWORD"), "{all}");
        }
        let file = stdio_target(
            &StdioLauncher::BinDir("/usr/lib/clawboo".into()),
            McpServerName::Tasks,
            &Binding::default(),
            &DbLocation::File("/d/c.db".into()),
        );
        let c = build_attach_config(McpServerName::Tasks, Runtime::Codex, &file);
        assert_eq!(c.note, None);
        assert!(serde_json::to_value(&c).unwrap().get("note").is_none());
    }
}
