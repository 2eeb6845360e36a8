//! `/api/board`: the kanban over the same store rules as the Tasks MCP server (REST creates
//! are uncapped, as in the original; their rows still count toward the caps).

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::{get, post};
use clawboo_store::board::{
    AuthorType, BoardCursor, CreatePolicy, NewComment, NewTask, Scope, Status, Task, TaskFilter,
    TaskPatch,
};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::AppState;
use crate::error::{ApiJson, ApiPath, ApiQuery, AppError};

/// The board routes.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/board", get(list).post(create))
        .route("/api/board/workflow", get(workflow))
        .route("/api/board/activity", get(activity))
        .route("/api/board/{id}", get(detail).patch(patch))
        .route("/api/board/{id}/claim", post(claim))
        .route("/api/board/{id}/comments", post(comment))
        .route("/api/board/{id}/deps", post(link))
}

/// The REST API is the operator's surface (the board included): its moves, edits, drops
/// and comments are recorded as the operator's activity, under this name.
const OPERATOR: Scope<'static> = Scope {
    operator: Some("api"),
    ..Scope::ALL
};

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ActivityQuery {
    /// Only this team's tasks; without it every task, team-less ones included.
    team_id: Option<String>,
    /// Rows, 1..=500 (default 100).
    limit: Option<usize>,
}

/// The operator's own moves, edits, drops and comments, newest first (`{activity}`), for
/// the audit view beside the agents' tool calls.
async fn activity(
    State(state): State<AppState>,
    ApiQuery(q): ApiQuery<ActivityQuery>,
) -> Result<axum::Json<Value>, AppError> {
    let team = q.team_id.filter(|t| !t.is_empty());
    let limit = q.limit.unwrap_or(100);
    let rows = state
        .store()
        .operator_activity_async(team.as_deref(), limit)
        .await??;
    Ok(axum::Json(json!({ "activity": rows })))
}

fn parse_status(s: &str) -> Result<Status, AppError> {
    s.parse::<Status>().map_err(|_| {
        AppError::bad_request(format!(
            "unknown status: {s} (use backlog, todo, in_progress, in_review, blocked, done or cancelled)"
        ))
    })
}

/// The statuses in column order and, for each, the statuses a task may move to from it
/// (the store's state table), so a client offers only legal moves.
async fn workflow() -> axum::Json<Value> {
    let transitions: serde_json::Map<String, Value> = Status::ALL
        .into_iter()
        .map(|from| {
            let to: Vec<&str> = Status::ALL
                .into_iter()
                .filter(|&to| to != from && from.can_transition_to(to))
                .map(Status::as_str)
                .collect();
            (from.as_str().to_owned(), json!(to))
        })
        .collect();
    axum::Json(json!({
        "statuses": Status::ALL.map(Status::as_str),
        "transitions": transitions,
    }))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ListQuery {
    team_id: Option<String>,
    status: Option<String>,
    #[serde(default)]
    ready: bool,
    #[serde(default)]
    include_dropped: bool,
    /// Tasks a page, 1..=200 (default 50).
    limit: Option<usize>,
    /// The `nextCursor` of the previous page.
    cursor: Option<String>,
}

/// Tasks a page when the query names no `limit` (as `list_tasks`).
const DEFAULT_PAGE: usize = 50;

/// One page of the board, `{tasks, nextCursor}` (`nextCursor` only when more remain), in
/// the order and with the cursor of the Tasks server's `list_tasks`.
async fn list(
    State(state): State<AppState>,
    ApiQuery(q): ApiQuery<ListQuery>,
) -> Result<axum::Json<Value>, AppError> {
    let filter = TaskFilter {
        team_id: q.team_id.filter(|t| !t.is_empty()),
        status: q.status.as_deref().map(parse_status).transpose()?,
        ready: q.ready,
        include_dropped: q.include_dropped,
        scoped: false,
    };
    let limit = q.limit.unwrap_or(DEFAULT_PAGE);
    let after = q.cursor.as_deref().map(BoardCursor::decode).transpose()?;
    let page = state
        .store()
        .list_tasks_page_async(filter, after, limit)
        .await??;
    let mut answer = json!({ "tasks": page.tasks });
    if let Some(next) = page.next {
        answer["nextCursor"] = json!(next.encode());
    }
    Ok(axum::Json(answer))
}

async fn detail(
    State(state): State<AppState>,
    ApiPath(id): ApiPath<String>,
) -> Result<axum::Json<Value>, AppError> {
    let detail = state.store().task_detail_async(id.clone(), None).await??;
    let detail = detail.ok_or_else(|| AppError::not_found(format!("not found: {id}")))?;
    // The board shows the description and comments as rendered markdown.
    let mut answer = json!(detail);
    if let Some(text) = answer["task"]["description"].as_str() {
        answer["task"]["descriptionHtml"] = json!(crate::markdown::to_html(text));
    }
    if let Some(comments) = answer["comments"].as_array_mut() {
        for comment in comments {
            if let Some(text) = comment["body"].as_str() {
                comment["bodyHtml"] = json!(crate::markdown::to_html(text));
            }
        }
    }
    Ok(axum::Json(answer))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct CreateBody {
    title: String,
    description: Option<String>,
    status: Option<String>,
    priority: Option<i64>,
    team_id: Option<String>,
    parent_task_id: Option<String>,
    assignee_agent_id: Option<String>,
    assignee_runtime: Option<String>,
    tenant_id: Option<String>,
    /// Glob patterns the task works on, reserved by whoever claims it (SPEC §19).
    paths: Option<Vec<String>>,
}

async fn create(
    State(state): State<AppState>,
    ApiJson(body): ApiJson<CreateBody>,
) -> Result<(StatusCode, axum::Json<Value>), AppError> {
    let new = NewTask {
        title: body.title,
        description: body.description,
        status: body.status.as_deref().map(parse_status).transpose()?,
        priority: body.priority,
        team_id: body.team_id,
        parent_task_id: body.parent_task_id,
        assignee_agent_id: body.assignee_agent_id,
        assignee_runtime: body.assignee_runtime,
        tenant_id: body.tenant_id,
        paths: body.paths.unwrap_or_default(),
    };
    let task = state
        .store()
        .create_task_async(new, CreatePolicy::Uncapped, None)
        .await??;
    Ok((StatusCode::CREATED, axum::Json(json!({ "task": task }))))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ClaimBody {
    #[serde(alias = "agentId")]
    assignee_agent_id: String,
    assignee_runtime: Option<String>,
    /// Paths the claim reserves (SPEC §19); none: the task's declared ones.
    paths: Option<Vec<String>>,
}

async fn claim(
    State(state): State<AppState>,
    ApiPath(id): ApiPath<String>,
    ApiJson(body): ApiJson<ClaimBody>,
) -> Result<axum::Json<Value>, AppError> {
    let store = state.store();
    let id = store.resolve_task_id_async(id, None).await??;
    let claimed = store
        .claim_reserving_async(
            id,
            body.assignee_agent_id,
            body.assignee_runtime,
            body.paths,
            None,
        )
        .await?;
    let task = claimed.map_err(|e| AppError::from(e).with_ok_false())?;
    Ok(axum::Json(json!({ "ok": true, "task": task })))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct PatchBody {
    status: Option<String>,
    title: Option<String>,
    description: Option<String>,
    priority: Option<i64>,
    dropped: Option<bool>,
    /// Who made the change (the assignee is notified when it is someone else).
    actor_agent_id: Option<String>,
    /// Who takes the task when the move to `in_progress` claims it (nobody holds it).
    assignee_agent_id: Option<String>,
}

async fn patch(
    State(state): State<AppState>,
    ApiPath(id): ApiPath<String>,
    ApiJson(body): ApiJson<PatchBody>,
) -> Result<axum::Json<Value>, AppError> {
    let status = body.status.as_deref().map(parse_status).transpose()?;
    let fields = TaskPatch {
        title: body.title,
        description: body.description,
        priority: body.priority,
    };
    let has_fields =
        fields.title.is_some() || fields.description.is_some() || fields.priority.is_some();
    if status.is_none() && !has_fields && body.dropped.is_none() {
        return Err(AppError::bad_request(
            "nothing to change: pass status, title, description, priority or dropped",
        ));
    }
    let changes = Changes {
        fields: has_fields.then_some(fields),
        status,
        actor: body.actor_agent_id,
        assignee: body.assignee_agent_id,
        dropped: body.dropped,
    };
    // The edit, the move and the drop are writes of their own: spawned, so a client
    // that goes away between two of them leaves none half-done.
    let store = state.store();
    tokio::spawn(async move { changes.apply(&store, id).await })
        .await
        .map_err(|_| AppError::from(clawboo_store::RunError::Panicked))?
}

/// What one `PATCH` asks, checked.
struct Changes {
    fields: Option<TaskPatch>,
    status: Option<Status>,
    /// Who made the change.
    actor: Option<String>,
    /// Who takes the task when the move to `in_progress` claims it.
    assignee: Option<String>,
    dropped: Option<bool>,
}

impl Changes {
    /// The writes, in order: the fields, the status (noting a task the operator took back
    /// from its holder), the drop; the task as the last one left it.
    async fn apply(
        self,
        store: &std::sync::Arc<clawboo_store::Store>,
        id: String,
    ) -> Result<axum::Json<Value>, AppError> {
        let id = store.resolve_task_id_async(id, None).await??;
        let mut task = None;
        if let Some(fields) = &self.fields {
            task = Some(
                store
                    .patch_task_async(&id, fields, OPERATOR.into())
                    .await??,
            );
        }
        if let Some(status) = self.status {
            // A move into in_progress of a task nobody holds claims it for the assignee
            // the operator names.
            let before = store.get_task_async(id.clone(), None).await??;
            let actor = self.actor.clone();
            let moved = store
                .set_status_async(id.clone(), status, actor, self.assignee, OPERATOR.into())
                .await??;
            let actor = self.actor.as_deref();
            if let Some(note) = before.and_then(|b| taken_back_note(&b, &moved, actor)) {
                store
                    .add_comment_async(id.clone(), note, Scope::ALL.into())
                    .await??;
            }
            task = Some(moved);
        }
        if let Some(dropped) = self.dropped {
            task = Some(
                store
                    .set_dropped_async(&id, dropped, OPERATOR.into())
                    .await??,
            );
        }
        Ok(axum::Json(json!({ "task": task })))
    }
}

/// The server's comment when the operator's move took a task from the agent who held it
/// (its claim and lease end without the agent doing anything), so the agent and everyone
/// reading the task later learn why it lost the task.
fn taken_back_note(before: &Task, after: &Task, actor: Option<&str>) -> Option<NewComment> {
    let holder = before.assignee_agent_id.as_deref()?;
    if after.assignee_agent_id.is_some() || actor == Some(holder) {
        return None;
    }
    Some(NewComment {
        author_agent_id: None,
        author_type: AuthorType::System,
        body: format!(
            "The operator took this task back from {holder} (it was {}, now {}): {holder}'s claim and lease ended. Claim it again to keep working on it.",
            before.status, after.status
        ),
    })
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct CommentBody {
    body: String,
    author_agent_id: Option<String>,
    author_type: Option<String>,
}

async fn comment(
    State(state): State<AppState>,
    ApiPath(id): ApiPath<String>,
    ApiJson(body): ApiJson<CommentBody>,
) -> Result<(StatusCode, axum::Json<Value>), AppError> {
    // The REST API is the operator's surface: whatever `authorType` it is sent, a comment
    // is the operator's (`system` is the server's own voice, `agent` a bound agent's).
    match body.author_type.as_deref() {
        None | Some("user" | "agent" | "system") => {}
        Some(other) => {
            return Err(AppError::bad_request(format!(
                "unknown authorType: {other} (use agent, user or system)"
            )));
        }
    }
    let new = NewComment {
        author_agent_id: body.author_agent_id,
        author_type: AuthorType::User,
        body: body.body,
    };
    let store = state.store();
    let id = store.resolve_task_id_async(id, None).await??;
    let comment = store.add_comment_async(id, new, OPERATOR.into()).await??;
    Ok((
        StatusCode::CREATED,
        axum::Json(json!({ "comment": comment })),
    ))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct LinkBody {
    depends_on_task_id: String,
}

async fn link(
    State(state): State<AppState>,
    ApiPath(id): ApiPath<String>,
    ApiJson(body): ApiJson<LinkBody>,
) -> Result<axum::Json<Value>, AppError> {
    let store = state.store();
    let task_id = store.resolve_task_id_async(id, None).await??;
    let dep = store
        .resolve_task_id_async(body.depends_on_task_id, None)
        .await??;
    store
        .link_task_async(&task_id, &dep, Scope::ALL.into())
        .await??;
    Ok(axum::Json(
        json!({ "taskId": task_id, "dependsOnTaskId": dep }),
    ))
}
