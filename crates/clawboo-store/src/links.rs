//! Links (SPEC §19): what was said or done about a task elsewhere, a fact saved with its
//! `taskId`, a room post with its `taskId`, a tool call its caller made while holding the
//! task. Each is a `task_links` row holding the first line of what was stored (scrubbed
//! there already), so `get_task` reads a task's recent links from one table, whichever
//! crate stored the thing linked.

use std::sync::Arc;

use futures_util::future::BoxFuture;
use serde::Serialize;

use crate::Store;
use crate::board::Scope;
use crate::db::Tx;
use crate::error::{Result, StoreError};
use crate::reads::{Query, ready_now};
use crate::run::RunError;
use crate::writes::{AsyncWriteTx, StoreWrite, Writes};

/// Most links `get_task` returns (the newest): its answer never grows with the board.
pub const LINKS_SHOWN: i64 = 20;
/// Longest line a link keeps, in characters.
const LINE_CHARS: usize = 120;

/// What a link points at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkKind {
    /// A memory fact (`memory_save` with `taskId`).
    Fact,
    /// A team-room post (`team_chat_post` with `taskId`).
    Post,
    /// A tool broker audit row of a call made by the task's holder.
    Audit,
}

impl LinkKind {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            LinkKind::Fact => "fact",
            LinkKind::Post => "post",
            LinkKind::Audit => "audit",
        }
    }
}

/// One link of a task, as `get_task` and the board show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Link {
    pub kind: String,
    /// The fact's, post's or audit row's id.
    pub id: String,
    /// The first line of what was stored.
    pub line: String,
    pub created_at: i64,
}

/// The first non-empty line of `text`, cut to [`LINE_CHARS`] characters.
fn first_line(text: &str) -> String {
    let line = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("");
    match line.char_indices().nth(LINE_CHARS) {
        Some((cut, _)) => format!("{}…", &line[..cut]),
        None => line.to_owned(),
    }
}

/// Link `ref_id` (of `kind`, saying `text`) to `task_id` inside the caller's write; a
/// repeat changes nothing.
pub fn link_in(
    tx: &dyn Tx,
    now: i64,
    task_id: &str,
    kind: LinkKind,
    ref_id: &str,
    text: &str,
) -> Result<()> {
    tx.execute(
        "INSERT INTO task_links(task_id, kind, ref_id, line, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5)
         ON CONFLICT (task_id, kind, ref_id) DO NOTHING",
        &[&task_id, &kind.as_str(), &ref_id, &first_line(text), &now],
    )?;
    Ok(())
}

/// Link `ref_id` to the task `agent` holds on `team` (on any team when `None`, as its
/// scope is), the one it claimed last, inside the caller's write: how the tools broker
/// records what each call was for. Nothing when it holds none.
pub fn link_held_in(
    tx: &dyn Tx,
    now: i64,
    agent: &str,
    team: Option<&str>,
    kind: LinkKind,
    ref_id: &str,
    text: &str,
) -> Result<()> {
    let held: Option<String> = tx.query_opt(
        "SELECT id FROM tasks
         WHERE assignee_agent_id = ?1 AND status = 'in_progress'
           AND (CAST(?2 AS TEXT) IS NULL OR team_id = ?2)
         ORDER BY updated_at DESC, id DESC LIMIT 1",
        &[&agent, &team],
        |r| r.get(0),
    )?;
    match held {
        Some(task_id) => link_in(tx, now, &task_id, kind, ref_id, text),
        None => Ok(()),
    }
}

/// A task's newest links (at most [`LINKS_SHOWN`]), newest first, inside the caller's read.
pub(crate) const RECENT_LINKS: &str = "SELECT kind, ref_id, line, created_at FROM task_links
     WHERE task_id = ?1 ORDER BY created_at DESC, kind, ref_id LIMIT ?2";

/// One row of [`RECENT_LINKS`].
pub(crate) fn link_from_row(r: &dyn crate::db::DbRow) -> Result<Link> {
    Ok(Link {
        kind: r.get(0)?,
        id: r.get(1)?,
        line: r.get(2)?,
        created_at: r.get(3)?,
    })
}

impl Store {
    /// Refuse a `taskId` the caller in `scope` cannot see, before what would link to it is
    /// stored: [`StoreError::NotFound`] names it.
    pub fn require_linkable(&self, task_id: &str, scope: Scope<'_>) -> Result<()> {
        match self.get_task(task_id, scope)? {
            Some(_) => Ok(()),
            None => Err(StoreError::NotFound(task_id.to_owned())),
        }
    }

    /// [`Store::require_linkable`] for an async caller in `team_id`'s scope.
    pub async fn require_linkable_async(
        self: &Arc<Store>,
        task_id: String,
        team_id: Option<String>,
    ) -> std::result::Result<Result<()>, RunError> {
        let found = self.get_task_async(task_id.clone(), team_id).await?;
        Ok(found.and_then(|task| match task {
            Some(_) => Ok(()),
            None => Err(StoreError::NotFound(task_id)),
        }))
    }

    /// Link `ref_id` (of `kind`, saying `text`) to `task_id`, visible in `scope`.
    pub fn link_to_task(
        &self,
        task_id: &str,
        scope: Scope<'_>,
        kind: LinkKind,
        ref_id: &str,
        text: &str,
    ) -> Result<()> {
        let link = self.link_to(task_id, scope.team_id, kind, ref_id, text);
        self.write(|tx| link.run(tx))
    }

    /// [`Store::link_to_task`] for an async caller in `team_id`'s scope, run the way the
    /// engine runs writes best ([`Store::run_transaction`]).
    pub async fn link_to_task_async(
        self: &Arc<Store>,
        task_id: &str,
        team_id: Option<&str>,
        kind: LinkKind,
        ref_id: &str,
        text: &str,
    ) -> std::result::Result<Result<()>, RunError> {
        let link = self.link_to(task_id, team_id, kind, ref_id, text);
        self.run_transaction(link).await
    }

    fn link_to(
        &self,
        task_id: &str,
        team_id: Option<&str>,
        kind: LinkKind,
        ref_id: &str,
        text: &str,
    ) -> LinkTo {
        LinkTo {
            task_id: task_id.to_owned(),
            team_id: team_id.map(str::to_owned),
            kind,
            ref_id: ref_id.to_owned(),
            line: first_line(text),
            now: self.now_ms(),
        }
    }
}

/// A link to a task visible in `team_id`'s scope, for [`Store::run_transaction`].
struct LinkTo {
    task_id: String,
    team_id: Option<String>,
    kind: LinkKind,
    ref_id: String,
    line: String,
    now: i64,
}

impl LinkTo {
    /// Whether the task is there and the link made (a repeat changes nothing), both in
    /// one round trip on PostgreSQL: the insert stores nothing for a task out of scope.
    async fn link<W: Writes + ?Sized>(&self, tx: &W) -> Result<()> {
        let (task_id, team) = (self.task_id.as_str(), self.team_id.as_deref());
        let found = Query::new(
            "SELECT EXISTS(SELECT 1 FROM tasks
                 WHERE id = ?1 AND (CAST(?2 AS TEXT) IS NULL OR team_id = ?2))",
            &[&task_id, &team],
        );
        let insert = Query::new(
            "INSERT INTO task_links(task_id, kind, ref_id, line, created_at)
             SELECT ?1, ?3, ?4, ?5, ?6
             WHERE EXISTS(SELECT 1 FROM tasks
                 WHERE id = ?1 AND (CAST(?2 AS TEXT) IS NULL OR team_id = ?2))
             ON CONFLICT (task_id, kind, ref_id) DO NOTHING",
            &[
                &task_id,
                &team,
                &self.kind.as_str(),
                &self.ref_id,
                &self.line,
                &self.now,
            ],
        );
        let answers = tx.query_batch(vec![found, insert]).await?;
        let found = match answers.first().and_then(|rows| rows.first()) {
            Some(row) => row.get::<bool>(0)?,
            None => false,
        };
        if found {
            Ok(())
        } else {
            Err(StoreError::NotFound(task_id.to_owned()))
        }
    }
}

impl StoreWrite for LinkTo {
    type Output = ();

    fn run(&self, tx: &dyn Tx) -> Result<()> {
        ready_now(self.link(tx))
    }

    fn run_async<'a>(&'a self, tx: &'a AsyncWriteTx) -> BoxFuture<'a, Result<()>> {
        Box::pin(self.link(tx))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_keeps_the_first_line_cut_short() {
        assert_eq!(first_line("\n  fixed the bug  \nand more"), "fixed the bug");
        let long = "x".repeat(LINE_CHARS + 5);
        let cut = first_line(&long);
        assert_eq!(cut.chars().count(), LINE_CHARS + 1);
        assert!(cut.ends_with('…'));
    }
}
