//! Short task ids (`RED-12`), the ones people say in chat and write in commits: each team
//! has a key, and each task the next number of its team's counter, given in the
//! transaction that inserts it and never changed after (a team's rename, a move or a drop
//! leave it as it is). The counter moves only in that transaction, so the numbers of one
//! team run 1, 2, 3, … with no repeat and no gap, however many processes or hosts create
//! at once: SQLite's writers take turns, and on PostgreSQL the counter's row is locked by
//! the `UPDATE` that moves it until the creating transaction ends.
//!
//! Team ids are free strings (a `teams` row only gives a name), so a team gets its key the
//! first time it needs one: when its row is created, or its first task when it has none.
//! Tasks of no team share the key [`NO_TEAM_KEY`].

use std::borrow::Cow;
use std::sync::Arc;

use futures_util::future::BoxFuture;

use crate::Store;
use crate::db::Tx;
use crate::error::{Result, StoreError};
use crate::reads::{self, AsyncTx, Query, Reads, StoreRead, ready_now};
use crate::run::RunError;
use crate::task::Scope;
use crate::writes::Writes;

/// The key of the tasks that belong to no team.
pub const NO_TEAM_KEY: &str = "TASK";
/// Longest key an operator may choose.
pub const MAX_KEY_CHARS: usize = 10;
/// `task_keys.team_id` for the tasks of no team (a primary key cannot be NULL).
const NO_TEAM: &str = "";
/// Held while a key is chosen, so two teams never pick the same one at once.
const KEYS_LOCK: &str = "task-keys";

/// The default key of a team named `name`: the initials of its first four words, or the
/// first three characters of a one-word name, uppercased ASCII ("Red" → `RED`, "Platform
/// infra" → `PI`), starting with a letter (`T` is put first when it would not).
pub fn derive_key(name: &str) -> String {
    let words: Vec<&str> = name
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect();
    let mut key: String = match words.as_slice() {
        [word] => word.chars().take(3).collect(),
        many => many
            .iter()
            .take(4)
            .filter_map(|w| w.chars().next())
            .collect(),
    };
    key.make_ascii_uppercase();
    if !key.starts_with(|c: char| c.is_ascii_alphabetic()) {
        key.insert(0, 'T');
    }
    key
}

/// Whether `key` may be a team's key: an uppercase ASCII letter, then up to nine more
/// letters or digits (no `-`, so `KEY-12` always splits at its dash).
pub fn valid_key(key: &str) -> bool {
    key.len() <= MAX_KEY_CHARS
        && key.starts_with(|c: char| c.is_ascii_uppercase())
        && key
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit())
}

/// `reference` written as a short id (any case, `red-12`), in its stored form (`RED-12`),
/// or `None` when it is not one (a task's UUID never is).
pub fn parse(reference: &str) -> Option<String> {
    let (key, number) = reference.trim().rsplit_once('-')?;
    let key = key.to_ascii_uppercase();
    if !valid_key(&key) || number.is_empty() || !number.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let number: u64 = number.parse().ok().filter(|n| *n > 0)?;
    Some(format!("{key}-{number}"))
}

/// The id of the task `reference` names in `scope`: a short id is looked up among the
/// tasks `scope` may see (another team's `RED-12` is not found, exactly as a task that
/// does not exist), anything else is taken as the task's id. A short id that names no task
/// comes back as given, for the caller's own "not found".
pub(crate) fn resolve<'r>(
    tx: &dyn Tx,
    reference: &'r str,
    scope: Scope<'_>,
) -> Result<Cow<'r, str>> {
    ready_now(resolve_on(tx, reference, scope))
}

/// [`resolve`] on any transaction, synchronous or not.
pub(crate) async fn resolve_on<'r, R: Reads + ?Sized>(
    tx: &R,
    reference: &'r str,
    scope: Scope<'_>,
) -> Result<Cow<'r, str>> {
    let Some(short) = parse(reference) else {
        return Ok(Cow::Borrowed(reference));
    };
    let query = Query::new(
        "SELECT id FROM tasks WHERE short_id = ?1 AND (CAST(?2 AS TEXT) IS NULL OR team_id = ?2)",
        &[&short, &scope.team_id],
    );
    let found = reads::query_first(tx, query).await?;
    let id = found.map(|row| row.get::<String>(0)).transpose()?;
    Ok(id.map_or(Cow::Borrowed(reference), Cow::Owned))
}

/// The short id of a new task of `team_id`: the team's counter moved on by one, inside the
/// caller's (creating) transaction.
pub(crate) async fn next<W: Writes + ?Sized>(tx: &W, team_id: Option<&str>) -> Result<String> {
    let team = team_id.unwrap_or(NO_TEAM);
    if let Some(short) = take_number(tx, team).await? {
        return Ok(short);
    }
    give_key(tx, team).await?;
    take_number(tx, team)
        .await?
        .ok_or_else(|| StoreError::Invalid(format!("team {team} has no key")))
}

async fn take_number<W: Writes + ?Sized>(tx: &W, team: &str) -> Result<Option<String>> {
    let take = Query::new(
        "UPDATE task_keys SET next_number = next_number + 1 WHERE team_id = ?1
         RETURNING key, next_number - 1",
        &[&team],
    );
    let taken = tx
        .query_map(take, |r| {
            Ok(format!("{}-{}", r.get::<String>(0)?, r.get::<i64>(1)?))
        })
        .await?;
    Ok(taken.into_iter().next())
}

/// `team`'s key, the default one chosen and stored when it has none: derived from its
/// name (or its id, when it has no `teams` row), with 2, 3, … appended while another team
/// holds it.
async fn give_key<W: Writes + ?Sized>(tx: &W, team: &str) -> Result<String> {
    tx.serialize_on(KEYS_LOCK.to_owned()).await?;
    if let Some(key) = key_of(tx, team).await? {
        return Ok(key);
    }
    let base = if team == NO_TEAM {
        NO_TEAM_KEY.to_owned()
    } else {
        let name = Query::new("SELECT name FROM teams WHERE id = ?1", &[&team]);
        let name = first_text(tx, name).await?;
        derive_key(name.as_deref().unwrap_or(team))
    };
    let mut key = base.clone();
    let mut suffix = 1;
    while holder_of(tx, &key).await?.is_some() {
        suffix += 1;
        key = format!("{base}{suffix}");
    }
    let insert = Query::new(
        "INSERT INTO task_keys(team_id, key, next_number) VALUES (?1, ?2, 1)",
        &[&team, &key],
    );
    tx.execute(insert).await?;
    Ok(key)
}

async fn key_of<R: Reads + ?Sized>(tx: &R, team: &str) -> Result<Option<String>> {
    let query = Query::new("SELECT key FROM task_keys WHERE team_id = ?1", &[&team]);
    first_text(tx, query).await
}

async fn holder_of<R: Reads + ?Sized>(tx: &R, key: &str) -> Result<Option<String>> {
    let query = Query::new("SELECT team_id FROM task_keys WHERE key = ?1", &[&key]);
    first_text(tx, query).await
}

/// The first column of `query`'s first row, as text; `None` when it returned none.
async fn first_text<R: Reads + ?Sized>(tx: &R, query: Query) -> Result<Option<String>> {
    let texts = tx.query_map(query, |r| r.get::<String>(0)).await?;
    Ok(texts.into_iter().next())
}

/// Give team `team` its key: `wanted` when asked for (refused when another team holds it,
/// or when the team's tasks already carry another key: short ids never change), else the
/// default one when it has none.
pub(crate) async fn set_key<W: Writes + ?Sized>(
    tx: &W,
    team: &str,
    wanted: Option<&str>,
) -> Result<String> {
    let Some(wanted) = wanted else {
        return give_key(tx, team).await;
    };
    let wanted = wanted.trim().to_ascii_uppercase();
    if !valid_key(&wanted) {
        return Err(StoreError::Invalid(format!(
            "key {wanted:?} is not a team key: use a letter, then up to {} letters or digits (RED, WEB2)",
            MAX_KEY_CHARS - 1
        )));
    }
    tx.serialize_on(KEYS_LOCK.to_owned()).await?;
    match holder_of(tx, &wanted).await? {
        Some(holder) if holder == team => return Ok(wanted),
        Some(holder) => {
            return Err(StoreError::Invalid(format!(
                "key {wanted} is taken by {}: pick another",
                if holder == NO_TEAM {
                    "the tasks of no team".to_owned()
                } else {
                    format!("team {holder}")
                }
            )));
        }
        None => {}
    }
    let numbered = Query::new(
        "SELECT key, next_number FROM task_keys WHERE team_id = ?1",
        &[&team],
    );
    let numbered = tx
        .query_map(numbered, |r| Ok((r.get::<String>(0)?, r.get::<i64>(1)?)))
        .await?;
    let change = match numbered.first() {
        Some((key, next)) if *next > 1 => {
            return Err(StoreError::Invalid(format!(
                "team {team}'s tasks already carry the key {key} ({key}-1 to {key}-{}): a short id never changes, so neither does the key",
                next - 1
            )));
        }
        Some(_) => Query::new(
            "UPDATE task_keys SET key = ?2 WHERE team_id = ?1",
            &[&team, &wanted],
        ),
        None => Query::new(
            "INSERT INTO task_keys(team_id, key, next_number) VALUES (?1, ?2, 1)",
            &[&team, &wanted],
        ),
    };
    tx.execute(change).await?;
    Ok(wanted)
}

/// Tasks made before short ids existed (or teams without a key) get theirs, each team's in
/// creation order, so an upgraded board reads as if it always had them: a read when there
/// is nothing to do, else one write.
const UNNUMBERED: &str = "SELECT EXISTS (SELECT 1 FROM tasks WHERE short_id IS NULL)
     OR EXISTS (SELECT 1 FROM teams WHERE NOT EXISTS
         (SELECT 1 FROM task_keys k WHERE k.team_id = teams.id))";

impl Store {
    /// Number the tasks made before short ids existed, and key the teams that have none
    /// (run when a store opens).
    pub(crate) fn number_unnumbered_tasks(&self) -> Result<()> {
        if !self.read(|tx| tx.query_one(UNNUMBERED, &[], |r| r.get::<bool>(0)))? {
            return Ok(());
        }
        self.write(|tx| {
            tx.serialize_on(KEYS_LOCK)?;
            // Named teams first (oldest first, so the oldest keeps a plain key), then the
            // team ids only tasks name, by their first task.
            let mut teams: Vec<String> =
                tx.query_map("SELECT id FROM teams ORDER BY created_at, id", &[], |r| {
                    r.get(0)
                })?;
            teams.extend(tx.query_map(
                "SELECT COALESCE(team_id, '') FROM tasks WHERE short_id IS NULL
                 GROUP BY COALESCE(team_id, '') ORDER BY MIN(created_at), COALESCE(team_id, '')",
                &[],
                |r| r.get::<String>(0),
            )?);
            for team in &teams {
                ready_now(give_key(tx, team))?;
                let numbered = tx.execute(
                    "UPDATE tasks SET short_id = numbered.short_id FROM (
                         SELECT t.id, k.key || '-' || CAST(k.next_number - 1
                             + ROW_NUMBER() OVER (ORDER BY t.created_at, t.id) AS TEXT) AS short_id
                         FROM tasks t JOIN task_keys k ON k.team_id = ?1
                         WHERE COALESCE(t.team_id, '') = ?1 AND t.short_id IS NULL) numbered
                     WHERE tasks.id = numbered.id",
                    &[team],
                )?;
                tx.execute(
                    "UPDATE task_keys SET next_number = next_number + CAST(?2 AS BIGINT)
                     WHERE team_id = ?1",
                    &[team, &(numbered as i64)],
                )?;
            }
            Ok(())
        })
    }

    /// The id of the task `reference` (its id, or its short id `RED-12`) names among
    /// those `scope` may see; a reference that names none comes back as given, so the
    /// call it is passed to answers "not found" with the caller's own words.
    pub fn resolve_task_id(&self, reference: &str, scope: Scope<'_>) -> Result<String> {
        if parse(reference).is_none() {
            return Ok(reference.to_owned());
        }
        self.read(|tx| resolve(tx, reference, scope).map(Cow::into_owned))
    }

    /// [`Store::resolve_task_id`] for an async caller in `team_id`'s scope (any team's for
    /// `None`): no read unless `reference` is a short id, else one run the way the engine
    /// runs reads best ([`Store::run_read_committed`]).
    pub async fn resolve_task_id_async(
        self: &Arc<Store>,
        reference: String,
        team_id: Option<String>,
    ) -> std::result::Result<Result<String>, RunError> {
        if parse(&reference).is_none() {
            return Ok(Ok(reference));
        }
        self.run_read_committed(Resolve { reference, team_id })
            .await
    }
}

/// [`resolve_on`] with its arguments, for [`Store::run_read_committed`].
struct Resolve {
    reference: String,
    team_id: Option<String>,
}

impl Resolve {
    async fn resolve<R: Reads + ?Sized>(&self, tx: &R) -> Result<String> {
        let scope = Scope::team(self.team_id.as_deref());
        Ok(resolve_on(tx, &self.reference, scope).await?.into_owned())
    }
}

impl StoreRead for Resolve {
    type Output = String;

    fn run(&self, tx: &dyn Tx) -> Result<String> {
        ready_now(self.resolve(tx))
    }

    fn run_async<'a>(&'a self, tx: &'a AsyncTx) -> BoxFuture<'a, Result<String>> {
        Box::pin(self.resolve(tx))
    }
}

#[cfg(test)]
mod tests;
