//! Vectors ranked exactly: the cache of every fact vector a process may keep, the scan
//! of the vectors in the database a page at a time, and the top-k both keep.

use std::cmp::{Ordering, Reverse};
use std::collections::{BinaryHeap, HashMap};
use std::sync::MutexGuard;

use crate::{Result, ScopeFilter, ScopeKey, read_vector_into};
use clawboo_store::ChangeToken;
use clawboo_store::db::{ToValue, Tx, Value};

/// Facts a vector scan in the database reads per statement, so neither the driver nor the
/// process ever holds more than a page of vectors.
const VECTOR_PAGE: usize = 512;

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
pub(crate) struct VectorCache {
    pub(crate) model: String,
    pub(crate) dim: usize,
    /// The highest `embed_seq` read.
    pub(crate) watermark: i64,
    blocks: Vec<Block>,
    block_of: HashMap<ScopeKey, usize>,
    /// Where each cached fact's row is: (block, row).
    by_seq: HashMap<i64, (usize, usize)>,
    /// Rows whose vector is current.
    pub(crate) live: usize,
    /// The store's change token when the cache was last found complete (every fact had
    /// a current vector); while it holds, a search needs no database round trip.
    pub(crate) complete_at: Option<ChangeToken>,
}

impl VectorCache {
    pub(crate) fn reset(&mut self, model: &str, dim: usize) {
        *self = VectorCache {
            model: model.to_string(),
            dim,
            ..VectorCache::default()
        };
    }

    /// Put `vector` (empty: none current) in the row of fact `seq`.
    pub(crate) fn set(&mut self, seq: i64, key: ScopeKey, vector: Option<Vec<f32>>) {
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
    pub(crate) fn top_k(&self, query: &[f32], scope: &ScopeFilter, k: usize) -> Vec<(i64, f32)> {
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

/// Where a vector ranking reads the vectors ([`crate::engine::MemoryEngine::vectors`]).
pub(crate) enum Vectors<'m> {
    /// This process's cache of every vector, up to date.
    Cache(MutexGuard<'m, VectorCache>),
    /// The database ([`crate::engine::MemoryEngine::nearest_in_database`]).
    Database,
}

/// The best `k` facts in scope by similarity to `query` among those embedded by `model`
/// at its dimension, read from the database a page at a time (run it in one snapshot).
pub(crate) fn scan_vectors(
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

#[cfg(test)]
mod tests {
    use super::*;

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
            team: crate::TeamFilter::TeamOrGlobal("alpha".into()),
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
}
