//! PostgreSQL's raw write limit, measured as `sqlite-commit` measures SQLite's: short
//! transactions that each update one row (`BEGIN; UPDATE; COMMIT`, three round trips as the
//! store's own writes make), with no clawboo code in between. SQLite serialises every
//! writer, so one connection finds its limit; PostgreSQL commits side by side, so the
//! measure runs at the concurrency the claims run at, each connection on a row of its own
//! (as each claim takes a task of its own).

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clawboo_store::DbLocation;

use crate::Env;
use crate::db::{ServerCpu, runtime_client, with_client};

/// Flags of `clawboo-bench pg-commit`.
#[derive(clap::Args, Clone)]
pub struct PgCommitArgs {
    /// Transactions in all, per concurrency.
    #[arg(long, default_value_t = 50_000)]
    transactions: usize,
    /// Connections, each committing its own transactions back to back; one measure each.
    #[arg(long, value_delimiter = ',', default_value = "1,8,32")]
    connections: Vec<usize>,
}

/// Run the measure on a fresh database of `--pg` (or on `--db`).
pub fn run(env: &Env, args: &PgCommitArgs) -> anyhow::Result<()> {
    let db = env.backend.fresh()?;
    let DbLocation::Postgres(url) = db.location() else {
        bail!(
            "pg-commit measures a PostgreSQL server: give --pg <postgres:// URL> (or --db <URL>)"
        );
    };
    let most = args.connections.iter().copied().max().unwrap_or(1).max(1);
    with_client(url, async move |client| {
        client
            .batch_execute(&format!(
                "DROP TABLE IF EXISTS bench_commit; \
                 CREATE TABLE bench_commit(id BIGINT PRIMARY KEY, n BIGINT NOT NULL); \
                 INSERT INTO bench_commit SELECT g, 0 FROM generate_series(0, {most}) g"
            ))
            .await
            .context("cannot create the bench_commit table")
    })?;
    let cpu = ServerCpu::probe(db.location());
    let settings = server_settings(url)?;
    for &connections in &args.connections {
        let connections = connections.max(1);
        let per_connection = args.transactions.div_ceil(connections);
        let before = cpu.as_ref().map(ServerCpu::seconds).transpose()?;
        let elapsed = commit_race(url, connections, per_connection)?;
        let spent = match (&cpu, before) {
            (Some(cpu), Some(before)) => format!(
                ", server CPU {:.1} µs/transaction",
                (cpu.seconds()? - before) / (connections * per_connection) as f64 * 1e6
            ),
            _ => String::new(),
        };
        println!(
            "raw PostgreSQL BEGIN; UPDATE (one row); COMMIT ({settings}), {connections} connection(s): {:.0} tx/s over {}{spent}",
            (connections * per_connection) as f64 / elapsed.as_secs_f64(),
            connections * per_connection,
        );
    }
    Ok(())
}

/// The settings that decide what a commit waits for.
fn server_settings(url: &str) -> anyhow::Result<String> {
    with_client(url, async |client| {
        let mut parts = Vec::new();
        for name in ["synchronous_commit", "fsync"] {
            let row = client.query_one(&format!("SHOW {name}"), &[]).await?;
            parts.push(format!("{name}={}", row.get::<_, String>(0)));
        }
        Ok(parts.join(", "))
    })
}

/// `connections` connections committing `each` transactions, connection `k` updating row
/// `k`; the wall time from the first `BEGIN` to the last `COMMIT`.
fn commit_race(url: &str, connections: usize, each: usize) -> anyhow::Result<Duration> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let mut clients = Vec::with_capacity(connections);
        for _ in 0..connections {
            clients.push(runtime_client(url).await?);
        }
        let started = Instant::now();
        let mut racers = Vec::with_capacity(connections);
        for (k, mut client) in clients.into_iter().enumerate() {
            racers.push(tokio::spawn(async move {
                let update = client
                    .prepare("UPDATE bench_commit SET n = n + 1 WHERE id = $1")
                    .await?;
                let row = k as i64;
                for _ in 0..each {
                    let tx = client.transaction().await?;
                    tx.execute(&update, &[&row]).await?;
                    tx.commit().await?;
                }
                Ok::<_, tokio_postgres::Error>(())
            }));
        }
        for racer in racers {
            racer.await??;
        }
        Ok(started.elapsed())
    })
}
