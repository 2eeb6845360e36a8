//! What a database's live schema holds: its tables and their columns, read from the
//! engine's own catalogue (`sqlite_master`, `information_schema`).

use clawboo_store::StoreError;
use clawboo_store::db::{PerEngine, Tx};

use crate::catalogue::Engine;

/// The engine `tx` runs on, as the catalogue names it.
pub fn engine(tx: &dyn Tx) -> Engine {
    tx.dialect()
}

/// Every table of the database, SQLite's own `sqlite_*` tables left out, by name.
const TABLES: PerEngine = PerEngine {
    sqlite: "SELECT name FROM sqlite_master
             WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name",
    postgres: "SELECT CAST(table_name AS TEXT) FROM information_schema.tables
               WHERE table_schema = current_schema() AND table_type = 'BASE TABLE' ORDER BY 1",
};

/// The columns of table `?1`, in their declared order.
const COLUMNS: PerEngine = PerEngine {
    sqlite: "SELECT name FROM pragma_table_info(?1) ORDER BY cid",
    postgres: "SELECT CAST(column_name AS TEXT) FROM information_schema.columns
               WHERE table_schema = current_schema() AND table_name = ?1
               ORDER BY ordinal_position",
};

/// Every table of the database (SQLite's own `sqlite_*` tables left out), sorted.
pub fn tables(tx: &dyn Tx) -> Result<Vec<String>, StoreError> {
    tx.query_map(tx.statement(&TABLES), &[], |r| r.get(0))
}

/// The columns of `table`, in their declared order.
pub fn columns(tx: &dyn Tx, table: &str) -> Result<Vec<String>, StoreError> {
    tx.query_map(tx.statement(&COLUMNS), &[&table], |r| r.get(0))
}
