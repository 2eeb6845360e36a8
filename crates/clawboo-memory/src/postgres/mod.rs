//! Memory on PostgreSQL, where many hosts share one database and a process keeps nothing
//! per fact: the database keeps each fact's postings, written with it and later packed
//! into blocks (`fts`, `blocks`), and a search reads its terms' blocks and scores bm25
//! here; a vector search goes through pgvector's HNSW index where the server has the
//! extension (`pgvector`), else streams the vectors in pages.

mod blocks;
mod fts;
pub(crate) mod pgvector;

use std::sync::OnceLock;

use crate::bm25::relevance;
use crate::engine::{MemoryEngine, VectorSearchPath};
use crate::search::fts_words;
use crate::terms::{self, DocTerms};
use crate::vectors::{Vectors, scan_vectors};
use crate::{Fact, Memory, Result, ScopeFilter};
use clawboo_store::db::{Findings, ToValue, Tx};
use clawboo_store::reads::Query;
use clawboo_store::{Store, StoreError};

/// Full-text matches added to the HNSW walk's candidates for a vector search with an
/// embedder that is not semantic ([`Postgres::nearest_in_database`]).
const LEXICAL_CANDIDATES: usize = 100;

/// What a [`Memory`] on PostgreSQL keeps in its process.
#[derive(Default)]
pub(crate) struct State {
    /// Once made sure of: the dimension whose HNSW index serves this process's searches
    /// (`None`: pgvector cannot index the embedder's).
    vector_index: OnceLock<Option<usize>>,
}

/// Memory's side of the PostgreSQL engine.
pub(crate) struct Postgres;

impl MemoryEngine for Postgres {
    /// A database whose postings all sit in the tail (written before blocks existed) is
    /// packed whole, once; then pgvector is made ready where the server has it.
    fn opened(&self, store: &Store) -> Result<VectorSearchPath> {
        fts::opened(store)?;
        Ok(pgvector::path_at_open(store))
    }

    /// The tail of postings packed into blocks, what a save does once the tail is long.
    fn compact_text_index(&self, store: &Store) -> Result<()> {
        fts::pack_now(store)
    }

    /// Tokenized outside the write, where the database keeps term statistics.
    fn terms_before_write(&self, title: &str, content: &str, tags_json: &str) -> Option<DocTerms> {
        Some(DocTerms::of([title, content, tags_json]))
    }

    fn text_index(
        &self,
        seq: i64,
        fact: &Fact,
        tags_json: &str,
        terms: Option<&DocTerms>,
    ) -> Result<Option<Query>> {
        let made;
        let terms = match terms {
            Some(terms) => terms,
            None => {
                made = DocTerms::of([&fact.title, &fact.content, tags_json]);
                &made
            }
        };
        fts::record_terms(seq, fact, terms).map(Some)
    }

    fn pack(&self, tx: &dyn Tx) -> Result<()> {
        fts::pack(tx)
    }

    /// The postings emptied and written again, packed, from each fact, in `tx`.
    fn rebuild_text_index(&self, tx: &dyn Tx) -> Result<u64> {
        let mut rebuild = fts::Rebuild::start(tx)?;
        let indexed = rebuild.add_all(tx)?;
        rebuild.finish(tx)?;
        Ok(indexed)
    }

    fn check_text_index(&self, store: &Store, found: &mut Findings) -> Result<()> {
        store.snapshot(|tx| fts::check(tx, found))
    }

    /// The ranking's one statement reads the retired facts in scope too.
    fn text_ranking_leaves_out_retired(&self) -> bool {
        true
    }

    fn rank_text(
        &self,
        memory: &Memory,
        words: &[String],
        scope: &ScopeFilter,
        k: usize,
    ) -> Result<Vec<(Fact, f64)>> {
        let phrases: Vec<Vec<String>> = words.iter().map(|w| terms::phrase(w)).collect();
        let ranked = memory
            .store
            .read(|tx| fts::ranked(tx, &phrases, scope, k))?;
        Ok(relevance(ranked))
    }

    /// The database; facts in scope lacking a vector from `model` are embedded first.
    fn vectors<'m>(
        &self,
        memory: &'m Memory,
        query: &[f32],
        model: &str,
        scope: &ScopeFilter,
    ) -> Result<Vectors<'m>> {
        if lacks_vectors(memory, model, query.len(), scope)? {
            memory.embed_some_missing(scope);
        }
        Ok(Vectors::Database)
    }

    /// Through pgvector's HNSW index where the server has it and the walk finds `k`, else
    /// every fact in scope, a page at a time in one snapshot, keeping only the best `k`.
    ///
    /// An embedder that is not semantic (the built-in one) makes vectors of the text's own
    /// words, and a fact's nearest neighbours are then mostly the facts sharing the
    /// query's words: vectors a graph index walks poorly (nearly orthogonal to one another,
    /// of high intrinsic dimension). For those the best full-text matches join the walk's
    /// candidates, all measured by exact distance, so recall does not hang on the walk.
    fn nearest_in_database(
        &self,
        memory: &Memory,
        query: &[f32],
        words: &[String],
        model: &str,
        scope: &ScopeFilter,
        k: usize,
    ) -> Result<Vec<(i64, f32)>> {
        if self.has_vector_index(memory, query.len())? {
            let lexical = memory.embedder.as_ref().is_some_and(|e| !e.is_semantic());
            let phrases: Vec<Vec<String>> = if lexical {
                fts_words(words).iter().map(|w| terms::phrase(w)).collect()
            } else {
                Vec::new()
            };
            let nearest = memory.store.read(|tx| {
                let also = fts::ranked_seqs(tx, &phrases, scope, LEXICAL_CANDIDATES)?;
                pgvector::nearest(tx, query, model, scope, k, &also)
            })?;
            if let Some(nearest) = nearest {
                return Ok(nearest);
            }
        }
        memory
            .store
            .snapshot(|tx| scan_vectors(tx, query, model, scope, k))
    }

    /// Whether pgvector's HNSW index serves vectors of `dim` (made sure of once per
    /// process, for the embedder's dimension).
    fn has_vector_index(&self, memory: &Memory, dim: usize) -> Result<bool> {
        if !crate::uses_pgvector(&memory.store) {
            return Ok(false);
        }
        if let Some(ready) = memory.postgres.vector_index.get() {
            return Ok(*ready == Some(dim));
        }
        let ready = pgvector::ensure_index(&memory.store, dim)?.then_some(dim);
        Ok(*memory.postgres.vector_index.get_or_init(|| ready) == Some(dim))
    }
}

/// Whether a fact in `scope` lacks a vector from `model` at `dim` (PostgreSQL). A fact
/// has a model exactly when it has a vector, and every test below is a range of the
/// `(embedding_model, embedding_dim)` index, so this reads only such facts, not the
/// corpus. The model and dimension are written into the statement (one per process,
/// as its embedder is): bound as parameters, PostgreSQL's generic plan would guess the
/// ranges wide and scan every fact.
fn lacks_vectors(memory: &Memory, model: &str, dim: usize, scope: &ScopeFilter) -> Result<bool> {
    let (cond, args) = scope.sql("f", 1);
    let model = quoted(model)?;
    let sql = format!(
        "SELECT EXISTS (SELECT 1 FROM memory_facts f
         WHERE (f.embedding_model IS NULL OR f.embedding_model < {model}
                OR f.embedding_model > {model}
                OR (f.embedding_model = {model}
                    AND (f.embedding_dim < {dim} OR f.embedding_dim > {dim})))
           AND {cond})"
    );
    memory.store.read(|tx| {
        let params: Vec<&dyn ToValue> = args.iter().map(|a| a as &dyn ToValue).collect();
        tx.query_one(&sql, &params, |r| r.get::<bool>(0))
    })
}

/// `text` as a PostgreSQL string literal (standard-conforming: quotes doubled); text
/// holding a NUL, which no PostgreSQL text can, is refused.
fn quoted(text: &str) -> Result<String> {
    if text.contains('\0') {
        return Err(StoreError::Invalid(
            "the embedding model's name holds a NUL character".into(),
        ));
    }
    Ok(format!("'{}'", text.replace('\'', "''")))
}
