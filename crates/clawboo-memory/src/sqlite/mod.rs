//! Memory on SQLite: the full-text index is FTS5's, kept by hooks on the store's
//! transactions (`fts5`), and ranked in this process from an index of every fact's terms
//! (`text_index`), or by FTS5 while that index catches up; every fact vector is cached in
//! this process and scanned exactly, kept right when other processes write the same file.

mod fts5;
mod text_index;

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, MutexGuard};

use parking_lot::RwLock;

pub(crate) use fts5::register_sqlite_hooks;
use text_index::TextIndex;

use crate::bm25::relevance;
use crate::engine::{MemoryEngine, VectorSearchPath};
use crate::terms::DocTerms;
use crate::vectors::{VectorCache, Vectors, scan_vectors};
use crate::{Fact, Memory, Result, ScopeFilter, ScopeKey, blob_to_vector};
use clawboo_store::Store;
use clawboo_store::db::{Findings, Tx};
use clawboo_store::reads::Query;

/// What a [`Memory`] on SQLite keeps in its process.
#[derive(Default)]
pub(crate) struct State {
    /// Every fact vector, kept in step with the database.
    vectors: Mutex<VectorCache>,
    /// The terms of every fact, for ranking in memory.
    text: Arc<RwLock<TextIndex>>,
    /// Whether a thread is bringing `text` up to every fact.
    text_builder: Arc<AtomicBool>,
}

/// Memory's side of the SQLite engine.
pub(crate) struct Sqlite;

impl MemoryEngine for Sqlite {
    fn opened(&self, _store: &Store) -> Result<VectorSearchPath> {
        Ok(VectorSearchPath::InProcess)
    }

    /// FTS5's segments merged into one, what the store does once idle after writing facts.
    fn compact_text_index(&self, store: &Store) -> Result<()> {
        store.run_idle_work()
    }

    fn terms_before_write(&self, _: &str, _: &str, _: &str) -> Option<DocTerms> {
        None
    }

    /// None: the store's pre-commit hook ([`register_sqlite_hooks`]) indexes every fact
    /// a transaction inserted, just before it commits.
    fn text_index(&self, _: i64, _: &Fact, _: &str, _: Option<&DocTerms>) -> Result<Option<Query>> {
        Ok(None)
    }

    /// Nothing: [`MemoryEngine::text_index`] never asks (FTS5 merges its segments itself).
    fn pack(&self, _: &dyn Tx) -> Result<()> {
        Ok(())
    }

    /// Nothing either, for the same reason: facts copied in were indexed as they landed.
    fn rebuild_text_index(&self, _: &dyn Tx) -> Result<u64> {
        Ok(0)
    }

    fn check_text_index(&self, store: &Store, found: &mut Findings) -> Result<()> {
        fts5::check(store, found)
    }

    fn text_ranking_leaves_out_retired(&self) -> bool {
        false
    }

    /// Ranked in memory when the text index can answer, else by FTS5.
    fn rank_text(
        &self,
        memory: &Memory,
        words: &[String],
        scope: &ScopeFilter,
        k: usize,
    ) -> Result<Vec<(Fact, f64)>> {
        let ranked = match memory.text_ranked(words, scope, k) {
            Ok(Some(ranked)) => ranked,
            Ok(None) => return memory.fts_ranked_in_sqlite(words, scope, k),
            Err(e) => {
                tracing::warn!(error = %e, "the in-memory text index failed; ranking in SQLite");
                return memory.fts_ranked_in_sqlite(words, scope, k);
            }
        };
        let mut facts = memory.facts_by_seq(ranked.iter().map(|(s, _)| *s))?;
        // A fact deleted behind the store's back is skipped (facts are append-only).
        Ok(relevance(
            ranked
                .into_iter()
                .filter_map(|(seq, score)| facts.remove(&seq).map(|f| (f, score)))
                .collect(),
        ))
    }

    /// The cache, brought in step with the database first.
    fn vectors<'m>(
        &self,
        memory: &'m Memory,
        query: &[f32],
        model: &str,
        _scope: &ScopeFilter,
    ) -> Result<Vectors<'m>> {
        Ok(Vectors::Cache(memory.fresh_vectors(model, query.len())?))
    }

    /// Every vector in scope, a page at a time (searches use the cache instead).
    fn nearest_in_database(
        &self,
        memory: &Memory,
        query: &[f32],
        _words: &[String],
        model: &str,
        scope: &ScopeFilter,
        k: usize,
    ) -> Result<Vec<(i64, f32)>> {
        memory
            .store
            .snapshot(|tx| scan_vectors(tx, query, model, scope, k))
    }

    fn has_vector_index(&self, _: &Memory, _: usize) -> Result<bool> {
        Ok(false)
    }
}

impl Memory {
    /// The vector cache for `model` at `dim`, brought in step with the database first.
    /// Facts lacking such a vector are embedded (up to a bound a search, [`Memory::embed_some_missing`]).
    fn fresh_vectors(&self, model: &str, dim: usize) -> Result<MutexGuard<'_, VectorCache>> {
        let mut cache = self
            .sqlite
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

    /// The best `k` full-text matches by FTS5's own bm25, in SQLite; `words` as the query ORs them.
    pub(crate) fn fts_ranked_in_sqlite(
        &self,
        words: &[String],
        scope: &ScopeFilter,
        k: usize,
    ) -> Result<Vec<(Fact, f64)>> {
        let ranked = self
            .store
            .read(|tx| fts5::ranked_by_fts5(tx, words, scope, k))?;
        Ok(relevance(ranked))
    }
}
