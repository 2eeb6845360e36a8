//! Clawboo's store and every domain rule, over SQLite (one file, the `sqlite` module) or
//! PostgreSQL (one server for many hosts, the `postgres` module).
//!
//! The store knows nothing of MCP, JSON-RPC or HTTP: it exposes typed operations
//! (`Store::claim_task`, `Store::link_task`, …) and typed errors ([`StoreError`]) whose
//! variants a caller can act on. Every read-modify-write runs in one write transaction
//! (SQLite's `BEGIN IMMEDIATE`; on PostgreSQL, READ COMMITTED with an advisory lock where a
//! rule reads then writes), so each rule holds across OS processes and hosts, not only
//! threads. [`Store::open_location`] opens either; [`Store::open`] a SQLite file.
//!
//! ```
//! use clawboo_store::{Store, board::{NewTask, CreatePolicy}};
//! let dir = tempfile::tempdir().unwrap();
//! let store = Store::open(&dir.path().join("clawboo.db")).unwrap();
//! let task = store.create_task(NewTask::titled("write the README"), CreatePolicy::Capped).unwrap();
//! let claimed = store.claim_task(&task.id, "agent-1", None).unwrap();
//! assert_eq!(claimed.assignee_agent_id.as_deref(), Some("agent-1"));
//! ```

use std::sync::Arc;

pub mod activity;
pub mod board;
mod bus;
pub mod chat;
mod config;
mod counters;
pub mod db;
pub mod delegate;
mod edits;
mod engine;
mod error;
pub mod events;
pub mod extension;
pub mod inbox;
pub mod leases;
pub mod links;
mod migrations;
pub mod normalize;
pub mod operator_activity;
#[cfg(test)]
mod operator_activity_tests;
pub mod ops;
mod pacing;
mod path;
mod postgres;
pub mod reads;
#[cfg(test)]
mod reads_tests;
pub mod reservations;
mod run;
pub mod scrub;
pub mod settings;
pub mod short_ids;
mod sqlite;
mod store;
mod task;
pub mod teams;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod writes;
#[cfg(test)]
mod writes_tests;

pub use bus::Listener;
pub use config::{Clock, StoreConfig};
pub use db::ChangeToken;
pub use engine::SettleWrite;
pub use error::{BackendError, BackendErrorKind, CapReason, StoreError};
pub use postgres::WAIT_SAFETY_NET;
pub use run::RunError;
pub use store::{QueuedWrite, Store};
/// The schema version a fully migrated database reports (`PRAGMA user_version`).
pub const SCHEMA_VERSION: i64 = migrations::LATEST;

pub use path::{DB_PATH_ENV, DbLocation, LocationError, default_db_path, resolve_db};

/// A fresh sortable identifier (UUID v7, lowercase hyphenated).
pub fn new_id() -> String {
    uuid::Uuid::now_v7().to_string()
}

impl Store {
    /// Open (creating when missing) the database at `path` and apply pending migrations.
    pub fn open(path: &std::path::Path) -> Result<Store, StoreError> {
        Store::open_with(path, StoreConfig::default())
    }

    /// [`Store::open`] with explicit settings. The crates over the store that attach work
    /// to the backend's commits name it in [`StoreConfig::extensions`], so the backend
    /// itself knows none of them.
    pub fn open_with(path: &std::path::Path, config: StoreConfig) -> Result<Store, StoreError> {
        let mut hooks = extension::SqliteHooks::default();
        for extension in &config.extensions {
            (extension.sqlite_hooks)(&mut hooks);
        }
        let db = sqlite::SqliteDb::open(path, &config, hooks)?;
        Store::from_engine(Box::new(db), &config, Arc::default()).opened(&config)
    }

    /// Open the store `location` names: a SQLite file (created on first use) or a
    /// PostgreSQL database (migrated on first use; its URL may carry `sslmode=require` or
    /// `verify-full`).
    pub fn open_location(location: &DbLocation, config: StoreConfig) -> Result<Store, StoreError> {
        match location {
            DbLocation::File(path) => Store::open_with(path, config),
            DbLocation::Postgres(url) => {
                let session_settings: Vec<(&str, String)> = config
                    .extensions
                    .iter()
                    .flat_map(|extension| (extension.postgres_session_settings)())
                    .collect();
                // The cross-host relay publishes what other hosts announce on this store's bus.
                let bus = Arc::new(bus::Bus::default());
                let relay = Arc::clone(&bus);
                let on_notice = Box::new(move |topic: &str| relay.deliver(topic));
                let db = postgres::PgDb::open(url, &config, on_notice, &session_settings)?;
                Store::from_engine(Box::new(db), &config, bus).opened(&config)
            }
        }
    }

    /// The last step of opening: each extension's [`extension::Extension::opened`], its
    /// result kept with the store, then the claims made without a lease get one, and the
    /// tasks made before short ids existed theirs.
    fn opened(mut self, config: &StoreConfig) -> Result<Store, StoreError> {
        for extension in &config.extensions {
            let state = (extension.opened)(&self)?;
            self.extension_state.push(state);
        }
        self.lease_unleased_claims()?;
        self.number_unnumbered_tasks()?;
        Ok(self)
    }
}
