//! An operator's edits of a task (REST `PATCH`): its title, description and priority, and
//! dropping it from the board (or restoring it), each one write that lands in the
//! operator's activity, written once as `async` code over [`Writes`].

use std::sync::Arc;

use futures_util::future::BoxFuture;

use crate::board::{MAX_BODY_CHARS, MAX_TITLE_CHARS, OwnedScope, TaskPatch, check_len};
use crate::db::Tx;
use crate::error::{Result, StoreError};
use crate::operator_activity::{self, OperatorAction};
use crate::reads::{Query, ready_now};
use crate::run::RunError;
use crate::scrub::scrub_text;
use crate::task::{Scope, Task, load_task_sql, task_from_row};
use crate::writes::{AsyncWriteTx, StoreWrite, Writes};
use crate::{Store, short_ids};

/// Change task `?5` seen from team `?6` (any team when NULL); a task out of scope is
/// left alone.
const EDIT_FIELDS: &str = "UPDATE tasks SET title = COALESCE(?1, title),
         description = COALESCE(?2, description), priority = COALESCE(?3, priority),
         updated_at = ?4
     WHERE id = ?5 AND (CAST(?6 AS TEXT) IS NULL OR team_id = ?6)";

/// Drop (`?1`) or restore task `?3` seen from team `?4`.
const SET_DROPPED: &str = "UPDATE tasks SET dropped = ?1, updated_at = ?2
     WHERE id = ?3 AND (CAST(?4 AS TEXT) IS NULL OR team_id = ?4)";

/// The task the last query of `answers` read, or [`StoreError::NotFound`].
fn last_task(answers: Vec<Vec<crate::reads::Row>>, id: &str) -> Result<Task> {
    match answers.last().and_then(|rows| rows.first()) {
        Some(row) => task_from_row(&**row),
        None => Err(StoreError::NotFound(id.to_owned())),
    }
}

/// A [`TaskPatch`] checked and scrubbed, for [`Store::run_transaction`].
struct PatchWrite {
    id: String,
    title: Option<String>,
    description: Option<String>,
    priority: Option<i64>,
    scope: OwnedScope,
    now: i64,
}

impl PatchWrite {
    fn new(store: &Store, id: &str, patch: &TaskPatch, scope: OwnedScope) -> Result<PatchWrite> {
        if let Some(title) = &patch.title {
            if title.trim().is_empty() {
                return Err(StoreError::Invalid("title must not be empty".into()));
            }
            check_len("title", title, MAX_TITLE_CHARS)?;
        }
        if let Some(d) = &patch.description {
            check_len("description", d, MAX_BODY_CHARS)?;
        }
        Ok(PatchWrite {
            id: id.to_owned(),
            title: patch.title.as_deref().map(|t| scrub_text(t.trim())),
            description: patch.description.as_deref().map(scrub_text),
            priority: patch.priority,
            scope,
            now: store.now_ms(),
        })
    }

    /// The edit and the task as it then stands, in one round trip on PostgreSQL; then
    /// the operator's activity naming the fields edited.
    async fn edit<W: Writes + ?Sized>(&self, tx: &W) -> Result<Task> {
        let (id, scope) = (self.id.as_str(), self.scope.scope());
        let batch = vec![
            Query::new(
                EDIT_FIELDS,
                &[
                    &self.title,
                    &self.description,
                    &self.priority,
                    &self.now,
                    &id,
                    &scope.team_id,
                ],
            ),
            Query::new(load_task_sql(scope), &[&id, &scope.team_id]),
        ];
        let task = last_task(tx.query_batch(batch).await?, id)?;
        let edited: Vec<&str> = [
            ("title", self.title.is_some()),
            ("description", self.description.is_some()),
            ("priority", self.priority.is_some()),
        ]
        .into_iter()
        .filter_map(|(field, named)| named.then_some(field))
        .collect();
        if !edited.is_empty() {
            let detail = edited.join(", ");
            let action = OperatorAction::Edited;
            operator_activity::record_on(tx, self.now, scope, id, action, &detail).await?;
        }
        Ok(task)
    }
}

impl StoreWrite for PatchWrite {
    type Output = Task;

    fn run(&self, tx: &dyn Tx) -> Result<Task> {
        ready_now(self.edit(tx))
    }

    fn run_async<'a>(&'a self, tx: &'a AsyncWriteTx) -> BoxFuture<'a, Result<Task>> {
        Box::pin(self.edit(tx))
    }
}

/// A task dropped from the board or restored to it, for [`Store::run_transaction`].
struct DropWrite {
    /// Its id or short id.
    reference: String,
    dropped: bool,
    scope: OwnedScope,
    now: i64,
}

impl DropWrite {
    /// The task before, the change and the task after, in one round trip on PostgreSQL;
    /// then the operator's activity when the change changed something.
    async fn apply<W: Writes + ?Sized>(&self, tx: &W) -> Result<Task> {
        let scope = self.scope.scope();
        let id = short_ids::resolve_on(tx, &self.reference, scope).await?;
        let id = id.as_ref();
        let load = load_task_sql(scope);
        let batch = vec![
            Query::new(load, &[&id, &scope.team_id]),
            Query::new(
                SET_DROPPED,
                &[&self.dropped, &self.now, &id, &scope.team_id],
            ),
            Query::new(load, &[&id, &scope.team_id]),
        ];
        let answers = tx.query_batch(batch).await?;
        let was_dropped = match answers.first().and_then(|rows| rows.first()) {
            Some(row) => task_from_row(&**row)?.dropped,
            None => return Err(StoreError::NotFound(id.to_owned())),
        };
        let task = last_task(answers, id)?;
        if was_dropped != self.dropped {
            let (action, detail) = if self.dropped {
                (OperatorAction::Dropped, "dropped from the board")
            } else {
                (OperatorAction::Restored, "restored to the board")
            };
            operator_activity::record_on(tx, self.now, scope, id, action, detail).await?;
        }
        Ok(task)
    }
}

impl StoreWrite for DropWrite {
    type Output = Task;

    fn run(&self, tx: &dyn Tx) -> Result<Task> {
        ready_now(self.apply(tx))
    }

    fn run_async<'a>(&'a self, tx: &'a AsyncWriteTx) -> BoxFuture<'a, Result<Task>> {
        Box::pin(self.apply(tx))
    }
}

impl Store {
    /// Soft-delete (or restore) a task: a dropped task is hidden from lists, claims and
    /// ready, and frees a slot under its parent's child cap. `id` may be its short id.
    pub fn set_dropped(&self, id: &str, dropped: bool, scope: Scope<'_>) -> Result<Task> {
        let write = self.drop_write(id, dropped, scope.into());
        self.write(|tx| write.run(tx))
    }

    /// [`Store::set_dropped`] for an async caller, run the way the engine runs writes
    /// best ([`Store::run_transaction`]).
    pub async fn set_dropped_async(
        self: &Arc<Store>,
        id: &str,
        dropped: bool,
        scope: OwnedScope,
    ) -> std::result::Result<Result<Task>, RunError> {
        let write = self.drop_write(id, dropped, scope);
        self.run_transaction(write).await
    }

    fn drop_write(&self, id: &str, dropped: bool, scope: OwnedScope) -> DropWrite {
        DropWrite {
            reference: id.to_owned(),
            dropped,
            scope,
            now: self.now_ms(),
        }
    }

    /// Edit a task's title, description or priority.
    pub fn patch_task(&self, id: &str, patch: &TaskPatch, scope: Scope<'_>) -> Result<Task> {
        let write = PatchWrite::new(self, id, patch, scope.into())?;
        self.write(|tx| write.run(tx))
    }

    /// [`Store::patch_task`] for an async caller, run the way the engine runs writes best
    /// ([`Store::run_transaction`]).
    pub async fn patch_task_async(
        self: &Arc<Store>,
        id: &str,
        patch: &TaskPatch,
        scope: OwnedScope,
    ) -> std::result::Result<Result<Task>, RunError> {
        match PatchWrite::new(self, id, patch, scope) {
            Ok(write) => self.run_transaction(write).await,
            Err(e) => Ok(Err(e)),
        }
    }
}
