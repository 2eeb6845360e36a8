//! The seam between memory's rules, written once, and what each engine does its own way:
//! how a fact's text is indexed and ranked, and where vectors are ranked. Each engine's
//! side is one folder (`sqlite/`, `postgres/`) implementing [`MemoryEngine`]; the crate
//! root picks one per dialect ([`crate::engine_for`]), the only place that tells them apart.

use serde::Serialize;

use crate::terms::DocTerms;
use crate::vectors::Vectors;
use crate::{Fact, Memory, Result, ScopeFilter};
use clawboo_store::Store;
use clawboo_store::db::{Findings, Tx};
use clawboo_store::reads::Query;

/// What memory does differently on each engine. Stateless: the per-process state an
/// engine keeps (SQLite's caches, PostgreSQL's index check) lives in [`Memory`], which
/// each method that needs it is given.
pub(crate) trait MemoryEngine: Sync {
    /// Memory's step once a store on this engine is open (after its migrations): the
    /// vector search path it leaves, which the store keeps for [`Memory::vector_search`].
    fn opened(&self, store: &Store) -> Result<VectorSearchPath>;

    /// Bring the full-text index to its most compact form now ([`crate::merge_search_index`]).
    fn compact_text_index(&self, store: &Store) -> Result<()>;

    /// A fact's terms, made before its write (outside the transaction) when this engine
    /// keeps them with the fact; `None` when it indexes the text itself.
    fn terms_before_write(&self, title: &str, content: &str, tags_json: &str) -> Option<DocTerms>;

    /// The statement that indexes the text of the fact just inserted as `seq`, to run in
    /// the save's own transaction, whose one row says (first column) whether the index
    /// wants [`MemoryEngine::pack`]ing now; `None` when the engine indexes the text itself.
    /// `terms` are [`MemoryEngine::terms_before_write`]'s, when made.
    fn text_index(
        &self,
        seq: i64,
        fact: &Fact,
        tags_json: &str,
        terms: Option<&DocTerms>,
    ) -> Result<Option<Query>>;

    /// Pack what saves added to the full-text index, in `tx`, when
    /// [`MemoryEngine::text_index`] said it is due.
    fn pack(&self, tx: &dyn Tx) -> Result<()>;

    /// Recompute the full-text index from every fact in `tx`'s database; the facts
    /// indexed by this step ([`crate::rebuild_text_index`]).
    fn rebuild_text_index(&self, tx: &dyn Tx) -> Result<u64>;

    /// Check the full-text index against the committed facts of `store`, adding what it
    /// ran and found to `found` ([`crate::check_text_index`]).
    fn check_text_index(&self, store: &Store, found: &mut Findings) -> Result<()>;

    /// Whether [`MemoryEngine::rank_text`] leaves retired facts out by itself (else the
    /// caller widens the ranking by their number and drops them).
    fn text_ranking_leaves_out_retired(&self) -> bool;

    /// The best `k` full-text matches of `words` (one FTS5 phrase each, as
    /// [`crate::search::fts_words`] makes them) in `scope`, each with its bm25 relevance
    /// (positive, higher is better), best first.
    fn rank_text(
        &self,
        memory: &Memory,
        words: &[String],
        scope: &ScopeFilter,
        k: usize,
    ) -> Result<Vec<(Fact, f64)>>;

    /// Where the vectors for `model` at the query's dimension are ranked, made ready for
    /// it (vectors caught up, facts lacking one embedded, up to a bound a search).
    fn vectors<'m>(
        &self,
        memory: &'m Memory,
        query: &[f32],
        model: &str,
        scope: &ScopeFilter,
    ) -> Result<Vectors<'m>>;

    /// The best `k` facts (`seq`, similarity) in scope by cosine similarity to `query`,
    /// ranked in the database, among facts embedded by `model` at the query's dimension;
    /// `words` are the query's.
    fn nearest_in_database(
        &self,
        memory: &Memory,
        query: &[f32],
        words: &[String],
        model: &str,
        scope: &ScopeFilter,
        k: usize,
    ) -> Result<Vec<(i64, f32)>>;

    /// Whether an index in the database serves vectors of `dim`, made sure of before the
    /// first such vector is written, so facts join it as they are saved.
    fn has_vector_index(&self, memory: &Memory, dim: usize) -> Result<bool>;
}

/// How this store finds a query's nearest facts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase", tag = "path")]
pub enum VectorSearchPath {
    /// SQLite: every vector cached in the process, scanned exactly.
    InProcess,
    /// PostgreSQL with pgvector: its HNSW index, within the caller's scope.
    PgvectorHnsw {
        /// The extension's version.
        version: String,
    },
    /// PostgreSQL without pgvector: every vector in scope streamed and scanned exactly.
    ExactScan,
}

impl VectorSearchPath {
    /// A short name for status pages and logs.
    pub fn as_str(&self) -> &'static str {
        match self {
            VectorSearchPath::InProcess => "in-process",
            VectorSearchPath::PgvectorHnsw { .. } => "pgvector-hnsw",
            VectorSearchPath::ExactScan => "exact-scan",
        }
    }
}

impl std::fmt::Display for VectorSearchPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            VectorSearchPath::InProcess => f.write_str("exact scan in this process (SQLite)"),
            VectorSearchPath::PgvectorHnsw { version } => {
                write!(f, "pgvector {version} HNSW index")
            }
            VectorSearchPath::ExactScan => f.write_str(
                "exact scan (the PostgreSQL server has no pgvector; see the README to enable it)",
            ),
        }
    }
}
