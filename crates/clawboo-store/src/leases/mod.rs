//! Leases (SPEC §12): every claim holds its task for a while, the holder's calls renew it,
//! and an expired one puts the task back to `todo` with a comment, an inbox row for the
//! former holder and a post in the team's room. Each rule is one conditional statement
//! inside the caller's transaction, written once for both backends: the row it changes is
//! locked by that statement, so a rule holds exactly once across processes and hosts.

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;

use serde::Serialize;

use crate::chat::{self, PostKind};
use crate::db::{DbRow, PerEngine, Tx};
use crate::error::{Result, StoreError};
use crate::reads::{self, AsyncTx, Query, Reads, StoreRead, ready_now};
use crate::run::RunError;
use crate::task::{Scope, Status, Task, UNFINISHED_DEP, require_task_on};
use crate::writes::{AsyncWriteTx, StoreWrite, Writes};
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

/// A statement over leased rows, from its text up to its `tasks` table and the text after
/// it. SQLite's form names the partial index `tasks_by_lease` (`INDEXED BY`) between the
/// two: otherwise SQLite walks every `in_progress` task through `tasks_by_status`, inside
/// every claim's write lock. PostgreSQL has no such hint, and its planner picks the
/// partial index for these conditions by itself.
macro_rules! by_lease {
    ($head:literal, $tail:literal) => {
        PerEngine {
            sqlite: concat!($head, " INDEXED BY tasks_by_lease ", $tail),
            postgres: concat!($head, " ", $tail),
        }
    };
}

/// The expiry rule's one statement ([`expire_in`]).
const EXPIRE_LEASES: PerEngine = by_lease!(
    "UPDATE tasks",
    "SET status = 'todo', reclaimed_from = assignee_agent_id,
             assignee_runtime = NULL,
             reclaimed_at = lease_expires_at, assignee_agent_id = NULL, lease_expires_at = NULL,
             updated_at = ?1
         WHERE status = 'in_progress' AND lease_expires_at <= ?1
         RETURNING id, title, team_id, reclaimed_from, reclaimed_at"
);

/// Whether some lease ran out by `?1` ([`Store::has_expired_leases`]).
const ANY_EXPIRED: PerEngine = by_lease!(
    "SELECT EXISTS (SELECT 1 FROM tasks",
    "WHERE status = 'in_progress' AND lease_expires_at <= ?1)"
);

/// The claims without a lease ([`Store::lease_unleased_claims`]).
const UNLEASED: PerEngine = by_lease!(
    "FROM tasks",
    "WHERE status = 'in_progress' AND lease_expires_at IS NULL
               AND assignee_agent_id IS NOT NULL"
);

/// The expiry rule, inside the caller's write transaction: every `in_progress` task whose
/// lease ran out by `now` goes back to `todo` without an assignee, in one conditional
/// update (a second runner, in any process or on any host, waits on the rows' locks and
/// then matches nothing, so a row is reclaimed once); each gets a `system` comment, an
/// inbox row for its former holder and a `system` post in its team's room.
pub(crate) fn expire_in(tx: &dyn Tx, now: i64) -> Result<Vec<Reclaimed>> {
    ready_now(expire_on(tx, now))
}

/// [`expire_in`] in any write transaction.
async fn expire_on<W: Writes + ?Sized>(tx: &W, now: i64) -> Result<Vec<Reclaimed>> {
    let expire = expire_query(tx, now);
    let mut reclaimed = tx.query_map(expire, reclaimed_from_row).await?;
    narrate_reclaimed(tx, now, &mut reclaimed).await?;
    crate::counters::leases_reclaimed(reclaimed.len());
    Ok(reclaimed)
}

/// [`expire_on`] at `now`, for [`Store::run_transaction`].
struct Expire {
    now: i64,
}

impl StoreWrite for Expire {
    type Output = Vec<Reclaimed>;

    fn run(&self, tx: &dyn Tx) -> Result<Vec<Reclaimed>> {
        expire_in(tx, self.now)
    }

    fn run_async<'a>(&'a self, tx: &'a AsyncWriteTx) -> BoxFuture<'a, Result<Vec<Reclaimed>>> {
        Box::pin(expire_on(tx, self.now))
    }
}

/// The reclaim of every lease run out by `now`, to send with other statements; each row
/// it returns is one [`reclaimed_from_row`] reads, for [`narrate_reclaimed`].
pub(crate) fn expire_query<R: Reads + ?Sized>(tx: &R, now: i64) -> Query {
    Query::new(tx.statement(&EXPIRE_LEASES), &[&now])
}

/// One row of [`expire_query`].
pub(crate) fn reclaimed_from_row(r: &dyn DbRow) -> Result<Reclaimed> {
    Ok(Reclaimed {
        task_id: r.get(0)?,
        title: r.get(1)?,
        team_id: r.get(2)?,
        holder: r.get::<Option<String>>(3)?.unwrap_or_default(),
        expired_at: r.get(4)?,
    })
}

/// Tell the team of each reclaimed task, in the order the leases ran out.
pub(crate) async fn narrate_reclaimed<W: Writes + ?Sized>(
    tx: &W,
    now: i64,
    reclaimed: &mut [Reclaimed],
) -> Result<()> {
    // RETURNING does not promise an order: narrate in one, whichever engine ran it.
    reclaimed.sort_by(|a, b| (a.expired_at, &a.task_id).cmp(&(b.expired_at, &b.task_id)));
    for task in reclaimed.iter() {
        narrate(tx, now, task).await?;
    }
    Ok(())
}

/// `ms` (epoch milliseconds) as UTC `YYYY-MM-DDTHH:MM:SSZ`, computed here so that no
/// engine's date functions are needed (days to a civil date: Howard Hinnant's
/// `civil_from_days`; one call site, so no date crate).
fn utc_iso(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let (days, second_of_day) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let shifted_month = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * shifted_month + 2) / 5 + 1;
    let month = if shifted_month < 10 {
        shifted_month + 3
    } else {
        shifted_month - 9
    };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        second_of_day / 3600,
        second_of_day % 3600 / 60,
        second_of_day % 60
    )
}

/// The comment, inbox row and room post of one reclaimed task.
async fn narrate<W: Writes + ?Sized>(tx: &W, now: i64, task: &Reclaimed) -> Result<()> {
    let (id, title, holder) = (&task.task_id, &task.title, &task.holder);
    let when = utc_iso(task.expired_at);
    let comment = format!(
        "{holder}'s lease ran out at {when} without a call from {holder}; the task is back in todo for anyone to claim"
    );
    let insert = Query::new(
        "INSERT INTO task_comments(id, task_id, author_agent_id, author_type, body, created_at)
         VALUES (?1, ?2, NULL, 'system', ?3, ?4)",
        &[&crate::new_id(), id, &comment, &now],
    );
    tx.execute(insert).await?;
    let note = format!(
        "your lease on \"{title}\" ({id}) ran out at {when} and the task went back to todo: claim it again (claim_task) if you are still on it, and check its comments first"
    );
    inbox::push(tx, now, holder, task.team_id.as_deref(), "lease", &note).await?;
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
        )
        .await?;
    }
    Ok(())
}

/// The renewal rule, to run inside the caller's write transaction: every lease `agent`
/// holds on `team` (on every team when bound to none, as its scope is) with less than half
/// of `lease` left (and not yet run out) starts again from `now`. Leases belong to the team
/// and agent together (SPEC §16): the same agent id active on another team renews nothing.
fn renew_query(agent: &str, team: Option<&str>, now: i64, lease: i64) -> Query {
    Query::new(
        "UPDATE tasks SET lease_expires_at = ?2 + CAST(?3 AS BIGINT)
         WHERE assignee_agent_id = ?1 AND status = 'in_progress'
           AND (CAST(?4 AS TEXT) IS NULL OR team_id = ?4)
           AND lease_expires_at > ?2 AND lease_expires_at < ?2 + CAST(?3 AS BIGINT) / 2",
        &[&agent, &now, &lease, &team],
    )
}

/// Record `agent`'s call on `team` at `now` (its last-seen time there and, when given, its
/// runtime) inside the caller's write transaction; an agent never seen before joins the
/// roster under its id, on this team.
pub(crate) async fn seen_on<W: Writes + ?Sized>(
    tx: &W,
    agent: &str,
    team: Option<&str>,
    runtime: Option<&str>,
    now: i64,
) -> Result<()> {
    // Sent together: one round trip on PostgreSQL.
    tx.query_batch(seen_queries(agent, team, runtime, now).into())
        .await?;
    Ok(())
}

/// The statements of [`seen_on`], to send with others.
fn seen_queries(agent: &str, team: Option<&str>, runtime: Option<&str>, now: i64) -> [Query; 2] {
    let roster = Query::new(
        "INSERT INTO agents(id, name, team_id, runtime, created_at)
         VALUES (?1, ?1, ?2, ?3, ?4)
         ON CONFLICT(id) DO UPDATE SET runtime = COALESCE(excluded.runtime, agents.runtime)",
        &[&agent, &team, &runtime, &now],
    );
    let presence = Query::new(
        "INSERT INTO agent_presence(agent_id, team_key, runtime, last_seen_at)
         VALUES (?1, COALESCE(CAST(?2 AS TEXT), ''), ?3, ?4)
         ON CONFLICT(agent_id, team_key) DO UPDATE SET last_seen_at = excluded.last_seen_at,
             runtime = COALESCE(excluded.runtime, agent_presence.runtime)",
        &[&agent, &team, &runtime, &now],
    );
    [roster, presence]
}

/// A call by `agent` on `team` at `now`, recorded inside the caller's write transaction:
/// it was seen, its leases there with less than half of `lease` left renew, and the answer
/// is when its next call must be recorded: before its soonest lease there (renewed or not)
/// falls under half, and at the latest [`SEEN_EVERY_MS`] from `now`. A claim made later (in
/// any process) starts a full lease, so it never needs an earlier one. One round trip.
async fn record_on<W: Writes + ?Sized>(
    tx: &W,
    agent: &str,
    team: Option<&str>,
    now: i64,
    lease: Option<i64>,
) -> Result<i64> {
    let seen = now + SEEN_EVERY_MS.min(lease.map_or(SEEN_EVERY_MS, |l| l / 2));
    let mut batch = Vec::from(seen_queries(agent, team, None, now));
    let Some(lease) = lease else {
        tx.query_batch(batch).await?;
        return Ok(seen);
    };
    batch.push(renew_query(agent, team, now, lease));
    batch.push(Query::new(
        "SELECT min(lease_expires_at) FROM tasks
         WHERE assignee_agent_id = ?1 AND status = 'in_progress' AND lease_expires_at > ?2
           AND (CAST(?3 AS TEXT) IS NULL OR team_id = ?3)",
        &[&agent, &now, &team],
    ));
    let answers = tx.query_batch(batch).await?;
    let soonest = match answers.last().and_then(|rows| rows.first()) {
        Some(row) => row.get::<Option<i64>>(0)?,
        None => None,
    };
    Ok(soonest.map_or(seen, |at| seen.min(at - lease / 2)))
}

/// [`record_on`] with its arguments, for [`Store::run_transaction`].
struct RecordCall {
    agent: String,
    team: Option<String>,
    now: i64,
    lease: Option<i64>,
}

impl StoreWrite for RecordCall {
    type Output = i64;

    fn run(&self, tx: &dyn Tx) -> Result<i64> {
        ready_now(record_on(
            tx,
            &self.agent,
            self.team.as_deref(),
            self.now,
            self.lease,
        ))
    }

    fn run_async<'a>(&'a self, tx: &'a AsyncWriteTx) -> BoxFuture<'a, Result<i64>> {
        Box::pin(record_on(
            tx,
            &self.agent,
            self.team.as_deref(),
            self.now,
            self.lease,
        ))
    }
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

/// How many picks [`Store::claim_next`] makes before it gives up with
/// [`StoreError::Conflict`]. A pick is lost only when another claimer (a transaction on
/// another PostgreSQL connection) took the same row first, so each loss is a task handed
/// out; on SQLite, whose writers take turns, the first pick always holds.
const CLAIM_NEXT_ATTEMPTS: usize = 32;

/// Who asks [`Store::claim_next`] for work.
#[derive(Debug, Clone, Copy)]
pub struct Claimant<'a> {
    pub agent_id: &'a str,
    /// Tasks naming another runtime are skipped.
    pub runtime: Option<&'a str>,
    /// Paths the claim reserves (SPEC §19), replacing the claimed task's declared ones;
    /// `None` reserves the declared ones, and tasks whose declared paths another agent
    /// holds are skipped.
    pub paths: Option<&'a [String]>,
}

/// The claim of [`Store::claim_next`], inside the caller's write transaction: one
/// conditional update whose target is the first ready row of `team`; the claimed task's id,
/// or `None` when nothing is ready. The reclaim of expired leases goes first, in the same
/// round trip as the first pick (SPEC §12: a claim that meets one reclaims it).
///
/// The update tests readiness again on the row it picked: PostgreSQL re-checks an update's
/// own `WHERE` (not the sub-select that picked the row) once the row's lock is free, so a
/// racer that picked the same row as a winner changes nothing and picks again, up to
/// [`CLAIM_NEXT_ATTEMPTS`] times while a ready task remains. On PostgreSQL a pick passes
/// over the rows other transactions hold ([`SKIP_LOCKED`]) unless every ready row is held,
/// so racers rarely meet on one row: with every pick aimed at the first ready row, a team
/// draining a queue over HTTP lost all of them and was told `conflict`.
async fn claim_next_on<W: Writes + ?Sized>(
    tx: &W,
    who: Claimant<'_>,
    team: Option<&str>,
    now: i64,
    lease: Option<i64>,
) -> Result<Option<String>> {
    // `?1` the team, `?2` the runtime.
    let ready = format!(
        "status = 'todo' AND assignee_agent_id IS NULL AND dropped = 0
           AND (CAST(?1 AS TEXT) IS NULL OR team_id = ?1)
           AND (CAST(?2 AS TEXT) IS NULL OR assignee_runtime IS NULL OR assignee_runtime = ?2)
           AND NOT {UNFINISHED_DEP}"
    );
    if who.paths.is_some() {
        expire_on(tx, now).await?;
        return claim_next_reserving(tx, who, team, now, lease, &ready).await;
    }
    // A claim that names no paths takes the first ready task only when no ready task
    // declares paths (one statement, no team lock, as before reservations); when one
    // does, the claim goes the reserving way, which skips what others hold. The pick
    // locks no row it does not claim, so a claim that then goes the reserving way takes
    // the team's lock before any row's, as every reserving claim does (the other order
    // deadlocks).
    let claim = |locking: &str| {
        format!(
            "UPDATE tasks SET assignee_agent_id = ?3,
                 assignee_runtime = COALESCE(?2, assignee_runtime), status = 'in_progress',
                 updated_at = ?4, lease_expires_at = ?4 + CAST(?5 AS BIGINT), {GRANT_LEASE}
             WHERE id = (SELECT id FROM tasks WHERE {ready} AND paths IS NULL
                           AND NOT EXISTS (SELECT 1 FROM tasks WHERE {ready} AND paths IS NOT NULL)
                         ORDER BY priority DESC, created_at, id LIMIT 1{locking})
               AND {ready} AND paths IS NULL
             RETURNING id"
        )
    };
    // A pick that passes over the rows other claimers hold takes a task nobody else is
    // taking; only when every ready row is held does the next pick wait for one (whose
    // holder may yet let it go), then pass over held rows again.
    let (skipping, waiting) = (claim(tx.statement(&SKIP_LOCKED)), claim(""));
    let mut skip = true;
    // Whether some ready task declares paths (only then does the claim take the
    // reserving way and its lock), and whether any is ready at all.
    let ready_kinds = format!(
        "SELECT EXISTS (SELECT 1 FROM tasks WHERE {ready} AND paths IS NOT NULL),
                EXISTS (SELECT 1 FROM tasks WHERE {ready})"
    );
    for attempt in 0..CLAIM_NEXT_ATTEMPTS {
        let text = if skip { &skipping } else { &waiting };
        let pick = Query::new(
            text.clone(),
            &[&team, &who.runtime, &who.agent_id, &now, &lease],
        );
        let mut batch = Vec::with_capacity(2);
        if attempt == 0 {
            batch.push(expire_query(tx, now));
        }
        batch.push(pick);
        let mut answers = tx.query_batch(batch).await?.into_iter();
        if attempt == 0 {
            let mut reclaimed = Vec::new();
            for row in answers.next().unwrap_or_default() {
                reclaimed.push(reclaimed_from_row(&*row)?);
            }
            narrate_reclaimed(tx, now, &mut reclaimed).await?;
            crate::counters::leases_reclaimed(reclaimed.len());
        }
        if let Some(row) = answers.next().unwrap_or_default().first() {
            return Ok(Some(row.get::<String>(0)?));
        }
        let kinds = Query::new(ready_kinds.clone(), &[&team, &who.runtime]);
        let kinds = tx
            .query_map(kinds, |r| Ok((r.get::<bool>(0)?, r.get::<bool>(1)?)))
            .await?;
        match kinds.first() {
            Some((true, _)) => {
                return claim_next_reserving(tx, who, team, now, lease, &ready).await;
            }
            Some((false, true)) => skip = !skip,
            _ => return Ok(None),
        }
    }
    Err(lost_every_pick(who))
}

/// The locking clause of `claim_next`'s pick that passes over rows another transaction
/// holds (another claimer's pick), so racers on PostgreSQL take distinct tasks instead of
/// all queueing on the first ready one and all but one losing it; SQLite's writers take
/// turns, so it needs none (and has no such clause).
const SKIP_LOCKED: PerEngine = PerEngine {
    sqlite: "",
    postgres: " FOR UPDATE SKIP LOCKED",
};

/// The refusal of a `claim_next` whose every pick another claimer took first.
fn lost_every_pick(who: Claimant<'_>) -> StoreError {
    tracing::warn!(
        agent = who.agent_id,
        attempts = CLAIM_NEXT_ATTEMPTS,
        "claim_next lost every pick to other claimers"
    );
    StoreError::Conflict
}

/// The first ready task (`candidates`, in the board's order) that `who` may take: its
/// declared paths free of other agents' reservations (`held`, the team's; a board-wide
/// claim reads each task's team's under that team's lock), or, when `who` names paths, the
/// first one at all, refused as [`StoreError::Reserved`] when those paths are held on its
/// team. Pages through the ready tasks, twice as many each time.
async fn first_free<W: Writes + ?Sized>(
    tx: &W,
    who: Claimant<'_>,
    team: Option<&str>,
    now: i64,
    held: &[crate::reservations::Reservation],
    candidates: &str,
) -> Result<Option<String>> {
    let mut want: i64 = 8;
    loop {
        let page = Query::new(candidates.to_owned(), &[&team, &who.runtime, &want]);
        let rows = tx
            .query_map(page, |r| {
                Ok((
                    r.get::<String>(0)?,
                    r.get::<Option<String>>(1)?,
                    r.get::<Option<String>>(2)?,
                ))
            })
            .await?;
        let seen_all = (rows.len() as i64) < want;
        for (id, task_team, declared) in rows {
            let reserving = match who.paths {
                Some(paths) => paths.to_vec(),
                None => crate::reservations::split(declared.as_deref()),
            };
            let conflict = if reserving.is_empty() {
                None
            } else if team.is_none() {
                crate::reservations::lock_on(tx, task_team.as_deref()).await?;
                let theirs = crate::reservations::held_by_others_on(
                    tx,
                    now,
                    task_team.as_deref(),
                    who.agent_id,
                )
                .await?;
                crate::reservations::first_conflict(&reserving, &theirs)
            } else if who.paths.is_none() {
                crate::reservations::first_conflict(&reserving, held)
            } else {
                // Checked against the team's reservations before any pick.
                None
            };
            match conflict {
                None => return Ok(Some(id)),
                Some(refusal) if who.paths.is_some() => return Err(refusal),
                Some(_) => {}
            }
        }
        if seen_all {
            return Ok(None);
        }
        want = want.saturating_mul(2);
    }
}

/// `claim_next` when the claim reserves paths, under the team's reservation lock: with
/// `who.paths`, refused as [`StoreError::Reserved`] when another agent holds an overlapping
/// reservation, else the first ready task; without, the first ready task whose declared
/// paths no other agent holds. Claims that reserve nothing do not take the lock and may
/// take the picked row first: the pick then moves on, as in [`claim_next_on`].
async fn claim_next_reserving<W: Writes + ?Sized>(
    tx: &W,
    who: Claimant<'_>,
    team: Option<&str>,
    now: i64,
    lease: Option<i64>,
    ready: &str,
) -> Result<Option<String>> {
    // The team's reservations, read once under its lock; a claim over the whole board
    // (no team) reads each candidate's team's below instead.
    let held = match team {
        Some(_) => {
            crate::reservations::lock_on(tx, team).await?;
            crate::reservations::held_by_others_on(tx, now, team, who.agent_id).await?
        }
        None => Vec::new(),
    };
    if team.is_some()
        && let Some(paths) = who.paths
        && let Some(refusal) = crate::reservations::first_conflict(paths, &held)
    {
        return Err(refusal);
    }
    let new_paths = who.paths.and_then(crate::reservations::join);
    let claim = format!(
        "UPDATE tasks SET assignee_agent_id = ?3,
             assignee_runtime = COALESCE(?2, assignee_runtime), status = 'in_progress',
             updated_at = ?4, lease_expires_at = ?4 + CAST(?5 AS BIGINT),
             paths = COALESCE(?7, paths), {GRANT_LEASE}
         WHERE id = ?6 AND {ready}
         RETURNING id"
    );
    let candidates = format!(
        "SELECT id, team_id, paths FROM tasks WHERE {ready}
         ORDER BY priority DESC, created_at, id LIMIT ?3"
    );
    for _ in 0..CLAIM_NEXT_ATTEMPTS {
        let Some(id) = first_free(tx, who, team, now, &held, &candidates).await? else {
            return Ok(None);
        };
        let pick = Query::new(
            claim.clone(),
            &[
                &team,
                &who.runtime,
                &who.agent_id,
                &now,
                &lease,
                &id,
                &new_paths,
            ],
        );
        if let Some(row) = reads::query_first(tx, pick).await? {
            return Ok(Some(row.get::<String>(0)?));
        }
    }
    Err(lost_every_pick(who))
}

/// A [`Store::claim_next`] with its arguments checked, for [`Store::run_transaction`].
struct ClaimNextWrite {
    agent_id: String,
    runtime: Option<String>,
    /// Normalised; `None` reserves each candidate's declared paths.
    paths: Option<Vec<String>>,
    team_id: Option<String>,
    now: i64,
    lease: Option<i64>,
}

impl ClaimNextWrite {
    fn new(store: &Store, who: Claimant<'_>, team_id: Option<&str>) -> Result<ClaimNextWrite> {
        if who.agent_id.trim().is_empty() {
            return Err(StoreError::Invalid(
                "assigneeAgentId must not be empty".into(),
            ));
        }
        let paths = who
            .paths
            .map(crate::reservations::normalize_paths)
            .transpose()?;
        Ok(ClaimNextWrite {
            agent_id: who.agent_id.to_owned(),
            runtime: who.runtime.map(str::to_owned),
            paths,
            team_id: team_id.map(str::to_owned),
            now: store.now_ms(),
            lease: store.lease_ms(),
        })
    }

    async fn claim<W: Writes + ?Sized>(&self, tx: &W) -> Result<Option<Task>> {
        let who = Claimant {
            agent_id: &self.agent_id,
            runtime: self.runtime.as_deref(),
            paths: self.paths.as_deref(),
        };
        let team = self.team_id.as_deref();
        let Some(id) = claim_next_on(tx, who, team, self.now, self.lease).await? else {
            return Ok(None);
        };
        if who.runtime.is_some() {
            seen_on(tx, who.agent_id, team, who.runtime, self.now).await?;
        }
        require_task_on(tx, &id, Scope::team(team)).await.map(Some)
    }
}

impl StoreWrite for ClaimNextWrite {
    type Output = Option<Task>;

    fn run(&self, tx: &dyn Tx) -> Result<Option<Task>> {
        ready_now(self.claim(tx))
    }

    fn run_async<'a>(&'a self, tx: &'a AsyncWriteTx) -> BoxFuture<'a, Result<Option<Task>>> {
        Box::pin(self.claim(tx))
    }
}

impl Store {
    /// Whether some `in_progress` lease has run out by now (one read of `tasks_by_lease`).
    pub fn has_expired_leases(&self) -> Result<bool> {
        let now = self.now_ms();
        self.read(|tx| ready_now(read_any_expired(tx, now)))
    }

    /// [`Store::expire_leases`] for an async caller: the check and (only when a lease ran
    /// out) the write, each run the way the engine runs it best
    /// ([`Store::run_read_committed`], [`Store::run_transaction`]).
    pub async fn expire_leases_async(
        self: &Arc<Store>,
    ) -> std::result::Result<Result<Vec<Reclaimed>>, RunError> {
        let now = self.now_ms();
        match self.run_read_committed(ExpiredRead { now }).await? {
            Ok(false) => Ok(Ok(Vec::new())),
            Ok(true) => {
                let reclaimed = self.run_transaction(Expire { now }).await?;
                if let Ok(reclaimed) = &reclaimed
                    && !reclaimed.is_empty()
                {
                    tracing::info!(count = reclaimed.len(), "reclaimed expired leases");
                }
                Ok(reclaimed)
            }
            Err(e) => Ok(Err(e)),
        }
    }

    /// Give every claim without a lease (made before leases existed, or while they were
    /// off) one that starts now, so no holder keeps a task forever: a read when there is
    /// none, else one write. Run when a store opens with leases on.
    pub(crate) fn lease_unleased_claims(&self) -> Result<()> {
        let Some(lease) = self.lease_ms() else {
            return Ok(());
        };
        let any = self.read(|tx| {
            let unleased = tx.statement(&UNLEASED);
            tx.query_one(&format!("SELECT EXISTS (SELECT 1 {unleased})"), &[], |r| {
                r.get::<bool>(0)
            })
        })?;
        if any {
            let now = self.now_ms();
            self.write(|tx| {
                let unleased = tx.statement(&UNLEASED);
                tx.execute(
                    &format!(
                        "UPDATE tasks SET lease_expires_at = CAST(?1 AS BIGINT) + CAST(?2 AS BIGINT)
                         WHERE id IN (SELECT id {unleased})"
                    ),
                    &[&now, &lease],
                )
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
        let reclaimed = self.write(|tx| expire_in(tx, now))?;
        if !reclaimed.is_empty() {
            tracing::info!(count = reclaimed.len(), "reclaimed expired leases");
        }
        Ok(reclaimed)
    }

    /// Whether `agent`'s call on `team` now must be recorded ([`Store::record_call`]): no
    /// database work, so most calls of a live agent stay what they are.
    pub fn call_record_due(&self, agent: &str, team: Option<&str>) -> bool {
        let now = self.now_ms();
        let due = self.seen_due().lock().unwrap_or_else(|e| e.into_inner());
        due.get(&(team.map(str::to_owned), agent.to_owned()))
            .is_none_or(|at| now >= *at)
    }

    /// Record a call by `agent` on `team`: its last-seen time there, and every lease it
    /// holds there with less than half left starts again. Remembers when the next call must
    /// be recorded; until then [`Store::call_record_due`] says no.
    pub fn record_call(&self, agent: &str, team: Option<&str>) -> Result<()> {
        let record = self.call_record(agent.to_owned(), team.map(str::to_owned));
        let due = self.write(|tx| record.run(tx))?;
        self.remember_due(record.agent, record.team, due);
        Ok(())
    }

    /// [`Store::record_call`] for an async caller, run the way the engine runs writes best
    /// ([`Store::run_transaction`]).
    pub async fn record_call_async(
        self: &Arc<Store>,
        agent: String,
        team: Option<String>,
    ) -> std::result::Result<Result<()>, RunError> {
        let record = self.call_record(agent.clone(), team.clone());
        let due = self.run_transaction(record).await?;
        Ok(due.map(|due| self.remember_due(agent, team, due)))
    }

    fn call_record(&self, agent: String, team: Option<String>) -> RecordCall {
        RecordCall {
            agent,
            team,
            now: self.now_ms(),
            lease: self.lease_ms(),
        }
    }

    /// Until `due`, [`Store::call_record_due`] says `agent`'s calls on `team` need not be
    /// recorded.
    fn remember_due(&self, agent: String, team: Option<String>, due: i64) {
        self.seen_due()
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert((team, agent), due);
    }

    /// Claim the first ready task (priority, then age) in `scope`'s team for `who`, in one
    /// transaction (`claim_next_on`), so racing callers in any number of processes and
    /// hosts get distinct tasks, and none is told nothing (`None`) while a ready task is
    /// left. Tasks whose `assigneeRuntime` names another runtime than `who`'s are skipped.
    pub fn claim_next(&self, who: Claimant<'_>, scope: Scope<'_>) -> Result<Option<Task>> {
        let claim = ClaimNextWrite::new(self, who, scope.team_id)?;
        self.write(|tx| claim.run(tx))
    }

    /// [`Store::claim_next`] for an async caller, run the way the engine runs writes best
    /// ([`Store::run_transaction`]).
    pub async fn claim_next_async(
        self: &Arc<Store>,
        who: Claimant<'_>,
        team_id: Option<&str>,
    ) -> std::result::Result<Result<Option<Task>>, RunError> {
        match ClaimNextWrite::new(self, who, team_id) {
            Ok(claim) => self.run_transaction(claim).await,
            Err(e) => Ok(Err(e)),
        }
    }

    /// Every agent on each team it is known or seen on (the roster's agents, those seen
    /// calling on a team, any holding a task) with its last call there, whether it is alive
    /// there and what it holds there, by name.
    pub fn agents_seen(&self, team: Option<&str>) -> Result<Vec<AgentSeen>> {
        let read = self.agents_seen_read(team);
        self.snapshot(|tx| read.run(tx))
    }

    /// [`Store::agents_seen`] for an async caller, run the way the engine runs a
    /// snapshot best ([`Store::run_snapshot`]).
    pub async fn agents_seen_async(
        self: &Arc<Store>,
        team: Option<&str>,
    ) -> std::result::Result<Result<Vec<AgentSeen>>, RunError> {
        self.run_snapshot(self.agents_seen_read(team)).await
    }

    fn agents_seen_read(&self, team: Option<&str>) -> AgentsSeenRead {
        AgentsSeenRead {
            team: team.map(str::to_owned),
            now: self.now_ms(),
            seen_every: SEEN_EVERY_MS.min(self.lease_ms().map_or(SEEN_EVERY_MS, |l| l / 2)),
        }
    }
}

/// The agents view of `team` at `now` (alive: seen within twice `seen_every`), for
/// [`Store::run_snapshot`].
struct AgentsSeenRead {
    team: Option<String>,
    now: i64,
    seen_every: i64,
}

impl AgentsSeenRead {
    /// The roster's rows with their presence on their own team, then the presences on
    /// other teams, and the tasks held: two statements in one round trip on PostgreSQL.
    async fn read<R: Reads + ?Sized>(&self, tx: &R) -> Result<Vec<AgentSeen>> {
        let (team, now, seen_every) = (self.team.as_deref(), self.now, self.seen_every);
        let batch = vec![
            Query::new(
                "SELECT a.id, a.name, a.team_id, COALESCE(p.runtime, a.runtime), p.last_seen_at
                 FROM agents a LEFT JOIN agent_presence p
                   ON p.agent_id = a.id AND p.team_key = COALESCE(a.team_id, '')
                 WHERE CAST(?1 AS TEXT) IS NULL OR a.team_id = ?1
                 UNION ALL
                 SELECT p.agent_id, COALESCE(a.name, p.agent_id), NULLIF(p.team_key, ''),
                        p.runtime, p.last_seen_at
                 FROM agent_presence p LEFT JOIN agents a ON a.id = p.agent_id
                 WHERE (CAST(?1 AS TEXT) IS NULL OR p.team_key = ?1)
                   AND (a.id IS NULL OR p.team_key <> COALESCE(a.team_id, ''))",
                &[&team],
            ),
            Query::new(
                "SELECT assignee_agent_id, team_id, id, title, status, lease_expires_at, claim_token
                 FROM tasks
                 WHERE assignee_agent_id IS NOT NULL AND dropped = 0
                   AND status IN ('in_progress', 'in_review', 'blocked')
                   AND (CAST(?1 AS TEXT) IS NULL OR team_id = ?1)
                 ORDER BY lease_expires_at IS NULL, lease_expires_at, id",
                &[&team],
            ),
        ];
        let mut answers = tx.query_batch(batch).await?.into_iter();
        let mut agents = Vec::new();
        for r in answers.next().unwrap_or_default() {
            let last_seen_at: Option<i64> = r.get(4)?;
            agents.push(AgentSeen {
                id: r.get(0)?,
                name: r.get(1)?,
                team_id: r.get(2)?,
                runtime: r.get(3)?,
                last_seen_at,
                alive: last_seen_at.is_some_and(|at| now - at < 2 * seen_every),
                alive_until: last_seen_at.map(|at| at + 2 * seen_every),
                held: Vec::new(),
            });
        }
        for r in answers.next().unwrap_or_default() {
            let (holder, team_id): (String, Option<String>) = (r.get(0)?, r.get(1)?);
            let status: String = r.get(4)?;
            let task = HeldTask {
                id: r.get(2)?,
                title: r.get(3)?,
                status: status.parse().unwrap_or(Status::InProgress),
                lease_expires_at: r.get(5)?,
                claim_token: r.get(6)?,
            };
            // Its holder on the task's team, else the holder bound to no team (whose
            // scope is every team).
            let on_team = agents
                .iter()
                .position(|a| a.id == holder && a.team_id == team_id)
                .or_else(|| {
                    agents
                        .iter()
                        .position(|a| a.id == holder && a.team_id.is_none())
                });
            match on_team.and_then(|at| agents.get_mut(at)) {
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
    }
}

impl StoreRead for AgentsSeenRead {
    type Output = Vec<AgentSeen>;

    fn run(&self, tx: &dyn Tx) -> Result<Vec<AgentSeen>> {
        ready_now(self.read(tx))
    }

    fn run_async<'a>(&'a self, tx: &'a AsyncTx) -> BoxFuture<'a, Result<Vec<AgentSeen>>> {
        Box::pin(self.read(tx))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;

/// [`Store::has_expired_leases`]'s read, on any transaction.
async fn read_any_expired<R: Reads + ?Sized>(tx: &R, now: i64) -> Result<bool> {
    let query = Query::new(tx.statement(&ANY_EXPIRED), &[&now]);
    let found = reads::query_first(tx, query).await?;
    found.map_or(Ok(false), |row| row.get::<bool>(0))
}

/// [`read_any_expired`] at a time, for [`Store::run_read_committed`].
struct ExpiredRead {
    now: i64,
}

impl StoreRead for ExpiredRead {
    type Output = bool;

    fn run(&self, tx: &dyn Tx) -> Result<bool> {
        ready_now(read_any_expired(tx, self.now))
    }

    fn run_async<'a>(&'a self, tx: &'a AsyncTx) -> BoxFuture<'a, Result<bool>> {
        Box::pin(read_any_expired(tx, self.now))
    }
}
