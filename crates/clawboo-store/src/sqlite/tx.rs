//! The SQLite backend's [`Tx`]: a rusqlite connection inside the store's transaction, its
//! statements prepared once per connection (rusqlite's statement cache).

use rusqlite::Connection;
use rusqlite::types::{ToSqlOutput, ValueRef};

use crate::db::{DbRow, Dialect, Findings, Params, PerEngine, Tx, Value};
use crate::error::{BackendError, BackendErrorKind, Result, StoreError};

/// A connection the store has opened a transaction on (or, for reads, one whose
/// statements each see a committed state).
pub(crate) struct SqliteTx<'c>(pub(crate) &'c Connection);

/// One parameter as rusqlite binds it, borrowed from the caller's value.
struct Bind<'a>(Value<'a>);

impl rusqlite::ToSql for Bind<'_> {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::Borrowed(match self.0 {
            Value::Null => ValueRef::Null,
            Value::Int(i) => ValueRef::Integer(i),
            Value::Real(r) => ValueRef::Real(r),
            Value::Text(t) => ValueRef::Text(t.as_bytes()),
            Value::Blob(b) => ValueRef::Blob(b),
        }))
    }
}

fn binds<'p>(params: Params<'p>) -> impl Iterator<Item = Bind<'p>> + 'p {
    params.iter().map(|p| Bind(p.to_value()))
}

struct SqliteRow<'r, 's>(&'r rusqlite::Row<'s>);

impl DbRow for SqliteRow<'_, '_> {
    fn value(&self, index: usize) -> Result<Value<'_>> {
        Ok(match self.0.get_ref(index)? {
            ValueRef::Null => Value::Null,
            ValueRef::Integer(i) => Value::Int(i),
            ValueRef::Real(r) => Value::Real(r),
            ValueRef::Text(t) => Value::Text(std::str::from_utf8(t).map_err(|e| {
                StoreError::Backend(BackendError {
                    kind: BackendErrorKind::Corrupt,
                    message: format!("column {index} is not UTF-8 text: {e}"),
                })
            })?),
            ValueRef::Blob(b) => Value::Blob(b),
        })
    }

    fn columns(&self) -> usize {
        AsRef::<rusqlite::Statement<'_>>::as_ref(self.0).column_count()
    }
}

impl Tx for SqliteTx<'_> {
    fn dialect(&self) -> Dialect {
        Dialect::Sqlite
    }

    fn check_integrity(&self, found: &mut Findings) -> Result<()> {
        super::integrity::check(self, found)
    }

    fn advance_counters(&self, _tables: &[&str]) -> Result<()> {
        Ok(())
    }

    fn statement(&self, per_engine: &PerEngine) -> &'static str {
        per_engine.sqlite
    }

    fn execute(&self, sql: &str, params: Params<'_>) -> Result<usize> {
        let mut stmt = self.0.prepare_cached(sql)?;
        Ok(stmt.execute(rusqlite::params_from_iter(binds(params)))?)
    }

    fn query_each(
        &self,
        sql: &str,
        params: Params<'_>,
        each: &mut dyn FnMut(&dyn DbRow) -> Result<()>,
    ) -> Result<()> {
        let mut stmt = self.0.prepare_cached(sql)?;
        let mut rows = stmt.query(rusqlite::params_from_iter(binds(params)))?;
        while let Some(row) = rows.next()? {
            each(&SqliteRow(row))?;
        }
        Ok(())
    }

    fn serialize_on(&self, _key: &str) -> Result<()> {
        // A write transaction is `BEGIN IMMEDIATE`: it already is the only writer.
        Ok(())
    }

    fn notify(&self, _topic: &str) -> Result<()> {
        Ok(())
    }
}
