//! PostgreSQL's own numbered migrations (`migrations/postgres/`), applied at open under an
//! advisory lock so hosts starting together migrate once; a database a newer build
//! migrated is refused, as on SQLite.

use super::pool::Conn;
use crate::error::{Result, StoreError};

/// Every migration, in order; its position + 1 is the version it leaves behind.
const MIGRATIONS: &[(&str, &str)] = &[
    (
        "0001_schema",
        include_str!("../../migrations/postgres/0001_schema.sql"),
    ),
    (
        "0002_memory_search",
        include_str!("../../migrations/postgres/0002_memory_search.sql"),
    ),
    (
        "0003_audit_decided_by",
        include_str!("../../migrations/postgres/0003_audit_decided_by.sql"),
    ),
    (
        "0004_memory_scale",
        include_str!("../../migrations/postgres/0004_memory_scale.sql"),
    ),
    (
        "0005_agent_presence",
        include_str!("../../migrations/postgres/0005_agent_presence.sql"),
    ),
    (
        "0006_reservations_and_links",
        include_str!("../../migrations/postgres/0006_reservations_and_links.sql"),
    ),
    (
        "0007_task_short_ids",
        include_str!("../../migrations/postgres/0007_task_short_ids.sql"),
    ),
    (
        "0008_operator_activity_and_fact_retirements",
        include_str!("../../migrations/postgres/0008_operator_activity_and_fact_retirements.sql"),
    ),
    (
        "0009_memory_fts_blocks",
        include_str!("../../migrations/postgres/0009_memory_fts_blocks.sql"),
    ),
    (
        "0010_memory_fts_places",
        include_str!("../../migrations/postgres/0010_memory_fts_places.sql"),
    ),
];

/// The schema version a fully migrated PostgreSQL database reports.
pub(crate) const LATEST: i64 = MIGRATIONS.len() as i64;

/// The advisory lock every host takes while it migrates (an arbitrary constant: "clawboo"
/// in ASCII).
pub(super) const MIGRATION_LOCK: i64 = 0x0063_6c61_7762_6f6f;

/// Apply every pending migration, each in its own transaction, holding the migration lock
/// throughout; the lock is released even when a migration fails. A host that starts while
/// another migrates waits for it however long that takes, not only the connection's
/// `lock_timeout` (which a migration's own table locks are freed from as well), and the
/// connection gets its `lock_timeout` back after.
pub(super) fn apply(conn: &Conn) -> Result<()> {
    let client = conn.client();
    let lock_timeout: String = conn.run(client.query_one("SHOW lock_timeout", &[]))?.get(0);
    conn.run(client.batch_execute("SET lock_timeout = 0"))?;
    conn.run(client.execute("SELECT pg_advisory_lock($1)", &[&MIGRATION_LOCK]))?;
    let applied = apply_locked(conn);
    let unlocked = conn.run(client.execute("SELECT pg_advisory_unlock($1)", &[&MIGRATION_LOCK]));
    let restored = conn.run(client.execute(
        "SELECT set_config('lock_timeout', $1, false)",
        &[&lock_timeout],
    ));
    applied?;
    unlocked?;
    restored?;
    Ok(())
}

fn apply_locked(conn: &Conn) -> Result<()> {
    let client = conn.client();
    conn.run(client.batch_execute(
        "CREATE TABLE IF NOT EXISTS clawboo_schema (
             version     BIGINT PRIMARY KEY,
             name        TEXT NOT NULL,
             applied_at  TIMESTAMPTZ NOT NULL DEFAULT now()
         )",
    ))?;
    let row = conn.run(client.query_one(
        "SELECT CAST(COALESCE(MAX(version), 0) AS BIGINT) FROM clawboo_schema",
        &[],
    ))?;
    let found: i64 = row.get(0);
    if found > LATEST {
        return Err(StoreError::NewerSchema {
            found,
            known: LATEST,
        });
    }
    for (index, (name, sql)) in MIGRATIONS.iter().enumerate() {
        let version = index as i64 + 1;
        if version <= found {
            continue;
        }
        tracing::debug!(migration = name, "applying PostgreSQL migration");
        let script = format!(
            "BEGIN; {sql}; INSERT INTO clawboo_schema(version, name) VALUES ({version}, '{name}'); COMMIT;"
        );
        if let Err(e) = conn.run(client.batch_execute(&script)) {
            // The failed transaction is still open on this connection: end it.
            let _ = conn.run(client.batch_execute("ROLLBACK"));
            return Err(e);
        }
    }
    Ok(())
}
