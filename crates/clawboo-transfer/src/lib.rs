//! A board moved whole (SPEC §18): [`copy`] between two stores of either engine, backup
//! archives ([`archive`]) a restore loads onto either engine, and [`check`], the engine's
//! integrity check with the board's invariants.
//!
//! Everything here runs on the store's neutral [`clawboo_store::db::Tx`]: the copy reads
//! and writes rows as [`clawboo_store::db::Value`]s, so it never knows which engine is on
//! which side. Which tables travel and which are rebuilt is [`catalogue`]'s to say, one
//! entry per table.

pub mod archive;
pub mod catalogue;
pub mod check;
mod copy;
pub mod schema;

pub use copy::{CopyOptions, CopyReport, copy};

use clawboo_store::StoreError;

/// Why a copy, backup or restore stopped. Whatever it is, the target keeps nothing of it.
#[derive(Debug, thiserror::Error)]
pub enum TransferError {
    /// The target holds rows and the caller did not ask to replace them.
    #[error(
        "the target database is not empty (it holds rows in {tables}): name an empty \
         database, or pass --force to replace everything it holds"
    )]
    TargetNotEmpty { tables: String },
    /// A table's rows differ in number on the two sides after the copy.
    #[error(
        "{table}: the source holds {source_rows} rows but the target {target_rows} after the \
         copy; nothing was kept on the target: run `clawboo db check` on both and copy again"
    )]
    CountMismatch {
        table: String,
        source_rows: u64,
        target_rows: u64,
    },
    /// A table's schema does not match what the copy expects.
    #[error("table {table}: {detail}")]
    Schema { table: String, detail: String },
    /// An archive that cannot be written or read.
    #[error("{0}")]
    Archive(String),
    /// The store refused.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// What a long copy tells the person waiting for it. The binary draws it (a bar per table
/// on a terminal, plain lines otherwise); the library only counts.
pub trait Progress {
    /// Copying of `table` begins; `rows` are to come.
    fn table(&mut self, table: &str, rows: u64);
    /// `rows` more rows of the current table are in.
    fn advance(&mut self, rows: u64);
    /// The current table is done.
    fn table_done(&mut self);
    /// A step without rows to count begins.
    fn step(&mut self, what: &str);
}

/// A [`Progress`] that shows nothing.
#[derive(Debug, Default)]
pub struct Silent;

impl Progress for Silent {
    fn table(&mut self, _: &str, _: u64) {}
    fn advance(&mut self, _: u64) {}
    fn table_done(&mut self) {}
    fn step(&mut self, _: &str) {}
}
