//! Tools as handlers: each table server (tasks, memory, teamchat) registers every tool once
//! in a [`ToolTable`] entry (name, title, description, input schema, annotations, when it is
//! served) and answers it with one handler function; [`serve_call`] is the one wrapper
//! around every call of those servers.
//!
//! Our own table rather than rmcp's `#[tool_router]`: rmcp's router boxes every call's
//! future behind an `Arc<dyn Fn>`, answers an unknown name with a protocol error (ours is the
//! `unknown tool: <name>` tool-error), lists tools sorted by name, derives schemas its own
//! way and knows nothing of read-only mode, conditional tools or the inbox piggyback.

use std::future::Future;
use std::sync::Arc;

use clawboo_store::Store;
use rmcp::RoleServer;
use rmcp::model::{CallToolResult, ContentBlock, JsonObject, Tool};
use rmcp::service::RequestContext;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;

use crate::binding::Binding;
use crate::protocol::{Effect, parse_args, tool, unknown_tool};
use crate::server::ToolSet;

/// A handler's answer: `Err` is a refusal (bad arguments, a rule), sent as it is.
pub(crate) type Outcome = Result<CallToolResult, CallToolResult>;

/// How many undelivered inbox rows ride along with one tool result (SPEC §3).
const INBOX_BATCH: usize = 5;

/// What the wrapper hands every handler besides its decoded arguments.
pub(crate) struct CallContext<'a> {
    /// The identity the spawner or a signed URL bound (empty when unbound): the scope every
    /// handler applies, whatever the model's arguments say.
    pub(crate) binding: &'a Binding,
    /// The request itself: progress token, cancellation, the peer for notifications.
    pub(crate) request: RequestContext<RoleServer>,
}

/// A server whose tools are a [`ToolTable`] answered by handler functions. Every such
/// server is a [`ToolSet`] through [`serve_call`].
pub(crate) trait Handlers: Send + Sync + Sized + 'static {
    /// One variant per tool, holding that tool's decoded arguments; [`Handlers::handle`]
    /// matches it to the tool's handler function.
    type Call: Send;

    /// `serverInfo.name`, e.g. `clawboo-tasks`.
    const SERVER_NAME: &'static str;

    /// The server's tools, built once per process.
    fn table() -> &'static ToolTable<Self>;

    /// The session's binding.
    fn binding(&self) -> &Binding;

    /// The store every call of the session is recorded in ([`record_call`]).
    fn store(&self) -> &Arc<Store>;

    /// Whether only reads ([`Effect::Read`]) are listed and served.
    fn read_only(&self) -> bool {
        false
    }

    /// The store whose inbox rows for a bound agent ride along with successful results
    /// (SPEC §3); `None` for servers without the piggyback.
    fn inbox(&self) -> Option<&Arc<Store>> {
        None
    }

    /// Run the handler function of `call`.
    fn handle(
        &self,
        call: Self::Call,
        context: CallContext<'_>,
    ) -> impl Future<Output = Outcome> + Send;
}

/// One tool: what `tools/list` says about it, when it is served and how its arguments
/// become the handler's typed ones.
pub(crate) struct ToolEntry<S: Handlers> {
    tool: Tool,
    effect: Effect,
    /// Listed and served only while this holds for the session.
    condition: Option<fn(&S) -> bool>,
    /// Decodes the arguments into the handler's type (`invalid args: …` on a mismatch).
    decode: Box<dyn Fn(JsonObject) -> Result<S::Call, CallToolResult> + Send + Sync>,
}

impl<S: Handlers> ToolEntry<S> {
    /// A tool whose arguments are `Args` (its input schema derived from that type, see
    /// [`tool`]) and whose handler is the one `call`'s variant names.
    pub(crate) fn new<Args: JsonSchema + DeserializeOwned + 'static>(
        name: &'static str,
        title: &'static str,
        effect: Effect,
        description: &'static str,
        call: fn(Args) -> S::Call,
    ) -> ToolEntry<S> {
        ToolEntry {
            tool: tool::<Args>(name, title, effect, description),
            effect,
            condition: None,
            decode: Box::new(move |args| parse_args(args).map(call)),
        }
    }

    /// Serve (and list) this tool only while `condition` holds for the session.
    pub(crate) fn only_when(self, condition: fn(&S) -> bool) -> ToolEntry<S> {
        ToolEntry {
            condition: Some(condition),
            ..self
        }
    }

    /// Whether `server`'s session lists and serves this tool.
    fn served(&self, server: &S) -> bool {
        (self.effect == Effect::Read || !server.read_only())
            && self.condition.is_none_or(|holds| holds(server))
    }
}

/// A server's tools in listing order; `tools/list` and `tools/call` both read it, so a tool
/// is listed exactly when it is served.
pub(crate) struct ToolTable<S: Handlers> {
    entries: Vec<ToolEntry<S>>,
}

impl<S: Handlers> ToolTable<S> {
    /// The table of `entries`, listed in this order.
    pub(crate) fn new(entries: Vec<ToolEntry<S>>) -> ToolTable<S> {
        ToolTable { entries }
    }

    /// The `tools/list` answer for `server`'s session.
    pub(crate) fn listed(&self, server: &S) -> Vec<Tool> {
        self.entries
            .iter()
            .filter(|entry| entry.served(server))
            .map(|entry| entry.tool.clone())
            .collect()
    }

    /// The entry `name` names, when `server`'s session may call it.
    fn servable(&self, server: &S, name: &str) -> Option<&ToolEntry<S>> {
        self.entries
            .iter()
            .find(|entry| entry.tool.name == name)
            .filter(|entry| entry.served(server))
    }
}

/// The one wrapper around every call of a table server: the tool's entry (an unknown name,
/// or one this session is not served, is `unknown tool: <name>`), its arguments decoded into
/// the handler's type, the handler run with the session's binding, and the inbox piggyback
/// after a successful result, which is recorded first ([`record_call`]). A per-call rule
/// for every tool goes here.
pub(crate) async fn serve_call<S: Handlers>(
    server: &S,
    name: &str,
    args: JsonObject,
    request: RequestContext<RoleServer>,
) -> CallToolResult {
    let binding = server.binding();
    let Some(entry) = S::table().servable(server, name) else {
        return unknown_tool(name);
    };
    let agent = calling_agent(binding.agent_id.as_deref(), &args);
    let call = match (entry.decode)(args) {
        Ok(call) => call,
        Err(refusal) => return refusal,
    };
    let context = CallContext { binding, request };
    let result = server
        .handle(call, context)
        .await
        .unwrap_or_else(|refusal| refusal);
    if result.is_error == Some(true) {
        return result;
    }
    record_call(server.store(), agent, binding.team_id.as_deref()).await;
    match (server.inbox(), binding.agent_id.as_deref()) {
        (Some(store), Some(agent)) => {
            piggyback_inbox(store, agent, binding.team_id.as_deref(), result).await
        }
        _ => result,
    }
}

/// The agent a call is by, for [`record_call`]: the bound one, else the agent the
/// arguments name as `assigneeAgentId` or `authorAgentId` (SPEC §12).
pub(crate) fn calling_agent(bound: Option<&str>, args: &JsonObject) -> Option<String> {
    let named = || {
        ["assigneeAgentId", "authorAgentId"]
            .iter()
            .find_map(|key| args.get(*key)?.as_str())
            .filter(|agent| !agent.trim().is_empty())
    };
    bound.or_else(named).map(str::to_owned)
}

/// The one per-call hook of every server (the tools server's own path calls it too), run
/// after a call that did not fail (a refused call changes nothing): the calling agent was
/// seen now, and its leases with less than half left renew. The store remembers when the
/// next call must be recorded, so most calls write nothing; a failure is logged and the
/// next due call tries again.
pub(crate) async fn record_call(store: &Arc<Store>, agent: Option<String>, team: Option<&str>) {
    let Some(agent) = agent.filter(|agent| store.call_record_due(agent, team)) else {
        return;
    };
    let team = team.map(str::to_owned);
    match store.record_call_async(agent, team).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::warn!(error = %e, "recording a call failed; a later call renews"),
        Err(_) => tracing::warn!("recording a call failed; a later call renews"),
    }
}

/// Append up to [`INBOX_BATCH`] undelivered inbox rows for `agent` to a successful result,
/// marking them delivered; a failure leaves the rows queued for the next call.
async fn piggyback_inbox(
    store: &Arc<Store>,
    agent: &str,
    team: Option<&str>,
    mut result: CallToolResult,
) -> CallToolResult {
    let taken = store
        .take_inbox_async(agent, team, INBOX_BATCH, "mcp")
        .await;
    match taken {
        Ok(Ok(items)) if !items.is_empty() => {
            let mut text = String::from("\n[team updates — delivered with this tool result]");
            for item in items {
                text.push_str("\n- ");
                text.push_str(&item.body);
            }
            result.content.push(ContentBlock::text(text));
        }
        Ok(Err(e)) => tracing::warn!(error = %e, "inbox piggyback failed; rows stay queued"),
        _ => {}
    }
    result
}

impl<S: Handlers> ToolSet for S {
    fn server_name(&self) -> &'static str {
        S::SERVER_NAME
    }

    fn tools(&self) -> Vec<Tool> {
        S::table().listed(self)
    }

    fn binding(&self) -> Option<&Binding> {
        Some(Handlers::binding(self))
    }

    fn call<'a>(
        &'a self,
        name: &'a str,
        args: JsonObject,
        ctx: RequestContext<RoleServer>,
    ) -> impl Future<Output = CallToolResult> + Send + 'a {
        serve_call(self, name, args, ctx)
    }
}
