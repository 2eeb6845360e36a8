//! How a short read's round trip is best waited for on PostgreSQL (issue 40, item 3): one
//! task read by id, by `--readers` readers at once on a multi-threaded runtime of two
//! workers (as `clawboo serve` runs on two cores), five ways:
//!
//! - `store`: `Store::run_read` of the synchronous `Store::get_task`, whose pool polls a
//!   connection on the thread that holds it (the path of every read not yet written once
//!   as `async` code);
//! - `store async`: `Store::get_task_async`, the same read written once over
//!   `clawboo_store::reads`, awaited on connections the runtime drives;
//! - `per-reader`: `tokio-postgres` driven by the runtime, a connection per reader;
//! - `per-reader in a transaction`: the same, the read wrapped as the store wraps it
//!   (`BEGIN … READ ONLY`, the read, `COMMIT`, sent together in one round trip), to tell
//!   the transaction's cost from the way of waiting;
//! - `pipelined`: one connection shared by every reader, whose queries it sends without
//!   waiting for the answers before them.
//!
//! Reported: reads a second, this process's CPU a read and PostgreSQL's. The two driver
//! ways read the task's columns with a prepared statement and no clawboo code, so they
//! bound what a redesign of the store's PostgreSQL path could save.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::bail;
use clawboo_store::DbLocation;
use clawboo_store::board::Scope;

use crate::db::ServerCpu;
use crate::{Env, procs, seed};

/// Flags of `clawboo-bench pg-read`.
#[derive(clap::Args, Clone)]
pub struct PgReadArgs {
    /// Reads in all, per way.
    #[arg(long, default_value_t = 40_000)]
    reads: usize,
    /// Readers at once.
    #[arg(long, default_value_t = 8)]
    readers: usize,
    /// Tasks on the board read.
    #[arg(long, default_value_t = 1000)]
    tasks: usize,
}

/// The columns a task read returns, as the store's own read names them.
const READ_TASK: &str = "SELECT id, title, description, status, priority, team_id, \
     assignee_agent_id, assignee_runtime, parent_task_id, dropped, tenant_id, created_at, \
     updated_at, completed_at, lease_expires_at, claim_token, reclaimed_at, reclaimed_from, \
     paths, short_id FROM tasks WHERE id = $1";

/// The ways a read's round trip is waited for.
#[derive(Clone, Copy, Debug)]
enum Way {
    Store,
    StoreAsync,
    PerReader,
    PerReaderInTransaction,
    Pipelined,
}

impl Way {
    fn name(self) -> &'static str {
        match self {
            Way::Store => "store, synchronous (pool polled by its holder)",
            Way::StoreAsync => "store, async (connections driven by the runtime)",
            Way::PerReader => "tokio-postgres, a connection per reader",
            Way::PerReaderInTransaction => {
                "tokio-postgres, a connection per reader, each read in a transaction"
            }
            Way::Pipelined => "tokio-postgres, one pipelined connection",
        }
    }
}

pub fn run(env: &Env, args: &PgReadArgs) -> anyhow::Result<()> {
    let db = env.backend.fresh()?;
    let DbLocation::Postgres(url) = db.location() else {
        bail!("pg-read measures a PostgreSQL server: give --pg <postgres:// URL> (or --db <URL>)");
    };
    let ids = Arc::new(seed::board(db.location(), args.tasks)?);
    let cpu = ServerCpu::probe(db.location());
    let store = Arc::new(crate::db::open(db.location())?);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let readers = args.readers.max(1);
    let each = args.reads.div_ceil(readers);
    for way in [
        Way::Store,
        Way::StoreAsync,
        Way::PerReader,
        Way::PerReaderInTransaction,
        Way::Pipelined,
    ] {
        let own_before = procs::proc_usage(std::process::id())?.cpu_seconds;
        let server_before = cpu.as_ref().map(ServerCpu::seconds).transpose()?;
        let elapsed = runtime.block_on(race(way, url, &store, &ids, readers, each))?;
        let reads = (readers * each) as f64;
        let own = procs::proc_usage(std::process::id())?.cpu_seconds - own_before;
        let server = match (&cpu, server_before) {
            (Some(cpu), Some(before)) => format!(
                ", PostgreSQL CPU {:.1} µs/read",
                (cpu.seconds()? - before) / reads * 1e6
            ),
            _ => String::new(),
        };
        println!(
            "pg-read {}, {readers} reader(s): {:.0} reads/s, this process's CPU {:.1} µs/read{server}",
            way.name(),
            reads / elapsed.as_secs_f64(),
            own / reads * 1e6,
        );
    }
    Ok(())
}

/// `readers` readers reading `each` tasks the `way` way; the wall time they took.
async fn race(
    way: Way,
    url: &str,
    store: &Arc<clawboo_store::Store>,
    ids: &Arc<Vec<String>>,
    readers: usize,
    each: usize,
) -> anyhow::Result<Duration> {
    let connections = match way {
        Way::Store | Way::StoreAsync => 0,
        Way::PerReader | Way::PerReaderInTransaction => readers,
        Way::Pipelined => 1,
    };
    let mut clients = Vec::with_capacity(connections);
    for _ in 0..connections {
        let client = crate::db::runtime_client(url).await?;
        let statement = client.prepare(READ_TASK).await?;
        clients.push((Arc::new(client), statement));
    }
    let in_transaction = matches!(way, Way::PerReaderInTransaction);
    let asynchronous = matches!(way, Way::StoreAsync);
    let started = Instant::now();
    let mut racers = Vec::with_capacity(readers);
    for r in 0..readers {
        let ids = Arc::clone(ids);
        let store = Arc::clone(store);
        let client = (!clients.is_empty()).then(|| clients[r % clients.len()].clone());
        racers.push(tokio::spawn(async move {
            for n in 0..each {
                let id = ids[(r * each + n) % ids.len()].clone();
                let found = match &client {
                    Some((client, statement)) if in_transaction => {
                        let params: [&(dyn tokio_postgres::types::ToSql + Sync); 1] = [&id];
                        let (begun, row, committed) = tokio::join!(
                            client.batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"),
                            client.query_opt(statement, &params),
                            client.batch_execute("COMMIT"),
                        );
                        begun?;
                        committed?;
                        row?.is_some_and(|row| !row.get::<_, String>(1).is_empty())
                    }
                    None if asynchronous => store
                        .get_task_async(id, None)
                        .await
                        .map_err(anyhow::Error::from)??
                        .is_some(),
                    None => store
                        .run_read(move |s| s.get_task(&id, Scope::ALL))
                        .await
                        .map_err(anyhow::Error::from)??
                        .is_some(),
                    Some((client, statement)) => client
                        .query_opt(statement, &[&id])
                        .await?
                        .is_some_and(|row| !row.get::<_, String>(1).is_empty()),
                };
                if !found {
                    bail!("a seeded task was not found");
                }
            }
            Ok(())
        }));
    }
    for racer in racers {
        racer.await??;
    }
    Ok(started.elapsed())
}
