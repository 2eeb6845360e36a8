//! Throwaway stores for tests: a temp SQLite file, or a fresh database on the PostgreSQL
//! server `CLAWBOO_TEST_POSTGRES_URL` names (created here, dropped when the test ends), so
//! one test body runs on either backend. Built for the store's own unit tests, and public
//! behind the `testing` feature for integration tests elsewhere. The server URL must not
//! ask for TLS (the database is created over a plain connection).

use std::sync::{Arc, Mutex};

use crate::{DbLocation, QueuedWrite, Store, StoreConfig, StoreError};

/// The server the PostgreSQL tests run on (test.sh starts a throwaway cluster).
pub const POSTGRES_URL_ENV: &str = "CLAWBOO_TEST_POSTGRES_URL";

/// Run `sql` on the server `url` names, from any thread (even inside a tokio runtime).
fn admin(url: &str, sql: &str) -> Result<(), String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let url = url.to_owned();
    let sql = sql.to_owned();
    let work = std::thread::spawn(move || {
        runtime.block_on(async move {
            let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
                .await
                .map_err(|e| e.to_string())?;
            let driver = tokio::spawn(connection);
            let done = client.batch_execute(&sql).await.map_err(|e| e.to_string());
            drop(client);
            let _ = driver.await;
            done
        })
    });
    work.join()
        .map_err(|_| "the admin thread panicked".to_owned())?
}

/// `url` with its database replaced by `name`.
fn with_database(url: &str, name: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((base, query)) => (base, Some(query)),
        None => (url, None),
    };
    let authority_end = base
        .find("://")
        .map(|at| at + 3)
        .and_then(|start| base[start..].find('/').map(|slash| start + slash))
        .unwrap_or(base.len());
    let mut out = format!("{}/{name}", &base[..authority_end]);
    if let Some(query) = query {
        out.push('?');
        out.push_str(query);
    }
    out
}

/// The server [`POSTGRES_URL_ENV`] names, if any.
fn server_url() -> Option<String> {
    std::env::var(POSTGRES_URL_ENV)
        .ok()
        .filter(|u| !u.is_empty())
}

/// A database for one test, removed when dropped.
pub struct TestStore {
    location: DbLocation,
    _dir: Option<tempfile::TempDir>,
    server: Option<String>,
    databases: Mutex<Vec<String>>,
}

impl TestStore {
    /// A fresh database on PostgreSQL when [`POSTGRES_URL_ENV`] is set, else a SQLite file.
    pub fn new() -> TestStore {
        match server_url() {
            Some(_) => TestStore::postgres().unwrap_or_else(TestStore::sqlite),
            None => TestStore::sqlite(),
        }
    }

    /// A fresh SQLite file.
    pub fn sqlite() -> TestStore {
        let dir = tempfile::tempdir().expect("a temp folder");
        TestStore {
            location: DbLocation::File(dir.path().join("test.db")),
            _dir: Some(dir),
            server: None,
            databases: Mutex::new(Vec::new()),
        }
    }

    /// A fresh PostgreSQL database, or `None` (said on stderr) without a server to use.
    pub fn postgres() -> Option<TestStore> {
        let Some(server) = server_url() else {
            eprintln!("skipped on PostgreSQL: {POSTGRES_URL_ENV} is not set");
            return None;
        };
        let test = TestStore {
            location: DbLocation::Postgres(String::new()),
            _dir: None,
            server: Some(server),
            databases: Mutex::new(Vec::new()),
        };
        let url = test.fresh_url();
        let mut test = test;
        test.location = DbLocation::Postgres(url);
        Some(test)
    }

    /// A new empty database on this test's server, dropped with the test.
    pub fn fresh_url(&self) -> String {
        let server = self.server.as_deref().expect("a PostgreSQL test");
        let name = format!("clawboo_s_{}", uuid::Uuid::now_v7().simple());
        admin(server, &format!("CREATE DATABASE {name}")).expect("creating a test database");
        self.databases
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(name.clone());
        with_database(server, &name)
    }

    /// Open `url` as a store, with the default settings.
    pub fn open_url(url: &str) -> Result<Store, StoreError> {
        Store::open_location(
            &DbLocation::Postgres(url.to_owned()),
            StoreConfig::default(),
        )
    }

    /// Where the test's database is.
    pub fn location(&self) -> &DbLocation {
        &self.location
    }

    /// The store, opened with the default settings.
    pub fn store(&self) -> Store {
        self.store_with(StoreConfig::default())
    }

    /// The store, opened with `config`.
    pub fn store_with(&self, config: StoreConfig) -> Store {
        Store::open_location(&self.location, config).expect("opening the test store")
    }

    /// The store with one pooled PostgreSQL connection per pool, so each transaction
    /// reuses the connection the one before it held (what a test of a connection's state
    /// after a transaction needs).
    pub fn store_on_one_connection(&self) -> Store {
        self.store_with(StoreConfig {
            pg_pool_size: 1,
            ..StoreConfig::default()
        })
    }

    /// Another store on the same database (as a second process would open it).
    pub fn reopen(&self) -> Store {
        self.store()
    }

    /// [`TestStore::reopen`], its error kept.
    pub fn try_reopen(&self) -> Result<Store, StoreError> {
        Store::open_location(&self.location, StoreConfig::default())
    }
}

impl Default for TestStore {
    fn default() -> TestStore {
        TestStore::new()
    }
}

impl Drop for TestStore {
    fn drop(&mut self) {
        let Some(server) = &self.server else { return };
        for name in self
            .databases
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .drain(..)
        {
            if let Err(e) = admin(
                server,
                &format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"),
            ) {
                eprintln!("could not drop the test database {name}: {e}");
            }
        }
    }
}

/// What a queued write reported ([`queue`]): its own result, or the group's failure.
pub type Outcome<T> = Arc<Mutex<Option<Result<T, String>>>>;

/// Queue `op` for the next group commit ([`Store::queue_write`]); its outcome lands in the
/// returned slot once its group settled it. For tests of what a group commit does to the
/// writes in it, here and in the crates over the store.
pub fn queue<T: Send + 'static>(
    store: &Store,
    op: impl FnOnce(&Store) -> Result<T, StoreError> + Send + 'static,
) -> Outcome<T> {
    let slot: Outcome<T> = Arc::new(Mutex::new(None));
    let settled = Arc::clone(&slot);
    let write: QueuedWrite = Box::new(move |store| {
        let result = op(store).map_err(|e| e.to_string());
        Box::new(move |group| {
            let outcome = group.map_err(|e| format!("group failed: {e}")).and(result);
            *settled.lock().unwrap_or_else(|p| p.into_inner()) = Some(outcome);
        })
    });
    store.queue_write(write);
    slot
}

/// The outcome [`queue`]'s slot holds, taken out; `None` while its group is unsettled.
pub fn taken<T>(slot: &Outcome<T>) -> Option<Result<T, String>> {
    slot.lock().unwrap_or_else(|p| p.into_inner()).take()
}

#[test]
fn a_url_gets_another_database() {
    assert_eq!(
        with_database("postgres://u:p@h:5/postgres?sslmode=disable", "x"),
        "postgres://u:p@h:5/x?sslmode=disable"
    );
    assert_eq!(with_database("postgres://h", "x"), "postgres://h/x");
}
