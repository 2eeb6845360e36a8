//! Cross-host wake-ups: one connection per process that `LISTEN`s on the `clawboo` channel
//! and hands every topic another host's commit sent ([`crate::db::Tx::notify`]) to the
//! store's dispatcher, so a waiting call wakes within the notification's round trip instead
//! of its next poll. The connection is remade after a loss; waiters keep their slow poll as
//! the fallback for what was sent meanwhile.
//!
//! The same connection announces this process's writes ([`Event::Wrote`]) to
//! every process, the sender included, at most once every [`ANNOUNCE_EVERY`]: live views
//! wake on it instead of polling. It is sent here, outside the writes, because a `NOTIFY`
//! inside a transaction takes a database-wide lock from its commit to the end of that
//! commit, which would queue every writer's commit behind the others'.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio_postgres::{AsyncMessage, Client, Connection};
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::events::Event;

/// The channel every write's notices go to.
const CHANNEL: &str = "clawboo";

/// How long to wait before connecting again after the listening connection was lost.
const RECONNECT_AFTER: Duration = Duration::from_secs(1);

/// The shortest gap between two announcements of this process's writes: a busy process
/// sends a few a second, not one a write, and a view hears of a write within this.
const ANNOUNCE_EVERY: Duration = Duration::from_millis(50);

/// Where the topics other processes sent go (the store's bus).
pub(crate) type OnNotice = Box<dyn Fn(&str) + Send + Sync>;

/// What the listening task needs: how to connect, and where topics go.
pub(super) struct Listener {
    pub(super) config: tokio_postgres::Config,
    pub(super) tls: Option<MakeRustlsConnect>,
    pub(super) on_notice: OnNotice,
    /// Rung by each of this process's committed writes.
    pub(super) bell: WriteBell,
}

/// What each committed write of this process rings, so the listener announces it to every
/// process: shared by both pools' writes and the listener.
#[derive(Clone, Default)]
pub(super) struct WriteBell {
    /// Told after each committed write.
    wrote: Arc<tokio::sync::Notify>,
    /// Whether a committed write waits for its announcement (cleared when sending).
    unannounced: Arc<AtomicBool>,
}

impl WriteBell {
    /// A write committed.
    pub(super) fn ring(&self) {
        self.unannounced.store(true, Ordering::SeqCst);
        // A stored permit, not a wake-up of current waiters: a write committed while the
        // listener is busy announcing is announced next.
        self.wrote.notify_one();
    }

    /// Whether a committed write was not announced yet, cleared by asking.
    pub(super) fn take_unannounced(&self) -> bool {
        self.unannounced.swap(false, Ordering::SeqCst)
    }
}

/// The statement that tells every process this one wrote.
pub(super) fn announcement() -> String {
    format!("NOTIFY {CHANNEL}, '{}'", Event::Wrote.topic())
}

impl Listener {
    /// Listen until the backend's runtime shuts down, reconnecting after each loss.
    pub(super) async fn run(self) {
        loop {
            let ended = match &self.tls {
                Some(tls) => match self.config.connect(tls.clone()).await {
                    Ok((client, connection)) => self.listen(client, connection).await,
                    Err(e) => Err(e),
                },
                None => match self.config.connect(tokio_postgres::NoTls).await {
                    Ok((client, connection)) => self.listen(client, connection).await,
                    Err(e) => Err(e),
                },
            };
            if let Err(e) = ended {
                tracing::debug!(error = %e, "the PostgreSQL listener lost its connection");
            }
            tokio::time::sleep(RECONNECT_AFTER).await;
        }
    }

    /// Issue `LISTEN`, then deliver notifications and announce this process's writes until
    /// the connection ends.
    async fn listen<S, T>(
        &self,
        client: Client,
        mut connection: Connection<S, T>,
    ) -> Result<(), tokio_postgres::Error>
    where
        S: AsyncRead + AsyncWrite + Unpin,
        T: AsyncRead + AsyncWrite + Unpin,
    {
        type Statement<'a> =
            Pin<Box<dyn Future<Output = Result<(), tokio_postgres::Error>> + Send + 'a>>;
        let listen = format!("LISTEN {CHANNEL}");
        let announce = announcement();
        // The statement in flight on `client`: `LISTEN` first, then one announcement at a
        // time, each after waiting out the gap since the one before.
        let mut in_flight: Option<Statement<'_>> = Some(Box::pin(client.batch_execute(&listen)));
        let mut listening = false;
        let mut next_announcement = tokio::time::Instant::now();
        loop {
            tokio::select! {
                done = async {
                    match in_flight.as_mut() {
                        Some(statement) => statement.await,
                        None => std::future::pending().await,
                    }
                } => {
                    in_flight = None;
                    done?;
                    if !listening {
                        listening = true;
                        // Whatever was sent while this process was not listening is
                        // unknown: chat and approval waiters and live views look again.
                        for missed in [Event::PostedSomewhere, Event::Wrote, Event::ApprovalsSettled] {
                            (self.on_notice)(&missed.topic());
                        }
                    }
                }
                () = self.bell.wrote.notified(), if listening && in_flight.is_none() => {
                    let at = next_announcement.max(tokio::time::Instant::now());
                    next_announcement = at + ANNOUNCE_EVERY;
                    let (client, announce, unannounced) = (&client, &announce, &self.bell.unannounced);
                    in_flight = Some(Box::pin(async move {
                        tokio::time::sleep_until(at).await;
                        // Cleared before sending: a write committed from here on is
                        // covered by this announcement or, its permit stored, the next.
                        unannounced.store(false, Ordering::SeqCst);
                        client.batch_execute(announce).await
                    }));
                }
                message = std::future::poll_fn(|cx| connection.poll_message(cx)) => {
                    match message {
                        Some(Ok(AsyncMessage::Notification(notice))) => {
                            (self.on_notice)(notice.payload());
                        }
                        Some(Ok(_)) => {}
                        Some(Err(e)) => return Err(e),
                        None => return Ok(()),
                    }
                }
            }
        }
    }
}
