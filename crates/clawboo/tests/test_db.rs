//! The test harness's own database handle: each [`TestDb`] is a fresh database on the
//! backend under test, read back the same way on SQLite and PostgreSQL, and a PostgreSQL
//! one is dropped when its last clone goes.

#![allow(clippy::unwrap_used)]

mod common;

use common::{TestDb, no_postgres_server, sql_quote};

#[test]
fn a_test_database_starts_empty_and_reads_alike_on_either_backend() {
    let db = TestDb::new();
    db.exec(
        "CREATE TABLE t (id TEXT PRIMARY KEY, n BIGINT, note TEXT);
         INSERT INTO t VALUES ('a', 1, NULL);",
    );
    db.exec(&format!(
        "INSERT INTO t VALUES ('b', -7, {})",
        sql_quote("it's")
    ));
    assert_eq!(
        db.query_rows("SELECT id, n, note FROM t ORDER BY id"),
        vec![
            vec![Some("a".to_owned()), Some("1".to_owned()), None],
            vec![
                Some("b".to_owned()),
                Some("-7".to_owned()),
                Some("it's".to_owned())
            ],
        ]
    );
    assert_eq!(db.query_i64("SELECT COUNT(*) FROM t"), 2);
    assert_eq!(db.query_i64("SELECT n FROM t WHERE id = 'b'"), -7);
    assert_eq!(db.query_text("SELECT note FROM t WHERE id = 'b'"), "it's");
    // Another test's database does not see this one's table.
    let other = TestDb::new();
    other.exec("CREATE TABLE t (id TEXT)");
    assert_eq!(other.query_i64("SELECT COUNT(*) FROM t"), 0);
}

#[test]
fn a_postgres_test_database_is_dropped_with_its_last_clone() {
    if no_postgres_server() {
        return;
    }
    let watcher = TestDb::postgres();
    let db = TestDb::postgres();
    let url = db.db_arg().to_str().unwrap().to_owned();
    let name = url.rsplit('/').next().unwrap().to_owned();
    assert!(name.starts_with("clawboo_t_"), "{url}");
    let exists = || {
        watcher.query_i64(&format!(
            "SELECT COUNT(*) FROM pg_database WHERE datname = {}",
            sql_quote(&name)
        ))
    };
    assert_eq!(exists(), 1);
    let clone = db.clone();
    drop(db);
    assert_eq!(exists(), 1, "a clone still uses it");
    drop(clone);
    assert_eq!(exists(), 0);
}
