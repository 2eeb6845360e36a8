//! Versioned procedures: every save of a name in a scope is the next version. The version
//! is `max + 1`, read and inserted in one write transaction that first serializes on the
//! name and scope (SQLite's `BEGIN IMMEDIATE` already does; PostgreSQL takes an advisory
//! lock), and a unique index on (name, scope, version) backs it, so concurrent savers
//! (threads, processes or hosts) never share or skip a version.

use serde::Serialize;

use super::{
    MAX_PROCEDURE_NAME_CHARS, Memory, ScopeFilter, check_len, check_limit, clean_content,
    clean_tags, params_with,
};
use crate::Result;
use clawboo_store::db::{DbRow, Tx};
use clawboo_store::new_id;
use clawboo_store::reads::{Query, RowsRead, StoreRead};
use clawboo_store::scrub::scrub_text;
use clawboo_store::{RunError, StoreError};

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

fn procedure_from_row(row: &dyn DbRow) -> Result<Procedure> {
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
        let mut saved = Procedure {
            id: new_id(),
            name,
            version: 0,
            content,
            tags,
            team_id: procedure.team_id,
            agent_id: procedure.agent_id,
            tenant_id: procedure.tenant_id,
            created_at: self.store.now_ms(),
        };
        saved.version = self
            .store
            .write(|tx| insert_next_version(tx, &saved, &tags_json))?;
        Ok(saved)
    }

    /// Every version of `name` visible in `scope`, oldest first.
    pub fn procedure_versions(&self, name: &str, scope: &ScopeFilter) -> Result<Vec<Procedure>> {
        let (cond, args) = scope.sql("p", 2);
        let sql = format!(
            "SELECT {PROCEDURE_COLUMNS} FROM memory_procedures p WHERE p.name = ?1 AND {cond}
             ORDER BY p.version, p.created_at"
        );
        self.store
            .read(|tx| tx.query_map(&sql, &params_with(&name, &args), procedure_from_row))
    }

    /// The latest version of each procedure visible in `scope`, newest first; with `query`,
    /// only procedures whose name or content contains one of its words (any case).
    pub fn latest_procedures(
        &self,
        scope: &ScopeFilter,
        query: Option<&str>,
        limit: u32,
    ) -> Result<Vec<Procedure>> {
        match latest_read(scope, query, limit)? {
            Some(read) => self.store.read(|tx| read.run(tx)),
            None => Ok(Vec::new()),
        }
    }

    /// [`Memory::latest_procedures`] for an async caller, run the way the engine runs
    /// reads best (`Store::run_read_committed`).
    pub async fn latest_procedures_async(
        &self,
        scope: &ScopeFilter,
        query: Option<&str>,
        limit: u32,
    ) -> std::result::Result<Result<Vec<Procedure>>, RunError> {
        match latest_read(scope, query, limit) {
            Ok(Some(read)) => self.store.run_read_committed(read).await,
            Ok(None) => Ok(Ok(Vec::new())),
            Err(e) => Ok(Err(e)),
        }
    }
}

/// The latest version of each procedure in `scope` (whose name or content holds a word of
/// `query`, when given), newest first; `None` when `query` has no word to match.
fn latest_read(
    scope: &ScopeFilter,
    query: Option<&str>,
    limit: u32,
) -> Result<Option<RowsRead<Procedure>>> {
    check_limit(limit, super::MAX_BROWSE_LIMIT)?;
    let (cond, mut args) = scope.sql("p", 2);
    let mut word_cond = String::new();
    if let Some(q) = query {
        let words = super::search::fts_words(&super::search::query_words(q));
        if words.is_empty() {
            return Ok(None);
        }
        // The words are lowercase already; `lower` makes the match ignore case on
        // PostgreSQL too (SQLite's LIKE does for ASCII by itself).
        let mut likes = Vec::with_capacity(words.len());
        for w in &words {
            let n = 2 + args.len();
            likes.push(format!(
                "(lower(p.name) LIKE ?{n} ESCAPE '\\' OR lower(p.content) LIKE ?{n} ESCAPE '\\')"
            ));
            args.push(format!("%{}%", escape_like(w)));
        }
        word_cond = format!(" AND ({})", likes.join(" OR "));
    }
    // A version is the latest when no version above it exists in the same scope.
    let sql = format!(
        "SELECT {PROCEDURE_COLUMNS} FROM memory_procedures p
         WHERE {cond}{word_cond} AND NOT EXISTS (
             SELECT 1 FROM memory_procedures n
             WHERE n.name = p.name AND n.version > p.version
               AND COALESCE(n.tenant_id, '') = COALESCE(p.tenant_id, '')
               AND COALESCE(n.team_id, '') = COALESCE(p.team_id, '')
               AND COALESCE(n.agent_id, '') = COALESCE(p.agent_id, ''))
         ORDER BY p.created_at DESC, p.id DESC LIMIT ?1"
    );
    Ok(Some(RowsRead {
        query: Query::new(sql, &params_with(&limit, &args)),
        decode: procedure_from_row,
    }))
}

/// Insert `procedure` as the next version of its name in its scope, in the caller's write
/// transaction; the version it got.
fn insert_next_version(tx: &dyn Tx, procedure: &Procedure, tags_json: &str) -> Result<i64> {
    // One key per name and scope, a missing scope part as the unique index sees it.
    let key = serde_json::json!([
        procedure.name,
        procedure.tenant_id.as_deref().unwrap_or(""),
        procedure.team_id.as_deref().unwrap_or(""),
        procedure.agent_id.as_deref().unwrap_or(""),
    ]);
    tx.serialize_on(&format!("procedure:{key}"))?;
    let version: i64 = tx.query_one(
        "SELECT COALESCE(MAX(version), 0) + 1 FROM memory_procedures
         WHERE name = ?1 AND COALESCE(tenant_id, '') = COALESCE(?2, '')
           AND COALESCE(team_id, '') = COALESCE(?3, '')
           AND COALESCE(agent_id, '') = COALESCE(?4, '')",
        &[
            &procedure.name,
            &procedure.tenant_id,
            &procedure.team_id,
            &procedure.agent_id,
        ],
        |r| r.get(0),
    )?;
    tx.execute(
        "INSERT INTO memory_procedures
             (id, name, version, content, tags, team_id, agent_id, tenant_id, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
        &[
            &procedure.id,
            &procedure.name,
            &version,
            &procedure.content,
            &tags_json,
            &procedure.team_id,
            &procedure.agent_id,
            &procedure.tenant_id,
            &procedure.created_at,
        ],
    )?;
    Ok(version)
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
