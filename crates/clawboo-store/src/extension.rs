//! The one seam through which a crate over the store attaches work to it as it opens, so
//! the store runs that work without knowing what it is: work on SQLite's transactions,
//! settings for each PostgreSQL session, and a step once the store is open and migrated
//! whose result the store keeps for that crate. Memory (`clawboo-memory`) is its user: its
//! full-text upkeep on SQLite, pgvector's session settings and preparation on PostgreSQL,
//! and the vector search path it found.

use std::any::Any;

use crate::Store;
use crate::error::Result;
pub use crate::sqlite::hooks::{Hooks as SqliteHooks, IdleStep, PreCommitHook};

/// What an extension keeps with a store ([`Store::extension_state`]).
pub type ExtensionState = Box<dyn Any + Send + Sync>;

/// Work a crate over the store attaches to every store opened with it
/// ([`crate::StoreConfig::extensions`]). Plain functions, so a config stays cheap to copy
/// and the store holds no state of the extension but what [`Extension::opened`] returns.
#[derive(Debug, Clone, Copy)]
pub struct Extension {
    /// Register work on SQLite's write transactions and idle time (before the file's
    /// pending work is run at open).
    pub sqlite_hooks: fn(&mut SqliteHooks),
    /// Settings every new PostgreSQL session sets once connected (`SET name = value`),
    /// unless the URL's `options` set them.
    pub postgres_session_settings: fn() -> Vec<(&'static str, String)>,
    /// Run once the store is open and migrated, on either engine, before anyone else uses
    /// it; what it returns is kept with the store, for the extension to read back.
    pub opened: fn(&Store) -> Result<ExtensionState>,
}
