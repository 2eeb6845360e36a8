//! What the store asks of an engine: transactions, the runs of queued writes, and the few
//! things only one engine has. Each engine implements [`Engine`] in its own folder
//! (`sqlite/`, `postgres/`); the store holds a `Box<dyn Engine>` and never asks which
//! engine it is. A third engine is one more folder and one more opening in `lib.rs`.

use std::any::Any;
use std::path::Path;
use std::time::Duration;

use crate::db::{ChangeToken, Dialect, Tx};
use crate::error::{BackendError, BackendErrorKind, Result, StoreError};
use crate::reads::AsyncTx;
use futures_util::future::BoxFuture;

/// Why a transaction's body ended early: the engine failed (roll back and report it), or
/// the caller's own code returned its error (roll back; the store hands that error back).
pub(crate) enum Abort {
    Store(StoreError),
    Caller,
}

impl From<StoreError> for Abort {
    fn from(error: StoreError) -> Abort {
        Abort::Store(error)
    }
}

/// The body of a transaction, with the caller's own result kept by the store (so the
/// engine's methods need no type parameters and the trait stays object-safe).
pub(crate) type Body<'a> = &'a mut dyn FnMut(&dyn Tx) -> std::result::Result<(), Abort>;

/// Reports a queued write's outcome to its caller once its group ended: `Ok` when the group
/// committed, the error that rolled the whole group back otherwise.
pub type SettleWrite = Box<dyn FnOnce(std::result::Result<(), &StoreError>) + Send>;

/// One queued write, ready to run inside a group: it runs its store operation and returns
/// how to report the group's outcome.
pub(crate) type Job<'a> = Box<dyn FnOnce() -> SettleWrite + 'a>;

/// Hands out the next group of at most `max` queued writes; `None` ends the drain.
pub(crate) type NextGroup<'a, 'j> = &'a mut dyn FnMut(usize) -> Option<Vec<Job<'j>>>;

/// The PostgreSQL pool right now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolStats {
    /// The most connections the pool opens.
    pub max: usize,
    /// Connections open now, idle or lent.
    pub open: usize,
    /// Connections lent to a caller now.
    pub in_use: usize,
    /// Callers waiting for a connection to come free.
    pub waiting: usize,
}

/// The transaction an asynchronous connection is lent in ([`Engine::begin_async`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AsyncKind {
    /// No transaction: each statement sees the last commit (a read that reads once).
    ReadCommitted,
    /// One read-only snapshot for every statement.
    Snapshot,
    /// One write transaction, committed only when asked.
    Write,
}

/// One engine under the store.
pub(crate) trait Engine: Send + Sync {
    /// The engine's name, for logs and status: `sqlite` or `postgres`.
    fn name(&self) -> &'static str;

    /// The SQL dialect its transactions speak ([`Tx::dialect`]), known without one.
    fn dialect(&self) -> Dialect;

    /// The file this engine writes, when it is one.
    fn path(&self) -> Option<&Path> {
        None
    }

    /// Run `body` in one write transaction: committed when it returns `Ok`, rolled back
    /// otherwise; a write inside a write on the same thread joins it as a savepoint.
    fn write(&self, body: Body<'_>) -> std::result::Result<(), Abort>;

    /// Run read-only `body`; each statement sees a committed state.
    fn read(&self, body: Body<'_>) -> std::result::Result<(), Abort>;

    /// Run read-only `body` in one read transaction: one snapshot for every statement.
    fn snapshot(&self, body: Body<'_>) -> std::result::Result<(), Abort>;

    /// Lend a connection for statements the caller awaits, in the transaction `kind`
    /// names, where the engine runs statements asynchronously; `None` where it does not,
    /// and the store runs the work in [`Engine::snapshot`], [`Engine::read`] or
    /// [`Engine::write`] instead (see `Store::run_snapshot` and `Store::run_transaction`).
    fn begin_async(&self, _kind: AsyncKind) -> Option<BoxFuture<'_, Result<AsyncTx>>> {
        None
    }

    /// Run queued writes group by group as `next_group` hands them out, each settled once
    /// its group's outcome is known.
    fn drain_queued(&self, next_group: NextGroup<'_, '_>);

    /// [`Engine::drain_queued`] only when it can start at once without waiting; `false`,
    /// having run nothing, otherwise.
    fn try_drain_queued(&self, _next_group: NextGroup<'_, '_>) -> bool {
        false
    }

    /// Whether queued writes share one commit, so that gathering more of them first gains.
    fn groups_writes(&self) -> bool {
        false
    }

    /// Whether a short read would run at once, with no wait on a connection or the network.
    fn is_idle(&self) -> bool {
        false
    }

    /// How long a wait that would poll every `poll` goes between reads when nothing rang
    /// its listener (see `Store::wait_poll`).
    fn wait_poll(&self, poll: Duration) -> Duration {
        poll
    }

    /// A value that moves whenever the database may have changed, for in-process caches;
    /// an engine whose searches read the database keeps none.
    fn change_token(&self) -> Result<ChangeToken> {
        Err(StoreError::Backend(BackendError {
            kind: BackendErrorKind::Other,
            message: format!(
                "{} keeps no change token: its searches read the database",
                self.name()
            ),
        }))
    }

    /// Run the idle work extensions registered, to its end, now.
    fn run_idle_work(&self) -> Result<()> {
        Ok(())
    }

    /// Whether a write after a live view's last read is announced to it (`true` where
    /// every process tells every other of its writes), rather than found by polling.
    fn announces_writes(&self) -> bool {
        false
    }

    /// The statement that reads the schema version the database reports, and the version
    /// this build migrates it to (a readiness probe's one query).
    fn schema_probe(&self) -> (&'static str, i64);

    /// The connection pool's occupancy, where the engine keeps one.
    fn pool_stats(&self) -> Option<PoolStats> {
        None
    }

    /// The engine itself, for the store's engine-specific entry points (SQLite's own
    /// connection for the work only SQLite does).
    fn as_any(&self) -> &dyn Any;
}
