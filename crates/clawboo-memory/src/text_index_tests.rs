//! The full-text index's upkeep on SQLite ([`EXTENSION`]'s hooks): the facts of a group
//! commit indexed at its commit and a failed one nowhere, facts left by plain SQL indexed
//! at the next open, and the index merged into one segment on demand and by the idle store
//! on its own, with every search answering as before.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use clawboo_store::testing::{queue, taken};

use super::tests::config;
use super::*;

#[test]
fn facts_of_a_group_are_all_indexed_at_its_commit_and_a_failed_one_nowhere() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("facts.db");
    let store = Arc::new(Store::open_with(&path, config()).unwrap());
    let memory = Memory::new(Arc::clone(&store), None);
    let prepared = |title: &str| {
        memory
            .prepare_fact(NewFact {
                title: title.into(),
                content: format!("{title} runs nightly"),
                ..NewFact::default()
            })
            .unwrap()
    };
    let saved: Vec<_> = ["alpha", "beta", "gamma"]
        .into_iter()
        .map(|title| {
            let fact = prepared(title);
            queue(&store, move |s| fact.insert(s))
        })
        .collect();
    let doomed = prepared("delta");
    let failed = queue(&store, move |s| -> Result<()> {
        s.write(|_| {
            doomed.insert(s)?;
            Err(StoreError::Conflict)
        })
    });
    store.run_queued_writes();
    assert!(saved.iter().all(|slot| taken(slot).unwrap().is_ok()));
    assert!(taken(&failed).unwrap().is_err());

    let titles = |query: &str| -> Vec<String> {
        memory
            .search(query, None, &ScopeFilter::default(), 10)
            .unwrap()
            .hits
            .into_iter()
            .map(|hit| hit.fact.title)
            .collect()
    };
    assert_eq!(titles("nightly").len(), 3);
    assert_eq!(titles("beta"), ["beta"]);
    assert!(titles("delta").is_empty());
    drop(memory);
    drop(store);

    let conn = rusqlite::Connection::open(&path).unwrap();
    let waiting: i64 = conn
        .query_row("SELECT count(*) FROM memory_facts_fts_pending", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(waiting, 0, "nothing waits to be indexed after a commit");
    conn.execute(
        "INSERT INTO memory_facts_fts(memory_facts_fts) VALUES ('integrity-check')",
        [],
    )
    .unwrap();
    // A fact written around the store (plain SQL) waits until the next open indexes it.
    conn.execute(
        "INSERT INTO memory_facts(id, title, content, created_at) VALUES ('f', 'epsilon', 'x', 0)",
        [],
    )
    .unwrap();
    drop(conn);
    let store = Arc::new(Store::open_with(&path, config()).unwrap());
    let memory = Memory::new(store, None);
    let found = memory
        .search("epsilon", None, &ScopeFilter::default(), 10)
        .unwrap();
    assert_eq!(found.hits.len(), 1);
}

/// Rows of the full-text index's segment table: each separately indexed write adds one
/// segment (a row or more); a merge folds them into fewer.
fn index_rows(store: &Store) -> i64 {
    store
        .read(|tx| {
            tx.query_one("SELECT count(*) FROM memory_facts_fts_data", &[], |r| {
                r.get(0)
            })
        })
        .unwrap()
}

fn index_is_sound(store: &Store) {
    store
        .write(|tx| {
            tx.execute(
                "INSERT INTO memory_facts_fts(memory_facts_fts) VALUES ('integrity-check')",
                &[],
            )
        })
        .unwrap();
}

/// Save `n` facts, each in its own commit (so each leaves a segment).
fn save_facts(memory: &Memory, n: usize) {
    for i in 0..n {
        memory
            .save_fact(NewFact {
                title: format!("deploy note {i}"),
                content: format!("the canary stage {i} runs before the fleet rollout"),
                ..NewFact::default()
            })
            .unwrap();
    }
}

fn search(memory: &Memory) -> Vec<(String, String)> {
    memory
        .search(
            "canary rollout",
            Some(SearchMode::Fts),
            &ScopeFilter::default(),
            100,
        )
        .unwrap()
        .hits
        .into_iter()
        .map(|h| (h.fact.id, format!("{:.6}", h.score)))
        .collect()
}

#[test]
fn merging_the_search_index_folds_its_segments_and_keeps_every_answer() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::open_with(&dir.path().join("merge.db"), config()).unwrap());
    let memory = Memory::new(Arc::clone(&store), None);
    save_facts(&memory, 40);
    let before = (index_rows(&store), search(&memory));
    assert_eq!(before.1.len(), 40);

    merge_search_index(&store).unwrap();

    assert!(index_rows(&store) < before.0, "{} rows before", before.0);
    assert_eq!(search(&memory), before.1);
    index_is_sound(&store);
    // Nothing left to merge: a second call returns at once and changes nothing.
    let merged = index_rows(&store);
    merge_search_index(&store).unwrap();
    assert_eq!(index_rows(&store), merged);
}

#[test]
fn an_idle_store_merges_the_search_index_by_itself() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("idle.db");
    let store = Arc::new(Store::open_with(&path, config()).unwrap());
    let memory = Memory::new(Arc::clone(&store), None);
    save_facts(&memory, 40);
    let before = (index_rows(&store), search(&memory));

    // What a full merge leaves, measured on a copy merged on demand.
    let copy = dir.path().join("copy.db");
    store
        .read(|tx| tx.execute("VACUUM INTO ?1", &[&copy.to_string_lossy().into_owned()]))
        .unwrap();
    let merged_copy = Store::open_with(&copy, config()).unwrap();
    merge_search_index(&merged_copy).unwrap();
    let merged = index_rows(&merged_copy);
    assert!(merged < before.0);

    // The store's own thread merges once it has been idle for a round (a second).
    let deadline = Instant::now() + Duration::from_secs(30);
    while index_rows(&store) != merged {
        assert!(
            Instant::now() < deadline,
            "the idle store never merged its index ({} rows, {merged} when merged)",
            index_rows(&store)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(search(&memory), before.1);
    index_is_sound(&store);
}
