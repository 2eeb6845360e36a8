//! Search: full text (bm25), vector (cosine over every fact in scope embedded by the
//! current model at the current dimension) and hybrid (reciprocal-rank fusion of both),
//! written once; how each ranking runs is the engine's ([`crate::engine::MemoryEngine`]).

use std::collections::HashMap;
use std::fmt;
use std::str::FromStr;

use serde::Serialize;

use crate::vectors::{Vectors, scan_vectors};
use crate::{
    FACT_COLUMNS, Fact, MAX_SEARCH_LIMIT, Memory, Result, SEQ_IN_LIST, ScopeFilter, check_len,
    check_limit, fact_from_row, params_with,
};
use clawboo_store::StoreError;

/// Longest accepted query, in characters.
pub const MAX_QUERY_CHARS: usize = 2_000;
/// Most query words used (the rest are ignored).
const MAX_QUERY_WORDS: usize = 64;
/// Candidates each list contributes to a hybrid fusion (at least the limit).
const FUSION_CANDIDATES: usize = 50;
/// The reciprocal-rank-fusion constant (the usual 60).
const RRF_K: f64 = 60.0;
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
        if self.engine.text_ranking_leaves_out_retired() {
            return self.fts_ranked(words, scope, k);
        }
        let retired = self.retired(scope)?;
        Ok(retired.live_facts(self.fts_ranked(words, scope, retired.widen(k))?, k))
    }

    /// The best `k` full-text matches in scope with a 0..1 score (from bm25, where a
    /// title match weighs double), as the engine ranks them
    /// ([`crate::engine::MemoryEngine::rank_text`]).
    fn fts_ranked(
        &self,
        words: &[String],
        scope: &ScopeFilter,
        k: usize,
    ) -> Result<Vec<(Fact, f64)>> {
        if words.is_empty() {
            return Ok(Vec::new());
        }
        self.engine.rank_text(self, &fts_words(words), scope, k)
    }

    /// The vectors to rank for `model` at the query's dimension, made ready by the engine.
    fn vectors(&self, query: &[f32], model: &str, scope: &ScopeFilter) -> Result<Vectors<'_>> {
        self.engine.vectors(self, query, model, scope)
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
            Vectors::Database => self
                .engine
                .nearest_in_database(self, query, words, model, scope, k),
        }
    }

    /// Embed up to [`LAZY_EMBED_PER_SEARCH`] facts in `scope` lacking a current vector; a
    /// failure is logged and the search ranks what has vectors.
    pub(crate) fn embed_some_missing(&self, scope: &ScopeFilter) {
        if let Err(e) = self.reindex_scope(scope, 64, Some(LAZY_EMBED_PER_SEARCH)) {
            tracing::warn!(error = %e, "lazy re-embedding failed; searching what has vectors");
        }
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
        assert!(query_words("?!*\"").is_empty());
        let words = query_words("where is the deploy runbook");
        assert_eq!(fts_words(&words), ["deploy", "runbook"]);
        let words = query_words("what is it");
        assert_eq!(fts_words(&words), ["what", "is", "it"]);
    }

    #[test]
    fn modes_parse_and_print() {
        for m in [SearchMode::Fts, SearchMode::Vector, SearchMode::Hybrid] {
            assert_eq!(m.as_str().parse::<SearchMode>().ok(), Some(m));
        }
        assert!("semantic".parse::<SearchMode>().is_err());
    }
}
