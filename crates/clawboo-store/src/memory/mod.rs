//! Shared memory: declarative facts and versioned procedures, scrubbed of secrets on every
//! save, found by full text (FTS5, bm25), by vector similarity or by both fused.
//!
//! [`Memory`] wraps the [`Store`] with the embedder chosen for this process (if any) and an
//! in-process cache of fact vectors, so a vector search scans memory rather than the
//! database. The cache reloads only rows whose embedding changed since it last looked
//! (`embed_seq`), which keeps it right when other processes write the same file. Full-text
//! search ranks in a second cache, of the terms of every fact (`fulltext`).

mod fulltext;
mod procedures;
mod search;

use std::sync::{Arc, Mutex};

use rusqlite::{Row, params};
use serde::Serialize;

pub use clawboo_embed::{EmbedError, Embedder};
pub use procedures::{NewProcedure, Procedure};
pub use search::{MAX_QUERY_CHARS, MatchedVia, SearchHit, SearchMode, SearchOutcome};

use crate::error::{Result, StoreError};
use crate::scrub::{is_only_redactions, scrub_text};
use crate::sqlite::hooks::{Hooks, PreCommitHook};
use crate::{Store, new_id};

/// Longest accepted fact title, in characters.
pub const MAX_TITLE_CHARS: usize = 500;
/// Longest accepted fact or procedure content, in characters.
pub const MAX_CONTENT_CHARS: usize = 100_000;
/// Most tags on one fact or procedure.
pub const MAX_TAGS: usize = 32;
/// Longest accepted tag, in characters.
pub const MAX_TAG_CHARS: usize = 100;
/// Longest accepted procedure name, in characters.
pub const MAX_PROCEDURE_NAME_CHARS: usize = 200;
/// `memory_search` limits: at least 1, at most this; [`DEFAULT_LIMIT`] when absent.
pub const MAX_SEARCH_LIMIT: u32 = 100;
/// `memory_browse` limits: at least 1, at most this; [`DEFAULT_LIMIT`] when absent.
pub const MAX_BROWSE_LIMIT: u32 = 200;
/// The default number of search hits and browsed facts.
pub const DEFAULT_LIMIT: u32 = 10;

/// The refusal for a fact without a title.
pub const TITLE_REQUIRED: &str = "a fact requires a title (or set procedureName for a procedure)";
/// The refusal for content that was nothing but secrets.
pub const ENTIRELY_REDACTED: &str = "nothing to save: content was entirely redacted secrets";

/// A saved fact (the stored, scrubbed text).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Fact {
    /// The fact id (cite it).
    pub id: String,
    /// A short title.
    pub title: String,
    /// The fact itself.
    pub content: String,
    /// Free-form labels.
    pub tags: Vec<String>,
    /// The team it belongs to; `None` is global.
    pub team_id: Option<String>,
    /// The agent it belongs to; `None` is shared by every agent.
    pub agent_id: Option<String>,
    /// The tenant it belongs to.
    pub tenant_id: Option<String>,
    /// When it was saved (epoch milliseconds).
    pub created_at: i64,
    /// The model that embedded it, when it has a vector.
    pub embedding_model: Option<String>,
}

/// A fact to save. The text is scrubbed before it is stored.
#[derive(Debug, Clone, Default)]
pub struct NewFact {
    /// A short title (required, non-empty).
    pub title: String,
    /// The fact itself (required, non-empty).
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

/// Which facts a read may see.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum TeamFilter {
    /// Facts of every team and global facts (an unbound caller that named no team).
    #[default]
    Any,
    /// Facts of this team and global facts.
    TeamOrGlobal(String),
    /// Global facts only (a bound caller without a team).
    GlobalOnly,
}

/// The visibility scope of a read: team (see [`TeamFilter`]), agent (that agent's facts and
/// agent-less ones), tenant (strict equality). `None` means no filter on that part.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ScopeFilter {
    /// The team part.
    pub team: TeamFilter,
    /// Facts of this agent or of no agent.
    pub agent_id: Option<String>,
    /// Facts of exactly this tenant.
    pub tenant_id: Option<String>,
}

impl ScopeFilter {
    /// Whether a fact with this scope is visible.
    pub fn admits(&self, team: Option<&str>, agent: Option<&str>, tenant: Option<&str>) -> bool {
        let team_ok = match &self.team {
            TeamFilter::Any => true,
            TeamFilter::TeamOrGlobal(t) => team.is_none_or(|x| x == t),
            TeamFilter::GlobalOnly => team.is_none(),
        };
        let agent_ok = match &self.agent_id {
            None => true,
            Some(a) => agent.is_none_or(|x| x == a),
        };
        let tenant_ok = match &self.tenant_id {
            None => true,
            Some(t) => tenant == Some(t.as_str()),
        };
        team_ok && agent_ok && tenant_ok
    }

    /// The SQL condition (columns of `alias`) and its parameters.
    fn sql(&self, alias: &str) -> (String, Vec<String>) {
        let mut parts = vec!["1".to_string()];
        let mut args = Vec::new();
        match &self.team {
            TeamFilter::Any => {}
            TeamFilter::TeamOrGlobal(t) => {
                parts.push(format!("({alias}.team_id = ? OR {alias}.team_id IS NULL)"));
                args.push(t.clone());
            }
            TeamFilter::GlobalOnly => parts.push(format!("{alias}.team_id IS NULL")),
        }
        if let Some(a) = &self.agent_id {
            parts.push(format!(
                "({alias}.agent_id = ? OR {alias}.agent_id IS NULL)"
            ));
            args.push(a.clone());
        }
        if let Some(t) = &self.tenant_id {
            parts.push(format!("{alias}.tenant_id = ?"));
            args.push(t.clone());
        }
        (parts.join(" AND "), args)
    }
}

/// What [`Memory::reindex`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReindexReport {
    /// Facts given a vector by the current embedder.
    pub embedded: usize,
    /// Facts that already had one.
    pub up_to_date: usize,
}

/// Shared memory over one store, with this process's embedder.
pub struct Memory {
    store: Arc<Store>,
    embedder: Option<Arc<dyn Embedder>>,
    vectors: Mutex<search::VectorCache>,
    text: Arc<parking_lot::RwLock<fulltext::TextIndex>>,
    /// Whether a thread is bringing `text` up to every fact.
    text_builder: Arc<std::sync::atomic::AtomicBool>,
}

/// A checked, scrubbed and embedded fact, ready to write ([`Memory::prepare_fact`]).
#[derive(Debug)]
pub struct PreparedFact {
    fact: Fact,
    tags_json: String,
    vector: Option<Vec<f32>>,
}

impl PreparedFact {
    /// Write the fact through `store` (its own transaction, or a savepoint of a group
    /// commit) and return it as saved.
    pub fn insert(self, store: &Store) -> Result<Fact> {
        let PreparedFact {
            mut fact,
            tags_json,
            vector,
        } = self;
        fact.created_at = store.now_ms();
        let blob = vector.as_deref().map(vector_to_blob);
        let dim = vector.as_ref().map(|v| v.len() as i64);
        store.write_sqlite(|tx| {
            tx.prepare_cached(
                "INSERT INTO memory_facts (id, title, content, tags, team_id, agent_id, tenant_id,
                     created_at, embedding, embedding_model, embedding_dim, embed_seq)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11,
                     CASE WHEN ?9 IS NULL THEN 0
                          ELSE (SELECT coalesce(max(embed_seq), 0) + 1 FROM memory_facts) END)",
            )?
            .execute(params![
                fact.id,
                fact.title,
                fact.content,
                tags_json,
                fact.team_id,
                fact.agent_id,
                fact.tenant_id,
                fact.created_at,
                blob,
                fact.embedding_model,
                dim
            ])?;
            Ok::<_, StoreError>(())
        })?;
        Ok(fact)
    }
}

impl std::fmt::Debug for Memory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Memory")
            .field("store", &self.store)
            .field("embedder", &self.embedder.as_ref().map(|e| e.model_id()))
            .finish_non_exhaustive()
    }
}

/// Index the facts this transaction wrote, in one statement. `memory_facts`' insert
/// trigger only notes a new fact in `memory_facts_fts_pending` (migration 0005: FTS5 would
/// otherwise write an index segment per fact, at each write's savepoint); every write
/// transaction of the store runs this just before it commits, so the index never lags the
/// committed facts. Returns whether it indexed any.
fn index_pending_facts(conn: &rusqlite::Connection) -> Result<bool> {
    if !has_pending_facts(conn)? {
        return Ok(false);
    }
    conn.prepare_cached(
        "INSERT INTO memory_facts_fts(rowid, title, content, tags)
         SELECT f.seq, f.title, f.content, f.tags
         FROM memory_facts_fts_pending p JOIN memory_facts f ON f.seq = p.seq",
    )?
    .execute([])?;
    conn.prepare_cached("DELETE FROM memory_facts_fts_pending")?
        .execute([])?;
    Ok(true)
}

/// Pages of the full-text index one [`merge_fts_step`] writes at most (about 0.5 MiB, a
/// few milliseconds of holding the write lock).
const FTS_MERGE_STEP_PAGES: i64 = 128;

/// One bounded step of merging the full-text index into a single segment, in its own
/// transaction; `Ok(false)` once there is nothing left to merge. FTS5 writes a segment per
/// indexing transaction and merges them only a few at a time, so an index grown by many
/// commits keeps several segments, and every query term reads each of them: a search over
/// 10k facts spent a fifth of its time opening segment iterators.
fn merge_fts_step(conn: &rusqlite::Connection) -> Result<bool> {
    let before = conn.total_changes();
    // A negative page count puts every segment on one level first, so all of them merge
    // (FTS5's incremental 'optimize').
    conn.prepare_cached(
        "INSERT INTO memory_facts_fts(memory_facts_fts, rank) VALUES ('merge', ?)",
    )?
    .execute([-FTS_MERGE_STEP_PAGES])?;
    // FTS5 documents that a step which merged anything changes two or more rows.
    Ok(conn.total_changes() - before >= 2)
}

/// Whether facts wait for [`index_pending_facts`].
fn has_pending_facts(conn: &rusqlite::Connection) -> Result<bool> {
    Ok(conn
        .prepare_cached("SELECT EXISTS(SELECT 1 FROM memory_facts_fts_pending)")?
        .query_row([], |r| r.get(0))?)
}

/// Attach memory's work to the SQLite backend's transactions (called where the store is
/// opened): index the noted facts before every commit, merge the full-text index when the
/// store is idle after commits that indexed some.
pub(crate) fn register_sqlite_hooks(hooks: &mut Hooks) {
    hooks
        .before_commit(PreCommitHook {
            pending: has_pending_facts,
            run: index_pending_facts,
        })
        .when_idle(merge_fts_step);
}

impl Store {
    /// Merge the full-text index into one segment now, a bounded step per transaction
    /// (what the store does by itself once idle after writing facts).
    pub fn merge_search_index(&self) -> Result<()> {
        self.run_idle_work()
    }
}

/// Columns of a fact row, in the order [`fact_from_row`] reads them.
const FACT_COLUMNS: &str = "f.id, f.title, f.content, f.tags, f.team_id, f.agent_id, f.tenant_id, f.created_at, f.embedding_model";

fn fact_from_row(row: &Row<'_>) -> rusqlite::Result<Fact> {
    let tags: String = row.get(3)?;
    Ok(Fact {
        id: row.get(0)?,
        title: row.get(1)?,
        content: row.get(2)?,
        tags: serde_json::from_str(&tags).unwrap_or_default(),
        team_id: row.get(4)?,
        agent_id: row.get(5)?,
        tenant_id: row.get(6)?,
        created_at: row.get(7)?,
        embedding_model: row.get(8)?,
    })
}

/// The text a fact is embedded from.
fn embedding_text(title: &str, content: &str, tags: &[String]) -> String {
    if tags.is_empty() {
        format!("{title}\n{content}")
    } else {
        format!("{title}\n{content}\n{}", tags.join(", "))
    }
}

/// Vector bytes as stored (little-endian f32).
fn vector_to_blob(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// Stored bytes back to a vector (`None` when the length is not a whole number of f32s).
fn blob_to_vector(blob: &[u8]) -> Option<Vec<f32>> {
    if !blob.len().is_multiple_of(4) {
        return None;
    }
    Some(
        blob.chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect(),
    )
}

/// Refuse text longer than `max` characters.
fn check_len(what: &str, text: &str, max: usize) -> Result<()> {
    if text.chars().count() > max {
        return Err(StoreError::Invalid(format!(
            "{what} is longer than {max} characters; shorten it"
        )));
    }
    Ok(())
}

/// Validate and scrub tags.
fn clean_tags(tags: &[String]) -> Result<Vec<String>> {
    if tags.len() > MAX_TAGS {
        return Err(StoreError::Invalid(format!(
            "at most {MAX_TAGS} tags are allowed; drop some"
        )));
    }
    let mut out = Vec::with_capacity(tags.len());
    for tag in tags {
        check_len("a tag", tag, MAX_TAG_CHARS)?;
        let tag = scrub_text(tag.trim());
        if !tag.is_empty() && !out.contains(&tag) {
            out.push(tag);
        }
    }
    Ok(out)
}

/// Validate and scrub content; refuse content that was nothing but secrets.
fn clean_content(content: &str) -> Result<String> {
    check_len("content", content, MAX_CONTENT_CHARS)?;
    if content.trim().is_empty() {
        return Err(StoreError::Invalid(
            "content is empty; write the fact or procedure in content".into(),
        ));
    }
    let scrubbed = scrub_text(content);
    if is_only_redactions(&scrubbed) {
        return Err(StoreError::Invalid(ENTIRELY_REDACTED.into()));
    }
    Ok(scrubbed)
}

impl Memory {
    /// Memory over `store`, embedding with `embedder` (none: vector and hybrid search fall
    /// back to full text).
    pub fn new(store: Arc<Store>, embedder: Option<Arc<dyn Embedder>>) -> Memory {
        Memory {
            store,
            embedder,
            vectors: Mutex::new(search::VectorCache::default()),
            text: Arc::default(),
            text_builder: Arc::default(),
        }
    }

    /// The underlying store.
    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }

    /// The embedder in use, if any.
    pub fn embedder(&self) -> Option<&Arc<dyn Embedder>> {
        self.embedder.as_ref()
    }

    /// The search mode used when the caller names none: hybrid with a semantic embedder,
    /// full text otherwise.
    pub fn default_mode(&self) -> SearchMode {
        match &self.embedder {
            Some(e) if e.is_semantic() => SearchMode::Hybrid,
            _ => SearchMode::Fts,
        }
    }

    /// Embed one text with the current embedder; failures are logged and give `None`.
    fn embed_one(&self, text: &str) -> Option<(Arc<dyn Embedder>, Vec<f32>)> {
        let embedder = self.embedder.clone()?;
        match embedder.embed(&[text]) {
            Ok(mut v) if v.len() == 1 => {
                let v = v.swap_remove(0);
                Some((embedder, v))
            }
            Ok(_) => {
                tracing::warn!("embedder returned the wrong number of vectors");
                None
            }
            Err(e) => {
                tracing::warn!(error = %e, "embedding failed");
                None
            }
        }
    }

    /// Save a fact: scrubbed, full-text indexed, and embedded when an embedder is set (an
    /// embedding failure saves the fact without a vector; it is embedded later).
    pub fn save_fact(&self, fact: NewFact) -> Result<Fact> {
        self.prepare_fact(fact)?.insert(&self.store)
    }

    /// Whether embedding here costs microseconds (the built-in embedder, or none).
    pub fn embeds_cheaply(&self) -> bool {
        self.embedder.as_ref().is_none_or(|e| e.is_cheap())
    }

    /// The slow half of [`Memory::save_fact`], which holds no lock: check, scrub and embed
    /// a fact. [`PreparedFact::insert`] writes it (alone or in a group commit).
    pub fn prepare_fact(&self, fact: NewFact) -> Result<PreparedFact> {
        if fact.title.trim().is_empty() {
            return Err(StoreError::Invalid(TITLE_REQUIRED.into()));
        }
        check_len("title", &fact.title, MAX_TITLE_CHARS)?;
        let content = clean_content(&fact.content)?;
        let title = scrub_text(fact.title.trim());
        let tags = clean_tags(&fact.tags)?;
        let tags_json =
            serde_json::to_string(&tags).map_err(|e| StoreError::Invalid(format!("tags: {e}")))?;
        let embedded = self.embed_one(&embedding_text(&title, &content, &tags));
        Ok(PreparedFact {
            fact: Fact {
                id: new_id(),
                title,
                content,
                tags,
                team_id: fact.team_id,
                agent_id: fact.agent_id,
                tenant_id: fact.tenant_id,
                created_at: 0,
                embedding_model: embedded.as_ref().map(|(e, _)| e.model_id().to_string()),
            },
            tags_json,
            vector: embedded.map(|(_, v)| v),
        })
    }

    /// A fact by id (`None` when absent or outside `scope`).
    pub fn get_fact(&self, id: &str, scope: &ScopeFilter) -> Result<Option<Fact>> {
        let (cond, args) = scope.sql("f");
        let sql = format!("SELECT {FACT_COLUMNS} FROM memory_facts f WHERE f.id = ? AND {cond}");
        self.store.read_sqlite(|conn| {
            let mut stmt = conn.prepare_cached(&sql)?;
            let mut all: Vec<&dyn rusqlite::ToSql> = vec![&id];
            all.extend(args.iter().map(|a| a as &dyn rusqlite::ToSql));
            let mut rows = stmt.query_map(all.as_slice(), fact_from_row)?;
            Ok(rows.next().transpose()?)
        })
    }

    /// The newest facts in `scope`, newest first. `limit` must be 1..=[`MAX_BROWSE_LIMIT`].
    pub fn browse(&self, scope: &ScopeFilter, limit: u32) -> Result<Vec<Fact>> {
        check_limit(limit, MAX_BROWSE_LIMIT)?;
        let (cond, mut args) = scope.sql("f");
        args.push(limit.to_string());
        let sql = format!(
            "SELECT {FACT_COLUMNS} FROM memory_facts f WHERE {cond}
             ORDER BY f.created_at DESC, f.seq DESC LIMIT CAST(? AS INTEGER)"
        );
        self.store.read_sqlite(|conn| {
            let mut stmt = conn.prepare_cached(&sql)?;
            let rows = stmt.query_map(rusqlite::params_from_iter(args.iter()), fact_from_row)?;
            Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
        })
    }

    /// Give every fact in `scope` that lacks a vector from the current embedder one
    /// (embedded in batches of `batch`, at most `max` facts; `None` = all). Embedding runs
    /// outside any write transaction; each batch is written in one.
    pub fn reindex_scope(
        &self,
        scope: &ScopeFilter,
        batch: usize,
        max: Option<usize>,
    ) -> Result<ReindexReport> {
        let Some(embedder) = self.embedder.clone() else {
            return Ok(ReindexReport::default());
        };
        let model = embedder.model_id().to_string();
        let dim = embedder.dim() as i64;
        let (cond, args) = scope.sql("f");
        let mut report = ReindexReport::default();
        let mut after = 0i64;
        loop {
            let remaining = max.map_or(usize::MAX, |m| m.saturating_sub(report.embedded));
            if remaining == 0 {
                break;
            }
            let take = batch.max(1).min(remaining);
            let sql = format!(
                "SELECT f.seq, f.title, f.content, f.tags FROM memory_facts f
                 WHERE f.seq > ? AND {cond}
                   AND (f.embedding IS NULL OR f.embedding_model IS NOT ? OR f.embedding_dim IS NOT ?)
                 ORDER BY f.seq LIMIT ?"
            );
            let pending: Vec<(i64, String)> = self.store.read_sqlite(|conn| {
                let mut stmt = conn.prepare(&sql)?;
                let mut all: Vec<Box<dyn rusqlite::ToSql>> = vec![Box::new(after)];
                all.extend(
                    args.iter()
                        .map(|a| Box::new(a.clone()) as Box<dyn rusqlite::ToSql>),
                );
                all.push(Box::new(model.clone()));
                all.push(Box::new(dim));
                all.push(Box::new(take as i64));
                let rows = stmt.query_map(rusqlite::params_from_iter(all.iter()), |r| {
                    let tags: String = r.get(3)?;
                    let tags: Vec<String> = serde_json::from_str(&tags).unwrap_or_default();
                    let title: String = r.get(1)?;
                    let content: String = r.get(2)?;
                    Ok((r.get(0)?, embedding_text(&title, &content, &tags)))
                })?;
                Ok::<_, StoreError>(rows.collect::<rusqlite::Result<Vec<_>>>()?)
            })?;
            let Some(last) = pending.last() else { break };
            after = last.0;
            let texts: Vec<&str> = pending.iter().map(|(_, t)| t.as_str()).collect();
            let vectors = embedder
                .embed(&texts)
                .map_err(|e| StoreError::Invalid(format!("embedding failed: {e}")))?;
            if vectors.len() != pending.len() {
                return Err(StoreError::Invalid(
                    "embedding failed: the embedder returned the wrong number of vectors".into(),
                ));
            }
            self.store.write_sqlite(|tx| {
                let mut stmt = tx.prepare(
                    "UPDATE memory_facts SET embedding = ?2, embedding_model = ?3,
                         embedding_dim = ?4,
                         embed_seq = (SELECT coalesce(max(embed_seq), 0) + 1 FROM memory_facts)
                     WHERE seq = ?1",
                )?;
                for ((seq, _), v) in pending.iter().zip(&vectors) {
                    stmt.execute(params![seq, vector_to_blob(v), model, v.len() as i64])?;
                }
                Ok::<_, StoreError>(())
            })?;
            report.embedded += pending.len();
        }
        let current: i64 = self.store.read_sqlite(|conn| {
            conn.query_row(
                "SELECT count(*) FROM memory_facts WHERE embedding_model = ? AND embedding_dim = ?",
                params![model, dim],
                |r| r.get(0),
            )
        })?;
        // Another process may re-embed concurrently; never underflow.
        report.up_to_date = usize::try_from(current)
            .unwrap_or(0)
            .saturating_sub(report.embedded);
        Ok(report)
    }

    /// Give every fact a vector from the current embedder (`clawboo memory reindex`).
    pub fn reindex(&self) -> Result<ReindexReport> {
        self.reindex_scope(&ScopeFilter::default(), 64, None)
    }
}

/// Refuse a limit outside `1..=max`.
pub(crate) fn check_limit(limit: u32, max: u32) -> Result<()> {
    if limit == 0 || limit > max {
        return Err(StoreError::Invalid(format!(
            "limit must be between 1 and {max}"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
