//! What the engines count as they work, for the operators' metrics (`crate::ops`):
//! process-wide relaxed atomics, one add per round trip, so counting costs a round trip
//! nothing next to the round trip itself. Apart from `ops.rs` so an engine can count
//! without knowing the store.

use std::sync::atomic::{AtomicU64, Ordering};

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
