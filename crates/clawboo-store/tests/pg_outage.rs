//! A PostgreSQL store outlives its server's outage: while the server is down every call
//! fails within seconds as `Unavailable` (the callers' `backend_unavailable`, REST 503),
//! nothing panics, and once the server is back the same `Store` works again.
//!
//! Runs its own throwaway cluster, since it stops the server: it needs PostgreSQL's
//! `initdb` and `pg_ctl` (on PATH, in /usr/local/bin or /usr/lib/postgresql/<v>/bin), and,
//! as root, a `postgres` user to run them as (PostgreSQL refuses root). Without them it
//! says so and passes.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use clawboo_store::{BackendErrorKind, DbLocation, Store, StoreConfig, StoreError};

/// The folder holding `initdb` and `pg_ctl`, the newest Debian one first.
fn bindir() -> Option<PathBuf> {
    let mut candidates: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .map(|entry| entry.path().join("bin"))
        .collect();
    candidates.sort_by_key(|dir| {
        let version = dir
            .parent()
            .and_then(Path::file_name)
            .and_then(|v| v.to_str())
            .and_then(|v| v.parse::<u32>().ok());
        std::cmp::Reverse(version)
    });
    candidates.push(PathBuf::from("/usr/local/bin"));
    candidates.extend(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    ));
    candidates
        .into_iter()
        .find(|dir| dir.join("initdb").is_file() && dir.join("pg_ctl").is_file())
}

fn output(command: &mut Command) -> Result<String, String> {
    let out = command.output().map_err(|e| format!("{command:?}: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    } else {
        Err(format!(
            "{command:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// A cluster in a temp folder, stopped (and removed) when dropped.
struct Cluster {
    bin: PathBuf,
    /// `Some(user)` when commands must run as another user (we are root).
    run_as: Option<String>,
    dir: tempfile::TempDir,
    port: u16,
}

impl Cluster {
    fn start() -> Result<Option<Cluster>, String> {
        let Some(bin) = bindir() else {
            eprintln!("skipped: no PostgreSQL initdb/pg_ctl found");
            return Ok(None);
        };
        let root = output(Command::new("id").arg("-u"))? == "0";
        let run_as = if root {
            if output(Command::new("id").arg("postgres")).is_err() {
                eprintln!(
                    "skipped: running as root and there is no postgres user to run PostgreSQL as"
                );
                return Ok(None);
            }
            Some("postgres".to_owned())
        } else {
            None
        };
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        if let Some(user) = &run_as {
            output(Command::new("chown").arg(user).arg(dir.path()))?;
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| e.to_string())?
            .port();
        let cluster = Cluster {
            bin,
            run_as,
            dir,
            port,
        };
        let data = cluster.data();
        cluster.run(
            "initdb",
            &["-D", &data, "-A", "trust", "-U", "postgres", "--no-sync"],
        )?;
        cluster.server("start")?;
        Ok(Some(cluster))
    }

    fn data(&self) -> String {
        self.dir.path().join("data").display().to_string()
    }

    fn run(&self, program: &str, args: &[&str]) -> Result<String, String> {
        let program = self.bin.join(program);
        let mut command = match &self.run_as {
            Some(user) => {
                let mut c = Command::new("runuser");
                c.args(["-u", user, "--"]).arg(program);
                c
            }
            None => Command::new(program),
        };
        command.args(args).current_dir("/");
        output(&mut command)
    }

    fn server(&self, action: &str) -> Result<String, String> {
        let options = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off",
            self.port,
            self.dir.path().display()
        );
        let log = self.dir.path().join("log").display().to_string();
        let data = self.data();
        match action {
            "start" => self.run(
                "pg_ctl",
                &["-D", &data, "-o", &options, "-l", &log, "-w", "start"],
            ),
            _ => self.run("pg_ctl", &["-D", &data, "-m", "fast", "-w", "stop"]),
        }
    }

    fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = self.server("stop");
    }
}

/// How long a call may take to report the outage.
const REPORTED_WITHIN: Duration = Duration::from_secs(10);

fn assert_unavailable<T: std::fmt::Debug>(
    what: &str,
    call: impl FnOnce() -> Result<T, StoreError>,
) {
    let started = Instant::now();
    let result = call();
    let took = started.elapsed();
    match result {
        Err(StoreError::Backend(e)) => {
            assert_eq!(
                e.kind,
                BackendErrorKind::Unavailable,
                "{what}: {}",
                e.message
            );
            assert!(!e.message.is_empty());
            eprintln!("{what}: {} ({took:?})", e.message);
        }
        other => panic!("{what}: expected Unavailable, got {other:?}"),
    }
    assert!(took < REPORTED_WITHIN, "{what} took {took:?} to fail");
}

#[test]
fn a_store_reports_an_outage_within_seconds_and_recovers_when_the_server_is_back() {
    let cluster = match Cluster::start() {
        Ok(Some(cluster)) => cluster,
        Ok(None) => return,
        Err(e) => panic!("starting the test cluster: {e}"),
    };
    let store = Store::open_location(
        &DbLocation::Postgres(cluster.url()),
        StoreConfig {
            pg_pool_size: 2,
            ..StoreConfig::default()
        },
    )
    .unwrap();
    assert_eq!(
        store.setting_or_insert_with("k", || "v".into()).unwrap(),
        "v"
    );
    store.push_inbox("a", None, "board", "before").unwrap();

    cluster.server("stop").unwrap();
    assert_unavailable("a read", || store.setting("k"));
    assert_unavailable("a write", || store.push_inbox("a", None, "board", "during"));
    assert_unavailable("a write that takes", || {
        store.take_inbox("a", None, 10, "test")
    });

    cluster.server("start").unwrap();
    // The same store, without reopening: dead connections are replaced.
    assert_eq!(store.setting("k").unwrap().as_deref(), Some("v"));
    let delivered = store.take_inbox("a", None, 10, "test").unwrap();
    assert_eq!(
        delivered.len(),
        1,
        "only the write before the outage landed"
    );
    store.push_inbox("a", None, "board", "after").unwrap();
    assert!(store.has_pending_inbox("a", None).unwrap());
}
