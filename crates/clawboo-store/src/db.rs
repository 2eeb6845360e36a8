use std::cell::Cell;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use rusqlite::{Connection, Transaction, TransactionBehavior};

use crate::error::{Result, StoreError};
use crate::migrations;

/// A source of "now" in epoch milliseconds; injectable so time-window rules are testable.
pub type Clock = fn() -> i64;

fn system_clock() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// How long a connection keeps retrying a locked database: the largest `busy_timeout` any
/// store of this process was opened with (rusqlite takes a plain `fn` as the busy handler,
/// so the budget cannot live in a closure).
static BUSY_BUDGET_MS: AtomicU64 = AtomicU64::new(0);

/// The busy handler. SQLite's own (`busy_timeout`) sleeps 1, 2, 5, 10 … 100 ms between
/// tries, so when several processes write at once they nap while the lock, held some tens
/// of microseconds per claim, sits free, and throughput collapses to a few hundred writes
/// per second. This one naps 10 µs doubling to 1 ms, jittered so processes do not retry in
/// lockstep, until the budget since the first try of this lock attempt is spent.
fn retry_when_busy(attempt: i32) -> bool {
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

/// How a store is opened.
#[derive(Debug, Clone)]
pub struct StoreConfig {
    /// How long a writer waits for another process's lock before giving up.
    pub busy_timeout: Duration,
    /// The time source (epoch milliseconds).
    pub clock: Clock,
}

impl Default for StoreConfig {
    fn default() -> Self {
        StoreConfig {
            busy_timeout: Duration::from_secs(10),
            clock: system_clock,
        }
    }
}

/// The one SQLite store. Cheap to share behind an `Arc`; every method is blocking and
/// must run off the async executor.
pub struct Store {
    conn: Mutex<Connection>,
    path: PathBuf,
    clock: Clock,
    /// Write transactions this store committed (its own commits do not move
    /// `PRAGMA data_version`, which counts other connections' commits).
    commits: AtomicU64,
}

/// A value that changes whenever the database may have changed: a commit through this
/// store or through any other connection (another process included). Caches compare it
/// to skip reloading when nothing happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ChangeToken {
    data_version: i64,
    commits: u64,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl Store {
    /// Open (creating when missing) the database at `path` and apply pending migrations.
    pub fn open(path: &Path) -> Result<Store> {
        Store::open_with(path, StoreConfig::default())
    }

    /// [`Store::open`] with explicit settings.
    pub fn open_with(path: &Path, config: StoreConfig) -> Result<Store> {
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent)?;
        }
        let mut conn = Connection::open(path)?;
        let budget_ms = u64::try_from(config.busy_timeout.as_millis()).unwrap_or(u64::MAX);
        BUSY_BUDGET_MS.fetch_max(budget_ms, Ordering::Relaxed);
        conn.busy_handler(Some(retry_when_busy))?;
        conn.set_prepared_statement_cache_capacity(128);
        // journal_mode returns a row, so it is read rather than executed.
        let _mode: String = conn.query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))?;
        conn.execute_batch("PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON;")?;
        migrations::apply(&mut conn)?;
        Ok(Store {
            conn: Mutex::new(conn),
            path: path.to_path_buf(),
            clock: config.clock,
            commits: AtomicU64::new(0),
        })
    }

    /// The database file this store writes.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Now, in epoch milliseconds, from the configured clock.
    pub fn now_ms(&self) -> i64 {
        (self.clock)()
    }

    fn lock(&self) -> MutexGuard<'_, Connection> {
        // A panic while holding the lock leaves no transaction open (rusqlite rolls back on
        // drop), so the connection is still sound: recover it instead of poisoning every caller.
        self.conn
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Run `f` inside one `BEGIN IMMEDIATE` transaction: committed when `f` returns `Ok`,
    /// rolled back otherwise. Use for every read-modify-write.
    pub fn write<T, E>(&self, f: impl FnOnce(&Transaction<'_>) -> Result<T, E>) -> Result<T, E>
    where
        E: From<StoreError>,
    {
        let mut conn = self.lock();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(StoreError::from)?;
        let value = f(&tx)?;
        tx.commit().map_err(StoreError::from)?;
        self.commits.fetch_add(1, Ordering::Relaxed);
        Ok(value)
    }

    /// The current [`ChangeToken`]: read it before loading what a cache holds, compare it
    /// before trusting the cache again.
    pub(crate) fn change_token(&self) -> Result<ChangeToken> {
        let conn = self.lock();
        let data_version = conn
            .prepare_cached("PRAGMA data_version")?
            .query_row([], |r| r.get(0))?;
        Ok(ChangeToken {
            data_version,
            // Read under the connection lock, which every commit holds while counting.
            commits: self.commits.load(Ordering::Relaxed),
        })
    }

    /// Run `f` against the connection for reads (one consistent snapshot per statement;
    /// wrap several statements in `write` or a deferred transaction when they must agree).
    pub fn read<T, E>(&self, f: impl FnOnce(&Connection) -> Result<T, E>) -> Result<T, E> {
        let conn = self.lock();
        f(&conn)
    }

    /// Run `f` inside one deferred (read) transaction, so several statements see one snapshot.
    pub fn snapshot<T, E>(&self, f: impl FnOnce(&Transaction<'_>) -> Result<T, E>) -> Result<T, E>
    where
        E: From<StoreError>,
    {
        let mut conn = self.lock();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Deferred)
            .map_err(StoreError::from)?;
        let value = f(&tx)?;
        tx.commit().map_err(StoreError::from)?;
        Ok(value)
    }
}
