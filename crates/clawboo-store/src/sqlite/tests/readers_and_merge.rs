//! Reads beside a write: a read on another thread while a write transaction is open runs
//! on a read-only connection and sees the last commit, never waiting for the write.

#![allow(clippy::unwrap_used)]

use std::sync::{Arc, mpsc};
use std::time::Duration;

use crate::Store;
use crate::board::{CreatePolicy, NewTask, TaskFilter};

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
