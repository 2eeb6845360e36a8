//! Embedder benchmark: MiniLM load time, single-query latency (what `memory_search` adds in
//! vector and hybrid mode) and batch throughput (what `memory_save` and reindex pay), and
//! the built-in embedder for comparison.
//!
//! cargo bench -p clawboo-embed --bench embed
//!
//! MiniLM is read from $CLAWBOO_MINILM_DIR (default ~/.clawboo/models/all-MiniLM-L6-v2); its
//! part is skipped with a message when the files are absent.
#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use clawboo_embed::select::{EmbedConfig, minilm_files_present};
use clawboo_embed::{Embedder, HashedEmbedder, MiniLmEmbedder};

const QUERIES: usize = 100;
const BATCH_TEXTS: usize = 256;

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

fn texts(n: usize, words: usize) -> Vec<String> {
    let vocab = [
        "deploy",
        "database",
        "backup",
        "nightly",
        "review",
        "merge",
        "release",
        "cache",
        "latency",
        "team",
        "agent",
        "memory",
        "search",
        "vector",
        "kafka",
        "topic",
        "retention",
        "dashboard",
        "alert",
        "rotation",
        "budget",
        "invoice",
        "laptop",
        "office",
        "policy",
    ];
    (0..n)
        .map(|i| {
            (0..words)
                .map(|w| vocab[(i * 7 + w * 13 + i * w) % vocab.len()])
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect()
}

fn measure(name: &str, e: &dyn Embedder) {
    let queries = texts(QUERIES, 6);
    e.embed(&[queries[0].as_str()]).unwrap();
    let mut times: Vec<Duration> = queries
        .iter()
        .map(|q| {
            let t = Instant::now();
            e.embed(&[q.as_str()]).unwrap();
            t.elapsed()
        })
        .collect();
    times.sort();
    let p = |f: f64| times[((times.len() - 1) as f64 * f).round() as usize];
    println!(
        "{name}: one 6-word query p50 {}  p99 {}",
        ms(p(0.5)),
        ms(p(0.99))
    );
    let docs = texts(BATCH_TEXTS, 34);
    let refs: Vec<&str> = docs.iter().map(String::as_str).collect();
    let t = Instant::now();
    e.embed(&refs).unwrap();
    let elapsed = t.elapsed();
    println!(
        "{name}: {BATCH_TEXTS} fact-sized texts (34 words) in {} = {:.0} texts/s",
        ms(elapsed),
        BATCH_TEXTS as f64 / elapsed.as_secs_f64()
    );
}

fn main() {
    measure("builtin (384 dims)", &HashedEmbedder::new(384));
    let dir = EmbedConfig::from_env().unwrap().minilm_dir;
    if !minilm_files_present(&dir) {
        println!(
            "MiniLM skipped: files missing from {} (run scripts/install-minilm.sh)",
            dir.display()
        );
        return;
    }
    let t = Instant::now();
    let minilm = MiniLmEmbedder::load(&dir).unwrap();
    println!("MiniLM: load {}", ms(t.elapsed()));
    measure("MiniLM", &minilm);
}
