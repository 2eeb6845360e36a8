//! Connections driven by the caller's own runtime, for the reads written once as `async`
//! code ([`crate::reads`]): a read awaits its round trips instead of parking a thread, and
//! a batch's statements travel together, so several calls' round trips are in flight on
//! one thread. Each connection's task runs on the runtime of the call that opened it;
//! when that runtime ends (a test's), its clients report closed and are replaced.
//!
//! A transaction holds its connection alone until it ends (another task's statement must
//! not land inside it); the pool opens at most `max` connections.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use futures_util::FutureExt;
use futures_util::future::{BoxFuture, join, join_all, join3};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_postgres::tls::NoTls;
use tokio_postgres::{Client, Config, Statement};
use tokio_postgres_rustls::MakeRustlsConnect;

use super::codec::Param;
use super::error::unavailable;
use super::listen::WriteBell;
use super::{NOTIFY, SERIALIZE_ON, as_sql, column, lock};
use crate::db::{DbRow, PerEngine, ToValue, Value, dollar_placeholders};
use crate::engine::{AsyncKind, PoolStats};
use crate::error::{BackendError, BackendErrorKind, Result, StoreError};
use crate::reads::{AsyncStatements, Query, Row};

/// What opens a snapshot: statements run in one REPEATABLE READ snapshot, written nowhere.
const BEGIN_SNAPSHOT: &str = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY";

/// What opens a write: READ COMMITTED, as the synchronous pool's writes (a rule that reads
/// then writes serializes on its key, `Tx::serialize_on`).
const BEGIN_WRITE: &str = "BEGIN";

/// The asynchronous connections of one store.
pub(super) struct AsyncPool {
    config: Config,
    tls: Option<MakeRustlsConnect>,
    /// Statements every new connection runs first (session settings); empty for none.
    setup: String,
    max: usize,
    /// How long a caller waits for a connection to come free or be made.
    wait: Duration,
    permits: Arc<Semaphore>,
    idle: std::sync::Mutex<Vec<Arc<Conn>>>,
    /// Connections made and not yet dropped, idle or lent.
    open: AtomicUsize,
    /// Callers waiting for a connection now.
    waiting: AtomicUsize,
    /// Rung by each committed write.
    bell: WriteBell,
}

/// One connection with the statements it has prepared, by their `?N` text.
struct Conn {
    client: Client,
    prepared: parking_lot::Mutex<HashMap<Box<str>, Statement>>,
}

impl AsyncPool {
    pub(super) fn new(
        config: Config,
        tls: Option<MakeRustlsConnect>,
        max: usize,
        wait: Duration,
        setup: String,
        bell: WriteBell,
    ) -> Arc<AsyncPool> {
        let max = max.max(1);
        Arc::new(AsyncPool {
            config,
            tls,
            setup,
            max,
            wait,
            permits: Arc::new(Semaphore::new(max)),
            idle: std::sync::Mutex::new(Vec::new()),
            open: AtomicUsize::new(0),
            waiting: AtomicUsize::new(0),
            bell,
        })
    }

    /// A connection of its own in the transaction `kind` names: a READ COMMITTED write, a
    /// REPEATABLE READ READ ONLY snapshot, or none, each statement committing alone (one
    /// that reads once needs no transaction, which would double the server's work). An
    /// idle connection still open, else a new one; `Unavailable` once the pool's wait has
    /// passed with all `max` lent.
    pub(super) async fn lend(self: &Arc<Self>, kind: AsyncKind) -> Result<LentTx> {
        self.waiting.fetch_add(1, Ordering::Relaxed);
        let permit =
            tokio::time::timeout(self.wait, Arc::clone(&self.permits).acquire_owned()).await;
        self.waiting.fetch_sub(1, Ordering::Relaxed);
        let permit = match permit {
            Ok(Ok(permit)) => permit,
            _ => {
                return Err(unavailable(
                    "no PostgreSQL connection came free in time: every pooled connection is \
                     busy (raise CLAWBOO_PG_POOL, or the server's max_connections, if this \
                     persists)",
                ));
            }
        };
        let conn = match self.take_idle() {
            Some(conn) => conn,
            None => self.connect().await?,
        };
        let begin = match kind {
            AsyncKind::ReadCommitted => None,
            AsyncKind::Snapshot => Some(BEGIN_SNAPSHOT),
            AsyncKind::Write => Some(BEGIN_WRITE),
        };
        Ok(LentTx {
            pool: Arc::clone(self),
            conn,
            began: AtomicBool::new(begin.is_none()),
            begin,
            ended: AtomicBool::new(false),
            committing: AtomicBool::new(false),
            locks: parking_lot::Mutex::new(Vec::new()),
            _permit: permit,
        })
    }

    fn take_idle(&self) -> Option<Arc<Conn>> {
        let mut idle = lock(&self.idle);
        while let Some(conn) = idle.pop() {
            if !conn.client.is_closed() {
                return Some(conn);
            }
            self.open.fetch_sub(1, Ordering::Relaxed);
        }
        None
    }

    /// Open a connection whose task runs on the caller's runtime, and set its session up.
    async fn connect(&self) -> Result<Arc<Conn>> {
        let client = match &self.tls {
            Some(tls) => {
                let (client, connection) = self.config.connect(tls.clone()).await?;
                tokio::spawn(drive(connection));
                client
            }
            None => {
                let (client, connection) = self.config.connect(NoTls).await?;
                tokio::spawn(drive(connection));
                client
            }
        };
        if !self.setup.is_empty() {
            client.batch_execute(&self.setup).await?;
        }
        self.open.fetch_add(1, Ordering::Relaxed);
        Ok(Arc::new(Conn {
            client,
            prepared: parking_lot::Mutex::new(HashMap::new()),
        }))
    }

    /// How many connections are open, lent and waited for now.
    pub(super) fn stats(&self) -> PoolStats {
        PoolStats {
            max: self.max,
            open: self.open.load(Ordering::Relaxed),
            in_use: self.max - self.permits.available_permits(),
            waiting: self.waiting.load(Ordering::Relaxed),
        }
    }

    /// Drop every idle connection (a store closing).
    pub(super) fn close(&self) {
        let closed = std::mem::take(&mut *lock(&self.idle));
        self.open.fetch_sub(closed.len(), Ordering::Relaxed);
    }
}

/// Run a connection until it ends; a lost one is reported to its client's next request.
async fn drive<S, T>(connection: tokio_postgres::Connection<S, T>)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    if let Err(e) = connection.await {
        tracing::debug!(error = %e, "a PostgreSQL connection ended");
    }
}

/// A connection held alone. In a transaction, the `BEGIN` travels with its first
/// statements; a snapshot's end (`COMMIT`) and the `ROLLBACK` of a transaction dropped
/// unfinished are sent without waiting for the answer, since the connection's next request
/// is answered after it anyway. A write's `COMMIT` is answered before the write is.
pub(super) struct LentTx {
    pool: Arc<AsyncPool>,
    conn: Arc<Conn>,
    /// Whether the `BEGIN` went out (or, outside a transaction, needs none).
    began: AtomicBool,
    /// What opens the transaction; `None` outside one.
    begin: Option<&'static str>,
    /// Whether its end (`COMMIT`) went out, so a drop sends no `ROLLBACK`.
    ended: AtomicBool,
    /// Whether a write's `COMMIT` went out and its answer is awaited.
    committing: AtomicBool,
    /// Locks taken (`serialize_on`) that go out with the next statements.
    locks: parking_lot::Mutex<Vec<Query>>,
    _permit: OwnedSemaphorePermit,
}

impl LentTx {
    /// The prepared statements for `batch`, preparing (together, in one round trip) those
    /// this connection has not prepared yet.
    async fn statements(&self, batch: &[Query]) -> Result<Vec<Statement>> {
        let conn = &self.conn;
        let missing: Vec<&str> = {
            let prepared = conn.prepared.lock();
            let mut missing: Vec<&str> = batch
                .iter()
                .map(|q| &*q.sql)
                .filter(|sql| !prepared.contains_key(*sql))
                .collect();
            missing.dedup();
            missing
        };
        if !missing.is_empty() {
            let texts: Vec<String> = missing.iter().map(|sql| dollar_placeholders(sql)).collect();
            crate::counters::postgres_round_trip();
            let made = join_all(texts.iter().map(|text| conn.client.prepare(text))).await;
            let mut prepared = conn.prepared.lock();
            for (sql, statement) in missing.into_iter().zip(made) {
                prepared.insert(sql.into(), statement?);
            }
        }
        let prepared = conn.prepared.lock();
        batch
            .iter()
            .map(|q| {
                prepared.get(&*q.sql).cloned().ok_or_else(|| {
                    StoreError::Backend(BackendError {
                        kind: BackendErrorKind::Other,
                        message: "a prepared statement went missing".into(),
                    })
                })
            })
            .collect()
    }

    /// Send `sql` and let the connection drop its answer.
    fn send_unanswered(&self, sql: &str) {
        crate::counters::postgres_round_trip();
        // The client queues a request on its future's first poll.
        let _ = self.conn.client.batch_execute(sql).now_or_never();
    }
}

impl LentTx {
    /// Await `requests` (whose requests are queued on their first poll) in one round trip
    /// with what must run before them and has not gone out yet: the transaction's `BEGIN`,
    /// then the locks taken since the last statement ([`AsyncStatements::serialize_on`]).
    async fn after_preamble<T>(&self, requests: impl Future<Output = T>) -> Result<T> {
        let locks = std::mem::take(&mut *self.locks.lock());
        let lock_statements = if locks.is_empty() {
            Vec::new()
        } else {
            self.statements(&locks).await?
        };
        crate::counters::postgres_round_trip();
        let begin = self
            .begin
            .filter(|_| !self.began.swap(true, Ordering::Relaxed));
        let began = async {
            match begin {
                Some(begin) => self.conn.client.batch_execute(begin).await,
                None => Ok(()),
            }
        };
        // `join3` polls in order, and each request is queued on its first poll: the
        // `BEGIN`, then the locks, then the requests are written before any answer is read.
        let (began, locked, answers) = join3(
            began,
            self.send_prepared(&lock_statements, &locks),
            requests,
        )
        .await;
        began?;
        for lock in locked {
            lock?;
        }
        Ok(answers)
    }

    /// `batch`'s answers, its statements prepared as `statements`: every request queued
    /// on the first poll (`join_all` polls its futures in order, and a request is queued on
    /// its first poll), before any answer is read.
    async fn send_prepared(
        &self,
        statements: &[Statement],
        batch: &[Query],
    ) -> Vec<std::result::Result<Vec<tokio_postgres::Row>, tokio_postgres::Error>> {
        let bound: Vec<Vec<Param<'_>>> = batch.iter().map(bind).collect();
        let params: Vec<_> = bound.iter().map(|bound| as_sql(bound)).collect();
        let client = &self.conn.client;
        join_all(
            statements
                .iter()
                .zip(&params)
                .map(|(statement, params)| client.query(statement, params)),
        )
        .await
    }

    async fn query_rows(&self, batch: Vec<Query>) -> Result<Vec<Vec<Row>>> {
        let statements = self.statements(&batch).await?;
        self.after_preamble(self.send_prepared(&statements, &batch))
            .await?
            .into_iter()
            .map(|rows| {
                Ok(rows?
                    .into_iter()
                    .map(|row| Box::new(PgOwnedRow(row)) as Row)
                    .collect())
            })
            .collect()
    }
}

/// A query's parameters as the driver binds them.
fn bind(query: &Query) -> Vec<Param<'_>> {
    query.params.iter().map(|p| Param(p.to_value())).collect()
}

impl AsyncStatements for LentTx {
    fn statement(&self, per_engine: &PerEngine) -> &'static str {
        per_engine.postgres
    }

    fn query_batch(&self, batch: Vec<Query>) -> BoxFuture<'_, Result<Vec<Vec<Row>>>> {
        Box::pin(self.query_rows(batch))
    }

    fn execute(&self, query: Query) -> BoxFuture<'_, Result<u64>> {
        Box::pin(async move {
            let statements = self.statements(std::slice::from_ref(&query)).await?;
            let bound = bind(&query);
            let params = as_sql(&bound);
            let executed = statements
                .first()
                .map(|statement| self.conn.client.execute(statement, &params));
            match executed {
                Some(executed) => Ok(self.after_preamble(executed).await??),
                None => Ok(0),
            }
        })
    }

    /// Taken with the next statements, in their round trip (statements run in order, so
    /// the lock is held before any of them runs); a lock no statement follows guards
    /// nothing, and never goes out.
    fn serialize_on(&self, key: String) -> BoxFuture<'_, Result<()>> {
        self.locks.lock().push(Query::new(SERIALIZE_ON, &[&key]));
        Box::pin(std::future::ready(Ok(())))
    }

    fn finish(self: Box<Self>) {
        if self.begin.is_some() && self.began.load(Ordering::Relaxed) {
            self.send_unanswered("COMMIT");
        }
        self.ended.store(true, Ordering::Relaxed);
    }

    fn commit(self: Box<Self>, topics: Vec<String>) -> BoxFuture<'static, Result<()>> {
        Box::pin(async move {
            if !self.began.load(Ordering::Relaxed) {
                self.ended.store(true, Ordering::Relaxed);
                return Ok(());
            }
            let notices: Vec<Query> = topics
                .iter()
                .map(|topic| Query::new(NOTIFY, &[topic]))
                .collect();
            let statements = self.statements(&notices).await?;
            crate::counters::postgres_round_trip();
            // `join` polls in order: the notices are written before the `COMMIT`, and both
            // travel in one round trip.
            let committing = join(
                self.send_prepared(&statements, &notices),
                self.conn.client.batch_execute("COMMIT"),
            );
            self.ended.store(true, Ordering::Relaxed);
            self.committing.store(true, Ordering::Relaxed);
            let (notified, committed) = committing.await;
            self.committing.store(false, Ordering::Relaxed);
            // A failed notice aborts the transaction, and the `COMMIT` then rolls it back.
            for notice in notified {
                notice?;
            }
            committed?;
            self.pool.bell.ring();
            Ok(())
        })
    }
}

impl Drop for LentTx {
    fn drop(&mut self) {
        let in_transaction = self.begin.is_some() && self.began.load(Ordering::Relaxed);
        if in_transaction && !self.ended.load(Ordering::Relaxed) {
            self.send_unanswered("ROLLBACK");
        }
        if self.committing.load(Ordering::Relaxed) {
            // A commit whose answer nobody waited for may have committed: announce it.
            self.pool.bell.ring();
        }
        if self.conn.client.is_closed() {
            self.pool.open.fetch_sub(1, Ordering::Relaxed);
        } else {
            lock(&self.pool.idle).push(Arc::clone(&self.conn));
        }
    }
}

/// A row read on an asynchronous connection, decoded column by column as asked.
struct PgOwnedRow(tokio_postgres::Row);

impl DbRow for PgOwnedRow {
    fn value(&self, index: usize) -> Result<Value<'_>> {
        column(&self.0, index)
    }

    fn columns(&self) -> usize {
        self.0.len()
    }
}
