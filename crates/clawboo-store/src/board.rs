//! The durable kanban board: the state machine, atomic claims, dependencies, ancestors,
//! soft delete and the creation caps. One state table ([`Status::can_transition_to`])
//! serves every surface (MCP, REST, UI). Titles, descriptions and comments are scrubbed of
//! secrets ([`crate::scrub`]) before they are stored, whichever surface wrote them.

use std::sync::Arc;

use futures_util::future::BoxFuture;
use serde::Serialize;

use crate::db::{DbRow, PerEngine, Tx};
use crate::error::{CapReason, Result, StoreError};
use crate::leases::{self, GRANT_LEASE};
use crate::operator_activity::{self, OperatorAction};
use crate::reads::{self, AsyncTx, Query, Reads, StoreRead, ready_now};
use crate::run::RunError;
use crate::scrub::{is_only_redactions, scrub_text};
pub use crate::task::{MAX_BODY_CHARS, MAX_TITLE_CHARS, Scope, Status, Task};
use crate::task::{
    TASK_COLUMNS, UNFINISHED_DEP, check_fence, columns_for, load_task_sql, task_from_row,
};
use crate::writes::{AsyncWriteTx, StoreWrite, Writes};
use crate::{Store, inbox, new_id, reservations, short_ids, task};

/// A parent may have at most this many live (non-dropped) children.
pub const MAX_CHILDREN: i64 = 24;
/// A task may nest at most this deep (a root is depth 0).
pub const MAX_DEPTH: i64 = 2;
/// At most this many root tasks may be created in one team (team-less roots sharing one
/// bucket) in [`ROOT_RATE_WINDOW_MS`], so one team filling its bucket never stops another.
pub const MAX_ROOTS_PER_WINDOW: i64 = 30;
/// The rolling window of the root-creation rate cap (5 minutes).
pub const ROOT_RATE_WINDOW_MS: i64 = 5 * 60 * 1000;
/// The refusal of a comment that was nothing but secrets (secrets are scrubbed from every
/// title, description and comment before it is stored, as from memory).
pub const COMMENT_ENTIRELY_REDACTED: &str = "nothing to save: the comment was entirely redacted secrets; write what happened without the credential";

/// Who wrote a comment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AuthorType {
    Agent,
    User,
    System,
}

impl AuthorType {
    fn as_str(self) -> &'static str {
        match self {
            AuthorType::Agent => "agent",
            AuthorType::User => "user",
            AuthorType::System => "system",
        }
    }

    fn parse(s: &str) -> AuthorType {
        match s {
            "user" => AuthorType::User,
            "system" => AuthorType::System,
            _ => AuthorType::Agent,
        }
    }
}

/// A comment on a task.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Comment {
    pub id: String,
    pub task_id: String,
    pub author_agent_id: Option<String>,
    pub author_type: AuthorType,
    pub body: String,
    pub created_at: i64,
}

/// A task with its comments, its ancestors (root first, direct parent last) and its
/// newest links (SPEC §19: facts, posts and tool calls about it, newest first).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TaskDetail {
    pub task: Task,
    pub comments: Vec<Comment>,
    pub ancestors: Vec<Task>,
    pub links: Vec<crate::links::Link>,
}

/// The fields of a new task.
#[derive(Debug, Clone, Default)]
pub struct NewTask {
    pub title: String,
    pub description: Option<String>,
    /// `todo` when absent, so agent-created work is claimable at once.
    pub status: Option<Status>,
    pub priority: Option<i64>,
    /// The parent's team when absent and a parent is given.
    pub team_id: Option<String>,
    pub parent_task_id: Option<String>,
    pub assignee_agent_id: Option<String>,
    pub assignee_runtime: Option<String>,
    pub tenant_id: Option<String>,
    /// The paths the task will work on, reserved by whoever claims it (SPEC §19).
    pub paths: Vec<String>,
}

impl NewTask {
    /// A task with only a title.
    pub fn titled(title: impl Into<String>) -> NewTask {
        NewTask {
            title: title.into(),
            ..NewTask::default()
        }
    }
}

/// Whether a create goes through the creation caps (the Tasks MCP server) or not (REST,
/// the team-chat orchestrator). Uncapped rows still count toward the caps' totals.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CreatePolicy {
    Capped,
    Uncapped,
}

/// Filters for [`Store::list_tasks`].
#[derive(Debug, Clone, Default)]
pub struct TaskFilter {
    pub team_id: Option<String>,
    pub status: Option<Status>,
    /// Only claimable work: `todo`, not dropped, every dependency done.
    pub ready: bool,
    pub include_dropped: bool,
    /// `team_id` is the caller's bound scope, not only a filter: dependencies on tasks of
    /// other teams are left out of `depends_on`.
    pub scoped: bool,
}

/// Most tasks one page of [`Store::list_tasks_page`] holds.
pub const MAX_PAGE: usize = 200;

/// How much of its description a task on a page carries (`get_task` has it all).
pub const LISTED_DESCRIPTION_CHARS: usize = 200;

/// Cut `task`'s description to [`LISTED_DESCRIPTION_CHARS`] characters, the last one an
/// ellipsis when cut, so a page's size does not grow with what agents write.
fn shorten_description(task: &mut Task) {
    if let Some(description) = &mut task.description
        && let Some((cut, _)) = description.char_indices().nth(LISTED_DESCRIPTION_CHARS)
    {
        let keep = description
            .char_indices()
            .nth(LISTED_DESCRIPTION_CHARS - 1)
            .map_or(cut, |(i, _)| i);
        description.truncate(keep);
        description.push('…');
    }
}

/// A place in the board's order (priority high to low, then oldest first, then id): the
/// last task of a page, so the next page starts right after it whatever was created or
/// moved meanwhile. Clients see it only as [`BoardCursor::encode`]'s opaque text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BoardCursor {
    priority: i64,
    created_at: i64,
    id: String,
}

/// The refusal of a cursor this server did not hand out.
const BAD_CURSOR: &str = "cursor is not one this server gave out: pass the nextCursor of the previous page, or none for the first page";

impl BoardCursor {
    /// The place right after `task`.
    pub fn after(task: &Task) -> BoardCursor {
        BoardCursor {
            priority: task.priority,
            created_at: task.created_at,
            id: task.id.clone(),
        }
    }

    /// The opaque text form (hex, so it needs no escaping in JSON or a URL).
    pub fn encode(&self) -> String {
        hex::encode(format!("{}:{}:{}", self.priority, self.created_at, self.id))
    }

    /// Parse [`BoardCursor::encode`]'s text; anything else is [`StoreError::Invalid`].
    pub fn decode(text: &str) -> Result<BoardCursor> {
        let bad = || StoreError::Invalid(BAD_CURSOR.into());
        let bytes = hex::decode(text).map_err(|_| bad())?;
        let text = String::from_utf8(bytes).map_err(|_| bad())?;
        let mut parts = text.splitn(3, ':');
        let (Some(priority), Some(created_at), Some(id)) =
            (parts.next(), parts.next(), parts.next())
        else {
            return Err(bad());
        };
        if id.is_empty() {
            return Err(bad());
        }
        Ok(BoardCursor {
            priority: priority.parse().map_err(|_| bad())?,
            created_at: created_at.parse().map_err(|_| bad())?,
            id: id.to_owned(),
        })
    }
}

/// One page of the board: at most the asked number of tasks, and where the next page
/// starts when more remain.
#[derive(Debug, Clone)]
pub struct TaskPage {
    pub tasks: Vec<Task>,
    pub next: Option<BoardCursor>,
}

/// Operator edits of a task's fields (REST `PATCH`).
#[derive(Debug, Clone, Default)]
pub struct TaskPatch {
    pub title: Option<String>,
    pub description: Option<String>,
    pub priority: Option<i64>,
}

/// The fields of a new comment.
#[derive(Debug, Clone)]
pub struct NewComment {
    pub author_agent_id: Option<String>,
    pub author_type: AuthorType,
    pub body: String,
}

/// The `WHERE` conditions of `filter` (`?1` the team, `?2` the status).
fn filter_clause(filter: &TaskFilter) -> String {
    let mut conditions = vec![
        "(CAST(?1 AS TEXT) IS NULL OR team_id = ?1)".to_owned(),
        "(CAST(?2 AS TEXT) IS NULL OR status = ?2)".to_owned(),
    ];
    if !filter.include_dropped || filter.ready {
        conditions.push("dropped = 0".to_owned());
    }
    if filter.ready {
        conditions.push(format!("status = 'todo' AND NOT {UNFINISHED_DEP}"));
    }
    conditions.join(" AND ")
}

/// The task columns a list through `filter` reads.
fn filter_columns(filter: &TaskFilter) -> &'static str {
    if filter.scoped {
        columns_for(Scope::team(filter.team_id.as_deref()))
    } else {
        TASK_COLUMNS
    }
}

/// The two statements of a page after a cursor (`?3` its priority, `?4`/`?5` its
/// `created_at`/`id`, `?6` the limit): the rest of the cursor's priority, then lower
/// priorities (`?3`, `?4` the limit); without a cursor only the second, from the top.
/// Each is a range scan of `tasks_by_board_order` that stops at the limit; one `OR` of
/// the two would not be a range SQLite can seek, so each page would walk every task
/// before the cursor.
fn page_queries(columns: &str, where_clause: &str, after_cursor: bool) -> (String, String) {
    let same_priority = format!(
        "SELECT {columns} FROM tasks WHERE {where_clause} \
         AND priority = ?3 AND (created_at, id) > (?4, ?5) \
         ORDER BY priority DESC, created_at, id LIMIT ?6"
    );
    let below = if after_cursor {
        "priority < ?3"
    } else {
        "CAST(?3 AS BIGINT) IS NULL"
    };
    let lower = format!(
        "SELECT {columns} FROM tasks WHERE {where_clause} AND {below} \
         ORDER BY priority DESC, created_at, id LIMIT ?4"
    );
    (same_priority, lower)
}

#[cfg(test)]
mod page_plan_tests {
    use super::*;

    /// Every page statement, with and without filters, walks an index in the board's
    /// order and never sorts the board: a page's cost must not grow with the board.
    #[test]
    fn pages_are_index_range_scans_without_a_sort() {
        let store = Store::open(std::path::Path::new(":memory:")).expect("an in-memory store");
        let filters = [
            TaskFilter::default(),
            TaskFilter {
                team_id: Some("t".into()),
                status: Some(Status::Todo),
                ..TaskFilter::default()
            },
            TaskFilter {
                team_id: Some("t".into()),
                scoped: true,
                ..TaskFilter::default()
            },
            TaskFilter {
                ready: true,
                ..TaskFilter::default()
            },
        ];
        for filter in &filters {
            let where_clause = filter_clause(filter);
            let columns = filter_columns(filter);
            let (same, after) = page_queries(columns, &where_clause, true);
            let (_, first) = page_queries(columns, &where_clause, false);
            for sql in [same, after, first] {
                let plan: Vec<String> = store
                    .read_sqlite(|c| {
                        let mut stmt = c.prepare(&format!("EXPLAIN QUERY PLAN {sql}"))?;
                        let values: [&dyn rusqlite::ToSql; 6] =
                            [&None::<String>, &None::<String>, &1, &1, &"x", &10];
                        let rows = stmt.query_map(&values[..stmt.parameter_count()], |r| {
                            r.get::<_, String>(3)
                        })?;
                        Ok::<_, StoreError>(rows.collect::<rusqlite::Result<Vec<_>>>()?)
                    })
                    .expect("a query plan");
                let text = plan.join(" | ");
                // A status filter may seek `tasks_by_status` (status, priority DESC,
                // created_at) instead: still in order, ties sorted only within a key.
                let index = if filter.status.is_some() || filter.ready {
                    text.contains("tasks_by_board_order") || text.contains("tasks_by_status")
                } else {
                    text.contains("tasks_by_board_order")
                };
                assert!(index, "{sql}: {text}");
                assert!(!text.contains("B-TREE FOR ORDER BY"), "{sql}: {text}");
            }
        }
    }
}

/// [`Store::get_task`]'s read, on any transaction.
async fn read_task<R: Reads + ?Sized>(
    tx: &R,
    reference: &str,
    scope: Scope<'_>,
) -> Result<Option<Task>> {
    let id = short_ids::resolve_on(tx, reference, scope).await?;
    let query = Query::new(load_task_sql(scope), &[&id.as_ref(), &scope.team_id]);
    let found = reads::query_first(tx, query).await?;
    found.map(|row| task_from_row(&*row)).transpose()
}

/// [`read_task`] with its arguments, for [`Store::run_read_committed`].
struct TaskRead {
    id: String,
    team_id: Option<String>,
}

impl StoreRead for TaskRead {
    type Output = Option<Task>;

    fn run(&self, tx: &dyn Tx) -> Result<Self::Output> {
        ready_now(read_task(
            tx,
            &self.id,
            Scope::team(self.team_id.as_deref()),
        ))
    }

    fn run_async<'a>(&'a self, tx: &'a AsyncTx) -> BoxFuture<'a, Result<Self::Output>> {
        Box::pin(read_task(
            tx,
            &self.id,
            Scope::team(self.team_id.as_deref()),
        ))
    }
}

/// [`Store::task_detail`]'s read, on any transaction: the task, its comments and recent
/// links in one batch, then its ancestors one by one.
async fn read_task_detail<R: Reads + ?Sized>(
    tx: &R,
    reference: &str,
    scope: Scope<'_>,
) -> Result<Option<TaskDetail>> {
    let id = short_ids::resolve_on(tx, reference, scope).await?;
    let id = id.as_ref();
    // Each query is built before an `.await`: a borrowed parameter list alive across one
    // would make the future not `Send`.
    let batch = vec![
        Query::new(load_task_sql(scope), &[&id, &scope.team_id]),
        Query::new(
            "SELECT id, task_id, author_agent_id, author_type, body, created_at FROM task_comments
                 WHERE task_id = ?1 ORDER BY created_at, id",
            &[&id],
        ),
        Query::new(
            crate::links::RECENT_LINKS,
            &[&id, &crate::links::LINKS_SHOWN],
        ),
    ];
    let mut answers = tx.query_batch(batch).await?.into_iter();
    let (tasks, comments, links) = (
        answers.next().unwrap_or_default(),
        answers.next().unwrap_or_default(),
        answers.next().unwrap_or_default(),
    );
    let Some(task) = tasks.first().map(|r| task_from_row(&**r)).transpose()? else {
        return Ok(None);
    };
    let comments = comments
        .iter()
        .map(|r| comment_from_row(&**r))
        .collect::<Result<Vec<_>>>()?;
    let links = links
        .iter()
        .map(|r| crate::links::link_from_row(&**r))
        .collect::<Result<Vec<_>>>()?;
    let mut ancestors = Vec::new();
    let mut next = task.parent_task_id.clone();
    while let Some(parent_id) = next {
        if ancestors.len() > 64 {
            break;
        }
        let query = Query::new(load_task_sql(scope), &[&parent_id, &scope.team_id]);
        let found = reads::query_first(tx, query).await?;
        let Some(parent) = found.map(|r| task_from_row(&*r)).transpose()? else {
            break;
        };
        next = parent.parent_task_id.clone();
        ancestors.push(parent);
    }
    ancestors.reverse();
    Ok(Some(TaskDetail {
        task,
        comments,
        ancestors,
        links,
    }))
}

/// [`read_task_detail`] with its arguments, for [`Store::run_snapshot`].
struct TaskDetailRead {
    id: String,
    team_id: Option<String>,
}

impl StoreRead for TaskDetailRead {
    type Output = Option<TaskDetail>;

    fn run(&self, tx: &dyn Tx) -> Result<Self::Output> {
        ready_now(read_task_detail(
            tx,
            &self.id,
            Scope::team(self.team_id.as_deref()),
        ))
    }

    fn run_async<'a>(&'a self, tx: &'a AsyncTx) -> BoxFuture<'a, Result<Self::Output>> {
        Box::pin(read_task_detail(
            tx,
            &self.id,
            Scope::team(self.team_id.as_deref()),
        ))
    }
}

fn check_page_limit(limit: usize) -> Result<()> {
    if (1..=MAX_PAGE).contains(&limit) {
        return Ok(());
    }
    Err(StoreError::Invalid(format!(
        "limit must be between 1 and {MAX_PAGE} (got {limit})"
    )))
}

/// [`Store::list_tasks_page`]'s read, on any transaction.
async fn read_page<R: Reads + ?Sized>(
    tx: &R,
    filter: &TaskFilter,
    after: Option<&BoardCursor>,
    limit: usize,
) -> Result<TaskPage> {
    let where_clause = filter_clause(filter);
    let status = filter.status.map(Status::as_str);
    let (same_priority, lower) =
        page_queries(filter_columns(filter), &where_clause, after.is_some());
    // One more than asked tells whether more remain.
    let want = limit + 1;
    let mut tasks = Vec::new();
    if let Some(after) = after {
        let query = Query::new(
            same_priority,
            &[
                &filter.team_id,
                &status,
                &after.priority,
                &after.created_at,
                &after.id,
                &want,
            ],
        );
        tasks = tx.query_map(query, task_from_row).await?;
    }
    if tasks.len() < want {
        let query = Query::new(
            lower,
            &[
                &filter.team_id,
                &status,
                &after.map(|a| a.priority),
                &(want - tasks.len()),
            ],
        );
        tasks.extend(tx.query_map(query, task_from_row).await?);
    }
    let next = if tasks.len() > limit {
        tasks.truncate(limit);
        tasks.last().map(BoardCursor::after)
    } else {
        None
    };
    tasks.iter_mut().for_each(shorten_description);
    Ok(TaskPage { tasks, next })
}

/// [`read_page`] with its arguments, for [`Store::run_read_committed`].
struct PageRead {
    filter: TaskFilter,
    after: Option<BoardCursor>,
    limit: usize,
}

impl StoreRead for PageRead {
    type Output = TaskPage;

    fn run(&self, tx: &dyn Tx) -> Result<TaskPage> {
        ready_now(read_page(tx, &self.filter, self.after.as_ref(), self.limit))
    }

    fn run_async<'a>(&'a self, tx: &'a AsyncTx) -> BoxFuture<'a, Result<TaskPage>> {
        Box::pin(read_page(tx, &self.filter, self.after.as_ref(), self.limit))
    }
}

fn comment_from_row(r: &dyn DbRow) -> Result<Comment> {
    let author_type: String = r.get(3)?;
    Ok(Comment {
        id: r.get(0)?,
        task_id: r.get(1)?,
        author_agent_id: r.get(2)?,
        author_type: AuthorType::parse(&author_type),
        body: r.get(4)?,
        created_at: r.get(5)?,
    })
}

pub(crate) fn check_len(field: &str, value: &str, max: usize) -> Result<()> {
    let n = value.chars().count();
    if n > max {
        return Err(StoreError::Invalid(format!(
            "{field} is {n} characters; the limit is {max}"
        )));
    }
    Ok(())
}

/// Depth of a task whose parent is `parent` (a root, with no parent, is 0), walking up one
/// cached lookup per ancestor. A recursive CTE did the same through a temporary table
/// opened and closed on every call, where the usual parent is a root and this walk reads
/// one row.
async fn depth_below<R: Reads + ?Sized>(tx: &R, parent: Option<&str>) -> Result<i64> {
    let mut depth = 0;
    let mut next = parent.map(str::to_owned);
    // Bounded like the CTE was, so a parent cycle written around the store cannot hang.
    while let Some(id) = next.take()
        && depth < 64
    {
        depth += 1;
        let parent = Query::new("SELECT parent_task_id FROM tasks WHERE id = ?1", &[&id]);
        next = tx
            .query_map(parent, |r| r.get::<Option<String>>(0))
            .await?
            .into_iter()
            .next()
            .flatten();
    }
    Ok(depth)
}

/// Queue an inbox note for the task's assignee when someone else acted on it.
async fn notify_assignee<W: Writes + ?Sized>(
    tx: &W,
    now: i64,
    task: &Task,
    actor: Option<&str>,
    what: &str,
) -> Result<()> {
    if let Some(assignee) = task.assignee_agent_id.as_deref()
        && actor != Some(assignee)
    {
        let who = actor.unwrap_or("someone");
        let body = format!("{who} {what} on your task \"{}\" ({})", task.title, task.id);
        let team = task.team_id.as_deref();
        inbox::push(tx, now, assignee, team, "board", &body).await?;
    }
    Ok(())
}

fn summarize(body: &str) -> String {
    const MAX: usize = 200;
    let line = body.lines().next().unwrap_or("").trim();
    if line.chars().count() > MAX {
        format!("{}…", line.chars().take(MAX).collect::<String>())
    } else {
        line.to_owned()
    }
}

/// Validate `new`, check it against the caps (when `policy` is capped) and insert it,
/// inside the caller's write transaction.
pub(crate) async fn insert_task<W: Writes + ?Sized>(
    tx: &W,
    now: i64,
    new: &NewTask,
    policy: CreatePolicy,
    scope: Scope<'_>,
) -> Result<Task> {
    let title = new.title.trim();
    if title.is_empty() {
        return Err(StoreError::Invalid("title must not be empty".into()));
    }
    check_len("title", title, MAX_TITLE_CHARS)?;
    if let Some(d) = &new.description {
        check_len("description", d, MAX_BODY_CHARS)?;
    }
    // Secrets never reach the board's rows (nor the inbox notes quoting them).
    let title = scrub_text(title);
    let description = new.description.as_deref().map(scrub_text);
    if new.parent_task_id.as_deref() == Some("") {
        return Err(StoreError::Invalid("parentTaskId must not be empty".into()));
    }
    let paths = reservations::normalize_paths(&new.paths)?;
    // `in_progress` is entered only by a claim, which gives it a holder and a lease.
    if new.status == Some(Status::InProgress) {
        return Err(StoreError::Invalid(
            "a task is not created in_progress: create it in todo, then claim it (claim_task), so that it has a holder and a lease".into(),
        ));
    }
    let mut team_id = scope.team_id.map(str::to_owned).or(new.team_id.clone());
    if let Some(parent_id) = new.parent_task_id.as_deref() {
        let parent = task::load_task(tx, parent_id, scope)
            .await?
            .filter(|p| !p.dropped);
        let Some(parent) = parent else {
            return Err(match policy {
                CreatePolicy::Capped => StoreError::Cap {
                    reason: CapReason::ParentNotFound,
                    message: format!("parent not found: {parent_id}"),
                },
                CreatePolicy::Uncapped => StoreError::NotFound(parent_id.to_owned()),
            });
        };
        // A parent of another team is refused before any cap is counted: the caps of a
        // tree the new task may not join are none of its business.
        match &team_id {
            None => team_id = parent.team_id.clone(),
            Some(team) if parent.team_id.as_ref() != Some(team) => {
                return Err(StoreError::Invalid(format!(
                    "parent {parent_id} belongs to {}, not to team {team}: a subtask lives in its parent's team; leave teamId out (it defaults to the parent's) or pick a parent of team {team}",
                    parent
                        .team_id
                        .as_deref()
                        .map_or_else(|| "no team".to_owned(), |t| format!("team {t}"))
                )));
            }
            Some(_) => {}
        }
        if policy == CreatePolicy::Capped {
            // A subtask's caps are its parent's team's (it lives in that team): one capped
            // create of a team at a time counts and inserts, across hosts.
            tx.serialize_on(cap_key(parent.team_id.as_deref())).await?;
            // The depth counts every ancestor, seen or not (the parent as read in `scope`
            // shows no parent of another team).
            if depth_below(tx, Some(parent_id)).await? > MAX_DEPTH {
                return Err(StoreError::Cap {
                    reason: CapReason::DepthCap,
                    message: format!(
                        "subtask rejected: parent {parent_id} is at the maximum nesting depth ({MAX_DEPTH}); attach the new task higher in the tree"
                    ),
                });
            }
            let children = Query::new(
                "SELECT COUNT(*) FROM tasks WHERE parent_task_id = ?1 AND dropped = 0",
                &[&parent_id],
            );
            let children = count(tx, children).await?;
            if children >= MAX_CHILDREN {
                return Err(StoreError::Cap {
                    reason: CapReason::ChildCap,
                    message: format!(
                        "subtask rejected: parent {parent_id} already has {children} children (max {MAX_CHILDREN}); drop one or attach the new task elsewhere"
                    ),
                });
            }
        }
    } else if policy == CreatePolicy::Capped {
        tx.serialize_on(cap_key(team_id.as_deref())).await?;
        let recent = Query::new(
            tx.statement(&RECENT_ROOTS),
            &[&(now - ROOT_RATE_WINDOW_MS), &team_id],
        );
        let recent = count(tx, recent).await?;
        if recent >= MAX_ROOTS_PER_WINDOW {
            return Err(StoreError::Cap {
                reason: CapReason::RootRateCap,
                message: format!(
                    "task rejected: {recent} root tasks already created in the last 5 min (max {MAX_ROOTS_PER_WINDOW}); attach this work to an existing task with parentTaskId instead of opening another"
                ),
            });
        }
    }
    let status = new.status.unwrap_or(Status::Todo);
    let id = new_id();
    // Last before the insert, in its transaction: a refused create takes no number.
    let short_id = short_ids::next(tx, team_id.as_deref()).await?;
    let insert = Query::new(
        "INSERT INTO tasks(id, title, description, status, priority, team_id, assignee_agent_id,
                assignee_runtime, parent_task_id, tenant_id, created_at, updated_at, completed_at,
                paths, short_id)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?11, ?12, ?13, ?14)",
        &[
            &id,
            &title,
            &description,
            &status.as_str(),
            &new.priority.unwrap_or(0),
            &team_id,
            &new.assignee_agent_id,
            &new.assignee_runtime,
            &new.parent_task_id,
            &new.tenant_id,
            &now,
            &status.is_terminal().then_some(now),
            &reservations::join(&paths),
            &short_id,
        ],
    );
    // The task as created, read in the insert's round trip.
    let load = Query::new(load_task_sql(scope), &[&id, &scope.team_id]);
    let created = tx.query_batch(vec![insert, load]).await?.pop();
    match created.as_deref().and_then(<[_]>::first) {
        Some(row) => task_from_row(&**row),
        None => Err(StoreError::NotFound(id)),
    }
}

/// The count `query` (a `SELECT COUNT(*)`) returned.
async fn count<R: Reads + ?Sized>(tx: &R, query: Query) -> Result<i64> {
    let counted = tx.query_map(query, |r| r.get::<i64>(0)).await?;
    Ok(counted.into_iter().next().unwrap_or(0))
}

/// How many times a claim or a move reads the task again after another host changed the
/// row between its read and its write (never on SQLite, whose write transactions run one
/// at a time).
const ROW_ATTEMPTS: usize = 4;

/// Who moves a task: `actor` for the inbox note its holder gets, `claimant` for the claim
/// a move into `in_progress` of a task nobody holds is.
#[derive(Debug, Clone, Copy)]
struct Mover<'a> {
    actor: Option<&'a str>,
    claimant: Option<&'a str>,
}

impl<'a> Mover<'a> {
    /// A move that never enters `in_progress` (release, unblock).
    fn acting(actor: Option<&'a str>) -> Mover<'a> {
        Mover {
            actor,
            claimant: None,
        }
    }
}

/// Who claims a task, and from which status (`todo` for a claim; a status move into
/// `in_progress` claims from where the task stands).
#[derive(Debug, Clone, Copy)]
struct Claim<'a> {
    agent_id: &'a str,
    runtime: Option<&'a str>,
    from: Status,
    /// The paths the claim reserves (normalised), replacing the task's declared ones;
    /// `None` reserves the declared ones.
    paths: Option<&'a [String]>,
}

/// The claim rule inside the caller's write transaction ([`Store::claim_task_in`]).
fn claim_in(
    tx: &dyn Tx,
    now: i64,
    lease: Option<i64>,
    id: &str,
    claim: Claim<'_>,
    scope: Scope<'_>,
) -> Result<Task> {
    ready_now(claim_on(tx, now, lease, id, claim, scope))
}

/// [`claim_in`] in any write transaction.
async fn claim_on<W: Writes + ?Sized>(
    tx: &W,
    now: i64,
    lease: Option<i64>,
    id: &str,
    claim: Claim<'_>,
    scope: Scope<'_>,
) -> Result<Task> {
    let Claim {
        agent_id,
        runtime,
        from,
        paths,
    } = claim;
    let from_status = from.as_str();
    // `?9` says whether the claim's reservation was checked; until it is, only a task that
    // declares no paths is claimed, so a claim that reserves nothing (the usual one) stays
    // one round trip and never takes the team's reservation lock.
    let sql = format!(
        "UPDATE tasks SET assignee_agent_id = ?1, assignee_runtime = COALESCE(?2, assignee_runtime),
             status = 'in_progress', updated_at = ?3, lease_expires_at = ?3 + CAST(?6 AS BIGINT),
             paths = COALESCE(?8, paths), {GRANT_LEASE}
         WHERE id = ?4 AND (CAST(?5 AS TEXT) IS NULL OR team_id = ?5) AND status = ?7
           AND assignee_agent_id IS NULL AND dropped = 0 AND NOT {UNFINISHED_DEP}
           AND (CAST(?9 AS BIGINT) = 1 OR paths IS NULL)
         RETURNING id"
    );
    let new_paths = paths.and_then(reservations::join);
    let mut checked = false;
    if let Some(paths) = paths {
        // A task outside the caller's team is refused below as not found, before its
        // team's reservations are ever named.
        let team = Query::new(
            "SELECT team_id FROM tasks WHERE id = ?1 AND (CAST(?2 AS TEXT) IS NULL OR team_id = ?2)",
            &[&id, &scope.team_id],
        );
        let team = tx.query_map(team, |r| r.get::<Option<String>>(0)).await?;
        if let Some(team) = team.first() {
            reservations::ensure_free(tx, now, team.as_deref(), agent_id, id, paths).await?;
        }
        checked = true;
    }
    // On PostgreSQL the row may change between a claim that changed nothing and the
    // read that says why (another host claimed, then released it): a task found
    // claimable after all is claimed again.
    for attempt in 0..ROW_ATTEMPTS {
        // Sent together (one round trip on PostgreSQL): on the first attempt the
        // reclaim of expired leases, which a claim that meets one does first
        // (SPEC §12); then the claim; then the task as it stands after it, which is
        // the answer when the claim took and says why when it did not.
        let checked_flag = i64::from(checked);
        let mut batch = Vec::with_capacity(3);
        if attempt == 0 {
            batch.push(leases::expire_query(tx, now));
        }
        batch.push(Query::new(
            sql.clone(),
            &[
                &agent_id,
                &runtime,
                &now,
                &id,
                &scope.team_id,
                &lease,
                &from_status,
                &new_paths,
                &checked_flag,
            ],
        ));
        batch.push(Query::new(load_task_sql(scope), &[&id, &scope.team_id]));
        let mut answers = tx.query_batch(batch).await?.into_iter();
        let mut reclaimed = Vec::new();
        if attempt == 0 {
            for row in answers.next().unwrap_or_default() {
                reclaimed.push(leases::reclaimed_from_row(&*row)?);
            }
        }
        let claimed = !answers.next().unwrap_or_default().is_empty();
        let task = match answers.next().unwrap_or_default().first() {
            Some(row) => Some(task_from_row(&**row)?),
            None => None,
        };
        leases::narrate_reclaimed(tx, now, &mut reclaimed).await?;
        if claimed {
            if runtime.is_some() {
                leases::seen_on(tx, agent_id, scope.team_id, runtime, now).await?;
            }
            return task.ok_or_else(|| StoreError::NotFound(id.to_owned()));
        }
        match task.filter(|t| !t.dropped) {
            None => return Err(StoreError::NotFound(id.to_owned())),
            // Claiming a task you hold renews its lease (idempotent).
            Some(t)
                if t.status == Status::InProgress
                    && t.assignee_agent_id.as_deref() == Some(agent_id) =>
            {
                // Renewed only while this agent still holds it: its lease may have
                // expired, and another agent claimed the task, since the read.
                let renew = Query::new(
                    "UPDATE tasks SET lease_expires_at = CAST(?1 AS BIGINT) + CAST(?2 AS BIGINT) \
                     WHERE id = ?3 AND lease_expires_at IS NOT NULL AND status = 'in_progress' \
                       AND assignee_agent_id = ?4",
                    &[&now, &lease, &id, &agent_id],
                );
                let renewed = tx.execute(renew).await?;
                // Paths named again by the holder replace the ones it reserved (checked
                // above against everyone else's).
                if new_paths.is_some() {
                    let replace = Query::new(
                        "UPDATE tasks SET paths = ?1 WHERE id = ?2 AND assignee_agent_id = ?3",
                        &[&new_paths, &id, &agent_id],
                    );
                    tx.execute(replace).await?;
                }
                if renewed == 0 && t.lease_expires_at.is_some() {
                    return Err(StoreError::Conflict);
                }
                return task::require_task_on(tx, id, scope).await;
            }
            Some(t) if t.status == from && t.assignee_agent_id.is_none() => {
                // The task declares paths: they are reserved by this claim once no other
                // agent's reservation is in their way; then claim again.
                if !checked && !t.paths.is_empty() {
                    let team = t.team_id.as_deref();
                    reservations::ensure_free(tx, now, team, agent_id, id, &t.paths).await?;
                    checked = true;
                    continue;
                }
                let open = Query::new(
                    format!("SELECT {UNFINISHED_DEP} FROM tasks WHERE id = ?1"),
                    &[&id],
                );
                let open: Vec<bool> = tx.query_map(open, |r| r.get(0)).await?;
                if open.first() == Some(&true) {
                    return Err(StoreError::NotReady);
                }
            }
            Some(_) => return Err(StoreError::Conflict),
        }
    }
    Err(StoreError::Conflict)
}

/// A status move of a task ([`Store::move_task_async`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskMove {
    /// To this status, as the state machine allows ([`Store::set_status`]).
    To(Status),
    /// An `in_progress` task back to `todo`, its holder cleared ([`Store::release_task`]).
    Release,
    /// A `blocked` task back to `todo` ([`Store::unblock_task`]).
    Unblock,
}

impl TaskMove {
    fn target(self) -> Status {
        match self {
            TaskMove::To(status) => status,
            TaskMove::Release | TaskMove::Unblock => Status::Todo,
        }
    }

    /// Whether this move starts from `from` at all (the state machine decides the rest).
    fn starts_from(self, from: Status) -> bool {
        match self {
            TaskMove::To(_) => true,
            TaskMove::Release => from == Status::InProgress,
            TaskMove::Unblock => from == Status::Blocked,
        }
    }
}

/// A [`Scope`] that owns its strings, for a write that travels into a future.
#[derive(Debug, Clone, Default)]
pub struct OwnedScope {
    pub team_id: Option<String>,
    pub agent_id: Option<String>,
    pub claim_token: Option<i64>,
    pub operator: Option<String>,
}

impl From<Scope<'_>> for OwnedScope {
    fn from(scope: Scope<'_>) -> OwnedScope {
        OwnedScope {
            team_id: scope.team_id.map(str::to_owned),
            agent_id: scope.agent_id.map(str::to_owned),
            claim_token: scope.claim_token,
            operator: scope.operator.map(str::to_owned),
        }
    }
}

impl OwnedScope {
    /// The scope it owns.
    pub fn scope(&self) -> Scope<'_> {
        Scope {
            team_id: self.team_id.as_deref(),
            agent_id: self.agent_id.as_deref(),
            claim_token: self.claim_token,
            operator: self.operator.as_deref(),
        }
    }
}

/// The move rule inside the caller's write transaction: the move is checked against the
/// task as read, and written only while the row is still that task (status, holder,
/// claim): on PostgreSQL another host may release, reclaim or move it in between, and a
/// move must not overwrite a state it never checked. A row that changed is read and
/// checked again.
async fn move_on<W: Writes + ?Sized>(
    tx: &W,
    now: i64,
    lease: Option<i64>,
    id: &str,
    to_move: TaskMove,
    mover: Mover<'_>,
    scope: Scope<'_>,
) -> Result<Task> {
    let to = to_move.target();
    for _ in 0..ROW_ATTEMPTS {
        let task = task::require_task_on(tx, id, scope).await?;
        check_fence(&task, scope.claim_token)?;
        if let (Some(agent), Some(holder)) = (scope.agent_id, task.assignee_agent_id.as_deref())
            && agent != holder
        {
            return Err(StoreError::NotAssignee {
                task_id: task.id,
                holder: holder.to_owned(),
            });
        }
        if !to_move.starts_from(task.status) || !task.status.can_transition_to(to) {
            return Err(StoreError::IllegalTransition {
                from: task.status.as_str().into(),
                to: to.as_str().into(),
            });
        }
        if task.status == to {
            return Ok(task);
        }
        if to == Status::InProgress && task.assignee_agent_id.is_none() {
            let Some(agent_id) = mover.claimant.filter(|c| !c.trim().is_empty()) else {
                return Err(StoreError::Invalid(format!(
                    "task {id} is held by nobody, so moving it to in_progress claims it: name who takes it (claim_task with assigneeAgentId, or assigneeAgentId beside the move on the board and REST)"
                )));
            };
            let claim = Claim {
                agent_id,
                runtime: None,
                from: task.status,
                paths: None,
            };
            let claimed = claim_on(tx, now, lease, id, claim, scope).await?;
            let detail = format!("{} → {to} (claimed for {agent_id})", task.status);
            operator_activity::record_on(tx, now, scope, id, OperatorAction::Moved, &detail)
                .await?;
            return Ok(claimed);
        }
        let update = Query::new(
            "UPDATE tasks SET status = ?1, updated_at = ?2,
                 completed_at = CASE WHEN CAST(?3 AS BIGINT) = 1 THEN ?2 ELSE completed_at END,
                 assignee_agent_id = CASE WHEN ?1 = 'todo' THEN NULL ELSE assignee_agent_id END,
                 assignee_runtime = CASE WHEN ?1 = 'todo' THEN NULL ELSE assignee_runtime END,
                 lease_expires_at = CASE WHEN ?1 = 'in_progress' AND assignee_agent_id IS NOT NULL
                     THEN CAST(?2 AS BIGINT) + CAST(?5 AS BIGINT) END
             WHERE id = ?4 AND status = ?6 AND assignee_agent_id IS NOT DISTINCT FROM ?7
               AND claim_token = ?8",
            &[
                &to.as_str(),
                &now,
                &to.is_terminal(),
                &id,
                &lease,
                &task.status.as_str(),
                &task.assignee_agent_id,
                &task.claim_token,
            ],
        );
        if tx.execute(update).await? == 1 {
            notify_assignee(tx, now, &task, mover.actor, &format!("moved it to {to}")).await?;
            let detail = format!("{} → {to}", task.status);
            operator_activity::record_on(tx, now, scope, id, OperatorAction::Moved, &detail)
                .await?;
            return task::require_task_on(tx, id, scope).await;
        }
    }
    Err(StoreError::Conflict)
}

/// [`move_on`] with its arguments, for [`Store::run_transaction`].
struct MoveWrite {
    id: String,
    to: TaskMove,
    actor: Option<String>,
    /// Who a move into `in_progress` claims the task for.
    claimant: Option<String>,
    scope: OwnedScope,
    now: i64,
    lease: Option<i64>,
}

impl MoveWrite {
    fn apply<'a, W: Writes + ?Sized>(
        &'a self,
        tx: &'a W,
    ) -> impl Future<Output = Result<Task>> + 'a {
        let mover = Mover {
            actor: self.actor.as_deref(),
            claimant: self.claimant.as_deref(),
        };
        let scope = self.scope.scope();
        move_on(tx, self.now, self.lease, &self.id, self.to, mover, scope)
    }
}

impl StoreWrite for MoveWrite {
    type Output = Task;

    fn run(&self, tx: &dyn Tx) -> Result<Task> {
        ready_now(self.apply(tx))
    }

    fn run_async<'a>(&'a self, tx: &'a AsyncWriteTx) -> BoxFuture<'a, Result<Task>> {
        Box::pin(self.apply(tx))
    }
}

/// A comment with its body checked and scrubbed, for [`Store::run_transaction`].
struct CommentWrite {
    task_id: String,
    new: NewComment,
    scope: OwnedScope,
    now: i64,
}

impl CommentWrite {
    fn new(
        store: &Store,
        task_id: String,
        new: NewComment,
        scope: OwnedScope,
    ) -> Result<CommentWrite> {
        if new.body.trim().is_empty() {
            return Err(StoreError::Invalid("body must not be empty".into()));
        }
        check_len("body", &new.body, MAX_BODY_CHARS)?;
        let body = scrub_text(&new.body);
        if is_only_redactions(&body) {
            return Err(StoreError::Invalid(COMMENT_ENTIRELY_REDACTED.into()));
        }
        Ok(CommentWrite {
            task_id,
            new: NewComment { body, ..new },
            scope,
            now: store.now_ms(),
        })
    }

    /// The comment rule: on a task visible in `scope` and held under its claim, if fenced;
    /// the holder hears of it unless they wrote it.
    async fn add<W: Writes + ?Sized>(&self, tx: &W) -> Result<Comment> {
        let (task_id, now, new) = (self.task_id.as_str(), self.now, &self.new);
        let scope = self.scope.scope();
        let task = task::require_task_on(tx, task_id, scope).await?;
        check_fence(&task, scope.claim_token)?;
        let id = new_id();
        let insert = Query::new(
            "INSERT INTO task_comments(id, task_id, author_agent_id, author_type, body, created_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            &[
                &id,
                &task_id,
                &new.author_agent_id,
                &new.author_type.as_str(),
                &new.body,
                &now,
            ],
        );
        tx.execute(insert).await?;
        let line = summarize(&new.body);
        let what = format!("commented \"{line}\"");
        let author = new.author_agent_id.as_deref();
        notify_assignee(tx, now, &task, author, &what).await?;
        let action = OperatorAction::Commented;
        operator_activity::record_on(tx, now, scope, task_id, action, &line).await?;
        Ok(Comment {
            id,
            task_id: task_id.to_owned(),
            author_agent_id: new.author_agent_id.clone(),
            author_type: new.author_type,
            body: new.body.clone(),
            created_at: now,
        })
    }
}

impl StoreWrite for CommentWrite {
    type Output = Comment;

    fn run(&self, tx: &dyn Tx) -> Result<Comment> {
        ready_now(self.add(tx))
    }

    fn run_async<'a>(&'a self, tx: &'a AsyncWriteTx) -> BoxFuture<'a, Result<Comment>> {
        Box::pin(self.add(tx))
    }
}

/// A dependency edge to add, for [`Store::run_transaction`].
struct LinkWrite {
    task_id: String,
    depends_on: String,
    scope: OwnedScope,
    now: i64,
}

/// Whether task `?1` is visible to a caller in team `?2` (any team when NULL).
const TASK_IN_SCOPE: &str = "SELECT EXISTS(SELECT 1 FROM tasks
     WHERE id = ?1 AND (CAST(?2 AS TEXT) IS NULL OR team_id = ?2))";

impl LinkWrite {
    fn new(store: &Store, task_id: &str, depends_on: &str, scope: OwnedScope) -> LinkWrite {
        LinkWrite {
            task_id: task_id.to_owned(),
            depends_on: depends_on.to_owned(),
            scope,
            now: store.now_ms(),
        }
    }

    async fn link<W: Writes + ?Sized>(&self, tx: &W) -> Result<()> {
        let (task_id, depends_on) = (self.task_id.as_str(), self.depends_on.as_str());
        let team = self.scope.team_id.as_deref();
        // The walk and the insert it allows run one at a time across hosts: two links
        // that each close half of a cycle must not both pass the walk. Links may cross
        // teams (operators), so the graph has one key.
        tx.serialize_on("task-graph".to_owned()).await?;
        // Both tasks, the edge and the walk, read together (one round trip on
        // PostgreSQL, with the lock in front): would `depends_on` (transitively) wait
        // for `task_id`? Then the new edge closes a cycle.
        let checks = vec![
            Query::new(TASK_IN_SCOPE, &[&task_id, &team]),
            Query::new(TASK_IN_SCOPE, &[&depends_on, &team]),
            Query::new(
                "SELECT EXISTS(SELECT 1 FROM task_deps WHERE task_id = ?1 AND depends_on_task_id = ?2)",
                &[&task_id, &depends_on],
            ),
            Query::new(
                "WITH RECURSIVE reach(id) AS (
                     SELECT depends_on_task_id FROM task_deps WHERE task_id = ?1
                     UNION
                     SELECT d.depends_on_task_id FROM task_deps d JOIN reach r ON d.task_id = r.id)
                 SELECT EXISTS(SELECT 1 FROM reach WHERE id = ?2)",
                &[&depends_on, &task_id],
            ),
        ];
        let answers = tx.query_batch(checks).await?;
        let answer = |i: usize| -> Result<bool> {
            match answers.get(i).and_then(|rows| rows.first()) {
                Some(row) => row.get::<bool>(0),
                None => Ok(false),
            }
        };
        for (i, id) in [task_id, depends_on].into_iter().enumerate() {
            if !answer(i)? {
                return Err(StoreError::NotFound(id.to_owned()));
            }
        }
        let cycle = || StoreError::Cycle {
            task_id: task_id.to_owned(),
            depends_on: depends_on.to_owned(),
        };
        if task_id == depends_on {
            return Err(cycle());
        }
        if answer(2)? {
            return Ok(());
        }
        if answer(3)? {
            return Err(cycle());
        }
        let insert = Query::new(
            "INSERT INTO task_deps(task_id, depends_on_task_id, created_at) VALUES (?1, ?2, ?3)",
            &[&task_id, &depends_on, &self.now],
        );
        tx.execute(insert).await?;
        Ok(())
    }
}

impl StoreWrite for LinkWrite {
    type Output = ();

    fn run(&self, tx: &dyn Tx) -> Result<()> {
        ready_now(self.link(tx))
    }

    fn run_async<'a>(&'a self, tx: &'a AsyncWriteTx) -> BoxFuture<'a, Result<()>> {
        Box::pin(self.link(tx))
    }
}

/// [`insert_task`] with its arguments, for [`Store::run_transaction`].
struct CreateWrite {
    new: NewTask,
    policy: CreatePolicy,
    team_id: Option<String>,
    now: i64,
}

impl CreateWrite {
    fn insert<'a, W: Writes + ?Sized>(
        &'a self,
        tx: &'a W,
    ) -> impl Future<Output = Result<Task>> + 'a {
        let scope = Scope::team(self.team_id.as_deref());
        insert_task(tx, self.now, &self.new, self.policy, scope)
    }
}

impl StoreWrite for CreateWrite {
    type Output = Task;

    fn run(&self, tx: &dyn Tx) -> Result<Task> {
        ready_now(self.insert(tx))
    }

    fn run_async<'a>(&'a self, tx: &'a AsyncWriteTx) -> BoxFuture<'a, Result<Task>> {
        Box::pin(self.insert(tx))
    }
}

/// A claim of `todo` task `id` with its arguments checked, for [`Store::run_transaction`].
struct ClaimWrite {
    id: String,
    agent_id: String,
    runtime: Option<String>,
    /// Normalised; `None` reserves the task's declared paths.
    paths: Option<Vec<String>>,
    team_id: Option<String>,
    now: i64,
    lease: Option<i64>,
}

impl ClaimWrite {
    fn new(
        store: &Store,
        id: String,
        agent_id: String,
        runtime: Option<String>,
        paths: Option<&[String]>,
        team_id: Option<String>,
    ) -> Result<ClaimWrite> {
        let paths = paths.map(reservations::normalize_paths).transpose()?;
        if agent_id.trim().is_empty() {
            return Err(StoreError::Invalid(
                "assigneeAgentId must not be empty".into(),
            ));
        }
        Ok(ClaimWrite {
            id,
            agent_id,
            runtime,
            paths,
            team_id,
            now: store.now_ms(),
            lease: store.lease_ms(),
        })
    }

    fn claim(&self) -> Claim<'_> {
        Claim {
            agent_id: &self.agent_id,
            runtime: self.runtime.as_deref(),
            from: Status::Todo,
            paths: self.paths.as_deref(),
        }
    }
}

impl StoreWrite for ClaimWrite {
    type Output = Task;

    fn run(&self, tx: &dyn Tx) -> Result<Task> {
        let scope = Scope::team(self.team_id.as_deref());
        claim_in(tx, self.now, self.lease, &self.id, self.claim(), scope)
    }

    fn run_async<'a>(&'a self, tx: &'a AsyncWriteTx) -> BoxFuture<'a, Result<Task>> {
        let scope = Scope::team(self.team_id.as_deref());
        Box::pin(claim_on(
            tx,
            self.now,
            self.lease,
            &self.id,
            self.claim(),
            scope,
        ))
    }
}

/// The key the capped creates of one team (team-less tasks share one) serialize on, so a
/// cap's count and the insert it allows never interleave with another host's.
fn cap_key(team_id: Option<&str>) -> String {
    format!("task-caps:{}", team_id.unwrap_or(""))
}

/// Root tasks of team `?2` (NULL: team-less) created after `?1`. SQLite's form names the
/// partial index, because SQLite otherwise counts through `tasks_by_parent`, visiting every
/// root task ever made, inside the write lock; the partial index holds only roots, by
/// time, so this reads just the window's roots and tests each one's team. PostgreSQL's
/// planner finds it by itself.
const RECENT_ROOTS: PerEngine = PerEngine {
    sqlite: "SELECT COUNT(*) FROM tasks INDEXED BY tasks_roots_by_time
     WHERE parent_task_id IS NULL AND created_at > ?1 AND team_id IS NOT DISTINCT FROM ?2",
    postgres: "SELECT COUNT(*) FROM tasks
     WHERE parent_task_id IS NULL AND created_at > ?1
       AND team_id IS NOT DISTINCT FROM CAST(?2 AS TEXT)",
};

impl Store {
    /// Create a task. With [`CreatePolicy::Capped`] the parent, depth, child-count and
    /// root-rate caps are checked together with the insert in one `BEGIN IMMEDIATE`.
    /// `scope` restricts which parent is visible and, when it names a team, the team the
    /// task lands in.
    pub fn create_task_in(
        &self,
        new: NewTask,
        policy: CreatePolicy,
        scope: Scope<'_>,
    ) -> Result<Task> {
        let now = self.now_ms();
        self.write(|tx| ready_now(insert_task(tx, now, &new, policy, scope)))
    }

    /// [`Store::create_task_in`] for an async caller in `team_id`'s scope (the whole
    /// board's for `None`), run the way the engine runs writes best
    /// ([`Store::run_transaction`]).
    pub async fn create_task_async(
        self: &Arc<Store>,
        new: NewTask,
        policy: CreatePolicy,
        team_id: Option<String>,
    ) -> std::result::Result<Result<Task>, RunError> {
        let create = CreateWrite {
            new,
            policy,
            team_id,
            now: self.now_ms(),
        };
        self.run_transaction(create).await
    }

    /// [`Store::create_task_in`] over the whole board.
    pub fn create_task(&self, new: NewTask, policy: CreatePolicy) -> Result<Task> {
        self.create_task_in(new, policy, Scope::ALL)
    }

    /// One task visible in `scope` (dropped ones included), or `None`; `id` may be its
    /// short id (`RED-12`).
    pub fn get_task(&self, id: &str, scope: Scope<'_>) -> Result<Option<Task>> {
        self.read(|tx| ready_now(read_task(tx, id, scope)))
    }

    /// [`Store::get_task`] for an async caller in `team_id`'s scope (any team's for
    /// `None`), run the way the engine runs reads best ([`Store::run_read_committed`]).
    pub async fn get_task_async(
        self: &Arc<Store>,
        id: String,
        team_id: Option<String>,
    ) -> std::result::Result<Result<Option<Task>>, RunError> {
        self.run_read_committed(TaskRead { id, team_id }).await
    }

    /// A task with its comments (oldest first) and ancestors (root first), read in one
    /// snapshot. The ancestors stop below the first one outside `scope`. `id` may be the
    /// task's short id (`RED-12`).
    pub fn task_detail(&self, id: &str, scope: Scope<'_>) -> Result<Option<TaskDetail>> {
        self.snapshot(|tx| ready_now(read_task_detail(tx, id, scope)))
    }

    /// [`Store::task_detail`] for an async caller in `team_id`'s scope (any team's for
    /// `None`), run the way the engine runs reads best ([`Store::run_snapshot`]).
    pub async fn task_detail_async(
        self: &Arc<Store>,
        id: String,
        team_id: Option<String>,
    ) -> std::result::Result<Result<Option<TaskDetail>>, RunError> {
        self.run_snapshot(TaskDetailRead { id, team_id }).await
    }

    /// Tasks matching `filter`, highest priority first, then oldest first (expired leases
    /// reclaimed first).
    pub fn list_tasks(&self, filter: &TaskFilter) -> Result<Vec<Task>> {
        self.expire_leases()?;
        let where_clause = filter_clause(filter);
        let status = filter.status.map(Status::as_str);
        let columns = filter_columns(filter);
        let sql = format!(
            "SELECT {columns} FROM tasks WHERE {where_clause} ORDER BY priority DESC, created_at, id"
        );
        self.read(|tx| tx.query_map(&sql, &[&filter.team_id, &status], task_from_row))
    }

    /// One page of [`Store::list_tasks`]: up to `limit` tasks (1..=[`MAX_PAGE`]) after
    /// `after`, in the same order, descriptions cut to [`LISTED_DESCRIPTION_CHARS`]. Keyset paging, walking `tasks_by_board_order`: a page
    /// costs the same on any board size, and a task created or moved between pages is
    /// neither skipped nor repeated (only a changed priority moves a task in the order).
    pub fn list_tasks_page(
        &self,
        filter: &TaskFilter,
        after: Option<&BoardCursor>,
        limit: usize,
    ) -> Result<TaskPage> {
        check_page_limit(limit)?;
        // A list that meets an expired lease reclaims it first (SPEC §12).
        self.expire_leases()?;
        self.read(|tx| ready_now(read_page(tx, filter, after, limit)))
    }

    /// [`Store::list_tasks_page`] for an async caller, run the way the engine runs reads
    /// best ([`Store::run_read_committed`]).
    pub async fn list_tasks_page_async(
        self: &Arc<Store>,
        filter: TaskFilter,
        after: Option<BoardCursor>,
        limit: usize,
    ) -> std::result::Result<Result<TaskPage>, RunError> {
        if let Err(e) = check_page_limit(limit) {
            return Ok(Err(e));
        }
        if let Err(e) = self.expire_leases_async().await? {
            return Ok(Err(e));
        }
        self.run_read_committed(PageRead {
            filter,
            after,
            limit,
        })
        .await
    }

    /// Atomically claim a `todo` task for `agent_id` (also serves `assign_task`): one
    /// conditional update that wins only when the task exists in `scope`, is `todo`,
    /// unassigned, not dropped and every dependency is done. With any number of racing
    /// claimers in any number of processes, exactly one wins; the rest get
    /// [`StoreError::Conflict`] ([`StoreError::NotReady`] while dependencies are open).
    pub fn claim_task_in(
        &self,
        id: &str,
        agent_id: &str,
        runtime: Option<&str>,
        scope: Scope<'_>,
    ) -> Result<Task> {
        self.claim_reserving(id, agent_id, runtime, None, scope)
    }

    /// [`Store::claim_task_in`] reserving `paths` (SPEC §19; `None`: the task's declared
    /// ones) for the claim's lease, in the same transaction: refused as
    /// [`StoreError::Reserved`] when another agent holds an overlapping reservation on the
    /// task's team. Named paths become the task's paths.
    pub fn claim_reserving(
        &self,
        id: &str,
        agent_id: &str,
        runtime: Option<&str>,
        paths: Option<&[String]>,
        scope: Scope<'_>,
    ) -> Result<Task> {
        let claim = ClaimWrite::new(
            self,
            id.into(),
            agent_id.into(),
            runtime.map(str::to_owned),
            paths,
            scope.team_id.map(str::to_owned),
        )?;
        self.write(|tx| claim.run(tx))
    }

    /// [`Store::claim_reserving`] for an async caller in `team_id`'s scope (the whole
    /// board's for `None`), run the way the engine runs writes best
    /// ([`Store::run_transaction`]).
    pub async fn claim_reserving_async(
        self: &Arc<Store>,
        id: String,
        agent_id: String,
        runtime: Option<String>,
        paths: Option<Vec<String>>,
        team_id: Option<String>,
    ) -> std::result::Result<Result<Task>, RunError> {
        let claim = ClaimWrite::new(self, id, agent_id, runtime, paths.as_deref(), team_id);
        match claim {
            Ok(claim) => self.run_transaction(claim).await,
            Err(e) => Ok(Err(e)),
        }
    }

    /// [`Store::claim_task_in`] over the whole board.
    pub fn claim_task(&self, id: &str, agent_id: &str, runtime: Option<&str>) -> Result<Task> {
        self.claim_task_in(id, agent_id, runtime, Scope::ALL)
    }

    /// Move a task to `to` if the state machine allows it. Entering `done`/`cancelled`
    /// stamps `completed_at`; entering `todo` clears the assignee. When `actor` is not the
    /// assignee, the assignee gets an inbox note. With an agent in `scope`, a task another
    /// agent holds is refused ([`StoreError::NotAssignee`]); so in the two below. A task
    /// other hosts keep changing under the move is [`StoreError::Conflict`].
    ///
    /// `in_progress` is entered only by a claim (SPEC §16): moving a task nobody holds
    /// there claims it for `claimant` under the claim's rules (readiness, lease, a new
    /// `claimToken`; refused as [`StoreError::NotReady`] or [`StoreError::Conflict`]),
    /// and without a claimant it is refused as [`StoreError::Invalid`].
    pub fn set_status(
        &self,
        id: &str,
        to: Status,
        actor: Option<&str>,
        claimant: Option<&str>,
        scope: Scope<'_>,
    ) -> Result<Task> {
        self.transition(id, TaskMove::To(to), Mover { actor, claimant }, scope)
    }

    /// Release an `in_progress` task back to `todo`, clearing its assignee.
    pub fn release_task(&self, id: &str, actor: Option<&str>, scope: Scope<'_>) -> Result<Task> {
        self.transition(id, TaskMove::Release, Mover::acting(actor), scope)
    }

    /// Move a `blocked` task back to `todo` (only from `blocked`).
    pub fn unblock_task(&self, id: &str, actor: Option<&str>, scope: Scope<'_>) -> Result<Task> {
        self.transition(id, TaskMove::Unblock, Mover::acting(actor), scope)
    }

    fn transition(
        &self,
        id: &str,
        to: TaskMove,
        mover: Mover<'_>,
        scope: Scope<'_>,
    ) -> Result<Task> {
        let (now, lease) = (self.now_ms(), self.lease_ms());
        self.write(|tx| ready_now(move_on(tx, now, lease, id, to, mover, scope)))
    }

    /// A status move ([`Store::set_status`], [`Store::release_task`],
    /// [`Store::unblock_task`]) by `actor`, the claimant of a move into `in_progress`, for
    /// an async caller in `scope`, run the way the engine runs writes best
    /// ([`Store::run_transaction`]).
    pub async fn move_task_async(
        self: &Arc<Store>,
        id: String,
        to: TaskMove,
        actor: Option<String>,
        scope: OwnedScope,
    ) -> std::result::Result<Result<Task>, RunError> {
        // The agent moving is the one a move into `in_progress` claims for.
        let claimant = actor.clone();
        let write = MoveWrite {
            id,
            to,
            actor,
            claimant,
            scope,
            now: self.now_ms(),
            lease: self.lease_ms(),
        };
        self.run_transaction(write).await
    }

    /// [`Store::set_status`] for an async caller in `scope`, run the way the engine runs
    /// writes best ([`Store::run_transaction`]).
    pub async fn set_status_async(
        self: &Arc<Store>,
        id: String,
        to: Status,
        actor: Option<String>,
        claimant: Option<String>,
        scope: OwnedScope,
    ) -> std::result::Result<Result<Task>, RunError> {
        let write = MoveWrite {
            id,
            to: TaskMove::To(to),
            actor,
            claimant,
            scope,
            now: self.now_ms(),
            lease: self.lease_ms(),
        };
        self.run_transaction(write).await
    }

    /// Add a comment; the assignee gets an inbox note when someone else wrote it.
    pub fn add_comment(&self, task_id: &str, new: NewComment, scope: Scope<'_>) -> Result<Comment> {
        let comment = CommentWrite::new(self, task_id.into(), new, scope.into())?;
        self.write(|tx| comment.run(tx))
    }

    /// [`Store::add_comment`] for an async caller in `scope`, run the way the engine runs
    /// writes best ([`Store::run_transaction`]).
    pub async fn add_comment_async(
        self: &Arc<Store>,
        task_id: String,
        new: NewComment,
        scope: OwnedScope,
    ) -> std::result::Result<Result<Comment>, RunError> {
        match CommentWrite::new(self, task_id, new, scope) {
            Ok(comment) => self.run_transaction(comment).await,
            Err(e) => Ok(Err(e)),
        }
    }

    /// Make `task_id` depend on `depends_on`. Self-links and links that would close a cycle
    /// (direct or transitive) are refused inside the write transaction; re-linking an
    /// existing edge is a no-op.
    pub fn link_task(&self, task_id: &str, depends_on: &str, scope: Scope<'_>) -> Result<()> {
        let link = LinkWrite::new(self, task_id, depends_on, scope.into());
        self.write(|tx| link.run(tx))
    }

    /// [`Store::link_task`] for an async caller, run the way the engine runs writes best
    /// ([`Store::run_transaction`]).
    pub async fn link_task_async(
        self: &Arc<Store>,
        task_id: &str,
        depends_on: &str,
        scope: OwnedScope,
    ) -> std::result::Result<Result<()>, RunError> {
        let link = LinkWrite::new(self, task_id, depends_on, scope);
        self.run_transaction(link).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transition_table_matches_the_spec() {
        use Status::*;
        let legal: &[(Status, &[Status])] = &[
            (Backlog, &[Todo, Blocked, Cancelled]),
            (Todo, &[InProgress, Blocked, Backlog, Cancelled]),
            (InProgress, &[InReview, Done, Blocked, Todo, Cancelled]),
            (InReview, &[Done, InProgress, Blocked, Cancelled]),
            (Blocked, &[Todo, InProgress, Backlog, Cancelled]),
            (Done, &[]),
            (Cancelled, &[]),
        ];
        for (from, tos) in legal {
            for to in Status::ALL {
                let expected = *from == to || tos.contains(&to);
                assert_eq!(from.can_transition_to(to), expected, "{from} -> {to}");
            }
        }
    }

    #[test]
    fn status_round_trips_through_its_wire_name() {
        for s in Status::ALL {
            assert_eq!(s.as_str().parse::<Status>().unwrap(), s);
        }
        assert!("doing".parse::<Status>().is_err());
    }
}

/// Moves and claims racing another process's write to the same row, on the engine
/// `CLAWBOO_TEST_BACKEND` names (SQLite unless `postgres`).
#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod race_tests {
    use std::time::Duration;

    use super::*;

    /// Two stores on one fresh database, as two processes would open it; the guard keeps
    /// the database until the test ends.
    fn two_stores() -> (Box<dyn std::any::Any>, Store, Store) {
        if std::env::var("CLAWBOO_TEST_BACKEND").is_ok_and(|b| b == "postgres") {
            let db = crate::testing::TestStore::postgres()
                .expect("CLAWBOO_TEST_BACKEND=postgres needs CLAWBOO_TEST_POSTGRES_URL");
            let (one, other) = (db.store(), db.reopen());
            (Box::new(db), one, other)
        } else {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("t.db");
            let (one, other) = (Store::open(&path).unwrap(), Store::open(&path).unwrap());
            (Box::new(dir), one, other)
        }
    }

    /// Run `write` in `other`'s transaction and, while it is still open, `race` on a
    /// thread: `race` reads the row before `write` commits and writes it after.
    fn racing<T: Send + 'static>(
        other: &Store,
        write: &str,
        id: &str,
        race: impl FnOnce() -> T + Send + 'static,
    ) -> T {
        other
            .write(|tx| {
                tx.execute(write, &[&id])?;
                let racer = std::thread::spawn(race);
                // Time for the racer to read the old row and block on this one (on SQLite,
                // on the write lock); should it be slower, it reads the new row and the
                // outcome holds.
                std::thread::sleep(Duration::from_millis(300));
                Ok::<_, StoreError>(racer)
            })
            .unwrap()
            .join()
            .unwrap()
    }

    #[test]
    fn a_move_never_overwrites_a_release_it_did_not_see() {
        let (_db, store, other) = two_stores();
        let store = std::sync::Arc::new(store);
        let task = store
            .create_task(NewTask::titled("t"), CreatePolicy::Uncapped)
            .unwrap();
        store.claim_task(&task.id, "a1", None).unwrap();
        let mover = store.clone();
        let id = task.id.clone();
        let moved = racing(
            &other,
            "UPDATE tasks SET status = 'todo', assignee_agent_id = NULL, lease_expires_at = NULL
             WHERE id = ?1",
            &task.id,
            move || {
                mover.set_status(
                    &id,
                    Status::Done,
                    Some("a1"),
                    Some("a1"),
                    Scope::bound(None, Some("a1")),
                )
            },
        );
        assert!(
            matches!(&moved, Err(StoreError::IllegalTransition { from, .. }) if from == "todo"),
            "{moved:?}"
        );
        let now = store.get_task(&task.id, Scope::ALL).unwrap().unwrap();
        assert_eq!((now.status, now.completed_at), (Status::Todo, None));
    }

    #[test]
    fn a_claim_waiting_on_another_process_claim_loses_with_a_conflict() {
        let (_db, store, other) = two_stores();
        let store = std::sync::Arc::new(store);
        let task = store
            .create_task(NewTask::titled("t"), CreatePolicy::Uncapped)
            .unwrap();
        let claimer = store.clone();
        let id = task.id.clone();
        let claimed = racing(
            &other,
            "UPDATE tasks SET status = 'in_progress', assignee_agent_id = 'b1',
                 claim_token = claim_token + 1 WHERE id = ?1",
            &task.id,
            move || claimer.claim_task(&id, "a1", None),
        );
        assert!(matches!(claimed, Err(StoreError::Conflict)), "{claimed:?}");
        let now = store.get_task(&task.id, Scope::ALL).unwrap().unwrap();
        assert_eq!(now.assignee_agent_id.as_deref(), Some("b1"));
    }
}

/// The board's read-then-write rules on PostgreSQL, where writers of two hosts run side by
/// side: set `CLAWBOO_TEST_POSTGRES_URL`; without it these tests say so and pass nothing.
#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod postgres_tests {
    use std::sync::{Arc, Barrier};

    use super::*;
    use crate::testing::TestStore;

    /// Run `each(host, i)` on `threads` threads, half on each of the two hosts, all
    /// released at once; the results in thread order.
    fn race<T: Send + 'static>(
        hosts: &[Arc<Store>; 2],
        threads: usize,
        each: impl Fn(&Store, usize) -> T + Send + Sync + 'static,
    ) -> Vec<T> {
        let start = Arc::new(Barrier::new(threads));
        let each = Arc::new(each);
        let handles: Vec<_> = (0..threads)
            .map(|i| {
                let host = Arc::clone(&hosts[i % 2]);
                let (start, each) = (Arc::clone(&start), Arc::clone(&each));
                std::thread::spawn(move || {
                    start.wait();
                    each(&host, i)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    }

    fn hosts(test: &TestStore) -> [Arc<Store>; 2] {
        [Arc::new(test.store()), Arc::new(test.reopen())]
    }

    #[test]
    fn capped_roots_of_one_team_stop_at_the_cap_across_hosts() {
        let Some(test) = TestStore::postgres() else {
            return;
        };
        let hosts = hosts(&test);
        let outcomes = race(&hosts, 40, |store, i| {
            let new = NewTask {
                team_id: Some("t".into()),
                ..NewTask::titled(format!("root {i}"))
            };
            store.create_task(new, CreatePolicy::Capped)
        });
        let created = outcomes.iter().filter(|o| o.is_ok()).count();
        assert_eq!(created as i64, MAX_ROOTS_PER_WINDOW);
        for refused in outcomes.iter().filter_map(|o| o.as_ref().err()) {
            assert!(
                matches!(
                    refused,
                    StoreError::Cap {
                        reason: CapReason::RootRateCap,
                        ..
                    }
                ),
                "{refused:?}"
            );
        }
    }

    #[test]
    fn two_links_that_would_close_a_cycle_never_both_land() {
        let Some(test) = TestStore::postgres() else {
            return;
        };
        let hosts = hosts(&test);
        for round in 0..20 {
            let a = hosts[0]
                .create_task(NewTask::titled(format!("a{round}")), CreatePolicy::Uncapped)
                .unwrap()
                .id;
            let b = hosts[0]
                .create_task(NewTask::titled(format!("b{round}")), CreatePolicy::Uncapped)
                .unwrap()
                .id;
            let outcomes = race(&hosts, 2, move |store, i| {
                let (task, on) = if i == 0 { (&a, &b) } else { (&b, &a) };
                store.link_task(task, on, Scope::ALL)
            });
            let linked = outcomes.iter().filter(|o| o.is_ok()).count();
            assert_eq!(linked, 1, "round {round}: {outcomes:?}");
            assert!(
                outcomes
                    .iter()
                    .any(|o| matches!(o, Err(StoreError::Cycle { .. })))
            );
        }
    }

    #[test]
    fn a_move_refused_to_others_never_lands_on_a_claim_it_did_not_see() {
        let Some(test) = TestStore::postgres() else {
            return;
        };
        let hosts = hosts(&test);
        for round in 0..20 {
            let id = hosts[0]
                .create_task(NewTask::titled(format!("t{round}")), CreatePolicy::Uncapped)
                .unwrap()
                .id;
            let outcomes = race(&hosts, 2, move |store, i| {
                if i == 0 {
                    store.claim_task(&id, "x", None).map(|_| ())
                } else {
                    store
                        .set_status(
                            &id,
                            Status::Cancelled,
                            Some("y"),
                            Some("y"),
                            Scope::bound(None, Some("y")),
                        )
                        .map(|_| ())
                }
            });
            // Either the claim came first (the cancel is another agent's move on x's task)
            // or the cancel did (nothing is left to claim): never both.
            assert_eq!(
                outcomes.iter().filter(|o| o.is_ok()).count(),
                1,
                "round {round}: {outcomes:?}"
            );
        }
    }
}
