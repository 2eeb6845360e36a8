//! The one database-path resolver every binary uses, so a stdio-attached agent and
//! `clawboo serve` can never silently disagree about which board they see.

use std::path::{Path, PathBuf};

/// Environment variable that overrides the default database path.
pub const DB_PATH_ENV: &str = "CLAWBOO_DB_PATH";

/// `~/.clawboo/clawboo.db` (falls back to `./.clawboo/clawboo.db` when no home is known).
pub fn default_db_path() -> PathBuf {
    std::env::home_dir()
        .unwrap_or_else(|| PathBuf::from("."))
        .join(".clawboo")
        .join("clawboo.db")
}

/// Resolve the database path: an explicit `--db` wins, then `CLAWBOO_DB_PATH` (when non-empty),
/// then [`default_db_path`]. The parent folder is created when missing.
pub fn resolve_db_path(explicit: Option<&Path>) -> std::io::Result<PathBuf> {
    let path = match explicit {
        Some(p) => p.to_path_buf(),
        None => match std::env::var_os(DB_PATH_ENV) {
            Some(v) if !v.is_empty() => PathBuf::from(v),
            _ => default_db_path(),
        },
    };
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)?;
    }
    Ok(path)
}
