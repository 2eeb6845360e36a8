//! Where a measure's data lives: a fresh SQLite file (the default), a fresh database on a
//! PostgreSQL server (`--pg`), or one database the caller names (`--db`). The servers under
//! test get the same location as `--db`, and seeding opens it through the store's own
//! `Store::open_location`, so both backends are measured through the same code.

use std::path::Path;
use std::time::Instant;

use anyhow::{Context, bail};
use clawboo_store::{DbLocation, Store, StoreConfig};
use tempfile::TempDir;

/// Which backend every measure of a run uses.
#[derive(Clone)]
pub enum Backend {
    /// A fresh SQLite file per measure; slow-to-seed files kept in the data folder.
    Sqlite,
    /// A fresh database per measure on this server (created, then dropped); slow-to-seed
    /// databases kept on the server as `clawboo_bench_kept_*`.
    Postgres {
        /// The server's URL (its database part names where `CREATE DATABASE` runs).
        server: String,
    },
    /// This one database for every measure (`--db`), seeded anew by each measure.
    Given(DbLocation),
}

/// Shows no password (a location's `Debug` leaves it out).
impl std::fmt::Debug for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Backend::Sqlite => f.write_str("Sqlite"),
            Backend::Postgres { server } => f
                .debug_tuple("Postgres")
                .field(&DbLocation::Postgres(server.clone()))
                .finish(),
            Backend::Given(location) => f.debug_tuple("Given").field(location).finish(),
        }
    }
}

impl Backend {
    /// From the `--db` and `--pg` flags (at most one of them).
    pub fn from_flags(db: Option<&Path>, pg: Option<&str>) -> anyhow::Result<Backend> {
        match (db, pg) {
            (Some(_), Some(_)) => {
                bail!(
                    "--db and --pg both given: --db names one database for every measure, --pg a server to create a fresh one on per measure; give one"
                )
            }
            (Some(db), None) => Ok(Backend::Given(
                clawboo_store::resolve_db(Some(db))?.with_libpq_password(),
            )),
            (None, Some(url)) => {
                match clawboo_store::resolve_db(Some(Path::new(url)))?.with_libpq_password() {
                    DbLocation::Postgres(server) => Ok(Backend::Postgres { server }),
                    DbLocation::File(_) => {
                        bail!("--pg wants a postgres:// URL of a server, not a file path")
                    }
                }
            }
            (None, None) => Ok(Backend::Sqlite),
        }
    }

    /// `sqlite` or `postgres`, for labels.
    pub fn name(&self) -> &'static str {
        match self {
            Backend::Sqlite | Backend::Given(DbLocation::File(_)) => "sqlite",
            Backend::Postgres { .. } | Backend::Given(DbLocation::Postgres(_)) => "postgres",
        }
    }

    /// An empty database for one measure, removed when the handle is dropped.
    pub fn fresh(&self) -> anyhow::Result<BenchDb> {
        match self {
            Backend::Sqlite => {
                let dir = tempfile::tempdir()?;
                Ok(BenchDb {
                    location: DbLocation::File(dir.path().join("bench.db")),
                    cleanup: Cleanup::Dir { _dir: dir },
                })
            }
            Backend::Postgres { server } => {
                let name = format!("clawboo_bench_{}", clawboo_store::new_id().replace('-', ""));
                admin(server, &format!("CREATE DATABASE {name}"))?;
                Ok(BenchDb {
                    location: DbLocation::Postgres(with_database(server, &name)),
                    cleanup: Cleanup::Database {
                        server: server.clone(),
                        name,
                    },
                })
            }
            Backend::Given(location) => Ok(BenchDb {
                location: location.clone(),
                cleanup: Cleanup::None,
            }),
        }
    }

    /// A database kept between runs under `name` (`board-1000`), seeded by `fill` the first
    /// time, into a temporary name so an interrupted seeding is never reused. With `--db`
    /// the given database is filled every time.
    pub fn kept(
        &self,
        data_dir: &Path,
        name: &str,
        fill: impl FnOnce(&DbLocation) -> anyhow::Result<()>,
    ) -> anyhow::Result<BenchDb> {
        let started = Instant::now();
        let location = match self {
            Backend::Sqlite => {
                std::fs::create_dir_all(data_dir)
                    .with_context(|| format!("cannot create {}", data_dir.display()))?;
                let path = data_dir.join(format!("{name}.db"));
                if !path.exists() {
                    let partial = data_dir.join(format!("{name}.db.partial"));
                    for suffix in ["", "-wal", "-shm"] {
                        let _ = std::fs::remove_file(format!("{}{suffix}", partial.display()));
                    }
                    fill(&DbLocation::File(partial.clone()))?;
                    // Every connection is closed, so SQLite has folded the WAL into the file.
                    std::fs::rename(&partial, &path)?;
                    seeded(&path.display().to_string(), started);
                }
                DbLocation::File(path)
            }
            Backend::Postgres { server } => {
                let kept = format!("clawboo_bench_kept_{}", identifier(name));
                if !database_exists(server, &kept)? {
                    let partial = format!("{kept}_partial");
                    admin(
                        server,
                        &format!("DROP DATABASE IF EXISTS {partial} WITH (FORCE)"),
                    )?;
                    admin(server, &format!("CREATE DATABASE {partial}"))?;
                    fill(&DbLocation::Postgres(with_database(server, &partial)))?;
                    let seeding = started.elapsed();
                    // What autovacuum does to a freshly loaded table soon after (the
                    // visibility map lets index-only scans skip the heap), done now so the
                    // measures do not depend on when it runs; reported apart from seeding.
                    admin(&with_database(server, &partial), "VACUUM (ANALYZE)")?;
                    eprintln!(
                        "seeding {kept} took {:.1} s, then VACUUM (ANALYZE) {:.1} s",
                        seeding.as_secs_f64(),
                        (started.elapsed() - seeding).as_secs_f64()
                    );
                    // FORCE: the seeding store's pooled connections may still be closing.
                    admin(
                        server,
                        &format!(
                            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{partial}'"
                        ),
                    )?;
                    admin(
                        server,
                        &format!("ALTER DATABASE {partial} RENAME TO {kept}"),
                    )?;
                    seeded(&kept, started);
                }
                DbLocation::Postgres(with_database(server, &kept))
            }
            Backend::Given(location) => {
                fill(location)?;
                location.clone()
            }
        };
        Ok(BenchDb {
            location,
            cleanup: Cleanup::None,
        })
    }
}

fn seeded(what: &str, started: Instant) {
    eprintln!(
        "seeded {what} in {:.1} s (kept for later runs)",
        started.elapsed().as_secs_f64()
    );
}

/// A database one measure uses, and what to remove after it.
pub struct BenchDb {
    location: DbLocation,
    cleanup: Cleanup,
}

enum Cleanup {
    None,
    /// The SQLite file's folder, removed on drop.
    Dir {
        _dir: TempDir,
    },
    Database {
        server: String,
        name: String,
    },
}

impl BenchDb {
    /// Where it is (a PostgreSQL URL carries its password).
    pub fn location(&self) -> &DbLocation {
        &self.location
    }

    /// The store on it, opened as the servers open theirs (default settings).
    pub fn open(&self) -> anyhow::Result<Store> {
        open(&self.location)
    }
}

impl Drop for BenchDb {
    fn drop(&mut self) {
        if let Cleanup::Database { server, name } = &self.cleanup
            && let Err(e) = admin(
                server,
                &format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"),
            )
        {
            eprintln!("could not drop the bench database {name}: {e:#}");
        }
    }
}

/// The store at `location` with the default settings and memory's extension, as the
/// binaries open it.
pub fn open(location: &DbLocation) -> anyhow::Result<Store> {
    let config = StoreConfig::default().with_extension(clawboo_memory::EXTENSION);
    Store::open_location(location, config)
        .with_context(|| format!("cannot open the bench database {location}"))
}

/// The CPU a PostgreSQL server on this machine spends, all its processes together, so a
/// measure can say what a call costs the database beside what it costs the clawboo server.
pub struct ServerCpu {
    postmaster: u32,
}

impl ServerCpu {
    /// For a PostgreSQL `location` whose server runs on this machine; `None` for a SQLite
    /// file (its cost is in the server process), or for a server elsewhere (said on stderr).
    pub fn probe(location: &DbLocation) -> Option<ServerCpu> {
        let DbLocation::Postgres(url) = location else {
            return None;
        };
        // The backend's parent is the postmaster; read it while the backend still runs.
        let postmaster = with_client(url, async |client| {
            let row = client.query_one("SELECT pg_backend_pid()", &[]).await?;
            crate::procs::parent_pid(u32::try_from(row.get::<_, i32>(0))?)
        });
        match postmaster {
            Ok(postmaster) => Some(ServerCpu { postmaster }),
            Err(e) => {
                eprintln!(
                    "PostgreSQL's CPU is not measured (is the server on this machine?): {e:#}"
                );
                None
            }
        }
    }

    /// CPU seconds the server has spent so far.
    pub fn seconds(&self) -> anyhow::Result<f64> {
        crate::procs::family_cpu_seconds(self.postmaster)
    }
}

/// A client on `url` whose connection runs as a task of the current runtime (as
/// `deadpool-postgres` runs it), for the measures of the driver itself.
pub async fn runtime_client(url: &str) -> anyhow::Result<tokio_postgres::Client> {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .context("cannot connect to the PostgreSQL server")?;
    tokio::spawn(connection);
    Ok(client)
}

/// Run `f` with a client on `url`, on a runtime of its own (callers are synchronous).
pub fn with_client<T: Send + 'static>(
    url: &str,
    f: impl AsyncFnOnce(&tokio_postgres::Client) -> anyhow::Result<T> + Send + 'static,
) -> anyhow::Result<T> {
    let url = url.to_owned();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    std::thread::spawn(move || {
        runtime.block_on(async move {
            let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
                .await
                .context("cannot connect to the PostgreSQL server (the bench connects without TLS: give a loopback or trusted server)")?;
            let driver = tokio::spawn(connection);
            let out = f(&client).await;
            drop(client);
            let _ = driver.await;
            out
        })
    })
    .join()
    .map_err(|_| anyhow::anyhow!("the PostgreSQL admin thread panicked"))?
}

/// Run `sql` (no parameters) on the server `url` names.
fn admin(url: &str, sql: &str) -> anyhow::Result<()> {
    let statement = sql.to_owned();
    with_client(url, async move |client| {
        client
            .batch_execute(&statement)
            .await
            .with_context(|| format!("PostgreSQL refused `{statement}`"))
    })
}

fn database_exists(url: &str, name: &str) -> anyhow::Result<bool> {
    let name = name.to_owned();
    with_client(url, async move |client| {
        let row = client
            .query_opt("SELECT 1 FROM pg_database WHERE datname = $1", &[&name])
            .await?;
        Ok(row.is_some())
    })
}

/// `name` as a lower-case identifier (letters, digits, `_`).
fn identifier(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .collect()
}

/// `url` naming database `name` instead of its own (query parameters kept).
fn with_database(url: &str, name: &str) -> String {
    let (base, query) = url.split_once('?').unwrap_or((url, ""));
    let after_scheme = base.find("://").map_or(0, |at| at + 3);
    let authority_end = base[after_scheme..]
        .find('/')
        .map_or(base.len(), |slash| after_scheme + slash);
    let mut out = format!("{}/{name}", &base[..authority_end]);
    if !query.is_empty() {
        out.push('?');
        out.push_str(query);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_get_another_database_and_names_become_identifiers() {
        assert_eq!(
            with_database("postgres://u:p@h:5/postgres?sslmode=disable", "x"),
            "postgres://u:p@h:5/x?sslmode=disable"
        );
        assert_eq!(with_database("postgres://h", "x"), "postgres://h/x");
        assert_eq!(with_database("postgresql://h/", "x"), "postgresql://h/x");
        assert_eq!(identifier("memory-100000-builtin"), "memory_100000_builtin");
    }

    #[test]
    fn flags_choose_the_backend() {
        assert_eq!(Backend::from_flags(None, None).unwrap().name(), "sqlite");
        let pg = Backend::from_flags(None, Some("postgres://u@127.0.0.1:1/postgres")).unwrap();
        assert_eq!(pg.name(), "postgres");
        assert!(Backend::from_flags(None, Some("board.db")).is_err());
        assert!(Backend::from_flags(Some(Path::new("a.db")), Some("postgres://h/db")).is_err());
    }
}
