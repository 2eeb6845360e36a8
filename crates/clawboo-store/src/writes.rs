//! Writes written once as `async` code, as [`crate::reads`] writes reads: a domain rule
//! written over [`Writes`] hands statements in and takes owned rows out, so the same
//! function runs in an engine's asynchronous write transaction ([`AsyncWriteTx`]:
//! PostgreSQL's, its round trips awaited on the caller's task) and in any synchronous
//! [`Tx`] (SQLite's group commit, a write inside a write), where its future is ready at
//! once ([`crate::reads::ready_now`]).
//!
//! [`StoreWrite`] bundles such a write with its arguments; `Store::run_transaction` (in
//! `run.rs`) picks which of the two runs it.

use std::future::Future;

use futures_util::future::BoxFuture;

use crate::db::{PerEngine, Tx};
use crate::error::Result;
use crate::events::{self, Event};
use crate::reads::{AsyncTx, Query, Reads, Row};

/// A write transaction a rule written once runs in, synchronous or not.
pub trait Writes: Reads {
    /// Run a statement that returns no rows; how many rows it changed.
    fn execute(&self, query: Query) -> impl Future<Output = Result<u64>>;

    /// [`Tx::serialize_on`]: the rest of this transaction is the only one holding `key`.
    fn serialize_on(&self, key: String) -> impl Future<Output = Result<()>>;

    /// [`events::raise`]: `event` reaches every waiter once this transaction committed,
    /// and none when it rolled back.
    fn raise(&self, event: Event) -> impl Future<Output = Result<()>>;
}

impl Writes for dyn Tx + '_ {
    fn execute(&self, query: Query) -> impl Future<Output = Result<u64>> {
        let changed = Tx::execute(self, &query.sql, &query.bound());
        std::future::ready(changed.map(|n| u64::try_from(n).unwrap_or(u64::MAX)))
    }

    fn serialize_on(&self, key: String) -> impl Future<Output = Result<()>> {
        std::future::ready(Tx::serialize_on(self, &key))
    }

    fn raise(&self, event: Event) -> impl Future<Output = Result<()>> {
        std::future::ready(events::raise(self, event))
    }
}

/// A write transaction on a connection of an engine that runs statements asynchronously,
/// held alone until `Store::run_transaction` commits it; dropped uncommitted (its rule
/// failed, panicked or its caller went away) it rolls back before the connection serves
/// anyone else, and what it raised never happened.
pub struct AsyncWriteTx {
    tx: AsyncTx,
    raised: parking_lot::Mutex<Vec<Event>>,
}

impl AsyncWriteTx {
    pub(crate) fn new(tx: AsyncTx) -> AsyncWriteTx {
        AsyncWriteTx {
            tx,
            raised: parking_lot::Mutex::new(Vec::new()),
        }
    }

    /// Commit, telling every process of the events raised, and hand them back, to publish
    /// here now that they are true.
    pub(crate) async fn commit(self) -> Result<Vec<Event>> {
        let raised = self.raised.into_inner();
        let topics = raised.iter().map(Event::topic).collect();
        self.tx.0.commit(topics).await?;
        Ok(raised)
    }
}

impl Reads for AsyncWriteTx {
    fn statement(&self, per_engine: &PerEngine) -> &'static str {
        self.tx.statement(per_engine)
    }

    fn query_batch(&self, batch: Vec<Query>) -> impl Future<Output = Result<Vec<Vec<Row>>>> {
        self.tx.query_batch(batch)
    }

    fn query_map<T: Send>(
        &self,
        query: Query,
        decode: fn(&dyn crate::db::DbRow) -> Result<T>,
    ) -> impl Future<Output = Result<Vec<T>>> {
        self.tx.query_map(query, decode)
    }
}

impl Writes for AsyncWriteTx {
    fn execute(&self, query: Query) -> impl Future<Output = Result<u64>> {
        self.tx.0.execute(query)
    }

    fn serialize_on(&self, key: String) -> impl Future<Output = Result<()>> {
        self.tx.0.serialize_on(key)
    }

    /// Kept with the transaction: its topic goes out with the `COMMIT`, in the same round
    /// trip, and the event is published here once that is answered.
    fn raise(&self, event: Event) -> impl Future<Output = Result<()>> {
        self.raised.lock().push(event);
        std::future::ready(Ok(()))
    }
}

/// A write with its arguments, written once over [`Writes`]: each method calls the same
/// `async` domain function, in the transaction the engine offers (`Store::run_transaction`
/// picks).
pub trait StoreWrite: Send + 'static {
    /// What the write hands back.
    type Output: Send + 'static;

    /// Run in a synchronous write transaction: the domain function under
    /// [`crate::reads::ready_now`].
    fn run(&self, tx: &dyn Tx) -> Result<Self::Output>;

    /// Run in an asynchronous one.
    fn run_async<'a>(&'a self, tx: &'a AsyncWriteTx) -> BoxFuture<'a, Result<Self::Output>>;
}
