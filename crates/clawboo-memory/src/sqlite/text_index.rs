//! Full-text ranking in memory: FTS5's bm25, computed over an in-process index of the
//! terms FTS5's own tokenizer made of every fact.
//!
//! Why not let SQLite rank: bm25 in FTS5 reads a `_docsize` row and builds an instance
//! array for every match, so a common query word, which matches a good share of the
//! corpus, made ranking most of a search's time (docs/BENCHMARKS.md). Here a match costs a
//! few float operations.
//!
//! The terms are exact: the index is first filled from `memory_facts_fts` itself, through
//! an `fts5vocab` table; facts saved later, and query words, are tokenized by memory's
//! port of FTS5's tokenizer (`terms`, held to FTS5's own output by its tests). The
//! score is bm25 as FTS5 computes it: the same formula and constants, the same order of
//! additions, idf over the whole corpus, ties in SQLite's order. Facts are append-only
//! (their text is never changed and they are never deleted), so the index catches up by
//! `seq`, from any process's writes. A search the index cannot answer exactly (not filled
//! yet, or a query word that is not one term) ranks in SQLite.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering as AtomicOrdering;

use parking_lot::RwLock;

use super::fts5::{Fts5Index, read_fts5_index};
use crate::Result;
use crate::bm25;
use crate::terms::{self, Posting, Postings};
use crate::{Memory, ScopeFilter, ScopeKey};
use clawboo_store::ChangeToken;
use clawboo_store::Store;

/// Facts a search adds to the index itself at most, a bounded delay on that search. More
/// are left to a thread of their own while searches rank in SQLite, so the first searches
/// of a process over a big corpus stay as quick as they were: every fact is tokenized
/// through FTS5, and a whole corpus takes seconds (docs/BENCHMARKS.md).
const CATCH_UP_IN_SEARCH: usize = 100;
/// Facts that thread tokenizes at a time (it holds the index only to add them).
const TOKENIZE_BATCH: usize = 500;

/// The terms of every fact, kept in step with the database by `seq`.
#[derive(Debug, Default)]
pub(super) struct TextIndex {
    /// Each indexed fact's `seq`, ascending.
    seqs: Vec<i64>,
    /// Each fact's length in tokens, all columns.
    lengths: Vec<u32>,
    /// Each fact's scope, an index into `scope_keys`.
    scopes: Vec<u32>,
    scope_keys: Vec<ScopeKey>,
    scope_ids: HashMap<ScopeKey, u32>,
    postings: Postings,
    total_tokens: u64,
    /// The store's change token when the index last held every fact.
    complete_at: Option<ChangeToken>,
}

/// A fact as read for indexing: seq, the three text columns, the scope.
type FactText = (i64, [String; 3], ScopeKey);

/// Facts turned into terms, ready for [`TextIndex::add`].
struct Tokenized {
    /// Each fact's seq and scope, ascending seq.
    facts: Vec<(i64, ScopeKey)>,
    /// Postings by term, facts numbered from 0 in `facts`' order.
    terms: Postings,
    /// Each fact's length in tokens.
    lengths: Vec<u32>,
}

/// The facts after `seq` (at most `limit`), tokenized; `None` when there are none.
fn tokenize_after(store: &Store, seq: i64, limit: usize) -> Result<Option<Tokenized>> {
    let facts = read_facts_after(store, seq, limit)?;
    if facts.is_empty() {
        return Ok(None);
    }
    let (terms, lengths) = terms::postings(facts.iter().map(|(_, text, _)| text));
    Ok(Some(Tokenized {
        facts: facts.into_iter().map(|(seq, _, key)| (seq, key)).collect(),
        terms,
        lengths,
    }))
}

/// The terms of a query's words, one each; `None` when a word is not exactly one term
/// (FTS5 would match it as a phrase of several, which this index cannot).
fn query_terms(words: &[String]) -> Option<Vec<String>> {
    words
        .iter()
        .map(|word| {
            <[String; 1]>::try_from(terms::phrase(word))
                .ok()
                .map(|[term]| term)
        })
        .collect()
}

impl TextIndex {
    /// The last fact indexed (0: none).
    fn last_seq(&self) -> i64 {
        self.seqs.last().copied().unwrap_or(0)
    }

    /// Add a batch tokenized after [`TextIndex::last_seq`].
    fn add(&mut self, batch: Tokenized) {
        let base = self.seqs.len() as u32;
        for (term, postings) in batch.terms {
            self.postings
                .entry(term)
                .or_default()
                .extend(postings.into_iter().map(|p| Posting {
                    doc: base + p.doc,
                    ..p
                }));
        }
        self.total_tokens += batch.lengths.iter().map(|&l| u64::from(l)).sum::<u64>();
        self.lengths.extend(batch.lengths);
        for (seq, key) in batch.facts {
            self.push_fact(seq, key);
        }
    }

    /// Note a fact (after the last) and its scope; its length and terms are added apart.
    fn push_fact(&mut self, seq: i64, key: ScopeKey) {
        let next = self.scope_keys.len() as u32;
        let id = *self.scope_ids.entry(key.clone()).or_insert(next);
        if id == next {
            self.scope_keys.push(key);
        }
        self.seqs.push(seq);
        self.scopes.push(id);
    }

    /// The best `k` facts in `scope` matching any of `terms` (one per query phrase), by
    /// bm25 (positive, higher is better), best first; ties: oldest fact first.
    fn rank(&self, terms: &[String], scope: &ScopeFilter, k: usize) -> Vec<(i64, f64)> {
        let rows = self.seqs.len() as f64;
        if k == 0 || self.seqs.is_empty() {
            return Vec::new();
        }
        let average_length = self.total_tokens as f64 / rows;
        let admitted: Vec<bool> = self
            .scope_keys
            .iter()
            .map(|key| {
                scope.admits(
                    key.team_id.as_deref(),
                    key.agent_id.as_deref(),
                    key.tenant_id.as_deref(),
                )
            })
            .collect();
        // (fact, one phrase's share), phrase by phrase; a phrase a fact lacks adds exactly
        // zero there, so skipping it sums the same.
        let mut shares: Vec<(i64, f64)> = Vec::new();
        for term in terms {
            let Some(postings) = self.postings.get(term) else {
                continue;
            };
            let idf = bm25::idf(rows, postings.len() as f64);
            shares.reserve(postings.len());
            for posting in postings {
                let doc = posting.doc as usize;
                if !admitted[self.scopes[doc] as usize] {
                    continue;
                }
                let share = bm25::share(
                    idf,
                    f64::from(posting.freq),
                    f64::from(self.lengths[doc]),
                    average_length,
                );
                // Facts are numbered in `seq` order, so ordering by `seq` orders by fact.
                shares.push((self.seqs[doc], share));
            }
        }
        bm25::best(shares, k)
    }
}

/// Up to `limit` facts after `seq`, oldest first.
fn read_facts_after(store: &Store, seq: i64, limit: usize) -> Result<Vec<FactText>> {
    store.read(|tx| {
        tx.query_map(
            "SELECT seq, title, content, tags, team_id, agent_id, tenant_id
             FROM memory_facts WHERE seq > ?1 ORDER BY seq LIMIT ?2",
            &[&seq, &limit],
            |r| {
                Ok((
                    r.get(0)?,
                    [r.get(1)?, r.get(2)?, r.get(3)?],
                    ScopeKey {
                        team_id: r.get(4)?,
                        agent_id: r.get(5)?,
                        tenant_id: r.get(6)?,
                    },
                ))
            },
        )
    })
}

/// Every fact's terms at once, from FTS5's own index, and the change token read before.
fn index_everything(store: &Store) -> Result<(TextIndex, ChangeToken)> {
    let token = store.change_token()?;
    let Fts5Index {
        facts,
        postings,
        lengths,
    } = read_fts5_index(store)?;
    let mut index = TextIndex::default();
    for (seq, key) in facts {
        index.push_fact(seq, key);
    }
    index.postings = postings;
    index.total_tokens = lengths.iter().map(|&l| u64::from(l)).sum();
    index.lengths = lengths;
    // Grown by doubling, the lists would keep their unused capacity for the index's life.
    for postings in index.postings.values_mut() {
        postings.shrink_to_fit();
    }
    Ok((index, token))
}

/// Bring `text` up to every fact, batch by batch, tokenizing with no lock held.
fn build_text_index(store: &Store, text: &RwLock<TextIndex>) -> Result<()> {
    if text.read().seqs.is_empty() {
        let (whole, token) = index_everything(store)?;
        let mut index = text.write();
        if index.seqs.is_empty() {
            *index = TextIndex {
                complete_at: Some(token),
                ..whole
            };
        }
    }
    // Then what was committed since, if anything.
    loop {
        let token = store.change_token()?;
        let after = text.read().last_seq();
        let batch = tokenize_after(store, after, TOKENIZE_BATCH)?;
        let mut index = text.write();
        // A search may have added facts meanwhile: then this batch is dropped and the
        // next one starts where the index ends.
        if index.last_seq() != after {
            continue;
        }
        match batch {
            Some(batch) => index.add(batch),
            None => {
                index.complete_at = Some(token);
                return Ok(());
            }
        }
    }
}

impl Memory {
    /// Start the thread that brings the text index up to every fact, unless it runs.
    fn spawn_text_builder(&self) {
        if self.sqlite.text_builder.swap(true, AtomicOrdering::AcqRel) {
            return;
        }
        let store = Arc::clone(&self.store);
        let text = Arc::clone(&self.sqlite.text);
        let running = Arc::clone(&self.sqlite.text_builder);
        let spawned = std::thread::Builder::new()
            .name("clawboo-text-index".into())
            .spawn(move || {
                if let Err(e) = build_text_index(&store, &text) {
                    tracing::warn!(error = %e, "building the in-memory text index failed; searches rank in SQLite");
                }
                running.store(false, AtomicOrdering::Release);
            });
        if let Err(e) = spawned {
            tracing::warn!(error = %e, "could not start the text index thread");
            self.sqlite
                .text_builder
                .store(false, AtomicOrdering::Release);
        }
    }

    /// The best `k` full-text matches of `words` (one FTS5 phrase each) in `scope` by bm25,
    /// from the in-memory index; `None` when it cannot answer exactly (see the module
    /// docs), and the caller ranks in SQLite.
    pub(crate) fn text_ranked(
        &self,
        words: &[String],
        scope: &ScopeFilter,
        k: usize,
    ) -> Result<Option<Vec<(i64, f64)>>> {
        let token = self.store.change_token()?;
        {
            // Searches rank side by side; one takes the index to itself only to add facts
            // or tokenize a new word.
            let index = self.sqlite.text.read();
            if index.complete_at == Some(token) {
                return Ok(query_terms(words).map(|terms| index.rank(&terms, scope, k)));
            }
        }
        if self.sqlite.text_builder.load(AtomicOrdering::Acquire) {
            return Ok(None);
        }
        let mut index = self.sqlite.text.write();
        if index.complete_at != Some(token) {
            index.complete_at = None;
            let after = index.last_seq();
            // An empty index is filled whole, by the thread.
            if after == 0 && !read_facts_after(&self.store, 0, 1)?.is_empty() {
                drop(index);
                self.spawn_text_builder();
                return Ok(None);
            }
            if let Some(batch) = tokenize_after(&self.store, after, CATCH_UP_IN_SEARCH)? {
                let more = batch.facts.len() == CATCH_UP_IN_SEARCH;
                index.add(batch);
                if more {
                    drop(index);
                    self.spawn_text_builder();
                    return Ok(None);
                }
            }
            // Every fact committed by the time of `token` has been read.
            index.complete_at = Some(token);
        }
        Ok(query_terms(words).map(|terms| index.rank(&terms, scope, k)))
    }
}
