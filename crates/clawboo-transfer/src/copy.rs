//! The copy: every table of [`COPIED`] from one store to another, whichever engines they
//! run on, read in one snapshot of the source and written in one transaction of the target.
//!
//! One snapshot makes the copy one instant of a live source (what a backup needs); one
//! target transaction means a copy that fails (a mismatch, a lost connection) leaves the
//! target as it was. Rows travel in pages by primary key, so memory stays bounded whatever
//! the table's size. Derived data is rebuilt on the target, never carried.

use std::collections::BTreeMap;

use clawboo_store::db::{DbRow, ToValue, Tx, Value};
use clawboo_store::reads::OwnedValue;
use clawboo_store::{Store, StoreError};

use crate::catalogue::{COPIED, Copied, DERIVED, DERIVED_COLUMNS, is_derived_column};
use crate::schema;
use crate::{Progress, TransferError};

/// Rows per page read from the source and per `INSERT` on the target.
const PAGE_ROWS: usize = 500;
/// Bound parameters per statement at most (SQLite allows 32766, PostgreSQL 65535).
const MAX_PARAMS: usize = 30_000;

/// How a copy treats a target that already holds rows.
#[derive(Debug, Clone, Copy, Default)]
pub struct CopyOptions {
    /// Replace what the target holds (its copied tables are emptied first, in the copy's
    /// transaction); without it a non-empty target is refused.
    pub replace: bool,
}

/// What a copy moved.
#[derive(Debug, Clone, Default)]
pub struct CopyReport {
    /// Rows per copied table, the same on both sides (counted and compared).
    pub rows: BTreeMap<String, u64>,
    /// The derived data the target rebuilt instead of receiving it (name: how).
    pub derived: Vec<(&'static str, &'static str)>,
}

impl CopyReport {
    /// Rows copied in all.
    pub fn total_rows(&self) -> u64 {
        self.rows.values().sum()
    }
}

fn read_cells(row: &dyn DbRow, columns: usize) -> Result<Vec<OwnedValue>, StoreError> {
    (0..columns)
        .map(|i| row.value(i).map(OwnedValue::from))
        .collect()
}

/// Copy every table of `source` into `target` ([`CopyOptions`] says what to do with a
/// target that holds rows), rebuild the derived data there, advance PostgreSQL's
/// identity counters past the copied numbers, and compare both sides' row counts: a
/// mismatch is an error and the target keeps nothing of the copy.
pub fn copy(
    source: &Store,
    target: &Store,
    options: CopyOptions,
    progress: &mut dyn Progress,
) -> Result<CopyReport, TransferError> {
    let report = source.snapshot(|src| {
        let plans = plan(src, target)?;
        let mut counts = BTreeMap::new();
        for (table, _) in &plans {
            counts.insert(table.name.to_owned(), count(src, table.name)?);
        }
        target.write(|dst| {
            let occupied = occupied_tables(dst)?;
            if !occupied.is_empty() {
                if !options.replace {
                    return Err(TransferError::TargetNotEmpty {
                        tables: occupied.join(", "),
                    });
                }
                clear(dst)?;
            }
            for (table, columns) in &plans {
                let rows = counts.get(table.name).copied().unwrap_or(0);
                progress.table(table.name, rows);
                copy_table(src, dst, table, columns, progress)?;
                progress.table_done();
            }
            progress.step("rebuilding the full-text index on the target");
            clawboo_memory::rebuild_text_index(dst)?;
            let copied: Vec<&str> = COPIED.iter().map(|t| t.name).collect();
            dst.advance_counters(&copied)?;
            for (table, expected) in &counts {
                let found = count(dst, table)?;
                if found != *expected {
                    return Err(TransferError::CountMismatch {
                        table: table.clone(),
                        source_rows: *expected,
                        target_rows: found,
                    });
                }
            }
            Ok(CopyReport {
                rows: counts,
                derived: derived_on(dst),
            })
        })
    })?;
    // pgvector's column and HNSW indexes are memory's to make: its open step fills the
    // column of every fact that has vector bytes and makes each dimension's index.
    progress.step("preparing vector search on the target");
    (clawboo_memory::EXTENSION.opened)(target)?;
    Ok(report)
}

/// Each copied table with the columns it carries: the source's live columns less the
/// derived ones, which the target must have too.
fn plan(src: &dyn Tx, target: &Store) -> Result<Vec<(Copied, Vec<String>)>, TransferError> {
    target.read(|dst| {
        let mut plans = Vec::new();
        for table in COPIED {
            let columns: Vec<String> = schema::columns(src, table.name)?
                .into_iter()
                .filter(|c| !is_derived_column(table.name, c))
                .collect();
            if columns.is_empty() {
                return Err(TransferError::Schema {
                    table: table.name.to_owned(),
                    detail: "the source has no such table".into(),
                });
            }
            let target_columns = schema::columns(dst, table.name)?;
            if let Some(missing) = columns.iter().find(|c| !target_columns.contains(c)) {
                return Err(TransferError::Schema {
                    table: table.name.to_owned(),
                    detail: format!(
                        "the target has no column {missing}: both databases must be at the \
                         schema of this build (open each with this clawboo once)"
                    ),
                });
            }
            plans.push((*table, columns));
        }
        Ok(plans)
    })
}

/// Rows in `table`.
pub(crate) fn count(tx: &dyn Tx, table: &str) -> Result<u64, StoreError> {
    tx.query_one(&format!("SELECT count(*) FROM {table}"), &[], |r| r.get(0))
}

/// The copied tables that hold a row.
pub(crate) fn occupied_tables(tx: &dyn Tx) -> Result<Vec<String>, StoreError> {
    let mut occupied = Vec::new();
    for table in COPIED {
        let any = tx.query_opt(
            &format!("SELECT 1 FROM {} LIMIT 1", table.name),
            &[],
            |_| Ok(()),
        )?;
        if any.is_some() {
            occupied.push(table.name.to_owned());
        }
    }
    Ok(occupied)
}

/// Empty every copied table, children first; the derived data follows (FTS5 through
/// memory's triggers, PostgreSQL's statistics when they are rebuilt).
fn clear(dst: &dyn Tx) -> Result<(), StoreError> {
    for table in COPIED.iter() {
        for column in table.self_refs {
            dst.execute(
                &format!(
                    "UPDATE {} SET {column} = NULL WHERE {column} IS NOT NULL",
                    table.name
                ),
                &[],
            )?;
        }
    }
    for table in COPIED.iter().rev() {
        dst.execute(&format!("DELETE FROM {}", table.name), &[])?;
    }
    Ok(())
}

/// `?from, ?from+1, …` for `n` columns.
fn placeholders(from: usize, n: usize) -> String {
    (from..from + n)
        .map(|i| format!("?{i}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Page through `table` of `src` by its key and insert each page into `dst`; then set the
/// self-referencing columns written as `NULL`.
fn copy_table(
    src: &dyn Tx,
    dst: &dyn Tx,
    table: &Copied,
    columns: &[String],
    progress: &mut dyn Progress,
) -> Result<(), TransferError> {
    let page = PAGE_ROWS.min(MAX_PARAMS / columns.len().max(1)).max(1);
    let key_at: Vec<usize> = table
        .key
        .iter()
        .map(|k| {
            columns
                .iter()
                .position(|c| c == k)
                .ok_or_else(|| TransferError::Schema {
                    table: table.name.to_owned(),
                    detail: format!("its key column {k} is missing"),
                })
        })
        .collect::<Result<_, _>>()?;
    let deferred: Vec<usize> = table
        .self_refs
        .iter()
        .filter_map(|r| columns.iter().position(|c| c == r))
        .collect();
    let column_list = columns.join(", ");
    let reader = KeyPages::new(table, &column_list);
    let mut insert_sql: Option<(usize, String)> = None;
    let mut after: Option<Vec<OwnedValue>> = None;
    loop {
        let rows = reader.page(src, after.as_deref(), page, columns.len())?;
        let Some(last) = rows.last() else { break };
        after = Some(key_at.iter().map(|&i| last[i].clone()).collect());
        let sql = match &insert_sql {
            Some((n, sql)) if *n == rows.len() => sql.clone(),
            _ => {
                let values: Vec<String> = (0..rows.len())
                    .map(|r| format!("({})", placeholders(r * columns.len() + 1, columns.len())))
                    .collect();
                let sql = format!(
                    "INSERT INTO {} ({column_list}) VALUES {}",
                    table.name,
                    values.join(", ")
                );
                insert_sql = Some((rows.len(), sql.clone()));
                sql
            }
        };
        let params: Vec<&dyn ToValue> = rows
            .iter()
            .flat_map(|row| {
                row.iter().enumerate().map(|(i, cell)| {
                    if deferred.contains(&i) {
                        &Value::Null as &dyn ToValue
                    } else {
                        cell as &dyn ToValue
                    }
                })
            })
            .collect();
        dst.execute(&sql, &params)?;
        progress.advance(rows.len() as u64);
        if rows.len() < page {
            break;
        }
    }
    for column in table.self_refs {
        set_self_refs(src, dst, table, column)?;
    }
    Ok(())
}

/// Set `column` of every row of `table` in `dst` to its value in `src`, a page at a time.
fn set_self_refs(
    src: &dyn Tx,
    dst: &dyn Tx,
    table: &Copied,
    column: &str,
) -> Result<(), TransferError> {
    let key = table.key.join(", ");
    let mut selected = key.clone();
    selected.push_str(", ");
    selected.push_str(column);
    let reader = KeyPages::new(table, &selected).filtered(format!("{column} IS NOT NULL"));
    let width = table.key.len() + 1;
    let conditions: Vec<String> = table
        .key
        .iter()
        .enumerate()
        .map(|(i, k)| format!("{k} = ?{}", i + 2))
        .collect();
    let update = format!(
        "UPDATE {} SET {column} = ?1 WHERE {}",
        table.name,
        conditions.join(" AND ")
    );
    let mut after: Option<Vec<OwnedValue>> = None;
    loop {
        let rows = reader.page(src, after.as_deref(), PAGE_ROWS, width)?;
        let Some(last) = rows.last() else { break };
        after = Some(last[..table.key.len()].to_vec());
        for row in &rows {
            let mut params: Vec<&dyn ToValue> = vec![&row[table.key.len()]];
            params.extend(row[..table.key.len()].iter().map(|c| c as &dyn ToValue));
            dst.execute(&update, &params)?;
        }
        if rows.len() < PAGE_ROWS {
            break;
        }
    }
    Ok(())
}

/// Reads a table a page at a time in its key's order, each page after the last key seen
/// (row values compare key tuples on both engines).
struct KeyPages<'a> {
    table: &'a Copied,
    columns: &'a str,
    filter: Option<String>,
}

impl<'a> KeyPages<'a> {
    fn new(table: &'a Copied, columns: &'a str) -> KeyPages<'a> {
        KeyPages {
            table,
            columns,
            filter: None,
        }
    }

    fn filtered(mut self, condition: String) -> KeyPages<'a> {
        self.filter = Some(condition);
        self
    }

    fn page(
        &self,
        tx: &dyn Tx,
        after: Option<&[OwnedValue]>,
        limit: usize,
        width: usize,
    ) -> Result<Vec<Vec<OwnedValue>>, StoreError> {
        let key = self.table.key.join(", ");
        let mut conditions: Vec<String> = self.filter.iter().cloned().collect();
        if after.is_some() {
            conditions.push(format!(
                "({key}) > ({})",
                placeholders(2, self.table.key.len())
            ));
        }
        let filter = if conditions.is_empty() {
            String::new()
        } else {
            format!("WHERE {}", conditions.join(" AND "))
        };
        let sql = format!(
            "SELECT {} FROM {} {filter} ORDER BY {key} LIMIT ?1",
            self.columns, self.table.name
        );
        let mut params: Vec<&dyn ToValue> = vec![&limit];
        if let Some(after) = after {
            params.extend(after.iter().map(|c| c as &dyn ToValue));
        }
        tx.query_map(&sql, &params, |row| read_cells(row, width))
    }
}

/// The derived data of `dst`'s engine, as the report lists it.
fn derived_on(dst: &dyn Tx) -> Vec<(&'static str, &'static str)> {
    let engine = schema::engine(dst);
    let mut derived: Vec<(&'static str, &'static str)> = DERIVED
        .iter()
        .filter(|d| d.engine == engine)
        .map(|d| (d.name, d.rebuilt))
        .collect();
    derived.extend(
        DERIVED_COLUMNS
            .iter()
            .filter(|(on, ..)| *on == engine)
            .map(|(_, _, column, how)| (*column, *how)),
    );
    derived
}
