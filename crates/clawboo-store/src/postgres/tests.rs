//! The engine against a real PostgreSQL server: set `CLAWBOO_TEST_POSTGRES_URL` (test.sh
//! starts a throwaway cluster); without it these tests say so and pass nothing.

use std::sync::Arc;

use crate::db::Dialect;
use crate::testing::TestStore;
use crate::{Store, StoreError};

fn pg() -> Option<TestStore> {
    TestStore::postgres()
}

#[test]
fn settings_and_inbox_round_trip_and_a_second_open_migrates_nothing() {
    let Some(test) = pg() else { return };
    let store = test.store();
    assert_eq!(store.backend_name(), "postgres");
    let first = store.setting_or_insert_with("k", || "one".into()).unwrap();
    let second = store.setting_or_insert_with("k", || "two".into()).unwrap();
    assert_eq!((first.as_str(), second.as_str()), ("one", "one"));
    store.push_inbox("a", Some("t"), "board", "hello").unwrap();
    assert!(store.has_pending_inbox("a", None).unwrap());
    let items = store.take_inbox("a", Some("t"), 10, "test").unwrap();
    assert_eq!(items.len(), 1);
    assert!(
        store
            .take_inbox("a", Some("t"), 10, "test")
            .unwrap()
            .is_empty()
    );
    let again = test.reopen();
    assert_eq!(again.setting("k").unwrap().as_deref(), Some("one"));
}

#[test]
fn every_value_type_round_trips() {
    let Some(test) = pg() else { return };
    let store = test.store();
    let row = store
        .read(|tx| {
            assert_eq!(tx.dialect(), Dialect::Postgres);
            tx.query_one(
                "SELECT CAST(?1 AS BIGINT), CAST(?2 AS TEXT), CAST(?3 AS DOUBLE PRECISION), \
                 CAST(?4 AS BYTEA), CAST(?5 AS TEXT), ?6 = 1, CAST(7 AS INTEGER)",
                &[
                    &42_i64,
                    &"x'y",
                    &1.5_f64,
                    &vec![0_u8, 255],
                    &None::<String>,
                    &1_i64,
                ],
                |r| {
                    Ok((
                        r.get::<i64>(0)?,
                        r.get::<String>(1)?,
                        r.get::<f64>(2)?,
                        r.get::<Vec<u8>>(3)?,
                        r.get::<Option<String>>(4)?,
                        r.get::<bool>(5)?,
                        r.get::<i64>(6)?,
                    ))
                },
            )
        })
        .unwrap();
    assert_eq!(row, (42, "x'y".into(), 1.5, vec![0, 255], None, true, 7));
}

#[test]
fn a_failed_write_changes_nothing_and_a_nested_one_joins_its_outer() {
    let Some(test) = pg() else { return };
    let store = test.store();
    let failed: Result<(), StoreError> = store.write(|tx| {
        tx.execute("INSERT INTO settings(key, value) VALUES ('a', '1')", &[])?;
        Err(StoreError::Conflict)
    });
    assert!(failed.is_err());
    assert_eq!(store.setting("a").unwrap(), None);
    store
        .write(|tx| {
            tx.execute("INSERT INTO settings(key, value) VALUES ('b', '1')", &[])?;
            // The inner write sees the outer's row and its failure undoes only itself.
            let inner: Result<(), StoreError> = store.write(|tx| {
                tx.execute("UPDATE settings SET value = '2' WHERE key = 'b'", &[])?;
                Err(StoreError::Conflict)
            });
            assert!(inner.is_err());
            let seen = store.setting("b")?;
            assert_eq!(seen.as_deref(), Some("1"));
            Ok::<_, StoreError>(())
        })
        .unwrap();
    assert_eq!(store.setting("b").unwrap().as_deref(), Some("1"));
}

#[test]
fn serialize_on_makes_a_read_then_write_rule_run_one_at_a_time() {
    let Some(test) = pg() else { return };
    let store = Arc::new(test.store());
    store
        .write(|tx| {
            tx.execute("INSERT INTO settings(key, value) VALUES ('n', '0')", &[])
                .map(|_| ())
        })
        .unwrap();
    let threads: Vec<_> = (0..6)
        .map(|_| {
            let store = Arc::clone(&store);
            std::thread::spawn(move || {
                for _ in 0..10 {
                    store
                        .write(|tx| {
                            tx.serialize_on("counter")?;
                            let n: String = tx.query_one(
                                "SELECT value FROM settings WHERE key = 'n'",
                                &[],
                                |r| r.get(0),
                            )?;
                            let next = n.parse::<i64>().unwrap_or(0) + 1;
                            tx.execute(
                                "UPDATE settings SET value = ?1 WHERE key = 'n'",
                                &[&next.to_string()],
                            )
                            .map(|_| ())
                        })
                        .unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(store.setting("n").unwrap().as_deref(), Some("60"));
}

#[tokio::test(flavor = "current_thread")]
async fn a_store_call_works_on_a_single_threaded_runtime() {
    let Some(test) = pg() else { return };
    let store: Store = test.store();
    // Past tokio's cooperative budget of a task (128 operations): the pool's wake-ups
    // must not wait for this task to yield.
    for n in 0..300 {
        store
            .push_inbox("rt", None, "board", &format!("inline {n}"))
            .unwrap();
    }
    assert!(store.has_pending_inbox("rt", None).unwrap());
}

#[test]
fn a_database_a_newer_build_migrated_is_refused() {
    let Some(test) = pg() else { return };
    let store = test.store();
    store
        .write(|tx| {
            tx.execute(
                "INSERT INTO clawboo_schema(version, name) VALUES (999, 'from the future')",
                &[],
            )
            .map(|_| ())
        })
        .unwrap();
    match test.try_reopen() {
        Err(StoreError::NewerSchema { found: 999, .. }) => {}
        other => panic!("expected NewerSchema, got {other:?}"),
    }
}

#[test]
fn hosts_opening_together_migrate_once() {
    let Some(test) = pg() else { return };
    let fresh = test.fresh_url();
    let opened: Vec<_> = (0..4)
        .map(|_| {
            let url = fresh.clone();
            std::thread::spawn(move || TestStore::open_url(&url).map(|_| ()))
        })
        .collect();
    for handle in opened {
        handle.join().unwrap().unwrap();
    }
    let store = TestStore::open_url(&fresh).unwrap();
    let versions: i64 = store
        .read(|tx| tx.query_one("SELECT count(*) FROM clawboo_schema", &[], |r| r.get(0)))
        .unwrap();
    assert_eq!(versions, super::migrations::LATEST);
}
