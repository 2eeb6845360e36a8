//! Writes the upgrade fixture for one schema version: a database made by applying the first
//! N migrations (exactly the files the store embeds), each followed by the data of
//! `tests/upgrade_data` for its version, then vacuumed.
//!
//! ```text
//! cargo run -p clawboo-store --example make_upgrade_fixture -- <N>
//! ```
//!
//! writes `tests/fixtures/upgrade/v<N>.db` and refuses to overwrite one: a committed
//! fixture stands for what that version wrote and is never regenerated.

#[path = "../tests/upgrade_data/mod.rs"]
mod upgrade_data;

use std::path::{Path, PathBuf};

use rusqlite::Connection;

type Error = Box<dyn std::error::Error>;

/// The migration files, in order.
fn migrations(dir: &Path) -> Result<Vec<PathBuf>, Error> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)?
        .map(|entry| entry.map(|e| e.path()))
        .collect::<Result<_, _>>()?;
    files.retain(|p| p.extension().is_some_and(|e| e == "sql"));
    files.sort();
    Ok(files)
}

fn main() -> Result<(), Error> {
    let version: i64 = std::env::args()
        .nth(1)
        .ok_or("usage: make_upgrade_fixture <schema version>")?
        .parse()?;
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let files = migrations(&root.join("migrations"))?;
    if version < 1 || version as usize > files.len() {
        return Err(format!("schema version must be 1..={}", files.len()).into());
    }
    let out = root.join(format!("tests/fixtures/upgrade/v{version}.db"));
    if out.exists() {
        return Err(format!(
            "{} exists; committed fixtures are never regenerated",
            out.display()
        )
        .into());
    }
    let conn = Connection::open(&out)?;
    // The settings every version of the store opened its file with.
    let _mode: String = conn.query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))?;
    conn.execute_batch("PRAGMA foreign_keys=ON;")?;
    // Each version's rows are written right after its migration, as that version's store
    // would have: a later migration may reshape a table an earlier version wrote.
    for (v, file) in (1..=version).zip(&files) {
        conn.execute_batch(&format!(
            "BEGIN IMMEDIATE;\n{}\nPRAGMA user_version = {v};\nCOMMIT;",
            std::fs::read_to_string(file)?
        ))?;
        upgrade_data::insert(&conn, v);
    }
    conn.execute_batch("VACUUM;")?;
    conn.close().map_err(|(_, e)| e)?;
    println!("wrote {}", out.display());
    Ok(())
}
