//! Read-only connections beside the writer's.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

use rusqlite::Connection;
use rusqlite::config::DbConfig;

use super::{MMAP_BYTES, retry_when_busy};
use crate::error::Result;

/// The most read-only connections a store opens beside the writer's: one per core (at
/// most 8), since reads are CPU work on mapped pages and more connections than cores would
/// only add memory (each maps the file anew). A read that finds all of them lent waits for
/// the writer's connection, as every read did before readers existed.
pub(super) fn max_readers() -> u64 {
    static MAX: OnceLock<u64> = OnceLock::new();
    *MAX.get_or_init(|| {
        std::thread::available_parallelism().map_or(1, |n| n.get().clamp(1, 8) as u64)
    })
}

/// Read-only connections to the store's file, opened on first need and kept for reuse.
/// In WAL mode they read the last committed state while the writer's connection is in a
/// transaction, so reads on other threads run beside a write group instead of queueing
/// behind it, and two searches can use two cores.
pub(super) struct Readers {
    /// Only a database in WAL mode lets readers run beside the writer (and only a file
    /// can be opened twice: `:memory:` would open another, empty, database).
    pub(super) enabled: bool,
    pub(super) idle: Mutex<Vec<Connection>>,
    /// Connections opened so far (idle or lent out).
    pub(super) opened: AtomicU64,
}

impl Readers {
    fn idle(&self) -> std::sync::MutexGuard<'_, Vec<Connection>> {
        self.idle.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether a read now would find a reader (idle, or one more may be opened).
    pub(super) fn available(&self) -> bool {
        self.enabled
            && (!self.idle().is_empty() || self.opened.load(Ordering::Relaxed) < max_readers())
    }

    /// An idle reader, or a new one while fewer than [`max_readers`] exist; `None` when all
    /// are lent out or opening one failed.
    pub(super) fn lend(&self, path: &Path) -> Option<Lent<'_>> {
        if !self.enabled {
            return None;
        }
        if let Some(conn) = self.idle().pop() {
            return Some(Lent {
                readers: self,
                conn: Some(conn),
            });
        }
        let claimed = self
            .opened
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                (n < max_readers()).then_some(n + 1)
            })
            .is_ok();
        if !claimed {
            return None;
        }
        match open_reader(path) {
            Ok(conn) => Some(Lent {
                readers: self,
                conn: Some(conn),
            }),
            Err(e) => {
                self.opened.fetch_sub(1, Ordering::Relaxed);
                tracing::debug!(error = %e, "no read-only connection; reading on the writer's");
                None
            }
        }
    }
}

/// A reader lent to one read; goes back to the idle list when dropped (after a panic too:
/// dropping the read's statements left the connection with no transaction open).
pub(super) struct Lent<'r> {
    readers: &'r Readers,
    conn: Option<Connection>,
}

impl std::ops::Deref for Lent<'_> {
    type Target = Connection;
    fn deref(&self) -> &Connection {
        // Taken only in `drop`.
        self.conn
            .as_ref()
            .expect("a lent reader holds its connection until dropped")
    }
}

impl Drop for Lent<'_> {
    fn drop(&mut self) {
        if let Some(conn) = self.conn.take() {
            self.readers.idle().push(conn);
        }
    }
}

/// A read-only connection configured like the writer's for reads.
fn open_reader(path: &Path) -> Result<Connection> {
    use rusqlite::OpenFlags;
    let mut conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    conn.busy_handler(Some(retry_when_busy))?;
    conn.set_prepared_statement_cache_capacity(128);
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG, true)?;
    conn.pragma_update(None, "mmap_size", MMAP_BYTES)?;
    Ok(conn)
}
