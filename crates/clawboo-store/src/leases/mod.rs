//! Leases (SPEC §12): every claim holds its task for a while, the holder's calls renew it,
//! and an expired one puts the task back to `todo` with a comment, an inbox row for the
//! former holder and a post in the team's room. Each rule is one conditional statement
//! inside the caller's transaction, so it holds exactly once across processes and another
//! backend can mirror it rule by rule.

use std::time::Duration;

use rusqlite::{Connection, OptionalExtension, params};
use serde::Serialize;

use crate::board::{Scope, Status, Task, UNFINISHED_DEP, require_task};
use crate::chat::{self, PostKind};
use crate::error::{Result, StoreError};
use crate::{Store, inbox};

/// How long a claim lasts when `CLAWBOO_LEASE_SECS` does not say (30 minutes).
pub const DEFAULT_LEASE: Duration = Duration::from_secs(1800);

/// The environment variable that sets the lease, in whole seconds (`0` turns leases off).
pub const LEASE_ENV: &str = "CLAWBOO_LEASE_SECS";

/// The longest an agent's calls go without refreshing its last-seen time.
const SEEN_EVERY_MS: i64 = 30_000;

/// The lease `CLAWBOO_LEASE_SECS` sets: its default when unset, `None` for `0`.
pub fn lease_from_env() -> Result<Option<Duration>> {
    match std::env::var(LEASE_ENV) {
        Err(_) => Ok(Some(DEFAULT_LEASE)),
        Ok(text) => match text.trim().parse::<u64>() {
            Ok(0) => Ok(None),
            Ok(secs) => Ok(Some(Duration::from_secs(secs))),
            Err(_) => Err(StoreError::Invalid(format!(
                "{LEASE_ENV} must be a whole number of seconds (0 turns leases off), not {text:?}: fix or unset it"
            ))),
        },
    }
}

/// A lease that ran out and was taken back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Reclaimed {
    pub task_id: String,
    pub title: String,
    pub team_id: Option<String>,
    /// Whose lease it was.
    pub holder: String,
    /// When it ran out (epoch ms).
    pub expired_at: i64,
}

/// What every claim statement sets besides the holder and the lease: the next fencing
/// token, and the reclaimed marker cleared.
pub(crate) const GRANT_LEASE: &str =
    "claim_token = claim_token + 1, reclaimed_at = NULL, reclaimed_from = NULL";

/// The expiry rule's one statement ([`expire_in`]).
const EXPIRE_LEASES: &str = "UPDATE tasks INDEXED BY tasks_by_lease SET status = 'todo', reclaimed_from = assignee_agent_id,
             assignee_runtime = NULL,
             reclaimed_at = lease_expires_at, assignee_agent_id = NULL, lease_expires_at = NULL,
             updated_at = ?1
         WHERE status = 'in_progress' AND lease_expires_at <= ?1
         RETURNING id, title, team_id, reclaimed_from, reclaimed_at,
             strftime('%Y-%m-%dT%H:%M:%SZ', reclaimed_at / 1000, 'unixepoch')";

/// The expiry rule, inside the caller's write transaction: every `in_progress` task whose
/// lease ran out by `now` goes back to `todo` without an assignee, in one conditional
/// update (so a row is reclaimed once, whoever runs it); each gets a `system` comment, an
/// inbox row for its former holder and a `system` post in its team's room. Named index:
/// otherwise SQLite walks every `in_progress` task through `tasks_by_status`, inside every
/// claim's write lock.
pub(crate) fn expire_in(tx: &Connection, now: i64) -> Result<Vec<Reclaimed>> {
    let mut stmt = tx.prepare_cached(EXPIRE_LEASES)?;
    let rows = stmt.query_map([now], |r| {
        Ok((
            Reclaimed {
                task_id: r.get(0)?,
                title: r.get(1)?,
                team_id: r.get(2)?,
                holder: r.get::<_, Option<String>>(3)?.unwrap_or_default(),
                expired_at: r.get(4)?,
            },
            r.get::<_, String>(5)?,
        ))
    })?;
    let reclaimed = rows.collect::<rusqlite::Result<Vec<_>>>()?;
    for (task, when) in &reclaimed {
        narrate(tx, now, task, when)?;
    }
    Ok(reclaimed.into_iter().map(|(task, _)| task).collect())
}

/// The comment, inbox row and room post of one reclaimed task.
fn narrate(tx: &Connection, now: i64, task: &Reclaimed, when: &str) -> Result<()> {
    let (id, title, holder) = (&task.task_id, &task.title, &task.holder);
    let comment = format!(
        "{holder}'s lease ran out at {when} without a call from {holder}; the task is back in todo for anyone to claim"
    );
    tx.prepare_cached(
        "INSERT INTO task_comments(id, task_id, author_agent_id, author_type, body, created_at)
         VALUES (?1, ?2, NULL, 'system', ?3, ?4)",
    )?
    .execute(params![crate::new_id(), id, comment, now])?;
    let note = format!(
        "your lease on \"{title}\" ({id}) ran out at {when} and the task went back to todo: claim it again (claim_task) if you are still on it, and check its comments first"
    );
    inbox::push(
        &crate::sqlite::tx::SqliteTx(tx),
        now,
        holder,
        task.team_id.as_deref(),
        "lease",
        &note,
    )?;
    if let Some(team) = task.team_id.as_deref() {
        let post = format!(
            "{holder}'s lease on \"{title}\" ({id}) ran out at {when}; the task is back in todo"
        );
        chat::insert_post(
            tx,
            now,
            &chat::team_room(team),
            chat::SYSTEM_AUTHOR,
            PostKind::System,
            &post,
        )?;
    }
    Ok(())
}

/// The renewal rule, inside the caller's write transaction: every lease `agent` holds with
/// less than half of `lease` left (and not yet run out) starts again from `now`.
fn renew_in(tx: &Connection, agent: &str, now: i64, lease: i64) -> Result<usize> {
    Ok(tx
        .prepare_cached(
            "UPDATE tasks SET lease_expires_at = ?2 + ?3
             WHERE assignee_agent_id = ?1 AND status = 'in_progress'
               AND lease_expires_at > ?2 AND lease_expires_at < ?2 + ?3 / 2",
        )?
        .execute(params![agent, now, lease])?)
}

/// Record `agent`'s call at `now` (its last-seen time and, when given, its runtime) inside
/// the caller's write transaction; an agent never seen before gets a row named by its id.
pub(crate) fn seen_in(
    tx: &Connection,
    agent: &str,
    team: Option<&str>,
    runtime: Option<&str>,
    now: i64,
) -> Result<()> {
    tx.prepare_cached(
        "INSERT INTO agents(id, name, team_id, runtime, created_at, last_seen_at)
         VALUES (?1, ?1, ?2, ?3, ?4, ?4)
         ON CONFLICT(id) DO UPDATE SET last_seen_at = excluded.last_seen_at,
             runtime = COALESCE(excluded.runtime, runtime)",
    )?
    .execute(params![agent, team, runtime, now])?;
    Ok(())
}

/// When `agent`'s next call must be recorded: before its soonest lease (renewed or not)
/// falls under half, and at the latest [`SEEN_EVERY_MS`] from `now`. A claim made later
/// (in any process) starts a full lease, so it never needs an earlier one.
fn next_due(tx: &Connection, agent: &str, now: i64, lease: Option<i64>) -> Result<i64> {
    let seen = now + SEEN_EVERY_MS.min(lease.map_or(SEEN_EVERY_MS, |l| l / 2));
    let Some(lease) = lease else {
        return Ok(seen);
    };
    let soonest: Option<i64> = tx
        .prepare_cached(
            "SELECT min(lease_expires_at) FROM tasks
             WHERE assignee_agent_id = ?1 AND status = 'in_progress' AND lease_expires_at > ?2",
        )?
        .query_row(params![agent, now], |r| r.get(0))?;
    Ok(soonest.map_or(seen, |at| seen.min(at - lease / 2)))
}

/// A task an agent holds, as the agents view lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HeldTask {
    pub id: String,
    pub title: String,
    pub status: Status,
    pub lease_expires_at: Option<i64>,
    pub claim_token: i64,
}

/// An agent as the board's agents panel shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentSeen {
    pub id: String,
    pub name: String,
    pub team_id: Option<String>,
    pub runtime: Option<String>,
    pub last_seen_at: Option<i64>,
    /// Seen within two of its recording intervals: its calls are still coming.
    pub alive: bool,
    /// When it turns silent unless it calls again (epoch ms).
    pub alive_until: Option<i64>,
    /// Its unfinished tasks, soonest lease first.
    pub held: Vec<HeldTask>,
}

/// Who asks [`Store::claim_next`] for work.
#[derive(Debug, Clone, Copy)]
pub struct Claimant<'a> {
    pub agent_id: &'a str,
    /// Tasks naming another runtime are skipped.
    pub runtime: Option<&'a str>,
}

impl Store {
    /// Whether some `in_progress` lease has run out by now (one read of `tasks_by_lease`).
    pub fn has_expired_leases(&self) -> Result<bool> {
        let now = self.now_ms();
        self.read_sqlite(|c| {
            c.prepare_cached(
                "SELECT EXISTS (SELECT 1 FROM tasks INDEXED BY tasks_by_lease
                 WHERE status = 'in_progress' AND lease_expires_at <= ?1)",
            )?
            .query_row([now], |r| r.get::<_, bool>(0))
            .map_err(StoreError::from)
        })
    }

    /// Give every claim without a lease (made before leases existed, or while they were
    /// off) one that starts now, so no holder keeps a task forever: a read when there is
    /// none, else one write. Run when a store opens with leases on.
    pub(crate) fn lease_unleased_claims(&self) -> Result<()> {
        let Some(lease) = self.lease_ms() else {
            return Ok(());
        };
        const UNLEASED: &str = "FROM tasks INDEXED BY tasks_by_lease
             WHERE status = 'in_progress' AND lease_expires_at IS NULL
               AND assignee_agent_id IS NOT NULL";
        let any = self.read_sqlite(|c| {
            c.prepare_cached(&format!("SELECT EXISTS (SELECT 1 {UNLEASED})"))?
                .query_row([], |r| r.get::<_, bool>(0))
                .map_err(StoreError::from)
        })?;
        if any {
            let now = self.now_ms();
            self.write_sqlite(|tx| {
                tx.prepare_cached(&format!(
                    "UPDATE tasks SET lease_expires_at = ?1 + ?2 WHERE id IN (SELECT id {UNLEASED})"
                ))?
                .execute(params![now, lease])
                .map_err(StoreError::from)
            })?;
        }
        Ok(())
    }

    /// Apply the expiry rule now (the sweeper, and a list that meets an expired lease): a
    /// read when nothing ran out, else one write transaction. Returns what it reclaimed.
    pub fn expire_leases(&self) -> Result<Vec<Reclaimed>> {
        if !self.has_expired_leases()? {
            return Ok(Vec::new());
        }
        let now = self.now_ms();
        let reclaimed = self.write_sqlite(|tx| expire_in(tx, now))?;
        if !reclaimed.is_empty() {
            chat::ring_doorbell();
            tracing::info!(count = reclaimed.len(), "reclaimed expired leases");
        }
        Ok(reclaimed)
    }

    /// Whether `agent`'s call now must be recorded ([`Store::record_call`]): no database
    /// work, so most calls of a live agent stay what they are.
    pub fn call_record_due(&self, agent: &str) -> bool {
        let now = self.now_ms();
        let due = self.seen_due().lock().unwrap_or_else(|e| e.into_inner());
        due.get(agent).is_none_or(|at| now >= *at)
    }

    /// Record a call by `agent` (of `team`): its last-seen time, and every lease it holds
    /// with less than half left starts again. Remembers when the next call must be
    /// recorded; until then [`Store::call_record_due`] says no.
    pub fn record_call(&self, agent: &str, team: Option<&str>) -> Result<()> {
        let now = self.now_ms();
        let lease = self.lease_ms();
        let due = self.write_sqlite(|tx| {
            seen_in(tx, agent, team, None, now)?;
            if let Some(lease) = lease {
                renew_in(tx, agent, now, lease)?;
            }
            next_due(tx, agent, now, lease)
        })?;
        self.seen_due()
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(agent.to_owned(), due);
        Ok(())
    }

    /// Claim the first ready task (priority, then age) in `scope`'s team for `who`, in one
    /// transaction: one conditional update whose target is the first ready row, so racing
    /// callers in any number of processes get distinct tasks, and none is told
    /// nothing (`None`) while a ready task is left. Tasks whose `assigneeRuntime` names
    /// another runtime than `who`'s are skipped.
    pub fn claim_next(&self, who: Claimant<'_>, scope: Scope<'_>) -> Result<Option<Task>> {
        if who.agent_id.trim().is_empty() {
            return Err(StoreError::Invalid(
                "assigneeAgentId must not be empty".into(),
            ));
        }
        let now = self.now_ms();
        let lease = self.lease_ms();
        self.write_sqlite(|tx| {
            expire_in(tx, now)?;
            let sql = format!(
                "UPDATE tasks SET assignee_agent_id = ?1,
                     assignee_runtime = COALESCE(?2, assignee_runtime), status = 'in_progress',
                     updated_at = ?3, lease_expires_at = ?3 + ?4, {GRANT_LEASE}
                 WHERE id = (SELECT id FROM tasks
                     WHERE status = 'todo' AND assignee_agent_id IS NULL AND dropped = 0
                       AND (?5 IS NULL OR team_id = ?5)
                       AND (?2 IS NULL OR assignee_runtime IS NULL OR assignee_runtime = ?2)
                       AND NOT {UNFINISHED_DEP}
                     ORDER BY priority DESC, created_at, id LIMIT 1)
                 RETURNING id"
            );
            let claimed: Option<String> = tx
                .prepare_cached(&sql)?
                .query_row(
                    params![who.agent_id, who.runtime, now, lease, scope.team_id],
                    |r| r.get(0),
                )
                .optional()?;
            let Some(id) = claimed else {
                return Ok(None);
            };
            if who.runtime.is_some() {
                seen_in(tx, who.agent_id, scope.team_id, who.runtime, now)?;
            }
            require_task(tx, &id, scope).map(Some)
        })
    }

    /// Every agent (known ones and any holding a task) with its last call, whether it is
    /// alive and what it holds, by name.
    pub fn agents_seen(&self, team: Option<&str>) -> Result<Vec<AgentSeen>> {
        let now = self.now_ms();
        let seen_every = SEEN_EVERY_MS.min(self.lease_ms().map_or(SEEN_EVERY_MS, |l| l / 2));
        self.snapshot_sqlite(|c| {
            let mut agents: Vec<AgentSeen> = c
                .prepare_cached(
                    "SELECT id, name, team_id, runtime, last_seen_at FROM agents
                     WHERE ?1 IS NULL OR team_id = ?1",
                )?
                .query_map([team], |r| {
                    let last_seen_at: Option<i64> = r.get(4)?;
                    Ok(AgentSeen {
                        id: r.get(0)?,
                        name: r.get(1)?,
                        team_id: r.get(2)?,
                        runtime: r.get(3)?,
                        last_seen_at,
                        alive: last_seen_at.is_some_and(|at| now - at < 2 * seen_every),
                        alive_until: last_seen_at.map(|at| at + 2 * seen_every),
                        held: Vec::new(),
                    })
                })?
                .collect::<rusqlite::Result<_>>()?;
            let mut held = c.prepare_cached(
                "SELECT assignee_agent_id, team_id, id, title, status, lease_expires_at, claim_token
                 FROM tasks
                 WHERE assignee_agent_id IS NOT NULL AND dropped = 0
                   AND status IN ('in_progress', 'in_review', 'blocked')
                   AND (?1 IS NULL OR team_id = ?1)
                 ORDER BY lease_expires_at IS NULL, lease_expires_at, id",
            )?;
            let rows = held.query_map([team], |r| {
                let status: String = r.get(4)?;
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, Option<String>>(1)?,
                    HeldTask {
                        id: r.get(2)?,
                        title: r.get(3)?,
                        status: status.parse().unwrap_or(Status::InProgress),
                        lease_expires_at: r.get(5)?,
                        claim_token: r.get(6)?,
                    },
                ))
            })?;
            for row in rows {
                let (holder, team_id, task) = row?;
                match agents.iter_mut().find(|a| a.id == holder) {
                    Some(agent) => agent.held.push(task),
                    None => agents.push(AgentSeen {
                        id: holder.clone(),
                        name: holder,
                        team_id,
                        runtime: None,
                        last_seen_at: None,
                        alive: false,
                        alive_until: None,
                        held: vec![task],
                    }),
                }
            }
            agents.sort_by(|a, b| (&a.name, &a.id).cmp(&(&b.name, &b.id)));
            Ok(agents)
        })
    }
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

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
