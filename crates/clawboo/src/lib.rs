//! Glue for the `clawboo` binary and the four `clawboo-mcp-<server>` stdio binaries:
//! argument parsing, logging, opening the store, and choosing a server.

pub mod approvals;
pub mod attach;
pub mod board;
pub mod db;
pub mod memory;
pub mod reservations;
pub mod serve;
pub mod stdio;
pub mod telemetry;

use std::path::Path;
use std::sync::Arc;

use anyhow::Context;
use clawboo_store::{DbLocation, Store, StoreConfig};

/// Send logs to stderr (stdout belongs to JSON-RPC on stdio), filtered by `RUST_LOG`
/// (default `warn`), and traces over OTLP when configured ([`telemetry::init`]).
pub fn init_logging() {
    telemetry::init();
}

/// Environment variable sizing a PostgreSQL store's connection pool.
pub const PG_POOL_ENV: &str = "CLAWBOO_PG_POOL";
/// `clawboo serve`'s pool when [`PG_POOL_ENV`] is unset: it answers many clients at once.
pub const SERVE_PG_POOL: usize = 16;
/// A stdio server's (and an operator command's) pool: one client, one call at a time.
pub const STDIO_PG_POOL: usize = 2;

/// The database every binary resolves the same way (`--db`, else `CLAWBOO_DB_PATH`, else
/// `~/.clawboo/clawboo.db`): a SQLite file or a `postgres://`/`postgresql://` URL.
pub fn resolve_db(db: Option<&Path>) -> anyhow::Result<DbLocation> {
    Ok(clawboo_store::resolve_db(db)?)
}

/// Resolve the database as [`resolve_db`] does and open it ([`open_store`]).
pub fn open_db(db: Option<&Path>, default_pool: usize) -> anyhow::Result<Arc<Store>> {
    open_store(&resolve_db(db)?, default_pool)
}

/// Open the store at `location`, with the claim lease `CLAWBOO_LEASE_SECS` sets and, on
/// PostgreSQL, a pool of `CLAWBOO_PG_POOL` connections (else `default_pool`) and the
/// password libpq would use when the URL has none (`PGPASSWORD` or `~/.pgpass`).
pub fn open_store(location: &DbLocation, default_pool: usize) -> anyhow::Result<Arc<Store>> {
    // Memory's upkeep runs on every store a binary opens, whichever server it serves.
    let mut config = StoreConfig {
        lease: clawboo_store::leases::lease_from_env()?,
        ..StoreConfig::default()
    }
    .with_extension(clawboo_memory::EXTENSION);
    if location.is_postgres() {
        config.pg_pool_size = pg_pool_size(default_pool)?;
    }
    // Logged and reported through `Display`, which leaves the password out.
    tracing::debug!(db = %location, "opening the store");
    let store = Store::open_location(&location.clone().with_libpq_password(), config)
        .with_context(|| format!("cannot open the database {location}"))?;
    Ok(Arc::new(store))
}

/// [`PG_POOL_ENV`] when set (a positive whole number), else `default`.
fn pg_pool_size(default: usize) -> anyhow::Result<usize> {
    match std::env::var(PG_POOL_ENV) {
        Ok(value) if !value.trim().is_empty() => match value.trim().parse::<usize>() {
            Ok(size) if size > 0 => Ok(size),
            _ => anyhow::bail!(
                "{PG_POOL_ENV}={value:?} is not a connection count: give a whole number of \
                 1 or more, or unset it (default {default})"
            ),
        },
        _ => Ok(default),
    }
}

/// Shared memory over `store` with the embedder the environment selects
/// (`CLAWBOO_EMBEDDINGS`, else MiniLM, Ollama, OpenAI, built-in). A configuration that
/// cannot be honoured is logged and memory runs without vectors (full-text search).
pub fn open_memory(store: Arc<Store>) -> Arc<clawboo_memory::Memory> {
    let embedder = clawboo_embed::select::EmbedConfig::from_env()
        .and_then(|config| clawboo_embed::select::select(&config));
    let embedder = match embedder {
        Ok(Some(e)) => {
            tracing::info!(model = e.model_id(), dim = e.dim(), "memory embeddings");
            Some(e)
        }
        Ok(None) => None,
        Err(e) => {
            tracing::error!("{e}; memory search falls back to full text");
            None
        }
    };
    Arc::new(clawboo_memory::Memory::new(store, embedder))
}
