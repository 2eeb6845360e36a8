//! The connections the store's statements run on, each driven by the thread that holds it.
//!
//! A `tokio-postgres` client talks to its connection over channels. Run as a task on a
//! runtime (as `deadpool-postgres` runs it), every round trip hands the request from the
//! caller's thread to the runtime's and the answer back: two thread wake-ups on top of the
//! socket's own, and most of a short call's CPU. Here whoever holds a connection polls it
//! too, on a non-blocking socket it waits for with `poll(2)`, so a round trip is a write, a
//! wait and a read on one thread. (The `postgres` crate works this way with a runtime per
//! connection, which cannot be entered from the stdio server's own runtime thread, where
//! store calls run inline; hence this small pool instead of that crate or deadpool.)
//!
//! A connection nobody holds is not polled: what the server sent meanwhile (the answer to
//! an unawaited `COMMIT`, or the news that it is shutting down) is read when the connection
//! is next taken out, and one that has ended is then replaced.

use std::cell::RefCell;
use std::collections::HashMap;
use std::future::Future;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream, ToSocketAddrs};
use std::ops::Deref;
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::pin::{Pin, pin};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

use rand::seq::SliceRandom;
use rustix::event::{PollFd, PollFlags, Timespec};
use socket2::{SockRef, TcpKeepalive};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_postgres::config::{Host, LoadBalanceHosts, TargetSessionAttrs};
use tokio_postgres::tls::{MakeTlsConnect, NoTls};
use tokio_postgres::{AsyncMessage, Client, Config, Connection, Statement};
use tokio_postgres_rustls::MakeRustlsConnect;

use super::error::unavailable;
use super::lock;
use crate::error::{Result, StoreError};

/// The store's connections to one database, at most `max` open at once.
pub(super) struct Pool {
    config: Config,
    tls: Option<MakeRustlsConnect>,
    max: usize,
    /// How long a caller waits for a connection to come free or be made.
    wait: Duration,
    /// Statements every new connection runs before it is lent (session settings); empty
    /// for none.
    setup: String,
    slots: Mutex<Slots>,
    freed: Condvar,
}

struct Slots {
    idle: Vec<Conn>,
    /// Connections made and not yet dropped, idle or held.
    open: usize,
    /// Callers waiting for one to come free (a `Condvar` wake-up is a system call even
    /// with nobody waiting, so a connection given back wakes only when someone is).
    waiting: usize,
}

impl Pool {
    pub(super) fn new(
        config: Config,
        tls: Option<MakeRustlsConnect>,
        max: usize,
        wait: Duration,
        setup: String,
    ) -> Arc<Pool> {
        Arc::new(Pool {
            config,
            tls,
            max: max.max(1),
            wait,
            setup,
            slots: Mutex::new(Slots {
                idle: Vec::new(),
                open: 0,
                waiting: 0,
            }),
            freed: Condvar::new(),
        })
    }

    /// An idle connection that is still open, else a new one while fewer than `max` are
    /// open, else the first to come free; `Unavailable` once the pool's wait has passed.
    pub(super) fn get(self: &Arc<Self>) -> Result<Pooled> {
        self.get_by(Instant::now() + self.wait)
    }

    pub(super) fn get_by(self: &Arc<Self>, deadline: Instant) -> Result<Pooled> {
        let mut slots = lock(&self.slots);
        loop {
            if let Some(conn) = slots.idle.pop() {
                drop(slots);
                if conn.still_open() {
                    return Ok(self.lend(conn));
                }
                self.give_back(Some(conn));
                slots = lock(&self.slots);
                continue;
            }
            if slots.open < self.max {
                slots.open += 1;
                drop(slots);
                return match self.connect(deadline) {
                    Ok(conn) => Ok(self.lend(conn)),
                    Err(e) => {
                        self.give_back(None);
                        Err(e)
                    }
                };
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(unavailable(
                    "no PostgreSQL connection came free in time: every pooled connection is \
                     busy (raise CLAWBOO_PG_POOL, or the server's max_connections, if this \
                     persists)",
                ));
            }
            slots.waiting += 1;
            slots = self
                .freed
                .wait_timeout(slots, deadline - now)
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .0;
            slots.waiting -= 1;
        }
    }

    /// Return a connection that is still open to the idle ones, or count one that ended
    /// (`None`: it was never made) as closed; wake a waiter either way.
    fn give_back(&self, conn: Option<Conn>) {
        let mut slots = lock(&self.slots);
        match conn {
            Some(conn) if conn.connection.borrow().is_some() => slots.idle.push(conn),
            _ => slots.open -= 1,
        }
        if slots.waiting > 0 {
            self.freed.notify_one();
        }
    }

    /// How many connections are open, lent and waited for now.
    pub(super) fn stats(&self) -> crate::engine::PoolStats {
        let slots = lock(&self.slots);
        crate::engine::PoolStats {
            max: self.max,
            open: slots.open,
            in_use: slots.open - slots.idle.len(),
            waiting: slots.waiting,
        }
    }

    /// Drop every idle connection (a store closing); held ones close when given back.
    pub(super) fn close(&self) {
        let mut slots = lock(&self.slots);
        let closed = std::mem::take(&mut slots.idle);
        slots.open -= closed.len();
    }

    fn lend(self: &Arc<Self>, conn: Conn) -> Pooled {
        Pooled {
            pool: Arc::clone(self),
            conn: Some(conn),
        }
    }

    /// Open a connection to the first of the URL's hosts that answers, as libpq tries them:
    /// in the URL's order, or in a random one for `load_balance_hosts=random` (each host's
    /// resolved addresses too), so connections spread over the hosts.
    fn connect(&self, deadline: Instant) -> Result<Conn> {
        let hosts = self.config.get_hosts();
        let addrs = self.config.get_hostaddrs();
        let ports = self.config.get_ports();
        let balance = self.config.get_load_balance_hosts() == LoadBalanceHosts::Random;
        let mut order: Vec<usize> = (0..hosts.len().max(addrs.len())).collect();
        if balance {
            order.shuffle(&mut rand::rng());
        }
        let mut last_error = None;
        for i in order {
            let port = ports.get(i).or(ports.first()).copied().unwrap_or(5432);
            let hostname = match hosts.get(i) {
                Some(Host::Tcp(name)) => Some(name.as_str()),
                _ => None,
            };
            let socket = match (addrs.get(i), hosts.get(i)) {
                (Some(ip), _) => connect_tcp(&[SocketAddr::new(*ip, port)], deadline),
                (None, Some(Host::Tcp(name))) => (name.as_str(), port)
                    .to_socket_addrs()
                    .map_err(|e| unreachable_at(&format!("{name}:{port}"), &e))
                    .and_then(|found| {
                        let mut found: Vec<SocketAddr> = found.collect();
                        if balance {
                            found.shuffle(&mut rand::rng());
                        }
                        connect_tcp(&found, deadline)
                    }),
                (None, Some(Host::Unix(dir))) => connect_unix(dir, port),
                (None, None) => continue,
            };
            let attempt = socket
                .and_then(|io| self.set_up(&io).map(|()| io))
                .and_then(|io| self.handshake(io, hostname, deadline))
                .and_then(|conn| self.wanted(conn, deadline))
                .and_then(|conn| self.set_up_session(conn, deadline));
            match attempt {
                Ok(conn) => return Ok(conn),
                Err(e) => last_error = Some(e),
            }
        }
        Err(last_error.unwrap_or_else(|| {
            StoreError::Invalid(
                "the PostgreSQL URL names no host: write it as \
                 postgres://user@host:port/database"
                    .into(),
            )
        }))
    }

    /// The URL's socket settings: no Nagle delay, keepalives and a user timeout (so a
    /// vanished server is noticed within seconds), non-blocking for the driver below.
    fn set_up(&self, io: &Io) -> Result<()> {
        let fail = |e: io::Error| unavailable(format!("cannot set up the PostgreSQL socket: {e}"));
        if let Io::Tcp(stream) = io {
            stream.set_nodelay(true).map_err(fail)?;
            let socket = SockRef::from(stream);
            if let Some(timeout) = self.config.get_tcp_user_timeout() {
                socket.set_tcp_user_timeout(Some(*timeout)).map_err(fail)?;
            }
            if self.config.get_keepalives() {
                let mut keepalive =
                    TcpKeepalive::new().with_time(self.config.get_keepalives_idle());
                if let Some(interval) = self.config.get_keepalives_interval() {
                    keepalive = keepalive.with_interval(interval);
                }
                if let Some(retries) = self.config.get_keepalives_retries() {
                    keepalive = keepalive.with_retries(retries);
                }
                socket.set_tcp_keepalive(&keepalive).map_err(fail)?;
            }
        }
        io.set_nonblocking().map_err(fail)
    }

    /// `conn` if its server is what the URL's `target_session_attrs` asks for (a primary
    /// for `read-write`), as libpq picks among the URL's hosts; else an error that moves
    /// on to the next host.
    fn wanted(&self, conn: Conn, deadline: Instant) -> Result<Conn> {
        let wanted_read_only = match self.config.get_target_session_attrs() {
            TargetSessionAttrs::ReadWrite => false,
            TargetSessionAttrs::ReadOnly => true,
            _ => return Ok(conn),
        };
        let show = conn.client().query_one("SHOW transaction_read_only", &[]);
        let read_only: String = conn.run_until(show, Some(deadline))?.get(0);
        if (read_only == "on") == wanted_read_only {
            return Ok(conn);
        }
        Err(unavailable(if wanted_read_only {
            "no host of the PostgreSQL URL is read-only, as its target_session_attrs asks"
        } else {
            "no host of the PostgreSQL URL accepts writes (target_session_attrs=read-write): \
             point it at the primary"
        }))
    }

    /// `conn` once it has run the pool's `setup` statements. Sent as statements,
    /// not as start-up `options`, which connection poolers such as PgBouncer refuse for
    /// settings they do not track.
    fn set_up_session(&self, conn: Conn, deadline: Instant) -> Result<Conn> {
        if !self.setup.is_empty() {
            conn.run_until(conn.client().batch_execute(&self.setup), Some(deadline))?;
        }
        Ok(conn)
    }

    /// Start up (TLS if the URL asks, authentication, parameters) on a connected socket.
    fn handshake(&self, io: Io, hostname: Option<&str>, deadline: Instant) -> Result<Conn> {
        let fd = io
            .clone_fd()
            .map_err(|e| unavailable(format!("cannot set up the PostgreSQL socket: {e}")))?;
        let write_blocked = Arc::new(AtomicBool::new(false));
        let socket = Socket {
            io,
            write_blocked: Arc::clone(&write_blocked),
        };
        let driver = Driver::new(fd, write_blocked);
        let (client, connection): (Client, Box<dyn Drive>) = match &self.tls {
            None => {
                let (client, connection) =
                    driver.block_on(self.config.connect_raw(socket, NoTls), Some(deadline))?;
                (client, Box::new(connection))
            }
            Some(make) => {
                let Ok(tls) = MakeTlsConnect::<Socket>::make_tls_connect(
                    &mut make.clone(),
                    hostname.unwrap_or(""),
                );
                let (client, connection) =
                    driver.block_on(self.config.connect_raw(socket, tls), Some(deadline))?;
                (client, Box::new(connection))
            }
        };
        Ok(Conn {
            client,
            connection: RefCell::new(Some(connection)),
            driver,
            statements: RefCell::default(),
        })
    }
}

fn unreachable_at(address: &str, e: &io::Error) -> StoreError {
    unavailable(format!(
        "PostgreSQL cannot be reached at {address} ({e}); retry once the server is back"
    ))
}

fn connect_tcp(addresses: &[SocketAddr], deadline: Instant) -> Result<Io> {
    let mut last_error = None;
    for address in addresses {
        let left = deadline.saturating_duration_since(Instant::now());
        match TcpStream::connect_timeout(address, left.max(Duration::from_millis(1))) {
            Ok(stream) => return Ok(Io::Tcp(stream)),
            Err(e) => last_error = Some(unreachable_at(&address.to_string(), &e)),
        }
    }
    Err(last_error.unwrap_or_else(|| unavailable("the PostgreSQL host name resolves to nothing")))
}

fn connect_unix(dir: &Path, port: u16) -> Result<Io> {
    let path = dir.join(format!(".s.PGSQL.{port}"));
    UnixStream::connect(&path)
        .map(Io::Unix)
        .map_err(|e| unreachable_at(&path.display().to_string(), &e))
}

/// A connection taken from the pool; given back when dropped, unless it has ended.
pub(super) struct Pooled {
    pool: Arc<Pool>,
    conn: Option<Conn>,
}

impl Deref for Pooled {
    type Target = Conn;

    fn deref(&self) -> &Conn {
        self.conn
            .as_ref()
            .expect("a lent connection is held until dropped")
    }
}

impl Drop for Pooled {
    fn drop(&mut self) {
        self.pool.give_back(self.conn.take());
    }
}

/// One connection: the client that makes requests, and the connection that carries them,
/// both driven by the thread holding it.
pub(super) struct Conn {
    client: Client,
    /// `None` once it has ended: its requests fail, and the pool drops it.
    connection: RefCell<Option<Box<dyn Drive>>>,
    driver: Driver,
    /// Prepared statements, by their text.
    statements: RefCell<HashMap<Arc<str>, Statement>>,
}

impl Conn {
    pub(super) fn client(&self) -> &Client {
        &self.client
    }

    /// Run `request` (a future of [`Conn::client`]) to its answer, driving the connection
    /// meanwhile.
    pub(super) fn run<T>(
        &self,
        request: impl Future<Output = std::result::Result<T, tokio_postgres::Error>>,
    ) -> Result<T> {
        self.run_until(request, None)
    }

    /// [`Conn::run`], giving up with `Unavailable` at `deadline` (the connection is then
    /// dropped: its answer may still come).
    pub(super) fn run_until<T>(
        &self,
        request: impl Future<Output = std::result::Result<T, tokio_postgres::Error>>,
        deadline: Option<Instant>,
    ) -> Result<T> {
        crate::counters::postgres_round_trip();
        let mut request = pin!(request);
        let waker = self.driver.waker.clone();
        let mut cx = Context::from_waker(&waker);
        loop {
            if let Poll::Ready(answer) = request.as_mut().poll(&mut cx) {
                return Ok(answer?);
            }
            self.driver.woken.0.store(false, Ordering::Relaxed);
            if !self.drive(&mut cx) {
                // Its end dropped the request's answer channel: the request reports it.
                return match request.as_mut().poll(&mut cx) {
                    Poll::Ready(answer) => Ok(answer?),
                    Poll::Pending => Err(unavailable(
                        "the PostgreSQL connection closed; retry once the server is back",
                    )),
                };
            }
            if !self.driver.woken.0.load(Ordering::Relaxed)
                && let Err(e) = self.driver.wait(deadline)
            {
                self.end();
                return Err(e);
            }
        }
    }

    /// Send `request` and leave its answer to be read and dropped when the connection is
    /// next driven. Only for what cannot fail short of losing the connection, which the
    /// next request then reports (a read-only transaction's `COMMIT`).
    pub(super) fn send_unanswered<T>(
        &self,
        request: impl Future<Output = std::result::Result<T, tokio_postgres::Error>>,
    ) {
        crate::counters::postgres_round_trip();
        let waker = self.driver.waker.clone();
        let mut cx = Context::from_waker(&waker);
        // The client queues a request on the first poll of its future.
        let _ = pin!(request).as_mut().poll(&mut cx);
        // Written out now, not when next driven: it must not wait in an idle connection.
        loop {
            self.driver.write_blocked.store(false, Ordering::Relaxed);
            if !self.drive(&mut cx) || !self.driver.write_blocked.load(Ordering::Relaxed) {
                return;
            }
            if self.driver.wait(None).is_err() {
                self.end();
                return;
            }
        }
    }

    /// The prepared statement for `text`, from this connection's cache.
    pub(super) fn prepare(&self, text: &Arc<str>) -> Result<Statement> {
        if let Some(statement) = self.statements.borrow().get(text) {
            return Ok(statement.clone());
        }
        let statement = self.run(self.client.prepare(text))?;
        self.statements
            .borrow_mut()
            .insert(Arc::clone(text), statement.clone());
        Ok(statement)
    }

    /// Read what the server sent while the connection sat idle; false if it has ended.
    fn still_open(&self) -> bool {
        let waker = self.driver.waker.clone();
        self.drive(&mut Context::from_waker(&waker))
    }

    /// Poll the connection until it has nothing to do for now: write what the client
    /// queued, read what arrived and pass answers on. False once it has ended.
    fn drive(&self, cx: &mut Context<'_>) -> bool {
        let mut slot = self.connection.borrow_mut();
        let Some(connection) = slot.as_mut() else {
            return false;
        };
        loop {
            match connection.poll_message(cx) {
                Poll::Pending => return true,
                Poll::Ready(Some(Ok(AsyncMessage::Notice(notice)))) => {
                    tracing::debug!(
                        severity = notice.severity(),
                        "PostgreSQL: {}",
                        notice.message()
                    );
                }
                // Nothing LISTENs on these connections; the listener has its own.
                Poll::Ready(Some(Ok(_))) => {}
                Poll::Ready(Some(Err(e))) => {
                    tracing::debug!(error = %e, "a PostgreSQL connection ended");
                    *slot = None;
                    return false;
                }
                Poll::Ready(None) => {
                    *slot = None;
                    return false;
                }
            }
        }
    }

    /// Give the connection up: the pool drops it when it is given back.
    fn end(&self) {
        *self.connection.borrow_mut() = None;
    }
}

/// A connection of either kind (plain or TLS), for what the driver asks of it.
trait Drive: Send {
    fn poll_message(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Option<std::result::Result<AsyncMessage, tokio_postgres::Error>>>;
}

impl<T> Drive for Connection<Socket, T>
where
    T: AsyncRead + AsyncWrite + Unpin + Send,
{
    fn poll_message(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Option<std::result::Result<AsyncMessage, tokio_postgres::Error>>> {
        Connection::poll_message(self, cx)
    }
}

/// What the thread driving a connection waits on: its socket, and whether polling woke
/// anything that should be polled again before waiting.
struct Driver {
    /// A duplicate of the connection's socket, to wait on.
    fd: OwnedFd,
    /// Set by the socket when a write could not go through.
    write_blocked: Arc<AtomicBool>,
    woken: Arc<Woken>,
    waker: Waker,
}

#[derive(Default)]
struct Woken(AtomicBool);

impl Wake for Woken {
    fn wake(self: Arc<Self>) {
        self.0.store(true, Ordering::Relaxed);
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.store(true, Ordering::Relaxed);
    }
}

impl Driver {
    fn new(fd: OwnedFd, write_blocked: Arc<AtomicBool>) -> Driver {
        let woken = Arc::new(Woken::default());
        Driver {
            fd,
            write_blocked,
            waker: Waker::from(Arc::clone(&woken)),
            woken,
        }
    }

    /// Run a future that does its own I/O on the socket (the start-up) to its end.
    fn block_on<T>(
        &self,
        future: impl Future<Output = std::result::Result<T, tokio_postgres::Error>>,
        deadline: Option<Instant>,
    ) -> Result<T> {
        let mut future = pin!(future);
        let mut cx = Context::from_waker(&self.waker);
        loop {
            self.woken.0.store(false, Ordering::Relaxed);
            if let Poll::Ready(answer) = future.as_mut().poll(&mut cx) {
                return Ok(answer?);
            }
            if !self.woken.0.load(Ordering::Relaxed) {
                self.wait(deadline)?;
            }
        }
    }

    /// Wait until the socket can be read (or written, if a write was blocked), or until
    /// `deadline`.
    fn wait(&self, deadline: Option<Instant>) -> Result<()> {
        let mut flags = PollFlags::IN;
        if self.write_blocked.swap(false, Ordering::Relaxed) {
            flags |= PollFlags::OUT;
        }
        let timeout = match deadline {
            Some(deadline) => {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Err(timed_out());
                }
                Some(Timespec::try_from(left).unwrap_or(Timespec {
                    tv_sec: i64::MAX,
                    tv_nsec: 0,
                }))
            }
            None => None,
        };
        let mut fds = [PollFd::new(&self.fd, flags)];
        match rustix::event::poll(&mut fds, timeout.as_ref()) {
            Ok(0) => Err(timed_out()),
            Ok(_) | Err(rustix::io::Errno::INTR) => Ok(()),
            Err(e) => Err(unavailable(format!(
                "cannot wait on the PostgreSQL socket: {e}"
            ))),
        }
    }
}

fn timed_out() -> StoreError {
    unavailable("PostgreSQL did not answer in time; retry once the server is reachable")
}

/// A non-blocking socket to the server. "Not yet" is `Pending` without a waker kept: only
/// [`Driver`] polls it, and it waits on the socket itself after every `Pending`.
struct Socket {
    io: Io,
    write_blocked: Arc<AtomicBool>,
}

enum Io {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl Io {
    fn set_nonblocking(&self) -> io::Result<()> {
        match self {
            Io::Tcp(stream) => stream.set_nonblocking(true),
            Io::Unix(stream) => stream.set_nonblocking(true),
        }
    }

    fn clone_fd(&self) -> io::Result<OwnedFd> {
        Ok(match self {
            Io::Tcp(stream) => stream.try_clone()?.into(),
            Io::Unix(stream) => stream.try_clone()?.into(),
        })
    }

    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Io::Tcp(stream) => stream.read(buf),
            Io::Unix(stream) => stream.read(buf),
        }
    }

    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Io::Tcp(stream) => stream.write(buf),
            Io::Unix(stream) => stream.write(buf),
        }
    }

    fn shutdown(&self) -> io::Result<()> {
        match self {
            Io::Tcp(stream) => stream.shutdown(Shutdown::Write),
            Io::Unix(stream) => stream.shutdown(Shutdown::Write),
        }
    }
}

/// Retry an interrupted call; "would block" becomes `Pending`.
fn nonblocking<T>(mut call: impl FnMut() -> io::Result<T>) -> Poll<io::Result<T>> {
    loop {
        match call() {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Poll::Pending,
            done => return Poll::Ready(done),
        }
    }
}

impl AsyncRead for Socket {
    fn poll_read(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let read = nonblocking(|| self.io.read(buf.initialize_unfilled()));
        read.map_ok(|n| buf.advance(n))
    }
}

impl AsyncWrite for Socket {
    fn poll_write(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let written = nonblocking(|| self.io.write(buf));
        if written.is_pending() {
            self.write_blocked.store(true, Ordering::Relaxed);
        }
        written
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(self.io.shutdown())
    }
}
