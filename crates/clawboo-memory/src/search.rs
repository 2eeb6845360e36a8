//! Search: full text (bm25), vector (cosine over every fact in scope embedded by the
//! current model at the current dimension) and hybrid (reciprocal-rank fusion of both).
//!
//! On SQLite full text ranks in memory (`fulltext`) or by FTS5 (`sqlite_fts`), and vectors
//! are scanned from a cache of every vector in the process; on PostgreSQL full text ranks
//! in the database from its term statistics (`pg_fts`) and vectors are streamed from the
//! database page by page, keeping only the best, so a process holds nothing per fact.

use std::cmp::{Ordering, Reverse};
use std::collections::{BinaryHeap, HashMap};
use std::fmt;
use std::str::FromStr;
use std::sync::MutexGuard;

use serde::Serialize;

use super::{
    FACT_COLUMNS, Fact, MAX_SEARCH_LIMIT, Memory, SEQ_IN_LIST, ScopeFilter, ScopeKey,
    blob_to_vector, check_len, check_limit, fact_from_row, params_with, pg_fts, pgvector,
    read_vector_into, sqlite_fts, terms,
};
use crate::Result;
use clawboo_store::ChangeToken;
use clawboo_store::StoreError;
use clawboo_store::db::{Dialect, ToValue, Tx, Value};

/// Facts a PostgreSQL vector scan reads per statement, so neither the driver nor the
/// process ever holds more than a page of vectors.
const VECTOR_PAGE: usize = 512;

/// Longest accepted query, in characters.
pub const MAX_QUERY_CHARS: usize = 2_000;
/// Most query words used (the rest are ignored).
const MAX_QUERY_WORDS: usize = 64;
/// Candidates each list contributes to a hybrid fusion (at least the limit).
const FUSION_CANDIDATES: usize = 50;
/// The reciprocal-rank-fusion constant (the usual 60).
const RRF_K: f64 = 60.0;
/// Full-text matches added to the HNSW walk's candidates for a vector search with an
/// embedder that is not semantic ([`Memory::scan_vectors`]).
const LEXICAL_CANDIDATES: usize = 100;
/// Facts lacking a current vector that one search embeds before scanning.
const LAZY_EMBED_PER_SEARCH: usize = 256;

/// How a search matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SearchMode {
    /// Full text (bm25).
    Fts,
    /// Vector similarity.
    Vector,
    /// Both, fused by reciprocal rank.
    Hybrid,
}

impl SearchMode {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            SearchMode::Fts => "fts",
            SearchMode::Vector => "vector",
            SearchMode::Hybrid => "hybrid",
        }
    }
}

impl fmt::Display for SearchMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for SearchMode {
    type Err = StoreError;

    fn from_str(s: &str) -> Result<SearchMode> {
        match s {
            "fts" => Ok(SearchMode::Fts),
            "vector" => Ok(SearchMode::Vector),
            "hybrid" => Ok(SearchMode::Hybrid),
            other => Err(StoreError::Invalid(format!(
                "mode {other:?} is not one of fts, vector, hybrid"
            ))),
        }
    }
}

/// Which list(s) found a hit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum MatchedVia {
    /// Full text only.
    Fts,
    /// Vector similarity only.
    Vector,
    /// Both.
    Both,
}

/// One search result.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SearchHit {
    /// The fact found.
    pub fact: Fact,
    /// Relevance in 0..1, higher is better.
    pub score: f64,
    /// Which list(s) found it.
    pub matched_via: MatchedVia,
}

/// A search's results and the mode actually used (a fallback shows here).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SearchOutcome {
    /// Best first.
    pub hits: Vec<SearchHit>,
    /// The mode used.
    pub mode: SearchMode,
}

/// English function words dropped from full-text queries (unless the query has nothing
/// else): OR-ing them would match nearly every fact and drown the real matches.
const STOPWORDS: &[&str] = &[
    "a", "about", "an", "and", "are", "as", "at", "be", "been", "but", "by", "can", "could", "did",
    "do", "does", "for", "from", "had", "has", "have", "how", "i", "if", "in", "into", "is", "it",
    "its", "me", "my", "of", "on", "or", "our", "should", "so", "that", "the", "their", "them",
    "then", "there", "these", "they", "this", "to", "us", "was", "we", "were", "what", "when",
    "where", "which", "who", "why", "will", "with", "would", "you", "your",
];

/// The words a full-text query ORs: the query's words without function words, or all of
/// them when it has nothing else.
pub(crate) fn fts_words(words: &[String]) -> Vec<String> {
    let content: Vec<String> = words
        .iter()
        .filter(|w| !STOPWORDS.contains(&w.as_str()))
        .cloned()
        .collect();
    if content.is_empty() {
        words.to_vec()
    } else {
        content
    }
}

/// Lowercase words of a query: letters and digits only, so no punctuation can reach the
/// FTS5 query syntax. Duplicates dropped; at most [`MAX_QUERY_WORDS`].
pub(crate) fn query_words(query: &str) -> Vec<String> {
    let mut words: Vec<String> = Vec::new();
    for w in query.split(|c: char| !c.is_alphanumeric()) {
        if w.is_empty() {
            continue;
        }
        let w = w.to_lowercase();
        if !words.contains(&w) {
            words.push(w);
        }
        if words.len() == MAX_QUERY_WORDS {
            break;
        }
    }
    words
}

/// The vectors of every fact of one [`ScopeKey`], as one row-major matrix, so a search
/// scans contiguous memory and decides visibility once per block rather than per fact.
#[derive(Debug)]
struct Block {
    key: ScopeKey,
    seqs: Vec<i64>,
    /// `seqs.len() × dim` floats.
    matrix: Vec<f32>,
    /// `false` once the fact's vector is no longer from the cached model.
    live: Vec<bool>,
}

/// Every fact vector of one model and dimension, kept in step with the database through
/// the `embed_seq` watermark.
#[derive(Debug, Default)]
pub(super) struct VectorCache {
    model: String,
    dim: usize,
    watermark: i64,
    blocks: Vec<Block>,
    block_of: HashMap<ScopeKey, usize>,
    /// Where each cached fact's row is: (block, row).
    by_seq: HashMap<i64, (usize, usize)>,
    /// Rows whose vector is current.
    live: usize,
    /// The store's change token when the cache was last found complete (every fact had
    /// a current vector); while it holds, a search needs no database round trip.
    complete_at: Option<ChangeToken>,
}

impl VectorCache {
    fn reset(&mut self, model: &str, dim: usize) {
        *self = VectorCache {
            model: model.to_string(),
            dim,
            ..VectorCache::default()
        };
    }

    /// Put `vector` (empty: none current) in the row of fact `seq`.
    fn set(&mut self, seq: i64, key: ScopeKey, vector: Option<Vec<f32>>) {
        let dim = self.dim;
        match (self.by_seq.get(&seq).copied(), vector) {
            (Some((b, r)), Some(v)) => {
                let block = &mut self.blocks[b];
                block.matrix[r * dim..(r + 1) * dim].copy_from_slice(&v);
                if !block.live[r] {
                    block.live[r] = true;
                    self.live += 1;
                }
            }
            (Some((b, r)), None) => {
                let block = &mut self.blocks[b];
                if block.live[r] {
                    block.live[r] = false;
                    self.live -= 1;
                }
            }
            (None, Some(v)) => {
                let b = match self.block_of.get(&key) {
                    Some(&b) => b,
                    None => {
                        self.blocks.push(Block {
                            key: key.clone(),
                            seqs: Vec::new(),
                            matrix: Vec::new(),
                            live: Vec::new(),
                        });
                        self.block_of.insert(key, self.blocks.len() - 1);
                        self.blocks.len() - 1
                    }
                };
                let block = &mut self.blocks[b];
                self.by_seq.insert(seq, (b, block.seqs.len()));
                block.seqs.push(seq);
                block.matrix.extend_from_slice(&v);
                block.live.push(true);
                self.live += 1;
            }
            (None, None) => {}
        }
    }

    /// The best `k` (seq, similarity) pairs with positive similarity to `query` among the
    /// facts `scope` admits, best first (ties: newest row first).
    fn top_k(&self, query: &[f32], scope: &ScopeFilter, k: usize) -> Vec<(i64, f32)> {
        let mut best = TopK::new(k);
        if query.len() != self.dim {
            return Vec::new();
        }
        for block in &self.blocks {
            let key = &block.key;
            if !scope.admits(
                key.team_id.as_deref(),
                key.agent_id.as_deref(),
                key.tenant_id.as_deref(),
            ) {
                continue;
            }
            for ((row, &seq), &live) in block
                .matrix
                .chunks_exact(self.dim)
                .zip(&block.seqs)
                .zip(&block.live)
            {
                if live {
                    best.offer(seq, dot(query, row));
                }
            }
        }
        best.into_sorted()
    }
}

/// The best `k` rows with a positive similarity seen so far.
struct TopK {
    k: usize,
    best: BinaryHeap<Reverse<Ranked>>,
}

impl TopK {
    fn new(k: usize) -> TopK {
        TopK {
            k,
            best: BinaryHeap::with_capacity(k + 1),
        }
    }

    /// Keep row `seq` if it is among the best `k` so far.
    fn offer(&mut self, seq: i64, score: f32) {
        if score <= 0.0 || self.k == 0 {
            return;
        }
        let ranked = Ranked { score, seq };
        if self.best.len() < self.k {
            self.best.push(Reverse(ranked));
        } else if self.best.peek().is_some_and(|worst| ranked > worst.0) {
            self.best.pop();
            self.best.push(Reverse(ranked));
        }
    }

    /// Best first (ties: newest row first).
    fn into_sorted(self) -> Vec<(i64, f32)> {
        let mut out: Vec<(i64, f32)> = self
            .best
            .into_iter()
            .map(|Reverse(r)| (r.seq, r.score))
            .collect();
        out.sort_by(|a, b| b.1.total_cmp(&a.1).then(b.0.cmp(&a.0)));
        out
    }
}

/// A scored row; greater is better (higher similarity, then higher seq).
#[derive(Debug, Clone, Copy)]
struct Ranked {
    score: f32,
    seq: i64,
}

impl PartialEq for Ranked {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Ranked {}

impl PartialOrd for Ranked {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Ranked {
    fn cmp(&self, other: &Self) -> Ordering {
        self.score
            .total_cmp(&other.score)
            .then(self.seq.cmp(&other.seq))
    }
}

/// The dot product of two equally long vectors, summed in eight lanes so the compiler
/// can use SIMD (the scan's inner loop).
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut lanes = [0f32; 8];
    let (a8, a_rest) = a.as_chunks::<8>();
    let (b8, b_rest) = b.as_chunks::<8>();
    for (x, y) in a8.iter().zip(b8) {
        for ((lane, x), y) in lanes.iter_mut().zip(x).zip(y) {
            *lane += x * y;
        }
    }
    let tail: f32 = a_rest.iter().zip(b_rest).map(|(x, y)| x * y).sum();
    lanes.iter().sum::<f32>() + tail
}

/// Where a vector ranking reads the vectors.
enum Vectors<'m> {
    /// This process's cache of every vector (SQLite).
    Cache(MutexGuard<'m, VectorCache>),
    /// The database, page by page (PostgreSQL).
    Database,
}

impl Memory {
    /// Search facts in `scope`, retired ones never among the hits. `mode` `None` uses
    /// [`Memory::default_mode`]; vector and hybrid fall back to full text when there is no
    /// embedder or embedding the query fails (the outcome's `mode` says which ran). `limit`
    /// must be 1..=100. Not for use inside a [`clawboo_store::Store::write`]: a hybrid
    /// search reads on a second thread, which cannot share that write's connection (on an
    /// in-memory store it would wait for it forever).
    pub fn search(
        &self,
        query: &str,
        mode: Option<SearchMode>,
        scope: &ScopeFilter,
        limit: u32,
    ) -> Result<SearchOutcome> {
        check_limit(limit, MAX_SEARCH_LIMIT)?;
        check_len("query", query, MAX_QUERY_CHARS)?;
        if query.trim().is_empty() {
            return Err(StoreError::Invalid(
                "query is empty; say what to look for".into(),
            ));
        }
        let limit = limit as usize;
        let words = query_words(query);
        let mode = mode.unwrap_or_else(|| self.default_mode());
        let query_vector = match mode {
            SearchMode::Fts => None,
            SearchMode::Vector | SearchMode::Hybrid => self.embed_one(query),
        };
        let Some((embedder, qv)) = query_vector else {
            let ranked = self.live_fts_ranked(&words, scope, limit)?;
            let hits = ranked
                .into_iter()
                .map(|(fact, score)| SearchHit {
                    fact,
                    score,
                    matched_via: MatchedVia::Fts,
                })
                .collect();
            return Ok(SearchOutcome {
                hits,
                mode: SearchMode::Fts,
            });
        };
        // Each ranking is asked for as many more hits as there are retired facts in scope,
        // which are then dropped (`retire`).
        let retired = self.retired(scope)?;
        let model = embedder.model_id().to_string();
        match mode {
            SearchMode::Vector => {
                let vectors = self.vectors(&qv, &model, scope)?;
                let wide = retired.widen(limit);
                let ranked = self.vector_ranked(vectors, &qv, &words, &model, scope, wide)?;
                let ranked = retired.live_seqs(ranked, limit);
                let facts = self.facts_by_seq(ranked.iter().map(|(s, _)| *s))?;
                let hits = ranked
                    .into_iter()
                    .filter_map(|(seq, score)| {
                        facts.get(&seq).map(|f| SearchHit {
                            fact: f.clone(),
                            score: f64::from(score).clamp(0.0, 1.0),
                            matched_via: MatchedVia::Vector,
                        })
                    })
                    .collect();
                Ok(SearchOutcome {
                    hits,
                    mode: SearchMode::Vector,
                })
            }
            SearchMode::Fts | SearchMode::Hybrid => {
                let candidates = limit.max(FUSION_CANDIDATES);
                // The vectors are brought up to date first: on SQLite that reads the
                // writer's connection, which the full-text ranking may take for itself.
                let vectors = self.vectors(&qv, &model, scope)?;
                // Both rankings at once: the full-text ranking runs on a thread of its own
                // while this one scans the vectors, so a search waits for the longer
                // instead of the sum.
                let wide = retired.widen(candidates);
                let (fts, vector) = std::thread::scope(|threads| {
                    let fts = threads.spawn(|| self.fts_ranked(&words, scope, wide));
                    // Moved in, so a cache unlocks when the scan ends (other searches wait
                    // on it), not when the full-text ranking does.
                    let vector = self.vector_ranked(vectors, &qv, &words, &model, scope, wide);
                    let fts = fts
                        .join()
                        .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
                    (fts, vector)
                });
                let fts = retired.live_facts(fts?, candidates);
                let vector = retired.live_seqs(vector?, candidates);
                let hits = self.fuse(fts, vector, limit)?;
                Ok(SearchOutcome {
                    hits,
                    mode: SearchMode::Hybrid,
                })
            }
        }
    }

    /// The ids and similarities of the best `limit` facts in `scope` by vector similarity
    /// to `query`, found by scanning every vector exactly, whatever index the store has:
    /// what an index's recall is measured against. Empty without an embedder.
    pub fn exact_vector_search(
        &self,
        query: &str,
        scope: &ScopeFilter,
        limit: u32,
    ) -> Result<Vec<(String, f64)>> {
        check_limit(limit, MAX_SEARCH_LIMIT)?;
        let Some((embedder, qv)) = self.embed_one(query) else {
            return Ok(Vec::new());
        };
        let model = embedder.model_id().to_string();
        let retired = self.retired(scope)?;
        let wide = retired.widen(limit as usize);
        let ranked = match self.vectors(&qv, &model, scope)? {
            Vectors::Cache(cache) => cache.top_k(&qv, scope, wide),
            Vectors::Database => self
                .store
                .snapshot(|tx| scan_vectors(tx, &qv, &model, scope, wide))?,
        };
        let ranked = retired.live_seqs(ranked, limit as usize);
        let mut facts = self.facts_by_seq(ranked.iter().map(|(s, _)| *s))?;
        Ok(ranked
            .iter()
            .filter_map(|(seq, score)| facts.remove(seq).map(|f| (f.id, f64::from(*score))))
            .collect())
    }

    /// Reciprocal-rank fusion of a full-text list and a vector list. The fused score is
    /// scaled so a fact ranked first in both lists scores 1.
    fn fuse(
        &self,
        fts: Vec<(Fact, f64)>,
        vector: Vec<(i64, f32)>,
        limit: usize,
    ) -> Result<Vec<SearchHit>> {
        let vector_facts = self.facts_by_seq(vector.iter().map(|(s, _)| *s))?;
        let mut fused: HashMap<String, (Fact, f64, bool, bool)> = HashMap::new();
        for (rank, (fact, _)) in fts.into_iter().enumerate() {
            let contribution = 1.0 / (RRF_K + rank as f64 + 1.0);
            fused.insert(fact.id.clone(), (fact, contribution, true, false));
        }
        for (rank, (seq, _)) in vector.iter().enumerate() {
            let Some(fact) = vector_facts.get(seq) else {
                continue;
            };
            let contribution = 1.0 / (RRF_K + rank as f64 + 1.0);
            fused
                .entry(fact.id.clone())
                .and_modify(|e| {
                    e.1 += contribution;
                    e.3 = true;
                })
                .or_insert_with(|| (fact.clone(), contribution, false, true));
        }
        let best = 2.0 / (RRF_K + 1.0);
        let mut hits: Vec<SearchHit> = fused
            .into_values()
            .map(|(fact, score, by_fts, by_vector)| SearchHit {
                fact,
                score: (score / best).clamp(0.0, 1.0),
                matched_via: match (by_fts, by_vector) {
                    (true, true) => MatchedVia::Both,
                    (true, false) => MatchedVia::Fts,
                    _ => MatchedVia::Vector,
                },
            })
            .collect();
        hits.sort_by(|a, b| {
            b.score
                .total_cmp(&a.score)
                .then_with(|| b.fact.created_at.cmp(&a.fact.created_at))
        });
        hits.truncate(limit);
        Ok(hits)
    }

    /// [`Memory::fts_ranked`] without retired facts: on PostgreSQL the ranking's own
    /// statement reads them and leaves them out; elsewhere the ranking is widened by their
    /// number and they are dropped.
    fn live_fts_ranked(
        &self,
        words: &[String],
        scope: &ScopeFilter,
        k: usize,
    ) -> Result<Vec<(Fact, f64)>> {
        if self.dialect()? == Dialect::Postgres {
            return self.fts_ranked(words, scope, k);
        }
        let retired = self.retired(scope)?;
        Ok(retired.live_facts(self.fts_ranked(words, scope, retired.widen(k))?, k))
    }

    /// The best `k` full-text matches in scope with a 0..1 score (from bm25, where a
    /// title match weighs double): on SQLite ranked in memory when the text index can
    /// answer, else by FTS5; on PostgreSQL from the postings its statement reads, which
    /// leaves retired facts out.
    fn fts_ranked(
        &self,
        words: &[String],
        scope: &ScopeFilter,
        k: usize,
    ) -> Result<Vec<(Fact, f64)>> {
        if words.is_empty() {
            return Ok(Vec::new());
        }
        let words = fts_words(words);
        if self.dialect()? == Dialect::Postgres {
            let phrases: Vec<Vec<String>> = words.iter().map(|w| terms::phrase(w)).collect();
            let ranked = self
                .store
                .read(|tx| pg_fts::ranked(tx, &phrases, scope, k))?;
            return Ok(relevance(ranked));
        }
        let ranked = match self.text_ranked(&words, scope, k) {
            Ok(Some(ranked)) => ranked,
            Ok(None) => return self.fts_ranked_in_sqlite(&words, scope, k),
            Err(e) => {
                tracing::warn!(error = %e, "the in-memory text index failed; ranking in SQLite");
                return self.fts_ranked_in_sqlite(&words, scope, k);
            }
        };
        let mut facts = self.facts_by_seq(ranked.iter().map(|(s, _)| *s))?;
        // A fact deleted behind the store's back is skipped (facts are append-only).
        Ok(relevance(
            ranked
                .into_iter()
                .filter_map(|(seq, score)| facts.remove(&seq).map(|f| (f, score)))
                .collect(),
        ))
    }

    /// [`Memory::fts_ranked`] by FTS5's own bm25, in SQLite; `words` as the query ORs them.
    pub(super) fn fts_ranked_in_sqlite(
        &self,
        words: &[String],
        scope: &ScopeFilter,
        k: usize,
    ) -> Result<Vec<(Fact, f64)>> {
        let ranked = self
            .store
            .read(|tx| sqlite_fts::ranked_by_fts5(tx, words, scope, k))?;
        Ok(relevance(ranked))
    }

    /// The vectors to rank for `model` at the query's dimension: on SQLite the cache,
    /// brought in step with the database first; facts lacking such a vector are embedded
    /// first (up to [`LAZY_EMBED_PER_SEARCH`] per call).
    fn vectors(&self, query: &[f32], model: &str, scope: &ScopeFilter) -> Result<Vectors<'_>> {
        match self.dialect()? {
            Dialect::Sqlite => Ok(Vectors::Cache(self.fresh_vectors(model, query.len())?)),
            Dialect::Postgres => {
                if self.lacks_vectors(model, query.len(), scope)? {
                    self.embed_some_missing(scope);
                }
                Ok(Vectors::Database)
            }
        }
    }

    /// The best `k` facts in scope by cosine similarity to `query` (positive only), among
    /// facts embedded by `model` at the query's dimension; `words` are the query's.
    fn vector_ranked(
        &self,
        vectors: Vectors<'_>,
        query: &[f32],
        words: &[String],
        model: &str,
        scope: &ScopeFilter,
        k: usize,
    ) -> Result<Vec<(i64, f32)>> {
        match vectors {
            Vectors::Cache(cache) => Ok(cache.top_k(query, scope, k)),
            Vectors::Database => self.scan_vectors(query, words, model, scope, k),
        }
    }

    /// [`Memory::vector_ranked`] over the database: through pgvector's HNSW index where
    /// the server has it and the walk finds `k`, else every fact in scope, a page at a time
    /// in one snapshot, keeping only the best `k`.
    ///
    /// An embedder that is not semantic (the built-in one) makes vectors of the text's own
    /// words, and a fact's nearest neighbours are then mostly the facts sharing the
    /// query's words: vectors a graph index walks poorly (nearly orthogonal to one another,
    /// of high intrinsic dimension). For those the best full-text matches join the walk's
    /// candidates, all measured by exact distance, so recall does not hang on the walk.
    fn scan_vectors(
        &self,
        query: &[f32],
        words: &[String],
        model: &str,
        scope: &ScopeFilter,
        k: usize,
    ) -> Result<Vec<(i64, f32)>> {
        if self.has_vector_index(query.len())? {
            let lexical = self.embedder.as_ref().is_some_and(|e| !e.is_semantic());
            let phrases: Vec<Vec<String>> = if lexical {
                fts_words(words).iter().map(|w| terms::phrase(w)).collect()
            } else {
                Vec::new()
            };
            let nearest = self.store.read(|tx| {
                let also = pg_fts::ranked_seqs(tx, &phrases, scope, LEXICAL_CANDIDATES)?;
                pgvector::nearest(tx, query, model, scope, k, &also)
            })?;
            if let Some(nearest) = nearest {
                return Ok(nearest);
            }
        }
        self.store
            .snapshot(|tx| scan_vectors(tx, query, model, scope, k))
    }

    /// Whether pgvector's HNSW index serves vectors of `dim` (made sure of once per
    /// process, for the embedder's dimension).
    pub(super) fn has_vector_index(&self, dim: usize) -> Result<bool> {
        if !super::uses_pgvector(&self.store) {
            return Ok(false);
        }
        if let Some(ready) = self.vector_index.get() {
            return Ok(*ready == Some(dim));
        }
        let ready = pgvector::ensure_index(&self.store, dim)?.then_some(dim);
        Ok(*self.vector_index.get_or_init(|| ready) == Some(dim))
    }

    /// Whether a fact in `scope` lacks a vector from `model` at `dim` (PostgreSQL). A fact
    /// has a model exactly when it has a vector, and every test below is a range of the
    /// `(embedding_model, embedding_dim)` index, so this reads only such facts, not the
    /// corpus. The model and dimension are written into the statement (one per process,
    /// as its embedder is): bound as parameters, PostgreSQL's generic plan would guess the
    /// ranges wide and scan every fact.
    fn lacks_vectors(&self, model: &str, dim: usize, scope: &ScopeFilter) -> Result<bool> {
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
        self.store.read(|tx| {
            let params: Vec<&dyn ToValue> = args.iter().map(|a| a as &dyn ToValue).collect();
            tx.query_one(&sql, &params, |r| r.get::<bool>(0))
        })
    }

    /// Embed up to [`LAZY_EMBED_PER_SEARCH`] facts in `scope` lacking a current vector; a
    /// failure is logged and the search ranks what has vectors.
    fn embed_some_missing(&self, scope: &ScopeFilter) {
        if let Err(e) = self.reindex_scope(scope, 64, Some(LAZY_EMBED_PER_SEARCH)) {
            tracing::warn!(error = %e, "lazy re-embedding failed; searching what has vectors");
        }
    }

    /// The vector cache for `model` at `dim`, brought in step with the database first.
    /// Facts lacking such a vector are embedded (up to [`LAZY_EMBED_PER_SEARCH`] per call).
    fn fresh_vectors(&self, model: &str, dim: usize) -> Result<MutexGuard<'_, VectorCache>> {
        let mut cache = self
            .vectors
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if cache.model != model || cache.dim != dim {
            cache.reset(model, dim);
        }
        // Read before looking, so a change committed meanwhile shows in the next token.
        let token = self.store.change_token()?;
        if cache.complete_at != Some(token) {
            cache.complete_at = None;
            self.refresh_cache(&mut cache)?;
            let mut total = self.fact_count()?;
            if total > cache.live {
                self.embed_some_missing(&ScopeFilter::default());
                self.refresh_cache(&mut cache)?;
                total = self.fact_count()?;
            }
            if total <= cache.live {
                cache.complete_at = Some(self.store.change_token()?);
            }
        }
        Ok(cache)
    }

    /// How many facts the database holds.
    fn fact_count(&self) -> Result<usize> {
        self.store
            .read(|tx| tx.query_one("SELECT count(*) FROM memory_facts", &[], |r| r.get(0)))
    }

    /// Load every row whose embedding changed since the cache last looked.
    fn refresh_cache(&self, cache: &mut VectorCache) -> Result<()> {
        let watermark = cache.watermark;
        self.store.read(|tx| {
            tx.query_each(
                "SELECT seq, team_id, agent_id, tenant_id, embedding, embedding_model,
                        embedding_dim, embed_seq
                 FROM memory_facts WHERE embed_seq > ?1 ORDER BY embed_seq",
                &[&watermark],
                &mut |r| {
                    let seq: i64 = r.get(0)?;
                    let key = ScopeKey {
                        team_id: r.get(1)?,
                        agent_id: r.get(2)?,
                        tenant_id: r.get(3)?,
                    };
                    let blob: Option<Vec<u8>> = r.get(4)?;
                    let model: Option<String> = r.get(5)?;
                    let dim: Option<usize> = r.get(6)?;
                    let embed_seq: i64 = r.get(7)?;
                    cache.watermark = cache.watermark.max(embed_seq);
                    let vector = match (blob, model, dim) {
                        (Some(blob), Some(m), Some(d)) if m == cache.model && d == cache.dim => {
                            blob_to_vector(&blob).filter(|v| v.len() == cache.dim)
                        }
                        _ => None,
                    };
                    cache.set(seq, key, vector);
                    Ok(())
                },
            )
        })
    }

    /// Facts by internal row number.
    pub(super) fn facts_by_seq(
        &self,
        seqs: impl Iterator<Item = i64>,
    ) -> Result<HashMap<i64, Fact>> {
        let seqs: Vec<i64> = seqs.collect();
        if seqs.is_empty() {
            return Ok(HashMap::new());
        }
        // One cached statement for any number of rows (a list of `?` would be a new
        // statement, compiled anew, for each count): the numbers go in as one text.
        let list = seqs
            .iter()
            .map(i64::to_string)
            .collect::<Vec<_>>()
            .join(",");
        self.store.read(|tx| {
            let test = tx.statement(&SEQ_IN_LIST);
            let sql = format!("SELECT {FACT_COLUMNS}, f.seq FROM memory_facts f WHERE {test}");
            let mut out = HashMap::with_capacity(seqs.len());
            tx.query_each(&sql, &params_with(&list, &[]), &mut |r| {
                out.insert(r.get::<i64>(9)?, fact_from_row(r)?);
                Ok(())
            })?;
            Ok(out)
        })
    }
}

/// The best `k` facts in scope by similarity to `query` among those embedded by `model`
/// at its dimension, read from the database a page at a time (run it in one snapshot).
pub(super) fn scan_vectors(
    tx: &dyn Tx,
    query: &[f32],
    model: &str,
    scope: &ScopeFilter,
    k: usize,
) -> Result<Vec<(i64, f32)>> {
    let (cond, args) = scope.sql("f", 5);
    let sql = format!(
        "SELECT f.seq, f.embedding FROM memory_facts f
         WHERE f.seq > ?1 AND f.embedding_model = ?2 AND f.embedding_dim = ?3 AND {cond}
         ORDER BY f.seq LIMIT ?4"
    );
    let dim = query.len();
    let mut best = TopK::new(k);
    let mut after = 0i64;
    // Each vector is read from the row's own bytes into this one buffer: the whole corpus
    // passes through here on every search, so no copy or allocation a fact.
    let mut vector: Vec<f32> = Vec::with_capacity(dim);
    loop {
        let mut params: Vec<&dyn ToValue> = vec![&after, &model, &dim, &VECTOR_PAGE];
        params.extend(args.iter().map(|a| a as &dyn ToValue));
        let mut read = 0usize;
        let mut last = after;
        tx.query_each(&sql, &params, &mut |r| {
            read += 1;
            last = r.get(0)?;
            if let Value::Blob(blob) = r.value(1)?
                && blob.len() == dim * 4
                && read_vector_into(blob, &mut vector)
            {
                best.offer(last, dot(query, &vector));
            }
            Ok(())
        })?;
        if read < VECTOR_PAGE {
            return Ok(best.into_sorted());
        }
        after = last;
    }
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

/// bm25 scores (positive, higher is better) as relevance in 0..1.
fn relevance(ranked: Vec<(Fact, f64)>) -> Vec<(Fact, f64)> {
    ranked
        .into_iter()
        .map(|(fact, score)| (fact, score / (1.0 + score)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_words_strip_every_piece_of_fts_syntax() {
        assert_eq!(
            query_words("\"deploy\" AND (prod* OR NEAR(x y)) -- ' ; DROP TABLE"),
            [
                "deploy", "and", "prod", "or", "near", "x", "y", "drop", "table"
            ]
        );
        assert_eq!(
            sqlite_fts::fts_query(&query_words("a-b a")),
            "\"a\" OR \"b\""
        );
        assert!(query_words("?!*\"").is_empty());
        let words = query_words("where is the deploy runbook");
        assert_eq!(fts_words(&words), ["deploy", "runbook"]);
        let words = query_words("what is it");
        assert_eq!(fts_words(&words), ["what", "is", "it"]);
    }

    fn key(team: Option<&str>) -> ScopeKey {
        ScopeKey {
            team_id: team.map(str::to_owned),
            agent_id: None,
            tenant_id: None,
        }
    }

    #[test]
    fn dot_matches_the_plain_sum() {
        let a: Vec<f32> = (0..389)
            .map(|i| ((i * 7) % 13) as f32 / 13.0 - 0.4)
            .collect();
        let b: Vec<f32> = (0..389)
            .map(|i| ((i * 5) % 11) as f32 / 11.0 - 0.5)
            .collect();
        let plain: f32 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
        assert!(
            (dot(&a, &b) - plain).abs() < 1e-4,
            "{} vs {plain}",
            dot(&a, &b)
        );
    }

    #[test]
    fn top_k_matches_a_full_sort_within_scope() {
        let mut cache = VectorCache::default();
        cache.reset("m", 3);
        let teams = [None, Some("alpha"), Some("beta")];
        let mut expected = Vec::new();
        for seq in 1..=60i64 {
            let team = teams[seq as usize % 3];
            // Scores repeat, so ties must break by seq (newest first).
            let v = vec![(seq % 7) as f32 / 7.0 - 0.2, 0.5, 0.0];
            let score = v[0] * 1.0 + v[1] * 0.1;
            cache.set(seq, key(team), Some(v));
            if team != Some("beta") && score > 0.0 && seq % 10 != 0 {
                expected.push((seq, score));
            }
        }
        for seq in (10..=60).step_by(10) {
            cache.set(seq, key(None), None);
        }
        assert_eq!(cache.live, 54);
        expected.sort_by(|a, b| b.1.total_cmp(&a.1).then(b.0.cmp(&a.0)));
        expected.truncate(7);
        let scope = ScopeFilter {
            team: super::super::TeamFilter::TeamOrGlobal("alpha".into()),
            ..ScopeFilter::default()
        };
        let got = cache.top_k(&[1.0, 0.1, 0.0], &scope, 7);
        let got_seqs: Vec<i64> = got.iter().map(|(s, _)| *s).collect();
        let want_seqs: Vec<i64> = expected.iter().map(|(s, _)| *s).collect();
        assert_eq!(got_seqs, want_seqs);
        cache.set(13, key(Some("alpha")), Some(vec![0.0, 0.0, 1.0]));
        assert!(
            cache
                .top_k(&[0.0, 0.0, 1.0], &scope, 3)
                .iter()
                .map(|(s, _)| *s)
                .eq([13]),
            "an updated row is rescored in place"
        );
    }

    #[test]
    fn modes_parse_and_print() {
        for m in [SearchMode::Fts, SearchMode::Vector, SearchMode::Hybrid] {
            assert_eq!(m.as_str().parse::<SearchMode>().ok(), Some(m));
        }
        assert!("semantic".parse::<SearchMode>().is_err());
    }
}
