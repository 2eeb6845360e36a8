//! PostgreSQL's side of `clawboo db check` and `clawboo db copy`: what can be wrong with a
//! database the server keeps sound itself, and its counters moved past copied rows.

use crate::db::{Findings, Tx};
use crate::error::Result;

/// PostgreSQL checks its pages itself and enforces every constraint it validated; what can
/// still be wrong is a constraint or index left unvalidated (a failed concurrent build),
/// and, where the `amcheck` extension is installed, a B-tree that does not match its
/// ordering.
pub(crate) fn check(tx: &dyn Tx, found: &mut Findings) -> Result<()> {
    found.checks.push("unvalidated_constraints");
    let unvalidated: Vec<String> = tx.query_map(
        "SELECT CAST(c.conrelid::regclass AS TEXT) || '.' || CAST(c.conname AS TEXT)
         FROM pg_constraint c JOIN pg_namespace n ON n.oid = c.connamespace
         WHERE n.nspname = current_schema() AND NOT c.convalidated ORDER BY 1",
        &[],
        |r| r.get(0),
    )?;
    for name in unvalidated {
        found.problems.push((
            "unvalidated_constraints",
            format!("constraint {name} is not validated"),
        ));
    }
    found.checks.push("invalid_indexes");
    let invalid: Vec<String> = tx.query_map(
        "SELECT CAST(c.relname AS TEXT) FROM pg_index i
         JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_namespace n ON n.oid = c.relnamespace
         WHERE n.nspname = current_schema() AND NOT (i.indisvalid AND i.indisready) ORDER BY 1",
        &[],
        |r| r.get(0),
    )?;
    for name in invalid {
        found.problems.push((
            "invalid_indexes",
            format!("index {name} is invalid: drop it and create it again"),
        ));
    }
    let amcheck = tx
        .query_opt(
            "SELECT 1 FROM pg_extension WHERE extname = 'amcheck'",
            &[],
            |_| Ok(()),
        )?
        .is_some();
    if amcheck {
        found.checks.push("amcheck_btree");
        let indexes: Vec<String> = tx.query_map(
            "SELECT CAST(c.relname AS TEXT) FROM pg_index i
             JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_namespace n ON n.oid = c.relnamespace
             JOIN pg_am a ON a.oid = c.relam
             WHERE n.nspname = current_schema() AND a.amname = 'btree' AND i.indisvalid ORDER BY 1",
            &[],
            |r| r.get(0),
        )?;
        for index in indexes {
            let checked = tx.query_opt(
                "SELECT 1 FROM (SELECT bt_index_check(CAST(?1 AS regclass))) AS x",
                &[&index],
                |_| Ok(()),
            );
            if let Err(e) = checked {
                found
                    .problems
                    .push(("amcheck_btree", format!("index {index}: {e}")));
            }
        }
    }
    Ok(())
}

/// Move every identity or serial counter of `tables` past the largest number they hold,
/// so the next row inserted there without a number (the next fact saved, say) gets a new
/// one.
pub(crate) fn advance_counters(tx: &dyn Tx, tables: &[&str]) -> Result<()> {
    let counters: Vec<(String, String)> = tx.query_map(
        "SELECT CAST(table_name AS TEXT), CAST(column_name AS TEXT)
         FROM information_schema.columns
         WHERE table_schema = current_schema()
           AND (is_identity = 'YES' OR column_default LIKE 'nextval(%')",
        &[],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?;
    for (table, column) in counters {
        if !tables.contains(&table.as_str()) {
            continue;
        }
        tx.query_one(
            &format!(
                "SELECT setval(pg_get_serial_sequence(?1, ?2),
                     COALESCE((SELECT MAX({column}) FROM {table}), 0) + 1, false)"
            ),
            &[&table, &column],
            |r| r.get::<i64>(0),
        )?;
    }
    Ok(())
}
