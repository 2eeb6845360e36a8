//! What operators watch (SPEC §17), as small accessors: whether the store answers and its
//! schema is current ([`Store::readiness`]), the few counts a scrape reads
//! ([`Store::ops_counts`]), the PostgreSQL pool's occupancy ([`Store::pool_stats`]) and the
//! counters the engines bump as they work ([`counters()`], kept in `counters.rs` so the
//! engines need not know the store). The exposition itself is
//! `clawboo-server`'s; the store only counts.
//!
//! The counters are process-wide relaxed atomics: one add per round trip, so counting
//! costs a round trip nothing next to the round trip itself.

use std::sync::Arc;

use crate::Store;
pub use crate::counters::{Counters, counters};
pub use crate::engine::PoolStats;
use crate::error::Result;
use crate::reads::{OneRowRead, Query, StoreRead};
use crate::run::RunError;

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

/// Both counts of [`OpsCounts`] in one statement (so one snapshot): pending approvals not
/// expired by `?1`; leases held, and those running out by `?2`.
const OPS_COUNTS: &str = "SELECT a.pending, t.held, t.expiring
     FROM (SELECT COUNT(*) AS pending FROM tool_call_approvals
           WHERE status = 'pending' AND expires_at > ?1) a,
          (SELECT COUNT(lease_expires_at) AS held,
                  COUNT(CASE WHEN lease_expires_at <= ?2 THEN 1 END) AS expiring
           FROM tasks WHERE status = 'in_progress') t";

/// [`Store::ops_counts`]' read at `now`.
fn counts_read(now: i64) -> OneRowRead<OpsCounts> {
    let soon = now.saturating_add(EXPIRING_WITHIN_MS);
    OneRowRead {
        query: Query::new(OPS_COUNTS, &[&now, &soon]),
        decode: |row| {
            Ok(OpsCounts {
                approvals_pending: row.get(0)?,
                leases_held: row.get(1)?,
                leases_expiring: row.get(2)?,
            })
        },
    }
}

/// The schema version, by the engine's probe `sql`.
fn schema_read(sql: &'static str) -> OneRowRead<i64> {
    OneRowRead {
        query: Query::new(sql, &[]),
        decode: |row| row.get::<i64>(0),
    }
}

impl Store {
    /// Ask the database for its schema version: one short query, for a readiness probe.
    /// An error means the store does not answer (on PostgreSQL, `backend_unavailable`
    /// while the server is down).
    pub fn readiness(&self) -> Result<Readiness> {
        let (sql, expected) = self.schema_probe();
        let found = self.read(|tx| schema_read(sql).run(tx))?;
        Ok(Readiness {
            schema_found: found,
            schema_expected: expected,
        })
    }

    /// [`Store::readiness`] for an async caller (`/readyz`), run the way the engine runs
    /// reads best ([`Store::run_read_committed`]), so a probe asks what requests use.
    pub async fn readiness_async(
        self: &Arc<Store>,
    ) -> std::result::Result<Result<Readiness>, RunError> {
        let (sql, expected) = self.schema_probe();
        let found = self.run_read_committed(schema_read(sql)).await?;
        Ok(found.map(|found| Readiness {
            schema_found: found,
            schema_expected: expected,
        }))
    }

    /// The counts behind the approvals and leases gauges, read through their partial
    /// indexes in one statement.
    pub fn ops_counts(&self) -> Result<OpsCounts> {
        let now = self.now_ms();
        self.read(|tx| counts_read(now).run(tx))
    }

    /// [`Store::ops_counts`] for an async caller (a scrape, `/api/ops`), run the way the
    /// engine runs reads best ([`Store::run_read_committed`]).
    pub async fn ops_counts_async(
        self: &Arc<Store>,
    ) -> std::result::Result<Result<OpsCounts>, RunError> {
        let now = self.now_ms();
        self.run_read_committed(counts_read(now)).await
    }

    /// The PostgreSQL pool's occupancy; `None` on SQLite, which has no pool.
    pub fn pool_stats(&self) -> Option<PoolStats> {
        self.engine_pool_stats()
    }
}
