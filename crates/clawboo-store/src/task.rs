//! The board's task model: what a task is ([`Task`], its [`Status`]), who may see it
//! ([`Scope`]), and how one is read from a row, so the board's operations and the leases
//! over them share one definition without depending on each other's rules.

use std::fmt;
use std::str::FromStr;

use serde::Serialize;

use crate::db::DbRow;
use crate::error::{Result, StoreError};
use crate::reads::{Query, Reads};
use crate::reservations;

/// Longest accepted title, in characters.
pub const MAX_TITLE_CHARS: usize = 500;
/// Longest accepted description or comment body, in characters.
pub const MAX_BODY_CHARS: usize = 100_000;

/// A task's place in the workflow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Backlog,
    Todo,
    InProgress,
    InReview,
    Blocked,
    Done,
    Cancelled,
}

impl Status {
    /// Every status, in board-column order.
    pub const ALL: [Status; 7] = [
        Status::Backlog,
        Status::Todo,
        Status::InProgress,
        Status::InReview,
        Status::Blocked,
        Status::Done,
        Status::Cancelled,
    ];

    /// The wire name (`in_progress`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Backlog => "backlog",
            Status::Todo => "todo",
            Status::InProgress => "in_progress",
            Status::InReview => "in_review",
            Status::Blocked => "blocked",
            Status::Done => "done",
            Status::Cancelled => "cancelled",
        }
    }

    /// Whether a task may move from `self` to `to`. A move to the same status is an
    /// allowed no-op; `done` and `cancelled` are terminal.
    pub fn can_transition_to(self, to: Status) -> bool {
        use Status::*;
        self == to
            || matches!(
                (self, to),
                (Backlog, Todo | Blocked | Cancelled)
                    | (Todo, InProgress | Blocked | Backlog | Cancelled)
                    | (InProgress, InReview | Done | Blocked | Todo | Cancelled)
                    | (InReview, Done | InProgress | Blocked | Cancelled)
                    | (Blocked, Todo | InProgress | Backlog | Cancelled)
            )
    }

    /// Whether entering this status stamps `completed_at`.
    pub fn is_terminal(self) -> bool {
        matches!(self, Status::Done | Status::Cancelled)
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Status {
    type Err = StoreError;
    fn from_str(s: &str) -> Result<Status> {
        Status::ALL
            .into_iter()
            .find(|st| st.as_str() == s)
            .ok_or_else(|| StoreError::Invalid(format!("unknown status: {s}")))
    }
}

/// A board task. `depends_on` lists the ids this task waits for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Task {
    pub id: String,
    /// Its short id (`RED-12`): its team's key and its number in that team, given at
    /// creation and never changed ([`crate::short_ids`]). Only a row written around the
    /// store (by hand, in SQL) has none, until the store next opens and numbers it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub short_id: Option<String>,
    pub title: String,
    pub description: Option<String>,
    pub status: Status,
    pub priority: i64,
    pub team_id: Option<String>,
    pub assignee_agent_id: Option<String>,
    pub assignee_runtime: Option<String>,
    pub parent_task_id: Option<String>,
    pub dropped: bool,
    pub tenant_id: Option<String>,
    pub created_at: i64,
    pub updated_at: i64,
    pub completed_at: Option<i64>,
    /// When the holder's lease runs out (SPEC §12); set only while claimed `in_progress`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lease_expires_at: Option<i64>,
    /// Grows by one at every claim of this task: the fencing token of the current claim.
    pub claim_token: i64,
    /// When an expired lease last put this task back to `todo` (cleared by the next claim).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reclaimed_at: Option<i64>,
    /// Whose lease that was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reclaimed_from: Option<String>,
    pub depends_on: Vec<String>,
    /// Glob patterns of the repository this task works on (SPEC §19): declared at
    /// creation or named by its claim, and reserved while it is claimed `in_progress`
    /// under a live lease.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub paths: Vec<String>,
}

/// The caller's view of the board: with a team, tasks of other teams are answered exactly
/// as tasks that do not exist, and never show as an ancestor or a dependency; with an
/// agent, a task another agent holds may not be moved (operators are unbound).
#[derive(Debug, Clone, Copy, Default)]
pub struct Scope<'a> {
    pub team_id: Option<&'a str>,
    pub agent_id: Option<&'a str>,
    /// The caller acts under this claim (`claimToken`): a move or comment on a task no
    /// longer held under it is refused ([`StoreError::StaleClaim`]).
    pub claim_token: Option<i64>,
    /// The operator acting through this surface (`api`: REST and the board; `cli`): its
    /// moves, edits, drops and comments are each recorded as operator activity
    /// (`operator_activity`, listed by [`crate::Store::operator_activity`]) in the same
    /// transaction. `None` for agents and the server's own writes.
    pub operator: Option<&'a str>,
}

impl<'a> Scope<'a> {
    /// The whole board, unbound (an operator's reads, the server's own writes, an unbound
    /// session): nothing it changes is recorded as the operator's activity.
    pub const ALL: Scope<'static> = Scope {
        team_id: None,
        agent_id: None,
        claim_token: None,
        operator: None,
    };

    /// The whole board, as the operator acting through `surface` (`api`, `cli`).
    pub fn operator(surface: &'a str) -> Scope<'a> {
        Scope {
            operator: Some(surface),
            ..Scope::ALL
        }
    }

    /// Only `team_id`'s tasks.
    pub fn team(team_id: Option<&'a str>) -> Scope<'a> {
        Scope {
            team_id,
            ..Scope::ALL
        }
    }

    /// Only `team_id`'s tasks, acting as `agent_id` (a session's binding).
    pub fn bound(team_id: Option<&'a str>, agent_id: Option<&'a str>) -> Scope<'a> {
        Scope {
            team_id,
            agent_id,
            ..Scope::ALL
        }
    }

    /// This scope, acting under the claim `token` names (none: unfenced).
    pub fn fenced(self, token: Option<i64>) -> Scope<'a> {
        Scope {
            claim_token: token,
            ..self
        }
    }
}

/// Every task column, then its dependency ids joined by [`DEP_SEPARATOR`] (one correlated
/// lookup on `task_deps`' primary key per row, so one statement loads tasks with their deps);
/// `$parent` is the expression read as the parent's id, and `$dep_join` and `$dep_test`
/// narrow which dependencies are listed.
macro_rules! task_columns {
    ($parent:literal, $dep_join:literal, $dep_test:literal) => {
        concat!(
            "id, title, description, status, priority, team_id, assignee_agent_id, \
             assignee_runtime, ",
            $parent,
            ", dropped, tenant_id, created_at, updated_at, \
             completed_at, lease_expires_at, claim_token, reclaimed_at, reclaimed_from, paths, \
             short_id, (SELECT string_agg(d.depends_on_task_id, '\u{1f}' \
             ORDER BY d.created_at, d.depends_on_task_id) FROM task_deps d",
            $dep_join,
            " WHERE d.task_id = tasks.id",
            $dep_test,
            ")"
        )
    };
}

/// [`task_columns!`] with every parent and dependency, for operators.
macro_rules! all_task_columns {
    () => {
        task_columns!("parent_task_id", "", "")
    };
}

/// [`task_columns!`] for a caller bound to a team, where every task it may see is of that
/// team: the parent's id only when the parent is of the task's own team (the id of a task
/// the caller may not see is never shown, not even as a `parentTaskId`), and only
/// dependencies of the task's own team. The parent's column is named: PostgreSQL would
/// name it `id`, after the subquery's column, and a list's `ORDER BY … id` would be
/// ambiguous.
macro_rules! scoped_task_columns {
    () => {
        task_columns!(
            "(SELECT parent.id FROM tasks parent WHERE parent.id = tasks.parent_task_id \
             AND parent.team_id IS NOT DISTINCT FROM tasks.team_id) AS parent_task_id",
            " JOIN tasks dep ON dep.id = d.depends_on_task_id",
            " AND dep.team_id IS NOT DISTINCT FROM tasks.team_id"
        )
    };
}

/// [`all_task_columns!`], for operators.
pub(crate) const TASK_COLUMNS: &str = all_task_columns!();

/// [`scoped_task_columns!`], for a caller bound to a team.
const SCOPED_TASK_COLUMNS: &str = scoped_task_columns!();

/// The task columns a caller in `scope` may read.
pub(crate) fn columns_for(scope: Scope<'_>) -> &'static str {
    if scope.team_id.is_some() {
        SCOPED_TASK_COLUMNS
    } else {
        TASK_COLUMNS
    }
}

/// Joins dependency ids in [`TASK_COLUMNS`] (ASCII unit separator: never in an id we make).
const DEP_SEPARATOR: char = '\u{1f}';

/// `task` has a dependency that is not done.
pub(crate) const UNFINISHED_DEP: &str = "EXISTS (SELECT 1 FROM task_deps d JOIN tasks dep ON dep.id = d.depends_on_task_id \
     WHERE d.task_id = tasks.id AND dep.status <> 'done')";

pub(crate) fn task_from_row(r: &dyn DbRow) -> Result<Task> {
    let status: String = r.get(3)?;
    Ok(Task {
        id: r.get(0)?,
        title: r.get(1)?,
        description: r.get(2)?,
        status: status.parse()?,
        priority: r.get(4)?,
        team_id: r.get(5)?,
        assignee_agent_id: r.get(6)?,
        assignee_runtime: r.get(7)?,
        parent_task_id: r.get(8)?,
        dropped: r.get(9)?,
        tenant_id: r.get(10)?,
        created_at: r.get(11)?,
        updated_at: r.get(12)?,
        completed_at: r.get(13)?,
        lease_expires_at: r.get(14)?,
        claim_token: r.get(15)?,
        reclaimed_at: r.get(16)?,
        reclaimed_from: r.get(17)?,
        paths: reservations::split(r.get::<Option<String>>(18)?.as_deref()),
        short_id: r.get(19)?,
        depends_on: r
            .get::<Option<String>>(20)?
            .map(|joined| joined.split(DEP_SEPARATOR).map(str::to_owned).collect())
            .unwrap_or_default(),
    })
}

/// Load one task visible in `scope`, with the ids of its dependencies visible in `scope`.
pub(crate) async fn load_task<R: Reads + ?Sized>(
    tx: &R,
    id: &str,
    scope: Scope<'_>,
) -> Result<Option<Task>> {
    let query = Query::new(load_task_sql(scope), &[&id, &scope.team_id]);
    Ok(tx.query_map(query, task_from_row).await?.pop())
}

/// The statement that loads one task (`?1`) as a caller in `scope` (`?2`) may see it.
pub(crate) fn load_task_sql(scope: Scope<'_>) -> &'static str {
    if scope.team_id.is_some() {
        LOAD_SCOPED_TASK
    } else {
        LOAD_TASK
    }
}

/// One task by id (`?1`) in team `?2` (any team when NULL): [`TASK_COLUMNS`] and
/// [`SCOPED_TASK_COLUMNS`] written out, so each statement's text is a constant.
const LOAD_TASK: &str = concat!(
    "SELECT ",
    all_task_columns!(),
    " FROM tasks WHERE id = ?1 AND (CAST(?2 AS TEXT) IS NULL OR team_id = ?2)"
);
const LOAD_SCOPED_TASK: &str = concat!(
    "SELECT ",
    scoped_task_columns!(),
    " FROM tasks WHERE id = ?1 AND (CAST(?2 AS TEXT) IS NULL OR team_id = ?2)"
);

/// The task visible in `scope`, or [`StoreError::NotFound`], on any transaction.
pub(crate) async fn require_task_on<R: Reads + ?Sized>(
    tx: &R,
    id: &str,
    scope: Scope<'_>,
) -> Result<Task> {
    load_task(tx, id, scope)
        .await?
        .ok_or_else(|| StoreError::NotFound(id.to_owned()))
}

/// Refuse a move or comment fenced by a claim that has ended: `token` is stale once the
/// task was claimed again, or when nobody holds it any more.
pub(crate) fn check_fence(task: &Task, token: Option<i64>) -> Result<()> {
    match token {
        Some(token) if token != task.claim_token || task.assignee_agent_id.is_none() => {
            Err(StoreError::StaleClaim {
                task_id: task.id.clone(),
                token,
                current: task.claim_token,
                held: task
                    .assignee_agent_id
                    .as_deref()
                    .map_or_else(|| ", unclaimed".to_owned(), |h| format!(", held by {h}")),
            })
        }
        _ => Ok(()),
    }
}
