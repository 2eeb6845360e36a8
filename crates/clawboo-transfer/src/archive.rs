//! Backup archives: one file any clawboo restores onto either engine.
//!
//! An archive is a header and a SQLite database. The header is two lines: the magic
//! [`MAGIC`], then one JSON object ([`Header`]: format, the inner database's schema
//! version, the engine it was taken from, when, and the rows of every copied table). The
//! rest is one zstd frame, with its checksum, of a SQLite file the copy wrote from one
//! snapshot of the source. A backup is therefore the copy ([`crate::copy`]) into a fresh
//! SQLite file, and a restore the copy out of it: one code path moves rows, and the inner
//! file is a database anyone can open with `sqlite3`.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Read, Write};
use std::path::Path;

use clawboo_store::{SCHEMA_VERSION, Store, StoreConfig};
use serde::{Deserialize, Serialize};

use crate::copy::{CopyOptions, CopyReport, copy, count};
use crate::{Progress, TransferError};

/// The first line of every archive.
pub const MAGIC: &str = "clawboo-backup";
/// The archive layout this build writes and reads.
pub const FORMAT: u32 = 1;
/// The longest header line read (a header is a few hundred bytes).
const MAX_HEADER: u64 = 64 * 1024;
/// zstd's level: quick, and most of a board is text that compresses well at any level.
const LEVEL: i32 = 3;

/// The archive's header.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Header {
    /// [`FORMAT`] when written.
    pub format: u32,
    /// The inner SQLite database's schema version (`PRAGMA user_version`).
    pub schema: i64,
    /// The engine the backup was taken from (`sqlite` or `postgres`).
    pub source: String,
    /// When the backup was taken (epoch milliseconds).
    pub created_at: i64,
    /// Rows of every copied table.
    pub rows: BTreeMap<String, u64>,
}

/// The inner database opened: no lease is given to claims that have none, so a restore
/// carries the claims exactly as they were.
fn inner_config() -> StoreConfig {
    StoreConfig {
        lease: None,
        pg_pool_size: 1,
        ..StoreConfig::default()
    }
    .with_extension(clawboo_memory::EXTENSION)
}

/// Write a backup of `source` to `file` (which must not exist): the copy into a SQLite
/// file in a temporary folder beside `file`, compressed into `file` once complete, so a
/// failed backup leaves no file.
pub fn backup(
    source: &Store,
    file: &Path,
    progress: &mut dyn Progress,
) -> Result<Header, TransferError> {
    if file.exists() {
        return Err(TransferError::Archive(format!(
            "{} already exists: remove it or name another file",
            file.display()
        )));
    }
    let dir = file.parent().filter(|d| !d.as_os_str().is_empty());
    let work = tempfile::Builder::new()
        .prefix(".clawboo-backup-")
        .tempdir_in(dir.unwrap_or(Path::new(".")))
        .map_err(|e| io_error("cannot make a work folder beside the archive", e))?;
    let inner_path = work.path().join("board.db");
    let report: CopyReport = {
        let inner = Store::open_with(&inner_path, inner_config())?;
        copy(source, &inner, CopyOptions::default(), progress)?
    };
    let schema = settle(&inner_path)?;
    let header = Header {
        format: FORMAT,
        schema,
        source: source.backend_name().to_owned(),
        created_at: source.now_ms(),
        rows: report.rows,
    };
    progress.step("compressing the archive");
    let partial = work.path().join("archive.partial");
    write_archive(&header, &inner_path, &partial)?;
    std::fs::rename(&partial, file)
        .map_err(|e| io_error(&format!("cannot move the archive to {}", file.display()), e))?;
    Ok(header)
}

/// Fold the inner database's write-ahead log into its file and return its schema version,
/// so the file alone is the whole database.
fn settle(path: &Path) -> Result<i64, TransferError> {
    let conn = rusqlite::Connection::open(path).map_err(sqlite_error)?;
    let mode: String = conn
        .query_row("PRAGMA journal_mode = DELETE", [], |r| r.get(0))
        .map_err(sqlite_error)?;
    if !mode.eq_ignore_ascii_case("delete") {
        return Err(TransferError::Archive(format!(
            "the backup's database stayed in {mode} mode; try again"
        )));
    }
    conn.query_row("PRAGMA user_version", [], |r| r.get(0))
        .map_err(sqlite_error)
}

fn write_archive(header: &Header, inner: &Path, to: &Path) -> Result<(), TransferError> {
    let out = File::create(to).map_err(|e| io_error("cannot write the archive", e))?;
    let mut out = BufWriter::new(out);
    let header_json = serde_json::to_string(header)
        .map_err(|e| TransferError::Archive(format!("cannot write the header: {e}")))?;
    writeln!(out, "{MAGIC}\n{header_json}").map_err(|e| io_error("cannot write the archive", e))?;
    let mut encoder =
        zstd::Encoder::new(out, LEVEL).map_err(|e| io_error("cannot start compressing", e))?;
    encoder
        .include_checksum(true)
        .map_err(|e| io_error("cannot start compressing", e))?;
    let mut input = File::open(inner).map_err(|e| io_error("cannot read the backup", e))?;
    std::io::copy(&mut input, &mut encoder).map_err(|e| io_error("cannot compress", e))?;
    let out = encoder
        .finish()
        .map_err(|e| io_error("cannot finish compressing", e))?;
    let file = out
        .into_inner()
        .map_err(|e| io_error("cannot write the archive", e.into_error()))?;
    file.sync_all()
        .map_err(|e| io_error("cannot flush the archive to disk", e))
}

/// An archive read whole and checked, its database unpacked into a temporary folder and
/// opened, ready to restore; nothing has been written anywhere else yet.
pub struct OpenedArchive {
    /// Its header.
    pub header: Header,
    store: Store,
    _work: tempfile::TempDir,
}

impl std::fmt::Debug for OpenedArchive {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenedArchive")
            .field("header", &self.header)
            .finish_non_exhaustive()
    }
}

fn damaged(file: &Path, why: impl std::fmt::Display) -> TransferError {
    TransferError::Archive(format!(
        "{} is damaged ({why}): it may be truncated or corrupted; restore another copy of it",
        file.display()
    ))
}

/// Read `file`: its header checked (a clawboo archive, a format and schema this build
/// knows), its database unpacked (the checksum verified) and opened, and its rows counted
/// against the header.
pub fn open_archive(file: &Path) -> Result<OpenedArchive, TransferError> {
    let input =
        File::open(file).map_err(|e| io_error(&format!("cannot open {}", file.display()), e))?;
    let mut input = BufReader::new(input);
    let mut magic = Vec::new();
    (&mut input)
        .take(MAGIC.len() as u64 + 1)
        .read_until(b'\n', &mut magic)
        .map_err(|e| io_error(&format!("cannot read {}", file.display()), e))?;
    if magic != format!("{MAGIC}\n").as_bytes() {
        return Err(TransferError::Archive(format!(
            "{} is not a clawboo backup (it does not start with `{MAGIC}`): name a file \
             `clawboo db backup` wrote",
            file.display()
        )));
    }
    let mut line = Vec::new();
    (&mut input)
        .take(MAX_HEADER)
        .read_until(b'\n', &mut line)
        .map_err(|e| io_error(&format!("cannot read {}", file.display()), e))?;
    let header: Header = serde_json::from_slice(&line)
        .map_err(|e| damaged(file, format!("its header does not read: {e}")))?;
    if header.format > FORMAT {
        return Err(TransferError::Archive(format!(
            "{} has archive format {}, and this clawboo reads format {FORMAT}: restore it \
             with a newer clawboo",
            file.display(),
            header.format
        )));
    }
    if header.schema > SCHEMA_VERSION {
        return Err(TransferError::Archive(format!(
            "{} holds a board of schema version {}, and this clawboo knows versions up to \
             {SCHEMA_VERSION}: restore it with a clawboo that knows schema version {}",
            file.display(),
            header.schema,
            header.schema
        )));
    }
    let work = tempfile::Builder::new()
        .prefix(".clawboo-restore-")
        .tempdir()
        .map_err(|e| io_error("cannot make a work folder", e))?;
    let inner_path = work.path().join("board.db");
    unpack(file, input, &inner_path)?;
    let found: i64 = rusqlite::Connection::open(&inner_path)
        .and_then(|c| c.query_row("PRAGMA user_version", [], |r| r.get(0)))
        .map_err(|e| damaged(file, format!("its database does not open: {e}")))?;
    if found != header.schema {
        return Err(damaged(
            file,
            format!(
                "its header says schema {}, its database {found}",
                header.schema
            ),
        ));
    }
    // Opening migrates an archive of an older schema to this build's, in the work folder.
    let store = Store::open_with(&inner_path, inner_config())
        .map_err(|e| damaged(file, format!("its database does not open: {e}")))?;
    for (table, expected) in &header.rows {
        if !crate::catalogue::COPIED.iter().any(|t| t.name == table) {
            return Err(damaged(
                file,
                format!("its header names an unknown table {table:?}"),
            ));
        }
        let found = store
            .read(|tx| count(tx, table))
            .map_err(|e| damaged(file, format!("its table {table} does not read: {e}")))?;
        if found != *expected {
            return Err(damaged(
                file,
                format!("its header counts {expected} rows of {table}, its database {found}"),
            ));
        }
    }
    Ok(OpenedArchive {
        header,
        store,
        _work: work,
    })
}

fn unpack(file: &Path, input: BufReader<File>, to: &Path) -> Result<(), TransferError> {
    let mut decoder = zstd::Decoder::with_buffer(input).map_err(|e| damaged(file, e))?;
    let out = File::create(to).map_err(|e| io_error("cannot unpack the archive", e))?;
    let mut out = BufWriter::new(out);
    std::io::copy(&mut decoder, &mut out).map_err(|e| damaged(file, e))?;
    out.flush()
        .map_err(|e| io_error("cannot unpack the archive", e))?;
    // One frame and nothing after it: bytes past the frame are not part of any backup.
    let mut rest = decoder.finish();
    let mut extra = [0u8; 1];
    if rest.read(&mut extra).map_err(|e| damaged(file, e))? != 0 {
        return Err(damaged(file, "bytes follow its database"));
    }
    Ok(())
}

impl OpenedArchive {
    /// Copy the archive's board into `target` (which must be empty unless `options`
    /// say to replace what it holds).
    pub fn restore(
        &self,
        target: &Store,
        options: CopyOptions,
        progress: &mut dyn Progress,
    ) -> Result<CopyReport, TransferError> {
        copy(&self.store, target, options, progress)
    }
}

fn io_error(what: &str, e: std::io::Error) -> TransferError {
    TransferError::Archive(format!("{what}: {e}"))
}

fn sqlite_error(e: rusqlite::Error) -> TransferError {
    TransferError::Archive(format!("the backup's database: {e}"))
}
