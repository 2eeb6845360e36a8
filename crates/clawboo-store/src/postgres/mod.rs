//! The PostgreSQL backend: a pool of `tokio-postgres` connections (`pool.rs`), each
//! driven by the thread that holds it, so the store's synchronous API works from any
//! thread (plain threads, tokio's blocking pool, and a stdio server's single-threaded
//! runtime alike) and a round trip never crosses threads. A small tokio runtime of the
//! backend's own runs what outlives a call: the listener that carries cross-host wake-ups.
//!
//! The URL's `sslmode` picks TLS (`tls.rs`): `require` encrypts without checking the
//! certificate, `verify-full` checks it and the host name, and `disable`, `prefer` or no
//! `sslmode` connect in plain text.
//!
//! Writers run side by side under READ COMMITTED; the rules that need one writer at a time
//! say so through [`Tx::serialize_on`] (a transaction-scoped advisory lock). Nothing
//! outside this module sees a driver type.

mod async_pool;
mod codec;
mod error;
mod integrity;
mod listen;
mod migrations;
pub(crate) use migrations::LATEST;
mod pool;
mod tls;

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::future::{join, join_all};

use crate::config::StoreConfig;
use crate::db::{
    Batched, DbRow, Dialect, Findings, Params, PerEngine, Tx, Value, dollar_placeholders,
};
use crate::engine::{Abort, AsyncKind, Body, Engine, NextGroup, PoolStats};
use crate::error::{BackendError, BackendErrorKind, Result, StoreError};
use async_pool::AsyncPool;
use codec::{Param, Raw, decode};
use error::unavailable;
use futures_util::future::BoxFuture;
use listen::WriteBell;
use pool::{Pool, Pooled};

use crate::reads::AsyncTx;

/// tokio-postgres's keepalive idle time when the URL sets none (the kernel's default).
const DEFAULT_KEEPALIVES_IDLE: Duration = Duration::from_secs(2 * 60 * 60);

/// How long a call waits for a connection (a free one, or a new one to be made) before it
/// reports the database unavailable: long enough for a busy pool, short enough that an
/// agent hears of an outage within seconds.
const CONNECTION_WAIT: Duration = Duration::from_secs(5);

/// How long a store being dropped tries to announce its last writes.
const ANNOUNCE_AT_EXIT: Duration = Duration::from_secs(1);

/// Every store in this process gets its own number, so a thread's open transactions are
/// matched to the store they belong to.
static NEXT_DB_ID: AtomicU64 = AtomicU64::new(1);

/// What a connection this thread holds is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// No transaction: each statement commits on its own ([`PgDb::read`]).
    Autocommit,
    /// A READ COMMITTED write transaction ([`PgDb::write`]).
    Write,
    /// A REPEATABLE READ READ ONLY transaction ([`PgDb::snapshot`]).
    ReadOnly,
}

/// A connection this thread holds for a store, and what it is doing.
struct Open {
    db: u64,
    mode: Mode,
    tx: Rc<PgTx>,
}

thread_local! {
    /// The connections this thread holds, innermost last: a `write`, `read` or `snapshot`
    /// inside another on the same thread uses the outer one's connection (as on SQLite),
    /// so nesting never waits for a second pooled connection.
    static OPEN: RefCell<Vec<Open>> = const { RefCell::new(Vec::new()) };
}

/// [`Tx::notify`]: `?1` reaches every listening process once this transaction commits.
const NOTIFY: &str = "SELECT pg_notify('clawboo', CAST(?1 AS TEXT))";

/// [`Tx::serialize_on`]: a transaction-scoped advisory lock on the key `?1`.
const SERIALIZE_ON: &str = "SELECT pg_advisory_xact_lock(hashtextextended(CAST(?1 AS TEXT), 0))";

/// How often a wait on PostgreSQL reads again when no bell rang ([`crate::Store::wait_poll`]).
pub const WAIT_SAFETY_NET: Duration = Duration::from_secs(1);

/// The PostgreSQL engine of a [`crate::Store`].
pub(crate) struct PgDb {
    id: u64,
    /// Runs the listener; `None` only while being dropped.
    runtime: Option<tokio::runtime::Runtime>,
    pool: Arc<Pool>,
    /// The connections of the reads written once as `async` code, driven by their
    /// callers' runtimes; the rest of the store's work still runs on `pool`.
    async_pool: Arc<AsyncPool>,
    /// `?N` statements rewritten to `$N`, by their text.
    rewritten: Arc<Mutex<HashMap<String, Arc<str>>>>,
    /// Rung by every committed write; the listener announces them to every process. A
    /// store dropped before its listener announced (a short-lived stdio server) announces
    /// then.
    bell: WriteBell,
}

impl PgDb {
    /// Connect to `url` (its password in the URL or already filled in from libpq's
    /// sources), and migrate the database to this build's schema. Needs PostgreSQL 13 or
    /// later (`pg_current_xact_id_if_assigned`). Every connection sets `session_settings`
    /// (what the domain modules ask of each session) once connected, except those the
    /// URL's `options` set itself, so an operator can tune them there.
    pub(crate) fn open(
        url: &str,
        config: &StoreConfig,
        on_notice: listen::OnNotice,
        session_settings: &[(&str, String)],
    ) -> Result<PgDb> {
        let (mut pg_config, tls) = tls::configure(url)?;
        if pg_config.get_connect_timeout().is_none() {
            pg_config.connect_timeout(CONNECTION_WAIT);
        }
        // A server that vanished without closing its sockets (a host down, a network cut)
        // is noticed within seconds instead of the kernel's two hours, unless the URL says
        // otherwise.
        if pg_config.get_keepalives_idle() == DEFAULT_KEEPALIVES_IDLE {
            pg_config.keepalives(true);
            pg_config.keepalives_idle(Duration::from_secs(10));
            pg_config.keepalives_interval(Duration::from_secs(2));
            pg_config.keepalives_retries(3);
        }
        if pg_config.get_tcp_user_timeout().is_none() {
            pg_config.tcp_user_timeout(Duration::from_secs(15));
        }
        if pg_config.get_application_name().is_none() {
            pg_config.application_name("clawboo");
        }
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("clawboo-postgres")
            .enable_all()
            .build()
            .map_err(|e| unavailable(format!("cannot start the PostgreSQL runtime: {e}")))?;
        let bell = WriteBell::default();
        let listener = listen::Listener {
            config: pg_config.clone(),
            tls: tls.clone(),
            on_notice,
            bell: bell.clone(),
        };
        let url_options = pg_config.get_options().unwrap_or_default();
        // Every statement here is short: JIT compiling one whose estimate crosses
        // `jit_above_cost` (a ranking whose phrase branch the planner overestimates) costs
        // tens of milliseconds and saves nothing.
        let jit_off = [("jit", "off".to_owned())];
        let setup = std::iter::once(lock_timeout_setup(&pg_config, config.busy_timeout))
            .chain(
                jit_off
                    .iter()
                    .chain(session_settings)
                    .filter(|(name, _)| !url_options.contains(name))
                    .map(|(name, value)| format!("SET {name} = {value}")),
            )
            .filter(|s| !s.is_empty())
            .collect::<Vec<_>>()
            .join("; ");
        // Each pool opens connections only as they are needed, the asynchronous one only
        // on a multi-threaded runtime (`Store::run_snapshot`), so a stdio server holds as
        // many as before.
        let async_pool = AsyncPool::new(
            pg_config.clone(),
            tls.clone(),
            config.pg_pool_size,
            CONNECTION_WAIT,
            setup.clone(),
            bell.clone(),
        );
        let pool = Pool::new(pg_config, tls, config.pg_pool_size, CONNECTION_WAIT, setup);
        let listening = runtime.handle().clone();
        let db = PgDb {
            id: NEXT_DB_ID.fetch_add(1, Ordering::Relaxed),
            runtime: Some(runtime),
            pool,
            async_pool,
            rewritten: Arc::default(),
            bell,
        };
        migrations::apply(&*db.pool.get()?)?;
        listening.spawn(listener.run());
        Ok(db)
    }

    /// The connection this thread holds on this store, innermost, and what it is doing.
    fn current(&self) -> Option<(Mode, Rc<PgTx>)> {
        OPEN.with(|open| {
            open.borrow()
                .iter()
                .rev()
                .find(|open| open.db == self.id)
                .map(|open| (open.mode, Rc::clone(&open.tx)))
        })
    }

    fn fresh_tx(&self) -> Result<Rc<PgTx>> {
        Ok(Rc::new(PgTx {
            conn: self.pool.get()?,
            rewritten: Arc::clone(&self.rewritten),
            unsent_begin: Cell::new(None),
        }))
    }

    /// Register `tx` as this thread's innermost connection on this store until the
    /// returned guard drops.
    fn hold(&self, mode: Mode, tx: &Rc<PgTx>) -> Holding {
        OPEN.with(|open| {
            open.borrow_mut().push(Open {
                db: self.id,
                mode,
                tx: Rc::clone(tx),
            })
        });
        Holding {
            db: self.id,
            tx: Rc::clone(tx),
            rollback: mode != Mode::Autocommit,
        }
    }

    /// Run `f` in a write or a read-only transaction on `tx`'s connection (which has none
    /// open), registered as this thread's innermost meanwhile; any error or panic rolls it
    /// back.
    ///
    /// Round trips are the cost of a call here, so the `BEGIN` travels with the first
    /// statement, a read-only transaction's `COMMIT` is sent without waiting for its
    /// answer (the connection's next request queues behind it), and a transaction that
    /// ran no statement sends neither.
    fn in_transaction<T, E>(
        &self,
        tx: Rc<PgTx>,
        writes: bool,
        f: impl FnOnce(&dyn Tx) -> Result<T, E>,
    ) -> Result<T, E>
    where
        E: From<StoreError>,
    {
        let begin = if writes {
            "BEGIN"
        } else {
            "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
        };
        let mode = if writes { Mode::Write } else { Mode::ReadOnly };
        tx.unsent_begin.set(Some(begin));
        let holding = self.hold(mode, &tx);
        let value = f(&*tx)?; // on an error `holding` rolls back
        if tx.unsent_begin.take().is_none() {
            if writes {
                tx.simple("COMMIT")?;
            } else {
                tx.send_unanswered("COMMIT");
            }
        }
        holding.committed();
        if writes {
            self.bell.ring();
        }
        Ok(value)
    }

    /// Run `f` in a savepoint of this thread's open write transaction `tx`.
    fn nested<T, E>(tx: &PgTx, f: impl FnOnce(&dyn Tx) -> Result<T, E>) -> Result<T, E>
    where
        E: From<StoreError>,
    {
        tx.simple("SAVEPOINT nested_write")?;
        match catch_unwind(AssertUnwindSafe(|| f(tx))) {
            Ok(Ok(value)) => {
                tx.simple("RELEASE nested_write")?;
                Ok(value)
            }
            Ok(Err(e)) => {
                tx.undo_savepoint();
                Err(e)
            }
            Err(panic) => {
                tx.undo_savepoint();
                std::panic::resume_unwind(panic)
            }
        }
    }

    /// One READ COMMITTED transaction. Inside a write on this thread: a savepoint of it.
    /// Inside a read: a transaction on the read's connection. Inside a snapshot, which is
    /// read-only: a transaction of its own, on another connection.
    pub(crate) fn write<T, E>(&self, f: impl FnOnce(&dyn Tx) -> Result<T, E>) -> Result<T, E>
    where
        E: From<StoreError>,
    {
        match self.current() {
            Some((Mode::Write, tx)) => Self::nested(&tx, f),
            Some((Mode::Autocommit, tx)) => self.in_transaction(tx, true, f),
            Some((Mode::ReadOnly, _)) | None => self.in_transaction(self.fresh_tx()?, true, f),
        }
    }

    /// A pooled connection without a transaction (each statement sees the last commit),
    /// or the connection this thread already holds on this store.
    pub(crate) fn read<T, E>(&self, f: impl FnOnce(&dyn Tx) -> Result<T, E>) -> Result<T, E>
    where
        E: From<StoreError>,
    {
        if let Some((_, tx)) = self.current() {
            return f(&*tx);
        }
        let tx = self.fresh_tx()?;
        let _holding = self.hold(Mode::Autocommit, &tx);
        f(&*tx)
    }

    /// One REPEATABLE READ READ ONLY transaction, so every statement sees one snapshot;
    /// inside a transaction on this thread, that transaction.
    pub(crate) fn snapshot<T, E>(&self, f: impl FnOnce(&dyn Tx) -> Result<T, E>) -> Result<T, E>
    where
        E: From<StoreError>,
    {
        match self.current() {
            Some((Mode::Write | Mode::ReadOnly, tx)) => f(&*tx),
            Some((Mode::Autocommit, tx)) => self.in_transaction(tx, false, f),
            None => self.in_transaction(self.fresh_tx()?, false, f),
        }
    }
}

impl Engine for PgDb {
    fn name(&self) -> &'static str {
        "postgres"
    }

    fn dialect(&self) -> Dialect {
        Dialect::Postgres
    }

    fn write(&self, body: Body<'_>) -> std::result::Result<(), Abort> {
        PgDb::write(self, body)
    }

    fn read(&self, body: Body<'_>) -> std::result::Result<(), Abort> {
        PgDb::read(self, body)
    }

    fn snapshot(&self, body: Body<'_>) -> std::result::Result<(), Abort> {
        PgDb::snapshot(self, body)
    }

    /// Each write in its own transaction (its operation's own `write`), settled once that
    /// committed: PostgreSQL runs writers side by side, so grouping would only make one
    /// write's failure or lock wait everyone's.
    fn drain_queued(&self, next_group: NextGroup<'_, '_>) {
        while let Some(writes) = next_group(usize::MAX) {
            for write in writes {
                // A panicked write drops its settle, which tells its caller.
                if let Ok(settle) = catch_unwind(AssertUnwindSafe(write)) {
                    settle(Ok(()));
                }
            }
        }
    }

    /// Every host's posts and decisions reach this process as `NOTIFY` and its bus,
    /// so a wait reads again only as a safety net: hundreds of waits polling a shared
    /// server would load it for every other caller.
    fn wait_poll(&self, poll: Duration) -> Duration {
        poll.max(WAIT_SAFETY_NET)
    }

    fn announces_writes(&self) -> bool {
        true
    }

    fn schema_probe(&self) -> (&'static str, i64) {
        (
            "SELECT CAST(COALESCE(MAX(version), 0) AS BIGINT) FROM clawboo_schema",
            LATEST,
        )
    }

    /// Both pools together: the synchronous one and the asynchronous reads'.
    fn pool_stats(&self) -> Option<PoolStats> {
        let (sync, lent) = (self.pool.stats(), self.async_pool.stats());
        Some(PoolStats {
            max: sync.max + lent.max,
            open: sync.open + lent.open,
            in_use: sync.in_use + lent.in_use,
            waiting: sync.waiting + lent.waiting,
        })
    }

    fn begin_async(&self, kind: AsyncKind) -> Option<BoxFuture<'_, Result<AsyncTx>>> {
        Some(Box::pin(async move {
            let tx = self.async_pool.lend(kind).await?;
            Ok(AsyncTx(Box::new(tx)))
        }))
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

impl Drop for PgDb {
    fn drop(&mut self) {
        if self.bell.take_unannounced() {
            // Best effort and brief: an unreachable server must not hold up an exit.
            let by = Instant::now() + ANNOUNCE_AT_EXIT;
            if let Ok(conn) = self.pool.get_by(by) {
                let announcement = listen::announcement();
                let _ = conn.run_until(conn.client().batch_execute(&announcement), Some(by));
            }
        }
        self.pool.close();
        self.async_pool.close();
        // A store may be dropped on an async runtime's thread (a stdio server ending),
        // where waiting for this runtime's threads is not allowed.
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

/// What each pooled connection runs first so that a statement waiting for a lock another
/// transaction holds (a peer process frozen in the middle of a write, say) gives up after
/// `busy_timeout`, as a SQLite writer does, instead of holding its call forever: the call
/// then fails as busy and can be retried. Nothing when the URL's `options` set their own
/// `lock_timeout`.
fn lock_timeout_setup(config: &tokio_postgres::Config, busy_timeout: Duration) -> String {
    if config
        .get_options()
        .is_some_and(|options| options.contains("lock_timeout"))
    {
        return String::new();
    }
    format!("SET lock_timeout = {}", busy_timeout.as_millis().max(1))
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Ends what [`PgDb::hold`] registered: unregisters the connection and, for a transaction
/// not marked committed, rolls it back (an early return, an error or a panic).
struct Holding {
    db: u64,
    tx: Rc<PgTx>,
    rollback: bool,
}

impl Holding {
    fn committed(mut self) {
        self.rollback = false;
    }
}

impl Drop for Holding {
    fn drop(&mut self) {
        OPEN.with(|open| {
            let mut open = open.borrow_mut();
            if let Some(at) = open.iter().rposition(|open| open.db == self.db) {
                open.remove(at);
            }
        });
        // A transaction whose BEGIN was never sent has nothing to roll back.
        let began = self.tx.unsent_begin.take().is_none();
        if self.rollback
            && began
            && let Err(e) = self.tx.simple("ROLLBACK")
        {
            // The connection is gone with its transaction; the pool drops it.
            tracing::debug!(error = %e, "rolling back a failed PostgreSQL transaction failed");
        }
    }
}

/// A pooled connection the store runs statements on, in a transaction or not.
pub(crate) struct PgTx {
    conn: Pooled,
    rewritten: Arc<Mutex<HashMap<String, Arc<str>>>>,
    /// The `BEGIN …` of a transaction that has not run a statement yet: it is sent with
    /// the first one, in the same round trip.
    unsent_begin: Cell<Option<&'static str>>,
}

impl PgTx {
    /// Send `request`, after the transaction's `BEGIN` when that is still unsent, and wait
    /// for its answer. Both are written before either answer is read: the client sends a
    /// request when its future is first polled, and `join` polls the `BEGIN` first.
    fn send<T>(
        &self,
        request: impl Future<Output = std::result::Result<T, tokio_postgres::Error>>,
    ) -> Result<T> {
        match self.unsent_begin.take() {
            Some(begin) => {
                let (began, answer) = self.conn.run(async {
                    let both = join(self.conn.client().batch_execute(begin), request);
                    Ok::<_, tokio_postgres::Error>(both.await)
                })?;
                began?;
                Ok(answer?)
            }
            None => self.conn.run(request),
        }
    }

    /// Run statements without parameters through the simple protocol.
    fn simple(&self, sql: &str) -> Result<()> {
        self.send(self.conn.client().batch_execute(sql))
    }

    /// Send statements without parameters and do not wait for their answer: the
    /// connection reads and drops it, and the connection's next request is answered after
    /// it. Only for what cannot fail short of losing the connection, which the next request
    /// then reports (a read-only transaction's `COMMIT`).
    fn send_unanswered(&self, sql: &str) {
        self.conn
            .send_unanswered(self.conn.client().batch_execute(sql));
    }

    /// Undo and forget the innermost savepoint after a failed nested write.
    fn undo_savepoint(&self) {
        if let Err(e) = self.simple("ROLLBACK TO nested_write; RELEASE nested_write") {
            tracing::debug!(error = %e, "undoing a failed nested PostgreSQL write failed");
        }
    }

    /// The prepared statement for `sql` (written with `?N`), from this connection's cache.
    fn statement(&self, sql: &str) -> Result<tokio_postgres::Statement> {
        let text = {
            let mut rewritten = lock(&self.rewritten);
            match rewritten.get(sql) {
                Some(text) => Arc::clone(text),
                None => {
                    let text: Arc<str> = dollar_placeholders(sql).into();
                    rewritten.insert(sql.to_owned(), Arc::clone(&text));
                    text
                }
            }
        };
        self.conn.prepare(&text)
    }
}

fn bind<'p>(params: Params<'p>) -> Vec<Param<'p>> {
    params.iter().map(|p| Param(p.to_value())).collect()
}

fn as_sql<'a>(params: &'a [Param<'a>]) -> Vec<&'a (dyn tokio_postgres::types::ToSql + Sync)> {
    params
        .iter()
        .map(|p| p as &(dyn tokio_postgres::types::ToSql + Sync))
        .collect()
}

struct PgRow<'r>(&'r tokio_postgres::Row);

/// Column `index` of `row` in the neutral form.
fn column(row: &tokio_postgres::Row, index: usize) -> Result<Value<'_>> {
    let column_error = |why: String| {
        StoreError::Backend(BackendError {
            kind: BackendErrorKind::Other,
            message: format!("column {index}: {why}"),
        })
    };
    let raw: Raw<'_> = row
        .try_get(index)
        .map_err(|e| column_error(e.to_string()))?;
    decode(&raw).map_err(|e| column_error(e.to_string()))
}

impl DbRow for PgRow<'_> {
    fn value(&self, index: usize) -> Result<Value<'_>> {
        column(self.0, index)
    }

    fn columns(&self) -> usize {
        self.0.len()
    }
}

impl Tx for PgTx {
    fn dialect(&self) -> Dialect {
        Dialect::Postgres
    }

    fn check_integrity(&self, found: &mut Findings) -> Result<()> {
        integrity::check(self, found)
    }

    fn advance_counters(&self, tables: &[&str]) -> Result<()> {
        integrity::advance_counters(self, tables)
    }

    fn statement(&self, per_engine: &PerEngine) -> &'static str {
        per_engine.postgres
    }

    fn execute(&self, sql: &str, params: Params<'_>) -> Result<usize> {
        let statement = self.statement(sql)?;
        let bound = bind(params);
        let changed = self.send(self.conn.client().execute(&statement, &as_sql(&bound)))?;
        Ok(usize::try_from(changed).unwrap_or(usize::MAX))
    }

    fn query_each(
        &self,
        sql: &str,
        params: Params<'_>,
        each: &mut dyn FnMut(&dyn DbRow) -> Result<()>,
    ) -> Result<()> {
        let statement = self.statement(sql)?;
        let bound = bind(params);
        let rows = self.send(self.conn.client().query(&statement, &as_sql(&bound)))?;
        for row in &rows {
            each(&PgRow(row))?;
        }
        Ok(())
    }

    fn query_batch(&self, batch: &mut [Batched<'_>]) -> Result<()> {
        let statements = batch
            .iter()
            .map(|query| self.statement(query.sql()))
            .collect::<Result<Vec<_>>>()?;
        let bound: Vec<Vec<Param<'_>>> = batch.iter().map(|query| bind(query.params())).collect();
        let params: Vec<_> = bound.iter().map(|bound| as_sql(bound)).collect();
        let client = self.conn.client();
        // `join_all` polls its futures in order, and a request is queued on its first poll:
        // all of them are written before any answer is read.
        let answers = self.send(async {
            let requests = statements
                .iter()
                .zip(&params)
                .map(|(statement, params)| client.query(statement, params));
            join_all(requests)
                .await
                .into_iter()
                .collect::<Result<Vec<_>, _>>()
        })?;
        for (rows, query) in answers.iter().zip(batch) {
            for row in rows {
                query.take(&PgRow(row))?;
            }
        }
        Ok(())
    }

    fn notify(&self, topic: &str) -> Result<()> {
        self.query_each(NOTIFY, &[&topic], &mut |_| Ok(()))
    }

    fn serialize_on(&self, key: &str) -> Result<()> {
        self.query_each(SERIALIZE_ON, &[&key], &mut |_| Ok(()))
    }
}

#[cfg(test)]
mod tests;
