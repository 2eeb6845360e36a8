//! Approvals mediated by the database: a call writes a `pending` row and waits; a human
//! decides from any process (CLI, REST, web board). A decision made in this process wakes
//! the waiter at once; decisions from other processes are seen by polling.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use futures_util::future::BoxFuture;
use serde::{Deserialize, Serialize};

use super::Caller;
use clawboo_store::db::{DbRow, Tx};
use clawboo_store::events::Event;
use clawboo_store::reads::{Query, Reads, RowsRead, ready_now};
use clawboo_store::writes::{AsyncWriteTx, StoreWrite, Writes};
use clawboo_store::{RunError, Store, StoreError};

/// Where an approval row stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalStatus {
    /// Waiting for a human.
    Pending,
    /// Allowed (once or always).
    Allowed,
    /// Denied by a human.
    Denied,
    /// Nobody decided in time (or the caller went away).
    Expired,
}

impl ApprovalStatus {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalStatus::Pending => "pending",
            ApprovalStatus::Allowed => "allowed",
            ApprovalStatus::Denied => "denied",
            ApprovalStatus::Expired => "expired",
        }
    }

    fn parse(s: &str) -> ApprovalStatus {
        match s {
            "allowed" => ApprovalStatus::Allowed,
            "denied" => ApprovalStatus::Denied,
            "expired" => ApprovalStatus::Expired,
            _ => ApprovalStatus::Pending,
        }
    }
}

impl fmt::Display for ApprovalStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A human's answer to an approval (`"allow_once"`, `"allow_always"`, `"deny"` on the wire).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// Run this one call.
    AllowOnce,
    /// Run it, and do not ask again for this tool and this (bound) agent.
    AllowAlways,
    /// Refuse the call.
    Deny,
}

impl Decision {
    /// The wire/stored name (`allow_once`, `allow_always`, `deny`).
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::AllowOnce => "allow_once",
            Decision::AllowAlways => "allow_always",
            Decision::Deny => "deny",
        }
    }
}

impl FromStr for Decision {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "allow_once" => Ok(Decision::AllowOnce),
            "allow_always" => Ok(Decision::AllowAlways),
            "deny" => Ok(Decision::Deny),
            other => Err(format!(
                "unknown decision `{other}`: use allow_once, allow_always or deny"
            )),
        }
    }
}

/// One approval row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Approval {
    /// The approval id operators decide by.
    pub id: String,
    /// The call it belongs to (its audit rows share this id).
    pub call_id: String,
    /// The tool the call wants to run.
    pub tool_name: String,
    /// The calling agent (from the binding), if bound.
    pub agent_id: Option<String>,
    /// The calling team (from the binding), if bound.
    pub team_id: Option<String>,
    /// The calling tenant (from the binding), if bound.
    pub tenant_id: Option<String>,
    /// The tool's risk level (`external`, `destructive`).
    pub risk: String,
    /// Why approval is needed, for the human.
    pub message: String,
    /// The call's arguments, scrubbed, as JSON text.
    pub args_json: String,
    /// Where it stands.
    pub status: ApprovalStatus,
    /// The human's answer, once given.
    pub decision: Option<Decision>,
    /// Who answered (`cli`, `web`, `api`).
    pub decided_by: Option<String>,
    /// When the call asked (epoch ms).
    pub created_at: i64,
    /// When the call stops waiting and the row expires (epoch ms).
    pub expires_at: i64,
    /// When it was decided or expired (epoch ms).
    pub decided_at: Option<i64>,
}

const COLUMNS: &str = "id, call_id, tool_name, agent_id, team_id, risk, message, args_json, \
                       status, decision, decided_by, created_at, expires_at, decided_at, \
                       tenant_id";

fn from_row(row: &dyn DbRow) -> Result<Approval, StoreError> {
    let status: String = row.get(8)?;
    let decision: Option<String> = row.get(9)?;
    Ok(Approval {
        id: row.get(0)?,
        call_id: row.get(1)?,
        tool_name: row.get(2)?,
        agent_id: row.get(3)?,
        team_id: row.get(4)?,
        tenant_id: row.get(14)?,
        risk: row.get(5)?,
        message: row.get(6)?,
        args_json: row.get(7)?,
        status: ApprovalStatus::parse(&status),
        decision: decision.and_then(|d| d.parse().ok()),
        decided_by: row.get(10)?,
        created_at: row.get(11)?,
        expires_at: row.get(12)?,
        decided_at: row.get(13)?,
    })
}

/// Why a decision could not be recorded.
#[derive(Debug, thiserror::Error)]
pub enum ApprovalError {
    /// No approval has this id.
    #[error("approval {0} not found; run `clawboo approvals list` to see pending approvals")]
    NotFound(String),
    /// Somebody (or the clock) already settled it.
    #[error("approval {id} is already {status}; only pending approvals can be decided")]
    AlreadySettled {
        /// The approval.
        id: String,
        /// What it already is.
        status: ApprovalStatus,
    },
    /// Its wait ran out before this decision arrived; the row is now `expired`.
    #[error(
        "approval {0} expired before the decision arrived; the agent's call was refused, ask it to retry"
    )]
    Expired(String),
    /// The database failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl ApprovalError {
    /// A stable code (`not_found`, `already_settled`, `expired`, `internal`).
    pub fn code(&self) -> &'static str {
        match self {
            ApprovalError::NotFound(_) => "not_found",
            ApprovalError::AlreadySettled { .. } => "already_settled",
            ApprovalError::Expired(_) => "expired",
            ApprovalError::Store(e) => e.code(),
        }
    }
}

/// A new pending row, as the pipeline writes it.
pub(crate) struct NewApproval<'a> {
    pub id: &'a str,
    pub call_id: &'a str,
    pub tool_name: &'a str,
    pub caller: &'a Caller,
    pub risk: &'a str,
    pub message: &'a str,
    pub args_json: &'a str,
    pub expires_at: i64,
}

pub(crate) fn insert_pending(
    tx: &dyn Tx,
    now: i64,
    new: &NewApproval<'_>,
) -> Result<(), StoreError> {
    tx.execute(
        "INSERT INTO tool_call_approvals(id, call_id, tool_name, agent_id, team_id, tenant_id, risk,
                                         message, args_json, status, created_at, expires_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, 'pending', ?10, ?11)",
        &[
            &new.id,
            &new.call_id,
            &new.tool_name,
            &new.caller.agent_id,
            &new.caller.team_id,
            &new.caller.tenant_id,
            &new.risk,
            &new.message,
            &new.args_json,
            &now,
            &new.expires_at,
        ],
    )?;
    Ok(())
}

/// The identity an `allow_always` is remembered under: the bound agent with its team and
/// tenant (`''` for none, as stored), so the same agent name in another team or tenant is a
/// different identity. `None` for a caller bound to no agent: nothing is remembered for it.
fn grant_identity<'a>(
    agent_id: Option<&'a str>,
    team_id: Option<&'a str>,
    tenant_id: Option<&'a str>,
) -> Option<[&'a str; 3]> {
    Some([agent_id?, team_id.unwrap_or(""), tenant_id.unwrap_or("")])
}

/// [`grant_identity`] of a caller.
fn caller_identity(caller: &Caller) -> Option<[&str; 3]> {
    grant_identity(
        caller.agent_id.as_deref(),
        caller.team_id.as_deref(),
        caller.tenant_id.as_deref(),
    )
}

/// Whether `allow_always` was remembered for `tool` and exactly this caller's identity.
pub(crate) fn has_grant(tx: &dyn Tx, tool: &str, caller: &Caller) -> Result<bool, StoreError> {
    let Some([agent, team, tenant]) = caller_identity(caller) else {
        return Ok(false);
    };
    tx.query_opt(
        "SELECT 1 FROM tool_approval_grants
         WHERE tool_name = ?1 AND agent_id = ?2 AND team_id = ?3 AND tenant_id = ?4",
        &[&tool, &agent, &team, &tenant],
        |_| Ok(()),
    )
    .map(|found| found.is_some())
}

/// How a call's approval stands when its round reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Standing {
    Allowed(Decision),
    Denied,
    Expired,
    /// Still undecided, and its time not up.
    Pending,
}

/// How approval `approval_id` stands now; a pending one whose time ran out by now is
/// marked expired first (its waiter is the one asking).
pub(crate) fn standing(
    store: &Store,
    approval_id: &str,
    expires_at: i64,
) -> Result<Standing, StoreError> {
    loop {
        let row = store.read(|tx| ready_now(read_approval(tx, approval_id)))?;
        let Some(row) = row else {
            return Ok(Standing::Expired);
        };
        match row.status {
            ApprovalStatus::Allowed => {
                let decision = row.decision.unwrap_or(Decision::AllowOnce);
                return Ok(Standing::Allowed(decision));
            }
            ApprovalStatus::Denied => return Ok(Standing::Denied),
            ApprovalStatus::Expired => return Ok(Standing::Expired),
            ApprovalStatus::Pending if store.now_ms() < expires_at => return Ok(Standing::Pending),
            ApprovalStatus::Pending => {
                let expire = Expire::new(store, approval_id);
                if store.write(|tx| expire.run(tx))? {
                    return Ok(Standing::Expired);
                }
                // A decision landed just in time: read it.
            }
        }
    }
}

/// Approval `id` (none, or one row).
fn approval_read(id: &str) -> RowsRead<Approval> {
    RowsRead {
        query: Query::new(
            format!("SELECT {COLUMNS} FROM tool_call_approvals WHERE id = ?1"),
            &[&id],
        ),
        decode: from_row,
    }
}

/// Approval `id`, or `None`, on any transaction.
async fn read_approval<R: Reads + ?Sized>(
    tx: &R,
    id: &str,
) -> Result<Option<Approval>, StoreError> {
    let read = approval_read(id);
    Ok(tx.query_map(read.query, read.decode).await?.pop())
}

/// A pending row marked expired, for `Store::run_transaction`; `false` when it was no
/// longer pending.
struct Expire {
    id: String,
    now: i64,
}

impl Expire {
    fn new(store: &Store, id: &str) -> Expire {
        Expire {
            id: id.to_owned(),
            now: store.now_ms(),
        }
    }

    async fn expire<W: Writes + ?Sized>(&self, tx: &W) -> Result<bool, StoreError> {
        let expire = Query::new(EXPIRE_ONE, &[&self.id, &self.now]);
        let changed = tx.execute(expire).await?;
        if changed == 1 {
            let id = self.id.clone();
            tx.raise(Event::ApprovalSettled { id }).await?;
        }
        Ok(changed == 1)
    }
}

impl StoreWrite for Expire {
    type Output = bool;

    fn run(&self, tx: &dyn Tx) -> Result<bool, StoreError> {
        ready_now(self.expire(tx))
    }

    fn run_async<'a>(&'a self, tx: &'a AsyncWriteTx) -> BoxFuture<'a, Result<bool, StoreError>> {
        Box::pin(self.expire(tx))
    }
}

/// Mark pending approval `?1` expired at `?2`.
const EXPIRE_ONE: &str = "UPDATE tool_call_approvals SET status = 'expired', decided_at = ?2
     WHERE id = ?1 AND status = 'pending'";

/// Why a pending row read earlier in this transaction could not be decided or expired: a
/// conditional `UPDATE` found it settled (or gone) by another process in between.
async fn settled_meanwhile<W: Writes + ?Sized>(
    tx: &W,
    id: &str,
) -> Result<ApprovalError, StoreError> {
    Ok(match read_approval(tx, id).await? {
        None => ApprovalError::NotFound(id.to_string()),
        Some(row) => ApprovalError::AlreadySettled {
            id: id.to_string(),
            status: row.status,
        },
    })
}

/// A human's decision on an approval, for `Store::run_transaction`: a refusal
/// ([`ApprovalError`]) is its answer, not its error.
struct Resolve {
    id: String,
    decision: Decision,
    decided_by: String,
    now: i64,
}

impl Resolve {
    fn new(store: &Store, id: &str, decision: Decision, decided_by: &str) -> Resolve {
        Resolve {
            id: id.to_owned(),
            decision,
            decided_by: decided_by.to_owned(),
            now: store.now_ms(),
        }
    }

    async fn resolve<W: Writes + ?Sized>(
        &self,
        tx: &W,
    ) -> Result<Result<Approval, ApprovalError>, StoreError> {
        let (id, decision, now) = (self.id.as_str(), self.decision, self.now);
        let Some(row) = read_approval(tx, id).await? else {
            return Ok(Err(ApprovalError::NotFound(id.to_string())));
        };
        if row.status != ApprovalStatus::Pending {
            return Ok(Err(ApprovalError::AlreadySettled {
                id: id.to_string(),
                status: row.status,
            }));
        }
        // Each write below holds only while the row is still `pending`: on PostgreSQL
        // another host may have decided it, or its waiter expired it, since the read.
        if now >= row.expires_at {
            if !Expire::expire(
                &Expire {
                    id: id.to_owned(),
                    now,
                },
                tx,
            )
            .await?
            {
                return Ok(Err(settled_meanwhile(tx, id).await?));
            }
            return Ok(Err(ApprovalError::Expired(id.to_string())));
        }
        let status = if decision == Decision::Deny {
            "denied"
        } else {
            "allowed"
        };
        let decide = Query::new(
            format!(
                "UPDATE tool_call_approvals
                 SET status = ?2, decision = ?3, decided_by = ?4, decided_at = ?5
                 WHERE id = ?1 AND status = 'pending' RETURNING {COLUMNS}"
            ),
            &[&id, &status, &decision.as_str(), &self.decided_by, &now],
        );
        let Some(row) = tx.query_map(decide, from_row).await?.pop() else {
            return Ok(Err(settled_meanwhile(tx, id).await?));
        };
        tx.raise(Event::ApprovalSettled { id: id.into() }).await?;
        if decision == Decision::AllowAlways
            && let Some([agent, team, tenant]) = grant_identity(
                row.agent_id.as_deref(),
                row.team_id.as_deref(),
                row.tenant_id.as_deref(),
            )
        {
            let grant = Query::new(
                "INSERT INTO tool_approval_grants(tool_name, agent_id, team_id, tenant_id,
                                                  approval_id, created_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                 ON CONFLICT(tool_name, agent_id, team_id, tenant_id)
                 DO UPDATE SET approval_id = excluded.approval_id,
                               created_at = excluded.created_at",
                &[&row.tool_name, &agent, &team, &tenant, &id, &now],
            );
            tx.execute(grant).await?;
        }
        Ok(Ok(row))
    }
}

impl StoreWrite for Resolve {
    type Output = Result<Approval, ApprovalError>;

    fn run(&self, tx: &dyn Tx) -> Result<Self::Output, StoreError> {
        ready_now(self.resolve(tx))
    }

    fn run_async<'a>(
        &'a self,
        tx: &'a AsyncWriteTx,
    ) -> BoxFuture<'a, Result<Self::Output, StoreError>> {
        Box::pin(self.resolve(tx))
    }
}

/// Record a human's decision on a pending approval and wake its waiting call.
/// `allow_always` is remembered for the tool and the call's bound identity (agent, team
/// and tenant; never for a call bound to no agent, which it allows once).
pub(crate) fn resolve(
    store: &Store,
    id: &str,
    decision: Decision,
    decided_by: &str,
) -> Result<Approval, ApprovalError> {
    let resolve = Resolve::new(store, id, decision, decided_by);
    store.write(|tx| resolve.run(tx))?
}

/// [`resolve`] for an async caller, run the way the engine runs writes best.
pub(crate) async fn resolve_async(
    store: &Arc<Store>,
    id: &str,
    decision: Decision,
    decided_by: &str,
) -> Result<Result<Approval, ApprovalError>, RunError> {
    let resolve = Resolve::new(store, id, decision, decided_by);
    Ok(match store.run_transaction(resolve).await? {
        Ok(answer) => answer,
        Err(e) => Err(e.into()),
    })
}

/// Approvals, newest first (only `pending` ones when `pending_only`). Pending rows whose
/// time ran out (their caller is gone) are marked `expired` first.
pub(crate) fn list(
    store: &Store,
    pending_only: bool,
    limit: usize,
) -> Result<Vec<Approval>, StoreError> {
    let list = List::new(store, pending_only, limit);
    store.write(|tx| list.run(tx))
}

/// [`list`] for an async caller, run the way the engine runs writes best.
pub(crate) async fn list_async(
    store: &Arc<Store>,
    pending_only: bool,
    limit: usize,
) -> Result<Result<Vec<Approval>, StoreError>, RunError> {
    store
        .run_transaction(List::new(store, pending_only, limit))
        .await
}

/// A page of approvals, stale pending rows expired first, for `Store::run_transaction`.
struct List {
    pending_only: bool,
    limit: i64,
    now: i64,
}

impl List {
    fn new(store: &Store, pending_only: bool, limit: usize) -> List {
        List {
            pending_only,
            limit: i64::try_from(limit).unwrap_or(i64::MAX),
            now: store.now_ms(),
        }
    }

    /// The expiry and the page in one round trip on PostgreSQL.
    async fn list<W: Writes + ?Sized>(&self, tx: &W) -> Result<Vec<Approval>, StoreError> {
        let batch = vec![
            Query::new(
                "UPDATE tool_call_approvals SET status = 'expired', decided_at = ?1
                 WHERE status = 'pending' AND expires_at <= ?1",
                &[&self.now],
            ),
            Query::new(
                format!(
                    "SELECT {COLUMNS} FROM tool_call_approvals
                     WHERE (CAST(?1 AS BIGINT) = 0 OR status = 'pending')
                     ORDER BY created_at DESC, id DESC LIMIT ?2"
                ),
                &[&self.pending_only, &self.limit],
            ),
        ];
        let answers = tx.query_batch(batch).await?;
        let mut approvals = Vec::new();
        for row in answers.last().into_iter().flatten() {
            approvals.push(from_row(&**row)?);
        }
        Ok(approvals)
    }
}

impl StoreWrite for List {
    type Output = Vec<Approval>;

    fn run(&self, tx: &dyn Tx) -> Result<Vec<Approval>, StoreError> {
        ready_now(self.list(tx))
    }

    fn run_async<'a>(
        &'a self,
        tx: &'a AsyncWriteTx,
    ) -> BoxFuture<'a, Result<Vec<Approval>, StoreError>> {
        Box::pin(self.list(tx))
    }
}

/// The caller of pending approval `id` went away: expire it, so the board stops
/// offering it and the call's next round ends as `approval:expired`. `false` when it
/// was already settled.
pub(crate) fn abandon(store: &Store, id: &str) -> Result<bool, StoreError> {
    let expire = Expire::new(store, id);
    store.write(|tx| expire.run(tx))
}

/// [`abandon`] for an async caller, run the way the engine runs writes best.
pub(crate) async fn abandon_async(
    store: &Arc<Store>,
    id: &str,
) -> Result<Result<bool, StoreError>, RunError> {
    store.run_transaction(Expire::new(store, id)).await
}

/// One approval by id.
pub(crate) fn get(store: &Store, id: &str) -> Result<Approval, StoreError> {
    store
        .read(|tx| ready_now(read_approval(tx, id)))?
        .ok_or_else(|| StoreError::NotFound(id.to_string()))
}

/// [`get`] for an async caller, run the way the engine runs reads best.
pub(crate) async fn get_async(
    store: &Arc<Store>,
    id: &str,
) -> Result<Result<Approval, StoreError>, RunError> {
    let read = approval_read(id);
    Ok(store.run_read_committed(read).await?.and_then(|mut rows| {
        rows.pop()
            .ok_or_else(|| StoreError::NotFound(id.to_string()))
    }))
}

/// Forget a remembered `allow_always` for `tool` and exactly `caller`'s identity; `true`
/// if one existed.
pub(crate) fn revoke_grant(store: &Store, tool: &str, caller: &Caller) -> Result<bool, StoreError> {
    let Some([agent, team, tenant]) = caller_identity(caller) else {
        return Ok(false);
    };
    store.write(|tx| {
        Ok(tx.execute(
            "DELETE FROM tool_approval_grants
             WHERE tool_name = ?1 AND agent_id = ?2 AND team_id = ?3 AND tenant_id = ?4",
            &[&tool, &agent, &team, &tenant],
        )? == 1)
    })
}
