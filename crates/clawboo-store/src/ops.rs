//! What operators watch (SPEC §17), as small accessors: whether the store answers and its
//! schema is current ([`Store::readiness`]), the few counts a scrape reads
//! ([`Store::ops_counts`]), the PostgreSQL pool's occupancy ([`Store::pool_stats`]) and the
//! counters the engines bump as they work ([`counters()`], kept in `counters.rs` so the
//! engines need not know the store). The exposition itself is
//! `clawboo-server`'s; the store only counts.
//!
//! The counters are process-wide relaxed atomics: one add per round trip, so counting
//! costs a round trip nothing next to the round trip itself.

use crate::Store;
pub use crate::counters::{Counters, counters};
pub use crate::engine::PoolStats;
use crate::error::Result;

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

impl Store {
    /// Ask the database for its schema version: one short query, for a readiness probe.
    /// An error means the store does not answer (on PostgreSQL, `backend_unavailable`
    /// while the server is down).
    pub fn readiness(&self) -> Result<Readiness> {
        let (sql, expected) = self.schema_probe();
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
        self.engine_pool_stats()
    }
}
