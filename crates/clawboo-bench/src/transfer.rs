//! Throughput of `clawboo db copy`, `backup` and `restore` (rows a second), over a kept
//! SQLite board of `--facts` facts (with the built-in embedder's vectors) and `--tasks`
//! tasks: SQLite to SQLite, and with `--pg` SQLite to PostgreSQL and back, a backup of each
//! engine and a restore onto each.

use std::sync::Arc;
use std::time::Instant;

use clawboo_memory::Memory;
use clawboo_store::board::CreatePolicy;
use clawboo_store::{Store, StoreError};
use clawboo_transfer::archive::{backup, open_archive};
use clawboo_transfer::{CopyOptions, Silent, copy};

use crate::db::{Backend, BenchDb};
use crate::seed::{self, Rng};
use crate::{Env, db};

/// Flags of `clawboo-bench transfer`.
#[derive(clap::Args, Clone)]
pub struct TransferArgs {
    /// Facts on the source board.
    #[arg(long, default_value_t = 100_000)]
    facts: usize,
    /// Tasks on the source board.
    #[arg(long, default_value_t = 100_000)]
    tasks: usize,
}

/// Rows written per seeding transaction.
const SEED_BATCH: usize = 1000;

/// The source board, kept between runs (seeding it takes minutes).
fn source(env: &Env, args: &TransferArgs) -> anyhow::Result<BenchDb> {
    let name = format!(
        "transfer-{}f-{}t-{}",
        args.facts, args.tasks, env.embeddings
    );
    Backend::Sqlite.kept(&env.data_dir, &name, |location| {
        let store = Arc::new(db::open(location)?);
        let memory = Memory::new(Arc::clone(&store), seed::embedder(&env.embeddings)?);
        let mut rng = Rng::new(7);
        let mut made = 0;
        while made < args.facts.max(args.tasks) {
            let end = (made + SEED_BATCH).min(args.facts.max(args.tasks));
            let facts: Vec<_> = (made..end.min(args.facts))
                .map(|i| memory.prepare_fact(seed::new_fact(&mut rng, i)))
                .collect::<Result<_, _>>()?;
            store.write(|_| {
                for fact in facts {
                    fact.insert(&store)?;
                }
                for i in made..end.min(args.tasks) {
                    store.create_task(seed::task(i), CreatePolicy::Uncapped)?;
                }
                Ok::<_, StoreError>(())
            })?;
            made = end;
        }
        Ok(())
    })
}

/// One measured step: its label, rows moved, seconds.
fn report(label: &str, rows: u64, started: Instant) {
    let secs = started.elapsed().as_secs_f64();
    println!(
        "{label:<34} {rows:>8} rows {secs:>8.2} s {:>10.0} rows/s",
        rows as f64 / secs
    );
}

fn timed_copy(label: &str, from: &Store, to: &BenchDb) -> anyhow::Result<Store> {
    let target = to.open()?;
    let started = Instant::now();
    let copied = copy(from, &target, CopyOptions::default(), &mut Silent)?;
    report(label, copied.total_rows(), started);
    Ok(target)
}

pub fn run(env: &Env, args: &TransferArgs) -> anyhow::Result<()> {
    let kept = source(env, args)?;
    let sqlite = kept.open()?;
    let work = tempfile::tempdir()?;

    let sqlite_copy = Backend::Sqlite.fresh()?;
    timed_copy("copy sqlite -> sqlite", &sqlite, &sqlite_copy)?;

    let archive = work.path().join("sqlite.clawboo");
    let started = Instant::now();
    let header = backup(&sqlite, &archive, &mut Silent)?;
    report("backup sqlite", header.rows.values().sum(), started);
    println!(
        "{:<34} {:>8.1} MiB archive",
        "",
        std::fs::metadata(&archive)?.len() as f64 / (1024.0 * 1024.0)
    );
    let opened = open_archive(&archive)?;
    let restored = Backend::Sqlite.fresh()?;
    let target = restored.open()?;
    let started = Instant::now();
    let report_rows = opened.restore(&target, CopyOptions::default(), &mut Silent)?;
    report("restore -> sqlite", report_rows.total_rows(), started);

    let Backend::Postgres { .. } = env.backend else {
        println!("(give --pg <server URL> for the PostgreSQL directions)");
        return Ok(());
    };
    let pg_copy = env.backend.fresh()?;
    let pg = timed_copy("copy sqlite -> postgres", &sqlite, &pg_copy)?;
    let back = Backend::Sqlite.fresh()?;
    timed_copy("copy postgres -> sqlite", &pg, &back)?;

    let pg_archive = work.path().join("postgres.clawboo");
    let started = Instant::now();
    let header = backup(&pg, &pg_archive, &mut Silent)?;
    report("backup postgres", header.rows.values().sum(), started);
    let pg_restored = env.backend.fresh()?;
    let target = pg_restored.open()?;
    let started = Instant::now();
    let restored_rows = opened.restore(&target, CopyOptions::default(), &mut Silent)?;
    report("restore -> postgres", restored_rows.total_rows(), started);
    Ok(())
}
