//! The Memory server (`clawboo-memory`): `memory_save`, `memory_search`, `memory_browse`
//! over shared memory (facts and versioned procedures).
//!
//! Scope: an unbound session takes `scopeTeamId` / `scopeAgentId` from the arguments (a
//! team shows that team's facts and global ones; an agent likewise). A bound session
//! ignores those arguments: a save is tagged with the bound team and tenant only (the
//! agent dropped, so the fact is team-shared) and reads filter by the full bound scope, so
//! it never sees another team's facts.

use std::sync::{Arc, LazyLock};

use clawboo_memory::{
    ENTIRELY_REDACTED, Memory, NewFact, NewProcedure, ScopeFilter, SearchMode, TITLE_REQUIRED,
    TeamFilter,
};
use clawboo_store::links::LinkKind;
use clawboo_store::{Store, StoreError};
use rmcp::model::CallToolResult;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::binding::Binding;
use crate::handlers::{CallContext, Handlers, Outcome, ToolEntry, ToolTable};
use crate::protocol::{
    Effect, check_link_task, internal_error, invalid_args, json_result, link_stored, store_failure,
    tool_error,
};

/// Settings of a Memory server.
#[derive(Debug, Clone, Default)]
pub struct MemoryConfig {
    /// Team, agent and tenant bound by the spawner or the signed URL.
    pub binding: Binding,
}

/// The Memory tool set over shared memory (one [`Memory`] may serve many sessions).
pub struct MemoryServer {
    memory: Arc<Memory>,
    config: MemoryConfig,
}

impl MemoryServer {
    /// A Memory server over `memory`.
    pub fn new(memory: Arc<Memory>, config: MemoryConfig) -> MemoryServer {
        MemoryServer { memory, config }
    }
}

#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
enum ModeArg {
    Fts,
    Vector,
    Hybrid,
}

impl From<ModeArg> for SearchMode {
    fn from(m: ModeArg) -> SearchMode {
        match m {
            ModeArg::Fts => SearchMode::Fts,
            ModeArg::Vector => SearchMode::Vector,
            ModeArg::Hybrid => SearchMode::Hybrid,
        }
    }
}

// Field doc comments are property descriptions the model reads on every turn: a field has
// one only where its name does not say it (SPEC §15). Scope fields are ignored when the
// connection is bound.

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct SaveArgs {
    content: String,
    // Required for a fact (not a procedure).
    title: Option<String>,
    tags: Option<Vec<String>>,
    // Set to save a procedure (a new version of that name) instead of a fact.
    procedure_name: Option<String>,
    scope_team_id: Option<String>,
    scope_agent_id: Option<String>,
    // The task the fact is about (SPEC §19): get_task lists it among the task's links.
    task_id: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct SearchArgs {
    query: String,
    // Default: hybrid with a sentence model, else fts.
    mode: Option<ModeArg>,
    #[schemars(range(min = 1, max = 100))]
    limit: Option<u32>,
    scope_team_id: Option<String>,
    scope_agent_id: Option<String>,
    // Also return the latest version of each matching procedure as {procedure} entries.
    include_procedures: Option<bool>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct BrowseArgs {
    #[schemars(range(min = 1, max = 200))]
    limit: Option<u32>,
    scope_team_id: Option<String>,
    scope_agent_id: Option<String>,
    // Also return the latest version of each procedure in scope, as `procedures`.
    include_procedures: Option<bool>,
}

/// A Memory tool call with its decoded arguments: one variant per tool.
pub(crate) enum MemoryCall {
    Save(SaveArgs),
    Search(SearchArgs),
    Browse(BrowseArgs),
}

fn tool_table() -> ToolTable<MemoryServer> {
    ToolTable::new(vec![
        ToolEntry::new(
            "memory_save",
            "Save memory",
            Effect::Write,
            "Save a fact, or a procedure's next version (procedureName); secrets are redacted.",
            MemoryCall::Save,
        ),
        ToolEntry::new(
            "memory_search",
            "Search memory",
            Effect::Read,
            "Search saved facts, best first.",
            MemoryCall::Search,
        ),
        ToolEntry::new(
            "memory_browse",
            "Browse memory",
            Effect::Read,
            "List saved facts, newest first.",
            MemoryCall::Browse,
        ),
    ])
}

/// A store failure as the tool-error an agent sees.
fn store_error(e: StoreError) -> CallToolResult {
    match e {
        StoreError::Invalid(what) if what == TITLE_REQUIRED => tool_error("title_required", what),
        StoreError::Invalid(what) if what == ENTIRELY_REDACTED => {
            tool_error("entirely_redacted", what)
        }
        StoreError::Invalid(what) => invalid_args(what),
        other => store_failure(other),
    }
}

fn check_limit(limit: Option<u32>, max: u32) -> Result<u32, CallToolResult> {
    match limit {
        None => Ok(clawboo_memory::DEFAULT_LIMIT),
        Some(n) if (1..=max).contains(&n) => Ok(n),
        Some(n) => Err(invalid_args(format!(
            "limit must be between 1 and {max} (got {n})"
        ))),
    }
}

/// Run memory work on the blocking pool, even on a single-threaded runtime; a panic
/// becomes an internal tool-error. Unlike quick store calls, memory work may embed text
/// (tens of milliseconds with MiniLM) or call an HTTP embedder with a blocking client,
/// which must never run on an async thread.
async fn memory_work<T, F>(memory: &Arc<Memory>, f: F) -> Result<T, CallToolResult>
where
    T: Send + 'static,
    F: FnOnce(&Memory) -> T + Send + 'static,
{
    let held = Arc::clone(memory);
    memory
        .store()
        .run_off_thread(move |_| f(&held))
        .await
        .map_err(internal_error)
}

/// The read scope: the full bound scope when bound, else the arguments.
fn read_scope(binding: &Binding, team: Option<String>, agent: Option<String>) -> ScopeFilter {
    if binding.is_bound() {
        ScopeFilter {
            team: match &binding.team_id {
                Some(t) => TeamFilter::TeamOrGlobal(t.clone()),
                None => TeamFilter::GlobalOnly,
            },
            agent_id: binding.agent_id.clone(),
            tenant_id: binding.tenant_id.clone(),
        }
    } else {
        ScopeFilter {
            team: team.map_or(TeamFilter::Any, TeamFilter::TeamOrGlobal),
            agent_id: agent,
            tenant_id: None,
        }
    }
}

/// The owner of a save: the bound team and tenant (no agent) when bound, else the
/// arguments.
fn save_owner(
    binding: &Binding,
    team: Option<String>,
    agent: Option<String>,
) -> (Option<String>, Option<String>, Option<String>) {
    if binding.is_bound() {
        (binding.team_id.clone(), None, binding.tenant_id.clone())
    } else {
        (team, agent, None)
    }
}

impl Handlers for MemoryServer {
    type Call = MemoryCall;

    const SERVER_NAME: &'static str = "clawboo-memory";

    fn table() -> &'static ToolTable<MemoryServer> {
        static TABLE: LazyLock<ToolTable<MemoryServer>> = LazyLock::new(tool_table);
        &TABLE
    }

    fn store(&self) -> &Arc<Store> {
        self.memory.store()
    }

    fn binding(&self) -> &Binding {
        &self.config.binding
    }

    async fn handle(&self, call: MemoryCall, ctx: CallContext<'_>) -> Outcome {
        match call {
            MemoryCall::Save(a) => self.memory_save(&ctx, a).await,
            MemoryCall::Search(a) => self.memory_search(&ctx, a).await,
            MemoryCall::Browse(a) => self.memory_browse(&ctx, a).await,
        }
    }
}

impl MemoryServer {
    async fn memory_save(&self, ctx: &CallContext<'_>, a: SaveArgs) -> Outcome {
        let (team_id, agent_id, tenant_id) =
            save_owner(ctx.binding, a.scope_team_id, a.scope_agent_id);
        // A taskId is looked up on the fact's team (the bound one, else scopeTeamId).
        let task_id = a.task_id;
        if task_id.is_some() && a.procedure_name.is_some() {
            return Err(invalid_args(
                "taskId links a fact to a task, and a procedure is not about one task: leave taskId out, or save a fact",
            ));
        }
        check_link_task(self.memory.store(), task_id.as_deref(), team_id.clone()).await?;
        let link_team = team_id.clone();
        let tags = a.tags.unwrap_or_default();
        let result = match a.procedure_name {
            Some(name) => {
                let new = NewProcedure {
                    name,
                    content: a.content,
                    tags,
                    team_id,
                    agent_id,
                    tenant_id,
                };
                memory_work(&self.memory, move |m| m.save_procedure(new))
                    .await?
                    .map(|p| json!({"saved": "procedure", "procedure": p}))
            }
            None => {
                let new = NewFact {
                    title: a.title.unwrap_or_default(),
                    content: a.content,
                    tags,
                    team_id,
                    agent_id,
                    tenant_id,
                };
                let prepared = if self.memory.embeds_cheaply() {
                    self.memory.prepare_fact(new)
                } else {
                    memory_work(&self.memory, move |m| m.prepare_fact(new)).await?
                };
                let saved = match prepared {
                    Ok(fact) => fact
                        .insert_async(self.memory.store())
                        .await
                        .map_err(internal_error)?,
                    Err(e) => Err(e),
                };
                if let Ok(fact) = &saved {
                    let (id, content) = (fact.id.clone(), fact.content.clone());
                    link_stored(
                        self.memory.store(),
                        task_id,
                        link_team,
                        LinkKind::Fact,
                        id,
                        content,
                    )
                    .await?;
                }
                saved.map(|f| json!({"saved": "fact", "fact": f}))
            }
        };
        Ok(result.map_or_else(store_error, |v| json_result(&v)))
    }

    async fn memory_search(&self, ctx: &CallContext<'_>, a: SearchArgs) -> Outcome {
        let limit = check_limit(a.limit, clawboo_memory::MAX_SEARCH_LIMIT)?;
        if a.query.trim().is_empty() {
            return Err(invalid_args("query must be a non-empty string"));
        }
        let scope = read_scope(ctx.binding, a.scope_team_id, a.scope_agent_id);
        let mode = a.mode.map(SearchMode::from);
        let with_procedures = a.include_procedures.unwrap_or(false);
        let answer = memory_work(&self.memory, move |m| {
            let outcome = m.search(&a.query, mode, &scope, limit)?;
            crate::metrics::record_search(outcome.mode);
            let mut results: Vec<Value> = outcome
                .hits
                .iter()
                .map(|h| json!({"fact": h.fact, "score": h.score, "matchedVia": h.matched_via}))
                .collect();
            if with_procedures {
                for p in m.latest_procedures(&scope, Some(&a.query), limit)? {
                    results.push(json!({ "procedure": p }));
                }
            }
            Ok::<_, StoreError>(json!({"results": results, "mode": outcome.mode}))
        })
        .await?;
        Ok(answer.map_or_else(store_error, |v| json_result(&v)))
    }

    async fn memory_browse(&self, ctx: &CallContext<'_>, a: BrowseArgs) -> Outcome {
        let limit = check_limit(a.limit, clawboo_memory::MAX_BROWSE_LIMIT)?;
        let scope = read_scope(ctx.binding, a.scope_team_id, a.scope_agent_id);
        let with_procedures = a.include_procedures.unwrap_or(false);
        // Browsing embeds nothing: awaited, as the board's reads are.
        let memory = &self.memory;
        let facts = match memory.browse_async(&scope, limit).await {
            Ok(Ok(facts)) => facts,
            Ok(Err(e)) => return Ok(store_error(e)),
            Err(e) => return Err(internal_error(e)),
        };
        if !with_procedures {
            return Ok(json_result(&json!({ "facts": facts })));
        }
        Ok(
            match memory.latest_procedures_async(&scope, None, limit).await {
                Ok(Ok(procedures)) => {
                    json_result(&json!({"facts": facts, "procedures": procedures}))
                }
                Ok(Err(e)) => store_error(e),
                Err(e) => return Err(internal_error(e)),
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use clawboo_store::{Store, StoreConfig};

    use super::*;
    use crate::server::ToolSet;

    #[test]
    fn schemas_match_the_seed_fields() {
        let dir = tempfile::tempdir().unwrap();
        let config = StoreConfig::default().with_extension(clawboo_memory::EXTENSION);
        let store = Arc::new(Store::open_with(&dir.path().join("m.db"), config).unwrap());
        let memory = Arc::new(Memory::new(store, None));
        let tools = MemoryServer::new(memory, MemoryConfig::default()).tools();
        let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
        assert_eq!(names, ["memory_save", "memory_search", "memory_browse"]);
        let save = Value::Object((*tools[0].input_schema).clone());
        assert_eq!(save["required"], json!(["content"]));
        assert_eq!(save["properties"]["tags"]["type"], "array");
        let search = Value::Object((*tools[1].input_schema).clone());
        assert_eq!(search["required"], json!(["query"]));
        assert_eq!(
            search["properties"]["mode"]["enum"],
            json!(["fts", "vector", "hybrid"])
        );
        assert_eq!(search["properties"]["limit"]["maximum"], 100);
        assert_eq!(search["properties"]["includeProcedures"]["type"], "boolean");
        let browse = Value::Object((*tools[2].input_schema).clone());
        assert_eq!(browse.get("required"), None, "nothing is required");
        assert_eq!(browse["properties"]["limit"]["maximum"], 200);
    }
}
