//! Versioned procedures: every save of a name in a scope is the next version. The version
//! is assigned inside the `BEGIN IMMEDIATE` write transaction and a unique index on
//! (name, scope, version) backs it, so concurrent savers (threads or processes) never share
//! or skip a version.

use rusqlite::{Row, params};
use serde::Serialize;

use super::{
    MAX_PROCEDURE_NAME_CHARS, Memory, ScopeFilter, check_len, check_limit, clean_content,
    clean_tags,
};
use crate::error::{Result, StoreError};
use crate::new_id;
use crate::scrub::scrub_text;

/// One version of a procedure.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Procedure {
    /// This version's id.
    pub id: String,
    /// The procedure's name (shared by its versions).
    pub name: String,
    /// 1 for the first save, then max + 1.
    pub version: i64,
    /// The steps.
    pub content: String,
    /// Free-form labels.
    pub tags: Vec<String>,
    /// The owning team (`None` = global).
    pub team_id: Option<String>,
    /// The owning agent (`None` = every agent).
    pub agent_id: Option<String>,
    /// The owning tenant.
    pub tenant_id: Option<String>,
    /// When this version was saved (epoch milliseconds).
    pub created_at: i64,
}

/// A procedure version to save. The text is scrubbed before it is stored.
#[derive(Debug, Clone, Default)]
pub struct NewProcedure {
    /// The procedure's name (required, non-empty).
    pub name: String,
    /// The steps (required, non-empty).
    pub content: String,
    /// Free-form labels.
    pub tags: Vec<String>,
    /// The owning team (`None` = global).
    pub team_id: Option<String>,
    /// The owning agent (`None` = every agent).
    pub agent_id: Option<String>,
    /// The owning tenant.
    pub tenant_id: Option<String>,
}

const PROCEDURE_COLUMNS: &str =
    "p.id, p.name, p.version, p.content, p.tags, p.team_id, p.agent_id, p.tenant_id, p.created_at";

fn procedure_from_row(row: &Row<'_>) -> rusqlite::Result<Procedure> {
    let tags: String = row.get(4)?;
    Ok(Procedure {
        id: row.get(0)?,
        name: row.get(1)?,
        version: row.get(2)?,
        content: row.get(3)?,
        tags: serde_json::from_str(&tags).unwrap_or_default(),
        team_id: row.get(5)?,
        agent_id: row.get(6)?,
        tenant_id: row.get(7)?,
        created_at: row.get(8)?,
    })
}

impl Memory {
    /// Save the next version of a procedure in its scope.
    pub fn save_procedure(&self, procedure: NewProcedure) -> Result<Procedure> {
        let name = procedure.name.trim();
        if name.is_empty() {
            return Err(StoreError::Invalid(
                "procedureName is empty; name the procedure".into(),
            ));
        }
        check_len("procedureName", name, MAX_PROCEDURE_NAME_CHARS)?;
        let name = scrub_text(name);
        let content = clean_content(&procedure.content)?;
        let tags = clean_tags(&procedure.tags)?;
        let tags_json =
            serde_json::to_string(&tags).map_err(|e| StoreError::Invalid(format!("tags: {e}")))?;
        let id = new_id();
        let now = self.store.now_ms();
        let version = self.store.write_sqlite(|tx| {
            let version: i64 = tx.query_row(
                "SELECT coalesce(max(version), 0) + 1 FROM memory_procedures
                 WHERE name = ?1 AND coalesce(tenant_id, '') = coalesce(?2, '')
                   AND coalesce(team_id, '') = coalesce(?3, '')
                   AND coalesce(agent_id, '') = coalesce(?4, '')",
                params![
                    name,
                    procedure.tenant_id,
                    procedure.team_id,
                    procedure.agent_id
                ],
                |r| r.get(0),
            )?;
            tx.execute(
                "INSERT INTO memory_procedures
                     (id, name, version, content, tags, team_id, agent_id, tenant_id, created_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                params![
                    id,
                    name,
                    version,
                    content,
                    tags_json,
                    procedure.team_id,
                    procedure.agent_id,
                    procedure.tenant_id,
                    now
                ],
            )?;
            Ok::<_, StoreError>(version)
        })?;
        Ok(Procedure {
            id,
            name,
            version,
            content,
            tags,
            team_id: procedure.team_id,
            agent_id: procedure.agent_id,
            tenant_id: procedure.tenant_id,
            created_at: now,
        })
    }

    /// Every version of `name` visible in `scope`, oldest first.
    pub fn procedure_versions(&self, name: &str, scope: &ScopeFilter) -> Result<Vec<Procedure>> {
        let (cond, args) = scope.sql("p");
        let sql = format!(
            "SELECT {PROCEDURE_COLUMNS} FROM memory_procedures p WHERE p.name = ? AND {cond}
             ORDER BY p.version, p.created_at"
        );
        self.store.read_sqlite(|conn| {
            let mut stmt = conn.prepare(&sql)?;
            let all = std::iter::once(name.to_string()).chain(args.iter().cloned());
            let rows = stmt.query_map(rusqlite::params_from_iter(all), procedure_from_row)?;
            Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
        })
    }

    /// The latest version of each procedure visible in `scope`, newest first; with `query`,
    /// only procedures whose name or content contains one of its words (any case).
    pub fn latest_procedures(
        &self,
        scope: &ScopeFilter,
        query: Option<&str>,
        limit: u32,
    ) -> Result<Vec<Procedure>> {
        check_limit(limit, super::MAX_BROWSE_LIMIT)?;
        let (cond, mut args) = scope.sql("p");
        let mut word_cond = String::new();
        if let Some(q) = query {
            let words = super::search::fts_words(&super::search::query_words(q));
            if words.is_empty() {
                return Ok(Vec::new());
            }
            let likes: Vec<String> = words
                .iter()
                .map(|_| "(p.name LIKE ? ESCAPE '\\' OR p.content LIKE ? ESCAPE '\\')".to_string())
                .collect();
            word_cond = format!(" AND ({})", likes.join(" OR "));
            for w in &words {
                let pattern = format!("%{}%", escape_like(w));
                args.push(pattern.clone());
                args.push(pattern);
            }
        }
        args.push(limit.to_string());
        // A version is the latest when no version above it exists in the same scope.
        let sql = format!(
            "SELECT {PROCEDURE_COLUMNS} FROM memory_procedures p
             WHERE {cond}{word_cond} AND NOT EXISTS (
                 SELECT 1 FROM memory_procedures n
                 WHERE n.name = p.name AND n.version > p.version
                   AND coalesce(n.tenant_id, '') = coalesce(p.tenant_id, '')
                   AND coalesce(n.team_id, '') = coalesce(p.team_id, '')
                   AND coalesce(n.agent_id, '') = coalesce(p.agent_id, ''))
             ORDER BY p.created_at DESC, p.id DESC LIMIT CAST(? AS INTEGER)"
        );
        self.store.read_sqlite(|conn| {
            let mut stmt = conn.prepare(&sql)?;
            let rows =
                stmt.query_map(rusqlite::params_from_iter(args.iter()), procedure_from_row)?;
            Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
        })
    }
}

/// Escape `%`, `_` and `\` for a `LIKE … ESCAPE '\'` pattern.
fn escape_like(word: &str) -> String {
    let mut out = String::with_capacity(word.len());
    for c in word.chars() {
        if matches!(c, '%' | '_' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}
