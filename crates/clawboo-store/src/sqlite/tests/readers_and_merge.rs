//! Reads beside a write: a read on another thread while a write transaction is open runs
//! on a read-only connection and sees the last commit, never waiting for the write. And
//! the full-text index: merged into one segment on demand and by the idle store on its
//! own, with every search answering as before.

#![allow(clippy::unwrap_used)]

use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use crate::Store;
use crate::board::{CreatePolicy, NewTask, TaskFilter};
use crate::memory::{Memory, NewFact, ScopeFilter, SearchMode};

fn titles(store: &Store) -> Vec<String> {
    let mut titles: Vec<String> = store
        .list_tasks(&TaskFilter::default())
        .unwrap()
        .into_iter()
        .map(|t| t.title)
        .collect();
    titles.sort();
    titles
}

#[test]
fn a_read_runs_beside_an_open_write_and_sees_the_last_commit() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::open(&dir.path().join("readers.db")).unwrap());
    store
        .create_task(NewTask::titled("committed"), CreatePolicy::Uncapped)
        .unwrap();

    let (opened, write_is_open) = mpsc::channel();
    let (finish, may_finish) = mpsc::channel::<()>();
    let writer = {
        let store = Arc::clone(&store);
        std::thread::spawn(move || {
            store
                .write_sqlite(|_| {
                    // Inside the transaction, on this thread: the write's own change shows.
                    let task = store
                        .create_task(NewTask::titled("uncommitted"), CreatePolicy::Uncapped)?;
                    assert_eq!(titles(&store), ["committed", "uncommitted"]);
                    opened.send(task.id).unwrap();
                    may_finish.recv_timeout(Duration::from_secs(30)).unwrap();
                    Ok::<_, crate::StoreError>(())
                })
                .unwrap();
        })
    };
    write_is_open.recv_timeout(Duration::from_secs(30)).unwrap();

    // Another thread reads while the write holds the writer's connection: it must not
    // wait for it (it would wait forever: the write waits for this read to finish), and
    // it sees the committed task only.
    let (read, answered) = mpsc::channel();
    {
        let store = Arc::clone(&store);
        std::thread::spawn(move || read.send(titles(&store)).unwrap());
    }
    let seen = answered
        .recv_timeout(Duration::from_secs(30))
        .expect("a read waited for an open write");
    assert_eq!(seen, ["committed"]);
    let snapshot = {
        let store = Arc::clone(&store);
        std::thread::spawn(move || {
            store.snapshot_sqlite(|c| {
                c.query_row("SELECT count(*) FROM tasks", [], |r| r.get::<_, i64>(0))
                    .map_err(crate::StoreError::from)
            })
        })
        .join()
        .unwrap()
        .unwrap()
    };
    assert_eq!(snapshot, 1);

    finish.send(()).unwrap();
    writer.join().unwrap();
    assert_eq!(titles(&store), ["committed", "uncommitted"]);
}

/// Rows of the full-text index's segment table: each separately indexed write adds one
/// segment (a row or more); a merge folds them into fewer.
fn index_rows(store: &Store) -> i64 {
    store
        .read_sqlite(|c| {
            c.query_row("SELECT count(*) FROM memory_facts_fts_data", [], |r| {
                r.get(0)
            })
            .map_err(crate::StoreError::from)
        })
        .unwrap()
}

fn index_is_sound(store: &Store) {
    store
        .write_sqlite(|c| {
            c.execute_batch(
                "INSERT INTO memory_facts_fts(memory_facts_fts) VALUES ('integrity-check')",
            )
            .map_err(crate::StoreError::from)
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
    let store = Arc::new(Store::open(&dir.path().join("merge.db")).unwrap());
    let memory = Memory::new(Arc::clone(&store), None);
    save_facts(&memory, 40);
    let before = (index_rows(&store), search(&memory));
    assert_eq!(before.1.len(), 40);

    store.merge_search_index().unwrap();

    assert!(index_rows(&store) < before.0, "{} rows before", before.0);
    assert_eq!(search(&memory), before.1);
    index_is_sound(&store);
    // Nothing left to merge: a second call returns at once and changes nothing.
    let merged = index_rows(&store);
    store.merge_search_index().unwrap();
    assert_eq!(index_rows(&store), merged);
}

#[test]
fn an_idle_store_merges_the_search_index_by_itself() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("idle.db");
    let store = Arc::new(Store::open(&path).unwrap());
    let memory = Memory::new(Arc::clone(&store), None);
    save_facts(&memory, 40);
    let before = (index_rows(&store), search(&memory));

    // What a full merge leaves, measured on a copy merged on demand.
    let copy = dir.path().join("copy.db");
    store
        .read_sqlite(|c| {
            c.execute("VACUUM INTO ?1", [copy.to_string_lossy()])
                .map_err(crate::StoreError::from)
        })
        .unwrap();
    let merged_copy = Store::open(&copy).unwrap();
    merged_copy.merge_search_index().unwrap();
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
