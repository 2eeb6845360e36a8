//! Group commit: queued writes share one transaction, each in its own savepoint. A write
//! that fails or panics changes nothing while the others commit; a write is settled only
//! after its group ended, and every write of a group SQLite rolled back is told so.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use crate::board::{CreatePolicy, NewTask, Status, TaskFilter};
use crate::testing::{queue, taken};
use crate::{QueuedWrite, Store, StoreError};

fn open() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("group.db")).unwrap();
    (dir, store)
}

fn todo(store: &Store, title: &str) -> String {
    store
        .create_task(NewTask::titled(title), CreatePolicy::Uncapped)
        .unwrap()
        .id
}

#[test]
fn queued_claims_commit_together_and_a_losing_claim_changes_nothing() {
    let (_dir, store) = open();
    let a = todo(&store, "a");
    let b = todo(&store, "b");
    let (a1, b1) = (a.clone(), b.clone());
    let first = queue(&store, move |s| s.claim_task(&a1, "alice", None));
    let a2 = a.clone();
    let second = queue(&store, move |s| s.claim_task(&a2, "bob", None));
    let third = queue(&store, move |s| s.claim_task(&b1, "bob", None));
    assert!(
        taken(&first).is_none(),
        "nothing runs until someone runs the queue"
    );

    store.run_queued_writes();

    assert_eq!(
        taken(&first).unwrap().unwrap().assignee_agent_id.as_deref(),
        Some("alice")
    );
    assert_eq!(taken(&second).unwrap().unwrap_err(), "conflict");
    assert!(taken(&third).unwrap().is_ok());
    let in_progress = store
        .list_tasks(&TaskFilter {
            status: Some(Status::InProgress),
            ..TaskFilter::default()
        })
        .unwrap();
    let owners: Vec<_> = in_progress
        .iter()
        .map(|t| (t.id.clone(), t.assignee_agent_id.clone().unwrap()))
        .collect();
    assert_eq!(owners.len(), 2);
    assert!(owners.contains(&(a, "alice".into())));
    assert!(owners.contains(&(b, "bob".into())));
}

#[test]
fn a_panicking_write_rolls_back_alone_and_its_caller_hears_nothing() {
    let (_dir, store) = open();
    let before = queue(&store, |s| {
        s.create_task(NewTask::titled("kept 1"), CreatePolicy::Uncapped)
    });
    let panicked = queue(&store, |s| -> Result<(), StoreError> {
        s.create_task(NewTask::titled("lost"), CreatePolicy::Uncapped)?;
        s.write_sqlite(|_| -> Result<(), StoreError> { panic!("boom inside the group") })
    });
    let after = queue(&store, |s| {
        s.create_task(NewTask::titled("kept 2"), CreatePolicy::Uncapped)
    });

    store.run_queued_writes();

    assert!(taken(&before).unwrap().is_ok());
    assert!(taken(&after).unwrap().is_ok());
    assert!(
        taken(&panicked).is_none(),
        "a panicked write is never settled"
    );
    let mut titles: Vec<String> = store
        .list_tasks(&TaskFilter::default())
        .unwrap()
        .into_iter()
        .map(|t| t.title)
        .collect();
    titles.sort();
    // The whole panicked write is undone, the task it created before panicking included.
    assert_eq!(titles, ["kept 1", "kept 2"]);
    // The store still works outside a group afterwards.
    assert!(
        store
            .write_sqlite(|c| c.execute_batch("SELECT 1").map_err(StoreError::from))
            .is_ok()
    );
}

#[test]
fn when_sqlite_drops_the_group_its_writes_are_told_and_later_ones_stand_alone() {
    let (_dir, store) = open();
    let early = queue(&store, |s| {
        s.create_task(NewTask::titled("rolled back"), CreatePolicy::Uncapped)
    });
    // Ends the shared transaction from inside, as SQLite does on a full disk.
    let breaker = queue(&store, |s| {
        s.read_sqlite(|c| c.execute_batch("ROLLBACK").map_err(StoreError::from))
    });
    let late = queue(&store, |s| {
        s.create_task(NewTask::titled("standalone"), CreatePolicy::Uncapped)
    });

    store.run_queued_writes();

    let early = taken(&early).unwrap().unwrap_err();
    assert!(early.starts_with("group failed:"), "{early}");
    assert!(taken(&breaker).unwrap().is_err());
    assert_eq!(taken(&late).unwrap().unwrap().title, "standalone");
    let titles: Vec<String> = store
        .list_tasks(&TaskFilter::default())
        .unwrap()
        .into_iter()
        .map(|t| t.title)
        .collect();
    assert_eq!(titles, ["standalone"]);
}

#[test]
fn writers_on_many_threads_all_land_exactly_once() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::open(&dir.path().join("group.db")).unwrap());
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let store = Arc::clone(&store);
            std::thread::spawn(move || {
                for i in 0..50 {
                    let slot = queue(&store, move |s| {
                        s.create_task(NewTask::titled(format!("t{t}-{i}")), CreatePolicy::Uncapped)
                    });
                    store.run_queued_writes();
                    // Whoever ran the group settled this write before releasing it.
                    assert!(taken(&slot).unwrap().is_ok());
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let tasks = store.list_tasks(&TaskFilter::default()).unwrap();
    assert_eq!(tasks.len(), 400);
}

#[test]
fn exactly_one_caller_is_told_to_drain_until_the_queue_is_empty() {
    let (_dir, store) = open();
    let noop = || -> QueuedWrite { Box::new(|_| Box::new(|_| ())) };
    assert!(store.queue_write(noop()), "the first writer drains");
    assert!(
        !store.queue_write(noop()),
        "the next one waits for that drain"
    );
    assert!(!store.queue_write(noop()));
    store.run_queued_writes();
    assert!(
        store.queue_write(noop()),
        "after a drain found the queue empty, the next writer drains again"
    );
}
