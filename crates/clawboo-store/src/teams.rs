//! Teams and their agents. Team ids are free strings: a `teams` row only gives a name.

use rusqlite::{Row, params};
use serde::Serialize;

use crate::error::{Result, StoreError};
use crate::{Store, new_id};

/// A named team.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Team {
    pub id: String,
    pub name: String,
    pub created_at: i64,
}

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

fn agent_from_row(r: &Row<'_>) -> rusqlite::Result<Agent> {
    Ok(Agent {
        id: r.get("id")?,
        name: r.get("name")?,
        team_id: r.get("team_id")?,
        runtime: r.get("runtime")?,
        created_at: r.get("created_at")?,
    })
}

fn require_text(field: &str, value: &str) -> Result<()> {
    if value.trim().is_empty() {
        return Err(StoreError::Invalid(format!("{field} must not be empty")));
    }
    Ok(())
}

impl Store {
    /// Create a team (a fresh id unless `id` is given); an existing id is renamed.
    pub fn upsert_team(&self, id: Option<&str>, name: &str) -> Result<Team> {
        require_text("name", name)?;
        let id = id.map(str::to_owned).unwrap_or_else(new_id);
        let now = self.now_ms();
        self.write_sqlite(|tx| {
            tx.execute(
                "INSERT INTO teams(id, name, created_at) VALUES (?1, ?2, ?3)
                 ON CONFLICT(id) DO UPDATE SET name = excluded.name",
                params![id, name, now],
            )?;
            Ok(tx.query_row(
                "SELECT id, name, created_at FROM teams WHERE id = ?1",
                [&id],
                |r| {
                    Ok(Team {
                        id: r.get(0)?,
                        name: r.get(1)?,
                        created_at: r.get(2)?,
                    })
                },
            )?)
        })
    }

    /// Every team, oldest first.
    pub fn list_teams(&self) -> Result<Vec<Team>> {
        self.read_sqlite(|c| {
            let mut stmt =
                c.prepare("SELECT id, name, created_at FROM teams ORDER BY created_at, id")?;
            let rows = stmt.query_map([], |r| {
                Ok(Team {
                    id: r.get(0)?,
                    name: r.get(1)?,
                    created_at: r.get(2)?,
                })
            })?;
            Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
        })
    }

    /// Create an agent (an existing id is updated in place).
    pub fn upsert_agent(&self, new: &NewAgent) -> Result<Agent> {
        require_text("name", &new.name)?;
        let id = new.id.clone().unwrap_or_else(new_id);
        let now = self.now_ms();
        self.write_sqlite(|tx| {
            tx.execute(
                "INSERT INTO agents(id, name, team_id, runtime, created_at) VALUES (?1, ?2, ?3, ?4, ?5)
                 ON CONFLICT(id) DO UPDATE SET name = excluded.name, team_id = excluded.team_id,
                   runtime = excluded.runtime",
                params![id, new.name, new.team_id, new.runtime, now],
            )?;
            Ok(tx.query_row("SELECT * FROM agents WHERE id = ?1", [&id], agent_from_row)?)
        })
    }

    /// Agents, optionally of one team, by name.
    pub fn list_agents(&self, team_id: Option<&str>) -> Result<Vec<Agent>> {
        self.read_sqlite(|c| {
            let mut stmt = c.prepare(
                "SELECT * FROM agents WHERE (?1 IS NULL OR team_id = ?1) ORDER BY name, id",
            )?;
            let rows = stmt.query_map([team_id], agent_from_row)?;
            Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
        })
    }
}
