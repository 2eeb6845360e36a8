//! What a stored fact costs in memory: the private RSS (`RssAnon`) of `clawboo serve` and
//! of a stdio memory server over a corpus of `--facts` facts, once searches in every mode
//! have filled what the server keeps in memory, less the same server's over an empty
//! database after the same searches; divided by the facts. The soak's memory verdict allows
//! for what a run stores at this rate.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;

use crate::Env;
use crate::db::BenchDb;
use crate::load::{HttpLoad, MakeCall, no_errors, round_robin, run_stdio};
use crate::procs::{ServeProcess, StdioServer, mib, proc_usage};
use crate::seed::{self, TEAM};

/// Flags of `clawboo-bench fact-memory`.
#[derive(clap::Args, Clone)]
pub struct FactMemoryArgs {
    /// Corpus sizes to measure.
    #[arg(long, value_delimiter = ',', default_value = "10000,100000")]
    facts: Vec<usize>,
    /// Searches of each mode (fts, vector, hybrid) before reading the RSS.
    #[arg(long, default_value_t = 30)]
    searches: usize,
    /// Seconds to wait after the searches, for the text index the first search starts
    /// filling on a thread of its own.
    #[arg(long, default_value_t = 5.0)]
    settle: f64,
}

/// Which server holds the facts.
#[derive(Clone, Copy)]
enum Host {
    Serve,
    Stdio,
}

impl Host {
    fn name(self) -> &'static str {
        match self {
            Host::Serve => "clawboo serve",
            Host::Stdio => "stdio memory server",
        }
    }
}

/// Measure every size on both servers.
pub fn run(env: &Env, args: &FactMemoryArgs) -> anyhow::Result<()> {
    let empty = env.backend.fresh()?;
    empty.open()?;
    let hosts = [Host::Serve, Host::Stdio];
    let mut baseline = Vec::new();
    for host in hosts {
        let kib = private_after_searches(env, args, &empty, host)?;
        println!(
            "fact memory [{}] {}, empty database: private {}",
            env.backend.name(),
            host.name(),
            mib(kib)
        );
        baseline.push(kib);
    }
    for &n in &args.facts {
        let corpus = seed::memory_db(&env.backend, &env.data_dir, n, &env.embeddings, env.corpus)?;
        for (host, &empty_kib) in hosts.iter().zip(&baseline) {
            let kib = private_after_searches(env, args, &corpus, *host)?;
            println!(
                "fact memory [{}] {}, {n} facts ({} embedder): private {} ({:+.1} MiB over empty), {:.2} KiB a fact",
                env.backend.name(),
                host.name(),
                env.embeddings,
                mib(kib),
                (kib as f64 - empty_kib as f64) / 1024.0,
                (kib as f64 - empty_kib as f64) / n.max(1) as f64,
            );
        }
    }
    Ok(())
}

/// The private RSS of `host` on `db` after `args.searches` searches of each mode and the
/// settling wait, KiB.
fn private_after_searches(
    env: &Env,
    args: &FactMemoryArgs,
    db: &BenchDb,
    host: Host,
) -> anyhow::Result<u64> {
    let queries = Arc::new(seed::queries(args.searches.max(1), env.corpus));
    let make: Arc<MakeCall> = Arc::new(move |n| {
        let mode = ["fts", "vector", "hybrid"][n % 3];
        (
            "memory_search",
            json!({"query": queries[(n / 3) % queries.len()], "mode": mode, "limit": 10,
                   "scopeTeamId": TEAM}),
        )
    });
    let plan = round_robin(0, 3 * args.searches.max(1), 1);
    let settle = Duration::from_secs_f64(args.settle.max(0.0));
    match host {
        Host::Serve => {
            let server = ServeProcess::start(&env.bin_dir, db.location(), &env.embeddings)?;
            let client = HttpLoad::open(&format!("{}/api/mcp/memory", server.base), 1)?;
            client
                .run(&plan, make, Arc::new(no_errors), None)?
                .ensure_ok("searches")?;
            std::thread::sleep(settle);
            let usage = proc_usage(server.pid())?;
            client.close();
            Ok(usage.anon_rss_kib)
        }
        Host::Stdio => {
            let mut server = StdioServer::spawn(env.stdio_command("memory", db.location())?)?;
            server.initialize()?;
            let mut servers = [server];
            run_stdio(&mut servers, &plan, 1, &*make, &no_errors)?.ensure_ok("searches")?;
            std::thread::sleep(settle);
            let [server] = servers;
            let usage = server.usage()?;
            server.finish()?;
            Ok(usage.anon_rss_kib)
        }
    }
}
