//! The backend-free [`Store`]: what every domain rule runs through, whichever engine holds
//! the data. Each method hands the domain a [`Tx`]; the backend behind it is SQLite (one
//! file, `sqlite/`) or PostgreSQL (one server for many hosts, `postgres/`).

use std::any::Any;
use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::bus::Bus;
use crate::config::{Clock, StoreConfig};
use crate::db::{ChangeToken, Dialect, Tx};
use crate::engine::{Abort, Body, Engine, Job, SettleWrite};
use crate::error::{BackendError, BackendErrorKind, Result, StoreError};
use crate::events::{Event, Raising};
use crate::extension::ExtensionState;
use crate::pacing::Pacing;
use crate::sqlite::SqliteDb;

/// A write queued for the next group commit ([`Store::queue_write`]): it runs its store
/// operation inside the group's transaction and returns how to report the outcome.
pub type QueuedWrite = Box<dyn FnOnce(&Store) -> SettleWrite + Send>;

/// Writes waiting for a group commit, and whether someone is draining them. The store
/// keeps the queue; each engine decides how a group of it runs (`drain_queued`).
#[derive(Default)]
struct WriteQueue {
    writes: Vec<QueuedWrite>,
    /// Set by the `queue_write` that found nobody draining, cleared by the drain that found
    /// the queue empty (both under the queue's lock, so no write is ever left behind).
    draining: bool,
}

/// The store: every domain operation (`Store::claim_task`, `Store::create_task`, …) runs
/// through it, the domain crates over it included. Cheap to share behind an `Arc`; every method is blocking and must run off
/// the async executor's hot path (`clawboo_mcp::protocol::blocking` says where).
pub struct Store {
    engine: Box<dyn Engine>,
    clock: Clock,
    /// [`StoreConfig::lease`] in milliseconds.
    lease_ms: Option<i64>,
    /// When each (team, agent)'s next call must be recorded (its last-seen time and lease
    /// renewal): most calls fall before it and write nothing.
    seen_due: Mutex<HashMap<(Option<String>, String), i64>>,
    /// What each of [`StoreConfig::extensions`] kept at open, in their order.
    pub(crate) extension_state: Vec<ExtensionState>,
    /// Writes waiting for the next group commit ([`Store::queue_write`]).
    queued: Mutex<WriteQueue>,
    /// How its first writer paces a group commit ([`Store::run_write`]).
    pub(crate) pacing: Pacing,
    /// Where committed events meet this process's waits ([`crate::events`]).
    pub(crate) bus: Arc<Bus>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut out = f.debug_struct("Store");
        match self.engine.path() {
            Some(path) => out.field("path", &path),
            None => out.field("backend", &self.engine.name()),
        };
        out.finish_non_exhaustive()
    }
}

/// The refusal of SQLite-only work on a PostgreSQL store.
fn sqlite_only(what: &str) -> StoreError {
    StoreError::Backend(BackendError {
        kind: BackendErrorKind::Other,
        message: format!("{what} is SQLite-only and this store runs on PostgreSQL"),
    })
}

impl Store {
    pub(crate) fn from_engine(
        engine: Box<dyn Engine>,
        config: &StoreConfig,
        bus: Arc<Bus>,
    ) -> Store {
        Store {
            engine,
            clock: config.clock,
            lease_ms: config
                .lease
                .filter(|lease| !lease.is_zero())
                .map(|lease| i64::try_from(lease.as_millis()).unwrap_or(i64::MAX)),
            seen_due: Mutex::new(HashMap::new()),
            extension_state: Vec::new(),
            queued: Mutex::new(WriteQueue::default()),
            pacing: Pacing::default(),
            bus,
        }
    }

    /// The engine's name, for logs: `sqlite` or `postgres`.
    pub fn backend_name(&self) -> &'static str {
        self.engine.name()
    }

    /// The SQL dialect of the engine under this store, for a crate over it that keeps one
    /// implementation per engine and picks it once.
    pub fn dialect(&self) -> Dialect {
        self.engine.dialect()
    }

    /// The state of type `T` an extension kept when this store opened
    /// ([`crate::extension::Extension::opened`]); `None` when none of that type was kept.
    pub fn extension_state<T: Any>(&self) -> Option<&T> {
        self.extension_state
            .iter()
            .find_map(|state| state.downcast_ref::<T>())
    }

    /// The SQLite file this store writes; `None` on PostgreSQL.
    pub fn path(&self) -> Option<&Path> {
        self.engine.path()
    }

    /// Now, in epoch milliseconds, from the configured clock.
    pub fn now_ms(&self) -> i64 {
        (self.clock)()
    }

    /// How long a claim's lease lasts, in milliseconds (`None`: leases are off).
    pub fn lease_ms(&self) -> Option<i64> {
        self.lease_ms
    }

    /// The per-agent due times of [`Store::record_call`].
    pub(crate) fn seen_due(&self) -> &Mutex<HashMap<(Option<String>, String), i64>> {
        &self.seen_due
    }

    /// Run `f` inside one write transaction: committed when `f` returns `Ok`, rolled back
    /// otherwise. Like `read` and `snapshot`, one `tracing` span (`store.write`), a child of
    /// the call that asked, so a trace shows each call's trips to the database. Every read-modify-write of a domain rule runs here. A write inside a
    /// write on the same thread joins it (as a savepoint, so a failing inner write still
    /// changes nothing). The events it raised ([`crate::events::raise`]) are published once
    /// it committed. Public for the domain crates over the store (memory, the broker).
    pub fn write<T, E>(&self, f: impl FnOnce(&dyn Tx) -> Result<T, E>) -> Result<T, E>
    where
        E: From<StoreError>,
    {
        let _span = tracing::info_span!("store.write", engine = self.engine.name()).entered();
        let raising = Raising::begin();
        let written = in_body(f, |body| self.engine.write(body))?;
        self.publish(&raising.succeeded());
        Ok(written)
    }

    /// Wake this process's waits for committed `events`.
    pub(crate) fn publish(&self, events: &[Event]) {
        for event in events {
            self.bus.publish(event);
        }
    }

    /// Run read-only `f`; each statement sees a committed state (and, inside a write on
    /// this thread, that write's own changes). Use [`Store::snapshot`] when several
    /// statements must agree. Public for the domain crates over the store (memory).
    pub fn read<T, E>(&self, f: impl FnOnce(&dyn Tx) -> Result<T, E>) -> Result<T, E>
    where
        E: From<StoreError>,
    {
        let _span = tracing::info_span!("store.read", engine = self.engine.name()).entered();
        in_body(f, |body| self.engine.read(body))
    }

    /// Run read-only `f` in one read transaction, so every statement sees one snapshot.
    /// Public for the domain crates over the store (memory).
    pub fn snapshot<T, E>(&self, f: impl FnOnce(&dyn Tx) -> Result<T, E>) -> Result<T, E>
    where
        E: From<StoreError>,
    {
        let _span = tracing::info_span!("store.snapshot", engine = self.engine.name()).entered();
        in_body(f, |body| self.engine.snapshot(body))
    }

    /// [`Store::write`] on the SQLite connection itself, for SQLite-only work.
    #[cfg(test)]
    pub(crate) fn write_sqlite<T, E>(
        &self,
        f: impl FnOnce(&rusqlite::Connection) -> Result<T, E>,
    ) -> Result<T, E>
    where
        E: From<StoreError>,
    {
        match self.sqlite() {
            Some(db) => db.write_sqlite(f),
            None => Err(sqlite_only("this write").into()),
        }
    }

    /// [`Store::read`] on a SQLite connection itself, for SQLite-only work.
    #[cfg(test)]
    pub(crate) fn read_sqlite<T, E>(
        &self,
        f: impl FnOnce(&rusqlite::Connection) -> Result<T, E>,
    ) -> Result<T, E>
    where
        E: From<StoreError>,
    {
        match self.sqlite() {
            Some(db) => db.read_sqlite(f),
            None => Err(sqlite_only("this read").into()),
        }
    }

    /// [`Store::snapshot`] on a SQLite connection itself, for SQLite-only work.
    #[cfg(test)]
    pub(crate) fn snapshot_sqlite<T, E>(
        &self,
        f: impl FnOnce(&rusqlite::Connection) -> Result<T, E>,
    ) -> Result<T, E>
    where
        E: From<StoreError>,
    {
        match self.sqlite() {
            Some(db) => db.snapshot_sqlite(f),
            None => Err(sqlite_only("this read").into()),
        }
    }

    /// [`Store::snapshot`] for a read that takes long, on a SQLite read-only connection
    /// (kept off the writer's), for SQLite-only work. Public for the crates over the
    /// store that read SQLite itself (memory reads FTS5's index whole).
    pub fn long_snapshot_sqlite<T, E>(
        &self,
        f: impl FnOnce(&rusqlite::Connection) -> Result<T, E>,
    ) -> Result<T, E>
    where
        E: From<StoreError>,
    {
        match self.sqlite() {
            Some(db) => db.long_snapshot_sqlite(f),
            None => Err(sqlite_only("this read").into()),
        }
    }

    /// The SQLite engine, for the work only SQLite does (and its own tests).
    pub(crate) fn sqlite(&self) -> Option<&SqliteDb> {
        self.engine.as_any().downcast_ref::<SqliteDb>()
    }

    /// The current [`ChangeToken`]: read it before loading what a cache holds, compare it
    /// before trusting the cache again. The in-process caches of memory search are checked
    /// against it. Those exist on SQLite only: on PostgreSQL searches read the database,
    /// and no write pays to keep a token (migration 0001's `clawboo_changes` is no longer
    /// written), so asking is a bug.
    pub fn change_token(&self) -> Result<ChangeToken> {
        self.engine.change_token()
    }

    /// Run the backend's idle work (the [`crate::extension::IdleStep`]s extensions
    /// registered) to its end now, for whoever must not wait for the store to be idle.
    pub fn run_idle_work(&self) -> Result<()> {
        self.engine.run_idle_work()
    }

    /// Run read-only `f` at once when a connection is free for it, or hand it back. Lets
    /// an async caller do a short read on its own thread instead of paying two thread
    /// hand-offs, without waiting for a write group there. On PostgreSQL every call may
    /// wait on the network, so it is always handed back.
    pub fn run_if_idle<T, F: FnOnce(&Store) -> T>(&self, f: F) -> std::result::Result<T, F> {
        if self.engine.is_idle() {
            Ok(f(self))
        } else {
            Err(f)
        }
    }

    /// How many writes wait in the queue for the next group.
    pub fn queued_writes(&self) -> usize {
        self.write_queue().writes.len()
    }

    /// Queue a write for the next group commit; a write is acknowledged only after its
    /// group committed. Returns `true` when nobody is draining the queue, so the caller must
    /// call [`Store::run_queued_writes`] (now or soon); `false` when a drain in progress
    /// will reach this write, so the caller only waits for it to be settled.
    pub fn queue_write(&self, write: QueuedWrite) -> bool {
        let mut queue = self.write_queue();
        queue.writes.push(write);
        !std::mem::replace(&mut queue.draining, true)
    }

    fn write_queue(&self) -> std::sync::MutexGuard<'_, WriteQueue> {
        self.queued
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The next group of at most `max` queued writes; `None`, ending the drain, when the
    /// queue is empty (under the queue's lock: a write queued after it starts a new drain).
    fn next_group(&self, max: usize) -> Option<Vec<Job<'_>>> {
        let mut queue = self.write_queue();
        if queue.writes.is_empty() {
            queue.draining = false;
            return None;
        }
        let n = queue.writes.len().min(max);
        let group = queue.writes.drain(..n);
        Some(
            group
                .map(|write| -> Job<'_> { Box::new(move || self.run_in_group(write)) })
                .collect(),
        )
    }

    /// Run one queued write inside its group's transaction; the events it raised are
    /// published when the group committed, before its caller hears so.
    fn run_in_group(&self, write: QueuedWrite) -> SettleWrite {
        let raising = Raising::begin();
        let settle = write(self);
        let raised = raising.ran_in_group();
        if raised.is_empty() {
            return settle;
        }
        let bus = Arc::clone(&self.bus);
        Box::new(move |group: std::result::Result<(), &StoreError>| {
            if group.is_ok() {
                for event in &raised {
                    bus.publish(event);
                }
            }
            settle(group);
        })
    }

    /// Run every queued write. On SQLite up to a group per transaction (one
    /// `BEGIN IMMEDIATE`, each write in its own savepoint, one `COMMIT`), so N concurrent
    /// writes cost about one commit; on PostgreSQL, whose writers run side by side, each in
    /// its own transaction. Returns once the queue was seen empty.
    pub fn run_queued_writes(&self) {
        let _end_on_panic = EndDrainOnPanic(self);
        self.engine.drain_queued(&mut |max| self.next_group(max));
    }

    /// The longest a wait goes between reads when it heard nothing ([`Store::listen_to_room`],
    /// [`Store::listen_to_approval`]), for a wait that would poll every `poll` where polling is
    /// how it learns of other processes' writes (SQLite: they tell nobody here). On
    /// PostgreSQL every host's posts and decisions reach this process as `NOTIFY` and its
    /// bus, so a wait reads again only as a safety net, every
    /// [`crate::WAIT_SAFETY_NET`] at the most often: hundreds of waits polling a shared server
    /// would load it for every other caller.
    pub fn wait_poll(&self, poll: Duration) -> Duration {
        self.engine.wait_poll(poll)
    }

    /// What a readiness probe asks ([`Engine::schema_probe`]).
    pub(crate) fn schema_probe(&self) -> (&'static str, i64) {
        self.engine.schema_probe()
    }

    /// The engine under the store, for `run.rs`, which decides how each engine's work runs.
    pub(crate) fn engine(&self) -> &dyn Engine {
        &*self.engine
    }

    /// The engine's pool occupancy, where it keeps a pool.
    pub(crate) fn engine_pool_stats(&self) -> Option<crate::engine::PoolStats> {
        self.engine.pool_stats()
    }

    /// Whether every process announces its writes to every other (PostgreSQL's
    /// `LISTEN/NOTIFY`), so a live view is told rather than polling.
    pub(crate) fn announces_writes(&self) -> bool {
        self.engine.announces_writes()
    }

    /// Whether queued writes share one commit (SQLite), so that a drainer gains by
    /// gathering more of them first; on PostgreSQL each runs in its own transaction.
    pub fn groups_writes(&self) -> bool {
        self.engine.groups_writes()
    }

    /// [`Store::run_queued_writes`] when it can run at once without waiting: on SQLite when
    /// the writer's connection is free now; `false`, having run nothing, otherwise (always
    /// on PostgreSQL, whose writes wait on the network). For a caller on an async thread,
    /// which must not block.
    pub fn try_run_queued_writes(&self) -> bool {
        let _end_on_panic = EndDrainOnPanic(self);
        self.engine
            .try_drain_queued(&mut |max| self.next_group(max))
    }
}

/// Ends a drain if a group panics, so later writers start a new one.
struct EndDrainOnPanic<'s>(&'s Store);

impl Drop for EndDrainOnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.write_queue().draining = false;
        }
    }
}

/// Run the caller's `f` as an engine's transaction body, keeping its own result and error
/// here so the engine's methods stay free of type parameters: `Ok` once the engine
/// committed (or finished the read), the caller's own error when `f` failed, the engine's
/// error otherwise.
fn in_body<T, E>(
    f: impl FnOnce(&dyn Tx) -> std::result::Result<T, E>,
    run: impl FnOnce(Body<'_>) -> std::result::Result<(), Abort>,
) -> std::result::Result<T, E>
where
    E: From<StoreError>,
{
    let mut f = Some(f);
    let mut outcome: Option<std::result::Result<T, E>> = None;
    let ended = run(&mut |tx| {
        let Some(f) = f.take() else {
            return Err(Abort::Store(engine_fault("ran a transaction body twice")));
        };
        let result = f(tx);
        let failed = result.is_err();
        outcome = Some(result);
        if failed { Err(Abort::Caller) } else { Ok(()) }
    });
    match (ended, outcome) {
        (Ok(()), Some(result)) => result,
        (Err(_), Some(Err(caller))) => Err(caller),
        (Err(Abort::Store(engine)), _) => Err(E::from(engine)),
        (Ok(()) | Err(Abort::Caller), _) => Err(E::from(engine_fault(
            "ended a transaction without running its body",
        ))),
    }
}

/// An engine broke the contract of [`Engine`]: a bug, reported rather than panicking.
fn engine_fault(what: &str) -> StoreError {
    StoreError::Backend(BackendError {
        kind: BackendErrorKind::Other,
        message: format!("the storage engine {what}"),
    })
}
