//! The neutral SQL interface every domain rule runs on, whichever backend holds the data.
//!
//! Domain modules write each statement once, in the SQL both backends accept, and run it
//! through a [`Tx`]: `?N` placeholders (the PostgreSQL backend rewrites them to `$N`),
//! integers for booleans and millisecond times, `COALESCE`, `IS NOT DISTINCT FROM`,
//! `string_agg(… ORDER BY …)`, `INSERT … ON CONFLICT`, `RETURNING`, and `CAST(? AS BIGINT)`
//! where PostgreSQL could not otherwise tell a parameter's type. A rule that needs one
//! writer at a time says so with [`Tx::serialize_on`]: SQLite's `BEGIN IMMEDIATE` already
//! gives it, PostgreSQL takes a transaction-scoped advisory lock. Where a statement truly
//! differs by engine (SQLite's `INDEXED BY` hints, an array only PostgreSQL has) a module
//! writes a [`PerEngine`] pair; a crate whose work differs beyond statements (memory's
//! full-text and vector search) keeps an implementation per engine and picks one by
//! [`Tx::dialect`] (or `Store::dialect`) in one place.
//!
//! Public because the domain crates over the store (memory) write their rules on it too.
//!
//! This is hand-written rather than an ORM or `sqlx`: `sqlx`'s SQLite driver links its own
//! `libsqlite3-sys` beside rusqlite's, and the SQLite backend keeps rusqlite's cached
//! statements and group commit, which an abstraction over both engines' async drivers
//! would give up.

use std::fmt;

use crate::error::{BackendError, BackendErrorKind, Result, StoreError};

/// Which SQL engine a [`Tx`] runs on, for the few statements written once per engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    Sqlite,
    Postgres,
}

/// One SQL value, borrowed: a parameter to bind or a column of a row being read.
/// Booleans travel as `Int` (0 or 1) on both engines.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Value<'a> {
    Null,
    Int(i64),
    Real(f64),
    Text(&'a str),
    Blob(&'a [u8]),
}

impl Value<'_> {
    fn type_name(&self) -> &'static str {
        match self {
            Value::Null => "NULL",
            Value::Int(_) => "an integer",
            Value::Real(_) => "a real",
            Value::Text(_) => "text",
            Value::Blob(_) => "a blob",
        }
    }
}

/// A Rust value that binds as a statement parameter.
pub trait ToValue {
    /// The value as bound.
    fn to_value(&self) -> Value<'_>;
}

impl ToValue for i64 {
    fn to_value(&self) -> Value<'_> {
        Value::Int(*self)
    }
}

impl ToValue for i32 {
    fn to_value(&self) -> Value<'_> {
        Value::Int(i64::from(*self))
    }
}

impl ToValue for u32 {
    fn to_value(&self) -> Value<'_> {
        Value::Int(i64::from(*self))
    }
}

impl ToValue for usize {
    fn to_value(&self) -> Value<'_> {
        Value::Int(i64::try_from(*self).unwrap_or(i64::MAX))
    }
}

impl ToValue for u64 {
    fn to_value(&self) -> Value<'_> {
        Value::Int(i64::try_from(*self).unwrap_or(i64::MAX))
    }
}

impl ToValue for bool {
    fn to_value(&self) -> Value<'_> {
        Value::Int(i64::from(*self))
    }
}

impl ToValue for f64 {
    fn to_value(&self) -> Value<'_> {
        Value::Real(*self)
    }
}

impl ToValue for str {
    fn to_value(&self) -> Value<'_> {
        Value::Text(self)
    }
}

impl ToValue for String {
    fn to_value(&self) -> Value<'_> {
        Value::Text(self)
    }
}

impl ToValue for [u8] {
    fn to_value(&self) -> Value<'_> {
        Value::Blob(self)
    }
}

impl ToValue for Vec<u8> {
    fn to_value(&self) -> Value<'_> {
        Value::Blob(self)
    }
}

impl<T: ToValue + ?Sized> ToValue for &T {
    fn to_value(&self) -> Value<'_> {
        (**self).to_value()
    }
}

impl<T: ToValue> ToValue for Option<T> {
    fn to_value(&self) -> Value<'_> {
        self.as_ref().map_or(Value::Null, ToValue::to_value)
    }
}

impl ToValue for Value<'_> {
    fn to_value(&self) -> Value<'_> {
        *self
    }
}

/// A Rust value read from a column.
pub trait FromValue: Sized {
    /// The value read, or why it is not a `Self`.
    fn from_value(value: Value<'_>) -> std::result::Result<Self, String>;
}

fn mismatch<T>(value: Value<'_>, wanted: &str) -> std::result::Result<T, String> {
    Err(format!("expected {wanted}, found {}", value.type_name()))
}

impl FromValue for i64 {
    fn from_value(value: Value<'_>) -> std::result::Result<Self, String> {
        match value {
            Value::Int(i) => Ok(i),
            other => mismatch(other, "an integer"),
        }
    }
}

impl FromValue for i32 {
    fn from_value(value: Value<'_>) -> std::result::Result<Self, String> {
        let wide = i64::from_value(value)?;
        i32::try_from(wide).map_err(|_| format!("{wide} does not fit 32 bits"))
    }
}

impl FromValue for u32 {
    fn from_value(value: Value<'_>) -> std::result::Result<Self, String> {
        let wide = i64::from_value(value)?;
        u32::try_from(wide).map_err(|_| format!("{wide} does not fit an unsigned 32 bits"))
    }
}

impl FromValue for u64 {
    fn from_value(value: Value<'_>) -> std::result::Result<Self, String> {
        let wide = i64::from_value(value)?;
        u64::try_from(wide).map_err(|_| format!("{wide} is negative"))
    }
}

impl FromValue for usize {
    fn from_value(value: Value<'_>) -> std::result::Result<Self, String> {
        let wide = i64::from_value(value)?;
        usize::try_from(wide).map_err(|_| format!("{wide} is negative"))
    }
}

impl FromValue for bool {
    fn from_value(value: Value<'_>) -> std::result::Result<Self, String> {
        Ok(i64::from_value(value)? != 0)
    }
}

impl FromValue for f64 {
    fn from_value(value: Value<'_>) -> std::result::Result<Self, String> {
        match value {
            Value::Real(r) => Ok(r),
            // An integral REAL may come back as an integer from SQLite's arithmetic.
            Value::Int(i) => Ok(i as f64),
            other => mismatch(other, "a real"),
        }
    }
}

impl FromValue for String {
    fn from_value(value: Value<'_>) -> std::result::Result<Self, String> {
        match value {
            Value::Text(t) => Ok(t.to_owned()),
            other => mismatch(other, "text"),
        }
    }
}

impl FromValue for Vec<u8> {
    fn from_value(value: Value<'_>) -> std::result::Result<Self, String> {
        match value {
            Value::Blob(b) => Ok(b.to_vec()),
            other => mismatch(other, "a blob"),
        }
    }
}

impl<T: FromValue> FromValue for Option<T> {
    fn from_value(value: Value<'_>) -> std::result::Result<Self, String> {
        match value {
            Value::Null => Ok(None),
            other => T::from_value(other).map(Some),
        }
    }
}

/// One row of a result, read column by column (0-based).
pub trait DbRow {
    /// Column `index`'s value; an error when there is no such column.
    fn value(&self, index: usize) -> Result<Value<'_>>;

    /// How many columns the row has.
    fn columns(&self) -> usize;
}

impl dyn DbRow + '_ {
    /// Column `index` as a `T`; a type mismatch is a backend error naming the column.
    pub fn get<T: FromValue>(&self, index: usize) -> Result<T> {
        let value = self.value(index)?;
        T::from_value(value).map_err(|why| {
            StoreError::Backend(BackendError {
                kind: BackendErrorKind::Other,
                message: format!("column {index}: {why}"),
            })
        })
    }
}

impl dyn DbRow + Send + Sync + '_ {
    /// Column `index` as a `T`, as for any row ([`crate::reads::Row`]).
    pub fn get<T: FromValue>(&self, index: usize) -> Result<T> {
        (self as &dyn DbRow).get(index)
    }
}

/// The parameters of one statement, bound in order to `?1`, `?2`, ….
pub type Params<'p> = &'p [&'p dyn ToValue];

/// What takes the rows of one query of a batch.
type TakeRow<'a> = Box<dyn FnMut(&dyn DbRow) -> Result<()> + 'a>;

/// One query of a [`Tx::query_batch`]: its statement, parameters, and what takes its rows.
pub struct Batched<'a> {
    sql: &'a str,
    params: Vec<&'a dyn ToValue>,
    each: TakeRow<'a>,
}

impl<'a> Batched<'a> {
    pub(crate) fn new(
        sql: &'a str,
        params: &[&'a dyn ToValue],
        each: impl FnMut(&dyn DbRow) -> Result<()> + 'a,
    ) -> Batched<'a> {
        Batched {
            sql,
            params: params.to_vec(),
            each: Box::new(each),
        }
    }

    pub(crate) fn sql(&self) -> &'a str {
        self.sql
    }

    pub(crate) fn params(&self) -> &[&'a dyn ToValue] {
        &self.params
    }

    /// Hand one of its rows to whoever takes them.
    pub(crate) fn take(&mut self, row: &dyn DbRow) -> Result<()> {
        (self.each)(row)
    }
}

/// A statement written once per engine, where the two truly differ (an index hint only
/// SQLite needs, an array only PostgreSQL has). The engine running the transaction picks
/// its own form ([`Tx::statement`]), so no domain module branches on the engine.
#[derive(Debug, Clone, Copy)]
pub struct PerEngine {
    pub sqlite: &'static str,
    pub postgres: &'static str,
}

/// A connection inside a transaction (or, for reads, a connection whose every statement
/// sees one committed state): what domain code runs its SQL on.
pub trait Tx {
    /// Which engine this is, for the statements written once per engine.
    fn dialect(&self) -> Dialect;

    /// This engine's form of a statement written once per engine.
    fn statement(&self, per_engine: &PerEngine) -> &'static str;

    /// Run a statement that returns no rows; the number of rows it changed.
    fn execute(&self, sql: &str, params: Params<'_>) -> Result<usize>;

    /// Run a query, handing each row to `each` in order; stops at `each`'s first error.
    fn query_each(
        &self,
        sql: &str,
        params: Params<'_>,
        each: &mut dyn FnMut(&dyn DbRow) -> Result<()>,
    ) -> Result<()>;

    /// Run `batch`'s queries in order, as one after another (each sees what the ones
    /// before it changed), handing each one's rows to it; stops at the first error. Meant
    /// for a transaction, where that error aborts the rest. On PostgreSQL they travel in
    /// one round trip, which is most of what a short call costs there; SQLite, in process,
    /// runs them one by one.
    fn query_batch(&self, batch: &mut [Batched<'_>]) -> Result<()> {
        for Batched { sql, params, each } in batch {
            self.query_each(sql, params, &mut |row| each(row))?;
        }
        Ok(())
    }

    /// Make the rest of this transaction the only one holding `key` until it ends, so a
    /// read-then-write rule keyed by `key` (a cap, a room's next seq) runs one at a time
    /// across processes and hosts. Free on SQLite, whose write transaction already is the
    /// only writer.
    fn serialize_on(&self, key: &str) -> Result<()>;

    /// Tell every process on this database, once this transaction commits, that `topic`
    /// changed, so their waiters wake at once. Domain rules call [`crate::events::raise`],
    /// which sends the event's topic here and publishes it in this process too. SQLite's
    /// processes share one host and poll: nothing to send there.
    fn notify(&self, topic: &str) -> Result<()>;

    /// Run the engine's own integrity checks on this database (`clawboo db check`), adding
    /// what they ran and found to `found`.
    fn check_integrity(&self, found: &mut Findings) -> Result<()>;

    /// Move the counters that number the rows of `tables` past the largest number they
    /// hold, after rows were written with their numbers given (`clawboo db copy`), so the
    /// next row inserted without one gets a new number. SQLite needs nothing: it numbers
    /// from the largest row.
    fn advance_counters(&self, tables: &[&str]) -> Result<()>;
}

/// What a check of a database ran and found ([`Tx::check_integrity`], and the crates over
/// the store that check their own data).
#[derive(Debug, Default)]
pub struct Findings {
    /// The checks run, by name, in order.
    pub checks: Vec<&'static str>,
    /// What they found wrong: the check's name and what is wrong, in words.
    pub problems: Vec<(&'static str, String)>,
}

impl dyn Tx + '_ {
    /// Every row, each mapped by `f`.
    pub fn query_map<T>(
        &self,
        sql: &str,
        params: Params<'_>,
        mut f: impl FnMut(&dyn DbRow) -> Result<T>,
    ) -> Result<Vec<T>> {
        let mut out = Vec::new();
        self.query_each(sql, params, &mut |row| {
            out.push(f(row)?);
            Ok(())
        })?;
        Ok(out)
    }

    /// The first row mapped by `f`, or `None` when there is none.
    pub fn query_opt<T>(
        &self,
        sql: &str,
        params: Params<'_>,
        f: impl FnOnce(&dyn DbRow) -> Result<T>,
    ) -> Result<Option<T>> {
        let mut f = Some(f);
        let mut out = None;
        self.query_each(sql, params, &mut |row| {
            if let Some(f) = f.take() {
                out = Some(f(row)?);
            }
            Ok(())
        })?;
        Ok(out)
    }

    /// The first row mapped by `f`; a statement that returns no row is a backend error
    /// (use it where the SQL always returns one, as `SELECT count(*)` does).
    pub fn query_one<T>(
        &self,
        sql: &str,
        params: Params<'_>,
        f: impl FnOnce(&dyn DbRow) -> Result<T>,
    ) -> Result<T> {
        self.query_opt(sql, params, f)?.ok_or_else(|| {
            StoreError::Backend(BackendError {
                kind: BackendErrorKind::Other,
                message: "query returned no rows".into(),
            })
        })
    }
}

impl fmt::Debug for dyn Tx + '_ {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tx")
            .field("dialect", &self.dialect())
            .finish_non_exhaustive()
    }
}

/// Rewrite `?N` placeholders to PostgreSQL's `$N`, leaving quoted text, quoted names and
/// comments alone. Written by hand: no crate does exactly this, and the PostgreSQL backend
/// caches the result per statement text, so it runs once per statement.
pub(crate) fn dollar_placeholders(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len());
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' | '"' => {
                out.push(c);
                for inner in chars.by_ref() {
                    out.push(inner);
                    if inner == c {
                        break;
                    }
                }
            }
            '-' if chars.peek() == Some(&'-') => {
                out.push(c);
                for inner in chars.by_ref() {
                    out.push(inner);
                    if inner == '\n' {
                        break;
                    }
                }
            }
            '?' if chars.peek().is_some_and(char::is_ascii_digit) => out.push('$'),
            _ => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_become_dollars_outside_quotes_and_comments() {
        assert_eq!(
            dollar_placeholders("SELECT a FROM t WHERE b = ?1 AND c = '?2' AND \"?3\" = ?12"),
            "SELECT a FROM t WHERE b = $1 AND c = '?2' AND \"?3\" = $12"
        );
        assert_eq!(
            dollar_placeholders("SELECT ?1 -- ?2 here\n, ?2"),
            "SELECT $1 -- ?2 here\n, $2"
        );
        assert_eq!(
            dollar_placeholders("SELECT 'it''s ?1', ?1"),
            "SELECT 'it''s ?1', $1"
        );
    }

    #[test]
    fn values_convert_both_ways() {
        assert_eq!(Some("x").to_value(), Value::Text("x"));
        assert_eq!(None::<i64>.to_value(), Value::Null);
        assert_eq!(true.to_value(), Value::Int(1));
        assert_eq!(Option::<String>::from_value(Value::Null), Ok(None));
        assert_eq!(bool::from_value(Value::Int(0)), Ok(false));
        assert!(i64::from_value(Value::Text("1")).is_err());
        assert_eq!(f64::from_value(Value::Int(2)), Ok(2.0));
    }
}

/// A value that changes whenever the database may have changed: a commit through this
/// store or through any other connection (another process included). Caches compare it
/// to skip reloading when nothing happened; each backend says what it is made of. Public
/// for the caches kept by crates over the store ([`crate::Store::change_token`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChangeToken {
    database: i64,
    local: u64,
}

impl ChangeToken {
    /// A token from a database-wide change count and this process's own commit count.
    pub(crate) fn new(database: i64, local: u64) -> ChangeToken {
        ChangeToken { database, local }
    }
}
