//! Memory benchmark: `memory_save` rate and `memory_search` latency (p50/p99) for fts,
//! vector and hybrid on 10k and 100k facts, through the memory API the MCP tools call.
//!
//! cargo bench -p clawboo-memory --bench memory            # 10k and 100k
//! cargo bench -p clawboo-memory --bench memory -- 10000   # chosen sizes
//!
//! Facts are synthetic sentences over a fixed vocabulary (seeded, so runs compare); vectors
//! come from the built-in embedder at 384 dimensions, the size of MiniLM's, so the vector
//! scan costs what it would with MiniLM (MiniLM adds its own query-embedding time).
#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use clawboo_embed::HashedEmbedder;
use clawboo_memory::{EXTENSION, Memory, NewFact, ScopeFilter, SearchMode, TeamFilter};
use clawboo_store::{Store, StoreConfig};

const QUERIES: usize = 200;
const DIM: usize = 384;

/// A tiny deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// 2 000 pronounceable pseudo-words.
fn vocabulary() -> Vec<String> {
    let consonants = [
        "b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z",
    ];
    let vowels = ["a", "e", "i", "o", "u"];
    let mut rng = Rng(7);
    (0..2000)
        .map(|_| {
            let syllables = 2 + rng.below(2);
            (0..syllables)
                .map(|_| {
                    format!(
                        "{}{}",
                        consonants[rng.below(consonants.len())],
                        vowels[rng.below(vowels.len())]
                    )
                })
                .collect()
        })
        .collect()
}

fn sentence(rng: &mut Rng, vocab: &[String], words: usize) -> String {
    (0..words)
        .map(|_| {
            // Skewed towards the front of the vocabulary, as real word use is.
            let i = rng.below(vocab.len()).min(rng.below(vocab.len()));
            vocab[i].as_str()
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

fn run(size: usize) {
    let dir = tempfile::tempdir().unwrap();
    let config = StoreConfig::default().with_extension(EXTENSION);
    let store = Arc::new(Store::open_with(&dir.path().join("bench.db"), config).unwrap());
    let memory = Memory::new(store, Some(Arc::new(HashedEmbedder::new(DIM))));
    let vocab = vocabulary();
    let mut rng = Rng(42);
    let teams = ["alpha", "beta", "gamma", "delta"];

    let start = Instant::now();
    for i in 0..size {
        let title = sentence(&mut rng, &vocab, 4);
        let content = sentence(&mut rng, &vocab, 30);
        memory
            .save_fact(NewFact {
                title,
                content,
                tags: vec![format!("t{}", i % 50)],
                team_id: (i % 5 != 0).then(|| teams[i % teams.len()].to_string()),
                ..NewFact::default()
            })
            .unwrap();
    }
    let elapsed = start.elapsed();
    println!(
        "{size} facts: memory_save {:.0} facts/s ({} total, one transaction per save, embedding included)",
        size as f64 / elapsed.as_secs_f64(),
        ms(elapsed)
    );

    let scope = ScopeFilter {
        team: TeamFilter::TeamOrGlobal("alpha".into()),
        ..ScopeFilter::default()
    };
    let queries: Vec<String> = (0..QUERIES)
        .map(|_| sentence(&mut rng, &vocab, 3))
        .collect();
    for mode in [SearchMode::Fts, SearchMode::Vector, SearchMode::Hybrid] {
        // The first vector search fills the in-process vector cache from the database.
        let cold = Instant::now();
        memory.search(&queries[0], Some(mode), &scope, 10).unwrap();
        let cold = cold.elapsed();
        let mut times: Vec<Duration> = queries
            .iter()
            .map(|q| {
                let t = Instant::now();
                let out = memory.search(q, Some(mode), &scope, 10).unwrap();
                assert_eq!(out.mode, mode);
                t.elapsed()
            })
            .collect();
        times.sort();
        println!(
            "{size} facts: memory_search {:<6} p50 {}  p99 {}  (first call {}; {QUERIES} queries, limit 10, scope team+global)",
            mode.as_str(),
            ms(percentile(&times, 0.5)),
            ms(percentile(&times, 0.99)),
            ms(cold)
        );
    }
}

fn main() {
    let sizes: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let sizes = if sizes.is_empty() {
        vec![10_000, 100_000]
    } else {
        sizes
    };
    for size in sizes {
        run(size);
    }
}
