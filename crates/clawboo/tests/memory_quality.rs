//! Search quality through the real binary: paraphrased queries that share no word with the
//! fact they should find. Full text finds none of them; the local sentence model (MiniLM)
//! must find them in vector and hybrid mode. Recall@5 is printed for each local embedder
//! (run with `--nocapture`; the figures are in docs/BENCHMARKS.md).
//!
//! MiniLM comes from `CLAWBOO_MINILM_DIR` (default `~/.clawboo/models/all-MiniLM-L6-v2`,
//! filled by `scripts/install-minilm.sh`). Without it the MiniLM part prints why it did not
//! run; with `CLAWBOO_REQUIRE_MINILM=1` (CI) a missing model fails the test.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::PathBuf;

use common::{StdioClient, TestDb};
use serde_json::json;

const BIN: &str = env!("CARGO_BIN_EXE_clawboo-mcp-memory");

/// (title, content, a paraphrased query sharing no word with title or content).
const CORPUS: &[(&str, &str, &str)] = &[
    (
        "Database backups",
        "Production Postgres is dumped to S3 every night at 2am.",
        "when are snapshots of prod data taken",
    ),
    (
        "Release pipeline",
        "Releases ship through GitHub Actions after two approvals.",
        "how do we deploy a new version",
    ),
    (
        "Frontend stack",
        "The web UI is built with React and TypeScript.",
        "which javascript library renders our pages",
    ),
    (
        "Review policy",
        "Every pull request needs one approving review before merge.",
        "can I land changes without someone checking them",
    ),
    (
        "Office dog",
        "A golden retriever named Biscuit visits the office on Fridays.",
        "canine companion at workplace weekly",
    ),
    (
        "On-call rotation",
        "The on-call engineer is paged by PagerDuty when error rates spike.",
        "who gets woken up if something breaks at night",
    ),
    (
        "Coffee machine",
        "The espresso maker on floor three is broken; use the kitchen kettle.",
        "where can I get a hot drink",
    ),
    (
        "Password manager",
        "Team credentials are stored in 1Password shared vaults.",
        "where do we keep logins and secrets",
    ),
    (
        "Time zones",
        "Most engineers work from Berlin, so standups are at 10:00 CET.",
        "what hour is the daily meeting in Europe",
    ),
    (
        "Cloud provider",
        "All services run on AWS in the eu-west-1 region.",
        "which hosting vendor do we use for infrastructure",
    ),
    (
        "Logging",
        "Application logs are shipped to Grafana Loki and kept for 30 days.",
        "where can I read server output history",
    ),
    (
        "Testing rule",
        "Unit tests must pass in CI before anything is merged.",
        "automated checks required prior to integration",
    ),
    (
        "Customer support",
        "Support tickets arrive through Zendesk and are triaged each morning.",
        "handling user complaints",
    ),
    (
        "Holiday policy",
        "Employees get 28 days of paid vacation per year.",
        "how much annual leave do staff receive",
    ),
    (
        "Laptop setup",
        "New hires receive a MacBook Pro configured with Homebrew.",
        "which computer do recent joiners obtain",
    ),
    (
        "API rate limit",
        "The public API allows 100 requests per minute per key.",
        "how many calls can a client make each second",
    ),
    (
        "Design files",
        "Mockups live in Figma under the Product workspace.",
        "where are UI drawings kept",
    ),
    (
        "Lunch",
        "Pizza is delivered every Wednesday at noon.",
        "free food midweek",
    ),
];

/// Unrelated facts that compete for the top five.
const DISTRACTORS: &[(&str, &str)] = &[
    (
        "Parking",
        "Visitor parking is in the underground garage, level minus two.",
    ),
    (
        "Printer",
        "The printer on the second floor needs a badge tap to release jobs.",
    ),
    (
        "Quarterly goals",
        "This quarter we focus on onboarding speed and churn.",
    ),
    (
        "Style guide",
        "Use sentence case for headings and avoid exclamation marks.",
    ),
    (
        "Git branches",
        "Feature branches are named after the ticket number.",
    ),
    (
        "Monitoring dashboards",
        "Latency dashboards are pinned in the team channel.",
    ),
    (
        "Invoices",
        "Finance sends invoices on the first business day of the month.",
    ),
    (
        "Security training",
        "Phishing training is mandatory once a year.",
    ),
    (
        "Bike storage",
        "Bicycles can be locked in the courtyard racks.",
    ),
    (
        "Mobile app",
        "The iOS app is written in Swift and released every two weeks.",
    ),
    (
        "Feature flags",
        "LaunchDarkly controls gradual rollouts of risky changes.",
    ),
    (
        "Meeting rooms",
        "Book rooms through the calendar; the big one seats twelve.",
    ),
];

struct Recall {
    fts: f64,
    vector: f64,
    hybrid: f64,
    fts_found_target: usize,
}

/// Save the corpus with `embeddings` and measure recall@5 per mode.
fn measure(embeddings: &str, env: &[(&str, &str)]) -> Recall {
    let db = TestDb::new();
    let mut all_env = vec![("CLAWBOO_EMBEDDINGS", embeddings)];
    all_env.extend_from_slice(env);
    let mut c = StdioClient::spawn_with_env(BIN, &db, &[], &all_env);
    c.initialize();
    let mut ids = Vec::new();
    for (title, content, _) in CORPUS {
        let saved = c.call_ok("memory_save", json!({"title": title, "content": content}));
        ids.push(saved["fact"]["id"].as_str().unwrap().to_owned());
    }
    for (title, content) in DISTRACTORS {
        c.call_ok("memory_save", json!({"title": title, "content": content}));
    }
    let mut found = [0usize; 3];
    let mut fts_found_target = 0;
    for (i, (_, _, query)) in CORPUS.iter().enumerate() {
        for (m, mode) in ["fts", "vector", "hybrid"].iter().enumerate() {
            let out = c.call_ok(
                "memory_search",
                json!({"query": query, "mode": mode, "limit": 5}),
            );
            assert_eq!(out["mode"], *mode, "{embeddings} {mode} fell back");
            let hit = out["results"]
                .as_array()
                .unwrap()
                .iter()
                .any(|r| r["fact"]["id"] == ids[i]);
            if hit {
                found[m] += 1;
                if *mode == "fts" {
                    fts_found_target += 1;
                }
            }
        }
    }
    let n = CORPUS.len() as f64;
    let recall = Recall {
        fts: found[0] as f64 / n,
        vector: found[1] as f64 / n,
        hybrid: found[2] as f64 / n,
        fts_found_target,
    };
    println!(
        "recall@5 with {embeddings} ({} paraphrased queries, {} facts): fts {:.2}, vector {:.2}, hybrid {:.2}",
        CORPUS.len(),
        CORPUS.len() + DISTRACTORS.len(),
        recall.fts,
        recall.vector,
        recall.hybrid
    );
    recall
}

fn minilm_dir() -> PathBuf {
    match std::env::var("CLAWBOO_MINILM_DIR") {
        Ok(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => PathBuf::from(std::env::var("HOME").unwrap_or_default())
            .join(".clawboo/models/all-MiniLM-L6-v2"),
    }
}

#[test]
fn paraphrased_queries_share_no_word_so_full_text_finds_nothing() {
    let recall = measure("builtin", &[]);
    assert_eq!(
        recall.fts_found_target, 0,
        "the corpus must share no words with its queries"
    );
    assert_eq!(recall.fts, 0.0);
    // The built-in embedder is lexical: it is reported, not held to a bar.
    assert!(recall.vector <= 1.0 && recall.hybrid <= 1.0);
}

#[test]
fn minilm_finds_paraphrases_in_vector_and_hybrid_mode() {
    let dir = minilm_dir();
    let present = ["model.safetensors", "tokenizer.json", "config.json"]
        .iter()
        .all(|f| dir.join(f).is_file());
    if !present {
        assert!(
            std::env::var("CLAWBOO_REQUIRE_MINILM").as_deref() != Ok("1"),
            "CLAWBOO_REQUIRE_MINILM=1 but MiniLM is missing from {}; run scripts/install-minilm.sh",
            dir.display()
        );
        eprintln!(
            "skipping: MiniLM missing from {} (run scripts/install-minilm.sh)",
            dir.display()
        );
        return;
    }
    let dir_text = dir.display().to_string();
    let recall = measure("minilm", &[("CLAWBOO_MINILM_DIR", &dir_text)]);
    assert_eq!(recall.fts, 0.0);
    assert!(
        recall.vector >= 0.8,
        "MiniLM vector recall@5 {}",
        recall.vector
    );
    assert!(
        recall.hybrid >= 0.8,
        "MiniLM hybrid recall@5 {}",
        recall.hybrid
    );
}
