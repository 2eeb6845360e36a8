//! How a store is opened: the settings both engines read, kept apart from the store so an
//! engine can read them without knowing the store it serves.

use std::time::Duration;

use crate::extension::Extension;

/// A source of "now" in epoch milliseconds; injectable so time-window rules are testable.
pub type Clock = fn() -> i64;

fn system_clock() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// How a store is opened.
#[derive(Debug, Clone)]
pub struct StoreConfig {
    /// How long a writer waits for another process's lock before giving up (SQLite's busy
    /// timeout, PostgreSQL's `lock_timeout`).
    pub busy_timeout: Duration,
    /// The time source (epoch milliseconds).
    pub clock: Clock,
    /// How long a claim holds its task before it expires back to `todo` (SPEC §12);
    /// `None` turns leases off.
    pub lease: Option<Duration>,
    /// How many connections a PostgreSQL store keeps open at most (SQLite ignores it).
    pub pg_pool_size: usize,
    /// The work crates over the store attach to it as it opens (none by default).
    pub extensions: Vec<Extension>,
}

impl Default for StoreConfig {
    fn default() -> Self {
        StoreConfig {
            busy_timeout: Duration::from_secs(10),
            clock: system_clock,
            lease: Some(crate::leases::DEFAULT_LEASE),
            pg_pool_size: 16,
            extensions: Vec::new(),
        }
    }
}

impl StoreConfig {
    /// These settings with `extension` added to [`StoreConfig::extensions`].
    pub fn with_extension(mut self, extension: Extension) -> StoreConfig {
        self.extensions.push(extension);
        self
    }
}
