//! Teams and their agents. Team ids are free strings: a `teams` row only gives a name.

use std::sync::Arc;

use futures_util::future::BoxFuture;
use serde::Serialize;

use crate::db::{DbRow, Tx};
use crate::error::{Result, StoreError};
use crate::reads::{self, Query, Reads, RowsRead, StoreRead, ready_now};
use crate::run::RunError;
use crate::writes::{AsyncWriteTx, StoreWrite, Writes};
use crate::{Store, new_id, short_ids};

/// A named team.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Team {
    pub id: String,
    pub name: String,
    /// The key of its tasks' short ids (`RED` of `RED-12`, [`crate::short_ids`]).
    pub key: Option<String>,
    pub created_at: i64,
}

/// Every read of teams, with their keys, in [`team_from_row`]'s order.
const SELECT_TEAMS: &str = "SELECT teams.id, teams.name, k.key, teams.created_at FROM teams \
     LEFT JOIN task_keys k ON k.team_id = teams.id";

/// An agent on (at most) one team.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Agent {
    pub id: String,
    pub name: String,
    pub team_id: Option<String>,
    pub runtime: Option<String>,
    pub created_at: i64,
}

/// The fields of a new agent.
#[derive(Debug, Clone, Default)]
pub struct NewAgent {
    /// Explicit id; a fresh one is made when absent.
    pub id: Option<String>,
    pub name: String,
    pub team_id: Option<String>,
    pub runtime: Option<String>,
}

/// The agent columns every read selects, in [`agent_from_row`]'s order.
const AGENT_COLUMNS: &str = "id, name, team_id, runtime, created_at";

fn agent_from_row(r: &dyn DbRow) -> Result<Agent> {
    Ok(Agent {
        id: r.get(0)?,
        name: r.get(1)?,
        team_id: r.get(2)?,
        runtime: r.get(3)?,
        created_at: r.get(4)?,
    })
}

/// The agents of `team_id` (every agent when `None`), by name, on any transaction.
pub(crate) async fn agents_on<R: Reads + ?Sized>(
    tx: &R,
    team_id: Option<&str>,
) -> Result<Vec<Agent>> {
    let query = Query::new(
        format!(
            "SELECT {AGENT_COLUMNS} FROM agents \
             WHERE (CAST(?1 AS TEXT) IS NULL OR team_id = ?1) ORDER BY name, id"
        ),
        &[&team_id],
    );
    tx.query_map(query, agent_from_row).await
}

/// Every team, oldest first.
fn teams_read() -> RowsRead<Team> {
    RowsRead {
        query: Query::new(
            format!("{SELECT_TEAMS} ORDER BY teams.created_at, teams.id"),
            &[],
        ),
        decode: team_from_row,
    }
}

fn team_from_row(r: &dyn DbRow) -> Result<Team> {
    Ok(Team {
        id: r.get(0)?,
        name: r.get(1)?,
        key: r.get(2)?,
        created_at: r.get(3)?,
    })
}

/// A team to create or rename, with the key it asks for, for [`Store::run_transaction`].
struct TeamWrite {
    id: String,
    name: String,
    key: Option<String>,
    now: i64,
}

impl TeamWrite {
    fn new(store: &Store, id: Option<&str>, name: &str, key: Option<&str>) -> Result<TeamWrite> {
        require_text("name", name)?;
        Ok(TeamWrite {
            id: id.map(str::to_owned).unwrap_or_else(new_id),
            name: name.to_owned(),
            key: key.map(str::to_owned),
            now: store.now_ms(),
        })
    }

    async fn upsert<W: Writes + ?Sized>(&self, tx: &W) -> Result<Team> {
        let id = &self.id;
        let upsert = Query::new(
            "INSERT INTO teams(id, name, created_at) VALUES (?1, ?2, ?3)
             ON CONFLICT(id) DO UPDATE SET name = excluded.name",
            &[id, &self.name, &self.now],
        );
        tx.execute(upsert).await?;
        short_ids::set_key(tx, id, self.key.as_deref()).await?;
        let team = Query::new(format!("{SELECT_TEAMS} WHERE teams.id = ?1"), &[id]);
        reads::query_one(tx, team, team_from_row).await
    }
}

impl StoreWrite for TeamWrite {
    type Output = Team;

    fn run(&self, tx: &dyn Tx) -> Result<Team> {
        ready_now(self.upsert(tx))
    }

    fn run_async<'a>(&'a self, tx: &'a AsyncWriteTx) -> BoxFuture<'a, Result<Team>> {
        Box::pin(self.upsert(tx))
    }
}

/// An agent to create or update, checked, for [`Store::run_transaction`].
struct AgentWrite {
    new: NewAgent,
    id: String,
    now: i64,
}

impl AgentWrite {
    fn new(store: &Store, new: &NewAgent) -> Result<AgentWrite> {
        require_text("name", &new.name)?;
        Ok(AgentWrite {
            id: new.id.clone().unwrap_or_else(new_id),
            new: new.clone(),
            now: store.now_ms(),
        })
    }

    /// The upsert and the row as it then stands, in one round trip on PostgreSQL.
    async fn upsert<W: Writes + ?Sized>(&self, tx: &W) -> Result<Agent> {
        let (id, new) = (&self.id, &self.new);
        let batch = vec![
            Query::new(
                "INSERT INTO agents(id, name, team_id, runtime, created_at) VALUES (?1, ?2, ?3, ?4, ?5)
                 ON CONFLICT(id) DO UPDATE SET name = excluded.name, team_id = excluded.team_id,
                   runtime = excluded.runtime",
                &[id, &new.name, &new.team_id, &new.runtime, &self.now],
            ),
            Query::new(
                format!("SELECT {AGENT_COLUMNS} FROM agents WHERE id = ?1"),
                &[id],
            ),
        ];
        let answers = tx.query_batch(batch).await?;
        match answers.last().and_then(|rows| rows.first()) {
            Some(row) => agent_from_row(&**row),
            None => Err(StoreError::NotFound(id.clone())),
        }
    }
}

impl StoreWrite for AgentWrite {
    type Output = Agent;

    fn run(&self, tx: &dyn Tx) -> Result<Agent> {
        ready_now(self.upsert(tx))
    }

    fn run_async<'a>(&'a self, tx: &'a AsyncWriteTx) -> BoxFuture<'a, Result<Agent>> {
        Box::pin(self.upsert(tx))
    }
}

fn require_text(field: &str, value: &str) -> Result<()> {
    if value.trim().is_empty() {
        return Err(StoreError::Invalid(format!("{field} must not be empty")));
    }
    Ok(())
}

impl Store {
    /// Create a team (a fresh id unless `id` is given); an existing id is renamed. `key`
    /// is its short ids' key ([`crate::short_ids`]): a team without one gets `key`, or
    /// the default derived from `name`; once its tasks carry a key it never changes (a
    /// rename keeps it).
    pub fn upsert_team(&self, id: Option<&str>, name: &str, key: Option<&str>) -> Result<Team> {
        let write = TeamWrite::new(self, id, name, key)?;
        self.write(|tx| write.run(tx))
    }

    /// [`Store::upsert_team`] for an async caller, run the way the engine runs writes best
    /// ([`Store::run_transaction`]).
    pub async fn upsert_team_async(
        self: &Arc<Store>,
        id: Option<&str>,
        name: &str,
        key: Option<&str>,
    ) -> std::result::Result<Result<Team>, RunError> {
        match TeamWrite::new(self, id, name, key) {
            Ok(write) => self.run_transaction(write).await,
            Err(e) => Ok(Err(e)),
        }
    }

    /// Every team, oldest first.
    pub fn list_teams(&self) -> Result<Vec<Team>> {
        self.read(|tx| teams_read().run(tx))
    }

    /// [`Store::list_teams`] for an async caller, run the way the engine runs reads best
    /// ([`Store::run_read_committed`]).
    pub async fn list_teams_async(
        self: &Arc<Store>,
    ) -> std::result::Result<Result<Vec<Team>>, RunError> {
        self.run_read_committed(teams_read()).await
    }

    /// Create an agent (an existing id is updated in place).
    pub fn upsert_agent(&self, new: &NewAgent) -> Result<Agent> {
        let write = AgentWrite::new(self, new)?;
        self.write(|tx| write.run(tx))
    }

    /// [`Store::upsert_agent`] for an async caller, run the way the engine runs writes
    /// best ([`Store::run_transaction`]).
    pub async fn upsert_agent_async(
        self: &Arc<Store>,
        new: &NewAgent,
    ) -> std::result::Result<Result<Agent>, RunError> {
        match AgentWrite::new(self, new) {
            Ok(write) => self.run_transaction(write).await,
            Err(e) => Ok(Err(e)),
        }
    }

    /// Agents, optionally of one team, by name.
    pub fn list_agents(&self, team_id: Option<&str>) -> Result<Vec<Agent>> {
        self.read(|tx| ready_now(agents_on(tx, team_id)))
    }
}
