//! `clawboo db …`: move a board between databases (`copy`), take and restore backups, and
//! check a database (SPEC §18). The work is `clawboo-transfer`'s; this draws its progress
//! and asks before replacing anything.

use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use clawboo_store::{DbLocation, Store};
use clawboo_transfer::archive::{backup, open_archive};
use clawboo_transfer::check::check;
use clawboo_transfer::{CopyOptions, CopyReport, Progress, copy};
use indicatif::{ProgressBar, ProgressStyle};

/// `clawboo db …`
#[derive(Debug, Subcommand)]
pub enum DbCommand {
    /// Copy every table of one database into another (SQLite file or postgres:// URL,
    /// either way): ids, seqs, leases and the signing secret kept. Stop the servers first.
    Copy {
        /// The database to copy from (SQLite file or postgres:// URL).
        #[arg(long, value_name = "PATH_OR_URL")]
        from: PathBuf,
        #[command(flatten)]
        target: Target,
    },
    /// Write a compressed, versioned archive of a live database (--db), taken at one
    /// instant while writers keep working.
    Backup {
        /// The archive to write (must not exist).
        file: PathBuf,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Load an archive of `clawboo db backup` into an empty database of either engine.
    Restore {
        /// The archive to read.
        file: PathBuf,
        #[command(flatten)]
        target: Target,
    },
    /// Run the engine's integrity check and the board's invariants on a database (--db);
    /// exits non-zero when any is violated.
    Check {
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
}

/// Where a copy or restore writes.
#[derive(Debug, Args)]
pub struct Target {
    /// The database to write into (SQLite file or postgres:// URL); it must be empty
    /// unless --force.
    #[arg(long, value_name = "PATH_OR_URL")]
    to: PathBuf,
    /// Replace everything the target holds (asks first on a terminal).
    #[arg(long)]
    force: bool,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

/// Run a `clawboo db` command; `db` is the global `--db`.
pub fn run(db: Option<PathBuf>, command: DbCommand) -> anyhow::Result<()> {
    match command {
        DbCommand::Copy {
            from,
            target: Target { to, force, json },
        } => {
            let source_location = existing(Some(&from), "--from")?;
            let target_location = crate::resolve_db(Some(&to))?;
            if same_database(&source_location, &target_location) {
                bail!("--from and --to name the same database: name another target");
            }
            let source = crate::open_store(&source_location, crate::STDIO_PG_POOL)?;
            let target = crate::open_store(&target_location, crate::STDIO_PG_POOL)?;
            let options = confirm(force, &target_location)?;
            let report = copy(&source, &target, options, progress_for(json).as_mut())
                .with_context(|| {
                    format!("copy from {source_location} to {target_location} failed")
                })?;
            print_copy("copied", &report, json);
            Ok(())
        }
        DbCommand::Backup { file, json } => {
            let location = existing(db.as_deref(), "--db")?;
            let source = crate::open_store(&location, crate::STDIO_PG_POOL)?;
            let header = backup(&source, &file, progress_for(json).as_mut())
                .with_context(|| format!("backup of {location} failed"))?;
            let rows: u64 = header.rows.values().sum();
            if json {
                println!(
                    "{}",
                    serde_json::json!({"file": file, "schema": header.schema, "source": header.source, "rows": header.rows})
                );
            } else {
                println!(
                    "backed up {rows} rows of {location} to {} (schema {})",
                    file.display(),
                    header.schema
                );
            }
            Ok(())
        }
        DbCommand::Restore {
            file,
            target: Target { to, force, json },
        } => {
            // The archive is read and checked whole before the target is opened, so a bad
            // archive leaves no trace on it.
            let archive = open_archive(&file).context("cannot restore")?;
            let target_location = crate::resolve_db(Some(&to))?;
            let target = crate::open_store(&target_location, crate::STDIO_PG_POOL)?;
            let options = confirm(force, &target_location)?;
            let report = archive
                .restore(&target, options, progress_for(json).as_mut())
                .with_context(|| {
                    format!(
                        "restore of {} into {target_location} failed",
                        file.display()
                    )
                })?;
            print_copy("restored", &report, json);
            Ok(())
        }
        DbCommand::Check { json } => {
            let location = existing(db.as_deref(), "--db")?;
            let store = crate::open_store(&location, crate::STDIO_PG_POOL)?;
            run_check(&store, &location, json)
        }
    }
}

fn run_check(store: &Store, location: &DbLocation, json: bool) -> anyhow::Result<()> {
    let report = check(store).with_context(|| format!("cannot check {location}"))?;
    if json {
        let violations: Vec<_> = report
            .violations
            .iter()
            .map(|v| serde_json::json!({"check": v.check, "detail": v.detail}))
            .collect();
        println!(
            "{}",
            serde_json::json!({"checks": report.checks, "violations": violations})
        );
    } else {
        for v in &report.violations {
            println!("{}: {}", v.check, v.detail);
        }
        if report.violations.is_empty() {
            println!("{location}: all {} checks passed", report.checks.len());
        }
    }
    if !report.violations.is_empty() {
        bail!(
            "{location} violates {} of {} checks",
            report.violations.len(),
            report.checks.len()
        );
    }
    Ok(())
}

/// The database `given` (or the default) names, which must exist: a copy, backup or check
/// never creates the database it reads. `flag` names the option for the message.
fn existing(given: Option<&Path>, flag: &str) -> anyhow::Result<DbLocation> {
    let missing = |path: &Path| {
        anyhow::anyhow!(
            "no database at {}: {flag} names an existing SQLite file or a postgres:// URL",
            path.display()
        )
    };
    // Checked before resolving, which would make a missing file's folder.
    if let Some(path) = given
        && !path.to_str().is_some_and(|s| s.contains("://"))
        && !path.exists()
    {
        return Err(missing(path));
    }
    let location = crate::resolve_db(given)?;
    match &location {
        DbLocation::File(path) if !path.exists() => Err(missing(path)),
        _ => Ok(location),
    }
}

/// Whether two locations are one database (a file by its real path).
fn same_database(a: &DbLocation, b: &DbLocation) -> bool {
    match (a, b) {
        (DbLocation::File(a), DbLocation::File(b)) => {
            let real = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
            real(a) == real(b)
        }
        (DbLocation::Postgres(a), DbLocation::Postgres(b)) => a == b,
        _ => false,
    }
}

/// The copy's options: with `--force` on a terminal, only once the person typed `yes`.
fn confirm(force: bool, target: &DbLocation) -> anyhow::Result<CopyOptions> {
    if force && std::io::stdin().is_terminal() {
        eprint!("--force replaces everything {target} holds. Type yes to go on: ");
        std::io::stderr().flush()?;
        let mut answer = String::new();
        std::io::stdin().lock().read_line(&mut answer)?;
        if answer.trim() != "yes" {
            bail!("not confirmed: nothing was changed");
        }
    }
    Ok(CopyOptions { replace: force })
}

fn print_copy(verb: &str, report: &CopyReport, json: bool) {
    if json {
        let derived: Vec<_> = report
            .derived
            .iter()
            .map(|(name, how)| serde_json::json!({"name": name, "rebuilt": how}))
            .collect();
        println!(
            "{}",
            serde_json::json!({"rows": report.rows, "total": report.total_rows(), "derived": derived})
        );
    } else {
        println!(
            "{verb} {} rows in {} tables; counts match on both sides",
            report.total_rows(),
            report.rows.len()
        );
        for (name, how) in &report.derived {
            println!("  derived, rebuilt on the target: {name} ({how})");
        }
    }
}

/// A bar per table on a terminal; plain lines on stderr otherwise; nothing with `--json`
/// but the errors.
fn progress_for(json: bool) -> Box<dyn Progress> {
    if std::io::stderr().is_terminal() && !json {
        Box::new(Bars { bar: None })
    } else {
        Box::new(Lines {
            quiet: json,
            table: String::new(),
            rows: 0,
        })
    }
}

/// `indicatif` bars, one per table, left on screen when done.
struct Bars {
    bar: Option<ProgressBar>,
}

impl Progress for Bars {
    fn table(&mut self, table: &str, rows: u64) {
        let bar = ProgressBar::new(rows);
        if let Ok(style) =
            ProgressStyle::with_template("{prefix:>22} [{bar:30}] {pos}/{len} rows {per_sec}")
        {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.set_prefix(table.to_owned());
        self.bar = Some(bar);
    }
    fn advance(&mut self, rows: u64) {
        if let Some(bar) = &self.bar {
            bar.inc(rows);
        }
    }
    fn table_done(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish();
        }
    }
    fn step(&mut self, what: &str) {
        eprintln!("{what}…");
    }
}

/// One line per table when it is done, for logs and pipes.
struct Lines {
    quiet: bool,
    table: String,
    rows: u64,
}

impl Progress for Lines {
    fn table(&mut self, table: &str, _: u64) {
        self.table = table.to_owned();
        self.rows = 0;
    }
    fn advance(&mut self, rows: u64) {
        self.rows += rows;
    }
    fn table_done(&mut self) {
        if !self.quiet {
            eprintln!("{}: {} rows", self.table, self.rows);
        }
    }
    fn step(&mut self, what: &str) {
        if !self.quiet {
            eprintln!("{what}");
        }
    }
}
