//! Cross-host wake-ups: one connection per process that `LISTEN`s on the `clawboo` channel
//! and hands every topic another host's commit sent ([`crate::db::Tx::notify`]) to the
//! store's dispatcher, so a waiting call wakes within the notification's round trip instead
//! of its next poll. The connection is remade after a loss; waiters keep their slow poll as
//! the fallback for what was sent meanwhile.

use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio_postgres::{AsyncMessage, Client, Connection};
use tokio_postgres_rustls::MakeRustlsConnect;

/// The channel every write's notices go to.
const CHANNEL: &str = "clawboo";

/// How long to wait before connecting again after the listening connection was lost.
const RECONNECT_AFTER: Duration = Duration::from_secs(1);

/// What the listening task needs: how to connect, and where topics go.
pub(super) struct Listener {
    pub(super) config: tokio_postgres::Config,
    pub(super) tls: Option<MakeRustlsConnect>,
    pub(super) on_notice: fn(&str),
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

    /// Issue `LISTEN` and deliver notifications until the connection ends.
    async fn listen<S, T>(
        &self,
        client: Client,
        mut connection: Connection<S, T>,
    ) -> Result<(), tokio_postgres::Error>
    where
        S: AsyncRead + AsyncWrite + Unpin,
        T: AsyncRead + AsyncWrite + Unpin,
    {
        let statement = format!("LISTEN {CHANNEL}");
        let listen = client.batch_execute(&statement);
        tokio::pin!(listen);
        let mut listening = false;
        loop {
            tokio::select! {
                done = &mut listen, if !listening => {
                    done?;
                    listening = true;
                    // Whatever was sent while this process was not listening is unknown:
                    // let the chat waiters look again (approval waiters poll anyway).
                    (self.on_notice)(crate::notices::CHAT);
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
