//! What a database's live schema holds: its tables and their columns, read from the
//! engine's own catalogue (`sqlite_master`, `information_schema`).

use clawboo_store::StoreError;
use clawboo_store::db::{Dialect, Tx};

use crate::catalogue::Engine;

/// The engine `tx` runs on, as the catalogue names it.
pub fn engine(tx: &dyn Tx) -> Engine {
    match tx.dialect() {
        Dialect::Sqlite => Engine::Sqlite,
        Dialect::Postgres => Engine::Postgres,
    }
}

/// Every table of the database (SQLite's own `sqlite_*` tables left out), sorted.
pub fn tables(tx: &dyn Tx) -> Result<Vec<String>, StoreError> {
    let sql = match tx.dialect() {
        Dialect::Sqlite => {
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\'
             ORDER BY name"
        }
        Dialect::Postgres => {
            "SELECT CAST(table_name AS TEXT) FROM information_schema.tables
             WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'
             ORDER BY 1"
        }
    };
    tx.query_map(sql, &[], |r| r.get(0))
}

/// The columns of `table`, in their declared order.
pub fn columns(tx: &dyn Tx, table: &str) -> Result<Vec<String>, StoreError> {
    let sql = match tx.dialect() {
        Dialect::Sqlite => "SELECT name FROM pragma_table_info(?1) ORDER BY cid",
        Dialect::Postgres => {
            "SELECT CAST(column_name AS TEXT) FROM information_schema.columns
             WHERE table_schema = current_schema() AND table_name = ?1
             ORDER BY ordinal_position"
        }
    };
    tx.query_map(sql, &[&table], |r| r.get(0))
}
