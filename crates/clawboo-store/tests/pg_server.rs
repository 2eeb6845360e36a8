//! A PostgreSQL store against a server of its own: it outlives the server's outage (while
//! the server is down every call fails within seconds as `Unavailable`, the callers'
//! `backend_unavailable` and REST 503; nothing panics; once the server is back the same
//! `Store` works again), and it speaks TLS as the URL's `sslmode` asks.
//!
//! Runs its own throwaway clusters, since it stops them and configures TLS: it needs PostgreSQL's
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
    /// A running cluster; with `tls`, serving TLS with a self-signed certificate.
    fn start(tls: bool) -> Result<Option<Cluster>, String> {
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
        if tls {
            cluster.self_signed_tls()?;
        }
        cluster.server("start")?;
        Ok(Some(cluster))
    }

    /// A certificate no authority signed, `ssl = on`, and TCP clients admitted only over
    /// TLS, so a store that connects at all is encrypted.
    fn self_signed_tls(&self) -> Result<(), String> {
        let data = self.dir.path().join("data");
        output(Command::new("openssl").current_dir(&data).args([
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=localhost",
            "-keyout",
            "server.key",
            "-out",
            "server.crt",
        ]))?;
        if let Some(user) = &self.run_as {
            output(
                Command::new("chown")
                    .arg(user)
                    .arg(data.join("server.key"))
                    .arg(data.join("server.crt")),
            )?;
        }
        output(
            Command::new("chmod")
                .arg("600")
                .arg(data.join("server.key")),
        )?;
        let mut conf = std::fs::OpenOptions::new()
            .append(true)
            .open(data.join("postgresql.conf"))
            .map_err(|e| e.to_string())?;
        std::io::Write::write_all(&mut conf, b"\nssl = on\n").map_err(|e| e.to_string())?;
        std::fs::write(
            data.join("pg_hba.conf"),
            "local all all trust\nhostssl all all 127.0.0.1/32 trust\n",
        )
        .map_err(|e| e.to_string())
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

/// [`Cluster::start`], failing the test when a cluster that should start does not.
fn cluster(tls: bool) -> Option<Cluster> {
    Cluster::start(tls).unwrap_or_else(|e| panic!("starting the test cluster: {e}"))
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
    let Some(cluster) = cluster(false) else {
        return;
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

#[test]
fn sslmode_require_encrypts_and_verify_full_refuses_an_unknown_certificate() {
    let Some(cluster) = cluster(true) else {
        return;
    };
    let open = |query: &str| {
        Store::open_location(
            &DbLocation::Postgres(format!("{}{query}", cluster.url())),
            StoreConfig::default(),
        )
    };
    // The server admits TCP clients only over TLS.
    let store = open("?sslmode=require").unwrap();
    assert_eq!(
        store.setting_or_insert_with("k", || "v".into()).unwrap(),
        "v"
    );
    assert!(
        open("").is_err(),
        "no sslmode is plain text, which this server refuses"
    );
    match open("?sslmode=verify-full") {
        Err(StoreError::Backend(e)) => {
            assert_eq!(e.kind, BackendErrorKind::Unavailable, "{}", e.message);
            eprintln!("verify-full: {}", e.message);
        }
        other => panic!("a self-signed certificate passed verify-full: {other:?}"),
    }
}
