//! The Tasks server (`clawboo-tasks`): the board's 12 tools.

use std::sync::Arc;

use clawboo_store::board::{
    AuthorType, BoardCursor, Comment, CreatePolicy, MAX_PAGE, NewComment, NewTask, Scope, Status,
    Task, TaskFilter,
};
use clawboo_store::{Store, StoreError};
use rmcp::RoleServer;
use rmcp::model::{CallToolResult, ContentBlock, JsonObject, Tool};
use rmcp::service::RequestContext;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::binding::Binding;
use crate::protocol::{
    Effect, blocking, blocking_write, denied, invalid_args, json_result, parse_args, store_failure,
    tool, tool_error, unknown_tool,
};
use crate::server::ToolSet;

/// How many undelivered inbox rows ride along with one tool result.
const INBOX_BATCH: usize = 5;

/// `list_tasks`' page when no `limit` is given.
const DEFAULT_PAGE: usize = 50;

/// Settings of a Tasks server.
#[derive(Debug, Clone, Default)]
pub struct TasksConfig {
    /// Serve only `list_tasks` and `get_task`.
    pub read_only: bool,
    /// Team (board visibility) and agent (claims, comments, inbox) bound by the spawner.
    pub binding: Binding,
}

/// The Tasks tool set over one store.
pub struct TasksServer {
    store: Arc<Store>,
    config: TasksConfig,
}

impl TasksServer {
    /// A Tasks server over `store`.
    pub fn new(store: Arc<Store>, config: TasksConfig) -> TasksServer {
        TasksServer { store, config }
    }
}

// A board status, as tools accept it (no doc comment: it would be every status field's
// description).
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
enum StatusArg {
    Backlog,
    Todo,
    InProgress,
    InReview,
    Blocked,
    Done,
    Cancelled,
}

impl From<StatusArg> for Status {
    fn from(s: StatusArg) -> Status {
        match s {
            StatusArg::Backlog => Status::Backlog,
            StatusArg::Todo => Status::Todo,
            StatusArg::InProgress => Status::InProgress,
            StatusArg::InReview => Status::InReview,
            StatusArg::Blocked => Status::Blocked,
            StatusArg::Done => Status::Done,
            StatusArg::Cancelled => Status::Cancelled,
        }
    }
}

#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
enum AuthorTypeArg {
    Agent,
    User,
    System,
}

impl From<AuthorTypeArg> for AuthorType {
    fn from(a: AuthorTypeArg) -> AuthorType {
        match a {
            AuthorTypeArg::Agent => AuthorType::Agent,
            AuthorTypeArg::User => AuthorType::User,
            AuthorTypeArg::System => AuthorType::System,
        }
    }
}

// Field doc comments are property descriptions the model reads on every turn: a field has
// one only where its name does not say it (SPEC §15).

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ListTasksArgs {
    // Ignored when the session is bound to a team.
    team_id: Option<String>,
    status: Option<StatusArg>,
    // Only claimable work: todo, not dropped, every dependency done.
    ready: Option<bool>,
    // Tasks a page, 1..200 (default 50).
    #[schemars(range(min = 1, max = 200))]
    limit: Option<u32>,
    // The `nextCursor` of the previous page.
    cursor: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct TaskIdArgs {
    task_id: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct CreateTaskArgs {
    title: String,
    description: Option<String>,
    status: Option<StatusArg>,
    /// Higher runs first.
    priority: Option<i64>,
    // Default: the parent's team.
    team_id: Option<String>,
    // Non-empty; makes this a subtask (child-count and depth caps apply).
    #[schemars(length(min = 1))]
    parent_task_id: Option<String>,
    // The runtime expected to run it (claude-code, codex, …).
    assignee_runtime: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct CreateSubtaskArgs {
    #[schemars(length(min = 1))]
    parent_task_id: String,
    title: String,
    description: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ClaimArgs {
    task_id: String,
    // The bound agent when the session is bound.
    assignee_agent_id: String,
    assignee_runtime: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct UpdateStatusArgs {
    task_id: String,
    // The state machine decides what is legal.
    status: StatusArg,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct AddCommentArgs {
    task_id: String,
    body: String,
    // The bound agent when the session is bound.
    author_agent_id: Option<String>,
    // agent (default), user or system.
    author_type: Option<AuthorTypeArg>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct LinkTaskArgs {
    task_id: String,
    depends_on_task_id: String,
}

// Result envelopes, serialized straight to text (no intermediate `serde_json::Value`).

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct TasksOut<'a> {
    tasks: &'a [Task],
    #[serde(skip_serializing_if = "Option::is_none")]
    next_cursor: Option<String>,
}

#[derive(Serialize)]
struct TaskOut<'a> {
    task: &'a Task,
}

#[derive(Serialize)]
struct CommentOut<'a> {
    comment: &'a Comment,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct LinkOut {
    task_id: String,
    depends_on_task_id: String,
}

fn tool_list(read_only: bool) -> Vec<Tool> {
    let mut tools = vec![
        tool::<ListTasksArgs>(
            "list_tasks",
            "List tasks",
            Effect::Read,
            "List tasks by priority (ready=true: claimable only); pass nextCursor as cursor for more.",
        ),
        tool::<TaskIdArgs>(
            "get_task",
            "Get task",
            Effect::Read,
            "Get a task with its comments and ancestors.",
        ),
    ];
    if read_only {
        return tools;
    }
    tools.extend([
        tool::<CreateTaskArgs>(
            "create_task",
            "Create task",
            Effect::Write,
            "Create a task; parentTaskId makes it a subtask (max 24 per parent, 2 levels deep); do not retry a cap refusal unchanged.",
        ),
        tool::<CreateSubtaskArgs>(
            "create_subtask",
            "Create subtask",
            Effect::Write,
            "Create a subtask under a parent, with create_task's caps.",
        ),
        tool::<ClaimArgs>(
            "claim_task",
            "Claim task",
            Effect::Idempotent,
            "Atomically claim a ready todo task; a conflict means another agent won: do not retry.",
        ),
        tool::<ClaimArgs>(
            "assign_task",
            "Assign task",
            Effect::Idempotent,
            "Claim a todo task for an agent, as claim_task does.",
        ),
        tool::<TaskIdArgs>(
            "release_task",
            "Release task",
            Effect::Idempotent,
            "Put an in_progress task back to todo.",
        ),
        tool::<UpdateStatusArgs>(
            "update_task_status",
            "Update task status",
            Effect::Idempotent,
            "Move a task to another status.",
        ),
        tool::<TaskIdArgs>(
            "block_task",
            "Block task",
            Effect::Idempotent,
            "Mark a task blocked.",
        ),
        tool::<TaskIdArgs>(
            "unblock_task",
            "Unblock task",
            Effect::Idempotent,
            "Put a blocked task back to todo.",
        ),
        tool::<AddCommentArgs>(
            "add_comment",
            "Comment on task",
            Effect::Write,
            "Comment on a task.",
        ),
        tool::<LinkTaskArgs>(
            "link_task",
            "Link dependency",
            Effect::Idempotent,
            "Make taskId wait until dependsOnTaskId is done; a link that would close a cycle is refused.",
        ),
    ]);
    tools
}

/// Turn a store failure into the tool-error an agent sees, prefixing the reason code for
/// state-machine operations (`claim failed: conflict`, `block failed: illegal_transition`).
fn store_error(e: StoreError, prefix: Option<&str>) -> CallToolResult {
    match (&e, prefix) {
        (StoreError::Backend(_) | StoreError::Io(_) | StoreError::NewerSchema { .. }, _) => {
            store_failure(e)
        }
        (StoreError::Invalid(what), _) => invalid_args(what),
        (StoreError::Cap { reason, message }, _) => {
            denied(reason.code(), reason.code(), message.clone())
        }
        (StoreError::Cycle { .. }, _) => tool_error("cycle", e.to_string()),
        (_, Some(prefix)) => tool_error(e.code(), format!("{prefix}: {}", e.code())),
        (StoreError::NotFound(id), None) => tool_error("not_found", format!("not found: {id}")),
        _ => tool_error(e.code(), e.to_string()),
    }
}

fn non_empty(field: &str, value: &str) -> Result<(), CallToolResult> {
    if value.trim().is_empty() {
        return Err(invalid_args(format!("{field} must be a non-empty string")));
    }
    Ok(())
}

impl TasksServer {
    fn bound_agent(&self) -> Option<&str> {
        self.config.binding.agent_id.as_deref()
    }

    async fn dispatch(
        &self,
        name: &str,
        args: JsonObject,
    ) -> Result<CallToolResult, CallToolResult> {
        let read_only_tool = matches!(name, "list_tasks" | "get_task");
        if self.config.read_only && !read_only_tool {
            return Ok(unknown_tool(name));
        }
        let binding = self.config.binding.clone();
        let team = binding.team_id.clone();
        match name {
            "list_tasks" => {
                let a: ListTasksArgs = parse_args(args)?;
                let limit = match a.limit {
                    None => DEFAULT_PAGE,
                    Some(n) if (1..=MAX_PAGE).contains(&(n as usize)) => n as usize,
                    Some(n) => {
                        return Err(invalid_args(format!(
                            "limit must be between 1 and {MAX_PAGE} (got {n})"
                        )));
                    }
                };
                let after = a
                    .cursor
                    .as_deref()
                    .map(BoardCursor::decode)
                    .transpose()
                    .map_err(|e| store_error(e, None))?;
                let filter = TaskFilter {
                    team_id: team.or(a.team_id),
                    status: a.status.map(Status::from),
                    ready: a.ready.unwrap_or(false),
                    include_dropped: false,
                };
                let page = blocking(&self.store, move |s| {
                    s.list_tasks_page(&filter, after.as_ref(), limit)
                })
                .await?;
                Ok(page
                    .map(|page| {
                        json_result(&TasksOut {
                            tasks: &page.tasks,
                            next_cursor: page.next.as_ref().map(BoardCursor::encode),
                        })
                    })
                    .unwrap_or_else(|e| store_error(e, None)))
            }
            "get_task" => {
                let a: TaskIdArgs = parse_args(args)?;
                let id = a.task_id.clone();
                let detail = blocking(&self.store, move |s| {
                    s.task_detail(&a.task_id, Scope::team(team.as_deref()))
                })
                .await?;
                Ok(match detail {
                    Ok(Some(detail)) => json_result(&detail),
                    Ok(None) => store_error(StoreError::NotFound(id), None),
                    Err(e) => store_error(e, None),
                })
            }
            "create_task" | "create_subtask" => {
                let new = if name == "create_task" {
                    let a: CreateTaskArgs = parse_args(args)?;
                    if let Some(p) = &a.parent_task_id {
                        non_empty("parentTaskId", p)?;
                    }
                    NewTask {
                        title: a.title,
                        description: a.description,
                        status: a.status.map(Status::from),
                        priority: a.priority,
                        team_id: a.team_id,
                        parent_task_id: a.parent_task_id,
                        assignee_runtime: a.assignee_runtime,
                        ..NewTask::default()
                    }
                } else {
                    let a: CreateSubtaskArgs = parse_args(args)?;
                    non_empty("parentTaskId", &a.parent_task_id)?;
                    NewTask {
                        title: a.title,
                        description: a.description,
                        parent_task_id: Some(a.parent_task_id),
                        ..NewTask::default()
                    }
                };
                non_empty("title", &new.title)?;
                let new = NewTask {
                    tenant_id: binding.tenant_id.clone(),
                    ..new
                };
                let created = blocking_write(&self.store, move |s| {
                    s.create_task_in(new, CreatePolicy::Capped, Scope::team(team.as_deref()))
                })
                .await?;
                Ok(created
                    .map(|task| json_result(&TaskOut { task: &task }))
                    .unwrap_or_else(|e| store_error(e, None)))
            }
            "claim_task" | "assign_task" => {
                let a: ClaimArgs = parse_args(args)?;
                let agent = binding.agent_id.clone().unwrap_or(a.assignee_agent_id);
                non_empty("assigneeAgentId", &agent)?;
                let claimed = blocking_write(&self.store, move |s| {
                    s.claim_task_in(
                        &a.task_id,
                        &agent,
                        a.assignee_runtime.as_deref(),
                        Scope::team(team.as_deref()),
                    )
                })
                .await?;
                Ok(claimed
                    .map(|task| json_result(&TaskOut { task: &task }))
                    .unwrap_or_else(|e| store_error(e, Some("claim failed"))))
            }
            "release_task" | "block_task" | "unblock_task" | "update_task_status" => {
                let (task_id, target, prefix) = match name {
                    "update_task_status" => {
                        let a: UpdateStatusArgs = parse_args(args)?;
                        (a.task_id, Status::from(a.status), "status change failed")
                    }
                    "release_task" => (
                        parse_args::<TaskIdArgs>(args)?.task_id,
                        Status::Todo,
                        "release failed",
                    ),
                    "block_task" => (
                        parse_args::<TaskIdArgs>(args)?.task_id,
                        Status::Blocked,
                        "block failed",
                    ),
                    _ => (
                        parse_args::<TaskIdArgs>(args)?.task_id,
                        Status::Todo,
                        "unblock failed",
                    ),
                };
                let op = name.to_owned();
                let actor = binding.agent_id.clone();
                let moved = blocking_write(&self.store, move |s| {
                    let scope = Scope::team(team.as_deref());
                    let actor = actor.as_deref();
                    match op.as_str() {
                        "release_task" => s.release_task(&task_id, actor, scope),
                        "unblock_task" => s.unblock_task(&task_id, actor, scope),
                        _ => s.set_status(&task_id, target, actor, scope),
                    }
                })
                .await?;
                Ok(moved
                    .map(|task| json_result(&TaskOut { task: &task }))
                    .unwrap_or_else(|e| store_error(e, Some(prefix))))
            }
            "add_comment" => {
                let a: AddCommentArgs = parse_args(args)?;
                non_empty("body", &a.body)?;
                let new = NewComment {
                    author_agent_id: binding.agent_id.clone().or(a.author_agent_id),
                    author_type: a
                        .author_type
                        .map(AuthorType::from)
                        .unwrap_or(AuthorType::Agent),
                    body: a.body,
                };
                let added = blocking_write(&self.store, move |s| {
                    s.add_comment(&a.task_id, new, Scope::team(team.as_deref()))
                })
                .await?;
                Ok(added
                    .map(|comment| json_result(&CommentOut { comment: &comment }))
                    .unwrap_or_else(|e| store_error(e, None)))
            }
            "link_task" => {
                let a: LinkTaskArgs = parse_args(args)?;
                let linked = blocking_write(&self.store, move |s| {
                    s.link_task(
                        &a.task_id,
                        &a.depends_on_task_id,
                        Scope::team(team.as_deref()),
                    )
                    .map(|()| LinkOut {
                        task_id: a.task_id,
                        depends_on_task_id: a.depends_on_task_id,
                    })
                })
                .await?;
                Ok(linked
                    .map(|v| json_result(&v))
                    .unwrap_or_else(|e| store_error(e, None)))
            }
            other => Ok(unknown_tool(other)),
        }
    }

    /// Append up to [`INBOX_BATCH`] undelivered inbox rows for the bound agent to a
    /// successful result, marking them delivered.
    async fn piggyback_inbox(&self, mut result: CallToolResult) -> CallToolResult {
        let Some(agent) = self.bound_agent().map(str::to_owned) else {
            return result;
        };
        if result.is_error == Some(true) {
            return result;
        }
        let team = self.config.binding.team_id.clone();
        let (agent_read, team_read) = (agent.clone(), team.clone());
        let pending = blocking(&self.store, move |s| {
            s.has_pending_inbox(&agent_read, team_read.as_deref())
        })
        .await;
        if matches!(pending, Ok(Ok(false))) {
            return result;
        }
        match blocking_write(&self.store, move |s| {
            s.take_inbox(&agent, team.as_deref(), INBOX_BATCH, "mcp")
        })
        .await
        {
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
}

impl ToolSet for TasksServer {
    fn server_name(&self) -> &'static str {
        "clawboo-tasks"
    }

    fn tools(&self) -> Vec<Tool> {
        tool_list(self.config.read_only)
    }

    async fn call<'a>(
        &'a self,
        name: &'a str,
        args: JsonObject,
        _ctx: RequestContext<RoleServer>,
    ) -> CallToolResult {
        let result = self
            .dispatch(name, args)
            .await
            .unwrap_or_else(|refusal| refusal);
        self.piggyback_inbox(result).await
    }
}
