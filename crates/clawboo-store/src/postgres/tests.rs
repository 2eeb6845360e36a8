//! The engine against a real PostgreSQL server: set `CLAWBOO_TEST_POSTGRES_URL` (test.sh
//! starts a throwaway cluster); without it these tests say so and pass nothing.

use std::sync::Arc;

use crate::db::Dialect;
use crate::testing::TestStore;
use crate::{BackendErrorKind, SettleWrite, Store, StoreConfig, StoreError};

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
fn a_write_waiting_on_a_row_another_transaction_holds_gives_up_as_busy_and_writes_nothing() {
    let Some(test) = pg() else { return };
    let waiter = Arc::new(test.store_with(StoreConfig {
        busy_timeout: std::time::Duration::from_millis(300),
        ..StoreConfig::default()
    }));
    let holder = test.store();
    waiter
        .setting_or_insert_with("held", || "0".into())
        .unwrap();
    holder
        .write(|tx| {
            tx.execute(
                "UPDATE settings SET value = 'holder' WHERE key = 'held'",
                &[],
            )?;
            // The row stays locked until this closure returns.
            let waiter = Arc::clone(&waiter);
            let (answer, answered) = std::sync::mpsc::channel();
            std::thread::spawn(move || {
                let asked = std::time::Instant::now();
                let wrote = waiter.write(|tx| {
                    tx.execute(
                        "UPDATE settings SET value = 'waiter' WHERE key = 'held'",
                        &[],
                    )
                });
                let _ = answer.send((wrote, asked.elapsed()));
            });
            let (wrote, waited) = answered
                .recv_timeout(std::time::Duration::from_secs(20))
                .expect("the waiting write neither gave up nor went through");
            let (kind, message) = backend_error(wrote.map(|_| ()));
            assert_eq!(kind, BackendErrorKind::Busy, "{message}");
            assert!(message.contains("retry the call"), "{message}");
            assert!(waited < std::time::Duration::from_secs(5), "{waited:?}");
            Ok::<_, StoreError>(())
        })
        .unwrap();
    assert_eq!(waiter.setting("held").unwrap().as_deref(), Some("holder"));
    // The connection that gave up is fine: the next write goes through.
    waiter
        .write(|tx| {
            tx.execute(
                "UPDATE settings SET value = 'waiter' WHERE key = 'held'",
                &[],
            )
        })
        .unwrap();
    assert_eq!(holder.setting("held").unwrap().as_deref(), Some("waiter"));
}

#[test]
fn a_host_starting_while_another_migrates_waits_for_it_past_its_lock_timeout() {
    let Some(test) = pg() else { return };
    let (_, pool) = pool_on(&test, 1, std::time::Duration::from_secs(5));
    let migrating = pool.get().unwrap();
    let lock = |sql: &str| {
        migrating
            .run(
                migrating
                    .client()
                    .execute(sql, &[&super::migrations::MIGRATION_LOCK]),
            )
            .unwrap();
    };
    lock("SELECT pg_advisory_lock($1)");
    let (opened, answered) = std::sync::mpsc::channel();
    let config = StoreConfig {
        busy_timeout: std::time::Duration::from_millis(200),
        ..StoreConfig::default()
    };
    let location = test.location().clone();
    std::thread::spawn(move || {
        let _ = opened.send(Store::open_location(&location, config).map(|_| ()));
    });
    if let Ok(opened) = answered.recv_timeout(std::time::Duration::from_secs(1)) {
        panic!("opening ended while another host held the migration lock: {opened:?}");
    }
    lock("SELECT pg_advisory_unlock($1)");
    answered
        .recv_timeout(std::time::Duration::from_secs(20))
        .expect("the store never opened once the lock was free")
        .unwrap();
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

/// A stdio server runs store calls inline on its single-threaded runtime, many in one task
/// poll when it drains queued writes: more calls than tokio's cooperative budget allows
/// one poll must still all complete.
#[test]
fn many_store_calls_inside_one_task_of_a_single_threaded_runtime_complete() {
    let Some(test) = pg() else { return };
    let store = test.store_with(StoreConfig {
        pg_pool_size: 2,
        ..StoreConfig::default()
    });
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let outcome = runtime.block_on(async {
            for i in 0..300 {
                store.push_inbox("rt", None, "board", &format!("inline {i}"))?;
            }
            store.take_inbox("rt", None, 1000, "test")
        });
        let _ = done.send(outcome.map(|taken| taken.len()));
    });
    let taken = finished
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("store calls on a single-threaded runtime hung");
    assert_eq!(taken.unwrap(), 300);
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

#[test]
fn every_parameter_type_postgres_infers_binds_and_every_column_type_decodes() {
    let Some(test) = pg() else { return };
    let store = test.store();
    type Row = (
        (i64, i64, i64, f64, f64, bool),
        (String, String, String, Vec<u8>),
        (Option<i64>, Option<Vec<u8>>, Option<String>, f64),
    );
    let row: Row = store
        .read(|tx| {
            tx.query_one(
                "SELECT CAST(?1 AS SMALLINT), CAST(?2 AS INTEGER), CAST(?3 AS BIGINT), \
                 CAST(?4 AS REAL), CAST(?5 AS DOUBLE PRECISION), CAST(?6 AS BOOLEAN), \
                 CAST(?7 AS VARCHAR), CAST(?8 AS CHAR(3)), CAST(?9 AS NAME), \
                 CAST(?10 AS BYTEA), CAST(?11 AS INTEGER), CAST(?12 AS BYTEA), \
                 CAST(?13 AS TEXT), CAST(?14 AS DOUBLE PRECISION)",
                &[
                    &-7_i64,
                    &70_000_i32,
                    &i64::MAX,
                    &1.5_f64,
                    &-2.25_f64,
                    &true,
                    &"héllo",
                    &"abc",
                    &"nm",
                    &vec![0_u8, 1, 255],
                    &None::<i64>,
                    &None::<Vec<u8>>,
                    &None::<String>,
                    &3_i64,
                ],
                |r| {
                    Ok((
                        (
                            r.get(0)?,
                            r.get(1)?,
                            r.get(2)?,
                            r.get(3)?,
                            r.get(4)?,
                            r.get(5)?,
                        ),
                        (r.get(6)?, r.get(7)?, r.get(8)?, r.get(9)?),
                        (r.get(10)?, r.get(11)?, r.get(12)?, r.get(13)?),
                    ))
                },
            )
        })
        .unwrap();
    assert_eq!(row.0, (-7, 70_000, i64::MAX, 1.5, -2.25, true));
    assert_eq!(
        row.1,
        ("héllo".into(), "abc".into(), "nm".into(), vec![0, 1, 255])
    );
    assert_eq!(row.2, (None, None, None, 3.0));
    // A boolean expression reads as a bool, an integer too small for the column is refused.
    let flags: (bool, bool) = store
        .read(|tx| tx.query_one("SELECT 1 = 1, 1 = 2", &[], |r| Ok((r.get(0)?, r.get(1)?))))
        .unwrap();
    assert_eq!(flags, (true, false));
    let too_big = store.read(|tx| {
        tx.query_one("SELECT CAST(?1 AS SMALLINT)", &[&100_000_i64], |r| {
            r.get::<i64>(0)
        })
    });
    assert!(
        matches!(too_big, Err(StoreError::Backend(_))),
        "{too_big:?}"
    );
}

/// The kind and message of a backend error.
fn backend_error<T: std::fmt::Debug>(result: Result<T, StoreError>) -> (BackendErrorKind, String) {
    match result {
        Err(StoreError::Backend(e)) => (e.kind, e.message),
        other => panic!("expected a backend error, got {other:?}"),
    }
}

#[test]
fn what_has_no_faithful_conversion_is_refused_as_a_mistake_not_an_outage() {
    let Some(test) = pg() else { return };
    let store = test.store();
    let numeric = store.read(|tx| {
        tx.query_one(
            "SELECT SUM(x) FROM (VALUES (CAST(1 AS BIGINT))) AS v(x)",
            &[],
            |r| r.get::<i64>(0),
        )
    });
    let (kind, message) = backend_error(numeric);
    assert_eq!(kind, BackendErrorKind::Other);
    assert!(
        message.contains("numeric") && message.contains("CAST"),
        "{message}"
    );
    let text_as_int = store.read(|tx| {
        tx.query_one("SELECT CAST(?1 AS BIGINT)", &[&"seven"], |r| {
            r.get::<i64>(0)
        })
    });
    let (kind, message) = backend_error(text_as_int);
    assert_eq!(kind, BackendErrorKind::Other);
    assert!(message.contains("CAST"), "{message}");
    let (kind, _) = backend_error(store.read(|tx| tx.execute("SELEC 1", &[])));
    assert_eq!(kind, BackendErrorKind::Other);
}

#[test]
fn nesting_reuses_the_outer_connection() {
    let Some(test) = pg() else { return };
    // One connection in all: any nested call that asked the pool for another would wait
    // for it and fail.
    let store = test.store_with(StoreConfig {
        pg_pool_size: 1,
        ..StoreConfig::default()
    });
    let seen: Option<String> = store
        .read(|tx| {
            tx.query_one("SELECT 1", &[], |r| r.get::<i64>(0))?;
            // A write inside a read runs its transaction on the read's connection.
            store.write(|tx| {
                tx.execute("INSERT INTO settings(key, value) VALUES ('r', 'w')", &[])?;
                store.snapshot(|_| Ok::<_, StoreError>(()))?;
                store.read(|_| Ok::<_, StoreError>(()))
            })?;
            store.snapshot(|tx| {
                tx.query_opt("SELECT value FROM settings WHERE key = 'r'", &[], |r| {
                    r.get(0)
                })
            })
        })
        .unwrap();
    assert_eq!(seen.as_deref(), Some("w"));
}

#[test]
fn a_write_inside_a_snapshot_commits_on_its_own() {
    let Some(test) = pg() else { return };
    let store = test.store();
    store
        .snapshot(|tx| {
            tx.query_one("SELECT count(*) FROM settings", &[], |r| r.get::<i64>(0))?;
            store.write(|tx| tx.execute("INSERT INTO settings(key, value) VALUES ('s', '1')", &[]))
        })
        .unwrap();
    assert_eq!(store.setting("s").unwrap().as_deref(), Some("1"));
}

/// A transaction's `BEGIN` goes out with its first statement and a read-only one's `COMMIT`
/// unanswered: whatever runs next on the connection must find no transaction left open.
#[test]
fn a_connection_leaves_every_transaction_closed_however_it_ended() {
    let Some(test) = pg() else { return };
    // One connection, so each call below reuses the one before it.
    let store = test.store_with(StoreConfig {
        pg_pool_size: 1,
        ..StoreConfig::default()
    });
    // Outside a transaction each statement is its own, so two in a row see two different
    // transaction start times; inside one left open they would see the same.
    let outside_any = |store: &Store| -> bool {
        let started = || {
            store
                .read(|tx| tx.query_one("SELECT CAST(now() AS TEXT)", &[], |r| r.get::<String>(0)))
                .unwrap()
        };
        started() != started()
    };
    let count = |tx: &dyn crate::db::Tx| {
        tx.query_one("SELECT count(*) FROM settings", &[], |r| r.get::<i64>(0))
    };
    let before = store.snapshot(count).unwrap();
    assert!(outside_any(&store), "after a read-only transaction");
    store.write(|_| Ok::<_, StoreError>(())).unwrap();
    store.snapshot(|_| Ok::<_, StoreError>(())).unwrap();
    assert!(
        outside_any(&store),
        "after transactions that ran no statement"
    );
    let failed = store.write(|tx| {
        tx.execute("INSERT INTO settings(key, value) VALUES ('f', '1')", &[])?;
        tx.execute("INSERT INTO no_such_table VALUES (1)", &[])
    });
    assert!(failed.is_err());
    assert!(outside_any(&store), "after a failed write");
    let refused = store.write(|_| Err::<(), _>(StoreError::Conflict));
    assert!(matches!(refused, Err(StoreError::Conflict)));
    assert!(
        outside_any(&store),
        "after a write refused before its first statement"
    );
    store
        .write(|tx| tx.execute("INSERT INTO settings(key, value) VALUES ('g', '1')", &[]))
        .unwrap();
    assert_eq!(store.setting("f").unwrap(), None);
    assert_eq!(store.setting("g").unwrap().as_deref(), Some("1"));
    assert_eq!(store.snapshot(count).unwrap(), before + 1);
    assert!(outside_any(&store), "at the end");
}

#[test]
fn queued_writes_commit_each_on_its_own_and_are_settled_after() {
    let Some(test) = pg() else { return };
    let store = test.store();
    let (sent, settled) = std::sync::mpsc::channel();
    for (i, key) in ["q1", "bad", "q2"].into_iter().enumerate() {
        let sent = sent.clone();
        let drain = store.queue_write(Box::new(move |store: &Store| -> SettleWrite {
            let own: Result<usize, StoreError> = store.write(|tx| {
                tx.execute("INSERT INTO settings(key, value) VALUES (?1, 'v')", &[&key])?;
                if key == "bad" {
                    return Err(StoreError::Conflict);
                }
                Ok(1)
            });
            Box::new(move |group| {
                let _ = sent.send((key, own.is_ok(), group.is_ok()));
            })
        }));
        // Only the first queued write finds nobody draining.
        assert_eq!(drain, i == 0);
    }
    assert_eq!(store.queued_writes(), 3);
    store.run_queued_writes();
    assert_eq!(store.queued_writes(), 0);
    drop(sent);
    let mut outcomes: Vec<_> = settled.iter().collect();
    outcomes.sort();
    assert_eq!(
        outcomes,
        vec![("bad", false, true), ("q1", true, true), ("q2", true, true)]
    );
    assert_eq!(store.setting("q1").unwrap().as_deref(), Some("v"));
    assert_eq!(store.setting("bad").unwrap(), None);
    assert!(
        store.run_if_idle(|_| ()).is_err(),
        "PostgreSQL hands every call back"
    );
}

#[test]
fn one_test_body_runs_on_the_backend_under_test() {
    let test = TestStore::new();
    let store = test.store();
    let expected = if std::env::var(crate::testing::POSTGRES_URL_ENV).is_ok_and(|u| !u.is_empty()) {
        "postgres"
    } else {
        "sqlite"
    };
    assert_eq!(store.backend_name(), expected);
    assert_eq!(
        store.setting_or_insert_with("k", || "v".into()).unwrap(),
        "v"
    );
}

#[test]
fn a_write_on_one_host_is_announced_to_every_host() {
    let Some(test) = pg() else { return };
    let store = test.store();
    let other = test.reopen();
    let mut announcements = store
        .activity_changes()
        .expect("PostgreSQL announces writes");
    announcements.mark_unchanged();
    other
        .setting_or_insert_with("announced", || "v".into())
        .unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    runtime
        .block_on(async {
            tokio::time::timeout(std::time::Duration::from_secs(2), announcements.changed()).await
        })
        .expect("the write was announced within two seconds")
        .unwrap();
}

/// The URL of the test's database, and a pool of `size` on it that waits `wait` at most.
fn pool_on(
    test: &TestStore,
    size: usize,
    wait: std::time::Duration,
) -> (String, Arc<super::pool::Pool>) {
    let crate::DbLocation::Postgres(url) = test.location() else {
        panic!("a PostgreSQL test")
    };
    (url.clone(), pool_at(url, size, wait))
}

/// A pool of `size` connections to `url`, without the store's session setup.
fn pool_at(url: &str, size: usize, wait: std::time::Duration) -> Arc<super::pool::Pool> {
    let (config, tls) = super::tls::configure(url).unwrap();
    super::pool::Pool::new(config, tls, size, wait, String::new())
}

fn one_value<T: for<'a> tokio_postgres::types::FromSql<'a>>(
    conn: &super::pool::Conn,
    sql: &str,
) -> T {
    conn.run(conn.client().query_one(sql, &[])).unwrap().get(0)
}

#[test]
fn a_pool_at_its_limit_says_so_in_time_and_lends_a_freed_connection_again() {
    let Some(test) = pg() else { return };
    let (_, pool) = pool_on(&test, 1, std::time::Duration::from_millis(300));
    let held = pool.get().unwrap();
    let pid: i32 = one_value(&held, "SELECT pg_backend_pid()");
    let asked = std::time::Instant::now();
    let (kind, message) = backend_error(pool.get().map(|_| ()));
    assert_eq!(kind, BackendErrorKind::Unavailable, "{message}");
    assert!(message.contains("came free in time"), "{message}");
    assert!(asked.elapsed() < std::time::Duration::from_secs(3));
    drop(held);
    let again = pool.get().unwrap();
    assert_eq!(one_value::<i32>(&again, "SELECT pg_backend_pid()"), pid);
}

#[test]
fn a_connection_the_server_ended_while_idle_is_replaced_when_next_taken() {
    let Some(test) = pg() else { return };
    let (_, pool) = pool_on(&test, 2, std::time::Duration::from_secs(5));
    let pid: i32 = {
        let conn = pool.get().unwrap();
        one_value(&conn, "SELECT pg_backend_pid()")
    };
    {
        // Two at once: the idle one above, and a new one to end it from.
        let (idle, other) = (pool.get().unwrap(), pool.get().unwrap());
        let killer = if one_value::<i32>(&idle, "SELECT pg_backend_pid()") == pid {
            other
        } else {
            idle
        };
        let ended: bool = killer
            .run(
                killer
                    .client()
                    .query_one("SELECT pg_terminate_backend($1, 5000)", &[&pid]),
            )
            .unwrap()
            .get(0);
        assert!(ended);
    }
    for _ in 0..2 {
        let conn = pool.get().unwrap();
        assert_ne!(one_value::<i32>(&conn, "SELECT pg_backend_pid()"), pid);
    }
}

/// Where the test's server listens, as its own settings say.
struct Listening {
    user: String,
    database: String,
    port: String,
    /// The directory of its Unix socket, when it has one on this host.
    socket_dir: Option<String>,
}

fn listening(pool: &Arc<super::pool::Pool>) -> Listening {
    let conn = pool.get().unwrap();
    let dirs: String = one_value(&conn, "SHOW unix_socket_directories");
    let port: String = one_value(&conn, "SHOW port");
    let socket_dir = dirs
        .split(',')
        .map(str::trim)
        .find(|dir| {
            std::path::Path::new(dir)
                .join(format!(".s.PGSQL.{port}"))
                .exists()
        })
        .map(str::to_owned);
    Listening {
        user: one_value(&conn, "SELECT current_user"),
        database: one_value(&conn, "SELECT current_database()"),
        port,
        socket_dir,
    }
}

#[test]
fn a_url_naming_the_servers_unix_socket_reaches_it() {
    let Some(test) = pg() else { return };
    let (url, pool) = pool_on(&test, 1, std::time::Duration::from_secs(5));
    let Listening {
        user,
        database,
        port,
        socket_dir: Some(dir),
    } = listening(&pool)
    else {
        eprintln!("skipped: the server at {url} has no unix socket on this host");
        return;
    };
    let socket_url = format!("postgres://{user}@/{database}?host={dir}&port={port}");
    let store = TestStore::open_url(&socket_url).unwrap();
    store
        .setting_or_insert_with("over the socket", || "v".into())
        .unwrap();
    let over_tcp = test.store();
    assert_eq!(
        over_tcp
            .setting_or_insert_with("over the socket", || "other".into())
            .unwrap(),
        "v"
    );
}

#[test]
fn load_balance_hosts_random_spreads_connections_over_the_urls_hosts() {
    let Some(test) = pg() else { return };
    let (url, pool) = pool_on(&test, 1, std::time::Duration::from_secs(5));
    let (config, _) = super::tls::configure(&url).unwrap();
    let (
        [tokio_postgres::config::Host::Tcp(host)],
        Listening {
            user,
            database,
            port,
            socket_dir: Some(dir),
        },
    ) = (config.get_hosts(), listening(&pool))
    else {
        eprintln!("skipped: the test URL {url} is not one TCP host with a unix socket beside it");
        return;
    };
    // Two hosts reaching the one server, told apart by the address it was reached at
    // (none over the Unix socket).
    let over_tcp = |balance: &str| -> bool {
        let dir = dir.replace('/', "%2F");
        let url = format!(
            "postgres://{user}@{host}:{port},{dir}:{port}/{database}?load_balance_hosts={balance}"
        );
        let pool = pool_at(&url, 1, std::time::Duration::from_secs(5));
        let conn = pool.get().unwrap();
        one_value::<Option<String>>(&conn, "SELECT host(inet_server_addr())").is_some()
    };
    let in_order: Vec<bool> = (0..24).map(|_| over_tcp("disable")).collect();
    assert!(in_order.iter().all(|&tcp| tcp), "{in_order:?}");
    // Both hosts among 24 connections, unless chance picked one host 24 times (2 in 2^24).
    let balanced: Vec<bool> = (0..24).map(|_| over_tcp("random")).collect();
    assert!(
        balanced.contains(&true) && balanced.contains(&false),
        "{balanced:?}"
    );
}

#[test]
fn sslmode_require_encrypts_and_verify_full_checks_against_the_web_or_sslrootcert() {
    let Some(test) = pg() else { return };
    let (url, pool) = pool_on(&test, 1, std::time::Duration::from_secs(5));
    let ssl: String = one_value(&pool.get().unwrap(), "SHOW ssl");
    if ssl != "on" {
        eprintln!("skipped: the server at {url} does not offer TLS (test.sh's cluster does)");
        return;
    }
    let with_mode = |mode: &str| {
        let separator = if url.contains('?') { '&' } else { '?' };
        pool_at(
            &format!("{url}{separator}sslmode={mode}"),
            1,
            std::time::Duration::from_secs(5),
        )
    };
    let encrypted = with_mode("require").get().unwrap();
    let over_tls: bool = one_value(
        &encrypted,
        "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
    );
    assert!(over_tls);
    let (kind, message) = backend_error(with_mode("verify-full").get().map(|_| ()));
    assert_eq!(kind, BackendErrorKind::Unavailable, "{message}");
    assert!(
        message.contains("check the server's certificate"),
        "{message}"
    );

    // A team's own authority through `sslrootcert`: here the server's self-signed
    // certificate itself, which test.sh's cluster makes for 127.0.0.1.
    let (data, file): (String, String) = {
        let conn = pool.get().unwrap();
        (
            one_value(&conn, "SHOW data_directory"),
            one_value(&conn, "SHOW ssl_cert_file"),
        )
    };
    let certificate = std::path::Path::new(&data).join(file);
    let readable =
        std::fs::read_to_string(&certificate).is_ok_and(|pem| pem.contains("BEGIN CERTIFICATE"));
    if !readable || !url.contains("@127.0.0.1:") {
        eprintln!(
            "skipped sslrootcert: {} is not readable here",
            certificate.display()
        );
        return;
    }
    let root = certificate.display().to_string().replace('/', "%2F");
    let verified = with_mode(&format!("verify-full&sslrootcert={root}"))
        .get()
        .unwrap();
    let over_tls: bool = one_value(
        &verified,
        "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
    );
    assert!(over_tls);
    let Err(missing) =
        super::tls::configure(&format!("{url}?sslmode=verify-full&sslrootcert=%2Fnowhere"))
    else {
        panic!("a missing sslrootcert file was taken")
    };
    assert!(
        missing
            .to_string()
            .contains("sslrootcert=/nowhere: cannot read it"),
        "{missing}"
    );
}

#[test]
fn the_urls_hosts_are_tried_in_turn_for_one_that_is_what_target_session_attrs_asks() {
    let Some(test) = pg() else { return };
    let (url, _) = pool_on(&test, 1, std::time::Duration::from_secs(5));
    let (config, _) = super::tls::configure(&url).unwrap();
    let (Some(user), Some(database), [tokio_postgres::config::Host::Tcp(host)], [port]) = (
        config.get_user(),
        config.get_dbname(),
        config.get_hosts(),
        config.get_ports(),
    ) else {
        eprintln!("skipped: the test URL {url} is not one TCP host");
        return;
    };
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let pool_for = |attrs: &str| {
        let url = format!(
            "postgres://{user}@127.0.0.1:{closed},{host}:{port}/{database}?target_session_attrs={attrs}"
        );
        pool_at(&url, 1, std::time::Duration::from_secs(5))
    };
    // The first host refuses; the second is the test's server, which accepts writes.
    let primary = pool_for("read-write").get().unwrap();
    assert_eq!(
        one_value::<String>(&primary, "SELECT current_database()"),
        database
    );
    let (kind, message) = backend_error(pool_for("read-only").get().map(|_| ()));
    assert_eq!(kind, BackendErrorKind::Unavailable, "{message}");
    assert!(message.contains("read-only"), "{message}");
}
