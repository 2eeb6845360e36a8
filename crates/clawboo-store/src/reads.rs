//! Reads written once as `async` code, run by either engine the way it runs best.
//!
//! A domain read written over [`Reads`] hands statements in and takes owned rows out,
//! holding no connection borrow across an `.await`; so the same function runs
//!
//! - on an engine's asynchronous transaction ([`AsyncTx`]: PostgreSQL's, driven by the
//!   caller's own runtime, several statements' round trips in flight at once), its future
//!   `Send` for the MCP and HTTP handlers that await it; and
//! - on a synchronous [`Tx`] (SQLite's, or any engine's inside a synchronous call), where
//!   each statement runs as it is asked and the future is ready at once ([`ready_now`]).
//!
//! [`StoreRead`] bundles such a read with its arguments; `Store::run_snapshot` and
//! `Store::run_read_committed` (in `run.rs`) are the one place that picks which of the
//! two runs it.

use std::borrow::Cow;
use std::future::Future;

use futures_util::FutureExt;
use futures_util::future::BoxFuture;

use crate::db::{Batched, DbRow, PerEngine, ToValue, Tx, Value};
use crate::error::{BackendError, BackendErrorKind, Result, StoreError};

/// One SQL value, owned: a parameter that travels with its statement into a future.
#[derive(Debug, Clone, PartialEq)]
pub enum OwnedValue {
    Null,
    Int(i64),
    Real(f64),
    Text(String),
    Blob(Vec<u8>),
}

impl From<Value<'_>> for OwnedValue {
    fn from(value: Value<'_>) -> OwnedValue {
        match value {
            Value::Null => OwnedValue::Null,
            Value::Int(i) => OwnedValue::Int(i),
            Value::Real(r) => OwnedValue::Real(r),
            Value::Text(t) => OwnedValue::Text(t.to_owned()),
            Value::Blob(b) => OwnedValue::Blob(b.to_vec()),
        }
    }
}

impl ToValue for OwnedValue {
    fn to_value(&self) -> Value<'_> {
        match self {
            OwnedValue::Null => Value::Null,
            OwnedValue::Int(i) => Value::Int(*i),
            OwnedValue::Real(r) => Value::Real(*r),
            OwnedValue::Text(t) => Value::Text(t),
            OwnedValue::Blob(b) => Value::Blob(b),
        }
    }
}

/// One statement with its parameters (bound in order to `?1`, `?2`, …).
#[derive(Debug, Clone)]
pub struct Query {
    pub(crate) sql: Cow<'static, str>,
    pub(crate) params: Vec<OwnedValue>,
}

impl Query {
    /// `sql` (a constant, or text built from a handful of variants: each text is prepared
    /// once per connection) with `params` copied, so the query can travel into a future.
    pub fn new(sql: impl Into<Cow<'static, str>>, params: &[&dyn ToValue]) -> Query {
        Query {
            sql: sql.into(),
            params: params
                .iter()
                .map(|p| OwnedValue::from(p.to_value()))
                .collect(),
        }
    }

    /// The parameters as a [`Tx`] binds them.
    pub(crate) fn bound(&self) -> Vec<&dyn ToValue> {
        self.params.iter().map(|p| p as &dyn ToValue).collect()
    }
}

/// One row a [`Reads`] handed out, read column by column as any [`DbRow`].
pub type Row = Box<dyn DbRow + Send + Sync>;

/// A row copied out of a synchronous transaction: its texts in one buffer and its blobs in
/// another, so a row costs a few allocations however many columns it has.
#[derive(Default)]
struct OwnedRow {
    columns: Vec<Column>,
    text: String,
    blobs: Vec<u8>,
}

/// Where an [`OwnedRow`] keeps one column.
enum Column {
    Null,
    Int(i64),
    Real(f64),
    Text(std::ops::Range<usize>),
    Blob(std::ops::Range<usize>),
}

impl OwnedRow {
    fn copy(row: &dyn DbRow) -> Result<OwnedRow> {
        let mut owned = OwnedRow {
            columns: Vec::with_capacity(row.columns()),
            ..OwnedRow::default()
        };
        for index in 0..row.columns() {
            let column = match row.value(index)? {
                Value::Null => Column::Null,
                Value::Int(i) => Column::Int(i),
                Value::Real(r) => Column::Real(r),
                Value::Text(t) => {
                    let start = owned.text.len();
                    owned.text.push_str(t);
                    Column::Text(start..owned.text.len())
                }
                Value::Blob(b) => {
                    let start = owned.blobs.len();
                    owned.blobs.extend_from_slice(b);
                    Column::Blob(start..owned.blobs.len())
                }
            };
            owned.columns.push(column);
        }
        Ok(owned)
    }
}

impl DbRow for OwnedRow {
    fn value(&self, index: usize) -> Result<Value<'_>> {
        let column = self.columns.get(index).ok_or_else(|| {
            StoreError::Backend(BackendError {
                kind: BackendErrorKind::Other,
                message: format!("column {index}: the row has {} columns", self.columns.len()),
            })
        })?;
        Ok(match column {
            Column::Null => Value::Null,
            Column::Int(i) => Value::Int(*i),
            Column::Real(r) => Value::Real(*r),
            Column::Text(range) => Value::Text(&self.text[range.clone()]),
            Column::Blob(range) => Value::Blob(&self.blobs[range.clone()]),
        })
    }

    fn columns(&self) -> usize {
        self.columns.len()
    }
}

/// A transaction a read written once runs on, synchronous or not.
pub trait Reads {
    /// This engine's form of a statement written once per engine.
    fn statement(&self, per_engine: &PerEngine) -> &'static str;

    /// Run `batch`'s queries in order and hand back each one's rows; on PostgreSQL they
    /// travel in one round trip.
    fn query_batch(&self, batch: Vec<Query>) -> impl Future<Output = Result<Vec<Vec<Row>>>>;

    /// One query's rows, each decoded by `decode`: on a synchronous transaction straight
    /// from the engine's row, with no copy of it between (a page of tasks is mostly text).
    fn query_map<T: Send>(
        &self,
        query: Query,
        decode: fn(&dyn DbRow) -> Result<T>,
    ) -> impl Future<Output = Result<Vec<T>>>;
}

/// One query's rows.
pub async fn query<R: Reads + ?Sized>(tx: &R, query: Query) -> Result<Vec<Row>> {
    Ok(tx.query_batch(vec![query]).await?.pop().unwrap_or_default())
}

/// The first row of one query, or `None` when it returned none.
pub async fn query_first<R: Reads + ?Sized>(tx: &R, query: Query) -> Result<Option<Row>> {
    Ok(self::query(tx, query).await?.into_iter().next())
}

/// The one row a query always returns (an aggregate's), decoded by `decode`.
pub async fn query_one<R: Reads + ?Sized, T: Send>(
    tx: &R,
    query: Query,
    decode: fn(&dyn DbRow) -> Result<T>,
) -> Result<T> {
    tx.query_map(query, decode).await?.pop().ok_or_else(|| {
        StoreError::Backend(BackendError {
            kind: BackendErrorKind::Other,
            message: "a query that always answers one row answered none".into(),
        })
    })
}

impl Reads for dyn Tx + '_ {
    fn statement(&self, per_engine: &PerEngine) -> &'static str {
        Tx::statement(self, per_engine)
    }

    fn query_batch(&self, batch: Vec<Query>) -> impl Future<Output = Result<Vec<Vec<Row>>>> {
        let mut answers: Vec<Vec<Row>> = batch.iter().map(|_| Vec::new()).collect();
        let params: Vec<Vec<&dyn ToValue>> = batch.iter().map(Query::bound).collect();
        let mut batched: Vec<Batched<'_>> = batch
            .iter()
            .zip(&params)
            .zip(answers.iter_mut())
            .map(|((query, params), rows)| {
                Batched::new(&query.sql, params, move |row| {
                    rows.push(Box::new(OwnedRow::copy(row)?));
                    Ok(())
                })
            })
            .collect();
        let ran = Tx::query_batch(self, &mut batched);
        drop(batched);
        std::future::ready(ran.map(|()| answers))
    }

    fn query_map<T: Send>(
        &self,
        query: Query,
        decode: fn(&dyn DbRow) -> Result<T>,
    ) -> impl Future<Output = Result<Vec<T>>> {
        let mut decoded = Vec::new();
        let ran = self.query_each(&query.sql, &query.bound(), &mut |row| {
            decoded.push(decode(row)?);
            Ok(())
        });
        std::future::ready(ran.map(|()| decoded))
    }
}

/// An engine's asynchronous transaction, as [`AsyncTx`] holds it.
pub(crate) trait AsyncStatements: Send + Sync {
    /// [`Reads::statement`]: this engine's form of a statement written once per engine.
    fn statement(&self, per_engine: &PerEngine) -> &'static str;

    /// [`Reads::query_batch`].
    fn query_batch(&self, batch: Vec<Query>) -> BoxFuture<'_, Result<Vec<Vec<Row>>>>;

    /// [`crate::writes::Writes::execute`] (in a write transaction only).
    fn execute(&self, query: Query) -> BoxFuture<'_, Result<u64>>;

    /// [`crate::writes::Writes::serialize_on`] (in a write transaction only).
    fn serialize_on(&self, key: String) -> BoxFuture<'_, Result<()>>;

    /// End a read: its work is done (a read-only transaction has nothing to keep).
    fn finish(self: Box<Self>);

    /// Commit a write, answered once it is durable; every process hears of `topics`
    /// ([`crate::db::Tx::notify`]) as it commits.
    fn commit(self: Box<Self>, topics: Vec<String>) -> BoxFuture<'static, Result<()>>;
}

/// Reads on a connection of an engine that runs statements asynchronously, held alone:
/// in one read-only snapshot, or each statement seeing the last commit. A snapshot dropped
/// without being finished (its future was cancelled, or it failed) is rolled back
/// before the connection serves anyone else.
pub struct AsyncTx(pub(crate) Box<dyn AsyncStatements>);

impl AsyncTx {
    pub(crate) fn finish(self) {
        self.0.finish();
    }
}

impl Reads for AsyncTx {
    fn statement(&self, per_engine: &PerEngine) -> &'static str {
        self.0.statement(per_engine)
    }

    fn query_batch(&self, batch: Vec<Query>) -> impl Future<Output = Result<Vec<Vec<Row>>>> {
        self.0.query_batch(batch)
    }

    async fn query_map<T: Send>(
        &self,
        query: Query,
        decode: fn(&dyn DbRow) -> Result<T>,
    ) -> Result<Vec<T>> {
        let rows = self::query(self, query).await?;
        rows.iter().map(|row| decode(&**row)).collect()
    }
}

/// A read with its arguments, written once over [`Reads`]: each method calls the same
/// `async` domain function, on the transaction the engine offers (`Store::run_snapshot`
/// and `Store::run_read_committed` pick).
pub trait StoreRead: Send + 'static {
    /// What the read hands back.
    type Output: Send + 'static;

    /// Run on a synchronous transaction: the domain function under [`ready_now`].
    fn run(&self, tx: &dyn Tx) -> Result<Self::Output>;

    /// Run on an asynchronous one.
    fn run_async<'a>(&'a self, tx: &'a AsyncTx) -> BoxFuture<'a, Result<Self::Output>>;
}

/// The simplest [`StoreRead`]: one query's rows, each decoded by `decode`. A read that is
/// one statement needs no type of its own.
pub struct RowsRead<T> {
    pub query: Query,
    pub decode: fn(&dyn DbRow) -> Result<T>,
}

impl<T: Send + 'static> StoreRead for RowsRead<T> {
    type Output = Vec<T>;

    fn run(&self, tx: &dyn Tx) -> Result<Vec<T>> {
        ready_now(Reads::query_map(tx, self.query.clone(), self.decode))
    }

    fn run_async<'a>(&'a self, tx: &'a AsyncTx) -> BoxFuture<'a, Result<Vec<T>>> {
        Box::pin(tx.query_map(self.query.clone(), self.decode))
    }
}

/// [`RowsRead`] for a query that always answers one row (an aggregate's): [`query_one`]
/// as a [`StoreRead`].
pub struct OneRowRead<T> {
    pub query: Query,
    pub decode: fn(&dyn DbRow) -> Result<T>,
}

impl<T: Send + 'static> StoreRead for OneRowRead<T> {
    type Output = T;

    fn run(&self, tx: &dyn Tx) -> Result<T> {
        ready_now(query_one(tx, self.query.clone(), self.decode))
    }

    fn run_async<'a>(&'a self, tx: &'a AsyncTx) -> BoxFuture<'a, Result<T>> {
        Box::pin(query_one(tx, self.query.clone(), self.decode))
    }
}

/// The value of a read over a synchronous [`Tx`], whose every statement has run by the
/// time it returns, so its future is ready at once.
pub fn ready_now<T>(read: impl Future<Output = Result<T>>) -> Result<T> {
    read.now_or_never().unwrap_or_else(|| {
        Err(StoreError::Backend(BackendError {
            kind: BackendErrorKind::Other,
            message: "a read over a synchronous transaction waited, which it never should".into(),
        }))
    })
}
