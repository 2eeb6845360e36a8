//! The PostgreSQL backend: a `deadpool-postgres` pool of `tokio-postgres` connections,
//! driven by a small tokio runtime of the backend's own, so the store's synchronous API
//! works from any thread (plain threads, tokio's blocking pool, and a stdio server's
//! single-threaded runtime alike). Statements block on the client's futures with
//! `futures_executor::block_on`: a client talks to its connection task over channels,
//! so those futures can be polled from any thread while the runtime does the I/O.
//!
//! Writers run side by side under READ COMMITTED; the rules that need one writer at a time
//! say so through [`Tx::serialize_on`] (a transaction-scoped advisory lock). Nothing
//! outside this module sees a driver type.

mod codec;
mod error;
mod listen;
mod migrations;
mod tls;

use std::cell::RefCell;
use std::collections::HashMap;
use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Object, Pool, RecyclingMethod, Runtime};

use crate::Store;
use crate::db::{DbRow, Dialect, Params, Tx, Value, dollar_placeholders};
use crate::error::{BackendError, BackendErrorKind, Result, StoreError};
use crate::store::{QueuedWrite, StoreConfig};
use codec::{Param, Raw, decode};
use error::unavailable;

/// How long a call waits for a connection (a free one, or a new one to be made) before it
/// reports the database unavailable: long enough for a busy pool, short enough that an
/// agent hears of an outage within seconds.
const CONNECTION_WAIT: Duration = Duration::from_secs(5);

/// Every store in this process gets its own number, so a thread's open transactions are
/// matched to the store they belong to.
static NEXT_DB_ID: AtomicU64 = AtomicU64::new(1);

thread_local! {
    /// The transactions this thread has open, innermost last, by store: a `write` or
    /// `read` inside a `write` on the same thread joins it, as on SQLite.
    static OPEN: RefCell<Vec<(u64, Rc<PgTx>)>> = const { RefCell::new(Vec::new()) };
}

/// The PostgreSQL engine of a [`Store`].
pub(crate) struct PgDb {
    id: u64,
    /// Drives the pool's connections; `None` only while being dropped.
    runtime: Option<tokio::runtime::Runtime>,
    handle: tokio::runtime::Handle,
    pool: Pool,
    /// `?N` statements rewritten to `$N`, by their text.
    rewritten: Arc<Mutex<HashMap<String, Arc<str>>>>,
    /// Writes queued by [`Store::queue_write`], and whether someone is draining them.
    queued: Mutex<(Vec<QueuedWrite>, bool)>,
}

impl PgDb {
    /// Connect to `url` (its password in the URL or already filled in from libpq's
    /// sources), and migrate the database to this build's schema.
    pub(crate) fn open(url: &str, config: &StoreConfig, on_notice: fn(&str)) -> Result<PgDb> {
        let (mut pg_config, tls) = tls::configure(url)?;
        if pg_config.get_connect_timeout().is_none() {
            pg_config.connect_timeout(CONNECTION_WAIT);
        }
        pg_config.keepalives(true);
        pg_config.keepalives_idle(Duration::from_secs(30));
        if pg_config.get_application_name().is_none() {
            pg_config.application_name("clawboo");
        }
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("clawboo-postgres")
            .enable_all()
            .build()
            .map_err(|e| unavailable(format!("cannot start the PostgreSQL runtime: {e}")))?;
        let manager_config = ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        };
        let listener = listen::Listener {
            config: pg_config.clone(),
            tls: tls.clone(),
            on_notice,
        };
        let manager = match tls {
            Some(tls) => Manager::from_config(pg_config, tls, manager_config),
            None => Manager::from_config(pg_config, tokio_postgres::NoTls, manager_config),
        };
        let pool = {
            let _context = runtime.enter();
            Pool::builder(manager)
                .max_size(config.pg_pool_size.max(1))
                .runtime(Runtime::Tokio1)
                .wait_timeout(Some(CONNECTION_WAIT))
                .create_timeout(Some(CONNECTION_WAIT))
                .recycle_timeout(Some(CONNECTION_WAIT))
                .build()
                .map_err(|e| unavailable(format!("cannot build the PostgreSQL pool: {e}")))?
        };
        let db = PgDb {
            id: NEXT_DB_ID.fetch_add(1, Ordering::Relaxed),
            handle: runtime.handle().clone(),
            runtime: Some(runtime),
            pool,
            rewritten: Arc::default(),
            queued: Mutex::new((Vec::new(), false)),
        };
        let client = db.connection()?;
        migrations::apply(&db, &client)?;
        db.handle.spawn(listener.run());
        Ok(db)
    }

    /// Run `future` to completion on this thread, with the backend's runtime as the
    /// context (the pool spawns connection tasks and sets timers on it).
    fn block_on<F: Future>(&self, future: F) -> F::Output {
        block_on_in(self.handle(), future)
    }

    fn handle(&self) -> &tokio::runtime::Handle {
        &self.handle
    }

    /// A pooled connection; `Unavailable` within [`CONNECTION_WAIT`] when none can be had.
    fn connection(&self) -> Result<Object> {
        Ok(self.block_on(self.pool.get())?)
    }

    /// The transaction this thread has open on this store, innermost.
    fn current(&self) -> Option<Rc<PgTx>> {
        OPEN.with(|open| {
            open.borrow()
                .iter()
                .rev()
                .find(|(id, _)| *id == self.id)
                .map(|(_, tx)| Rc::clone(tx))
        })
    }

    fn tx(&self, client: Object) -> PgTx {
        PgTx {
            client,
            rewritten: Arc::clone(&self.rewritten),
            runtime: self.handle().clone(),
        }
    }

    /// Run `f` in a transaction opened by `begin` and closed by `COMMIT`, registered as
    /// this thread's open transaction meanwhile; any error or panic rolls it back.
    fn in_transaction<T, E>(
        &self,
        begin: &str,
        f: impl FnOnce(&dyn Tx) -> Result<T, E>,
    ) -> Result<T, E>
    where
        E: From<StoreError>,
    {
        let tx = Rc::new(self.tx(self.connection()?));
        tx.simple(begin)?;
        OPEN.with(|open| open.borrow_mut().push((self.id, Rc::clone(&tx))));
        let closing = Closing {
            id: self.id,
            tx: Rc::clone(&tx),
            armed: true,
        };
        // An error returns here and `closing` rolls back.
        let value = f(&*tx)?;
        tx.simple("COMMIT")?;
        closing.disarm();
        Ok(value)
    }

    /// Run `f` in a savepoint of this thread's open transaction `tx`.
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

    pub(crate) fn write<T, E>(&self, f: impl FnOnce(&dyn Tx) -> Result<T, E>) -> Result<T, E>
    where
        E: From<StoreError>,
    {
        match self.current() {
            Some(tx) => Self::nested(&tx, f),
            None => self.in_transaction("BEGIN", f),
        }
    }

    pub(crate) fn read<T, E>(&self, f: impl FnOnce(&dyn Tx) -> Result<T, E>) -> Result<T, E>
    where
        E: From<StoreError>,
    {
        match self.current() {
            Some(tx) => f(&*tx),
            // Outside a transaction each statement sees the last commit.
            None => f(&self.tx(self.connection()?)),
        }
    }

    pub(crate) fn snapshot<T, E>(&self, f: impl FnOnce(&dyn Tx) -> Result<T, E>) -> Result<T, E>
    where
        E: From<StoreError>,
    {
        match self.current() {
            Some(tx) => f(&*tx),
            None => self.in_transaction("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", f),
        }
    }

    pub(crate) fn queued_writes(&self) -> usize {
        lock(&self.queued).0.len()
    }

    pub(crate) fn queue_write(&self, write: QueuedWrite) -> bool {
        let mut queue = lock(&self.queued);
        queue.0.push(write);
        !std::mem::replace(&mut queue.1, true)
    }

    /// Run every queued write, each in its own transaction (its operation's own `write`),
    /// and settle it once that committed: PostgreSQL runs writers side by side, so
    /// grouping would only make one write's failure or lock wait everyone's.
    pub(crate) fn run_queued_writes(&self, store: &Store) {
        loop {
            let writes = {
                let mut queue = lock(&self.queued);
                if queue.0.is_empty() {
                    queue.1 = false;
                    return;
                }
                std::mem::take(&mut queue.0)
            };
            for write in writes {
                // A panicked write drops its settle, which tells its caller.
                if let Ok(settle) = catch_unwind(AssertUnwindSafe(|| write(store))) {
                    settle(Ok(()));
                }
            }
        }
    }
}

impl Drop for PgDb {
    fn drop(&mut self) {
        self.pool.close();
        // A store may be dropped on an async runtime's thread (a stdio server ending),
        // where waiting for this runtime's threads is not allowed.
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

/// Run `future` to completion on this thread, with `runtime` as the context (the pool
/// spawns connection tasks and sets timers on it). Outside tokio's cooperative budget: a
/// stdio server calls the store from inside one of its own runtime's tasks, whose budget
/// would otherwise run out after a burst of calls and defer the pool's wake-up until that
/// task yields, which it never does while blocked here.
fn block_on_in<F: Future>(runtime: &tokio::runtime::Handle, future: F) -> F::Output {
    let _context = runtime.enter();
    futures_executor::block_on(tokio::task::unconstrained(future))
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Ends a transaction opened by [`PgDb::in_transaction`]: unregisters it and, unless
/// disarmed by a commit, rolls it back (an early return, an error or a panic).
struct Closing {
    id: u64,
    tx: Rc<PgTx>,
    armed: bool,
}

impl Closing {
    fn disarm(mut self) {
        self.armed = false;
    }
}

impl Drop for Closing {
    fn drop(&mut self) {
        OPEN.with(|open| {
            let mut open = open.borrow_mut();
            if let Some(at) = open.iter().rposition(|(id, _)| *id == self.id) {
                open.remove(at);
            }
        });
        if self.armed
            && let Err(e) = self.tx.simple("ROLLBACK")
        {
            // The connection is gone with its transaction; the pool drops it.
            tracing::debug!(error = %e, "rolling back a failed PostgreSQL write failed");
        }
    }
}

/// A pooled connection the store runs statements on, in a transaction or not.
pub(crate) struct PgTx {
    client: Object,
    rewritten: Arc<Mutex<HashMap<String, Arc<str>>>>,
    runtime: tokio::runtime::Handle,
}

impl PgTx {
    fn block_on<F: Future>(&self, future: F) -> F::Output {
        block_on_in(&self.runtime, future)
    }

    /// Run a statement without parameters through the simple protocol.
    fn simple(&self, sql: &str) -> Result<()> {
        self.block_on(self.client.batch_execute(sql))?;
        Ok(())
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
        Ok(self.block_on(self.client.prepare_cached(&text))?)
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

impl DbRow for PgRow<'_> {
    fn value(&self, index: usize) -> Result<Value<'_>> {
        let column_error = |why: String| {
            StoreError::Backend(BackendError {
                kind: BackendErrorKind::Other,
                message: format!("column {index}: {why}"),
            })
        };
        let raw: Raw<'_> = self
            .0
            .try_get(index)
            .map_err(|e| column_error(e.to_string()))?;
        decode(&raw).map_err(|e| column_error(e.to_string()))
    }
}

impl Tx for PgTx {
    fn dialect(&self) -> Dialect {
        Dialect::Postgres
    }

    fn execute(&self, sql: &str, params: Params<'_>) -> Result<usize> {
        let statement = self.statement(sql)?;
        let bound = bind(params);
        let changed = self.block_on(self.client.execute(&statement, &as_sql(&bound)))?;
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
        let rows = self.block_on(self.client.query(&statement, &as_sql(&bound)))?;
        for row in &rows {
            each(&PgRow(row))?;
        }
        Ok(())
    }

    fn notify(&self, topic: &str) -> Result<()> {
        self.query_each(
            "SELECT pg_notify('clawboo', CAST(?1 AS TEXT))",
            &[&topic],
            &mut |_| Ok(()),
        )
    }

    fn serialize_on(&self, key: &str) -> Result<()> {
        self.query_each(
            "SELECT pg_advisory_xact_lock(hashtextextended(CAST(?1 AS TEXT), 0))",
            &[&key],
            &mut |_| Ok(()),
        )
    }
}

#[cfg(test)]
mod tests;
