//! The WAL is checkpointed mostly off the committing thread, and still kept small: commits
//! checkpoint inline once the WAL passes [`INLINE_CHECKPOINT_PAGES`], and SQLite then starts
//! it over, so thousands of commits leave a WAL file far smaller than the frames they wrote.

#![allow(clippy::unwrap_used)]

use std::io::Read;
use std::path::Path;

use crate::Store;
use crate::board::{CreatePolicy, NewTask};
use crate::sqlite::checkpointer::INLINE_CHECKPOINT_PAGES;

/// A WAL file's header, before its first frame.
const WAL_HEADER_BYTES: u64 = 32;
/// A frame's header, before its page.
const FRAME_HEADER_BYTES: u64 = 24;
/// More pages than one commit of a task writes.
const MOST_PAGES_A_COMMIT_WRITES: u64 = 64;

/// The WAL's checkpoint sequence number (header bytes 12..16), which SQLite bumps each time
/// it starts the WAL over; `None` while the file is missing or shorter than its header.
fn wal_restarts(wal: &Path) -> Option<u32> {
    let mut header = [0; 16];
    std::fs::File::open(wal)
        .ok()?
        .read_exact(&mut header)
        .ok()?;
    let (_, sequence) = header.split_at(12);
    Some(u32::from_be_bytes(sequence.try_into().ok()?))
}

#[test]
fn many_commits_keep_the_wal_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("wal.db");
    let store = Store::open(&path).unwrap();
    let wal = dir.path().join("wal.db-wal");
    let create = |i: usize| {
        store
            .create_task(NewTask::titled(format!("task {i}")), CreatePolicy::Uncapped)
            .unwrap();
    };
    // The first commit starts the checkpoint thread and moves SQLite's own checkpoint from
    // every 1,000 WAL pages to every 4,000.
    create(0);
    let pragma = |name: &str| -> u64 {
        let value: i64 = store
            .read_sqlite(|c| {
                c.query_row(&format!("PRAGMA {name}"), [], |r| r.get(0))
                    .map_err(crate::StoreError::from)
            })
            .unwrap();
        u64::try_from(value).unwrap()
    };
    assert_eq!(
        pragma("wal_autocheckpoint"),
        u64::from(INLINE_CHECKPOINT_PAGES)
    );
    let frame = pragma("page_size") + FRAME_HEADER_BYTES;

    // The thread's checkpoints are held off while the commits run: one that overlaps a
    // commit makes that commit's own checkpoint find the checkpoint lock taken (and skip),
    // which the scheduler decides, not the store. What remains is the rule: the commit that
    // takes the WAL past 4,000 pages checkpoints it, and the next one starts it over.
    let rounds = store
        .sqlite()
        .and_then(|db| db.checkpoint_rounds())
        .unwrap();
    let held = rounds.lock().unwrap();
    let bound = WAL_HEADER_BYTES
        + (u64::from(INLINE_CHECKPOINT_PAGES) + MOST_PAGES_A_COMMIT_WRITES) * frame;
    let first = wal_restarts(&wal).unwrap();
    let mut largest = 0;
    let mut i = 1;
    // Three restarts: each one is 4,000 pages of frames that did not grow the file.
    while wal_restarts(&wal).unwrap() < first + 3 {
        assert!(i < 100_000, "the WAL was never started over");
        create(i);
        i += 1;
        largest = largest.max(std::fs::metadata(&wal).unwrap().len());
        assert!(
            largest <= bound,
            "commit {i} grew the WAL to {largest} bytes, past {INLINE_CHECKPOINT_PAGES} pages and one commit ({bound} bytes)"
        );
    }
    // The WAL did fill up to the inline checkpoint before each restart.
    assert!(
        largest > WAL_HEADER_BYTES + u64::from(INLINE_CHECKPOINT_PAGES) * frame,
        "{largest}"
    );
    drop(held);
    // Closing the store checkpoints and removes the WAL, as SQLite's last close does.
    drop(store);
    assert!(!wal.exists() || std::fs::metadata(&wal).unwrap().len() == 0);
}
