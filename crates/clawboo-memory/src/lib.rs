//! Shared memory: declarative facts and versioned procedures, scrubbed of secrets on every
//! save, found by full text (bm25), by vector similarity or by both fused.
//!
//! Facts and procedures are written once, on the store's neutral [`clawboo_store::db::Tx`];
//! only how text is indexed and ranked, and where vectors are ranked, differs by engine:
//! each engine's side is a folder (`sqlite/`, `postgres/`) implementing
//! `engine::MemoryEngine`, picked once per dialect by `engine_for`. On SQLite,
//! [`Memory`] keeps two caches in the process, kept right when other processes write the
//! same file: every fact vector, so a vector search scans memory, and the terms of every
//! fact, so full text ranks in memory exactly as FTS5 would. On PostgreSQL, where many
//! hosts share one database, a process keeps nothing per fact: the database keeps each
//! fact's postings, from the terms of FTS5's tokenizer as ported to Rust (`terms`), and
//! vectors are ranked through pgvector's HNSW index where the server has it.

mod bm25;
mod engine;
mod fts5_tokenizer;
mod postgres;
mod procedures;
mod retire;
mod search;
mod sqlite;
mod terms;
mod vectors;

use std::sync::Arc;

use futures_util::future::BoxFuture;
use serde::Serialize;

pub use clawboo_embed::{EmbedError, Embedder};
pub use engine::VectorSearchPath;
pub use postgres::pgvector::PGVECTOR_ENV;
pub use procedures::{NewProcedure, Procedure};
pub use retire::{MAX_REASON_CHARS, RetireOutcome, Retirement};
pub use search::{MAX_QUERY_CHARS, MatchedVia, SearchHit, SearchMode, SearchOutcome};

use clawboo_store::db::{DbRow, Dialect, Findings, PerEngine, ToValue, Tx};
use clawboo_store::extension::Extension;
use clawboo_store::reads::{self, OneRowRead, Query, RowsRead, StoreRead, ready_now};
use clawboo_store::scrub::{is_only_redactions, scrub_text};
use clawboo_store::writes::{AsyncWriteTx, StoreWrite, Writes};
use clawboo_store::{RunError, Store, StoreError, new_id};
use engine::MemoryEngine;
use terms::DocTerms;

/// Memory's results; its errors are the store's, which the surfaces already map.
pub(crate) type Result<T> = std::result::Result<T, StoreError>;

/// What memory attaches to every store it runs on: put it in the store's
/// [`clawboo_store::StoreConfig::extensions`]. On SQLite it indexes the facts a
/// transaction wrote just before its commit and merges the full-text index when the store
/// is idle; on PostgreSQL it sets pgvector's session settings and makes pgvector ready
/// (the vector search path it finds is kept with the store, [`Memory::vector_search`]),
/// after rebuilding a full-text index left in an older layout (postings not yet in
/// blocks, or blocks holding their places inline).
pub const EXTENSION: Extension = Extension {
    sqlite_hooks: sqlite::register_sqlite_hooks,
    postgres_session_settings: postgres::pgvector::session_settings,
    opened,
};

fn opened(store: &Store) -> Result<clawboo_store::extension::ExtensionState> {
    Ok(Box::new(engine_for(store.dialect()).opened(store)?))
}

/// Memory's side of the engine that speaks `dialect`: the one place that tells the
/// engines apart, so another engine is one folder and one line here.
fn engine_for(dialect: Dialect) -> &'static dyn MemoryEngine {
    match dialect {
        Dialect::Sqlite => &sqlite::Sqlite,
        Dialect::Postgres => &postgres::Postgres,
    }
}

/// Bring `store`'s full-text index to its most compact form now, which the store otherwise
/// does by itself: on SQLite FTS5's segments merged into one (what the store does once
/// idle after writing facts), on PostgreSQL the tail of postings packed into blocks (what
/// a save does once the tail is long).
pub fn merge_search_index(store: &Store) -> Result<()> {
    engine_for(store.dialect()).compact_text_index(store)
}

/// How vector search runs on `store`, as [`EXTENSION`] found when the store opened. A
/// store opened without it has no pgvector prepared, so its vectors are scanned.
fn vector_path(store: &Store) -> &VectorSearchPath {
    static UNPREPARED: VectorSearchPath = VectorSearchPath::ExactScan;
    store
        .extension_state::<VectorSearchPath>()
        .unwrap_or(&UNPREPARED)
}

/// Whether facts written through `store` keep pgvector's column too.
fn uses_pgvector(store: &Store) -> bool {
    matches!(vector_path(store), VectorSearchPath::PgvectorHnsw { .. })
}

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

/// Who may see a block of facts: their team, agent and tenant.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct ScopeKey {
    pub(crate) team_id: Option<String>,
    pub(crate) agent_id: Option<String>,
    pub(crate) tenant_id: Option<String>,
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

    /// The SQL condition (columns of `alias`) and its parameters, numbered from `?{first}`.
    fn sql(&self, alias: &str, first: usize) -> (String, Vec<String>) {
        let mut parts = vec!["1 = 1".to_string()];
        let mut args = Vec::new();
        match &self.team {
            TeamFilter::Any => {}
            TeamFilter::TeamOrGlobal(t) => {
                let p = first + args.len();
                parts.push(format!(
                    "({alias}.team_id = ?{p} OR {alias}.team_id IS NULL)"
                ));
                args.push(t.clone());
            }
            TeamFilter::GlobalOnly => parts.push(format!("{alias}.team_id IS NULL")),
        }
        if let Some(a) = &self.agent_id {
            let p = first + args.len();
            parts.push(format!(
                "({alias}.agent_id = ?{p} OR {alias}.agent_id IS NULL)"
            ));
            args.push(a.clone());
        }
        if let Some(t) = &self.tenant_id {
            let p = first + args.len();
            parts.push(format!("{alias}.tenant_id = ?{p}"));
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
    /// Memory's side of the store's engine.
    engine: &'static dyn MemoryEngine,
    /// What this process keeps on SQLite (empty on PostgreSQL).
    sqlite: sqlite::State,
    /// What this process keeps on PostgreSQL (empty on SQLite).
    postgres: postgres::State,
}

/// A checked, scrubbed and embedded fact, ready to write ([`Memory::prepare_fact`]).
#[derive(Debug)]
pub struct PreparedFact {
    fact: Fact,
    tags_json: String,
    vector: Option<Vec<f32>>,
    /// Its terms, made beforehand for a store whose database keeps term statistics.
    terms: Option<DocTerms>,
}

impl PreparedFact {
    /// Write the fact through `store` (its own transaction, or a savepoint of a group
    /// commit) and return it as saved. On PostgreSQL its term statistics are written in
    /// the same transaction, so full-text search never lags the committed facts (SQLite
    /// indexes it before the commit, through the hooks of [`EXTENSION`]).
    pub fn insert(self, store: &Store) -> Result<Fact> {
        let write = FactWrite::new(self, store);
        store.write(|tx| write.run(tx))?;
        Ok(write.fact)
    }

    /// [`PreparedFact::insert`] for an async caller, run the way the engine runs writes
    /// best (`Store::run_transaction`). On PostgreSQL a save that finds the tail of
    /// postings long packs it right after its commit, in a write of its own.
    pub async fn insert_async(
        self,
        store: &Arc<Store>,
    ) -> std::result::Result<Result<Fact>, RunError> {
        let write = FactWrite::new(self, store);
        let fact = write.fact.clone();
        let engine = write.engine;
        match store.run_transaction(write).await? {
            Ok(false) => {}
            Ok(true) => {
                // The fact is saved whatever the packing does: a later save packs again.
                let packed = store
                    .run_write(move |s| s.write(|tx| engine.pack(tx)))
                    .await?;
                if let Err(error) = packed {
                    tracing::warn!(%error, "packing the full-text tail failed; a later save retries");
                }
            }
            Err(e) => return Ok(Err(e)),
        }
        Ok(Ok(fact))
    }
}

/// A prepared fact with its vector as written (its portable bytes and dimension, and on
/// PostgreSQL with pgvector the same vector as pgvector's text for `embedding_vec`), for
/// `Store::run_transaction`. Its answer: whether the full-text index wants packing.
struct FactWrite {
    fact: Fact,
    tags_json: String,
    blob: Option<Vec<u8>>,
    dim: Option<i64>,
    pgvector: Option<Option<String>>,
    terms: Option<DocTerms>,
    engine: &'static dyn MemoryEngine,
}

impl FactWrite {
    fn new(prepared: PreparedFact, store: &Store) -> FactWrite {
        let PreparedFact {
            mut fact,
            tags_json,
            vector,
            terms,
        } = prepared;
        fact.created_at = store.now_ms();
        FactWrite {
            blob: vector.as_deref().map(vector_to_blob),
            dim: vector.as_ref().map(|v| v.len() as i64),
            pgvector: uses_pgvector(store)
                .then(|| vector.as_deref().map(postgres::pgvector::vector_literal)),
            fact,
            tags_json,
            terms,
            engine: engine_for(store.dialect()),
        }
    }

    /// The fact's row (and, on PostgreSQL, its term statistics) in the caller's
    /// transaction: whether the full-text index wants packing now.
    async fn insert<W: Writes + ?Sized>(&self, tx: &W) -> Result<bool> {
        let (fact, tags_json) = (&self.fact, &self.tags_json);
        // A fact has a vector exactly when it has a dimension; `embed_seq` moves only then.
        let (vector_column, vector_value) = match self.pgvector {
            Some(_) => (", embedding_vec", ", CAST(CAST(?12 AS TEXT) AS vector)"),
            None => ("", ""),
        };
        let sql = format!(
            "INSERT INTO memory_facts (id, title, content, tags, team_id, agent_id, tenant_id,
                 created_at, embedding, embedding_model, embedding_dim, embed_seq{vector_column})
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11,
                 CASE WHEN CAST(?11 AS BIGINT) IS NULL THEN 0
                      ELSE (SELECT COALESCE(MAX(embed_seq), 0) + 1 FROM memory_facts) END
                 {vector_value})
             RETURNING seq"
        );
        let insert = {
            let literal = self.pgvector.as_ref().and_then(Option::as_deref);
            let mut params: Vec<&dyn ToValue> = vec![
                &fact.id,
                &fact.title,
                &fact.content,
                tags_json,
                &fact.team_id,
                &fact.agent_id,
                &fact.tenant_id,
                &fact.created_at,
                &self.blob,
                &fact.embedding_model,
                &self.dim,
            ];
            if self.pgvector.is_some() {
                params.push(&literal);
            }
            Query::new(sql, &params)
        };
        let seq = reads::query_one(tx, insert, |r| r.get::<i64>(0)).await?;
        let terms = self.terms.as_ref();
        match self.engine.text_index(seq, fact, tags_json, terms)? {
            Some(index) => reads::query_one(tx, index, |r| r.get::<bool>(0)).await,
            None => Ok(false),
        }
    }
}

impl StoreWrite for FactWrite {
    type Output = bool;

    /// In a synchronous transaction the packing, when due, runs inside it.
    fn run(&self, tx: &dyn Tx) -> Result<bool> {
        if ready_now(self.insert(tx))? {
            self.engine.pack(tx)?;
        }
        Ok(false)
    }

    fn run_async<'a>(&'a self, tx: &'a AsyncWriteTx) -> BoxFuture<'a, Result<bool>> {
        Box::pin(self.insert(tx))
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

/// `f.seq` is one of the comma-separated numbers in `?1`: SQLite has no arrays, so a JSON
/// one there; an array on PostgreSQL.
const SEQ_IN_LIST: PerEngine = PerEngine {
    sqlite: "f.seq IN (SELECT value FROM json_each('[' || ?1 || ']'))",
    postgres: "f.seq = ANY(CAST(string_to_array(CAST(?1 AS TEXT), ',') AS BIGINT[]))",
};

/// Columns of a fact row, in the order [`fact_from_row`] reads them.
const FACT_COLUMNS: &str = "f.id, f.title, f.content, f.tags, f.team_id, f.agent_id, f.tenant_id, f.created_at, f.embedding_model";

fn fact_from_row(row: &dyn DbRow) -> Result<Fact> {
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

/// `first` then `rest`, as one statement's parameters.
fn params_with<'a>(first: &'a dyn ToValue, rest: &'a [String]) -> Vec<&'a dyn ToValue> {
    std::iter::once(first)
        .chain(rest.iter().map(|a| a as &dyn ToValue))
        .collect()
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
    let mut vector = Vec::new();
    read_vector_into(blob, &mut vector).then_some(vector)
}

/// Stored bytes into `vector`, replacing what it held, so a scan can reuse one buffer;
/// `false` (and `vector` empty) when the length is not a whole number of f32s.
fn read_vector_into(blob: &[u8], vector: &mut Vec<f32>) -> bool {
    vector.clear();
    if !blob.len().is_multiple_of(4) {
        return false;
    }
    vector.extend(
        blob.chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])),
    );
    true
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
    /// back to full text). The store must have been opened with [`EXTENSION`].
    pub fn new(store: Arc<Store>, embedder: Option<Arc<dyn Embedder>>) -> Memory {
        debug_assert!(
            store.extension_state::<VectorSearchPath>().is_some(),
            "the store was opened without clawboo_memory::EXTENSION"
        );
        Memory {
            engine: engine_for(store.dialect()),
            store,
            embedder,
            sqlite: sqlite::State::default(),
            postgres: postgres::State::default(),
        }
    }

    /// The underlying store.
    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }

    /// Whether an index in the database serves vectors of `dim`.
    fn has_vector_index(&self, dim: usize) -> Result<bool> {
        self.engine.has_vector_index(self, dim)
    }

    /// How vector search finds the nearest facts on this store.
    pub fn vector_search(&self) -> VectorSearchPath {
        vector_path(&self.store).clone()
    }

    /// How many facts are stored, for the operators' gauge: facts are append-only, so the
    /// highest sequence number, one index read (on PostgreSQL an aborted save may leave a
    /// gap, so it may run a little ahead).
    pub fn facts_stored(&self) -> Result<i64> {
        self.store.read(|tx| facts_stored_read().run(tx))
    }

    /// [`Memory::facts_stored`] for an async caller (a scrape), run the way the engine
    /// runs reads best (`Store::run_read_committed`).
    pub async fn facts_stored_async(&self) -> std::result::Result<Result<i64>, RunError> {
        self.store.run_read_committed(facts_stored_read()).await
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
        if let Some((_, vector)) = &embedded {
            // The index exists before the first vector of its size is written, so facts
            // join it as they are saved rather than in one long build at a first search.
            self.has_vector_index(vector.len())?;
        }
        // Tokenized here, outside the write, where the database keeps term statistics.
        let terms = self.engine.terms_before_write(&title, &content, &tags_json);
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
            terms,
        })
    }

    /// A fact by id (`None` when absent or outside `scope`), retired or not
    /// ([`Memory::fact_retirement`] says which).
    pub fn get_fact(&self, id: &str, scope: &ScopeFilter) -> Result<Option<Fact>> {
        let read = fact_read(id, scope);
        Ok(self.store.read(|tx| read.run(tx))?.pop())
    }

    /// [`Memory::get_fact`] for an async caller, run the way the engine runs reads best
    /// (`Store::run_read_committed`).
    pub async fn get_fact_async(
        &self,
        id: &str,
        scope: &ScopeFilter,
    ) -> std::result::Result<Result<Option<Fact>>, RunError> {
        let read = self.store.run_read_committed(fact_read(id, scope)).await?;
        Ok(read.map(|mut rows| rows.pop()))
    }

    /// The newest facts in `scope` not retired, newest first. `limit` must be
    /// 1..=[`MAX_BROWSE_LIMIT`].
    pub fn browse(&self, scope: &ScopeFilter, limit: u32) -> Result<Vec<Fact>> {
        let read = browse_read(scope, limit)?;
        self.store.read(|tx| read.run(tx))
    }

    /// [`Memory::browse`] for an async caller, run the way the engine runs reads best
    /// (`Store::run_read_committed`): browsing embeds nothing.
    pub async fn browse_async(
        &self,
        scope: &ScopeFilter,
        limit: u32,
    ) -> std::result::Result<Result<Vec<Fact>>, RunError> {
        match browse_read(scope, limit) {
            Ok(read) => self.store.run_read_committed(read).await,
            Err(e) => Ok(Err(e)),
        }
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
        let (cond, args) = scope.sql("f", 2);
        let [model_at, dim_at, limit_at] = [2, 3, 4].map(|n| n + args.len());
        let sql = format!(
            "SELECT f.seq, f.title, f.content, f.tags FROM memory_facts f
             WHERE f.seq > ?1 AND {cond}
               AND (f.embedding IS NULL OR f.embedding_model IS DISTINCT FROM ?{model_at}
                    OR f.embedding_dim IS DISTINCT FROM ?{dim_at})
             ORDER BY f.seq LIMIT ?{limit_at}"
        );
        let mut report = ReindexReport::default();
        let mut after = 0i64;
        loop {
            let remaining = max.map_or(usize::MAX, |m| m.saturating_sub(report.embedded));
            if remaining == 0 {
                break;
            }
            let take = batch.max(1).min(remaining);
            let pending: Vec<(i64, String)> = self.store.read(|tx| {
                let mut params = params_with(&after, &args);
                params.extend([&model as &dyn ToValue, &dim, &take]);
                tx.query_map(&sql, &params, |r| {
                    let tags: String = r.get(3)?;
                    let tags: Vec<String> = serde_json::from_str(&tags).unwrap_or_default();
                    let title: String = r.get(1)?;
                    let content: String = r.get(2)?;
                    Ok((r.get(0)?, embedding_text(&title, &content, &tags)))
                })
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
            // On PostgreSQL with pgvector the vector column moves with the bytes.
            let with_vector = uses_pgvector(&self.store);
            let update = format!(
                "UPDATE memory_facts SET embedding = ?2, embedding_model = ?3,
                     embedding_dim = ?4,
                     embed_seq = (SELECT COALESCE(MAX(embed_seq), 0) + 1 FROM memory_facts){}
                 WHERE seq = ?1",
                if with_vector {
                    ", embedding_vec = CAST(CAST(?5 AS TEXT) AS vector)"
                } else {
                    ""
                }
            );
            self.store.write(|tx| {
                for ((seq, _), v) in pending.iter().zip(&vectors) {
                    let blob = vector_to_blob(v);
                    let literal = with_vector.then(|| postgres::pgvector::vector_literal(v));
                    let dim = v.len();
                    let mut params: Vec<&dyn ToValue> = vec![seq, &blob, &model, &dim];
                    if let Some(literal) = &literal {
                        params.push(literal);
                    }
                    tx.execute(&update, &params)?;
                }
                Ok::<_, StoreError>(())
            })?;
            report.embedded += pending.len();
        }
        let current: i64 = self.store.read(|tx| {
            tx.query_one(
                "SELECT count(*) FROM memory_facts WHERE embedding_model = ?1 AND embedding_dim = ?2",
                &[&model, &dim],
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

/// Fact `id` in `scope` (none, or one row).
fn fact_read(id: &str, scope: &ScopeFilter) -> RowsRead<Fact> {
    let (cond, args) = scope.sql("f", 2);
    let sql = format!("SELECT {FACT_COLUMNS} FROM memory_facts f WHERE f.id = ?1 AND {cond}");
    RowsRead {
        query: Query::new(sql, &params_with(&id, &args)),
        decode: fact_from_row,
    }
}

/// The newest facts in `scope` not retired, newest first (`limit` checked).
fn browse_read(scope: &ScopeFilter, limit: u32) -> Result<RowsRead<Fact>> {
    check_limit(limit, MAX_BROWSE_LIMIT)?;
    let (cond, args) = scope.sql("f", 2);
    let live = retire::live("f");
    let sql = format!(
        "SELECT {FACT_COLUMNS} FROM memory_facts f WHERE {cond} AND {live}
         ORDER BY f.created_at DESC, f.seq DESC LIMIT ?1"
    );
    Ok(RowsRead {
        query: Query::new(sql, &params_with(&limit, &args)),
        decode: fact_from_row,
    })
}

/// [`Memory::facts_stored`]' read.
fn facts_stored_read() -> OneRowRead<i64> {
    OneRowRead {
        query: Query::new(
            "SELECT CAST(COALESCE(MAX(seq), 0) AS BIGINT) FROM memory_facts",
            &[],
        ),
        decode: |row| row.get::<i64>(0),
    }
}

/// Recompute the full-text index of every fact in `tx`'s database, for facts written there
/// by something other than [`Memory`] (a copy of another database, `clawboo db copy`):
/// the index is derived from the facts, so it is rebuilt where they land rather than
/// carried across engines. On PostgreSQL the postings are emptied and written again, packed,
/// from each fact, in the caller's transaction; on SQLite FTS5 is already kept by
/// [`EXTENSION`]'s pre-commit hook, which indexes each inserted fact before the commit, so
/// nothing is left to do. Returns the facts indexed here.
pub fn rebuild_text_index(tx: &dyn Tx) -> Result<u64> {
    engine_for(tx.dialect()).rebuild_text_index(tx)
}

/// Check that the full-text index of `store` is what its committed facts make (`clawboo
/// db check`): every fact counted, none waiting; on SQLite FTS5's own integrity check, on
/// PostgreSQL every block of postings readable and naming existing facts of its own
/// scope, none twice a term. Changes nothing.
pub fn check_text_index(store: &Store) -> Result<Findings> {
    let mut found = Findings::default();
    engine_for(store.dialect()).check_text_index(store, &mut found)?;
    Ok(found)
}

/// Facts whose terms [`each_fact_text`] reads and makes per round.
const TEXT_BATCH: i64 = 1000;

/// Call `each` with every fact of `tx`'s database and its terms, in `seq` order; the
/// facts read.
pub(crate) fn each_fact_text(
    tx: &dyn Tx,
    mut each: impl FnMut(i64, &Fact, &DocTerms) -> Result<()>,
) -> Result<u64> {
    let sql = format!(
        "SELECT f.seq, {FACT_COLUMNS} FROM memory_facts f WHERE f.seq > ?1 ORDER BY f.seq LIMIT ?2"
    );
    let (mut after, mut read) = (i64::MIN, 0u64);
    loop {
        let batch: Vec<(i64, Fact, String)> = tx.query_map(&sql, &[&after, &TEXT_BATCH], |r| {
            let seq: i64 = r.get(0)?;
            let tags: String = r.get(4)?;
            let fact = Fact {
                id: r.get(1)?,
                title: r.get(2)?,
                content: r.get(3)?,
                tags: Vec::new(),
                team_id: r.get(5)?,
                agent_id: r.get(6)?,
                tenant_id: r.get(7)?,
                created_at: r.get(8)?,
                embedding_model: r.get(9)?,
            };
            Ok((seq, fact, tags))
        })?;
        let Some(last) = batch.last() else { break };
        after = last.0;
        for (seq, fact, tags_json) in &batch {
            let terms = DocTerms::of([&fact.title, &fact.content, tags_json]);
            each(*seq, fact, &terms)?;
        }
        read += batch.len() as u64;
    }
    Ok(read)
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
mod retire_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod text_index_tests;
#[cfg(test)]
mod vector_index_tests;
