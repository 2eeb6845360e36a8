//! The WAL is checkpointed mostly off the committing thread, and still kept small:
//! thousands of commits leave a WAL file far smaller than the frames they wrote.

#![allow(clippy::unwrap_used)]

use crate::Store;
use crate::board::{CreatePolicy, NewTask};

#[test]
fn many_commits_keep_the_wal_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("wal.db");
    let store = Store::open(&path).unwrap();
    let wal = dir.path().join("wal.db-wal");
    let mut largest = 0;
    for i in 0..3_000 {
        store
            .create_task(NewTask::titled(format!("task {i}")), CreatePolicy::Uncapped)
            .unwrap();
        largest = largest.max(std::fs::metadata(&wal).map_or(0, |m| m.len()));
    }
    // Commits checkpoint inline only every 4,000 pages instead of SQLite's 1,000…
    let autocheckpoint: i64 = store
        .read_sqlite(|c| {
            c.query_row("PRAGMA wal_autocheckpoint", [], |r| r.get(0))
                .map_err(crate::StoreError::from)
        })
        .unwrap();
    assert_eq!(autocheckpoint, 4_000);
    // …and 3,000 commits of several pages each (about 80 MiB of frames) never grew the
    // WAL much past those 4,000 pages (16 MiB): SQLite started it over after each one.
    assert!(largest > 0);
    assert!(
        largest < 24 * 1024 * 1024,
        "the WAL grew to {largest} bytes"
    );
    // Closing the store checkpoints and removes the WAL, as SQLite's last close does.
    drop(store);
    assert!(!wal.exists() || std::fs::metadata(&wal).unwrap().len() == 0);
}
