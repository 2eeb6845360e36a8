//! The agent inbox: short notes for an agent (a teammate moved or commented on its task, a
//! delegation arrived) delivered once, piggybacked on the agent's next tool result.

use std::sync::Arc;

use futures_util::future::BoxFuture;
use serde::Serialize;

use crate::db::Tx;
use crate::error::Result;
use crate::reads::{self, AsyncTx, Query, Reads, StoreRead, ready_now};
use crate::run::RunError;
use crate::writes::{AsyncWriteTx, StoreWrite, Writes};
use crate::{Store, new_id};

/// One delivered inbox row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InboxItem {
    pub id: String,
    pub agent_id: String,
    pub team_id: Option<String>,
    pub body: String,
    pub source: String,
    pub created_at: i64,
}

/// Queue a row for `agent_id` inside the caller's write transaction.
pub(crate) async fn push<W: Writes + ?Sized>(
    tx: &W,
    now: i64,
    agent_id: &str,
    team_id: Option<&str>,
    source: &str,
    body: &str,
) -> Result<()> {
    let insert = Query::new(
        "INSERT INTO agent_inbox(id, agent_id, team_id, body, source, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        &[&new_id(), &agent_id, &team_id, &body, &source, &now],
    );
    tx.execute(insert).await?;
    Ok(())
}

impl Store {
    /// Take up to `limit` undelivered rows for `agent_id` (rows of `team_id` or team-less),
    /// oldest first, marking them delivered via `via`. Only rows this call flipped are
    /// returned, so each row is delivered exactly once even with concurrent sessions.
    pub fn take_inbox(
        &self,
        agent_id: &str,
        team_id: Option<&str>,
        limit: usize,
        via: &str,
    ) -> Result<Vec<InboxItem>> {
        // Most calls find nothing: answer those with a read, not a write transaction.
        if !self.has_pending_inbox(agent_id, team_id)? {
            return Ok(Vec::new());
        }
        let take = self.take(agent_id, team_id, limit, via);
        self.write(|tx| take.run(tx))
    }

    /// [`Store::take_inbox`] for an async caller: the read and (only when rows wait) the
    /// write, each run the way the engine runs it best ([`Store::run_read_committed`],
    /// [`Store::run_transaction`]).
    pub async fn take_inbox_async(
        self: &Arc<Store>,
        agent_id: &str,
        team_id: Option<&str>,
        limit: usize,
        via: &str,
    ) -> std::result::Result<Result<Vec<InboxItem>>, RunError> {
        let pending = PendingRead {
            agent_id: agent_id.to_owned(),
            team_id: team_id.map(str::to_owned),
        };
        match self.run_read_committed(pending).await? {
            Ok(true) => {}
            Ok(false) => return Ok(Ok(Vec::new())),
            Err(e) => return Ok(Err(e)),
        }
        let take = self.take(agent_id, team_id, limit, via);
        self.run_transaction(take).await
    }

    fn take(&self, agent_id: &str, team_id: Option<&str>, limit: usize, via: &str) -> Take {
        Take {
            agent_id: agent_id.to_owned(),
            team_id: team_id.map(str::to_owned),
            limit: i64::try_from(limit).unwrap_or(i64::MAX),
            via: via.to_owned(),
            now: self.now_ms(),
        }
    }

    /// Whether `agent_id` has undelivered inbox rows (of `team_id` or of no team): one read
    /// of the pending rows' partial index.
    pub fn has_pending_inbox(&self, agent_id: &str, team_id: Option<&str>) -> Result<bool> {
        self.read(|tx| ready_now(read_pending(tx, agent_id, team_id)))
    }

    /// [`Store::has_pending_inbox`] for an async caller, run the way the engine runs reads
    /// best ([`Store::run_read_committed`]).
    pub async fn has_pending_inbox_async(
        self: &Arc<Store>,
        agent_id: String,
        team_id: Option<String>,
    ) -> std::result::Result<Result<bool>, RunError> {
        self.run_read_committed(PendingRead { agent_id, team_id })
            .await
    }

    /// Queue an inbox row for `agent_id` in its own transaction.
    pub fn push_inbox(
        &self,
        agent_id: &str,
        team_id: Option<&str>,
        source: &str,
        body: &str,
    ) -> Result<()> {
        let now = self.now_ms();
        self.write(|tx| ready_now(push(tx, now, agent_id, team_id, source, body)))
    }
}

/// Up to `limit` undelivered rows of `agent_id` marked delivered via `via`, for
/// [`Store::run_transaction`].
struct Take {
    agent_id: String,
    team_id: Option<String>,
    limit: i64,
    via: String,
    now: i64,
}

impl Take {
    async fn take<W: Writes + ?Sized>(&self, tx: &W) -> Result<Vec<InboxItem>> {
        let take = Query::new(
            "UPDATE agent_inbox SET delivered_at = ?1, delivered_via = ?2
             WHERE id IN (
                 SELECT id FROM agent_inbox
                 WHERE agent_id = ?3 AND delivered_at IS NULL
                   AND (team_id IS NULL OR CAST(?4 AS TEXT) IS NULL OR team_id = ?4)
                 ORDER BY created_at, id LIMIT ?5)
               AND delivered_at IS NULL
             RETURNING id, agent_id, team_id, body, source, created_at",
            &[
                &self.now,
                &self.via,
                &self.agent_id,
                &self.team_id,
                &self.limit,
            ],
        );
        let mut items = tx
            .query_map(take, |r| {
                Ok(InboxItem {
                    id: r.get(0)?,
                    agent_id: r.get(1)?,
                    team_id: r.get(2)?,
                    body: r.get(3)?,
                    source: r.get(4)?,
                    created_at: r.get(5)?,
                })
            })
            .await?;
        // RETURNING does not promise an order.
        items.sort_by(|a, b| (a.created_at, &a.id).cmp(&(b.created_at, &b.id)));
        Ok(items)
    }
}

impl StoreWrite for Take {
    type Output = Vec<InboxItem>;

    fn run(&self, tx: &dyn Tx) -> Result<Vec<InboxItem>> {
        ready_now(self.take(tx))
    }

    fn run_async<'a>(&'a self, tx: &'a AsyncWriteTx) -> BoxFuture<'a, Result<Vec<InboxItem>>> {
        Box::pin(self.take(tx))
    }
}

/// [`Store::has_pending_inbox`]'s read, on any transaction.
async fn read_pending<R: Reads + ?Sized>(
    tx: &R,
    agent_id: &str,
    team_id: Option<&str>,
) -> Result<bool> {
    let query = Query::new(
        "SELECT EXISTS (SELECT 1 FROM agent_inbox
         WHERE agent_id = ?1 AND delivered_at IS NULL
           AND (team_id IS NULL OR CAST(?2 AS TEXT) IS NULL OR team_id = ?2))",
        &[&agent_id, &team_id],
    );
    let found = reads::query_first(tx, query).await?;
    found.map_or(Ok(false), |row| row.get::<bool>(0))
}

/// [`read_pending`] with its arguments, for [`Store::run_read_committed`].
struct PendingRead {
    agent_id: String,
    team_id: Option<String>,
}

impl StoreRead for PendingRead {
    type Output = bool;

    fn run(&self, tx: &dyn Tx) -> Result<bool> {
        ready_now(read_pending(tx, &self.agent_id, self.team_id.as_deref()))
    }

    fn run_async<'a>(&'a self, tx: &'a AsyncTx) -> BoxFuture<'a, Result<bool>> {
        Box::pin(read_pending(tx, &self.agent_id, self.team_id.as_deref()))
    }
}
