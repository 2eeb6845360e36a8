//! The operator's own activity on the board: each move, edit, drop or comment the operator
//! makes (REST and the board, the CLI: a [`Scope`] with an operator) is one
//! `operator_activity` row, written in the same transaction as the change, so the audit
//! view lists what people did beside what agents' tools did. A kind of its own, not a
//! comment whose text says so: the audit reads a column, never parses prose, and a comment
//! an agent writes can never pass for the operator's.

use std::sync::Arc;

use serde::Serialize;

use crate::db::DbRow;
use crate::error::{Result, StoreError};
use crate::reads::{Query, RowsRead, StoreRead};
use crate::run::RunError;
use crate::task::Scope;
use crate::writes::Writes;
use crate::{Store, new_id};

/// Most rows one [`Store::operator_activity`] call returns.
pub const MAX_ACTIVITY_PAGE: usize = 500;

/// What the operator did to a task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OperatorAction {
    /// Moved it to another status.
    Moved,
    /// Changed its title, description or priority.
    Edited,
    /// Commented on it.
    Commented,
    /// Dropped it (soft delete).
    Dropped,
    /// Restored it after a drop.
    Restored,
}

impl OperatorAction {
    /// The stored and wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            OperatorAction::Moved => "moved",
            OperatorAction::Edited => "edited",
            OperatorAction::Commented => "commented",
            OperatorAction::Dropped => "dropped",
            OperatorAction::Restored => "restored",
        }
    }
}

/// One thing the operator did, as the audit view lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OperatorActivity {
    pub id: String,
    pub task_id: String,
    /// The task's title now.
    pub task_title: String,
    /// The task's team; `None` for a team-less task.
    pub team_id: Option<String>,
    /// The surface the operator acted through (`api`: REST and the board; `cli`).
    pub actor: String,
    /// `moved`, `edited`, `commented`, `dropped` or `restored`.
    pub action: String,
    /// What changed: "todo → done", the fields edited, a comment's first line.
    pub detail: String,
    pub created_at: i64,
}

/// Record `action` on `task_id` inside the caller's write when `scope` is the operator's;
/// nothing otherwise (agents' and the server's own writes are not the operator's).
pub(crate) async fn record_on<W: Writes + ?Sized>(
    tx: &W,
    now: i64,
    scope: Scope<'_>,
    task_id: &str,
    action: OperatorAction,
    detail: &str,
) -> Result<()> {
    let Some(actor) = scope.operator else {
        return Ok(());
    };
    let insert = Query::new(
        "INSERT INTO operator_activity(id, task_id, actor, action, detail, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        &[&new_id(), &task_id, &actor, &action.as_str(), &detail, &now],
    );
    tx.execute(insert).await?;
    Ok(())
}

fn activity_from_row(r: &dyn DbRow) -> Result<OperatorActivity> {
    Ok(OperatorActivity {
        id: r.get(0)?,
        task_id: r.get(1)?,
        task_title: r.get(2)?,
        team_id: r.get(3)?,
        actor: r.get(4)?,
        action: r.get(5)?,
        detail: r.get(6)?,
        created_at: r.get(7)?,
    })
}

impl Store {
    /// The operator's newest activity, newest first: every team's and team-less tasks'
    /// when `team_id` is `None`, else only that team's tasks. `limit` must be
    /// 1..=[`MAX_ACTIVITY_PAGE`].
    pub fn operator_activity(
        &self,
        team_id: Option<&str>,
        limit: usize,
    ) -> Result<Vec<OperatorActivity>> {
        let read = activity_read(team_id, limit)?;
        self.read(|tx| read.run(tx))
    }

    /// [`Store::operator_activity`] for an async caller (the board's audit view), run the
    /// way the engine runs reads best ([`Store::run_read_committed`]).
    pub async fn operator_activity_async(
        self: &Arc<Store>,
        team_id: Option<&str>,
        limit: usize,
    ) -> std::result::Result<Result<Vec<OperatorActivity>>, RunError> {
        match activity_read(team_id, limit) {
            Ok(read) => self.run_read_committed(read).await,
            Err(e) => Ok(Err(e)),
        }
    }
}

/// A page of the operator's activity (`limit` checked), for [`Store::run_read_committed`].
fn activity_read(team_id: Option<&str>, limit: usize) -> Result<RowsRead<OperatorActivity>> {
    if !(1..=MAX_ACTIVITY_PAGE).contains(&limit) {
        return Err(StoreError::Invalid(format!(
            "limit {limit} is out of range; use 1..={MAX_ACTIVITY_PAGE}"
        )));
    }
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    Ok(RowsRead {
        query: Query::new(
            "SELECT a.id, a.task_id, t.title, t.team_id, a.actor, a.action, a.detail,
                    a.created_at
             FROM operator_activity a JOIN tasks t ON t.id = a.task_id
             WHERE CAST(?1 AS TEXT) IS NULL OR t.team_id = ?1
             ORDER BY a.created_at DESC, a.id DESC LIMIT ?2",
            &[&team_id, &limit],
        ),
        decode: activity_from_row,
    })
}
