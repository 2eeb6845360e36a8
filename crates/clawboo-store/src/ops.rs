//! What operators watch (SPEC §17), as small accessors: whether the store answers and its
//! schema is current ([`Store::readiness`]), the few counts a scrape reads
//! ([`Store::ops_counts`]), the PostgreSQL pool's occupancy ([`Store::pool_stats`]) and the
//! counters the engines bump as they work ([`counters`]). The exposition itself is
//! `clawboo-server`'s; the store only counts.
//!
//! The counters are process-wide relaxed atomics: one add per round trip, so counting
//! costs a round trip nothing next to the round trip itself.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::Store;
use crate::error::Result;
use crate::store::Backend;

/// Whether the store answered a query and what schema version its database reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Readiness {
    /// The schema version the database reports.
    pub schema_found: i64,
    /// The version this build migrates to.
    pub schema_expected: i64,
}

impl Readiness {
    /// Whether every migration this build knows has been applied.
    pub fn schema_current(&self) -> bool {
        self.schema_found == self.schema_expected
    }
}

/// Counts a scrape reads from the database, all in one snapshot.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OpsCounts {
    /// Approvals waiting for a decision and not yet expired.
    pub approvals_pending: i64,
    /// Claimed tasks holding a lease.
    pub leases_held: i64,
    /// Of those, the leases that run out within [`EXPIRING_WITHIN_MS`].
    pub leases_expiring: i64,
}

/// How soon a lease must run out to count in [`OpsCounts::leases_expiring`].
pub const EXPIRING_WITHIN_MS: i64 = 60_000;

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

/// What the engines counted since this process started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    /// Requests sent to PostgreSQL and awaited (or sent unanswered).
    pub postgres_round_trips: u64,
    /// PostgreSQL errors (the server's, or the connection's).
    pub postgres_errors: u64,
    /// SQLite transactions and group commits run (SQLite is in process: a "round trip"
    /// is one trip through the engine's lock).
    pub sqlite_round_trips: u64,
    /// Errors SQLite reported.
    pub sqlite_errors: u64,
    /// SQLite group commits, and the queued writes they carried.
    pub sqlite_groups: u64,
    pub sqlite_grouped_writes: u64,
    /// Expired leases this process took back.
    pub leases_reclaimed: u64,
    /// Chat posts this process wrote (agents', operators' and the server's own).
    pub chat_posts: u64,
}

static POSTGRES_ROUND_TRIPS: AtomicU64 = AtomicU64::new(0);
static POSTGRES_ERRORS: AtomicU64 = AtomicU64::new(0);
static SQLITE_ROUND_TRIPS: AtomicU64 = AtomicU64::new(0);
static SQLITE_ERRORS: AtomicU64 = AtomicU64::new(0);
static SQLITE_GROUPS: AtomicU64 = AtomicU64::new(0);
static SQLITE_GROUPED_WRITES: AtomicU64 = AtomicU64::new(0);
static LEASES_RECLAIMED: AtomicU64 = AtomicU64::new(0);
static CHAT_POSTS: AtomicU64 = AtomicU64::new(0);

fn bump(counter: &AtomicU64, by: u64) {
    counter.fetch_add(by, Ordering::Relaxed);
}

pub(crate) fn postgres_round_trip() {
    bump(&POSTGRES_ROUND_TRIPS, 1);
}
pub(crate) fn postgres_error() {
    bump(&POSTGRES_ERRORS, 1);
}
pub(crate) fn sqlite_round_trip() {
    bump(&SQLITE_ROUND_TRIPS, 1);
}
pub(crate) fn sqlite_error() {
    bump(&SQLITE_ERRORS, 1);
}
pub(crate) fn sqlite_group(writes: usize) {
    bump(&SQLITE_ROUND_TRIPS, 1);
    bump(&SQLITE_GROUPS, 1);
    bump(&SQLITE_GROUPED_WRITES, writes as u64);
}
pub(crate) fn chat_posted() {
    bump(&CHAT_POSTS, 1);
}
pub(crate) fn leases_reclaimed(count: usize) {
    bump(&LEASES_RECLAIMED, count as u64);
}

/// The engines' counters now.
pub fn counters() -> Counters {
    let read = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
    Counters {
        postgres_round_trips: read(&POSTGRES_ROUND_TRIPS),
        postgres_errors: read(&POSTGRES_ERRORS),
        sqlite_round_trips: read(&SQLITE_ROUND_TRIPS),
        sqlite_errors: read(&SQLITE_ERRORS),
        sqlite_groups: read(&SQLITE_GROUPS),
        sqlite_grouped_writes: read(&SQLITE_GROUPED_WRITES),
        leases_reclaimed: read(&LEASES_RECLAIMED),
        chat_posts: read(&CHAT_POSTS),
    }
}

impl Store {
    /// Ask the database for its schema version: one short query, for a readiness probe.
    /// An error means the store does not answer (on PostgreSQL, `backend_unavailable`
    /// while the server is down).
    pub fn readiness(&self) -> Result<Readiness> {
        let (sql, expected) = match &self.backend {
            Backend::Sqlite(_) => ("PRAGMA user_version", crate::migrations::LATEST),
            Backend::Postgres(_) => (
                "SELECT CAST(COALESCE(MAX(version), 0) AS BIGINT) FROM clawboo_schema",
                crate::postgres::LATEST,
            ),
        };
        let found = self.read(|tx| tx.query_one(sql, &[], |row| row.get::<i64>(0)))?;
        Ok(Readiness {
            schema_found: found,
            schema_expected: expected,
        })
    }

    /// The counts behind the approvals and leases gauges, read through their partial
    /// indexes in one snapshot.
    pub fn ops_counts(&self) -> Result<OpsCounts> {
        let now = self.now_ms();
        let soon = now.saturating_add(EXPIRING_WITHIN_MS);
        self.snapshot(|tx| {
            let approvals_pending = tx.query_one(
                "SELECT COUNT(*) FROM tool_call_approvals WHERE status = 'pending' AND expires_at > ?1",
                &[&now],
                |row| row.get::<i64>(0),
            )?;
            let (leases_held, leases_expiring) = tx.query_one(
                "SELECT COUNT(lease_expires_at), \
                        COUNT(CASE WHEN lease_expires_at <= ?1 THEN 1 END) \
                 FROM tasks WHERE status = 'in_progress'",
                &[&soon],
                |row| Ok((row.get::<i64>(0)?, row.get::<i64>(1)?)),
            )?;
            Ok(OpsCounts {
                approvals_pending,
                leases_held,
                leases_expiring,
            })
        })
    }

    /// The PostgreSQL pool's occupancy; `None` on SQLite, which has no pool.
    pub fn pool_stats(&self) -> Option<PoolStats> {
        match &self.backend {
            Backend::Sqlite(_) => None,
            Backend::Postgres(db) => Some(db.pool_stats()),
        }
    }
}
