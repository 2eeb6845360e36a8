//! The SQLite backend: one writer connection behind a re-entrant lock, read-only
//! connections beside it ([`readers`]), group commit, a checkpoint thread
//! ([`checkpointer`]), the hooks other modules attach to commits ([`hooks`]) and SQLite's
//! errors as the store's ([`error`]). Nothing outside this module sees a connection.

mod checkpointer;
mod error;
pub(crate) mod hooks;
mod integrity;
mod readers;
#[cfg(test)]
mod tests;
pub(crate) mod tx;

use std::cell::Cell;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use parking_lot::{ReentrantMutex, ReentrantMutexGuard};
use rusqlite::Connection;
use rusqlite::config::DbConfig;

use crate::config::StoreConfig;
use crate::engine::{Abort, Body, Engine, Job, NextGroup};
use crate::error::{BackendError, BackendErrorKind, Result, StoreError};
use crate::migrations;
use checkpointer::{CHECKPOINT_EVERY, Checkpointer, INLINE_CHECKPOINT_PAGES};
use hooks::Hooks;
use readers::{Lent, Readers};
use tx::SqliteTx;

/// How much of the database file reads map into memory (`PRAGMA mmap_size`).
pub(super) const MMAP_BYTES: i64 = 256 << 20;

/// How long a connection keeps retrying a locked database: the largest `busy_timeout` any
/// store of this process was opened with (rusqlite takes a plain `fn` as the busy handler,
/// so the budget cannot live in a closure).
static BUSY_BUDGET_MS: AtomicU64 = AtomicU64::new(0);

/// The busy handler. SQLite's own (`busy_timeout`) sleeps 1, 2, 5, 10 … 100 ms between
/// tries, so when several processes write at once they nap while the lock, held far
/// shorter than any of those naps per claim, sits free, and throughput collapses
/// (measured: docs/BENCHMARKS.md's git history). This one naps 10 µs doubling to 1 ms,
/// jittered so processes do not retry in lockstep, until the budget since the first try of
/// this lock attempt is spent.
pub(super) fn retry_when_busy(attempt: i32) -> bool {
    thread_local! {
        static FIRST_TRY: Cell<Option<Instant>> = const { Cell::new(None) };
    }
    let now = Instant::now();
    let first_try = FIRST_TRY.with(|first| {
        if attempt == 0 {
            first.set(Some(now));
        }
        first.get().unwrap_or(now)
    });
    let budget = Duration::from_millis(BUSY_BUDGET_MS.load(Ordering::Relaxed));
    if now.duration_since(first_try) >= budget {
        return false;
    }
    let nap_us = (10u64 << attempt.clamp(0, 7)).min(1_000);
    // The wall clock's microseconds are jitter enough; no RNG needed to spread retries.
    let micros = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::from(d.subsec_micros()));
    let jitter_us = micros % (nap_us / 2 + 1);
    std::thread::sleep(Duration::from_micros(nap_us / 2 + jitter_us));
    true
}

/// Switch `conn`'s database to WAL and return the journal mode it is in. Servers that open
/// a new file together race for the switch, and SQLite answers the losers' switch with
/// `SQLITE_BUSY` at once, without calling the busy handler; so the switch is retried here
/// as the handler would retry a lock, within the same budget.
fn enable_wal(conn: &Connection) -> rusqlite::Result<String> {
    let mut attempt = 0;
    loop {
        // journal_mode returns a row, so it is read rather than executed.
        match conn.query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0)) {
            Err(rusqlite::Error::SqliteFailure(e, _))
                if e.code == rusqlite::ErrorCode::DatabaseBusy && retry_when_busy(attempt) =>
            {
                attempt = attempt.saturating_add(1);
            }
            answer => return answer,
        }
    }
}

/// The most queued writes one group transaction takes.
const MAX_GROUP: usize = 64;

/// The SQLite backend of a [`Store`]: one writer connection, readers beside it, the group
/// commit queue and the checkpoint thread.
pub(crate) struct SqliteDb {
    /// Re-entrant so that a group commit's thread, holding the connection for the whole
    /// group, can run each queued operation's own `write` as a savepoint inside it. Only
    /// shared references come out: `in_transaction` needs no `&mut Connection`.
    conn: ReentrantMutex<Connection>,
    path: PathBuf,
    /// Write transactions this store committed (its own commits do not move
    /// `PRAGMA data_version`, which counts other connections' commits).
    commits: Arc<AtomicU64>,
    /// Commits whose pre-commit hooks left idle work (the [`Checkpointer`] runs it once
    /// the store is idle after them).
    idle_work_commits: Arc<AtomicU64>,
    /// What other modules run before each commit and when the store is idle.
    hooks: Arc<Hooks>,
    /// Started by the first commit; `None` inside until then.
    checkpointer: OnceLock<Option<Checkpointer>>,
    /// Read-only connections for reads that find the writer's connection busy.
    readers: Readers,
}

use crate::db::{ChangeToken, Dialect};

impl SqliteDb {
    /// Open (creating when missing) the SQLite file at `path`, apply pending migrations and
    /// run `hooks`' pre-commit work left by plain SQL (the extensions [`Store::open_with`]
    /// is given register them).
    pub(crate) fn open(path: &Path, config: &StoreConfig, hooks: Hooks) -> Result<SqliteDb> {
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent)?;
        }
        let mut conn = Connection::open(path)?;
        let budget_ms = u64::try_from(config.busy_timeout.as_millis()).unwrap_or(u64::MAX);
        BUSY_BUDGET_MS.fetch_max(budget_ms, Ordering::Relaxed);
        conn.busy_handler(Some(retry_when_busy))?;
        conn.set_prepared_statement_cache_capacity(128);
        // Plans must not depend on bound values: otherwise SQLite re-prepares a cached
        // statement whenever a parameter it looked at changes (it did on every `get_task`,
        // for the comments' `WHERE task_id = ?1 ORDER BY …`, parsing SQL on every call;
        // docs/BENCHMARKS.md's git history, "Re-prepared statements").
        conn.set_db_config(DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG, true)?;
        let mode = enable_wal(&conn)?;
        conn.execute_batch("PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON;")?;
        // Reads map the file instead of copying each page through SQLite's private page
        // cache with `pread`, a copy that dominated reads touching many pages (a full-text
        // search joining its matching facts, a `get_task` on a large board; measured in
        // docs/BENCHMARKS.md's git history). Mapped pages are the kernel's page cache,
        // shared by every process on the file (they show as file-backed RSS).
        conn.pragma_update(None, "mmap_size", MMAP_BYTES)?;
        migrations::apply(&mut conn)?;
        // Rows written around the store (plain SQL) may still wait for pre-commit work.
        if hooks.pending(&conn)? {
            in_transaction(&conn, Bracket::IMMEDIATE, |conn| {
                hooks.before_commit_run(conn)
            })?;
        }
        Ok(SqliteDb {
            conn: ReentrantMutex::new(conn),
            path: path.to_path_buf(),
            commits: Arc::new(AtomicU64::new(0)),
            idle_work_commits: Arc::new(AtomicU64::new(0)),
            hooks: Arc::new(hooks),
            checkpointer: OnceLock::new(),
            readers: Readers {
                enabled: mode.eq_ignore_ascii_case("wal"),
                idle: Mutex::new(Vec::new()),
                opened: AtomicU64::new(0),
            },
        })
    }

    /// The database file this store writes.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Count a commit (and whether it left idle work); wake (or, at the first commit,
    /// start) the checkpointer.
    fn committed(&self, conn: &Connection, left_idle_work: bool) {
        if left_idle_work {
            self.idle_work_commits.fetch_add(1, Ordering::Relaxed);
        }
        let n = self.commits.fetch_add(1, Ordering::Relaxed) + 1;
        let checkpointer = self.checkpointer.get_or_init(|| {
            let started = Checkpointer::start(
                &self.path,
                Arc::clone(&self.commits),
                Arc::clone(&self.idle_work_commits),
                Arc::clone(&self.hooks),
            );
            // From here on that thread does the checkpoints' work; a commit checkpoints
            // only when the WAL outgrew [`INLINE_CHECKPOINT_PAGES`] (nearly all of it is
            // copied by then), which also lets SQLite start the WAL over. Without the
            // thread SQLite's own setting stays.
            let inline = format!("PRAGMA wal_autocheckpoint={INLINE_CHECKPOINT_PAGES}");
            if started.is_some()
                && let Err(e) = conn.execute_batch(&inline)
            {
                tracing::debug!(error = %e, "auto-checkpoint stays on");
            }
            started
        });
        if n.is_multiple_of(CHECKPOINT_EVERY)
            && let Some(checkpointer) = checkpointer
        {
            let _ = checkpointer.wake.try_send(());
        }
    }

    /// What the checkpoint thread's rounds hold ([`Checkpointer::rounds`]), once the first
    /// commit started it.
    #[cfg(test)]
    pub(crate) fn checkpoint_rounds(&self) -> Option<Arc<Mutex<()>>> {
        self.checkpointer
            .get()
            .and_then(Option::as_ref)
            .map(|c| Arc::clone(&c.rounds))
    }

    fn lock(&self) -> ReentrantMutexGuard<'_, Connection> {
        // No poisoning to recover from: a panic while holding the lock leaves no transaction
        // open (`in_transaction`'s guard rolls back on unwind), so the connection stays sound.
        self.conn.lock()
    }

    /// Run `f` inside one `BEGIN IMMEDIATE` transaction: committed when `f` returns `Ok`,
    /// rolled back otherwise. Use for every read-modify-write. Inside a group commit
    /// ([`Store::run_queued_writes`]) the transaction is a savepoint of the group's, so a
    /// failing operation still changes nothing. The pre-commit hooks run just before it
    /// commits (the group's, once for all its writes).
    pub(crate) fn write_sqlite<T, E>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T, E>,
    ) -> Result<T, E>
    where
        E: From<StoreError>,
    {
        crate::counters::sqlite_round_trip();
        let conn = self.lock();
        if !conn.is_autocommit() {
            return in_transaction(&conn, Bracket::SAVEPOINT, f);
        }
        let (value, left_idle_work) =
            in_transaction(&conn, Bracket::IMMEDIATE, |conn| -> Result<(T, bool), E> {
                let value = f(conn)?;
                Ok((value, self.hooks.before_commit_run(conn)?))
            })?;
        self.committed(&conn, left_idle_work);
        Ok(value)
    }

    /// Run the registered idle work to its end now, a bounded step per transaction (what
    /// the checkpoint thread does once the store is idle after commits that left some).
    pub(crate) fn run_idle_work(&self) -> Result<()> {
        while self.write_sqlite(|conn| self.hooks.idle_step(conn))? {}
        Ok(())
    }

    /// Whether a read could run at once (the writer's connection or a reader is free).
    pub(crate) fn is_idle(&self) -> bool {
        self.conn.try_lock().is_some() || self.readers.available()
    }

    /// One group: one `BEGIN IMMEDIATE`, each write in its own savepoint, one `COMMIT`,
    /// then each write settled.
    fn run_group(&self, conn: &Connection, group: Vec<Job<'_>>) {
        crate::counters::sqlite_group(group.len());
        if let Err(e) = run_cached(conn, "BEGIN IMMEDIATE") {
            // No shared transaction: the loop below runs each write on its own.
            tracing::debug!(error = %e, "group commit could not begin; writing one by one");
        }
        let mut grouped = Vec::with_capacity(group.len());
        let mut group_lost = false;
        for write in group {
            // Without the shared transaction (it never began, or SQLite rolled it back by
            // itself on a full disk or an I/O error) each write runs in its own transaction
            // and is settled at once.
            group_lost = group_lost || conn.is_autocommit();
            if group_lost {
                if let Ok(settle) = catch_unwind(AssertUnwindSafe(write)) {
                    settle(Ok(()));
                }
                continue;
            }
            // Each queued write in a savepoint of its own, so a panic midway undoes all of
            // it; dropping a panicked write's settle tells its caller.
            let savepoint = run_cached(conn, "SAVEPOINT queued_write");
            let ran = catch_unwind(AssertUnwindSafe(write));
            if savepoint.is_ok() {
                let ended = if ran.is_ok() {
                    run_cached(conn, "RELEASE queued_write")
                } else {
                    run_cached(conn, "ROLLBACK TO queued_write")
                        .and_then(|()| run_cached(conn, "RELEASE queued_write"))
                };
                if let Err(e) = ended {
                    tracing::debug!(error = %e, "ending a queued write's savepoint failed");
                }
            }
            if let Ok(settle) = ran {
                grouped.push(settle);
            }
        }
        let outcome = if group_lost {
            Err(StoreError::Backend(BackendError {
                kind: BackendErrorKind::Unavailable,
                message: "SQLite rolled the shared write transaction back (a full disk or an \
                          I/O error); nothing of it was written"
                    .into(),
            }))
        } else {
            let committed = self
                .hooks
                .before_commit_run(conn)
                .and_then(|left_idle_work| run_cached(conn, "COMMIT").map(|()| left_idle_work));
            match committed {
                Ok(left_idle_work) => {
                    self.committed(conn, left_idle_work);
                    Ok(())
                }
                Err(e) => {
                    if !conn.is_autocommit() {
                        let _ = run_cached(conn, "ROLLBACK");
                    }
                    Err(e)
                }
            }
        };
        for settle in grouped {
            settle(outcome.as_ref().map(|_| ()));
        }
    }

    /// The current [`ChangeToken`]: read it before loading what a cache holds, compare it
    /// before trusting the cache again.
    pub(crate) fn change_token(&self) -> Result<ChangeToken> {
        let conn = self.lock();
        let data_version = conn
            .prepare_cached("PRAGMA data_version")?
            .query_row([], |r| r.get(0))?;
        // `PRAGMA data_version` counts other connections' commits, `commits` this store's
        // own (read under the connection lock, which every commit holds while counting).
        Ok(ChangeToken::new(
            data_version,
            self.commits.load(Ordering::Relaxed),
        ))
    }

    /// Run `f` against a connection for reads (one consistent snapshot per statement;
    /// use [`Store::snapshot`] when several statements must agree). Inside a write on this
    /// thread that is the writer's connection (so `f` sees the write's own changes); when
    /// another thread holds that one, a read-only connection, which sees the last commit.
    pub(crate) fn read_sqlite<T, E>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T, E>,
    ) -> Result<T, E> {
        crate::counters::sqlite_round_trip();
        match self.connection_for_read() {
            ReadConnection::Writer(conn) => f(&conn),
            ReadConnection::Reader(reader) => f(&reader),
        }
    }

    /// The writer's connection when free or held by this thread, else a reader, else
    /// (all lent) the writer's once free.
    fn connection_for_read(&self) -> ReadConnection<'_> {
        if let Some(conn) = self.conn.try_lock() {
            return ReadConnection::Writer(conn);
        }
        match self.readers.lend(&self.path) {
            Some(reader) => ReadConnection::Reader(reader),
            None => ReadConnection::Writer(self.lock()),
        }
    }

    /// Run `f` inside one deferred (read) transaction, so several statements see one
    /// snapshot (inside a group commit, the group's transaction is that snapshot).
    pub(crate) fn snapshot_sqlite<T, E>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T, E>,
    ) -> Result<T, E>
    where
        E: From<StoreError>,
    {
        crate::counters::sqlite_round_trip();
        match self.connection_for_read() {
            ReadConnection::Writer(conn) if !conn.is_autocommit() => f(&conn),
            ReadConnection::Writer(conn) => in_transaction(&conn, Bracket::DEFERRED, f),
            ReadConnection::Reader(reader) => in_transaction(&reader, Bracket::DEFERRED, f),
        }
    }

    /// [`Store::snapshot`] for a read that takes long (a second or more): on a read-only
    /// connection when one is free, so the writer's connection stays free meanwhile for
    /// writes, quick reads and [`Store::change_token`].
    pub(crate) fn long_snapshot_sqlite<T, E>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T, E>,
    ) -> Result<T, E>
    where
        E: From<StoreError>,
    {
        match self.readers.lend(&self.path) {
            Some(reader) => in_transaction(&reader, Bracket::DEFERRED, f),
            None => self.snapshot_sqlite(f),
        }
    }
}

/// The connection a read runs on ([`Store::connection_for_read`]).
enum ReadConnection<'s> {
    Writer(ReentrantMutexGuard<'s, Connection>),
    Reader(Lent<'s>),
}

/// How [`in_transaction`] opens and closes its bracket.
struct Bracket {
    begin: &'static str,
    commit: &'static str,
    /// Statements that undo everything since `begin`.
    undo: &'static [&'static str],
}

impl Bracket {
    const IMMEDIATE: Bracket = Bracket {
        begin: "BEGIN IMMEDIATE",
        commit: "COMMIT",
        undo: &["ROLLBACK"],
    };
    const DEFERRED: Bracket = Bracket {
        begin: "BEGIN DEFERRED",
        commit: "COMMIT",
        undo: &["ROLLBACK"],
    };
    /// A write inside a group commit's transaction.
    const SAVEPOINT: Bracket = Bracket {
        begin: "SAVEPOINT nested_write",
        commit: "RELEASE nested_write",
        undo: &["ROLLBACK TO nested_write", "RELEASE nested_write"],
    };
}

/// Run `f` between `bracket`'s begin and commit; an error (or a panic) in `f` or in the
/// commit undoes everything `f` did. rusqlite's `Transaction` does the same but parses its
/// `BEGIN`/`COMMIT` text anew every time; these statements are prepared once per
/// connection, which matters when a claim costs tens of microseconds.
fn in_transaction<T, E>(
    conn: &Connection,
    bracket: Bracket,
    f: impl FnOnce(&Connection) -> Result<T, E>,
) -> Result<T, E>
where
    E: From<StoreError>,
{
    run_cached(conn, bracket.begin)?;
    let undo = Undo {
        conn,
        statements: bracket.undo,
        armed: true,
    };
    let value = f(conn)?;
    run_cached(conn, bracket.commit)?;
    undo.disarm();
    Ok(value)
}

/// Undoes an open bracket when dropped armed (an early return or a panic).
struct Undo<'c> {
    conn: &'c Connection,
    statements: &'static [&'static str],
    armed: bool,
}

impl Undo<'_> {
    fn disarm(mut self) {
        self.armed = false;
    }
}

impl Drop for Undo<'_> {
    fn drop(&mut self) {
        // SQLite may have rolled the transaction back already (then there is nothing left).
        if !self.armed || self.conn.is_autocommit() {
            return;
        }
        for statement in self.statements {
            if let Err(e) = run_cached(self.conn, statement) {
                tracing::warn!(error = %e, statement, "undoing a failed write failed");
            }
        }
    }
}

/// Execute one statement that takes no parameters and returns no rows, prepared once.
fn run_cached(conn: &Connection, sql: &str) -> Result<()> {
    conn.prepare_cached(sql)?.execute([])?;
    Ok(())
}

impl Engine for SqliteDb {
    fn name(&self) -> &'static str {
        "sqlite"
    }

    fn dialect(&self) -> Dialect {
        Dialect::Sqlite
    }

    fn path(&self) -> Option<&Path> {
        Some(SqliteDb::path(self))
    }

    fn write(&self, body: Body<'_>) -> std::result::Result<(), Abort> {
        self.write_sqlite(|conn| body(&SqliteTx(conn)))
    }

    fn read(&self, body: Body<'_>) -> std::result::Result<(), Abort> {
        self.read_sqlite(|conn| body(&SqliteTx(conn)))
    }

    fn snapshot(&self, body: Body<'_>) -> std::result::Result<(), Abort> {
        self.snapshot_sqlite(|conn| body(&SqliteTx(conn)))
    }

    /// Up to `MAX_GROUP` writes per transaction: writers that arrive while a group runs
    /// queue up behind it and share the next one, so N concurrent writes cost about one
    /// commit instead of N. The writer's connection is held across the groups (the lock is
    /// reentrant, so each write's own `write` runs inside as a savepoint).
    fn drain_queued(&self, next_group: NextGroup<'_, '_>) {
        let conn = self.lock();
        while let Some(group) = next_group(MAX_GROUP) {
            self.run_group(&conn, group);
        }
    }

    fn try_drain_queued(&self, next_group: NextGroup<'_, '_>) -> bool {
        // Held across the drain (the lock is reentrant), so nobody takes it in between.
        let Some(_held) = self.conn.try_lock() else {
            return false;
        };
        Engine::drain_queued(self, next_group);
        true
    }

    fn groups_writes(&self) -> bool {
        true
    }

    fn is_idle(&self) -> bool {
        SqliteDb::is_idle(self)
    }

    fn change_token(&self) -> Result<ChangeToken> {
        SqliteDb::change_token(self)
    }

    fn run_idle_work(&self) -> Result<()> {
        SqliteDb::run_idle_work(self)
    }

    fn schema_probe(&self) -> (&'static str, i64) {
        ("PRAGMA user_version", crate::migrations::LATEST)
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}
