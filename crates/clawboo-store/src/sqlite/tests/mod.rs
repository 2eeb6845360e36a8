//! The SQLite backend's own tests: its connections, group commit, readers, the WAL and
//! the idle work, which need its internals (raw SQL on the writer's connection).

#![allow(clippy::unwrap_used)]

mod group_commit;
mod readers_and_merge;
mod wal_checkpoint;

use super::*;
use crate::Store;
use rusqlite::StatementStatus;
use std::sync::mpsc;

#[test]
fn reads_map_the_database_file() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("mmap.db")).unwrap();
    let mapped: i64 = store
        .read_sqlite(|c| {
            c.query_row("PRAGMA mmap_size", [], |r| r.get(0))
                .map_err(StoreError::from)
        })
        .unwrap();
    assert_eq!(mapped, MMAP_BYTES);
}

/// An in-memory database cannot be opened twice: reads wait for the writer's
/// connection instead of borrowing a reader that would see another, empty, database.
#[test]
fn an_in_memory_store_reads_through_its_one_connection() {
    let store = Arc::new(Store::open(Path::new(":memory:")).unwrap());
    store
        .write_sqlite(|c| {
            c.execute_batch("CREATE TABLE t(x); INSERT INTO t VALUES (1);")
                .map_err(StoreError::from)
        })
        .unwrap();
    let (held, holding) = mpsc::channel();
    let writer = {
        let store = Arc::clone(&store);
        std::thread::spawn(move || {
            store
                .write_sqlite(|_| {
                    held.send(()).unwrap();
                    std::thread::sleep(Duration::from_millis(50));
                    Ok::<_, StoreError>(())
                })
                .unwrap();
        })
    };
    holding.recv().unwrap();
    let x: i64 = store
        .read_sqlite(|c| {
            c.query_row("SELECT x FROM t", [], |r| r.get(0))
                .map_err(StoreError::from)
        })
        .unwrap();
    assert_eq!(x, 1);
    writer.join().unwrap();
}

/// Without the planner stability guarantee SQLite re-prepared this cached statement
/// (the comments of `get_task`) on every new `task_id`.
#[test]
fn rebinding_a_cached_statement_never_reprepares_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("qpsg.db")).unwrap();
    let sql = "SELECT id FROM task_comments WHERE task_id = ?1 ORDER BY created_at, id";
    let reprepares = store
        .snapshot_sqlite(|c| {
            for id in ["a", "b", "c", "d"] {
                let mut stmt = c.prepare_cached(sql)?;
                let rows = stmt.query_map([id], |_| Ok(()))?;
                assert_eq!(rows.count(), 0);
            }
            Ok::<_, StoreError>(
                c.prepare_cached(sql)?
                    .get_status(StatementStatus::RePrepare),
            )
        })
        .unwrap();
    assert_eq!(reprepares, 0);
}
