//! Glue for the `clawboo` binary and the four `clawboo-mcp-<server>` stdio binaries:
//! argument parsing, logging, opening the store, and choosing a server.

pub mod approvals;
pub mod attach;
pub mod board;
pub mod memory;
pub mod serve;
pub mod stdio;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use clawboo_store::{DbLocation, Store, StoreConfig};

/// Send logs to stderr (stdout belongs to JSON-RPC on stdio), filtered by `RUST_LOG`
/// (default `warn`).
pub fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .try_init();
}

/// The database file every binary resolves the same way (`--db`, else `CLAWBOO_DB_PATH`,
/// else `~/.clawboo/clawboo.db`). A PostgreSQL URL is recognised, and refused with a clear
/// error: this build has no PostgreSQL backend.
pub fn resolve_db_file(db: Option<&Path>) -> anyhow::Result<PathBuf> {
    match clawboo_store::resolve_db(db)? {
        DbLocation::File(path) => Ok(path),
        DbLocation::Postgres(_) => anyhow::bail!(
            "this build of clawboo has no PostgreSQL backend: give a SQLite file path with \
             --db or CLAWBOO_DB_PATH"
        ),
    }
}

/// Open the store at the file [`resolve_db_file`] names, with the claim lease
/// `CLAWBOO_LEASE_SECS` sets (read once, here).
pub fn open_store(db: Option<&Path>) -> anyhow::Result<Arc<Store>> {
    let path = resolve_db_file(db)?;
    let config = StoreConfig {
        lease: clawboo_store::leases::lease_from_env()?,
        ..StoreConfig::default()
    };
    let store = Store::open_with(&path, config)
        .with_context(|| format!("cannot open the database {}", path.display()))?;
    Ok(Arc::new(store))
}

/// Shared memory over `store` with the embedder the environment selects
/// (`CLAWBOO_EMBEDDINGS`, else MiniLM, Ollama, OpenAI, built-in). A configuration that
/// cannot be honoured is logged and memory runs without vectors (full-text search).
pub fn open_memory(store: Arc<Store>) -> Arc<clawboo_store::memory::Memory> {
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
    Arc::new(clawboo_store::memory::Memory::new(store, embedder))
}
