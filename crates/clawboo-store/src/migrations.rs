//! Numbered, embedded schema migrations, applied on open. An applied migration is never
//! edited: change the schema by adding the next file.

use rusqlite::{Connection, TransactionBehavior};

use crate::error::{Result, StoreError};

/// Every migration, in order; its position + 1 is the `user_version` it leaves behind.
const MIGRATIONS: &[(&str, &str)] = &[
    ("0001_board", include_str!("../migrations/0001_board.sql")),
    ("0002_memory", include_str!("../migrations/0002_memory.sql")),
    (
        "0003_teamchat",
        include_str!("../migrations/0003_teamchat.sql"),
    ),
    ("0004_tools", include_str!("../migrations/0004_tools.sql")),
    (
        "0005_fts_once_per_commit",
        include_str!("../migrations/0005_fts_once_per_commit.sql"),
    ),
    (
        "0006_fact_scope_index",
        include_str!("../migrations/0006_fact_scope_index.sql"),
    ),
    (
        "0007_fact_recency_index",
        include_str!("../migrations/0007_fact_recency_index.sql"),
    ),
    (
        "0008_drop_unused_task_team_index",
        include_str!("../migrations/0008_drop_unused_task_team_index.sql"),
    ),
    (
        "0009_board_order_index",
        include_str!("../migrations/0009_board_order_index.sql"),
    ),
    (
        "0010_approval_grants_per_identity",
        include_str!("../migrations/0010_approval_grants_per_identity.sql"),
    ),
    ("0011_leases", include_str!("../migrations/0011_leases.sql")),
    (
        "0012_audit_decided_by",
        include_str!("../migrations/0012_audit_decided_by.sql"),
    ),
    (
        "0013_agent_presence",
        include_str!("../migrations/0013_agent_presence.sql"),
    ),
    (
        "0014_reservations_and_links",
        include_str!("../migrations/0014_reservations_and_links.sql"),
    ),
    (
        "0015_task_short_ids",
        include_str!("../migrations/0015_task_short_ids.sql"),
    ),
    (
        "0016_operator_activity_and_fact_retirements",
        include_str!("../migrations/0016_operator_activity_and_fact_retirements.sql"),
    ),
];

/// The schema version a fully migrated database reports (`PRAGMA user_version`).
pub(crate) const LATEST: i64 = MIGRATIONS.len() as i64;

/// Apply every pending migration. Each runs in its own `BEGIN IMMEDIATE` transaction and
/// re-reads the version inside it, so processes opening the same file at once never
/// apply one twice. A file a newer build migrated is refused: this build does not know what
/// its later migrations changed (which triggers to expect, say).
pub(crate) fn apply(conn: &mut Connection) -> Result<()> {
    let found: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    if found > LATEST {
        return Err(StoreError::NewerSchema {
            found,
            known: LATEST,
        });
    }
    for (index, (name, sql)) in MIGRATIONS.iter().enumerate() {
        let target = index as i64 + 1;
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let current: i64 = tx.query_row("PRAGMA user_version", [], |r| r.get(0))?;
        if current >= target {
            continue;
        }
        tracing::debug!(migration = name, "applying migration");
        tx.execute_batch(sql)?;
        tx.pragma_update(None, "user_version", target)?;
        tx.commit()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fresh_database_reaches_latest_version_and_reopen_is_idempotent() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.db");
        for _ in 0..2 {
            let mut conn = Connection::open(&path).unwrap();
            apply(&mut conn).unwrap();
            let v: i64 = conn
                .query_row("PRAGMA user_version", [], |r| r.get(0))
                .unwrap();
            assert_eq!(v, LATEST);
        }
    }

    #[test]
    fn a_database_from_a_newer_build_is_refused_untouched() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("newer.db");
        let mut conn = Connection::open(&path).unwrap();
        conn.pragma_update(None, "user_version", LATEST + 1)
            .unwrap();
        let err = apply(&mut conn).unwrap_err();
        assert!(
            err.to_string()
                .contains(&format!("schema version {}", LATEST + 1)),
            "{err}"
        );
        assert!(err.to_string().contains("upgrade clawboo"), "{err}");
        let tables: i64 = conn
            .query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get(0))
            .unwrap();
        assert_eq!(tables, 0, "nothing was created");
    }
}
