//! The Tasks server (`clawboo-tasks`): the board's 13 tools.

use std::sync::{Arc, LazyLock};

use clawboo_store::board::{
    AuthorType, BoardCursor, Comment, CreatePolicy, MAX_PAGE, NewComment, NewTask, OwnedScope,
    Scope, Status, Task, TaskFilter, TaskMove,
};
use clawboo_store::leases::Claimant;
use clawboo_store::{Store, StoreError, short_ids};
use rmcp::model::CallToolResult;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::binding::Binding;
use crate::handlers::{CallContext, Handlers, Outcome, ToolEntry, ToolTable};
use crate::protocol::{
    Effect, denied, globs_schema, internal_error, invalid_args, json_result, store_failure,
    tool_error,
};

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

// Field doc comments are property descriptions the model reads on every turn: a field has
// one only where its name does not say it (SPEC §15).

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct ListTasksArgs {
    // Ignored when the session is bound to a team.
    team_id: Option<String>,
    status: Option<StatusArg>,
    // Only claimable work: todo, not dropped, every dependency done.
    ready: Option<bool>,
    // Tasks a page, 1..200 (default 50).
    #[schemars(range(max = 200))]
    limit: Option<u32>,
    // The `nextCursor` of the previous page.
    cursor: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct TaskIdArgs {
    task_id: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct CreateTaskArgs {
    title: String,
    description: Option<String>,
    status: Option<StatusArg>,
    // Higher first (the schema leaves it out: SPEC §15's budget).
    priority: Option<i64>,
    // Default: the parent's team.
    team_id: Option<String>,
    // Non-empty; makes this a subtask (child-count and depth caps apply).
    #[schemars(length(min = 1))]
    parent_task_id: Option<String>,
    // The runtime expected to run it (claude-code, codex, …).
    assignee_runtime: Option<String>,
    #[serde(default)]
    #[schemars(schema_with = "globs_schema")]
    paths: Option<Vec<String>>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct CreateSubtaskArgs {
    #[schemars(length(min = 1))]
    parent_task_id: String,
    title: String,
    description: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct ClaimArgs {
    task_id: String,
    // The bound agent when the session is bound.
    assignee_agent_id: String,
    assignee_runtime: Option<String>,
    #[serde(default)]
    #[schemars(schema_with = "globs_schema")]
    paths: Option<Vec<String>>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct AssignArgs {
    task_id: String,
    assignee_agent_id: String,
    assignee_runtime: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct ClaimNextArgs {
    // Ignored when the session is bound to a team.
    team_id: Option<String>,
    // The bound agent when the session is bound.
    assignee_agent_id: Option<String>,
    assignee_runtime: Option<String>,
    #[serde(default)]
    #[schemars(schema_with = "globs_schema")]
    paths: Option<Vec<String>>,
}

// `claimToken` (the claim's, from claim_task or claim_next) fences a move or comment: it
// is refused once the task was claimed again.

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct FencedTaskArgs {
    task_id: String,
    claim_token: Option<i64>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct UpdateStatusArgs {
    task_id: String,
    // The state machine decides what is legal.
    status: StatusArg,
    claim_token: Option<i64>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct AddCommentArgs {
    task_id: String,
    body: String,
    // The bound agent when the session is bound.
    author_agent_id: Option<String>,
    claim_token: Option<i64>,
    // Accepted for compatibility and ignored: a comment from MCP is always an agent's
    // (`user` is the operator's, `system` the server's own narration).
    #[serde(rename = "authorType")]
    _author_type: Option<AuthorTypeArg>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct LinkTaskArgs {
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

/// `claim_next`'s answer when nothing is ready: `{task: null, reason}`, not an error.
#[derive(Serialize)]
struct NothingReadyOut {
    task: Option<Task>,
    reason: &'static str,
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

/// A Tasks tool call with its decoded arguments: one variant per tool.
pub(crate) enum TasksCall {
    ListTasks(ListTasksArgs),
    GetTask(TaskIdArgs),
    CreateTask(CreateTaskArgs),
    CreateSubtask(CreateSubtaskArgs),
    ClaimTask(ClaimArgs),
    AssignTask(AssignArgs),
    ClaimNext(ClaimNextArgs),
    ReleaseTask(FencedTaskArgs),
    UpdateTaskStatus(UpdateStatusArgs),
    BlockTask(FencedTaskArgs),
    UnblockTask(TaskIdArgs),
    AddComment(AddCommentArgs),
    LinkTask(LinkTaskArgs),
}

/// The 13 tools in listing order; read-only mode keeps the reads (`list_tasks`, `get_task`).
fn tool_table() -> ToolTable<TasksServer> {
    ToolTable::new(vec![
        ToolEntry::new(
            "list_tasks",
            "List tasks",
            Effect::Read,
            "Tasks by priority; ready=true: claimable only; more: cursor=nextCursor.",
            TasksCall::ListTasks,
        ),
        ToolEntry::new(
            "get_task",
            "Get task",
            Effect::Read,
            "A task (id or RED-12), its comments and ancestors.",
            TasksCall::GetTask,
        ),
        ToolEntry::new(
            "create_task",
            "Create task",
            Effect::Write,
            "Create a task (parentTaskId: subtask; ≤24 per parent, depth ≤2).",
            TasksCall::CreateTask,
        ),
        ToolEntry::new(
            "create_subtask",
            "Create subtask",
            Effect::Write,
            "Create a subtask (create_task's caps).",
            TasksCall::CreateSubtask,
        ),
        ToolEntry::new(
            "claim_task",
            "Claim task",
            Effect::Idempotent,
            "Claim a ready todo task, reserving paths (globs you edit); conflict: another agent won, do not retry.",
            TasksCall::ClaimTask,
        ),
        ToolEntry::new(
            "assign_task",
            "Assign task",
            Effect::Idempotent,
            "Claim a task for assigneeAgentId.",
            TasksCall::AssignTask,
        ),
        ToolEntry::new(
            "claim_next",
            "Claim next task",
            Effect::Write,
            "Claim the top ready task; null when none is.",
            TasksCall::ClaimNext,
        ),
        ToolEntry::new(
            "release_task",
            "Release task",
            Effect::Idempotent,
            "Put your task back to todo.",
            TasksCall::ReleaseTask,
        ),
        ToolEntry::new(
            "update_task_status",
            "Update task status",
            Effect::Idempotent,
            "Move a task.",
            TasksCall::UpdateTaskStatus,
        ),
        ToolEntry::new(
            "block_task",
            "Block task",
            Effect::Idempotent,
            "Mark a task blocked.",
            TasksCall::BlockTask,
        ),
        ToolEntry::new(
            "unblock_task",
            "Unblock task",
            Effect::Idempotent,
            "Put a blocked task back to todo.",
            TasksCall::UnblockTask,
        ),
        ToolEntry::new(
            "add_comment",
            "Comment on task",
            Effect::Write,
            "Comment on a task.",
            TasksCall::AddComment,
        ),
        ToolEntry::new(
            "link_task",
            "Link dependency",
            Effect::Idempotent,
            "taskId waits for dependsOnTaskId to be done; no cycles.",
            TasksCall::LinkTask,
        ),
    ])
}

/// What `claim_task` answers when the task is not there to take (another agent won it, or
/// it left `todo`): an agent must move on, not spin on the same task.
pub const CLAIM_CONFLICT: &str = "claim failed: conflict: another agent holds this task or it is no longer todo; do not retry it, take the next ready task (claim_next)";

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
        (
            StoreError::NotAssignee { .. }
            | StoreError::StaleClaim { .. }
            | StoreError::Reserved { .. },
            Some(prefix),
        ) => tool_error(e.code(), format!("{prefix}: {}: {e}", e.code())),
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

impl Handlers for TasksServer {
    type Call = TasksCall;

    const SERVER_NAME: &'static str = "clawboo-tasks";

    fn table() -> &'static ToolTable<TasksServer> {
        static TABLE: LazyLock<ToolTable<TasksServer>> = LazyLock::new(tool_table);
        &TABLE
    }

    fn store(&self) -> &Arc<Store> {
        &self.store
    }

    fn binding(&self) -> &Binding {
        &self.config.binding
    }

    fn read_only(&self) -> bool {
        self.config.read_only
    }

    fn inbox(&self) -> Option<&Arc<Store>> {
        Some(&self.store)
    }

    async fn handle(&self, call: TasksCall, ctx: CallContext<'_>) -> Outcome {
        let ctx = &ctx;
        match call {
            TasksCall::ListTasks(a) => self.list_tasks(ctx, a).await,
            TasksCall::GetTask(a) => self.get_task(ctx, a).await,
            TasksCall::CreateTask(a) => self.create_task(ctx, a).await,
            TasksCall::CreateSubtask(a) => self.create_subtask(ctx, a).await,
            TasksCall::ClaimTask(a) => self.claim_task(ctx, a).await,
            // assign_task is claim_task under the name some agents look for, reserving the
            // task's declared paths.
            TasksCall::AssignTask(a) => {
                let claim = ClaimArgs {
                    task_id: a.task_id,
                    assignee_agent_id: a.assignee_agent_id,
                    assignee_runtime: a.assignee_runtime,
                    paths: None,
                };
                self.claim_task(ctx, claim).await
            }
            TasksCall::ClaimNext(a) => self.claim_next(ctx, a).await,
            TasksCall::ReleaseTask(a) => self.release_task(ctx, a).await,
            TasksCall::UpdateTaskStatus(a) => self.update_task_status(ctx, a).await,
            TasksCall::BlockTask(a) => self.block_task(ctx, a).await,
            TasksCall::UnblockTask(a) => self.unblock_task(ctx, a).await,
            TasksCall::AddComment(a) => self.add_comment(ctx, a).await,
            TasksCall::LinkTask(a) => self.link_task(ctx, a).await,
        }
    }
}

impl TasksServer {
    async fn list_tasks(&self, ctx: &CallContext<'_>, a: ListTasksArgs) -> Outcome {
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
            scoped: ctx.binding.team_id.is_some(),
            team_id: ctx.binding.team_id.clone().or(a.team_id),
            status: a.status.map(Status::from),
            ready: a.ready.unwrap_or(false),
            include_dropped: false,
        };
        let page = self
            .store
            .list_tasks_page_async(filter, after, limit)
            .await
            .map_err(internal_error)?;
        Ok(page
            .map(|page| {
                json_result(&TasksOut {
                    tasks: &page.tasks,
                    next_cursor: page.next.as_ref().map(BoardCursor::encode),
                })
            })
            .unwrap_or_else(|e| store_error(e, None)))
    }

    async fn get_task(&self, ctx: &CallContext<'_>, a: TaskIdArgs) -> Outcome {
        let id = a.task_id.clone();
        let detail = self
            .store
            .task_detail_async(a.task_id, ctx.binding.team_id.clone())
            .await
            .map_err(internal_error)?;
        Ok(match detail {
            Ok(Some(detail)) => json_result(&detail),
            // A short id names a task of the caller's own team only (another team's
            // `RED-12` is not found, exactly as one that does not exist): say so.
            Ok(None) if ctx.binding.team_id.is_some() && short_ids::parse(&id).is_some() => {
                tool_error(
                    "not_found",
                    format!("not found: {id} (a short id names a task of your own team only)"),
                )
            }
            Ok(None) => store_error(StoreError::NotFound(id), None),
            Err(e) => store_error(e, None),
        })
    }

    async fn create_task(&self, ctx: &CallContext<'_>, a: CreateTaskArgs) -> Outcome {
        if let Some(p) = &a.parent_task_id {
            non_empty("parentTaskId", p)?;
        }
        let new = NewTask {
            title: a.title,
            description: a.description,
            status: a.status.map(Status::from),
            priority: a.priority,
            team_id: a.team_id,
            parent_task_id: a.parent_task_id,
            assignee_runtime: a.assignee_runtime,
            paths: a.paths.unwrap_or_default(),
            ..NewTask::default()
        };
        self.insert_task(ctx, new).await
    }

    async fn create_subtask(&self, ctx: &CallContext<'_>, a: CreateSubtaskArgs) -> Outcome {
        non_empty("parentTaskId", &a.parent_task_id)?;
        let new = NewTask {
            title: a.title,
            description: a.description,
            parent_task_id: Some(a.parent_task_id),
            ..NewTask::default()
        };
        self.insert_task(ctx, new).await
    }

    /// `create_task` and `create_subtask`: capped, in the bound team and tenant.
    async fn insert_task(&self, ctx: &CallContext<'_>, new: NewTask) -> Outcome {
        non_empty("title", &new.title)?;
        let new = NewTask {
            tenant_id: ctx.binding.tenant_id.clone(),
            ..new
        };
        let created = self
            .store
            .create_task_async(new, CreatePolicy::Capped, ctx.binding.team_id.clone())
            .await
            .map_err(internal_error)?;
        Ok(created
            .map(|task| json_result(&TaskOut { task: &task }))
            .unwrap_or_else(|e| store_error(e, None)))
    }

    /// `claim_task` and `assign_task`: the bound agent claims, whatever the arguments say.
    async fn claim_task(&self, ctx: &CallContext<'_>, a: ClaimArgs) -> Outcome {
        let agent = ctx.binding.agent_id.clone().unwrap_or(a.assignee_agent_id);
        non_empty("assigneeAgentId", &agent)?;
        let claimed = self
            .store
            .claim_reserving_async(
                a.task_id,
                agent,
                a.assignee_runtime,
                a.paths,
                ctx.binding.team_id.clone(),
            )
            .await
            .map_err(internal_error)?;
        Ok(match claimed {
            Ok(task) => json_result(&TaskOut { task: &task }),
            Err(StoreError::Conflict) => tool_error("conflict", CLAIM_CONFLICT),
            Err(e) => store_error(e, Some("claim failed")),
        })
    }

    /// `claim_next`: the bound agent (else `assigneeAgentId`) takes the first ready task
    /// of the bound team (else `teamId`, else the whole board).
    async fn claim_next(&self, ctx: &CallContext<'_>, a: ClaimNextArgs) -> Outcome {
        let Some(agent) = ctx.binding.agent_id.clone().or(a.assignee_agent_id) else {
            return Err(invalid_args(
                "assigneeAgentId is required when the session is not bound to an agent: pass your agent id",
            ));
        };
        non_empty("assigneeAgentId", &agent)?;
        let team = ctx.binding.team_id.clone().or(a.team_id);
        let who = Claimant {
            agent_id: &agent,
            runtime: a.assignee_runtime.as_deref(),
            paths: a.paths.as_deref(),
        };
        let claimed = self
            .store
            .claim_next_async(who, team.as_deref())
            .await
            .map_err(internal_error)?;
        Ok(match claimed {
            Ok(Some(task)) => json_result(&TaskOut { task: &task }),
            Ok(None) => json_result(&NothingReadyOut {
                task: None,
                reason: "nothing_ready",
            }),
            Err(e) => store_error(e, Some("claim failed")),
        })
    }

    async fn release_task(&self, ctx: &CallContext<'_>, a: FencedTaskArgs) -> Outcome {
        self.move_task(
            ctx,
            a.task_id,
            TaskMove::Release,
            a.claim_token,
            "release failed",
        )
        .await
    }

    async fn update_task_status(&self, ctx: &CallContext<'_>, a: UpdateStatusArgs) -> Outcome {
        let target = TaskMove::To(Status::from(a.status));
        self.move_task(
            ctx,
            a.task_id,
            target,
            a.claim_token,
            "status change failed",
        )
        .await
    }

    async fn block_task(&self, ctx: &CallContext<'_>, a: FencedTaskArgs) -> Outcome {
        let target = TaskMove::To(Status::Blocked);
        self.move_task(ctx, a.task_id, target, a.claim_token, "block failed")
            .await
    }

    async fn unblock_task(&self, ctx: &CallContext<'_>, a: TaskIdArgs) -> Outcome {
        self.move_task(ctx, a.task_id, TaskMove::Unblock, None, "unblock failed")
            .await
    }

    /// A status move by the bound agent (if any); a refusal reads `<verb> failed: <code>`.
    async fn move_task(
        &self,
        ctx: &CallContext<'_>,
        task_id: String,
        target: TaskMove,
        claim_token: Option<i64>,
        failed: &str,
    ) -> Outcome {
        let actor = ctx.binding.agent_id.clone();
        let scope = OwnedScope {
            team_id: ctx.binding.team_id.clone(),
            agent_id: actor.clone(),
            claim_token,
            operator: None,
        };
        let moved = self
            .store
            .move_task_async(task_id, target, actor, scope)
            .await
            .map_err(internal_error)?;
        Ok(moved
            .map(|task| json_result(&TaskOut { task: &task }))
            .unwrap_or_else(|e| store_error(e, Some(failed))))
    }

    async fn add_comment(&self, ctx: &CallContext<'_>, a: AddCommentArgs) -> Outcome {
        non_empty("body", &a.body)?;
        let new = NewComment {
            author_agent_id: ctx.binding.agent_id.clone().or(a.author_agent_id),
            author_type: AuthorType::Agent,
            body: a.body,
        };
        let scope = OwnedScope {
            team_id: ctx.binding.team_id.clone(),
            claim_token: a.claim_token,
            ..OwnedScope::default()
        };
        let added = self
            .store
            .add_comment_async(a.task_id, new, scope)
            .await
            .map_err(internal_error)?;
        Ok(match added {
            Ok(comment) => json_result(&CommentOut { comment: &comment }),
            Err(e @ StoreError::StaleClaim { .. }) => store_error(e, Some("comment failed")),
            Err(e) => store_error(e, None),
        })
    }

    async fn link_task(&self, ctx: &CallContext<'_>, a: LinkTaskArgs) -> Outcome {
        let scope = Scope::team(ctx.binding.team_id.as_deref()).into();
        let linked = self
            .store
            .link_task_async(&a.task_id, &a.depends_on_task_id, scope)
            .await
            .map_err(internal_error)?
            .map(|()| LinkOut {
                task_id: a.task_id,
                depends_on_task_id: a.depends_on_task_id,
            });
        Ok(linked
            .map(|v| json_result(&v))
            .unwrap_or_else(|e| store_error(e, None)))
    }
}
